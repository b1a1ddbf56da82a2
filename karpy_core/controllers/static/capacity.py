"""Static capacity, the deciding half: how many NodeClaims a static NodePool (``spec.replicas``)
needs created or removed, which ones go first, and what each new one looks like.

Source: kubernetes-sigs/karpenter ``designs/static-capacity.md``,
``pkg/controllers/static/provisioning/controller.go``, ``static/deprovisioning/controller.go`` and
``pkg/controllers/state/statenodepool.go`` (``GetNodeCount``, ``ReserveNodeCount``). karpy counts
the NodeClaims of the snapshot instead of keeping a reservation table: a NodeClaim it creates is in
the next snapshot, so nothing is reserved between passes.

Pure: a snapshot and ``now`` (epoch seconds) in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy_core.controllers.disruption.candidates import do_not_disrupt_blocks, lifetime_remaining
from karpy_core.scheduling.claim import ClaimState, finalize
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.scheduler import PlannedNodeClaim
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import NodeClaimView, NodePoolView
from karpy_core.utils.fields import field_of
from karpy_core.utils.quantity import QuantityError, parse_quantity

__all__ = ["is_static_pool", "StaticCounts", "static_counts", "node_limit", "scale_up_count", "scale_down_order", "static_claim"]


def is_static_pool(nodepool: Mapping[str, Any]) -> bool:
    """True for a static NodePool dict (``spec.replicas`` set, Karpenter ``nodepoolutils.IsStatic``)."""
    return field_of(nodepool, "spec", "replicas") is not None


@dataclass(frozen=True, slots=True)
class StaticCounts:
    """A static NodePool's NodeClaims by state (Karpenter ``NodePoolState.GetNodeCount``).

    Attributes:
        active: not deleting and not marked for disruption (launched or still launching).
        deleting: with a deletion timestamp.
        pending_disruption: in a disruption command (its Node tainted ``karpenter.sh/disrupted``
            or its ``DisruptionReason`` condition True), not deleting yet.
    """

    active: int = 0
    deleting: int = 0
    pending_disruption: int = 0

    @property
    def total(self) -> int:
        """Every NodeClaim of the pool: what ``limits.nodes`` caps."""
        return self.active + self.deleting + self.pending_disruption


def _marked_for_disruption(snapshot: ClusterSnapshot, nodeclaim: NodeClaimView) -> bool:
    """Its ``DisruptionReason`` condition is True or its Node is tainted ``karpenter.sh/disrupted``."""
    pid = nodeclaim.provider_id
    node = snapshot.node_by_provider_id(pid) if pid else None
    return nodeclaim.is_true("DisruptionReason") or (node is not None and node.disrupted)


def static_counts(snapshot: ClusterSnapshot, nodepool: str) -> StaticCounts:
    """The NodeClaims of ``nodepool`` in ``snapshot``, counted by state (:class:`StaticCounts`)."""
    active = deleting = pending = 0
    for nc in snapshot.nodeclaims_of(nodepool):
        if nc.deleting:
            deleting += 1
        elif _marked_for_disruption(snapshot, nc):
            pending += 1
        else:
            active += 1
    return StaticCounts(active, deleting, pending)


def node_limit(pool: NodePoolView) -> int | None:
    """``spec.limits.nodes`` as a count, or None when unset (or not a quantity: the API rejects
    those)."""
    value = pool.model.spec.limits.get("nodes")
    if value is None:
        return None
    try:
        return int(parse_quantity(str(value)))
    except (QuantityError, ValueError):
        return None


def scale_up_count(replicas: int, counts: StaticCounts, limit: int | None) -> int:
    """How many NodeClaims to create now (Karpenter static ``provisioning/controller.go``): none
    while active + pending-disruption NodeClaims reach ``replicas``; else ``replicas - active``,
    capped so that every NodeClaim of the pool (active, deleting, pending disruption) stays within
    ``limit`` (``limits.nodes``; None: no cap). Never negative."""
    if counts.active + counts.pending_disruption >= replicas:
        return 0
    want = replicas - counts.active
    if limit is not None:
        want = min(want, limit - counts.total)
    return max(0, want)


def scale_down_order(snapshot: ClusterSnapshot, nodepool: str, count: int, now: float) -> list[str]:
    """The names of the ``count`` NodeClaims of ``nodepool`` to delete when it has more than
    ``replicas`` (Karpenter static ``deprovisioning/controller.go``, ``getDeprovisioningCandidates``):

    1. unresolved NodeClaims (no ``providerID`` yet: not launched, or a failed launch), by name;
    2. empty nodes: no pod but DaemonSet, mirror and finished ones, and none with an active
       ``karpenter.sh/do-not-disrupt``, by name;
    3. the other nodes: those without a do-not-disrupt pod first, then by rescheduling cost
       (Σ pod eviction cost) x lifetime remaining (fraction of ``expireAfter`` left), then name.

    NodeClaims deleting, or whose Node is marked for disruption, are never picked; NodeClaims with
    a ``providerID`` but no Node yet count as neither and are left alone, as upstream.
    """
    if count <= 0:
        return []
    unresolved: list[str] = []
    empty: list[str] = []
    busy: list[tuple[bool, float, str]] = []
    for nc in sorted(snapshot.nodeclaims_of(nodepool), key=lambda v: v.name):
        name = nc.name
        if nc.deleting:
            continue
        pid = nc.provider_id
        if not pid:
            unresolved.append(name)
            continue
        node = snapshot.node_by_provider_id(pid)
        if node is None or node.deleting or _marked_for_disruption(snapshot, nc):
            continue
        pods = [p for p in snapshot.pods_on(node.name) if not p.terminal]
        moving = [p for p in pods if p.reschedulable]
        blocked = any(do_not_disrupt_blocks(p, now) for p in pods)
        if not moving and not blocked:
            empty.append(name)
            continue
        busy.append((blocked, sum(p.eviction_cost for p in moving) * lifetime_remaining(nc, now), name))
    ordered = unresolved + empty + [name for _, _, name in sorted(busy)]
    return ordered[:count]


def static_claim(template: NodePoolTemplate, daemonsets: Sequence[PodInfo], index: int = 0) -> PlannedNodeClaim | None:
    """One NodeClaim of a static pool: the pool's template alone (no pods), every instance type
    its requirements allow with an available offering, cheapest first; the provider launches the
    cheapest (Karpenter ``scheduling.NewNodeClaimTemplate``). None when no instance type is left."""
    table = TypeTable(template, daemonsets)
    plan = finalize(ClaimState.fresh(table, index))
    return plan if plan.instance_types else None
