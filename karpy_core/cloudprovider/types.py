"""Instance types and offerings: what a cloud can launch, at what price, where.

Shapes (all amounts in karpy's internal units, see :mod:`karpy_core.scheduling.resources`):

* :class:`Offering` - one (zone, capacity type) place to buy an instance type, a price in
  **USD/hour** and whether it is available right now.
* :class:`InstanceType` - a name, :class:`~karpy_core.scheduling.requirements.Requirements`
  describing every well-known label (single-valued for instance-type facts such as arch; the
  zone/capacity-type requirements list every offering's value), its offerings, capacity, and the
  overhead subtracted to get allocatable.

Modelled on Karpenter's ``pkg/cloudprovider/types.go`` (``InstanceType.Allocatable``,
``Offerings.Available/Compatible/Cheapest``, ``OrderByPrice``).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property

from karpy_core.apis.labels import CAPACITY_TYPE_RESERVED, LABEL_CAPACITY_TYPE, LABEL_RESERVATION_ID, LABEL_ZONE
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, merge, subtract

__all__ = ["Offering", "Overhead", "InstanceType", "RepairPolicy", "cheapest_offering", "order_by_price", "ready_repair_policies",
           "without_reserved"]


@cache
def _shared_in(key: str, values: frozenset[str]) -> Requirement:
    """``key In values``, one shared (frozen) object per key and value set: a catalog's types
    repeat the same few zone and capacity-type sets."""
    return Requirement(key, False, values)


MAX_PRICE = 1_000_000.0
"""The dearest offering price karpy accepts from a catalog or a NodeOverlay, USD/hour. No instance
costs near this (the dearest EC2 type lists ~100 USD/hour); a larger number is a mistake, and sums
of such prices overflow a float (a catalog price of 1e308 made every total ``inf``)."""


@dataclass(frozen=True, slots=True)
class Offering:
    """One way to buy an instance type.

    Attributes:
        zone: ``topology.kubernetes.io/zone`` value, e.g. ``us-east-1a``.
        capacity_type: ``on-demand``, ``spot`` or ``reserved``.
        price: USD/hour.
        available: False when the cloud has no capacity or no known price right now.
        reservation_id: a ``reserved`` offering's capacity reservation (``cr-...``); None otherwise.
            It is the offering's ``karpenter.k8s.aws/capacity-reservation-id`` requirement
            (Karpenter ``Offering.ReservationID``).
        reservation_capacity: instances the reservation can still launch (Karpenter
            ``Offering.ReservationCapacity``); 0 for other capacity types.
        reservation_type: ``default`` or ``capacity-block`` (the
            ``karpenter.k8s.aws/capacity-reservation-type`` label); None for other capacity types.
    """

    zone: str
    capacity_type: str
    price: float
    available: bool = True
    reservation_id: str | None = None
    reservation_capacity: int = 0
    reservation_type: str | None = None

    @property
    def reserved(self) -> bool:
        """True for a capacity-reservation offering (capacity type ``reserved`` with an ID)."""
        return self.capacity_type == CAPACITY_TYPE_RESERVED and self.reservation_id is not None

    def compatible(self, reqs: Requirements) -> bool:
        """True when the zone, capacity type and (for a reserved offering) reservation ID are
        allowed by ``reqs`` (absent keys allow all)."""
        z = reqs.get(LABEL_ZONE)
        if z is not None and not z.has(self.zone):
            return False
        c = reqs.get(LABEL_CAPACITY_TYPE)
        if c is not None and not c.has(self.capacity_type):
            return False
        r = reqs.get(LABEL_RESERVATION_ID)
        return r is None or self.reservation_id is None or r.has(self.reservation_id)


@dataclass(frozen=True, slots=True)
class Overhead:
    """Resources a node reserves before pods (kubelet ``kubeReserved``, ``systemReserved`` and the
    hard eviction threshold), in internal units."""

    kube_reserved: Resources = field(default_factory=dict)
    system_reserved: Resources = field(default_factory=dict)
    eviction_threshold: Resources = field(default_factory=dict)

    def total(self) -> Resources:
        return merge(self.kube_reserved, self.system_reserved, self.eviction_threshold)


@dataclass(eq=False)
class InstanceType:
    """A launchable machine shape.

    Attributes:
        name: e.g. ``m5.large``.
        requirements: labels of this type as requirements; must define every well-known label
            the provider resolves (use ``DoesNotExist`` where one does not apply).
        offerings: every (zone, capacity type) offering, available or not.
        capacity: node capacity (``cpu`` millicores, ``memory`` bytes, ``pods``, ...).
        overhead: what the kubelet reserves.
    """

    name: str
    requirements: Requirements
    offerings: list[Offering]
    capacity: Resources
    overhead: Overhead = field(default_factory=Overhead)

    def __post_init__(self) -> None:
        zones = sorted({o.zone for o in self.offerings})
        cts = sorted({o.capacity_type for o in self.offerings})
        if LABEL_ZONE not in self.requirements:
            self.requirements.add(_shared_in(LABEL_ZONE, frozenset(zones)))
        if LABEL_CAPACITY_TYPE not in self.requirements:
            self.requirements.add(_shared_in(LABEL_CAPACITY_TYPE, frozenset(cts)))

    @cached_property
    def allocatable(self) -> Resources:
        """``capacity - overhead`` (never below zero), in internal units."""
        alloc = subtract(self.capacity, self.overhead.total())
        return {k: max(0, v) for k, v in alloc.items()}

    def available_offerings(self) -> list[Offering]:
        return [o for o in self.offerings if o.available]

    def compatible_offerings(self, reqs: Requirements, *, available_only: bool = True) -> list[Offering]:
        """Offerings allowed by ``reqs`` (zone/capacity type), available ones only by default."""
        return [o for o in self.offerings if (o.available or not available_only) and o.compatible(reqs)]

    def cheapest(self, reqs: Requirements) -> Offering | None:
        """The cheapest available offering compatible with ``reqs``; ties broken by zone then
        capacity type, so the choice is deterministic."""
        return cheapest_offering(self.compatible_offerings(reqs))

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"InstanceType({self.name})"


def without_reserved(types: Sequence[InstanceType]) -> list[InstanceType]:
    """``types`` with every capacity-reservation offering removed (``ReservedCapacity=false``);
    types that had none are returned as they are, the others as shallow copies (shared instance
    types are never mutated)."""
    out: list[InstanceType] = []
    for it in types:
        if not any(o.reserved for o in it.offerings):
            out.append(it)
            continue
        clone = copy.copy(it)
        clone.offerings = [o for o in it.offerings if not o.reserved]
        out.append(clone)
    return out


def cheapest_offering(offerings: Iterable[Offering]) -> Offering | None:
    """The lowest-priced offering (ties: zone, then capacity type), or None."""
    best: Offering | None = None
    for o in offerings:
        if best is None or (o.price, o.zone, o.capacity_type) < (best.price, best.zone, best.capacity_type):
            best = o
    return best


def order_by_price(types: Sequence[InstanceType], reqs: Requirements) -> list[InstanceType]:
    """Sort instance types by their cheapest compatible available offering, then name; types with
    none go last (Karpenter ``InstanceTypes.OrderByPrice``)."""

    def key(it: InstanceType) -> tuple[float, str]:
        o = it.cheapest(reqs)
        return (o.price if o else float("inf"), it.name)

    return sorted(types, key=key)


@dataclass(frozen=True, slots=True)
class RepairPolicy:
    """A node-repair policy: a Node whose condition ``condition_type`` has had status
    ``condition_status`` for at least ``toleration_seconds`` is unhealthy and gets replaced
    (Karpenter ``cloudprovider.RepairPolicy``).

    Attributes:
        condition_type: a Node condition type, e.g. ``Ready``.
        condition_status: ``True``, ``False`` or ``Unknown``.
        toleration_seconds: seconds the condition is tolerated (``inf``: never repaired).
    """

    condition_type: str
    condition_status: str
    toleration_seconds: float

    @classmethod
    def from_mapping(cls, raw: Mapping[str, object]) -> RepairPolicy:
        """Read the Karpenter-style mapping ``{"conditionType", "conditionStatus",
        "tolerationDuration"}``, the duration in seconds or as a Go duration (``"30m"``;
        ``"Never"`` tolerates forever).

        Raises:
            ValueError: ``conditionType`` or ``conditionStatus`` is missing, or the duration is
                neither a number nor a Go duration.
        """
        from karpy_core.apis.durations import duration_seconds

        ctype, status = raw.get("conditionType"), raw.get("conditionStatus")
        if not isinstance(ctype, str) or not isinstance(status, str):
            raise ValueError(f"repair policy {dict(raw)!r} needs conditionType and conditionStatus strings")
        duration = raw.get("tolerationDuration", 0)
        if isinstance(duration, int | float):
            seconds = float(duration)
        else:
            parsed = duration_seconds(str(duration))
            seconds = float(parsed) if parsed is not None else math.inf
        return cls(ctype, status, seconds)


def ready_repair_policies(toleration_seconds: float) -> list[RepairPolicy]:
    """Repair policies for a Node whose ``Ready`` condition is ``False`` or ``Unknown`` for
    ``toleration_seconds``: Karpenter's AWS provider uses 1800 s, its KWOK provider 600 s."""
    return [RepairPolicy("Ready", status, toleration_seconds) for status in ("False", "Unknown")]
