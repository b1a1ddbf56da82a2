"""The provisioning batch window on a virtual clock (Karpenter pkg/controllers/provisioning/
batcher.go: 1 s idle, 10 s max): pods that kube-scheduler has not marked yet keep it open, so one
provisioning pass sees a burst of pods that kube-scheduler marks Unschedulable in spurts."""

from __future__ import annotations

import asyncio

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import WatchEvent
from karpy_core.operator import Operator, awaiting_scheduler
from karpy_core.utils.clock import VirtualClock

T0 = 1767225600.0


def pod(i: int, marked: bool) -> dict:
    status: dict = {"phase": "Pending"}
    if marked:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]
    return {"metadata": {"name": f"p{i}", "namespace": "default", "uid": f"uid-{i}"},
            "spec": {"containers": [{"name": "c"}]}, "status": status}


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


async def run_window(events: dict[float, list[tuple[str, dict]]]) -> float | None:
    """Feed ``events`` (time offset -> watch events) to an operator's change listener while its
    batcher waits, stepping a virtual clock by 0.1 s; the offset at which the batch closed."""
    clock = VirtualClock(T0)
    op = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock)
    waiter = asyncio.create_task(op.batcher.wait())
    await settle()
    try:
        for step in range(0, 200):
            t = round(step * 0.1, 1)
            clock.advance_to(T0 + t)
            await settle()
            if waiter.done():
                return t
            for type_, obj in events.get(t, []):
                op._on_change("Pod", WatchEvent(type_, obj))
            await settle()
        return None
    finally:
        waiter.cancel()


async def test_window_stays_open_while_unmarked_pods_arrive():
    # 20 pods arrive 5 at a time at 0, 0.8, 1.6 and 2.4 s; kube-scheduler marks them in two
    # spurts, at 1.0 s and 4.0 s: between the spurts 3 s pass without a newly marked pod.
    events: dict[float, list[tuple[str, dict]]] = {}
    for i in range(20):
        events.setdefault(round(0.8 * (i // 5), 1), []).append(("ADDED", pod(i, marked=False)))
    events.setdefault(1.0, []).extend(("MODIFIED", pod(i, marked=True)) for i in range(5))
    events.setdefault(4.0, []).extend(("MODIFIED", pod(i, marked=True)) for i in range(5, 20))
    closed = await run_window(events)
    assert closed == 5.0  # 1 s after the last pod was marked; one pass sees all 20


async def test_window_closes_after_one_idle_second_and_repeats_do_not_extend_it():
    events = {0.0: [("ADDED", pod(1, marked=True))],
              0.5: [("MODIFIED", pod(1, marked=True))],  # same pod, same state: not new
              0.9: [("MODIFIED", pod(1, marked=True))]}
    assert await run_window(events) == 1.0


async def test_window_never_exceeds_ten_seconds():
    events = {round(0.5 * i, 1): [("ADDED", pod(i, marked=False))] for i in range(40)}
    assert await run_window(events) == 10.0


def test_awaiting_scheduler_is_only_for_pods_kube_scheduler_has_not_seen():
    assert awaiting_scheduler(pod(1, marked=False))
    assert not awaiting_scheduler(pod(1, marked=True))
    bound = pod(2, marked=False)
    bound["spec"]["nodeName"] = "n"
    assert not awaiting_scheduler(bound)
    ds = pod(3, marked=False)
    ds["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "d"}]
    assert not awaiting_scheduler(ds)
    other = pod(4, marked=False)
    other["spec"]["schedulerName"] = "my-scheduler"
    assert not awaiting_scheduler(other)


async def test_a_deleted_unmarked_pod_no_longer_holds_the_window():
    events = {0.0: [("ADDED", pod(1, marked=False))], 0.5: [("DELETED", pod(1, marked=False))]}
    assert await run_window(events) == 1.0
