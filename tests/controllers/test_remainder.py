"""A batch that closes while pods keep arriving leaves its small remainder NodeClaims to the next
batch (issue 36, item 3: pods arriving over ~10 s, each batch sized exactly, 255 + 255 + 31 + 3 + 1
pods then 255 + 191 + 7 + 2, nine NodeClaims where Karpenter made five)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import yaml

from karpy_core.cli import _load_sim_provider
from karpy_core.controllers.provisioning.batcher import Batcher
from karpy_core.controllers.provisioning.provisioner import (
    REMAINDER_PASSES,
    Provisioner,
    _packs_freely,
    grows_at_same_rate,
    remainder_claims,
)
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock

from ..scheduling.test_ties import kwok_batch, kwok_pod

REPO = Path(__file__).resolve().parents[2]
CATALOG = str(REPO / "examples" / "catalogs" / "kwok-instance-types.json")


def _pending(i: int) -> dict[str, Any]:
    pod = kwok_pod(i)
    pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return pod


def _cluster() -> tuple[InMemoryCluster, VirtualClock]:
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    docs = [d for d in yaml.safe_load_all((REPO / "tests" / "data" / "kwok" / "karpenter-kwok-nodepool.yaml").read_text()) if d]
    for d in docs:
        d.get("spec", {}).pop("limits", None)  # 1,000 pods of 1 cpu need more than its 1,000 cpu
        cluster.create_sync(d["kind"], d)
    return cluster, clock


def _shape(claims: list[dict[str, Any]]) -> list[int]:
    return sorted((len(c["metadata"]["annotations"]["karpy.sh/nominated-pods"].split(",")) for c in claims), reverse=True)


def test_remainder_is_the_claims_smaller_than_the_largest_within_the_share():
    res = kwok_batch(545)
    sizes = [len(c.pods) for c in res.new_claims]
    assert sorted(sizes, reverse=True) == [255, 255, 31, 3, 1]
    real = {p.key for c in res.new_claims for p in c.pods}
    held = remainder_claims(res.new_claims, real)
    assert sorted(len(res.new_claims[i].pods) for i in held) == [1, 3, 31]
    # a pod left over once is never left over again: it changes places with an interchangeable
    # pod of a full claim that was not left over, and the remainder, new pods only, is left over
    one = next(p.key for i in held for p in res.new_claims[i].pods if len(res.new_claims[i].pods) == 3)
    again = kwok_batch(545).new_claims
    assert remainder_claims(again, real, frozenset({one})) == held
    assert one not in {p.key for i in held for p in again[i].pods}
    assert one in {p.key for i, c in enumerate(again) if i not in held for p in c.pods}
    assert sorted((len(c.pods), c.requests["cpu"]) for c in again) == sorted((len(c.pods), c.requests["cpu"]) for c in res.new_claims)
    # with no such pod (every pod was left over before) the remainder is launched whole, and so
    # is one holding a CapacityBuffer's virtual pod (the next batch would not be planned with it)
    assert remainder_claims(kwok_batch(545).new_claims, real, frozenset(real)) == set()
    assert remainder_claims(res.new_claims, real - {one}) == set()
    # 1,000 pods: 255 x 3 + 191 + 44 - the 235 on the two smaller claims are less than one c-256x's 255
    big = kwok_batch(1000)
    held = remainder_claims(big.new_claims, {p.key for c in big.new_claims for p in c.pods})
    assert sorted(len(big.new_claims[i].pods) for i in held) == [44, 191]
    # a remainder of one full-size claim's worth or more is launched: 191 + 44 + 31 + 31 pods beside
    # a c-256x of 255; less than that is left over
    c256, c192, c48 = (next(c for c in big.new_claims if len(c.pods) == n) for n in (255, 191, 44))
    c32 = [next(c for c in res.new_claims if len(c.pods) == 31), next(c for c in kwok_batch(35).new_claims if len(c.pods) == 31)]
    claims = [c256, c192, c48, *c32]
    real = {p.key for c in claims for p in c.pods}
    assert remainder_claims(claims, real) == set()
    assert remainder_claims(claims[:3], real) == {1, 2}
    # no full-size claim (a stream's first batches): a c-48x and two c-32x, each full, but a c-256x
    # holds their pods at the same rate, so the whole remainder waits for the pods that follow
    assert not grows_at_same_rate(c256) and all(grows_at_same_rate(c) for c in (c192, c48, *c32))
    assert remainder_claims([c48, *c32], real) == {0, 1, 2}
    # pods that do not share nodes freely (here a host port: the rule only, such a claim holds one)
    # make a claim as full as it gets, and only the smaller claims are its remainder
    for c in (c48, *c32):
        c.pods[:] = [dataclasses.replace(p, host_ports=frozenset({("0.0.0.0", 8080, "TCP")})) for p in c.pods]
    assert not any(_packs_freely(c) for c in (c48, *c32))
    assert remainder_claims([c48, c32[0]], real) == {1}
    # all one size: no remainder
    even = kwok_batch(510)
    assert [len(c.pods) for c in even.new_claims] == [255, 255]
    assert remainder_claims(even.new_claims, {p.key for c in even.new_claims for p in c.pods}) == set()


async def _two_batches(streaming: bool) -> tuple[list[int], list[int], list[str], float]:
    cluster, clock = _cluster()
    provider, _, _, _ = _load_sim_provider("simulated", None, CATALOG, None)
    prov = Provisioner(kube=cluster, provider=provider, clock=clock)
    for i in range(545):
        cluster.create_sync("Pod", _pending(i))
    first = await prov.reconcile(streaming=streaming)
    for i in range(545, 1000):
        cluster.create_sync("Pod", _pending(i))
    second = await prov.reconcile(streaming=False)  # the stream has ended: the last batch closes idle
    assert first.results is not None and second.results is not None
    assert not first.results.errors and not second.results.errors
    plans = [*first.results.new_claims, *second.results.new_claims]
    planned = {p.key for c in plans for p in c.pods}
    assert len(planned) + len(set(second.results.existing) - planned) == 1000
    cost = sum(c.cheapest_offering_price() for c in plans)
    return _shape(first.created), _shape(second.created), first.deferred, cost


async def test_a_streaming_batch_leaves_its_remainder_to_the_next_one():
    exact_first, exact_second, none, exact_cost = await _two_batches(streaming=False)
    assert not none
    assert exact_first == [255, 255, 31, 3, 1] and exact_second == [255, 191, 7, 2]  # the nine
    first, second, deferred, cost = await _two_batches(streaming=True)
    assert first == [255, 255] and len(deferred) == 35
    assert second == [255, 191, 44]  # the 35 left over planned with the next 455: five NodeClaims
    assert cost < exact_cost - 0.01  # 1,008 cpus of nodes instead of 1,010


async def _drive_window(batcher: Batcher, clock: VirtualClock, arrivals: list[float]) -> float:
    """Advance ``clock`` in 0.1 s steps from now, triggering ``batcher`` at each time in ``arrivals``
    (seconds after the start), until its window closes; return the seconds it stayed open.

    Raises AssertionError if it is still open after 20 s."""
    waiter = asyncio.create_task(batcher.wait())
    start = clock.now()
    for step in range(200):
        t = round(step * 0.1, 1)
        clock.advance_to(start + t)
        for _ in range(10):
            await asyncio.sleep(0)
        if waiter.done():
            return t
        if t in arrivals:
            batcher.trigger()
            for _ in range(10):
                await asyncio.sleep(0)
    raise AssertionError("the window never closed")


async def test_batcher_cut_tells_a_window_closed_at_its_maximum_while_pods_arrive():
    class Window:
        idle_seconds = 1.0
        max_seconds = 10.0

    clock = VirtualClock(0.0)
    batcher = Batcher(clock, Window())

    def window(arrivals: list[float]) -> Awaitable[float]:
        return _drive_window(batcher, clock, arrivals)

    assert await window([round(0.5 * i, 1) for i in range(40)]) == 10.0 and batcher.cut
    assert await window([0.0, 0.5]) == 1.5 and not batcher.cut
    # arrivals stop 2 s before the maximum: the window closes idle, not cut
    assert await window([round(0.5 * i, 1) for i in range(15)]) == 8.0 and not batcher.cut


async def test_a_pod_left_over_and_sorted_last_again_trades_places_so_the_stream_still_ends_in_one_remainder():
    """kube-scheduler marks pods Unschedulable out of name order (its backoff reorders them), so
    the pods a batch left over can sort after the next batch's new ones and land on its remainder
    again. Before the swap that batch's remainder was launched exactly; now the left-over pods go
    on its full claims and the new ones wait for the next batch (issue 36: 5,000 pods, 29
    NodeClaims where Karpenter made 21)."""
    cluster, clock = _cluster()
    provider, _, _, _ = _load_sim_provider("simulated", None, CATALOG, None)
    prov = Provisioner(kube=cluster, provider=provider, clock=clock)
    for i in range(500, 1045):  # first batch: 545 pods, the 35 highest names left over
        cluster.create_sync("Pod", _pending(i))
    first = await prov.reconcile(streaming=True)
    assert _shape(first.created) == [255, 255] and len(first.deferred) == 35
    assert max(first.deferred) == "default/inflate-01044"
    for i in range(0, 230):  # the next batch's new pods all sort before the left-over ones
        cluster.create_sync("Pod", _pending(i))
    second = await prov.reconcile(streaming=True)
    assert _shape(second.created) == [255]  # 35 left over + 220 new on one full claim
    assert not set(first.deferred) & set(second.deferred) and len(second.deferred) == 10
    for i in range(230, 500):
        cluster.create_sync("Pod", _pending(i))
    last = await prov.reconcile(streaming=False)  # the stream has ended: its one remainder is launched
    assert last.results is not None and not last.results.errors
    shape = _shape(last.created)
    assert shape[0] == 255 and sum(shape) == 280 and not last.deferred  # 10 left over + 270 new, exactly


async def test_a_stream_that_starts_small_opens_full_size_claims_and_ends_in_one_remainder():
    """The batches of a stream's start are small (kube-scheduler marks the first pods Unschedulable
    at a few dozen a second): 5,000 inflate pods on the real control plane began 54, 119, 136 pods,
    and each was planned exactly on one full node of its own size (47 pods on a ``c-48x``, 63 on a
    ``c-64x``, 127 on a ``c-128x``), none with room for the next batch: 23 NodeClaims where
    Karpenter made 21. Such a claim is a remainder too (a ``c-256x`` holds its pods at the same
    rate): the pods wait for the batches that follow, at most :data:`REMAINDER_PASSES` passes, and
    the stream gets as many NodeClaims as an exact fit of all its pods at once."""
    cluster, clock = _cluster()
    provider, _, _, _ = _load_sim_provider("simulated", None, CATALOG, None)
    prov = Provisioner(kube=cluster, provider=provider, clock=clock)
    arrivals = [54, 119, 136, 200, 91]  # the last batch closes idle: the stream has ended
    created: list[list[int]] = []
    deferred: list[list[str]] = []
    plans = []
    start = 0
    for n, count in enumerate(arrivals):
        for i in range(start, start + count):
            cluster.create_sync("Pod", _pending(i))
        start += count
        res = await prov.reconcile(streaming=n < len(arrivals) - 1)
        assert res.results is not None and not res.results.errors
        created.append(_shape(res.created))
        deferred.append(res.deferred)
        plans.extend(res.results.new_claims)
    assert created == [[], [], [255], [254], [91]]
    # the first 54 pods were left over twice, then went on the first full claim
    first = {f"default/inflate-{i:05d}" for i in range(54)}
    assert first <= set(deferred[0]) and first <= set(deferred[1]) and not first & set(deferred[2])
    exact = kwok_batch(600).new_claims
    assert len(plans) == len(exact) == 3
    assert sum(c.cheapest_offering_price() for c in plans) <= sum(c.cheapest_offering_price() for c in exact) + 0.01


async def test_a_pod_left_over_remainder_passes_times_is_planned_without_a_full_claim():
    """A trickle never fills a full-size claim: its pods wait :data:`REMAINDER_PASSES` passes, then
    the remainder is planned (exactly) with the pods that arrived meanwhile."""
    cluster, clock = _cluster()
    provider, _, _, _ = _load_sim_provider("simulated", None, CATALOG, None)
    prov = Provisioner(kube=cluster, provider=provider, clock=clock)
    shapes = []
    for n in range(REMAINDER_PASSES + 2):
        for i in range(20 * n, 20 * n + 20):
            cluster.create_sync("Pod", _pending(i))
        res = await prov.reconcile(streaming=True)
        shapes.append((sum(_shape(res.created)), len(res.deferred)))
    waited = [(0, 20 * (n + 1)) for n in range(REMAINDER_PASSES)]
    assert shapes == [*waited, (20 * (REMAINDER_PASSES + 1), 0), (0, 20)]


async def test_a_batch_held_open_to_its_maximum_by_unmarked_pods_is_cut():
    """kube-scheduler marks pods Unschedulable in bursts, seconds apart on a busy control plane: a
    window it held open (pods it has not marked yet) that reaches its maximum more than ``idle``
    after the last burst is a stream's batch all the same (5,000 pods: three such batches planned
    their remainders exactly mid-stream, 27 NodeClaims)."""
    class Window:
        idle_seconds = 1.0
        max_seconds = 10.0

    clock = VirtualClock(0.0)
    unmarked = [True]
    batcher = Batcher(clock, Window(), hold=lambda: unmarked[0])

    def window(arrivals: list[float]) -> Awaitable[float]:
        return _drive_window(batcher, clock, arrivals)

    assert await window([0.0, 3.0]) == 10.0 and batcher.cut  # the last burst 7 s before the maximum
    unmarked[0] = False
    assert await window([0.0, 0.5]) == 1.5 and not batcher.cut  # nothing unmarked: closes idle
