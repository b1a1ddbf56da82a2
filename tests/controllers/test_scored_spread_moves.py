"""Issue 36: consolidations the real kube-scheduler undoes. kube-scheduler places a pod on the node
its scores rank highest (``NodeResourcesFit`` ``LeastAllocated``, ``BalancedAllocation``), not on
the first by name; a zone-spread pod whose zone's room the scores gave to another moved pod stays
pending, and karpy launches a node for it. :func:`moved_pods_fit` now replays that placement too.

The cluster: ``n1`` (zone-b, 4 cores, 2 used: two ``web`` pods), ``n2`` (zone-a, 4 cores, 1 used:
one ``web`` pod) and ``n3`` (zone-a) holding a ``batch`` pod (2 cores, its own zone spread) and a
``web`` pod (1.5 cores; ``web`` spreads over zones with maxSkew 1, DoNotSchedule: with a=1, b=2
it may only go to zone-a). Deleting ``n3``: first fit by name puts ``batch`` on ``n1`` and ``web``
on ``n2``; kube-scheduler's scores put ``batch`` on ``n2`` (the emptier), leaving ``web`` 1 core
in zone-a and a spread that refuses zone-b."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.controllers.disruption.decisions import DecisionKind, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.scheduling import kubescheduler
from karpy_core.scheduling.kubescheduler import kube_schedule, moved_pods_fit
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.scoring import node_scores
from karpy_core.state.cluster import ClusterSnapshot
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim
from tests.scheduling.helpers import nodepool

ZONE = "topology.kubernetes.io/zone"


def spread_pod(name: str, node: str, app: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-1", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
                     "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                                                    "labelSelector": {"matchLabels": {"app": app}}}]},
            "status": {"phase": "Running"}}


def cluster() -> ClusterSnapshot:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    pairs = [node_and_claim(n, "small", 4, pool=pool) for n in ("n1", "n2", "n3")]
    pairs[0][0]["metadata"]["labels"][ZONE] = pairs[0][1]["metadata"]["labels"][ZONE] = "zone-b"
    pods = [spread_pod("web-b1", "n1", "web", "1"), spread_pod("web-b2", "n1", "web", "1"), spread_pod("web-a1", "n2", "web", "1"),
            spread_pod("batch-a", "n3", "batch", "2"), spread_pod("web-a2", "n3", "web", "1500m")]
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool], pods=pods)


def moved(s: ClusterSnapshot) -> tuple[list[ExistingNode], list[PodInfo], list[PodInfo]]:
    """The nodes that stay (n1, n2), the pods bound there, and n3's pods."""
    infos = {p.key: p.info for p in s.pod_views}
    bound = [infos[f"default/{n}"] for n in ("web-b1", "web-b2", "web-a1")]
    assert [p.node_name for p in bound] == ["n1", "n1", "n2"]
    pods = [infos["default/batch-a"], infos["default/web-a2"]]
    nodes = []
    for v in s.node_views:
        if v.name == "n3":
            continue
        used = {"cpu": sum(p.requests.get("cpu", 0) for p in bound if p.node_name == v.name),
                "memory": sum(p.requests.get("memory", 0) for p in bound if p.node_name == v.name)}
        nodes.append(ExistingNode(v.name, dict(v.labels), (), dict(v.allocatable), used, "default", True))
    return nodes, bound, pods


def test_first_fit_places_both_pods_but_kube_schedulers_scores_leave_the_spread_pod_pending():
    nodes, bound, pods = moved(cluster())
    assert kube_schedule(nodes, bound, pods).existing == {"default/batch-a": "n1", "default/web-a2": "n2"}
    for ties in ("first", "last"):
        scored = kube_schedule(nodes, bound, pods, scoring=ties)
        assert scored.existing == {"default/batch-a": "n2"}
        assert list(scored.errors) == ["default/web-a2"]


def test_the_scores_follow_kube_scheduler():
    nodes, _, pods = moved(cluster())
    from karpy_core.scheduling.nodes import NodeUsage

    # batch (2 cores, 256 MiB) on n1 (4 cores, 2 used; 8 GiB, 512 MiB used) and on n2 (1 core used, 256 MiB):
    # LeastAllocated: cpu (4-4)*100/4 = 0, memory (8192-768)*100/8192 = 90 -> 45; n2: 25 and 93 -> 59.
    # BalancedAllocation: n1 without (0.5, 0.0625) -> 78, with (1.0, 0.09375) -> 54: 50 + (50 + 54 - 78) // 2 = 63;
    # n2 without (0.25, 0.03125) -> 89, with (0.75, 0.0625) -> 65: 50 + (50 + 65 - 89) // 2 = 63.
    assert node_scores([NodeUsage(n) for n in nodes], pods[0]) == [45 + 63, 59 + 63]


def test_moved_pods_fit_refuses_what_the_scores_strand():
    nodes, bound, pods = moved(cluster())
    assert "default/web-a2" in kube_schedule(nodes, bound, pods, scoring="first").errors
    assert moved_pods_fit(nodes, bound, pods, []) == (
        "default/web-a2", "no node that stays or replaces takes it when the moved pods are placed by kube-scheduler's "
        "default scores (LeastAllocated, BalancedAllocation, PodTopologySpread)")


def test_the_consolidation_that_kube_schedulers_scores_undo_is_not_taken(monkeypatch: pytest.MonkeyPatch):
    s = cluster()
    with monkeypatch.context() as m:  # before: only first fit replayed (the arrival replays score too: out as well)
        m.setattr(kubescheduler, "SCORED_REPLAYS", ())
        m.setattr(kubescheduler, "ARRIVAL_REPLAYS", ())
        before = plan_disruption(s, TYPES, NOW)
    assert before is not None and [c.name for c in before.candidates] == ["n3"] and not before.replacements
    log: list[NodeDecision] = []
    plan = plan_disruption(s, TYPES, NOW, log=log)
    assert plan is None or not (any(c.name == "n3" for c in plan.candidates) and not plan.replacements)
    why = [d for d in log if d.node == "n3" and d.kind is DecisionKind.KUBE_SCHEDULER_MISFIT]
    assert why and "pod default/web-a2 would stay pending where kube-scheduler places the moved pods" in why[0].reason
    assert "NodePool" not in why[0].reason  # the replay launches nothing: no word about NodePools


@pytest.mark.parametrize(("scoring", "node"), [(None, "n1"), ("first", "n2"), ("last", "n2")])
async def test_the_simulated_kube_scheduler_places_by_score_when_asked(scoring: str | None, node: str):
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeSchedulerSimulator
    from karpy_core.utils.clock import VirtualClock

    cluster = InMemoryCluster(VirtualClock())
    for name, cpu in (("n1", "2"), ("n2", "8")):  # n1 first by name, n2 the emptier
        cluster.create_sync("Node", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
                                     "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                                                "conditions": [{"type": "Ready", "status": "True"}]}})
    cluster.create_sync("Pod", {"metadata": {"name": "p", "namespace": "default"},
                                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                                "status": {"phase": "Pending"}})
    assert await KubeSchedulerSimulator(cluster, scoring=scoring).reconcile() == 1
    assert cluster.objects("Pod")[0]["spec"]["nodeName"] == node


def test_an_unknown_scoring_is_refused_naming_the_option():
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeSchedulerSimulator
    from karpy_core.utils.clock import VirtualClock

    with pytest.raises(ValueError, match=r"^scoring: 'best' is not None, 'first' or 'last'$"):
        KubeSchedulerSimulator(InMemoryCluster(VirtualClock()), scoring="best")
