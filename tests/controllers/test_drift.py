"""The NodeClaim drift controller on the in-memory cluster: static drift first, then the
provider's ``is_drifted``, re-asked on its cadence or when the NodeClass changes."""

from __future__ import annotations

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.nodeclaim.drift import NodeClaimDrift
from karpy_core.errors import CloudProviderError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import collect_snapshot, condition
from karpy_core.testing import RecordingProvider
from karpy_core.utils.clock import VirtualClock, iso
from tests.fakes import claim_names, must_condition, must_peek, recording_provider
from tests.scheduling.helpers import make_type, nodepool

NODECLASS = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
             "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                      "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}]}}


def launched_claim(name: str, pool: dict, now: float) -> tuple[dict, dict]:
    labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": "large",
              "topology.kubernetes.io/zone": "zone-a", "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/arch": "amd64",
              "kubernetes.io/os": "linux", "kubernetes.io/hostname": name}
    conds = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": iso(now - 3600)}
             for t in ("Initialized", "Launched", "Ready", "Registered")]
    claim = {"metadata": {"name": name, "labels": dict(labels), "creationTimestamp": iso(now - 7200),
                          "annotations": {"karpenter.sh/nodepool-hash": nodepool_hash(pool), "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
             "status": {"providerID": f"fake:///zone-a/{name}", "nodeName": name, "conditions": conds}}
    node = {"metadata": {"name": name, "labels": labels}, "spec": {"providerID": f"fake:///zone-a/{name}"},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    return claim, node


def setup(names=("a", "b")):
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    cluster.create_sync("EC2NodeClass", NODECLASS)
    for n in names:
        claim, node = launched_claim(n, pool, clock.now())
        cluster.create_sync("NodeClaim", claim)
        cluster.create_sync("Node", node)
    fake = recording_provider()
    return clock, cluster, fake, NodeClaimDrift(kube=cluster, provider=CloudProvider(fake), clock=clock)


def asked(fake: RecordingProvider) -> list[str]:
    return claim_names(fake, "is_drifted")


async def test_provider_drift_sets_the_condition_and_the_planner_rolls_the_node():
    clock, cluster, fake, drift = setup()
    assert await drift.reconcile() == [] and sorted(asked(fake)) == ["a", "b"]
    assert condition(cluster.peek("NodeClaim", "a"), "Drifted") is None

    fake.drift["a"] = "AMIDrift"
    clock.advance(299)
    await drift.reconcile()
    assert len(asked(fake)) == 2, "re-asked before the 5 minute re-check with no NodeClass change"
    clock.advance(1)
    events = await drift.reconcile()
    assert [(e.kind, e.nodeclaim, e.reason) for e in events] == [("drifted", "a", "AMIDrift")]
    cond = must_condition(cluster.peek("NodeClaim", "a"), "Drifted")
    assert cond["status"] == "True" and cond["reason"] == "AMIDrift"
    assert condition(cluster.peek("NodeClaim", "b"), "Drifted") is None

    snap = await collect_snapshot(cluster)
    plan = plan_disruption(snap, {"default": [make_type("small", 2, 4), make_type("large", 8, 16)]}, clock.now(), methods=("drift",))
    assert plan is not None and [c.name for c in plan.candidates] == ["a"] and "AMIDrift" in plan.candidates[0].drifted

    # the cause goes away (e.g. the AMI selector is reverted): the condition is cleared
    fake.drift.clear()
    clock.advance(300)
    assert [(e.kind, e.nodeclaim) for e in await drift.reconcile()] == [("undrifted", "a")]
    assert condition(cluster.peek("NodeClaim", "a"), "Drifted") is None


async def test_nodeclass_change_re_asks_at_once_and_errors_keep_the_last_answer():
    clock, cluster, fake, drift = setup(["a"])
    fake.drift["a"] = "SubnetDrift"
    await drift.reconcile()
    fake.drift.clear()
    await cluster.patch("EC2NodeClass", "default", {"spec": {"tags": {"team": "x"}}})
    assert [e.kind for e in await drift.reconcile()] == ["undrifted"]
    assert asked(fake) == ["a", "a"]

    fake.drift["a"] = "SubnetDrift"
    clock.advance(300)
    fake.fail("is_drifted", CloudProviderError("DescribeInstances: RequestLimitExceeded", code="RequestLimitExceeded"))
    assert await drift.reconcile() == []  # no flapping on a failed check
    assert condition(cluster.peek("NodeClaim", "a"), "Drifted") is None
    assert [e.reason for e in await drift.reconcile()] == ["SubnetDrift"]  # failed checks are retried next pass


async def test_static_drift_wins_and_skips_the_provider():
    _clock, cluster, fake, drift = setup(["a"])
    await cluster.patch("NodePool", "default", {"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}})
    fake.drift["a"] = "AMIDrift"
    events = await drift.reconcile()
    assert [(e.kind, e.reason) for e in events] == [("drifted", "NodePoolDrifted")]
    assert asked(fake) == []
    assert must_condition(cluster.peek("NodeClaim", "a"), "Drifted")["message"].startswith("NodePool template changed")


async def test_unlaunched_and_deleting_claims_are_not_checked():
    _clock, cluster, fake, drift = setup(["a"])
    cluster.create_sync("NodeClaim", {"metadata": {"name": "fresh", "labels": {"karpenter.sh/nodepool": "default"}},
                                      "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                               "requirements": []}})
    await cluster.patch("NodeClaim", "a", {"metadata": {"finalizers": ["karpenter.sh/termination"]}})
    await cluster.delete("NodeClaim", "a")
    fake.drift.update(a="AMIDrift", fresh="AMIDrift")
    assert await drift.reconcile() == [] and asked(fake) == []


async def test_claims_karpenter_launched_are_restamped_so_drift_works_after_the_switch():
    """Issue 29: a NodeClaim Karpenter launched carries Karpenter's NodePool hash and hash version
    (v3); karpy's hash differs and its version too, so hash drift was skipped for that claim for
    good. As Karpenter does when its hash version changes, the claim is re-stamped with karpy's
    hash and version (unless already drifted), and a later NodePool change is drift."""
    _clock, cluster, _fake, drift = setup(["a", "b"])
    for name in ("a", "b"):
        await cluster.patch("NodeClaim", name, {"metadata": {"annotations": {"karpenter.sh/nodepool-hash": "6521318931735402658",
                                                                             "karpenter.sh/nodepool-hash-version": "v3"}}})
    drifted_before = {"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "", "lastTransitionTime": iso(0)}
    await cluster.patch("NodeClaim", "b", {"status": {"conditions": [
        *must_peek(cluster, "NodeClaim", "b")["status"]["conditions"], drifted_before]}}, status=True)
    assert await drift.reconcile() == []  # the switch itself is no drift
    pool = cluster.peek("NodePool", "default")
    a, b = (must_peek(cluster, "NodeClaim", n)["metadata"]["annotations"] for n in ("a", "b"))
    assert a == {"karpenter.sh/nodepool-hash": nodepool_hash(pool), "karpenter.sh/nodepool-hash-version": "karpy-v1"}
    # already drifted under Karpenter: its hash is kept (the versions cannot be compared), it stays drifted
    assert b == {"karpenter.sh/nodepool-hash": "6521318931735402658", "karpenter.sh/nodepool-hash-version": "karpy-v1"}
    assert must_condition(cluster.peek("NodeClaim", "b"), "Drifted")["status"] == "True"
    await cluster.patch("NodePool", "default", {"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}})
    events = await drift.reconcile()
    assert ("drifted", "NodePoolDrifted") in [(e.kind, e.reason) for e in events if e.nodeclaim == "a"]


def test_both_drift_methods_share_one_set_of_rules():
    from types import SimpleNamespace
    from typing import cast

    from karpy_core.controllers.disruption.candidates import Candidate
    from karpy_core.controllers.disruption.decisions import DecisionKind
    from karpy_core.controllers.disruption.methods.drift import Drift, DriftRules
    from karpy_core.controllers.disruption.methods.static_drift import StaticDrift

    def cand(tgp: str, drifted: str) -> Candidate:
        return cast(Candidate, SimpleNamespace(name="a", drifted=drifted, nodeclaim=SimpleNamespace(termination_grace_period=tgp)))

    for method in (Drift(), StaticDrift()):
        assert isinstance(method, DriftRules)
        assert method.may_disrupt_blocked(cand("1h", "NodePoolDrifted"))  # a terminationGracePeriod lets drift through
        assert not method.may_disrupt_blocked(cand("", "NodePoolDrifted"))
        assert method.still_applies(cand("", "NodePoolDrifted"), 0.0) is None
        gone = method.still_applies(cand("", ""), 0.0)
        assert gone is not None and gone.kind is DecisionKind.NO_LONGER_DRIFTED


async def test_a_drift_command_is_executed_in_the_pass_that_decides_it():
    """Karpenter validates consolidation commands 15 s after deciding them (commandValidationDelay)
    but not drift (disruption/drift.go has no validator): a drifted node is tainted and replaced in
    the pass that finds it (the scale benchmark's drift took 15 s a node longer than Karpenter's
    before). Consolidation still waits: test_karpenter_events' empty-node test."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.controllers.disruption import Disruption
    from tests.controllers.test_disruption import NOW, node_and_claim, pod

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    claim["status"]["conditions"].append({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                                          "lastTransitionTime": iso(NOW - 60)})
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("p1", "a"))
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock)
    kinds = [e.kind.value for e in await d.reconcile()]
    assert kinds[:2] == ["disrupt-decided", "disrupt"], kinds
    assert d.pending is None
    taints = must_peek(cluster, "Node", "a")["spec"].get("taints") or []
    assert [t["key"] for t in taints] == ["karpenter.sh/disrupted"]
