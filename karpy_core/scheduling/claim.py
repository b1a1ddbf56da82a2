"""NodeClaims being planned: the mutable in-run state (:class:`ClaimState`) and the value the plan
hands out (:class:`PlannedNodeClaim`, built by :func:`finalize`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import (
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INSTANCE_TYPE,
    LABEL_RESERVATION_ID,
    LABEL_ZONE,
)
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.reservations import NOT_RESERVED, has_reserved_offerings
from karpy_core.scheduling.resources import Resources
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable
from karpy_core.utils.selectors import selector_matches

__all__ = ["MAX_INSTANCE_TYPES", "HostPort", "ClaimState", "PlannedNodeClaim", "finalize", "ports_conflict"]

MAX_INSTANCE_TYPES = 600
"""Instance types kept per NodeClaim, cheapest first (Karpenter ``MaxInstanceTypes``, #2430)."""

HostPort = tuple[str, int, str]
"""(host IP, port, protocol); host IP ``0.0.0.0`` means every address."""

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]


@lru_cache(maxsize=4096)
def _parsed_selector(selector: str) -> dict[str, Any] | None:
    """A canonical-JSON label selector, parsed (shared; never modified)."""
    parsed: dict[str, Any] | None = json.loads(selector)
    return parsed


def ports_conflict(a: set[HostPort] | frozenset[HostPort], b: frozenset[HostPort]) -> HostPort | None:
    """The first port of ``b`` that clashes with one of ``a`` (same port and protocol, same IP or
    either is the wildcard), or None."""
    for ip, port, proto in b:
        for ip2, port2, proto2 in a:
            if port == port2 and proto == proto2 and (ip == ip2 or "0.0.0.0" in (ip, ip2)):
                return (ip, port, proto)
    return None


class ClaimState:
    """A NodeClaim while a scheduling run plans it (mutable; never leaves the run).

    Attributes:
        table: the NodePool's type table.
        requirements: template ∩ the chosen terms of every pod, plus the placeholder hostname.
        pods: pods planned onto it.
        requests: sum of the pods' requests as a row over ``table.resources`` (internal units).
        mask: which rows of ``table`` can still hold every pod.
        reserved: capacity counted against the NodePool's limits (largest remaining option).
        hostname: placeholder hostname for hostname-keyed topology.
        index: position among the run's claims.
        host_ports: ports held by its pods and DaemonSets.
        relaxed: minValues was relaxed (BestEffort policy).
        reservations: capacity reservation IDs the claim holds a unit of
            (:class:`~karpy_core.scheduling.reservations.ReservationLedger`).
    """

    __slots__ = ("free_room", "host_ports", "hostname", "index", "mask", "matches", "pods", "price", "relaxed",
                 "requests", "requirements", "reservations", "reserved", "table")

    def __init__(self, table: TypeTable, requirements: Requirements, hostname: str, index: int):
        self.table = table
        self.requirements = requirements
        self.pods: list[PodInfo] = []
        self.requests: IntArray = np.zeros(len(table.resources), dtype=np.int64)
        self.mask: BoolArray = np.ones(len(table.types), dtype=bool)
        self.reserved: Resources = {}
        self.hostname = hostname
        self.index = index
        self.host_ports: set[HostPort] = set(table.daemon_host_ports)
        self.relaxed = False
        self.reservations: frozenset[str] = frozenset()
        self.price: tuple[int, float] | None = None
        """(pods on the claim, USD/hour of its cheapest offering) as last computed by
        :meth:`~karpy_core.scheduling.run.SchedulingRun.current_price`."""
        self.matches: dict[tuple[str, tuple[str, ...] | None], tuple[int, int]] = {}
        """Per (selector, namespaces): (pods looked at, how many of them it matches), kept by
        :meth:`matching`."""
        self.free_room: tuple[int, IntArray] | None = None
        """(pods on the claim, room left on each of its types at its current price) as last
        computed by :meth:`~karpy_core.scheduling.run.SchedulingRun.place_free`: a pod none of
        them holds would make the claim dearer."""

    def settled(self, key: str) -> bool:
        """Whether the claim's requirements hold ``key`` to exactly one value (a node label: its
        pods are counted in that domain)."""
        req = self.requirements.get(key)
        return req is not None and not req.complement and len(req.values) == 1

    def matching(self, selector: str, namespaces: tuple[str, ...] | None) -> int:
        """How many of the claim's pods ``selector`` (canonical JSON) matches in ``namespaces``
        (None: any); pods joined since the last call are the only ones matched anew."""
        seen, hits = self.matches.get((selector, namespaces), (0, 0))
        if seen > len(self.pods):  # pods were taken off since: count afresh
            seen, hits = 0, 0
        if seen < len(self.pods):
            sel = _parsed_selector(selector)
            hits += sum(1 for p in self.pods[seen:]
                        if (namespaces is None or p.namespace in namespaces) and selector_matches(sel, p.labels))
            self.matches[(selector, namespaces)] = (len(self.pods), hits)
        return hits

    @classmethod
    def fresh(cls, table: TypeTable, index: int, hostname: str | None = None) -> ClaimState:
        """An empty claim of ``table``'s NodePool: the template's requirements plus
        ``kubernetes.io/hostname In [placeholder]``."""
        name = hostname if hostname is not None else f"hostname-placeholder-{index:04d}"
        claim = cls(table, table.template.requirements.copy(), name, index)
        claim.requirements.add(Requirement(LABEL_HOSTNAME, False, frozenset((name,))))
        return claim


@dataclass(frozen=True, slots=True, eq=False)
class PlannedNodeClaim:
    """A NodeClaim the plan wants created.

    Attributes:
        nodepool: the NodePool name.
        template: its template.
        pods: pods planned onto it.
        requirements: template ∩ every pod's chosen node-affinity term, plus
            ``node.kubernetes.io/instance-type In [...]`` and ``karpenter.sh/capacity-type In [...]``.
        instance_types: remaining options, cheapest first, at most :data:`MAX_INSTANCE_TYPES`.
        requests: pods' requests plus the smallest DaemonSet overhead among the options.
        hostname: placeholder hostname used for hostname-keyed constraints during the run.
    """

    nodepool: str
    template: NodePoolTemplate
    pods: list[PodInfo]
    requirements: Requirements
    instance_types: list[InstanceType]
    requests: Resources
    hostname: str
    min_values_relaxed: bool = False
    """True when minValues could not be met and the BestEffort policy relaxed it."""

    def cheapest_offering_price(self) -> float:
        """USD/hour of the cheapest available offering among the options (the first type is the
        cheapest: options are ordered by price)."""
        if not self.instance_types:
            return 0.0
        o = self.instance_types[0].cheapest(self.requirements)
        return o.price if o is not None else 0.0

    def spec_requirements(self) -> list[dict[str, object]]:
        """``spec.requirements`` for the NodeClaim object (node-selector dicts). A ``minValues``
        above the values an ``In`` lists (a claim that relaxed it, BestEffort) is lowered to that
        count, as the CRD requires."""
        out = self.requirements.to_selectors()
        for sel in out:
            values = sel.get("values")
            mv = sel.get("minValues")
            if sel.get("operator") == "In" and isinstance(values, list) and isinstance(mv, int) and mv > len(values):
                sel["minValues"] = len(values)
        return out


def _pin_reservations(claim: ClaimState, reqs: Requirements) -> BoolArray:
    """Pin ``reqs`` (in place) to the claim's reservations and return the types it may keep.

    A claim holding reservations launches only into them: ``capacity-type In [reserved]``,
    ``capacity-reservation-id In [held]``, types with such an available offering (Karpenter
    ``NodeClaim.FinalizeScheduling``). A claim holding none, of a NodePool with reserved
    offerings, gets ``capacity-type NotIn [reserved]``: it never takes a unit no ledger counted.
    """
    table = claim.table
    ct = reqs.get(LABEL_CAPACITY_TYPE)
    if ct is not None and not ct.has(CAPACITY_TYPE_RESERVED):
        return claim.mask
    if claim.reservations:
        pinned = reqs.copy()
        pinned.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset((CAPACITY_TYPE_RESERVED,))))
        pinned.add(Requirement(LABEL_RESERVATION_ID, False, claim.reservations))
        keep: BoolArray = claim.mask & np.fromiter(
            (any(o.reserved and o.available and o.compatible(pinned) for o in it.offerings) for it in table.types),
            dtype=bool, count=len(table.types))
        if keep.any():
            held = frozenset(o.reservation_id for i in np.flatnonzero(keep) for o in table.types[int(i)].offerings
                             if o.reserved and o.available and o.compatible(pinned) and o.reservation_id is not None)
            reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset((CAPACITY_TYPE_RESERVED,))))
            reqs.add(Requirement(LABEL_RESERVATION_ID, False, held))
            return keep
    if has_reserved_offerings(table):
        reqs.add(NOT_RESERVED)
        kept: BoolArray = claim.mask & table.offering_mask(reqs)
        return kept
    return claim.mask


def finalize(claim: ClaimState, max_instance_types: int = MAX_INSTANCE_TYPES) -> PlannedNodeClaim:
    """The plan's view of ``claim``: remaining types cheapest first (ties by name, at most
    ``max_instance_types``), requirements pinned to those types and to the zones and capacity types
    they are offered in (and to the reservations it holds, see :func:`_pin_reservations`), and
    requests including the smallest DaemonSet overhead among them."""
    table = claim.table
    reqs = claim.requirements.copy()
    reqs.by_key.pop(LABEL_HOSTNAME, None)
    mask = _pin_reservations(claim, reqs)
    prices = table.cheapest_prices(reqs)
    idx = np.flatnonzero(mask & np.isfinite(prices))
    order = idx[np.lexsort((table.name_rank[idx], prices[idx]))]
    chosen = [int(i) for i in order[:max_instance_types]]
    types = [table.types[i] for i in chosen]
    cols = table.column_mask(reqs) & np.isfinite(table.prices[chosen]).any(axis=0) if chosen else np.zeros(0, dtype=bool)
    used = [table.offering_columns[j] for j in np.flatnonzero(cols)]
    cts = sorted({c for _, c in used})
    zones = sorted({z for z, _ in used})
    reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in types)))
    reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset(cts)))
    reqs.add(Requirement(LABEL_ZONE, False, frozenset(zones)))
    daemon_min = table.daemon[chosen].min(axis=0) if chosen else np.zeros(len(table.resources), dtype=np.int64)
    total = claim.requests + daemon_min
    requests = {r: int(total[i]) for i, r in enumerate(table.resources) if total[i]}
    return PlannedNodeClaim(
        nodepool=table.template.name,
        template=table.template,
        pods=claim.pods,
        requirements=reqs,
        instance_types=types,
        requests=requests,
        hostname=claim.hostname,
        min_values_relaxed=claim.relaxed,
    )
