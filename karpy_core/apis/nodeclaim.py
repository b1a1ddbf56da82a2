"""karpenter.sh/v1 ``NodeClaim``: one requested (then launched) node.

Source: kubernetes-sigs/karpenter ``pkg/apis/v1/nodeclaim.go``, ``nodeclaim_status.go`` (v1.14).
The spec is immutable once created: the NodePool's template spec plus ``resources.requests``.
Providers read ``metadata.labels`` (``karpenter.sh/nodepool``, resolved instance type, zone,
capacity type) and annotations, and fill ``status``.

Conditions (``status.conditions[].type``): ``Launched``, ``Registered`` and ``Initialized`` roll up to
``Ready``; also ``Consolidatable``, ``Drifted``, ``Drained``, ``VolumesDetached``,
``InstanceTerminating``, ``DisruptionReason``, ``ConsistentStateFound``.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from pydantic import Field

from karpy_core.apis.base import Condition, CRDResourceList, KubeModel, KubeObject, Str
from karpy_core.apis.core import Taint
from karpy_core.apis.nodepool import (
    API_VERSION,
    ExpireAfter,
    NodeClassReference,
    Requirements,
    TerminationGracePeriod,
)

__all__ = [
    "CONDITION_LAUNCHED",
    "CONDITION_REGISTERED",
    "CONDITION_INITIALIZED",
    "CONDITION_READY",
    "CONDITION_CONSOLIDATABLE",
    "CONDITION_DRIFTED",
    "CONDITION_DRAINED",
    "CONDITION_VOLUMES_DETACHED",
    "CONDITION_INSTANCE_TERMINATING",
    "CONDITION_DISRUPTION_REASON",
    "CONDITION_CONSISTENT_STATE_FOUND",
    "ResourceRequests",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodeClaim",
]

CONDITION_LAUNCHED = "Launched"
CONDITION_REGISTERED = "Registered"
CONDITION_INITIALIZED = "Initialized"
CONDITION_READY = "Ready"
CONDITION_CONSOLIDATABLE = "Consolidatable"
CONDITION_DRIFTED = "Drifted"
CONDITION_DRAINED = "Drained"
CONDITION_VOLUMES_DETACHED = "VolumesDetached"
CONDITION_INSTANCE_TERMINATING = "InstanceTerminating"
CONDITION_DISRUPTION_REASON = "DisruptionReason"
CONDITION_CONSISTENT_STATE_FOUND = "ConsistentStateFound"


class ResourceRequests(KubeModel):
    """``spec.resources``: the summed requests of the pods (and daemonsets) the NodeClaim was made for."""

    requests: CRDResourceList = Field(default_factory=dict)
    """The resources the node must offer: the requests of the pods it was planned for, plus the
    DaemonSets that will run on it."""


class NodeClaimSpec(KubeModel):
    """``NodeClaim.spec``: requirements (same shape and rules as a NodePool's, ``minValues``
    included), requests, the NodeClass reference, taints, and lifetime settings."""

    requirements: Requirements
    """Constraints on the node's labels (instance types, zones, capacity types, ...) the cloud
    provider launches within: its NodePool's requirements narrowed by its pods'."""
    resources: ResourceRequests = Field(default_factory=ResourceRequests)
    """The resources the launched node must have room for."""
    node_class_ref: NodeClassReference
    """The cloud provider's NodeClass with the node's launch settings."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints the node carries from registration on."""
    startup_taints: list[Taint] = Field(default_factory=list)
    """Taints the node carries while starting, expected to be removed by another agent once the
    node is ready; the node counts as initialized only after they are gone."""
    expire_after: ExpireAfter = "720h"
    """Age (since the NodeClaim's creation) at which the node is replaced: a duration such as
    720h, or Never."""
    termination_grace_period: TerminationGracePeriod | None = None
    """The longest the node's drain may take once deletion starts; past it, remaining pods are
    deleted regardless of PodDisruptionBudgets and do-not-disrupt annotations."""


class NodeClaimStatus(KubeModel):
    """``NodeClaim.status``: what the provider launched and the node that registered.

    ``capacity``/``allocatable`` are quantities; ``lastPodEventTime`` is the last time a pod was
    bound to or removed from the node (consolidateAfter counts from it).
    """

    node_name: Str | None = None
    """Name of the Node that registered for this NodeClaim."""
    provider_id: Str | None = Field(default=None, alias="providerID")
    """The cloud provider's identifier of the instance (the Node's spec.providerID), e.g.
    aws:///us-east-1a/i-0123456789abcdef0."""
    image_id: Str | None = Field(default=None, alias="imageID")
    """Identifier of the machine image the instance was launched from (an AMI ID on AWS)."""
    capacity: CRDResourceList = Field(default_factory=dict)
    """The resources the launched instance type has, before any reservation."""
    allocatable: CRDResourceList = Field(default_factory=dict)
    """The resources left for pods once the kubelet's and the system's reservations and the
    eviction threshold are taken off the capacity."""
    conditions: list[Condition] = Field(default_factory=list)
    """The NodeClaim's progress and state: Launched, Registered, Initialized, Ready,
    Consolidatable, Drifted, Drained, VolumesDetached, InstanceTerminating, ConsistentStateFound
    and DisruptionReason."""
    last_pod_event_time: datetime | None = None
    """When a pod was last scheduled to or removed from the node; consolidateAfter counts from it."""


class NodeClaim(KubeObject):
    """karpenter.sh/v1 ``NodeClaim`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "NodeClaim"

    spec: NodeClaimSpec
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)
