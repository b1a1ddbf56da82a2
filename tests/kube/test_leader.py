"""Leader election on a Lease: one leader at a time, hand-over on release and on expiry."""

from __future__ import annotations

import asyncio

from karpy_core.kube.leader import LeaderElector
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import RealClock


def elector(cluster: InMemoryCluster, identity: str) -> LeaderElector:
    return LeaderElector(cluster, name="karpy", namespace="karpy", identity=identity, clock=RealClock(),
                         lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)


async def test_only_one_leader_and_release_hands_over_at_once():
    cluster = InMemoryCluster()
    leading: list[str] = []
    stop_a = asyncio.Event()

    async def work(name: str, stop: asyncio.Event | None) -> None:
        leading.append(name)
        assert len([n for n in leading if n is not None]) >= 1
        if stop is not None:
            await stop.wait()
        else:
            await asyncio.sleep(0.3)

    a, b = elector(cluster, "a"), elector(cluster, "b")
    ta = asyncio.create_task(a.run(lambda: work("a", stop_a)))
    await asyncio.sleep(0.2)
    tb = asyncio.create_task(b.run(lambda: work("b", None)))
    await asyncio.sleep(0.5)
    assert leading == ["a"] and a.is_leader and not b.is_leader
    lease = await cluster.get("Lease", "karpy", "karpy")
    assert lease["spec"]["holderIdentity"] == "a"
    loop = asyncio.get_running_loop()
    released_at = loop.time()
    stop_a.set()
    await ta
    await asyncio.wait_for(tb, 3)
    assert leading == ["a", "b"]
    # b took over well before a's lease (1 s) would have expired: a released it
    assert loop.time() - released_at < 1.0


async def test_crashed_leader_is_replaced_after_lease_duration():
    cluster = InMemoryCluster()
    a, b = elector(cluster, "a"), elector(cluster, "b")
    assert await a._try()  # a acquired, then "crashed" without renewing or releasing
    started = asyncio.get_running_loop().time()
    got: list[float] = []

    async def work() -> None:
        got.append(asyncio.get_running_loop().time() - started)

    await asyncio.wait_for(b.run(work), 5)
    assert got and 0.9 <= got[0] <= 2.5
    lease = await cluster.get("Lease", "karpy", "karpy")
    assert lease["spec"]["leaseTransitions"] == 1


class _Unreachable(InMemoryCluster):
    """An API server that stopped answering: every request fails at the transport."""

    async def get(self, *args, **kwargs):
        raise OSError("connection refused")


async def test_standby_replica_is_ready_while_its_lease_attempts_reach_the_api_server():
    """A standby (lease held by another replica) answers /readyz 200 as a Karpenter standby
    does, so rollouts and the chart's PDB do not wait on it; it is not ready once its lease
    attempts stop reaching the API server for longer than the lease duration."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.operator import ControllerSettings, LeaderSettings, Operator

    cluster = InMemoryCluster()
    holder = elector(cluster, "other")
    assert await holder._try()
    renew = asyncio.create_task(_renew_forever(holder))
    settings = ControllerSettings.model_validate(dict(
        leader=LeaderSettings.model_validate(dict(enabled=True, namespace="karpy", lease_name="karpy",
                                                  lease_duration=1.0, renew_deadline=0.6, retry_period=0.1)),
        health_port=0, metrics_port=None, health_host="127.0.0.1"))
    operator = Operator(kube=cluster, provider=load_provider("simulated", {}), settings=settings)
    assert operator.ready() == (False, "informer caches not started (not leading yet, or still listing)")
    run = asyncio.create_task(operator.run())
    try:
        for _ in range(50):
            await asyncio.sleep(0.05)
            if operator.ready()[0]:
                break
        assert operator.ready() == (True, "standby: waiting for the leader Lease")
        assert operator.elector is not None and not operator.elector.is_leader and not operator.started
        # the API server goes away for the standby: after the lease duration it is not ready
        operator.elector.kube = _Unreachable()
        await asyncio.sleep(1.3)
        ready, why = operator.ready()
        assert not ready and "not started" in why
    finally:
        run.cancel()
        renew.cancel()
        await asyncio.gather(run, renew, return_exceptions=True)


async def _renew_forever(holder: LeaderElector) -> None:
    while True:
        await holder._try()
        await asyncio.sleep(0.1)


async def test_cancelling_the_leader_leaves_no_task_behind():
    """Cancelling ``run`` (the operator's shutdown) stops the lead work and the renew sleep too."""
    cluster = InMemoryCluster()
    a = LeaderElector(cluster, name="karpy", namespace="karpy", identity="a", clock=RealClock(),
                      lease_duration=60.0, renew_deadline=40.0, retry_period=30.0)
    running = asyncio.Event()

    async def lead() -> None:
        running.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(a.run(lead))
    await asyncio.wait_for(running.wait(), 5)
    await asyncio.sleep(0)  # run() is now waiting out its 30 s renew period
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    await asyncio.sleep(0)
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert left == [] and not a.is_leader
    assert (await cluster.get("Lease", "karpy", "karpy"))["spec"].get("holderIdentity") in (None, "")
