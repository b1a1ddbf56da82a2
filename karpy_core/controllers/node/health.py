"""Node repair: replace nodes that stay unhealthy (Karpenter ``pkg/controllers/node/health``).

The cloud provider names its repair policies (``repair_policies()``: a list of
:class:`~karpy_core.cloudprovider.types.RepairPolicy`, condition type, status and toleration in seconds). A managed
Node is **unhealthy** when one of its conditions has a policy's type and status and has had it for
at least the policy's toleration, counted from the condition's ``lastTransitionTime``.

An unhealthy node's NodeClaim gets ``karpenter.sh/nodeclaim-termination-timestamp`` = now (so
termination deletes its pods at once instead of waiting on evictions a dead kubelet cannot
honour) and is deleted; the provisioner then launches capacity for the pods. Repair is forceful and
outside disruption budgets, as in Karpenter.

Safety valve (Karpenter's): when more of a NodePool's nodes are unhealthy than 20% of them,
rounded up, nothing in that pool is repaired - a zone or network outage must not turn into a mass
deletion - and a ``repair-blocked`` event says so. Karpenter keeps repair behind the ``NodeRepair``
feature gate (off); karpy runs it by default (``ControllerSettings.node_repair``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import ANNOTATION_TERMINATION_TIMESTAMP, LABEL_NODEPOOL
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import RepairPolicy
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import Wake
from karpy_core.controllers.conditions import status_conditions
from karpy_core.errors import NotFoundError, ignore_kube_error
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.utils.clock import Clock, iso
from karpy_core.utils.fields import field_of, map_of
from karpy_core.utils.timestamps import parse_rfc3339

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["RepairEventKind", "NodeRepair", "RepairEvent", "UNHEALTHY_THRESHOLD_PERCENT", "unhealthy_reason"]

log = logging.getLogger(__name__)

UNHEALTHY_THRESHOLD_PERCENT = 20
"""Above this share of a NodePool's nodes unhealthy (rounded up), repair stops (Karpenter ``health``)."""


class RepairEventKind(StrEnum):
    """What the node-repair controller did."""

    REPAIR = "repair"
    REPAIR_BLOCKED = "repair-blocked"


@dataclass
class RepairEvent:
    """``kind`` is ``repair`` (NodeClaim deleted) or ``repair-blocked`` (the pool's 20% valve;
    ``node`` lists the unhealthy Nodes, comma-separated)."""

    kind: RepairEventKind
    node: str
    nodeclaim: str = ""
    nodepool: str = ""
    reason: str = ""


def unhealthy_reason(node: dict[str, Any], policies: Sequence[RepairPolicy], now: float) -> str:
    """Why ``node`` is unhealthy at ``now`` (epoch seconds) under ``policies``, or ""."""
    conds = {c.get("type"): c for c in status_conditions(node)}
    for p in policies:
        c = conds.get(p.condition_type)
        if c is None or c.get("status") != p.condition_status:
            continue
        since = parse_rfc3339(c.get("lastTransitionTime"))
        tolerate = p.toleration_seconds
        if since is not None and now - since >= tolerate:
            return (f"condition {c['type']}={c['status']} for {now - since:.0f}s "
                    f"(repair policy tolerates {tolerate:.0f}s)")
    return ""


class NodeRepair:
    """Deletes the NodeClaims of nodes that stay unhealthy (see the module docstring).

    Args:
        kube: the cluster.
        provider: the cloud provider (its repair policies).
        clock: the clock.
        events: where ``NodeRepair`` / ``NodeRepairBlocked`` go; None: not published.
        metrics: ``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}``; None: not counted.
    """

    name = "node.health"
    wakes_on: tuple[Wake, ...] = ()
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, events: EventRecorder | None = None,
                 metrics: Metrics | None = None):
        self.kube = kube
        self.events = events
        self.metrics = metrics
        self.provider = provider
        self.clock = clock
        self.dry_run = False
        """``karpy controller --dry-run``: decided as usual against the dry-run client (its writes
        withheld and logged there); this controller's own lines say ``dry run:``."""
        self._blocked: set[str] = set()

    async def reconcile(self) -> list[RepairEvent]:
        """One pass; returns the repairs made and the pools newly blocked by the 20% valve.

        Raises:
            KubeAPIError: a read, annotation or delete failed (other than the claim being gone);
                the operator logs it and retries on its next pass.
        """
        policies = self.provider.repair_policies()
        if not policies:
            return []
        now = self.clock.now()
        claims = {pid: c for c in await self.kube.list("NodeClaim") if (pid := field_of(c, "status", "providerID"))}
        by_pool: dict[str, list[tuple[dict[str, Any], dict[str, Any], str]]] = {}
        totals: dict[str, int] = {}
        for n in await self.kube.list("Node"):
            pool = map_of(n, "metadata", "labels").get(LABEL_NODEPOOL)
            claim = claims.get(field_of(n, "spec", "providerID"))
            if not pool or claim is None:
                continue  # not ours: never repaired
            totals[pool] = totals.get(pool, 0) + 1
            if n["metadata"].get("deletionTimestamp") or claim["metadata"].get("deletionTimestamp"):
                continue
            why = unhealthy_reason(n, policies, now)
            if why:
                by_pool.setdefault(pool, []).append((n, claim, why))
        events: list[RepairEvent] = []
        blocked_now: set[str] = set()
        for pool, sick in sorted(by_pool.items()):
            allowed = math.ceil(UNHEALTHY_THRESHOLD_PERCENT * totals[pool] / 100)
            if len(sick) > allowed:
                blocked_now.add(pool)
                if pool not in self._blocked:
                    events.append(RepairEvent(RepairEventKind.REPAIR_BLOCKED, ",".join(n["metadata"]["name"] for n, _, _ in sick),
                                              nodepool=pool,
                                              reason=f"{len(sick)} of {totals[pool]} nodes unhealthy, more than "
                                                     f"{UNHEALTHY_THRESHOLD_PERCENT}% ({allowed}): not repairing any"))
                continue
            for node, claim, why in sick:
                name = claim["metadata"]["name"]
                try:
                    await self.kube.patch("NodeClaim", name, {"metadata": {"annotations": {ANNOTATION_TERMINATION_TIMESTAMP: iso(now)}}})
                    await self.kube.delete("NodeClaim", name)
                except NotFoundError:
                    continue
                log.info("dry run: would repair node: delete its nodeclaim" if self.dry_run else "repairing node: deleting its nodeclaim",
                         extra=fields(node=node, nodeclaim=name, nodepool=pool or None,
                                                                               reason=why))
                events.append(RepairEvent(RepairEventKind.REPAIR, node["metadata"]["name"], name, pool, why))
        self._blocked = blocked_now
        await self._publish(events)
        return events

    def next_due(self) -> float | None:
        """None: repair runs on the resync."""
        return None

    async def _publish(self, events: list[RepairEvent]) -> None:
        """Per repair: ``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`` and a
        ``NodeRepair`` event; per newly blocked NodePool: ``NodeRepairBlocked`` on it and
        Karpenter's on each unhealthy Node (``node/health/events.go``)."""
        for ev in events:
            if ev.kind is RepairEventKind.REPAIR:
                if self.metrics is not None:
                    claim = await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim))
                    self.metrics.observe_disrupted("unhealthy", claim or {"metadata": {"labels": {LABEL_NODEPOOL: ev.nodepool}}})
                if self.events is not None:
                    await self.events.record(karpenter_events.node_repair(ev.node, ev.nodeclaim, ev.reason))
            elif self.events is not None:
                await self.events.record(karpenter_events.nodepool_repair_blocked(ev.nodepool, ev.reason))
                for node in filter(None, ev.node.split(",")):
                    await self.events.record(*karpenter_events.node_repair_blocked(
                        {"kind": "Node", "metadata": {"name": node}}, None, {"kind": "NodePool", "metadata": {"name": ev.nodepool}},
                        f"more than {UNHEALTHY_THRESHOLD_PERCENT}% nodes are unhealthy in the nodepool"))
