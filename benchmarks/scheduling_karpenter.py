"""Karpenter's scheduling benchmark, reproduced, plus Deployment-shaped workloads and a cost bound.

Workload (Karpenter v1.14
``scheduling_benchmark_test.go``): 400 synthetic instance types (``data/karpenter-fake-400.json``:
type i has i+1 vCPU, 2(i+1) GiB, 10(i+1) pods, 100m/10Mi kube-reserved, 5 offerings in 3 zones
priced 0.1 x vCPU + 0.1 x GB), one NodePool with no limits, no existing nodes, all pods pending.

* ``diverse``: N/5 each of generic pods, zonal topology spread, hostname topology spread, zonal
  self-affinity and hostname anti-affinity (remainder generic); cpu from {100m, 250m, 500m, 1,
  1.5}, memory from {100, 256, 512, 1024, 2048, 4096} Mi, drawn with a seeded generator (42).
* ``deployments``: N pods from 5 Deployment templates (same draw of shapes, no constraints): pods
  of one template are interchangeable, which the scheduler exploits.

Reported per run: solve seconds, pods/s, NodeClaims, USD/hour of the cheapest compatible
offering per NodeClaim (what Karpenter's providers launch), heap and RSS peaks (the heap peak from a
second, untimed solve under tracemalloc; the timed solve runs without tracing). ``--check-pod-by-pod``
re-runs with every cache off and reports whether nodes and cost are identical. For Deployment
shapes a lower bound on cost is computed with HiGHS (``pip install highspy``): the LP relaxation
``min sum(price_t x_t) s.t. sum(alloc_t,r x_t) >= demand_r`` for cpu, memory and pods, with
``x_t >= 0`` fractional - any real packing costs at least this.

Run: ``.venv/bin/python benchmarks/scheduling_karpenter.py [--sizes 1000 5000 10000]``
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

CATALOG = Path(__file__).resolve().parent / "data" / "karpenter-fake-400.json"
CPUS = ["100m", "250m", "500m", "1000m", "1500m"]
MEMS = ["100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"]
LETTERS = "abcdefg"

NODEPOOL = {
    "metadata": {"name": "default"},
    "spec": {"template": {"spec": {"requirements": [],
                                   "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}}},
}


def _pod(name: str, rng: random.Random, labels: dict[str, str], extra: dict[str, Any], owner: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if owner:
        meta["ownerReferences"] = [{"kind": "ReplicaSet", "name": owner, "controller": True}]
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMS)}}}], **extra},
    }


def diverse(n: int, seed: int = 42) -> list[dict[str, Any]]:
    """Karpenter's diverse mix (see the module docstring)."""
    rng = random.Random(seed)
    per = n // 5
    pods: list[dict[str, Any]] = []
    for i in range(n - 4 * per):
        pods.append(_pod(f"generic-{i}", rng, {"my-label": rng.choice(LETTERS)}, {}))
    for key, kind in (("topology.kubernetes.io/zone", "zspread"), ("kubernetes.io/hostname", "hspread")):
        for i in range(per):
            sel = rng.choice(LETTERS)
            pods.append(_pod(f"{kind}-{i}", rng, {"my-label": rng.choice(LETTERS)}, {"topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"my-label": sel}}}]}))
    for i in range(per):
        v = rng.choice(LETTERS)
        pods.append(_pod(f"affinity-{i}", rng, {"my-affininity": v}, {"affinity": {"podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"my-affininity": v}}}]}}}))
    for i in range(per):
        pods.append(_pod(f"anti-{i}", rng, {"app": "nginx"}, {"affinity": {"podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "nginx"}}}]}}}))
    return pods


def deployments(n: int, seed: int = 42, shapes: int = 5) -> list[dict[str, Any]]:
    """N pods from ``shapes`` Deployment templates (one drawn cpu/memory shape each)."""
    rng = random.Random(seed)
    templates = [(rng.choice(CPUS), rng.choice(MEMS)) for _ in range(shapes)]
    pods = []
    for i in range(n):
        cpu, mem = templates[i % shapes]
        pods.append({
            "metadata": {"name": f"deploy{i % shapes}-{i}", "namespace": "default", "labels": {"app": f"deploy{i % shapes}"},
                         "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"deploy{i % shapes}", "controller": True}]},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
        })
    return pods


def lp_bound(catalog: list[Any], pods: list[Any]) -> float | None:
    """LP lower bound on USD/hour (see the module docstring); None when highspy is missing."""
    try:
        import highspy
    except ImportError:
        return None
    demand: dict[str, int] = {}
    for p in pods:
        for r, v in p.requests.items():
            demand[r] = demand.get(r, 0) + v
    resources = [r for r in ("cpu", "memory", "pods") if demand.get(r)]
    h = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy ships no annotations
    h.setOptionValue("output_flag", False)
    cols = []
    for it in catalog:
        offers = [o.price for o in it.offerings if o.available]
        if not offers:
            continue
        h.addVar(0, highspy.kHighsInf)
        cols.append((it, min(offers)))
    for j, (_, price) in enumerate(cols):
        h.changeColCost(j, price)
    for r in resources:
        idx = [j for j, (it, _) in enumerate(cols) if it.allocatable.get(r, 0) > 0]
        vals = [float(cols[j][0].allocatable[r]) for j in idx]
        h.addRow(float(demand[r]), highspy.kHighsInf, len(idx), idx, vals)
    h.run()
    return float(h.getInfo().objective_function_value)


def run_one(kind: str, n: int, caches: bool) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool

    catalog = load_kwok_catalog(CATALOG)
    raw = diverse(n) if kind == "diverse" else deployments(n)
    pods = [pod_info(p) for p in raw]
    t0 = time.perf_counter()
    scheduler = Scheduler([template_from_nodepool(NODEPOOL, catalog)], use_caches=caches, sizing=True)  # as the provisioner runs it
    results = scheduler.solve(pods)
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak of the timed run alone
    # The heap peak comes from a second solve of the same input under tracemalloc, outside the
    # timed region (tracing slows a solve about 3x).
    tracemalloc.start()
    Scheduler([template_from_nodepool(NODEPOOL, catalog)], use_caches=caches, sizing=True).solve(pods)
    _, heap = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cost = sum(c.cheapest_offering_price() for c in results.new_claims)
    out = {
        "kind": kind, "pods": n, "caches": caches, "solve_s": round(elapsed, 3), "pods_per_s": round(n / elapsed, 1),
        "nodes": len(results.new_claims), "pending": len(results.errors), "usd_per_hour": round(cost, 4),
        "heap_mib": round(heap / 2**20, 1), "rss_mib": round(rss, 1),
    }
    if kind == "deployments":
        bound = lp_bound(catalog, pods)
        out["lp_bound"] = round(bound, 4) if bound is not None else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    parser.add_argument("--kinds", nargs="+", default=["diverse", "deployments"])
    parser.add_argument("--check-pod-by-pod", action="store_true", help="also run with caches off and compare")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        kind, n, caches = args.one
        print(json.dumps(run_one(kind, int(n), caches == "1")))
        return
    print(f"{'workload':<12} {'pods':>6} {'solve s':>8} {'pods/s':>9} {'nodes':>6} {'pending':>7} {'USD/h':>10} "
          f"{'LP bound':>10} {'gap':>6} {'heap MiB':>9} {'RSS MiB':>8}")
    for kind in args.kinds:
        for n in args.sizes:
            runs = [True, False] if args.check_pod_by_pod else [True]
            outs = []
            for caches in runs:
                res = subprocess.run([sys.executable, __file__, "--one", kind, str(n), "1" if caches else "0"],
                                     capture_output=True, text=True, check=True)
                r = json.loads(res.stdout.strip().splitlines()[-1])
                outs.append(r)
                bound = r.get("lp_bound")
                gap = f"{100 * (r['usd_per_hour'] / bound - 1):.1f}%" if bound else "-"
                label = kind if caches else f"{kind}*"
                print(f"{label:<12} {r['pods']:>6} {r['solve_s']:>8} {r['pods_per_s']:>9} {r['nodes']:>6} {r['pending']:>7} "
                      f"{r['usd_per_hour']:>10} {bound if bound is not None else '-':>10} {gap:>6} {r['heap_mib']:>9} {r['rss_mib']:>8}")
            if len(outs) == 2:
                same = (outs[0]["nodes"], outs[0]["usd_per_hour"]) == (outs[1]["nodes"], outs[1]["usd_per_hour"])
                print(f"{'':<12} pod-by-pod run (* = caches off): {'identical nodes and cost' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
