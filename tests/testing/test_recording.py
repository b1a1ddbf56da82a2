"""The call-recording fake provider (karpy_core.testing.RecordingProvider), used as a plugin
author would: through the facade, standalone or wrapping a plugin, with injected errors."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry, Counter, Histogram

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.metrics import CloudCallMetrics
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.simulated import create_plugin as simulated_plugin
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.errors import CloudProviderError, InsufficientCapacityError, NodeClaimNotFoundError
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing import HookCall, ProviderConformance, RecordingProvider, nodeclaim_for, nodepool_for
from karpy_core.utils.clock import VirtualClock

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


class TestRecordingProviderConformance(ProviderConformance):
    """Standalone, the fake passes the same kit a real provider must."""

    async def make_provider(self) -> CloudProvider:
        return CloudProvider(RecordingProvider())

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return "recording:///test-zone-a/r-999999"


async def test_records_each_call_with_its_arguments_in_order() -> None:
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    types = await cloud.get_instance_types(nodepool_for(REF, name="web"))
    launched = await cloud.create(nodeclaim_for("a", REF))
    got = await cloud.get(launched.status.provider_id or "")
    assert (got.status.provider_id, got.metadata.labels) == (launched.status.provider_id, launched.metadata.labels)
    assert [t.name for t in types] == ["rec.small", "rec.medium", "rec.large"]
    assert [c.hook for c in recorder.calls if c.hook != "supported_node_classes"] == ["get_instance_types", "create", "get"]
    (create,) = recorder.calls_of("create")
    assert create.args["nodeclaim"].metadata.name == "a"
    assert create.args["nodeclaim"].status.provider_id is None  # recorded as it was when called
    assert recorder.calls_of("get") == [HookCall("get", {"provider_id": launched.status.provider_id})]
    assert recorder.calls_of("get_instance_types")[0].args["nodepool"].metadata.name == "web"


async def test_injected_errors_reach_the_caller_once_each() -> None:
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    recorder.fail("create", InsufficientCapacityError("no capacity"), times=2)
    recorder.fail_call("list", 2, CloudProviderError("throttled", code="RequestLimitExceeded"))
    for _ in range(2):
        with pytest.raises(InsufficientCapacityError):
            await cloud.create(nodeclaim_for("a", REF))
    launched = await cloud.create(nodeclaim_for("a", REF))  # the third attempt launches
    assert launched.metadata.labels["node.kubernetes.io/instance-type"] == "rec.small"
    assert len(recorder.calls_of("create")) == 3 and len(recorder.instances) == 1
    assert [nc.metadata.name for nc in await cloud.list()] == ["a"]
    with pytest.raises(CloudProviderError) as raised:
        await cloud.list()
    assert raised.value.code == "RequestLimitExceeded"
    assert len(await cloud.list()) == 1
    with pytest.raises(ValueError):
        recorder.fail("launch", RuntimeError())


async def test_the_cloud_call_metrics_decorator_counts_injected_errors_with_upstream_labels() -> None:
    registry = CollectorRegistry()
    metrics = CloudCallMetrics(
        Histogram("karpenter_cloudprovider_duration_seconds", "d", ["controller", "method", "provider"], registry=registry),
        Counter("karpenter_cloudprovider_errors", "e", ["controller", "method", "provider", "error"], registry=registry))
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    cloud.prepare(ProviderContext(cloud_call_metrics=metrics))
    recorder.fail("create", InsufficientCapacityError("no capacity"))

    async def lifecycle() -> None:
        with pytest.raises(InsufficientCapacityError):
            await cloud.create(nodeclaim_for("a", REF))
        await cloud.create(nodeclaim_for("a", REF))

    await asyncio.create_task(lifecycle(), name="nodeclaim.lifecycle")
    labels = {"controller": "nodeclaim.lifecycle", "method": "Create", "provider": "recording"}
    assert registry.get_sample_value("karpenter_cloudprovider_duration_seconds_count", labels) == 2
    assert registry.get_sample_value("karpenter_cloudprovider_errors_total",
                                     {**labels, "error": "InsufficientCapacityError"}) == 1


async def test_wraps_a_plugin_records_its_calls_and_hands_it_the_context() -> None:
    inner = simulated_plugin({"region": "us-east-1"})
    recorder = RecordingProvider(inner)
    cloud = CloudProvider(recorder)
    cluster = InMemoryCluster(VirtualClock())
    cloud.prepare(ProviderContext(kube=cluster, feature_gates=FeatureGates(ReservedCapacity=False), simulation=True))
    assert inner.kube is cluster  # the wrapped plugin got the context through its own karpy_prepare
    assert recorder.context is not None and recorder.context.simulation
    assert cloud.name == "simulated" and cloud.pricing_note() == inner.pricing_note
    launched = await cloud.create(nodeclaim_for("b", REF, [{"key": "karpenter.sh/capacity-type", "operator": "In",
                                                             "values": ["on-demand"]}]))
    assert (launched.status.provider_id or "").startswith("simulated:///")
    recorder.fail("delete", CloudProviderError("API down"))
    with pytest.raises(CloudProviderError):
        await cloud.delete(launched)
    assert len(await inner.karpy_list()) == 1  # the injected error never reached the wrapped plugin
    await cloud.delete(launched)
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.delete(launched)  # gone: karpy's delete loop ends
    assert [c.hook for c in recorder.calls if c.hook in ("prepare", "create", "delete")] == \
        ["prepare", "create", "delete", "delete", "delete"]


async def test_a_controller_under_test_deletes_a_leaked_instance_through_the_fake() -> None:
    """What a plugin author or a controller test writes: garbage collection terminates an
    instance no NodeClaim claims, and a failed terminate is retried on the next pass."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    cloud.prepare(ProviderContext(kube=cluster, clock=clock))  # launch times on the test's clock
    leaked = await cloud.create(nodeclaim_for("leaked", REF))
    gc = GarbageCollection(kube=cluster, provider=cloud, clock=clock)
    launched = (await cloud.get(leaked.status.provider_id or "")).metadata.creation_timestamp
    assert launched is not None and launched.timestamp() == clock.now()
    clock.advance(3600)
    recorder.fail("delete", CloudProviderError("API down"))
    with pytest.raises(CloudProviderError):
        await gc.reconcile()  # the pass fails; the controller's loop runs it again
    assert [c.args["nodeclaim"].status.provider_id for c in recorder.calls_of("delete")] == [leaked.status.provider_id]
    assert recorder.instances  # the first terminate failed
    leaked_ids, _ = await gc.reconcile()
    assert leaked_ids == [leaked.status.provider_id] and not recorder.instances
    assert len(recorder.calls_of("delete")) == 2


class _AnswersAnotherInstance(RecordingProvider):
    """A provider whose get answers some launched instance for an ID it does not know."""

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        if provider_id not in self.instances and self.instances:
            provider_id = sorted(self.instances)[0]
        return await super().karpy_get(provider_id)


class _KitOnAnswersAnotherInstance(ProviderConformance):
    async def make_provider(self) -> CloudProvider:
        return CloudProvider(_AnswersAnotherInstance())

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return "recording:///test-zone-a/r-999999"


async def test_launch_times_a_test_sets_are_what_get_and_list_report() -> None:
    """``launched_at``: an instance launched earlier than the test's clock, or listed without a
    creation time (as some clouds list theirs)."""
    clock = VirtualClock()
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    cloud.prepare(ProviderContext(clock=clock))
    a = str((await cloud.create(nodeclaim_for("a", REF))).status.provider_id)
    b = str((await cloud.create(nodeclaim_for("b", REF))).status.provider_id)
    assert recorder.launched_at == {a: clock.now(), b: clock.now()}
    recorder.launched_at[a] = clock.now() - 60
    recorder.launched_at[b] = None
    created = {str(nc.status.provider_id): nc.metadata.creation_timestamp for nc in await cloud.list()}
    at = created[a]
    assert created[b] is None and at is not None and at.timestamp() == clock.now() - 60
    assert (await cloud.get(b)).metadata.creation_timestamp is None


async def test_the_kit_fails_a_provider_whose_get_answers_another_instance() -> None:
    kit = _KitOnAnswersAnotherInstance()
    provider = await kit.make_provider()
    try:
        with pytest.raises(AssertionError) as err:
            await kit.test_get_answers_the_instance_asked_for(provider)
        assert "get(recording:///test-zone-a/r-999999) of an unknown instance answered instance recording:///" in str(err.value)
        assert "must raise NodeClaimNotFoundError" in str(err.value)
        # the instances it launched were deleted even though the check failed
        assert await provider.list() == []
    finally:
        await kit.close_provider(provider)
