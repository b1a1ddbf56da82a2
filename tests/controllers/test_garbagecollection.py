"""Garbage collection both ways, on the in-memory cluster with the call-recording provider."""

from __future__ import annotations

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing import RecordingProvider
from karpy_core.utils.clock import VirtualClock
from tests.fakes import claim_names, recording_provider


async def launched(fake: RecordingProvider, name: str, created: float | None) -> str:
    """Launch an instance for a NodeClaim ``name`` that the cloud lists as created at ``created``
    (None: without a creation time); returns its provider ID."""
    from karpy_core.apis.nodeclaim import NodeClaim

    nc = NodeClaim.model_validate({"metadata": {"name": name},
                                   "spec": {"requirements": [],
                                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}})
    provider_id = str((await fake.karpy_create(nc)).status.provider_id)
    fake.launched_at[provider_id] = created
    return provider_id


async def test_leaked_instance_is_terminated_after_30s_and_orphaned_claim_is_deleted():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = recording_provider()
    gc = GarbageCollection(kube=cluster, provider=CloudProvider(fake), clock=clock)
    leak = await launched(fake, "leaked", clock.now())
    # a registered NodeClaim whose instance vanished and whose node is NotReady
    cluster.create_sync("NodeClaim", {"metadata": {"name": "orphan"}, "spec": {},
                                      "status": {"providerID": "fake:///zone-a/gone",
                                                 "conditions": [{"type": "Registered", "status": "True"}]}})
    cluster.create_sync("Node", {"metadata": {"name": "n-gone"}, "spec": {"providerID": "fake:///zone-a/gone"},
                                 "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    # a healthy claimed instance
    ok = await launched(fake, "healthy", clock.now())
    cluster.create_sync("NodeClaim", {"metadata": {"name": "healthy"}, "spec": {},
                                      "status": {"providerID": ok,
                                                 "conditions": [{"type": "Registered", "status": "True"}]}})
    leaked, orphaned = await gc.reconcile()
    assert leaked == [] and orphaned == ["orphan"]  # the leaked one is younger than 30 s
    clock.advance(31)
    leaked, _ = await gc.reconcile()
    assert leaked == [leak]
    assert claim_names(fake, "delete") == ["leaked"]
    assert cluster.peek("NodeClaim", "healthy") is not None


async def test_gc_reports_each_unclaimed_instance_it_leaves_alone(caplog):
    """An instance without a creation time used to be skipped silently (and, for KakaoCloud, that
    was every VM); a NodeClaim whose launch is still running must keep its instance."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = recording_provider()
    gc = GarbageCollection(kube=cluster, provider=CloudProvider(fake), clock=clock)
    old = await launched(fake, "old", clock.now() - 60)
    young = await launched(fake, "young", clock.now() - 5)
    launching = await launched(fake, "launching", clock.now() - 60)
    no_time = await launched(fake, "no-time", None)
    cluster.create_sync("NodeClaim", {"metadata": {"name": "launching"}, "spec": {}})  # no providerID yet
    with caplog.at_level("INFO", logger="karpy.gc"):
        leaked, _ = await gc.reconcile()
    assert leaked == [old]
    assert gc.skipped == {young: "too-young", launching: "launch-in-progress", no_time: "no-creation-time"}
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [(r.getMessage(), r.NodeClaim, getattr(r, "provider-id"), r.reason) for r in warned] == [
        ("garbage collection leaves an unclaimed instance alone", {"name": "no-time"}, no_time, "no-creation-time")]
    assert claim_names(fake, "delete") == ["old"]
    # once the launch recorded another providerID, the instance it named is a leak
    await cluster.patch("NodeClaim", "launching", {"status": {"providerID": "fake:///zone-a/other"}}, status=True)
    leaked, _ = await gc.reconcile()
    assert leaked == [launching]
