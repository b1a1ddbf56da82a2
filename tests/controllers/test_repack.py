"""Repack consolidation (N nodes -> M cheaper ones) on hand-built snapshots whose optimum is known
by hand: a price-linear catalog at 0.05 USD/hour per core (s2: 2 cores 0.10, m4: 0.20, l8: 0.40,
xl16: 0.80), no DaemonSets, no kubelet overhead."""

from __future__ import annotations

import pytest

from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, DisruptionReason, NodeDecision
from karpy_core.controllers.disruption.methods.repack import ANNOTATION_MIN_SAVINGS, DEFAULT_MIN_SAVINGS, min_savings_of
from karpy_core.controllers.disruption.planner import plan_disruption, validate_plan
from karpy_core.state.views import NodePoolView
from tests.controllers.test_disruption import NOW, pod, relabel, snapshot
from tests.scheduling.helpers import make_type, nodepool

TYPES = {"default": [make_type("s2", 2, 4), make_type("m4", 4, 8), make_type("l8", 8, 16), make_type("xl16", 16, 32)]}
REPACK = DisruptionMethod.REPACK_CONSOLIDATION


def split_snapshot(pool=None, pods_extra=None, pdbs=()):
    """One l8 node (0.40 USD/h) with three 1.5-core pods (4.5 cores): no single type under l8
    holds them, so Karpenter's single-node consolidation finds nothing cheaper; m4 + s2 (0.30) do."""
    pods = [pod(f"p{i}", "a", cpu="1500m", **(pods_extra or {})) for i in range(3)]
    return snapshot([("a", "l8", 8)], pods, pool, pdbs=pdbs)


def test_one_big_node_is_split_into_two_cheaper_nodes():
    log: list[NodeDecision] = []
    plan = plan_disruption(split_snapshot(), TYPES, NOW, log=log)
    assert plan is not None and plan.method is REPACK and plan.reason is DisruptionReason.UNDERUTILIZED
    assert [c.name for c in plan.candidates] == ["a"] and plan.decision == "replace"
    assert sorted(r.instance_types[0].name for r in plan.replacements) == ["m4", "s2"]
    assert plan.price == pytest.approx(0.40) and plan.replacement_price == pytest.approx(0.30)
    assert plan.savings_per_hour == pytest.approx(0.10)
    # every pod has a place on exactly one replacement
    assert sorted(p.name for r in plan.replacements for p in r.pods) == ["p0", "p1", "p2"]
    # Karpenter's single-node consolidation looked first and found no cheaper single node
    assert any(d.node == "a" and d.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION and d.verdict == "keep"
               for d in log)
    # a replacement keeps only the types that still meet the threshold: never l8 or xl16
    assert all(it.name in ("s2", "m4") for r in plan.replacements for it in r.instance_types)


def test_three_nodes_are_merged_into_two():
    """a, b, c: l8 (0.40) each with two 3-core pods (6 cores, 2 free: no 3-core pod fits anywhere
    else). Alone or in pairs nothing is cheaper (2 pods need an l8; 4 pods an xl16 = 2 x l8);
    Karpenter's N -> 1 needs 18 cores (more than xl16). Together: xl16 takes 5 pods (15 cores),
    m4 the sixth: 1.00 < 1.20 USD/h."""
    pods = [pod(f"{n}{i}", n, cpu="3") for n in "abc" for i in range(2)]
    log: list[NodeDecision] = []
    plan = plan_disruption(snapshot([("a", "l8", 8), ("b", "l8", 8), ("c", "l8", 8)], pods), TYPES, NOW, log=log)
    assert plan is not None and plan.method is REPACK
    assert sorted(c.name for c in plan.candidates) == ["a", "b", "c"]
    assert sorted(r.instance_types[0].name for r in plan.replacements) == ["m4", "xl16"]
    assert plan.savings_per_hour == pytest.approx(0.20)
    assert sorted(len(r.pods) for r in plan.replacements) == [1, 5]
    below = [d for d in log if d.method is REPACK and d.kind is DecisionKind.BELOW_MIN_SAVINGS]
    assert {d.node for d in below} == {"a", "b", "c"} and all("would save 0.0000 USD/h" in d.reason for d in below)


def test_below_the_threshold_the_node_stays_and_the_log_says_how_much_it_would_save():
    log: list[NodeDecision] = []
    assert plan_disruption(split_snapshot(), TYPES, NOW, log=log, min_savings=0.3) is None
    line = next(d for d in log if d.node == "a" and d.method is REPACK)
    assert line.kind is DecisionKind.BELOW_MIN_SAVINGS
    assert line.reason == "would save 0.1000 USD/h, below the threshold (0.3 x 0.4000 = 0.1200 USD/h)"
    assert "[repack-consolidation] keep: would save 0.1000 USD/h, below the threshold" in line.text()
    # the NodePool's annotation overrides the controller's setting, both ways
    strict = nodepool()
    strict["metadata"]["annotations"] = {ANNOTATION_MIN_SAVINGS: "0.3"}
    assert plan_disruption(split_snapshot(strict), TYPES, NOW) is None
    lenient = nodepool()
    lenient["metadata"]["annotations"] = {ANNOTATION_MIN_SAVINGS: "0.25"}
    plan = plan_disruption(split_snapshot(lenient), TYPES, NOW, min_savings=0.5)
    assert plan is not None and plan.method is REPACK  # 0.10 saved = 25 % of 0.40: exactly the threshold


def test_min_savings_annotation_parsing():
    def pool(annotations: dict[str, str]) -> NodePoolView:
        raw = nodepool()
        raw["metadata"]["annotations"] = annotations
        return NodePoolView.of(raw)

    assert min_savings_of(pool({ANNOTATION_MIN_SAVINGS: "0.2"}), DEFAULT_MIN_SAVINGS) == 0.2
    for bad in ("1.5", "-0.1", "lots"):
        assert min_savings_of(pool({ANNOTATION_MIN_SAVINGS: bad}), 0.1) == 0.1
    assert min_savings_of(pool({}), 0.1) == 0.1


def test_do_not_disrupt_pdb_and_budget_block_the_repack():
    log: list[NodeDecision] = []
    assert plan_disruption(split_snapshot(pods_extra={"annotations": {"karpenter.sh/do-not-disrupt": "true"}}), TYPES, NOW,
                           log=log) is None
    assert any(d.node == "a" and d.kind is DecisionKind.DO_NOT_DISRUPT for d in log)
    pdb = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"minAvailable": 3, "selector": {"matchLabels": {"app": "web"}}}}
    log = []
    assert plan_disruption(split_snapshot(pdbs=[pdb]), TYPES, NOW, log=log) is None
    assert any(d.node == "a" and d.kind is DecisionKind.PDB_BLOCKS for d in log)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "0", "reasons": ["Underutilized"]}]}
    log = []
    assert plan_disruption(split_snapshot(pool), TYPES, NOW, log=log) is None
    assert any(d.node == "a" and d.method is REPACK and d.kind is DecisionKind.BUDGET_EXHAUSTED for d in log)
    # consolidateAfter not elapsed: not a candidate for the repack either
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "2h", "budgets": [{"nodes": "100%"}]}
    log = []
    assert plan_disruption(split_snapshot(pool), TYPES, NOW, log=log) is None
    assert any(d.method is REPACK and d.kind is DecisionKind.NOT_CONSOLIDATABLE_YET for d in log)


def test_budget_caps_the_size_of_a_merge():
    """The three-node merge needs 3 disruptions; a budget of 2 leaves only pairs, which save nothing."""
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "2"}]}
    pods = [pod(f"{n}{i}", n, cpu="3") for n in "abc" for i in range(2)]
    assert plan_disruption(snapshot([("a", "l8", 8), ("b", "l8", 8), ("c", "l8", 8)], pods, pool), TYPES, NOW) is None


def test_revalidation_keeps_a_valid_command_and_drops_one_below_a_raised_threshold():
    snap = split_snapshot()
    plan = plan_disruption(snap, TYPES, NOW)
    assert plan is not None and plan.method is REPACK
    assert validate_plan(snap, TYPES, NOW + 15, plan) is None
    why = validate_plan(snap, TYPES, NOW + 15, plan, min_savings=0.5)
    assert why is not None and why.kind is DecisionKind.BELOW_MIN_SAVINGS and "would save 0.1000 USD/h" in why.message
    # a 3-core pod arriving on the node meanwhile: 7.5 cores cost 0.40 on any repack, nothing saved
    pods = [pod(f"p{i}", "a", cpu="1500m") for i in range(3)] + [pod("late", "a", cpu="3")]
    why = validate_plan(snapshot([("a", "l8", 8)], pods), TYPES, NOW + 15, plan)
    assert why is not None and why.kind is DecisionKind.BELOW_MIN_SAVINGS


def test_spot_candidates_are_repacked_onto_on_demand_only():
    spot_types = {"default": [make_type(n, c, 2 * c, capacity_types=("on-demand", "spot")) for n, c in
                              (("s2", 2), ("m4", 4), ("l8", 8), ("xl16", 16))]}
    snap = relabel(split_snapshot(), **{"karpenter.sh/capacity-type": "spot"})
    # the spot l8 costs 0.16; on-demand m4 + s2 cost 0.30: no cheaper on-demand split exists
    log: list[NodeDecision] = []
    assert plan_disruption(snap, spot_types, NOW, log=log) is None
    assert any(d.node == "a" and d.method is REPACK for d in log)


def test_spot_to_spot_gate_lets_the_repack_replace_spot_by_spot_with_15_types():
    """SpotToSpotConsolidation on: the spot l8 (0.16 USD/h) with 4.5 cores of pods splits into a
    spot m4 + s2 (0.08 + 0.04) only where each replacement keeps 15 instance types (here: 15
    price-tied twins of each size); with the 4 plain types the log names the 15-type rule, never
    'spot-to-spot consolidation is disabled'."""
    from karpy_core.featuregates import FeatureGates

    gates = FeatureGates(SpotToSpotConsolidation=True)
    few = {"default": [make_type(n, c, 2 * c, capacity_types=("on-demand", "spot")) for n, c in
                       (("s2", 2), ("m4", 4), ("l8", 8), ("xl16", 16))]}
    snap = relabel(split_snapshot(), **{"karpenter.sh/capacity-type": "spot"})
    log: list[NodeDecision] = []
    assert plan_disruption(snap, few, NOW, log=log, methods=[REPACK], feature_gates=gates) is None
    mine = [d for d in log if d.node == "a" and d.method is REPACK]
    assert mine and all("disabled" not in d.reason for d in mine)
    assert any(d.kind is DecisionKind.SPOT_TO_SPOT_OPTIONS and "needs 15" in d.reason for d in mine)
    many = {"default": [make_type(f"{n}-{i:02d}", c, 2 * c, capacity_types=("on-demand", "spot"))
                        for n, c in (("s2", 2), ("m4", 4), ("l8", 8)) for i in range(15)]}
    snap = relabel(snapshot([("a", "l8-00", 8)], [pod(f"p{i}", "a", cpu="1500m") for i in range(3)]),
                   **{"karpenter.sh/capacity-type": "spot"})
    plan = plan_disruption(snap, many, NOW, methods=[REPACK], feature_gates=gates)
    assert plan is not None and plan.method is REPACK
    assert sorted(len(r.instance_types) for r in plan.replacements) == [15, 15]
    assert plan.replacement_price == pytest.approx(0.12)
    # gate off: only on-demand replacements, and no on-demand split is cheaper (0.30 > 0.16)
    log = []
    assert plan_disruption(snap, many, NOW, log=log, methods=[REPACK]) is None
    assert any(d.node == "a" and d.method is REPACK and d.kind is DecisionKind.BELOW_MIN_SAVINGS for d in log)


def test_min_values_survive_the_price_trim_or_the_repack_does_not_happen():
    """With minValues 2 on the instance type, a replacement of one type only is refused; with 2
    cheap enough types per replacement (a price-tied twin of each small type) it goes ahead."""
    flexible = [{"key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 2}]
    log: list[NodeDecision] = []
    assert plan_disruption(split_snapshot(nodepool(requirements=flexible)), TYPES, NOW, log=log) is None
    assert any(d.method is REPACK and "minValues 2" in d.reason for d in log)
    twins = {"default": [*TYPES["default"], make_type("s2b", 2, 4), make_type("m4b", 4, 8)]}
    plan = plan_disruption(split_snapshot(nodepool(requirements=flexible)), twins, NOW)
    assert plan is not None and plan.method is REPACK
    assert sorted(sorted(it.name for it in r.instance_types) for r in plan.replacements) == [["m4", "m4b"], ["s2", "s2b"]]


def test_the_decision_log_keeps_one_line_per_change_of_verdict_per_method():
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.controllers.disruption.controller import Disruption
    from karpy_core.controllers.disruption.decisions import Verdict
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.utils.clock import VirtualClock

    d = Disruption(kube=InMemoryCluster(), provider=load_provider("simulated", {}), clock=VirtualClock(NOW))
    single = NodeDecision("a", DisruptionMethod.SINGLE_NODE_CONSOLIDATION, Verdict.KEEP, DecisionKind.NOT_CHEAPER, "no")
    repack = NodeDecision("a", REPACK, Verdict.KEEP, DecisionKind.BELOW_MIN_SAVINGS, "would save 0.0000 USD/h, below the threshold")
    for t in range(3):  # three passes, each logging the node at both methods
        d._log(NOW + t, [single, repack])
    assert len(d.decisions["a"]) == 2
    changed = NodeDecision("a", REPACK, Verdict.KEEP, DecisionKind.BELOW_MIN_SAVINGS, "would save 0.0100 USD/h, below the threshold")
    d._log(NOW + 5, [single, changed])
    assert [line for _, line in d.decisions["a"]] == [single, repack, changed]
    assert d.explain("a")[-1].endswith("[repack-consolidation] keep: would save 0.0100 USD/h, below the threshold")
