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
"""

from __future__ import annotations

import difflib
import functools
import gzip
import json
from importlib import resources
from typing import Any

__all__ = ["SCHEMA_FILE", "has_schema", "unknown_fields", "unknown_field_message"]

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
    return {kind: schemas[name] for kind, name in raw["kinds"].items()}


def has_schema(api_version: str, kind: str) -> bool:
    """Whether :func:`unknown_fields` knows ``apiVersion``/``kind`` (``"apps/v1"``, ``"Deployment"``)."""
    return f"{api_version} {kind}" in _schemas()


def _walk(value: Any, schema: dict[str, Any], path: str, out: list[tuple[str, list[str]]]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if type(value) is dict:
        properties = schema.get("properties")
        if properties is not None:
            for key, sub in value.items():
                declared = properties.get(key) if type(key) is str else None
                if declared is None:
                    out.append((f"{path}.{key}" if path else str(key), list(properties)))
                elif type(sub) is dict or type(sub) is list:
                    _walk(sub, declared, f"{path}.{key}" if path else key, out)
            return
        extra = schema.get("additionalProperties")
        if extra is not None and type(extra) is dict:
            for key, sub in value.items():
                if type(sub) is dict or type(sub) is list:
                    _walk(sub, extra, f"{path}[{key}]", out)
    elif type(value) is list:
        items = schema.get("items")
        if items is not None and type(items) is dict:
            for index, item in enumerate(value):
                if type(item) is dict or type(item) is list:
                    _walk(item, items, f"{path}[{index}]", out)


def unknown_fields(api_version: str, kind: str, data: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """The fields of ``data`` (a built-in object as read from YAML) that kube-apiserver's schema of
    ``apiVersion``/``kind`` does not declare, in document order.

    Returns:
        ``[(path, declared)]``: ``path`` in the API server's notation
        (``spec.template.spec.containers[0].imagePullPolicyy``), ``declared`` the field names the
        enclosing object does declare (for a "did you mean"). Empty for a kind without a schema.
    """
    schema = _schemas().get(f"{api_version} {kind}")
    if schema is None:
        return []
    out: list[tuple[str, list[str]]] = []
    _walk(data, schema, "", out)
    return out


def unknown_field_message(path: str, declared: list[str]) -> str:
    """One problem line for an unknown field: the path, kube-apiserver's words, and the closest
    declared name when there is one (``imagePullPolicyy`` -> ``imagePullPolicy``)."""
    field = path.rpartition(".")[2]
    close = difflib.get_close_matches(field, declared, n=1, cutoff=0.8)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f'{path}: unknown field "{path}" (kube-apiserver\'s strict decoding error; kubectl applies strictly by default){hint}'
