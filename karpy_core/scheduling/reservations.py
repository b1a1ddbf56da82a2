"""Capacity reservations in one scheduling run: how many instances each reservation may still
launch, and which planned NodeClaims hold a unit of it.

Karpenter's ``ReservationManager`` (``pkg/controllers/provisioning/scheduling/reservationmanager.go``)
and ``NodeClaim.offeringsToReserve`` (``nodeclaim.go``), written for karpy's type tables:

* The ledger starts from every ``reserved`` offering of the run's type tables: reservation ID ->
  ``Offering.reservation_capacity`` (the smallest seen when several NodePools list the same
  reservation, as upstream).
* Each time a pod is added to a planned claim, the claim holds one unit of **every** reservation
  it could still launch into (its remaining types x their available reserved offerings the
  claim's zone and capacity-type requirements allow) while capacity is left - pessimistic, so a
  reservation of 2 is never promised to 3 claims - and gives back the ones it no longer can.
* A claim holding reservations is pinned at :func:`~karpy_core.scheduling.claim.finalize` to
  ``karpenter.sh/capacity-type In [reserved]`` and
  ``karpenter.k8s.aws/capacity-reservation-id In [held IDs]``; a claim holding none may not
  launch reserved capacity at all (``karpenter.sh/capacity-type NotIn [reserved]``): it falls
  back to on-demand or spot (upstream's default ``ReservedOfferingModeFallback``). A claim whose
  NodePool allows only reserved capacity, with every compatible reservation held, is refused.

Pure: no I/O; the state is two dicts copied by :meth:`ReservationLedger.checkpoint`.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import CAPACITY_TYPE_RESERVED, LABEL_CAPACITY_TYPE
from karpy_core.scheduling.requirements import Requirement, Requirements

if TYPE_CHECKING:
    from karpy_core.cloudprovider.types import Offering
    from karpy_core.scheduling.template import TypeTable

__all__ = ["NOT_RESERVED", "ReservationLedger", "has_reserved_offerings"]

BoolArray = npt.NDArray[np.bool_]

_OFFERS: weakref.WeakKeyDictionary[TypeTable, list[tuple[int, Offering]]] = weakref.WeakKeyDictionary()
"""Per type table (built once, shared by runs): (type row, reserved offering) pairs."""


def _reserved_offers(table: TypeTable) -> list[tuple[int, Offering]]:
    hit = _OFFERS.get(table)
    if hit is None:
        hit = _OFFERS[table] = [(i, o) for i, it in enumerate(table.types) for o in it.offerings if o.reserved]
    return hit


def has_reserved_offerings(table: TypeTable) -> bool:
    """True when some type of ``table`` has a capacity-reservation offering (cached per table)."""
    return bool(_reserved_offers(table))


NOT_RESERVED = Requirement(LABEL_CAPACITY_TYPE, True, frozenset((CAPACITY_TYPE_RESERVED,)))
"""``karpenter.sh/capacity-type NotIn [reserved]``: a claim that holds no reservation."""


class ReservationLedger:
    """Reservation ID -> instances left, and claim hostname -> the reservation IDs it holds.

    Args:
        tables: the run's type tables by NodePool name; their types' reserved offerings seed the
            counts.
    """

    def __init__(self, tables: Mapping[str, TypeTable]):
        self.capacity: dict[str, int] = {}
        self.held: dict[str, frozenset[str]] = {}
        self._offers: dict[str, list[tuple[int, Offering]]] = {}
        for name, table in tables.items():
            offers = _reserved_offers(table)
            if not offers:
                continue
            self._offers[name] = offers
            for _, o in offers:
                rid = o.reservation_id
                assert rid is not None  # Offering.reserved
                left = max(0, o.reservation_capacity)
                if rid not in self.capacity or self.capacity[rid] > left:
                    self.capacity[rid] = left

    @property
    def active(self) -> bool:
        """True when some NodePool has a reserved offering (otherwise every call is a no-op)."""
        return bool(self._offers)

    def remaining(self, reservation_id: str) -> int:
        """Instances ``reservation_id`` may still launch in this run (0 when unknown)."""
        return self.capacity.get(reservation_id, 0)

    def settle(self, table: TypeTable, hostname: str, requirements: Requirements,
               mask: BoolArray) -> tuple[Requirements, BoolArray, frozenset[str]] | None:
        """What a claim of ``table`` with these requirements and remaining types (``mask``) holds.

        Returns:
            ``(requirements, mask, reservation IDs)``: the IDs it may hold (already held ones
            stay held; new ones only while capacity is left). When it may hold none but a
            compatible reserved offering exists, the requirements gain
            ``capacity-type NotIn [reserved]`` and the mask keeps only types with another
            available offering. None when that leaves no type (the pod cannot join this claim).
            Nothing is recorded; :meth:`commit` does that.
        """
        offers = self._offers.get(table.template.name)
        if not offers:
            return requirements, mask, frozenset()
        mine = self.held.get(hostname, frozenset())
        compatible = False
        ids: set[str] = set()
        for i, o in offers:
            if not mask[i] or not o.available or not o.compatible(requirements):
                continue
            compatible = True
            rid = o.reservation_id
            assert rid is not None
            if rid in mine or self.capacity.get(rid, 0) > 0:
                ids.add(rid)
        if ids or not compatible:
            return requirements, mask, frozenset(ids)
        narrowed = requirements.copy()
        narrowed.add(NOT_RESERVED)
        kept = mask & table.offering_mask(narrowed)
        if not kept.any():
            return None
        return narrowed, kept, frozenset()

    def commit(self, hostname: str, ids: frozenset[str]) -> None:
        """Make ``hostname`` hold exactly ``ids``: one unit of each new ID is taken, one of each
        dropped ID given back.

        Raises:
            ValueError: an ID with no capacity left (a bug in the caller: :meth:`settle` offers
                only IDs with capacity).
        """
        mine = self.held.get(hostname, frozenset())
        for rid in ids - mine:
            if self.capacity.get(rid, 0) <= 0:
                raise ValueError(f"reservation {rid} has no capacity left to hold for {hostname}")
            self.capacity[rid] -= 1
        for rid in mine - ids:
            self.capacity[rid] = self.capacity.get(rid, 0) + 1
        if ids:
            self.held[hostname] = ids
        else:
            self.held.pop(hostname, None)

    def release(self, hostname: str) -> None:
        """Give back everything ``hostname`` holds (its claim was dropped)."""
        self.commit(hostname, frozenset())

    def checkpoint(self) -> tuple[dict[str, int], dict[str, frozenset[str]]]:
        """The counts and holdings, to :meth:`restore` after trying an alternative packing."""
        return dict(self.capacity), dict(self.held)

    def restore(self, mark: tuple[dict[str, int], dict[str, frozenset[str]]]) -> None:
        self.capacity, self.held = dict(mark[0]), dict(mark[1])
