"""The drain evicts a node's pods in :func:`~karpy_core.scheduling.pod.drain_order` (issue 36):
pods with a hard placement rule first (a ``DoNotSchedule`` spread, a required pod
(anti-)affinity), then the larger first, then by name. On the real control plane the drain sent a
zone-spread Deployment's pods last, by name, and the room in the one zone their spread allowed had
been taken by pods that could have gone anywhere: a launch undid the consolidation."""

from __future__ import annotations

from typing import Any

from karpy_core.controllers.node.termination import NodeTermination, TerminationEventKind
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.scheduling.pod import drain_order, pod_info
from karpy_core.utils.clock import VirtualClock

SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]
SOFT = [{**SPREAD[0], "whenUnsatisfiable": "ScheduleAnyway"}]
ANTI = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "db"}}}]}}


def _pod(name: str, cpu: str, memory: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": name.rstrip("-0123456789")},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "controller": True}]},
            "spec": {"nodeName": "n", "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                     **spec},
            "status": {"phase": "Running"}}


PODS = [_pod("api-1", "1"), _pod("api-2", "1", "2Gi"), _pod("batch-1", "2"), _pod("cache-1", "250m"),
        _pod("db-1", "500m", affinity=ANTI), _pod("soft-1", "4", topologySpreadConstraints=SOFT),
        _pod("web-1", "500m", topologySpreadConstraints=SPREAD), _pod("web-2", "1", topologySpreadConstraints=SPREAD)]
ORDER = ["web-2", "db-1", "web-1", "soft-1", "batch-1", "api-2", "api-1", "cache-1"]
"""Hard rules first (web-2 and db-1 before web-1: larger first), then the rest larger first; a
ScheduleAnyway spread is no hard rule; api-2 before api-1: more memory."""


def test_drain_order_puts_hard_placement_rules_first_then_the_larger_pods() -> None:
    assert [p.name for p in sorted((pod_info(p) for p in PODS), key=drain_order)] == ORDER


async def test_the_drain_evicts_in_that_order() -> None:
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    cluster.create_sync("Node", {"metadata": {"name": "n", "labels": {"karpenter.sh/nodepool": "default"},
                                              "finalizers": ["karpenter.sh/termination"]},
                                 "spec": {"providerID": "fake:///zone-a/n"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    for p in sorted(PODS, key=lambda p: p["metadata"]["name"]):
        cluster.create_sync("Pod", p)
    await cluster.delete("Node", "n")
    events = await NodeTermination(kube=cluster, clock=clock).reconcile()
    assert [e.pod.split("/")[1] for e in events if e.kind is TerminationEventKind.EVICT] == ORDER
