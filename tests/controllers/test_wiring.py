"""The controllers as built once (build_controllers) and woken by the kinds each declares; the
lifecycle publishing its own events and metrics."""

from __future__ import annotations

import pytest

from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.controllers.base import Controller, Observer, Runnable, Wake, wakes
from karpy_core.controllers.metrics.pod import PodMetrics
from karpy_core.controllers.nodeclaim.lifecycle import LifecycleEventKind, NodeClaimLifecycle
from karpy_core.controllers.wiring import ControllerContext, build_controllers
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import WatchEvent
from karpy_core.observability import Metrics
from karpy_core.operator import ControllerSettings, Operator
from karpy_core.utils.clock import VirtualClock
from tests.controllers.test_lifecycle import CLAIM, kubelet_registers
from tests.fakes import recording_provider
from tests.test_metrics import T0, value
from tests.test_metrics import pod as metrics_pod


def test_wake_matches_kinds_types_and_every_nodeclass():
    w = Wake.on("NodePool", "*NodeClass")
    assert w.matches("NodePool", "MODIFIED") and w.matches("EC2NodeClass", "ADDED") and w.matches("KCNodeClass", "DELETED")
    assert not w.matches("NodeClaim", "MODIFIED")
    deleted = Wake.on("Pod", types=("DELETED",))
    assert deleted.matches("Pod", "DELETED") and not deleted.matches("Pod", "MODIFIED")
    assert wakes((w, deleted), "Pod", "DELETED") and not wakes((w, deleted), "Pod", "ADDED")


def test_build_controllers_honours_the_feature_gates():
    clock = VirtualClock()
    provider = load_provider("simulated", {})
    off = build_controllers(ControllerContext(kube=InMemoryCluster(clock), provider=provider, clock=clock,
                                              feature_gates=FeatureGates(), node_repair=False))
    assert off.overlays is None and off.static is None and off.buffer_status is None and off.repair is None
    on = build_controllers(ControllerContext(
        kube=InMemoryCluster(clock), provider=provider, clock=clock, node_repair=True,
        feature_gates=FeatureGates(NodeOverlay=True, StaticCapacity=True, CapacityBuffer=True)))
    names = on.schedule().names
    assert names == ["nodepool.status", "nodeoverlay.controller", "capacitybuffer", "static.provisioning", "provisioner",
                     "nodeclaim.lifecycle", "node.termination", "node.health", "nodeclaim.disruption.drift", "disruption",
                     "nodeclaim.garbagecollection"]
    assert len(names) == len(set(names))
    for c in on.schedule():
        assert isinstance(c, (Runnable, Controller))
    assert isinstance(on.provisioner_trigger, Observer) and isinstance(on.provisioner_trigger, Runnable)
    assert on.gc.first_delay == 10.0 and on.gc.resync_seconds == 120.0


def test_the_provisioner_trigger_keeps_its_controller_name_and_its_former_name_imports():
    import karpy_core.controllers.provisioning.controller as module
    from karpy_core.controllers.provisioning.controller import ProvisionerTrigger
    from karpy_core.controllers.provisioning.provisioner import Provisioner

    clock = VirtualClock()
    built = build_controllers(ControllerContext(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock))
    assert isinstance(built.provisioner_trigger, ProvisionerTrigger) and isinstance(built.provisioner, Provisioner)
    assert built.provisioner_trigger.provisioner is built.provisioner and built.provisioner_trigger.name == "provisioner"
    with pytest.warns(DeprecationWarning, match="ProvisionerTrigger"):
        assert module.ProvisioningController is ProvisionerTrigger
    with pytest.raises(AttributeError):
        _ = module.NoSuchName


def test_the_change_listener_wakes_controllers_by_their_declared_kinds():
    clock = VirtualClock()
    op = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock,
                  settings=ControllerSettings.model_validate({"feature_gates": FeatureGates(NodeOverlay=True)}))

    def woken(kind: str, type_: str) -> set[str]:
        for ev in op._wake.values():
            ev.clear()
        op._on_change(kind, WatchEvent(type_, {"kind": kind, "metadata": {"name": "x", "namespace": "default"}}))
        return {name for name, ev in op._wake.items() if ev.is_set()}

    assert woken("Pod", "DELETED") == {"node.termination"}
    assert woken("Pod", "MODIFIED") == set()
    assert woken("NodeClaim", "MODIFIED") == {"nodeclaim.lifecycle", "node.termination", "nodepool.status"}
    assert woken("NodeClaim", "DELETED") == {"nodeclaim.lifecycle", "node.termination", "nodepool.status", "disruption"}
    assert woken("NodePool", "MODIFIED") == {"nodepool.status", "nodeclaim.disruption.drift", "nodeoverlay.controller"}
    assert woken("EC2NodeClass", "MODIFIED") == {"nodeclaim.disruption.drift", "nodeoverlay.controller"}


def test_pod_events_reach_the_pod_metrics_controller_by_its_route():
    """``metrics.pod`` is one of the controllers the operator runs (with a metrics registry), routed
    pod events by its ``wakes_on`` like the others: the listener has no branch of its own for pods."""
    clock = VirtualClock(T0)
    op = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock)
    pod_metrics = op.controllers.pod_metrics
    assert isinstance(pod_metrics, PodMetrics) and isinstance(pod_metrics, Observer) and isinstance(pod_metrics, Runnable)
    assert "metrics.pod" in [c.name for c in op._running]
    observers, names = op._route("Pod", "MODIFIED")  # the pod metrics first, as before the batch window sees the pod
    assert observers == [pod_metrics.observe, op.provisioner_trigger.observe] and "metrics.pod" not in names
    assert op._route("Node", "MODIFIED")[0] == []  # no other kind reaches it
    op._on_change("Pod", WatchEvent("ADDED", metrics_pod("p")))
    op._on_change("Pod", WatchEvent("MODIFIED", metrics_pod("p", "n1")))  # bound 30 s after creation
    assert value(op.metrics, "karpenter_pods_bound_duration_seconds_count") == 1
    # without a registry (the simulator) there is no pod metrics controller
    bare = build_controllers(ControllerContext(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock))
    assert bare.pod_metrics is None


async def test_lifecycle_publishes_its_events_and_metrics():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    metrics = Metrics(now=clock.now)
    lc = NodeClaimLifecycle(kube=cluster, provider=CloudProvider(recording_provider()), clock=clock,
                            events=EventRecorder(cluster, clock), metrics=metrics)
    cluster.create_sync("NodeClaim", CLAIM)
    assert [e.kind for e in await lc.reconcile()] == [LifecycleEventKind.LAUNCH]
    kubelet_registers(cluster, "default-abcde")
    assert [e.kind for e in await lc.reconcile()] == [LifecycleEventKind.REGISTER]
    cluster.patch_sync("Node", "ip-10-0-0-1", {"spec": {"taints": []}})  # the startup taint cleared
    assert [e.kind for e in await lc.reconcile()] == [LifecycleEventKind.INITIALIZE]
    reasons = {(e["reason"], e["message"]) for e in cluster.objects("Event")}
    assert ("Launched", "Launched small (on-demand) in zone-a, providerID fake:///zone-a/r-000001") in reasons
    assert ("Registered", "Node ip-10-0-0-1 registered") in reasons
    assert ("Initialized", "Node ip-10-0-0-1 initialized") in reasons
    assert value(metrics, "karpenter_nodes_created", nodepool="default") == 1.0
