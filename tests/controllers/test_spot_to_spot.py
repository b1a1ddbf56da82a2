"""Spot-to-spot consolidation (the SpotToSpotConsolidation gate), on hand-built snapshots.

Upstream: kubernetes-sigs/karpenter pkg/controllers/disruption/consolidation.go
computeSpotToSpotConsolidation (MinInstanceTypesForSpotToSpotConsolidation = 15).
"""

from __future__ import annotations

from typing import Any

from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.karpenter_events import karpenter_message
from karpy_core.controllers.disruption.planner import plan_disruption, validate_plan
from karpy_core.controllers.disruption.spot_to_spot import MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT
from karpy_core.featuregates import FeatureGates, gates_from
from karpy_core.state.cluster import ClusterSnapshot
from tests.controllers.test_disruption import NOW, node_and_claim, pod
from tests.scheduling.helpers import make_type, nodepool

ON = FeatureGates(SpotToSpotConsolidation=True)
BOTH = ("spot", "on-demand")


def types(cheaper: int) -> dict[str, list[Any]]:
    """``big`` (8 cores, 0.40 on-demand, 0.16 spot USD/hour) and ``cheaper`` 2-core types
    ``s00``.. whose on-demand price is 0.01 x (i + 1) (spot 40% of it): all cheaper as spot."""
    small = [make_type(f"s{i:02d}", 2, 4, price=round(0.01 * (i + 1), 4), capacity_types=BOTH) for i in range(cheaper)]
    return {"default": [make_type("big", 8, 16, capacity_types=BOTH), *small]}


def spot_snapshot(nodes: list[str], capacity_types: tuple[str, ...] = ("spot",)) -> ClusterSnapshot:
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": list(capacity_types)}])
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    pairs = [node_and_claim(n, itype="big", pool=pool) for n in nodes]
    for node, claim in pairs:
        node["metadata"]["labels"]["karpenter.sh/capacity-type"] = "spot"
        claim["metadata"]["labels"]["karpenter.sh/capacity-type"] = "spot"
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool],
                           pods=[pod(f"p-{n}", n) for n in nodes])


def single_lines(log: list[NodeDecision]) -> list[NodeDecision]:
    return [d for d in log if d.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION]


def test_twenty_cheaper_spot_types_replace_launching_only_the_fifteen_cheapest() -> None:
    its = types(20)
    snap = spot_snapshot(["a"])
    plan = plan_disruption(snap, its, NOW, feature_gates=ON)
    assert plan is not None and plan.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION and plan.decision == "replace"
    (repl,) = plan.replacements
    cheapest = sorted(its["default"][1:], key=lambda it: min(o.price for o in it.offerings if o.capacity_type == "spot"))
    assert [it.name for it in repl.instance_types] == [it.name for it in cheapest[:MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT]]
    ct = repl.requirements.get("karpenter.sh/capacity-type")
    assert ct is not None and ct.values == frozenset({"spot"})
    assert repl.cheapest_offering_price() < (plan.candidates[0].price or 0)
    # the decided command still holds after the validation delay, with the same gates
    assert validate_plan(snap, its, NOW + 15, plan, feature_gates=ON) is None


def test_ten_cheaper_spot_types_do_not_replace_and_the_explain_line_says_so() -> None:
    log: list[NodeDecision] = []
    assert plan_disruption(spot_snapshot(["a"]), types(10), NOW, log=log, feature_gates=ON) is None
    (line,) = single_lines(log)
    assert line.kind is DecisionKind.SPOT_TO_SPOT_OPTIONS
    assert line.reason == "spot-to-spot: only 10 cheaper spot instance types, needs 15"
    # Karpenter's Unconsolidatable event text for the same decision
    assert karpenter_message(line, nodepool="default", instance_type="big") == (
        "Unconsolidatable",
        "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 10")


def test_gate_off_keeps_spot_to_on_demand_only() -> None:
    log: list[NodeDecision] = []
    # a spot-only pool: nothing to move to, and the line names the gate
    assert plan_disruption(spot_snapshot(["a"]), types(20), NOW, log=log) is None
    (line,) = single_lines(log)
    assert line.kind is DecisionKind.SPOT_TO_SPOT and "SpotToSpotConsolidation" in line.reason
    # spot and on-demand allowed: today's rule, a cheaper on-demand node
    plan = plan_disruption(spot_snapshot(["a"], BOTH), types(20), NOW, feature_gates=gates_from({"SpotToSpotConsolidation": False}))
    assert plan is not None
    ct = plan.replacements[0].requirements.get("karpenter.sh/capacity-type")
    assert ct is not None and ct.values == frozenset({"on-demand"})
    assert all(min(o.price for o in it.offerings if o.capacity_type == "on-demand") < 0.4 for it in plan.replacements[0].instance_types)


def test_gate_on_with_both_capacity_types_replaces_spot_by_spot() -> None:
    plan = plan_disruption(spot_snapshot(["a"], BOTH), types(20), NOW, feature_gates=ON)
    assert plan is not None
    ct = plan.replacements[0].requirements.get("karpenter.sh/capacity-type")
    assert ct is not None and ct.values == frozenset({"spot"}) and len(plan.replacements[0].instance_types) == 15


def test_multi_node_spot_to_spot_needs_no_fifteen_options() -> None:
    """Upstream checks the 15 options for single-node consolidation only."""
    plan = plan_disruption(spot_snapshot(["a", "b"]), types(3), NOW, feature_gates=ON)
    assert plan is not None and plan.method is DisruptionMethod.MULTI_NODE_CONSOLIDATION and len(plan.candidates) == 2
    # every spot type cheaper than the two nodes together (0.32 USD/hour), "big" (0.16) included: 4 < 15 options
    assert {it.name for it in plan.replacements[0].instance_types} == {"s00", "s01", "s02", "big"}
    ct = plan.replacements[0].requirements.get("karpenter.sh/capacity-type")
    assert ct is not None and ct.values == frozenset({"spot"})


def test_gate_is_refused_no_more() -> None:
    assert gates_from("SpotToSpotConsolidation=true").SpotToSpotConsolidation
