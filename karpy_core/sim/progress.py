"""What a long simulation is doing: phases and counts, for a progress display.

The simulator, its workloads and the report call a :class:`Progress`; the default
(:data:`NO_PROGRESS`) ignores them. ``karpy simulate`` passes one that draws a progress bar on
stderr (``karpy_core.cli``), so a 100,000-pod run shows which phase it is in and how far.

A phase's name says what is being done in at most 35 characters (a name, a count: the display puts
a bar, ``completed/total`` and the time beside it on an 80-column line, :func:`shorten` cuts a
name to fit); a phase with a total is brought to it (``update(total)``) when it ends having done
it all, and one without (``total=None``) is shown without a count.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["NO_PROGRESS", "Progress", "SimulatedTimeProgress", "count_pods", "duration_text", "shorten"]


class Progress(Protocol):
    """Receives a run's phases and progress within the current phase."""

    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        """A new phase begins: ``name`` says what is being done (``creating pods``); ``total`` is
        the count it works through (pods), None when unknown; ``completed`` how much is done."""

    def update(self, completed: int) -> None:
        """``completed`` of the current phase's ``total`` are done."""


class _NoProgress:
    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        return None

    def update(self, completed: int) -> None:
        return None


NO_PROGRESS: Progress = _NoProgress()
"""A :class:`Progress` that shows nothing."""


def shorten(text: str, width: int) -> str:
    """``text`` cut to at most ``width`` characters (``width`` >= 3) by an ellipsis in its middle,
    which keeps both ends of a ``namespace/name`` readable: ``shorten("default/very-long-name",
    12)`` is ``"defaul…-name"``. Shorter text is returned as is."""
    if len(text) <= width:
        return text
    head = width // 2
    tail = width - 1 - head
    return text[:head] + "…" + (text[-tail:] if tail else "")


def count_pods(n: int) -> str:
    """``n`` pods in words for a phase name: ``"20,000 pods"``, ``"1 pod"``."""
    return f"{n:,} pod{'' if n == 1 else 's'}"


def duration_text(seconds: float) -> str:
    """``seconds`` rounded to whole seconds, in the report's words: ``7260`` -> ``2h01m``, ``100``
    -> ``1m40s``, ``12`` -> ``12s``."""
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m" if not sec else f"{h}h{m:02d}m{sec:02d}s"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


class SimulatedTimeProgress:
    """A :class:`Progress` that puts the simulated time before each phase's name
    (``[sim 1m40s] NodeClaim lifecycle``) and passes it on to ``progress``.

    A simulation's phases come round again: provisioning, launching, kube-scheduler's binds, then
    the same for the pods still pending, or a scenario's next step. Without the time, the line
    went from ``reading 20,000 pods bound`` back to ``launching and registering nodes`` (now
    ``NodeClaim lifecycle``) and read as a step back (trial 15); with it, a repeat reads as the next
    round.

    Args:
        progress: the display that draws the phases.
        now: the simulated seconds since the run began (the simulator's virtual clock).
    """

    def __init__(self, progress: Progress, now: Callable[[], float]) -> None:
        self._progress = progress
        self._now = now

    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        """``name`` after the simulated time in brackets; ``total`` and ``completed`` as given."""
        self._progress.phase(f"[sim {duration_text(self._now())}] {name}", total, completed)

    def update(self, completed: int) -> None:
        """Passed on as given."""
        self._progress.update(completed)
