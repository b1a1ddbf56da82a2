"""The NodeClaim lifecycle controller (Karpenter ``nodeclaim/lifecycle/controller.go``): one pass
over every NodeClaim, each taken through its next phase.

Phases, one module each: :mod:`.launch`, :mod:`.registration`, :mod:`.initialization`,
:mod:`.liveness`; then the node-shape check (:mod:`.consistency`). Here: the
``karpenter.sh/termination`` finalizer, the NodeClass label hydration and finalization of a
deleted claim (delete the Node, call the provider's ``delete`` until it reports the instance
gone, ``InstanceTerminating=True`` from the first call, then remove the finalizer; publishes
``Terminated`` and counts ``karpenter_nodeclaims_terminated_total``).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import FINALIZER_TERMINATION, nodeclass_label_key
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import Wake, list_views
from karpy_core.controllers.conditions import INSTANCE_TERMINATING, set_condition, status_conditions
from karpy_core.controllers.nodeclaim.lifecycle.common import (
    CONTROLLER,
    LifecycleDeps,
    LifecycleEvent,
    LifecycleEventKind,
    log,
)
from karpy_core.controllers.nodeclaim.lifecycle.consistency import Consistency
from karpy_core.controllers.nodeclaim.lifecycle.initialization import Initialization
from karpy_core.controllers.nodeclaim.lifecycle.launch import Launch
from karpy_core.controllers.nodeclaim.lifecycle.liveness import Liveness
from karpy_core.controllers.nodeclaim.lifecycle.registration import Registration
from karpy_core.controllers.nodepool_status import RegistrationHealth
from karpy_core.errors import CloudProviderError, KubeAPIError, NodeClaimNotFoundError, ignore_not_found
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields, reconciling
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.clock import Clock, iso

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["LIFECYCLE_CONCURRENCY", "NodeClaimLifecycle"]

LIFECYCLE_CONCURRENCY = 64
"""NodeClaims one lifecycle pass reconciles at once."""


class NodeClaimLifecycle:
    """Drives every NodeClaim through launch -> registration -> initialization, and finalizes
    deleted ones; each phase publishes its own events and metrics.

    Args:
        kube: the cluster.
        provider: the active cloud provider.
        clock: the clock (virtual in the simulator).
        events: where the lifecycle's events go; None: not published.
        metrics: where its metrics go; None: not counted.
        registration: launch outcomes for ``NodeRegistrationHealthy`` (shared with the NodePool status controller).
    """

    name = CONTROLLER
    wakes_on = (Wake.on("NodeClaim", "Node"),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, events: EventRecorder | None = None,
                 registration: RegistrationHealth | None = None, metrics: Metrics | None = None):
        self.deps = LifecycleDeps(kube=kube, provider=provider, clock=clock, events=events, metrics=metrics,
                                  registration=registration)
        self.kube = kube
        self.provider = provider
        self.clock = clock
        self.launch = Launch(self.deps)
        self.registration = Registration(self.deps)
        self.initialization = Initialization(self.deps)
        self.liveness = Liveness(self.deps)
        self.consistency = Consistency(self.deps)

    def next_due(self) -> float | None:
        """None: the lifecycle runs on changes and the resync."""
        return None

    @property
    def events(self) -> EventRecorder | None:
        """Where the phases publish their events (None: nowhere)."""
        return self.deps.events

    @events.setter
    def events(self, value: EventRecorder | None) -> None:
        self.deps.events = value

    async def reconcile(self) -> list[LifecycleEvent]:
        """One pass over every NodeClaim; returns what happened (in NodeClaim name order). One
        NodeClaim's failure (API, cloud provider, a malformed object) is logged and retried next
        pass. The NodeClaims are taken concurrently, at most :data:`LIFECYCLE_CONCURRENCY` at once
        (Karpenter's lifecycle controller reconciles NodeClaims in parallel too): one by one, each
        launch and registration waited for every other claim's (at 60 claims on a busy control
        plane a claim registered a minute after its launch, issue 36)."""
        views = self.deps.views
        by_pid = {n.provider_id: n for n in await list_views(self.kube, "Node", views) if isinstance(n, NodeView) and n.provider_id}
        gate = asyncio.Semaphore(LIFECYCLE_CONCURRENCY)

        async def one(nc: NodeClaimView) -> list[LifecycleEvent] | None:
            async with gate:
                with reconciling("NodeClaim", nc.name):
                    try:
                        return await self.reconcile_one(nc, by_pid)
                    except (KubeAPIError, CloudProviderError, ValueError) as exc:
                        log.warning("reconciling nodeclaim failed; retrying", extra=fields(nodeclaim=nc.raw, error=exc))
                        return None

        claims = [nc for nc in await list_views(self.kube, "NodeClaim", views) if isinstance(nc, NodeClaimView)]
        outcomes = await asyncio.gather(*(one(nc) for nc in claims))
        events = [ev for out in outcomes if out is not None for ev in out]
        failures = sum(1 for out in outcomes if out is None)
        if failures:
            events.append(LifecycleEvent(LifecycleEventKind.RECONCILE_FAILED, "", reason=f"{failures} NodeClaim(s) failed; retrying"))
        self.deps.views.sweep()
        return events

    async def reconcile_one(self, obj: dict[str, Any] | NodeClaimView, nodes_by_pid: dict[str, NodeView]) -> list[LifecycleEvent]:
        """Take one NodeClaim (its view, or a dict) through its next phase; ``nodes_by_pid``: the Nodes by provider ID."""
        nc = obj if isinstance(obj, NodeClaimView) else self.deps.claim(obj)
        if nc.deleting:
            return await self._finalize(nc, nodes_by_pid)
        finalizers = list(nc.raw["metadata"].get("finalizers") or [])
        if FINALIZER_TERMINATION not in finalizers:
            nc = self.deps.claim(await self.kube.patch(
                "NodeClaim", nc.name, {"metadata": {"finalizers": [*finalizers, FINALIZER_TERMINATION]}}))
        now = self.clock.now()
        if not nc.is_true("Launched"):
            if self.liveness.launch_expired(nc, now):
                return await self.liveness.delete(nc, "not launched within 5m")
            return await self.launch.reconcile(nc)
        node = nodes_by_pid.get(nc.provider_id)
        if not nc.is_true("Registered"):
            if node is None:
                if self.liveness.registration_expired(nc, now):
                    return await self.liveness.delete(nc, "not registered within 15m")
                return []
            return await self.registration.reconcile(nc, node)
        if node is None:
            return []
        await self._hydrate(nc, node)
        if not nc.is_true("Initialized"):
            return await self.initialization.reconcile(nc, node)
        await self.consistency.reconcile(nc, node, now)
        return []

    async def _hydrate(self, nc: NodeClaimView, node: NodeView) -> None:
        """Karpenter's hydration controllers: a NodeClaim and Node made before the NodeClass label
        existed get ``<group>/<kind lower-cased>: <NodeClass name>``."""
        ref = nc.node_class_ref
        if not (ref.get("group") and ref.get("kind") and ref.get("name")):
            return
        key, value = nodeclass_label_key(str(ref["group"]), str(ref["kind"])), str(ref["name"])
        for kind, name, labels in (("NodeClaim", nc.name, nc.labels), ("Node", node.name, node.labels)):
            if labels.get(key) != value:
                await self.kube.patch(kind, name, {"metadata": {"labels": {key: value}}})

    async def _finalize(self, nc: NodeClaimView, nodes_by_pid: dict[str, NodeView]) -> list[LifecycleEvent]:
        """Finalize a deleted NodeClaim (see the module docstring)."""
        name = nc.name
        finalizers = list(nc.raw["metadata"].get("finalizers") or [])
        if FINALIZER_TERMINATION not in finalizers:
            return []
        events: list[LifecycleEvent] = []
        pid = nc.provider_id
        node = nodes_by_pid.get(pid) if pid else None
        if node is not None:
            if not node.deleting:
                await self.kube.delete("Node", node.name)
                events.append(LifecycleEvent(LifecycleEventKind.DELETE, name, node=node.name, reason="NodeClaim deleted"))
            return events  # wait for the Node's own termination to finish
        if pid:
            if not nc.is_true(INSTANCE_TERMINATING):
                conds = set_condition(status_conditions(nc.raw), INSTANCE_TERMINATING, "True",
                                      iso(self.clock.now()))
                await ignore_not_found(self.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True))
            try:
                await self.provider.delete(nc.model)
                return events  # retried until the provider says the instance is gone
            except NodeClaimNotFoundError:
                events.append(LifecycleEvent(LifecycleEventKind.TERMINATE, name, reason="instance terminated",
                                             details={"nodepool": nc.nodepool or ""}))
        await ignore_not_found(self.kube.patch(
            "NodeClaim", name, {"metadata": {"finalizers": [f for f in finalizers if f != FINALIZER_TERMINATION]}}))
        log.info("deleted nodeclaim", extra=fields(provider_id=pid or None))
        for ev in events:
            if ev.kind is LifecycleEventKind.TERMINATE:
                if self.deps.metrics is not None:
                    self.deps.metrics.observe_nodeclaim_terminated(nc.raw, self.clock.now())
                await self.deps.publish(karpenter_events.nodeclaim_terminated(name, ev.reason))
        return events
