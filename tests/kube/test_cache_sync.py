"""Synced before acting (issue 34, item 1): the informer cache's sync state across watch restarts
and relists, the gate every deciding pass goes through, its log line and gauge, and the leader
that resumes past its lease."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpy_core.cli import _load_sim_provider
from karpy_core.controllers.disruption.controller import Disruption
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.errors import KubeAPIError
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.leader import LeaderElector
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import WatchEvent
from karpy_core.observability import Metrics
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import VirtualClock


def _claim(name: str, rv: int) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "resourceVersion": str(rv), "labels": {"karpenter.sh/nodepool": "np"}},
            "spec": {}, "status": {}}


class ScriptedKube:
    """A KubeClient whose watches play scripted rounds: each round is a list of events (ending in
    SYNCED, then live events) or an exception; after the last round a watch waits forever.
    Writes answer with the object and the next resourceVersion."""

    def __init__(self, rounds: dict[str, list[list[WatchEvent] | BaseException]]):
        self.rounds = rounds
        self.rv = 100
        self.advance: dict[str, asyncio.Event] = {k: asyncio.Event() for k in rounds}
        """Set to let a kind's watch go on to its next round (the current round ends in an error)."""

    async def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        rounds = self.rounds.setdefault(kind, [[WatchEvent("SYNCED", {})]])
        last = len(rounds) == 1
        step = rounds[0] if last else rounds.pop(0)
        if isinstance(step, BaseException):
            raise step
        for ev in step:
            yield ev
        if not last:  # more rounds to come: this watch drops when the test says so
            self.advance.setdefault(kind, asyncio.Event())
            await self.advance[kind].wait()
            self.advance[kind].clear()
            raise ConnectionResetError("watch connection dropped")
        await asyncio.Event().wait()

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        return []

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.rv)}}


def _synced(rv: int) -> WatchEvent:
    return WatchEvent("SYNCED", {"metadata": {"resourceVersion": str(rv)}})


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_relist_keeps_a_claim_written_after_the_list_and_drops_one_deleted_before_it(caplog: pytest.LogCaptureFixture) -> None:
    """The watch drops; the relist (at resourceVersion 150) holds neither the claim this process
    created at 151 (its create was answered while the list was on its way) nor the one deleted
    meanwhile (last seen at 120): the first stays in state as in-flight, the second goes."""
    kube = ScriptedKube({
        "NodeClaim": [[WatchEvent("ADDED", _claim("old", 120)), _synced(130)], [_synced(150)]],
        "Node": [[_synced(130)]], "Pod": [[_synced(130)]], "NodePool": [[_synced(130)]],
    })
    cache = CachedKubeClient(kube, ["NodeClaim", "Node", "Pod", "NodePool"])  # type: ignore[arg-type]
    await cache.start()
    try:
        assert cache.state_synced() == (True, "")
        kube.rv = 150
        await cache.create("NodeClaim", _claim("mine", 0))  # answered with resourceVersion 151
        assert [c["metadata"]["name"] for c in await cache.list("NodeClaim")] == ["mine", "old"]
        with caplog.at_level(logging.INFO, logger="karpy_core.kube.cache"):
            kube.advance["NodeClaim"].set()  # the watch drops, the cache relists
            await _until(lambda: [v.name for v in cache.views("NodeClaim") or ()] == ["mine"])
        assert cache.state_synced() == (True, "")
        assert "relist does not hold an object written after it" in caplog.text
    finally:
        await cache.stop()


async def test_unsynced_from_a_watch_failure_until_the_relist_and_a_404_after_serving_keeps_the_claims() -> None:
    """A restarting API server answers 404 for a CRD kind it has not loaded yet: the cache keeps
    the NodeClaims it had (it used to forget them all for 30 s) and stays unsynced, naming the
    kind, until a list succeeds."""
    not_found = KubeAPIError.from_status('the server could not find the requested resource', status=404, reason="NotFound")
    kube = ScriptedKube({
        "NodeClaim": [[WatchEvent("ADDED", _claim("a", 120)), _synced(130)], not_found, not_found, [_synced(200)]],
        "Node": [[_synced(130)]],
    })
    cache = CachedKubeClient(kube, ["NodeClaim", "Node"])  # type: ignore[arg-type]
    await cache.start()
    try:
        assert cache.state_synced()[0]
        kube.advance["NodeClaim"].set()
        await _until(lambda: not cache.state_synced()[0])
        ok, why = cache.state_synced()
        assert not ok and "NodeClaim" in why and "watch failing" in why and "Node " not in why
        assert [v.name for v in cache.views("NodeClaim") or ()] == ["a"]  # not forgotten
        await _until(lambda: cache.state_synced()[0], timeout=10.0)  # listed again (its 1 s retries)
        assert cache.views("NodeClaim") == []  # that list (at 200) no longer holds it
    finally:
        await cache.stop()


async def test_a_kind_never_served_is_not_synced() -> None:
    not_found = KubeAPIError.from_status("not found", status=404, reason="NotFound")
    cache = CachedKubeClient(ScriptedKube({"NodeClaim": [not_found], "Node": [[_synced(1)]]}), ["NodeClaim", "Node"])  # type: ignore[arg-type]
    await cache.start()
    try:
        ok, why = cache.state_synced()
        assert not ok and "NodeClaim (not served by the API server)" in why
        assert cache.health()[0]  # readiness: a missing CRD is listed-and-empty, as before
    finally:
        await cache.stop()


class Unsynced:
    """A source that is not synced, with the reason given."""

    def __init__(self, reason: str = "informer caches not synced: NodeClaim (relisting after a watch restart)"):
        self.reason = reason

    def state_synced(self) -> tuple[bool, str]:
        return False, self.reason


def _pending_cluster() -> tuple[InMemoryCluster, Any]:
    provider, _, cluster, _ = _load_sim_provider("simulated", None, None, None)
    from tests.controllers.test_nominations import _mix6_120

    for obj in _mix6_120():
        if obj["kind"] != "Deployment":
            cluster.create_sync(obj["kind"], obj)
    for i in range(4):
        cluster.create_sync("Pod", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "default"},
                                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                                    "status": {"phase": "Pending", "conditions": [
                                        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    return cluster, provider


async def test_an_unsynced_pass_does_nothing_says_so_and_the_gauge_is_0(caplog: pytest.LogCaptureFixture) -> None:
    cluster, provider = _pending_cluster()
    clock = VirtualClock()
    sync = ClusterSync(Unsynced())
    prov = Provisioner(kube=cluster, provider=provider, clock=clock, sync=sync)
    gc = GarbageCollection(kube=cluster, provider=provider, clock=clock, sync=sync)
    disruption = Disruption(kube=cluster, provider=provider, clock=clock, sync=sync)
    with caplog.at_level(logging.INFO, logger="karpy.state"):
        result = await prov.reconcile()
        assert await gc.reconcile() == ([], [])
        assert await disruption.reconcile() == []
    assert not result.synced and not result.created and result.results is None
    assert not cluster.objects("NodeClaim")
    lines = [r for r in caplog.records if r.getMessage() == "waiting on cluster sync; the pass does nothing"]
    assert {r.__dict__["controller"] for r in lines} == {"provisioner", "nodeclaim.garbagecollection", "disruption"}
    assert all("NodeClaim (relisting" in r.__dict__["reason"] for r in lines)
    metrics = Metrics()
    metrics.attach_state(cluster, sync.synced)
    assert _gauge(metrics) == 0.0
    # synced again: the same provisioner plans, says it resumes, and the gauge is 1
    sync.source = cluster
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="karpy.state"):
        again = await prov.reconcile()
    assert again.synced and again.created
    assert "cluster state synced; deciding again" in caplog.text
    assert _gauge(metrics) == 1.0


async def test_the_in_memory_cluster_is_always_synced() -> None:
    cluster, provider = _pending_cluster()
    assert ClusterSync(cluster).check() == (True, "")
    result = await Provisioner(kube=cluster, provider=provider, clock=VirtualClock()).reconcile()
    assert result.synced and result.created


def _gauge(metrics: Metrics) -> float:
    for family in metrics.registry.collect():
        for s in family.samples:
            if s.name == "karpenter_cluster_state_synced":
                return float(s.value)
    raise AssertionError("no karpenter_cluster_state_synced sample")


async def test_a_leader_resumed_past_its_renew_deadline_does_not_act() -> None:
    """SIGSTOP past the lease: when the process resumes, its clock has moved on while nothing ran;
    the gate is closed before its next renewal attempt is even made."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    elector = LeaderElector(cluster, name="l", namespace="default", identity="a", clock=clock)
    sync = ClusterSync(cluster, leading=elector.holds_lease)
    assert not sync.check()[0]  # not leading yet
    gate: list[bool] = []

    async def lead() -> None:
        gate.append(sync.check()[0])
        clock.advance(elector.renew_deadline + 30)  # frozen for 40 s: no renewal ran meanwhile
        gate.append(sync.check()[0])
        await asyncio.Event().wait()

    task = asyncio.create_task(elector.run(lead))
    try:
        await _until(lambda: len(gate) == 2)
        assert gate == [True, False]
        ok, why = sync.check()
        assert not ok and "lease" in why
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_a_starting_nodes_not_ready_taint_leaves_its_room_usable() -> None:
    """After an API server restart kube-controller-manager lifts a new node's not-ready taint late;
    the node is registered, not initialized: its room still counts (Karpenter's known ephemeral
    taints), so its pods get no second NodeClaim. Once initialized, every taint counts."""
    from karpy_core.scheduling.nodes import ExistingNode
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.taints import Taint

    taints = (Taint("node.kubernetes.io/not-ready", "", "NoSchedule"), Taint("karpenter.sh/unregistered", "", "NoExecute"))
    pod = pod_info({"metadata": {"name": "p", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})

    def node(initialized: bool) -> ExistingNode:
        return ExistingNode(name="n", labels={"kubernetes.io/hostname": "n"}, taints=taints,
                            allocatable={"cpu": 4000, "memory": 16 * 1024**3, "pods": 110}, initialized=initialized)

    assert Scheduler([], [node(False)]).solve([pod]).existing == {"default/p": "n"}
    assert node(False).effective_taints() == ()
    assert Scheduler([], [node(True)]).solve([pod]).existing == {}
    ignored = Taint("node.kubernetes.io/not-ready", "", "NoExecute")  # only the NoSchedule one is ephemeral
    assert ExistingNode(name="n", labels={}, taints=(ignored,), allocatable={}, initialized=False).effective_taints() == (ignored,)


async def test_a_write_is_not_sent_once_the_lease_is_no_longer_held() -> None:
    """The fence next to the wire: with the guard False a NodeClaim create is refused before any
    connection is made (the port is closed: reaching it would raise a connection error instead);
    GETs and Lease writes (the elector's own renewals and release) are not fenced."""
    import socket

    import aiohttp

    from karpy_core.kube.client import AsyncKubeClient
    from karpy_core.kube.transport import Access, Transport

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{port}")))
    held = [False]
    kube.transport.write_guard = lambda: held[0]
    try:
        with pytest.raises(KubeAPIError) as refused:
            await kube.create("NodeClaim", _claim("x", 0))
        assert refused.value.status == 503 and refused.value.reason == "NotLeader"
        for call in (kube.get("NodeClaim", "x"),
                     kube.replace("Lease", {"metadata": {"name": "l", "namespace": "default"}, "spec": {}})):
            with pytest.raises((aiohttp.ClientError, OSError)):
                await call
        held[0] = True
        with pytest.raises((aiohttp.ClientError, OSError)):  # sent (and the closed port refuses it)
            await kube.create("NodeClaim", _claim("x", 0))
    finally:
        await kube.close()


async def test_a_write_whose_lease_runs_out_while_it_waits_for_a_connection_is_not_sent():
    """A leader frozen (SIGSTOP) after its write passed the first lease check but before the
    request was written must not send it on waking: the fence is asked again once the connection
    is in hand (a CI run of test_sync_e2e's sigstop case got an extra NodeClaim this way). A real
    loopback server counts what reaches it; the guard holds at the first check only."""
    from aiohttp import web

    from karpy_core.kube.client import AsyncKubeClient
    from karpy_core.kube.transport import Access, Transport

    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(f"{request.method} {request.path}")
        return web.json_response({"kind": "NodeClaim", "metadata": {"name": "x"}}, status=201)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{port}")))
    checks = [0]

    def guard() -> bool:  # the lease runs out between the first check and the connection
        checks[0] += 1
        return checks[0] == 1

    kube.transport.write_guard = guard
    try:
        with pytest.raises(KubeAPIError) as refused:
            await kube.create("NodeClaim", _claim("x", 0))
        assert refused.value.status == 503 and refused.value.reason == "NotLeader"
        assert checks[0] == 2 and seen == []
        kube.transport.write_guard = lambda: True  # still leading: sent, on a new or a reused connection
        for _ in range(2):
            await kube.create("NodeClaim", _claim("x", 0))
        assert seen == ["POST /apis/karpenter.sh/v1/nodeclaims"] * 2
    finally:
        await kube.close()
        await runner.cleanup()
