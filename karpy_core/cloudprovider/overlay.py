"""NodeOverlays applied to instance types: the pure part of Karpenter's ``NodeOverlay`` feature.

Behaviour reference (no code copied): kubernetes-sigs/karpenter ``pkg/controllers/nodeoverlay``
(``controller.go``: validation and conflicts, ``store.go``: the per-NodePool updates),
``pkg/cloudprovider/overlay/cloudprovider.go`` (the cloud provider wrapped so every
``GetInstanceTypes`` returns overlaid types), ``pkg/cloudprovider/types.go`` ``AdjustedPrice``,
and ``designs/node-overlay.md``.

Shapes:

* :class:`OverlayRule` - one NodeOverlay, parsed: name, weight (unset = 0), requirements, the
  price change (``price`` or ``priceAdjustment`` text), extra capacity (internal units).
* :func:`compile_overlays` - every rule against every NodePool's (raw) instance types ->
  :class:`OverlayStore`: per NodePool and instance type, the price of each selected offering
  (zone, capacity type) and the resources added, plus the overlays refused (runtime validation)
  and those in conflict.
* :meth:`OverlayStore.apply_all` - a NodePool's instance types with the updates applied (new
  :class:`~karpy_core.cloudprovider.types.InstanceType` objects; the provider's are never mutated).

Rules, as upstream:

1. Overlays are taken by weight, highest first; equal weights by name, the later in the alphabet
   first (``NodeOverlayList.OrderByWeight``).
2. An overlay selects an instance type of a NodePool when its requirements are compatible with
   the type's requirements plus ``karpenter.sh/nodepool`` and the NodePool's template labels (a
   key neither defines is incompatible unless the overlay's operator is ``NotIn``/``DoesNotExist``);
   it selects the type's offerings whose zone and capacity type its requirements allow.
3. A price change is kept per offering; the first (highest-weight) overlay setting an offering's
   price wins. Another overlay of the *same* weight selecting an offering already priced by an
   overlay of that weight conflicts.
4. Capacity is merged per resource, the first overlay setting a resource wins. An overlay of the
   same weight as the last one that added capacity to the type, naming one of its resources,
   conflicts.
5. A conflicting overlay is applied nowhere (its checks run against every NodePool before
   anything is stored) and gets ``ValidationSucceeded=False`` reason ``Conflict``; one failing
   runtime validation gets reason ``RuntimeValidation``.
6. ``price`` replaces the price; ``priceAdjustment`` ``+N``/``-N`` adds USD/hour, ``+N%``/``-N%``
   scales; never below 0.

Where karpy differs: a NodePool the store has not evaluated yet gets its instance types
unchanged (upstream refuses them until the overlay controller has run); karpy evaluates overlays
before the first provisioning pass, and on every NodeOverlay, NodePool or NodeClass change.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_NODEPOOL
from karpy_core.cloudprovider.calls import CallsDecorator, CloudCalls
from karpy_core.cloudprovider.types import MAX_PRICE, InstanceType, Offering
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, parse_resource_list
from karpy_core.utils.quantity import QuantityError

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool

__all__ = [
    "AppliedChange",
    "LAUNCH_OVERLAY",
    "OverlaidCalls",
    "OverlayRule",
    "OverlayStore",
    "PoolTypes",
    "REASON_CONFLICT",
    "REASON_RUNTIME_VALIDATION",
    "adjusted_price",
    "compile_overlays",
    "launch_overlay",
    "order_by_weight",
    "overlaid",
]

REASON_CONFLICT = "Conflict"
"""``ValidationSucceeded=False`` reason of an overlay in conflict with another of its weight."""
REASON_RUNTIME_VALIDATION = "RuntimeValidation"
"""``ValidationSucceeded=False`` reason of an overlay whose requirements or capacity fail validation."""
CONFLICT_MESSAGE = "conflict with another overlay"
"""Upstream's condition message for a conflict."""

_RESTRICTED_CAPACITY = ("cpu", "memory", "ephemeral-storage", "pods")
_PRICE = re.compile(r"^\d+(\.\d+)?$", re.ASCII)
_ADJUSTMENT = re.compile(r"^(([+-](\d*\.?\d+))|(\+\d*\.?\d+%)|(-\d{1,2}(\.\d+)?%)|(-100%))$", re.ASCII)


def adjusted_price(price: float, change: str) -> float:
    """``price`` (USD/hour) after an overlay's ``price`` or ``priceAdjustment`` text.

    ``"5.0"`` -> 5.0; ``"+0.5"``/``"-0.5"`` -> price +/- 0.5; ``"+10%"``/``"-15%"`` -> price
    * 1.10 / 0.85; the result is never below 0; ``""`` leaves the price (Karpenter
    ``cloudprovider.AdjustedPrice``).

    Raises:
        ValueError: ``change`` is not a number, signed number or signed percentage.
    """
    if not change:
        return price
    if change[0] not in "+-":
        return float(change)
    if change.endswith("%"):
        out = price * (1 + float(change[:-1]) / 100)
    else:
        out = price + float(change)
    return max(out, 0.0)


@dataclass(frozen=True)
class OverlayRule:
    """One NodeOverlay as the store uses it.

    Attributes:
        name: ``metadata.name``.
        weight: ``spec.weight`` (0 when unset).
        requirements: ``spec.requirements``.
        price: the ``price`` or ``priceAdjustment`` text ("" when neither is set).
        absolute: True for ``price`` (replace), False for ``priceAdjustment``.
        capacity: ``spec.capacity`` in internal units.
        capacity_text: ``spec.capacity`` as written (for messages).
    """

    name: str
    weight: int
    requirements: Requirements
    price: str = ""
    absolute: bool = False
    capacity: Mapping[str, int] = field(default_factory=dict)
    capacity_text: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> OverlayRule:
        """Read a NodeOverlay dict (as stored in the cluster).

        Raises:
            ValueError: the runtime validation upstream runs (``RuntimeValidate``): a requirement
                that does not parse (operator, value count), ``NotIn`` without values, a capacity
                naming cpu/memory/ephemeral-storage/pods or not a quantity, a price or adjustment
                not of the CRD's pattern, both set. The message lists every problem.
        """
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        problems: list[str] = []
        reqs = Requirements()
        for i, r in enumerate(spec.get("requirements") or []):
            try:
                op = str(r.get("operator", ""))
                values = [str(v) for v in r.get("values") or []]
                if op in ("In", "NotIn") and not values:
                    raise ValueError(f"key {r.get('key')} with operator {op} must have a value defined")
                reqs.add(Requirement.new(str(r.get("key", "")), op, values))
            except (ValueError, AttributeError) as exc:
                problems.append(f"requirements[{i}]: {exc}")
        capacity_text = {str(k): str(v) for k, v in (spec.get("capacity") or {}).items()}
        capacity: Resources = {}
        for name in sorted(capacity_text):
            if name in _RESTRICTED_CAPACITY:
                problems.append(f"invalid capacity: {name} in resource, restricted")
        try:
            capacity = parse_resource_list({k: v for k, v in capacity_text.items() if k not in _RESTRICTED_CAPACITY})
        except (QuantityError, ValueError) as exc:
            problems.append(f"capacity: {exc}")
        price, adjustment = spec.get("price"), spec.get("priceAdjustment")
        if price is not None and adjustment is not None:
            problems.append("cannot set both 'price' and 'priceAdjustment'")
        if price is not None and not _PRICE.fullmatch(str(price)):
            problems.append(f"price: {price!r} is not a non-negative decimal")
        if adjustment is not None and not _ADJUSTMENT.fullmatch(str(adjustment)):
            problems.append(f"priceAdjustment: {adjustment!r} is not a signed amount or percentage")
        for fname, text in (("price", price), ("priceAdjustment", adjustment)):
            # the CRD's patterns allow any number of digits; float() makes 400 of them inf
            if text is not None and not problems and abs(float(str(text).rstrip("%"))) > MAX_PRICE:
                problems.append(f"{fname}: {text!r} is beyond {MAX_PRICE:,.0f} (USD/hour, or percent), not a price")
        if problems:
            raise ValueError("; ".join(problems))
        return cls(
            name=str(meta.get("name", "")),
            weight=int(spec.get("weight") or 0),
            requirements=reqs,
            price=str(price if price is not None else adjustment if adjustment is not None else ""),
            absolute=price is not None,
            capacity=capacity,
            capacity_text=capacity_text,
        )

    def describe_price(self) -> str:
        return f"price {self.price}" if self.absolute else f"priceAdjustment {self.price}"


def order_by_weight(rules: Iterable[OverlayRule]) -> list[OverlayRule]:
    """Highest weight first; equal weights by name, the later in the alphabet first
    (``NodeOverlayList.OrderByWeight``)."""
    by_name = sorted(rules, key=lambda r: r.name, reverse=True)
    return sorted(by_name, key=lambda r: -r.weight)


@dataclass(frozen=True)
class PoolTypes:
    """One NodePool as the overlays see it: ``name``, template ``labels`` and its (raw,
    un-overlaid) instance types."""

    name: str
    labels: Mapping[str, str]
    instance_types: Sequence[InstanceType]


@dataclass(frozen=True)
class PriceUpdate:
    """The price an offering gets: ``change`` text of ``overlay`` (weight ``weight``), ``absolute``
    for ``price`` (one object per overlay, shared by the offerings it prices)."""

    overlay: str
    weight: int
    change: str
    absolute: bool


@dataclass(frozen=True)
class CapacityUpdate:
    """One resource added to a type: ``quantity`` (internal units) from ``overlay`` (``weight``)."""

    overlay: str
    weight: int
    quantity: int
    text: str


@dataclass
class _TypeUpdate:
    prices: dict[tuple[str, str, str], PriceUpdate] = field(default_factory=dict)
    lowest_weight: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """Per offering, the lowest weight of the overlays that selected it (the conflict check compares with it)."""
    capacity: dict[str, CapacityUpdate] = field(default_factory=dict)
    last_capacity_weight: int | None = None
    last_capacity_resources: frozenset[str] = frozenset()


@dataclass(frozen=True)
class AppliedChange:
    """One change an overlay made to an instance type of a NodePool, for explanations.

    ``kind`` is ``price`` (``zone``, ``capacity_type``, ``before`` and ``after`` USD/hour) or
    ``capacity`` (``resource`` and its ``quantity`` as written)."""

    kind: str
    overlay: str
    weight: int
    instance_type: str
    zone: str = ""
    capacity_type: str = ""
    before: float = 0.0
    after: float = 0.0
    resource: str = ""
    quantity: str = ""

    def text(self) -> str:
        """``price of m5.large on-demand us-east-1a 0.096 -> 0.0864 USD/h by NodeOverlay discount
        (weight 10)`` or ``capacity of m5.large + hugepages-2Mi=1Gi by NodeOverlay hugepages (weight 0)``."""
        if self.kind == "price":
            return (f"price of {self.instance_type} {self.capacity_type} {self.zone} {self.before:g} -> {self.after:g} USD/h "
                    f"by NodeOverlay {self.overlay} (weight {self.weight})")
        return f"capacity of {self.instance_type} + {self.resource}={self.quantity} by NodeOverlay {self.overlay} (weight {self.weight})"


def _offering_key(o: Offering) -> tuple[str, str, str]:
    """An offering's identity within its type: zone, capacity type and (reserved) reservation ID,
    as upstream keys price updates by the offering's requirements."""
    return (o.zone, o.capacity_type, o.reservation_id or "")


def _type_requirements(pool: PoolTypes, it: InstanceType) -> Requirements:
    """``it``'s requirements plus ``karpenter.sh/nodepool`` and the NodePool's template labels."""
    reqs = it.requirements.copy()
    reqs.add(Requirement(LABEL_NODEPOOL, False, frozenset({pool.name})))
    for key, value in pool.labels.items():
        if key not in reqs:
            reqs.add(Requirement(key, False, frozenset({value})))
    return reqs


def _selects(rule: OverlayRule, reqs: Requirements, it: InstanceType) -> list[Offering]:
    """The offerings of ``it`` (whose requirements in its NodePool are ``reqs``) ``rule`` selects;
    empty when it does not select the type."""
    if rule.requirements and reqs.conflict(rule.requirements, allow_undefined=False) is not None:
        return []
    return [o for o in it.offerings if o.compatible(rule.requirements)]


class OverlayStore:
    """What :func:`compile_overlays` decided; applies it to a NodePool's instance types.

    Attributes:
        evaluated: the NodePools the store was computed for.
        invalid: overlay name -> runtime-validation message.
        conflicts: names of overlays in conflict (not applied).
        applied: names of the overlays applied (valid, not in conflict), whether or not they
            selected anything.
    """

    def __init__(self) -> None:
        self._updates: dict[str, dict[str, _TypeUpdate]] = {}
        self.evaluated: frozenset[str] = frozenset()
        self.invalid: dict[str, str] = {}
        self.conflicts: list[str] = []
        self.applied: list[str] = []
        self._cache: dict[tuple[str, str], tuple[InstanceType, InstanceType, tuple[AppliedChange, ...]]] = {}

    def fingerprint(self) -> Any:
        """A value equal for two stores that apply the same updates (to replace a store only when
        its content changed, so caches keyed on the store survive no-op passes)."""
        return (
            self.evaluated,
            tuple(sorted(self.invalid.items())),
            tuple(self.conflicts),
            tuple(sorted(
                (pool, it, tuple(sorted(u.prices.items())), tuple(sorted(u.capacity.items())))
                for pool, types in self._updates.items() for it, u in types.items()
            )),
        )

    def empty(self) -> bool:
        """True when no overlay changes anything."""
        return not any(u.prices or u.capacity for types in self._updates.values() for u in types.values())

    def _apply(self, nodepool: str, it: InstanceType) -> tuple[InstanceType, tuple[AppliedChange, ...]]:
        update = self._updates.get(nodepool, {}).get(it.name)
        if update is None or not (update.prices or update.capacity):
            return it, ()
        cached = self._cache.get((nodepool, it.name))
        if cached is not None and cached[0] is it:
            return cached[1], cached[2]
        changes: list[AppliedChange] = []
        offerings = []
        for o in it.offerings:
            p = update.prices.get(_offering_key(o))
            if p is None:
                offerings.append(o)
                continue
            new_price = adjusted_price(o.price, p.change)
            offerings.append(replace(o, price=new_price))  # reservation fields and all else kept
            changes.append(AppliedChange("price", p.overlay, p.weight, it.name, zone=o.zone, capacity_type=o.capacity_type,
                                         before=o.price, after=new_price))
        capacity = dict(it.capacity)
        for resource, c in sorted(update.capacity.items()):
            capacity[resource] = c.quantity
            changes.append(AppliedChange("capacity", c.overlay, c.weight, it.name, resource=resource, quantity=c.text))
        out = InstanceType(name=it.name, requirements=it.requirements, offerings=offerings, capacity=capacity, overhead=it.overhead)
        self._cache[(nodepool, it.name)] = (it, out, tuple(changes))
        return out, tuple(changes)

    def apply_all(self, nodepool: str, types: Iterable[InstanceType]) -> list[InstanceType]:
        """``types`` of ``nodepool`` with the stored updates applied: a new object for each changed
        type (the same one on every call while the base object is the same), the others as
        given. A NodePool the store did not evaluate gets its types unchanged."""
        return [self._apply(nodepool, it)[0] for it in types]

    def changes(self, nodepool: str, it: InstanceType) -> tuple[AppliedChange, ...]:
        """What the overlays changed on ``it`` (a base instance type) in ``nodepool``."""
        return self._apply(nodepool, it)[1]

    def changes_by_name(self, nodepool: str, instance_type: str) -> tuple[AppliedChange, ...]:
        """:meth:`changes` for an instance type by name (from the last :meth:`apply_all`)."""
        cached = self._cache.get((nodepool, instance_type))
        return cached[2] if cached is not None else ()


def _price_conflicts(store: dict[str, dict[str, _TypeUpdate]], pool: str, it: str, offerings: list[Offering], rule: OverlayRule) -> bool:
    if not rule.price:
        return False
    update = store.get(pool, {}).get(it)
    if update is None:
        return False
    lowest = update.lowest_weight
    return any(lowest.get(_offering_key(o)) == rule.weight for o in offerings)


def _capacity_conflicts(store: dict[str, dict[str, _TypeUpdate]], pool: str, it: str, rule: OverlayRule) -> bool:
    if not rule.capacity:
        return False
    update = store.get(pool, {}).get(it)
    if update is None or update.last_capacity_weight is None or update.last_capacity_weight != rule.weight:
        return False
    return any(r in update.last_capacity_resources for r in rule.capacity)


def _store_rule(store: dict[str, dict[str, _TypeUpdate]], pool: str, it: str, offerings: list[Offering], rule: OverlayRule,
                mine: PriceUpdate | None = None) -> None:
    update = store.setdefault(pool, {}).setdefault(it, _TypeUpdate())
    if rule.price:
        mine = mine or PriceUpdate(rule.name, rule.weight, rule.price, rule.absolute)
        for o in offerings:
            key = _offering_key(o)
            update.prices.setdefault(key, mine)  # the first (highest-weight) overlay keeps the offering
            update.lowest_weight[key] = rule.weight
    if rule.capacity:
        for resource, qty in rule.capacity.items():
            if resource not in update.capacity:
                update.capacity[resource] = CapacityUpdate(rule.name, rule.weight, qty, rule.capacity_text.get(resource, str(qty)))
        update.last_capacity_weight = rule.weight
        update.last_capacity_resources = frozenset(rule.capacity)


def compile_overlays(overlays: Iterable[Mapping[str, Any]], pools: Sequence[PoolTypes]) -> OverlayStore:
    """Evaluate every NodeOverlay object against every NodePool (see the module docstring).

    Args:
        overlays: NodeOverlay dicts (any order).
        pools: each NodePool with its template labels and raw instance types.

    Returns:
        The store; ``invalid`` and ``conflicts`` name the overlays not applied.
    """
    out = OverlayStore()
    rules: list[OverlayRule] = []
    for obj in overlays:
        name = str((obj.get("metadata") or {}).get("name", ""))
        try:
            rules.append(OverlayRule.from_object(obj))
        except ValueError as exc:
            out.invalid[name] = str(exc)
    updates: dict[str, dict[str, _TypeUpdate]] = {}
    typed = [(pool.name, it, _type_requirements(pool, it)) for pool in pools for it in pool.instance_types] if rules else []
    for rule in order_by_weight(rules):
        selected = [(pool, it.name, offs) for pool, it, reqs in typed if (offs := _selects(rule, reqs, it))]
        if any(_price_conflicts(updates, p, it, offs, rule) or _capacity_conflicts(updates, p, it, rule) for p, it, offs in selected):
            out.conflicts.append(rule.name)
            continue
        shared = PriceUpdate(rule.name, rule.weight, rule.price, rule.absolute) if rule.price else None
        for p, it, offs in selected:
            _store_rule(updates, p, it, offs, rule, shared)
        out.applied.append(rule.name)
    out._updates = updates
    out.evaluated = frozenset(pool.name for pool in pools)
    return out


# --------------------------------------------------------------------------- launch

LAUNCH_OVERLAY: contextvars.ContextVar[Callable[[Iterable[InstanceType]], list[InstanceType]] | None] = \
    contextvars.ContextVar("karpy_launch_overlay", default=None)
"""Set by the CloudProvider facade around a ``create`` call while NodeOverlays are on: the
function giving the NodeClaim's NodePool's overlaid instance types. The launch kernel
(:mod:`karpy_core.cloudprovider.launch`) ranks through it, so every provider using the kernel
launches by overlaid prices and capacities, as the AWS provider applies the overlay store in its
``Create`` upstream."""


def overlaid(types: Iterable[InstanceType]) -> Iterable[InstanceType]:
    """``types`` through :data:`LAUNCH_OVERLAY` (unchanged when none is set)."""
    fn = LAUNCH_OVERLAY.get()
    return types if fn is None else fn(types)


@contextmanager
def launch_overlay(store: OverlayStore | None, nodepool: str) -> Iterator[None]:
    """Set :data:`LAUNCH_OVERLAY` to ``store.apply_all(nodepool, ...)`` for the ``with`` body
    (nothing when ``store`` is None or ``nodepool`` empty)."""
    if store is None or not nodepool:
        yield
        return
    token = LAUNCH_OVERLAY.set(lambda types: store.apply_all(nodepool, types))
    try:
        yield
    finally:
        LAUNCH_OVERLAY.reset(token)


# --------------------------------------------------------------------------- the decorator

class OverlaidCalls(CallsDecorator):
    """The NodeOverlay decorator (upstream ``pkg/cloudprovider/overlay``): while a store is set
    (the ``NodeOverlay`` gate is on), ``get_instance_types`` returns the NodePool's overlaid types
    (:meth:`OverlayStore.apply_all`) and ``create`` runs with :data:`LAUNCH_OVERLAY` set to the
    NodeClaim's NodePool's overlay (:func:`launch_overlay`), so the launch kernel ranks overlaid
    prices and capacities.

    Args:
        inner: the calls being decorated (their instance types are the overlays' input).

    Attributes:
        store: the overlay store (None: NodeOverlays off); set by the NodeOverlay controller.
        generation: bumped by :meth:`set_store` when the store's content changes (cache keys).
    """

    def __init__(self, inner: CloudCalls):
        super().__init__(inner)
        self.store: OverlayStore | None = None
        self.generation = 0

    def set_store(self, store: OverlayStore) -> bool:
        """Use ``store`` from now on; True (and :attr:`generation` bumped) when it applies other
        updates than the current one (otherwise only the current one's status fields are refreshed)."""
        current = self.store
        if current is not None and current.fingerprint() == store.fingerprint():
            current.invalid, current.conflicts, current.applied = store.invalid, store.conflicts, store.applied
            return False
        self.store = store
        self.generation += 1
        return True

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """The inner create, ranking the NodeClaim's NodePool's overlaid types."""
        nodepool = nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")
        with launch_overlay(self.store, nodepool):
            return await self.inner.create(nodeclaim)

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """The inner types, overlaid for ``nodepool`` while a store is set."""
        types = await self.inner.get_instance_types(nodepool)
        store = self.store
        return types if store is None else store.apply_all(nodepool.metadata.name or "", types)
