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
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    LABEL_CAPACITY_TYPE,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_ZONE,
)
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.decisions import DecisionDetails, DecisionKind, DecisionStage, NodeDecision, Verdict
from karpy_core.controllers.nodeclaim.drift import CONDITION_DRIFTED, static_drift
from karpy_core.errors import InternalServerError, KubeAPIError
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import NodeClaimView, NodePoolView, NodeView, PodView
from karpy_core.utils.clock import iso
from karpy_core.utils.pdb import (
    EvictionVerdict,
    effective_status,
    eviction_verdict,
    pdb_selects_for_eviction,
    status_is_current,
)
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = [
    "Candidate",
    "NodeDecision",
    "parse_ts",
    "is_reschedulable",
    "do_not_disrupt_blocks",
    "pdb_status",
    "pdb_blocker",
    "PDBIndex",
    "drift_reason",
    "consolidatable_at",
    "build_candidates",
    "disrupting_counts",
    "lifetime_remaining",
    "offering_price",
]


parse_ts = parse_rfc3339
"""RFC 3339 text (or a datetime) -> seconds since the epoch; None when absent (the shared parser)."""


@dataclass(eq=False)
class Candidate:
    """A node that passed the eligibility checks.

    Attributes:
        name: Node name; ``node``: its view.
        nodeclaim: the NodeClaim's view; ``nodeclaim_name`` its name.
        nodepool: NodePool name; ``pool``: the NodePool's view.
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
    nodeclaim: NodeClaimView
    nodeclaim_name: str
    nodepool: str
    pool: NodePoolView
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    pods: list[PodView]
    consolidatable_at: float | None
    drifted: str
    disruption_cost: float
    created: float
    blocked: str = ""
    """Set when do-not-disrupt or a PDB would block a voluntary disruption (kept for drift with a
    terminationGracePeriod, which Karpenter lets through)."""
    blocked_kind: DecisionKind | None = None
    """:attr:`DecisionKind.DO_NOT_DISRUPT` or :attr:`DecisionKind.PDB_BLOCKS` when ``blocked``."""
    node: NodeView | None = None
    drain_budgets: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Pod key -> (``namespace/name`` of the PodDisruptionBudget the Eviction API judges it by,
    the disruptions that PDB allows now) for the pods of :attr:`pods` one PDB selects: how many
    of them a drain evicts at a time (:func:`~karpy_core.controllers.disruption.simulation.drain_waves`)."""

    @property
    def empty(self) -> bool:
        """True when no reschedulable pod runs on the node."""
        return not self.pods

    def consolidatable(self, now: float) -> bool:
        """True when ``Consolidatable`` holds at ``now`` (epoch seconds)."""
        return self.consolidatable_at is not None and now >= self.consolidatable_at


def is_reschedulable(pod: PodView) -> bool:
    """A pod that must go somewhere else if its node goes: active, not a DaemonSet or mirror pod
    (Karpenter ``pod.IsReschedulable``; :attr:`PodView.reschedulable`)."""
    return pod.reschedulable


def do_not_disrupt_blocks(obj: PodView | NodeView, now: float) -> bool:
    """True when ``karpenter.sh/do-not-disrupt`` on ``obj`` (pod or node) protects it at ``now``:
    ``"true"``, or a duration counted from the object's creation (#2874)."""
    value = obj.annotations.get(ANNOTATION_DO_NOT_DISRUPT)
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
    created = parse_ts(obj.created or None) or now
    return now < created + seconds


def pdb_status(pdb: dict[str, Any], pods: Sequence[PodView], now: float) -> dict[str, Any]:
    """The PDB's status to judge evictions by: the ``status`` its disruption controller wrote
    (kube-controller-manager's, or the in-memory cluster's) when it is current, else the status
    :func:`karpy_core.utils.pdb.compute_status` derives from ``pods`` (no controllers known, so
    only an integer ``minAvailable`` allows anything then). ``now``: epoch seconds. PDBs have no
    view: :mod:`karpy_core.utils.pdb` is shared with the in-memory Eviction API, on API dicts."""
    return effective_status(pdb, (p.raw for p in pods), None, now)


def pdb_blocker(pods: Sequence[PodView], pdbs: list[tuple[dict[str, Any], dict[str, Any]]] | PDBIndex) -> tuple[str, str, str] | None:
    """``(pod key, pdb name, why)`` of the first pod the Eviction API would refuse now, or None:
    the same verdict as kube-apiserver's (:func:`karpy_core.utils.pdb.eviction_verdict`), so an
    unready pod the PDB's ``unhealthyPodEvictionPolicy`` lets go does not block, and a pod two
    PDBs select does. ``pdbs`` pairs each PDB with its :func:`pdb_status` status, or is a
    :class:`PDBIndex` of them (what :func:`build_candidates` builds once per pass)."""
    index = pdbs if isinstance(pdbs, PDBIndex) else PDBIndex.of(pdbs)
    for pod in pods:
        verdict = index.verdict(pod)
        if verdict.action != "deny":
            continue
        refusal = KubeAPIError.from_status(verdict.message, status=verdict.status, reason=verdict.reason)  # the Eviction API's answer
        if isinstance(refusal, InternalServerError):  # more than one PodDisruptionBudget selects the pod
            return pod.key, verdict.pdb, "more than one PodDisruptionBudget selects it"
        allowed = int(index.statuses[(pod.namespace, verdict.pdb)].get("disruptionsAllowed") or 0)
        return pod.key, verdict.pdb, f"PodDisruptionBudget {verdict.pdb} allows {max(0, allowed)} disruptions"
    return None


_EVICT_WITHOUT_PDB = frozenset(("Pending", "Succeeded", "Failed"))
"""Phases the Eviction API deletes without a PDB check (``eviction.go``)."""
_DELETE = EvictionVerdict("delete")
"""The verdict without a PDB check, or with no PDB selecting the pod."""


def _namespace(obj: Mapping[str, Any]) -> str:
    return obj["metadata"].get("namespace") or "default"


class PDBIndex:
    """A pass's PodDisruptionBudgets with the status each is judged by, by namespace, and which
    of them select a pod, cached per (namespace, labels): the Eviction API's lookup
    (:func:`~karpy_core.utils.pdb.pdb_selects_for_eviction`) reads only those two, so the pods of
    one Deployment share one lookup, which tries only the PDBs whose ``matchLabels`` the pod's
    labels could meet (indexed by one of their label pairs) and those without ``matchLabels``.
    Without it, judging every pod against every PDB of the cluster was O(pods x PDBs): 14 s of a
    15 s pass at 1,000 nodes and 440 PDBs (issue 36).

    Args:
        pairs: (PDB, status to judge it by) pairs (:func:`pdb_status`).
    """

    __slots__ = ("_by_label", "_order", "_scan", "_selecting", "_verdicts", "statuses")

    def __init__(self, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]):
        self._by_label: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        """(namespace, label key, value) -> the PDBs whose ``matchLabels`` ask for that label (a pod
        without it cannot be selected by them)."""
        self._scan: dict[str, list[dict[str, Any]]] = {}
        """namespace -> the PDBs with no ``matchLabels`` (expressions only, or no selector): checked for every pod."""
        self._order: dict[int, int] = {}
        self.statuses: dict[tuple[str, str], dict[str, Any]] = {}
        """(namespace, PDB name) -> the status the PDB is judged by."""
        for i, (pdb, status) in enumerate(pairs):
            ns = _namespace(pdb)
            self._order[id(pdb)] = i
            self.statuses[(ns, pdb["metadata"]["name"])] = status
            match = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            if match and isinstance(match, dict):
                key, value = min(match.items())
                self._by_label.setdefault((ns, str(key), str(value)), []).append(pdb)
            else:
                self._scan.setdefault(ns, []).append(pdb)
        self._selecting: dict[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]] = {}
        self._verdicts: dict[tuple[tuple[str, tuple[tuple[str, str], ...]], bool], EvictionVerdict] = {}
        """((namespace, labels), Ready) -> the Eviction API's verdict for a running pod with those."""

    @classmethod
    def of(cls, pairs: Sequence[tuple[dict[str, Any], dict[str, Any]]]) -> PDBIndex:
        """The index of ``pairs`` (see the class)."""
        return cls(pairs)

    @classmethod
    def build(cls, snapshot: ClusterSnapshot, now: float) -> PDBIndex:
        """The snapshot's PDBs, each judged by :func:`pdb_status` at ``now`` (epoch seconds) over
        the pods of its namespace (the only ones a PDB selects)."""
        if not snapshot.pdbs:
            return cls(())
        by_ns: dict[str, list[PodView]] | None = None

        def pods_of(pdb: dict[str, Any]) -> Sequence[PodView]:
            nonlocal by_ns
            if status_is_current(pdb):
                return ()  # pdb_status takes the status the disruption controller wrote: no pod is read
            if by_ns is None:  # grouped once, and only when a PDB's status has to be computed
                by_ns = {}
                for p in snapshot.pod_views:
                    by_ns.setdefault(_namespace(p.raw), []).append(p)
            return by_ns.get(_namespace(pdb), ())

        return cls([(pdb, pdb_status(pdb, pods_of(pdb), now)) for pdb in snapshot.pdbs])

    def __bool__(self) -> bool:
        return bool(self.statuses)

    def status_of(self, pdb: dict[str, Any]) -> dict[str, Any]:
        """The status ``pdb`` is judged by."""
        return self.statuses[(_namespace(pdb), pdb["metadata"]["name"])]

    def selecting(self, pod: PodView) -> list[dict[str, Any]]:
        """The PDBs of the pod's namespace whose selector picks it for the Eviction API."""
        return self._lookup(pod)[1]

    def _lookup(self, pod: PodView) -> tuple[tuple[str, tuple[tuple[str, str], ...]], list[dict[str, Any]]]:
        """(the pod's (namespace, sorted labels), :meth:`selecting`)."""
        key = pod.eviction_key[0]  # (namespace, sorted labels), kept on the view per version
        hit = self._selecting.get(key)
        if hit is None:
            raw = pod.raw
            ns = key[0]
            labels = raw["metadata"].get("labels") or {}
            maybe = list(self._scan.get(ns, ()))
            for k, v in labels.items():
                maybe += self._by_label.get((ns, k, v), ())
            maybe.sort(key=lambda b: self._order[id(b)])  # the PDBs' order, as a scan of all of them
            hit = self._selecting[key] = [b for b in maybe if pdb_selects_for_eviction(b, raw)]
        return key, hit

    def verdict(self, pod: PodView) -> EvictionVerdict:
        """:func:`~karpy_core.utils.pdb.eviction_verdict` for ``pod`` against this index's PDBs and
        statuses. Past the phase and deletion check, the verdict reads only the PDBs that select
        the pod (a function of its namespace and labels), their statuses and whether the pod is
        Ready (:attr:`~karpy_core.state.views.PodView.eviction_key`), so it is computed once per
        (namespace, labels, Ready): once per Deployment, not once per pod."""
        if pod.phase in _EVICT_WITHOUT_PDB or pod.deleting:
            return _DELETE
        vkey = pod.eviction_key
        hit = self._verdicts.get(vkey)
        if hit is None:
            pdbs = self._lookup(pod)[1]
            hit = self._verdicts[vkey] = eviction_verdict(pod.raw, pdbs, self.status_of) if pdbs else _DELETE
        return hit


def drift_reason(nodeclaim: NodeClaimView, node: NodeView | None, nodepool: NodePoolView) -> str:
    """Why the node is ``Drifted``, or "": the static checks of
    :func:`~karpy_core.controllers.nodeclaim.drift.static_drift` (NodePool hash, requirements),
    computed now from the snapshot, else the NodeClaim's ``Drifted`` condition, which the drift
    controller sets from those checks and the cloud provider's ``is_drifted``."""
    reason, message = static_drift(nodeclaim, node, nodepool)
    if reason:
        return message
    cond = nodeclaim.condition(CONDITION_DRIFTED)
    if cond is not None and cond.is_true:
        return cond.message or cond.reason or "Drifted"
    return ""


def consolidatable_at(nodeclaim: NodeClaimView, nodepool: NodePoolView) -> float | None:
    """Epoch seconds from which the NodeClaim is ``Consolidatable``: (``status.lastPodEventTime``
    or the ``Initialized`` transition) + ``consolidateAfter``; None for ``Never`` or when the
    claim is not initialized."""
    seconds = duration_seconds(nodepool.consolidate_after)
    if seconds is None:
        return None
    base = parse_ts(nodeclaim.last_pod_event_time or None)
    if base is None:
        init = nodeclaim.condition("Initialized")
        base = parse_ts(init.last_transition_time or None) if init is not None else None
    if base is None:
        return None
    return base + seconds


def offering_price(types: list[InstanceType], labels: Mapping[str, str]) -> float | None:
    """USD/hour of the offering matching the node's type, zone and capacity type."""
    for it in types:
        if it.name != labels.get(LABEL_INSTANCE_TYPE):
            continue
        for o in it.offerings:
            if o.zone == labels.get(LABEL_ZONE) and o.capacity_type == labels.get(LABEL_CAPACITY_TYPE):
                return o.price
    return None


def lifetime_remaining(nodeclaim: NodeClaimView, now: float) -> float:
    """Karpenter's ``LifetimeRemaining``: the fraction (0..1) of ``expireAfter`` (default 720h)
    left at ``now``; 1 for ``Never``."""
    created = parse_ts(nodeclaim.created or None) or now
    expire = duration_seconds(nodeclaim.expire_after or "720h")
    return 1.0 if expire is None or expire <= 0 else max(0.0, min(1.0, (created + expire - now) / expire))


def disrupting_counts(snapshot: ClusterSnapshot) -> tuple[dict[str, int], dict[str, int]]:
    """Per NodePool: ``(total, disrupting)`` node counts for budgets. ``total`` counts managed,
    initialized nodes not being deleted; ``disrupting`` the pool's nodes deleting, tainted
    ``karpenter.sh/disrupted`` or NotReady."""
    total: dict[str, int] = {}
    disrupting: dict[str, int] = {}
    for n in snapshot.node_views:
        pool = n.nodepool
        if not pool:
            continue
        if n.labels.get(LABEL_INITIALIZED) == "true" and not n.deleting:
            total[pool] = total.get(pool, 0) + 1
        if n.deleting or n.disrupted or not n.ready:
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
    its types (for prices). A NodePool that does not validate is not in the snapshot: its nodes
    are kept as ``NodePool not found``.
    """
    pdbs = PDBIndex.build(snapshot, now)

    def keep(node: str, kind: DecisionKind, reason: str, details: DecisionDetails | None = None) -> None:
        if log is not None:
            log.append(NodeDecision(node, DecisionStage.CANDIDATE, Verdict.KEEP, kind, reason, details or DecisionDetails()))

    nominated = nominated or {}
    out: list[Candidate] = []
    for n in snapshot.node_views:
        name = n.name
        pool_name = n.nodepool
        if not pool_name:
            continue  # not managed: not ours to disrupt, not worth a log line
        pool = snapshot.nodepool(pool_name)
        if pool is None or pool.deleting:
            keep(name, DecisionKind.NODEPOOL_NOT_FOUND, f"NodePool {pool_name} not found")
            continue
        if n.deleting:
            keep(name, DecisionKind.NODE_DELETING, "already deleting")
            continue
        if n.labels.get(LABEL_INITIALIZED) != "true":
            keep(name, DecisionKind.NOT_INITIALIZED, "not initialized")
            continue
        if n.disrupted:
            keep(name, DecisionKind.ALREADY_DISRUPTING, "already being disrupted (tainted karpenter.sh/disrupted)")
            continue
        nc = snapshot.nodeclaim_by_provider_id(n.provider_id)
        if nc is None:
            keep(name, DecisionKind.NO_NODECLAIM, "no NodeClaim")
            continue
        if nc.deleting:
            keep(name, DecisionKind.NODECLAIM_DELETING, "NodeClaim already deleting")
            continue
        until = max(nominated.get(name, 0.0), nominated.get(nc.name, 0.0))
        if until > now:
            keep(name, DecisionKind.NOMINATED, "nominated for a pending pod by a recent provisioning pass",
                 DecisionDetails(until=iso(until)))
            continue
        pods = [p for p in snapshot.pods_on(name) if p.reschedulable]
        blocked = ""
        blocked_kind: DecisionKind | None = None
        if do_not_disrupt_blocks(n, now):
            blocked, blocked_kind = "node has karpenter.sh/do-not-disrupt", DecisionKind.DO_NOT_DISRUPT
        else:
            for p in pods:
                if p.annotations and do_not_disrupt_blocks(p, now):  # most pods have no annotation: skip the call
                    blocked = f"pod {p.key} has karpenter.sh/do-not-disrupt"
                    blocked_kind = DecisionKind.DO_NOT_DISRUPT
                    break
        if not blocked and pdbs:  # without PDBs the Eviction API refuses nothing
            hit = pdb_blocker(pods, pdbs)
            if hit is not None:
                blocked, blocked_kind = f"pod {hit[0]} cannot be evicted: {hit[2]}", DecisionKind.PDB_BLOCKS
        budgets: dict[str, tuple[str, int]] = {}
        if pdbs:
            for p in pods:
                selecting = pdbs.selecting(p)
                if len(selecting) == 1:
                    pdb = selecting[0]
                    allowed = int(pdbs.status_of(pdb).get("disruptionsAllowed") or 0)
                    budgets[p.key] = (f"{_namespace(pdb)}/{pdb['metadata']['name']}", allowed)
        created = parse_ts(nc.created or None) or now
        cost = sum(p.eviction_cost for p in pods) * lifetime_remaining(nc, now)
        labels = n.labels
        out.append(
            Candidate(
                name=name,
                nodeclaim=nc,
                nodeclaim_name=nc.name,
                nodepool=pool_name,
                pool=pool,
                instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
                zone=labels.get(LABEL_ZONE, ""),
                capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
                price=offering_price(instance_types.get(pool_name, []), labels),
                pods=pods,
                consolidatable_at=consolidatable_at(nc, pool),
                drifted=drift_reason(nc, n, pool),
                disruption_cost=cost,
                created=created,
                blocked=blocked,
                blocked_kind=blocked_kind,
                node=n,
                drain_budgets=budgets,
            )
        )
    return out
