"""No flapping consolidation (issue 34, item 3): a repack is taken only when kube-scheduler's own
placement of the pods it moves (``scheduling/kubescheduler.py``, the simulator's stand-in) puts
every one of them somewhere; a move found undone (a node launched for the pods it moved) is not
made again until the workload or the offerings change; and a command's replacements are not
candidates while its pods are on their way.

The snapshots: one r8 node (8 cores, 64 GiB) holding memory-heavy pods, on a catalog of three
families at 0.04 (c: 2 GiB/core), 0.05 (m: 4 GiB/core) and 0.065 (r: 8 GiB/core) USD/hour per
core, 1 to 16 cores."""

from __future__ import annotations

from typing import Any

import pytest

import karpy_core.controllers.disruption.methods.repack as repack
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.disruption.simulation import SimulationContext
from karpy_core.controllers.disruption.undone import UndoneMoves, workload_fingerprint
from karpy_core.scheduling.kubescheduler import kube_schedule, moved_pods_fit, replacement_node
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import iso
from tests.controllers.test_disruption import NOW, node_and_claim
from tests.scheduling.helpers import make_type, nodepool

TYPES = {"default": [make_type(f"{f}{c}", c, m * c, price=p * c)
                     for f, m, p in (("c", 2, 0.04), ("m", 4, 0.05), ("r", 8, 0.065)) for c in (1, 2, 4, 8, 16)]}
REPACK = DisruptionMethod.REPACK_CONSOLIDATION


def mkpod(name: str, node: str, cpu: str, mem: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"rs-{cpu}-{mem}", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
            "status": {"phase": "Running"}}


def snap(pods: list[dict[str, Any]], claims: list[dict[str, Any]] = ()) -> ClusterSnapshot:  # type: ignore[assignment]
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    node, claim = node_and_claim("a", "r8", 8, pool=pool)
    node["status"]["allocatable"]["memory"] = "64Gi"
    return ClusterSnapshot(nodes=[node], nodeclaims=[claim, *claims], nodepools=[pool], pods=pods)


# 4 pods, 4.5 cores, 36 GiB: the sized plan is r4 (4 cores, 32 GiB) + r1 (1 core, 8 GiB), 0.325 USD/h,
# with the 1-core 6 GiB pod alone on r1. kube-scheduler takes the pods by cpu then memory, largest
# first: with r4 first by name, 1.5/12, 1.5/6 and 1/6 fill r4's 4 cores, and the 0.5-core 12 GiB
# pod fits r1's 8 GiB nowhere.
TIGHT = [("1500m", "6Gi"), ("500m", "12Gi"), ("1500m", "12Gi"), ("1", "6Gi")]


def tight() -> ClusterSnapshot:
    return snap([mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(TIGHT)])


def unchecked_plan(s: ClusterSnapshot, monkeypatch: pytest.MonkeyPatch):
    """The repack's plan without the kube-scheduler check (what it decided before issue 34)."""
    with monkeypatch.context() as m:
        m.setattr(repack, "_kube_misfit", lambda *a: None)
        return plan_disruption(s, TYPES, NOW)


def test_a_tight_memory_repack_kube_scheduler_cannot_reproduce_is_not_taken(monkeypatch):
    s = tight()
    before = unchecked_plan(s, monkeypatch)
    assert before is not None and before.method is REPACK
    assert sorted(r.instance_types[0].name for r in before.replacements) == ["r1", "r4"]
    # kube-scheduler's placement of the moved pods leaves the 12 GiB half-core pod pending
    sim = SimulationContext(s, TYPES)
    pods = sim.pod_infos(before.candidates[0])
    assert not isinstance(pods, str)
    miss = moved_pods_fit([], [], pods, before.replacements)
    assert miss is not None and miss[0] == "default/p1"
    # and that is the order kube-scheduler takes: replacements r4 then r1 by name
    nodes = [replacement_node(r, f"n{i}") for i, r in enumerate(sorted(before.replacements, key=lambda r: -len(r.pods)))]
    assert set(kube_schedule(nodes, [], pods).errors) == {"default/p1"}

    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None and plan.method is REPACK
    # a roomier run is taken instead: dearer, still within the threshold, and kube-scheduler places every pod
    assert plan.move_key() != before.move_key()
    assert plan.replacement_price > before.replacement_price
    assert moved_pods_fit([], [], pods, plan.replacements) is None


def test_a_repack_with_no_reproducible_run_is_kept_with_the_reason(monkeypatch):
    # 7 pods, 7.5 cores, 33 GiB: every run that saves 10 % packs them as kube-scheduler does not
    pods = [mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(
        [("1", "12Gi"), ("1", "12Gi"), ("2", "1Gi"), ("1500m", "3Gi"), ("250m", "3Gi"), ("250m", "5Gi"), ("1500m", "3Gi")])]
    s = snap(pods)
    assert unchecked_plan(s, monkeypatch) is not None
    log: list[NodeDecision] = []
    assert plan_disruption(s, TYPES, NOW, log=log) is None
    line = next(d for d in log if d.node == "a" and d.method is REPACK)
    assert line.kind is DecisionKind.KUBE_SCHEDULER_MISFIT


def _pending_again() -> dict:
    """The replica of ``p1`` made again after the move: unbound, Unschedulable."""
    pending = mkpod("p1-again", "", "500m", "12Gi")
    del pending["spec"]["nodeName"]
    pending["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return pending


def _claim(name: str, created: float) -> dict:
    """A NodeClaim of NodePool ``default`` created at ``created`` (epoch seconds)."""
    return {"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "creationTimestamp": iso(created)},
            "spec": {}, "status": {}}


def test_an_undone_move_is_not_repeated_until_the_workload_changes():
    s = tight()
    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None and plan.method is REPACK
    moves = UndoneMoves()
    moves.executed(plan, s, NOW)
    moves.replacements_created(["a"], ["default-r1", "default-r2"])
    moves.finished(["a"], NOW + 60)
    # the pods were evicted; one was made again and is pending; the provisioner launched a node for it
    pending = _pending_again()
    launched = _claim("default-new", NOW + 90)
    after = snap([mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(TIGHT) if i != 1] + [pending], [launched])
    fingerprint = workload_fingerprint(after, {"default": "types-v1"})
    # a launch for pods of other owners is not this move's undoing
    assert moves.observe(after, NOW + 100, lambda claim: [], fingerprint) == []
    undone = moves.observe(after, NOW + 100, lambda claim: ["default/p1-again"] if claim == "default-new" else [], fingerprint)
    assert [(u.nodeclaim, u.pods, u.method) for u in undone] == [("default-new", ("default/p1-again",), REPACK)]
    assert moves.observe(after, NOW + 110, None, fingerprint) == []  # reported once
    # the replicas made again have the shapes of the pods they replace: the same workload
    assert workload_fingerprint(s, {"default": "types-v1"}) == fingerprint
    avoid = moves.avoid(fingerprint)
    assert avoid == {plan.move_key()}
    log: list[NodeDecision] = []
    again = plan_disruption(s, TYPES, NOW + 200, log=log, avoid=avoid)
    assert again is None or again.move_key() != plan.move_key()
    assert any(d.node == "a" and d.kind is DecisionKind.UNDONE_BEFORE for d in log)
    # new offerings (or a scaled Deployment) change the fingerprint: the move may be tried again
    assert moves.avoid(workload_fingerprint(s, {"default": "types-v2"})) == frozenset()
    assert moves.avoid(fingerprint) == frozenset()


def test_a_moved_pod_waiting_for_another_commands_replacement_is_no_undone_move():
    """undone36: a later command replaced the node a moved pod was heading for; the provisioner
    nominated the pending pod to that command's in-flight replacement. Disruption launched it,
    not the pending pod: no node was launched for the move (the first fit stand-in's 1 undone of
    the 1,000-pod scale-in at depth 1, a t7-web pod)."""
    import dataclasses

    s = tight()
    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None
    moves = UndoneMoves()
    moves.executed(plan, s, NOW)
    moves.finished(["a"], NOW + 60)
    pending = _pending_again()
    other = _claim("default-other-r1", NOW + 90)
    after = snap([mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(TIGHT) if i != 1] + [pending], [other])
    nominated = lambda claim: ["default/p1-again"] if claim == "default-other-r1" else []  # noqa: E731
    # the later command (other nodes, other pods), whose replacement default-other-r1 is
    later = dataclasses.replace(moves._moves[0], key="later", nodes=["z"], owners=frozenset(), started=NOW + 80,
                                replacements=["default-other-r1"], done_at=None)
    moves._moves.append(later)
    assert moves.observe(after, NOW + 100, nominated, "fp") == []
    moves._moves.remove(later)  # without it, the same claim is a launch for the moved pod
    assert [u.nodeclaim for u in moves.observe(after, NOW + 100, nominated, "fp")] == ["default-other-r1"]


def test_a_launch_for_a_grown_owner_is_not_an_undone_move():
    """A Deployment scaled up after the command: its new replicas are pending for their own reason, and
    the node launched for them undoes nothing (the scale benchmark's second scale-up counted 19 undone
    moves that were new replicas); a launch for the moved pod itself while the owner kept its size
    still is one."""
    s = tight()
    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None
    moves = UndoneMoves()
    moves.executed(plan, s, NOW)
    moves.finished(["a"], NOW + 60)

    def pending_pod(name: str) -> dict[str, Any]:
        pod = mkpod(name, "", "500m", "12Gi")
        del pod["spec"]["nodeName"]
        pod["status"] = {"phase": "Pending",
                         "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        return pod

    launched = _claim("default-new", NOW + 90)
    kept = [mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(TIGHT) if i != 1]
    grown = snap([*kept, pending_pod("p1-again"), pending_pod("p1-new")], [launched])
    both = ["default/p1-again", "default/p1-new"]
    assert moves.observe(grown, NOW + 100, lambda claim: both, "fp") == []
    same_size = snap([*kept, pending_pod("p1-again")], [launched])
    undone = moves.observe(same_size, NOW + 110, lambda claim: ["default/p1-again"], "fp")
    assert [(u.nodeclaim, u.pods) for u in undone] == [("default-new", ("default/p1-again",))]


def test_replacements_are_protected_while_the_moved_pods_are_on_their_way():
    s = tight()
    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None
    moves = UndoneMoves()
    moves.executed(plan, s, NOW)
    moves.replacements_created(["a"], ["default-r1", "default-r2"])
    # the candidate node is still there (draining): both replacements are nominated
    assert moves.protected(s, NOW + 600) == {"default-r1": NOW + 600, "default-r2": NOW + 600}
    # node gone, no pod of the moved owners pending: nothing to protect
    gone = ClusterSnapshot(nodes=[], nodeclaims=[], nodepools=s.nodepool_views,
                           pods=[mkpod(f"p{i}", "default-r1", c, m) for i, (c, m) in enumerate(TIGHT)])
    assert moves.protected(gone, NOW + 600) == {}


def test_an_empty_replacement_is_not_taken_while_its_pods_are_on_their_way():
    s = tight()
    plan = plan_disruption(s, TYPES, NOW)
    assert plan is not None
    moves = UndoneMoves()
    moves.executed(plan, s, NOW)
    moves.replacements_created(["a"], ["r"])
    # the replacement is Initialized and still empty; "a" is being drained
    pool = s.nodepool_views[0]
    node, claim = node_and_claim("r", "r4", 4, pool=pool.raw)
    base = snap([mkpod(f"p{i}", "a", c, m) for i, (c, m) in enumerate(TIGHT)])
    during = ClusterSnapshot(nodes=[*(n.raw for n in base.node_views), node], nodeclaims=[*(c.raw for c in base.nodeclaim_views), claim],
                             nodepools=base.nodepool_views, pods=base.pod_views)
    unprotected = plan_disruption(during, TYPES, NOW + 60, methods=["emptiness"])
    assert unprotected is not None and [c.name for c in unprotected.candidates] == ["r"]  # what emptiness would do
    log: list[NodeDecision] = []
    assert plan_disruption(during, TYPES, NOW + 60, methods=["emptiness"], log=log,
                           nominated=moves.protected(during, NOW + 660)) is None
    assert any(d.node == "r" and d.kind is DecisionKind.NOMINATED for d in log)
