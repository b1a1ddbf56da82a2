"""``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer and core/v1 PodTemplate.

A CapacityBuffer asks for headroom: room for ``replicas`` copies of a pod (the PodTemplate named
by ``podTemplateRef``), or for ``percentage`` % of a workload's replicas shaped like its pods
(``scalableRef``: a Deployment, ReplicaSet or StatefulSet), capped by ``limits`` (total requests).
Behind the ``CapacityBuffer`` feature gate (off by default, as in Karpenter).

Source: kubernetes-sigs/karpenter ``pkg/apis/autoscaling/v1beta1/capacitybuffer.go`` and the CRD
``pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml`` (its CEL rules are checked here:
exactly one of ``podTemplateRef``/``scalableRef``; ``podTemplateRef`` needs ``replicas`` or
``limits``). Strict: unknown fields are refused and named.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from pydantic import Field, model_validator

from karpy_core.apis.base import (
    Condition,
    CRDResourceList,
    Int,
    KubeModel,
    KubeObject,
    LenientObject,
    Str,
)
from karpy_core.apis.core import PodTemplateSpec
from karpy_core.apis.workloads import INT32_MAX

__all__ = [
    "ACTIVE_CAPACITY",
    "API_VERSION",
    "CapacityBuffer",
    "CapacityBufferSpec",
    "CapacityBufferStatus",
    "LocalObjectRef",
    "PodTemplate",
    "ScalableRef",
    "SCALABLE_KINDS",
]

API_VERSION = "autoscaling.x-k8s.io/v1beta1"
ACTIVE_CAPACITY = "buffer.x-k8s.io/active-capacity"
"""The default (and only acted-on) ``provisioningStrategy``: provision the headroom."""
SCALABLE_KINDS = ("Deployment", "ReplicaSet", "StatefulSet")
"""The ``scalableRef`` kinds Karpenter resolves (``pkg/apis/autoscaling/v1beta1/constants.go``)."""

Count = Annotated[Int, Field(ge=0, le=INT32_MAX)]


class LocalObjectRef(KubeModel):
    """A reference to an object in the buffer's namespace."""

    name: Str = Field(min_length=1)
    """The object's name."""


class ScalableRef(KubeModel):
    """A workload with a scale subresource (Deployment, ReplicaSet, StatefulSet)."""

    api_group: Str = ""
    """The workload's API group (``apps``; empty for the core group)."""
    kind: Str = Field(min_length=1)
    """Deployment, ReplicaSet or StatefulSet."""
    name: Str = Field(min_length=1)
    """The workload's name, in the buffer's namespace."""


class CapacityBufferSpec(KubeModel):
    """``CapacityBuffer.spec``."""

    provisioning_strategy: Str = ACTIVE_CAPACITY
    """How the buffer is used; buffer.x-k8s.io/active-capacity (the default) provisions it."""
    pod_template_ref: LocalObjectRef | None = None
    """A PodTemplate in the same namespace: the shape of one chunk of headroom."""
    scalable_ref: ScalableRef | None = None
    """A workload whose pods give the chunk's shape and whose replicas ``percentage`` refers to."""
    replicas: Count | None = None
    """How many chunks to keep room for (with ``percentage`` the larger wins, ``limits`` caps it)."""
    percentage: Count | None = None
    """Chunks as a percentage of ``scalableRef``'s replicas, rounded up, at least 1."""
    limits: CRDResourceList | None = None
    """Upper bound on the chunks' total requests (e.g. cpu: 10); alone, as many chunks as fit."""

    @model_validator(mode="after")
    def _refs(self) -> CapacityBufferSpec:
        if self.pod_template_ref is not None and self.scalable_ref is not None:
            raise ValueError("You must define either PodTemplateRef or ScalableRef, but not both")
        if self.pod_template_ref is not None and self.replicas is None and self.limits is None:
            raise ValueError("If podTemplateRef is set, replicas or limits must also be set")
        return self


class CapacityBufferStatus(KubeModel):
    """``CapacityBuffer.status`` (written by the controller)."""

    pod_template_ref: LocalObjectRef | None = None
    """The PodTemplate used (podTemplateRef buffers)."""
    replicas: Int | None = None
    """The number of chunks the buffer provisions."""
    pod_template_generation: Int | None = None
    """The PodTemplate's generation the status was computed from."""
    conditions: list[Condition] = Field(default_factory=list)
    """ReadyForProvisioning (the template resolved) and Provisioning (the headroom exists)."""
    provisioning_strategy: Str | None = None
    """The strategy in use."""


class CapacityBuffer(KubeObject):
    """``autoscaling.x-k8s.io/v1beta1`` CapacityBuffer (namespaced)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "CapacityBuffer"
    NAMESPACED: ClassVar[bool] = True

    spec: CapacityBufferSpec
    status: CapacityBufferStatus | None = None


class PodTemplate(LenientObject):
    """core/v1 ``PodTemplate``: a named pod shape (what a buffer's ``podTemplateRef`` names)."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PodTemplate"
    NAMESPACED: ClassVar[bool] = True

    template: PodTemplateSpec
