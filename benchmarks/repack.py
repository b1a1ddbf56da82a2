"""Repack after a scale-down (issue 27): how close consolidation brings the cluster to the optimum
of the pods that remain, and at what churn.

For each workload (``benchmarks/cost.py``'s mixed Deployments on the default scenario's NodePool,
AWS-priced simulated cloud): the simulator runs it with disruption on until nothing is pending,
scales every Deployment down to ``--keep`` of its replicas (default 30%, i.e. a 70% scale-down),
and runs again until no disruption is pending. It prints:

* ``before``: USD/hour once the first rollout settled;
* ``after``: USD/hour once consolidation settled after the scale-down;
* ``fresh``: a fresh plan of the remaining pods (the provisioning scheduler, sized by cost, as
  if every remaining pod were pending on an empty cluster) - what a repack could at best reach
  with karpy's own planner;
* ``ref``: the optimum (or lower bound) of the remaining pods (:func:`karpy_core.sim.optimum.reference`);
* ``after/ref`` and ``fresh/ref``;
* churn: nodes disrupted and replacement NodeClaims launched after the scale-down, and nodes
  disrupted per USD/hour saved (``churn``: disrupted / (before - after)).

Run: ``.venv/bin/python benchmarks/repack.py [--keep 0.3] [--only NAME...] [--time-limit 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cost  # noqa: E402


def workloads() -> list[tuple[str, list[dict[str, Any]]]]:
    """(name, Deployments) for the scale-down runs."""
    return [
        ("mix6-120", cost.mix(6, 120, 2)),
        ("mix10-450", cost.mix(10, 450, 13)),
        ("mix12-1000", cost.mix(12, 1000, 3)),
        ("oddratio-72", next(d for n, d, _, _ in cost.new_workloads("aws") if n == "oddratio-72")),
    ]


async def scale_down(docs: list[dict[str, Any]], keep: float, time_limit: float) -> dict[str, Any]:
    """One run (see the module docstring); returns the numbers printed."""
    from karpy_core.cli import _load_sim_provider
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.sim.optimum import reference
    from karpy_core.sim.simulator import Simulator
    from karpy_core.state.cluster import ClusterSnapshot, daemonset_pod_infos, ready_nodepools
    from karpy_core.state.views import PodView

    provider, clock, cluster, _ = _load_sim_provider("simulated", None, None, None)
    sim = Simulator(provider, clock=clock, cluster=cluster, disruption=True)
    sim.apply(cost.e2e_objects("aws", "scale", docs, []))
    t0 = time.perf_counter()
    await sim.run(max_seconds=6 * 3600)
    before = sim.cost_over_time[-1]["cost_per_hour"]
    mark = len(sim.events)
    for d in docs:
        if d.get("kind") == "Deployment":
            replicas = max(1, round(d["spec"]["replicas"] * keep))
            cluster.patch_sync("Deployment", d["metadata"]["name"], {"spec": {"replicas": replicas}}, "default")
    await sim.run(max_seconds=24 * 3600)
    seconds = time.perf_counter() - t0
    after = sim.cost_over_time[-1]["cost_per_hour"]
    later = sim.events[mark:]
    disrupted = sum(1 for e in later if e.kind == "disrupt")
    launched = sum(1 for e in later if e.kind == "launch")
    pods = [p.info for p in cluster.views("Pod") or () if isinstance(p, PodView) and not p.deleting and not p.terminal
            and p.info.owner_kind != "DaemonSet"]
    snap = ClusterSnapshot(nodepools=cluster.objects("NodePool"))
    ready, _ = ready_nodepools(snap)
    from karpy_core.scheduling.template import template_from_nodepool, type_tables

    templates = [template_from_nodepool(p.raw, await provider.get_instance_types(p.model)) for p in ready]
    dss = daemonset_pod_infos(cluster.objects("DaemonSet"))
    tables = type_tables(templates, dss)
    fresh_plan = Scheduler(templates, daemonsets=dss, tables=tables, sizing=True).solve(pods)
    fresh = sum(c.cheapest_offering_price() for c in fresh_plan.new_claims)
    ref = reference(list(tables.values()), pods, upper_bound=min(fresh, after), time_limit=time_limit)
    return {"pods": len(pods), "before": before, "after": after, "fresh": fresh, "ref": ref.value, "ref_status": ref.status,
            "disrupted": disrupted, "launched": launched, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=float, default=0.3, help="fraction of each Deployment's replicas kept")
    parser.add_argument("--only", nargs="*", help="workload names")
    parser.add_argument("--time-limit", type=float, default=10.0, help="HiGHS seconds for the reference")
    args = parser.parse_args()
    print(f"{'workload':<14} {'pods':>5} | {'before':>8} {'after':>8} {'fresh':>8} {'ref':>8} {'kind':<11} | "
          f"{'after/ref':>9} {'fresh/ref':>9} | {'disrupted':>9} {'launched':>8} {'churn':>11} | {'sim s':>6}")
    for name, docs in workloads():
        if args.only and name not in args.only:
            continue
        r = asyncio.run(scale_down(docs, args.keep, args.time_limit))
        ref = r["ref"] or float("nan")
        saved = r["before"] - r["after"]
        churn = f"{r['disrupted'] / saved:.2f}/USD" if saved > 1e-9 else "-"
        print(f"{name:<14} {r['pods']:>5} | {r['before']:>8.4f} {r['after']:>8.4f} {r['fresh']:>8.4f} {ref:>8.4f} "
              f"{r['ref_status']:<11} | {r['after'] / ref:>9.3f} {r['fresh'] / ref:>9.3f} | {r['disrupted']:>9} "
              f"{r['launched']:>8} {churn:>11} | {r['seconds']:>6.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
