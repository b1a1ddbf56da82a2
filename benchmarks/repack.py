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
* churn: consolidation commands, nodes disrupted and replacement NodeClaims launched after the
  scale-down, and nodes disrupted per USD/hour saved (``churn``: disrupted / (before - after));
* flapping (issue 34): ``undone``, the consolidation commands found undone (a node launched for
  the pods they moved: ``disrupt-undone`` events), ``prov``, the NodeClaims the provisioner
  launched after the scale-down (none is needed: every one is for pods a disruption moved), and
  ``pend``, the pods pending at the end.

The memory-tight scenarios (``memtight-*``: five memory-heavy Deployments, 3-12 GiB pods of
0.25-1 cpu, scaled down by 60% as issue 34 reported) run at the repack threshold named in their
suffix (``t0``: 0, ``t1``: 1%, none: the default 10%), set as the NodePool's
``karpy.sh/consolidation-min-savings``; the planned arrangement of their pods over the
replacements is the one a kube-scheduler first fit is most likely to miss.

Run: ``.venv/bin/python benchmarks/repack.py [--keep 0.3] [--only NAME...] [--time-limit 10]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cost  # noqa: E402


def memory_tight(seed: int, total: int = 200) -> list[dict[str, Any]]:
    """Five memory-heavy Deployments (0.25-1 cpu, 3-12 GiB per pod, seeded replica counts up to
    ``total`` // 3 each)."""
    rng = random.Random(seed)
    counts = [rng.randint(5, total // 3) for _ in range(5)]
    return [cost._deploy(f"mem{i}", rng.choice(["250m", "500m", "1"]), rng.choice(["3Gi", "6Gi", "12Gi", "5Gi", "7Gi"]), n)
            for i, n in enumerate(counts)]


def workloads() -> list[tuple[str, list[dict[str, Any]], float | None, float | None]]:
    """(name, Deployments, repack threshold or None for the default, kept fraction or None for
    ``--keep``) for the scale-down runs."""
    out: list[tuple[str, list[dict[str, Any]], float | None, float | None]] = [
        ("mix6-120", cost.mix(6, 120, 2), None, None),
        ("mix10-450", cost.mix(10, 450, 13), None, None),
        ("mix12-1000", cost.mix(12, 1000, 3), None, None),
        ("oddratio-72", next(d for n, d, _, _ in cost.new_workloads("aws") if n == "oddratio-72"), None, None),
    ]
    for seed in (7, 11):
        for suffix, threshold in (("-t0", 0.0), ("-t1", 0.01), ("", None)):
            out.append((f"memtight{seed}{suffix}", memory_tight(seed), threshold, 0.4))
    return out


async def scale_down(docs: list[dict[str, Any]], keep: float, time_limit: float, threshold: float | None = None) -> dict[str, Any]:
    """One run (see the module docstring); returns the numbers printed."""
    from karpy_core.cli import _load_sim_provider
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.sim.optimum import reference
    from karpy_core.sim.simulator import Simulator
    from karpy_core.state.cluster import ClusterSnapshot, daemonset_pod_infos, ready_nodepools
    from karpy_core.state.views import PodView

    provider, clock, cluster, _ = _load_sim_provider("simulated", None, None, None)
    sim = Simulator(provider, clock=clock, cluster=cluster, disruption=True)
    objs = cost.e2e_objects("aws", "scale", docs, [])
    for o in objs:
        if o["kind"] == "NodePool" and threshold is not None:
            meta = o.setdefault("metadata", {})
            meta["annotations"] = {**(meta.get("annotations") or {}), "karpy.sh/consolidation-min-savings": str(threshold)}
    sim.apply(objs)
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
    commands = [e for e in later if e.kind == "disrupt"]
    disrupted = sum(len([n for n in e.node.split(",") if n]) for e in commands)
    launched = sum(1 for e in later if e.kind == "launch")
    undone = sum(1 for e in later if e.kind == "disrupt-undone")
    provisioned = sum(1 for e in later if e.kind == "nodeclaim-create")
    views = [p for p in cluster.views("Pod") or () if isinstance(p, PodView) and not p.deleting and not p.terminal
             and p.info.owner_kind != "DaemonSet"]
    pending = sum(1 for p in views if not p.node_name)
    pods = [p.info for p in views]
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
            "commands": len(commands), "disrupted": disrupted, "launched": launched, "undone": undone,
            "provisioned": provisioned, "pending": pending, "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=float, default=0.3, help="fraction of each Deployment's replicas kept")
    parser.add_argument("--only", nargs="*", help="workload names")
    parser.add_argument("--time-limit", type=float, default=10.0, help="HiGHS seconds for the reference")
    args = parser.parse_args()
    print(f"{'workload':<16} {'pods':>5} | {'before':>8} {'after':>8} {'fresh':>8} {'ref':>8} {'kind':<11} | "
          f"{'after/ref':>9} {'fresh/ref':>9} | {'cmds':>4} {'disrupted':>9} {'launched':>8} {'churn':>11} | "
          f"{'undone':>6} {'prov':>4} {'pend':>4} | {'sim s':>6}")
    for name, docs, threshold, keep in workloads():
        if args.only and name not in args.only:
            continue
        r = asyncio.run(scale_down(docs, keep if keep is not None else args.keep, args.time_limit, threshold))
        ref = r["ref"] or float("nan")
        saved = r["before"] - r["after"]
        churn = f"{r['disrupted'] / saved:.2f}/USD" if saved > 1e-9 else "-"
        print(f"{name:<16} {r['pods']:>5} | {r['before']:>8.4f} {r['after']:>8.4f} {r['fresh']:>8.4f} {ref:>8.4f} "
              f"{r['ref_status']:<11} | {r['after'] / ref:>9.3f} {r['fresh'] / ref:>9.3f} | {r['commands']:>4} {r['disrupted']:>9} "
              f"{r['launched']:>8} {churn:>11} | {r['undone']:>6} {r['provisioned']:>4} {r['pending']:>4} | {r['seconds']:>6.1f}")
        sys.stdout.flush()

if __name__ == "__main__":
    main()
