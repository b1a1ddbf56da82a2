"""Disruption planner, budgets, expiration and the tiered drain, on hand-built snapshots."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.apis.nodepool import Budget
from karpy_core.controllers.disruption.budgets import allowed_disruptions, budget_active, budget_nodes
from karpy_core.controllers.disruption.decisions import NodeDecision
from karpy_core.controllers.disruption.expiration import expired_nodeclaims
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import NodeClaimView
from karpy_core.utils.clock import VirtualClock, iso
from tests.fakes import must_peek
from tests.scheduling.helpers import make_type, nodepool

NOW = 1767225600.0 + 3 * 3600  # 2026-01-01T03:00:00Z
TYPES = {"default": [make_type("small", 2, 4), make_type("large", 8, 16)]}


def node_and_claim(name, itype="large", cpu=8, *, pool=None):
    pool = pool or nodepool()
    labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": itype,
              "topology.kubernetes.io/zone": "zone-a", "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/hostname": name,
              "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}
    node = {"metadata": {"name": name, "labels": labels, "resourceVersion": "1"},
            "spec": {"providerID": f"fake:///{name}"},
            "status": {"allocatable": {"cpu": str(cpu), "memory": f"{2 * cpu}Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}
    claim = {"metadata": {"name": name, "labels": dict(labels), "creationTimestamp": iso(NOW - 7200),
                          "annotations": {"karpenter.sh/nodepool-hash": nodepool_hash(pool), "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
             "spec": {"expireAfter": "720h"},
             "status": {"providerID": f"fake:///{name}", "nodeName": name, "capacity": {"cpu": str(cpu)},
                        "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": iso(NOW - 3600)}]}}
    return node, claim


def pod(name, node, cpu="500m", annotations=None, labels=None):
    return {"metadata": {"name": name, "namespace": "default", "labels": labels or {"app": "web"}, "annotations": annotations or {},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "controller": True}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]},
            "status": {"phase": "Running"}}


def snapshot(nodes: Iterable[str | tuple[str, str] | tuple[str, str, int]], pods, pool=None, pdbs=()):
    pool = pool or nodepool()
    pool.setdefault("spec", {}).setdefault("disruption", {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]})
    pairs = [node_and_claim(*n, pool=pool) if isinstance(n, tuple) else node_and_claim(n, pool=pool) for n in nodes]
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool], pods=pods, pdbs=list(pdbs))


def relabel(snap: ClusterSnapshot, **labels: str) -> ClusterSnapshot:
    """``snap`` with ``labels`` added to its first Node and NodeClaim (views are parsed once:
    a changed object is a new snapshot)."""
    import copy

    nodes = [copy.deepcopy(n.raw) for n in snap.node_views]
    claims = [copy.deepcopy(c.raw) for c in snap.nodeclaim_views]
    nodes[0]["metadata"]["labels"].update(labels)
    claims[0]["metadata"]["labels"].update(labels)
    return ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=snap.nodepool_views, pods=snap.pod_views, pdbs=snap.pdbs)


def test_budget_rounding_and_windows():
    assert budget_nodes(Budget(nodes="10%"), 15) == 2 and budget_nodes(Budget(nodes="3"), 15) == 3
    window = Budget(nodes="0", schedule="0 1 * * *", duration="2h")
    assert budget_active(window, 1767225600.0 + 3600 + 60)
    assert not budget_active(window, 1767225600.0 + 3 * 3600 + 1)
    budgets = [window, Budget(nodes="50%")]
    assert allowed_disruptions(budgets, "Empty", 1767225600.0 + 2 * 3600, total=4, disrupting=0) == 0
    assert allowed_disruptions(budgets, "Empty", 1767225600.0 + 4 * 3600, total=4, disrupting=1) == 1
    reasons = [Budget(nodes="0", reasons=["Drifted"])]
    assert allowed_disruptions(reasons, "Drifted", NOW, total=4, disrupting=0) == 0
    assert allowed_disruptions(reasons, "Empty", NOW, total=4, disrupting=0) == 4
    assert allowed_disruptions([], "Empty", NOW, total=15, disrupting=0) == 2  # none set: the default 10%


def test_empty_node_is_deleted_and_the_log_says_why():
    log: list[NodeDecision] = []
    snap = snapshot(["a", "b"], [pod("p1", "a")])
    plan = plan_disruption(snap, TYPES, NOW, log=log)
    assert plan is not None
    assert plan.method == "emptiness" and [c.name for c in plan.candidates] == ["b"] and plan.decision == "delete"
    assert any(d.node == "b" and d.verdict == "disrupt" for d in log)


def test_consolidate_after_not_elapsed_keeps_empty_node():
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "2h", "budgets": [{"nodes": "100%"}]}
    log: list[NodeDecision] = []
    assert plan_disruption(snapshot(["a"], [], pool), TYPES, NOW, log=log) is None
    assert any("consolidatable in 3600s" in d.reason for d in log)


def test_underutilized_large_node_is_replaced_by_a_cheaper_one():
    plan = plan_disruption(snapshot(["a"], [pod("p1", "a")]), TYPES, NOW)
    assert plan is not None
    assert plan.method == "single-node-consolidation" and plan.decision == "replace"
    assert [it.name for it in plan.replacements[0].instance_types] == ["small"]
    assert plan.savings_per_hour > 0


def test_pods_fit_elsewhere_multi_node_delete():
    plan = plan_disruption(snapshot(["a", "b", "c"], [pod("p1", "a"), pod("p2", "b"), pod("p3", "c")]), TYPES, NOW)
    # the largest valid prefix wins: all three large nodes go, replaced by one small node
    assert plan is not None
    assert plan.method == "multi-node-consolidation" and len(plan.candidates) == 3
    assert plan.decision == "replace" and plan.replacements[0].instance_types[0].name == "small"


def pending_pod(name, cpu="500m", node_selector=None):
    p = pod(name, None, cpu=cpu)
    p["spec"].pop("nodeName")
    if node_selector:
        p["spec"]["nodeSelector"] = node_selector
    p["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return p


def test_pending_pods_hold_consolidation_only_when_they_can_be_placed():
    bound = [pod("p1", "a")]
    log: list[NodeDecision] = []
    waiting = snapshot(["a"], [*bound, pending_pod("new")])
    assert plan_disruption(waiting, TYPES, NOW, log=log) is None
    assert any("default/new" in d.reason and "waits for provisioning" in d.reason for d in log)
    # a pod no NodePool can ever run (typo'd selector) must not stop consolidation for good
    stuck = snapshot(["a"], [*bound, pending_pod("typo", node_selector={"node.kubernetes.io/instance-type": "m9.huge"})])
    plan = plan_disruption(stuck, TYPES, NOW)
    assert plan is not None and plan.method == "single-node-consolidation" and plan.decision == "replace"


def test_do_not_disrupt_and_pdb_block_voluntary_disruption():
    log: list[NodeDecision] = []
    snap = snapshot(["a"], [pod("p1", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})])
    assert plan_disruption(snap, TYPES, NOW, log=log) is None
    assert any("do-not-disrupt" in d.reason for d in log)
    pdb = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}
    log = []
    assert plan_disruption(snapshot(["a"], [pod("p1", "a")], pdbs=[pdb]), TYPES, NOW, log=log) is None
    assert any("PodDisruptionBudget web allows 0" in d.reason for d in log)


def test_drift_by_hash_and_by_requirements():
    pool = nodepool()
    snap = snapshot(["a"], [pod("p1", "a", cpu="7")], pool)
    pool["spec"]["template"]["metadata"]["labels"] = {"team": "blue"}  # template changed after launch
    plan = plan_disruption(snap, TYPES, NOW, methods=("drift",))
    assert plan is not None
    assert plan.method == "drift" and len(plan.replacements) == 1
    pool2 = nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}])
    snap2 = snapshot(["a"], [pod("p1", "a")], pool2)
    plan2 = plan_disruption(snap2, TYPES, NOW, methods=("drift",))
    assert plan2 is not None and "requirements no longer satisfied" in plan2.candidates[0].drifted


def test_expiration_lists_old_claims_only():
    old = {"metadata": {"name": "old", "creationTimestamp": iso(NOW - 3 * 3600)}, "spec": {"expireAfter": "2h"}}
    new = {"metadata": {"name": "new", "creationTimestamp": iso(NOW - 3600)}, "spec": {"expireAfter": "2h"}}
    never = {"metadata": {"name": "never", "creationTimestamp": iso(NOW - 9e6)}, "spec": {"expireAfter": "Never"}}
    assert [n for n, _ in expired_nodeclaims(map(NodeClaimView.of, [old, new, never]), NOW)] == ["old"]


async def test_termination_drains_tier_by_tier_and_forces_after_tgp():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, claim = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    claim["spec"]["terminationGracePeriod"] = "10m"
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("web", "a"))
    cluster.create_sync("Pod", pod("dnd", "a", annotations={"karpenter.sh/do-not-disrupt": "true"}))
    dsp = pod("ds", "a")
    dsp["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds"}]
    cluster.create_sync("Pod", dsp)
    crit = pod("crit", "a")
    crit["spec"]["priorityClassName"] = "system-node-critical"
    cluster.create_sync("Pod", crit)
    cluster.delete_sync("Node", "a")
    term = NodeTermination(kube=cluster, clock=clock)
    ev = await term.reconcile()
    assert [(e.kind, e.pod) for e in ev if e.kind in ("evict", "drain-wait")] == [("drain-wait", "default/dnd"), ("evict", "default/web")]
    assert cluster.peek("Pod", "ds") is not None and cluster.peek("Pod", "crit") is not None
    assert term.wake == NOW + 600 - 30
    clock.advance(600 - 30)
    ev = await term.reconcile()
    assert ("force-delete", "default/dnd") in [(e.kind, e.pod) for e in ev]
    kinds = [(e.kind, e.pod) for e in ev]
    for _ in range(4):
        kinds += [(e.kind, e.pod) for e in await term.reconcile()]
    gone = [pod for kind, pod in kinds if kind in ("evict", "force-delete")]
    assert gone == ["default/dnd", "default/ds", "default/crit"]  # past the deadline: forced, still tier by tier
    assert ("node-finalized", "") in kinds and cluster.peek("Node", "a") is None


async def test_drain_retries_an_eviction_refused_by_a_pdb_after_karpenters_backoff():
    """A 429 leaves the pod for a retry 100 ms later, then 200 ms, ... (Karpenter
    ``terminator/eviction.go`` rate limiter, 100 ms to 10 s); ``wake`` names the retry."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, _ = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    for name in ("web-0", "web-1"):
        p = pod(name, "a")
        p["metadata"]["ownerReferences"] = []
        p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
        cluster.create_sync("Pod", p)
    cluster.create_sync("PodDisruptionBudget", {"metadata": {"name": "web", "namespace": "default"},
                                                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
    cluster.delete_sync("Node", "a")
    term = NodeTermination(kube=cluster, clock=clock)
    ev = [(e.kind, e.pod) for e in await term.reconcile()]
    assert ev == [("evict", "default/web-0"), ("evict-blocked", "default/web-1")]
    assert term.wake == NOW + 0.1
    assert [e.kind for e in await term.reconcile()] == []  # before the backoff ends: no new attempt
    clock.advance(0.1)
    assert [(e.kind, e.reason.split("; ")[-1]) for e in await term.reconcile()] == [
        ("evict-blocked", "The disruption budget web needs 1 healthy pods and has 1 currently")]
    assert term.wake == pytest.approx(NOW + 0.1 + 0.2)
    p = pod("web-2", "b")  # the replacement, Ready elsewhere
    p["metadata"]["ownerReferences"] = []
    p["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    cluster.create_sync("Pod", p)
    clock.advance_to(term.wake)
    assert [(e.kind, e.pod) for e in await term.reconcile()] == [("evict", "default/web-1"), ("node-finalized", "")]
    assert cluster.evictions == ["default/web-0", "default/web-1"]


def test_planner_judges_pdbs_as_the_eviction_api_does():
    """pdb_blocker uses kube-apiserver's verdict (eviction.go): an unready pod under an
    ``AlwaysAllow`` PDB does not block even at 0 disruptions allowed; a pod two PDBs select does
    block (the Eviction API answers 500) even when both allow disruptions."""
    spent = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 2}
    unready = pod("p1", "a")
    unready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    always = {"metadata": {"name": "web", "namespace": "default", "generation": 1}, "status": spent,
              "spec": {"maxUnavailable": 0, "unhealthyPodEvictionPolicy": "AlwaysAllow", "selector": {"matchLabels": {"app": "web"}}}}
    log: list = []
    plan = plan_disruption(snapshot(["a"], [unready], pdbs=[always]), TYPES, NOW, log=log)
    assert plan is not None and [c.name for c in plan.candidates] == ["a"]
    assert not any("PodDisruptionBudget" in d.reason for d in log)
    ready = pod("p1", "a")
    ready["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    roomy = {**spent, "disruptionsAllowed": 1, "currentHealthy": 2}
    two = [{"metadata": {"name": n, "namespace": "default", "generation": 1}, "status": roomy,
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "web"}}}} for n in ("a-pdb", "b-pdb")]
    log = []
    assert plan_disruption(snapshot(["a"], [ready], pdbs=two), TYPES, NOW, log=log) is None
    assert any("more than one PodDisruptionBudget selects it" in d.reason for d in log)


async def test_drain_leaves_pods_that_tolerate_the_disrupted_taint():
    """Karpenter's IsDrainable (pkg/utils/pod/scheduling.go) skips pods tolerating
    karpenter.sh/disrupted:NoSchedule: they would reschedule onto the node, so they are neither
    evicted nor waited for."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, claim = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("web", "a"))
    keyed = pod("keyed", "a")
    keyed["spec"]["tolerations"] = [{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}]
    cluster.create_sync("Pod", keyed)
    everything = pod("everything", "a")
    everything["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds"}]
    everything["spec"]["tolerations"] = [{"operator": "Exists"}]
    cluster.create_sync("Pod", everything)
    other_effect = pod("noexec-only", "a")
    other_effect["spec"]["tolerations"] = [{"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoExecute"}]
    cluster.create_sync("Pod", other_effect)
    cluster.delete_sync("Node", "a")
    term = NodeTermination(kube=cluster, clock=clock)
    kinds = []
    for _ in range(4):
        kinds += [(e.kind, e.pod) for e in await term.reconcile()]
    evicted = sorted(p for k, p in kinds if k == "evict")
    assert evicted == ["default/noexec-only", "default/web"]
    assert ("node-finalized", "") in kinds and cluster.peek("Node", "a") is None
    assert cluster.peek("Pod", "keyed") is not None and cluster.peek("Pod", "everything") is not None


def test_nodepool_usage_frees_deleting_claims_and_counts_unlaunched_ones():
    """Karpenter's NodePool usage (pkg/controllers/state/cluster.go updateNodePoolResources, and
    its test "should update nodepool resources when node is terminating") drops a NodeClaim once
    it is deleting, and the provisioner schedules against nodes.Active() only: limits do not count
    a draining node. A NodeClaim not launched yet counts with its requests."""
    from karpy_core.state.cluster import nodepool_usage

    _, live = node_and_claim("live", cpu=8)
    _, deleting = node_and_claim("deleting", cpu=8)
    deleting["metadata"]["deletionTimestamp"] = iso(NOW)
    unlaunched = {"metadata": {"name": "new", "labels": {"karpenter.sh/nodepool": "default"}},
                  "spec": {"resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}}
    usage = nodepool_usage(ClusterSnapshot(nodes=[], nodeclaims=[live, deleting, unlaunched], nodepools=[nodepool()], pods=[]))
    assert usage == {"default": {"cpu": 9500, "memory": 1024**3, "nodes": 2}}


def test_nominated_node_is_not_a_candidate_until_the_nomination_ends():
    """Karpenter ValidateNodeDisruptable: "node is nominated for a pending pod" (statenode.go)."""
    log: list[NodeDecision] = []
    snap = snapshot(["a", "b"], [])
    plan = plan_disruption(snap, TYPES, NOW, log=log, nominated={"a": NOW + 20, "b-claim": NOW + 5})
    assert plan is not None and [c.name for c in plan.candidates] == ["b"]
    assert any(d.node == "a" and d.verdict == "keep" and "nominated for a pending pod" in d.reason for d in log)
    # nominated by NodeClaim name (a claim that had no node when the pods were placed on it)
    snap = snapshot(["a"], [])
    assert plan_disruption(snap, TYPES, NOW, nominated={snap.nodeclaim_views[0].name: NOW + 1}) is None
    ended = plan_disruption(snap, TYPES, NOW, nominated={"a": NOW})
    assert ended is not None and ended.candidates[0].name == "a"  # the nomination ended


async def test_node_chosen_for_a_pending_pod_is_not_disrupted_as_empty():
    """The provisioner places a pending pod on an initialized, still empty node (kube-scheduler has
    not bound it yet); the disruption pass right after must not call that node empty."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.controllers.disruption import Disruption
    from karpy_core.controllers.provisioning.provisioner import Provisioner
    from karpy_core.state.nominations import Nominations

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    waiting = pod("web", None)
    waiting["spec"].pop("nodeName")
    waiting["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    cluster.create_sync("Pod", waiting)
    provider = load_provider("simulated", {})
    nominations = Nominations()
    result = await Provisioner(kube=cluster, provider=provider, nominations=nominations, clock=clock).reconcile()
    assert result.results is not None
    assert result.results.existing == {"default/web": "a"} and not result.created
    disruption = Disruption(kube=cluster, provider=provider, clock=clock, nominations=nominations)
    events = await disruption.reconcile()
    assert not [e for e in events if e.kind == "disrupt-decided"]
    assert any("nominated for a pending pod" in line for line in disruption.explain("a"))
    clock.advance(21)  # the pod never came: the nomination ends and the node is empty again
    events = await disruption.reconcile()
    assert [e.kind for e in events if e.kind == "disrupt-decided"] == ["disrupt-decided"]


async def test_drain_stops_waiting_for_a_pod_stuck_terminating():
    """Karpenter's IsDrainable skips pods stuck terminating (pkg/utils/pod/scheduling.go
    IsStuckTerminating: deletionTimestamp more than a minute past): a pod whose kubelet is gone
    never leaves, and must not hold the Node (node repair deletes such nodes)."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, _ = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    stuck = pod("stuck", "a")
    stuck["metadata"]["finalizers"] = ["example.com/kubelet-gone"]  # nothing will ever remove it
    cluster.create_sync("Pod", stuck)
    cluster.delete_sync("Pod", "stuck", "default")
    assert must_peek(cluster, "Pod", "stuck", "default")["metadata"]["deletionTimestamp"]
    cluster.delete_sync("Node", "a")
    term = NodeTermination(kube=cluster, clock=clock)
    assert [e.kind for e in await term.reconcile()] == []  # still terminating: the drain waits
    clock.advance(60)
    assert [e.kind for e in await term.reconcile()] == []  # not past the minute yet
    clock.advance(1)
    assert [e.kind for e in await term.reconcile()] == ["node-finalized"]
    assert cluster.peek("Node", "a") is None and cluster.peek("Pod", "stuck", "default") is not None


def test_decision_log_is_typed_and_validation_says_why_as_a_kind():
    """Every decision line carries its method (or stage), verdict and reason kind as enums whose
    values are the old text; validate_plan answers with a kind too."""
    from karpy_core.controllers.disruption import (
        DecisionKind,
        DecisionStage,
        DisruptionMethod,
        DisruptionReason,
        Verdict,
        validate_plan,
    )

    log: list[NodeDecision] = []
    snap = snapshot(["a", "b"], [pod("p1", "a")])
    plan = plan_disruption(snap, TYPES, NOW, log=log)
    assert plan is not None
    assert plan.method is DisruptionMethod.EMPTINESS and plan.reason is DisruptionReason.EMPTY
    assert plan.decision is DecisionKind.DELETE and plan.reason.metric_label == "empty"
    disrupt = [d for d in log if d.verdict is Verdict.DISRUPT]
    assert [(d.node, d.method, d.kind) for d in disrupt] == [("b", DisruptionMethod.EMPTINESS, DecisionKind.DELETE)]
    assert disrupt[0].text() == "[emptiness] disrupt: delete (Empty) (nodes=1, price=0.4, replacement_price=0.0)"
    assert disrupt[0].to_dict()["kind"] == "delete" and disrupt[0].to_dict()["details"]["nodes"] == 1
    # the node gained a pod meanwhile: the command no longer holds
    busy = snapshot(["a", "b"], [pod("p1", "a"), pod("p2", "b")])
    why = validate_plan(busy, TYPES, NOW, plan)
    assert why is not None and why.kind is DecisionKind.NO_LONGER_EMPTY and "no longer empty" in why.message
    assert validate_plan(snap, TYPES, NOW, plan) is None

    log = []
    assert plan_disruption(snapshot(["a"], [pod("p1", "a"), pending_pod("new")]), TYPES, NOW, log=log) is None
    assert [(d.method, d.kind) for d in log] == [(DisruptionMethod.MULTI_NODE_CONSOLIDATION, DecisionKind.PENDING_PODS)]
    log = []
    plan_disruption(snapshot(["a"], [pod("p1", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]), TYPES, NOW, log=log)
    assert [(d.method, d.verdict, d.kind) for d in log] == [(DecisionStage.CANDIDATE, Verdict.KEEP, DecisionKind.DO_NOT_DISRUPT)]
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "2h", "budgets": [{"nodes": "100%"}]}
    log = []
    plan_disruption(snapshot(["a"], [], pool), TYPES, NOW, log=log)
    assert [d.kind for d in log] == [DecisionKind.NOT_CONSOLIDATABLE_YET]
    with pytest.raises(ValueError, match="unknown disruption method 'tidy'"):
        plan_disruption(snap, TYPES, NOW, methods=("tidy",))


def test_every_method_satisfies_the_protocol_in_karpenters_order_then_the_repack():
    from karpy_core.controllers.disruption.decisions import DisruptionMethod, DisruptionReason
    from karpy_core.controllers.disruption.methods import DEFAULT_ORDER, Method, build_methods
    from karpy_core.controllers.disruption.methods.consolidation_single import SingleNodeConsolidation

    methods: dict[DisruptionMethod, Method] = build_methods(max_single_simulations=3)
    assert list(methods) == list(DEFAULT_ORDER) == list(DisruptionMethod)
    assert [m.reason for m in methods.values()] == [DisruptionReason.EMPTY, DisruptionReason.DRIFTED, DisruptionReason.DRIFTED,
                                                     DisruptionReason.UNDERUTILIZED, DisruptionReason.UNDERUTILIZED,
                                                     DisruptionReason.UNDERUTILIZED]
    assert [m.consolidation for m in methods.values()] == [False, False, False, True, True, True]
    assert list(methods)[-1] is DisruptionMethod.REPACK_CONSOLIDATION
    single = methods[DisruptionMethod.SINGLE_NODE_CONSOLIDATION]
    assert isinstance(single, SingleNodeConsolidation) and single.max_simulations == 3


async def test_instance_types_are_asked_again_until_the_nodeclass_is_ready_and_on_a_timer():
    """Issue 29: the AWS plugin answers [] while the EC2NodeClass is not Ready; the disruption
    controller kept that answer until the NodePool changed, and priced every node at 0."""
    from karpy_core.controllers.disruption import Disruption
    from karpy_core.controllers.instancetypes import INSTANCE_TYPES_REFRESH

    class LateNodeClass:
        """Answers [] until ``ready``, then ``TYPES["default"]``; counts the calls."""

        overlay_generation = 0  # no NodeOverlay store (the cache key's last part)

        def __init__(self) -> None:
            self.ready = False
            self.calls = 0

        async def get_instance_types(self, nodepool):
            self.calls += 1
            return list(TYPES["default"]) if self.ready else []

    clock = VirtualClock(NOW)
    provider = LateNodeClass()
    disruption = Disruption(kube=InMemoryCluster(clock), provider=provider, clock=clock)  # type: ignore[arg-type]
    snap = ClusterSnapshot(nodepools=[nodepool()])
    assert await disruption.instance_types(snap) == {"default": []}
    assert await disruption.instance_types(snap) == {"default": []} and provider.calls == 2  # [] is never kept
    provider.ready = True
    got = await disruption.instance_types(snap)
    assert [t.name for t in got["default"]] == ["small", "large"] and provider.calls == 3
    await disruption.instance_types(snap)
    assert provider.calls == 3  # kept while fresh
    clock.advance(INSTANCE_TYPES_REFRESH)
    await disruption.instance_types(snap)
    assert provider.calls == 4  # asked again once the refresh interval has passed


def test_nodes_of_an_invalid_nodepool_are_not_candidates():
    """A NodePool the model rejects (here ``weight: 0``, below the CRD's minimum of 1) is left out
    of the snapshot: its nodes are kept as of a missing NodePool, not consolidated under a
    half-parsed pool (karpy used to read the weight as 0 and go on)."""
    from karpy_core.controllers.disruption.decisions import DecisionKind

    pool = nodepool()
    pool["spec"]["weight"] = 0
    snap = snapshot(["a"], [], pool)
    assert snap.nodepool("default") is None and [p.name for p in snap.invalid_nodepools] == ["default"]
    log: list[NodeDecision] = []
    assert plan_disruption(snap, TYPES, NOW, log=log) is None
    assert [(d.node, d.kind) for d in log] == [("a", DecisionKind.NODEPOOL_NOT_FOUND)]


def test_an_emptiness_command_goes_ahead_without_the_nodes_no_longer_empty():
    """Karpenter's EmptinessValidator: after the validation delay the candidates still empty go
    ahead and only those no longer empty are dropped; the command fails when none is left. Other
    methods' validation stays all or nothing."""
    from karpy_core.controllers.disruption import DecisionKind, DisruptionMethod
    from karpy_core.controllers.disruption.planner import narrow_emptiness, validate_plan

    snap = snapshot(["a", "b", "c"], [pod("p1", "a")])
    plan = plan_disruption(snap, TYPES, NOW)
    assert plan is not None and plan.method is DisruptionMethod.EMPTINESS
    assert sorted(c.name for c in plan.candidates) == ["b", "c"]
    assert narrow_emptiness(snap, TYPES, NOW, plan) == (plan, [])
    busy = snapshot(["a", "b", "c"], [pod("p1", "a"), pod("p2", "b")])
    narrowed, dropped = narrow_emptiness(busy, TYPES, NOW, plan)
    assert narrowed is not None and [c.name for c in narrowed.candidates] == ["c"]
    assert narrowed.price == pytest.approx(sum(c.price or 0.0 for c in narrowed.candidates))
    assert [(n, why.kind) for n, why in dropped] == [("b", DecisionKind.NO_LONGER_EMPTY)]
    assert validate_plan(busy, TYPES, NOW, narrowed) is None
    full = snapshot(["a", "b", "c"], [pod("p1", "a"), pod("p2", "b"), pod("p3", "c")])
    narrowed, dropped = narrow_emptiness(full, TYPES, NOW, plan)
    assert narrowed is None and sorted(n for n, _ in dropped) == ["b", "c"]


def test_multi_node_grows_past_a_node_that_must_stay(monkeypatch: pytest.MonkeyPatch):
    """Karpenter's binary search over prefixes finds nothing when the first candidate must stay (its
    pod is pinned to it by hostname): every prefix holds it. karpy grows a command greedily from
    the candidates after it (``MultiNodeConsolidation.extend``, issue 36), so the three nodes whose
    pods fit on the pinned one go in one command, not in three single-node commands."""
    from karpy_core.controllers.disruption.methods import consolidation_multi

    pinned = pod("pinned", "a")
    pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "a"}
    snap = snapshot(["a", "b", "c", "d"], [pinned, pod("p1", "b"), pod("p2", "c"), pod("p3", "d")])
    log: list[NodeDecision] = []
    plan = plan_disruption(snap, TYPES, NOW, log=log)
    assert plan is not None
    assert plan.method == "multi-node-consolidation" and plan.decision == "delete"
    assert sorted(c.name for c in plan.candidates) == ["b", "c", "d"]
    monkeypatch.setattr(consolidation_multi, "GREEDY_SIMULATIONS", 0)
    one = plan_disruption(snap, TYPES, NOW)
    assert one is not None and one.method == "single-node-consolidation" and len(one.candidates) == 1
