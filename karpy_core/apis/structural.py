"""The JSON types of an in-tree provider's NodeClass, checked without its plugin installed.

An ``EC2NodeClass`` or ``KCNodeClass`` is modelled by its plugin (karpy-aws, karpy-kakaocloud).
Without the plugin the loader cannot validate it, yet kube-apiserver would still refuse an object
whose fields have the wrong JSON type for the CRD's structural schema (``spec: abc``,
``amiSelectorTerms: x``), before any CEL rule::

    spec.amiSelectorTerms: Invalid value: "string": spec.amiSelectorTerms in body must be of type array: "string"

karpy ships the CRDs in ``crds/``; their schemas, pruned to what a type check needs (``type``,
``properties``, ``items``, ``additionalProperties``, ``x-kubernetes-int-or-string``,
``x-kubernetes-preserve-unknown-fields``), are kept in ``karpy_core/data/nodeclass-types.json``
(written by ``python -m karpy_core.apis.structural``; ``tests/apis/test_structural.py`` checks it
matches ``crds/``). :func:`type_problems` walks an object against one of them. Field names are not
checked (the API server prunes or refuses unknown fields; the plugin does), nor values.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

__all__ = ["TYPES_FILE", "TypeProblem", "prune", "schema_for", "type_problems", "write"]

TYPES_FILE = "nodeclass-types.json"
"""The pruned schemas in ``karpy_core/data``: ``"<apiVersion> <kind>"`` -> schema."""

SOURCES = ("karpenter.k8s.aws_ec2nodeclasses.yaml", "karpenter.kakaocloud.com_kcnodeclasses.yaml")
"""The CRD files of ``crds/`` whose schemas are kept (the in-tree plugins' NodeClasses)."""

_KEEP = ("type", "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields")

TypeProblem = tuple[str, str, Any]
"""``(path, expected, value)``: ``("spec.amiSelectorTerms", "a list", "x")``."""

_WORDS = {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
          "number": "a number", "boolean": "true or false"}


def prune(schema: dict[str, Any]) -> dict[str, Any]:
    """The part of a structural ``openAPIV3Schema`` (a mapping) a type check reads."""
    out: dict[str, Any] = {key: schema[key] for key in _KEEP if key in schema}
    if isinstance(schema.get("properties"), dict):
        out["properties"] = {name: prune(sub) for name, sub in schema["properties"].items()}
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out[key] = prune(schema[key])
    return out


def _from_crds(directory: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for name in SOURCES:
        crd = [doc for doc in yaml.safe_load_all((directory / name).read_text(encoding="utf-8")) if doc][-1]
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for version in crd["spec"]["versions"]:
            out[f"{group}/{version['name']} {kind}"] = prune(version["schema"]["openAPIV3Schema"])
    return out


def render(directory: Path) -> str:
    """The content of :data:`TYPES_FILE` for the CRDs in ``directory`` (``crds/``)."""
    return json.dumps(_from_crds(directory), sort_keys=True, indent=1) + "\n"


def write(directory: Path, target: Path) -> None:
    """Write :data:`TYPES_FILE` (``target``) from the CRDs in ``directory``."""
    target.write_text(render(directory), encoding="utf-8")


@functools.cache
def _schemas() -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = json.loads(resources.files("karpy_core.data").joinpath(TYPES_FILE).read_text(encoding="utf-8"))
    return loaded


def schema_for(api_version: str, kind: str) -> dict[str, Any] | None:
    """The pruned schema of ``kind`` at ``api_version`` (``karpenter.k8s.aws/v1``), or None."""
    return _schemas().get(f"{api_version} {kind}")


def _is(value: Any, wanted: str) -> bool:
    if wanted == "object":
        return isinstance(value, dict)
    if wanted == "array":
        return isinstance(value, list)
    if wanted == "string":
        return isinstance(value, str)
    if wanted == "boolean":
        return isinstance(value, bool)
    if wanted == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if wanted == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return True


def _walk(value: Any, schema: dict[str, Any], path: str) -> Iterator[TypeProblem]:
    if value is None or (schema.get("x-kubernetes-preserve-unknown-fields") and "type" not in schema):
        return  # null: dropped as unset by the API server's decoder (the loader already did)
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _is(value, "integer")):
            yield path, "an integer or a string", value
        return
    wanted = schema.get("type")
    if isinstance(wanted, str) and not _is(value, wanted):
        yield path, _WORDS.get(wanted, wanted), value
        return
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            below = f"{path}.{key}" if path else str(key)
            if key in properties:
                yield from _walk(sub, properties[key], below)
            elif isinstance(extra, dict):
                yield from _walk(sub, extra, below)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            yield from _walk(item, schema["items"], f"{path}[{index}]")


def type_problems(data: dict[str, Any], schema: dict[str, Any]) -> list[TypeProblem]:
    """Every value of ``data`` (an object as read from YAML) whose JSON type is not the one
    ``schema`` (a :func:`prune`-d ``openAPIV3Schema``) declares, outermost first: a value of the
    wrong type is reported, not what lies below it. ``metadata``, ``apiVersion`` and ``kind`` are
    left to the loader's own checks."""
    properties = schema.get("properties") or {}
    out: list[TypeProblem] = []
    for key, value in data.items():
        if key in ("apiVersion", "kind", "metadata") or key not in properties:
            continue
        out.extend(_walk(value, properties[key], key))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m karpy_core.apis.structural``: rewrite :data:`TYPES_FILE` from ``crds/``."""
    from karpy_core.apis.crds import CRD_DIR

    del argv
    target = Path(__file__).resolve().parents[1] / "data" / TYPES_FILE
    write(CRD_DIR, target)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
