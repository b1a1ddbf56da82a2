"""Time a whole simulated day: ten Deployments (250m/500m/1 core pods, 1,000 pods at the default
size) on the AWS-priced simulated cloud, two scale-downs (at 4 h and 8 h), consolidation and the
rest of the controllers running on the virtual clock until 24 h.

It was a timed test (``test_thousand_pods_for_a_day_is_fast``, under 60 s); the scenario's
outcome is still asserted at a smaller size by
``tests/sim/test_scenarios_time.py::test_a_day_of_scale_downs_binds_every_remaining_pod``.

Run with ``.venv/bin/python benchmarks/simulate_day.py [REPLICAS_PER_DEPLOYMENT...]`` (default
100, i.e. 1,000 pods). Prints, per size: wall seconds, CPU seconds, the process's peak RSS (MiB,
cumulative over the sizes run so far), pods bound and pending at the end, and events recorded.
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from karpy_core.cli import run_simulation
from tests.sim.test_scenarios_time import day_of_scale_downs


def run_once(replicas: int) -> dict[str, float]:
    """Simulate the day with ``replicas`` pods per Deployment; wall/CPU seconds and the outcome."""
    with tempfile.TemporaryDirectory() as tmp:
        path = day_of_scale_downs(Path(tmp), replicas=replicas)
        wall0, cpu0 = time.perf_counter(), time.process_time()
        report = asyncio.run(run_simulation([path]))
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    doc = report.to_dict()
    return {"pods": 10 * replicas, "wall_s": wall, "cpu_s": cpu,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "bound": doc["summary"]["pods_bound"], "pending": doc["summary"]["pods_pending"], "events": len(doc["events"])}


def main(argv: list[str]) -> None:
    sizes = [int(a) for a in argv] or [100]
    print(f"{'pods':>6} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13} {'bound':>6} {'pending':>8} {'events':>7}")
    for replicas in sizes:
        r = run_once(replicas)
        print(f"{r['pods']:>6} {r['wall_s']:>8.2f} {r['cpu_s']:>8.2f} {r['peak_rss_mib']:>13.0f} {r['bound']:>6} "
              f"{r['pending']:>8} {r['events']:>7}")


if __name__ == "__main__":
    main(sys.argv[1:])
