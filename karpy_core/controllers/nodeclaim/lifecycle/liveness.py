"""Liveness (Karpenter ``nodeclaim/lifecycle/liveness.go``): give up on a NodeClaim that never
launched or whose Node never registered.

A NodeClaim whose launch was tried but that is not ``Launched`` :data:`LAUNCH_TTL` after its
creation, or launched but not ``Registered`` :data:`REGISTRATION_TTL` after its launch, is
deleted (its pods provision again) and counted against its NodePool's
``NodeRegistrationHealthy``. Publishes ``LivenessDeleted`` and counts
``karpenter_nodeclaims_disrupted_total{reason="liveness"}``.
"""

from __future__ import annotations

from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.nodeclaim.lifecycle.common import LifecycleDeps, LifecycleEvent, LifecycleEventKind
from karpy_core.controllers.nodeclaim.lifecycle.launch import launch_attempted
from karpy_core.state.views import NodeClaimView, condition_of
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = ["Liveness", "LAUNCH_TTL", "REGISTRATION_TTL"]

LAUNCH_TTL = 5 * 60.0
"""Seconds a NodeClaim may stay un-launched before liveness deletes it (Karpenter ``liveness.go``)."""
REGISTRATION_TTL = 15 * 60.0
"""Seconds a launched NodeClaim may stay unregistered before liveness deletes it."""


class Liveness:
    """The liveness phase (see the module docstring)."""

    def __init__(self, deps: LifecycleDeps):
        self.deps = deps

    def created(self, nc: NodeClaimView, now: float) -> float:
        """Epoch seconds of ``nc``'s creation (``now`` when unknown)."""
        return parse_rfc3339(nc.raw["metadata"].get("creationTimestamp")) or now

    def launch_expired(self, nc: NodeClaimView, now: float) -> bool:
        """A launch was tried and :data:`LAUNCH_TTL` passed since the NodeClaim was created."""
        return now - self.created(nc, now) > LAUNCH_TTL and launch_attempted(nc)

    def registration_expired(self, nc: NodeClaimView, now: float) -> bool:
        """:data:`REGISTRATION_TTL` passed since the NodeClaim launched."""
        launched = condition_of(nc.conditions, "Launched")
        launched_at = parse_rfc3339(launched.last_transition_time if launched else None) or self.created(nc, now)
        return now - launched_at > REGISTRATION_TTL

    async def delete(self, nc: NodeClaimView, why: str) -> list[LifecycleEvent]:
        """Delete ``nc`` for ``why`` (``not launched within 5m``, ``not registered within 15m``)."""
        d = self.deps
        d.record_registration(nc, False)
        await d.kube.delete("NodeClaim", nc.name)
        if d.metrics is not None:
            d.metrics.observe_disrupted("liveness", nc.raw)
        await d.publish(karpenter_events.liveness_deleted(nc.name, why))
        return [LifecycleEvent(LifecycleEventKind.LIVENESS_DELETE, nc.name, reason=why, details={"nodepool": nc.nodepool or ""})]
