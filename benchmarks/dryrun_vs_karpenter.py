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

With ``--karpenter`` the cluster is instead the one Karpenter's own kwok controller makes
(``hack/karpenter_kwok.py``: ``sigs.k8s.io/karpenter/kwok`` v1.15.0, its CRDs and its default
catalog): Karpenter's README NodePool (``consolidateAfter: 60s``, so karpy reads the state before
Karpenter acts) and KWOKNodeClass, a Deployment ``spread`` of ``--nodes`` pods (500m) with a
required hostname anti-affinity (one node each) and a Deployment ``filler`` of as many 500m pods
without constraints. Once Karpenter has launched the nodes and every pod runs, ``spread`` is
deleted: every node is left underutilized. Then ``karpy simulate --from-cluster`` (priced with
Karpenter's catalog, ``--instance-types``) reports its verdicts; Karpenter is watched for
``--watch`` seconds; and the benchmark prints, node by node, where the two agree (karpy
delete/replace and Karpenter removed the node; karpy keep and Karpenter kept it) and where they
differ, karpy's USD/hour after its round and Karpenter's after its own, priced with the same
catalog.

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
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402

from karpy_core.apis.labels import LABEL_NODEPOOL  # noqa: E402
from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from karpy_core.sim.fromcluster import LiveReport, dry_run  # noqa: E402
from tests.integration.karpy_env import install_crds, wait_for  # noqa: E402
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


def deployment(name: str, replicas: int, *, anti_affinity: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"terminationGracePeriodSeconds": 0,
                            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}
    if anti_affinity:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": name}}}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def karpenter_nodepool() -> list[dict[str, Any]]:
    """Karpenter's kwok README NodePool and KWOKNodeClass, ``consolidateAfter: 60s``."""
    docs = [d for d in yaml.safe_load_all((REPO / "tests" / "data" / "kwok" / "karpenter-kwok-nodepool.yaml").read_text()) if d]
    for d in docs:
        if d["kind"] == "NodePool":
            d["spec"]["disruption"]["consolidateAfter"] = "60s"
    return docs


async def _managed_nodes(kube: AsyncKubeClient) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in await kube.list("Node") if (n["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)}


def _price(types: dict[str, Any], node: dict[str, Any]) -> float:
    labels = node["metadata"].get("labels") or {}
    it = types.get(labels.get("node.kubernetes.io/instance-type", ""))
    for o in it.offerings if it is not None else ():
        if o.zone == labels.get("topology.kubernetes.io/zone") and o.capacity_type == labels.get("karpenter.sh/capacity-type"):
            return float(o.price)
    return 0.0


async def versus(cluster: Any, nodes: int, watch: float, log_dir: Path) -> None:
    import karpenter_kwok  # hack/karpenter_kwok.py

    from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog

    paths = karpenter_kwok.build()
    karpenter_kwok.install_crds(cluster, paths)
    catalog = str(paths["instance-types"])
    types = {it.name: it for it in load_kwok_catalog(catalog)}
    with karpenter_kwok.KarpenterKwok(cluster.kubeconfig, log_path=log_dir / "karpenter.log") as karpenter:
        async with await AsyncKubeClient.from_config(str(cluster.kubeconfig)) as kube:
            for obj in karpenter_nodepool():
                await kube.create(obj["kind"], obj)
            await kube.create("Deployment", deployment("spread", nodes, anti_affinity=True))
            await kube.create("Deployment", deployment("filler", nodes, anti_affinity=False))
            t0 = time.perf_counter()

            async def all_running() -> bool:
                pods = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app")]
                return len(pods) == 2 * nodes and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

            await wait_for(all_running, 600, "Karpenter to launch nodes for every pod", interval=2.0)
            launched = await _managed_nodes(kube)
            print(f"Karpenter launched {len(launched)} nodes for {2 * nodes} pods in {time.perf_counter() - t0:.0f} s")
            await kube.delete("Deployment", "spread", "default")

            async def spread_gone() -> bool:
                return not [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == "spread"]

            await wait_for(spread_gone, 120, "the spread pods to go")
            before = await _managed_nodes(kube)  # read with karpy's: a node Karpenter removes meanwhile counts as removed
            t0, c0 = time.perf_counter(), time.process_time()
            report = await dry_run(kube, instance_types=catalog)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            print(f"karpy --from-cluster: {wall:.2f} s wall, {cpu:.2f} s CPU for {len(before)} nodes; {summary(report)}")
            if report.unpriced:
                print(f"  unpriced: {report.unpriced[:3]}")
            await asyncio.sleep(watch)  # Karpenter acts meanwhile
            after = await _managed_nodes(kube)
        print(f"Karpenter after {watch:.0f} s: {len(after)} nodes; its CPU {karpenter.cpu_seconds():.1f} s, "
              f"peak RSS {karpenter.peak_rss_mib():.0f} MiB")
    removed = set(before) - set(after)
    added = sorted(set(after) - set(before))
    agree = differ = 0
    for v in report.verdicts:
        karpy_goes = v.action != "keep"
        karpenter_goes = v.node in removed
        if karpy_goes == karpenter_goes:
            agree += 1
        else:
            differ += 1
            print(f"  differ: {v.node} ({v.instance_type}): karpy {v.action}"
                  f"{' (' + v.blocker.value + ')' if v.blocker else ''}, Karpenter {'removed' if karpenter_goes else 'kept'} it")
    new_types = sorted({(after[n]["metadata"].get("labels") or {}).get("node.kubernetes.io/instance-type", "?") for n in added})
    deletes = sum(v.action == "delete" for v in report.verdicts)
    replaces = sum(v.action == "replace" for v in report.verdicts)
    print(f"per-node verdicts: {agree} agree, {differ} differ; Karpenter removed {len(removed)}, launched "
          f"{len(added)} ({', '.join(new_types) or 'none'}); karpy: {deletes} delete, {replaces} replace")
    print(f"USD/hour (Karpenter's catalog): before {sum(_price(types, n) for n in before.values()):.4f}; "
          f"karpy after its round {report.cost_after:.4f} (optimum {report.optimum}); "
          f"Karpenter after {watch:.0f} s {sum(_price(types, n) for n in after.values()):.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=36)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--karpenter", action="store_true", help="the cluster Karpenter's kwok controller makes")
    parser.add_argument("--watch", type=float, default=240.0, help="--karpenter: seconds to watch Karpenter after karpy's report")
    args = parser.parse_args()
    if args.karpenter and not (REPO / "hack" / "karpenter_kwok.py").exists():
        raise SystemExit("--karpenter needs hack/karpenter_kwok.py (merge main once it is there)")
    cluster = devcluster.DevCluster(devcluster.build())
    cluster.start()
    try:
        if args.karpenter:
            with tempfile.TemporaryDirectory() as tmp:
                asyncio.run(versus(cluster, args.nodes, args.watch, Path(tmp)))
        else:
            asyncio.run(own(str(cluster.kubeconfig), args.nodes, args.repeat))
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
