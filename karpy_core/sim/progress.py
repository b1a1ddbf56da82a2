"""What a long simulation is doing: phases and counts, for a progress display.

The simulator, its workloads and the report call a :class:`Progress`; the default
(:data:`NO_PROGRESS`) ignores them. ``karpy simulate`` passes one that draws a progress bar on
stderr (``karpy_core.cli``), so a 100,000-pod run shows which phase it is in and how far.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["NO_PROGRESS", "Progress"]


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
