"""Provider-neutral kubelet overhead: the kube-reserved formula, system-reserved, and the
kubelet's default hard eviction thresholds, in karpy's internal units (cpu millicores, bytes).

Used by every provider that sizes nodes the way Karpenter does: the AWS catalog rules
(:mod:`karpy_core.cloudprovider.catalog.aws`, for the ``aws`` plugin and the ``simulated``
provider) and the KakaoCloud plugin. Sources:

* kube-reserved CPU: the per-core ranges of GKE's node allocatable formula (6 % of the first core,
  1 % of the second, 0.5 % of cores 3-4, 0.25 % of the rest), adopted by Bottlerocket (PR 1388)
  and used by aws/karpenter-provider-aws ``pkg/providers/instancetype/types.go``
  ``kubeReservedResources``;
* kube-reserved memory ``11 x pods + 255`` MiB: amazon-eks-ami's ``bootstrap.sh``
  (``get_memory_mebibytes_to_reserve``), also ``kubeReservedResources``; ephemeral-storage 1Gi
  there too;
* eviction thresholds: the kubelet's defaults ``memory.available<100Mi`` and
  ``nodefs.available<10%`` (``pkg/kubelet/eviction/defaults_linux.go``), as Karpenter's
  ``evictionThreshold`` applies them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from karpy_core.scheduling.resources import Resources
from karpy_core.utils.quantity import to_internal

__all__ = ["kube_reserved_cpu", "kube_reserved", "system_reserved", "eviction_threshold"]

_MIB = 1024 * 1024
_GI = 1024 * _MIB
_MEMORY_AVAILABLE = "memory.available"
_NODEFS_AVAILABLE = "nodefs.available"

_CPU_RESERVED_RANGES = ((0, 1000, 6000), (1000, 2000, 1000), (2000, 4000, 500), (4000, 1 << 31, 250))
"""(start m, end m, rate per 100,000): 6 % of the first core, 1 % of the second, 0.5 % of cores 3-4,
0.25 % of the rest (Bottlerocket PR 1388, used by Karpenter ``kubeReservedResources``)."""


def kube_reserved_cpu(vcpu: int) -> int:
    """kube-reserved CPU in **millicores**, each range's share truncated to whole millicores as
    Karpenter's ``int64(r * percentage)`` does. 2 vCPU -> 70, 4 -> 80, 96 -> 310."""
    millicores = vcpu * 1000
    total = 0
    for start, end, rate in _CPU_RESERVED_RANGES:
        if millicores >= start:
            span = min(millicores, end) - start
            total += span * rate // 100_000
    return total


def kube_reserved(vcpu: int, pods: int, overrides: Mapping[str, str] | None = None) -> Resources:
    """kube-reserved in internal units: cpu per :func:`kube_reserved_cpu` (millicores), memory
    ``11 x pods + 255`` MiB (bytes), ephemeral-storage 1Gi (bytes); each key in ``overrides``
    (Kubernetes quantities, e.g. ``{"memory": "1Gi"}``) replaces the computed value.

    ``pods`` is the pod count the node is sized for; the provider decides which (AWS: the
    ENI-limited count on AL2/AL2023/Custom, the pods capacity otherwise, see
    :func:`karpy_core.cloudprovider.catalog.aws.compute_overhead`; KakaoCloud: its max pods).

    Raises:
        QuantityError: an override is not a valid quantity for its resource.
    """
    out: Resources = {
        "cpu": kube_reserved_cpu(vcpu),
        "memory": (11 * pods + 255) * _MIB,
        "ephemeral-storage": _GI,
    }
    for name, quantity in (overrides or {}).items():
        out[name] = to_internal(name, quantity)
    return out


def system_reserved(overrides: Mapping[str, str] | None = None) -> Resources:
    """system-reserved in internal units: exactly the user's ``kubelet.systemReserved``
    quantities (empty by default).

    Raises:
        QuantityError: a value is not a valid quantity for its resource.
    """
    return {name: to_internal(name, q) for name, q in (overrides or {}).items()}


def _eviction_signal(capacity: int, value: str, resource: str) -> int:
    if value.endswith("%"):
        percent = float(value[:-1])
        if percent == 100:  # kubelet: 100% disables the threshold
            percent = 0.0
        return math.ceil(float(capacity) / 100 * percent)
    return to_internal(resource, value)


def eviction_threshold(
    memory_bytes: int, ephemeral_bytes: int, eviction_hard: Mapping[str, str] | None = None
) -> Resources:
    """Hard eviction threshold in bytes: memory 100Mi and ephemeral-storage
    ``ceil(capacity / 100 x 10)`` by default; ``memory.available``/``nodefs.available`` in
    ``eviction_hard`` replace them (a percentage is of the node capacity, ``100%`` = 0).
    ``evictionSoft`` is not considered (reference section 3)."""
    out: Resources = {
        "memory": 100 * _MIB,
        "ephemeral-storage": math.ceil(float(ephemeral_bytes) / 100 * 10),
    }
    hard = eviction_hard or {}
    if _MEMORY_AVAILABLE in hard:
        out["memory"] = _eviction_signal(memory_bytes, hard[_MEMORY_AVAILABLE], "memory")
    if _NODEFS_AVAILABLE in hard:
        out["ephemeral-storage"] = _eviction_signal(ephemeral_bytes, hard[_NODEFS_AVAILABLE], "ephemeral-storage")
    return out
