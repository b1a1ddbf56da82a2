"""Chaos suite on the real control plane (issue 34 item 2): many trials, one table.

Starts the dev cluster (``hack/devcluster.py``), runs the fault-free reference (a scale-up, and a
scale-up then scale-down), then ``--trials`` trials of each fault kind, each kind cycling through
the moments (before the first NodeClaim, mid-launch, before the Nodes register, during a
consolidation command). Two ``karpy controller --cloud-provider simulated --kwok`` replicas on one
Lease, a NodePool of m5.xlarge (4 cpu), a Deployment of ``--pods`` 1-cpu pods. The harness is
``tests/chaos.py`` (the CI test ``tests/integration/test_chaos_e2e.py`` runs the same code).

Prints one line per trial, then per fault kind: trials, NodeClaims created beyond the fault-free
run (sum and worst trial), empty Nodes and orphans left once settled, double actions (two
leaders acting), trials that never settled, seconds from the fault to the settled state (median,
max), and trials meeting every target. ``--json FILE`` writes every trial. Exit code 1 when a
trial missed a target.

Run: ``.venv/bin/python benchmarks/chaos.py [--trials 5] [--faults apiserver-restart,leader-kill]
[--moments before-claims,mid-launch] [--pods 30] [--json out.json]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402

from tests.chaos import FAULTS, MOMENTS, Harness, TrialResult, Workload, plan, table, trial_line  # noqa: E402


async def run(args: argparse.Namespace) -> list[TrialResult]:
    faults = args.faults.split(",") if args.faults else list(FAULTS)
    moments = args.moments.split(",") if args.moments else list(MOMENTS)
    for f in faults:
        if f not in FAULTS:
            raise SystemExit(f"unknown fault {f!r}; one of {', '.join(FAULTS)}")
    for m in moments:
        if m not in MOMENTS:
            raise SystemExit(f"unknown moment {m!r}; one of {', '.join(MOMENTS)}")
    workload = Workload(pods=args.pods, scale_down_to=args.scale_down_to)
    results: list[TrialResult] = []
    keep = args.keep_logs
    with devcluster.DevCluster(devcluster.build()) as cluster, tempfile.TemporaryDirectory(prefix="karpy-chaos-") as tmp:
        workdir = Path(keep) if keep else Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        async with Harness(cluster, workdir, workload, say=lambda m: print(m, flush=True)) as harness:
            for r in await harness.calibrate(consolidation="consolidation" in moments):
                print("reference " + trial_line(r), flush=True)
            for fault, moment in plan(faults, moments, args.trials):
                r = await harness.run(fault, moment)
                results.append(r)
                print(trial_line(r), flush=True)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=5, help="trials per fault kind (default 5)")
    parser.add_argument("--faults", default="", help=f"comma-separated subset of {','.join(FAULTS)}")
    parser.add_argument("--moments", default="", help=f"comma-separated subset of {','.join(MOMENTS)}")
    parser.add_argument("--pods", type=int, default=30, help="Deployment replicas (3 per node; default 30)")
    parser.add_argument("--scale-down-to", type=int, default=12, help="replicas after the consolidation scale-down")
    parser.add_argument("--json", default="", help="write every trial to this file")
    parser.add_argument("--keep-logs", default="", help="keep the replicas' logs under this directory")
    args = parser.parse_args()
    started = time.monotonic()
    results = asyncio.run(run(args))
    print()
    print(table(results))
    print(f"({len(results)} trials in {time.monotonic() - started:.0f} s)")
    for r in results:
        if not r.ok:
            print("  missed: " + trial_line(r))
    if args.json:
        Path(args.json).write_text(json.dumps([r.as_dict() for r in results], indent=2) + "\n")
    sys.exit(0 if all(r.ok for r in results) else 1)


if __name__ == "__main__":
    main()
