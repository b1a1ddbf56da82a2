"""karpenter.sh/v1 ``NodePool``, with the defaults and CEL rules of Karpenter's CRD.

Source: kubernetes-sigs/karpenter ``pkg/apis/v1/nodepool.go``, ``nodeclaim.go`` and the generated
``karpenter.sh_nodepools.yaml`` (v1.14). Defaults applied here, as the API server applies them:

* ``spec.template.spec.expireAfter``: ``"720h"`` (or ``"Never"``);
* ``spec.disruption.consolidationPolicy``: ``WhenEmptyOrUnderutilized``;
* ``spec.disruption.consolidateAfter``: ``"0s"`` (or ``"Never"``);
* ``spec.disruption.budgets``: ``[{nodes: "10%"}]``.

Rules checked (each error names the field): ``In`` needs values; ``minValues`` (1..50) at most the
number of ``In`` values; ``Gt``/``Lt``/``Gte``/``Lte`` take exactly one non-negative integer; at most
100 requirements; restricted label keys (:func:`karpy_core.apis.labels.is_restricted_label`) in
requirements and template labels; durations and cron schedules parse; budget ``schedule`` and
``duration`` go together; limits are quantities; ``weight`` 1..100; ``nodeClassRef.group`` has no
``/`` (a common mistake is ``karpenter.k8s.aws/v1``).
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from croniter import croniter
from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from karpy_core.apis.base import Condition, Int, KubeModel, KubeObject, ResourceList, Str
from karpy_core.apis.core import Taint, check_label_key, check_label_value
from karpy_core.apis.durations import BUDGET_DURATION, DURATION, DURATION_OR_NEVER, check_duration
from karpy_core.apis.labels import LABEL_NODEPOOL, is_restricted_label

__all__ = [
    "API_VERSION",
    "NodeSelectorRequirementWithMinValues",
    "NodeClassReference",
    "NodeClaimTemplateMetadata",
    "NodeClaimTemplateSpec",
    "NodeClaimTemplate",
    "Budget",
    "Disruption",
    "NodePoolSpec",
    "NodePoolStatus",
    "NodePool",
    "ExpireAfter",
    "ConsolidateAfter",
    "TerminationGracePeriod",
]

API_VERSION = "karpenter.sh/v1"

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
_INTEGER_OPERATORS = ("Gt", "Lt", "Gte", "Lte")

ExpireAfter = Annotated[Str, AfterValidator(lambda v: check_duration(v, DURATION_OR_NEVER))]
"""A Go duration in whole h/m/s (``720h``, ``1h30m``) or ``Never``."""
ConsolidateAfter = ExpireAfter
TerminationGracePeriod = Annotated[Str, AfterValidator(lambda v: check_duration(v, DURATION))]
"""A Go duration in whole h/m/s; ``Never`` is not allowed."""


def _check_requirement_key(key: str) -> str:
    check_label_key(key)
    if is_restricted_label(key):
        raise ValueError(
            f"label key {key!r} is restricted: Karpenter sets it itself or it belongs to a reserved domain"
        )
    return key


class NodeSelectorRequirementWithMinValues(KubeModel):
    """One NodePool/NodeClaim requirement: ``key``, ``operator``, ``values``, optional ``minValues``.

    ``minValues`` (1..50) asks the scheduler to keep at least that many distinct values of ``key``
    among the instance types it may launch. Errors point at the offending field
    (``...requirements[2].values``).
    """

    key: Str = Field(max_length=316)
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    values: list[Str] | None = Field(default=None, validate_default=True)
    min_values: Int | None = Field(default=None, ge=1, le=50)

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return _check_requirement_key(value)

    @field_validator("values")
    @classmethod
    def _values(cls, values: list[str] | None, info: ValidationInfo) -> list[str] | None:
        operator = info.data.get("operator")
        if operator == "In" and not values:
            raise ValueError("operator 'In' needs at least one value")
        if operator in _INTEGER_OPERATORS:
            if not values or len(values) != 1:
                raise ValueError(f"operator {operator!r} needs exactly one integer value; got {values or []}")
            if not re.fullmatch(r"[0-9]+", values[0]):
                raise ValueError(f"operator {operator!r} needs a non-negative integer value; got {values[0]!r}")
        for value in values or []:
            check_label_value(value)
        return values

    @field_validator("min_values")
    @classmethod
    def _min_values(cls, min_values: int | None, info: ValidationInfo) -> int | None:
        values = info.data.get("values")
        if (
            min_values is not None
            and info.data.get("operator") == "In"
            and values is not None
            and len(values) < min_values
        ):
            raise ValueError(
                f"minValues is {min_values} but operator 'In' lists only {len(values)} value(s); "
                "list at least minValues values"
            )
        return min_values


Requirements = Annotated[list[NodeSelectorRequirementWithMinValues], Field(max_length=100)]


_API_VERSION = re.compile(r"v[0-9]+((alpha|beta)[0-9]+)?")


class NodeClassReference(KubeModel):
    """``nodeClassRef``: the provider NodeClass (``group``, ``kind``, ``name``), all required and
    non-empty. ``group`` is the API group only, e.g. ``karpenter.k8s.aws``.

    A group written with a version (``karpenter.k8s.aws/v1``, as one of Karpenter's own published
    examples does) is read as the group alone; the loader warns about it. Karpenter's CRD rejects
    that form since kubernetes-sigs/karpenter#1516, but the intent is unambiguous and karpy keeps
    such manifests working. Anything else after a ``/`` is an error."""

    group: Str = Field(min_length=1)
    kind: Str = Field(min_length=1)
    name: Str = Field(min_length=1)

    @field_validator("group")
    @classmethod
    def _group(cls, value: str) -> str:
        if "/" in value:
            group, _, version = value.partition("/")
            if group and _API_VERSION.fullmatch(version):
                return group
            raise ValueError(f"must be an API group without a version, e.g. {group!r}; got {value!r}")
        return value


def _check_template_labels(labels: dict[str, str]) -> dict[str, str]:
    """Every bad key or value at once, each named by its key."""
    problems = []
    for key, value in labels.items():
        try:
            check_label_key(key)
            check_label_value(value)
            if key == LABEL_NODEPOOL or is_restricted_label(key):
                raise ValueError(f"label key {key!r} is restricted: Karpenter sets it itself or it belongs to a reserved domain")
        except ValueError as exc:
            problems.append(f"[{key!r}]: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return labels


class NodeClaimTemplateMetadata(KubeModel):
    """``spec.template.metadata``: only ``labels`` and ``annotations`` (copied to every node)."""

    labels: Annotated[dict[Str, Str], AfterValidator(_check_template_labels)] = Field(default_factory=dict)
    annotations: dict[Str, Str] = Field(default_factory=dict)


class NodeClaimTemplateSpec(KubeModel):
    """``spec.template.spec``: what every NodeClaim of the pool gets.

    ``expireAfter`` defaults to ``"720h"``; ``terminationGracePeriod`` (no default) bounds a drain.
    ``startupTaints`` are expected to be removed by a daemon; pods need not tolerate them.
    """

    requirements: Requirements
    node_class_ref: NodeClassReference
    taints: list[Taint] = Field(default_factory=list)
    startup_taints: list[Taint] = Field(default_factory=list)
    expire_after: ExpireAfter = "720h"
    termination_grace_period: TerminationGracePeriod | None = None


class NodeClaimTemplate(KubeModel):
    """``spec.template``: metadata and spec stamped onto each NodeClaim."""

    metadata: NodeClaimTemplateMetadata = Field(default_factory=NodeClaimTemplateMetadata)
    spec: NodeClaimTemplateSpec


def _check_budget_nodes(value: str) -> str:
    if not re.fullmatch(r"((100|[0-9]{1,2})%|[0-9]+)", value):
        raise ValueError(f"must be a node count such as '5' or a percentage 0%..100% such as '10%'; got {value!r}")
    return value


def _check_schedule(value: str) -> str:
    macro = re.fullmatch(r"@(annually|yearly|monthly|weekly|daily|midnight|hourly)", value)
    if not macro and (len(value.split()) != 5 or not croniter.is_valid(value)):
        raise ValueError(
            f"{value!r} is not a cron schedule (five fields 'minute hour day-of-month month day-of-week', "
            "e.g. '0 9 * * mon-fri', or @daily/@hourly/...)"
        )
    return value


class Budget(KubeModel):
    """One disruption budget: at most ``nodes`` (``"N"`` or ``"N%"``) disrupted at once, for the
    listed ``reasons`` (all when empty), optionally only during ``duration`` after each cron
    ``schedule`` tick (UTC). ``schedule`` and ``duration`` must be set together."""

    nodes: Annotated[Str, AfterValidator(_check_budget_nodes)] = "10%"
    reasons: list[Literal["Underutilized", "Empty", "Drifted"]] | None = None
    schedule: Annotated[Str, AfterValidator(_check_schedule)] | None = None
    duration: Annotated[Str, AfterValidator(lambda v: check_duration(v, BUDGET_DURATION))] | None = None

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration' (and 'duration' with 'schedule')")
        return self


class Disruption(KubeModel):
    """``spec.disruption``: when nodes may be consolidated, and how many at once."""

    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = "WhenEmptyOrUnderutilized"
    consolidate_after: ConsolidateAfter = "0s"
    budgets: list[Budget] = Field(default_factory=lambda: [Budget(nodes="10%")], max_length=50)


class NodePoolSpec(KubeModel):
    """``NodePool.spec``.

    ``limits`` caps the pool's total resources (any resource name, including ``nodes``);
    ``weight`` (1..100) orders pools, higher first; ``replicas`` makes a static pool (alpha).
    """

    template: NodeClaimTemplate
    disruption: Disruption = Field(default_factory=Disruption)
    limits: ResourceList = Field(default_factory=dict)
    weight: Int | None = Field(default=None, ge=1, le=100)
    replicas: Int | None = Field(default=None, ge=0)


class NodePoolStatus(KubeModel):
    """``NodePool.status``: provisioned ``resources`` (incl. ``nodes``), node count, conditions
    (``ValidationSucceeded``, ``NodeClassReady``, ``NodeRegistrationHealthy``, ``Ready``)."""

    resources: ResourceList = Field(default_factory=dict)
    nodes: Int | None = None
    conditions: list[Condition] = Field(default_factory=list)


class NodePool(KubeObject):
    """karpenter.sh/v1 ``NodePool`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "NodePool"

    spec: NodePoolSpec
    status: NodePoolStatus | None = None
