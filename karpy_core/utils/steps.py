"""Long computations cut into steps, so an asyncio event loop can run between them.

A disruption pass over a large cluster is seconds of CPU (one pass went 97 s on a loaded
machine): run as one call on the operator's event loop it stalls the provisioner, the watches and
the leader Lease renewal for that long. The planner is written as a generator instead
(:data:`Steps`): it ``yield``\\ s at its checkpoints (between two scheduling simulations, between
two candidates) and ``return``\\ s its result. The same generator is driven two ways, with
identical results, since a checkpoint only hands control back and changes nothing:

* :func:`run_steps` runs it to the end in one call (the synchronous API: ``plan_disruption``,
  the tests, the benchmarks);
* :func:`run_steps_async` runs it on the event loop, giving the loop a turn
  (``await asyncio.sleep(0)``) at the first checkpoint after each ``slice_seconds`` of work, so
  no stretch of it holds the loop much longer than one step plus the slice.

The deciding code stays pure: it never reads a clock or awaits; only the async driver does.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Generator
from typing import TypeVar

from karpy_core.utils.gcpause import gc_paused

__all__ = ["SLICE_SECONDS", "Steps", "done", "run_steps", "run_steps_async"]

T = TypeVar("T")

Steps = Generator[None, None, T]
"""A computation that yields None at each checkpoint and returns its result (``yield from`` nests them)."""

SLICE_SECONDS = 0.02
"""Seconds of work :func:`run_steps_async` does between two turns of the event loop (wall clock,
checked at checkpoints only: a stall is at most this plus the longest step)."""


def done(value: T) -> Steps[T]:
    """``value`` as a computation without checkpoints (for a step too cheap to cut)."""
    yield from ()
    return value


def run_steps(steps: Steps[T]) -> T:
    """Run ``steps`` to the end in this call and return its result (what it raises propagates)."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]


async def run_steps_async(steps: Steps[T], *, slice_seconds: float = SLICE_SECONDS, pause_gc: bool = False) -> T:
    """Run ``steps`` on the running event loop: the loop gets a turn (``await asyncio.sleep(0)``)
    at the first checkpoint after every ``slice_seconds`` (wall seconds) of work. Returns its
    result; what it raises propagates; cancelling the caller closes the generator at the
    checkpoint it waits at (nothing after it runs).

    ``pause_gc``: CPython's cyclic collector is paused until ``steps`` ends, as
    ``plan_disruption`` pauses it for a pass (:func:`~karpy_core.utils.gcpause.gc_paused`). The
    collector is the process's: the tasks that run during the loop's turns run without it too
    (reference counting still frees their acyclic garbage; cycles wait for the end of the run)."""
    with gc_paused() if pause_gc else contextlib.nullcontext():
        try:
            while True:
                deadline = time.perf_counter() + slice_seconds
                while True:
                    try:
                        next(steps)
                    except StopIteration as stop:
                        return stop.value  # type: ignore[no-any-return]
                    if time.perf_counter() >= deadline:
                        break
                await asyncio.sleep(0)
        finally:
            steps.close()

