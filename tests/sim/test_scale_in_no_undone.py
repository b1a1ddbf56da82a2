"""Issue 36, "a disruption the next launch undoes is a bug", end to end in the simulator: the
workload of ``benchmarks/scale_apiserver.py`` (10 teams, 20 NodePools, zone-spread ``web``
pods, PDBs, two DaemonSets) at 300 pods on the KWOK catalog, scaled up, then in to 30%.

Before karpy's disruption simulation placed the pods of nodes an earlier command was still
taking away (:func:`~karpy_core.controllers.disruption.simulation.leaving_nodes`), the scale-in
decided a repack while a single-node replacement's pods were still on their tainted node: both
commands counted on the same room, and two NodeClaims were launched for the ``t4`` pods they moved
(3 ``disrupt-undone`` events). Now no command of the scale-in is undone and nothing is launched
for the pods it moved."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from karpy_core.sim.simulator import Simulator
from karpy_core.state.views import PodView

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scale_apiserver as bench


@pytest.mark.e2e
async def test_the_benchmark_scale_in_launches_nothing_for_the_pods_it_moves():
    from karpy_core.cli import _load_sim_provider

    wl = bench.workload(300, 0.3)
    provider, clock, cluster, _ = _load_sim_provider("simulated", None, str(bench.CATALOG), None)
    sim = Simulator(provider, clock=clock, cluster=cluster, disruption=True)
    sim.apply(wl.objects)
    for name, n in wl.full.items():
        cluster.patch_sync("Deployment", name, {"spec": {"replicas": n}}, bench.NS)
    await sim.run(max_seconds=1800)
    mark = len(sim.events)
    for name, n in wl.kept.items():
        cluster.patch_sync("Deployment", name, {"spec": {"replicas": n}}, bench.NS)
    await sim.run(max_seconds=3600)
    later = sim.events[mark:]
    assert [e for e in later if e.kind == "disrupt"], "the scale-in is expected to consolidate"
    assert not [(e.t, e.node) for e in later if e.kind == "disrupt-undone"]
    assert not [e.t for e in later if e.kind == "nodeclaim-create"]  # no launch for pods a command moved
    pending = [p.key for p in cluster.views("Pod") or () if isinstance(p, PodView) and not p.node_name and not p.deleting]
    assert pending == []
