"""The EC2 instance-type catalog and Karpenter's AWS capacity, overhead and label rules.

Two layers:

1. **Rules as plain functions** over plain inputs (vCPUs, MiB, ENI limits, GPU facts, options),
   the single implementation of Karpenter's AWS instance-type model in karpy. The ``aws`` provider
   feeds them live ``DescribeInstanceTypes`` data; the ``simulated`` provider feeds them the static
   catalog below. Each formula cites its source: ``aws/karpenter-provider-aws``
   ``pkg/providers/instancetype/types.go`` (``computeCapacity``, ``memory``, ``ENILimitedPods``,
   ``pods``, ``kubeReservedResources``, ``evictionThreshold``, ``computeRequirements``,
   ``createOfferings``), summarised in ``reference/karpenter-aws-behaviour.md`` section 3. The
   overhead formulas that are not AWS's own (kube-reserved, system-reserved, the kubelet's
   eviction defaults) are in :mod:`karpy_core.cloudprovider.overhead`, shared with other
   providers; :func:`compute_overhead` decides which pod count AWS bills memory for. Everything
   here stays in core (not in the ``karpy-aws`` plugin) because the ``simulated`` provider's
   catalog is built from all of it.
2. **The static catalog** (:func:`load_aws_catalog`): ``karpy_core/data/aws-instance-types.json``
   (1,373 EC2 types, from moto's ``DescribeInstanceTypes`` dump and Karpenter's generated
   on-demand price table) and ``aws-offerings-<region>.json`` (zone -> types offered there).

Catalog decisions (see ``docs/simulated-provider.md``):

* **Prices are us-east-1 Linux on-demand list prices in every region**
  (:data:`PRICES_ARE_US_EAST_1_LIST_PRICES`): the data has no per-region price table. Karpenter
  itself falls back to us-east-1 prices for regions missing from its table.
* **A null price makes every offering of that type unavailable** (price ``0.0``,
  ``available=False``), as Karpenter does when ``OnDemandPrice`` reports no price.
* **Spot prices are synthetic and deterministic**::

      h    = first 8 bytes of sha256("<instance-type>/<zone>") as an integer / 2**64   # in [0, 1)
      spot = round(on_demand * (0.30 + 0.15 * h), 6)                                 # USD/hour

  i.e. a per-(type, zone) discount between 55 % and 70 % off on-demand: always cheaper than
  on-demand, stable across runs and machines (``hashlib``, not Python's salted ``hash``), and
  different per zone so zone choice matters as it does on EC2. Real spot prices come from
  ``DescribeSpotPriceHistory`` in the ``aws`` provider.
* Only ``x86_64``/``arm64`` types are listed (Karpenter filters ``DescribeInstanceTypes`` on
  ``processor-info.supported-architecture``), so the nine Mac types (``x86_64_mac``/``arm64_mac``)
  are dropped, and only types offered in at least one zone of the region are kept.
* ``capacity-block`` usage is ignored, as in Karpenter's ``createOfferings``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources as importlib_resources
from typing import Any

from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_ARCH,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_RESERVATION_ID,
    LABEL_RESERVATION_TYPE,
    LABEL_WINDOWS_BUILD,
    register_metric_labels,
    register_well_known_labels,
)
from karpy_core.cloudprovider.overhead import eviction_threshold, kube_reserved, system_reserved
from karpy_core.cloudprovider.types import InstanceType, Offering, Overhead
from karpy_core.errors import ConfigurationError
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources
from karpy_core.utils.quantity import QuantityError, to_internal

__all__ = [
    # constants
    "DEFAULT_REGION",
    "SUPPORTED_REGIONS",
    "PRICES_REGION",
    "PRICES_ARE_US_EAST_1_LIST_PRICES",
    "SPOT_DISCOUNT_BASE",
    "SPOT_DISCOUNT_SPREAD",
    "LABEL_DOMAIN",
    "LABEL_INSTANCE_CATEGORY",
    "LABEL_INSTANCE_FAMILY",
    "LABEL_INSTANCE_GENERATION",
    "LABEL_INSTANCE_SIZE",
    "LABEL_INSTANCE_CPU",
    "LABEL_INSTANCE_MEMORY",
    "LABEL_INSTANCE_HYPERVISOR",
    "LABEL_INSTANCE_GPU_NAME",
    "LABEL_INSTANCE_GPU_MANUFACTURER",
    "LABEL_INSTANCE_GPU_COUNT",
    "LABEL_INSTANCE_GPU_MEMORY",
    "LABEL_INSTANCE_LOCAL_NVME",
    "LABEL_INSTANCE_CAPABILITY_FLEX",
    "LABEL_INSTANCE_CPU_MANUFACTURER",
    "LABEL_INSTANCE_ACCELERATOR_NAME",
    "LABEL_INSTANCE_ACCELERATOR_MANUFACTURER",
    "LABEL_INSTANCE_ACCELERATOR_COUNT",
    "LABEL_INSTANCE_NETWORK_BANDWIDTH",
    "LABEL_INSTANCE_EBS_BANDWIDTH",
    "LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ",
    "LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED",
    "load_type_details",
    "UNDERIVABLE_AWS_LABELS",
    "AWS_METRIC_ONLY_LABELS",
    "cpu_manufacturer",
    "AWS_WELL_KNOWN_LABELS",
    "RESOURCE_NVIDIA_GPU",
    "RESOURCE_AMD_GPU",
    "RESOURCE_HABANA_GAUDI",
    "RESOURCE_AWS_NEURON",
    "RESOURCE_EFA",
    "AMIFamily",
    # value types
    "GPUInfo",
    "InstanceTypeSpec",
    "AWSCatalogOptions",
    # rules
    "memory_capacity",
    "eni_limited_pods",
    "pods_capacity",
    "ephemeral_storage_capacity",
    "compute_capacity",
    "compute_overhead",
    "parse_instance_type_name",
    "compute_requirements",
    "spot_price",
    "build_offerings",
    "build_instance_type",
    "register_aws_labels",
    # catalog
    "load_instance_type_specs",
    "load_zone_offerings",
    "load_aws_catalog",
]

# ---------------------------------------------------------------------------------------------
# Constants
# ---------------------------------------------------------------------------------------------

DEFAULT_REGION = "us-east-1"
SUPPORTED_REGIONS = ("us-east-1", "ap-northeast-2")
"""Regions with an offerings file in ``karpy_core/data``."""

PRICES_REGION = "us-east-1"
PRICES_ARE_US_EAST_1_LIST_PRICES = True
"""The catalog prices every region at the us-east-1 on-demand list price (USD/hour)."""

SPOT_DISCOUNT_BASE = 0.30
SPOT_DISCOUNT_SPREAD = 0.15
"""Synthetic spot price = on-demand x (BASE + SPREAD x h), h in [0, 1) from a stable hash."""

LABEL_DOMAIN = "karpenter.k8s.aws"
LABEL_INSTANCE_CATEGORY = "karpenter.k8s.aws/instance-category"
LABEL_INSTANCE_FAMILY = "karpenter.k8s.aws/instance-family"
LABEL_INSTANCE_GENERATION = "karpenter.k8s.aws/instance-generation"
LABEL_INSTANCE_SIZE = "karpenter.k8s.aws/instance-size"
LABEL_INSTANCE_CPU = "karpenter.k8s.aws/instance-cpu"
LABEL_INSTANCE_MEMORY = "karpenter.k8s.aws/instance-memory"
LABEL_INSTANCE_HYPERVISOR = "karpenter.k8s.aws/instance-hypervisor"
LABEL_INSTANCE_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
LABEL_INSTANCE_GPU_MANUFACTURER = "karpenter.k8s.aws/instance-gpu-manufacturer"
LABEL_INSTANCE_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
LABEL_INSTANCE_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
LABEL_INSTANCE_LOCAL_NVME = "karpenter.k8s.aws/instance-local-nvme"
LABEL_INSTANCE_CAPABILITY_FLEX = "karpenter.k8s.aws/instance-capability-flex"
LABEL_INSTANCE_CPU_MANUFACTURER = "karpenter.k8s.aws/instance-cpu-manufacturer"
LABEL_INSTANCE_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
LABEL_INSTANCE_ACCELERATOR_MANUFACTURER = "karpenter.k8s.aws/instance-accelerator-manufacturer"
LABEL_INSTANCE_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
LABEL_INSTANCE_NETWORK_BANDWIDTH = "karpenter.k8s.aws/instance-network-bandwidth"
LABEL_INSTANCE_EBS_BANDWIDTH = "karpenter.k8s.aws/instance-ebs-bandwidth"
LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz"
LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED = "karpenter.k8s.aws/instance-encryption-in-transit-supported"

AWS_WELL_KNOWN_LABELS = frozenset(
    {
        LABEL_INSTANCE_CATEGORY,
        LABEL_INSTANCE_FAMILY,
        LABEL_INSTANCE_GENERATION,
        LABEL_INSTANCE_SIZE,
        LABEL_INSTANCE_CPU,
        LABEL_INSTANCE_MEMORY,
        LABEL_INSTANCE_HYPERVISOR,
        LABEL_INSTANCE_GPU_NAME,
        LABEL_INSTANCE_GPU_MANUFACTURER,
        LABEL_INSTANCE_GPU_COUNT,
        LABEL_INSTANCE_GPU_MEMORY,
        LABEL_INSTANCE_LOCAL_NVME,
        LABEL_INSTANCE_CAPABILITY_FLEX,
        LABEL_INSTANCE_CPU_MANUFACTURER,
        LABEL_INSTANCE_ACCELERATOR_NAME,
        LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
        LABEL_INSTANCE_ACCELERATOR_COUNT,
        LABEL_INSTANCE_NETWORK_BANDWIDTH,
        LABEL_INSTANCE_EBS_BANDWIDTH,
        LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ,
        LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
    }
)
"""The ``karpenter.k8s.aws/instance-*`` labels this catalog resolves for every type (Karpenter
``pkg/apis/v1/labels.go``, values as ``pkg/providers/instancetype/types.go`` computes them).
Labels the static data cannot support (:data:`UNDERIVABLE_AWS_LABELS`) are deliberately not
resolved nor registered."""

UNDERIVABLE_AWS_LABELS = frozenset({
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-tenancy",
})
"""Karpenter's AWS instance labels the bundled data has no field for (``NitroEnclavesSupport``)
or that karpy cannot honour (dedicated tenancy is not launched); see docs/aws.md. The network
and EBS bandwidth, sustained clock speed and encryption-in-transit labels come from
``aws-instance-type-details.json`` (:func:`load_type_details`)."""

_NEURON_NAMES = {"inf1": "inferentia", "inf2": "inferentia2", "trn1": "trainium", "trn1n": "trainium", "trn2": "trainium2"}
"""``instance-accelerator-name`` of the Inferentia/Trainium families (kebab-cased device names of
DescribeInstanceTypes' ``InferenceAcceleratorInfo`` / ``NeuronInfo``); manufacturer ``aws``."""

_AMD_FAMILIES_WITHOUT_A = frozenset({"g5", "g6", "g6e", "g6f", "gr6", "gr6f", "inf2", "p5", "p5e"})
"""x86 families on AMD EPYC whose name has no ``a`` attribute (AWS product pages)."""
_APPLE_FAMILY_PREFIXES = ("mac2", "mac-m")
"""EC2 Mac families on Apple silicon (``mac1`` is Intel)."""


def cpu_manufacturer(family: str, architecture: str) -> str:
    """``instance-cpu-manufacturer`` of a family (``ProcessorInfo.Manufacturer`` kebab-cased):
    ``aws`` for arm64 (Graviton), ``apple`` for Apple-silicon Macs, ``amd`` when the family's
    attribute letters (after the generation digits, e.g. ``m5a``, ``c7a``, ``hpc6a``, ``m8azn``)
    contain ``a`` or the family is one of :data:`_AMD_FAMILIES_WITHOUT_A`, else ``intel``. The
    data file has no processor field: this reproduces AWS's naming convention."""
    if architecture == "arm64":
        return "aws"
    if family.startswith(_APPLE_FAMILY_PREFIXES):
        return "apple"
    if family in _AMD_FAMILIES_WITHOUT_A:
        return "amd"
    m = re.match(r"^[a-z]+(?:-[0-9]+tb)?[0-9]+([a-z]*)", family.split("-flex")[0])
    return "amd" if m and "a" in m.group(1) else "intel"

RESOURCE_NVIDIA_GPU = "nvidia.com/gpu"
RESOURCE_AMD_GPU = "amd.com/gpu"
RESOURCE_HABANA_GAUDI = "habana.ai/gaudi"
RESOURCE_AWS_NEURON = "aws.amazon.com/neuron"
RESOURCE_EFA = "vpc.amazonaws.com/efa"

_GPU_RESOURCE_BY_MANUFACTURER = {
    "NVIDIA": RESOURCE_NVIDIA_GPU,
    "AMD": RESOURCE_AMD_GPU,
    "Habana": RESOURCE_HABANA_GAUDI,
}
"""Karpenter ``nvidiaGPUs``/``amdGPUs``/``habanaGaudis``: sum GPU counts by manufacturer."""

_AWS_TO_KUBE_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
"""Karpenter ``v1.AWSToKubeArchitectures``; other architectures (``*_mac``, ``i386`` alone) are
not launchable by Karpenter."""

_INSTANCE_TYPE_SCHEME = re.compile(r"(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.")
"""Karpenter ``instanceTypeScheme``: group 1 = category, group 3 = generation."""

_PRE_NVME_FAMILIES = frozenset({"c1", "c3", "d2", "h1", "i2", "m1", "m2", "m3", "r3", "x1", "x1e"})
"""Families whose instance store is SATA/SAS SSD or HDD, not NVMe. The data file has no
``NvmeSupport`` field, so ``instance-local-nvme`` is set for every other type with local storage
(every Nitro instance store, plus Xen ``i3``, is NVMe)."""

_NEURON_DEVICES = {
    # Karpenter hard-codes trn1 (types.go ``awsNeurons``; DescribeInstanceTypes lacked the data).
    "trn1.2xlarge": 1,
    "trn1.32xlarge": 16,
    "trn1n.32xlarge": 16,
    # Inferentia/Trainium device counts from the AWS product pages (InferenceAcceleratorInfo /
    # NeuronInfo in DescribeInstanceTypes); the static data file carries no accelerator field.
    "inf1.xlarge": 1,
    "inf1.2xlarge": 1,
    "inf1.6xlarge": 4,
    "inf1.24xlarge": 16,
    "inf2.xlarge": 1,
    "inf2.8xlarge": 1,
    "inf2.24xlarge": 6,
    "inf2.48xlarge": 12,
    "trn2.3xlarge": 1,
    "trn2.48xlarge": 16,
}


def _names(count: int, names: str) -> dict[str, int]:
    return dict.fromkeys(names.split(), count)


_DEFAULT_CARD_ENIS: dict[str, int] = {
    **_names(2, "p5.48xlarge p5e.48xlarge"),
    **_names(4, "p5en.48xlarge p6-b200.48xlarge p6-b300.48xlarge"),
    **_names(5, "trn1.32xlarge trn1n.32xlarge"),
    **_names(
        8,
        "c6in.32xlarge c6in.metal m6idn.32xlarge m6idn.metal m6in.32xlarge m6in.metal r6idn.32xlarge r6idn.metal"
        " r6in.32xlarge r6in.metal u7in-16tb.224xlarge u7in-24tb.224xlarge u7in-32tb.224xlarge",
    ),
    **_names(10, "g6e.24xlarge g6e.48xlarge g7e.24xlarge g7e.48xlarge"),
    **_names(
        12,
        "c8gb.48xlarge c8gb.metal-48xl c8gn.48xlarge c8gn.metal-48xl c8ib.96xlarge c8ib.metal-96xl c8in.96xlarge"
        " c8in.metal-96xl g7.48xlarge m8gb.48xlarge m8gb.metal-48xl m8gn.48xlarge m8gn.metal-48xl m8ib.96xlarge"
        " m8ib.metal-96xl m8idb.96xlarge m8idb.metal-96xl m8idn.96xlarge m8idn.metal-96xl m8in.96xlarge"
        " m8in.metal-96xl r8gb.48xlarge r8gb.metal-48xl r8gn.48xlarge r8gn.metal-48xl r8ib.96xlarge"
        " r8ib.metal-96xl r8idb.96xlarge r8idb.metal-96xl r8idn.96xlarge r8idn.metal-96xl r8in.96xlarge"
        " r8in.metal-96xl",
    ),
    **_names(15, "p4d.24xlarge p4de.24xlarge"),
}
"""ENIs of the **default network card** for the multi-card types of the catalog. The data file's
``max_enis`` is the instance total (all cards), but the VPC CNI, and so Karpenter's
``ENILimitedPods``, only uses the default card (``NetworkCards[DefaultNetworkCardIndex]``).
Values from karpenter-provider-aws ``pkg/providers/instancetype/zz_generated.vpclimits.go``
(generated 2026-08-06); e.g. p4d.24xlarge: 15 x 49 + 2 = 737 pods, as in EKS ``eni-max-pods.txt``."""

_MIB = 1024 * 1024


class AMIFamily:
    """``EC2NodeClass.spec.amiFamily`` values and the feature flags Karpenter attaches to them
    (``pkg/providers/amifamily/*.go`` ``FeatureFlags``)."""

    AL2 = "AL2"
    AL2023 = "AL2023"
    BOTTLEROCKET = "Bottlerocket"
    CUSTOM = "Custom"
    WINDOWS2019 = "Windows2019"
    WINDOWS2022 = "Windows2022"
    WINDOWS2025 = "Windows2025"
    ALL = (AL2, AL2023, BOTTLEROCKET, CUSTOM, WINDOWS2019, WINDOWS2022, WINDOWS2025)

    BY_ALIAS = {"al2": AL2, "al2023": AL2023, "bottlerocket": BOTTLEROCKET, "windows2019": WINDOWS2019,
                "windows2022": WINDOWS2022, "windows2025": WINDOWS2025}
    """``amiSelectorTerms`` alias family (``al2023`` in ``al2023@latest``) -> the ``amiFamily`` it
    implies (Karpenter's EC2NodeClass ``AMIFamily()``); karpy-aws's model and CRD use the same table."""

    WINDOWS_BUILDS = {WINDOWS2019: "10.0.17763", WINDOWS2022: "10.0.20348", WINDOWS2025: "10.0.26100"}
    """``node.kubernetes.io/windows-build`` per Windows family."""

    @staticmethod
    def is_windows(family: str) -> bool:
        return family.startswith("Windows")

    @staticmethod
    def supports_eni_limited_pod_density(family: str) -> bool:
        """Pods default to the ENI formula (AL2, AL2023, Bottlerocket, Custom); Windows uses 110."""
        return not AMIFamily.is_windows(family)

    @staticmethod
    def pods_per_core_enabled(family: str) -> bool:
        """``kubelet.podsPerCore`` is honoured everywhere except Bottlerocket."""
        return family != AMIFamily.BOTTLEROCKET

    @staticmethod
    def uses_eni_limited_memory_overhead(family: str) -> bool:
        """kube-reserved memory uses the ENI-limited pod count even when ``maxPods`` is set
        (AL2, AL2023, Custom)."""
        return family in (AMIFamily.AL2, AMIFamily.AL2023, AMIFamily.CUSTOM)


# ---------------------------------------------------------------------------------------------
# Value types
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GPUInfo:
    """One kind of GPU in an instance type.

    Attributes:
        name: e.g. ``A10G``.
        manufacturer: ``NVIDIA``, ``AMD``, ``Habana`` ...
        count: devices of this kind.
        memory_mib: memory **per device** in MiB (``GpuInfo.Gpus[].MemoryInfo.SizeInMiB``).
    """

    name: str
    manufacturer: str
    count: int
    memory_mib: int


@dataclass(frozen=True, slots=True)
class InstanceTypeSpec:
    """The raw facts about one EC2 instance type the rules need (a projection of
    ``ec2.InstanceTypeInfo``).

    Attributes:
        name: e.g. ``m5.large``.
        vcpu: default vCPUs (cores as Kubernetes counts them).
        memory_mib: ``MemoryInfo.SizeInMiB``.
        architecture: Kubernetes architecture, ``amd64`` or ``arm64``.
        max_enis: ``MaximumNetworkInterfaces`` of the **default network card** (not the
            instance total on multi-card types).
        ipv4_per_eni: ``Ipv4AddressesPerInterface``.
        hypervisor: ``nitro``, ``xen`` or ``""`` (bare metal).
        gpus: GPU kinds (usually zero or one).
        local_storage_gb: instance-store total in GB (decimal), 0 when none.
        local_nvme: True when that instance store is NVMe.
        neuron_devices: AWS Inferentia/Trainium devices.
        efa_interfaces: ``EfaInfo.MaximumEfaInterfaces``.
        usage_classes: ``SupportedUsageClasses`` (``on-demand``, ``spot``, ``capacity-block``).
        on_demand_price: USD/hour, None when unknown.
        network_bandwidth_mbps: baseline network bandwidth, Mbps (Karpenter's generated table);
            None when unknown.
        ebs_bandwidth_mbps: ``EbsOptimizedInfo.MaximumBandwidthInMbps`` of an EBS-optimized-by-
            default type; None otherwise.
        sustained_clock_mhz: ``ProcessorInfo.SustainedClockSpeedInGhz`` x 1000, rounded; None
            when unknown.
        encryption_in_transit: ``NetworkInfo.EncryptionInTransitSupported``.
    """

    name: str
    vcpu: int
    memory_mib: int
    architecture: str
    max_enis: int
    ipv4_per_eni: int
    hypervisor: str = "nitro"
    gpus: tuple[GPUInfo, ...] = ()
    local_storage_gb: int = 0
    local_nvme: bool = False
    neuron_devices: int = 0
    efa_interfaces: int = 0
    usage_classes: tuple[str, ...] = (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT)
    on_demand_price: float | None = None
    network_bandwidth_mbps: int | None = None
    ebs_bandwidth_mbps: int | None = None
    sustained_clock_mhz: int | None = None
    encryption_in_transit: bool = False

    @classmethod
    def from_catalog_entry(cls, entry: Mapping[str, Any]) -> InstanceTypeSpec | None:
        """Build from one object of ``aws-instance-types.json``; None when Karpenter could not
        launch the type (no ``x86_64``/``arm64`` architecture).

        ``gpu_memory_mib`` in the file is the total over all GPUs (``TotalGpuMemoryInMiB``); it is
        divided by ``gpu_count`` to get the per-device figure Karpenter labels. ``max_enis`` is
        corrected to the default network card for multi-card types.
        """
        arch = next((_AWS_TO_KUBE_ARCH[a] for a in entry["architectures"] if a in _AWS_TO_KUBE_ARCH), None)
        if arch is None:
            return None
        gpu_count = int(entry.get("gpu_count") or 0)
        gpus: tuple[GPUInfo, ...] = ()
        if gpu_count > 0:
            gpus = (
                GPUInfo(
                    name=str(entry.get("gpu_name") or ""),
                    manufacturer=str(entry.get("gpu_manufacturer") or ""),
                    count=gpu_count,
                    memory_mib=int(entry.get("gpu_memory_mib") or 0) // gpu_count,
                ),
            )
        local = int(entry.get("local_storage_gb") or 0)
        name = str(entry["name"])
        family = name.split(".", 1)[0]
        price = entry.get("on_demand_usd_per_hour_us_east_1")
        details = load_type_details().get(name) or {}
        return cls(
            name=name,
            vcpu=int(entry["vcpu"]),
            memory_mib=int(entry["memory_mib"]),
            architecture=arch,
            max_enis=_DEFAULT_CARD_ENIS.get(name, int(entry["max_enis"])),
            ipv4_per_eni=int(entry["ipv4_per_eni"]),
            hypervisor=str(entry.get("hypervisor") or ""),
            gpus=gpus,
            local_storage_gb=local,
            local_nvme=local > 0 and family not in _PRE_NVME_FAMILIES,
            neuron_devices=_NEURON_DEVICES.get(name, 0),
            usage_classes=tuple(entry.get("usage_classes") or ()),
            on_demand_price=None if price is None else float(price),
            network_bandwidth_mbps=details.get("network_bandwidth_mbps"),
            ebs_bandwidth_mbps=details.get("ebs_bandwidth_mbps"),
            sustained_clock_mhz=details.get("sustained_clock_mhz"),
            encryption_in_transit=bool(details.get("encryption_in_transit")),
        )


class _FrozenMap(Mapping[str, str]):
    """A hashable read-only mapping, so :class:`AWSCatalogOptions` can key a cache."""

    __slots__ = ("_items",)

    def __init__(self, data: Mapping[str, str] | None = None):
        self._items = tuple(sorted((str(k), str(v)) for k, v in (data or {}).items()))

    def __getitem__(self, key: str) -> str:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _FrozenMap):
            return self._items == other._items
        if isinstance(other, Mapping):
            return dict(self._items) == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return repr(dict(self._items))


@dataclass(frozen=True)
class AWSCatalogOptions:
    """Settings that change the instance-type model (EC2NodeClass kubelet/AMI settings and the
    controller's ``--vm-memory-overhead-percent``/``--reserved-enis``). Hashable; mappings are
    frozen on construction.

    Attributes:
        vm_memory_overhead_percent: fraction of memory the hypervisor keeps (default 0.075).
        reserved_enis: ENIs withheld from the pod-density formula (default 0).
        ami_family: one of :attr:`AMIFamily.ALL` (default ``AL2023``).
        max_pods: ``kubelet.maxPods`` override.
        pods_per_core: ``kubelet.podsPerCore`` (caps pods at podsPerCore x vCPU).
        kube_reserved: ``kubelet.kubeReserved`` per-resource overrides (quantities).
        system_reserved: ``kubelet.systemReserved`` (quantities; empty by default).
        eviction_hard: ``kubelet.evictionHard`` for ``memory.available``/``nodefs.available``
            (quantity or percentage of capacity; ``100%`` disables).
        ephemeral_storage: root/ephemeral volume size, default ``20Gi`` (Karpenter ``DefaultEBS``).
        instance_store_policy: ``RAID0`` makes ephemeral storage the instance-store size.

    Raises:
        ConfigurationError: an unknown AMI family, a negative count or a bad quantity.
    """

    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    ami_family: str = AMIFamily.AL2023
    max_pods: int | None = None
    pods_per_core: int | None = None
    kube_reserved: Mapping[str, str] = field(default_factory=_FrozenMap)
    system_reserved: Mapping[str, str] = field(default_factory=_FrozenMap)
    eviction_hard: Mapping[str, str] = field(default_factory=_FrozenMap)
    ephemeral_storage: str = "20Gi"
    instance_store_policy: str | None = None

    def __post_init__(self) -> None:
        for name in ("kube_reserved", "system_reserved", "eviction_hard"):
            value = getattr(self, name)
            if not isinstance(value, _FrozenMap):
                object.__setattr__(self, name, _FrozenMap(value))
        if self.ami_family not in AMIFamily.ALL:
            raise ConfigurationError(f"amiFamily {self.ami_family!r} is not one of {', '.join(AMIFamily.ALL)}")
        if not 0 <= self.vm_memory_overhead_percent < 1:
            raise ConfigurationError(
                f"vm_memory_overhead_percent must be in [0, 1), got {self.vm_memory_overhead_percent}"
            )
        for name in ("reserved_enis", "max_pods", "pods_per_core"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ConfigurationError(f"{name} must not be negative, got {value}")
        if self.instance_store_policy not in (None, "RAID0"):
            raise ConfigurationError(f"instanceStorePolicy {self.instance_store_policy!r} is not RAID0")
        try:
            to_internal("ephemeral-storage", self.ephemeral_storage)
            for name in ("kube_reserved", "system_reserved"):
                for res, q in getattr(self, name).items():
                    to_internal(res, q)
            for q in self.eviction_hard.values():  # other signals (imagefs...) are accepted, unused
                if q.endswith("%"):
                    float(q[:-1])
                else:
                    to_internal("memory", q)
        except (QuantityError, ValueError) as exc:
            raise ConfigurationError(f"invalid kubelet/ephemeral-storage setting: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Capacity (types.go computeCapacity)
# ---------------------------------------------------------------------------------------------


def memory_capacity(memory_mib: int, architecture: str, vm_memory_overhead_percent: float = 0.075) -> int:
    """Node memory capacity in **bytes**.

    ``SizeInMiB`` minus 64 MiB on arm64 (Graviton CMA reservation), then minus
    ``ceil(that x vm_memory_overhead_percent)`` MiB, computed in float64 exactly as Karpenter's
    ``memory()`` does. m5.large: 8192 - ceil(614.4) = 7577 MiB; m6g.large: 8128 - 610 = 7518 MiB.
    """
    mib = memory_mib - 64 if architecture == "arm64" else memory_mib
    overhead_mib = math.ceil(float(mib * _MIB) * vm_memory_overhead_percent / 1024 / 1024)
    return (mib - overhead_mib) * _MIB


def eni_limited_pods(max_enis: int, ipv4_per_eni: int, reserved_enis: int = 0, efa_only_enis: int = 0) -> int:
    """The VPC CNI pod limit: ``(ENIs - reserved - efaOnly) x (IPv4 per ENI - 1) + 2``; 0 when no
    ENI is usable (Karpenter ``ENILimitedPods``; amazon-eks-ami ``eni-max-pods.txt``).
    m5.large: 3 x 9 + 2 = 29."""
    usable = max(max_enis - reserved_enis - efa_only_enis, 0)
    if usable == 0:
        return 0
    return usable * (ipv4_per_eni - 1) + 2


def pods_capacity(
    vcpu: int,
    max_enis: int,
    ipv4_per_eni: int,
    *,
    ami_family: str = AMIFamily.AL2023,
    max_pods: int | None = None,
    pods_per_core: int | None = None,
    reserved_enis: int = 0,
) -> int:
    """The ``pods`` capacity (Karpenter ``pods``): ``max_pods`` when set, else the ENI limit for
    AL2/AL2023/Bottlerocket/Custom, else 110 (Windows); then capped at ``pods_per_core x vcpu``
    when ``pods_per_core > 0`` (ignored on Bottlerocket)."""
    if max_pods is not None:
        count = max_pods
    elif AMIFamily.supports_eni_limited_pod_density(ami_family):
        count = eni_limited_pods(max_enis, ipv4_per_eni, reserved_enis)
    else:
        count = 110
    if pods_per_core and pods_per_core > 0 and AMIFamily.pods_per_core_enabled(ami_family):
        count = min(pods_per_core * vcpu, count)
    return count


def ephemeral_storage_capacity(
    local_storage_gb: int = 0, *, ephemeral_storage: str = "20Gi", instance_store_policy: str | None = None
) -> int:
    """Ephemeral-storage capacity in **bytes**: the instance-store total (decimal GB) with
    ``instanceStorePolicy: RAID0`` and local disks, else the root volume size (the resolved
    block-device-mapping size; 20Gi default, Karpenter ``DefaultEBS``)."""
    if instance_store_policy == "RAID0" and local_storage_gb > 0:
        return local_storage_gb * 1_000_000_000
    return to_internal("ephemeral-storage", ephemeral_storage)


def compute_capacity(spec: InstanceTypeSpec, options: AWSCatalogOptions | None = None) -> Resources:
    """Node capacity in internal units (cpu millicores, memory/ephemeral-storage bytes, counts).

    Zero-valued extended resources are omitted (Karpenter drops zeros from NodeClaim capacity).
    GPUs become ``nvidia.com/gpu``/``amd.com/gpu``/``habana.ai/gaudi`` by manufacturer; Neuron
    devices ``aws.amazon.com/neuron``; EFA interfaces ``vpc.amazonaws.com/efa``.
    """
    opts = options or AWSCatalogOptions()
    cap: Resources = {
        "cpu": spec.vcpu * 1000,
        "memory": memory_capacity(spec.memory_mib, spec.architecture, opts.vm_memory_overhead_percent),
        "ephemeral-storage": ephemeral_storage_capacity(
            spec.local_storage_gb,
            ephemeral_storage=opts.ephemeral_storage,
            instance_store_policy=opts.instance_store_policy,
        ),
        "pods": pods_capacity(
            spec.vcpu,
            spec.max_enis,
            spec.ipv4_per_eni,
            ami_family=opts.ami_family,
            max_pods=opts.max_pods,
            pods_per_core=opts.pods_per_core,
            reserved_enis=opts.reserved_enis,
        ),
    }
    for gpu in spec.gpus:
        resource = _GPU_RESOURCE_BY_MANUFACTURER.get(gpu.manufacturer)
        if resource and gpu.count > 0:
            cap[resource] = cap.get(resource, 0) + gpu.count
    if spec.neuron_devices > 0:
        cap[RESOURCE_AWS_NEURON] = spec.neuron_devices
    if spec.efa_interfaces > 0:
        cap[RESOURCE_EFA] = spec.efa_interfaces
    return cap


# ---------------------------------------------------------------------------------------------
# Overhead (types.go kubeReservedResources, systemReservedResources, evictionThreshold): the
# formulas are provider-neutral, in karpy_core.cloudprovider.overhead; AWS decides which pods count
# ---------------------------------------------------------------------------------------------

def compute_overhead(
    spec: InstanceTypeSpec, options: AWSCatalogOptions | None = None, capacity: Resources | None = None
) -> Overhead:
    """kube-reserved + system-reserved + eviction threshold for ``spec`` (Karpenter
    ``NewInstanceType``). ``capacity`` may be passed to avoid recomputing it."""
    opts = options or AWSCatalogOptions()
    cap = capacity if capacity is not None else compute_capacity(spec, opts)
    if AMIFamily.uses_eni_limited_memory_overhead(opts.ami_family):
        billed_pods = eni_limited_pods(spec.max_enis, spec.ipv4_per_eni, opts.reserved_enis)
    else:
        billed_pods = cap["pods"]
    return Overhead(
        kube_reserved=kube_reserved(spec.vcpu, billed_pods, opts.kube_reserved),
        system_reserved=system_reserved(opts.system_reserved),
        eviction_threshold=eviction_threshold(cap["memory"], cap["ephemeral-storage"], opts.eviction_hard),
    )


# ---------------------------------------------------------------------------------------------
# Requirements / labels (types.go computeRequirements)
# ---------------------------------------------------------------------------------------------


def parse_instance_type_name(name: str) -> dict[str, str]:
    """Name-derived labels: ``category`` and ``generation`` from the regex
    ``(^[a-z]+)(\\-[0-9]+tb)?([0-9]+).*\\.``, ``family``/``size`` from splitting on the one ``.``.
    Keys that do not apply are absent. ``u-6tb1.metal`` -> u / 1 / u-6tb1 / metal."""
    out: dict[str, str] = {}
    m = _INSTANCE_TYPE_SCHEME.match(name)
    if m:
        out["category"] = m.group(1)
        out["generation"] = m.group(3)
    parts = name.split(".")
    if len(parts) == 2:
        out["family"] = parts[0]
        out["size"] = parts[1]
    return out


def _kebab(text: str) -> str:
    """Karpenter ``lowerKabobCase``: lower case, spaces to dashes."""
    return text.replace(" ", "-").lower()


@functools.cache
def _single(key: str, value: str) -> Requirement:
    """``key In [value]``, one shared (frozen) object per pair: the catalog's ~1,300 types repeat
    the same few thousand label values, and one object each would cost ~10 MiB."""
    return Requirement(key, False, frozenset((value,)))


@functools.cache
def _absent(key: str) -> Requirement:
    """``key DoesNotExist``, one shared object per key (see :func:`_single`)."""
    return Requirement(key, False, frozenset())


def compute_requirements(spec: InstanceTypeSpec, region: str, *, ami_family: str = AMIFamily.AL2023) -> Requirements:
    """The instance type's label requirements, excluding zone and capacity type (those come from
    its offerings, see :class:`~karpy_core.cloudprovider.types.InstanceType`).

    Every AWS label in :data:`AWS_WELL_KNOWN_LABELS` is defined: ``In [value]`` where it applies,
    ``DoesNotExist`` otherwise (e.g. GPU labels on a non-GPU type), as Karpenter does. GPU labels are
    set only when the type has exactly one GPU kind. ``kubernetes.io/os`` is ``linux``, or
    ``windows`` for Windows AMI families on amd64 (none on arm64).
    """
    by_key: dict[str, Requirement] = {}
    if AMIFamily.is_windows(ami_family):
        os_values = frozenset(("windows",)) if spec.architecture == "amd64" else frozenset()
        by_key[LABEL_OS] = Requirement(LABEL_OS, False, os_values)
        by_key[LABEL_WINDOWS_BUILD] = _single(LABEL_WINDOWS_BUILD, AMIFamily.WINDOWS_BUILDS[ami_family])
    else:
        by_key[LABEL_OS] = _single(LABEL_OS, "linux")
        by_key[LABEL_WINDOWS_BUILD] = _absent(LABEL_WINDOWS_BUILD)
    by_key[LABEL_INSTANCE_TYPE] = _single(LABEL_INSTANCE_TYPE, spec.name)
    by_key[LABEL_ARCH] = _single(LABEL_ARCH, spec.architecture)
    by_key[LABEL_REGION] = _single(LABEL_REGION, region)
    by_key[LABEL_INSTANCE_CPU] = _single(LABEL_INSTANCE_CPU, str(spec.vcpu))
    by_key[LABEL_INSTANCE_MEMORY] = _single(LABEL_INSTANCE_MEMORY, str(spec.memory_mib))
    by_key[LABEL_INSTANCE_HYPERVISOR] = _single(LABEL_INSTANCE_HYPERVISOR, spec.hypervisor)
    for label, number in ((LABEL_INSTANCE_NETWORK_BANDWIDTH, spec.network_bandwidth_mbps),
                          (LABEL_INSTANCE_EBS_BANDWIDTH, spec.ebs_bandwidth_mbps),
                          (LABEL_INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ, spec.sustained_clock_mhz)):
        by_key[label] = _single(label, str(number)) if number is not None else _absent(label)
    by_key[LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED] = _single(LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED,
                                                                    "true" if spec.encryption_in_transit else "false")

    parsed = parse_instance_type_name(spec.name)
    for label, part in (
        (LABEL_INSTANCE_CATEGORY, "category"),
        (LABEL_INSTANCE_GENERATION, "generation"),
        (LABEL_INSTANCE_FAMILY, "family"),
        (LABEL_INSTANCE_SIZE, "size"),
    ):
        by_key[label] = _single(label, parsed[part]) if part in parsed else _absent(label)

    if spec.local_nvme and spec.local_storage_gb > 0:
        by_key[LABEL_INSTANCE_LOCAL_NVME] = _single(LABEL_INSTANCE_LOCAL_NVME, str(spec.local_storage_gb))
    else:
        by_key[LABEL_INSTANCE_LOCAL_NVME] = _absent(LABEL_INSTANCE_LOCAL_NVME)

    family = parsed.get("family", spec.name.split(".", 1)[0])
    by_key[LABEL_INSTANCE_CAPABILITY_FLEX] = _single(LABEL_INSTANCE_CAPABILITY_FLEX, "true" if "-flex" in family else "false")
    by_key[LABEL_INSTANCE_CPU_MANUFACTURER] = _single(LABEL_INSTANCE_CPU_MANUFACTURER, cpu_manufacturer(family, spec.architecture))
    neuron = _NEURON_NAMES.get(family)
    if neuron is not None and spec.neuron_devices > 0:
        by_key[LABEL_INSTANCE_ACCELERATOR_NAME] = _single(LABEL_INSTANCE_ACCELERATOR_NAME, neuron)
        by_key[LABEL_INSTANCE_ACCELERATOR_MANUFACTURER] = _single(LABEL_INSTANCE_ACCELERATOR_MANUFACTURER, "aws")
        by_key[LABEL_INSTANCE_ACCELERATOR_COUNT] = _single(LABEL_INSTANCE_ACCELERATOR_COUNT, str(spec.neuron_devices))
    else:
        for label in (LABEL_INSTANCE_ACCELERATOR_NAME, LABEL_INSTANCE_ACCELERATOR_MANUFACTURER, LABEL_INSTANCE_ACCELERATOR_COUNT):
            by_key[label] = _absent(label)

    if len(spec.gpus) == 1:
        gpu = spec.gpus[0]
        by_key[LABEL_INSTANCE_GPU_NAME] = _single(LABEL_INSTANCE_GPU_NAME, _kebab(gpu.name))
        by_key[LABEL_INSTANCE_GPU_MANUFACTURER] = _single(LABEL_INSTANCE_GPU_MANUFACTURER, _kebab(gpu.manufacturer))
        by_key[LABEL_INSTANCE_GPU_COUNT] = _single(LABEL_INSTANCE_GPU_COUNT, str(gpu.count))
        by_key[LABEL_INSTANCE_GPU_MEMORY] = _single(LABEL_INSTANCE_GPU_MEMORY, str(gpu.memory_mib))
    else:
        for label in (
            LABEL_INSTANCE_GPU_NAME,
            LABEL_INSTANCE_GPU_MANUFACTURER,
            LABEL_INSTANCE_GPU_COUNT,
            LABEL_INSTANCE_GPU_MEMORY,
        ):
            by_key[label] = _absent(label)
    return Requirements(by_key)


# ---------------------------------------------------------------------------------------------
# Offerings and prices (types.go createOfferings; pricing section 4)
# ---------------------------------------------------------------------------------------------


def spot_price(on_demand: float, instance_type: str, zone: str) -> float:
    """The catalog's synthetic spot price in USD/hour (see the module docstring).

    ``h`` = the first 8 bytes of ``sha256("<instance_type>/<zone>")`` read big-endian, / 2**64;
    price = ``round(on_demand x (0.30 + 0.15 x h), 6)``. Deterministic, 30-45 % of on-demand.
    """
    digest = hashlib.sha256(f"{instance_type}/{zone}".encode()).digest()
    h = int.from_bytes(digest[:8], "big") / 2**64
    return round(on_demand * (SPOT_DISCOUNT_BASE + SPOT_DISCOUNT_SPREAD * h), 6)


def build_offerings(
    instance_type: str,
    zones: Iterable[str],
    usage_classes: Iterable[str],
    on_demand_price: float | None,
) -> list[Offering]:
    """One offering per (zone, capacity type), zones sorted, on-demand before spot.

    On-demand is priced ``on_demand_price``; spot by :func:`spot_price`. Without a price every
    offering is ``available=False`` with price 0.0 (Karpenter: an offering needs a known price).
    ``capacity-block`` and unknown usage classes are skipped.
    """
    classes = set(usage_classes)
    capacity_types = [ct for ct in (CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_SPOT) if ct in classes]
    known = on_demand_price is not None
    out: list[Offering] = []
    for zone in sorted(set(zones)):
        for ct in capacity_types:
            if not known:
                out.append(Offering(zone, ct, 0.0, False))
            elif ct == CAPACITY_TYPE_SPOT:
                out.append(Offering(zone, ct, spot_price(on_demand_price, instance_type, zone), True))  # type: ignore[arg-type]
            else:
                out.append(Offering(zone, ct, float(on_demand_price), True))  # type: ignore[arg-type]
    return out


def build_instance_type(
    spec: InstanceTypeSpec,
    offerings: list[Offering],
    region: str,
    options: AWSCatalogOptions | None = None,
) -> InstanceType:
    """Assemble one :class:`InstanceType` from the rules above (Karpenter ``NewInstanceType``)."""
    opts = options or AWSCatalogOptions()
    capacity = compute_capacity(spec, opts)
    return InstanceType(
        name=spec.name,
        requirements=compute_requirements(spec, region, ami_family=opts.ami_family),
        offerings=offerings,
        capacity=capacity,
        overhead=compute_overhead(spec, opts, capacity),
    )


def register_aws_labels() -> None:
    """Make the ``karpenter.k8s.aws/instance-*`` labels and the capacity-reservation ID and type
    labels (defined only on reserved offerings) well known, so pods may select them before a node
    exists. Idempotent; called whenever the AWS catalog is built."""
    register_well_known_labels(AWS_WELL_KNOWN_LABELS | {LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE})
    register_metric_labels(AWS_METRIC_ONLY_LABELS)


AWS_METRIC_ONLY_LABELS = frozenset({
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/nitro-sandbox",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
    "topology.k8s.aws/zone-id",
})
"""The rest of Karpenter's AWS well-known labels (``pkg/apis/v1/labels.go``): label dimensions of
the node metrics, as in Karpenter, but not resolved per instance type (see
:data:`UNDERIVABLE_AWS_LABELS`; the zone ID is set on nodes at launch)."""


# ---------------------------------------------------------------------------------------------
# The static catalog
# ---------------------------------------------------------------------------------------------


def _read_data(name: str) -> Any:
    return json.loads(importlib_resources.files("karpy_core").joinpath("data", name).read_text(encoding="utf-8"))


@functools.cache
def load_type_details() -> dict[str, dict[str, Any]]:
    """Instance type -> ``network_bandwidth_mbps``, ``ebs_bandwidth_mbps``, ``sustained_clock_mhz``
    (each an int or None) and ``encryption_in_transit`` (memoised; do not mutate), from
    ``aws-instance-type-details.json``: Karpenter's generated bandwidth table and EC2's
    DescribeInstanceTypes answers, as ``hack/aws_type_details.py`` extracts them."""
    data: dict[str, dict[str, Any]] = _read_data("aws-instance-type-details.json")
    return data


@functools.cache
def load_instance_type_specs() -> tuple[InstanceTypeSpec, ...]:
    """Every launchable type in ``aws-instance-types.json``, sorted by name (memoised)."""
    specs = (InstanceTypeSpec.from_catalog_entry(e) for e in _read_data("aws-instance-types.json"))
    return tuple(sorted((s for s in specs if s is not None), key=lambda s: s.name))


@functools.cache
def load_zone_offerings(region: str) -> dict[str, tuple[str, ...]]:
    """Instance type -> sorted zones offering it in ``region`` (memoised; do not mutate).

    Raises:
        ConfigurationError: ``region`` has no offerings file.
    """
    if region not in SUPPORTED_REGIONS:
        raise ConfigurationError(f"region {region!r} is not in the catalog; supported: {', '.join(SUPPORTED_REGIONS)}")
    by_type: dict[str, list[str]] = {}
    for zone, names in _read_data(f"aws-offerings-{region}.json").items():
        for name in names:
            by_type.setdefault(name, []).append(zone)
    return {name: tuple(sorted(zones)) for name, zones in by_type.items()}


_CATALOG_CACHE: dict[tuple[str, AWSCatalogOptions], list[InstanceType]] = {}


def load_aws_catalog(region: str = DEFAULT_REGION, options: AWSCatalogOptions | None = None) -> list[InstanceType]:
    """The EC2 catalog for ``region`` as InstanceTypes, sorted by name.

    Memoised per ``(region, options)``: the same list object (and InstanceType objects) is
    returned on every call, so treat it as read-only. Registers the AWS labels as well known.

    Raises:
        ConfigurationError: unsupported region.
    """
    opts = options or AWSCatalogOptions()
    key = (region, opts)
    cached = _CATALOG_CACHE.get(key)
    if cached is not None:
        register_aws_labels()
        return cached
    zones_by_type = load_zone_offerings(region)
    catalog: list[InstanceType] = []
    for spec in load_instance_type_specs():
        zones = zones_by_type.get(spec.name)
        if not zones:
            continue
        offerings = build_offerings(spec.name, zones, spec.usage_classes, spec.on_demand_price)
        catalog.append(build_instance_type(spec, offerings, region, opts))
    register_aws_labels()
    _CATALOG_CACHE[key] = catalog
    return catalog
