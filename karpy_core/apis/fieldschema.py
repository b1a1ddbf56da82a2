"""Unknown fields in built-in Kubernetes objects, found as kube-apiserver finds them.

karpy models only the fields of the core kinds it reads (:class:`~karpy_core.apis.base.LenientModel`
keeps the others as read), so a misspelt field (``imagePullPolicyy``, ``matchLabelz``) would pass
unseen. kube-apiserver refuses it: ``kubectl apply`` asks for ``fieldValidation=Strict`` by default
(``--validate=strict``) and the answer is HTTP 400::

    Deployment in version "v1" cannot be handled as a Deployment: strict decoding error:
    unknown field "spec.template.spec.containers[0].imagePullPolicyy"

:func:`unknown_fields` walks an object against kube-apiserver v1.36.3's own OpenAPI v3 schemas of
that kind (``karpy_core/data/core-openapi.json.gz``, dumped and pruned by ``hack/core_openapi.py``)
and returns the path of every field the schema does not declare, in the API server's notation.
The loader calls it once per built-in object (:meth:`karpy_core.apis.loader._Builder._add_object`);
kinds without a schema in the file (CRDs, karpy's own kinds, which pydantic checks strictly) are
not walked.

Walk rules (what Go's strict JSON decoder does with the Go types the schemas describe):

* an object schema with ``properties``: every key must be one of them (``null`` values too);
* ``additionalProperties`` (``labels``, ``nodeSelector``, ``resources.requests``...): any key, each
  value walked against that schema;
* an object schema with neither (``metav1.FieldsV1`` in ``managedFields``, ``RawExtension``) or with
  ``x-kubernetes-preserve-unknown-fields``: anything below is accepted;
* ``items``: each list element walked; a value of the wrong type is left to the model (the API
  server answers with a decoding error then, before looking at field names).

The same walk reads explicit nulls (``labels:`` with no value, common in Helm output) as Go's JSON
decoder does, before the models see the object (:func:`walk_fields`): a null **struct field** is
unset (the key is dropped: ``resources: null``, ``tolerations: null``, ``metadata: null``), a null
**map value** or **list item** is the zero of its type (``requests: {cpu: null}`` is stored as
``cpu: "0"``, ``labels: {a: null}`` as ``a: ""``, ``args: [null]`` as ``[""]``, ``tolerations:
[null]`` as ``[{}]``), as kube-apiserver v1.36.3 stores them (``tests/integration/test_trial3_apiserver.py``).
An undeclared field is reported whatever its value, null too. A custom resource of karpy's CRDs
(NodePool, NodeClaim, NodeClasses...) has no schema here; its nulls are read as the API server
reads them too (``walk_fields(..., custom_resource=True)``): null mapping values dropped,
``metadata`` as in a built-in kind.
"""

from __future__ import annotations

import difflib
import functools
import gzip
import json
import re
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from karpy_core.utils.kubeyaml import WrittenFloat

__all__ = ["SCHEMA_FILE", "SchemaWalk", "did_you_mean", "has_schema", "unknown_fields", "unknown_field_message", "walk_fields"]

SCHEMA_FILE = "core-openapi.json.gz"
"""The pruned OpenAPI v3 schemas in ``karpy_core/data`` (see ``hack/core_openapi.py``)."""


@functools.cache
def _schemas() -> dict[str, dict[str, Any]]:
    """``"<apiVersion> <kind>"`` -> the kind's schema, read once, every ``$ref`` replaced by the
    schema it names (shared dicts), so the walk follows plain references."""
    raw = json.loads(gzip.decompress(resources.files("karpy_core.data").joinpath(SCHEMA_FILE).read_bytes()))
    schemas: dict[str, dict[str, Any]] = raw["schemas"]

    def link(schema: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in schema:
            return schemas[schema["$ref"]]
        for key in ("items", "additionalProperties"):
            if isinstance(schema.get(key), dict):
                schema[key] = link(schema[key])
        properties = schema.get("properties")
        if properties:
            for name, sub in properties.items():
                properties[name] = link(sub)
        return schema

    for schema in list(schemas.values()):
        link(schema)
    for name, zero in ((_QUANTITY, "0"), (_INT_OR_STRING, 0)):  # both are untyped in the pruned file
        if name in schemas:
            schemas[name][_ZERO_KEY] = zero
    return {kind: schemas[name] for kind, name in raw["kinds"].items()}


def has_schema(api_version: str, kind: str) -> bool:
    """Whether :func:`unknown_fields` knows ``apiVersion``/``kind`` (``"apps/v1"``, ``"Deployment"``)."""
    return f"{api_version} {kind}" in _schemas()


_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_ZERO_KEY = "x-karpy-zero"
"""Where :func:`_schemas` puts the value a ``null`` of that schema decodes to (see :func:`_zero`)."""
_ZERO_OF_TYPE: dict[str, Any] = {"string": "", "integer": 0, "number": 0, "boolean": False}


def _zero(schema: dict[str, Any]) -> Any:
    """The value Go's JSON decoder leaves for a ``null`` map value or list item of ``schema``'s Go
    type, as kube-apiserver v1.36.3 then stores it (checked by creating objects and reading them
    back): a quantity ``"0"`` (``Quantity.UnmarshalJSON`` sets zero for null), an int-or-string
    ``0``, a string ``""``, a number ``0``, a boolean ``false``, a struct or map ``{}``, a list
    ``[]``; None for a free-form value (kept as null)."""
    if _ZERO_KEY in schema:
        return schema[_ZERO_KEY]
    kind = schema.get("type")
    if kind == "object":
        return {}
    if kind == "array":
        return []
    return _ZERO_OF_TYPE.get(kind) if isinstance(kind, str) else None


@dataclass(slots=True)
class _Found:
    """What one walk records: ``unknown`` as :attr:`SchemaWalk.unknown`, ``mistyped`` as
    :attr:`SchemaWalk.mistyped`."""

    unknown: list[tuple[str, list[str]]] = field(default_factory=list)
    mistyped: list[tuple[str, Any, str]] = field(default_factory=list)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _child(path: str, key: Any) -> str:
    """The path of a mistyped value ``key`` under ``path`` as
    :func:`~karpy_core.utils.kubeyaml.format_yaml_path` writes it (``spec.steps[2]``,
    ``metadata.labels["kubernetes.io/arch"]``), so a problem found here and the same one found by
    the object's model read alike and are said once (trial 18:
    ``metadata.labels.node.kubernetes.io/instance-type`` and
    ``metadata.labels["node.kubernetes.io/instance-type"]``). Unknown fields keep kube-apiserver's
    strict decoder's form (``spec.foo.bar``, ``[key]`` for a map element)."""
    if type(key) is int:
        return f"{path}[{key}]"
    key = str(key)
    if _IDENTIFIER.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f'{path}["{key}"]'


def _element(sub: Any, schema: dict[str, Any], path: str, key: Any, out: _Found) -> Any:
    """A map value or list item ``key`` of the container at ``path``, read against its ``schema``:
    a null is the type's zero (:func:`_zero`); a value of the wrong Go type (:func:`_wrong_type`: a
    boolean, number or mapping where the schema says string) is recorded in ``out.mistyped`` (Go's
    decoder refuses it: ``json: cannot unmarshal bool into Go struct field ConfigMap.data of type
    string``); any other mapping or list is walked (:func:`_walk`), and any other value returned as
    it is."""
    if sub is None:
        return _zero(schema)
    where = _child(path, key)
    if _wrong_type(sub, schema):
        out.mistyped.append((where, sub, _TYPE_NAMES[schema["type"]]))
        return sub
    if type(sub) is dict or type(sub) is list:
        return _walk(sub, schema, f"{path}[{key}]", out)  # kube-apiserver's strict decoder's form, for unknown fields
    return sub


_SCALAR_TYPES = {"string": (str,), "integer": (int,), "number": (int, float, WrittenFloat), "boolean": (bool,)}
_TYPE_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean"}


def _wrong_type(value: Any, schema: dict[str, Any]) -> bool:
    """Whether Go's JSON decoder refuses ``value`` (as read from YAML, not null) for a field or
    element of ``schema``'s Go type: a mapping or list where a string, number or boolean goes
    (``json: cannot unmarshal object into Go struct field ConfigMap.data of type string``), a
    boolean or number where a string goes, a number with a fraction (``1.5``), a string or boolean
    where an integer goes (``cannot unmarshal number 1.5 into Go struct field ServicePort.spec.ports.port
    of type int32``). An untyped schema (quantities, int-or-string) takes anything here."""
    kind = schema.get("type")
    allowed = _SCALAR_TYPES.get(kind) if isinstance(kind, str) else None
    if allowed is None:
        return False
    if type(value) is bool:
        return kind != "boolean"
    if kind == "integer" and type(value) in (float, WrittenFloat):
        return not float(value).is_integer()  # kubectl sends a whole float (80.0) as 80
    return type(value) not in allowed


def _walk(value: Any, schema: dict[str, Any], path: str, out: _Found) -> Any:
    """Walk ``value`` (a mapping or list) against ``schema``: record undeclared fields in ``out`` and
    return ``value`` with its nulls read as the API server reads them (the same object when there
    is none; a changed mapping or list is a copy, so YAML aliases sharing it are left alone)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return value
    if type(value) is dict:
        mapping: dict[Any, Any] | None = None
        properties = schema.get("properties")
        if properties is not None:
            for key, sub in value.items():
                declared = properties.get(key) if type(key) is str else None
                if declared is None:
                    out.unknown.append((f"{path}.{key}" if path else str(key), list(properties)))
                elif sub is None:  # a null struct field is unset (Go leaves the pointer nil, omitempty drops it)
                    mapping = dict(value) if mapping is None else mapping
                    del mapping[key]
                elif _wrong_type(sub, declared):
                    out.mistyped.append((_child(path, key), sub, _TYPE_NAMES[declared["type"]]))
                elif type(sub) is dict or type(sub) is list:
                    new = _walk(sub, declared, f"{path}.{key}" if path else key, out)
                    if new is not sub:
                        mapping = dict(value) if mapping is None else mapping
                        mapping[key] = new
            return value if mapping is None else mapping
        extra = schema.get("additionalProperties")
        if extra is not None and type(extra) is dict:
            for key, sub in value.items():
                new = _element(sub, extra, path, key, out)
                if new is not sub:
                    mapping = dict(value) if mapping is None else mapping
                    mapping[key] = new
            return value if mapping is None else mapping
    elif type(value) is list:
        items = schema.get("items")
        if items is not None and type(items) is dict:
            sequence: list[Any] | None = None
            for index, item in enumerate(value):
                new = _element(item, items, path, index, out)
                if new is not item:
                    sequence = list(value) if sequence is None else sequence
                    sequence[index] = new
            return value if sequence is None else sequence
    return value


@dataclass(frozen=True, slots=True)
class SchemaWalk:
    """What :func:`walk_fields` found in one object.

    Attributes:
        data: the object with its nulls read as kube-apiserver reads them (the object given when
            it has none): a null struct field dropped, a null map value or list item replaced by
            the zero of its type (:func:`_zero`).
        unknown: ``[(path, declared)]`` for every field the schema does not declare, in document
            order: ``path`` in the API server's notation
            (``spec.template.spec.containers[0].imagePullPolicyy``), ``declared`` the field names
            the enclosing object does declare (for a "did you mean").
        mistyped: ``[(path, value, expected)]`` for every value kube-apiserver's decoder refuses
            for its Go type (HTTP 400; :func:`_wrong_type`), in document order: a boolean or number
            that is a value of a string map (``ConfigMap.data``, ``Secret.stringData``,
            ``Service.spec.selector``, labels...), an item of a string list (``args``) or a string
            field; a mapping or list there (``data: {a: {b: c}}``); a fraction, string or boolean
            in an integer field (``Service`` ``port: 1.5``). ``path`` as the loader names fields
            (``data.enabled``, ``args[0]``), ``expected`` in words (``"a string"``). YAML's plain
            ``y``, ``true``, ``1`` are such values: go-yaml v2, as kubectl reads them.
        dropped: for a custom resource (``custom_resource=True``), the location of every null
            mapping value dropped, as a pydantic location (``("spec", "limits", "cpu")``).
    """

    data: dict[str, Any]
    unknown: list[tuple[str, list[str]]]
    mistyped: list[tuple[str, Any, str]] = field(default_factory=list)
    dropped: list[tuple[str | int, ...]] = field(default_factory=list)


def _drop_nulls(value: Any, path: tuple[str | int, ...], dropped: list[tuple[str | int, ...]]) -> Any:
    """``value`` (at ``path``) without its null mapping values, at any depth (copied where changed;
    the path of each one dropped appended to ``dropped``); list items are kept, null ones too."""
    if type(value) is dict:
        mapping: dict[Any, Any] | None = None
        for key, sub in value.items():
            new = None if sub is None else _drop_nulls(sub, (*path, key), dropped) if type(sub) is dict or type(sub) is list else sub
            if new is not sub or sub is None:
                mapping = dict(value) if mapping is None else mapping
                if new is None:
                    dropped.append((*path, key))
                    del mapping[key]
                else:
                    mapping[key] = new
        return value if mapping is None else mapping
    if type(value) is list:
        sequence: list[Any] | None = None
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                new = _drop_nulls(item, (*path, index), dropped)
                if new is not item:
                    sequence = list(value) if sequence is None else sequence
                    sequence[index] = new
        return value if sequence is None else sequence
    return value


def _custom_resource_nulls(data: dict[str, Any], dropped: list[tuple[str | int, ...]]) -> dict[str, Any]:
    """A custom resource's nulls as kube-apiserver v1.36.3 reads them (checked with karpy's NodePool
    CRD by dryRun=All: ``limits: {cpu: null}`` is stored as ``limits: {}``): ``metadata`` is a Go
    ``ObjectMeta`` (walked as in a built-in kind: a null label value is ``""``), and everywhere else
    a null mapping value is dropped (the CRD defaulting's pruning of nulls in fields that are not
    ``nullable``, and none of karpy's CRDs declares one), its path appended to ``dropped``; a null
    list item is kept, for validation to refuse."""
    meta_schema = _schemas()["v1 Pod"]["properties"]["metadata"]
    out: dict[str, Any] | None = None
    for key, sub in data.items():
        if key == "metadata" and type(sub) is dict:
            new = _walk(sub, meta_schema, "metadata", _Found())
        elif sub is None and key not in ("apiVersion", "kind"):
            out = dict(data) if out is None else out
            del out[key]
            dropped.append((key,))
            continue
        elif type(sub) is dict or type(sub) is list:
            new = _drop_nulls(sub, (key,), dropped)
        else:
            continue
        if new is not sub:
            out = dict(data) if out is None else out
            out[key] = new
    return data if out is None else out


def walk_fields(api_version: str, kind: str, data: dict[str, Any], *, custom_resource: bool = False) -> SchemaWalk:
    """Walk a built-in object as read from YAML (``data``) once against kube-apiserver's schema of
    ``apiVersion``/``kind``: its undeclared fields, and ``data`` with nulls normalised (only the
    schema tells a struct field, whose null means unset, from a map value, whose null is a zero).

    A kind without a schema has no field reported; with ``custom_resource`` (a kind served by one
    of karpy's CRDs: NodePool, NodeClaim, NodeClasses...) its nulls are read as the API server reads
    a custom resource's (:func:`_custom_resource_nulls`), else ``data`` is returned as it is.
    ``data`` is never changed in place.
    """
    schema = _schemas().get(f"{api_version} {kind}")
    if schema is None:
        if not custom_resource:
            return SchemaWalk(data, [])
        dropped: list[tuple[str | int, ...]] = []
        return SchemaWalk(_custom_resource_nulls(data, dropped), [], dropped=dropped)
    out = _Found()
    normalised = _walk(data, schema, "", out)
    return SchemaWalk(normalised, out.unknown, out.mistyped)


def unknown_fields(api_version: str, kind: str, data: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The fields of ``data`` (a built-in object as read from YAML) that kube-apiserver's schema of
    ``apiVersion``/``kind`` does not declare, in document order (:attr:`SchemaWalk.unknown` of
    :func:`walk_fields`).

    Returns:
        ``[(path, declared)]``: ``path`` in the API server's notation
        (``spec.template.spec.containers[0].imagePullPolicyy``), ``declared`` the field names the
        enclosing object does declare (for a "did you mean"). Empty for a kind without a schema.
    """
    return walk_fields(api_version, kind, data).unknown


def unknown_field_message(path: str, declared: list[str]) -> str:
    """One problem line for an unknown field: the path, kube-apiserver's words, and the closest
    declared name when there is one (``imagePullPolicyy`` -> ``imagePullPolicy``)."""
    return f'{path}: unknown field "{path}" (kube-apiserver\'s strict decoding error; kubectl applies strictly by default)' + did_you_mean(
        path.rpartition(".")[2], declared)


def did_you_mean(field: str, declared: list[str]) -> str:
    """``"; did you mean 'name'?"`` naming the declared field closest to the unknown ``field``
    (``difflib`` ratio at least 0.8: ``imagePullPolicyy`` -> ``imagePullPolicy``, ``taint`` ->
    ``taints``), or ``""`` when none is that close. Shared by built-in kinds
    (:func:`unknown_field_message`) and karpy's own kinds (the loader's pydantic errors)."""
    close = difflib.get_close_matches(field, declared, n=1, cutoff=0.8)
    return f"; did you mean {close[0]!r}?" if close else ""
