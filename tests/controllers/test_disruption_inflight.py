"""Issue 36, "a disruption the next launch undoes is a bug": the pods of an executed command that
have not moved yet (its candidates tainted ``karpenter.sh/disrupted:NoSchedule`` while the
replacement initializes, or deleting while they drain) are part of every later simulation, as in
Karpenter's ``SimulateScheduling`` (``helpers.go``: the ``CurrentlyReschedulablePods`` of
``nodes.Deleting()`` join the pods to schedule, and their old places are not counted for
topology). Before, karpy planned the next command as if those pods had nowhere to go: it gave
the room they were bound for to its own candidates' pods, and once both commands' pods were
evicted one of them was left pending and the provisioner launched a node for it (the 1,000-pod
scale-in of docs/scale.md: 8 such launches, right after multi-node commands)."""

from __future__ import annotations

from typing import Any

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.controllers.disruption.decisions import DecisionKind, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption, validate_plan
from karpy_core.controllers.disruption.simulation import SimulationContext, evaluate, leaving_nodes
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import iso
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim, pod
from tests.scheduling.helpers import nodepool

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def _pool() -> dict[str, Any]:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    return pool


def _cluster(pods: list[dict[str, Any]], *, tainted: str | None = None, deleting: str | None = None,
             zones: dict[str, str] | None = None, names: tuple[str, ...] = ("x", "y", "z")) -> ClusterSnapshot:
    """Nodes ``names`` (large, 8 cpu, zone-a unless ``zones`` says), ``tainted`` carrying
    ``karpenter.sh/disrupted:NoSchedule`` (an executed command's candidate), ``deleting`` also
    with its NodeClaim deleting (draining)."""
    pool = _pool()
    nodes, claims = [], []
    for name in names:
        node, claim = node_and_claim(name, pool=pool)
        if zones and name in zones:
            for obj in (node, claim):
                obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = zones[name]
        if name == tainted:
            node["spec"]["taints"] = [dict(DISRUPTED)]
        if name == deleting:
            claim["metadata"]["deletionTimestamp"] = iso(NOW - 5)
            node["spec"]["taints"] = [dict(DISRUPTED)]
        nodes.append(node)
        claims.append(claim)
    return ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=[pool], pods=pods)


def _room_pods() -> list[dict[str, Any]]:
    """x (leaving) holds 5 cpu that only z's 6 free cpu can take; y holds 5 cpu too."""
    return [pod("px", "x", cpu="5"), pod("py", "y", cpu="5"), pod("pz", "z", cpu="2")]


def test_the_pods_of_a_tainted_command_keep_the_room_they_are_bound_for():
    snap = _cluster(_room_pods(), tainted="x")
    assert leaving_nodes(snap) == {"x"}
    log: list[NodeDecision] = []
    # x is in an executed command (the controller excludes it); before the fix y was deleted
    # (its 5 cpu "fit" on z), and px, evicted once x's replacement is up, found z full
    plan = plan_disruption(snap, TYPES, NOW, log=log, exclude=frozenset({"x"}))
    assert plan is None, plan and plan.describe()
    assert any(d.node == "y" and d.kind is DecisionKind.NOT_CHEAPER for d in log)
    # without the earlier command the same cluster consolidates: y's pod fits on z
    free = _cluster(_room_pods())
    plan = plan_disruption(free, TYPES, NOW, exclude=frozenset({"x"}))
    assert plan is not None and plan.decision == "delete" and [c.name for c in plan.candidates] == ["y"]


def test_the_pods_of_a_draining_node_count_as_well():
    snap = _cluster(_room_pods(), deleting="x")
    assert leaving_nodes(snap) == {"x"}
    assert plan_disruption(snap, TYPES, NOW) is None


def test_validation_rejects_a_command_decided_before_the_earlier_one_started():
    """A command decided on a quiet cluster is re-simulated after the validation delay: an earlier
    command executed meanwhile whose pods need the same room makes it invalid."""
    plan = plan_disruption(_cluster(_room_pods()), TYPES, NOW, exclude=frozenset({"x"}))
    assert plan is not None and [c.name for c in plan.candidates] == ["y"]
    why = validate_plan(_cluster(_room_pods(), tainted="x"), TYPES, NOW + 15, plan)
    assert why is not None and why.kind is DecisionKind.NOT_CHEAPER, why


def test_leaving_pods_may_land_on_the_earlier_commands_uninitialized_replacement():
    """Karpenter exempts the pods of deleting nodes from the not-initialized check: they are bound
    for the earlier command's replacement, which comes up before its candidates drain."""
    pool = _pool()
    repl = {"metadata": {"name": "r", "labels": {"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "zone-a",
                                                  "karpenter.sh/capacity-type": "on-demand",
                                                  "node.kubernetes.io/instance-type": "large"},
                         "creationTimestamp": iso(NOW - 5),
                         "annotations": {"karpenter.sh/nodepool-hash": nodepool_hash(pool),
                                         "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
            "spec": {"resources": {"requests": {"cpu": "5", "memory": "1Gi", "pods": "1"}}}, "status": {}}
    pods = [pod("px", "x", cpu="5"), pod("py", "y", cpu="4"), pod("pz", "z", cpu="4")]  # z has room for py, not px
    snap = _cluster(pods, tainted="x")
    snap = ClusterSnapshot(nodes=snap.node_views, nodeclaims=[*snap.nodeclaim_views, repl], nodepools=snap.nodepool_views,
                           pods=snap.pod_views)
    ctx = SimulationContext(snap, TYPES)
    ev = evaluate(ctx, [c for c in _candidates(snap) if c.name == "y"], consolidation=True)
    assert ev.ok and not ev.replacements, ev.why  # px on r (not initialized: exempt), py on z


def _candidates(snap: ClusterSnapshot) -> list[Any]:
    from karpy_core.controllers.disruption.candidates import build_candidates

    return build_candidates(snap, TYPES, NOW)
