"""Builders for scheduler tests: small synthetic catalogs and pods, in plain dict form."""

from __future__ import annotations

from typing import Any

from karpy_core.cloudprovider.types import InstanceType, Offering, Overhead
from karpy_core.scheduling.requirements import Requirement, Requirements

GI = 2**30


def make_type(
    name: str,
    cpu: int,
    mem_gi: int,
    *,
    pods: int = 110,
    price: float | None = None,
    zones: tuple[str, ...] = ("zone-a", "zone-b"),
    arch: str = "amd64",
    capacity_types: tuple[str, ...] = ("on-demand",),
    extra: dict[str, int] | None = None,
    labels: dict[str, str] | None = None,
    overhead_cpu_m: int = 0,
) -> InstanceType:
    """``cpu`` cores, ``mem_gi`` GiB; price defaults to 0.05 USD/hour per core."""
    p = price if price is not None else 0.05 * cpu
    reqs = Requirements.of(
        Requirement("node.kubernetes.io/instance-type", False, frozenset({name})),
        Requirement("kubernetes.io/arch", False, frozenset({arch})),
        Requirement("kubernetes.io/os", False, frozenset({"linux"})),
    )
    for k, v in (labels or {}).items():
        reqs.add(Requirement(k, False, frozenset({v})))
    offerings = [Offering(z, ct, p if ct == "on-demand" else round(p * 0.4, 6)) for z in zones for ct in capacity_types]
    capacity = {"cpu": cpu * 1000, "memory": mem_gi * GI, "pods": pods, **(extra or {})}
    return InstanceType(name, reqs, offerings, capacity, Overhead(kube_reserved={"cpu": overhead_cpu_m}))


def nodepool(name: str = "default", *, requirements: list[dict[str, Any]] | None = None, weight: int | None = None,
             taints: list[dict[str, str]] | None = None, limits: dict[str, Any] | None = None,
             labels: dict[str, str] | None = None, startup_taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": labels or {}},
            "spec": {
                "requirements": requirements or [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                "taints": taints or [],
                "startupTaints": startup_taints or [],
            },
        }
    }
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def pod(name: str, cpu: str = "1", memory: str = "1Gi", *, ns: str = "default", node_selector: dict[str, str] | None = None,
        tolerations: list[dict[str, str]] | None = None, affinity: dict[str, Any] | None = None,
        node_name: str | None = None, created: str = "2026-01-01T00:00:00Z", extra: dict[str, str] | None = None) -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_selector:
        spec["nodeSelector"] = node_selector
    if tolerations:
        spec["tolerations"] = tolerations
    if affinity:
        spec["affinity"] = affinity
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": ns, "creationTimestamp": created}, "spec": spec}
