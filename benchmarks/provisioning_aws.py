"""Benchmark: pending pods scheduled per second against the full AWS catalog, and peak memory.

Workload: N pending pods (default 1,000 and 10,000) of mixed shapes: 12 Deployment-like shapes
with cpu 100m-4 and memory 128Mi-8Gi, a third of them with a node selector (arch, capacity type,
or an instance-category requirement), all against one NodePool that allows the whole us-east-1
catalog (on-demand and spot). Each size runs in a fresh subprocess so peak RSS is its own.

Reports per size: scheduler build time (instance-type tables), solve time, pods/s (pods / solve
time), nodes planned, USD/hour of the cheapest offering per planned node, peak RSS (MiB), and the
Python heap peak during build + solve (tracemalloc, MiB, from a second untimed run: the timed
solve runs without tracing).

Run: ``.venv/bin/python benchmarks/provisioning_aws.py [--sizes 1000 10000]``
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from typing import Any

SHAPES = [
    ("100m", "128Mi", None),
    ("250m", "256Mi", None),
    ("500m", "512Mi", {"kubernetes.io/arch": "amd64"}),
    ("500m", "1Gi", None),
    ("1", "1Gi", None),
    ("1", "2Gi", {"karpenter.sh/capacity-type": "spot"}),
    ("1500m", "3Gi", None),
    ("2", "4Gi", {"kubernetes.io/arch": "arm64"}),
    ("2", "8Gi", None),
    ("4", "4Gi", None),
    ("250m", "2Gi", {"karpenter.k8s.aws/instance-category": "r"}),
    ("750m", "768Mi", None),
]


def make_pods(n: int) -> list[dict[str, Any]]:
    pods = []
    for i in range(n):
        cpu, mem, selector = SHAPES[i % len(SHAPES)]
        spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]}
        if selector:
            spec["nodeSelector"] = selector
        pods.append({
            "metadata": {"name": f"app{i % len(SHAPES)}-{i}", "namespace": "bench", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"app{i % len(SHAPES)}", "controller": True}]},
            "spec": spec,
        })
    return pods


NODEPOOL = {
    "metadata": {"name": "everything"},
    "spec": {"template": {"spec": {
        "requirements": [
            {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]},
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }}},
}


def run_one(n: int) -> dict[str, Any]:
    from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool

    catalog = load_aws_catalog()
    pods = [pod_info(p) for p in make_pods(n)]
    t0 = time.perf_counter()
    scheduler = Scheduler([template_from_nodepool(NODEPOOL, catalog)], sizing=True)  # as the provisioner runs it
    t1 = time.perf_counter()
    results = scheduler.solve(pods)
    t2 = time.perf_counter()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak of the timed run alone
    # Heap peak from a second, untimed build + solve under tracemalloc (tracing slows a solve ~3x).
    tracemalloc.start()
    Scheduler([template_from_nodepool(NODEPOOL, catalog)], sizing=True).solve(pods)
    _, heap_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    cost = sum(c.cheapest_offering_price() for c in results.new_claims)
    return {
        "pods": n,
        "instance_types": len(catalog),
        "build_s": round(t1 - t0, 4),
        "solve_s": round(t2 - t1, 4),
        "pods_per_s": round(n / (t2 - t1), 1),
        "nodes": len(results.new_claims),
        "pending": len(results.errors),
        "usd_per_hour": round(cost, 4),
        "heap_peak_mib": round(heap_peak / 2**20, 1),
        "peak_rss_mib": round(rss, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(args.one)))
        return
    print(f"{'pods':>7} {'types':>6} {'build s':>8} {'solve s':>8} {'pods/s':>9} {'nodes':>6} {'pending':>7} "
          f"{'USD/h':>9} {'heap MiB':>9} {'RSS MiB':>8}")
    for n in args.sizes:
        out = subprocess.run([sys.executable, __file__, "--one", str(n)], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['pods']:>7} {r['instance_types']:>6} {r['build_s']:>8} {r['solve_s']:>8} {r['pods_per_s']:>9} {r['nodes']:>6} "
              f"{r['pending']:>7} {r['usd_per_hour']:>9} {r['heap_peak_mib']:>9} {r['peak_rss_mib']:>8}")


if __name__ == "__main__":
    main()
