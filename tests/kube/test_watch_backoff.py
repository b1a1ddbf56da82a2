"""The watch's relist after 410 Gone: immediate after a working watch, backed off (0.8 s doubling
to 30 s, client-go's reflector) while the server answers every new watch with 410 at once (the
chaos suite's watch-expiry fault: without it each informer relisted in a tight loop)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from karpy_core.kube.client import AsyncKubeClient, _Gone


class _Server:
    """410 for the first ``expired`` watches, then one event and an endless quiet watch."""

    def __init__(self, expired: int):
        self.expired = expired
        self.lists = 0
        self.watches = 0

    async def list_with_version(self, kind: str) -> tuple[list[dict[str, Any]], str]:
        self.lists += 1
        return [], str(self.lists)

    def watch_once(self, kind: str, rv: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        self.watches += 1
        return _Stream(self.watches, self.expired)


class _Stream:
    """One watch: 410 at once (an expired one), or one event, then 410 only after the first
    working watch (the next one stays open)."""

    def __init__(self, number: int, expired: int):
        self.number, self.expired, self.sent = number, expired, False

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        if self.number <= self.expired and self.number % 2:
            raise _Gone()  # HTTP 410 on the watch request
        if self.number <= self.expired:  # HTTP 200 and an ERROR event with code 410 (kube-apiserver's usual answer)
            return "ERROR", {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old resource version"}
        if self.sent and self.number == self.expired + 1:
            raise _Gone()
        if self.sent:
            raise AssertionError("the test stops reading after the event")
        self.sent = True
        return "ADDED", {"metadata": {"name": f"p{self.number}", "namespace": "default", "resourceVersion": "99"}}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", fake_sleep)  # the watch loop's backoff (the only sleep here)
    return slept


async def test_relists_back_off_while_every_watch_expires_and_not_after_a_working_watch(sleeps: list[float]) -> None:
    server = _Server(expired=8)
    kube = AsyncKubeClient(transport=None)  # type: ignore[arg-type]
    kube.list_with_version = server.list_with_version  # type: ignore[method-assign,assignment]
    kube._watch_once = server.watch_once  # type: ignore[method-assign]
    stream = kube.watch("Pod")
    events = []
    async for ev in stream:
        events.append(ev.type)
        if ev.type == "ADDED" and server.watches == 10:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    # 8 watches expired at once: the first relist immediate, then 0.8, 1.6, ... capped at 30 s
    assert sleeps == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0]
    # the 9th watch delivered an event, then expired: relisted with no wait, the 10th watch delivers
    assert server.lists == 1 + 8 + 1 and server.watches == 10
    assert events.count("SYNCED") == 1
