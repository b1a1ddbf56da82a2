"""The ``Clock`` port: every timer, TTL, batch window and backoff reads it.

:class:`RealClock` is wall time. :class:`VirtualClock` only moves when told to, so a simulated day
runs in seconds and tests never sleep: ``sleep`` parks the caller until :meth:`VirtualClock.advance`
moves time past its deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Protocol, cast

__all__ = ["Clock", "RealClock", "VirtualClock", "iso", "now_function"]


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the Unix epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` of this clock's time."""
        ...


def now_function(clock: object, owner: str) -> Callable[[], float]:
    """Turn a provider's ``clock`` option into a "seconds now" function: None -> wall time, a
    callable -> itself, a :class:`Clock` -> its ``now``.

    Raises:
        karpy_core.errors.ConfigurationError: anything else (``owner`` names the option's owner).
    """
    if clock is None:
        return time.time
    now = getattr(clock, "now", None)
    if callable(now):
        return cast("Callable[[], float]", now)
    if callable(clock):
        return clock
    from karpy_core.errors import ConfigurationError

    raise ConfigurationError(f"{owner} option clock must be a callable or have now(), got {clock!r}")


def iso(ts: float) -> str:
    """RFC 3339 UTC timestamp with second precision, as Kubernetes writes them."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RealClock:
    """Wall-clock time and ``asyncio.sleep``."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class VirtualClock:
    """A clock that moves only through :meth:`advance` / :meth:`advance_to`.

    Args:
        start: initial time, seconds since the epoch (default 2026-01-01T00:00:00Z).
    """

    def __init__(self, start: float = 1767225600.0):
        self._now = float(start)
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), fut))
        await fut

    def next_deadline(self) -> float | None:
        """The earliest time a sleeper wakes, or None."""
        while self._sleepers and self._sleepers[0][2].done():
            heapq.heappop(self._sleepers)
        return self._sleepers[0][0] if self._sleepers else None

    def advance_to(self, when: float) -> None:
        """Move time forward to ``when`` (never backwards) and wake every sleeper due by then."""
        self._now = max(self._now, when)
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._sleepers)
            if not fut.done():
                fut.set_result(None)

    def advance(self, seconds: float) -> None:
        self.advance_to(self._now + seconds)
