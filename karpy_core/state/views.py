"""Views: Kubernetes objects parsed once per version into frozen, slotted values.

A view is built from one version of an object (its ``metadata.uid`` and ``resourceVersion``) and
never changes; the deciding code reads its attributes instead of walking ``(x.get("spec") or
{})`` chains. Views are built once per watch event by the informer cache
(:meth:`karpy_core.kube.cache.CachedKubeClient.views`) and once per object version by the
in-memory cluster (:meth:`karpy_core.kube.memory.InMemoryCluster.views`); :class:`ViewCache`
gives any other source the same reuse, keyed by ``(uid, resourceVersion)``.

Cheap fields (names, labels, taints, conditions, readiness) are parsed when the view is built.
Parses that can fail on a malformed object (resource quantities, a pod's scheduling constraints,
the pydantic models handed to the cloud provider) run on first use and are then kept on the view,
so an error surfaces where the value is needed, as before, and is parsed once per version.

Each view keeps ``raw``, the API dict it was built from, for the code that writes objects back
(patches, NodeClaims made from a NodePool). ``raw`` is shared by every snapshot holding the view:
read it, never mutate it.
"""

from __future__ import annotations

import copy
import enum
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from karpy_core.apis.labels import ANNOTATION_DO_NOT_DISRUPT, LABEL_NODEPOOL, TAINT_DISRUPTED
from karpy_core.apis.nodepool import Budget, NodePool
from karpy_core.logs import fields
from karpy_core.scheduling.resources import Resources, parse_resource_list
from karpy_core.scheduling.taints import Taint, parse_taints, parse_tolerations, untolerated
from karpy_core.utils.pdb import pod_ready
from karpy_core.utils.timestamps import parse_rfc3339

NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
"""The taint key on a Node whose ``Ready`` condition is ``False`` (kube ``TaintNodeNotReady``)."""
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
"""The taint key on a Node whose ``Ready`` condition is ``Unknown`` or absent (kube ``TaintNodeUnreachable``)."""

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.scheduling.pod import PodInfo
    from karpy_core.scheduling.requirements import Requirements

__all__ = [
    "VIEW_KINDS",
    "Budget",
    "CapacityBufferView",
    "PodTemplateOwnerView",
    "Condition",
    "DEFAULT_BUDGET",
    "NodeClaimView",
    "NodePoolReadiness",
    "NodePoolView",
    "NodeView",
    "ObjectView",
    "OwnerRef",
    "PodView",
    "ViewCache",
    "CRITICAL_PRIORITY_CLASSES",
    "DEFAULT_POD_GRACE_SECONDS",
    "STUCK_TERMINATING_SECONDS",
    "build_view",
    "condition_of",
    "is_provisionable",
    "pod_limits",
]

log = logging.getLogger(__name__)

Raw = dict[str, Any]
_EMPTY: Mapping[str, str] = MappingProxyType({})
_UNSET: Any = object()
"""Marker of a lazily parsed slot not computed yet."""
_INFO_METADATA = ("name", "namespace", "uid", "labels", "annotations", "ownerReferences", "creationTimestamp")
"""The metadata fields :func:`~karpy_core.scheduling.pod.pod_info` reads."""

_T = TypeVar("_T")


# ---- building blocks -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Condition:
    """One ``status.conditions`` entry (``last_transition_time`` is the RFC 3339 text, "" if unset)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""

    @property
    def is_true(self) -> bool:
        """``status == "True"``."""
        return self.status == "True"


def _conditions(obj: Mapping[str, Any]) -> tuple[Condition, ...]:
    out = []
    for c in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type"):
            out.append(
                Condition(
                    type=str(c["type"]),
                    status=str(c.get("status") or ""),
                    reason=str(c.get("reason") or ""),
                    message=str(c.get("message") or ""),
                    last_transition_time=str(c.get("lastTransitionTime") or ""),
                )
            )
    return tuple(out)


def condition_of(conditions: Iterable[Condition], type_: str) -> Condition | None:
    """The condition of ``type_`` in ``conditions``, or None."""
    for c in conditions:
        if c.type == type_:
            return c
    return None


def _labels(meta: Mapping[str, Any], key: str) -> Mapping[str, str]:
    """A read-only view of the string map ``meta[key]`` (labels, annotations): the API's JSON
    map itself, not a copy (a view never mutates ``raw``, and nobody else may)."""
    raw = meta.get(key)
    if not raw:
        return _EMPTY
    return MappingProxyType(raw if isinstance(raw, dict) else dict(raw))


def _memo(view: Any, slot: str, build: Callable[[], _T]) -> _T:
    """The value in ``view``'s lazy ``slot``, built by ``build()`` on first use (a frozen view
    may still fill its own caches). Exceptions propagate and nothing is stored."""
    value = getattr(view, slot)
    if value is _UNSET:
        value = build()
        object.__setattr__(view, slot, value)
    return value  # type: ignore[no-any-return]


# ---- pods ------------------------------------------------------------------------------------
def _same_entries(old: Mapping[str, Any], new: Mapping[str, Any], skip: str) -> bool:
    """True when every key but ``skip`` maps to the same object (``is``) in ``old`` and ``new``
    (a key absent from one counts as None there)."""
    for k, v in old.items():
        if k != skip and new.get(k) is not v:
            return False
    return all(k == skip or k in old or v is None for k, v in new.items())


def is_provisionable(pod: Mapping[str, Any]) -> bool:
    """Karpenter's rule for a pod karpy must find room for: ``PodScheduled=False`` with reason
    ``Unschedulable``, no ``nodeName``, not terminating or finished, not owned by a DaemonSet or
    a Node (Karpenter ``pkg/utils/pod``). ``pod`` is the Pod dict."""
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") in ("DaemonSet", "Node"):
            return False
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled":
            return bool(c.get("status") == "False" and c.get("reason") == "Unschedulable")
    return False


ANNOTATION_MIRROR = "kubernetes.io/config.mirror"
"""The annotation the kubelet puts on a static (mirror) pod."""
ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
"""Priority classes whose pods drain last (Karpenter ``terminator.go``)."""
DEFAULT_POD_GRACE_SECONDS = 30
"""``terminationGracePeriodSeconds`` of a pod that sets none (Kubernetes default)."""
STUCK_TERMINATING_SECONDS = 60.0
"""A pod whose ``deletionTimestamp`` (deletion time + its grace period, as the API server sets it)
is more than this many seconds past is stuck terminating (its kubelet is gone) and no longer holds
the drain: Karpenter ``pkg/utils/pod/scheduling.go`` ``IsStuckTerminating`` (one minute)."""
_TERMINAL_PHASES = frozenset(("Succeeded", "Failed"))
"""Phases of a finished pod."""
_DAEMON_OR_NODE = frozenset(("DaemonSet", "Node"))
"""Owner kinds whose pods are not rescheduled when their node goes."""
_DISRUPTED_NO_SCHEDULE = (Taint(TAINT_DISRUPTED, "", "NoSchedule"),)


class OwnerRef(NamedTuple):
    """One ``metadata.ownerReferences`` entry: ``api_version``, ``kind``, ``name`` (a named tuple:
    built for every pod version read, it must be cheap)."""

    api_version: str
    kind: str
    name: str


def _owners(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
    refs = meta.get("ownerReferences")
    if not refs:
        return ()
    return tuple(OwnerRef(str(o.get("apiVersion") or ""), str(o.get("kind") or ""), str(o.get("name") or ""))
                 for o in refs if isinstance(o, dict))


def pod_limits(spec: Mapping[str, Any]) -> Resources:
    """Sum of a pod spec's container limits (max with any init container's), each pod-level limit
    (``spec.resources.limits`` of ``cpu``, ``memory``, ``hugepages-*``) in place of the containers'
    for its resource, plus pod overhead and one ``pods`` slot, as Karpenter's ``resources.Ceiling``
    does for limits (``k8s.io/component-helpers/resource`` ``PodLimits``; internal units).

    Raises:
        karpy_core.utils.quantity.QuantityError: a quantity is malformed.
    """
    total: Resources = {}
    for c in spec.get("containers") or ():
        for name, amount in parse_resource_list((c.get("resources") or {}).get("limits")).items():
            total[name] = total.get(name, 0) + amount
    for c in spec.get("initContainers") or ():
        for name, amount in parse_resource_list((c.get("resources") or {}).get("limits")).items():
            total[name] = max(total.get(name, 0), amount)
    if spec.get("resources"):
        from karpy_core.scheduling.pod import is_pod_level_resource

        for name, amount in parse_resource_list((spec.get("resources") or {}).get("limits")).items():
            if is_pod_level_resource(name):
                total[name] = amount
    for name, amount in parse_resource_list(spec.get("overhead")).items():
        total[name] = total.get(name, 0) + amount
    total["pods"] = total.get("pods", 0) + 1
    return total


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True, slots=True, eq=False)
class PodView:
    """A Pod.

    Attributes:
        name, namespace, uid, resource_version: identity (``namespace`` defaults to ``default``).
        created: ``metadata.creationTimestamp`` (RFC 3339 text, "" when unset).
        node_name: ``spec.nodeName`` ("" when not bound).
        priority: ``spec.priority`` (0 when unset or not an integer).
        phase: ``status.phase``.
        deleting: ``metadata.deletionTimestamp`` is set.
        provisionable: :func:`is_provisionable`.
        raw: the Pod dict (read-only).

    :attr:`labels`, :attr:`annotations`, :attr:`owners` and :attr:`conditions` are parsed on
    first use and kept (a cluster has many pods; most versions are never read for them).
    """

    raw: Raw = field(repr=False, compare=False)
    name: str = ""
    namespace: str = "default"
    uid: str = ""
    resource_version: str = ""
    created: str = ""
    node_name: str = ""
    priority: int = 0
    phase: str = ""
    deleting: bool = False
    provisionable: bool = False
    _info: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _totals: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _labels: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _annotations: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _owners: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _conditions: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _resched: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _cost: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _tolerates_disrupted: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _evict_key: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, pod: Raw) -> PodView:
        """The view of a Pod dict."""
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        return cls(
            raw=pod,
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or "default"),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            created=str(meta.get("creationTimestamp") or ""),
            node_name=str(spec.get("nodeName") or ""),
            priority=_int(spec.get("priority")),
            phase=str((pod.get("status") or {}).get("phase") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            provisionable=is_provisionable(pod),
        )

    def _meta(self) -> Mapping[str, Any]:
        return self.raw.get("metadata") or {}

    @property
    def labels(self) -> Mapping[str, str]:
        """``metadata.labels`` (read-only; parsed on first use)."""
        got = self._labels
        if got is _UNSET:
            got = _labels(self._meta(), "labels")
            object.__setattr__(self, "_labels", got)
        return got  # type: ignore[no-any-return]

    @property
    def annotations(self) -> Mapping[str, str]:
        """``metadata.annotations`` (read-only; parsed on first use)."""
        got = self._annotations
        if got is _UNSET:
            got = _labels(self._meta(), "annotations")
            object.__setattr__(self, "_annotations", got)
        return got  # type: ignore[no-any-return]

    @property
    def owners(self) -> tuple[OwnerRef, ...]:
        """``metadata.ownerReferences`` (parsed on first use)."""
        got = self._owners
        if got is _UNSET:
            got = _owners(self._meta())
            object.__setattr__(self, "_owners", got)
        return got  # type: ignore[no-any-return]

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """``status.conditions`` (parsed on first use)."""
        got = self._conditions
        if got is _UNSET:
            got = _conditions(self.raw)
            object.__setattr__(self, "_conditions", got)
        return got  # type: ignore[no-any-return]

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """Finished: phase ``Succeeded`` or ``Failed``."""
        return self.phase in _TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        """Bound to a node and not finished (it uses the node's resources)."""
        return bool(self.node_name) and self.phase not in _TERMINAL_PHASES

    @property
    def owner_kinds(self) -> tuple[str, ...]:
        """The ``kind`` of each owner."""
        return tuple(o.kind for o in self.owners)

    @property
    def daemon(self) -> bool:
        """Owned by a DaemonSet."""
        return any(o.kind == "DaemonSet" for o in self.owners)

    @property
    def requests_and_limits(self) -> tuple[Resources, Resources]:
        """``(effective requests, limits)`` of the pod spec (:func:`~karpy_core.scheduling.pod.effective_requests`,
        :func:`pod_limits`), internal units, parsed once per version (shared: do not modify).

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed (raised again on each use).
        """
        got = self._totals
        if got is _UNSET:
            from karpy_core.scheduling.pod import effective_requests
            from karpy_core.utils.quantity import QuantityError

            spec = self.raw.get("spec") or {}
            try:
                got = (effective_requests(spec), pod_limits(spec))
            except QuantityError as exc:
                got = exc
            object.__setattr__(self, "_totals", got)
        if isinstance(got, Exception):
            raise got
        return got  # type: ignore[no-any-return]

    @property
    def reschedulable(self) -> bool:
        """Must go somewhere else if its node goes: active, not a DaemonSet, node-owned or mirror
        pod (Karpenter ``pod.IsReschedulable``). Computed once per version."""
        got = self._resched
        if got is _UNSET:
            got = not (self.deleting or self.phase in _TERMINAL_PHASES or self._owned_by_daemon_or_node()) \
                and not self._has_annotation(ANNOTATION_MIRROR)
            object.__setattr__(self, "_resched", got)
        return got  # type: ignore[no-any-return]

    def _has_annotation(self, key: str) -> bool:
        """``key in self.annotations``, read from the version's dict when :attr:`annotations` is
        not parsed yet (a first pass asks this of every pod on a candidate node)."""
        got = self._annotations
        if got is not _UNSET:
            return key in got
        ann: Any = (self.raw.get("metadata") or {}).get("annotations")
        return bool(ann) and key in (ann if isinstance(ann, dict) else dict(ann))

    def _owned_by_daemon_or_node(self) -> bool:
        got = self._owners
        if got is not _UNSET:
            return any(o.kind in _DAEMON_OR_NODE for o in got)
        # the owners' kinds straight from the version's dict: cheaper than building them all
        for o in (self.raw.get("metadata") or {}).get("ownerReferences") or ():
            if isinstance(o, dict) and o.get("kind") in _DAEMON_OR_NODE:
                return True
        return False

    @property
    def eviction_cost(self) -> float:
        """Karpenter's ``EvictionCost``: 1 + pod-deletion-cost / 2^27 + priority / 2^25, clamped to
        [-10, 10] (a deletion cost that is not a number counts 0). Computed once per version."""
        got = self._cost
        if got is _UNSET:
            got = self._eviction_cost()
            object.__setattr__(self, "_cost", got)
        return got  # type: ignore[no-any-return]

    def _eviction_cost(self) -> float:
        text = self.annotations.get(ANNOTATION_DELETION_COST) if self._has_annotation(ANNOTATION_DELETION_COST) else None
        if text is None and not self.priority:
            return 1.0
        cost = 1.0
        if text is not None:
            try:
                cost += float(text) / 2**27
            except ValueError:
                pass
        cost += self.priority / 2**25
        return max(-10.0, min(10.0, cost))

    @property
    def eviction_key(self) -> tuple[tuple[str, tuple[tuple[str, str], ...]], bool]:
        """``((namespace, sorted label items), Ready)``: all the Eviction API's PDB verdict reads
        of a running pod that is not deleting (which PDBs select it, and
        ``unhealthyPodEvictionPolicy``'s readiness test: :func:`~karpy_core.utils.pdb.pod_ready`),
        so :class:`~karpy_core.controllers.disruption.candidates.PDBIndex` caches verdicts by it.
        Computed once per version."""
        got = self._evict_key
        if got is _UNSET:
            labels = self.raw["metadata"].get("labels") or {}
            items = tuple(labels.items()) if len(labels) < 2 else tuple(sorted(labels.items()))  # one label: sorted already
            got = ((self.namespace, items), pod_ready(self.raw))
            object.__setattr__(self, "_evict_key", got)
        return got  # type: ignore[no-any-return]

    def condition(self, type_: str) -> Condition | None:
        """The condition ``type_``, or None."""
        return condition_of(self.conditions, type_)

    # ---- what the node drain asks of a pod (Karpenter pkg/utils/pod/scheduling.go, terminator.go)
    @property
    def mirror(self) -> bool:
        """A static pod's mirror (annotated ``kubernetes.io/config.mirror``): never drained."""
        return ANNOTATION_MIRROR in self.annotations

    @property
    def do_not_disrupt(self) -> bool:
        """Annotated ``karpenter.sh/do-not-disrupt: "true"``: the drain waits for it instead of
        evicting it (until the terminationGracePeriod deadline)."""
        return self.annotations.get(ANNOTATION_DO_NOT_DISRUPT) == "true"

    @property
    def tolerates_disrupted_taint(self) -> bool:
        """Tolerates ``karpenter.sh/disrupted:NoSchedule`` (a keyed toleration, or an ``operator:
        Exists`` one without key): not drained, it would reschedule onto the node (Karpenter
        ``ToleratesDisruptedNoScheduleTaint``). Computed once per version."""
        got = self._tolerates_disrupted
        if got is _UNSET:
            tolerations = parse_tolerations((self.raw.get("spec") or {}).get("tolerations"))
            got = untolerated(_DISRUPTED_NO_SCHEDULE, tolerations) is None
            object.__setattr__(self, "_tolerates_disrupted", got)
        return got  # type: ignore[no-any-return]

    def stuck_terminating(self, now: float) -> bool:
        """Being deleted with a ``deletionTimestamp`` more than :data:`STUCK_TERMINATING_SECONDS`
        before ``now`` (epoch seconds): its kubelet is gone and it no longer holds the drain
        (Karpenter ``IsStuckTerminating``)."""
        deleted = parse_rfc3339(self._meta().get("deletionTimestamp"))
        return deleted is not None and now - deleted > STUCK_TERMINATING_SECONDS

    @property
    def drain_tier(self) -> int:
        """Drain order: 0 non-critical non-DaemonSet, 1 non-critical DaemonSet, 2 critical
        (``priorityClassName`` in :data:`CRITICAL_PRIORITY_CLASSES`) non-DaemonSet, 3 critical
        DaemonSet; each tier is gone before the next is evicted (Karpenter ``terminator.go``)."""
        critical = (self.raw.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES
        return 2 * int(critical) + int(self.daemon)

    @property
    def grace_period_seconds(self) -> int:
        """``spec.terminationGracePeriodSeconds``, :data:`DEFAULT_POD_GRACE_SECONDS` when unset.

        Raises:
            ValueError: the value is not an integer.
        """
        grace = (self.raw.get("spec") or {}).get("terminationGracePeriodSeconds")
        return DEFAULT_POD_GRACE_SECONDS if grace is None else int(grace)

    @property
    def claim_names(self) -> tuple[str, ...]:
        """The ``persistentVolumeClaim.claimName`` of each of its volumes that names one."""
        return tuple(str(v["persistentVolumeClaim"]["claimName"]) for v in (self.raw.get("spec") or {}).get("volumes") or ()
                     if (v.get("persistentVolumeClaim") or {}).get("claimName"))

    @property
    def info(self) -> PodInfo:
        """The scheduler's :class:`~karpy_core.scheduling.pod.PodInfo`, parsed once per version.
        Shared: copy it (``copy.copy``) before changing it.

        Raises:
            ValueError: the pod cannot be parsed (a malformed quantity or selector; a
                :class:`~karpy_core.utils.quantity.QuantityError` is a ``ValueError``).
        """
        got = self._parse_info()[0]
        if isinstance(got, ValueError):
            raise got
        return got

    def try_info(self) -> PodInfo | None:
        """:attr:`info`, or None when the pod cannot be parsed (logged once per version)."""
        got, first = self._parse_info()
        if isinstance(got, ValueError):
            if first:
                log.warning("pod cannot be parsed, left out", extra=fields(pod=self.key, error=got))
            return None
        return got

    def adopt_info(self, older: PodView) -> None:
        """Take the :attr:`info` parsed for ``older`` (an earlier version of this pod) when this
        version differs from it only where :func:`~karpy_core.scheduling.pod.pod_info` does not
        look, or in ``spec.nodeName`` (a bind, a status or resourceVersion change): its metadata
        fields and spec entries are the same objects (the in-memory cluster shares what a patch
        leaves unchanged). The info is then that one with this version's ``node_name`` and
        ``raw``; otherwise nothing changes and :attr:`info` is parsed on first use."""
        got = older._info
        if got is _UNSET or isinstance(got, ValueError) or self._info is not _UNSET:
            return
        old, new = older.raw, self.raw
        om, nm = old.get("metadata") or {}, new.get("metadata") or {}
        if any(om.get(k) is not nm.get(k) for k in _INFO_METADATA):
            return
        ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
        if ospec is not nspec and not _same_entries(ospec, nspec, "nodeName"):
            return
        info = copy.copy(got)  # PodInfo.__copy__: field by field
        info.node_name = self.node_name
        info.raw = new
        object.__setattr__(self, "_info", info)

    def _parse_info(self) -> tuple[PodInfo | ValueError, bool]:
        got = self._info
        if got is not _UNSET:
            return got, False
        try:
            got = _pod_info()(self.raw)
        except ValueError as exc:
            got = exc
        object.__setattr__(self, "_info", got)
        return got, True


_POD_INFO: list[Callable[[Raw], PodInfo]] = []
""":func:`~karpy_core.scheduling.pod.pod_info`, once imported (an import statement in
:meth:`PodView._parse_info` cost a tenth of a first parse)."""


def _pod_info() -> Callable[[Raw], PodInfo]:
    if not _POD_INFO:
        from karpy_core.scheduling.pod import pod_info

        _POD_INFO.append(pod_info)
    return _POD_INFO[0]


# ---- nodes -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class NodeView:
    """A Node.

    Attributes:
        name, uid, resource_version: identity.
        labels, annotations: read-only metadata maps.
        created: ``metadata.creationTimestamp`` (RFC 3339 text, "" when unset).
        provider_id: ``spec.providerID`` ("" when unset).
        nodepool: the ``karpenter.sh/nodepool`` label, None for a node karpy does not manage.
        deleting: ``metadata.deletionTimestamp`` is set.
        unschedulable: ``spec.unschedulable``.
        taints: ``spec.taints``.
        phase: ``status.phase`` ("" when unset).
        conditions: ``status.conditions``.
        initialized: labelled ``karpenter.sh/initialized=true`` (or not managed by a NodePool).
        raw: the Node dict (read-only).
    """

    raw: Raw = field(repr=False, compare=False)
    name: str = ""
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    created: str = ""
    provider_id: str = ""
    nodepool: str | None = None
    deleting: bool = False
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    phase: str = ""
    conditions: tuple[Condition, ...] = ()
    _allocatable: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _capacity: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, node: Raw) -> NodeView:
        """The view of a Node dict."""
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        labels = _labels(meta, "labels")
        return cls(
            raw=node,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            labels=labels,
            annotations=_labels(meta, "annotations"),
            created=str(meta.get("creationTimestamp") or ""),
            provider_id=str(spec.get("providerID") or ""),
            nodepool=labels.get(LABEL_NODEPOOL),
            deleting=bool(meta.get("deletionTimestamp")),
            unschedulable=bool(spec.get("unschedulable")),
            taints=parse_taints(spec.get("taints")),
            phase=str((node.get("status") or {}).get("phase") or ""),
            conditions=_conditions(node),
        )

    @property
    def finalizers(self) -> tuple[str, ...]:
        """``metadata.finalizers`` (read from ``raw`` on each use)."""
        return tuple((self.raw.get("metadata") or {}).get("finalizers") or ())

    @property
    def deletion_timestamp(self) -> str:
        """``metadata.deletionTimestamp`` (RFC 3339 text, "" when not deleting)."""
        return str((self.raw.get("metadata") or {}).get("deletionTimestamp") or "")

    @property
    def initialized(self) -> bool:
        """Labelled ``karpenter.sh/initialized=true``, or not managed by a NodePool."""
        return self.labels.get("karpenter.sh/initialized") == "true" or self.nodepool is None

    @property
    def ready(self) -> bool:
        """The ``Ready`` condition is ``True``."""
        c = condition_of(self.conditions, "Ready")
        return c is not None and c.is_true

    @property
    def scheduling_taints(self) -> tuple[Taint, ...]:
        """``spec.taints`` plus the ``NoSchedule`` taint kube-controller-manager's node lifecycle
        controller keeps on a Node whose ``Ready`` condition is not ``True`` (its
        taint-nodes-by-condition pass, ``pkg/controller/nodelifecycle``
        ``nodeConditionToTaintKeyStatusMap``): ``node.kubernetes.io/not-ready`` for ``False``,
        ``node.kubernetes.io/unreachable`` for ``Unknown`` or no ``Ready`` condition at all (a Node
        that never posted status is marked ``Unknown``, ``NodeStatusNeverUpdated``; karpy does not
        wait out the grace period). What kube-scheduler and Karpenter's provisioner both see
        (neither filters on conditions; Karpenter's ``StateNode.Taints`` drops these ephemeral
        taints only on a managed node not initialized yet), so the two agree on such a node."""
        ready = condition_of(self.conditions, "Ready")
        if ready is not None and ready.is_true:
            return self.taints
        key = NOT_READY_TAINT_KEY if ready is not None and ready.status == "False" else UNREACHABLE_TAINT_KEY
        if any(t.key == key and t.effect == "NoSchedule" for t in self.taints):
            return self.taints
        return (*self.taints, Taint(key, "", "NoSchedule"))

    @property
    def disrupted(self) -> bool:
        """Tainted ``karpenter.sh/disrupted`` (a disruption command holds it)."""
        return any(t.key == TAINT_DISRUPTED for t in self.taints)

    @property
    def allocatable(self) -> Resources:
        """``status.allocatable`` in internal units (millicores, bytes, counts); parsed once.
        Shared: do not modify.

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed.
        """
        return _memo(self, "_allocatable", lambda: parse_resource_list((self.raw.get("status") or {}).get("allocatable")))

    @property
    def capacity(self) -> Resources:
        """``status.capacity`` in internal units; parsed once. Shared: do not modify.

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed.
        """
        return _memo(self, "_capacity", lambda: parse_resource_list((self.raw.get("status") or {}).get("capacity")))


# ---- NodeClaims ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True, eq=False)
class NodeClaimView:
    """A ``karpenter.sh/v1`` NodeClaim.

    Attributes:
        name, uid, resource_version: identity.
        labels, annotations: read-only metadata maps.
        created: ``metadata.creationTimestamp`` (RFC 3339 text, "" when unset).
        nodepool: the ``karpenter.sh/nodepool`` label (None when absent).
        provider_id: ``status.providerID`` ("" before launch).
        node_name: ``status.nodeName`` ("" before registration).
        deleting: ``metadata.deletionTimestamp`` is set.
        requirements: ``spec.requirements`` as the API dicts (read-only).
        taints, startup_taints: ``spec.taints``, ``spec.startupTaints``.
        expire_after: ``spec.expireAfter`` ("" when unset).
        termination_grace_period: ``spec.terminationGracePeriod`` ("" when unset).
        last_pod_event_time: ``status.lastPodEventTime`` (RFC 3339 text, "" when unset).
        conditions: ``status.conditions``.
        raw: the NodeClaim dict (read-only).
    """

    raw: Raw = field(repr=False, compare=False)
    name: str = ""
    uid: str = ""
    resource_version: str = ""
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    created: str = ""
    nodepool: str | None = None
    provider_id: str = ""
    node_name: str = ""
    deleting: bool = False
    requirements: tuple[Mapping[str, Any], ...] = ()
    taints: tuple[Taint, ...] = ()
    startup_taints: tuple[Taint, ...] = ()
    expire_after: str = ""
    termination_grace_period: str = ""
    last_pod_event_time: str = ""
    conditions: tuple[Condition, ...] = ()
    _capacity: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _allocatable: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _model: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, claim: Raw) -> NodeClaimView:
        """The view of a NodeClaim dict."""
        meta = claim.get("metadata") or {}
        spec = claim.get("spec") or {}
        status = claim.get("status") or {}
        labels = _labels(meta, "labels")
        return cls(
            raw=claim,
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            labels=labels,
            annotations=_labels(meta, "annotations"),
            created=str(meta.get("creationTimestamp") or ""),
            nodepool=labels.get(LABEL_NODEPOOL),
            provider_id=str(status.get("providerID") or ""),
            node_name=str(status.get("nodeName") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            requirements=tuple(r for r in spec.get("requirements") or () if isinstance(r, dict)),
            taints=parse_taints(spec.get("taints")),
            startup_taints=parse_taints(spec.get("startupTaints")),
            expire_after=str(spec.get("expireAfter") or ""),
            termination_grace_period=str(spec.get("terminationGracePeriod") or ""),
            last_pod_event_time=str(status.get("lastPodEventTime") or ""),
            conditions=_conditions(claim),
        )

    @property
    def node_class_ref(self) -> Mapping[str, Any]:
        """``spec.nodeClassRef`` as read (``group``, ``kind``, ``name``; empty when unset; read-only)."""
        ref = (self.raw.get("spec") or {}).get("nodeClassRef")
        return MappingProxyType(ref) if isinstance(ref, dict) else _EMPTY

    @property
    def deletion_timestamp(self) -> str:
        """``metadata.deletionTimestamp`` (RFC 3339 text, "" when not deleting)."""
        return str((self.raw.get("metadata") or {}).get("deletionTimestamp") or "")

    def _requests(self) -> Mapping[str, Any]:
        return ((self.raw.get("spec") or {}).get("resources") or {}).get("requests") or {}

    @property
    def requests(self) -> Resources:
        """``spec.resources.requests`` in internal units (parsed on each use: read once per pass).

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed.
        """
        return parse_resource_list(self._requests())

    @property
    def capacity(self) -> Resources:
        """``status.capacity``, or ``spec.resources.requests`` before launch (internal units;
        shared, do not modify).

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed.
        """
        return _memo(self, "_capacity",
                     lambda: parse_resource_list((self.raw.get("status") or {}).get("capacity") or self._requests()))

    @property
    def allocatable(self) -> Resources:
        """``status.allocatable``, or ``spec.resources.requests`` before launch (internal units;
        shared, do not modify).

        Raises:
            karpy_core.utils.quantity.QuantityError: a quantity is malformed.
        """
        return _memo(self, "_allocatable",
                     lambda: parse_resource_list((self.raw.get("status") or {}).get("allocatable") or self._requests()))

    def condition(self, type_: str) -> Condition | None:
        """The condition ``type_``, or None."""
        return condition_of(self.conditions, type_)

    def is_true(self, type_: str) -> bool:
        """The condition ``type_`` is ``True``."""
        c = condition_of(self.conditions, type_)
        return c is not None and c.is_true

    @property
    def model(self) -> NodeClaim:
        """The pydantic :class:`~karpy_core.apis.nodeclaim.NodeClaim` handed to the cloud
        provider, validated once per version (shared: do not modify).

        Raises:
            pydantic.ValidationError: the object does not validate (a ``ValueError``).
        """
        from karpy_core.apis.nodeclaim import NodeClaim

        return _memo(self, "_model", lambda: NodeClaim.model_validate(self.raw))


# ---- NodePools -------------------------------------------------------------------------------
class NodePoolReadiness(enum.Enum):
    """Whether a NodePool may launch nodes (see :attr:`NodePoolView.readiness`)."""

    READY = "Ready"
    """``Ready=True``, or no conditions at all (the simulator, a freshly applied pool)."""
    NOT_READY = "NotReady"
    """It has conditions and ``Ready`` is not ``True`` (its NodeClass is not ready, ...)."""
    DELETING = "Deleting"
    """``metadata.deletionTimestamp`` is set."""
    INVALID = "Invalid"
    """The NodePool does not validate against the API model (:attr:`NodePoolView.error`)."""


DEFAULT_BUDGET = Budget(nodes="10%")
"""The budget of a NodePool without ``disruption.budgets`` (Karpenter's CRD default, 10%);
shared, do not modify."""

_DEFAULT_BUDGETS: tuple[Budget, ...] = (DEFAULT_BUDGET,)


def _without_status(nodepool: Raw) -> dict[str, Any]:
    """The NodePool without ``status`` for the model: the status is what controllers wrote (karpy's
    or a newer Karpenter's, whose CRD may carry fields this model does not know); the view reads
    what it needs of it (conditions, ``resources``) from the dict itself."""
    return {k: v for k, v in nodepool.items() if k != "status"}


@dataclass(frozen=True, slots=True, eq=False)
class NodePoolView:
    """A ``karpenter.sh/v1`` NodePool, built from its validated API model
    (:class:`karpy_core.apis.nodepool.NodePool`: one parser, the model's rules and defaults).

    A NodePool the model rejects (one the CRD's validation would have refused, e.g. ``weight:
    0`` or a malformed budget) gets a view with :attr:`error` set, readiness ``INVALID`` and the
    defaults in every other spec field (``node_class_ref`` is read as given, for
    :func:`~karpy_core.state.cluster.is_managed`); :class:`~karpy_core.state.cluster.ClusterSnapshot` leaves such
    pools out with a logged error, so nothing decides on half-parsed values.

    Attributes:
        name, uid, resource_version, generation: identity (``generation`` 0 when unset).
        readiness: whether it may launch nodes (:class:`NodePoolReadiness`).
        unready_reason: why not, for explanations: the ``Ready`` condition's message or reason
            ("" when ready).
        weight: ``spec.weight`` (0 when unset).
        startup_taints: ``spec.template.spec.startupTaints``.
        budgets: ``spec.disruption.budgets`` (the model's :class:`~karpy_core.apis.nodepool.Budget`;
            the default 10% budget when unset).
        consolidation_policy: ``spec.disruption.consolidationPolicy`` (defaulted).
        consolidate_after: ``spec.disruption.consolidateAfter`` (defaulted, ``Never`` included).
        limits: ``spec.limits`` as quantity text (read-only).
        usage: ``status.resources`` as quantity text (read-only; what the status controller wrote).
        node_class_ref: ``(group, kind)`` of ``spec.template.spec.nodeClassRef``.
        annotations: read-only ``metadata.annotations``.
        replicas: ``spec.replicas`` of a static pool, None for a dynamic one (:attr:`static`).
        conditions: ``status.conditions``.
        error: why the NodePool does not validate ("" when it does).
        raw: the NodePool dict (read-only).
    """

    raw: Raw = field(repr=False, compare=False)
    name: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    readiness: NodePoolReadiness = NodePoolReadiness.READY
    unready_reason: str = ""
    weight: int = 0
    startup_taints: tuple[Taint, ...] = ()
    budgets: tuple[Budget, ...] = _DEFAULT_BUDGETS
    consolidation_policy: str = "WhenEmptyOrUnderutilized"
    consolidate_after: str = "0s"
    limits: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    usage: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    node_class_ref: tuple[str, str] = ("", "")
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    conditions: tuple[Condition, ...] = ()
    replicas: int | None = None
    error: str = ""
    _model: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _hash: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _requirements: Any = field(default=_UNSET, init=False, repr=False, compare=False)
    _logged: Any = field(default=_UNSET, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, nodepool: Raw) -> NodePoolView:
        """The view of a NodePool dict, validated by the API model once (never raises: an invalid
        NodePool gets :attr:`error`)."""
        meta = nodepool.get("metadata") or {}
        conds = _conditions(nodepool)
        identity: dict[str, Any] = dict(raw=nodepool, name=str(meta.get("name") or ""), uid=str(meta.get("uid") or ""),
                                        resource_version=str(meta.get("resourceVersion") or ""),
                                        generation=_int(meta.get("generation")), conditions=conds,
                                        annotations=_labels(meta, "annotations"))
        try:
            model = NodePool.model_validate(_without_status(nodepool))
        except ValueError as exc:  # pydantic.ValidationError
            ref = ((((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef")) or {}
            ref_kind = (str(ref.get("group") or ""), str(ref.get("kind") or "")) if isinstance(ref, Mapping) else ("", "")
            return cls(**identity, readiness=NodePoolReadiness.INVALID, unready_reason="invalid NodePool",
                       node_class_ref=ref_kind, error=str(exc))
        readiness, why = NodePoolReadiness.READY, ""
        status = nodepool.get("status")
        resources = status.get("resources") if isinstance(status, Mapping) else None
        if not isinstance(resources, Mapping):
            resources = None
        if meta.get("deletionTimestamp"):
            readiness, why = NodePoolReadiness.DELETING, "being deleted"
        elif conds:
            ready = condition_of(conds, "Ready")
            if ready is None or not ready.is_true:
                readiness = NodePoolReadiness.NOT_READY
                why = (ready.message or ready.reason if ready is not None else "") or "Ready is not True"
        spec = model.spec
        tspec = spec.template.spec
        ref = tspec.node_class_ref
        view = cls(
            **identity,
            readiness=readiness,
            unready_reason=why,
            weight=spec.weight or 0,
            startup_taints=parse_taints((((nodepool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("startupTaints")),
            budgets=tuple(spec.disruption.budgets) or _DEFAULT_BUDGETS,
            consolidation_policy=spec.disruption.consolidation_policy,
            consolidate_after=spec.disruption.consolidate_after,
            limits=MappingProxyType({str(k): str(v) for k, v in spec.limits.items()}) if spec.limits else _EMPTY,
            node_class_ref=(ref.group, ref.kind),
            replicas=spec.replicas,
            usage=MappingProxyType({str(k): str(v) for k, v in resources.items()}) if resources else _EMPTY,
        )
        object.__setattr__(view, "_model", model)
        return view

    @property
    def valid(self) -> bool:
        """The NodePool validates (:attr:`error` is empty)."""
        return not self.error

    def log_invalid(self) -> None:
        """Log :attr:`error` once per version (the first call on this view)."""
        if self.error and self._logged is _UNSET:
            object.__setattr__(self, "_logged", True)
            log.error("NodePool does not validate, ignored", extra=fields(nodepool=self.name, error=self.error))

    @property
    def static(self) -> bool:
        """A static pool (``spec.replicas`` set, Karpenter ``nodepoolutils.IsStatic``): it keeps
        ``replicas`` nodes, launches nothing for pending pods and is never consolidated."""
        return self.replicas is not None

    @property
    def ready(self) -> bool:
        """May launch nodes: :attr:`readiness` is ``READY``."""
        return self.readiness is NodePoolReadiness.READY

    @property
    def deleting(self) -> bool:
        """``metadata.deletionTimestamp`` is set."""
        return self.readiness is NodePoolReadiness.DELETING

    @property
    def model(self) -> NodePool:
        """The pydantic :class:`~karpy_core.apis.nodepool.NodePool` the view was built from, handed
        to the cloud provider (shared: do not modify).

        Raises:
            pydantic.ValidationError: the object does not validate (a ``ValueError``).
        """
        return _memo(self, "_model", lambda: NodePool.model_validate(_without_status(self.raw)))

    @property
    def hash(self) -> str:
        """The drift hash of the NodePool's template (:func:`karpy_core.apis.hashing.nodepool_hash`),
        computed once per version."""
        from karpy_core.apis.hashing import nodepool_hash

        return _memo(self, "_hash", lambda: nodepool_hash(self.raw))

    @property
    def requirements(self) -> Requirements | None:
        """``spec.template.spec.requirements`` as the scheduler's
        :class:`~karpy_core.scheduling.requirements.Requirements`, parsed once per version; None
        when they cannot be parsed."""
        return _memo(self, "_requirements", self._parse_requirements)

    def _parse_requirements(self) -> Requirements | None:
        from karpy_core.scheduling.requirements import Requirements

        tspec = ((self.raw.get("spec") or {}).get("template") or {}).get("spec") or {}
        try:
            return Requirements.from_selector_terms(tspec.get("requirements") or ())
        except ValueError:
            return None


# ---- building and caching ------------------------------------------------------------------
ObjectView = NodeView | PodView | NodeClaimView | NodePoolView
"""Any view."""

_BUILDERS: dict[str, Callable[[Raw], ObjectView]] = {
    "Node": NodeView.of,
    "Pod": PodView.of,
    "NodeClaim": NodeClaimView.of,
    "NodePool": NodePoolView.of,
}

VIEW_KINDS: frozenset[str] = frozenset(_BUILDERS)
"""The kinds that have views."""


def build_view(kind: str, obj: Raw) -> ObjectView:
    """The view of ``obj``, a ``kind`` dict (one of :data:`VIEW_KINDS`).

    Raises:
        KeyError: ``kind`` has no view.
    """
    return _BUILDERS[kind](obj)


def _version(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    meta = obj.get("metadata") or {}
    uid, rv = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not rv:
        return None
    return (str(uid), str(rv))


class ViewCache:
    """Views by ``(kind, uid, resourceVersion)``: an object version is parsed once however many
    snapshots read it. Objects without a uid or resourceVersion (hand-built test objects) get a
    fresh view each time.

    Each :meth:`sweep` keeps only the versions used since the previous sweep, so deleted objects
    and superseded versions do not accumulate.
    """

    def __init__(self) -> None:
        self._views: dict[tuple[str, str, str], ObjectView] = {}
        self._used: set[tuple[str, str, str]] = set()

    def view(self, kind: str, obj: Raw) -> ObjectView:
        """The view of ``obj`` (a ``kind`` dict), reused when this version was seen before."""
        version = _version(obj)
        if version is None:
            return build_view(kind, obj)
        key = (kind, *version)
        self._used.add(key)
        found = self._views.get(key)
        if found is None:
            found = self._views[key] = build_view(kind, obj)
        return found

    def nodeclaim(self, obj: Raw) -> NodeClaimView:
        """:meth:`view` of a NodeClaim dict."""
        view = self.view("NodeClaim", obj)
        assert isinstance(view, NodeClaimView)
        return view

    def node(self, obj: Raw) -> NodeView:
        """:meth:`view` of a Node dict."""
        view = self.view("Node", obj)
        assert isinstance(view, NodeView)
        return view

    def pod(self, obj: Raw) -> PodView:
        """:meth:`view` of a Pod dict."""
        view = self.view("Pod", obj)
        assert isinstance(view, PodView)
        return view

    def nodepool(self, obj: Raw) -> NodePoolView:
        """:meth:`view` of a NodePool dict."""
        view = self.view("NodePool", obj)
        assert isinstance(view, NodePoolView)
        return view

    def sweep(self) -> None:
        """Forget the views not asked for since the last sweep."""
        self._views = {k: v for k, v in self._views.items() if k in self._used}
        self._used = set()

    def __len__(self) -> int:
        return len(self._views)


# ---- CapacityBuffers and the objects they name -----------------------------------------------
def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True, eq=False)
class CapacityBufferView:
    """An ``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer (:mod:`karpy_core.state.buffers`).

    Attributes:
        name, namespace, uid, generation: identity (``generation`` None when unset).
        pod_template_ref: ``spec.podTemplateRef.name`` ("" when unset).
        scalable_ref: ``(kind, name)`` of ``spec.scalableRef``, None when unset.
        replicas, percentage: ``spec.replicas`` and ``spec.percentage`` (None when unset or not
            integers).
        limits: ``spec.limits`` (quantity text by resource; read-only).
        provisioning_strategy: ``spec.provisioningStrategy`` ("" when unset).
        status_replicas: ``status.replicas`` (0 when unset).
        conditions: ``status.conditions``.
        raw: the CapacityBuffer dict (read-only).
    """

    raw: Raw = field(repr=False, compare=False)
    name: str = ""
    namespace: str = "default"
    uid: str = ""
    generation: int | None = None
    pod_template_ref: str = ""
    scalable_ref: tuple[str, str] | None = None
    replicas: int | None = None
    percentage: int | None = None
    limits: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    provisioning_strategy: str = ""
    status_replicas: int = 0
    conditions: tuple[Condition, ...] = ()

    @classmethod
    def of(cls, buffer: Raw) -> CapacityBufferView:
        """The view of a CapacityBuffer dict."""
        meta = buffer.get("metadata") or {}
        spec = buffer.get("spec") or {}
        ref = spec.get("podTemplateRef") or {}
        scalable = spec.get("scalableRef")
        limits = spec.get("limits")
        return cls(
            raw=buffer,
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or "default"),
            uid=str(meta.get("uid") or ""),
            generation=_opt_int(meta.get("generation")),
            pod_template_ref=str(ref.get("name") or "") if isinstance(ref, Mapping) else "",
            scalable_ref=(str(scalable.get("kind") or ""), str(scalable.get("name") or ""))
            if isinstance(scalable, Mapping) and scalable else None,
            replicas=_opt_int(spec.get("replicas")),
            percentage=_opt_int(spec.get("percentage")),
            limits=MappingProxyType(dict(limits)) if isinstance(limits, Mapping) and limits else _EMPTY,
            provisioning_strategy=str(spec.get("provisioningStrategy") or ""),
            status_replicas=_int((buffer.get("status") or {}).get("replicas")),
            conditions=_conditions(buffer),
        )

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    def condition(self, type_: str) -> Condition | None:
        """The condition ``type_``, or None."""
        return condition_of(self.conditions, type_)


@dataclass(frozen=True, slots=True, eq=False)
class PodTemplateOwnerView:
    """An object a CapacityBuffer takes its pod shape from: a PodTemplate (``template``), or a
    Deployment, ReplicaSet or StatefulSet (``spec.template``, ``spec.replicas``).

    Attributes:
        kind, name, namespace: identity (``kind`` as listed).
        generation: ``metadata.generation`` (None when unset).
        template: the pod template (``{metadata, spec}``, read-only; empty when unset).
        replicas: the workload's ``spec.replicas`` (Kubernetes' default 1 when unset; 1 for a PodTemplate).
        raw: the object's dict (read-only).
    """

    raw: Raw = field(repr=False, compare=False)
    kind: str = ""
    name: str = ""
    namespace: str = "default"
    generation: int | None = None
    template: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    replicas: int = 1

    @classmethod
    def of(cls, obj: Raw, kind: str) -> PodTemplateOwnerView:
        """The view of ``obj``, a ``kind`` dict (``PodTemplate`` or a workload kind); its own
        ``kind`` field, when set, wins."""
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind") or kind)
        if kind == "PodTemplate":
            template, replicas = obj.get("template"), 1
        else:
            spec = obj.get("spec") or {}
            template = spec.get("template")
            replicas = _int(spec["replicas"]) if spec.get("replicas") is not None else 1
        return cls(
            raw=obj,
            kind=kind,
            name=str(meta.get("name") or ""),
            namespace=str(meta.get("namespace") or "default"),
            generation=_opt_int(meta.get("generation")),
            template=template if isinstance(template, Mapping) else _EMPTY,
            replicas=replicas,
        )
