"""Expiration: NodeClaims older than ``spec.expireAfter`` are deleted.

Source: Karpenter ``pkg/controllers/nodeclaim/expiration/controller.go``. Forceful: not gated by
disruption budgets, do-not-disrupt or PDBs; the drain that follows honours PDBs and
do-not-disrupt until the NodeClaim's ``terminationGracePeriod`` runs out
(:mod:`karpy_core.controllers.node.termination`). ``expireAfter: Never`` never expires.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from karpy_core.apis.durations import duration_seconds
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.disruption.candidates import parse_ts
from karpy_core.errors import NotFoundError, ignore_kube_error
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.state.views import NodeClaimView, ViewCache
from karpy_core.utils.clock import Clock

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["expires_at", "expired_nodeclaims", "next_expiry", "Expiration", "ExpirationEvent", "ExpirationEventKind"]

log = logging.getLogger("karpy.expiration")


def expires_at(nodeclaim: NodeClaimView) -> float | None:
    """Epoch seconds at which the NodeClaim expires (creation + ``expireAfter``, default 720h), or
    None for ``Never``. Raises ``ValueError`` for a malformed duration."""
    after = duration_seconds(nodeclaim.expire_after or "720h")
    created = parse_ts(nodeclaim.created or None)
    if after is None or created is None:
        return None
    return created + after


def _expiries(nodeclaims: Iterable[NodeClaimView]) -> list[tuple[str, float]]:
    """``(name, expiry time)`` of every NodeClaim not deleting that has a readable ``expireAfter``."""
    out = []
    for nc in nodeclaims:
        if nc.deleting:
            continue
        try:
            at = expires_at(nc)
        except ValueError:
            continue
        if at is not None:
            out.append((nc.name, at))
    return out


def expired_nodeclaims(nodeclaims: Iterable[NodeClaimView], now: float) -> list[tuple[str, float]]:
    """``(name, expired at)`` of the NodeClaims past ``expireAfter`` at ``now`` and not deleting,
    sorted by name."""
    return sorted((name, at) for name, at in _expiries(nodeclaims) if now >= at)


def next_expiry(nodeclaims: Iterable[NodeClaimView], now: float) -> float | None:
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
        self._views = ViewCache()
        self.dry_run = False
        """``karpy controller --dry-run``: each expired NodeClaim is logged (``dry run: would expire
        nodeclaim``) and its ``Expired`` event logged; nothing is deleted or counted in Karpenter's metrics."""

    async def reconcile(self) -> list[ExpirationEvent]:
        """Delete every expired NodeClaim; one event per deletion."""
        now = self.clock.now()
        events = []
        claims = [self._views.nodeclaim(nc) for nc in await self.kube.list("NodeClaim")]
        self._views.sweep()
        for name, at in expired_nodeclaims(claims, now):
            if self.dry_run:
                log.info("dry run: would expire nodeclaim", extra=fields(nodeclaim=name, reason=f"expireAfter elapsed {now - at:.0f}s ago",
                                                                          dryRun=True))
                events.append(ExpirationEvent(ExpirationEventKind.EXPIRE, name, f"dry run: expireAfter elapsed {now - at:.0f}s ago"))
                continue
            try:
                await self.kube.delete("NodeClaim", name)
            except NotFoundError:
                continue
            events.append(ExpirationEvent(ExpirationEventKind.EXPIRE, name, f"expireAfter elapsed {now - at:.0f}s ago"))
        for ev in events:
            if self.metrics is not None and not self.dry_run:
                self.metrics.observe_disrupted("expired", await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim)))
            if self.events is not None:
                await self.events.record(karpenter_events.expired(ev.nodeclaim))
        return events
