"""Expiration: NodeClaims older than ``spec.expireAfter`` are deleted.

Source: Karpenter ``pkg/controllers/nodeclaim/expiration/controller.go``. Forceful: not gated by
disruption budgets, do-not-disrupt or PDBs; the drain that follows honours PDBs and
do-not-disrupt until the NodeClaim's ``terminationGracePeriod`` runs out
(:mod:`karpy_core.controllers.node.termination`). ``expireAfter: Never`` never expires.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.apis.durations import duration_seconds
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import ignore_kube_error
from karpy_core.controllers.disruption.candidates import parse_ts
from karpy_core.errors import NotFoundError
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.utils.clock import Clock

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["expires_at", "expired_nodeclaims", "next_expiry", "Expiration", "ExpirationEvent", "ExpirationEventKind"]


def expires_at(nodeclaim: dict[str, Any]) -> float | None:
    """Epoch seconds at which the NodeClaim expires (creation + ``expireAfter``, default 720h), or
    None for ``Never``. Raises ``ValueError`` for a malformed duration."""
    after = duration_seconds((nodeclaim.get("spec") or {}).get("expireAfter") or "720h")
    created = parse_ts(nodeclaim["metadata"].get("creationTimestamp"))
    if after is None or created is None:
        return None
    return created + after


def _expiries(nodeclaims: Sequence[dict[str, Any]]) -> list[tuple[str, float]]:
    """``(name, expiry time)`` of every NodeClaim not deleting that has a readable ``expireAfter``."""
    out = []
    for nc in nodeclaims:
        if nc["metadata"].get("deletionTimestamp"):
            continue
        try:
            at = expires_at(nc)
        except ValueError:
            continue
        if at is not None:
            out.append((nc["metadata"]["name"], at))
    return out


def expired_nodeclaims(nodeclaims: list[dict[str, Any]], now: float) -> list[tuple[str, float]]:
    """``(name, expired at)`` of the NodeClaims past ``expireAfter`` at ``now`` and not deleting,
    sorted by name."""
    return sorted((name, at) for name, at in _expiries(nodeclaims) if now >= at)


def next_expiry(nodeclaims: Sequence[dict[str, Any]], now: float) -> float | None:
    """The earliest expiry after ``now`` (for the simulator's clock jumps), or None."""
    return min((at for _, at in _expiries(nodeclaims) if at > now), default=None)


class ExpirationEventKind(StrEnum):
    """What the expiration controller did."""

    EXPIRE = "expire"
    """An expired NodeClaim was deleted."""


@dataclass(frozen=True, slots=True)
class ExpirationEvent:
    """An expired NodeClaim was deleted.

    Attributes:
        kind: :attr:`ExpirationEventKind.EXPIRE`.
        nodeclaim: its name.
        reason: how long ago ``expireAfter`` elapsed, in words.
    """

    kind: ExpirationEventKind
    nodeclaim: str
    reason: str = ""


class Expiration:
    """Deletes expired NodeClaims (see the module docstring).

    Args:
        kube: the cluster.
        clock: the clock.
        events: where ``DisruptionTerminating`` (``Disrupting NodeClaim: Expired``) goes; None: not published.
        metrics: ``karpenter_nodeclaims_disrupted_total{reason="expired"}``; None: not counted.
    """

    name = "nodeclaim.expiration"

    def __init__(self, *, kube: KubeClient, clock: Clock, events: EventRecorder | None = None, metrics: Metrics | None = None):
        self.kube = kube
        self.clock = clock
        self.events = events
        self.metrics = metrics

    async def reconcile(self) -> list[ExpirationEvent]:
        """Delete every expired NodeClaim; one event per deletion."""
        now = self.clock.now()
        events = []
        for name, at in expired_nodeclaims(await self.kube.list("NodeClaim"), now):
            try:
                await self.kube.delete("NodeClaim", name)
            except NotFoundError:
                continue
            events.append(ExpirationEvent(ExpirationEventKind.EXPIRE, name, f"expireAfter elapsed {now - at:.0f}s ago"))
        for ev in events:
            if self.metrics is not None:
                self.metrics.observe_disrupted("expired", await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim)))
            if self.events is not None:
                await self.events.record(karpenter_events.expired(ev.nodeclaim))
        return events
