"""The built-in ``simulated`` cloud provider: catalog-driven, in memory, no network.

Registered as the ``simulated`` entry point of the ``karpy.cloudprovider`` group
(``create_plugin``). It is the simulator's default cloud and behaves like Karpenter's KWOK/fake
providers (``kwok/cloudprovider/cloudprovider.go``, ``pkg/cloudprovider/fake``):

* **Catalog**: the EC2 catalog of :mod:`karpy_core.cloudprovider.catalog.aws` for ``region``
  (``us-east-1`` default, or ``ap-northeast-2``; us-east-1 list prices, synthetic spot prices), or
  a KWOK-format file given as ``instance_types_file``.
* **Per NodeClass**: with ``kube``, a NodePool (and its NodeClaims) with an EC2NodeClass gets the
  catalog built with that NodeClass's AMI family (``amiFamily``, else its ``amiSelectorTerms``
  alias) and ``kubelet.maxPods``/``podsPerCore``, unless those are given as provider options.
  Types that can hold no pod under the settings (cpu, memory or pods capacity 0) are not offered;
  provider settings that leave none raise ``ConfigurationError``.
* **Create** launches the cheapest *available* offering compatible with the NodeClaim's
  ``spec.requirements`` among the instance types whose requirements are compatible and whose
  allocatable fits ``spec.resources.requests``; ties break on price, then instance-type name, then
  zone, then capacity type. Provider IDs are ``simulated:///<zone>/i-<8+ hex digits>`` from a
  per-provider counter, so runs are reproducible. Creating a NodeClaim name that already has an
  instance returns that instance (idempotent by name).
* **Delete** removes the instance; deleting again raises ``NodeClaimNotFoundError``, which ends
  karpy's delete loop, as the contract requires.
* **mark_unavailable** models an insufficient-capacity event (Karpenter's unavailable-offerings
  cache): the offering turns ``available=False``, optionally for a TTL measured on ``clock``.
* **Drift**: with a cluster to read NodeClasses from (option ``kube``, a
  :class:`~karpy_core.kube.port.KubeClient`; the simulator passes its in-memory cluster), create
  annotates the instance with ``karpy.sh/nodeclass-hash`` (sha256 of the NodeClass's ``spec``,
  16 hex digits) and ``is_drifted`` reports ``NodeClassDrift`` once the NodeClass's spec hashes
  differently; without it, never drifts. Repair policies are Karpenter KWOK's: Ready False or
  Unknown for 10 minutes.
* **NodeClass status**: with ``kube``, the ``simulated.nodeclass`` loop (``karpy_controllers``)
  marks every served NodeClass of a supported kind ``Ready=True``. Option ``node_classes`` (kind
  names, e.g. ``["EC2NodeClass"]``) narrows the supported kinds, so the simulated cloud touches
  only the NodeClass kind a real one would (and its chart's RBAC grants).
* **Capacity reservations** (option ``reservations``: a list of ``{id, instanceType,
  availabilityZone, instanceCount, reservationType}``, the fields of an EC2NodeClass's
  ``status.capacityReservations`` plus the count): each adds a ``reserved`` offering to its
  instance type in its zone, priced on-demand / 10^7 USD/hour (as Karpenter's AWS provider),
  carrying the reservation ID and the instances it can still launch. A launch into it uses one
  unit until the instance is deleted; a full reservation's offering is unavailable, so a claim
  pinned to it fails with ``InsufficientCapacityError`` and the next one falls back. The
  simulated cloud offers every reservation to every NodePool (no selector terms to match).
* With a **node backend** (option ``node_backend``, e.g.
  :class:`~karpy_core.sim.kwok_nodes.KwokNodeBackend`), every instance is also a Node
  object in a real cluster that kwok runs as a fake kubelet; the backend then *is* the inventory:
  provider IDs are ``simulated:///<zone>/<NodeClaim name>``, so a restarted controller finds the
  instances it launched before and never launches a second one for the same NodeClaim.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, Field

from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    RESERVATION_TYPE_CAPACITY_BLOCK,
    RESERVATION_TYPE_DEFAULT,
    RESERVED_PRICE_DIVISOR,
)
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.catalog.aws import (
    DEFAULT_REGION,
    PRICES_REGION,
    SPOT_DISCOUNT_BASE,
    SPOT_DISCOUNT_SPREAD,
    SUPPORTED_REGIONS,
    AMIFamily,
    AWSCatalogOptions,
    load_aws_catalog,
)
from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.launch import (
    LaunchChoice,
    ProviderID,
    cheapest_launchable,
    launch_constraints,
    reservation_labels,
    stamp_launched,
)
from karpy_core.cloudprovider.options import ProviderOptions, coerce_text
from karpy_core.cloudprovider.types import InstanceType, Offering, RepairPolicy, ready_repair_policies
from karpy_core.errors import ConfigurationError, NodeClaimNotFoundError
from karpy_core.scheduling.requirements import Requirements
from karpy_core.utils.clock import now_function

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.contract import FullCloudProviderPlugin

__all__ = ["PROVIDER_ID_SCHEME", "SUPPORTED_NODE_CLASSES", "SimulatedOptions", "SimulatedProvider", "SimulatedReservation",
           "create_plugin"]

PROVIDER_ID_SCHEME = "simulated"
SUPPORTED_NODE_CLASSES: list[tuple[str, str]] = [
    ("karpenter.k8s.aws", "EC2NodeClass"),
    ("karpenter.kakaocloud.com", "KCNodeClass"),
    ("karpenter.kwok.sh", "KWOKNodeClass"),
]
"""Advertised NodeClass kinds (the first is the default); any ``nodeClassRef`` is accepted."""
KWOK_NODE_CLASS = "KWOKNodeClass"
"""Karpenter's KWOK provider's kind: Ready by its CRD's status default, not by :meth:`SimulatedProvider.reconcile_nodeclasses`."""

log = logging.getLogger(__name__)

NODECLASS_SETTINGS = ("ami_family", "max_pods", "pods_per_core")
"""The catalog settings an EC2NodeClass gives per NodePool (unless set as provider options)."""
_REQUIRED_CAPACITY = ("cpu", "memory", "pods")


def offerable(it: InstanceType) -> bool:
    """Whether a type can run a pod at all: positive ``cpu``, ``memory`` and ``pods`` capacity.

    Karpenter's AWS provider does not offer a type whose ENIs are all reserved (``RESERVED_ENIS``)
    or that ends with no pods; settings such as ``max_pods=0`` or ``vm_memory_overhead_percent``
    close to 1 leave such types here, and the simulated cloud leaves them out likewise."""
    return all(it.capacity.get(name, 0) > 0 for name in _REQUIRED_CAPACITY)


def _filter_offerable(types: list[InstanceType], what: str) -> list[InstanceType]:
    kept = [it for it in types if offerable(it)]
    if len(kept) != len(types):
        log.debug("simulated provider: %s: %d instance types can hold no pod and are not offered: %s", what,
                  len(types) - len(kept), ", ".join(it.name for it in types if not offerable(it))[:500])
    return kept


def nodeclass_settings(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The catalog settings an EC2NodeClass object (a mapping as read from the cluster) implies:
    ``ami_family`` from ``spec.amiFamily`` or else the ``amiSelectorTerms`` alias (``al2023@latest``
    -> ``AL2023``), ``max_pods``/``pods_per_core`` from ``spec.kubelet.maxPods``/``podsPerCore``.
    Absent or malformed fields are left out (the API server's validation is not repeated here)."""
    found = obj.get("spec")
    spec: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    out: dict[str, Any] = {}
    family = spec.get("amiFamily")
    if not isinstance(family, str) or family not in AMIFamily.ALL:
        family = None
        terms = spec.get("amiSelectorTerms")
        for term in terms if isinstance(terms, list) else []:
            alias = term.get("alias") if isinstance(term, Mapping) else None
            if isinstance(alias, str):
                family = AMIFamily.BY_ALIAS.get(alias.split("@", 1)[0])
                break
    if family is not None:
        out["ami_family"] = family
    kubelet = spec.get("kubelet") or {}
    for key, name in (("maxPods", "max_pods"), ("podsPerCore", "pods_per_core")):
        value = kubelet.get(key) if isinstance(kubelet, Mapping) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[name] = value
    return out


ANNOTATION_NODECLASS_HASH = "karpy.sh/nodeclass-hash"
"""The simulated provider's record of the NodeClass spec an instance was launched with."""
DRIFT_NODECLASS = "NodeClassDrift"

OfferingKey = tuple[str, str, str]
"""(instance type, zone, capacity type)."""


class SimulatedReservation(BaseModel):
    """One simulated EC2 capacity reservation (option ``reservations``), in the shape of an
    EC2NodeClass's ``status.capacityReservations`` entry plus its size."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    id: str = Field(pattern=r"^cr-[0-9a-z]+$")
    """The reservation's ID, ``cr-`` and lower-case hex/letters."""
    instance_type: str = Field(alias="instanceType")
    """The instance type it reserves (must be in the catalog)."""
    availability_zone: str = Field(alias="availabilityZone")
    """The zone it is in (the type must be offered there)."""
    instance_count: int = Field(alias="instanceCount", ge=0)
    """How many instances it holds in all."""
    reservation_type: str = Field(default=RESERVATION_TYPE_DEFAULT, alias="reservationType",
                                  pattern=f"^({RESERVATION_TYPE_DEFAULT}|{RESERVATION_TYPE_CAPACITY_BLOCK})$")
    """``default`` or ``capacity-block``."""


class NodeBackend(Protocol):
    """Where simulated instances live besides memory (see the module docstring)."""

    async def find(self, nodeclaim_name: str) -> NodeClaim | None:
        """The launched NodeClaim for an instance already registered for this claim, or None."""
        ...

    async def register(self, launched: NodeClaim) -> None:
        """Make the instance exist (create its Node)."""
        ...

    async def deregister(self, provider_id: str) -> bool:
        """Terminate; False when it was already gone."""
        ...

    async def list(self) -> list[NodeClaim]:
        """Every instance, as launched NodeClaims."""
        ...


class SimulatedProvider:
    """An in-memory cloud over a static catalog. Use :func:`create_plugin` to build one.

    Args:
        region: ``us-east-1`` or ``ap-northeast-2`` (AWS catalog only).
        instance_types_file: a KWOK-format catalog to use instead of the AWS catalog.
        clock: returns now in seconds (``time.time`` by default); only unavailability TTLs read it.
        catalog_options: AWS capacity/overhead settings (ignored with ``instance_types_file``).

    Raises:
        ConfigurationError: unsupported region or unreadable/malformed catalog file.
    """

    def __init__(
        self,
        *,
        region: str = DEFAULT_REGION,
        instance_types_file: str | None = None,
        clock: Callable[[], float] | Any = None,
        catalog_options: AWSCatalogOptions | None = None,
        node_backend: NodeBackend | None = None,
        kube: Any = None,
        node_classes: list[str] | None = None,
        reservations: list[SimulatedReservation] | None = None,
        fixed_settings: frozenset[str] = frozenset(),
    ):
        self._options = catalog_options or AWSCatalogOptions()
        self._fixed = frozenset(fixed_settings)
        if instance_types_file:
            base = load_kwok_catalog(instance_types_file)
        else:
            if region not in SUPPORTED_REGIONS:
                raise ConfigurationError(
                    f"simulated provider: region {region!r} (--region) is not supported; use one of "
                    f"{', '.join(SUPPORTED_REGIONS)}"
                )
            base = _filter_offerable(load_aws_catalog(region, self._options), "catalog")
            if not base:
                raise ConfigurationError(f"simulated provider: {_settings_text(self._options)} leaves no instance type "
                                         "that can hold a pod (cpu, memory and pods capacity > 0)")
        self.region = region
        self.instance_types_file = instance_types_file
        self._now = now_function(clock, "simulated provider")
        self._base: dict[str, InstanceType] = {it.name: it for it in base}
        # Our own list (returned by get_instance_types, same object every call). Elements are the
        # shared catalog objects until an offering of theirs changes (copy on write).
        self._instance_types: list[InstanceType] = list(base)
        self._position = {it.name: i for i, it in enumerate(self._instance_types)}
        self._unavailable: dict[OfferingKey, float | None] = {}
        self._instances: dict[str, NodeClaim] = {}
        self._by_claim_name: dict[str, str] = {}
        self._launched = 0
        self._variants: dict[AWSCatalogOptions, dict[str, InstanceType]] = {}
        self._views: dict[AWSCatalogOptions, tuple[list[InstanceType], list[InstanceType]]] = {}
        self.node_backend = node_backend
        self.kube = kube
        if node_classes is not None:
            unknown = sorted(set(node_classes) - {kind for _, kind in SUPPORTED_NODE_CLASSES})
            if unknown or not node_classes:
                raise ConfigurationError(
                    f"simulated provider: node_classes must name some of "
                    f"{', '.join(kind for _, kind in SUPPORTED_NODE_CLASSES)}, not {node_classes!r}"
                )
        self.node_classes = [(g, k) for g, k in SUPPORTED_NODE_CLASSES if node_classes is None or k in node_classes]
        self.reservations: dict[str, SimulatedReservation] = {}
        self._reservation_use: dict[str, set[str]] = {}
        """Reservation ID -> provider IDs of the instances launched into it."""
        for r in reservations or ():
            self.add_reservation(r)

    # ------------------------------------------------------------------ capacity reservations
    def add_reservation(self, reservation: SimulatedReservation | Mapping[str, Any]) -> None:
        """Add (or resize) a capacity reservation; see the module docstring.

        Raises:
            ConfigurationError: the instance type is not in the catalog or has no on-demand
                offering in the reservation's zone (no price to derive), or the entry is malformed.
        """
        r = reservation if isinstance(reservation, SimulatedReservation) else SimulatedReservation.model_validate(reservation)
        base = self._base.get(r.instance_type)
        if base is None:
            raise ConfigurationError(f"simulated provider: reservations: {r.id}: no instance type {r.instance_type!r} in the catalog")
        if not any(o.zone == r.availability_zone and o.capacity_type == CAPACITY_TYPE_ON_DEMAND for o in base.offerings):
            raise ConfigurationError(f"simulated provider: reservations: {r.id}: {r.instance_type} has no on-demand offering "
                                     f"in zone {r.availability_zone!r}")
        self.reservations[r.id] = r
        self._reservation_use.setdefault(r.id, set())
        self._refresh(r.instance_type)

    def reservation_available(self, reservation_id: str) -> int:
        """Instances the reservation can still launch (0 for an unknown ID)."""
        r = self.reservations.get(reservation_id)
        return 0 if r is None else max(0, r.instance_count - len(self._reservation_use.get(reservation_id, ())))

    def _reserved_offerings(self, base: InstanceType) -> list[Offering]:
        out = []
        for r in sorted(self.reservations.values(), key=lambda r: r.id):
            if r.instance_type != base.name:
                continue
            od = next(o for o in base.offerings if o.zone == r.availability_zone and o.capacity_type == CAPACITY_TYPE_ON_DEMAND)
            left = self.reservation_available(r.id)
            marked = (base.name, r.availability_zone, CAPACITY_TYPE_RESERVED) in self._unavailable
            out.append(Offering(r.availability_zone, CAPACITY_TYPE_RESERVED, od.price / RESERVED_PRICE_DIVISOR,
                                left > 0 and not marked, reservation_id=r.id, reservation_capacity=left,
                                reservation_type=r.reservation_type))
        return out

    @property
    def pricing_note(self) -> str:
        """One line saying where prices come from, for reports."""
        if self.instance_types_file:
            return f"prices from the catalog file {self.instance_types_file} (USD/hour)"
        return (
            f"on-demand: {PRICES_REGION} Linux list prices (USD/hour) applied in {self.region}; "
            f"spot: synthetic, on-demand x ({SPOT_DISCOUNT_BASE:.2f} + {SPOT_DISCOUNT_SPREAD:.2f} x h), "
            'h from sha256("<type>/<zone>")'
        )

    # ------------------------------------------------------------------ simulation controls
    @property
    def instance_types(self) -> list[InstanceType]:
        """The live catalog (with current availability); do not mutate."""
        self._sweep()
        return self._instance_types

    def mark_unavailable(
        self, instance_type: str, zone: str, capacity_type: str, ttl_seconds: float | None = None
    ) -> None:
        """Make one offering unavailable, as an insufficient-capacity error would (Karpenter keeps
        such offerings out for ``UnavailableOfferingsTTL`` = 180 s; pass ``ttl_seconds=180`` to model
        that, or None to keep it unavailable until :meth:`mark_available`).

        Raises:
            ValueError: the catalog has no such instance type or offering.
        """
        base = self._base.get(instance_type)
        if base is None:
            raise ValueError(f"simulated provider: no instance type {instance_type!r} in the catalog")
        if not any(o.zone == zone and o.capacity_type == capacity_type for o in base.offerings):
            raise ValueError(f"simulated provider: {instance_type} has no {capacity_type} offering in zone {zone!r}")
        self._unavailable[(instance_type, zone, capacity_type)] = (
            None if ttl_seconds is None else self._now() + ttl_seconds
        )
        self._refresh(instance_type)

    def mark_available(self, instance_type: str, zone: str | None = None, capacity_type: str | None = None) -> None:
        """Undo :meth:`mark_unavailable` for matching offerings (None matches any zone/capacity
        type). Offerings the catalog itself lists as unavailable (no price) stay unavailable."""
        keys = [
            k
            for k in self._unavailable
            if k[0] == instance_type and zone in (None, k[1]) and capacity_type in (None, k[2])
        ]
        for k in keys:
            del self._unavailable[k]
        if keys:
            self._refresh(instance_type)

    def _sweep(self) -> None:
        if not self._unavailable:
            return
        now = self._now()
        expired = [k for k, until in self._unavailable.items() if until is not None and until <= now]
        for k in expired:
            del self._unavailable[k]
        for name in sorted({k[0] for k in expired}):
            self._refresh(name)

    def _refresh(self, name: str) -> None:
        base = self._base[name]
        marked = {(z, ct) for (n, z, ct) in self._unavailable if n == name}
        reserved = self._reserved_offerings(base) if self.reservations else []
        if not marked and not reserved:
            self._instance_types[self._position[name]] = base
            return
        it = copy.copy(base)
        it.offerings = [
            Offering(o.zone, o.capacity_type, o.price, False) if (o.zone, o.capacity_type) in marked else o
            for o in base.offerings
        ] + reserved
        if reserved:  # the capacity-type requirement lists every offering's value (InstanceType.__post_init__)
            it.requirements = base.requirements.copy()
            it.requirements.by_key.pop(LABEL_CAPACITY_TYPE, None)
            it.__post_init__()
        self._instance_types[self._position[name]] = it

    # ------------------------------------------------------------------ launch decision
    def _candidates(self, reqs: Requirements, types: list[InstanceType]) -> list[InstanceType]:
        it_req = reqs.get(LABEL_INSTANCE_TYPE)
        if it_req is not None and not it_req.complement and types is self._instance_types:
            return [types[self._position[n]] for n in sorted(it_req.values) if n in self._position]
        if it_req is not None and not it_req.complement:
            wanted = set(it_req.values)
            return sorted((it for it in types if it.name in wanted), key=lambda it: it.name)
        return types

    def _choose(self, nodeclaim: NodeClaim, types: list[InstanceType]) -> LaunchChoice:
        constraints = launch_constraints(nodeclaim)
        return cheapest_launchable(self._candidates(constraints.requirements, types), constraints)

    # ------------------------------------------------------------------ per-NodeClass catalogs
    async def _options_for(self, kind: str, name: str) -> AWSCatalogOptions:
        """The catalog settings for a NodeClass: the provider's, with an EC2NodeClass's AMI family
        and kubelet ``maxPods``/``podsPerCore`` (:func:`nodeclass_settings`) in place of those not
        given as provider options. The provider's own without ``kube``, for another kind, an
        unreadable NodeClass or a KWOK-format catalog file."""
        if self.kube is None or self.instance_types_file or kind != "EC2NodeClass":
            return self._options
        try:
            obj = await self.kube.get(kind, name)
        except Exception:  # missing NodeClass or a kind the cluster does not serve: provider defaults
            return self._options
        given = {k: v for k, v in nodeclass_settings(obj).items() if k not in self._fixed}
        if all(getattr(self._options, k) == v for k, v in given.items()):
            return self._options
        return dataclasses.replace(self._options, **given)

    def _view(self, options: AWSCatalogOptions) -> list[InstanceType]:
        """The live catalog (availability, reservations) as built with ``options``: capacity,
        overhead and requirements from ``options``' catalog, offerings from the live one; types
        that can hold no pod under ``options`` are left out. The same list while nothing changes."""
        live = self.instance_types
        if options == self._options:
            return live
        variant = self._variants.get(options)
        if variant is None:
            kept = _filter_offerable(load_aws_catalog(self.region, options), _settings_text(options))
            variant = self._variants[options] = {it.name: it for it in kept}
        cached = self._views.get(options)
        if cached is not None and len(cached[0]) == len(live) and all(a is b for a, b in zip(cached[0], live, strict=True)):
            return cached[1]
        out: list[InstanceType] = []
        for it in live:
            v = variant.get(it.name)
            if v is None:
                continue
            base = self._base[it.name]
            if it is not base:
                v = copy.copy(v)
                v.offerings = it.offerings
                if it.requirements is not base.requirements:  # reserved offerings: recompute capacity types
                    v.requirements = variant[it.name].requirements.copy()
                    v.requirements.by_key.pop(LABEL_CAPACITY_TYPE, None)
                    v.__post_init__()
            out.append(v)
        self._views[options] = (list(live), out)
        return out

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def karpy_name(self) -> str:
        return "simulated"

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        return list(self.node_classes)

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch the cheapest compatible available offering; see the module docstring.

        Raises:
            InsufficientCapacityError: nothing compatible is available.
            CreateError: the NodeClaim's requirements or requests cannot be parsed.
        """
        self._sweep()
        claim_name = nodeclaim.metadata.name
        if claim_name and claim_name in self._by_claim_name:
            return self._instances[self._by_claim_name[claim_name]].model_copy(deep=True)
        if self.node_backend is not None and claim_name:
            existing = await self.node_backend.find(claim_name)
            if existing is not None:
                return existing
        ref = nodeclaim.spec.node_class_ref
        types = self._view(await self._options_for(ref.kind, ref.name))
        choice = self._choose(nodeclaim, types)
        it, offering = choice.instance_type, choice.offering
        self._launched += 1
        instance_id = claim_name if self.node_backend is not None and claim_name else f"i-{self._launched:08x}"
        provider_id = str(ProviderID(PROVIDER_ID_SCHEME, offering.zone, instance_id))
        nodeclass_hash = await self._nodeclass_hash(nodeclaim)
        launched = stamp_launched(
            nodeclaim, it, zone=offering.zone, capacity_type=offering.capacity_type, provider_id=provider_id,
            labels=reservation_labels(offering),
            annotations={ANNOTATION_NODECLASS_HASH: nodeclass_hash} if nodeclass_hash is not None else None,
        )
        if offering.reserved and offering.reservation_id is not None:
            self._reservation_use[offering.reservation_id].add(provider_id)
            self._refresh(it.name)
        if self.node_backend is not None:
            await self.node_backend.register(launched)
            return launched.model_copy(deep=True)
        self._instances[provider_id] = launched
        if claim_name:
            self._by_claim_name[claim_name] = provider_id
        return launched.model_copy(deep=True)

    def adopt(self, nodeclaim: NodeClaim) -> bool:
        """Record an instance that exists already (a live cluster's NodeClaim read by ``karpy
        simulate --from-cluster``), under its own ``status.providerID`` whatever its scheme
        (``aws:///``, ``kwok://``...), so :meth:`karpy_get`, :meth:`karpy_list` and
        :meth:`karpy_delete` treat it as one this cloud launched. Nothing is launched and no
        reservation unit is taken. Returns False (nothing recorded) when the claim has no
        provider ID or another claim holds that ID already."""
        provider_id = nodeclaim.status.provider_id
        if not provider_id or provider_id in self._instances:
            return False
        self._instances[provider_id] = nodeclaim.model_copy(deep=True)
        if nodeclaim.metadata.name:
            self._by_claim_name[nodeclaim.metadata.name] = provider_id
        return True

    def _free_reservation(self, provider_id: str) -> None:
        for rid, used in self._reservation_use.items():
            if provider_id in used:
                used.discard(provider_id)
                self._refresh(self.reservations[rid].instance_type)

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate the instance (its reservation unit, if any, is free again); raises
        ``NodeClaimNotFoundError`` when it is already gone."""
        provider_id = nodeclaim.status.provider_id
        if provider_id:
            self._free_reservation(provider_id)
        if self.node_backend is not None:
            if not provider_id or not await self.node_backend.deregister(provider_id):
                raise NodeClaimNotFoundError(f"NodeClaim {nodeclaim.metadata.name}: instance {provider_id or '(none)'} is gone")
            return
        launched = self._instances.pop(provider_id, None) if provider_id else None
        if launched is None:
            who = nodeclaim.metadata.name or "<unnamed>"
            raise NodeClaimNotFoundError(f"NodeClaim {who}: no simulated instance {provider_id or '(no providerID)'}")
        claim_name = launched.metadata.name
        if claim_name and self._by_claim_name.get(claim_name) == provider_id:
            del self._by_claim_name[claim_name]

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        if self.node_backend is not None:
            for claim in await self.node_backend.list():
                if claim.status.provider_id == provider_id:
                    return claim
            raise NodeClaimNotFoundError(f"no simulated instance {provider_id}")
        launched = self._instances.get(provider_id)
        if launched is None:
            raise NodeClaimNotFoundError(f"no simulated instance {provider_id}")
        return launched.model_copy(deep=True)

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        if self.node_backend is not None:
            return await self.node_backend.list()
        return [self._instances[pid].model_copy(deep=True) for pid in sorted(self._instances)]

    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Every catalog type that can hold a pod, including unavailable ones, as the NodePool's
        EC2NodeClass shapes them (:meth:`_options_for`); the same list object while nothing changes."""
        if nodepool is None:  # callers that ask for the catalog itself (no NodePool to shape it)
            return self.instance_types
        ref = nodepool.spec.template.spec.node_class_ref
        return self._view(await self._options_for(ref.kind, ref.name))

    async def _nodeclass_hash(self, nodeclaim: NodeClaim) -> str | None:
        """sha256 (16 hex digits) of the claim's NodeClass ``spec``, or None without a ``kube``
        or when the NodeClass cannot be read."""
        if self.kube is None:
            return None
        ref = nodeclaim.spec.node_class_ref
        try:
            obj = await self.kube.get(ref.kind, ref.name)
        except Exception:  # missing NodeClass or a kind the cluster does not serve: no drift signal
            return None
        text = json.dumps(obj.get("spec") or {}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    async def reconcile_nodeclasses(self) -> int:
        """Give every NodeClass of a supported kind the cluster serves a ``Ready=True`` condition
        (a simulated cloud has nothing to resolve), so ``kubectl get ec2nodeclass`` reads as it
        would on AWS. Needs ``kube``; returns how many NodeClasses were patched.

        Not KWOKNodeClass: Karpenter's KWOK provider sets no NodeClass status; the CRD's ``status``
        default (one ``Ready=True``, :mod:`karpy_core.apis.kwoknodeclass`) makes it Ready, and a
        status someone writes (``Ready=False``) stands, as it does under Karpenter."""
        from karpy_core.kube.port import KINDS
        from karpy_core.utils.clock import iso

        if self.kube is None:
            return 0
        patched = 0
        for _, kind in self.node_classes:
            if kind not in KINDS or kind == KWOK_NODE_CLASS:
                continue
            for obj in await self.kube.list(kind):
                meta = obj["metadata"]
                conds = (obj.get("status") or {}).get("conditions") or []
                ready = next((c for c in conds if c.get("type") == "Ready"), None)
                if ready is not None and ready.get("status") == "True" and ready.get("observedGeneration") == meta.get("generation"):
                    continue
                cond = {"type": "Ready", "status": "True", "reason": "Ready", "message": "simulated cloud: nothing to resolve",
                        "lastTransitionTime": iso(self._now())}
                if meta.get("generation") is not None:
                    cond["observedGeneration"] = meta["generation"]
                others = [c for c in conds if c.get("type") != "Ready"]
                await self.kube.patch(kind, meta["name"], {"status": {"conditions": [*others, cond]}}, status=True)
                patched += 1
        return patched

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        """Read NodeClasses from ``context.kube`` unless the ``kube`` option named a client (the
        simulator's in-memory cluster, for a plugin built without one)."""
        if self.kube is None:
            self.kube = context.kube

    @hookimpl
    async def karpy_start(self) -> None:
        """Nothing to discover: the catalog is local."""

    @hookimpl
    async def karpy_close(self) -> None:
        """Nothing to close: no cloud client."""

    @hookimpl
    def karpy_pricing_note(self) -> str:
        """:attr:`pricing_note`."""
        return self.pricing_note

    @hookimpl
    def karpy_controllers(self) -> list[ControllerLoop]:
        """With ``kube``: one loop that keeps NodeClasses Ready (:meth:`reconcile_nodeclasses`, every 10 s)."""
        if self.kube is None:
            return []
        from karpy_core.utils.loops import every

        async def nodeclasses() -> None:
            await every(10.0, "simulated.nodeclass", self.reconcile_nodeclasses)

        return [("simulated.nodeclass", nodeclasses)]

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``NodeClassDrift`` when the instance's ``karpy.sh/nodeclass-hash`` differs from its
        NodeClass's spec now (needs option ``kube``); ``""`` otherwise."""
        have = nodeclaim.metadata.annotations.get(ANNOTATION_NODECLASS_HASH)
        if not have:
            return ""
        want = await self._nodeclass_hash(nodeclaim)
        return DRIFT_NODECLASS if want is not None and want != have else ""

    @hookimpl
    def karpy_repair_policies(self) -> list[RepairPolicy]:
        """Karpenter's KWOK provider's policies: Ready False or Unknown for 10 minutes."""
        return ready_repair_policies(600)


def _settings_text(options: AWSCatalogOptions) -> str:
    """The pod/memory settings that differ from the defaults, e.g. ``reserved_enis=3, max_pods=0``."""
    default = AWSCatalogOptions()
    names = ("reserved_enis", "max_pods", "pods_per_core", "vm_memory_overhead_percent", "ami_family")
    changed = [f"{n}={getattr(options, n)}" for n in names if getattr(options, n) != getattr(default, n)]
    return ", ".join(changed) or "the default settings"


if TYPE_CHECKING:
    _conforms: type[FullCloudProviderPlugin] = SimulatedProvider  # mypy checks every hook's signature


class SimulatedOptions(ProviderOptions):
    """The ``simulated`` provider's options (see :func:`create_plugin`); every
    :class:`~karpy_core.cloudprovider.catalog.aws.AWSCatalogOptions` field is accepted too and
    validated by it."""

    provider: ClassVar[str] = "simulated"
    passthrough: ClassVar[frozenset[str]] = frozenset(f.name for f in fields(AWSCatalogOptions))
    objects: ClassVar[frozenset[str]] = frozenset({"clock", "node_backend", "kube"})

    region: str | None = None
    instance_types_file: str | None = None
    clock: Any = None
    node_backend: Any = None
    kube: Any = None
    node_classes: list[str] | None = None
    reservations: list[SimulatedReservation] | None = None

    def catalog_options(self) -> AWSCatalogOptions:
        """The catalog settings given (defaults for the rest).

        Settings typed on the command line (``--provider-option max_pods=20``) are read as the
        dataclass declares them (:func:`~karpy_core.cloudprovider.options.coerce_text`).

        Raises:
            ConfigurationError: a catalog setting is invalid (e.g. an unknown ``ami_family``, a
                ``max_pods`` that is not an integer).
        """
        hints = get_type_hints(AWSCatalogOptions)
        given = {name: coerce_text(self.provider, name, hints[name], value) for name, value in self.extra().items()}
        return AWSCatalogOptions(**given)


def create_plugin(options: Mapping[str, Any] | None = None) -> SimulatedProvider:
    """Entry-point factory (``karpy.cloudprovider`` group, name ``simulated``).

    Options (:class:`SimulatedOptions`): ``region`` (``us-east-1`` | ``ap-northeast-2``),
    ``instance_types_file`` (KWOK-format path; overrides the AWS catalog), ``clock`` (callable
    returning seconds, or an object with ``now()``), and any
    :class:`~karpy_core.cloudprovider.catalog.aws.AWSCatalogOptions` field (``ami_family``,
    ``max_pods``, ``vm_memory_overhead_percent``, ``kube_reserved``...), ``node_backend`` (see the
    module docstring), ``kube`` (a KubeClient to read NodeClasses from, for NodeClass drift; the
    simulator fills it in with its in-memory cluster) and ``node_classes`` (the NodeClass kinds
    accepted; default all of :data:`SUPPORTED_NODE_CLASSES`) and ``reservations`` (a list of
    :class:`SimulatedReservation` mappings, or their JSON on the command line).

    Raises:
        ConfigurationError: unknown option, unsupported region, bad catalog settings or file.
    """
    opts = SimulatedOptions.parse(options)
    return SimulatedProvider(
        region=opts.region or DEFAULT_REGION,
        instance_types_file=opts.instance_types_file,
        clock=opts.clock,
        catalog_options=opts.catalog_options(),
        node_backend=opts.node_backend,
        kube=opts.kube,
        node_classes=opts.node_classes,
        reservations=opts.reservations,
        fixed_settings=frozenset(k for k in opts.extra() if k in NODECLASS_SETTINGS),
    )
