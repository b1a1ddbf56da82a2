"""The static capacity controller: keeps each static NodePool (``spec.replicas``) at its count.

Karpenter runs two controllers behind the ``StaticCapacity`` gate,
``pkg/controllers/static/provisioning`` and ``static/deprovisioning``; karpy runs both halves in
one pass per NodePool (:meth:`StaticCapacity.reconcile`), the decisions being pure functions of
:mod:`karpy_core.controllers.static.capacity`:

* **scale up** (``static.provisioning``, Ready pools only): create
  :func:`~karpy_core.controllers.static.capacity.scale_up_count` NodeClaims from the pool's
  template (the provider launches the cheapest allowed offering), within ``limits.nodes``; the
  NodeClaim lifecycle controller launches them like any other;
* **scale down** (``static.deprovisioning``): delete the NodeClaims beyond ``replicas`` in
  :func:`~karpy_core.controllers.static.capacity.scale_down_order`. User-driven, so not gated by
  disruption budgets (a forceful method, as expiration); the drain honours PDBs and
  do-not-disrupt until the NodeClaim's ``terminationGracePeriod``.

Drift of a static pool's nodes is the disruption planner's ``static-drift`` method (one-for-one
replacement within the ``Drifted`` budget and ``limits.nodes``); consolidation and emptiness never
touch static pools.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.base import Wake
from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan
from karpy_core.controllers.static.capacity import node_limit, scale_down_order, scale_up_count, static_claim, static_counts
from karpy_core.errors import NotFoundError
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.scheduling.template import template_from_nodepool
from karpy_core.state.cluster import collect_snapshot, daemonset_pod_infos
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import Clock

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["StaticEventKind", "StaticCapacity", "StaticEvent"]

log = logging.getLogger("karpy.static")


class StaticEventKind(StrEnum):
    """What the static capacity controller did."""

    NODECLAIM_CREATE = "nodeclaim-create"
    NODECLAIM_DELETE = "nodeclaim-delete"
    STATIC_LIMIT = "static-limit"


@dataclass(frozen=True, slots=True)
class StaticEvent:
    """Something the controller did or could not do.

    Attributes:
        kind: ``nodeclaim-create`` (scale up), ``nodeclaim-delete`` (scale down) or
            ``static-limit`` (scale up held back by ``limits.nodes``).
        nodepool: the NodePool.
        nodeclaim: the NodeClaim created or deleted ("" for ``static-limit``).
        reason: in words.
        details: ``current``, ``desired`` (and ``limit``), JSON-ready.
    """

    kind: StaticEventKind
    nodepool: str
    nodeclaim: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


class StaticCapacity:
    """Scale static NodePools to ``spec.replicas`` (see the module docstring).

    Args:
        kube: the cluster.
        provider: the cloud provider (instance types for the NodeClaims' requirements).
        clock: time source (``now`` for the scale-down order's lifetime remaining).
        metrics: ``karpenter_nodeclaims_created_total{reason="provisioned"}`` per NodeClaim
            created (as Karpenter's static provisioner counts them); None: not counted.
    """

    name = "static.provisioning"
    wakes_on = (Wake.on("NodePool", "NodeClaim"),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, metrics: Metrics | None = None,
                 sync: ClusterSync | None = None):
        self.kube = kube
        self.sync = sync if sync is not None else ClusterSync(kube)
        """The synced-before-acting gate (:class:`~karpy_core.state.synced.ClusterSync`)."""
        self.metrics = metrics
        self.provider = provider
        self.clock = clock
        self._limit_logged: set[tuple[str, int]] = set()

    async def reconcile(self) -> list[StaticEvent]:
        """One pass over every static NodePool; returns what was done (nothing while the cluster
        state is not synced: it would count too few NodeClaims and launch more)."""
        if not self.sync.ready(self.name):
            return []
        snapshot = await collect_snapshot(self.kube)
        now = self.clock.now()
        events: list[StaticEvent] = []
        daemonsets = None
        for pool in snapshot.nodepool_views:
            if pool.replicas is None or pool.deleting:
                continue
            counts = static_counts(snapshot, pool.name)
            desired = pool.replicas
            details: dict[str, Any] = {"current": counts.active, "desired": desired}
            if pool.ready:
                limit = node_limit(pool)
                n = scale_up_count(desired, counts, limit)
                if n > 0:
                    self._limit_logged.discard((pool.name, desired))
                    if daemonsets is None:
                        daemonsets = daemonset_pod_infos(snapshot.daemonsets)
                    template = template_from_nodepool(pool.raw, await self.provider.get_instance_types(pool.model))
                    plan = static_claim(template, daemonsets)
                    if plan is None:
                        log.warning("no instance type satisfies the static nodepool's requirements", extra=fields(nodepool=pool.name))
                    else:
                        log.info("provisioning nodeclaims to satisfy replica count",
                                 extra=fields(nodepool=pool.name, **{**details, "provision-count": n}))
                        for _ in range(n):
                            created = await self.kube.create("NodeClaim", nodeclaim_from_plan(plan, pool))
                            events.append(StaticEvent(StaticEventKind.NODECLAIM_CREATE, pool.name, created["metadata"]["name"],
                                                      "static: replicas", details))
                            if self.metrics is not None:
                                self.metrics.nodeclaims_created.labels(reason="provisioned", nodepool=pool.name,
                                                                       min_values_relaxed="false").inc()
                elif counts.active + counts.pending_disruption < desired and (pool.name, desired) not in self._limit_logged:
                    self._limit_logged.add((pool.name, desired))
                    log.info("nodepool node limit reached", extra=fields(nodepool=pool.name, **details))
                    events.append(StaticEvent(StaticEventKind.STATIC_LIMIT, pool.name, reason=f"limits.nodes ({limit}) reached",
                                              details={**details, "limit": limit}))
            excess = counts.active - desired
            if excess > 0:
                log.info("deprovisioning nodeclaims to satisfy replica count",
                         extra=fields(nodepool=pool.name, **{**details, "deprovision-count": excess}))
                for name in scale_down_order(snapshot, pool.name, excess, now):
                    try:
                        await self.kube.delete("NodeClaim", name)
                    except NotFoundError:
                        continue
                    events.append(StaticEvent(StaticEventKind.NODECLAIM_DELETE, pool.name, name, "static: scale down", details))
        return events

    def next_due(self) -> float | None:
        """None: static capacity runs on changes and the resync."""
        return None
