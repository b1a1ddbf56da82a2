"""Instance types from DescribeInstanceTypes + DescribeInstanceTypeOfferings, built through the
shared catalog rules (:mod:`karpy_core.cloudprovider.catalog.aws`: capacity, overhead, labels).

* :func:`spec_from_describe` projects one ``ec2.InstanceTypeInfo`` onto the catalog's
  :class:`~karpy_core.cloudprovider.catalog.aws.InstanceTypeSpec`; the catalog's
  :func:`~karpy_core.cloudprovider.catalog.aws.build_instance_type` then does all the maths, so
  there is one implementation of Karpenter's AWS instance-type model in karpy.
* :class:`InstanceTypeProvider` caches the raw DescribeInstanceTypes/Offerings answers for
  ``refresh_seconds`` (12 h, Karpenter's instance-type controller) in an :class:`InstanceTypeData`
  that several providers may share (moto's unfiltered DescribeInstanceTypes takes ~3 s), and the
  built InstanceTypes per (NodeClass options, zones, prices) until prices change.
* Zones = offering zones ∩ zones of the NodeClass's resolved subnets. Offerings: on-demand and
  spot per zone (``SupportedUsageClasses``), priced by :class:`~karpy_aws.pricing.PricingProvider`,
  ``available=False`` when unpriced or in the unavailable-offerings cache.
* Reserved offerings (``ReservedCapacity`` gate, karpenter-provider-aws
  ``ReservedCapacityResolver``): one per entry of the NodeClass's ``status.capacityReservations``
  whose instance type and zone are offered, capacity type ``reserved``, priced on-demand / 10^7
  USD/hour, carrying the reservation ID and type and the instances it can still launch
  (:class:`~karpy_aws.capacityreservation.CapacityReservations`); unavailable when none are left
  or the reservation is ``expiring``. They are added after the cached build, so counts are live.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from karpy_aws.errors import call
from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    RESERVED_PRICE_DIVISOR,
)
from karpy_core.cloudprovider.catalog.aws import (
    AMIFamily,
    AWSCatalogOptions,
    GPUInfo,
    InstanceTypeSpec,
    build_instance_type,
    load_type_details,
    register_aws_labels,
)
from karpy_core.cloudprovider.types import InstanceType, Offering
from karpy_core.utils.quantity import to_internal

if TYPE_CHECKING:
    from karpy_aws.apis import EC2NodeClass
    from karpy_aws.cache import UnavailableOfferings
    from karpy_aws.capacityreservation import CapacityReservations
    from karpy_aws.clients import AWSClients
    from karpy_aws.pricing import PricingProvider

__all__ = [
    "LABEL_ZONE_ID",
    "INSTANCE_TYPE_REFRESH_SECONDS",
    "InstanceTypeData",
    "InstanceTypeProvider",
    "spec_from_describe",
    "catalog_options_for",
    "FAMILY_ROOT_DEVICE",
]

LABEL_ZONE_ID = "topology.k8s.aws/zone-id"
INSTANCE_TYPE_REFRESH_SECONDS = 12 * 3600.0

_AWS_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}

FAMILY_ROOT_DEVICE = {
    AMIFamily.AL2: "/dev/xvda",
    AMIFamily.AL2023: "/dev/xvda",
    AMIFamily.BOTTLEROCKET: "/dev/xvdb",
    AMIFamily.WINDOWS2019: "/dev/sda1",
    AMIFamily.WINDOWS2022: "/dev/sda1",
    AMIFamily.WINDOWS2025: "/dev/sda1",
}
"""The device whose volume backs ephemeral storage per AMI family (Bottlerocket: the data volume)."""


def spec_from_describe(info: Mapping[str, Any], on_demand_price: float | None) -> InstanceTypeSpec | None:
    """Project an ``InstanceTypeInfo`` (DescribeInstanceTypes) onto an :class:`InstanceTypeSpec`.

    None when Karpenter could not launch the type (no x86_64/arm64). ENIs are those of the
    default network card; GPU memory is per device; Neuron devices from ``NeuronInfo`` or
    ``InferenceAcceleratorInfo``.
    """
    archs = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    arch = next((_AWS_TO_KUBE_ARCH[a] for a in archs if a in _AWS_TO_KUBE_ARCH), None)
    if arch is None:
        return None
    net = info.get("NetworkInfo") or {}
    cards = net.get("NetworkCards") or []
    default_index = int(net.get("DefaultNetworkCardIndex") or 0)
    card = next((c for c in cards if int(c.get("NetworkCardIndex", 0)) == default_index), None)
    max_enis = int((card or {}).get("MaximumNetworkInterfaces") or net.get("MaximumNetworkInterfaces") or 0)
    gpus = tuple(
        GPUInfo(name=str(g.get("Name") or ""), manufacturer=str(g.get("Manufacturer") or ""), count=int(g.get("Count") or 0),
                memory_mib=int((g.get("MemoryInfo") or {}).get("SizeInMiB") or 0))
        for g in (info.get("GpuInfo") or {}).get("Gpus") or []
    )
    neuron = sum(int(d.get("Count") or 0) for d in (info.get("NeuronInfo") or {}).get("NeuronDevices") or [])
    if not neuron:
        neuron = sum(int(a.get("Count") or 0) for a in (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
                     if str(a.get("Manufacturer", "")).upper() == "AWS")
    storage = info.get("InstanceStorageInfo") or {}
    local = int(storage.get("TotalSizeInGB") or 0)
    hypervisor = "" if info.get("BareMetal") else str(info.get("Hypervisor") or "")
    ebs = info.get("EbsInfo") or {}
    optimized = ebs.get("EbsOptimizedInfo") or {}
    cpu = info.get("ProcessorInfo")
    name = str(info["InstanceType"])
    return InstanceTypeSpec(
        name=name,
        vcpu=int((info.get("VCpuInfo") or {}).get("DefaultVCpus") or 0),
        memory_mib=int((info.get("MemoryInfo") or {}).get("SizeInMiB") or 0),
        architecture=arch,
        max_enis=max_enis,
        ipv4_per_eni=int(net.get("Ipv4AddressesPerInterface") or 0),
        hypervisor=hypervisor,
        gpus=gpus,
        local_storage_gb=local,
        local_nvme=local > 0 and storage.get("NvmeSupport") in ("required", "supported"),
        neuron_devices=neuron,
        efa_interfaces=int((net.get("EfaInfo") or {}).get("MaximumEfaInterfaces") or 0),
        usage_classes=tuple(info.get("SupportedUsageClasses") or ()),
        on_demand_price=on_demand_price,
        # as Karpenter's computeRequirements: the bandwidth from its generated table, the rest from EC2
        network_bandwidth_mbps=(load_type_details().get(name) or {}).get("network_bandwidth_mbps"),
        ebs_bandwidth_mbps=int(optimized["MaximumBandwidthInMbps"])
        if ebs.get("EbsOptimizedSupport") == "default" and optimized.get("MaximumBandwidthInMbps") is not None else None,
        sustained_clock_mhz=round(float(cpu.get("SustainedClockSpeedInGhz") or 0) * 1000) if cpu is not None else None,
        encryption_in_transit=bool(net.get("EncryptionInTransitSupported")),
    )


def _volume_size(size: str | None) -> str | None:
    if not size:
        return None
    return size


def catalog_options_for(nodeclass: EC2NodeClass, vm_memory_overhead_percent: float, reserved_enis: int = 0) -> AWSCatalogOptions:
    """The catalog settings an EC2NodeClass and the controller's ``VM_MEMORY_OVERHEAD_PERCENT`` /
    ``RESERVED_ENIS`` imply: AMI family, kubelet maxPods/podsPerCore/
    reserved/evictionHard, the ephemeral volume (root-volume mapping, else the family's device,
    else the last mapping for Custom, else 20Gi) and ``instanceStorePolicy``."""
    spec = nodeclass.spec
    family = spec.resolved_ami_family()
    kubelet = spec.kubelet
    ephemeral = "20Gi"
    mappings = spec.block_device_mappings or []
    chosen = next((m for m in mappings if m.root_volume), None)
    if chosen is None:
        device = FAMILY_ROOT_DEVICE.get(family)
        chosen = next((m for m in mappings if device and m.device_name == device), None)
    if chosen is None and family == AMIFamily.CUSTOM and mappings:
        chosen = mappings[-1]
    if chosen is not None and chosen.ebs is not None and chosen.ebs.volume_size:
        ephemeral = chosen.ebs.volume_size
    return AWSCatalogOptions(
        vm_memory_overhead_percent=vm_memory_overhead_percent,
        reserved_enis=reserved_enis,
        ami_family=family,
        max_pods=kubelet.max_pods if kubelet else None,
        pods_per_core=kubelet.pods_per_core if kubelet else None,
        kube_reserved=(kubelet.kube_reserved or {}) if kubelet else {},
        system_reserved=(kubelet.system_reserved or {}) if kubelet else {},
        eviction_hard=(kubelet.eviction_hard or {}) if kubelet else {},
        ephemeral_storage=ephemeral,
        instance_store_policy=spec.instance_store_policy,
    )


@dataclass
class InstanceTypeData:
    """Raw DescribeInstanceTypes/Offerings answers per region, shareable between providers.

    Attributes:
        infos: region -> (fetched at, instance type -> InstanceTypeInfo dict).
        zones: region -> (fetched at, instance type -> sorted zones offering it).
    """

    infos: dict[str, tuple[float, dict[str, dict[str, Any]]]] = field(default_factory=dict)
    zones: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = field(default_factory=dict)
    lock: asyncio.Lock | None = None


class InstanceTypeProvider:
    """Builds InstanceTypes for a resolved EC2NodeClass.

    Args:
        clients: AWS clients.
        region: AWS region (``topology.kubernetes.io/region``).
        pricing: the price source.
        unavailable: the unavailable-offerings cache.
        now: clock.
        data: shared raw-data cache (a fresh one by default).
        vm_memory_overhead_percent: hypervisor memory share (default 0.075).
        reserved_enis: ENIs left out of the max-pods formula (``RESERVED_ENIS``, default 0).
    """

    def __init__(self, *, clients: AWSClients, region: str, pricing: PricingProvider, unavailable: UnavailableOfferings,
                 now: Callable[[], float], data: InstanceTypeData | None = None, vm_memory_overhead_percent: float = 0.075,
                 refresh_seconds: float = INSTANCE_TYPE_REFRESH_SECONDS, reserved_enis: int = 0):
        self.clients = clients
        self.region = region
        self.pricing = pricing
        self.unavailable = unavailable
        self._now = now
        self.data = data if data is not None else InstanceTypeData()
        self.vm_memory_overhead_percent = vm_memory_overhead_percent
        self.reserved_enis = reserved_enis
        self.refresh_seconds = refresh_seconds
        self._built: dict[tuple[Any, ...], list[InstanceType]] = {}
        self._marked: dict[tuple[Any, ...], tuple[Any, list[InstanceType]]] = {}
        self.capacity_reservations: CapacityReservations | None = None
        """Set by the plugin: the available counts reserved offerings carry (None: no reserved offerings)."""
        self.reserved_capacity = True
        """The ``ReservedCapacity`` feature gate (the plugin sets it)."""
        register_aws_labels()

    def _fresh(self, entry: tuple[float, Any] | None) -> bool:
        return entry is not None and self._now() - entry[0] < self.refresh_seconds

    async def infos(self) -> dict[str, dict[str, Any]]:
        """Instance type -> InstanceTypeInfo for every hvm x86_64/arm64 type (cached)."""
        entry = self.data.infos.get(self.region)
        if self._fresh(entry):
            return entry[1]  # type: ignore[index]
        ec2 = await self.clients.ec2()
        out: dict[str, dict[str, Any]] = {}
        token: str | None = None
        while True:
            # Karpenter filters server-side on supported-virtualization-type=hvm and
            # processor-info.supported-architecture=x86_64,arm64. moto 5.2.5 drops every type whose
            # list holds another value too (t2.small: ["i386", "x86_64"]), so karpy filters here.
            kwargs: dict[str, Any] = {"MaxResults": 100}
            if token:
                kwargs["NextToken"] = token
            resp = await call(ec2.describe_instance_types, "DescribeInstanceTypes", **kwargs)
            for info in resp.get("InstanceTypes") or []:
                archs = set((info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or [])
                if "hvm" in (info.get("SupportedVirtualizationTypes") or ["hvm"]) and archs & {"x86_64", "arm64"}:
                    out[info["InstanceType"]] = info
            token = resp.get("NextToken")
            if not token:
                break
        self.data.infos[self.region] = (self._now(), out)
        self._built.clear()
        return out

    async def zones(self) -> dict[str, tuple[str, ...]]:
        """Instance type -> sorted zones offering it (DescribeInstanceTypeOfferings, cached)."""
        entry = self.data.zones.get(self.region)
        if self._fresh(entry):
            return entry[1]  # type: ignore[index]
        ec2 = await self.clients.ec2()
        by_type: dict[str, set[str]] = {}
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"LocationType": "availability-zone", "MaxResults": 1000}
            if token:
                kwargs["NextToken"] = token
            resp = await call(ec2.describe_instance_type_offerings, "DescribeInstanceTypeOfferings", **kwargs)
            for o in resp.get("InstanceTypeOfferings") or []:
                by_type.setdefault(o["InstanceType"], set()).add(o["Location"])
            token = resp.get("NextToken")
            if not token:
                break
        result = {k: tuple(sorted(v)) for k, v in by_type.items()}
        self.data.zones[self.region] = (self._now(), result)
        self._built.clear()
        return result

    async def list(self, nodeclass: EC2NodeClass) -> list[InstanceType]:
        """Every instance type offered in the NodeClass's subnet zones, available or not, sorted
        by name. The list and its elements are shared: treat them as read-only."""
        await self.pricing.ensure_fresh()
        infos = await self.infos()
        zones_by_type = await self.zones()
        subnet_zones = frozenset(s.zone for s in nodeclass.status.subnets)
        opts = catalog_options_for(nodeclass, self.vm_memory_overhead_percent, self.reserved_enis)
        key = (opts, subnet_zones, self.pricing.seq, id(infos), id(zones_by_type))
        base = self._built.get(key)
        if base is None:
            base = []
            for name in sorted(infos):
                zones = [z for z in zones_by_type.get(name, ()) if z in subnet_zones]
                if not zones:
                    continue
                spec = spec_from_describe(infos[name], self.pricing.on_demand_price(name))
                if spec is None:
                    continue
                base.append(build_instance_type(spec, self._offerings(spec, zones), self.region, opts))
            self._built[key] = base
        return self._with_reservations(nodeclass, self._apply_unavailable(key, base))

    def _with_reservations(self, nodeclass: EC2NodeClass, types: builtins.list[InstanceType]) -> builtins.list[InstanceType]:
        """``types`` with a reserved offering per resolved capacity reservation (module docstring)."""
        reservations = nodeclass.status.capacity_reservations
        if not reservations or not self.reserved_capacity or self.capacity_reservations is None:
            return types
        by_type: dict[str, builtins.list[Offering]] = {}
        names = {it.name: it for it in types}
        for r in reservations:
            it = names.get(r.instance_type)
            if it is None or not any(o.zone == r.availability_zone for o in it.offerings):
                continue
            od = self.pricing.on_demand_price(it.name)
            left = self.capacity_reservations.available(r.id)
            by_type.setdefault(it.name, []).append(Offering(
                r.availability_zone, CAPACITY_TYPE_RESERVED, (od or 0.0) / RESERVED_PRICE_DIVISOR,
                left > 0 and r.state != "expiring", reservation_id=r.id, reservation_capacity=left,
                reservation_type=r.reservation_type))
        if not by_type:
            return types
        out: builtins.list[InstanceType] = []
        for it in types:
            extra = by_type.get(it.name)
            if not extra:
                out.append(it)
                continue
            clone = copy.copy(it)
            clone.offerings = [*it.offerings, *extra]
            clone.requirements = it.requirements.copy()
            clone.requirements.by_key.pop(LABEL_CAPACITY_TYPE, None)
            clone.__post_init__()  # the capacity-type requirement lists every offering's value
            out.append(clone)
        return out

    def _offerings(self, spec: InstanceTypeSpec, zones: builtins.list[str]) -> builtins.list[Offering]:
        out: builtins.list[Offering] = []
        classes = set(spec.usage_classes)
        for zone in sorted(zones):
            if CAPACITY_TYPE_ON_DEMAND in classes:
                od = spec.on_demand_price
                out.append(Offering(zone, CAPACITY_TYPE_ON_DEMAND, od or 0.0, od is not None))
            if CAPACITY_TYPE_SPOT in classes:
                sp = self.pricing.spot_price(spec.name, zone)
                out.append(Offering(zone, CAPACITY_TYPE_SPOT, sp or 0.0, sp is not None))
        return out

    def _apply_unavailable(self, key: tuple[Any, ...], base: builtins.list[InstanceType]) -> builtins.list[InstanceType]:
        snap = self.unavailable.snapshot()
        _, triples, cts = snap
        if not triples and not cts:
            return base
        hit = self._marked.get(key)
        if hit is not None and hit[0] == snap:
            return hit[1]
        out: list[InstanceType] = []
        for it in base:
            if not cts and not any(t[1] == it.name for t in triples):
                out.append(it)
                continue
            offerings = [
                dataclasses.replace(o, available=False)
                if o.available and (o.capacity_type in cts or (o.capacity_type, it.name, o.zone) in triples) else o
                for o in it.offerings
            ]
            if offerings == it.offerings:
                out.append(it)
                continue
            clone = copy.copy(it)
            clone.offerings = offerings
            out.append(clone)
        self._marked[key] = (snap, out)
        return out

    async def spec(self, name: str) -> InstanceTypeSpec | None:
        """The spec of one type (for describing an existing instance)."""
        info = (await self.infos()).get(name)
        return None if info is None else spec_from_describe(info, self.pricing.on_demand_price(name))


def volume_size_gib(size: str) -> int:
    """A block-device ``volumeSize`` quantity rounded **up** to whole GiB (EC2's unit)."""
    b = to_internal("ephemeral-storage", size)
    gib = 1024**3
    return max(1, -(-b // gib))
