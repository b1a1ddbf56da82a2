"""The disruption pass plans in slices (the event loop runs meanwhile) and executes nothing once the
replica may no longer act (the leader Lease lost while it planned)."""

from __future__ import annotations

import asyncio

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.disruption import Disruption
from karpy_core.controllers.disruption.decisions import NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption, plan_disruption_steps
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import VirtualClock, iso
from karpy_core.utils.steps import done, run_steps, run_steps_async
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim, pod, snapshot
from tests.fakes import must_peek
from tests.scheduling.helpers import nodepool


def _counting() -> tuple[list[int], object]:
    """A generator of three checkpoints returning 42, and the list of how far it got."""
    seen: list[int] = []

    def gen():
        for i in range(3):
            seen.append(i)
            yield
        return 42

    return seen, gen


def test_run_steps_returns_the_value_and_done_has_no_checkpoint():
    seen, gen = _counting()
    assert run_steps(gen()) == 42 and seen == [0, 1, 2]  # type: ignore[operator]
    assert run_steps(done("x")) == "x"


async def test_run_steps_async_lets_the_loop_run_and_a_cancel_stops_the_generator():
    ticks: list[int] = []

    async def other() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0)

    task = asyncio.create_task(other())
    _, gen = _counting()
    assert await run_steps_async(gen(), slice_seconds=0.0) == 42  # type: ignore[operator]
    assert len(ticks) >= 3  # the other task ran between the checkpoints
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    went: list[int] = []

    def forever():
        while True:
            went.append(1)
            yield

    runner = asyncio.create_task(run_steps_async(forever(), slice_seconds=0.0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    n = len(went)
    await asyncio.sleep(0)
    assert len(went) == n and n >= 1  # closed: nothing runs after the cancel


async def test_the_sliced_plan_is_the_plan():
    """The same command and the same decision lines whether the plan runs in one call or in
    slices of no time at all (a turn of the loop at every checkpoint)."""
    pods = [pod(f"p{i}", n, cpu="1") for i, n in enumerate(["a", "a", "b", "c", "c", "d"])]
    snap = snapshot(["a", "b", ("c", "small", 2), "d"], pods)
    log1: list[NodeDecision] = []
    log2: list[NodeDecision] = []
    one = plan_disruption(snap, TYPES, NOW, log=log1)
    sliced = await run_steps_async(plan_disruption_steps(snap, TYPES, NOW, log=log2), slice_seconds=0.0)
    assert one is not None and sliced is not None
    assert one.describe() == sliced.describe()
    assert log1 == log2 and log1


def _drifted_cluster() -> tuple[VirtualClock, InMemoryCluster]:
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "Never", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    claim["status"]["conditions"].append({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
                                          "lastTransitionTime": iso(NOW - 60)})
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("p1", "a"))
    return clock, cluster


@pytest.mark.parametrize("lost", [False, True])
async def test_a_lease_lost_while_planning_executes_nothing(lost: bool):
    """A drift command is executed in the pass that decides it. When the lease is lost while the
    pass plans (another task runs at the planner's first checkpoint and the lease check turns
    False), the decided command is not executed: no taint, no replacement, no deletion; with the
    lease held the same pass executes it."""
    clock, cluster = _drifted_cluster()
    leading = [True]
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock,
                   sync=ClusterSync(cluster, leading=lambda: leading[0]))
    d.slice_seconds = 0.0
    planning: list[bool] = []

    async def renewal() -> None:  # stands in for the elector: runs only when the pass yields
        await asyncio.sleep(0)
        planning.append(True)
        if lost:
            leading[0] = False

    task = asyncio.create_task(renewal())
    claims_before = {c["metadata"]["name"] for c in cluster.objects("NodeClaim")}
    events = await d.reconcile()
    await task
    kinds = [e.kind.value for e in events]
    assert planning == [True]  # the other task ran during the pass
    assert kinds[0] == "disrupt-decided"
    taints = [t["key"] for t in must_peek(cluster, "Node", "a")["spec"].get("taints") or []]
    claims_after = {c["metadata"]["name"] for c in cluster.objects("NodeClaim")}
    if lost:
        assert "disrupt" not in kinds and "replacement-create" not in kinds, kinds
        assert taints == [] and claims_after == claims_before
        assert not (must_peek(cluster, "NodeClaim", "a")["metadata"].get("deletionTimestamp"))
    else:
        assert kinds[1] == "disrupt", kinds
        assert taints == ["karpenter.sh/disrupted"] and len(claims_after) == len(claims_before) + 1
