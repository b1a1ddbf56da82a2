"""A watchdog over a plugin's hook calls for the one-shot commands (``karpy simulate``, ``karpy
validate --cloud-provider``): a hook that does not answer is named on stderr, then given up on.

While :func:`watch_hooks` is active, :func:`~karpy_core.cloudprovider.calls.call_hook` and
:func:`~karpy_core.cloudprovider.calls.call_hook_sync` record each call (:func:`watched`); one
daemon thread looks at the calls still outstanding every :data:`POLL` seconds, writes
``karpy: waiting for cloud provider plugin 'P': HOOK has not answered for N s (...)`` after
``report_after`` seconds and every ``report_every`` seconds after that, and once a call has gone
``timeout`` seconds without progress writes ``error: cloud provider plugin 'P': HOOK did not answer
within N s (--hook-timeout); karpy gave up: ...`` (how to raise it) and ends the process with exit
code 1. *Progress* is any call of the same plugin answering, or the plugin calling :func:`progress`
(e.g. from tenacity's ``before_sleep`` between retries): a plugin that is slow because the machine
is loaded, that works through its calls one at a time or that retries and says so is not given
up on while it moves; one that blocks, spins or waits on a socket without a timeout is, ``timeout``
seconds after it last moved. ``timeout`` 0 waits forever (the lines are still written). It ends the process
rather than cancelling the call: a plain ``time.sleep`` (or any blocking I/O) in a hook holds the
event loop, which no cancellation reaches, and a cancelled ``karpy_create`` would be retried by
the provisioner as any failed launch, waiting again. The one-shot commands hold nothing outside
the process (an in-memory cluster), so nothing is left half done. The controller does not use it
(a hook there is bounded by the cloud SDK's own timeouts and reported by its metrics).

Ctrl-C is unaffected: the thread is a daemon and touches no signal.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["EXIT", "POLL", "HookWatch", "progress", "watch_hooks", "watched"]

POLL = 0.25
"""Seconds between the watchdog's looks at the outstanding calls."""


@dataclass(frozen=True, slots=True)
class HookWatch:
    """How hook calls are watched.

    Attributes:
        timeout: seconds a hook call may go without progress (:func:`progress`, or another call of
            its plugin answering) before karpy gives up (exit 1); 0 = never.
        report_after: seconds before a call still outstanding is named on stderr.
        report_every: seconds between further such lines.
    """

    timeout: float = 120.0
    report_after: float = 5.0
    report_every: float = 15.0


@dataclass(slots=True)
class _Call:
    plugin: str
    hook: str
    start: float


class _Watchdog:
    def __init__(self, watch: HookWatch, stream: TextIO | None, exit_process: Any) -> None:
        self.watch = watch
        self.stream = stream
        self.exit_process = exit_process
        self.calls: dict[int, _Call] = {}
        self.moved: dict[str, float] = {}
        """plugin -> when it last showed progress (a call answered, or :func:`progress`), monotonic seconds."""
        self.reported: dict[tuple[str, str], float] = {}  # (plugin, hook) -> seconds waited when last named
        self.ids = itertools.count()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="karpy-hook-watch", daemon=True)

    def _write(self, line: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        with contextlib.suppress(Exception):
            stream.write(line + "\n")
            stream.flush()

    def _run(self) -> None:
        w = self.watch
        while not self.stop.wait(POLL):
            now = time.monotonic()
            try:
                calls = list(self.calls.values())
            except RuntimeError:  # changed while read: look again at the next poll
                continue
            oldest: dict[tuple[str, str], tuple[float, int]] = {}  # (plugin, hook) -> (its oldest call's start, calls)
            for call in calls:
                first, n = oldest.get((call.plugin, call.hook), (call.start, 0))
                oldest[(call.plugin, call.hook)] = (min(first, call.start), n + 1)
            for key in [k for k in self.reported if k not in oldest]:
                del self.reported[key]  # answered: a later wait is reported afresh
            for (plugin, hook), (start, n) in oldest.items():
                elapsed = now - start
                moved = self.moved.get(plugin, start)
                idle = now - max(start, moved)  # since the oldest call started or the plugin last moved
                calls_text = f" ({n} calls)" if n > 1 else ""
                if w.timeout > 0 and idle >= w.timeout:
                    what = f"did not answer within {w.timeout:g} s" if moved <= start else \
                        f"has not answered for {int(elapsed)} s, without progress for the last {w.timeout:g} s"
                    self._write(f"error: cloud provider plugin {plugin!r}: {hook}{calls_text} {what} (--hook-timeout); "
                                f"karpy gave up: to wait longer, run again with --hook-timeout {_more(w.timeout)} "
                                "(seconds; 0 waits forever)")
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                    self.stop.set()
                    self.exit_process(1)
                    return
                last = self.reported.get((plugin, hook))
                if elapsed >= (w.report_after if last is None else last + w.report_every):
                    self.reported[(plugin, hook)] = elapsed
                    if w.timeout > 0:
                        limit = f"karpy gives up after {w.timeout:g} s without progress, --hook-timeout"
                        if moved > start:
                            limit += f"; last progress {int(now - moved)} s ago"
                    else:
                        limit = "--hook-timeout 0: karpy waits"
                    self._write(f"karpy: waiting for cloud provider plugin {plugin!r}: {hook}{calls_text} has not answered "
                                f"for {int(elapsed)} s ({limit})")


def _more(timeout: float) -> str:
    """A larger ``--hook-timeout`` to suggest: four times ``timeout``, rounded up to a whole minute."""
    return f"{max(60, -(-int(timeout * 4) // 60) * 60)}"


_active: _Watchdog | None = None
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("karpy_hook_plugin", default=None)
"""The plugin whose hook call the running code is in (set by :func:`watched`; copied into
``asyncio.to_thread`` and tasks the hook starts)."""

EXIT: Any = os._exit
"""What ends the process when a hook call outlasts the timeout (tests replace it)."""


@contextlib.contextmanager
def watch_hooks(watch: HookWatch | None, *, stream: TextIO | None = None,
                exit_process: Any = None) -> Iterator[None]:
    """Watch every hook call made inside the block (see the module docstring); ``watch`` None
    watches nothing.

    Args:
        watch: the limits (seconds).
        stream: where the lines go (default: ``sys.stderr`` at the time of writing).
        exit_process: called with 1 when a call outlasts ``watch.timeout`` (default
            :data:`EXIT`, ``os._exit``: the main thread may be blocked in the hook, so no
            exception can reach it).
    """
    global _active
    if watch is None:
        yield
        return
    dog = _Watchdog(watch, stream, exit_process if exit_process is not None else EXIT)
    previous, _active = _active, dog
    dog.thread.start()
    try:
        yield
    finally:
        dog.stop.set()
        _active = previous
        dog.thread.join(timeout=1.0)


@contextlib.contextmanager
def watched(plugin: str, hook: str) -> Iterator[None]:
    """Record one call of ``hook`` of ``plugin`` for the active watchdog (nothing without one)."""
    dog = _active
    if dog is None:
        yield
        return
    key = next(dog.ids)
    dog.calls[key] = _Call(plugin, hook, time.monotonic())
    token = _current.set(plugin)
    try:
        yield
    finally:
        _current.reset(token)
        dog.calls.pop(key, None)
        dog.moved[plugin] = time.monotonic()  # an answer (or an error) is progress for the plugin's other calls


def progress() -> None:
    """Tell karpy the hook call this runs in is still moving, so the ``--hook-timeout`` watchdog of
    ``karpy simulate`` / ``validate --cloud-provider`` counts its timeout from now: call it from a
    plugin between retries (tenacity: ``before_sleep=lambda _state: progress()``) or between the
    pages of a long listing. Does nothing outside a watched hook call (the controller, tests) or
    when no watchdog is active; cheap (one dictionary write)."""
    dog = _active
    plugin = _current.get()
    if dog is not None and plugin is not None:
        dog.moved[plugin] = time.monotonic()
