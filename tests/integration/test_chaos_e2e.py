"""The chaos suite in CI (issue 34 item 2): one trial of each fault kind on the real control plane,
two controller replicas on one Lease, every moment of a scale-up and a consolidation covered
once. ``benchmarks/chaos.py`` runs the same harness (``tests/chaos.py``) with many trials.

Targets, in every trial: all pods Running, 0 NodeClaims beyond the fault-free run of the same
workload, 0 empty Nodes and 0 orphans once settled, 0 double actions (two leaders acting).
"""

from __future__ import annotations

import time

import pytest

from tests.chaos import FAULTS, Harness, Workload, table, trial_line

pytestmark = [pytest.mark.devcluster, pytest.mark.e2e]

#: each fault kind at one moment; together they cover every moment
CI_PLAN = [
    ("apiserver-restart", "mid-launch"),
    ("leader-kill", "mid-launch"),
    ("leader-stop", "pre-register"),
    ("watch-expiry", "before-claims"),
    ("api-429", "mid-launch"),
    ("api-5xx", "consolidation"),
    ("api-slow", "pre-register"),
]

#: 6 pods: 2 nodes, scaled down to 3 pods (1 node); shorter windows than the benchmark's
CI_WORKLOAD = Workload(pods=6, scale_down_to=3, settle_seconds=6.0, timeout_seconds=150.0, stop_seconds=20.0,
                       window_seconds=8.0, slow_seconds=2.0)


def test_the_plan_covers_every_fault_kind() -> None:
    assert sorted(f for f, _ in CI_PLAN) == sorted(FAULTS)


@pytest.mark.timeout(900)
async def test_chaos_one_trial_per_fault_kind_meets_every_target(devcluster, tmp_path) -> None:
    started = time.monotonic()
    async with Harness(devcluster, tmp_path, CI_WORKLOAD, say=print) as harness:
        # the fault-free scale-up; the consolidation is held to the ideal (1 Node, no new claim)
        refs = await harness.calibrate(consolidation=False)
        for r in refs:
            print("reference " + trial_line(r))
            assert r.settled and r.pods_running == r.pods, trial_line(r)
        assert harness.reference is not None and harness.reference.scale_up_claims == 2
        assert harness.reference.final_nodes == 1
        results = []
        for fault, moment in CI_PLAN:
            r = await harness.run(fault, moment)
            print(trial_line(r))
            results.append(r)
    print(table(results))
    print(f"chaos CI suite: {time.monotonic() - started:.0f} s")
    missed = [trial_line(r) for r in results if not r.ok]
    assert not missed, "targets missed (0 extra NodeClaims, 0 empty, 0 orphans, 0 double actions):\n" + "\n".join(missed)
