"""A watchdog over a plugin's hook calls for the one-shot commands (``karpy simulate``, ``karpy
validate --cloud-provider``): a hook that does not answer is named on stderr, then given up on.

While :func:`watch_hooks` is active, :func:`~karpy_core.cloudprovider.calls.call_hook` and
:func:`~karpy_core.cloudprovider.calls.call_hook_sync` record each call (:func:`watched`); one
daemon thread looks at the calls still outstanding every :data:`POLL` seconds, writes
``karpy: waiting for cloud provider plugin 'P': HOOK has not answered for N s (...)`` after
``report_after`` seconds and every ``report_every`` seconds after that, and once a call has lasted
``timeout`` seconds writes ``error: cloud provider plugin 'P': HOOK did not answer within N s
(--hook-timeout); karpy gave up`` and ends the process with exit code 1. It ends the process
rather than cancelling the call: a plain ``time.sleep`` (or any blocking I/O) in a hook holds the
event loop, which no cancellation reaches, and a cancelled ``karpy_create`` would be retried by
the provisioner as any failed launch, waiting again. The one-shot commands hold nothing outside
the process (an in-memory cluster), so nothing is left half done. The controller does not use it
(a hook there is bounded by the cloud SDK's own timeouts and reported by its metrics).

Ctrl-C is unaffected: the thread is a daemon and touches no signal.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

__all__ = ["EXIT", "POLL", "HookWatch", "watch_hooks", "watched"]

POLL = 0.25
"""Seconds between the watchdog's looks at the outstanding calls."""


@dataclass(frozen=True, slots=True)
class HookWatch:
    """How hook calls are watched.

    Attributes:
        timeout: seconds a hook call may last before karpy gives up (exit 1); 0 = never.
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
                calls_text = f" ({n} calls)" if n > 1 else ""
                if w.timeout > 0 and elapsed >= w.timeout:
                    self._write(f"error: cloud provider plugin {plugin!r}: {hook}{calls_text} did not answer within "
                                f"{w.timeout:g} s (--hook-timeout); karpy gave up")
                    with contextlib.suppress(Exception):
                        sys.stdout.flush()
                    self.stop.set()
                    self.exit_process(1)
                    return
                last = self.reported.get((plugin, hook))
                if elapsed >= (w.report_after if last is None else last + w.report_every):
                    self.reported[(plugin, hook)] = elapsed
                    limit = f"karpy gives up at {w.timeout:g} s, --hook-timeout" if w.timeout > 0 else "no --hook-timeout"
                    self._write(f"karpy: waiting for cloud provider plugin {plugin!r}: {hook}{calls_text} has not answered "
                                f"for {int(elapsed)} s ({limit})")


_active: _Watchdog | None = None

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
    try:
        yield
    finally:
        dog.calls.pop(key, None)
