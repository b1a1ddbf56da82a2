"""EC2 capacity reservations (ODCRs and capacity blocks): which ones an EC2NodeClass selects, and
how many instances each can still launch.

Karpenter's AWS provider ``pkg/providers/capacityreservation`` (``QueriesFromSelectorTerms``,
``DescribeCapacityReservationsInput``, the availability cache with ``MarkLaunched`` /
``MarkTerminated`` / ``MarkUnavailable``) and ``pkg/apis/v1`` ``CapacityReservationFromEC2``:

* One DescribeCapacityReservations per selector term, always filtered on ``state=active``: an
  ``id`` term by ``CapacityReservationIds``; a tags / ``ownerID`` / ``instanceMatchCriteria``
  term by ``tag:<k>`` (``tag-key`` for ``*``), ``owner-id`` and ``instance-match-criteria``.
* Each answer resets the reservation's available count to EC2's ``AvailableInstanceCount``; a
  launch into it takes one (:meth:`CapacityReservations.mark_launched`) until EC2 reports again,
  a ``ReservationCapacityExceeded`` (or ICE) answer sets it to 0
  (:meth:`CapacityReservations.mark_unavailable`).
* A capacity block within 40 minutes of its end is ``expiring``: no new launches into it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from karpy_aws.apis import CapacityReservation
from karpy_aws.errors import call

if TYPE_CHECKING:
    from karpy_aws.apis import CapacityReservationSelectorTerm
    from karpy_aws.clients import AWSClients

__all__ = ["EXPIRING_WINDOW_SECONDS", "CapacityReservations", "queries_for", "reservation_from_ec2"]

EXPIRING_WINDOW_SECONDS = 40 * 60.0
"""A capacity block is ``expiring`` this long before its end (upstream
``capacityReservationExpirationPeriod``)."""


def queries_for(terms: Sequence[CapacityReservationSelectorTerm]) -> list[dict[str, Any]]:
    """DescribeCapacityReservations keyword arguments, one per term (see the module docstring)."""
    active = {"Name": "state", "Values": ["active"]}
    out: list[dict[str, Any]] = []
    for t in terms:
        if t.id:
            out.append({"CapacityReservationIds": [t.id], "Filters": [active]})
            continue
        filters: list[dict[str, Any]] = [active]
        if t.owner_id:
            filters.append({"Name": "owner-id", "Values": [t.owner_id]})
        if t.instance_match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [t.instance_match_criteria]})
        for k, v in sorted((t.tags or {}).items()):
            filters.append({"Name": "tag-key", "Values": [k]} if v == "*" else {"Name": f"tag:{k}", "Values": [v]})
        out.append({"Filters": filters})
    return out


def _epoch(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def reservation_from_ec2(raw: dict[str, Any], now: float) -> CapacityReservation | None:
    """The status entry for one EC2 ``CapacityReservation``, or None for one karpy cannot use (an
    instance-match criteria or reservation type other than upstream's known values)."""
    imc = raw.get("InstanceMatchCriteria")
    rtype = raw.get("ReservationType") or "default"
    if imc not in ("open", "targeted") or rtype not in ("default", "capacity-block"):
        return None
    end = _epoch(raw.get("EndDate"))
    expiring = rtype == "capacity-block" and end is not None and now >= end - EXPIRING_WINDOW_SECONDS
    return CapacityReservation.model_validate({
        "availabilityZone": raw["AvailabilityZone"],
        "endTime": datetime.fromtimestamp(end, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if end is not None else None,
        "id": raw["CapacityReservationId"],
        "instanceMatchCriteria": imc,
        "instanceType": raw["InstanceType"],
        "ownerID": raw["OwnerId"],
        "reservationType": rtype,
        "interruptible": bool(raw.get("Interruptible", False)),
        "state": "expiring" if expiring else "active",
    })


class CapacityReservations:
    """Lists the reservations selector terms select and keeps their available counts.

    Args:
        clients: AWS clients.
        now: seconds since the epoch.
    """

    def __init__(self, *, clients: AWSClients, now: Callable[[], float]):
        self.clients = clients
        self._now = now
        self._available: dict[str, int] = {}

    async def list(self, terms: Sequence[CapacityReservationSelectorTerm]) -> list[CapacityReservation]:
        """The active reservations ``terms`` select, by id; each resets its available count.

        Raises:
            CloudProviderError: DescribeCapacityReservations failed (code and message named).
        """
        ec2 = await self.clients.ec2()
        found: dict[str, dict[str, Any]] = {}
        for kwargs in queries_for(terms):
            token: str | None = None
            while True:
                page = dict(kwargs)
                if token:
                    page["NextToken"] = token
                resp = await call(ec2.describe_capacity_reservations, "DescribeCapacityReservations", **page)
                for r in resp.get("CapacityReservations") or []:
                    found[r["CapacityReservationId"]] = r
                token = resp.get("NextToken")
                if not token:
                    break
        now = self._now()
        out: list[CapacityReservation] = []
        for rid in sorted(found):
            res = reservation_from_ec2(found[rid], now)
            if res is None:
                continue
            self._available[rid] = int(found[rid].get("AvailableInstanceCount") or 0)
            out.append(res)
        return out

    def available(self, reservation_id: str) -> int:
        """Instances the reservation can still launch as far as karpy knows (0 when never listed)."""
        return max(0, self._available.get(reservation_id, 0))

    def mark_launched(self, reservation_id: str) -> None:
        """One instance was launched into it."""
        self._available[reservation_id] = self.available(reservation_id) - 1

    def mark_terminated(self, reservation_id: str) -> None:
        """One of its instances was terminated."""
        self._available[reservation_id] = self.available(reservation_id) + 1

    def mark_unavailable(self, *reservation_ids: str) -> None:
        """EC2 said it is full (``ReservationCapacityExceeded``): nothing more until it is listed again."""
        for rid in reservation_ids:
            self._available[rid] = 0
