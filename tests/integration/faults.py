"""Faults injected mid-provisioning on the real control plane (issue 34, item 1), and the tally of
what the controllers did: used by ``test_sync_e2e.py`` and runnable by hand to compare versions.

One trial: a NodePool of one 4-cpu type (m5.xlarge: three 1-cpu pods per node), a Deployment of
``pods`` 1-cpu pods, ``replicas`` ``karpy controller --cloud-provider simulated --kwok`` processes
on one Lease; once the leader has created its first NodeClaims (and none is launched yet for the
leader faults) the fault is injected:

* ``apiserver``: kube-apiserver SIGKILLed and restarted 5 s later with the same flags;
* ``sigkill``: the leader SIGKILLed;
* ``sigstop``: the leader SIGSTOPped for 40 s (past its 15 s lease), then SIGCONTed;
* ``none``: nothing (the reference).

Then it waits until every pod is Running and the NodeClaim count has not changed for ``settle``
seconds, and reports pods Running, NodeClaims and Nodes of the pool, and empty Nodes (no pod of
the Deployment on them).

Run by hand: ``.venv/bin/python -m tests.integration.faults apiserver sigkill sigstop none
[--pods 30] [--replicas 2] [--code DIR]`` (``--code``: run the controllers from the
``karpy_core`` under DIR instead of this checkout, to compare versions on the same harness).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from karpy_core.kube.client import AsyncKubeClient

from .karpy_env import REPO, ControllerProcess, install_crds
from .test_controller_e2e import deployment, nodeclass, nodepool

FAULTS = ("none", "apiserver", "sigkill", "sigstop")
INSTANCE_TYPE = "m5.xlarge"
"""4 cpu: three 1-cpu pods per node once the kubelet's reservation is taken off."""


@dataclass
class Tally:
    """What one trial left behind."""

    fault: str
    pods: int
    running: int
    claims: int
    nodes: int
    empty: int
    seconds: float
    """From the Deployment's creation until every pod Running."""

    def row(self) -> str:
        return (f"| {self.fault} | {self.running}/{self.pods} after {self.seconds:.0f} s | {self.claims} / {self.nodes} "
                f"| {self.empty} |")


class Replica(ControllerProcess):
    """``karpy controller`` on ``lease``; with ``code``, the ``karpy_core`` under that directory."""

    def __init__(self, kubeconfig: str, log_path: Path, *, lease: str, code: Path | None = None):
        if code is None:
            super().__init__(kubeconfig, log_path, lease=lease)
            return
        self.log_path = log_path
        argv = [sys.executable, "-m", "karpy_core.cli", "controller", "--cloud-provider", "simulated", "--kwok",
                "--kubeconfig", kubeconfig, "--namespace", "default", "--health-port", "0", "--metrics-port", "0"]
        env = {**os.environ, "KARPY_LEASE_NAME": lease, "PYTHONPATH": str(code)}
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=code)

    def signal(self, sig: int) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)


def _labelled(objs: list[dict[str, Any]], key: str, value: str) -> list[dict[str, Any]]:
    return [o for o in objs if (o["metadata"].get("labels") or {}).get(key) == value]


async def _leader(kube: AsyncKubeClient, lease: str, replicas: list[Replica]) -> Replica | None:
    """The replica running controllers under ``lease`` (its log says so, and it holds the Lease)."""
    started = [r for r in replicas if r.proc.poll() is None and "starting controllers" in r.log()]
    if len(started) == 1:
        return started[0]
    return None


async def trial(kube: AsyncKubeClient, cluster: Any, fault: str, *, pods: int = 12, replicas: int = 2,
                code: Path | None = None, settle: float = 15.0, timeout: float = 150.0,
                workdir: Path | None = None) -> Tally:
    """One trial of ``fault`` (see the module docstring) on a running dev cluster; cleans up after itself.

    Raises:
        AssertionError: the controllers did not start, or the pods were not all Running in ``timeout`` s.
    """
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app, lease = f"sync-{tag}", f"sync-{tag}", f"lease-{tag}"
    tmp = workdir or Path(tempfile.mkdtemp(prefix="karpy-faults-"))
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", nodepool(pool, tag, types=[INSTANCE_TYPE]))
    procs = [Replica(str(cluster.kubeconfig), tmp / f"{fault}-{tag}-{i}.log", lease=lease, code=code) for i in range(replicas)]
    stopped: Replica | None = None
    try:
        leader = None
        for _ in range(300):
            leader = await _leader(kube, lease, procs)
            if leader is not None:
                break
            await asyncio.sleep(0.2)
        assert leader is not None, "no replica started its controllers"
        await asyncio.sleep(2.0)
        await kube.create("Deployment", deployment(app, tag, pods))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            claims = _labelled(await kube.list("NodeClaim"), "karpenter.sh/nodepool", pool)
            if claims:
                break
            await asyncio.sleep(0.1)
        if fault == "apiserver":
            await asyncio.to_thread(cluster.restart_apiserver, 5.0)
        elif fault == "sigkill":
            leader.kill()
        elif fault == "sigstop":
            stopped = leader
            leader.signal(signal.SIGSTOP)
            await asyncio.sleep(40.0)
            leader.signal(signal.SIGCONT)
            stopped = None
        running_at = None
        last_count, stable_since = -1, time.monotonic()
        while time.monotonic() - t0 < timeout + settle:
            await asyncio.sleep(1.0)
            try:
                listed = _labelled(await kube.list("Pod", "default"), "app", app)
                claims = _labelled(await kube.list("NodeClaim"), "karpenter.sh/nodepool", pool)
            except Exception:  # the API server is still coming back
                continue
            running = sum(1 for p in listed if (p.get("status") or {}).get("phase") == "Running")
            if len(claims) != last_count:
                last_count, stable_since = len(claims), time.monotonic()
            if running == pods and running_at is None:
                running_at = time.monotonic() - t0
            if running_at is not None and time.monotonic() - stable_since >= settle:
                break
        listed = _labelled(await kube.list("Pod", "default"), "app", app)
        claims = _labelled(await kube.list("NodeClaim"), "karpenter.sh/nodepool", pool)
        nodes = _labelled(await kube.list("Node"), "karpenter.sh/nodepool", pool)
        used = {(p.get("spec") or {}).get("nodeName") for p in listed}
        return Tally(fault, pods, sum(1 for p in listed if (p.get("status") or {}).get("phase") == "Running"),
                     len(claims), len(nodes), sum(1 for n in nodes if n["metadata"]["name"] not in used),
                     running_at if running_at is not None else float("nan"))
    finally:
        if stopped is not None:
            stopped.signal(signal.SIGCONT)
        await _cleanup(kube, pool, app, procs)


async def _cleanup(kube: AsyncKubeClient, pool: str, app: str, procs: list[Replica]) -> None:
    """Delete the workload and the pool's NodeClaims (a live replica finalizes them), then stop the replicas."""
    try:
        await kube.delete("Deployment", app, "default")
        for c in _labelled(await kube.list("NodeClaim"), "karpenter.sh/nodepool", pool):
            await kube.delete("NodeClaim", c["metadata"]["name"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _labelled(await kube.list("NodeClaim"), "karpenter.sh/nodepool", pool):
            await asyncio.sleep(1.0)
        await kube.delete("NodePool", pool)
        await kube.delete("EC2NodeClass", pool)
    except Exception as exc:
        print(f"cleanup of {pool} incomplete: {exc}", file=sys.stderr)
    finally:
        for p in procs:
            p.stop()


async def _main(faults: list[str], pods: int, replicas: int, code: Path | None, keep_logs: Path | None) -> None:
    sys.path.insert(0, str(REPO / "hack"))
    import devcluster

    with devcluster.DevCluster(devcluster.build()) as cluster:
        kube = await AsyncKubeClient.from_config(str(cluster.kubeconfig))
        try:
            await install_crds(kube)
            print("| Fault | Pods Running | NodeClaims / Nodes | Empty nodes |")
            print("|---|---|---|---|")
            for fault in faults:
                if keep_logs is not None:
                    keep_logs.mkdir(parents=True, exist_ok=True)
                tally = await trial(kube, cluster, fault, pods=pods, replicas=replicas, code=code, workdir=keep_logs)
                print(tally.row(), flush=True)
        finally:
            await kube.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("faults", nargs="+", choices=FAULTS)
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--code", type=Path, default=None, help="run the controllers from DIR/karpy_core")
    parser.add_argument("--logs", type=Path, default=None, help="keep the controllers' logs in this directory")
    args = parser.parse_args()
    asyncio.run(_main(args.faults, args.pods, args.replicas, args.code, args.logs))


if __name__ == "__main__":
    main()
