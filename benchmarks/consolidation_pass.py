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

import argparse
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.decisions import DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.methods import DEFAULT_ORDER
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.planner import pass_coverage, plan_disruption
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


# ---- the topology shapes (issue 36) ------------------------------------------------------------
TOPO_ZONES = ("zone-a", "zone-b", "zone-c")
TOPO_SIZES = (2, 4, 8, 16, 32)
TOPO_NODE_SIZES = (4, 4, 4, 8, 8, 8, 16, 16, 32, 32)
"""vCPUs of the generated nodes, drawn uniformly from this list (about 10 pods per node)."""
POD_CPU_M = (500, 1000, 1500, 2000)
DS_CPU_M = (100, 200)
"""The two DaemonSets' cpu requests (millicores); every node runs one pod of each."""


def _topo_catalog() -> list[InstanceType]:
    """amd64 and arm64 types of 2-32 vCPUs, 4 GiB per vCPU, three zones, on-demand and spot
    (spot at 40%), priced per vCPU (arm64 20% cheaper): the converged cluster's nodes are the
    cheapest types for their pods."""
    out = []
    for arch, per_core in (("amd64", 0.048), ("arm64", 0.0384)):
        for c in TOPO_SIZES:
            out.append(make_type(f"{arch[:3]}.{c}x", c, 4 * c, price=round(per_core * c, 6), zones=TOPO_ZONES, arch=arch,
                                 capacity_types=("on-demand", "spot")))
    return out


GROUPS = (("amd64", "on-demand"), ("amd64", "spot"), ("arm64", "on-demand"), ("arm64", "spot"))
"""A Deployment's node selector (arch, capacity type): its pods stay within one group of NodePools."""


def topology_pools(n_nodes: int) -> list[dict[str, Any]]:
    """20 NodePools, five per (arch, capacity type) group: the first of each group exactly its
    group, weight 50; the others with weights 10-40 and overlapping requirements (both capacity
    types, both arches, a zone subset); the fifth of each group with a cpu limit just above what
    its nodes hold (replacements must fit in it). Budgets ``10%``, ``consolidateAfter: 0s``."""
    pools = []
    for g, (arch, ct) in enumerate(GROUPS):
        for k in range(5):
            reqs: list[dict[str, Any]] = [
                {"key": "kubernetes.io/arch", "operator": "In", "values": [arch] if k != 2 else ["amd64", "arm64"]},
                {"key": "karpenter.sh/capacity-type", "operator": "In", "values": [ct] if k != 1 else ["on-demand", "spot"]},
            ]
            if k == 3:
                reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": list(TOPO_ZONES[:2])})
            pool = nodepool(f"np-{g}-{k}", requirements=reqs, weight=50 if k == 0 else 10 * (4 - k) + 10,
                            limits={"cpu": str(32 * n_nodes // 20 + 64)} if k == 4 else None)
            pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "10%"}]}
            pools.append(pool)
    return pools


class _Deployment:
    """A generated Deployment: its pods' cpu, its rules (zone spread, hostname anti-affinity), the
    replicas it still takes, where its pods are."""

    def __init__(self, name: str, ns: str, group: int, cpu_m: int, spread: bool, anti: bool, replicas: int):
        self.name, self.ns, self.group, self.cpu_m = name, ns, group, cpu_m
        self.spread, self.anti, self.left = spread, anti, replicas
        self.zones = dict.fromkeys(TOPO_ZONES, 0)
        self.nodes: set[str] = set()
        self.count = 0

    def fits(self, node: str, zone: str, free_m: int) -> bool:
        if self.left <= 0 or self.cpu_m > free_m or (self.anti and node in self.nodes):
            return False
        return not self.spread or self.zones[zone] == min(self.zones.values())

    def pod(self, node: str, zone: str) -> dict[str, Any]:
        self.left -= 1
        self.zones[zone] += 1
        self.nodes.add(node)
        i = self.count
        self.count += 1
        sel = {"matchLabels": {"app": self.name}}
        spec: dict[str, Any] = {
            "nodeName": node,
            "nodeSelector": {"kubernetes.io/arch": GROUPS[self.group][0], "karpenter.sh/capacity-type": GROUPS[self.group][1]},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": f"{self.cpu_m}m", "memory": f"{self.cpu_m * 2}Mi"}}}],
        }
        if self.spread:
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
        if self.anti:
            spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": sel}]}}
        return {"metadata": {"name": f"{self.name}-{i:04d}", "namespace": self.ns, "labels": {"app": self.name},
                             "creationTimestamp": iso(NOW - 7200),
                             "ownerReferences": [{"kind": "ReplicaSet", "name": f"{self.name}-rs", "controller": True}]},
                "spec": spec, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}

    def pdb(self, blocking: bool) -> dict[str, Any]:
        """maxUnavailable 1 (one disruption allowed), or (``blocking``) minAvailable = replicas,
        with the status kube-controller-manager writes."""
        spec: dict[str, Any] = {"selector": {"matchLabels": {"app": self.name}}}
        spec["minAvailable" if blocking else "maxUnavailable"] = self.count if blocking else 1
        return {"metadata": {"name": self.name, "namespace": self.ns, "generation": 1}, "spec": spec,
                "status": {"observedGeneration": 1, "disruptionsAllowed": 0 if blocking else 1, "currentHealthy": self.count,
                           "desiredHealthy": self.count if blocking else self.count - 1, "expectedPods": self.count}}


def build_topology(n_nodes: int, *, underutilized: float = 0.03, drifted: float = 0.01, seed: int = 36
                   ) -> tuple[ClusterSnapshot, dict[str, list[InstanceType]]]:
    """A cluster like issue 36's workload: 20 NodePools (:func:`topology_pools`), three zones,
    Deployments (a quarter with zone topology spread, a quarter with required hostname
    anti-affinity, a quarter with both; cpu 0.5-2 per pod, a node selector on arch and capacity
    type) most with a PDB (maxUnavailable 1; every 25th allows nothing), two DaemonSets.

    Nodes are filled first fit until no pod of their group fits (the converged state: free room
    under 500m a node), except ``underutilized`` of them (every k-th) filled to about 40% and
    ``drifted`` of them whose NodeClaim carries a stale NodePool hash. Deterministic in ``seed``.

    Returns:
        The snapshot and NodePool name -> instance types (the same catalog for every pool: each
        pool's requirements select from it).
    """
    rng = random.Random(seed)
    pools = topology_pools(n_nodes)
    hashes = {p["metadata"]["name"]: nodepool_hash(p) for p in pools}
    catalog = _topo_catalog()
    deps: list[_Deployment] = []
    active: dict[int, list[_Deployment]] = {g: [] for g in range(len(GROUPS))}

    def new_dep(group: int, max_cpu: int) -> _Deployment:
        kind = len(deps) % 4
        d = _Deployment(f"d{len(deps):05d}", f"ns{len(deps) % 20:02d}", group,
                        rng.choice([c for c in POD_CPU_M if c <= max_cpu] or [POD_CPU_M[0]]),
                        spread=kind in (0, 2), anti=kind in (1, 2), replicas=rng.randint(10, 40))
        deps.append(d)
        active[group].append(d)
        return d

    every = round(1 / underutilized) if underutilized > 0 else 0
    drift_every = round(1 / drifted) if drifted > 0 else 0
    nodes, claims, pods = [], [], []
    ds_m = sum(DS_CPU_M)
    for i in range(n_nodes):
        pool = pools[(i * 7) % len(pools)]
        pname = pool["metadata"]["name"]
        group = int(pname.split("-")[1])
        arch, ct = GROUPS[group]
        k = int(pname.split("-")[2])
        if k == 2:  # both arches allowed: arm64 is the cheaper, the converged cluster runs it...
            arch = "arm64"
        if k == 1:  # both capacity types: spot
            ct = "spot"
        zone = TOPO_ZONES[i % 2] if k == 3 else TOPO_ZONES[i % 3]
        cpu = rng.choice(TOPO_NODE_SIZES)
        itype = f"{arch[:3]}.{cpu}x"
        name = f"node-{i:05d}"
        labels = {"karpenter.sh/nodepool": pname, "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": itype,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": ct, "kubernetes.io/hostname": name,
                  "kubernetes.io/arch": arch, "kubernetes.io/os": "linux"}
        nodes.append({"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {"providerID": f"p://{name}"},
                      "status": {"allocatable": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", "pods": "110"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        stale = drift_every and i % drift_every == drift_every // 2
        claims.append({"metadata": {"name": name, "labels": labels, "creationTimestamp": iso(NOW - 7200 - i),
                                    "annotations": {"karpenter.sh/nodepool-hash": "stale" if stale else hashes[pname],
                                                    "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
                       "spec": {}, "status": {"providerID": f"p://{name}", "capacity": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi"},
                                              "conditions": [{"type": "Initialized", "status": "True",
                                                              "lastTransitionTime": iso(NOW - 3600)}]}})
        for j, c in enumerate(DS_CPU_M):
            pods.append({"metadata": {"name": f"ds{j}-{name}", "namespace": "kube-system", "labels": {"ds": str(j)},
                                      "ownerReferences": [{"kind": "DaemonSet", "name": f"ds{j}", "controller": True}]},
                         "spec": {"nodeName": name, "containers": [{"name": "c", "resources": {"requests": {
                             "cpu": f"{c}m", "memory": "128Mi"}}}]}, "status": {"phase": "Running"}})
        free = cpu * 1000 - ds_m
        if every and i % every == every // 2:
            free = int(cpu * 1000 * 0.4)  # underutilized: filled to ~40%
        # the deployments of the node's *pods'* group: a node of an overlapping pool runs its group's pods
        pg = GROUPS.index((arch, ct)) if (arch, ct) in GROUPS else group
        while free >= min(POD_CPU_M):
            d = next((d for d in active[pg] if d.fits(name, zone, free)), None)
            if d is None:
                d = new_dep(pg, free)
                if not d.fits(name, zone, free):
                    break
            pods.append(d.pod(name, zone))
            free -= d.cpu_m
            if d.left <= 0:
                active[pg].remove(d)
    pdbs = [d.pdb(blocking=n % 25 == 24) for n, d in enumerate(deps) if n % 5 != 4]
    daemonsets = [{"metadata": {"name": f"ds{j}", "namespace": "kube-system"},
                   "spec": {"selector": {"matchLabels": {"ds": str(j)}}, "template": {
                       "metadata": {"labels": {"ds": str(j)}},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": f"{c}m", "memory": "128Mi"}}}]}}}}
                  for j, c in enumerate(DS_CPU_M)]
    snap = ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=pools, pods=pods, daemonsets=daemonsets, pdbs=pdbs)
    return snap, {p["metadata"]["name"]: catalog for p in pools}


SHAPE_BUILDERS: dict[str, Callable[[int], tuple[ClusterSnapshot, dict[str, list[InstanceType]]]]] = {
    "baseline": lambda n: (build(n), TYPES),
    "topology": lambda n: build_topology(n),
    "converged": lambda n: build_topology(n, underutilized=0.0, drifted=0.0),
}
"""Shape name -> builder: ``baseline`` (the first shape: one NodePool, one zone, no topology),
``topology`` (:func:`build_topology`: 3% underutilized nodes, 1% drifted), ``converged`` (the same
workload, nothing underutilized or drifted: no method finds a command, so every method examines
every candidate; the worst case of a pass)."""


def timed(snap: ClusterSnapshot, types: dict[str, list[InstanceType]], methods: Sequence[DisruptionMethod] = DEFAULT_ORDER
          ) -> tuple[float, DisruptionPlan | None, list[NodeDecision]]:
    """One :func:`plan_disruption` over ``snap`` with ``methods``: (CPU seconds of this process,
    command, decision log). CPU time, not wall time: on a shared 2-core machine the wall clock
    of a pass measures the other tenants (a load of 25 tripled it); the pass is single-threaded
    and does no I/O, so its CPU time is its wall time on an idle core."""
    log: list[NodeDecision] = []
    t0 = time.process_time()
    plan = plan_disruption(snap, types, NOW, log=log, methods=methods)
    return time.process_time() - t0, plan, log


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("sizes", nargs="*", type=int, help="node counts (default: 100, 1000, 5000 baseline; 1000, 5000 topology)")
    ap.add_argument("--shapes", nargs="*", default=list(SHAPE_BUILDERS), choices=list(SHAPE_BUILDERS))
    ap.add_argument("--methods", action="store_true", help="also time each method alone (on the warm snapshot)")
    ap.add_argument("--json", type=Path, help="write the results here as JSON")
    ap.add_argument("--ab-scored", action="store_true",
                    help="also time each pass without moved_pods_fit's scoring replays (SCORED_REPLAYS emptied) and print the ratio")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for shape in args.shapes:
        sizes = args.sizes or ([100, 1000, 5000] if shape == "baseline" else [1000, 5000])
        for n in sizes:
            snap, types = SHAPE_BUILDERS[shape](n)
            dt, plan, log = timed(snap, types)
            again, _, _ = timed(snap, types)
            row: dict[str, Any] = {"shape": shape, "nodes": n, "pods": len(snap.pod_views), "pass_s": round(dt, 3),
                                   "again_s": round(again, 3), "command": plan.describe() if plan else None,
                                   "coverage": pass_coverage(log).to_dict(), "methods": {}}
            what = plan.describe()[:80] if plan else "no command"
            print(f"{shape:>9} {n:>6} nodes, {len(snap.pod_views):>6} pods: one pass {dt:6.2f} s cpu (again {again:5.2f} s) -> {what}")
            print(f"{'':>9} skipped: {row['coverage']['skipped'] or 'none'}")
            if args.ab_scored:
                from karpy_core.scheduling import kubescheduler
                kept, kubescheduler.SCORED_REPLAYS = kubescheduler.SCORED_REPLAYS, ()
                try:
                    off, off_plan, _ = timed(snap, types)
                    off_again, _, _ = timed(snap, types)
                finally:
                    kubescheduler.SCORED_REPLAYS = kept
                row["without_scored_s"] = round(off, 3)
                row["without_scored_again_s"] = round(off_again, 3)
                same = (off_plan.describe() if off_plan else None) == row["command"]
                print(f"{'':>9} without scoring replays: {off:6.2f} s cpu (again {off_again:5.2f} s); "
                      f"with/without {dt / off:.2f}x (again {again / off_again:.2f}x); same command: {same}")
            if args.methods:
                for m in DEFAULT_ORDER:
                    mdt, mplan, mlog = timed(snap, types, [m])
                    cov = pass_coverage(mlog).to_dict()
                    row["methods"][m.value] = {"s": round(mdt, 3), "command": mplan.describe() if mplan else None, "coverage": cov}
                    print(f"{'':>9}   {m.value:<28} {mdt:6.2f} s  examined {cov['examined'].get(m.value, 0):>5}  "
                          f"skipped {sum(cov['skipped'].get(m.value, {}).values()):>4}  -> "
                          f"{(mplan.describe()[:60] if mplan else 'no command')}")
            rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
