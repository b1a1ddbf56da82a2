"""karpenter.sh/v1alpha1 ``NodeOverlay``: price and capacity changes for the scheduling simulation.

Source: kubernetes-sigs/karpenter ``pkg/apis/v1alpha1/nodeoverlay.go``, ``nodeoverlay_status.go``,
``nodeoverlay_validation.go`` and the generated ``karpenter.sh_nodeoverlays.yaml``; the design is
``designs/node-overlay.md``. Only read when the ``NodeOverlay`` feature gate is on
(:mod:`karpy_core.cloudprovider.overlay` applies them).

Rules checked here (each error names the field), as the CRD's schema and CEL rules do:

* ``spec.requirements`` is required (may be empty: the overlay then selects every instance type),
  at most 100; ``In``/``NotIn`` need values, ``Exists``/``DoesNotExist`` take none,
  ``Gt``/``Lt``/``Gte``/``Lte`` exactly one non-negative integer; keys in the ``karpenter.sh``
  domain other than ``karpenter.sh/capacity-type`` and ``karpenter.sh/nodepool`` are refused, and
  so is ``kubernetes.io/hostname``;
* ``spec.price`` is a non-negative decimal (``"5.0"``: the new price, USD/hour);
* ``spec.priceAdjustment`` is a signed delta (``"-0.5"``, ``"+1.2"``) or a percentage
  (``"+10%"``; a decrease at most ``"-100%"``);
* ``price`` and ``priceAdjustment`` are exclusive;
* ``spec.capacity`` is a map of quantities and may not name ``cpu``, ``memory``,
  ``ephemeral-storage`` or ``pods`` (it adds extended resources, never replaces the basics);
* ``spec.weight`` is 1..10000 (unset counts as 0).
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from karpy_core.apis.base import Condition, CRDQuantity, Int, KubeModel, KubeObject, Str
from karpy_core.apis.core import check_label_key, check_label_value
from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_NODEPOOL
from karpy_core.apis.nodepool import INT64_MAX

__all__ = [
    "API_VERSION",
    "CONDITION_VALIDATION_SUCCEEDED",
    "PRICE_ADJUSTMENT_PATTERN",
    "PRICE_PATTERN",
    "RESTRICTED_CAPACITY",
    "NodeOverlay",
    "NodeOverlayRequirement",
    "NodeOverlaySpec",
    "NodeOverlayStatus",
]

API_VERSION = "karpenter.sh/v1alpha1"

CONDITION_VALIDATION_SUCCEEDED = "ValidationSucceeded"
"""``v1alpha1.ConditionTypeValidationSucceeded``: False with reason ``RuntimeValidation`` or
``Conflict`` when the overlay is not applied; rolls up into ``Ready``."""

PRICE_PATTERN = r"^\d+(\.\d+)?$"
"""``spec.price``, the CRD's pattern."""
PRICE_ADJUSTMENT_PATTERN = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
"""``spec.priceAdjustment``, the CRD's pattern: a signed number, ``+N%``, or ``-N%`` with N < 100
(or exactly ``-100%``)."""

RESTRICTED_CAPACITY = ("cpu", "memory", "ephemeral-storage", "pods")
"""Resources an overlay's ``capacity`` may not set (Karpenter ``v1.WellKnownResources``)."""

_INTEGER_OPERATORS = ("Gt", "Lt", "Gte", "Lte")


def check_overlay_requirement_key(key: str) -> str:
    """The CRD's key rules: a label key; ``karpenter.sh`` domain only for capacity-type and
    nodepool; never ``kubernetes.io/hostname``.

    Raises:
        ValueError: naming the rule broken.
    """
    check_label_key(key)
    if key == LABEL_HOSTNAME:
        raise ValueError(f'label "{LABEL_HOSTNAME}" is restricted')
    domain = key.split("/", 1)[0]  # the CRD's find("^([^/]+)"): the whole key when it has no "/"
    if key not in (LABEL_CAPACITY_TYPE, LABEL_NODEPOOL) and domain.endswith("karpenter.sh"):
        raise ValueError(f'label domain "karpenter.sh" is restricted (only {LABEL_CAPACITY_TYPE} and {LABEL_NODEPOOL} may be selected)')
    return key


class NodeOverlayRequirement(KubeModel):
    """One ``spec.requirements`` entry (``v1alpha1.NodeSelectorRequirement``): ``key``,
    ``operator``, ``values``; no ``minValues``."""

    key: Str = Field(max_length=316)
    """The label the overlay selects on: a well-known label (node.kubernetes.io/instance-type,
    karpenter.sh/capacity-type, topology.kubernetes.io/zone, karpenter.sh/nodepool...), a
    provider label (karpenter.k8s.aws/instance-family...) or a NodePool template label."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    """How the label's value is matched: In/NotIn a list, Exists/DoesNotExist without values,
    Gt/Lt/Gte/Lte against one non-negative integer."""
    values: list[Str] | None = Field(default=None, validate_default=True)
    """The values compared with the label: at least one for In and NotIn, exactly one integer for
    the numeric operators, none for Exists and DoesNotExist."""

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return check_overlay_requirement_key(value)

    @field_validator("values")
    @classmethod
    def _values(cls, values: list[str] | None, info: ValidationInfo) -> list[str] | None:
        operator = info.data.get("operator")
        if operator in ("In", "NotIn") and not values:
            raise ValueError(f"requirements with operator {operator!r} must have a value defined")
        if operator in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"operator {operator!r} takes no values; got {values}")
        if operator in _INTEGER_OPERATORS and (not values or len(values) != 1 or not re.fullmatch(r"[0-9]+", values[0])):
            raise ValueError(f"requirements operator {operator!r} must have a single positive integer value; got {values or []}")
        if operator in _INTEGER_OPERATORS and values and int(values[0]) > INT64_MAX:
            raise ValueError(f"requirements operator {operator!r} must have a single positive integer value of at most "
                             f"{INT64_MAX} (Karpenter's CEL rule reads it with int()); got {values[0]!r}")
        for value in values or []:
            check_label_value(value)
        return values


def _check_capacity(capacity: dict[str, str]) -> dict[str, str]:
    bad = sorted(k for k in capacity if k in RESTRICTED_CAPACITY)
    if bad:
        raise ValueError(
            f"invalid resource restricted: {', '.join(bad)} (capacity adds extended resources such as hugepages-2Mi "
            f"or example.com/device; it may not set {', '.join(RESTRICTED_CAPACITY)})"
        )
    return capacity


class NodeOverlaySpec(KubeModel):
    """``NodeOverlay.spec``: which instance types and offerings (``requirements``) get which price
    (``price`` or ``priceAdjustment``) and extra ``capacity``, at what ``weight``."""

    requirements: list[NodeOverlayRequirement] = Field(max_length=100)
    """Which instance types and offerings the overlay applies to (every requirement must match);
    empty: all of them. Zone and capacity-type requirements select single offerings."""
    price_adjustment: Str | None = None
    """A change of the selected offerings' price: a signed amount in USD/hour ("-0.5", "+1.2")
    or a percentage ("+10%", "-15%"); a price never goes below 0."""
    price: Str | None = None
    """The selected offerings' price in USD/hour, replacing the provider's ("5.0")."""
    capacity: dict[Str, CRDQuantity] | None = None
    """Extended resources added to the selected instance types' capacity (hugepages-2Mi,
    example.com/device...); cpu, memory, ephemeral-storage and pods may not be set."""
    weight: Int | None = Field(default=None, ge=1, le=10000)
    """Priority (1 to 10000; unset is 0): where several overlays set the same offering's price or
    the same resource, the highest weight wins; equal weights conflict."""

    @field_validator("price_adjustment")
    @classmethod
    def _price_adjustment(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(PRICE_ADJUSTMENT_PATTERN, value, re.ASCII):
            raise ValueError(f"must be a signed amount such as '+1.2' or '-0.5', or a percentage such as '+10%' or '-15%' "
                             f"(a decrease at most '-100%'); got {value!r}")
        return value

    @field_validator("price")
    @classmethod
    def _price(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(PRICE_PATTERN, value, re.ASCII):
            raise ValueError(f"must be a non-negative decimal price such as '5.0' (USD/hour); got {value!r}")
        return value

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        return None if value is None else _check_capacity(value)

    @model_validator(mode="after")
    def _exclusive_price(self) -> NodeOverlaySpec:
        if self.price is not None and self.price_adjustment is not None:
            raise ValueError("cannot set both 'price' and 'priceAdjustment'")
        return self


class NodeOverlayStatus(KubeModel):
    """``NodeOverlay.status``: ``conditions`` (``ValidationSucceeded``, ``Ready``)."""

    conditions: list[Condition] = Field(default_factory=list)
    """ValidationSucceeded (False: RuntimeValidation or Conflict) and Ready."""


class NodeOverlay(KubeObject):
    """karpenter.sh/v1alpha1 ``NodeOverlay`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "NodeOverlay"

    spec: NodeOverlaySpec
    status: NodeOverlayStatus | None = None
