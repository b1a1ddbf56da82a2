"""Disruption candidates: which nodes may be disrupted, and what each one costs and carries.

Source: Karpenter ``pkg/controllers/disruption/types.go`` (``NewCandidate``),
``pkg/controllers/state/statenode.go`` (``ValidateNodeDisruptable``, ``ValidatePodsDisruptable``),
``pkg/controllers/nodeclaim/disruption/{consolidation,drift}.go`` (the ``Consolidatable`` and
``Drifted`` conditions, computed here in memory from the snapshot) and
``pkg/utils/disruption/disruption.go`` (``EvictionCost``, ``LifetimeRemaining``).

Everything here is pure: a snapshot and ``now`` (seconds since the epoch) in, values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.hashing import nodepool_hash
from karpy_core.apis.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    LABEL_CAPACITY_TYPE,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    TAINT_DISRUPTED,
)
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.decisions import DecisionDetails, DecisionKind, DecisionStage, NodeDecision, Verdict
from karpy_core.controllers.nodeclaim.drift import CONDITION_DRIFTED, static_drift
from karpy_core.state.cluster import ClusterSnapshot, condition
from karpy_core.utils.clock import iso
from karpy_core.utils.pdb import effective_status, eviction_verdict
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = [
    "Candidate",
    "NodeDecision",
    "parse_ts",
    "is_reschedulable",
    "do_not_disrupt_blocks",
    "pdb_status",
    "pdb_blocker",
    "drift_reason",
    "consolidatable_at",
    "build_candidates",
    "disrupting_counts",
]


parse_ts = parse_rfc3339
"""RFC 3339 text (or a datetime) -> seconds since the epoch; None when absent (the shared parser)."""


@dataclass(eq=False)
class Candidate:
    """A node that passed the eligibility checks.

    Attributes:
        name: Node name.
        nodeclaim: the NodeClaim dict; ``nodeclaim_name`` its name.
        nodepool: NodePool name; ``pool``: the NodePool dict.
        instance_type, zone, capacity_type: from the node labels.
        price: USD/hour of the matching offering, or None when the type or offering is unknown.
        pods: reschedulable pods (not DaemonSet, not mirror, not finished or terminating).
        consolidatable_at: epoch seconds from which ``Consolidatable`` holds; None for
            ``consolidateAfter: Never``.
        drifted: why the node is drifted, "" when it is not.
        disruption_cost: sum of pod eviction costs x lifetime remaining (Karpenter's ordering key).
        created: NodeClaim creation time, epoch seconds.
    """

    name: str
    nodeclaim: dict[str, Any]
    nodeclaim_name: str
    nodepool: str
    pool: dict[str, Any]
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    pods: list[dict[str, Any]]
    consolidatable_at: float | None
    drifted: str
    disruption_cost: float
    created: float
    blocked: str = ""
    """Set when do-not-disrupt or a PDB would block a voluntary disruption (kept for drift with a
    terminationGracePeriod, which Karpenter lets through)."""
    blocked_kind: DecisionKind | None = None
    """:attr:`DecisionKind.DO_NOT_DISRUPT` or :attr:`DecisionKind.PDB_BLOCKS` when ``blocked``."""

    @property
    def empty(self) -> bool:
        """True when no reschedulable pod runs on the node."""
        return not self.pods

    def consolidatable(self, now: float) -> bool:
        """True when ``Consolidatable`` holds at ``now`` (epoch seconds)."""
        return self.consolidatable_at is not None and now >= self.consolidatable_at


def is_reschedulable(pod: dict[str, Any]) -> bool:
    """A pod that must go somewhere else if its node goes: active, not a DaemonSet or mirror pod
    (Karpenter ``pod.IsReschedulable``)."""
    meta = pod["metadata"]
    if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") in ("DaemonSet", "Node"):
            return False
    return "kubernetes.io/config.mirror" not in (meta.get("annotations") or {})


def do_not_disrupt_blocks(obj: dict[str, Any], now: float) -> bool:
    """True when ``karpenter.sh/do-not-disrupt`` on ``obj`` (pod or node) protects it at ``now``:
    ``"true"``, or a duration counted from the object's creation (#2874)."""
    value = (obj["metadata"].get("annotations") or {}).get(ANNOTATION_DO_NOT_DISRUPT)
    if value is None:
        return False
    if value == "true":
        return True
    try:
        seconds = duration_seconds(value)
    except ValueError:
        return False  # Karpenter ignores values it cannot parse
    if seconds is None:
        return True
    created = parse_ts(obj["metadata"].get("creationTimestamp")) or now
    return now < created + seconds


def pdb_status(pdb: dict[str, Any], pods: Sequence[dict[str, Any]], now: float) -> dict[str, Any]:
    """The PDB's status to judge evictions by: the ``status`` its disruption controller wrote
    (kube-controller-manager's, or the in-memory cluster's) when it is current, else the status
    :func:`karpy_core.utils.pdb.compute_status` derives from ``pods`` (no controllers known, so
    only an integer ``minAvailable`` allows anything then). ``now``: epoch seconds."""
    return effective_status(pdb, pods, None, now)


def pdb_blocker(pods: list[dict[str, Any]], pdbs: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[str, str, str] | None:
    """``(pod key, pdb name, why)`` of the first pod the Eviction API would refuse now, or None:
    the same verdict as kube-apiserver's (:func:`karpy_core.utils.pdb.eviction_verdict`), so an
    unready pod the PDB's ``unhealthyPodEvictionPolicy`` lets go does not block, and a pod two
    PDBs select does. ``pdbs`` pairs each PDB with its :func:`pdb_status` status."""
    statuses = {(b["metadata"].get("namespace") or "default", b["metadata"]["name"]): st for b, st in pdbs}
    budgets = [b for b, _ in pdbs]

    def status_of(b: dict[str, Any]) -> dict[str, Any]:
        return statuses[(b["metadata"].get("namespace") or "default", b["metadata"]["name"])]

    for pod in pods:
        verdict = eviction_verdict(pod, budgets, status_of)
        if verdict.action != "deny":
            continue
        ns = pod["metadata"].get("namespace") or "default"
        key = f"{ns}/{pod['metadata']['name']}"
        if verdict.status == 500:
            return key, verdict.pdb, "more than one PodDisruptionBudget selects it"
        allowed = int(statuses[(ns, verdict.pdb)].get("disruptionsAllowed") or 0)
        return key, verdict.pdb, f"PodDisruptionBudget {verdict.pdb} allows {max(0, allowed)} disruptions"
    return None


def drift_reason(nodeclaim: dict[str, Any], node: dict[str, Any], nodepool: dict[str, Any],
                 current_hash: str | None = None) -> str:
    """Why the node is ``Drifted``, or "": the static checks of
    :func:`~karpy_core.controllers.nodeclaim.drift.static_drift` (NodePool hash, requirements),
    computed now from the snapshot, else the NodeClaim's ``Drifted`` condition, which the drift
    controller sets from those checks and the cloud provider's ``is_drifted``."""
    reason, message = static_drift(nodeclaim, node, nodepool, current_hash)
    if reason:
        return message
    cond = condition(nodeclaim, CONDITION_DRIFTED)
    if cond is not None and cond.get("status") == "True":
        return cond.get("message") or cond.get("reason") or "Drifted"
    return ""


def consolidatable_at(nodeclaim: dict[str, Any], nodepool: dict[str, Any]) -> float | None:
    """Epoch seconds from which the NodeClaim is ``Consolidatable``: (``status.lastPodEventTime``
    or the ``Initialized`` transition) + ``consolidateAfter``; None for ``Never`` or when the
    claim is not initialized."""
    after = ((nodepool.get("spec") or {}).get("disruption") or {}).get("consolidateAfter", "0s")
    seconds = duration_seconds(after)
    if seconds is None:
        return None
    base = parse_ts((nodeclaim.get("status") or {}).get("lastPodEventTime"))
    if base is None:
        base = parse_ts((condition(nodeclaim, "Initialized") or {}).get("lastTransitionTime"))
    if base is None:
        return None
    return base + seconds


def offering_price(types: list[InstanceType], labels: dict[str, str]) -> float | None:
    """USD/hour of the offering matching the node's type, zone and capacity type."""
    for it in types:
        if it.name != labels.get(LABEL_INSTANCE_TYPE):
            continue
        for o in it.offerings:
            if o.zone == labels.get(LABEL_ZONE) and o.capacity_type == labels.get(LABEL_CAPACITY_TYPE):
                return o.price
    return None


def _eviction_cost(pod: dict[str, Any]) -> float:
    ann = pod["metadata"].get("annotations") or {}
    if "controller.kubernetes.io/pod-deletion-cost" not in ann and not (pod.get("spec") or {}).get("priority"):
        return 1.0  # what the formula below gives without either
    cost = 1.0
    try:
        cost += float(ann.get("controller.kubernetes.io/pod-deletion-cost", 0)) / 2**27
    except ValueError:
        pass
    cost += float((pod.get("spec") or {}).get("priority") or 0) / 2**25
    return max(-10.0, min(10.0, cost))


def _is_tainted_disrupted(node: dict[str, Any]) -> bool:
    return any(t.get("key") == TAINT_DISRUPTED for t in (node.get("spec") or {}).get("taints") or ())


def _ready(node: dict[str, Any]) -> bool:
    c = condition(node, "Ready")
    return c is not None and c.get("status") == "True"


def disrupting_counts(snapshot: ClusterSnapshot) -> tuple[dict[str, int], dict[str, int]]:
    """Per NodePool: ``(total, disrupting)`` node counts for budgets. ``total`` counts managed,
    initialized nodes not being deleted; ``disrupting`` the pool's nodes deleting, tainted
    ``karpenter.sh/disrupted`` or NotReady."""
    total: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for n in snapshot.nodes:
        labels = n["metadata"].get("labels") or {}
        pool = labels.get(LABEL_NODEPOOL)
        if not pool:
            continue
        deleting = bool(n["metadata"].get("deletionTimestamp"))
        if labels.get(LABEL_INITIALIZED) == "true" and not deleting:
            total[pool] = total.get(pool, 0) + 1
        if deleting or _is_tainted_disrupted(n) or not _ready(n):
            disrupting[pool] = disrupting.get(pool, 0) + 1
    return total, disrupting


def build_candidates(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    *,
    log: list[NodeDecision] | None = None,
    nominated: Mapping[str, float] | None = None,
) -> list[Candidate]:
    """Every node eligible for disruption, sorted by name; the rest get a ``keep`` line in ``log``.

    Eligible: managed (``karpenter.sh/nodepool`` label, NodePool exists), initialized, not deleting,
    not tainted ``karpenter.sh/disrupted``, with a NodeClaim, and not nominated: ``nominated`` maps
    node or NodeClaim names to the epoch seconds until which a provisioning pass chose them for
    pending pods (:mod:`karpy_core.state.nominations`; Karpenter ``statenode.go``
    ``ValidateNodeDisruptable``: "node is nominated for a pending pod"). Nodes with a do-not-disrupt node or
    pod, or a pod whose PDB allows no disruption, are returned with ``blocked`` set (only drift
    with a ``terminationGracePeriod`` may proceed then); ``instance_types`` maps NodePool name ->
    its types (for prices).
    """
    pools = {p["metadata"]["name"]: p for p in snapshot.nodepools if not p["metadata"].get("deletionTimestamp")}
    hashes = {name: nodepool_hash(p) for name, p in pools.items()}
    claims_by_pid = {(c.get("status") or {}).get("providerID"): c for c in snapshot.nodeclaims
                     if (c.get("status") or {}).get("providerID")}
    pods_by_node: dict[str, list[dict[str, Any]]] = {}
    for p in snapshot.pods:
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            pods_by_node.setdefault(node, []).append(p)
    pdbs = [(pdb, pdb_status(pdb, snapshot.pods, now)) for pdb in snapshot.pdbs]

    def keep(node: str, kind: DecisionKind, reason: str, details: DecisionDetails | None = None) -> None:
        if log is not None:
            log.append(NodeDecision(node, DecisionStage.CANDIDATE, Verdict.KEEP, kind, reason, details or DecisionDetails()))

    out: list[Candidate] = []
    for n in snapshot.nodes:
        meta = n["metadata"]
        name = meta["name"]
        labels = meta.get("labels") or {}
        pool_name = labels.get(LABEL_NODEPOOL)
        if not pool_name:
            continue  # not managed: not ours to disrupt, not worth a log line
        if pool_name not in pools:
            keep(name, DecisionKind.NODEPOOL_NOT_FOUND, f"NodePool {pool_name} not found")
            continue
        if meta.get("deletionTimestamp"):
            keep(name, DecisionKind.NODE_DELETING, "already deleting")
            continue
        if labels.get(LABEL_INITIALIZED) != "true":
            keep(name, DecisionKind.NOT_INITIALIZED, "not initialized")
            continue
        if _is_tainted_disrupted(n):
            keep(name, DecisionKind.ALREADY_DISRUPTING, "already being disrupted (tainted karpenter.sh/disrupted)")
            continue
        nc = claims_by_pid.get((n.get("spec") or {}).get("providerID"))
        if nc is None:
            keep(name, DecisionKind.NO_NODECLAIM, "no NodeClaim")
            continue
        if nc["metadata"].get("deletionTimestamp"):
            keep(name, DecisionKind.NODECLAIM_DELETING, "NodeClaim already deleting")
            continue
        until = max((nominated or {}).get(name, 0.0), (nominated or {}).get(nc["metadata"]["name"], 0.0))
        if until > now:
            keep(name, DecisionKind.NOMINATED, "nominated for a pending pod by a recent provisioning pass",
                 DecisionDetails(until=iso(until)))
            continue
        pool = pools[pool_name]
        on_node = pods_by_node.get(name, [])
        pods = [p for p in on_node if is_reschedulable(p)]
        blocked = ""
        blocked_kind: DecisionKind | None = None
        if do_not_disrupt_blocks(n, now):
            blocked, blocked_kind = "node has karpenter.sh/do-not-disrupt", DecisionKind.DO_NOT_DISRUPT
        else:
            for p in pods:
                if do_not_disrupt_blocks(p, now):
                    blocked = f"pod {p['metadata'].get('namespace', 'default')}/{p['metadata']['name']} has karpenter.sh/do-not-disrupt"
                    blocked_kind = DecisionKind.DO_NOT_DISRUPT
                    break
        if not blocked and pdbs:  # without PDBs the Eviction API refuses nothing
            hit = pdb_blocker(pods, pdbs)
            if hit is not None:
                blocked, blocked_kind = f"pod {hit[0]} cannot be evicted: {hit[2]}", DecisionKind.PDB_BLOCKS
        created = parse_ts(nc["metadata"].get("creationTimestamp")) or now
        expire = duration_seconds(((nc.get("spec") or {}).get("expireAfter")) or "720h")
        remaining = 1.0 if expire is None or expire <= 0 else max(0.0, min(1.0, (created + expire - now) / expire))
        cost = sum(_eviction_cost(p) for p in pods) * remaining
        out.append(
            Candidate(
                name=name,
                nodeclaim=nc,
                nodeclaim_name=nc["metadata"]["name"],
                nodepool=pool_name,
                pool=pool,
                instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
                zone=labels.get(LABEL_ZONE, ""),
                capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
                price=offering_price(instance_types.get(pool_name, []), labels),
                pods=pods,
                consolidatable_at=consolidatable_at(nc, pool),
                drifted=drift_reason(nc, n, pool, hashes[pool_name]),
                disruption_cost=cost,
                created=created,
                blocked=blocked,
                blocked_kind=blocked_kind,
            )
        )
    return out
