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

from karpy_core.apis.base import Condition, KubeModel, KubeObject, ResourceList, Str
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

    requests: ResourceList = Field(default_factory=dict)


class NodeClaimSpec(KubeModel):
    """``NodeClaim.spec``: requirements (same shape and rules as a NodePool's, ``minValues``
    included), requests, the NodeClass reference, taints, and lifetime settings."""

    requirements: Requirements
    resources: ResourceRequests = Field(default_factory=ResourceRequests)
    node_class_ref: NodeClassReference
    taints: list[Taint] = Field(default_factory=list)
    startup_taints: list[Taint] = Field(default_factory=list)
    expire_after: ExpireAfter = "720h"
    termination_grace_period: TerminationGracePeriod | None = None


class NodeClaimStatus(KubeModel):
    """``NodeClaim.status``: what the provider launched and the node that registered.

    ``capacity``/``allocatable`` are quantities; ``lastPodEventTime`` is the last time a pod was
    bound to or removed from the node (consolidateAfter counts from it).
    """

    node_name: Str | None = None
    provider_id: Str | None = Field(default=None, alias="providerID")
    image_id: Str | None = Field(default=None, alias="imageID")
    capacity: ResourceList = Field(default_factory=dict)
    allocatable: ResourceList = Field(default_factory=dict)
    conditions: list[Condition] = Field(default_factory=list)
    last_pod_event_time: datetime | None = None


class NodeClaim(KubeObject):
    """karpenter.sh/v1 ``NodeClaim`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "NodeClaim"

    spec: NodeClaimSpec
    status: NodeClaimStatus = Field(default_factory=NodeClaimStatus)
