"""``RoomBound`` (multi-node consolidation's check before a simulation) is a necessary condition:
a set of candidates it rules out fails its simulation, so skipping those simulations changes no
decision; and on a converged cluster it spares the binary search and the greedy extension their
simulations."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import pytest

from karpy_core.controllers.disruption.candidates import build_candidates
from karpy_core.controllers.disruption.decisions import DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.methods import consolidation_multi
from karpy_core.controllers.disruption.methods.consolidation_multi import GREEDY_SIMULATIONS as GREEDY_TRIES
from karpy_core.controllers.disruption.methods.consolidation_multi import RoomBound
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.disruption.simulation import Evaluation, SimulationContext, evaluate, evaluate_steps
from karpy_core.utils.steps import Steps

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import consolidation_pass as bench


def test_a_set_room_bound_rules_out_fails_its_simulation() -> None:
    """Random sets of 1-6 candidates of the converged topology shape (20 NodePools, arch and
    capacity-type selectors, spot and arm64 offerings cheaper than on-demand amd64) and of one
    with a tenth of its nodes underutilized: whenever ``may_go`` is False the consolidation
    simulation fails; both answers occur."""
    for under in (0.0, 0.1):
        _check_random_sets(under)


def _check_random_sets(under: float) -> None:
    snap, types = bench.build_topology(80, underutilized=under, drifted=0.0)
    sim = SimulationContext(snap, types)
    cands = [c for c in build_candidates(snap, types, bench.NOW) if not c.blocked and c.pods]
    room = RoomBound(sim)
    rng = random.Random(45)
    ruled_out = passed = 0
    for _ in range(150):
        subset = rng.sample(cands, rng.randint(1, 6))
        if room.may_go(sim, subset):
            passed += 1
            continue
        ruled_out += 1
        ev = evaluate(sim, subset, consolidation=True)
        assert not ev.ok, [c.name for c in subset]
    assert (ruled_out >= 20) if under == 0.0 else (passed >= 20), (under, ruled_out, passed)


def test_sets_that_can_go_pass_room_bound() -> None:
    """Every set the simulation lets go passes the bound (the contrapositive, on the sets that
    succeed: single underutilized nodes and pairs of them)."""
    snap, types = bench.build_topology(80, underutilized=0.2, drifted=0.0)
    sim = SimulationContext(snap, types)
    cands = [c for c in build_candidates(snap, types, bench.NOW) if not c.blocked and c.pods]
    room = RoomBound(sim)
    ok = 0
    for i, c in enumerate(cands):
        for subset in ([c], [c, cands[(i + 1) % len(cands)]]):
            if evaluate(sim, subset, consolidation=True).ok:
                ok += 1
                assert room.may_go(sim, subset), [x.name for x in subset]
    assert ok >= 5


def test_converged_multi_node_step_simulates_nothing_and_decides_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the converged topology shape no set can go: with the bound, multi-node consolidation
    runs no simulation (it ran 6 binary-search and 50 greedy ones), and the pass decides the same
    (no command, the same decision lines) as without it."""
    snap, types = bench.build_topology(1000, underutilized=0.0, drifted=0.0)
    multi = [DisruptionMethod.MULTI_NODE_CONSOLIDATION]
    calls: list[int] = []

    def counting(*args: Any, **kwargs: Any) -> Steps[Evaluation]:
        calls.append(1)
        return (yield from evaluate_steps(*args, **kwargs))  # the function consolidation_multi imports

    monkeypatch.setattr(consolidation_multi, "evaluate_steps", counting)
    log_with: list[NodeDecision] = []
    assert plan_disruption(snap, types, bench.NOW, log=log_with, methods=multi) is None
    assert calls == []
    monkeypatch.setattr(consolidation_multi.RoomBound, "may_go", lambda self, sim, cands: True)
    log_without: list[NodeDecision] = []
    assert plan_disruption(snap, types, bench.NOW, log=log_without, methods=multi) is None
    assert len(calls) > GREEDY_TRIES
    assert log_with == log_without
