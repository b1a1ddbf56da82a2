"""KUBE_CLIENT_QPS / KUBE_CLIENT_BURST: a client-side token bucket on every API request."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.transport import Access, Transport


@dataclass
class Server:
    port: int = 0
    stamps: list[float] = field(default_factory=list)


@pytest.fixture
async def server() -> AsyncIterator[Server]:
    out = Server()

    async def version(request: web.Request) -> web.Response:
        out.stamps.append(time.monotonic())
        return web.json_response({"gitVersion": "v1.33.0"})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    out.port = runner.addresses[0][1]
    yield out
    await runner.cleanup()


async def test_requests_beyond_the_burst_wait_for_the_qps(server: Server) -> None:
    qps, burst, total = 20.0, 5, 15
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{server.port}"), qps=qps, burst=burst))
    try:
        t0 = time.monotonic()
        await asyncio.gather(*(kube.probe() for _ in range(total)))
        elapsed = time.monotonic() - t0
    finally:
        await kube.close()
    stamps = sorted(server.stamps)
    assert len(stamps) == total
    # the first `burst` may go at once; the other 10 drain at 20/s: never faster than ~0.5 s in all
    assert elapsed >= (total - burst) / qps * 0.9
    # the server saw them paced: the k-th request past the burst arrived no sooner than (k+1)/qps
    # after the start (measured from the client's start, same clock and loop: a first request the
    # loaded server stamps late cannot shrink the check, as it did measured from the first stamp)
    for k, stamp in enumerate(stamps[burst:]):
        assert stamp - t0 >= (k + 1) / qps * 0.9, (k, stamp - t0)


async def test_no_limit_when_not_configured(server: Server) -> None:
    kube = AsyncKubeClient(Transport(Access(server=f"http://127.0.0.1:{server.port}")))
    try:
        assert kube.transport.limiter is None
        await asyncio.gather(*(kube.probe() for _ in range(10)))
    finally:
        await kube.close()
    assert len(server.stamps) == 10


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        Transport(Access(server="http://127.0.0.1:1"), qps=0, burst=1)


async def test_from_config_applies_the_settings_limit(tmp_path: Any) -> None:
    from karpy_core.settings import load_settings

    cs = load_settings({}, {"KUBE_CLIENT_QPS": "5", "KUBE_CLIENT_BURST": "7"}).controller_settings()
    config = tmp_path / "kubeconfig"
    config.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
                      "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n")
    kube = await AsyncKubeClient.from_config(str(config), qps=cs.kube_client_qps, burst=cs.kube_client_burst)
    try:
        limiter = kube.transport.limiter
        assert limiter is not None and limiter.max_rate == 7 and limiter.time_period == pytest.approx(7 / 5)
    finally:
        await kube.close()
