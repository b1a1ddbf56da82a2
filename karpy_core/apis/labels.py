"""Well-known label, annotation, taint and finalizer names of the ``karpenter.sh/v1`` API.

Source: kubernetes-sigs/karpenter ``pkg/apis/v1/labels.go`` and ``taints.go`` (v1.14), and the
Kubernetes well-known labels (``k8s.io/api/core/v1/well_known_labels.go``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GROUP = "karpenter.sh"

# Kubernetes well-known labels
LABEL_ARCH = "kubernetes.io/arch"
LABEL_OS = "kubernetes.io/os"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_INSTANCE_TYPE = "node.kubernetes.io/instance-type"
LABEL_WINDOWS_BUILD = "node.kubernetes.io/windows-build"
LABEL_ZONE = "topology.kubernetes.io/zone"
LABEL_REGION = "topology.kubernetes.io/region"

# karpenter.sh labels
LABEL_NODEPOOL = "karpenter.sh/nodepool"
LABEL_CAPACITY_TYPE = "karpenter.sh/capacity-type"
LABEL_EXCLUDE_BALANCERS = "node.kubernetes.io/exclude-from-external-load-balancers"
"""Set to ``karpenter`` on a Node being terminated (Karpenter's terminator): service
controllers take it out of external load balancers before its pods are drained."""
LABEL_REGISTERED = "karpenter.sh/registered"
LABEL_INITIALIZED = "karpenter.sh/initialized"
LABEL_DO_NOT_SYNC_TAINTS = "karpenter.sh/do-not-sync-taints"


def nodeclass_label_key(group: str, kind: str) -> str:
    """The label naming a NodeClaim's (and its Node's) NodeClass: ``<group>/<kind lower-cased>``,
    e.g. ``karpenter.k8s.aws/ec2nodeclass``, ``karpenter.kakaocloud.com/kcnodeclass`` (Karpenter
    ``NodeClassLabelKey``); its value is the NodeClass name."""
    return f"{group}/{kind.lower()}"

CAPACITY_TYPE_SPOT = "spot"
CAPACITY_TYPE_ON_DEMAND = "on-demand"
CAPACITY_TYPE_RESERVED = "reserved"
CAPACITY_TYPES = (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND)

# Capacity reservations (karpenter-provider-aws ``pkg/apis/v1/labels.go``). Karpenter core lets the
# provider name its reservation-ID label (``cloudprovider.ReservationIDLabel``); the only providers
# here with reservations are AWS and the simulated one (an AWS catalog), so karpy fixes it to AWS's.
LABEL_RESERVATION_ID = "karpenter.k8s.aws/capacity-reservation-id"
LABEL_RESERVATION_TYPE = "karpenter.k8s.aws/capacity-reservation-type"
RESERVATION_TYPE_DEFAULT = "default"
RESERVATION_TYPE_CAPACITY_BLOCK = "capacity-block"
RESERVED_PRICE_DIVISOR = 10_000_000.0
"""A reserved offering costs its on-demand price / 10^7 USD/hour (karpenter-provider-aws
``ReservedCapacityResolver``): "free", so it is launched first, yet ordered like on-demand."""

# Annotations
ANNOTATION_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
ANNOTATION_NODEPOOL_HASH = "karpenter.sh/nodepool-hash"
ANNOTATION_NODEPOOL_HASH_VERSION = "karpenter.sh/nodepool-hash-version"
ANNOTATION_TERMINATION_TIMESTAMP = "karpenter.sh/nodeclaim-termination-timestamp"
ANNOTATION_MIN_VALUES_RELAXED = "karpenter.sh/nodeclaim-min-values-relaxed"
ANNOTATION_NOMINATED_PODS = "karpy.sh/nominated-pods"
"""karpy's own: on a NodeClaim the provisioner creates, the pods (``namespace/name``, sorted,
comma separated) it was planned for, so the pod nominations survive a restart or a failover
(:func:`karpy_core.state.nominations.recorded_targets`). Karpenter keeps them in memory only."""

# Taints and finalizer
TAINT_DISRUPTED = "karpenter.sh/disrupted"
TAINT_UNREGISTERED = "karpenter.sh/unregistered"
FINALIZER_TERMINATION = "karpenter.sh/termination"

WELL_KNOWN_LABELS = frozenset(
    {
        LABEL_NODEPOOL,
        LABEL_CAPACITY_TYPE,
        LABEL_ZONE,
        LABEL_REGION,
        LABEL_INSTANCE_TYPE,
        LABEL_ARCH,
        LABEL_OS,
        LABEL_WINDOWS_BUILD,
    }
)
"""Labels every provider resolves; a pod may require them even before a node exists.

Providers extend this set through :func:`register_well_known_labels` (e.g. the
``karpenter.k8s.aws/instance-*`` labels)."""

_extra_well_known: set[str] = set()

RESTRICTED_LABEL_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh")
"""NodePool requirements and template labels may not use these domains except for the well-known
labels and the exceptions below (Karpenter ``pkg/apis/v1/labels.go``)."""

LABEL_DOMAIN_EXCEPTIONS = ("kops.k8s.io", "node.kubernetes.io/", "node-restriction.kubernetes.io")

PROVIDER_LABEL_DOMAINS: dict[str, frozenset[str]] = {
    "karpenter.k8s.aws": frozenset(f"karpenter.k8s.aws/{name}" for name in (
        "ec2nodeclass", "capacity-reservation-id", "capacity-reservation-interruptible", "capacity-reservation-type",
        "instance-accelerator-count", "instance-accelerator-manufacturer", "instance-accelerator-name",
        "instance-capability-flex", "instance-category", "instance-cpu", "instance-cpu-manufacturer",
        "instance-cpu-sustained-clock-speed-mhz", "instance-ebs-bandwidth", "instance-encryption-in-transit-supported",
        "instance-family", "instance-generation", "instance-gpu-count", "instance-gpu-manufacturer",
        "instance-gpu-memory", "instance-gpu-name", "instance-hypervisor", "instance-local-nvme", "instance-memory",
        "instance-network-bandwidth", "instance-size", "instance-tenancy", "nitro-sandbox", "placement-group-id",
        "placement-group-partition",
    )),
}
"""Provider label domains restricted like ``karpenter.sh`` -> the keys of that domain still allowed.
karpenter-provider-aws adds ``karpenter.k8s.aws`` to Karpenter's ``RestrictedLabelDomains``
(``pkg/apis/v1/labels.go``) and its NodePool/NodeClaim CRDs refuse any other key of that domain
(``label domain "karpenter.k8s.aws" is restricted``); the allowed keys are its well-known labels
(those :mod:`karpy_core.cloudprovider.catalog.aws` resolves, registers for metrics or cannot derive)
and ``karpenter.k8s.aws/ec2nodeclass``."""


def min_values_relaxed(claim: Mapping[str, Any] | None) -> str:
    """``karpenter_nodeclaims_created_total``'s ``min_values_relaxed`` label of a NodeClaim dict:
    ``"true"`` when it carries :data:`ANNOTATION_MIN_VALUES_RELAXED` ``"true"``, else ``"false"``."""
    ann = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    return "true" if ann.get(ANNOTATION_MIN_VALUES_RELAXED) == "true" else "false"


def register_well_known_labels(labels: set[str] | frozenset[str]) -> None:
    """Add provider-defined labels (such as ``karpenter.k8s.aws/instance-family``) to the
    well-known set, so pods may select on them before a node carrying them exists."""
    _extra_well_known.update(labels)


def well_known_extra() -> frozenset[str]:
    """The provider-defined well-known labels registered so far (see :func:`register_well_known_labels`)."""
    return frozenset(_extra_well_known)


_metric_only: set[str] = set()


def register_metric_labels(labels: set[str] | frozenset[str]) -> None:
    """Add node labels that become label dimensions of the node metrics
    (``karpenter_nodes_allocatable`` and the like) without being well known to scheduling: a
    provider's labels that Karpenter lists as well known but karpy does not resolve for every
    instance type (AWS: tenancy, Nitro Enclaves, placement group, zone ID). Karpenter derives its
    node metrics' labels from its whole well-known set."""
    _metric_only.update(labels)


def metric_label_keys() -> frozenset[str]:
    """Every node label the node metrics carry: the well-known labels, the provider's registered
    ones and :func:`register_metric_labels`'."""
    return frozenset(WELL_KNOWN_LABELS) | frozenset(_extra_well_known) | frozenset(_metric_only)


def is_well_known(key: str) -> bool:
    """True for labels whose value a provider resolves for every instance type."""
    return key in WELL_KNOWN_LABELS or key in _extra_well_known


def is_restricted_label(key: str) -> bool:
    """True when ``key`` may not be used in a NodePool's requirements or template labels.

    ``kubernetes.io/hostname`` is always restricted; other keys in a restricted domain are allowed
    only when well known or in an exception domain; a key of a provider domain
    (:data:`PROVIDER_LABEL_DOMAINS`, ``karpenter.k8s.aws``) only when that domain allows it.
    """
    if key == LABEL_HOSTNAME:
        return True
    if is_well_known(key):
        return False
    domain = key.split("/", 1)[0] if "/" in key else ""
    if any(key.startswith(exc) or domain.endswith(exc.rstrip("/")) for exc in LABEL_DOMAIN_EXCEPTIONS):
        return False
    for provider_domain, allowed in PROVIDER_LABEL_DOMAINS.items():
        if domain == provider_domain or domain.endswith("." + provider_domain):
            return key not in allowed
    return any(domain == d or domain.endswith("." + d) for d in RESTRICTED_LABEL_DOMAINS)
