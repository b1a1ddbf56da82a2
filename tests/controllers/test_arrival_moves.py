"""Issue 36 (undone36): a consolidation the next launch undid because the moved pods came to
kube-scheduler one after another, not all at once. The drain evicts a node's pods by name, a few
at a time as their PodDisruptionBudgets allow, and kube-scheduler binds each replacement pod as it
is created; :func:`moved_pods_fit` placed them all at once, the largest first, and counted on room
the small pods that come first take.

The cluster: ``n1`` and ``n2`` (4 cores each, 2 used by a pod that stays), ``n3`` (4 cores) holding
two 1-core ``api`` pods and a 2-core ``batch`` pod. Deleting ``n3``: placed at once (largest first)
``batch`` goes to ``n1`` and both ``api`` pods to ``n2``; as the drain sends them (``api`` sorts
before ``batch``), kube-scheduler's scores put one ``api`` pod on each of ``n1`` and ``n2``
(``LeastAllocated``: the emptier), leaving 1 core on each and ``batch`` pending."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.controllers.disruption.decisions import DecisionKind, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.scheduling import kubescheduler
from karpy_core.scheduling.kubescheduler import arrival_schedule, kube_schedule, moved_pods_fit
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import PodInfo
from karpy_core.state.cluster import ClusterSnapshot
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim
from tests.scheduling.helpers import nodepool


def app_pod(name: str, node: str | None, app: str, cpu: str, *, stays: bool = False) -> dict[str, Any]:
    """A Deployment's pod (ReplicaSet ``<app>-1``) requesting ``cpu`` and 1 GiB on ``node``;
    ``stays``: ``karpenter.sh/do-not-disrupt`` (its node is no candidate)."""
    annotations = {"karpenter.sh/do-not-disrupt": "true"} if stays else {}
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}, "annotations": annotations,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-1", "controller": True}]},
            "spec": spec, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]} if node
            else {"phase": "Pending"}}


def nodes_and_claims() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    pairs = [node_and_claim(n, "small", 4, pool=pool) for n in ("n1", "n2", "n3")]
    return [p[0] for p in pairs], [p[1] for p in pairs], pool


STAYING = [app_pod("other-1", "n1", "other", "2", stays=True), app_pod("other-2", "n2", "other", "2", stays=True)]
MOVED = [app_pod("api-1", "n3", "api", "1"), app_pod("api-2", "n3", "api", "1"), app_pod("batch-1", "n3", "batch", "2")]


def cluster() -> ClusterSnapshot:
    nodes, claims, pool = nodes_and_claims()
    return ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=[pool], pods=[*STAYING, *MOVED])


def moved(s: ClusterSnapshot) -> tuple[list[ExistingNode], list[PodInfo], list[PodInfo]]:
    """The nodes that stay (n1, n2), the pods bound there, and n3's pods."""
    infos = {p.key: p.info for p in s.pod_views}
    bound = [infos["default/other-1"], infos["default/other-2"]]
    pods = [infos[f"default/{n}"] for n in ("api-1", "api-2", "batch-1")]
    nodes = [ExistingNode(v.name, dict(v.labels), (), dict(v.allocatable),
                          {r: sum(p.requests.get(r, 0) for p in bound if p.node_name == v.name) for r in ("cpu", "memory")},
                          "default", True)
             for v in s.node_views if v.name != "n3"]
    return nodes, bound, pods


def test_placed_at_once_the_pods_fit_but_as_they_arrive_the_batch_pod_stays_pending():
    nodes, bound, pods = moved(cluster())
    for scoring in (None, "first", "last"):  # all at once, largest first: every replay placed them
        assert not kube_schedule(nodes, bound, pods, scoring=scoring).errors
    assert kube_schedule(nodes, bound, pods, scoring="first").existing == {
        "default/batch-1": "n1", "default/api-1": "n2", "default/api-2": "n2"}
    scored = arrival_schedule(nodes, bound, pods, scoring="first")
    assert scored.existing == {"default/api-1": "n1", "default/api-2": "n2"}
    assert list(scored.errors) == ["default/batch-1"]
    # first fit by name stacks the small pods on n1 and keeps n2's room whole
    assert arrival_schedule(nodes, bound, pods).existing == {"default/api-1": "n1", "default/api-2": "n1", "default/batch-1": "n2"}


def test_moved_pods_fit_replays_the_arrival(monkeypatch: pytest.MonkeyPatch):
    nodes, bound, pods = moved(cluster())
    assert moved_pods_fit(nodes, bound, pods, [], first_fit=False) == (
        "default/batch-1", "no node that stays or replaces takes it when the moved pods are placed as they arrive, "
        "smallest first by kube-scheduler's default scores (LeastAllocated, BalancedAllocation, PodTopologySpread)")
    monkeypatch.setattr(kubescheduler, "ARRIVAL_REPLAYS", ())  # before: all at once only
    assert moved_pods_fit(nodes, bound, pods, [], first_fit=False) is None


def test_pods_of_one_shape_are_not_replayed_by_arrival(monkeypatch: pytest.MonkeyPatch):
    nodes, bound, pods = moved(cluster())
    calls: list[int] = []
    real = kubescheduler.arrival_schedule

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(kubescheduler, "arrival_schedule", counted)
    assert moved_pods_fit(nodes, bound, pods[:2], [], first_fit=False) is None
    assert calls == []  # two 1-core pods land in any order
    moved_pods_fit(nodes, bound, pods, [], first_fit=False)
    assert calls


async def test_the_simulated_kube_scheduler_strands_the_batch_pod_when_the_drain_sends_api_first():
    """The stand-in the replay models: the drain's order (by name: both ``api`` pods, then
    ``batch``), each bound by kube-scheduler's scores before the next comes."""
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeSchedulerSimulator
    from karpy_core.utils.clock import VirtualClock

    kube = InMemoryCluster(VirtualClock())
    nodes, _, _ = nodes_and_claims()
    for n in nodes[:2]:
        kube.create_sync("Node", n)
    for p in STAYING:
        kube.create_sync("Pod", p)
    sched = KubeSchedulerSimulator(kube, scoring="first")
    for name, app, cpu in (("api-1", "api", "1"), ("api-2", "api", "1"), ("batch-1", "batch", "2")):
        kube.create_sync("Pod", app_pod(name, None, app, cpu))
        await sched.reconcile()
    where = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in kube.objects("Pod")}
    assert where == {"other-1": "n1", "other-2": "n2", "api-1": "n1", "api-2": "n2", "batch-1": None}


# The drain's waves. ``n1`` (9 cores, nearly empty), ``n2`` and ``n3`` (8 cores, 6 used) stay;
# ``n9`` holds six 1-core ``api`` pods (their PDB lets 4 go at a time) and three 2-core ``batch``
# pods (1 at a time). The drain sends api-1..4 and batch-1, then api-5, api-6 and batch-2, then
# batch-3: batch-1 takes n1 (the emptiest), the api pods follow it there until n1 is no emptier
# than n2 and n3, then take the 2-core holes of those, and batch-3 finds none left (the 1,000-pod
# scale-in's undone replace: t4-api and t4-batch, PDBs at 20%).
WAVE_STAYING = [app_pod("other-1", "n1", "other", "1m", stays=True), app_pod("other-2", "n2", "other", "6", stays=True),
                app_pod("other-3", "n3", "other", "6", stays=True)]
WAVE_MOVED = [*(app_pod(f"api-{i}", "n9", "api", "1") for i in range(1, 7)),
              *(app_pod(f"batch-{i}", "n9", "batch", "2") for i in range(1, 4))]


def pdb(app: str, min_available: int) -> dict[str, Any]:
    return {"metadata": {"name": app, "namespace": "default"},
            "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}}}


def wave_cluster() -> ClusterSnapshot:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    pairs = [node_and_claim(n, "large", cpu, pool=pool) for n, cpu in (("n1", 9), ("n2", 8), ("n3", 8), ("n9", 12))]
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool],
                           pods=[*WAVE_STAYING, *WAVE_MOVED], pdbs=[pdb("api", 2), pdb("batch", 2)])  # 4 and 1 at a time


def test_the_drain_sends_the_pods_in_waves_its_pdbs_allow():
    from karpy_core.controllers.disruption.candidates import build_candidates
    from karpy_core.controllers.disruption.simulation import drain_waves

    s = wave_cluster()
    n9 = next(c for c in build_candidates(s, TYPES, NOW) if c.name == "n9")
    assert n9.drain_budgets["default/api-1"] == ("default/api", 4)
    assert n9.drain_budgets["default/batch-3"] == ("default/batch", 1)
    infos = {p.key: p.info for p in s.pod_views}
    pods = [infos[f"default/{p['metadata']['name']}"] for p in reversed(WAVE_MOVED)]  # any order in
    assert [[p.name for p in w] for w in drain_waves([n9], pods)] == [
        ["batch-1", "api-1", "api-2", "api-3", "api-4"], ["batch-2", "api-5", "api-6"], ["batch-3"]]  # larger first


def test_as_the_drain_sends_them_the_last_batch_pod_stays_pending():
    from karpy_core.controllers.disruption.candidates import build_candidates
    from karpy_core.controllers.disruption.simulation import drain_waves

    s = wave_cluster()
    infos = {p.key: p.info for p in s.pod_views}
    bound = [infos[f"default/other-{i}"] for i in (1, 2, 3)]
    pods = [infos[f"default/{p['metadata']['name']}"] for p in WAVE_MOVED]
    nodes = [ExistingNode(v.name, dict(v.labels), (), dict(v.allocatable),
                          {r: sum(p.requests.get(r, 0) for p in bound if p.node_name == v.name) for r in ("cpu", "memory")},
                          "default", True)
             for v in s.node_views if v.name != "n9"]
    for scoring in (None, "first", "last"):  # all at once, largest first: they fit
        assert not kube_schedule(nodes, bound, pods, scoring=scoring).errors
    waves = drain_waves([next(c for c in build_candidates(s, TYPES, NOW) if c.name == "n9")], pods)
    assert not arrival_schedule(nodes, bound, pods, waves=waves).errors  # first fit keeps n2's and n3's holes
    for scoring in ("first", "last"):
        assert list(arrival_schedule(nodes, bound, pods, scoring=scoring, waves=waves).errors) == ["default/batch-3"]
    assert moved_pods_fit(nodes, bound, pods, [], first_fit=False, waves=waves) == (
        "default/batch-3", "no node that stays or replaces takes it when the moved pods are placed as the drain sends them "
        "by kube-scheduler's default scores (LeastAllocated, BalancedAllocation, PodTopologySpread)")


def test_the_consolidation_the_drain_undoes_is_not_taken(monkeypatch: pytest.MonkeyPatch):
    s = wave_cluster()
    with monkeypatch.context() as m:
        m.setattr(kubescheduler, "ARRIVAL_REPLAYS", ())
        before = plan_disruption(s, TYPES, NOW)
    assert before is not None and [c.name for c in before.candidates] == ["n9"] and not before.replacements
    log: list[NodeDecision] = []
    plan = plan_disruption(s, TYPES, NOW, log=log)
    assert plan is None or not (any(c.name == "n9" for c in plan.candidates) and not plan.replacements)
    why = [d for d in log if d.node == "n9" and d.kind is DecisionKind.KUBE_SCHEDULER_MISFIT]
    assert why and "placed as the drain sends them" in why[0].reason
