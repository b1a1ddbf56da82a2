"""``/readyz`` over real HTTP: not ready until the informer caches have listed, ready once they
have, not ready while the API server cannot be reached (a closed loopback port: the fake API
server is stopped), ready again when it is back."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.transport import Access, Transport
from karpy_core.operator import ControllerSettings, LeaderSettings, Operator


class FakeAPIServer:
    """Just enough of kube-apiserver on 127.0.0.1 for the caches: every GET of a collection lists
    nothing (held until :attr:`lists_open` is set) and every watch stays open without events;
    anything else is 404."""

    def __init__(self) -> None:
        self.lists_open = asyncio.Event()
        self.requests: list[str] = []
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._stop = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(f"{request.method} {request.path_qs}")
        if request.method != "GET":
            return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound", "message": "fake"}, status=404)
        if request.query.get("watch") == "true":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            await self._stop.wait()
            return resp
        await self.lists_open.wait()
        return web.json_response({"kind": "List", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": []})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._stop = asyncio.Event()
        self._runner = web.AppRunner(app, shutdown_timeout=0.1)
        await self._runner.setup()
        if not self.port:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                self.port = s.getsockname()[1]
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True)
        await site.start()

    async def stop(self) -> None:
        self._stop.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@pytest.fixture
async def apiserver() -> AsyncIterator[FakeAPIServer]:
    server = FakeAPIServer()
    await server.start()
    try:
        yield server
    finally:
        server.lists_open.set()
        await server.stop()


async def _readyz(port: int) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"http://127.0.0.1:{port}/readyz") as resp:
        return resp.status, await resp.text()


async def _until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):  # hang guard only
        while not await predicate():
            await asyncio.sleep(0.05)


async def test_readyz_follows_cache_sync_and_api_server_reachability(apiserver: FakeAPIServer) -> None:
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{apiserver.port}")))
    settings = ControllerSettings.model_validate(dict(leader=LeaderSettings.model_validate(dict(enabled=False)),
                                                     health_host="127.0.0.1", health_port=0, metrics_port=0))
    operator = Operator(kube=kube, provider=load_provider("simulated", {}), settings=settings)
    run = asyncio.create_task(operator.run())
    try:
        await _until(lambda: asyncio.sleep(0, operator.health.port != 0 and operator.health._runner is not None), "health server")
        await _until(lambda: asyncio.sleep(0, any("GET /api/v1/pods" in r for r in apiserver.requests)), "the first list")
        # listing: not synced yet
        status, body = await _readyz(operator.health.port)
        assert status == 503 and "not started" in body
        assert operator.ready()[0] is False
        apiserver.lists_open.set()

        async def ready() -> bool:
            return (await _readyz(operator.health.port))[0] == 200

        await _until(ready, "readyz 200 after the caches listed")
        assert operator.kube.health() == (True, "ok")

        await apiserver.stop()  # the port is closed: every watch fails, every relist is refused

        async def unready() -> bool:
            return (await _readyz(operator.health.port))[0] == 503

        await _until(unready, "readyz 503 with the API server gone")

        async def all_named() -> bool:  # each watch notices the closed port on its own schedule
            status, body = await _readyz(operator.health.port)
            return status == 503 and "Pod:" in body and "NodeClaim:" in body

        await _until(all_named, "readyz naming the Pod and NodeClaim watches")
        status, body = await _readyz(operator.health.port)
        assert status == 503 and body.startswith("watches failing: ")
        assert "Pod:" in body and "NodeClaim:" in body

        await apiserver.start()  # back on the same port
        await _until(ready, "readyz 200 once the watches listed again")
        assert (await _readyz(operator.health.port)) == (200, "ok")
    finally:
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
        await kube.close()


async def test_cache_health_names_kinds_not_yet_listed(apiserver: FakeAPIServer) -> None:
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{apiserver.port}")))
    cache = CachedKubeClient(kube, ["Pod", "Node"])
    assert cache.health() == (False, "informer caches not started")
    start = asyncio.create_task(cache.start())
    try:
        await _until(lambda: asyncio.sleep(0, len([r for r in apiserver.requests if "watch" not in r]) >= 2), "both lists")
        ok, why = cache.health()
        assert not ok and why == "informer caches not synced: Pod, Node"
        apiserver.lists_open.set()
        await asyncio.wait_for(start, 30)
        assert cache.health() == (True, "ok")
    finally:
        start.cancel()
        await cache.stop()
        await kube.close()


async def test_cache_health_when_the_api_server_never_answers() -> None:
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{port}")))
    cache = CachedKubeClient(kube, ["Pod"])
    try:
        await asyncio.wait_for(cache.start(), 30)  # returns after the first failed list
        ok, why = cache.health()
        assert not ok and why.startswith("watches failing: Pod: ClientConnectorError")
    finally:
        await cache.stop()
        await kube.close()
