"""Pausing CPython's cyclic garbage collector around a burst of long-lived allocations.

A disruption pass over a large cluster parses every bound pod it has not seen before (50,000 pods
at 5,000 nodes: about 150,000 new objects that live as long as the snapshot) and creates no
reference cycles worth collecting. CPython starts a full collection each time the objects that
survived since the last one exceed a quarter of the heap, and each full collection walks every
object of the snapshot (about 0.4 s at that size) to find nothing: two or three of them cost more
than the pass's own work. Reference counting frees everything acyclic as usual while paused;
whatever cyclic garbage there is waits for the next collection after the block.

A whole ``karpy simulate`` run is such a burst too (100,000 pods and their views, PodInfos and
NodeClaims live until the report is printed), but long: :func:`gc_relaxed` keeps the collector on
and only makes its youngest generation collect less often (every :data:`RELAXED_GEN0_THRESHOLD`
net allocations instead of CPython's 700), which also makes the full collections rarer, and leaves
the objects that exist when it starts (modules, classes, the API models) out of every collection.
At 100,000 pods that took the collector's share of the run from 16.5 of 44.8 CPU seconds to 3.4
(``benchmarks/simulate_big.py``; docs/scale.md). Inside it, the simulation itself runs under
:func:`gc_paused_frozen`: no collection at all, because a full one walks the whole heap in one C
call during which Ctrl-C is not handled (0.2-0.5 s each at 20,000 pods on a loaded machine, up to
1.25 s of interrupt latency in a trial).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["RELAXED_GEN0_THRESHOLD", "gc_paused", "gc_paused_frozen", "gc_relaxed"]

RELAXED_GEN0_THRESHOLD = 100_000
"""Net allocations of container objects between two collections of the youngest generation under
:func:`gc_relaxed` (CPython's default is 700)."""


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block, and enable it again afterwards if it was
    enabled before (nesting, and a caller that disabled it, are respected). Never raises."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def gc_relaxed(gen0_threshold: int = RELAXED_GEN0_THRESHOLD) -> Iterator[None]:
    """Make the cyclic collector run less often for the block: its youngest generation's threshold
    is raised to ``gen0_threshold`` net allocations (never lowered: a larger one set before is
    kept; the older generations' thresholds are unchanged), and the objects alive when the block
    starts are frozen out of every collection (``gc.freeze``). Both are undone afterwards
    (``gc.unfreeze``: the frozen objects join the oldest generation again; a caller's
    ``gc.freeze`` before the block is undone with it). The collector stays enabled or disabled as
    it was; cyclic garbage is still collected, only later. Never raises for a valid
    ``gen0_threshold`` (a positive int)."""
    before = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(before[0], gen0_threshold), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


@contextlib.contextmanager
def gc_paused_frozen() -> Iterator[None]:
    """:func:`gc_paused` with the heap frozen around the block: the objects alive at its start are
    frozen (``gc.freeze``) and no collection starts in it; at its end what the block allocated is
    frozen too and then everything is unfrozen, so it all joins the oldest generation at once (else
    the first young collection after the block walks every object it made: 0.45 s at 20,000 pods)
    and the collector is enabled again if it was. Cyclic garbage made in the block waits for the
    next full collection. A caller's ``gc.freeze`` before the block is undone with it. Never raises.

    Measured on ``karpy simulate`` of 20,000 pods (trial 12, load 7): the longest stretch without a
    chance to handle a signal went from 0.49 s to 0.09 s, peak memory unchanged."""
    was_enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if was_enabled:
            gc.enable()
