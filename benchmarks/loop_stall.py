"""The longest asyncio event-loop stall during the controller's disruption pass.

The disruption controller runs on the operator's one event loop beside the provisioner, the
watches and the leader Lease renewal. A pass that does not yield stalls all of them for as long as
it plans (on a loaded 2-core machine one pass went 97 s without yielding). This script runs the
controller's real pass, :meth:`~karpy_core.controllers.disruption.Disruption.reconcile`, on the
in-memory cluster loaded with :func:`benchmarks.consolidation_pass.build_topology`'s converged
cluster (nothing underutilized or drifted: every consolidation method examines every candidate,
the worst case), while a heartbeat task asks to be woken every 10 ms and records how late each
wake-up is. The max lateness is the longest stall of the loop.

Run with ``.venv/bin/python benchmarks/loop_stall.py [NODES...]`` (default 500 and 1,000 nodes);
``--shape topology`` for the cluster with underutilized and drifted nodes. Each size runs three
passes on the same cluster: ``first`` (sliced, as the controller plans: a turn of the loop every
:attr:`Disruption.slice_seconds`; it parses every pod), ``sliced`` (the same again, pods parsed, as
after any change) and ``blocking`` (an infinite slice: the whole plan in one go, as before the
planner was cut into steps), so the two compare in one run. Prints per pass its wall time, the max
stall, how many wake-ups were later than 100 ms, and the command. The stall is wall time, so a
loaded machine inflates it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from consolidation_pass import NOW, SHAPE_BUILDERS

from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption import Disruption
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import collect_snapshot
from karpy_core.utils.clock import VirtualClock

TICK = 0.01
"""Seconds the heartbeat asks to sleep each time."""
LATE = 0.1
"""A wake-up later than this many seconds counts as a stall (the target: no stall over ~100 ms)."""


class _Catalog:
    """The provider face the disruption controller reads: instance types per NodePool, no NodeClass filter."""

    overlay_generation = 0

    def __init__(self, types: dict[str, list[InstanceType]]):
        self.types = types

    async def get_instance_types(self, nodepool: Any) -> list[InstanceType]:
        name = nodepool.name if hasattr(nodepool, "name") else nodepool["metadata"]["name"]
        return list(self.types.get(name, []))

    def managed_node_classes(self) -> None:
        return None


@dataclass
class Heartbeat:
    """Wakes every :data:`TICK` seconds; records each wake-up's lateness (seconds)."""

    late: list[float] = field(default_factory=list)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(TICK)
            self.late.append(max(0.0, loop.time() - t - TICK))


class _Cluster(InMemoryCluster):
    """The in-memory cluster as the controller's informer cache serves it: PodDisruptionBudgets
    with the status the generator wrote (kube-controller-manager's work, which the in-memory
    cluster otherwise recomputes on every read: seconds at 1,000 nodes, none of it karpy's)."""

    def sync_disruption_budgets(self) -> None:
        return None


async def load(n: int, shape: str) -> tuple[InMemoryCluster, dict[str, list[InstanceType]], VirtualClock]:
    """The in-memory cluster holding ``shape``'s cluster of ``n`` nodes, its instance types, a
    clock at its ``now``; every object's view built once (as the informer cache does on each watch event)."""
    snap, types = SHAPE_BUILDERS[shape](n)
    clock = VirtualClock(NOW)
    cluster = _Cluster(clock)
    for kind, objs in (("NodePool", [v.raw for v in snap.nodepool_views]), ("Node", [v.raw for v in snap.node_views]),
                       ("NodeClaim", [v.raw for v in snap.nodeclaim_views]), ("DaemonSet", list(snap.daemonsets)),
                       ("PodDisruptionBudget", list(snap.pdbs)), ("Pod", [v.raw for v in snap.pod_views])):
        for obj in objs:
            cluster.create_stored(kind, obj)
    await collect_snapshot(cluster)
    return cluster, types, clock


async def one_pass(disruption: Disruption) -> tuple[float, float, int, str]:
    """One :meth:`Disruption.reconcile` with the heartbeat running: (wall seconds, max stall
    seconds, wake-ups later than :data:`LATE`, what was decided)."""
    beat = Heartbeat()
    task = asyncio.create_task(beat.run())
    await asyncio.sleep(2 * TICK)  # the heartbeat is waiting before the pass starts
    beat.late.clear()
    t0 = time.perf_counter()
    events = await disruption.reconcile()
    wall = time.perf_counter() - t0
    await asyncio.sleep(2 * TICK)  # the wake-up the pass delayed is recorded
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    decided = next((str(e.details.get("summary", "")) for e in events if e.kind == "disrupt-decided"), "no command")
    return wall, max(beat.late, default=0.0), sum(1 for x in beat.late if x > LATE), decided


async def measure(n: int, shape: str) -> None:
    cluster, types, clock = await load(n, shape)
    disruption = Disruption(kube=cluster, provider=_Catalog(types), clock=clock)  # type: ignore[arg-type]
    disruption.settings.pipeline_depth = 1  # one planning pass per pass, as the figures in docs/ were measured
    for label, slice_s in (("first", disruption.slice_seconds), ("sliced", disruption.slice_seconds), ("blocking", float("inf"))):
        disruption.slice_seconds = slice_s
        disruption._idle = None  # re-plan although nothing changed (as after any change)
        disruption.pipeline = []
        wall, stall, over, decided = await one_pass(disruption)
        print(f"{shape:>9} {n:>6} nodes {label:>8}: pass {wall:6.2f} s wall, max loop stall {stall * 1000:8.1f} ms, "
              f"{over:>3} stalls > {LATE * 1000:.0f} ms -> {decided[:70]}", flush=True)


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("sizes", nargs="*", type=int, help="node counts (default: 500 1000)")
    ap.add_argument("--shape", default="converged", choices=list(SHAPE_BUILDERS))
    args = ap.parse_args(argv)
    for n in args.sizes or [500, 1000]:
        asyncio.run(measure(n, args.shape))


if __name__ == "__main__":
    main(sys.argv[1:])
