"""Benchmark: 1,000 pending pods against the real API server, kube-scheduler and kwok.

Starts the dev cluster (``hack/devcluster.py``: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok), installs karpy's CRDs, a NodePool and runs ``karpy controller
--cloud-provider simulated --kwok`` as a child process. Then creates N pods directly (50 requests
in flight; a Deployment would be throttled by kube-controller-manager's 20 requests/s client
limit, which measures the controller-manager, not karpy), 1 cpu / 256Mi (the inflate shape), and
reports:

* seconds from the first pod's creation until all pods exist;
* seconds from the first pod's creation to the first NodeClaim, and to the last NodeClaim;
* seconds until every pod is Running (kube-scheduler bound it to a kwok node);
* NodeClaims created, and the controller's peak RSS (VmHWM, MiB);
* the controller's RSS once its caches are synced and before any pod exists (MiB);
* the controller's CPU seconds (user + system, from ``/proc/<pid>/stat``) from its start until
  every pod is Running.

``--controller-repo DIR`` runs the controller from another checkout (its ``.venv/bin/python``,
working directory ``DIR``) against the same harness, so two versions compare under the same
benchmark code; ``--repeat N`` runs N fresh clusters in a row.

``--kwok`` uses Karpenter's own KWOK NodePool and KWOKNodeClass (``tests/data/kwok``, its
1,000-cpu limit removed and ``consolidateAfter: Never``: the benchmark's pods are bare, and a
consolidation would evict them for good) and Karpenter's KWOK catalog (``examples/kwok-instance-types.json``,
``--instance-types``), as issue 36's side-by-side runs did, and also reports the NodeClaims at
all-Running and their USD/hour (the catalog price of each claim's instance type, capacity type and
zone). ``--arrival-seconds S`` creates the pods evenly over ``S`` seconds instead of at once
(issue 36: pods arriving over ~10 s, each batch sized exactly, nine NodeClaims where Karpenter
made five).

Run: ``.venv/bin/python benchmarks/controller_apiserver.py [--pods 1000] [--controller-repo DIR] [--repeat N]
[--kwok] [--arrival-seconds S]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402
import yaml  # noqa: E402

from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from tests.integration.karpy_env import ControllerProcess, install_crds  # noqa: E402
from tests.integration.test_controller_e2e import deployment, nodeclass, nodepool  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
KWOK_CATALOG = REPO / "examples" / "kwok-instance-types.json"
KWOK_MANIFESTS = REPO / "tests" / "data" / "kwok" / "karpenter-kwok-nodepool.yaml"


def kwok_prices() -> dict[tuple[str, str, str], float]:
    """(instance type, capacity type, zone) -> USD/hour, from Karpenter's KWOK catalog."""
    out: dict[tuple[str, str, str], float] = {}
    for it in json.loads(KWOK_CATALOG.read_text()):
        for o in it["offerings"]:
            reqs = {r["key"]: r["values"][0] for r in o["Requirements"]}
            out[(it["name"], reqs["karpenter.sh/capacity-type"], reqs["topology.kubernetes.io/zone"])] = float(o["Price"])
    return out


def claims_usd(claims: list[dict[str, Any]], prices: dict[tuple[str, str, str], float]) -> float:
    """USD/hour of ``claims`` (launched ones: their instance type, capacity type and zone labels)."""
    total = 0.0
    for c in claims:
        labels = c["metadata"].get("labels") or {}
        key = (labels.get("node.kubernetes.io/instance-type", ""), labels.get("karpenter.sh/capacity-type", ""),
               labels.get("topology.kubernetes.io/zone", ""))
        total += prices.get(key, float("nan"))
    return total


class Controller(ControllerProcess):
    """``karpy controller`` from ``repo`` (default: this checkout), with CPU and RSS readings."""

    def __init__(self, kubeconfig: str, log_path: Path, *, lease: str, repo: Path | None = None,
                 extra: list[str] | None = None):
        if repo is None:
            super().__init__(kubeconfig, log_path, lease=lease, extra=extra)
            return
        self.log_path = log_path
        argv = [str(repo / ".venv" / "bin" / "python"), "-m", "karpy_core.cli", "controller",
                "--cloud-provider", "simulated", "--kwok", "--kubeconfig", kubeconfig,
                "--namespace", "default", "--health-port", "0", "--metrics-port", "0", *(extra or [])]
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "KARPY_LEASE_NAME": lease}, cwd=repo)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds the controller has used so far."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime (fields 14, 15 of stat)

    def rss_mib(self) -> float:
        """Current resident set size (VmRSS), MiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")


async def run(pods: int, repo: Path | None, *, kwok: bool = False, arrival: float = 0.0) -> dict[str, float | None]:
    with devcluster.DevCluster(devcluster.build()) as cluster, tempfile.TemporaryDirectory() as tmp:
        kube = await AsyncKubeClient.from_config(str(cluster.kubeconfig))
        await install_crds(kube)
        pool = "bench"
        extra: list[str] = []
        template = deployment("inflate", "bench", 1)["spec"]["template"]
        if kwok:
            pool = "default"
            for doc in (d for d in yaml.safe_load_all(KWOK_MANIFESTS.read_text()) if d):
                doc.get("spec", {}).pop("limits", None)  # 1,000 pods of 1 cpu need more than 1,000 cpu of nodes
                if doc["kind"] == "NodePool":  # bare pods: a consolidation would evict them for good
                    doc["spec"]["disruption"]["consolidateAfter"] = "Never"
                await kube.create(doc["kind"], doc)
            extra = ["--instance-types", str(KWOK_CATALOG)]
            template["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": pool}
        else:
            await kube.create("EC2NodeClass", nodeclass("bench"))
            await kube.create("NodePool", nodepool("bench", "bench"))
        ctl = Controller(str(cluster.kubeconfig), Path(tmp) / "controller.log", lease="bench", repo=repo, extra=extra)
        try:
            for _ in range(300):
                if "starting controllers" in ctl.log():
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # the first (empty) passes
            rss_idle = ctl.rss_mib()
            cpu_idle = ctl.cpu_seconds()
            sem = asyncio.Semaphore(50)
            t_start = time.monotonic()

            async def make(i: int) -> None:
                if arrival > 0:  # evenly over ``arrival`` seconds
                    await asyncio.sleep(max(0.0, t_start + arrival * i / pods - time.monotonic()))
                async with sem:
                    await kube.create("Pod", {"metadata": {"name": f"inflate-{i:05d}", "namespace": "default",
                                                           "labels": template["metadata"]["labels"]},
                                              "spec": template["spec"]})

            t0 = time.monotonic()
            await asyncio.gather(*(make(i) for i in range(pods)))
            created_all = time.monotonic() - t0
            first_claim = last_claim = running_at = None
            claims_seen = 0
            names: set[str] = set()
            claims: list[dict[str, Any]] = []
            stable_since = None
            cpu_running = None
            while time.monotonic() - t0 < 600:
                await asyncio.sleep(0.5)
                now = time.monotonic() - t0
                claims = [c for c in await kube.list("NodeClaim") if c["metadata"]["labels"].get("karpenter.sh/nodepool") == pool]
                if claims and first_claim is None:
                    first_claim = now
                names.update(c["metadata"]["name"] for c in claims)
                if len(names) != claims_seen:
                    claims_seen, last_claim, stable_since = len(names), now, now
                plist = [p for p in await kube.list("Pod", "default") if p["metadata"]["labels"].get("app") == "inflate"]
                running = sum(1 for p in plist if (p.get("status") or {}).get("phase") == "Running")
                if running == pods and len(plist) == pods:
                    running_at = now
                    cpu_running = ctl.cpu_seconds()
                    break
                if stable_since is not None and now - stable_since > 120:
                    break
            print(f"pods: {pods} (all created after {created_all:.2f} s)")
            print(f"first NodeClaim created after: {first_claim:.2f} s" if first_claim is not None else "no NodeClaim created")
            print(f"last NodeClaim created after:  {last_claim:.2f} s ({claims_seen} NodeClaims)" if last_claim else "")
            print(f"all pods Running after:        {running_at:.2f} s" if running_at
                  else f"not all pods Running ({running} of {len(plist)} Running, 120 s after the last NodeClaim)")
            for c in claims:
                labels = c["metadata"].get("labels") or {}
                launched = {x["type"]: x["status"] for x in (c.get("status") or {}).get("conditions") or ()}.get("Launched")
                print(f"  {c['metadata']['name']}: {labels.get('node.kubernetes.io/instance-type', '(not launched)')}"
                      f" Launched={launched} requests cpu={((c.get('spec') or {}).get('resources') or {}).get('requests', {}).get('cpu')}")
            peak = ctl.peak_rss_mib()
            print(f"controller peak RSS:           {peak:.1f} MiB")
            print(f"controller RSS before any pod: {rss_idle:.1f} MiB (CPU {cpu_idle:.2f} s to get there)")
            print(f"controller CPU to all Running: {cpu_running:.2f} s" if cpu_running is not None else "")
            usd = claims_usd(claims, kwok_prices()) if kwok else None
            if usd is not None:
                print(f"NodeClaims at all Running:     {len(claims)} ({usd:.2f} USD/hour)")
            return {"peak_rss": peak, "idle_rss": rss_idle, "cpu_idle": cpu_idle, "cpu": cpu_running,
                    "running_s": running_at, "claims": claims_seen, "claims_running": len(claims), "usd": usd}
        finally:
            ctl.stop()
            await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--controller-repo", type=Path, action="append", default=None,
                        help="run the controller from this checkout (repeatable: each is benchmarked in turn)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each round runs every checkout once)")
    parser.add_argument("--kwok", action="store_true", help="Karpenter's KWOK NodePool, KWOKNodeClass and catalog")
    parser.add_argument("--arrival-seconds", type=float, default=0.0, help="create the pods evenly over this many seconds")
    args = parser.parse_args()
    repos: list[Path | None] = list(args.controller_repo or [None])
    rows: list[tuple[str, dict[str, float | None]]] = []
    for round_ in range(args.repeat):
        for repo in repos:
            label = str(repo or REPO)
            print(f"== round {round_ + 1}: controller from {label}", flush=True)
            rows.append((label, asyncio.run(run(args.pods, repo, kwok=args.kwok, arrival=args.arrival_seconds))))
    if len(rows) > 1:
        print("\nsummary (peak RSS MiB, RSS before pods MiB, CPU s to all Running, all Running s, NodeClaims created,"
              " NodeClaims at all Running, USD/hour):")
        for label, r in rows:
            print(f"  {label}: {r['peak_rss']:.1f}  {r['idle_rss']:.1f}  "
                  f"{r['cpu'] if r['cpu'] is not None else float('nan'):.2f}  "
                  f"{r['running_s'] if r['running_s'] is not None else float('nan'):.2f}  {r['claims']}  "
                  f"{r['claims_running']}  {r['usd'] if r['usd'] is not None else float('nan'):.2f}")


if __name__ == "__main__":
    main()
