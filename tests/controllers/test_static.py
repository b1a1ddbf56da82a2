"""Static capacity (the StaticCapacity gate): the pure decisions and the planner's static-drift method.

Upstream: kubernetes-sigs/karpenter pkg/controllers/static/{provisioning,deprovisioning},
pkg/controllers/disruption/staticdrift.go, designs/static-capacity.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption, validate_plan
from karpy_core.controllers.static.capacity import (
    StaticCounts,
    node_limit,
    scale_down_order,
    scale_up_count,
    static_claim,
    static_counts,
)
from karpy_core.scheduling.template import template_from_nodepool
from karpy_core.state.cluster import ClusterSnapshot, ready_nodepools
from karpy_core.utils.clock import iso
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim, pod
from tests.scheduling.helpers import nodepool


def static_pool(replicas: int, *, limit: int | None = None, budget: str = "100%", label: str = "") -> dict[str, Any]:
    pool = nodepool(labels={"team": label} if label else None, limits={"nodes": str(limit)} if limit is not None else None)
    pool["spec"]["replicas"] = replicas
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": budget}]}
    return pool


def static_snapshot(pool: dict[str, Any], nodes: list[str], pods: Sequence[dict[str, Any]] = (), *,
                    drifted: bool = False, unresolved: Sequence[str] = ()) -> ClusterSnapshot:
    """Nodes of ``pool`` (their NodeClaims hashed with ``pool`` as it was, or with an older template
    when ``drifted``), plus NodeClaims without a providerID (``unresolved``)."""
    hashed = static_pool(pool["spec"]["replicas"], label="old") if drifted else pool
    pairs = [node_and_claim(n, pool=hashed) for n in nodes]
    claims = [p[1] for p in pairs]
    for name in unresolved:
        claims.append({"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "creationTimestamp": iso(NOW)},
                       "spec": {}, "status": {}})
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=claims, nodepools=[pool], pods=list(pods))


def test_scale_up_count_follows_replicas_and_limits_nodes() -> None:
    assert scale_up_count(5, StaticCounts(active=2), None) == 3
    assert scale_up_count(5, StaticCounts(active=5), None) == 0
    # nodes being disrupted still count toward replicas (their replacement is already there)
    assert scale_up_count(3, StaticCounts(active=2, pending_disruption=1), None) == 0
    # limits.nodes caps every NodeClaim of the pool, deleting ones included
    assert scale_up_count(5, StaticCounts(active=2, deleting=1), 4) == 1
    assert scale_up_count(5, StaticCounts(active=4), 4) == 0
    assert scale_up_count(5, StaticCounts(active=5, deleting=2), 4) == 0


def test_counts_limit_and_template_claim() -> None:
    pool = static_pool(3, limit=4)
    snap = static_snapshot(pool, ["a", "b"], unresolved=["c"])
    assert static_counts(snap, "default") == StaticCounts(active=3)
    view = snap.nodepool("default")
    assert view is not None and view.static and view.replicas == 3 and node_limit(view) == 4
    # static pools never launch for pending pods
    assert ready_nodepools(snap) == ([], {})
    plan = static_claim(template_from_nodepool(pool, TYPES["default"]), [])
    assert plan is not None and not plan.pods and [it.name for it in plan.instance_types] == ["small", "large"]


def test_scale_down_removes_unresolved_then_empty_then_cheapest_to_move() -> None:
    pool = static_pool(1)
    dnd = {"karpenter.sh/do-not-disrupt": "true"}
    pods = [pod("p1", "busy"), pod("p2", "busy"), pod("p3", "light"), pod("p4", "guarded", annotations=dnd)]
    snap = static_snapshot(pool, ["busy", "empty", "guarded", "light"], pods, unresolved=["launching"])
    order = scale_down_order(snap, "default", 5, NOW)
    assert order == ["launching", "empty", "light", "busy", "guarded"]
    assert scale_down_order(snap, "default", 2, NOW) == ["launching", "empty"]
    assert scale_down_order(snap, "default", 0, NOW) == []


def test_static_nodes_are_neither_emptied_nor_consolidated() -> None:
    log: list[NodeDecision] = []
    snap = static_snapshot(static_pool(2), ["a", "b"], [pod("p1", "a")])
    assert plan_disruption(snap, TYPES, NOW, log=log) is None
    kinds = {(d.node, d.method, d.kind) for d in log}
    assert ("b", DisruptionMethod.EMPTINESS, DecisionKind.STATIC_NODEPOOL) in kinds
    assert ("a", DisruptionMethod.SINGLE_NODE_CONSOLIDATION, DecisionKind.STATIC_NODEPOOL) in kinds
    assert not any(d.verdict == "disrupt" for d in log)


def test_static_drift_replaces_one_for_one_within_the_budget() -> None:
    pool = static_pool(3, budget="2")
    snap = static_snapshot(pool, ["a", "b", "c"], drifted=True)
    plan = plan_disruption(snap, TYPES, NOW)
    assert plan is not None and plan.method is DisruptionMethod.STATIC_DRIFT and plan.reason == "Drifted"
    assert [c.name for c in plan.candidates] == ["a", "b"] and len(plan.replacements) == 2
    assert all(not r.pods and r.nodepool == "default" for r in plan.replacements)
    assert validate_plan(snap, TYPES, NOW + 15, plan) is None


def test_static_drift_waits_for_limits_nodes_and_for_a_scale_down() -> None:
    log: list[NodeDecision] = []
    # limits.nodes == replicas: a replacement would exceed it (upstream waits as well)
    assert plan_disruption(static_snapshot(static_pool(2, limit=2), ["a", "b"], drifted=True), TYPES, NOW, log=log) is None
    assert {d.kind for d in log if d.method is DisruptionMethod.STATIC_DRIFT} == {DecisionKind.NODE_LIMIT}
    # one spare node under the limit: one replacement at a time
    plan = plan_disruption(static_snapshot(static_pool(2, limit=3), ["a", "b"], drifted=True), TYPES, NOW)
    assert plan is not None and [c.name for c in plan.candidates] == ["a"]
    # more NodeClaims than replicas: the scale-down goes first
    log = []
    assert plan_disruption(static_snapshot(static_pool(1), ["a", "b"], drifted=True), TYPES, NOW, log=log) is None
    assert {d.kind for d in log if d.method is DisruptionMethod.STATIC_DRIFT} == {DecisionKind.STATIC_SCALING}
    # a zero budget stops it
    log = []
    assert plan_disruption(static_snapshot(static_pool(2, budget="0"), ["a", "b"], drifted=True), TYPES, NOW, log=log) is None
    assert {d.kind for d in log if d.method is DisruptionMethod.STATIC_DRIFT} == {DecisionKind.BUDGET_EXHAUSTED}


async def test_the_operator_runs_the_static_controller_only_with_the_gate() -> None:
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.featuregates import FeatureGates
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.operator import ControllerSettings, Operator
    from karpy_core.utils.clock import VirtualClock

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = static_pool(3, limit=5)
    pool["spec"]["template"]["spec"]["requirements"] = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]}]
    cluster.create_sync("NodePool", pool)
    off = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock)
    assert off.static is None and not off.disruption.feature_gates.SpotToSpotConsolidation
    gates = FeatureGates(StaticCapacity=True, SpotToSpotConsolidation=True)
    op = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock, settings=ControllerSettings.model_validate({"feature_gates": gates}))
    assert op.static is not None and op.disruption.feature_gates.SpotToSpotConsolidation
    op.static.kube = op.sync.source = cluster  # no informer cache in a unit test (nor its sync state)
    await op.static.reconcile()
    claims = cluster.objects("NodeClaim")
    assert len(claims) == 3 and all(c["metadata"]["labels"]["karpenter.sh/nodepool"] == "default" for c in claims)
    types = {r["key"]: r["values"] for r in claims[0]["spec"]["requirements"]}["node.kubernetes.io/instance-type"]
    assert types == ["m5.large", "m5.xlarge"]  # the template's types, the cheapest launched by the provider
    assert op.metrics.nodeclaims_created.labels(reason="provisioned", nodepool="default", min_values_relaxed="false")._value.get() == 3
    await op.static.reconcile()  # at the count: nothing more
    assert len(cluster.objects("NodeClaim")) == 3
    cluster.patch_sync("NodePool", "default", {"spec": {"replicas": 1}})
    await op.static.reconcile()
    assert len([c for c in cluster.objects("NodeClaim") if not c["metadata"].get("deletionTimestamp")]) == 1
