"""The plugin contract: the Protocols agree with the hookspecs, the facade hands the context to
the plugin and its decorators, and the decorators compose in the documented order."""

from __future__ import annotations

import inspect

from prometheus_client import CollectorRegistry

from karpy_core.cloudprovider import hookspecs
from karpy_core.cloudprovider.calls import PluginCalls
from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.contract import CloudProviderPlugin, FullCloudProviderPlugin
from karpy_core.cloudprovider.metrics import MeteredCalls
from karpy_core.cloudprovider.overlay import OverlaidCalls
from karpy_core.cloudprovider.provider import OPTIONAL_HOOKS, CloudProvider, load_provider
from karpy_core.cloudprovider.reservations import ReservedCapacityCalls
from karpy_core.cloudprovider.types import Offering
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.testing import RecordingProvider, nodepool_for

SPECS = {name: fn for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("karpy_")}
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _members(protocol: type) -> set[str]:
    return {name for name in dir(protocol) if name.startswith("karpy_")}


def test_the_protocols_name_every_hook_with_the_hookspecs_parameters_and_async_ness() -> None:
    assert _members(FullCloudProviderPlugin) == set(SPECS)
    assert _members(CloudProviderPlugin) == set(SPECS) - OPTIONAL_HOOKS
    for name, spec in SPECS.items():
        method = getattr(FullCloudProviderPlugin, name)
        assert list(inspect.signature(method).parameters)[1:] == list(inspect.signature(spec).parameters), name
        assert inspect.iscoroutinefunction(method) == str(inspect.signature(spec).return_annotation).startswith("Awaitable["), name


def test_the_decorators_compose_overlays_over_reservations_over_metrics_over_the_plugin() -> None:
    cloud = CloudProvider(RecordingProvider())
    stack = cloud.decorated
    assert isinstance(stack.outer, OverlaidCalls) and stack.outer is stack.overlays
    assert isinstance(stack.overlays.inner, ReservedCapacityCalls) and stack.overlays.inner is stack.reserved
    assert isinstance(stack.reserved.inner, MeteredCalls) and stack.reserved.inner is stack.metered
    assert isinstance(stack.metered.inner, PluginCalls)


async def test_prepare_hands_the_context_to_the_plugin_and_the_decorators() -> None:
    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    gates = FeatureGates(ReservedCapacity=False)
    context = ProviderContext(kube=InMemoryCluster(), feature_gates=gates, cluster_name="demo")
    cloud.prepare(context)
    assert recorder.context is context and cloud.feature_gates is gates
    assert cloud.decorated.reserved.feature_gates is gates
    # reserved offerings are dropped by the decorator, whatever the plugin answers
    base = recorder.instance_types[0]
    base.offerings.append(Offering("test-zone-a", "reserved", 0.0, True, reservation_id="cr-1", reservation_capacity=1))
    types = await cloud.get_instance_types(nodepool_for(REF))
    assert not any(o.capacity_type == "reserved" for it in types for o in it.offerings)
    cloud.set_feature_gates(FeatureGates(ReservedCapacity=True))
    assert recorder.context is not None and recorder.context.cluster_name == "demo"  # the rest of the context kept
    assert any(o.capacity_type == "reserved" for it in await cloud.get_instance_types(nodepool_for(REF)) for o in it.offerings)
    await cloud.start()
    await cloud.close()
    assert [c.hook for c in recorder.calls if c.hook in ("prepare", "start", "close")] == ["prepare", "prepare", "start", "close"]


def test_plugins_register_their_metrics_on_the_controllers_registry_once() -> None:
    metrics = Metrics()
    kakao = load_provider("kakaocloud", {"cluster_name": "demo"})
    aws = load_provider("aws", {"region": "us-east-1", "cluster_name": "demo"})
    for cloud in (kakao, aws):
        for _ in range(2):  # a second prepare with the same registry registers nothing twice
            cloud.prepare(ProviderContext(registry=metrics.registry))
    text = metrics.render().decode()
    assert text.count("# TYPE karpy_kakaocloud_unowned_instances_total counter") == 1
    assert text.count("# TYPE karpenter_interruption_received_messages_total counter") == 1


def test_a_plugin_without_optional_hooks_has_no_pricing_note_and_starts_and_closes_quietly() -> None:
    from tests.fakes import WithoutOptionalHooks

    recorder = WithoutOptionalHooks()
    cloud = CloudProvider(recorder)
    cloud.prepare(ProviderContext(registry=CollectorRegistry()))
    assert cloud.pricing_note() is None and cloud.controllers() == []
    assert not {"prepare", "pricing_note", "controllers"} & {c.hook for c in recorder.calls}  # none reached the plugin


def test_karpy_reads_no_plugin_attribute_by_name() -> None:
    """Capabilities are hooks (or the ProviderContext), never probed with getattr/hasattr."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "karpy_core"
    probe = re.compile(r"\b(?:getattr|hasattr)\(\s*(?:[\w.]*plugin\b|[\w.]+,\s*[\"']plugin[\"'])")
    found = [f"{path.relative_to(root.parent)}:{n}" for path in sorted(root.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1) if probe.search(line)]
    assert not found, found
