"""The launch kernel: the pure decisions every cloud provider makes when it launches a NodeClaim.

Every provider (simulated, AWS, KakaoCloud, a third party's) answers the same three questions
before and after its cloud call; they live here once, free of I/O:

1. :func:`launch_constraints` - the NodeClaim's ``spec.requirements`` and
   ``spec.resources.requests`` parsed into :class:`LaunchConstraints`, or
   :class:`InvalidRequirementsError` (a :class:`~karpy_core.errors.CreateError` with condition
   reason ``InvalidRequirements``).
2. :func:`rank_launchable` / :func:`cheapest_launchable` - which (instance type, offering) pairs
   may be launched, cheapest first, or :class:`~karpy_core.errors.InsufficientCapacityError`. An
   instance type qualifies when its requirements intersect the claim's, its allocatable fits the
   requests, and it has an *available* offering compatible with the claim's zone and capacity
   type requirements. **The one tie-break**: price (USD/hour), then instance-type name, then
   zone - among a type's equal-price offerings the zones are taken in name order rotated to
   start at ``crc32(claim name) mod zones`` (:func:`zone_start`), so a NodePool's claims spread
   over its zones instead of all landing in the first by name (Karpenter samples among the
   cheapest offerings at random) - then capacity type. Total and deterministic: the same claim
   name and inputs always launch the same offering.
3. :func:`stamp_launched` - the NodeClaim as launched: the instance type's single-valued labels
   plus ``node.kubernetes.io/instance-type``, ``topology.kubernetes.io/zone`` and
   ``karpenter.sh/capacity-type``; ``status.providerID``, ``status.capacity`` and
   ``status.allocatable`` (Kubernetes quantities) and ``status.imageID`` when known.

:class:`ProviderID` formats and parses the ``<scheme>:///<zone>/<instance id>`` provider IDs all
three built-in providers use (``aws:///us-east-1a/i-0abc``, ``kakaocloud:///kr-central-2-a/<uuid>``,
``simulated:///us-east-1a/i-00000001``).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from karpy_core.apis.labels import (
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_RESERVATION_ID,
    LABEL_RESERVATION_TYPE,
    LABEL_ZONE,
    RESERVATION_TYPE_DEFAULT,
)
from karpy_core.cloudprovider.overlay import overlaid
from karpy_core.errors import CreateError, InsufficientCapacityError
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, fits, format_resource_list, parse_resource_list
from karpy_core.utils.quantity import QuantityError

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.cloudprovider.types import InstanceType, Offering

__all__ = [
    "INVALID_REQUIREMENTS",
    "InvalidRequirementsError",
    "LaunchChoice",
    "LaunchConstraints",
    "ProviderID",
    "cheapest_launchable",
    "launch_constraints",
    "rank_launchable",
    "reservation_labels",
    "stamp_launched",
    "zone_start",
]

INVALID_REQUIREMENTS = "InvalidRequirements"
"""The ``Launched`` condition reason of a NodeClaim whose requirements or requests do not parse."""

_PROVIDER_ID = re.compile(r"([a-z][a-z0-9+.-]*):///(.*)/([^/]+)")

RankKey = tuple[float, str, str, str]
"""(price USD/hour, instance-type name, zone, capacity type) of a choice. Types are ranked by
the first two; each type's offering is already the tie-broken one (zones rotated per claim)."""


class InvalidRequirementsError(CreateError):
    """The NodeClaim's requirements or resource requests cannot be parsed (condition reason
    ``InvalidRequirements``; the condition message is the parse error alone)."""

    def __init__(self, claim: str, detail: str):
        super().__init__(f"NodeClaim {claim}: {detail}", condition_reason=INVALID_REQUIREMENTS, condition_message=detail)


@dataclass(frozen=True, slots=True)
class LaunchConstraints:
    """What a NodeClaim allows, parsed once.

    Attributes:
        claim: the NodeClaim's name (``<unnamed>`` when it has none), for messages.
        requirements: ``spec.requirements`` as :class:`Requirements` (``minValues`` kept).
        requests: ``spec.resources.requests`` in internal units (cpu millicores, memory bytes, ...).
    """

    claim: str
    requirements: Requirements
    requests: Resources


@dataclass(frozen=True, slots=True)
class LaunchChoice:
    """One launchable (instance type, offering) pair; ``key`` is its rank (see :data:`RankKey`)."""

    instance_type: InstanceType
    offering: Offering

    @property
    def key(self) -> RankKey:
        o = self.offering
        return (o.price, self.instance_type.name, o.zone, o.capacity_type)


def launch_constraints(nodeclaim: NodeClaim) -> LaunchConstraints:
    """Parse ``nodeclaim``'s requirements and requests.

    Raises:
        InvalidRequirementsError: an unknown operator, a bad value count, or a malformed quantity.
    """
    claim = nodeclaim.metadata.name or "<unnamed>"
    try:
        reqs = Requirements.of(*(Requirement.new(r.key, r.operator, r.values or (), r.min_values) for r in nodeclaim.spec.requirements))
        requests = parse_resource_list(nodeclaim.spec.resources.requests)
    except (ValueError, QuantityError) as exc:
        raise InvalidRequirementsError(claim, str(exc)) from exc
    return LaunchConstraints(claim=claim, requirements=reqs, requests=requests)


def zone_start(claim: str) -> int:
    """Where a claim's zone rotation starts: ``crc32(name)`` (stable across processes and
    machines, unlike Python's salted ``hash``); taken modulo the number of tied zones."""
    return zlib.crc32(claim.encode())


def _best_offering(it: InstanceType, reqs: Requirements, start: int = 0) -> Offering | None:
    """``it``'s cheapest available offering compatible with ``reqs``; ties: the zone at
    ``start mod n`` among the ``n`` tied zones in name order, then capacity type."""
    zone_req = reqs.get(LABEL_ZONE)
    ct_req = reqs.get(LABEL_CAPACITY_TYPE)
    rid_req = reqs.get(LABEL_RESERVATION_ID)
    tied: list[Offering] = []
    for o in it.offerings:
        if not o.available:
            continue
        if zone_req is not None and not zone_req.has(o.zone):
            continue
        if ct_req is not None and not ct_req.has(o.capacity_type):
            continue
        if rid_req is not None and o.reservation_id is not None and not rid_req.has(o.reservation_id):
            continue
        if not tied or o.price < tied[0].price:
            tied = [o]
        elif o.price == tied[0].price:
            tied.append(o)
    if not tied:
        return None
    zones = sorted({o.zone for o in tied})
    first = zones[start % len(zones)]
    return min((o for o in tied if o.zone == first), key=lambda o: o.capacity_type)


def _ranked_by_offering(types: Iterable[InstanceType], reqs: Requirements, claim: str = "") -> list[LaunchChoice]:
    """Each type with an available compatible offering, as its cheapest choice (zone ties
    rotated by ``claim``'s name, see :func:`zone_start`), in rank order. Only the (cheap)
    offering checks are made here; the type-level checks come after. Types go through the
    NodeOverlays of the launch in progress, if any (:func:`~karpy_core.cloudprovider.overlay.overlaid`)."""
    start = zone_start(claim)
    choices = []
    for it in overlaid(types):
        o = _best_offering(it, reqs, start)
        if o is not None:
            choices.append(LaunchChoice(it, o))
    choices.sort(key=lambda c: c.key[:2])  # price, then type name: one choice per type
    return choices


def _qualifies(it: InstanceType, c: LaunchConstraints) -> bool:
    return it.requirements.intersects(c.requirements) and fits(c.requests, it.allocatable)


def rank_launchable(types: Iterable[InstanceType], constraints: LaunchConstraints) -> list[LaunchChoice]:
    """Every instance type that may launch under ``constraints``, one :class:`LaunchChoice` each
    (its cheapest available compatible offering), cheapest first by the one tie-break (price,
    instance-type name; a type's zone ties rotated by the claim's name, then capacity type).
    Empty when nothing qualifies."""
    return [ch for ch in _ranked_by_offering(types, constraints.requirements, constraints.claim)
            if _qualifies(ch.instance_type, constraints)]


def _insufficient(constraints: LaunchConstraints, what: str) -> InsufficientCapacityError:
    return InsufficientCapacityError(
        f"NodeClaim {constraints.claim}: no {what} with an available offering satisfies "
        f"[{constraints.requirements.describe()}] and requests {format_resource_list(constraints.requests)}"
    )


def cheapest_launchable(types: Iterable[InstanceType], constraints: LaunchConstraints, *, what: str = "instance type") -> LaunchChoice:
    """The first of :func:`rank_launchable` (checking type-level fit only until one passes).

    Args:
        types: the candidate instance types (any order).
        constraints: from :func:`launch_constraints`.
        what: the noun for the error message (``instance type``, ``KakaoCloud flavor``...).

    Raises:
        InsufficientCapacityError: no instance type qualifies.
    """
    for ch in _ranked_by_offering(types, constraints.requirements, constraints.claim):
        if _qualifies(ch.instance_type, constraints):
            return ch
    raise _insufficient(constraints, what)


def require_launchable(types: Iterable[InstanceType], constraints: LaunchConstraints, *, what: str = "instance type") -> list[LaunchChoice]:
    """:func:`rank_launchable`, raising when it is empty.

    Raises:
        InsufficientCapacityError: no instance type qualifies.
    """
    ranked = rank_launchable(types, constraints)
    if not ranked:
        raise _insufficient(constraints, what)
    return ranked


def reservation_labels(offering: Offering) -> dict[str, str]:
    """The labels a node launched into a capacity reservation carries:
    ``karpenter.k8s.aws/capacity-reservation-id`` and ``-type`` (karpenter-provider-aws
    ``instance.go``); empty for any other offering."""
    if not offering.reserved or offering.reservation_id is None:
        return {}
    return {LABEL_RESERVATION_ID: offering.reservation_id, LABEL_RESERVATION_TYPE: offering.reservation_type or RESERVATION_TYPE_DEFAULT}


def stamp_launched(
    nodeclaim: NodeClaim,
    instance_type: InstanceType,
    *,
    zone: str,
    capacity_type: str,
    provider_id: ProviderID | str,
    image_id: str | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> NodeClaim:
    """A deep copy of ``nodeclaim`` as launched (see the module docstring).

    Args:
        nodeclaim: the NodeClaim asked for (not modified).
        instance_type: the launched type; its single-valued requirement labels are added.
        zone / capacity_type: where and how it was bought.
        provider_id: ``status.providerID``.
        image_id: ``status.imageID`` (left as is when None).
        labels / annotations: provider-specific extras (e.g. the AWS zone ID, a NodeClass hash),
            applied last.
    """
    out = nodeclaim.model_copy(deep=True)
    stamped = dict(out.metadata.labels)
    stamped.update(instance_type.requirements.labels())
    stamped[LABEL_INSTANCE_TYPE] = instance_type.name
    stamped[LABEL_ZONE] = zone
    stamped[LABEL_CAPACITY_TYPE] = capacity_type
    if labels:
        stamped.update(labels)
    out.metadata.labels = stamped
    if annotations:
        out.metadata.annotations = {**out.metadata.annotations, **annotations}
    out.status.provider_id = str(provider_id)
    if image_id is not None:
        out.status.image_id = image_id
    out.status.capacity = format_resource_list({k: v for k, v in instance_type.capacity.items() if v})
    out.status.allocatable = format_resource_list({k: v for k, v in instance_type.allocatable.items() if v})
    return out


@dataclass(frozen=True, slots=True)
class ProviderID:
    """``<scheme>:///<zone>/<instance id>``, e.g. ``aws:///us-east-1a/i-0abc``.

    Attributes:
        scheme: the provider's name (``aws``, ``kakaocloud``, ``simulated``).
        zone: the instance's zone (may contain ``/``: everything between ``:///`` and the last ``/``).
        instance_id: the cloud's instance id (no ``/``).
    """

    scheme: str
    zone: str
    instance_id: str

    def __str__(self) -> str:
        return f"{self.scheme}:///{self.zone}/{self.instance_id}"

    @classmethod
    def parse(cls, text: str | None, scheme: str | None = None) -> ProviderID | None:
        """The parts of ``text``, or None when it is not of this form (or not of ``scheme``)."""
        m = _PROVIDER_ID.fullmatch(text or "")
        if m is None or (scheme is not None and m.group(1) != scheme):
            return None
        return cls(m.group(1), m.group(2), m.group(3))
