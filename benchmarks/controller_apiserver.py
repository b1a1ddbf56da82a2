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
benchmark code; ``--repeat N`` runs N fresh clusters in a row; ``--pods`` may be given more than
once (``--pods 1000 --pods 5000``: each size on a fresh cluster, each checkout).

``--catalog aws`` (the default) is the simulated provider's EC2 catalog for us-east-1 (1,334
instance types, an EC2NodeClass and a NodePool of c/m/r on-demand amd64 types); ``--catalog kwok``
is Karpenter's KWOK catalog (``examples/catalogs/kwok-instance-types.json``, 144 types, passed as
``--instance-types``) behind Karpenter's own KWOK NodePool and KWOKNodeClass (``tests/data/kwok``:
spot, amd64, linux; its 1,000-cpu limit removed and ``consolidateAfter: Never``, since the
benchmark's pods are bare and a consolidation would evict them for good), the setup of side-by-side
runs with Karpenter's kwok controller (issue 36). The catalog the controller loads is part of its
memory: the two give different peak RSS for the same pods. With the KWOK catalog the run also
reports the NodeClaims at all-Running and their USD/hour (the catalog price of each claim's
instance type, capacity type and zone).

``--system karpenter`` runs Karpenter's own kwok controller (``hack/karpenter_kwok.py``, built
from ``sigs.k8s.io/karpenter``) instead, with Karpenter's CRDs, the same KWOKNodeClass, NodePool,
pods and KWOK catalog as ``--catalog kwok``, and the same readings (peak RSS is its VmHWM).

``--arrival-seconds S`` creates the pods evenly over ``S`` seconds instead of at once (issue 36:
pods arriving over ~10 s, each batch sized exactly, nine NodeClaims where Karpenter made five).
If not every pod runs, the run gives up once no NodeClaim was created and no pod started Running
for 120 s, and prints each NodeClaim (instance type, Launched, cpu requested).

``--memory-profile`` makes every run a profiling run instead: the controller runs under
tracemalloc (``benchmarks/memprofile_controller.py``) and, once every pod is Running, writes where
its memory is (informer cache by kind, parsed views, metrics series, imports, allocation sites
now and at the traced peak, heap by type), printed after the run. Its times, CPU and RSS are
tracemalloc's, not the controller's: never compare them with a timed run.

Run: ``.venv/bin/python benchmarks/controller_apiserver.py [--pods 1000 [--pods 5000]] [--catalog aws|kwok]
[--system karpy|karpenter] [--arrival-seconds S] [--controller-repo DIR] [--repeat N] [--memory-profile]
[--mix SHAPES] [--keep-logs DIR]``

``--mix SHAPES`` creates pods of ``SHAPES`` drawn cpu/memory shapes (``benchmarks/cost.py``'s
``mix(SHAPES, N, 2)``, e.g. ``--mix 6 --pods 120`` is its mix6-120) instead of the inflate shape:
pods of different shapes that kube-scheduler may bind elsewhere than planned.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402
import karpenter_kwok  # noqa: E402
import yaml  # noqa: E402

from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from tests.integration.karpy_env import ControllerProcess, install_crds  # noqa: E402
from tests.integration.test_controller_e2e import deployment, nodeclass, nodepool  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
KWOK_CATALOG = REPO / "examples" / "catalogs" / "kwok-instance-types.json"
PROFILER = REPO / "benchmarks" / "memprofile_controller.py"
KWOK_MANIFESTS = REPO / "tests" / "data" / "kwok" / "karpenter-kwok-nodepool.yaml"


@dataclass(frozen=True)
class CatalogSetup:
    """What a run creates for one catalog: ``objects`` (kind, object) to create first, the NodePool
    named ``pool`` among them, and the ``node_selector`` the pods carry to land on its nodes."""

    pool: str
    node_selector: dict[str, str]
    objects: list[tuple[str, dict[str, Any]]]


def catalog_objects(catalog: str) -> CatalogSetup:
    """The NodeClass and NodePool for ``catalog``: ``aws``, the e2e tests' EC2NodeClass and NodePool
    (c/m/r on-demand amd64); ``kwok``, Karpenter's KWOK NodePool and KWOKNodeClass from
    ``tests/data/kwok/karpenter-kwok-nodepool.yaml`` with the NodePool's ``limits`` removed (1,000 pods
    of 1 cpu need more than its 1,000 cpu) and ``consolidateAfter: Never`` (the pods are bare: a
    consolidation would evict them for good)."""
    if catalog == "aws":
        return CatalogSetup("bench", {"karpy-e2e": "bench"},
                            [("EC2NodeClass", nodeclass("bench")), ("NodePool", nodepool("bench", "bench"))])
    objects: list[tuple[str, dict[str, Any]]] = []
    pool = ""
    for doc in (d for d in yaml.safe_load_all(KWOK_MANIFESTS.read_text()) if d):
        if doc["kind"] == "NodePool":
            pool = doc["metadata"]["name"]
            doc["spec"].pop("limits", None)
            doc["spec"]["disruption"]["consolidateAfter"] = "Never"
        objects.append((doc["kind"], doc))
    return CatalogSetup(pool, {"karpenter.sh/nodepool": pool}, objects)


def kwok_prices() -> dict[tuple[str, str, str], float]:
    """(instance type, capacity type, zone) -> USD/hour, from Karpenter's KWOK catalog
    (``examples/catalogs/kwok-instance-types.json``: each offering's ``Price`` and its requirements)."""
    out: dict[tuple[str, str, str], float] = {}
    for it in json.loads(KWOK_CATALOG.read_text()):
        for o in it["offerings"]:
            reqs = {r["key"]: r["values"][0] for r in o["Requirements"]}
            out[(it["name"], reqs["karpenter.sh/capacity-type"], reqs["topology.kubernetes.io/zone"])] = float(o["Price"])
    return out


def claims_usd(claims: list[dict[str, Any]], prices: dict[tuple[str, str, str], float]) -> float:
    """USD/hour of ``claims``: the price of each one's instance type, capacity type and zone labels
    (set once launched; a claim not launched, or priced nowhere in ``prices``, makes the sum NaN)."""
    total = 0.0
    for c in claims:
        labels = c["metadata"].get("labels") or {}
        key = (labels.get("node.kubernetes.io/instance-type", ""), labels.get("karpenter.sh/capacity-type", ""),
               labels.get("topology.kubernetes.io/zone", ""))
        total += prices.get(key, float("nan"))
    return total


def print_claims(claims: list[dict[str, Any]]) -> None:
    """One line per NodeClaim: name, instance type (once launched), its Launched condition's status
    and the cpu it requests (the claim's ``spec.resources.requests.cpu``, a Kubernetes quantity)."""
    for c in claims:
        labels = c["metadata"].get("labels") or {}
        conditions = (c.get("status") or {}).get("conditions") or ()
        launched = {x["type"]: x["status"] for x in conditions}.get("Launched")
        cpu = ((c.get("spec") or {}).get("resources") or {}).get("requests", {}).get("cpu")
        print(f"  {c['metadata']['name']}: {labels.get('node.kubernetes.io/instance-type', '(not launched)')}"
              f" Launched={launched} requests cpu={cpu}")


class KarpenterController:
    """Karpenter's own kwok controller (``hack/karpenter_kwok.py``) with the readings of
    :class:`Controller`: Karpenter's KWOK catalog (the same file as ``--catalog kwok``)."""

    def __init__(self, kubeconfig: str, log_path: Path):
        self.karpenter = karpenter_kwok.KarpenterKwok(kubeconfig, log_path=log_path,
                                                      env={"INSTANCE_TYPES_FILE_PATH": str(KWOK_CATALOG)})
        self.karpenter.start()

    def log(self) -> str:
        return "starting controllers"  # start() returned: its readiness probe answered

    def rss_mib(self) -> float:
        return self.karpenter._status_kib("VmRSS") / 1024

    def cpu_seconds(self) -> float:
        return self.karpenter.cpu_seconds()

    def peak_rss_mib(self) -> float:
        return self.karpenter.peak_rss_mib()

    def stop(self) -> None:
        self.karpenter.stop()


class Controller(ControllerProcess):
    """``karpy controller`` from ``repo`` (default: this checkout), with CPU and RSS readings.

    ``catalog`` ``kwok`` adds ``--instance-types`` (Karpenter's KWOK catalog); ``profile_out`` runs
    it under ``benchmarks/memprofile_controller.py`` (tracemalloc), whose report goes there."""

    def __init__(self, kubeconfig: str, log_path: Path, *, lease: str, repo: Path | None = None,
                 catalog: str = "aws", profile_out: Path | None = None):
        self.log_path = log_path
        root = repo or REPO
        python = str(root / ".venv" / "bin" / "python") if repo is not None else sys.executable
        entry = [str(PROFILER)] if profile_out is not None else ["-m", "karpy_core.cli"]
        argv = [python, *entry, "controller",
                "--cloud-provider", "simulated", "--kwok", "--kubeconfig", kubeconfig,
                "--namespace", "default", "--health-port", "0", "--metrics-port", "0"]
        if catalog == "kwok":
            argv += ["--instance-types", str(KWOK_CATALOG)]
        env = {**os.environ, "KARPY_LEASE_NAME": lease}
        if profile_out is not None:
            env["KARPY_MEMPROFILE_OUT"] = str(profile_out)
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=root)

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


def print_memory_profile(ctl: Controller, profile_out: Path) -> None:
    """Ask the profiling controller for its memory report (SIGUSR1), wait for it and print it."""
    ctl.proc.send_signal(signal.SIGUSR1)
    for _ in range(1200):
        if profile_out.exists():
            break
        time.sleep(0.5)
    print("memory profile (tracemalloc run: its times and RSS are not the controller's):")
    print(profile_out.read_text() if profile_out.exists() else "no profile written")
    objects = profile_out.with_suffix(".objects.json")
    if objects.exists():
        kept = Path(tempfile.gettempdir()) / f"karpy-memprofile-{os.getpid()}.objects.json"
        kept.write_text(objects.read_text())
        print(f"one cached object per kind: {kept}")


def pod_specs(pods: int, mix: int, node_selector: dict[str, str]) -> list[tuple[dict[str, str], dict[str, Any]]]:
    """(labels, spec) of each of the ``pods`` pods, all labelled ``app: inflate`` and selecting the
    benchmark's NodePool: the inflate shape (1 cpu, 256Mi) each, or with ``mix`` > 0 the shapes
    of ``benchmarks/cost.py`` ``mix(mix, pods, 2)`` (its Deployments' drawn cpu/memory, in order)."""
    template = deployment("inflate", "bench", 1)["spec"]["template"]
    if not mix:
        return [(template["metadata"]["labels"], {**template["spec"], "nodeSelector": node_selector})] * pods
    import cost

    out = []
    for d in cost.mix(mix, pods, 2):
        containers = [{**c, "image": "registry.k8s.io/pause:3.9"} for c in d["spec"]["template"]["spec"]["containers"]]
        spec = {**template["spec"], "containers": containers, "nodeSelector": node_selector}
        out += [(template["metadata"]["labels"], spec)] * d["spec"]["replicas"]
    return out


def keep_log(src: Path, dest: Path) -> None:
    """Copy the controller log ``src`` to ``dest`` (``--keep-logs``), creating its directory."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(src.read_text() if src.exists() else "")
    print(f"controller log kept: {dest}")


async def run(pods: int, repo: Path | None, catalog: str = "aws", profile: bool = False,
              system: str = "karpy", arrival: float = 0.0, keep_logs: Path | None = None,
              mix: int = 0) -> dict[str, float | None]:
    with devcluster.DevCluster(devcluster.build()) as cluster, tempfile.TemporaryDirectory() as tmp:
        kube = await AsyncKubeClient.from_config(str(cluster.kubeconfig))
        await install_crds(kube)
        if system == "karpenter":
            await asyncio.to_thread(karpenter_kwok.install_crds, cluster)
        setup = catalog_objects(catalog)
        for kind, obj in setup.objects:
            await kube.create(kind, obj)
        profile_out = Path(tmp) / "memprofile.txt" if profile else None
        ctl: Controller | KarpenterController
        if system == "karpenter":
            ctl = await asyncio.to_thread(KarpenterController, str(cluster.kubeconfig), Path(tmp) / "karpenter.log")
        else:
            ctl = Controller(str(cluster.kubeconfig), Path(tmp) / "controller.log", lease="bench", repo=repo,
                             catalog=catalog, profile_out=profile_out)
        try:
            for _ in range(300):
                if "starting controllers" in ctl.log():
                    break
                await asyncio.sleep(0.2)
            await asyncio.sleep(1.0)  # the first (empty) passes
            rss_idle = ctl.rss_mib()
            cpu_idle = ctl.cpu_seconds()
            specs = pod_specs(pods, mix, setup.node_selector)
            sem = asyncio.Semaphore(50)
            t0 = time.monotonic()

            async def make(i: int) -> None:
                if arrival > 0:  # evenly over ``arrival`` seconds
                    await asyncio.sleep(max(0.0, t0 + arrival * i / pods - time.monotonic()))
                async with sem:
                    await kube.create("Pod", {"metadata": {"name": f"inflate-{i:05d}", "namespace": "default",
                                                           "labels": specs[i][0]}, "spec": specs[i][1]})

            await asyncio.gather(*(make(i) for i in range(pods)))
            created_all = time.monotonic() - t0
            first_claim = last_claim = running_at = None
            claims_seen = running_seen = running = 0
            names: set[str] = set()  # every NodeClaim seen, deleted ones included
            claims: list[dict[str, Any]] = []
            stable_since: float | None = None
            cpu_running = None
            while time.monotonic() - t0 < 300 + arrival + pods * 0.3:
                await asyncio.sleep(0.5)
                now = time.monotonic() - t0
                claims = [c for c in await kube.list("NodeClaim")
                          if c["metadata"]["labels"].get("karpenter.sh/nodepool") == setup.pool]
                if claims and first_claim is None:
                    first_claim = now
                names.update(c["metadata"]["name"] for c in claims)
                if len(names) != claims_seen:
                    claims_seen, last_claim, stable_since = len(names), now, now
                plist = [p for p in await kube.list("Pod", "default") if p["metadata"]["labels"].get("app") == "inflate"]
                running = sum(1 for p in plist if (p.get("status") or {}).get("phase") == "Running")
                if running > running_seen:  # still progressing (a loaded machine binds slowly)
                    running_seen, stable_since = running, now
                if running == pods and len(plist) == pods:
                    running_at = now
                    cpu_running = ctl.cpu_seconds()
                    break
                if stable_since is not None and now - stable_since > 120:
                    break
            print(f"pods: {pods} (all created after {created_all:.2f} s)")
            print(f"first NodeClaim created after: {first_claim:.2f} s" if first_claim is not None else "no NodeClaim created")
            print(f"last NodeClaim created after:  {last_claim:.2f} s ({claims_seen} NodeClaims)" if last_claim else "")
            if running_at is not None:
                print(f"all pods Running after:        {running_at:.2f} s")
            else:
                print(f"not all pods Running ({running} of {pods} Running; gave up after no new NodeClaim or Running "
                      f"pod for 120 s, or the {300 + arrival + pods * 0.3:.0f} s limit)")
                print_claims(claims)
            usd = claims_usd(claims, kwok_prices()) if catalog == "kwok" else None  # --system karpenter: always kwok
            if usd is not None:
                print(f"NodeClaims at all Running:     {len(claims)} ({usd:.2f} USD/hour)")
            peak = ctl.peak_rss_mib()
            print(f"controller peak RSS:           {peak:.1f} MiB")
            print(f"controller RSS before any pod: {rss_idle:.1f} MiB (CPU {cpu_idle:.2f} s to get there)")
            print(f"controller CPU to all Running: {cpu_running:.2f} s" if cpu_running is not None else "")
            if profile_out is not None and isinstance(ctl, Controller):
                await asyncio.to_thread(print_memory_profile, ctl, profile_out)
            return {"peak_rss": peak, "idle_rss": rss_idle, "cpu_idle": cpu_idle, "cpu": cpu_running,
                    "running_s": running_at, "claims": claims_seen, "claims_running": len(claims), "usd": usd}
        finally:
            ctl.stop()
            if keep_logs is not None:
                keep_log(Path(tmp) / ("karpenter.log" if system == "karpenter" else "controller.log"),
                         keep_logs / f"{system}-{catalog}-{pods}-{int(time.time())}.log")
            await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, action="append", default=None,
                        help="pods to create (repeatable: each size on a fresh cluster; default 1000)")
    parser.add_argument("--catalog", choices=("aws", "kwok"), action="append", default=None,
                        help="the simulated provider's catalog (repeatable; default aws)")
    parser.add_argument("--controller-repo", type=Path, action="append", default=None,
                        help="run the controller from this checkout (repeatable: each is benchmarked in turn)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each round runs every checkout once)")
    parser.add_argument("--system", choices=("karpy", "karpenter"), action="append", default=None,
                        help="karpy's controller or Karpenter's kwok controller (hack/karpenter_kwok.py; always the kwok "
                             "catalog); repeatable, default karpy")
    parser.add_argument("--arrival-seconds", type=float, default=0.0,
                        help="create the pods evenly over this many seconds (default 0: all at once)")
    parser.add_argument("--memory-profile", action="store_true",
                        help="profiling runs: the controller under tracemalloc, its memory report printed (not timed)")
    parser.add_argument("--mix", type=int, default=0,
                        help="pods of this many shapes (benchmarks/cost.py mix(N, pods, 2)) instead of the inflate shape")
    parser.add_argument("--keep-logs", type=Path, default=None,
                        help="copy each run's controller log into this directory")
    args = parser.parse_args()
    repos: list[Path | None] = list(args.controller_repo or [None])
    sizes: list[int] = list(args.pods or [1000])
    catalogs: list[str] = list(args.catalog or ["aws"])
    systems: list[str] = list(args.system or ["karpy"])
    rows: list[tuple[str, dict[str, float | None]]] = []
    for round_ in range(args.repeat):
        for pods in sizes:
            for system in systems:
                runs = [(r, c) for c in catalogs for r in repos] if system == "karpy" else [(None, "kwok")]
                for repo, catalog in runs:
                    label = f"{repo or REPO} {catalog} {pods} pods" if system == "karpy" else f"Karpenter kwok {pods} pods"
                    print(f"== round {round_ + 1}: controller from {label}", flush=True)
                    rows.append((label, asyncio.run(run(pods, repo, catalog, args.memory_profile, system,
                                                            args.arrival_seconds, args.keep_logs, args.mix))))
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
