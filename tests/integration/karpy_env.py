"""Helpers for running karpy against the real dev cluster: CRDs, controller subprocesses, waits."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from karpy_core.errors import KubeAPIError
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.state.cluster import condition

REPO = Path(__file__).resolve().parents[2]
CRD_DIR = REPO / "crds"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def kwok_node(name: str, labels: dict[str, str] | None = None, *, cpu: str = "8", memory: str = "16Gi") -> dict[str, Any]:
    """A Ready Node for kwok to play (its ``kwok.x-k8s.io/node: fake`` annotation), 110 pods,
    labelled with its hostname, linux and ``type: kwok`` plus ``labels``."""
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok", **(labels or {})}},
            "status": {"capacity": resources, "allocatable": resources, "conditions": [{"type": "Ready", "status": "True"}]}}


async def delete_quietly(kube: AsyncKubeClient, objects: list[tuple[str, str, str | None]]) -> None:
    """Delete each ``(kind, name, namespace)`` a test made, ignoring what is already gone (cleanup)."""
    for kind, name, namespace in objects:
        try:
            await kube.delete(kind, name, namespace)
        except KubeAPIError:
            pass


async def install_crds(kube: AsyncKubeClient) -> None:
    """Create (or replace) karpy's CRDs from ``crds/`` and wait until each is Established."""
    for path in sorted(CRD_DIR.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        name = crd["metadata"]["name"]
        try:
            await kube._request("POST", CRD_PATH, body=crd)
        except KubeAPIError as exc:
            if exc.status != 409:
                raise
            current = await kube._request("GET", f"{CRD_PATH}/{name}")
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            await kube._request("PUT", f"{CRD_PATH}/{name}", body=crd)
        for _ in range(100):
            current = await kube._request("GET", f"{CRD_PATH}/{name}")
            conds = {c["type"]: c["status"] for c in (current.get("status") or {}).get("conditions") or ()}
            if conds.get("Established") == "True":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"CRD {name} never became Established")
    # the discovery cache of the apiserver needs a moment before the new resources are served
    for _ in range(100):
        try:
            await kube.list("NodePool")
            await kube.list("NodeClaim")
            return
        except KubeAPIError:
            await asyncio.sleep(0.1)


async def unschedulable_pod(kube: AsyncKubeClient, app: str, timeout: float = 90) -> dict[str, Any]:
    """The one pod of namespace ``default`` labelled ``app=APP`` once kube-scheduler has marked it
    ``PodScheduled=False/Unschedulable`` (a DaemonSet's pod pinned to a node that refuses it);
    fails after ``timeout`` seconds."""
    async def marked() -> list[dict[str, Any]]:
        pods = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == app]
        return pods if pods and (condition(pods[0], "PodScheduled") or {}).get("reason") == "Unschedulable" else []

    (pod,) = await wait_for(marked, timeout, f"{app}: its pod marked Unschedulable")
    return pod


async def wait_for(predicate: Callable[[], Awaitable[Any]], timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds."""
    start = time.monotonic()
    deadline = start + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await predicate()
        if last:
            print(f"waited {time.monotonic() - start:.1f}s for {what}")  # shown by pytest when a test fails
            return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class ControllerProcess:
    """``karpy controller`` as a child process (so it can be SIGKILLed like a crashed pod)."""

    def __init__(self, kubeconfig: str, log_path: Path, *, lease: str, namespace: str = "default", extra: list[str] | None = None):
        self.log_path = log_path
        argv = [
            sys.executable, "-m", "karpy_core.cli", "controller",
            "--cloud-provider", "simulated", "--kwok",
            "--kubeconfig", kubeconfig,
            "--namespace", namespace,
            "--health-port", "0", "--metrics-port", "0",
            *(extra or []),
        ]
        env = {**os.environ, "KARPY_LEASE_NAME": lease}
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()

    def peak_rss_mib(self) -> float | None:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            return None
        return None
