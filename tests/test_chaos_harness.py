"""The chaos harness's own parts without a control plane: the fault proxy in front of a small
aiohttp server on 127.0.0.1, and the double-action rule on replica logs."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from tests.chaos import FaultProxy, Incarnation, Replicas, plan


@pytest.fixture
async def upstream():
    """A stand-in API server: GET /api/v1/pods lists; with ?watch=true it streams one event a
    second until the client goes."""
    async def handler(request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") == "true":
            resp = web.StreamResponse(headers={"Content-Type": "application/json"})
            await resp.prepare(request)
            for i in range(30):
                await resp.write((json.dumps({"type": "ADDED", "object": {"metadata": {"name": f"p{i}"}}}) + "\n").encode())
                await asyncio.sleep(0.1)
            return resp
        return web.json_response({"kind": "PodList", "items": [], "seen": request.headers.get("Authorization")})

    app = web.Application()
    app.router.add_get("/api/v1/pods", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_proxy_passes_through_then_storms_429_with_retry_after(upstream) -> None:
    proxy = FaultProxy(upstream, None)
    url = await proxy.start()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "/api/v1/pods", headers={"Authorization": "Bearer t"}) as r:
                assert r.status == 200 and (await r.json())["seen"] == "Bearer t"
            proxy.fraction = 1.0
            proxy.set_mode("api-429")
            async with s.get(url + "/api/v1/pods") as r:
                assert r.status == 429 and r.headers["Retry-After"] == "1"
                assert (await r.json())["reason"] == "TooManyRequests"
            proxy.set_mode("api-5xx")
            async with s.get(url + "/api/v1/pods") as r:
                assert r.status in (500, 503)
            proxy.set_mode(None)
            async with s.get(url + "/api/v1/pods") as r:
                assert r.status == 200
            assert proxy.injected == 2
    finally:
        await proxy.close()


async def test_proxy_expires_open_and_new_watches_with_410(upstream) -> None:
    proxy = FaultProxy(upstream, None)
    url = await proxy.start()
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(url + "/api/v1/pods?watch=true") as r:
                first = json.loads(await r.content.readline())
                assert first["type"] == "ADDED"
                proxy.set_mode("watch-expiry")
                lines = [json.loads(line) async for line in r.content if line.strip()]
                assert lines[-1]["type"] == "ERROR" and lines[-1]["object"]["code"] == 410
                assert all(ln["type"] == "ADDED" for ln in lines[:-1])  # whole events only before it
            async with s.get(url + "/api/v1/pods?watch=true") as r:
                only = [json.loads(line) async for line in r.content if line.strip()]
                assert [e["object"]["reason"] for e in only] == ["Expired"]
            async with s.get(url + "/api/v1/pods") as r:  # a list still works: the client relists
                assert r.status == 200
    finally:
        await proxy.close()


class _FakeProcess:
    def __init__(self, path: Path):
        self.log_path = path
        self.pid = 0

    def log(self) -> str:
        return self.log_path.read_text()


def _line(t: str, message: str, **extra: Any) -> str:
    return json.dumps({"level": "INFO", "time": f"2026-12-06T05:00:{t}Z", "message": message, **extra}) + "\n"


def test_an_action_after_another_replica_took_the_lease_is_a_double_action(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text(_line("01.000", "leader election: acquired the lease")
                 + _line("02.000", "created nodeclaim", NodeClaim={"name": "x-1"})
                 + _line("30.000", "created nodeclaim", NodeClaim={"name": "x-2"}))  # resumed after SIGSTOP
    b.write_text("not json\n" + _line("20.000", "leader election: acquired the lease")
                 + _line("21.000", "created nodeclaim", NodeClaim={"name": "x-3"}))
    replicas = Replicas.__new__(Replicas)
    replicas.incarnations = [Incarnation(0, 0, _FakeProcess(a)), Incarnation(1, 0, _FakeProcess(b))]  # type: ignore[arg-type]
    doubles = replicas.double_actions()
    assert len(doubles) == 1 and "05:00:30" in doubles[0] and "r0-0" in doubles[0]
    assert replicas.created_names() == {"x-1", "x-2", "x-3"}


def test_plan_cycles_moments_per_fault() -> None:
    assert plan(["leader-kill", "api-429"], ["before-claims", "mid-launch"], 3) == [
        ("leader-kill", "before-claims"), ("leader-kill", "mid-launch"), ("leader-kill", "before-claims"),
        ("api-429", "mid-launch"), ("api-429", "before-claims"), ("api-429", "mid-launch")]
