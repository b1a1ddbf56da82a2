"""Initialization (Karpenter ``nodeclaim/lifecycle/initialization.go``): a registered Node is
ready for pods.

Once the Node is Ready, its startup taints and the ephemeral taints
(``node.kubernetes.io/not-ready``, ``unreachable``, ``node.cloudprovider.kubernetes.io/uninitialized``)
are gone and every requested extended resource is allocatable, the Node is labelled
``karpenter.sh/initialized=true`` and the NodeClaim gets ``Initialized`` and ``Ready``.
Publishes ``Initialized``.
"""

from __future__ import annotations

from karpy_core.apis.labels import LABEL_INITIALIZED
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import status_conditions
from karpy_core.controllers.nodeclaim.lifecycle.common import (
    LifecycleDeps,
    LifecycleEvent,
    LifecycleEventKind,
    log,
    set_lifecycle_condition,
)
from karpy_core.logs import fields
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.clock import iso
from karpy_core.utils.fields import map_of

__all__ = ["Initialization", "EPHEMERAL_TAINTS", "initialized"]

EPHEMERAL_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
)
"""Taints the node lifecycle sets while a Node comes up; initialization waits for them to go."""


def initialized(nc: NodeClaimView, node: NodeView) -> bool:
    """The Node is Ready, without ``nc``'s startup taints or an ephemeral taint, and every
    extended resource ``nc`` requests is allocatable.

    Raises:
        karpy_core.utils.quantity.QuantityError: a quantity is malformed.
    """
    if not node.ready:
        return False
    startup = {(t.key, t.effect) for t in nc.startup_taints}
    if any((t.key, t.effect) in startup or t.key in EPHEMERAL_TAINTS for t in node.taints):
        return False
    requested = nc.requests
    alloc = node.allocatable
    return not any("/" in r and v > 0 and alloc.get(r, 0) == 0 for r, v in requested.items())


class Initialization:
    """The initialization phase (see the module docstring)."""

    def __init__(self, deps: LifecycleDeps):
        self.deps = deps

    async def reconcile(self, nc: NodeClaimView, node: NodeView) -> list[LifecycleEvent]:
        """Mark ``nc`` and ``node`` initialized when :func:`initialized`; returns ``initialize`` or nothing."""
        d = self.deps
        if not initialized(nc, node):
            return []
        await d.kube.patch("Node", node.name, {"metadata": {"labels": {LABEL_INITIALIZED: "true"}}})
        now = iso(d.clock.now())
        conds = status_conditions(nc.raw)
        conds = set_lifecycle_condition(conds, "Initialized", "True", "Initialized", "", now)
        conds = set_lifecycle_condition(conds, "Ready", "True", "Ready", "", now)
        await d.kube.patch("NodeClaim", nc.name, {"status": {"conditions": conds}}, status=True)
        log.info("initialized nodeclaim", extra=fields(node=node.name, provider_id=nc.provider_id or None,
                                                       allocatable=map_of(node.raw, "status", "allocatable")))
        await d.publish(karpenter_events.initialized(nc.name, node.name))
        return [LifecycleEvent(LifecycleEventKind.INITIALIZE, nc.name, node=node.name)]
