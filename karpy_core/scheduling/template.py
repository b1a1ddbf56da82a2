"""NodePool templates and the per-template instance-type table the scheduler works on.

A :class:`NodePoolTemplate` is what a NodePool contributes to a scheduling run: its requirements
(``spec.template.spec.requirements`` + template labels + ``karpenter.sh/nodepool``), taints,
startup taints, weight, limits and the instance types its NodeClass can launch.

:class:`TypeTable` lays those instance types out as numpy arrays (one row per type, one column per
resource, integer internal units) so that "which types can still hold these pods" is one
vectorised comparison instead of a Python loop per type. Caches are keyed by requirement sets, so
the same question for the thousand copies of one Deployment is answered once.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from karpy_core.apis.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INITIALIZED,
    LABEL_NODEPOOL,
    LABEL_REGISTERED,
    LABEL_ZONE,
)
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.scheduling.pod import PodInfo, requirement_key
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, parse_resource_list
from karpy_core.scheduling.taints import Taint, parse_taints, untolerated

__all__ = ["NodePoolTemplate", "TypeTable", "VECTOR_CAP", "request_vector", "template_from_nodepool", "daemonset_fits_template",
           "type_tables"]

BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


@dataclass(eq=False)
class NodePoolTemplate:
    """What one NodePool offers to a scheduling run.

    Attributes:
        name: the NodePool name.
        weight: ``spec.weight`` (higher is tried first; 0 when unset).
        requirements: template requirements, template labels (as ``In``) and
            ``karpenter.sh/nodepool In [name]``.
        labels: labels every node of this pool gets (template labels + nodepool label).
        taints: ``spec.template.spec.taints`` (pods must tolerate them).
        startup_taints: ``startupTaints`` (pods need not tolerate them).
        node_class_ref: ``{"group","kind","name"}``.
        instance_types: every type the provider lists for this pool (available or not).
        limits: ``spec.limits`` in internal units (``nodes`` is a count), or None for no limits.
        raw: the NodePool dict.
    """

    name: str
    weight: int
    requirements: Requirements
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    startup_taints: tuple[Taint, ...]
    node_class_ref: dict[str, str]
    instance_types: list[InstanceType]
    limits: Resources | None = None
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


def template_from_nodepool(nodepool: Mapping[str, Any], instance_types: list[InstanceType]) -> NodePoolTemplate:
    """Build a template from a ``karpenter.sh/v1`` NodePool dict (camelCase, defaults applied or not).

    Raises:
        ValueError: a requirement has an invalid operator/value combination.
        karpy_core.utils.quantity.QuantityError: a limit is not a quantity.
    """
    meta = nodepool.get("metadata") or {}
    spec = nodepool.get("spec") or {}
    tmpl = spec.get("template") or {}
    tmeta = tmpl.get("metadata") or {}
    tspec = tmpl.get("spec") or {}
    name = str(meta.get("name"))
    labels = {str(k): str(v) for k, v in (tmeta.get("labels") or {}).items()}
    labels[LABEL_NODEPOOL] = name
    reqs = Requirements.from_selector_terms(tspec.get("requirements") or ())
    for k, v in labels.items():
        reqs.add(Requirement(k, False, frozenset((v,))))
    limits_raw = spec.get("limits")
    return NodePoolTemplate(
        name=name,
        weight=int(spec.get("weight") or 0),
        requirements=reqs,
        labels=labels,
        taints=parse_taints(tspec.get("taints")),
        startup_taints=parse_taints(tspec.get("startupTaints")),
        node_class_ref=dict(tspec.get("nodeClassRef") or {}),
        instance_types=instance_types,
        limits=parse_resource_list(limits_raw) if limits_raw else None,
        raw=dict(nodepool),
    )


def _daemon_requirements(template: NodePoolTemplate) -> Requirements:
    """``template.requirements`` plus the labels Karpenter assumes on its running nodes."""
    reqs = template.requirements.copy()
    for key in (LABEL_REGISTERED, LABEL_INITIALIZED):
        reqs.add(Requirement(key, False, frozenset(("true",))))
    return reqs


def daemonset_fits_template(ds: PodInfo, template: NodePoolTemplate, it: InstanceType | None = None) -> bool:
    """True when a DaemonSet's pod would run on nodes of ``template`` (and of type ``it``): it
    tolerates the template's taints and one of its node-affinity terms is compatible with the
    template's (and the type's) requirements. Startup taints are ignored: DaemonSets usually
    tolerate them and they disappear once the node initialises.

    The template's requirements are taken with ``karpenter.sh/registered`` and
    ``karpenter.sh/initialized`` ``In ["true"]`` added, because every node karpy launches carries
    both labels once it is up: a DaemonSet selecting them lands on the node and is part of its
    overhead, one selecting ``"false"`` (or ``DoesNotExist``) never does. The labels are added
    here only, never to the NodeClaim's requirements or labels (Karpenter
    ``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``, ``NewNodeClaimTemplate``
    and ``schedulingSimulationKeys``)."""
    if untolerated(template.taints, ds.tolerations) is not None:
        return False
    reqs = _daemon_requirements(template)
    for term in ds.requirement_terms:
        if reqs.conflict(term) is not None:
            continue
        if it is not None and not it.requirements.intersects(term):
            continue
        return True
    return False


VECTOR_CAP = 2**62
"""Largest amount a request vector holds (internal units): half of int64, far above any instance's
allocatable (2**62 millicores is 4.6e15 cores; 2**62 bytes is 4 EiB)."""


def _offer_key(req: Requirement | None) -> tuple[object, ...] | None:
    """A cache key for the values a zone or capacity-type requirement allows (what offerings
    depend on; ``minValues`` does not matter here)."""
    return None if req is None else (req.complement, req.values, req.gte, req.lte)


VECTOR_CACHE = 50_000
"""Request rows a :class:`TypeTable` keeps (:meth:`TypeTable.vector`): ten of Karpenter's largest
benchmark batches; the cache starts over when full."""


def request_vector(requests: Mapping[str, int], index: Mapping[str, int]) -> np.ndarray | None:
    """``requests`` as an int64 row with a column per resource of ``index`` (name -> column,
    columns 0..n-1), amounts capped at :data:`VECTOR_CAP`; None when a positive request names a
    resource ``index`` lacks."""
    vec = np.zeros(len(index), dtype=np.int64)
    for r, v in requests.items():
        i = index.get(r)
        if i is None:
            if v > 0:
                return None
            continue
        vec[i] = min(v, VECTOR_CAP)
    return vec


class TypeTable:
    """Instance types of one template as arrays, with cached compatibility masks.

    Attributes:
        types: the types compatible with the template's requirements, in catalog order.
        resources: column names; ``cpu`` millicores, ``memory`` bytes, ``pods`` count, ...
        free: ``allocatable - DaemonSet overhead`` per type, shape ``(len(types), len(resources))``.
        daemon: DaemonSet overhead per type, same shape.
        capacity: capacity per type, same shape (for limits).
        excluded: types dropped up front, with the reason (for explanations).
    """

    def __init__(self, template: NodePoolTemplate, daemonsets: Sequence[PodInfo]):
        self.template = template
        self.excluded: dict[str, str] = {}
        types: list[InstanceType] = []
        for it in template.instance_types:
            if not it.requirements.intersects(template.requirements):
                self.excluded[it.name] = "requirements"
                continue
            types.append(it)
        self.types = types
        names: set[str] = set(BASE_RESOURCES)
        for it in types:
            names.update(it.allocatable)
        self.resources: list[str] = sorted(names)
        self.index = {r: i for i, r in enumerate(self.resources)}
        n, m = len(types), len(self.resources)
        alloc = np.zeros((n, m), dtype=np.int64)
        cap = np.zeros((n, m), dtype=np.int64)
        daemon = np.zeros((n, m), dtype=np.int64)
        ds_for_template = [ds for ds in daemonsets if daemonset_fits_template(ds, template)]
        self.daemon_host_ports: frozenset[tuple[str, int, str]] = frozenset(
            port for ds in ds_for_template for port in ds.host_ports
        )
        """Host ports the pool's DaemonSets hold on every node (pods cannot use them)."""
        for i, it in enumerate(types):
            for r, v in it.allocatable.items():
                alloc[i, self.index[r]] = v
            for r, v in it.capacity.items():
                cap[i, self.index[r]] = v
            for ds in ds_for_template:
                if any(it.requirements.intersects(t) for t in ds.requirement_terms):
                    for r, v in ds.requests.items():
                        if r in self.index:
                            daemon[i, self.index[r]] += v
        self.capacity = cap
        self.daemon = daemon
        self.free = alloc - daemon
        self.allocatable = alloc
        cols = sorted({(o.zone, o.capacity_type) for it in types for o in it.offerings})
        self.offering_columns: list[tuple[str, str]] = cols
        """(zone, capacity type) of each column of :attr:`prices`."""
        col_index = {c: j for j, c in enumerate(cols)}
        prices = np.full((n, len(cols)), np.inf)
        for i, it in enumerate(types):
            for o in it.offerings:
                if o.available:
                    j = col_index[(o.zone, o.capacity_type)]
                    prices[i, j] = min(prices[i, j], o.price)
        self.prices = prices
        """USD/hour per type and (zone, capacity type); ``inf`` where unavailable."""
        self._cheapest: dict[tuple[Any, ...], np.ndarray] = {}
        ranks = {name: r for r, name in enumerate(sorted(it.name for it in types))}
        self.name_rank = np.fromiter((ranks[it.name] for it in types), dtype=np.int64, count=n)
        """Each type's position in name order (price ties are broken by name)."""
        self._compat: dict[tuple[Any, ...], np.ndarray] = {}
        self._compat_by_id: dict[int, tuple[Requirements, np.ndarray]] = {}
        self._offer: dict[tuple[Any, ...], np.ndarray] = {}
        self._minvalue_keys = [mv for mv in template.requirements if mv.min_values]
        self._label_values: dict[str, np.ndarray] = {}
        self._label_names: dict[str, list[str]] = {}
        self._allowed: dict[Requirement, np.ndarray] = {}
        """Per minValues key: a (types x distinct values) matrix, True where the type's requirement
        on the key has the value (several for zone and capacity type: a type's offerings)."""
        self._vectors: dict[int, tuple[Mapping[str, int], np.ndarray | None]] = {}
        for mv in self._minvalue_keys:
            per_type: list[frozenset[str]] = []
            for it in types:
                req = it.requirements.get(mv.key)
                per_type.append(req.values if req is not None and not req.complement else frozenset())
            seen: list[str] = sorted(frozenset().union(*per_type)) if per_type else []
            column = {value: j for j, value in enumerate(seen)}
            matrix = np.zeros((n, len(seen)), dtype=bool)
            for row, values in enumerate(per_type):
                for value in values:
                    matrix[row, column[value]] = True
            self._label_values[mv.key] = matrix
            self._label_names[mv.key] = seen

    def vector(self, requests: Mapping[str, int]) -> np.ndarray | None:
        """``requests`` as a row over :attr:`resources`; None when a requested resource is one no
        type in this table offers (nothing can fit). Amounts above :data:`VECTOR_CAP` (a pod
        summing several huge containers can exceed int64) are stored as the cap: larger than any
        allocatable, so the pod still fits nowhere, and small enough that adding a claim's
        requests cannot overflow int64. Cached per requests mapping (a pod's, which never changes;
        the entry keeps it alive, so its id stays its own; at most :data:`VECTOR_CACHE` entries);
        the row is read-only."""
        hit = self._vectors.get(id(requests))
        if hit is not None and hit[0] is requests:
            return hit[1]
        vec = request_vector(requests, self.index)
        if vec is not None:
            vec.flags.writeable = False
        if len(self._vectors) >= VECTOR_CACHE:  # tables outlive batches: keep the cache bounded
            self._vectors.clear()
        self._vectors[id(requests)] = (requests, vec)
        return vec

    def compat_mask(self, term: Requirements) -> np.ndarray:
        """Types whose own requirements overlap ``term`` (cached per requirement set)."""
        by_id = self._compat_by_id.get(id(term))
        if by_id is not None and by_id[0] is term:
            return by_id[1]
        key = requirement_key(term)
        mask = self._compat.get(key)
        if mask is None:
            mask = np.fromiter((it.requirements.intersects(term) for it in self.types), dtype=bool, count=len(self.types))
            self._compat[key] = mask
        self._compat_by_id[id(term)] = (term, mask)  # the term is kept alive, so its id stays unique
        return mask

    @functools.cached_property
    def any_available_offering(self) -> bool:
        """Whether any instance type of the template (its requirements' or not) has an available
        offering: False when its NodeClass's zones match none of the plugin's, say."""
        return any(o.available for it in self.template.instance_types for o in it.offerings)

    def offering_mask(self, reqs: Requirements) -> np.ndarray:
        """Types with at least one available offering in the zones and capacity types ``reqs``
        allows (cached per zone/capacity-type requirement pair)."""
        zone, ct = reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)
        key = (_offer_key(zone), _offer_key(ct))
        mask = self._offer.get(key)
        if mask is None:
            sub = Requirements.of(*(r for r in (zone, ct) if r is not None))
            mask = np.fromiter(
                (any(o.available and o.compatible(sub) for o in it.offerings) for it in self.types),
                dtype=bool,
                count=len(self.types),
            )
            self._offer[key] = mask
        return mask

    def column_mask(self, reqs: Requirements) -> np.ndarray:
        """Offering columns whose zone and capacity type ``reqs`` allows."""
        zone, ct = reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)
        return np.fromiter(
            ((zone is None or zone.has(z)) and (ct is None or ct.has(c)) for z, c in self.offering_columns),
            dtype=bool,
            count=len(self.offering_columns),
        )

    def cheapest_prices(self, reqs: Requirements) -> np.ndarray:
        """Per type, the cheapest available offering price (USD/hour) allowed by ``reqs``; ``inf``
        where none (cached per zone/capacity-type requirement pair)."""
        zone, ct = reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)
        key = (_offer_key(zone), _offer_key(ct))
        out = self._cheapest.get(key)
        if out is None:
            cols = self.column_mask(reqs)
            out = self.prices[:, cols].min(axis=1) if cols.any() else np.full(len(self.types), np.inf)
            self._cheapest[key] = out
        return out

    def min_values_problem(self, mask: np.ndarray, requirements: Requirements | None = None) -> str | None:
        """Which ``minValues`` requirement the types in ``mask`` fail, or None (Strict policy).
        The distinct values of a key are those of the types' requirements on it, all of them for
        a key a type has several values of (zones and capacity types, from its offerings), as
        Karpenter's ``InstanceTypes.SatisfiesMinValues`` collects them, that the claim's
        ``requirements`` (narrowed by its pods) still allow: a NodeClaim's ``In`` may not list
        fewer values than its ``minValues`` (the CRD refuses it)."""
        for r in self._minvalue_keys:
            matrix = self._label_values[r.key]
            if matrix.shape[1] and requirements is not None and (narrowed := requirements.get(r.key)) is not None:
                allowed = self._allowed.get(narrowed)
                if allowed is None:  # per narrowed requirement: check_claim asks for every pod
                    allowed = self._allowed[narrowed] = np.fromiter(
                        (narrowed.has(v) for v in self._label_names[r.key]), dtype=bool, count=matrix.shape[1])
                matrix = matrix[:, allowed]
            distinct = int(matrix[mask].any(axis=0).sum()) if matrix.shape[1] else 0
            if distinct < (r.min_values or 0):
                return f"minValues {r.min_values} on {r.key} (only {distinct} distinct value{'' if distinct == 1 else 's'} left)"
        return None


def type_tables(templates: Sequence[NodePoolTemplate], daemonsets: Sequence[PodInfo]) -> dict[str, TypeTable]:
    """A :class:`TypeTable` per template name. Tables are pure functions of (template, DaemonSets),
    so callers that schedule many times over the same NodePools build them once and pass them to
    every :class:`~karpy_core.scheduling.scheduler.Scheduler`."""
    return {t.name: TypeTable(t, daemonsets) for t in templates}
