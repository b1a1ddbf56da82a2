"""Time one full consolidation pass (:func:`plan_disruption`, all four methods) for 100, 1,000
and 5,000 nodes, 10 pods per node, mixed node shapes (2/4/8/16 cores), on a synthetic catalog.

The cluster is packed so that multi-node consolidation finds a command and single-node
consolidation has to go through many candidates: the worst case of a pass. The first pass on a
fresh snapshot parses every pod; "again" is a second pass on the same snapshot, whose pods are
parsed already (the controller's informer cache keeps each pod's parse per resourceVersion, so
its passes look like this one). Run with
``.venv/bin/python benchmarks/consolidation_pass.py [SIZES...]``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import iso
from tests.scheduling.helpers import make_type, nodepool

NOW = 1767225600.0 + 86400
SHAPES = [("c.large", 2), ("c.xlarge", 4), ("c.2xlarge", 8), ("c.4xlarge", 16)]
TYPES = {"default": [make_type(n, c, 2 * c) for n, c in SHAPES]}


def build(n_nodes: int) -> ClusterSnapshot:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]}
    h = nodepool_hash(pool)
    nodes, claims, pods = [], [], []
    for i in range(n_nodes):
        itype, cpu = SHAPES[i % len(SHAPES)]
        name = f"node-{i:05d}"
        labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": itype,
                  "topology.kubernetes.io/zone": "zone-a", "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/hostname": name,
                  "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}
        nodes.append({"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {"providerID": f"p://{name}"},
                      "status": {"allocatable": {"cpu": str(cpu), "memory": f"{2 * cpu}Gi", "pods": "110"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        claims.append({"metadata": {"name": name, "labels": labels, "creationTimestamp": iso(NOW - 7200),
                                    "annotations": {"karpenter.sh/nodepool-hash": h, "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
                       "spec": {}, "status": {"providerID": f"p://{name}", "capacity": {"cpu": str(cpu)},
                                              "conditions": [{"type": "Initialized", "status": "True",
                                                              "lastTransitionTime": iso(NOW - 3600)}]}})
        per_pod = cpu * 1000 * 7 // 10 // 10  # ~70% cpu used
        for j in range(10):
            pods.append({"metadata": {"name": f"p-{i:05d}-{j}", "namespace": "default", "labels": {"app": f"a{j % 5}"},
                                      "ownerReferences": [{"kind": "ReplicaSet", "name": f"rs{j % 5}"}]},
                         "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {
                             "cpu": f"{per_pod}m", "memory": f"{per_pod}Mi"}}}]},
                         "status": {"phase": "Running"}})
    return ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=[pool], pods=pods)


def main(sizes: list[int]) -> None:
    for n in sizes:
        snap = build(n)
        t0 = time.perf_counter()
        plan = plan_disruption(snap, TYPES, NOW)
        dt = time.perf_counter() - t0
        t0 = time.perf_counter()
        plan_disruption(snap, TYPES, NOW)
        again = time.perf_counter() - t0
        what = plan.describe()[:90] if plan else "no command"
        print(f"{n:>6} nodes, {10 * n:>6} pods: one consolidation pass {dt:7.2f} s (again {again:5.2f} s)  -> {what}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [100, 1000, 5000])
