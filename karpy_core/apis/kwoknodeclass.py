"""karpenter.kwok.sh/v1alpha1 ``KWOKNodeClass``: the NodeClass of Karpenter's KWOK provider, served
by karpy's simulated provider (``karpy controller --cloud-provider simulated``, ``karpy simulate``)
so Karpenter's own KWOK manifests run unchanged.

Source: kubernetes-sigs/karpenter ``kwok/apis/v1alpha1/kwoknodeclass.go``,
``kwok/apis/v1alpha1/kwoknodeclass_status.go`` and the generated
``kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml`` (cluster-scoped, short names ``kwoknc``
and ``kwokncs``, category ``karpenter``).

* ``spec.nodeRegistrationDelay`` (optional): a duration in whole h/m/s (``^([0-9]+(s|m|h))+$``).
  Karpenter's KWOK provider sleeps that long before creating the Node; karpy's simulated provider
  accepts the field and does not apply it (its own boot delays are provider options).
* ``status.conditions``: Karpenter's KWOK provider runs no NodeClass status controller. Its CRD
  gives ``status`` a default, one ``Ready=True`` condition (reason ``Ready``, message ``""``,
  ``lastTransitionTime: "2024-01-01T01:01:01Z"``), which the API server fills in whenever an
  object without a status is read; a NodePool naming a KWOKNodeClass is therefore Ready as soon as
  the class exists. The model has the same default (:func:`default_status`), so the generated CRD
  carries it and ``karpy simulate`` (objects dumped from the model) sees the same condition.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, ClassVar

from pydantic import AfterValidator, Field

from karpy_core.apis.base import Condition, KubeModel, KubeObject, Str
from karpy_core.apis.crdspec import CRDSpec, Overlay
from karpy_core.apis.durations import DURATION, check_duration

__all__ = [
    "API_VERSION",
        "GROUP",
    "KIND",
    "PLURAL",
    "KWOKNodeClass",
    "KWOKNodeClassSpec",
    "KWOKNodeClassStatus",
    "crd_spec",
    "default_status",
]

GROUP = "karpenter.kwok.sh"
API_VERSION = f"{GROUP}/v1alpha1"
KIND = "KWOKNodeClass"
PLURAL = "kwoknodeclasses"

_DEFAULT_TRANSITION = datetime(2024, 1, 1, 1, 1, 1, tzinfo=UTC)
"""The ``lastTransitionTime`` of Karpenter's ``+kubebuilder:default`` on ``KWOKNodeClass.Status``."""


def _check_delay(value: str) -> str:
    return check_duration(value, DURATION)


class KWOKNodeClassSpec(KubeModel):
    """``KWOKNodeClass.spec``."""

    node_registration_delay: Annotated[Str, AfterValidator(_check_delay)] | None = None
    """How long Karpenter's KWOK provider waits before creating the Node (models instance start-up),
    in whole h/m/s (``30s``, ``1m30s``). Accepted and stored; karpy's simulated provider does not
    apply it."""


def _default_conditions() -> list[Condition]:
    return [Condition(type="Ready", status="True", reason="Ready", message="", last_transition_time=_DEFAULT_TRANSITION)]


class KWOKNodeClassStatus(KubeModel):
    """``KWOKNodeClass.status``: conditions only (``Ready``)."""

    conditions: list[Condition] = Field(default_factory=list)
    """Signals for health and readiness; Karpenter's CRD defaults them to one ``Ready=True``."""


def default_status() -> KWOKNodeClassStatus:
    """The status a KWOKNodeClass gets when it has none (Karpenter's CRD default): one ``Ready=True``."""
    return KWOKNodeClassStatus(conditions=_default_conditions())


class KWOKNodeClass(KubeObject):
    """karpenter.kwok.sh/v1alpha1 ``KWOKNodeClass`` (cluster-scoped). ``spec`` may be omitted, as
    in Karpenter's kwok/README (``metadata.name: default`` and nothing else)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = KIND
    NODE_CLASS: ClassVar[bool] = True
    PLURAL: ClassVar[str] = PLURAL

    spec: KWOKNodeClassSpec = Field(default_factory=KWOKNodeClassSpec)
    status: KWOKNodeClassStatus = Field(default_factory=default_status)


def _overlays() -> dict[str, Overlay]:
    return {"KWOKNodeClassSpec": Overlay(properties={"nodeRegistrationDelay": {"pattern": DURATION.pattern}})}


def crd_spec() -> CRDSpec:
    """The :class:`~karpy_core.apis.crdspec.CRDSpec` of ``crds/karpenter.kwok.sh_kwoknodeclasses.yaml``
    (Karpenter's names: short names ``kwoknc``/``kwokncs``, category ``karpenter``, no printer
    columns)."""
    return CRDSpec(KWOKNodeClass, PLURAL, short_names=("kwoknc", "kwokncs"), overlays=_overlays)
