"""Karpenter's events and conditions, published by karpy's controllers on the in-memory cluster."""

from __future__ import annotations

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.disruption import Disruption
from karpy_core.controllers.disruption.decisions import NodeDecision
from karpy_core.controllers.disruption.karpenter_events import decision_events
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.controllers.nodepool_status import NodePoolStatus, RegistrationHealth
from karpy_core.errors import InsufficientCapacityError
from karpy_core.kube.events import Event, EventRecorder, TokenBucket
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import ClusterSnapshot, condition
from karpy_core.utils.clock import VirtualClock, iso
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim, pod, relabel, snapshot
from tests.fakes import must_condition, must_peek
from tests.scheduling.helpers import make_type, nodepool


def events_of(cluster: InMemoryCluster, reason: str) -> list[dict]:
    return [e for e in cluster.objects("Event") if e["reason"] == reason]


def _snap_events(snap: ClusterSnapshot, types=TYPES):
    lines: list[NodeDecision] = []
    plan_disruption(snap, types, NOW, log=lines)
    nodes = {n.name: n for n in snap.node_views}
    claims = {c.node_name: c for c in snap.nodeclaim_views}
    return decision_events(lines, nodes, claims, {p.name: p for p in snap.nodepool_views})


def test_spot_to_spot_is_unconsolidatable_on_node_and_nodeclaim():
    """consolidation.go: a spot node whose cheaper replacement could only be spot."""
    pool = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}])
    types = {"default": [make_type("small", 2, 4, capacity_types=("spot",)), make_type("large", 8, 16, capacity_types=("spot",))]}
    snap = relabel(snapshot([("a", "large")], [pod("p1", "a")], pool), **{"karpenter.sh/capacity-type": "spot"})
    evs = _snap_events(snap, types)
    assert sorted(e.involved["kind"] for e in evs) == ["Node", "NodeClaim"]
    assert {e.reason for e in evs} == {"Unconsolidatable"} and len(evs) == 2
    assert {e.message for e in evs} == {"SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"}
    assert {e.dedupe_timeout for e in evs} == {900.0}


def test_when_empty_policy_and_do_not_disrupt_pod():
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    evs = _snap_events(snapshot(["a"], [pod("p1", "a")], pool))
    assert {(e.reason, e.message) for e in evs} == {
        ("Unconsolidatable", 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty')}
    evs = _snap_events(snapshot(["a"], [pod("p1", "a", annotations={"karpenter.sh/do-not-disrupt": "true"})]))
    assert {(e.reason, e.message) for e in evs} == {
        ("DisruptionBlocked", 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/p1)')}


def test_zero_budget_blocks_the_nodepool():
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "0"}]}
    evs = _snap_events(snapshot(["a", "b"], [pod("p1", "a")], pool))
    blocked = [e for e in evs if e.involved.get("kind") == "NodePool"]
    assert blocked and blocked[0].reason == "DisruptionBlocked"
    assert blocked[0].message.startswith("No allowed disruptions for disruption reason") and blocked[0].dedupe_timeout == 60.0


async def test_recorder_dedupes_by_reason_and_values_and_rate_limits():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    rec = EventRecorder(cluster, clock)
    obj = {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "a", "uid": "u1"}}
    await rec.record(Event(obj, "Normal", "Unconsolidatable", "one", ("u1",), 900))
    await rec.record(Event(obj, "Normal", "Unconsolidatable", "two", ("u1",), 900))  # same key: suppressed
    clock.advance(901)
    await rec.record(Event(obj, "Normal", "Unconsolidatable", "three", ("u1",), 900))
    assert [e["message"] for e in events_of(cluster, "Unconsolidatable")] == ["one", "three"]
    bucket = TokenBucket(5, 10)
    for i in range(15):
        await rec.record(Event({**obj, "metadata": {"name": f"p{i}"}}, "Normal", "Nominated", "x", (f"p{i}",), rate_limiter=bucket))
    assert len(events_of(cluster, "Nominated")) == 10
    clock.advance(1)
    await rec.record(Event({**obj, "metadata": {"name": "late"}}, "Normal", "Nominated", "x", ("late",), rate_limiter=bucket))
    assert len(events_of(cluster, "Nominated")) == 11


async def test_disruption_controller_publishes_and_sets_consolidatable():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("p1", "a"))
    rec = EventRecorder(cluster, clock)
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock, events=rec)
    await d.reconcile()
    c = condition(must_peek(cluster, "NodeClaim", "a"), "Consolidatable")
    assert c is not None and c["status"] == "True" and c["reason"] == "Consolidatable"  # initialized 1h ago > 30m
    evs = events_of(cluster, "Unconsolidatable")
    assert sorted(e["involvedObject"]["kind"] for e in evs) == ["Node", "NodeClaim"]
    assert evs[0]["message"] == 'NodePool "default" has consolidation policy WhenEmpty, but node is not empty'
    # a pod event restarts the consolidateAfter clock: the condition goes away
    cluster.create_sync("Pod", pod("p2", "a"))
    clock.advance(10)
    await d.reconcile()
    assert condition(must_peek(cluster, "NodeClaim", "a"), "Consolidatable") is None


async def test_empty_node_deletion_publishes_disruption_terminating():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    rec = EventRecorder(cluster, clock)
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock, events=rec)
    await d.reconcile()
    clock.advance(16)
    await d.reconcile()
    msgs = sorted(e["message"] for e in events_of(cluster, "DisruptionTerminating"))
    assert msgs == ["Disrupting Node: Empty", "Disrupting NodeClaim: Empty"]


async def test_termination_drained_condition_and_events():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, claim = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    claim["spec"]["terminationGracePeriod"] = "1h"
    claim["status"]["conditions"].append({"type": "DisruptionReason", "status": "True", "reason": "Underutilized"})
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    web = pod("web", "a")
    web["metadata"]["finalizers"] = ["example.com/hold"]  # evicted, but still terminating
    cluster.create_sync("Pod", web)
    cluster.delete_sync("Node", "a")
    rec = EventRecorder(cluster, clock)
    term = NodeTermination(kube=cluster, clock=clock, events=rec)
    await term.reconcile()
    drained = condition(must_peek(cluster, "NodeClaim", "a"), "Drained")
    assert drained is not None and (drained["status"], drained["reason"]) == ("Unknown", "Draining")
    assert [e["message"] for e in events_of(cluster, "Evicted")] == ["Evicted pod: Underutilized"]
    assert events_of(cluster, "Evicted")[0]["involvedObject"]["kind"] == "Pod"
    expiring = events_of(cluster, "TerminationGracePeriodExpiring")
    assert sorted(e["involvedObject"]["kind"] for e in expiring) == ["Node", "NodeClaim"]
    assert all(e["type"] == "Warning" and e["message"].startswith("All pods will be deleted by ") for e in expiring)
    assert events_of(cluster, "FailedDraining")[0]["message"] == "Failed to drain node, 1 pods are waiting to be evicted"
    cluster.patch_sync("Pod", "web", {"metadata": {"finalizers": []}}, namespace="default")
    clock.advance(1)
    await term.reconcile()
    assert must_condition(must_peek(cluster, "NodeClaim", "a"), "Drained")["status"] == "True"


async def test_insufficient_capacity_event_and_registration_health():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    provider = load_provider("simulated", {})

    async def no_capacity(_nc):
        raise InsufficientCapacityError("no capacity for m5.large in zone-a")

    provider.create = no_capacity  # type: ignore[method-assign]
    cluster.create_sync("NodeClaim", {"metadata": {"name": "c1", "uid": "u-c1", "labels": {"karpenter.sh/nodepool": "default"}},
                                      "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}})
    rec = EventRecorder(cluster, clock)
    await NodeClaimLifecycle(kube=cluster, provider=provider, clock=clock, events=rec).reconcile()
    ice = events_of(cluster, "InsufficientCapacityError")
    assert len(ice) == 1 and ice[0]["type"] == "Warning"
    assert ice[0]["message"] == "NodeClaim c1 event: no capacity for m5.large in zone-a"
    health = RegistrationHealth()
    assert health.status("p") is None
    health.record("p", True)
    st = health.status("p")
    assert st is not None and st[0] == "True"
    health.record("p", False, "LaunchFailed", "boom")
    st = health.status("p")
    assert st is not None and st[0] == "True"  # 1 failure of a 4-outcome buffer: below half
    health.record("p", False, "LaunchFailed", "boom")
    assert health.status("p") == ("False", "LaunchFailed", "boom")  # 2 of 4: NodeRegistrationHealthy=False
    for _ in range(3):
        health.record("p", True)
    st = health.status("p")
    assert st is not None and st[0] == "True"  # the failures left the buffer


async def test_nodeclass_ready_for_missing_unknown_and_unserved_kinds():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    status = NodePoolStatus(kube=cluster, clock=clock)

    def pool(name, kind, group="karpenter.k8s.aws"):
        p = nodepool(name)
        p["spec"]["template"]["spec"]["nodeClassRef"] = {"group": group, "kind": kind, "name": "d"}
        return p

    cluster.create_sync("NodePool", pool("missing", "EC2NodeClass"))
    cluster.create_sync("NodePool", pool("kwok", "KWOKNodeClass", "karpenter.kwok.sh"))
    await status.reconcile()
    for name in ("missing", "kwok"):
        obj = must_peek(cluster, "NodePool", name)
        ncr = must_condition(obj, "NodeClassReady")
        assert (ncr["status"], ncr["reason"]) == ("False", "NodeClassNotFound")
        assert must_condition(obj, "Ready")["status"] == "False"
        assert must_condition(obj, "NodeRegistrationHealthy")["status"] == "Unknown"
    cluster.create_sync("EC2NodeClass", {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "d"},
                                         "spec": {}})
    await status.reconcile()
    ncr = must_condition(must_peek(cluster, "NodePool", "missing"), "NodeClassReady")
    assert (ncr["status"], ncr["reason"]) == ("False", "NodeClassReadinessUnknown")
    cluster.patch_sync("EC2NodeClass", "d", {"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                                                                         "lastTransitionTime": iso(NOW)}]}}, status=True)
    await status.reconcile()
    assert must_condition(must_peek(cluster, "NodePool", "missing"), "NodeClassReady")["status"] == "True"
    assert must_condition(must_peek(cluster, "NodePool", "missing"), "Ready")["status"] == "True"


async def test_nodeclass_observed_generation_and_registration_health_reset_across_restarts():
    """``status.nodeClassObservedGeneration`` is the NodeClass generation the status last saw; a
    NodeClass changed while no controller ran resets NodeRegistrationHealthy (Karpenter's rule),
    an unchanged one keeps it."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    p = nodepool("p")
    p["spec"]["template"]["spec"]["nodeClassRef"] = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}
    cluster.create_sync("NodePool", p)
    cluster.create_sync("EC2NodeClass", {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "d"},
                                         "spec": {"role": "a"}})
    health = RegistrationHealth()
    health.record("p", True)
    await NodePoolStatus(kube=cluster, clock=clock, registration=health).reconcile()
    gen = must_peek(cluster, "EC2NodeClass", "d")["metadata"]["generation"]
    assert must_peek(cluster, "NodePool", "p")["status"]["nodeClassObservedGeneration"] == gen
    assert must_condition(must_peek(cluster, "NodePool", "p"), "NodeRegistrationHealthy")["status"] == "True"
    await NodePoolStatus(kube=cluster, clock=clock).reconcile()  # a restart: no memory, the NodeClass unchanged
    assert must_condition(must_peek(cluster, "NodePool", "p"), "NodeRegistrationHealthy")["status"] == "True"
    cluster.patch_sync("EC2NodeClass", "d", {"spec": {"role": "b"}})
    await NodePoolStatus(kube=cluster, clock=clock).reconcile()  # another restart, after the NodeClass changed
    obj = must_peek(cluster, "NodePool", "p")
    assert obj["status"]["nodeClassObservedGeneration"] == gen + 1
    assert must_condition(obj, "NodeRegistrationHealthy")["status"] == "Unknown"


def test_nodeclaim_carries_the_nodeclass_label():
    """nodeclaimtemplate.go: ``<group>/<kind lower-cased>: <name>`` on every NodeClaim (and so its Node)."""
    from karpy_core.apis.labels import nodeclass_label_key
    from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool
    from tests.scheduling.helpers import pod as sched_pod

    assert nodeclass_label_key("karpenter.k8s.aws", "EC2NodeClass") == "karpenter.k8s.aws/ec2nodeclass"
    assert nodeclass_label_key("karpenter.kakaocloud.com", "KCNodeClass") == "karpenter.kakaocloud.com/kcnodeclass"
    pool = nodepool()
    results = Scheduler([template_from_nodepool(pool, TYPES["default"])], [], []).solve([pod_info(sched_pod("p"))])
    claim = nodeclaim_from_plan(results.new_claims[0])
    assert claim["metadata"]["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "default"


async def test_registration_without_the_unregistered_taint_is_reported_and_recorded():
    """registration.go: a Node without karpenter.sh/unregistered:NoExecute gets an UnregisteredTaintMissing
    event on its NodeClaim; the registration counts for NodeRegistrationHealthy."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    claim = {"metadata": {"name": "c1", "uid": "u-c1", "labels": {"karpenter.sh/nodepool": "default"},
                          "finalizers": ["karpenter.sh/termination"]},
             "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
             "status": {"providerID": "fake:///c1", "conditions": [{"type": "Launched", "status": "True", "reason": "Launched",
                                                                      "lastTransitionTime": iso(NOW)}]}}
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Node", {"metadata": {"name": "n1", "labels": {}}, "spec": {"providerID": "fake:///c1"}, "status": {}})
    health = RegistrationHealth()
    rec = EventRecorder(cluster, clock)
    await NodeClaimLifecycle(kube=cluster, provider=load_provider("simulated", {}), clock=clock, events=rec,
                             registration=health).reconcile()
    await NodeClaimLifecycle(kube=cluster, provider=load_provider("simulated", {}), clock=clock, events=rec,
                             registration=health).reconcile()  # the next pass labels claim and node
    missing = events_of(cluster, "UnregisteredTaintMissing")
    assert len(missing) == 1 and missing[0]["involvedObject"]["name"] == "c1" and missing[0]["type"] == "Warning"
    assert must_peek(cluster, "Node", "n1")["metadata"]["labels"]["karpenter.k8s.aws/ec2nodeclass"] == "d"
    assert health.status("default") == ("True", "NodeRegistrationHealthy", "")


async def test_provisioning_publishes_no_compatible_instance_types_and_failed_scheduling():
    """scheduling/scheduler.go and provisioner.go: a Ready pool whose requirements leave no
    instance type, and a pod no pool can serve."""
    from karpy_core.operator import Operator

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["no-such-type"]}])
    pool["metadata"]["uid"] = "u-pool"
    cluster.create_sync("NodePool", pool)
    waiting = pod("web", None)
    waiting["spec"].pop("nodeName")
    waiting["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    cluster.create_sync("Pod", waiting)
    op = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock)
    op.provisioner.kube = op.sync.source = cluster  # no informer cache in a unit test (nor its sync state)
    assert await op.provisioner_trigger.provision_once() == 1
    nct = events_of(cluster, "NoCompatibleInstanceTypes")
    assert len(nct) == 1 and nct[0]["involvedObject"]["kind"] == "NodePool" and nct[0]["type"] == "Warning"
    assert nct[0]["message"] == "NodePool requirements filtered out all compatible available instance types"
    failed = events_of(cluster, "FailedScheduling")
    assert len(failed) == 1 and failed[0]["involvedObject"]["name"] == "web"
    assert failed[0]["message"].startswith("Failed to schedule pod, ")
    await op.provisioner_trigger.provision_once()  # deduplicated: 1 minute for the NodePool, 5 for the pod
    assert len(events_of(cluster, "NoCompatibleInstanceTypes")) == 1 and len(events_of(cluster, "FailedScheduling")) == 1


def test_node_repair_blocked_is_on_the_node_keyed_by_each_object():
    from karpy_core.controllers import events as ev

    node = {"metadata": {"name": "n1", "uid": "u-n1"}}
    evs = ev.node_repair_blocked(node, {"metadata": {"name": "c1", "uid": "u-c1"}}, {"metadata": {"name": "p", "uid": "u-p"}},
                                 "more than 20% nodes are unhealthy in the nodepool")
    assert [e.involved["kind"] for e in evs] == ["Node"] * 3
    assert [e.dedupe_values for e in evs] == [("u-n1",), ("u-c1",), ("u-p",)]
    assert {(e.reason, e.type, e.dedupe_timeout) for e in evs} == {("NodeRepairBlocked", "Warning", 900.0)}


async def test_termination_waits_for_volume_attachments_then_sets_volumes_detached():
    """termination/controller.go awaitVolumeDetachment: a drained Node stays until its
    VolumeAttachments are gone (AwaitingVolumeDetachment), then VolumesDetached=True."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, claim = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    claim["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("VolumeAttachment", {"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": "va-1"},
                                             "spec": {"nodeName": "a", "attacher": "ebs.csi.aws.com",
                                                      "source": {"persistentVolumeName": "pv-1"}}})
    cluster.delete_sync("Node", "a")
    term = NodeTermination(kube=cluster, clock=clock, events=EventRecorder(cluster, clock))
    assert [e.kind for e in await term.reconcile()] == []  # drained, but the volume is still attached
    vd = must_condition(must_peek(cluster, "NodeClaim", "a"), "VolumesDetached")
    assert (vd["status"], vd["reason"]) == ("Unknown", "AwaitingVolumeDetachment")
    assert events_of(cluster, "AwaitingVolumeDetachment")[0]["message"] == "Awaiting deletion of bound volumeattachments (va-1)"
    assert cluster.peek("Node", "a") is not None
    cluster.delete_sync("VolumeAttachment", "va-1")
    clock.advance(5)
    assert [e.kind for e in await term.reconcile()] == ["node-finalized"]
    assert must_condition(must_peek(cluster, "NodeClaim", "a"), "VolumesDetached")["status"] == "True"


def test_launched_event_is_words_not_a_dict():
    from karpy_core.controllers.events import launched_message

    text = launched_message({"providerID": "aws:///us-east-1a/i-1", "instanceType": "m5.large", "zone": "us-east-1a",
                             "capacityType": "spot"})
    assert text == "Launched m5.large (spot) in us-east-1a, providerID aws:///us-east-1a/i-1"
    assert "{" not in launched_message({}) and launched_message({}) == "Launched an instance"


async def test_an_emptiness_command_deletes_the_nodes_still_empty_after_validation():
    """Karpenter's EmptinessValidator on the controller: a node that gained a pod during the 15 s
    validation delay is dropped from the emptiness command and the others are deleted (karpy
    used to drop the whole command and decide it again 15 s later)."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    for name in ("a", "b", "c"):
        node, claim = node_and_claim(name, pool=pool)
        cluster.create_sync("Node", node)
        cluster.create_sync("NodeClaim", claim)
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock)
    await d.reconcile()
    assert d.pending is not None and sorted(d.pending.nodes) == ["a", "b", "c"]
    cluster.create_sync("Pod", pod("p1", "b"))
    clock.advance(16)
    await d.reconcile()
    left = {c["metadata"]["name"]: bool(c["metadata"].get("deletionTimestamp")) for c in cluster.objects("NodeClaim")}
    assert left == {"b": False}, left  # a and c deleted (no finalizer here), b kept
