"""The provisioning batch window (Karpenter ``pkg/controllers/provisioning/batcher.go``): when a
batch of pending pods closes and one provisioning pass runs.

Defaults (Karpenter ``BATCH_IDLE_DURATION`` / ``BATCH_MAX_DURATION``): 1 s without a new trigger,
at most 10 s from the first; configured through the operator's ``BatchSettings``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Protocol

from karpy_core.utils.clock import Clock

__all__ = ["Batcher", "BatchWindow"]


class BatchWindow(Protocol):
    """The window's lengths (the operator's ``BatchSettings`` satisfies it)."""

    @property
    def idle_seconds(self) -> float:
        """Seconds without a new trigger that close the batch."""
        ...

    @property
    def max_seconds(self) -> float:
        """Longest batch, seconds from its first trigger."""
        ...


class Batcher:
    """Collects triggers into batches (Karpenter ``pkg/controllers/provisioning/batcher.go``): a
    batch starts at the first trigger and closes after ``idle`` seconds without a new one, or
    ``max`` seconds after it started. A trigger with a ``key`` (a pod UID and its state) extends
    the window once per batch; repeats of the same key do not (Karpenter's per-element
    de-duplication), so status churn on one pod cannot hold a batch open. While ``hold()`` is
    true (pods kube-scheduler has not marked yet) an idle window does not close the batch; only
    ``max`` does; :attr:`cut` then tells whether pods were still arriving when it closed (a
    trigger less than ``idle`` before, or ``hold()`` still true: kube-scheduler marks pods in
    bursts, seconds apart under load, and a batch it kept open was a stream's too). Timers
    read ``clock`` (a :class:`~karpy_core.utils.clock.VirtualClock` in tests).

    Args:
        clock: the clock the windows are timed on.
        settings: the window: ``idle_seconds`` and ``max_seconds`` (seconds; the operator's
            ``BatchSettings``).
        hold: while it returns True, an idle window does not close the batch.
    """

    def __init__(self, clock: Clock, settings: BatchWindow, hold: Callable[[], bool] | None = None):
        self.clock = clock
        self.settings = settings
        self.hold = hold or (lambda: False)
        self._event = asyncio.Event()
        self._seen: set[Hashable] = set()
        self.cut = False
        """Whether the last batch closed at ``max`` with a trigger less than ``idle`` before, or
        while ``hold()`` was true: pods were still coming when its pass ran (the provisioner may leave its remainder to the next
        batch, :func:`~karpy_core.controllers.provisioning.provisioner.remainder_claims`)."""

    def trigger(self, key: Hashable | None = None) -> None:
        """Start a batch, or extend the open one if ``key`` is new to it (or not given)."""
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        self._event.set()

    async def _event_within(self, timeout: float) -> bool:
        """True when a trigger arrives within ``timeout`` seconds of the clock."""
        if self._event.is_set():
            return True
        waiter = asyncio.ensure_future(self._event.wait())
        sleeper = asyncio.ensure_future(self.clock.sleep(timeout))
        try:
            done, _ = await asyncio.wait({waiter, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            sleeper.cancel()
        return waiter in done

    async def wait(self) -> None:
        """Return when a batch closes (:attr:`cut` tells whether it was cut at ``max``)."""
        try:
            await self._event.wait()
            self._event.clear()
            self.cut = False
            start = last = self.clock.now()
            idle = self.settings.idle_seconds
            while True:
                remaining = start + self.settings.max_seconds - self.clock.now()
                timeout = min(idle, remaining)
                if timeout <= 0:  # at the maximum: cut if a pod came within idle or one is still unmarked
                    self.cut = self.clock.now() - last < idle or self.hold()
                    return
                if await self._event_within(timeout):
                    last = self.clock.now()
                elif not self.hold():
                    # a window the maximum shortened, with a trigger less than idle before it ended
                    self.cut = timeout < idle and self.clock.now() - last < idle
                    return
                self._event.clear()
        finally:
            self._seen.clear()
