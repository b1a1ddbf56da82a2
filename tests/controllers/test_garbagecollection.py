"""Garbage collection both ways, on the in-memory cluster with the call-recording provider."""

from __future__ import annotations

from datetime import UTC, datetime

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock
from tests.fakes import FakeProvider


async def launched(fake: FakeProvider, name: str, created: float):
    from karpy_core.apis.nodeclaim import NodeClaim

    nc = NodeClaim.model_validate({"metadata": {"name": name},
                                   "spec": {"requirements": [],
                                            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}})
    out = await fake.karpy_create(nc)
    out.metadata.creation_timestamp = datetime.fromtimestamp(created, UTC)
    return out


async def test_leaked_instance_is_terminated_after_30s_and_orphaned_claim_is_deleted():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = FakeProvider()
    gc = GarbageCollection(kube=cluster, provider=CloudProvider(fake), clock=clock)
    await launched(fake, "leaked", clock.now())
    # a registered NodeClaim whose instance vanished and whose node is NotReady
    cluster.create_sync("NodeClaim", {"metadata": {"name": "orphan"}, "spec": {},
                                      "status": {"providerID": "fake:///zone-a/gone",
                                                 "conditions": [{"type": "Registered", "status": "True"}]}})
    cluster.create_sync("Node", {"metadata": {"name": "n-gone"}, "spec": {"providerID": "fake:///zone-a/gone"},
                                 "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}})
    # a healthy claimed instance
    ok = await launched(fake, "healthy", clock.now())
    cluster.create_sync("NodeClaim", {"metadata": {"name": "healthy"}, "spec": {},
                                      "status": {"providerID": ok.status.provider_id,
                                                 "conditions": [{"type": "Registered", "status": "True"}]}})
    leaked, orphaned = await gc.reconcile()
    assert leaked == [] and orphaned == ["orphan"]  # the leaked one is younger than 30 s
    clock.advance(31)
    leaked, _ = await gc.reconcile()
    assert leaked == ["fake:///zone-a/leaked"]
    assert ("delete", "leaked") in fake.calls and ("delete", "healthy") not in fake.calls
    assert cluster.peek("NodeClaim", "healthy") is not None


async def test_gc_reports_each_unclaimed_instance_it_leaves_alone(caplog):
    """An instance without a creation time used to be skipped silently (and, for KakaoCloud, that
    was every VM); a NodeClaim whose launch is still running must keep its instance."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = FakeProvider()
    gc = GarbageCollection(kube=cluster, provider=CloudProvider(fake), clock=clock)
    await launched(fake, "old", clock.now() - 60)
    await launched(fake, "young", clock.now() - 5)
    await launched(fake, "launching", clock.now() - 60)
    no_time = await launched(fake, "no-time", clock.now() - 60)
    no_time.metadata.creation_timestamp = None
    cluster.create_sync("NodeClaim", {"metadata": {"name": "launching"}, "spec": {}})  # no providerID yet
    with caplog.at_level("INFO", logger="karpy.gc"):
        leaked, _ = await gc.reconcile()
    assert leaked == ["fake:///zone-a/old"]
    assert gc.skipped == {"fake:///zone-a/young": "too-young", "fake:///zone-a/launching": "launch-in-progress",
                          "fake:///zone-a/no-time": "no-creation-time"}
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [(r.getMessage(), r.NodeClaim, getattr(r, "provider-id"), r.reason) for r in warned] == [
        ("garbage collection leaves an unclaimed instance alone", {"name": "no-time"}, "fake:///zone-a/no-time", "no-creation-time")]
    assert ("delete", "launching") not in fake.calls and ("delete", "young") not in fake.calls
    # once the launch recorded another providerID, the instance it named is a leak
    await cluster.patch("NodeClaim", "launching", {"status": {"providerID": "fake:///zone-a/other"}}, status=True)
    leaked, _ = await gc.reconcile()
    assert leaked == ["fake:///zone-a/launching"]
