#!/usr/bin/env python3
"""Dump kube-apiserver's OpenAPI v3 schemas of the built-in kinds karpy reads into
``karpy_core/data/core-openapi.json.gz`` (run once per Kubernetes upgrade; the output is checked in).

The loader walks every built-in object against these schemas and reports each field the schema
does not declare, as kube-apiserver does with ``fieldValidation=Strict`` (kubectl's default
``--validate=strict``): see :mod:`karpy_core.apis.fieldschema`.

Steps: start the dev cluster's API server alone (``hack/devcluster.py``: kube-apiserver v1.36.3 and
etcd, no controllers), GET ``/openapi/v3/<group-version>`` for each group version in :data:`KINDS`,
keep the schemas of the listed kinds and every schema they reference (transitively), and reduce
each schema to what the walk needs: ``properties`` (name -> reference or inline schema),
``items``, ``additionalProperties``, ``x-kubernetes-preserve-unknown-fields`` and ``type``.
Descriptions, defaults and formats are dropped (the full documents are 2.5 MB; the result is
about 20 KB gzipped).

Output (JSON, gzipped)::

    {"source": "kube-apiserver v1.36.3 /openapi/v3", "kinds": {"apps/v1 Deployment": "<schema name>", ...},
     "schemas": {"<schema name>": <pruned schema>, ...}}

Usage: ``.venv/bin/python hack/core_openapi.py [--out PATH]``.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "karpy_core" / "data" / "core-openapi.json.gz"

KINDS: dict[str, tuple[str, ...]] = {
    "v1": ("Pod", "Node", "PodTemplate", "PersistentVolumeClaim", "PersistentVolume", "ConfigMap", "Secret",
           "Service", "ServiceAccount", "Namespace", "LimitRange", "ResourceQuota", "ReplicationController"),
    "apps/v1": ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"),
    "batch/v1": ("Job", "CronJob"),
    "policy/v1": ("PodDisruptionBudget",),
    "scheduling.k8s.io/v1": ("PriorityClass",),
    "node.k8s.io/v1": ("RuntimeClass",),
    "storage.k8s.io/v1": ("StorageClass", "CSINode", "CSIDriver"),
    "networking.k8s.io/v1": ("NetworkPolicy", "Ingress", "IngressClass"),
    "autoscaling/v2": ("HorizontalPodAutoscaler",),
    "rbac.authorization.k8s.io/v1": ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"),
}
"""apiVersion -> the kinds whose schemas are kept: the kinds karpy models or reads (Pod, Node,
workloads, PodDisruptionBudget, PriorityClass, RuntimeClass, PodTemplate, StorageClass, CSINode,
PersistentVolume(Claim)) and the built-in kinds most often found next to them in the same files, which
karpy lists as ignored but still checks for undeclared fields as kubectl's strict apply does (Service,
ConfigMap..., and NetworkPolicy, Ingress, IngressClass, HorizontalPodAutoscaler and the RBAC kinds:
these eight add 54 schemas, 1.2 KB to the gzipped file, 8.3 -> 9.6 KB)."""

_KEEP = ("type", "items", "additionalProperties", "x-kubernetes-preserve-unknown-fields", "properties", "allOf", "$ref")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _prune(schema: dict[str, Any], refs: set[str]) -> dict[str, Any]:
    """The parts of one schema the field walk reads; every ``$ref`` met is added to ``refs``."""
    if "$ref" in schema:
        refs.add(_ref_name(schema["$ref"]))
        return {"$ref": _ref_name(schema["$ref"])}
    if schema.get("allOf") and len(schema["allOf"]) == 1:  # a documented reference: {allOf: [{$ref}], description}
        inner = _prune(schema["allOf"][0], refs)
        return {**inner, **{k: v for k, v in schema.items() if k == "x-kubernetes-preserve-unknown-fields"}}
    out: dict[str, Any] = {}
    for key in _KEEP:
        if key not in schema or key in ("allOf", "$ref"):
            continue
        value = schema[key]
        if key == "properties":
            out[key] = {name: _prune(sub, refs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _prune(value, refs)
        else:
            out[key] = value
    return out


def prune_documents(documents: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Reduce the OpenAPI v3 documents (apiVersion -> document) to the kinds of :data:`KINDS` and
    the schemas they reach.

    Raises:
        KeyError: a kind of :data:`KINDS` has no schema in its group version's document.
    """
    components: dict[str, Any] = {}
    for document in documents.values():
        components.update(document["components"]["schemas"])
    kinds: dict[str, str] = {}
    for api_version, names in KINDS.items():
        group, _, version = api_version.rpartition("/")
        for kind in names:
            found = [
                name for name, schema in documents[api_version]["components"]["schemas"].items()
                if {"group": group, "version": version, "kind": kind} in schema.get("x-kubernetes-group-version-kind", [])
            ]
            if not found:
                raise KeyError(f"{api_version} {kind}: no schema in /openapi/v3")
            kinds[f"{api_version} {kind}"] = found[0]
    schemas: dict[str, Any] = {}
    todo = set(kinds.values())
    while todo:
        name = todo.pop()
        refs: set[str] = set()
        schemas[name] = _prune(components[name], refs)
        todo |= refs - set(schemas)
    return {"source": "kube-apiserver v1.36.3 /openapi/v3 (hack/core_openapi.py)", "kinds": dict(sorted(kinds.items())),
            "schemas": dict(sorted(schemas.items()))}


def _devcluster_module() -> Any:
    spec = importlib.util.spec_from_file_location("karpy_devcluster", REPO / "hack" / "devcluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["karpy_devcluster"] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    """Start the API server, dump, prune and write the data file; returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"where to write (default {OUT.relative_to(REPO)})")
    args = parser.parse_args(argv)
    devcluster = _devcluster_module()
    with devcluster.DevCluster(controller_manager=False, scheduler=False, kwok=False) as cluster:
        documents = {}
        for api_version in KINDS:
            path = "/openapi/v3/api/v1" if api_version == "v1" else f"/openapi/v3/apis/{api_version}"
            documents[api_version] = cluster.api("GET", path)
    pruned = prune_documents(documents)
    data = json.dumps(pruned, sort_keys=True, separators=(",", ":")).encode()
    args.out.write_bytes(gzip.compress(data, mtime=0))
    print(f"{args.out}: {len(pruned['kinds'])} kinds, {len(pruned['schemas'])} schemas, "
          f"{len(data)} bytes of JSON, {args.out.stat().st_size} gzipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
