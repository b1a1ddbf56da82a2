"""NodeClaim lifecycle on the in-memory cluster with a call-recording provider."""

from __future__ import annotations

from typing import Any

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.errors import CreateError, InsufficientCapacityError, KubeAPIError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock
from tests.fakes import claim_names, must_condition, must_peek, recording_provider

CLAIM: dict[str, Any] = {
    "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
    "spec": {
        "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        "startupTaints": [{"key": "cni-not-ready", "effect": "NoExecute"}],
        "resources": {"requests": {"cpu": "1"}},
    },
}


def setup():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = recording_provider()
    lc = NodeClaimLifecycle(kube=cluster, provider=CloudProvider(fake), clock=clock)
    cluster.create_sync("NodeClaim", CLAIM)
    return clock, cluster, fake, lc


def kubelet_registers(cluster: InMemoryCluster, name: str, *, ready: bool = True) -> None:
    nc = must_peek(cluster, "NodeClaim", name)
    cluster.create_sync("Node", {
        "metadata": {"name": "ip-10-0-0-1", "labels": {}},
        "spec": {"providerID": nc["status"]["providerID"], "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                                                                      {"key": "cni-not-ready", "effect": "NoExecute"}]},
        "status": {"allocatable": {"cpu": "2"}, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    })


async def test_launch_register_initialize():
    _clock, cluster, fake, lc = setup()
    events = await lc.reconcile()
    assert [e.kind for e in events] == ["launch"]
    nc = cluster.peek("NodeClaim", "default-abcde")
    assert nc["metadata"]["finalizers"] == ["karpenter.sh/termination"]
    assert nc["status"]["providerID"] == "fake:///zone-a/r-000001" and list(fake.instances) == [nc["status"]["providerID"]]
    assert nc["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "small"
    assert must_condition(nc, "Launched")["status"] == "True" and must_condition(nc, "Registered")["status"] == "Unknown"

    kubelet_registers(cluster, "default-abcde")
    assert [e.kind for e in await lc.reconcile()] == ["register"]
    node = cluster.peek("Node", "ip-10-0-0-1")
    assert node["metadata"]["labels"]["karpenter.sh/registered"] == "true"
    assert node["metadata"]["labels"]["karpenter.sh/nodepool"] == "default"
    assert "karpenter.sh/termination" in node["metadata"]["finalizers"]
    assert [t["key"] for t in node["spec"]["taints"]] == ["cni-not-ready"]
    assert must_peek(cluster, "NodeClaim", "default-abcde")["status"]["nodeName"] == "ip-10-0-0-1"

    # startup taint still there: not initialized
    assert await lc.reconcile() == []
    cluster.patch_sync("Node", "ip-10-0-0-1", {"spec": {"taints": []}})
    assert [e.kind for e in await lc.reconcile()] == ["initialize"]
    nc = cluster.peek("NodeClaim", "default-abcde")
    assert must_condition(nc, "Initialized")["status"] == "True" and must_condition(nc, "Ready")["status"] == "True"
    assert must_peek(cluster, "Node", "ip-10-0-0-1")["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
    assert claim_names(fake, "create") == ["default-abcde"] and not fake.calls_of("delete")


async def test_insufficient_capacity_deletes_the_claim():
    _clock, cluster, fake, lc = setup()
    fake.fail("create", InsufficientCapacityError("no capacity", code="InsufficientInstanceCapacity"))
    events = await lc.reconcile()
    assert [(e.kind, e.reason) for e in events] == [("launch-failed", "InsufficientCapacityError")]
    nc = cluster.peek("NodeClaim", "default-abcde")
    assert nc["metadata"]["deletionTimestamp"]  # held by the finalizer until finalized
    await lc.reconcile()  # no providerID: nothing to terminate, finalizer removed
    assert cluster.peek("NodeClaim", "default-abcde") is None


async def test_create_error_sets_launched_unknown_and_retries():
    _clock, cluster, fake, lc = setup()
    fake.fail("create", CreateError("throttled", condition_reason="RequestLimitExceeded"))
    await lc.reconcile()
    cond = must_condition(cluster.peek("NodeClaim", "default-abcde"), "Launched")
    assert (cond["status"], cond["reason"]) == ("Unknown", "RequestLimitExceeded")
    await lc.reconcile()
    assert must_condition(cluster.peek("NodeClaim", "default-abcde"), "Launched")["status"] == "True"
    assert claim_names(fake, "create") == ["default-abcde", "default-abcde"]


async def test_liveness_deletes_unregistered_claim_after_15_minutes():
    clock, cluster, fake, lc = setup()
    await lc.reconcile()
    clock.advance(14 * 60)
    assert await lc.reconcile() == []
    clock.advance(2 * 60)
    assert [e.kind for e in await lc.reconcile()] == ["liveness-delete"]
    assert must_peek(cluster, "NodeClaim", "default-abcde")["metadata"]["deletionTimestamp"]
    events = await lc.reconcile()  # finalize: terminate the instance, drop the finalizer
    assert [e.kind for e in events] == []  # first delete call succeeds; instance terminating
    events = await lc.reconcile()
    assert [e.kind for e in events] == ["terminate"]
    assert cluster.peek("NodeClaim", "default-abcde") is None
    assert claim_names(fake, "delete") == ["default-abcde", "default-abcde"]


async def test_finalize_deletes_node_first_then_instance():
    _clock, cluster, fake, lc = setup()
    await lc.reconcile()
    kubelet_registers(cluster, "default-abcde")
    await lc.reconcile()
    await cluster.delete("NodeClaim", "default-abcde")
    events = await lc.reconcile()
    assert [e.kind for e in events] == ["delete"]
    assert must_peek(cluster, "Node", "ip-10-0-0-1")["metadata"]["deletionTimestamp"]
    assert "default-abcde" not in claim_names(fake, "delete")  # the node must go first
    cluster.patch_sync("Node", "ip-10-0-0-1", {"metadata": {"finalizers": []}})  # node termination done
    await lc.reconcile()
    await lc.reconcile()
    assert cluster.peek("NodeClaim", "default-abcde") is None
    try:
        await cluster.get("Node", "ip-10-0-0-1")
        raise AssertionError("node should be gone")
    except KubeAPIError as exc:
        assert exc.status == 404


async def test_kwok_backend_finds_an_instance_launched_before_a_crash():
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.sim.kwok_nodes import KwokNodeBackend

    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    provider = load_provider("simulated", {"node_backend": KwokNodeBackend(cluster)})
    claim = {**CLAIM, "spec": {**CLAIM["spec"], "requirements": [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}}
    cluster.create_sync("NodeClaim", claim)
    first = NodeClaimLifecycle(kube=cluster, provider=provider, clock=clock)
    await first.reconcile()
    pid = must_peek(cluster, "NodeClaim", "default-abcde")["status"]["providerID"]
    # the controller crashed after the Node was made but before it recorded the launch
    cluster.patch_sync("NodeClaim", "default-abcde", {"status": {"providerID": None, "conditions": []}}, status=True)
    restarted = load_provider("simulated", {"node_backend": KwokNodeBackend(cluster)})
    events = await NodeClaimLifecycle(kube=cluster, provider=restarted, clock=clock).reconcile()
    assert [e.kind for e in events] == ["launch"]
    assert must_peek(cluster, "NodeClaim", "default-abcde")["status"]["providerID"] == pid
    assert len(cluster.objects("Node")) == 1
    assert [c.status.provider_id for c in await restarted.list()] == [pid]


async def test_nodepool_status_drops_resources_of_deleted_nodeclaims_and_settles():
    from karpy_core.controllers.nodepool_status import NodePoolStatus

    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    cluster.create_sync("NodePool", {"metadata": {"name": "default"}, "spec": {"template": {"spec": {
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"}}}}})
    cluster.create_sync("NodeClaim", {"metadata": {"name": "a", "labels": {"karpenter.sh/nodepool": "default"}}, "spec": {},
                                      "status": {"capacity": {"cpu": "2", "memory": "4Gi"}}})
    status = NodePoolStatus(kube=cluster, clock=clock)
    assert await status.reconcile() == 1
    assert must_peek(cluster, "NodePool", "default")["status"]["resources"] == {"cpu": "2", "memory": "4Gi", "nodes": "1"}
    cluster.delete_sync("NodeClaim", "a")
    assert await status.reconcile() == 1
    assert must_peek(cluster, "NodePool", "default")["status"]["resources"] == {}
    assert must_peek(cluster, "NodePool", "default")["status"]["nodes"] == 0
    assert await status.reconcile() == 0  # settled: no patch loop


async def test_one_pass_launches_its_nodeclaims_concurrently_and_reports_them_in_name_order():
    """Issue 36: one claim at a time, each launch and registration of a 60-claim scale-up waited
    for every other claim's; the pass now overlaps them (at most LIFECYCLE_CONCURRENCY), and
    what it returns keeps the NodeClaims' name order."""
    import asyncio

    from karpy_core.controllers.nodeclaim.lifecycle.controller import LIFECYCLE_CONCURRENCY

    _clock, cluster, _fake, lc = setup()
    names = [f"default-{i:03d}" for i in range(LIFECYCLE_CONCURRENCY + 6)]
    for name in names:
        cluster.create_sync("NodeClaim", {**CLAIM, "metadata": {**CLAIM["metadata"], "name": name}})
    in_flight = peak = 0
    real_patch = cluster.patch

    async def slow_patch(kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *,
                         status: bool = False) -> dict[str, Any]:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.001)  # the API server's round trip: other claims' launches may go on meanwhile
        in_flight -= 1
        return await real_patch(kind, name, patch, namespace, status=status)

    cluster.patch = slow_patch
    events = await lc.reconcile()
    assert 1 < peak <= LIFECYCLE_CONCURRENCY
    assert [e.nodeclaim for e in events] == sorted(["default-abcde", *names])
    assert all(e.kind == "launch" for e in events)
    for name in names:
        assert must_condition(must_peek(cluster, "NodeClaim", name), "Launched")["status"] == "True"
