"""``karpy controller --dry-run`` against the real API server, kube-scheduler and kwok, behind a
recording proxy: the dry-run controller sees a scale-down (empty nodes a normal controller made)
and a scale-up (pending pods), logs what it would do, and not one write request reaches
kube-apiserver (issue 37, item 2).

The proxy (:class:`RecordingProxy`, a :class:`tests.faultinjection.LoopbackProxy`) listens on
127.0.0.1 in plain HTTP, forwards every request to kube-apiserver (HTTPS, the dev cluster's CA) and
records its method and path; the dry-run controller's kubeconfig points at it, the normal
controller's does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import uuid
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from karpy_core.kube.client import AsyncKubeClient
from tests.faultinjection import LoopbackProxy

from .karpy_env import ControllerProcess, wait_for
from .test_controller_e2e import _gone, cleanup, deployment, nodeclass, nodepool

pytestmark = pytest.mark.devcluster

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "proxy-connection", "te", "trailer"}
WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class RecordingProxy(LoopbackProxy):
    """A plain-HTTP proxy on 127.0.0.1 in front of kube-apiserver that records every request as
    ``(method, path with query)``; watch answers are streamed as they come.

    Args:
        upstream: kube-apiserver's URL (``https://127.0.0.1:port``).
        ca_file: the CA of its serving certificate.
    """

    def __init__(self, upstream: str, ca_file: Path):
        super().__init__(upstream)
        self.ca_file = ca_file
        self.requests: list[tuple[str, str]] = []
        self._active: set[asyncio.Task[Any]] = set()

    async def start(self) -> str:
        url = await super().start()
        assert self._session is not None
        await self._session.close()  # replaced by one that trusts the dev cluster's CA and never times out a watch
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0), auto_decompress=False)
        return url

    async def close(self) -> None:
        """End the answers still streaming (watches the controller left open), then stop."""
        for task in list(self._active):
            task.cancel()
        await asyncio.gather(*self._active, return_exceptions=True)
        await super().close()
        await asyncio.sleep(0.2)  # the connections' own tasks end once the server has closed them

    def writes(self) -> list[tuple[str, str]]:
        """The recorded requests that are not reads."""
        return [r for r in self.requests if r[0] not in ("GET", "HEAD", "OPTIONS")]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path_qs))
        task = asyncio.current_task()
        if task is not None:
            self._active.add(task)
        try:
            return await self._forward(request)
        finally:
            if task is not None:
                self._active.discard(task)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        upstream = await self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                               data=body or None, timeout=aiohttp.ClientTimeout(total=None))
        try:
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            if request.query.get("watch") not in ("true", "1") or upstream.status != 200:
                return web.Response(status=upstream.status, body=await upstream.read(), headers=out_headers)
            resp = web.StreamResponse(status=200, headers=out_headers)
            await resp.prepare(request)
            with contextlib.suppress(ConnectionError, aiohttp.ClientError, RuntimeError):
                async for chunk in upstream.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
            return resp
        finally:
            upstream.release()


def _log_lines(proc: ControllerProcess) -> list[dict[str, Any]]:
    out = []
    for line in proc.log().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def _logged(proc: ControllerProcess, message: str) -> list[dict[str, Any]]:
    return [line for line in _log_lines(proc) if line.get("message") == message]


async def _claims(kube: AsyncKubeClient, tag: str) -> dict[str, dict[str, Any]]:
    return {c["metadata"]["name"]: c for c in await kube.list("NodeClaim") if c["metadata"]["name"].startswith(tag)}


async def _running(kube: AsyncKubeClient, app: str) -> int:
    return sum(1 for p in await kube.list("Pod", "default", label_selector=f"app={app}")
               if (p.get("status") or {}).get("phase") == "Running" and (p.get("spec") or {}).get("nodeName"))


async def test_dry_run_controller_sends_no_write(devcluster, kube, tmp_path):
    tag = f"dry{uuid.uuid4().hex[:6]}"
    pool = nodepool(tag, tag, consolidate_after="0s")
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
    await kube.create("EC2NodeClass", nodeclass(tag))
    await kube.create("NodePool", pool)
    web_app, burst = f"{tag}-web", f"{tag}-burst"
    await kube.create("Deployment", deployment(web_app, tag, replicas=6, cpu="1"))
    proxy = RecordingProxy(devcluster.server, devcluster.ca_file)
    normal: ControllerProcess | None = None
    dry: ControllerProcess | None = None
    try:
        # 1. a normal controller launches nodes for the workload, then stops
        normal = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "normal.log", lease=f"lease-{tag}")
        await wait_for(lambda: _running_at_least(kube, web_app, 6), 150, "the normal controller's nodes run the pods")
        normal.stop()
        claims = await _claims(kube, tag)
        assert claims, "the normal controller made NodeClaims"
        # 2. scale-down: most pods go, leaving empty or underutilized nodes
        await kube.patch("Deployment", web_app, {"spec": {"replicas": 1}}, "default")
        await wait_for(lambda: _only(kube, web_app, 1), 60, "the scale-down")
        # 3. the dry-run controller, through the recording proxy
        url = await proxy.start()
        config = json.loads(Path(devcluster.kubeconfig).read_text())
        config["clusters"][0]["cluster"] = {"server": url}
        proxied = tmp_path / "kubeconfig-proxy"
        proxied.write_text(json.dumps(config))
        dry = ControllerProcess(str(proxied), tmp_path / "dry.log", lease=f"lease-{tag}-dry", extra=["--dry-run"])
        process = dry
        would = await wait_for(lambda: asyncio.sleep(0, _logged(process, "dry run: would disrupt node(s)")), 120,
                               "the dry run's disruption decision")
        assert {n["NodeClaim"]["name"] for n in would[0]["disrupted-nodes"]} <= set(claims)
        # 4. scale-up: pods too large for the nodes there are
        await kube.create("Deployment", deployment(burst, tag, replicas=2, cpu="12"))
        launch = await wait_for(lambda: asyncio.sleep(0, [line for line in _logged(process, "dry run: would launch nodeclaim")
                                                           if burst in line.get("pods", "")]), 90,
                                "the dry run's launch decision for the pending pods")
        assert launch[0]["NodePool"] == {"name": tag} and launch[0]["dryRun"] is True
        await asyncio.sleep(5)  # a few more passes: still nothing written
        lines = _log_lines(dry)
        dry.stop()
        # nothing changed: the same NodeClaims, none deleting, no disrupted taint, no new claim
        after = await _claims(kube, tag)
        assert set(after) == set(claims)
        assert not [n for n, c in after.items() if c["metadata"].get("deletionTimestamp")]
        nodes = await kube.list("Node")
        assert not [n for n in nodes for t in (n.get("spec") or {}).get("taints") or () if t.get("key") == "karpenter.sh/disrupted"]
        assert await _running(kube, burst) == 0
        # the proxy saw the dry run read (lists and watches) and never write
        assert any(m == "GET" and "watch=true" in p for m, p in proxy.requests)
        assert proxy.writes() == [], proxy.writes()
        events = [line["Event"] for line in lines if line.get("message") == "event" and line.get("dryRun")]
        assert {"DisruptionTerminating", "Provisioned"} <= {e["reason"] for e in events}, events
        assert not [line for line in lines if line.get("level") == "ERROR"], "the dry run logged errors"
        print(f"proxy: {len(proxy.requests)} requests, {len(proxy.writes())} writes; "
              f"{sum(1 for line in lines if line.get('message') == 'dry run: write withheld')} withheld-write lines")
    finally:
        for proc in (normal, dry):
            if proc is not None:
                proc.stop()
        await proxy.close()
        # a normal controller finalizes the test's NodeClaims and Nodes (their finalizers need one)
        cleaner = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "cleanup.log", lease=f"lease-{tag}")
        try:
            await cleanup(kube, tag, burst)
            await cleanup(kube, tag, web_app)
            await wait_for(lambda: _gone(kube, tag), 90, "NodeClaims and Nodes to be finalized")
        finally:
            cleaner.stop()
        with contextlib.suppress(Exception):
            await kube.delete("NodePool", tag)
        with contextlib.suppress(Exception):
            await kube.delete("EC2NodeClass", tag)


async def _running_at_least(kube: AsyncKubeClient, app: str, n: int) -> bool:
    return await _running(kube, app) >= n


async def _only(kube: AsyncKubeClient, app: str, n: int) -> bool:
    return len(await kube.list("Pod", "default", label_selector=f"app={app}")) == n
