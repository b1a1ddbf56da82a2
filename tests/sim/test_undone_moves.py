"""Issue 34, item 3, end to end in the simulator: a memory-tight workload scaled down by 60% at a
1% repack threshold (``benchmarks/repack.py``'s memtight7-t1). With the planner's kube-scheduler
check, no consolidation is undone and no pod is left pending. With the check switched off (what
the planner decided before), moves are undone (a node launched for the pods they moved): each is
reported once as a ``disrupt-undone`` event and in the day summary, and never made again while
the workload and the offerings stay the same."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import karpy_core.controllers.disruption.methods.repack as repack
import karpy_core.controllers.disruption.simulation as simulation
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.undone import Undone, UndoneMoves
from karpy_core.sim.report import SimulationReport, day_summary
from karpy_core.sim.simulator import Simulator
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import PodView

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cost
import repack as bench


async def _run(threshold: float) -> tuple[Simulator, int]:
    from karpy_core.cli import _load_sim_provider

    docs = bench.memory_tight(7)
    provider, clock, cluster, _ = _load_sim_provider("simulated", None, None, None)
    sim = Simulator(provider, clock=clock, cluster=cluster, disruption=True)
    objs = cost.e2e_objects("aws", "scale", docs, [])
    for o in objs:
        if o["kind"] == "NodePool":
            o["metadata"]["annotations"] = {**(o["metadata"].get("annotations") or {}),
                                            "karpy.sh/consolidation-min-savings": str(threshold)}
    sim.apply(objs)
    await sim.run(max_seconds=6 * 3600)
    mark = len(sim.events)
    for d in docs:
        cluster.patch_sync("Deployment", d["metadata"]["name"], {"spec": {"replicas": max(1, round(d["spec"]["replicas"] * 0.4))}},
                           "default")
    await sim.run(max_seconds=8 * 3600)
    return sim, mark


def _pending(sim: Simulator) -> int:
    return sum(1 for p in sim.cluster.views("Pod") or () if isinstance(p, PodView) and not p.node_name and not p.deleting)


@pytest.mark.e2e
async def test_memory_tight_scale_down_ends_with_no_undone_move_and_nothing_pending():
    sim, mark = await _run(0.01)
    later = sim.events[mark:]
    assert not [e for e in later if e.kind == "disrupt-undone"]
    assert not [e for e in later if e.kind == "nodeclaim-create"]  # no node launched for moved pods
    assert _pending(sim) == 0


@pytest.mark.e2e
async def test_an_undone_move_is_reported_once_and_not_made_again(monkeypatch):
    monkeypatch.setattr(repack, "_kube_misfit", lambda *a: None)
    monkeypatch.setattr(simulation, "_reproducible", lambda ctx, cands, pods, ev: ev)
    executed: list[tuple[float, str]] = []
    found: list[tuple[float, Undone]] = []
    original_executed, original_observe = UndoneMoves.executed, UndoneMoves.observe

    def spy_executed(self: UndoneMoves, plan: DisruptionPlan, snapshot: ClusterSnapshot, now: float) -> None:
        executed.append((now, plan.move_key()))
        original_executed(self, plan, snapshot, now)

    def spy_observe(self: UndoneMoves, snapshot: ClusterSnapshot, now: float, *args: Any) -> list[Undone]:
        out = original_observe(self, snapshot, now, *args)
        found.extend((now, u) for u in out)
        return out

    monkeypatch.setattr(UndoneMoves, "executed", spy_executed)
    monkeypatch.setattr(UndoneMoves, "observe", spy_observe)
    sim, mark = await _run(0.01)
    undone = [e for e in sim.events[mark:] if e.kind == "disrupt-undone"]
    assert undone, "the unchecked repack is expected to be undone at least once on this workload"
    assert len(found) == len(undone)  # each reported once
    assert all(e.reason == "Underutilized" and e.details["pods"] for e in undone)
    # the workload (pod shapes) and the offerings do not change after the scale-down: a move found
    # undone is never executed again
    for at, u in found:
        assert any(k == u.key and t < at for t, k in executed)
        assert not [t for t, k in executed if k == u.key and t > at]
    report = SimulationReport(provider={}, nodes=[], pods=[], events=[x.to_dict() for x in sim.events],
                              cost_over_time=sim.cost_over_time, timeline=sim.timeline)
    assert day_summary(report).undone == {"Underutilized": len(undone)}
