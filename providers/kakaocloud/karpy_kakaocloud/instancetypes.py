"""BCS flavors as karpy :class:`~karpy_core.cloudprovider.types.InstanceType` objects.

Per flavor (``GET /api/v1/flavors``, reference §3):

* **capacity** - ``cpu`` = ``vcpus`` x 1000 millicores, ``memory`` = ``memory_mb`` MiB in bytes,
  ``pods`` = ``max_pods`` (110), ``ephemeral-storage`` = the KCNodeClass root volume (GiB), and
  ``nvidia.com/gpu`` = ``hw_count`` when ``hw_type`` is ``GPU``;
* **overhead** - kube-reserved as Karpenter computes it (cpu 6/1/0.5/0.25 % tiers, memory
  ``11 x pods + 255`` MiB, 1 GiB storage) and a 100 MiB memory eviction threshold;
* **labels** - ``kubernetes.io/arch`` (``x86_64`` -> ``amd64``, ``aarch64``/``arm64`` -> ``arm64``),
  ``kubernetes.io/os=linux``, ``node.kubernetes.io/instance-type`` = flavor name, and
  ``karpenter.kakaocloud.com/instance-{family,size,cpu,memory,gpu-count,gpu-name}``
  (``DoesNotExist`` for the GPU labels of CPU flavors);
* **offerings** - ``on-demand`` only (KakaoCloud has no spot market), one per zone of the
  KCNodeClass's subnets (``kr-central-2-{a,b,c}``), unavailable when the flavor lists
  ``availability_zone`` without that zone; price from the :class:`~karpy_kakaocloud.pricing.PriceTable`.

Bare-metal flavors (``instance_type: bm``) are left out: BCS create refuses volumes for them and
karpy always sends a root volume.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    LABEL_ARCH,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    register_well_known_labels,
)
from karpy_core.cloudprovider.overhead import kube_reserved
from karpy_core.cloudprovider.types import InstanceType, Offering, Overhead
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_kakaocloud.pricing import PriceTable

__all__ = [
    "LABEL_INSTANCE_CPU",
    "LABEL_INSTANCE_FAMILY",
    "LABEL_INSTANCE_GPU_COUNT",
    "LABEL_INSTANCE_GPU_NAME",
    "LABEL_INSTANCE_MEMORY",
    "LABEL_INSTANCE_SIZE",
    "ZONES",
    "arch_of",
    "flavor_gpus",
    "instance_types_from_flavors",
]

GROUP = "karpenter.kakaocloud.com"
LABEL_INSTANCE_FAMILY = f"{GROUP}/instance-family"
LABEL_INSTANCE_SIZE = f"{GROUP}/instance-size"
LABEL_INSTANCE_CPU = f"{GROUP}/instance-cpu"
LABEL_INSTANCE_MEMORY = f"{GROUP}/instance-memory"
LABEL_INSTANCE_GPU_COUNT = f"{GROUP}/instance-gpu-count"
LABEL_INSTANCE_GPU_NAME = f"{GROUP}/instance-gpu-name"
ZONES = ("kr-central-2-a", "kr-central-2-b", "kr-central-2-c")
"""Availability zones of kr-central-2 ([SDK] enum)."""

_MIB = 1024 * 1024
_GIB = 1024 * _MIB
EVICTION_MEMORY = 100 * _MIB

register_well_known_labels(
    {LABEL_INSTANCE_FAMILY, LABEL_INSTANCE_SIZE, LABEL_INSTANCE_CPU, LABEL_INSTANCE_MEMORY,
     LABEL_INSTANCE_GPU_COUNT, LABEL_INSTANCE_GPU_NAME}
)


def arch_of(flavor: dict[str, Any]) -> str:
    """``kubernetes.io/arch`` for a flavor's ``architecture`` (default amd64)."""
    a = str(flavor.get("architecture") or "x86_64").lower()
    return "arm64" if a in ("aarch64", "arm64", "arm") else "amd64"


def flavor_gpus(flavor: dict[str, Any]) -> int:
    """GPUs on a flavor: ``hw_count`` when ``hw_type`` is GPU (or ``instance_type`` is gpu)."""
    if str(flavor.get("hw_type") or "").upper() == "GPU" or flavor.get("instance_type") == "gpu":
        return int(flavor.get("hw_count") or 0)
    return 0


def _family_size(flavor: dict[str, Any]) -> tuple[str, str]:
    name = str(flavor.get("name") or "")
    family, _, size = name.partition(".")
    return str(flavor.get("instance_family") or family), str(flavor.get("instance_size") or size)


def instance_types_from_flavors(
    flavors: Iterable[dict[str, Any]],
    *,
    zones: Sequence[str],
    prices: PriceTable,
    root_volume_gib: int = 50,
    max_pods: int = 110,
) -> list[InstanceType]:
    """Build instance types (sorted by name) from flavor dicts; see the module docstring."""
    out: list[InstanceType] = []
    for f in flavors:
        name = f.get("name")
        vcpus = int(f.get("vcpus") or 0)
        memory_mb = int(f.get("memory_mb") or 0)
        if not name or vcpus <= 0 or memory_mb <= 0 or f.get("instance_type") == "bm":
            continue
        gpus = flavor_gpus(f)
        family, size = _family_size(f)
        reqs = Requirements.of(
            Requirement.new(LABEL_INSTANCE_TYPE, "In", [name]),
            Requirement.new(LABEL_ARCH, "In", [arch_of(f)]),
            Requirement.new(LABEL_OS, "In", ["linux"]),
            Requirement.new(LABEL_INSTANCE_FAMILY, "In", [family]) if family else Requirement.new(LABEL_INSTANCE_FAMILY, "DoesNotExist"),
            Requirement.new(LABEL_INSTANCE_SIZE, "In", [size]) if size else Requirement.new(LABEL_INSTANCE_SIZE, "DoesNotExist"),
            Requirement.new(LABEL_INSTANCE_CPU, "In", [str(vcpus)]),
            Requirement.new(LABEL_INSTANCE_MEMORY, "In", [str(memory_mb)]),
        )
        if gpus:
            reqs.add(Requirement.new(LABEL_INSTANCE_GPU_COUNT, "In", [str(gpus)]))
            reqs.add(Requirement.new(LABEL_INSTANCE_GPU_NAME, "In", [str(f.get("hw_name") or "gpu").lower()]))
        else:
            reqs.add(Requirement.new(LABEL_INSTANCE_GPU_COUNT, "DoesNotExist"))
            reqs.add(Requirement.new(LABEL_INSTANCE_GPU_NAME, "DoesNotExist"))
        listed = f.get("availability_zone")
        listed_zones = set(listed) if isinstance(listed, list) and listed else None
        price = prices.price(name, vcpus, memory_mb, gpus)
        offerings = [
            Offering(z, CAPACITY_TYPE_ON_DEMAND, price, listed_zones is None or z in listed_zones) for z in sorted(set(zones))
        ]
        capacity = {"cpu": vcpus * 1000, "memory": memory_mb * _MIB, "pods": max_pods, "ephemeral-storage": root_volume_gib * _GIB}
        if gpus:
            capacity["nvidia.com/gpu"] = gpus
        overhead = Overhead(kube_reserved=kube_reserved(vcpus, max_pods), eviction_threshold={"memory": EVICTION_MEMORY})
        out.append(InstanceType(name=name, requirements=reqs, offerings=offerings, capacity=capacity, overhead=overhead))
    return sorted(out, key=lambda it: it.name)
