"""Node termination asks the cloud provider about a NotReady Node's instance (Karpenter
``pkg/controllers/node/termination/controller.go`` ``finalize``, the one place Karpenter's core
calls ``CloudProvider.Get``): an instance that is gone means the finalizer is removed at once,
no taint, no drain (issue 35, trial 4: ``karpy_get`` was never called by any controller)."""

from __future__ import annotations

import logging

import pytest

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.node.termination import NodeTermination, TerminationEventKind
from karpy_core.controllers.wiring import ControllerContext, build_controllers
from karpy_core.errors import CreateError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing import RecordingProvider, nodeclaim_for
from karpy_core.utils.clock import VirtualClock
from tests.fakes import recording_provider

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
GONE = "fake:///zone-a/r-999999"
DRAINED = [(TerminationEventKind.EVICT, ""), (TerminationEventKind.NODE_FINALIZED, "")]
"""A drain: the pod evicted, then the finalizer removed."""


def _node(cluster: InMemoryCluster, name: str, pid: str, ready: str) -> None:
    labels = {"karpenter.sh/nodepool": "default"}
    cluster.create_sync("Node", {"metadata": {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                                 "spec": {"providerID": pid},
                                 "status": {"conditions": [{"type": "Ready", "status": ready}]}})
    cluster.create_sync("NodeClaim", {"metadata": {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                                      "spec": {"nodeClassRef": REF}, "status": {"providerID": pid, "nodeName": name}})
    cluster.create_sync("Pod", {"metadata": {"name": f"{name}-pod", "namespace": "default", "ownerReferences": [
        {"kind": "ReplicaSet", "name": "rs", "controller": True}]}, "spec": {"nodeName": name, "containers": [{"name": "c"}]},
        "status": {"phase": "Running"}})


async def _setup(pid: str | None, ready: str) -> tuple[InMemoryCluster, RecordingProvider, NodeTermination, str]:
    """A deleted managed Node (Ready ``ready``) with one pod; its instance launched unless ``pid``
    names one (then never launched: gone)."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    recorder = recording_provider()
    provider = CloudProvider(recorder)
    if pid is None:
        pid = str((await provider.create(nodeclaim_for("n", REF))).status.provider_id)
    _node(cluster, "n", pid, ready)
    await cluster.delete("Node", "n")
    return cluster, recorder, NodeTermination(kube=cluster, clock=clock, provider=provider), pid


@pytest.mark.parametrize("ready", ["False", "Unknown"])
async def test_a_notready_node_whose_instance_is_gone_is_finalized_at_once(ready: str) -> None:
    cluster, recorder, term, pid = await _setup(GONE, ready)
    events = await term.reconcile()
    assert [(e.kind, e.reason) for e in events] == [(TerminationEventKind.NODE_FINALIZED, "instance gone")]
    assert [call.args["provider_id"] for call in recorder.calls_of("get")] == [pid]
    assert cluster.peek("Node", "n") is None  # the finalizer was its last: gone
    assert cluster.peek("NodeClaim", "n")["metadata"].get("deletionTimestamp")  # type: ignore[index]  # deleted first, as before
    assert cluster.peek("Pod", "n-pod", "default") is not None  # not evicted: nothing runs there (pod GC's job)


async def test_a_notready_node_whose_instance_is_there_is_drained() -> None:
    cluster, recorder, term, pid = await _setup(None, "False")
    events = await term.reconcile()
    assert [call.args["provider_id"] for call in recorder.calls_of("get")] == [pid]
    assert [(e.kind, e.reason) for e in events] == DRAINED  # evicted first (the in-memory pod goes at once)
    assert cluster.peek("Pod", "n-pod", "default") is None


async def test_a_ready_node_is_not_asked_about() -> None:
    """Ready True: the kubelet still runs, whatever the cloud says (Karpenter asks only otherwise)."""
    _, recorder, term, _ = await _setup(GONE, "True")
    events = await term.reconcile()
    assert recorder.calls_of("get") == []
    assert [(e.kind, e.reason) for e in events] == DRAINED


async def test_a_failing_get_is_logged_and_the_node_drained(caplog: pytest.LogCaptureFixture) -> None:
    cluster, recorder, term, _ = await _setup(GONE, "False")
    recorder.fail("get", CreateError("cloud API down", condition_reason="Unavailable"))
    with caplog.at_level(logging.WARNING):
        events = await term.reconcile()
    assert [(e.kind, e.reason) for e in events] == DRAINED  # drained as if the instance were there
    (record,) = [r for r in caplog.records if "NotReady node" in r.getMessage()]
    assert str(record.__dict__["error"]) == "cloud API down"
    assert cluster.peek("Node", "n") is None


async def test_without_a_provider_nothing_is_asked() -> None:
    _, recorder, term, _ = await _setup(GONE, "False")
    term.provider = None
    assert [(e.kind, e.reason) for e in await term.reconcile()] == DRAINED
    assert recorder.calls_of("get") == []


def test_the_wiring_gives_termination_the_provider() -> None:
    clock = VirtualClock()
    provider = CloudProvider(recording_provider())
    controllers = build_controllers(ControllerContext(kube=InMemoryCluster(clock), provider=provider, clock=clock))
    assert controllers.termination.provider is provider
