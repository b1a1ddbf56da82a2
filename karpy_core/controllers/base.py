"""The shape every acting controller has, and how the runner wakes it.

A controller (Karpenter's ``controller-runtime`` reconcilers) has a name (Karpenter's controller
name: the asyncio task's name, the ``controller`` label of the reconcile and cloud-provider
metrics), one ``reconcile()`` pass that decides, acts and publishes its own events and metrics,
the watched kinds and event types that wake it (:class:`Wake`), and optionally the next time it
wants to run without a change (``next_due``). The runner (``karpy_core/operator.py``) runs each
pass when woken, at ``next_due`` and at least every ``resync_seconds`` (the controller's own, or
the operator's). Both take the controllers from one schedule
(``karpy_core/controllers/wiring.py``, ``Controllers.schedule()``): the operator spawns each
entry; the simulator (``karpy_core/sim/simulator.py``) steps them in the schedule's order on its
virtual clock.

Controllers that run their own loop (the provisioner's batcher, a provider's background
controllers) are :class:`Runnable`: the runner spawns their ``run()`` instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar, runtime_checkable

from karpy_core.kube.port import KubeClient, WatchEvent
from karpy_core.state.cluster import ViewSource
from karpy_core.state.views import ObjectView, ViewCache

_T = TypeVar("_T")

__all__ = ["Wake", "Controller", "Runnable", "Observer", "Waker", "ALL_EVENTS", "NODECLASS_KINDS", "wakes",
           "list_views"]

ALL_EVENTS: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})
"""Every watch event type."""
NODECLASS_KINDS = "*NodeClass"
"""Stands for every provider's NodeClass kind (``EC2NodeClass``, ``KCNodeClass``, ...) in :attr:`Wake.kinds`."""


@dataclass(frozen=True)
class Wake:
    """Watch events that wake a controller: a change to one of ``kinds`` (``*NodeClass`` matches
    every kind ending in ``NodeClass``) of one of ``types`` (``ADDED``/``MODIFIED``/``DELETED``)."""

    kinds: frozenset[str]
    types: frozenset[str] = ALL_EVENTS

    @classmethod
    def on(cls, *kinds: str, types: tuple[str, ...] = ()) -> Wake:
        """``Wake.on("Node", "NodeClaim", types=("DELETED",))``; no ``types``: every event type."""
        return cls(frozenset(kinds), frozenset(types) if types else ALL_EVENTS)

    def matches(self, kind: str, type_: str) -> bool:
        """True when a ``type_`` event on a ``kind`` object wakes the controller."""
        if type_ not in self.types:
            return False
        return kind in self.kinds or (NODECLASS_KINDS in self.kinds and kind.endswith("NodeClass"))


def wakes(declared: tuple[Wake, ...], kind: str, type_: str) -> bool:
    """True when any of ``declared`` matches a ``type_`` event on a ``kind`` object."""
    return any(w.matches(kind, type_) for w in declared)


@runtime_checkable
class Controller(Protocol):
    """One acting controller (see the module docstring).

    Attributes:
        name: Karpenter's controller name (``nodeclaim.lifecycle``, ``node.termination``, ...).
        wakes_on: the watch events that start a pass.
        resync_seconds: longest wait between two passes without a change; None: the runner's
            default (the operator's ``resync_seconds``, 10 s).
        first_delay: seconds before the first pass (garbage collection waits 10 s).
    """

    @property
    def name(self) -> str: ...

    @property
    def wakes_on(self) -> tuple[Wake, ...]: ...

    @property
    def resync_seconds(self) -> float | None: ...

    @property
    def first_delay(self) -> float: ...

    async def reconcile(self) -> object:
        """One pass: decide, act, publish the events and metrics of what was done; returns what
        happened (the simulator records it)."""
        ...

    def next_due(self) -> float | None:
        """Epoch seconds (on the controller's clock) it wants its next pass, or None."""
        ...


@runtime_checkable
class Runnable(Protocol):
    """A controller with its own loop (the provisioner's batch window; a provider's controllers)."""

    @property
    def name(self) -> str: ...

    @property
    def wakes_on(self) -> tuple[Wake, ...]: ...

    async def run(self) -> None:
        """Run until cancelled."""
        ...

    def trigger(self) -> None:
        """Wake the loop (the runner calls it for matching watch events and for other controllers' pokes)."""
        ...


@runtime_checkable
class Observer(Protocol):
    """A controller that reads the changed object itself (the provisioner's batcher looks at
    each pod) rather than only being woken by its kind."""

    def observe(self, kind: str, event: WatchEvent) -> None:
        """Called by the change listener for every event matching the controller's ``wakes_on``."""
        ...


class Waker:
    """Lets one controller wake another by name (a NodeOverlay change re-runs provisioning and
    disruption); the runner registers each controller's wake-up. Names nobody registered (the
    simulator, which steps every controller anyway) are ignored."""

    def __init__(self) -> None:
        self._wakeups: dict[str, Callable[[], None]] = {}

    def register(self, name: str, wakeup: Callable[[], None]) -> None:
        """``poke(name)`` calls ``wakeup()`` from now on."""
        self._wakeups[name] = wakeup

    def poke(self, name: str) -> None:
        """Wake the controller ``name`` (a no-op when none is registered)."""
        wakeup = self._wakeups.get(name)
        if wakeup is not None:
            wakeup()


async def list_views(kube: KubeClient, kind: str, cache: ViewCache) -> list[ObjectView]:
    """Every ``kind`` object as its view, sorted by namespace and name: the informer cache's or
    the in-memory cluster's own views when ``kube`` keeps them (no copy, no parse), else the
    listed dicts parsed through ``cache`` (once per object version). Read them, never modify them."""
    if isinstance(kube, ViewSource):
        found = kube.views(kind)
        if found is not None:
            return list(found)
    return [cache.view(kind, obj) for obj in await kube.list(kind)]
