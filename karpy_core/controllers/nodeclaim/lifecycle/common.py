"""What the NodeClaim lifecycle phases share: their dependencies, the result type, the
condition writer and the publishing of events and metrics."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodepool_status import RegistrationHealth
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.state.views import NodeClaimView, NodeView, ViewCache, condition_of
from karpy_core.utils.clock import Clock

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["LifecycleEvent", "LifecycleEventKind", "LifecycleDeps", "set_lifecycle_condition", "CONTROLLER"]

log = logging.getLogger("karpy_core.controllers.nodeclaim.lifecycle")

CONTROLLER = "nodeclaim.lifecycle"
"""Karpenter's controller name (the ``controller`` label of its metrics)."""


class LifecycleEventKind(StrEnum):
    """What the lifecycle controller did to one NodeClaim."""

    LAUNCH = "launch"
    LAUNCH_FAILED = "launch-failed"
    REGISTER = "register"
    INITIALIZE = "initialize"
    LIVENESS_DELETE = "liveness-delete"
    DELETE = "delete"
    TERMINATE = "terminate"
    RECONCILE_FAILED = "reconcile-failed"


@dataclass
class LifecycleEvent:
    """Something the lifecycle controller did (``kind``) to the NodeClaim ``nodeclaim``;
    ``details`` carries the launch's instance type, zone, capacity type and provider ID, or the
    NodeClaim's NodePool."""

    kind: LifecycleEventKind
    nodeclaim: str
    node: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class LifecycleDeps:
    """The lifecycle phases' shared dependencies.

    Attributes:
        kube: the cluster.
        provider: the active cloud provider.
        clock: the clock (virtual in the simulator).
        events: where the lifecycle's events go; None: not published.
        metrics: where its metrics go; None: not counted.
        registration: launch outcomes for the NodePools' ``NodeRegistrationHealthy``.
        views: NodeClaim and Node views by object version.
    """

    kube: KubeClient
    provider: CloudProvider
    clock: Clock
    events: EventRecorder | None = None
    metrics: Metrics | None = None
    registration: RegistrationHealth | None = None
    views: ViewCache = field(default_factory=ViewCache)

    async def publish(self, *events: Event) -> None:
        """Record ``events`` when an EventRecorder is set."""
        if self.events is not None and events:
            await self.events.record(*events)

    def claim(self, obj: dict[str, Any]) -> NodeClaimView:
        """The NodeClaim's view (parsed once per version)."""
        return self.views.nodeclaim(obj)

    def node(self, obj: dict[str, Any]) -> NodeView:
        """The Node's view (parsed once per version)."""
        view = self.views.view("Node", obj)
        assert isinstance(view, NodeView)
        return view

    def record_registration(self, nc: NodeClaimView, ok: bool) -> None:
        """Count a registration (``ok``) or a liveness deletion for the NodePool's ``NodeRegistrationHealthy``."""
        if self.registration is None or not nc.nodepool:
            return
        launched = condition_of(nc.conditions, "Launched")
        if ok or (launched is not None and launched.is_true):
            self.registration.record(nc.nodepool, ok)
        else:
            self.registration.record(nc.nodepool, False, launched.reason if launched else "", launched.message if launched else "")


def set_lifecycle_condition(conds: list[dict[str, Any]], type_: str, status: str, reason: str, message: str,
                            now: str) -> list[dict[str, Any]]:
    """``conds`` with ``type_`` set (its ``lastTransitionTime`` kept while ``status`` is
    unchanged), sorted by type."""
    out = [c for c in conds if c.get("type") != type_]
    prev = next((c for c in conds if c.get("type") == type_), None)
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
    out.append({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt})
    return sorted(out, key=lambda c: c["type"])
