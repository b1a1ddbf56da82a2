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
``/`` (a common mistake, ``karpenter.k8s.aws/v1``, is refused as Karpenter's CRD refuses it); with ``replicas`` (a static pool) only
``limits.nodes`` and no ``weight``, and (CRD only, it needs the old object) no switch between
static and dynamic.
"""

from __future__ import annotations

import json
import re
from typing import Annotated, ClassVar, Literal

from croniter import croniter
from pydantic import AfterValidator, Field, ValidationInfo, field_validator, model_validator

from karpy_core.apis.base import Condition, CRDResourceList, Int, KubeModel, KubeObject, Str
from karpy_core.apis.core import Taint, check_label_key, check_label_value
from karpy_core.apis.durations import BUDGET_DURATION, DURATION, DURATION_OR_NEVER, check_duration
from karpy_core.apis.labels import LABEL_NODEPOOL, is_restricted_label

__all__ = [
    "API_VERSION",
    "GROUP_PATTERN",
    "INT64_MAX",
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
INT64_MAX = 2**63 - 1
"""The largest value a Gt/Lt/Gte/Lte requirement may hold: Karpenter's CRD rule
``int(x.values[0]) >= 0`` (karpenter.sh_nodepools.yaml, _nodeclaims, _nodeoverlays) fails with a
type conversion error beyond a 64-bit integer, so kube-apiserver refuses the object."""

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
    """The node label the requirement constrains, e.g. node.kubernetes.io/instance-type or
    karpenter.sh/capacity-type; labels karpy manages itself (karpenter.sh/nodepool,
    kubernetes.io/hostname...) cannot be required."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    """How the label's value is matched: In/NotIn a list of values, Exists/DoesNotExist without
    values, Gt/Lt/Gte/Lte against one non-negative integer."""
    values: list[Str] | None = Field(default=None, validate_default=True)
    """The values compared with the label: at least one for In, exactly one integer for the
    numeric operators, none for Exists and DoesNotExist."""
    min_values: Int | None = Field(default=None, ge=1, le=50)
    """The least number of distinct values of this label the scheduler must keep among the
    instance types a node may be launched as (1 to 50); a NodeClaim that cannot keep that many
    is not created."""

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
            if int(values[0]) > INT64_MAX:
                raise ValueError(f"operator {operator!r} needs an integer of at most {INT64_MAX} (Karpenter's CEL "
                                 f"rule reads it with int(), which fails beyond); got {values[0]!r}")
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
GROUP_PATTERN = "^[^/]*$"
"""Karpenter's CRD pattern for ``nodeClassRef.group`` (``pkg/apis/v1/nodeclaim.go``): no ``/``."""


class NodeClassReference(KubeModel):
    """``nodeClassRef``: the provider NodeClass (``group``, ``kind``, ``name``), all required and
    non-empty. ``group`` is the API group only, e.g. ``karpenter.k8s.aws``.

    A group written with a version (``karpenter.k8s.aws/v1``, as one of Karpenter's own published
    examples did) is refused, as Karpenter's CRD refuses it (``pattern: ^[^/]*$`` on
    ``nodeClassRef.group``, kubernetes-sigs/karpenter#1516): the error holds the API server's words
    and names the group to write instead."""

    group: Str = Field(min_length=1)
    """API group of the NodeClass, without a version, e.g. karpenter.k8s.aws."""
    kind: Str = Field(min_length=1)
    """Kind of the NodeClass, e.g. EC2NodeClass or KCNodeClass."""
    name: Str = Field(min_length=1)
    """Name of the NodeClass object (NodeClasses are cluster-scoped)."""

    @field_validator("group")
    @classmethod
    def _group(cls, value: str) -> str:
        if "/" in value:
            group, _, version = value.partition("/")
            hint = f" (an API group without a version: {group!r})" if group and _API_VERSION.fullmatch(version) else ""
            raise ValueError(f"Invalid value: {json.dumps(value)}: should match '{GROUP_PATTERN}'{hint}")
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
    """Labels put on every NodeClaim and Node of the pool; they also act as requirements, so a pod
    selecting one of them can land here. Keys in the kubernetes.io, k8s.io and karpenter.sh
    domains are refused."""
    annotations: dict[Str, Str] = Field(default_factory=dict)
    """Annotations put on every NodeClaim and Node of the pool."""


class NodeClaimTemplateSpec(KubeModel):
    """``spec.template.spec``: what every NodeClaim of the pool gets.

    ``expireAfter`` defaults to ``"720h"``; ``terminationGracePeriod`` (no default) bounds a drain.
    ``startupTaints`` are expected to be removed by a daemon; pods need not tolerate them.
    """

    requirements: Requirements
    """Constraints on the labels of the nodes the pool may launch (instance type, zone, capacity
    type, architecture, any well-known or custom label); pods' own node selectors and affinities
    narrow them further. At most 100."""
    node_class_ref: NodeClassReference
    """The cloud provider's NodeClass with the launch settings of the pool's nodes."""
    taints: list[Taint] = Field(default_factory=list)
    """Taints every node of the pool carries from registration on; only pods tolerating them
    are scheduled there."""
    @model_validator(mode="after")
    def _no_nodepool_requirement(self) -> NodeClaimTemplateSpec:
        """Karpenter v1.15.0's NodePool CRD refuses the key ``karpenter.sh/nodepool`` in a pool's
        requirements (``label "karpenter.sh/nodepool" is restricted``): Karpenter sets it on each
        node itself. A NodeClaim's requirements carry it, so :class:`NodeSelectorRequirementWithMinValues`
        allows it.

        Raises (as a validation error): ValueError naming ``requirements[i].key``."""
        for i, requirement in enumerate(self.requirements):
            if requirement.key == LABEL_NODEPOOL:
                raise ValueError(f'requirements[{i}].key: Invalid value: "{LABEL_NODEPOOL}": label "{LABEL_NODEPOOL}" is '
                                 "restricted (Karpenter sets it on every node of the pool itself)")
        return self

    startup_taints: list[Taint] = Field(default_factory=list)
    """Taints a node carries while it starts, to be removed by another agent (a CNI or device
    plugin, ...) once it is ready for work. Pods need not tolerate them to be provisioned for."""
    expire_after: ExpireAfter = "720h"
    """How long a node may live: once it is this old (since its NodeClaim was created) it is
    replaced. A Go duration such as 720h, or Never. Default 720h (30 days)."""
    termination_grace_period: TerminationGracePeriod | None = None
    """The longest a node may take to drain once it is being deleted: past it, the pods still on
    it are deleted whatever their PodDisruptionBudgets or do-not-disrupt annotations, each early
    enough to honour its own terminationGracePeriodSeconds. Unset: a drain waits as long as it takes."""


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
    """How many of the pool's nodes may be disrupted at the same time: a count ("5") or a
    percentage of the pool's nodes, rounded up ("10%"). "0" stops disruption while the budget
    applies. Default 10%."""
    reasons: list[Annotated[Literal["Underutilized", "Empty", "Drifted"],
                            Field(description="A disruption reason: Underutilized, Empty or Drifted.")]] | None = None
    """The disruption reasons the budget limits (Underutilized, Empty, Drifted); unset or empty:
    every reason."""
    schedule: Annotated[Str, AfterValidator(_check_schedule)] | None = None
    """When the budget starts to apply: a cron expression in UTC (five fields, or a macro such as
    @daily). Set together with duration; unset: the budget always applies."""
    duration: Annotated[Str, AfterValidator(lambda v: check_duration(v, BUDGET_DURATION))] | None = None
    """How long the budget applies after each schedule time, in hours and minutes (e.g. 8h or
    1h30m). Set together with schedule."""

    @model_validator(mode="after")
    def _schedule_with_duration(self) -> Budget:
        if (self.schedule is None) != (self.duration is None):
            raise ValueError("'schedule' must be set with 'duration' (and 'duration' with 'schedule')")
        return self


class Disruption(KubeModel):
    """``spec.disruption``: when nodes may be consolidated, and how many at once."""

    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"] = "WhenEmptyOrUnderutilized"
    """Which nodes consolidation may remove or replace: WhenEmpty only nodes without workload
    pods; WhenEmptyOrUnderutilized also nodes whose pods fit elsewhere or on a cheaper node."""
    consolidate_after: ConsolidateAfter = "0s"
    """How long a node must go without a pod being scheduled to or removed from it before
    consolidation considers it; a duration such as 30s or 5m, or Never to turn consolidation off."""
    budgets: list[Budget] = Field(default_factory=lambda: [Budget(nodes="10%")], max_length=50)
    """Limits on how many nodes may be disrupted at once, optionally per reason and time window;
    where several apply, the most restrictive wins. Default: 10% of the nodes. At most 50."""


class NodePoolSpec(KubeModel):
    """``NodePool.spec``.

    ``limits`` caps the pool's total resources (any resource name, including ``nodes``);
    ``weight`` (1..100) orders pools, higher first; ``replicas`` makes a static pool (alpha).
    """

    template: NodeClaimTemplate
    """What each NodeClaim (and so each node) of the pool is made from."""
    disruption: Disruption = Field(default_factory=Disruption)
    """When and how fast the pool's nodes may be consolidated or replaced."""
    limits: CRDResourceList = Field(default_factory=dict)
    """Upper bounds on the resources (cpu, memory, nodes, any extended resource) of all the
    pool's nodes together; no node is launched that would take the pool past one."""
    weight: Int | None = Field(default=None, ge=1, le=100)
    """Priority of the pool when several could serve a pod: higher weights are tried first (1 to 100)."""
    replicas: Int | None = Field(default=None, ge=0)
    """A fixed number of nodes for a static pool, kept whatever the pending pods (alpha, the
    StaticCapacity feature gate). With replicas set, consolidationPolicy and consolidateAfter are
    ignored, limits may only hold nodes, and weight may not be set; a pool cannot switch between
    static and dynamic."""

    @model_validator(mode="after")
    def _static_pool(self) -> NodePoolSpec:
        # Karpenter nodepool.go XValidation rules on NodePoolSpec (the transition rule needs the old
        # object: it is a CEL rule of the CRD only)
        if self.replicas is None:
            return self
        if set(self.limits) - {"nodes"}:
            raise ValueError("only 'limits.nodes' is supported on static NodePools")
        if self.weight is not None:
            raise ValueError("'weight' is not supported on static NodePools")
        return self


class NodePoolStatus(KubeModel):
    """``NodePool.status``: provisioned ``resources`` (incl. ``nodes``), node count, conditions
    (``ValidationSucceeded``, ``NodeClassReady``, ``NodeRegistrationHealthy``, ``Ready``)."""

    resources: CRDResourceList = Field(default_factory=dict)
    """The capacity of the pool's current nodes added up, per resource (and nodes)."""
    nodes: Int | None = None
    """How many nodes the pool has now."""
    conditions: list[Condition] = Field(default_factory=list)
    """The pool's state: ValidationSucceeded, NodeClassReady, NodeRegistrationHealthy and Ready."""
    node_class_observed_generation: Int | None = None
    """The generation of the NodeClass this status last saw; when the NodeClass changes,
    NodeRegistrationHealthy starts over (Unknown) until new launches report."""


class NodePool(KubeObject):
    """karpenter.sh/v1 ``NodePool`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "NodePool"

    spec: NodePoolSpec
    status: NodePoolStatus | None = None
