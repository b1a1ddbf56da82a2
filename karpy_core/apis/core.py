"""core/v1 ``Pod``, ``Node`` and ``PodTemplateSpec``: the fields karpy's scheduler reads.

These are :class:`~karpy_core.apis.base.LenientModel` types: every field the scheduler needs is
typed and checked (requests, selectors, affinity, tolerations, spread constraints, host ports...),
while everything else a real object carries (probes, env, status details) is kept as read and
ignored (its field names are checked by the loader against kube-apiserver's schema:
:mod:`karpy_core.apis.fieldschema`); values kube-apiserver validates in fields the scheduler does
not read (``securityContext``, ``preemptionPolicy``, ``image``...) are typed and checked as it
checks them. Source: ``k8s.io/api/core/v1/types.go``.

:class:`Taint` is strict (its shape is fixed) and shared with karpenter.sh/v1 NodePool/NodeClaim.
"""

from __future__ import annotations

import re
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from karpy_core.apis.base import (
    Bool,
    ComputeResourceList,
    Int,
    Int32,
    KubeModel,
    LenientModel,
    LenientObject,
    ObjectMeta,
    Str,
)
from karpy_core.apis.names import labels_problems, name_problems, qualified_name_problems
from karpy_core.utils.quantity import QuantityError, parse_quantity

__all__ = [
    "QUALIFIED_NAME",
    "LABEL_VALUE",
    "check_label_key",
    "check_label_value",
    "Taint",
    "Toleration",
    "LabelSelectorRequirement",
    "LabelSelector",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "NodeSelector",
    "PreferredSchedulingTerm",
    "NodeAffinity",
    "PodAffinityTerm",
    "WeightedPodAffinityTerm",
    "PodAffinity",
    "PodAntiAffinity",
    "Affinity",
    "TopologySpreadConstraint",
    "is_extended_resource",
    "ResourceRequirements",
    "SYSTEM_PRIORITY_VALUES",
    "MAX_ID",
    "UnixID",
    "PodSecurityContext",
    "SecurityContext",
    "SeccompProfile",
    "AppArmorProfile",
    "Capabilities",
    "Sysctl",
    "SYSCTL_NAME",
    "supported",
    "not_supported",
    "PREEMPT_LOWER_PRIORITY",
    "PREEMPTION_POLICIES",
    "ContainerPort",
    "Container",
    "PersistentVolumeClaimVolumeSource",
    "Volume",
    "PodSpec",
    "PodCondition",
    "PodStatus",
    "Pod",
    "PodTemplateSpec",
    "NodeSpec",
    "NodeCondition",
    "NodeStatus",
    "Node",
]

QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
"""A label/taint key: optional DNS-subdomain prefix and ``/``, then a name of at most 63 characters."""
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
"""A label value: empty, or at most 63 alphanumerics, ``-``, ``_``, ``.``, alphanumeric at both ends."""


def check_label_key(key: str) -> str:
    """Validate a Kubernetes label key (``prefix/name``); returns it or raises ``ValueError``."""
    prefix, _, name = key.rpartition("/")
    if not QUALIFIED_NAME.fullmatch(key) or len(name) > 63 or len(prefix) > 253:
        raise ValueError(
            f"{key!r} is not a valid label key (an optional DNS prefix and '/', then at most 63 "
            "characters: alphanumerics, '-', '_', '.', starting and ending alphanumeric)"
        )
    return key


def check_label_value(value: str) -> str:
    """Validate a Kubernetes label value; returns it or raises ``ValueError``."""
    if len(value) > 63 or not LABEL_VALUE.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid label value (at most 63 characters: alphanumerics, '-', '_', '.', "
            "starting and ending alphanumeric)"
        )
    return value


class Taint(KubeModel):
    """``core/v1 Taint``: ``key[=value]:effect`` on a node (or a NodePool template)."""

    key: Str = Field(min_length=1)
    """The taint's key, a label-style name such as example.com/dedicated."""
    value: Str | None = None
    """The taint's value (optional), matched by tolerations with operator Equal."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
    """What the taint does to pods that do not tolerate it: NoSchedule keeps new ones off,
    PreferNoSchedule avoids the node when possible, NoExecute also evicts running ones."""
    time_added: datetime | None = None
    """When a NoExecute taint was added (set by the system, RFC 3339)."""

    @field_validator("key")
    @classmethod
    def _key(cls, value: str) -> str:
        return check_label_key(value)

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None) -> str | None:
        return None if value is None else check_label_value(value)


class Toleration(LenientModel):
    """``core/v1 Toleration``. An empty ``key`` with ``operator: Exists`` tolerates everything;
    an empty ``effect`` matches every effect. ``tolerationSeconds`` applies to ``NoExecute``."""

    key: Str | None = None
    operator: Literal["Exists", "Equal"] | None = None
    value: Str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = None
    toleration_seconds: Int | None = None

    @model_validator(mode="after")
    def _empty_key_needs_exists(self) -> Toleration:
        """kube-apiserver's ``ValidateTolerations``: an empty key tolerates every taint, so only with
        ``operator: Exists`` (a null list item reads as ``{}`` and is refused so); ``operator: Exists``
        takes no ``value``; ``tolerationSeconds`` only with ``effect: NoExecute``."""
        if not self.key and self.operator != "Exists":
            raise ValueError(f'operator: Invalid value: "{self.operator or ""}": operator must be Exists when `key` is empty, '
                             'which means "match all values and all keys"')
        if self.operator == "Exists" and self.value:
            # ValidateTolerations (pkg/apis/core/validation/validation.go): Exists matches any value
            raise ValueError(f'operator: Invalid value: "{self.value}": value must be empty when `operator` is ' + "'Exists'")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            # ValidateTolerations: tolerationSeconds bounds how long a NoExecute taint leaves the pod running
            raise ValueError(f'effect: Invalid value: "{self.effect or ""}": effect must be '
                             "'NoExecute' when `tolerationSeconds` is set")
        return self


class LabelSelectorRequirement(LenientModel):
    """``metav1.LabelSelectorRequirement`` (pod selectors: no ``Gt``/``Lt``)."""

    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[Str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> LabelSelectorRequirement:
        """apimachinery's ``ValidateLabelSelectorRequirement`` (every label selector kube-apiserver
        validates: pod (anti-)affinity, spread, workload and PDB selectors): ``In``/``NotIn`` need
        values, ``Exists``/``DoesNotExist`` take none."""
        if self.operator in ("In", "NotIn") and not self.values:
            raise ValueError("values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise ValueError("values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        return self


class LabelSelector(LenientModel):
    """``metav1.LabelSelector``: ``matchLabels`` ANDed with ``matchExpressions``. An empty selector
    matches everything; a missing (None) selector matches nothing."""

    match_labels: dict[Str, Str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)


class NodeSelectorRequirement(LenientModel):
    """``core/v1 NodeSelectorRequirement`` (node affinity: ``Gt``/``Lt`` take one integer value).

    Raises (as a validation error), as kube-apiserver's ``ValidateNodeSelectorRequirement``
    (``pkg/apis/core/validation/validation.go``) refuses the pod:
        ValueError: ``In``/``NotIn`` without values, ``Exists``/``DoesNotExist`` with values, or
        ``Gt``/``Lt`` with other than one value parsing as a 64-bit integer.
    """

    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[Str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _values_fit_operator(self) -> NodeSelectorRequirement:
        op, values = self.operator, self.values
        if op in ("In", "NotIn") and not values:
            raise ValueError(f"values: must be specified when operator is {op!r}")
        if op in ("Exists", "DoesNotExist") and values:
            raise ValueError(f"values: may not be specified when operator is {op!r}")
        if op in ("Gt", "Lt"):
            if len(values) != 1:
                raise ValueError(f"values: must be specified single value when operator is {op!r}; got {values}")
            if not re.fullmatch(r"[+-]?[0-9]+", values[0]) or not -(2**63) <= int(values[0]) < 2**63:
                raise ValueError(f"values[0]: {values[0]!r} is not a 64-bit integer (operator {op!r})")
        return self


class NodeFieldSelectorRequirement(NodeSelectorRequirement):
    """A ``matchFields`` requirement: kube-apiserver's ``ValidateNodeFieldSelectorRequirement``
    allows only the key ``metadata.name``, ``In``/``NotIn`` with exactly one value, a node name
    (trial 19: ``key: metadata.labels`` was accepted)."""

    @model_validator(mode="after")
    def _a_node_name_field(self) -> NodeFieldSelectorRequirement:
        problems = []
        if self.operator not in ("In", "NotIn"):
            problems.append(f"operator: Invalid value: {self.operator!r}: not a valid selector operator")
        elif len(self.values) != 1:
            problems.append("values: Required value: must be only one value when `operator` is 'In' or 'NotIn' for node "
                            "field selector")
        if self.key != "metadata.name":
            problems.append(f"key: Invalid value: {self.key!r}: not a valid field selector key")
        else:
            problems += [f"values[{i}]: Invalid value: {v!r}: {p}" for i, v in enumerate(self.values)
                         for p in name_problems(v, "subdomain")]
        if problems:
            raise ValueError("; ".join(problems))
        return self


class NodeSelectorTerm(LenientModel):
    """One ORed term of node affinity: its expressions are ANDed."""

    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list)
    match_fields: list[NodeFieldSelectorRequirement] = Field(default_factory=list)


class NodeSelector(LenientModel):
    """Required node affinity: a node must match at least one term (an empty list is refused, as
    kube-apiserver's ``ValidateNodeSelector``: ``must have at least one node selector term``)."""

    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1)


class PreferredSchedulingTerm(LenientModel):
    """Preferred node affinity term with its ``weight`` (1..100)."""

    weight: Int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(LenientModel):
    """``core/v1 NodeAffinity``."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(default_factory=list)


def _label_keys_problems(selector: LabelSelector | None, match: list[str], mismatch: list[str] | None) -> list[str]:
    """kube-apiserver v1.36's ``ValidateMatchLabelKeysAndMismatchLabelKeys`` on a pod (anti-)affinity
    term (``mismatch`` a list) or a spread constraint (``mismatch`` None: the field does not exist
    there), as written (a pod template's check; a Pod's, after its own labels are merged into the
    selector, is :func:`merged_label_keys_problems`). Paths are relative to the term.

    * ``matchLabelKeys``/``mismatchLabelKeys`` without a ``labelSelector``: ``Forbidden``;
    * each key a label key (``ValidateLabelName``);
    * a ``matchLabelKeys`` key the selector already names twice (``matchLabels`` and
      ``matchExpressions``, or two expressions): ``exists in both matchLabelKeys and labelSelector``;
    * a key in both lists: ``exists in both matchLabelKeys and mismatchLabelKeys``.
    """
    problems: list[str] = []
    for field, keys in (("matchLabelKeys", match), ("mismatchLabelKeys", mismatch or [])):
        if not keys:
            continue
        if selector is None:
            problems.append(f"{field}: Forbidden: must not be specified when labelSelector is not set")
            continue
        for i, key in enumerate(keys):
            problems.extend(f"{field}[{i}]: Invalid value: {key!r}: {p}" for p in qualified_name_problems(key))
    if selector is not None:
        problems.extend(_repeated_selector_keys(selector, match, []))
    clash = set(mismatch or [])
    problems.extend(f"matchLabelKeys[{i}]: Invalid value: {key!r}: exists in both matchLabelKeys and mismatchLabelKeys"
                    for i, key in enumerate(match) if key in clash)
    return problems


def _repeated_selector_keys(selector: LabelSelector, match: list[str], merged: list[str]) -> list[str]:
    """``matchLabelKeys`` keys that the selector names more than once, in the API server's order
    and words: without ``merged``, as written; with it (the keys kube-apiserver's pod strategy
    appends as ``key In``/``NotIn [the pod's value]`` expressions), only the appended expressions'
    repeats (the written ones are the term's own check)."""
    index = {key: i for i, key in enumerate(match)}
    seen = set(selector.match_labels)
    problems = []
    written = [e.key for e in selector.match_expressions]
    for n, key in enumerate(written + merged):
        if key in index and key in seen and (not merged or n >= len(written)):
            problems.append(f"matchLabelKeys[{index[key]}]: Invalid value: {key!r}: exists in both matchLabelKeys and labelSelector")
        seen.add(key)
    return problems


def merged_label_keys_problems(spec: PodSpec, labels: dict[str, str]) -> list[str]:
    """What kube-apiserver v1.36 refuses in a Pod it creates with ``labels``, once its pod strategy
    (``mutatePodAffinity``, ``mutateTopologySpreadConstraints``) has appended ``key In [value]`` to a
    term's or spread constraint's selector for each ``matchLabelKeys`` key the pod carries (and
    ``NotIn`` for ``mismatchLabelKeys``): a key the selector also names is then named twice
    (``exists in both matchLabelKeys and labelSelector``). Paths are relative to ``spec``. A pod
    template passes this (nothing is merged into a template), but every pod made from it would be
    refused, so karpy refuses the template with the same words."""
    problems = []
    terms: list[tuple[str, PodAffinityTerm]] = []
    if spec.affinity is not None:
        for kind, rules in (("podAffinity", spec.affinity.pod_affinity), ("podAntiAffinity", spec.affinity.pod_anti_affinity)):
            if rules is None:
                continue
            terms += [(f"affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution[{i}]", t)
                      for i, t in enumerate(rules.required_during_scheduling_ignored_during_execution)]
            terms += [(f"affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution[{i}].podAffinityTerm", w.pod_affinity_term)
                      for i, w in enumerate(rules.preferred_during_scheduling_ignored_during_execution)]
    for path, term in terms:
        if term.label_selector is not None:
            merged = [k for k in term.match_label_keys + term.mismatch_label_keys if k in labels]
            problems += [f"{path}.{p}" for p in _repeated_selector_keys(term.label_selector, term.match_label_keys, merged)]
    for i, constraint in enumerate(spec.topology_spread_constraints):
        if constraint.label_selector is not None:
            merged = [k for k in constraint.match_label_keys if k in labels]
            problems += [f"topologySpreadConstraints[{i}].{p}"
                         for p in _repeated_selector_keys(constraint.label_selector, constraint.match_label_keys, merged)]
    return problems


class PodAffinityTerm(LenientModel):
    """``core/v1 PodAffinityTerm``: pods matching ``labelSelector`` in ``namespaces`` (or matching
    ``namespaceSelector``; both empty = the pod's own namespace), per ``topologyKey`` domain."""

    label_selector: LabelSelector | None = None
    namespaces: list[Str] = Field(default_factory=list)
    namespace_selector: LabelSelector | None = None
    topology_key: Str
    match_label_keys: list[Str] = Field(default_factory=list)
    mismatch_label_keys: list[Str] = Field(default_factory=list)

    @field_validator("topology_key")
    @classmethod
    def _topology_key_is_a_label_key(cls, value: str) -> str:
        """kube-apiserver's ``validatePodAffinityTerm``: ``Required value: can not be empty``, and
        a label key (``ValidateLabelName``: apimachinery's ``IsQualifiedName``). A spread
        constraint's key is only required (:class:`TopologySpreadConstraint`), as there."""
        if not value:
            raise ValueError("Required value: can not be empty")
        problems = qualified_name_problems(value)
        if problems:
            raise ValueError(f"Invalid value: {value!r}: " + "; ".join(problems))
        return value

    @model_validator(mode="after")
    def _label_keys(self) -> PodAffinityTerm:
        """``matchLabelKeys``/``mismatchLabelKeys`` as kube-apiserver checks them: :func:`_label_keys_problems`."""
        problems = _label_keys_problems(self.label_selector, self.match_label_keys, self.mismatch_label_keys)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class WeightedPodAffinityTerm(LenientModel):
    """Preferred pod (anti-)affinity term with its ``weight`` (1..100)."""

    weight: Int = Field(ge=1, le=100)
    pod_affinity_term: PodAffinityTerm


class PodAffinity(LenientModel):
    """``core/v1 PodAffinity``."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(default_factory=list)
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(default_factory=list)


class PodAntiAffinity(PodAffinity):
    """``core/v1 PodAntiAffinity`` (same shape as :class:`PodAffinity`)."""


class Affinity(LenientModel):
    """``core/v1 Affinity``."""

    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAntiAffinity | None = None


class TopologySpreadConstraint(LenientModel):
    """``core/v1 TopologySpreadConstraint``. ``nodeAffinityPolicy`` defaults to ``Honor`` and
    ``nodeTaintsPolicy`` to ``Ignore`` (applied by the scheduler, not here)."""

    max_skew: Int32 = Field(ge=1)
    topology_key: Str
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"]
    label_selector: LabelSelector | None = None
    min_domains: Int32 | None = Field(default=None, ge=1)
    node_affinity_policy: Literal["Honor", "Ignore"] | None = None
    node_taints_policy: Literal["Honor", "Ignore"] | None = None
    match_label_keys: list[Str] = Field(default_factory=list)

    @field_validator("topology_key")
    @classmethod
    def _topology_key_required(cls, value: str) -> str:
        """kube-apiserver's ``ValidateTopologyKey``: ``Required value: can not be empty`` (a spread
        over an unnamed label has no domains)."""
        if not value:
            raise ValueError("Required value: can not be empty")
        return value

    @model_validator(mode="after")
    def _label_keys(self) -> TopologySpreadConstraint:
        """``matchLabelKeys`` as kube-apiserver v1.36 checks it (``MatchLabelKeysInPodTopologySpreadSelectorMerge``
        on, its default): :func:`_label_keys_problems`."""
        problems = _label_keys_problems(self.label_selector, self.match_label_keys, None)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _min_domains_needs_do_not_schedule(self) -> TopologySpreadConstraint:
        """kube-apiserver's ``validateMinDomains``: ``minDomains`` only with ``DoNotSchedule``."""
        if self.min_domains is not None and self.when_unsatisfiable != "DoNotSchedule":
            raise ValueError(
                f"minDomains: can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {self.when_unsatisfiable}"
            )
        return self


_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def _resource_name_problems(name: str) -> list[str]:
    """Why ``name`` is not a container resource name, as kube-apiserver's
    ``validateContainerResourceName`` (``pkg/apis/core/validation/validation.go``): a qualified
    name; without a ``/`` one of cpu, memory, ephemeral-storage, ``hugepages-*``."""
    problems = qualified_name_problems(name)
    if problems:
        return problems
    if "/" not in name and name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith("hugepages-"):
        return ["must be a standard resource type or fully qualified"]
    return []


def is_extended_resource(name: str) -> bool:
    """An extended resource (``example.com/foo``, ``nvidia.com/gpu``): fully qualified, outside the
    ``kubernetes.io`` domain, not ``requests.*`` (``IsExtendedResourceName`` in
    ``pkg/apis/core/helper/helpers.go``). Integer-only, and its request must equal its limit."""
    domain = name.partition("/")[0] if "/" in name else ""
    native = not domain or domain == "kubernetes.io" or domain.endswith(".kubernetes.io")
    return not native and not name.startswith("requests.")


class ResourceRequirements(LenientModel):
    """Container ``resources``: ``requests`` and ``limits`` as quantities. When only a limit is
    set for a resource, Kubernetes defaults the request to it (the scheduler applies that).

    As the API server checks (``validateResourceRequirements`` in
    ``k8s.io/kubernetes/pkg/apis/core/validation/validation.go``): every quantity is >= 0 and a
    request is at most the limit of the same resource; every name is a container resource name
    (``validateContainerResourceName``); an extended resource (:func:`is_extended_resource`) is a
    whole number; an extended or ``hugepages-*`` request needs a limit, and equals it (neither is
    overcommitable).

    Raises (as a validation error):
        ValueError: a negative quantity, a request above its limit, a bad resource name, or a
        fractional or unequal extended resource.
    """

    requests: ComputeResourceList = Field(default_factory=dict)
    limits: ComputeResourceList = Field(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _every_problem(cls, data: Any, handler: ModelWrapValidatorHandler[ResourceRequirements]) -> ResourceRequirements:
        """Report the field problems (a negative quantity) together with the cross-field ones (a
        request above its limit...), as kube-apiserver's ``validateResourceRequirements`` reports
        all of them in one answer. A quantity that does not parse stays the only problem: the API
        server's JSON decoder refuses the object before any validation (``quantities must match
        the regular expression``)."""
        try:
            return handler(data)
        except ValidationError as exc:
            if not isinstance(data, dict) or any(not err["loc"] for err in exc.errors()):
                raise  # not a mapping, or the cross-field check itself failed: nothing to add
            parsed = {field: _parsed(data.get(field)) for field in ("limits", "requests")}
            if parsed["limits"] is None or parsed["requests"] is None:
                raise  # a quantity the decoder refuses, or not a mapping
            shown = {f"{field}.{name}": str(value) for field in ("limits", "requests") for name, value in (data.get(field) or {}).items()}
            cross = _requirements_problems(parsed["requests"], parsed["limits"], shown)
            if not cross:
                raise
            fields = [f"{'.'.join(str(p) for p in err['loc'] if not str(p).startswith('['))}: "
                      f"{str(err['msg']).removeprefix('Value error, ')}" for err in exc.errors()]
            raise ValueError("; ".join([*fields, *cross])) from None

    @model_validator(mode="after")
    def _requests_within_limits(self) -> ResourceRequirements:
        problems = _requirements_problems({k: parse_quantity(v) for k, v in self.requests.items()},
                                          {k: parse_quantity(v) for k, v in self.limits.items()},
                                          shown={**{f"requests.{k}": v for k, v in self.requests.items()},
                                                 **{f"limits.{k}": v for k, v in self.limits.items()}})
        if problems:
            raise ValueError("; ".join(problems))
        return self


def _parsed(values: Any) -> dict[str, Decimal] | None:
    """A raw ``requests``/``limits`` mapping as quantities; None when it is not a mapping of
    names to quantities that parse (a missing one is empty)."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        return None
    out = {}
    for name, value in values.items():
        if not isinstance(name, str) or isinstance(value, bool) or not isinstance(value, (int, float, str, type(None))):
            return None
        try:
            out[name] = parse_quantity(0 if value is None else value)
        except QuantityError:
            return None
    return out


def _requirements_problems(requests: dict[str, Decimal], limits: dict[str, Decimal],
                           shown: dict[str, str] | None = None) -> list[str]:
    """Every cross-field problem of a container's ``resources`` (kube-apiserver's
    ``validateResourceRequirements``): resource names, whole extended resources, an extended
    request equal to its limit, a limit for non-overcommitable resources, a request at most its
    limit. ``shown`` gives the quantities as written (``requests.cpu`` -> ``"500m"``) for messages."""
    def text(field: str, name: str, value: Decimal) -> str:
        return repr((shown or {}).get(f"{field}.{name}", str(value)))

    problems = [
        f"{field}[{name}]: {problem}"
        for field, values in (("limits", limits), ("requests", requests))
        for name in values
        for problem in _resource_name_problems(name)
    ]
    problems += [
        f"{field}[{name}]: {text(field, name, value)} must be an integer"
        for field, values in (("limits", limits), ("requests", requests))
        for name, value in values.items()
        if is_extended_resource(name) and value != int(value)
    ]
    fixed = {name for name in (*requests, *limits) if is_extended_resource(name) or name.startswith("hugepages-")}
    problems += [
        f"requests.{name} {text('requests', name, requests[name])} must be equal to {name} limit of {text('limits', name, limit)}"
        for name, limit in sorted(limits.items())
        if name in fixed and name in requests and requests[name] != limit
    ]
    problems += [  # hugepages and extended resources are not overcommitable (IsOvercommitAllowed)
        f"limits.{name}: Limit must be set for non overcommitable resources (requests.{name} is set)"
        for name in sorted(requests)
        if name in fixed and name not in limits
    ]
    problems += [
        f"requests.{name} {text('requests', name, requests[name])} must be less than or equal to {name} limit of "
        f"{text('limits', name, limit)}"
        for name, limit in sorted(limits.items())
        if name in requests and name not in fixed and requests[name] > limit  # else "must be equal" (as upstream's else-if)
    ]
    if any(n.startswith("hugepages-") for n in (*requests, *limits)) and not any(
            n in ("cpu", "memory") for n in (*requests, *limits)):
        # validateResourceRequirements' Forbidden "HugePages require cpu or memory" (trial 19)
        problems.append("Forbidden: HugePages require cpu or memory")
    return problems


SYSTEM_PRIORITY_VALUES: dict[str, int] = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
"""The PriorityClasses kube-apiserver creates in every cluster and their ``value``
(``SystemPriorityClasses`` in Kubernetes ``pkg/apis/scheduling/helpers.go``:
``SystemCriticalPriority`` = 2,000,000,000, node-critical 1,000 more); a pod may name them
without the inputs defining them."""


MAX_ID = 2**31 - 1
"""The largest user or group ID kube-apiserver accepts (``maxUserID``/``maxGroupID`` in
``k8s.io/apimachinery/pkg/util/validation/validation.go``)."""


def _check_id(value: int) -> int:
    """apimachinery's ``IsValidUserID``/``IsValidGroupID``: 0 .. 2,147,483,647."""
    if not 0 <= value <= MAX_ID:
        raise ValueError(f"must be between 0 and {MAX_ID}, inclusive; got {value}")
    return value


UnixID = Annotated[Int, AfterValidator(_check_id)]
"""A user or group ID (``runAsUser``, ``runAsGroup``, ``fsGroup``, ``supplementalGroups[i]``): an
``int64`` on the wire (a string such as ``"1000"`` is refused, as the API server's JSON decoder
refuses it), within 0 .. :data:`MAX_ID` (kube-apiserver's ``ValidatePodSecurityContext`` and
``ValidateSecurityContext``: ``must be between 0 and 2147483647, inclusive``)."""


def not_supported(value: str, allowed: tuple[str, ...]) -> str | None:
    """None when ``value`` is one of ``allowed``, else kube-apiserver's ``field.NotSupported`` words
    (``k8s.io/apimachinery/pkg/util/validation/field/errors.go``): ``Unsupported value: "X":
    supported values: "A", "B"`` (``allowed`` in the API server's order)."""
    if value in allowed:
        return None
    return f'Unsupported value: "{value}": supported values: ' + ", ".join(f'"{a}"' for a in allowed)


def supported(*allowed: str) -> Any:
    """An after-validator for an enum-like string field: one of ``allowed``, else a ValueError with
    :func:`not_supported`'s words."""

    def check(value: str) -> str:
        problem = not_supported(value, allowed)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


PREEMPT_LOWER_PRIORITY = "PreemptLowerPriority"
"""A PriorityClass's ``preemptionPolicy`` when unset (``SetDefaults_PriorityClass``)."""
PREEMPTION_POLICIES = (PREEMPT_LOWER_PRIORITY, "Never")
"""The ``preemptionPolicy`` values of a pod or PriorityClass, in kube-apiserver's order
(``validatePreemptionPolicy``)."""


class _SecurityProfile(LenientModel):
    """A ``seccompProfile`` or ``appArmorProfile``: ``type`` one of Localhost, RuntimeDefault,
    Unconfined; ``localhostProfile`` set exactly when the type is Localhost."""

    WHAT: ClassVar[str] = ""
    """The profile kind in kube-apiserver's messages (``seccomp``, ``AppArmor``)."""
    EMPTY_IS_UNSET: ClassVar[bool] = False
    """Whether an empty ``localhostProfile`` counts as missing (AppArmor: yes; seccomp only checks it is set)."""

    type: Annotated[Str, supported("Localhost", "RuntimeDefault", "Unconfined")]
    localhost_profile: Str | None = None

    @field_validator("localhost_profile")
    @classmethod
    def _profile_with_localhost_only(cls, value: str | None, info: ValidationInfo) -> str | None:
        kind = info.data.get("type")  # absent when the type itself was refused
        if kind is not None and kind != "Localhost" and value is not None:
            raise ValueError(f"Invalid value: {value!r}: can only be set when {cls.WHAT} type is Localhost")
        return value

    @model_validator(mode="after")
    def _localhost_needs_profile(self) -> _SecurityProfile:
        if self.type == "Localhost" and (self.localhost_profile is None or (self.EMPTY_IS_UNSET and not self.localhost_profile)):
            raise ValueError(f"localhostProfile: Required value: must be set when {self.WHAT} type is Localhost")
        return self


class SeccompProfile(_SecurityProfile):
    """``core/v1 SeccompProfile`` (pod or container ``securityContext.seccompProfile``), checked as
    kube-apiserver's ``validateSeccompProfileField`` checks it.

    Raises (as a validation error): a missing or unsupported ``type``, a Localhost type without a
    profile, a profile with another type."""

    WHAT: ClassVar[str] = "seccomp"


class AppArmorProfile(_SecurityProfile):
    """``core/v1 AppArmorProfile`` (``securityContext.appArmorProfile``), checked as kube-apiserver's
    ``validateAppArmorProfileField``: as :class:`SeccompProfile`, and an empty ``localhostProfile``
    is missing too."""

    WHAT: ClassVar[str] = "AppArmor"
    EMPTY_IS_UNSET: ClassVar[bool] = True


class Capabilities(LenientModel):
    """``core/v1 Capabilities``: lists of capability names to ``add`` and ``drop`` (a single name or
    a number where a list is due is refused, as the API server's JSON decoder refuses it)."""

    add: list[Str] | None = None
    drop: list[Str] | None = None


SYSCTL_NAME = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")
"""A sysctl name (``SysctlContainSlashPattern`` in ``pkg/apis/core/validation/validation.go``:
dots or slashes between lower-case segments), at most 253 characters."""


class Sysctl(LenientModel):
    """``core/v1 Sysctl`` of ``securityContext.sysctls``: a ``name`` kube-apiserver's
    ``validateSysctls`` accepts (:data:`SYSCTL_NAME`) and its ``value``."""

    name: Str
    value: Str | None = None

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not value:
            raise ValueError("Required value")
        if len(value) > 253 or SYSCTL_NAME.fullmatch(value) is None:
            raise ValueError(f"Invalid value: {value!r}: must have at most 253 characters and match regex "
                             f"{SYSCTL_NAME.pattern}")
        return value


class SecurityContext(LenientModel):
    """``core/v1 SecurityContext`` of a container: the IDs and switches kube-apiserver checks are
    typed (never read by the scheduler); capabilities, SELinux, seccomp and the rest are kept as read.

    Raises (as a validation error): an ID outside 0 .. 2147483647, a string where an integer or a
    boolean is required."""

    run_as_user: UnixID | None = None
    run_as_group: UnixID | None = None
    run_as_non_root: Bool | None = None
    privileged: Bool | None = None
    allow_privilege_escalation: Bool | None = None
    read_only_root_filesystem: Bool | None = None
    capabilities: Capabilities | None = None
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: AppArmorProfile | None = None


class PodSecurityContext(LenientModel):
    """``core/v1 PodSecurityContext``: as :class:`SecurityContext`, plus ``fsGroup`` and
    ``supplementalGroups`` (group IDs, same bounds)."""

    run_as_user: UnixID | None = None
    run_as_group: UnixID | None = None
    run_as_non_root: Bool | None = None
    fs_group: UnixID | None = None
    supplemental_groups: list[UnixID] | None = None
    fs_group_change_policy: Annotated[Str, supported("Always", "OnRootMismatch")] | None = None
    seccomp_profile: SeccompProfile | None = None
    app_armor_profile: AppArmorProfile | None = None
    sysctls: list[Sysctl] | None = None
    se_linux_change_policy: Annotated[Str, supported("Recursive")] | None = Field(default=None, alias="seLinuxChangePolicy")
    """``validateSELinuxChangePolicy``: only ``Recursive`` with the default feature gates of
    kube-apiserver v1.36.3 (``MountOption`` needs ``SELinuxMount``, off by default; checked by dryRun=All)."""

    @field_validator("sysctls")
    @classmethod
    def _unique_sysctls(cls, value: list[Sysctl] | None) -> list[Sysctl] | None:
        """Each sysctl named once (``validateSysctls``: ``Duplicate value``)."""
        seen: set[str] = set()
        for i, sysctl in enumerate(value or []):
            if sysctl.name in seen:
                raise ValueError(f"[{i}].name: Duplicate value: {sysctl.name!r}")
            seen.add(sysctl.name)
        return value


class ContainerPort(LenientModel):
    """``core/v1 ContainerPort``; ``hostPort`` (with ``hostIP``/``protocol``) limits one pod per node."""

    container_port: Int = Field(ge=1, le=65535)
    host_port: Int | None = Field(default=None, ge=0, le=65535)
    protocol: Literal["TCP", "UDP", "SCTP"] = "TCP"
    host_ip: Str | None = Field(default=None, alias="hostIP")
    name: Str | None = None


class EnvVar(LenientModel):
    """``core/v1 EnvVar`` of a container's ``env`` (not read): a ``name`` is required
    (``validateEnv``: ``Required value``; a null list item reads as ``{}`` and is refused so)."""

    name: Str

    @field_validator("name")
    @classmethod
    def _name_required(cls, value: str) -> str:
        if not value:
            raise ValueError("Required value")
        return value


class ContainerRestartRule(LenientModel):
    """``core/v1 ContainerRestartRule`` of ``restartPolicyRules`` (not read): ``action`` one of
    kube-apiserver v1.36.3's (``validateContainerRestartPolicyRules``); ``exitCodes`` kept as read."""

    action: Annotated[Str, supported("Restart", "RestartAllContainers")]


CONTAINER_RESTART_POLICIES = ("Always", "Never", "OnFailure")
"""A container's own ``restartPolicy``, in kube-apiserver v1.36.3's order (``validateContainerRestartPolicy``;
checked by dryRun=All: any of them on a regular or an init container, ``Always`` on an init
container making it a sidecar)."""


class Container(LenientModel):
    """``core/v1 Container`` (only name, resources, ports and restartPolicy are read; ``securityContext``,
    ``env`` names, ``terminationMessagePolicy``, ``restartPolicy`` and ``restartPolicyRules`` are
    checked as the API server checks them).

    ``restartPolicy: Always`` on an init container makes it a sidecar (its requests add to the pod's)."""

    name: Str
    image: Str | None = Field(default=None, validate_default=True)
    """Required by kube-apiserver (``spec.containers[0].image: Required value``), in pods and in
    workload templates alike; see :meth:`_image_required`."""
    image_pull_policy: Annotated[Str, supported("Always", "IfNotPresent", "Never")] | None = None
    resources: ResourceRequirements = Field(default_factory=ResourceRequirements)
    ports: list[ContainerPort] = Field(default_factory=list)
    restart_policy: Annotated[Str, supported(*CONTAINER_RESTART_POLICIES)] | None = None
    restart_policy_rules: list[ContainerRestartRule] | None = None
    """Kept as read; kube-apiserver requires ``restartPolicy`` with them (:meth:`_rules_need_policy`)."""
    termination_message_policy: Annotated[Str, supported("File", "FallbackToLogsOnError")] | None = None
    env: list[EnvVar] | None = None
    security_context: SecurityContext | None = None

    @model_validator(mode="after")
    def _rules_need_policy(self) -> Container:
        """``restartPolicyRules`` only with a ``restartPolicy`` (``validateContainerRestartPolicy``:
        ``must specify restartPolicy when restart rules are used``)."""
        if self.restart_policy_rules and self.restart_policy is None:
            raise ValueError("restartPolicy: Required value: must specify restartPolicy when restart rules are used")
        return self

    @field_validator("image")
    @classmethod
    def _image_required(cls, value: str | None) -> str | None:
        """Set and not empty, as kube-apiserver's ``validateContainerCommon`` requires of every
        container (``image: Required value``; a workload's template too, unlike ``validateEphemeralContainers``)."""
        if not value:
            raise ValueError("Required value")
        if value != value.strip():
            raise ValueError(f"Invalid value: {value!r}: must not have leading or trailing whitespace")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        """A DNS-1123 label, as kube-apiserver's ``validateContainers`` requires."""
        problems = name_problems(value, "label") if value else ["must not be empty"]
        if problems:
            raise ValueError("; ".join(problems))
        return value


class PersistentVolumeClaimVolumeSource(LenientModel):
    """A pod volume backed by a PVC."""

    claim_name: Str
    read_only: Bool | None = None


class Volume(LenientModel):
    """``core/v1 Volume``: ``persistentVolumeClaim`` is typed; other sources are kept as read
    (``ephemeral`` too, since its claim template is only read by volume-topology code)."""

    name: Str
    persistent_volume_claim: PersistentVolumeClaimVolumeSource | None = None
    ephemeral: dict[str, Any] | None = None


POD_LEVEL_RESOURCES = ("cpu", "hugepages-", "memory")
"""What ``spec.resources`` may name (``cpu``, ``memory``, ``hugepages-<size>``), in kube-apiserver's
order for its ``supported values`` message (``k8s.io/component-helpers/resource``
``SupportedPodLevelResources``, checked by ``validatePodResourceName``)."""


def _is_pod_level(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _canonical(name: str, value: Decimal) -> str:
    """A quantity as kube-apiserver prints a sum it computed (``Quantity.String()``): cpu in cores
    or millicores, other resources in the largest binary suffix that divides them, else plain."""
    if name == "cpu":
        return str(int(value)) if value == int(value) else f"{int(value * 1000)}m"
    if value == int(value) and value:
        for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if int(value) % size == 0:
                return f"{int(value) // size}{suffix}"
    return str(value.normalize()) if value != int(value) else str(int(value))


def _container_requests(container: Container) -> dict[str, Decimal]:
    """A container's requests after the API server's defaulting (a limit alone sets the request)."""
    out = {k: parse_quantity(v) for k, v in container.resources.limits.items()}
    out.update({k: parse_quantity(v) for k, v in container.resources.requests.items()})
    return out


def aggregate_container_requests(containers: list[Container], init_containers: list[Container]) -> dict[str, Decimal]:
    """The containers' requests as kube-scheduler sums them (``k8s.io/component-helpers/resource``
    ``AggregateContainerRequests``, KEP-753 sidecars: regular containers and sidecars summed, each
    init container's start peak on top of the sidecars before it, the larger of the two), every
    resource any container names, zero included. Quantities as :class:`~decimal.Decimal`."""
    total: dict[str, Decimal] = {}
    for c in containers:
        for name, amount in _container_requests(c).items():
            total[name] = total.get(name, Decimal(0)) + amount
    sidecars: dict[str, Decimal] = {}
    peak: dict[str, Decimal] = {}
    for c in init_containers:
        req = _container_requests(c)
        if c.restart_policy == "Always":
            for name, amount in req.items():
                total[name] = total.get(name, Decimal(0)) + amount
                sidecars[name] = sidecars.get(name, Decimal(0)) + amount
            phase = dict(sidecars)
        else:
            phase = {name: amount + sidecars.get(name, Decimal(0)) for name, amount in req.items()}
            for name, amount in sidecars.items():
                phase.setdefault(name, amount)
        for name, amount in phase.items():
            peak[name] = max(peak.get(name, Decimal(0)), amount)
    for name, amount in peak.items():
        total[name] = max(total.get(name, Decimal(0)), amount)
    return total


class PodResources(LenientModel):
    """Pod-level ``spec.resources`` (KEP-2837 PodLevelResources, on by default since Kubernetes
    1.34): ``requests`` and ``limits`` of ``cpu``, ``memory`` and ``hugepages-*``; the pod's
    effective request for a resource it names (``karpy_core.scheduling.pod.effective_requests``).
    Cross-field rules are :meth:`PodSpec._pod_level_resources`'."""

    requests: ComputeResourceList = Field(default_factory=dict)
    limits: ComputeResourceList = Field(default_factory=dict)
    claims: list[Any] | None = None


def pod_resources_problems(spec: PodSpec, *, defaulted: bool) -> list[str]:
    """Every problem kube-apiserver's ``validatePodResources`` finds in ``spec.resources``
    (``pkg/apis/core/validation/validation.go``; checked against kube-apiserver v1.36.3 by
    ``tests/integration/test_trial5_apiserver.py``), worded as it words them, paths relative to
    the pod spec: a Windows pod may not set it; no ``claims``; only ``cpu``, ``memory`` and
    ``hugepages-*``; a request at most its limit (hugepages: equal, and a limit required); a
    pod-level request at least the containers' aggregate requests
    (:func:`aggregate_container_requests`); no container limit above the pod-level limit.

    ``defaulted``: apply the API server's defaulting of a Pod first (``SetDefaults_Pod``'s
    ``defaultPodRequests``: a pod-level request left out is the containers' aggregate when they
    request the resource, else the pod-level limit), as it does for a Pod but not for a
    workload's pod template (a Deployment with a pod-level limit below its containers' requests
    is stored; its pods are refused)."""
    res = spec.resources
    if res is None:
        return []
    if spec.os is not None and spec.os.name == "windows":
        return ["resources: Forbidden: may not be set for a windows pod"]
    problems = []
    if res.claims is not None:
        problems.append("resources.claims: Forbidden: claims may not be set for Resources at pod-level")
    supported = ", ".join(f'"{n}"' for n in POD_LEVEL_RESOURCES)
    for field, values in (("limits", res.limits), ("requests", res.requests)):
        problems += [f'resources.{field}[{name}]: Unsupported value: "{name}": supported values: {supported}'
                     for name in values if not _is_pod_level(name)]
    limits = {k: parse_quantity(v) for k, v in res.limits.items()}
    requests = {k: parse_quantity(v) for k, v in res.requests.items()}
    aggregate = aggregate_container_requests(spec.containers, spec.init_containers)
    if defaulted:
        for name, amount in aggregate.items():
            if name not in requests and _is_pod_level(name) and not name.startswith("hugepages-"):
                requests[name] = amount
        for name, amount in limits.items():
            if name not in requests and _is_pod_level(name):
                requests[name] = amount
    for name, amount in requests.items():
        limit = limits.get(name)
        fixed = name.startswith("hugepages-") or is_extended_resource(name)
        if limit is not None and fixed and amount != limit:
            problems.append(f'resources.requests: Invalid value: "{_canonical(name, amount)}": must be equal to {name} limit of '
                            f"{_canonical(name, limit)}")
        elif limit is not None and amount > limit:
            problems.append(f'resources.requests: Invalid value: "{_canonical(name, amount)}": must be less than or equal to '
                            f"{name} limit of {_canonical(name, limit)}")
        elif limit is None and fixed:
            problems.append("resources.limits: Required value: Limit must be set for non overcommitable resources")
    for name, amount in sorted(aggregate.items()):
        if name in requests and amount > requests[name]:
            problems.append(f'resources.requests[{name}]: Invalid value: "{_canonical(name, requests[name])}": must be greater '
                            f"than or equal to aggregate container requests of {_canonical(name, amount)}")
    for i, c in enumerate(spec.containers):
        for name, value in c.resources.limits.items():
            if name in limits and parse_quantity(value) > limits[name]:
                problems.append(f'resources.containers[{i}][{name}].limits: Invalid value: "{value}": must be less than or '
                                f"equal to pod limits of {_canonical(name, limits[name])}")
    return problems


class PodOS(LenientModel):
    """``core/v1 PodOS``: the operating system the pod's containers need (checked by :class:`PodSpec`)."""

    name: Str


class PodSpec(LenientModel):
    """``core/v1 PodSpec``: the scheduling-relevant fields."""

    node_name: Str | None = None
    node_selector: dict[Str, Str] = Field(default_factory=dict)
    affinity: Affinity | None = None
    tolerations: list[Toleration] = Field(default_factory=list)
    topology_spread_constraints: list[TopologySpreadConstraint] = Field(default_factory=list)
    containers: list[Container] = Field(min_length=1)
    """At least one (kube-apiserver: ``spec.containers: Required value``)."""
    init_containers: list[Container] = Field(default_factory=list)
    overhead: ComputeResourceList = Field(default_factory=dict)
    scheduling_gates: list[dict[Str, Any]] | None = None
    """A pod with a gate left is not scheduled, nor provisioned for (the API server marks it
    ``PodScheduled=False/SchedulingGated``: :func:`karpy_core.kube.admission.scheduling_gated`)."""
    resources: PodResources | None = None
    """Pod-level resources (:class:`PodResources`; checked by :meth:`_pod_level_resources`)."""
    priority_class_name: Str | None = None
    priority: Int32 | None = None
    preemption_policy: Annotated[Str, supported(*PREEMPTION_POLICIES)] | None = None
    """kube-apiserver's ``validatePreemptionPolicy``; Priority admission then sets it from the
    PriorityClass (a pod giving another value is refused: :func:`karpy_core.kube.admission.admit_priority`)."""
    dns_policy: Annotated[Str, supported("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")] | None = None
    scheduler_name: Str | None = None
    runtime_class_name: Str | None = None
    volumes: list[Volume] = Field(default_factory=list)
    termination_grace_period_seconds: Int | None = None
    restart_policy: Literal["Always", "OnFailure", "Never"] | None = None
    """kube-apiserver's ``validateRestartPolicy``: one of these (defaulted to ``Always``)."""
    security_context: PodSecurityContext | None = None
    os: PodOS | None = None
    ephemeral_containers: list[Any] | None = None
    """Kept as read; refused when not empty, by :class:`Pod` (set through a subresource only) and
    :class:`PodTemplateSpec` (never in a template)."""

    @field_validator("os")
    @classmethod
    def _os_name(cls, value: PodOS | None) -> PodOS | None:
        """``validateOS``: ``linux`` or ``windows``, reported at ``spec.os`` as kube-apiserver reports it."""
        problem = None if value is None else not_supported(value.name, ("linux", "windows"))
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("node_selector")
    @classmethod
    def _node_selector_labels(cls, value: dict[str, str]) -> dict[str, str]:
        """Keys qualified names and values label values, as kube-apiserver's ``ValidateNodeSelector``
        (``ValidateLabels``) requires of ``spec.nodeSelector``."""
        problems = labels_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @model_validator(mode="after")
    def _pod_level_resources(self) -> PodSpec:
        """``spec.resources`` as kube-apiserver validates it before any defaulting (a workload's
        pod template is validated so; a Pod is defaulted first: :meth:`Pod._defaulted_pod_resources`)."""
        problems = pod_resources_problems(self, defaulted=False)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _unique_spread_constraints(self) -> PodSpec:
        """One spread constraint per ``{topologyKey, whenUnsatisfiable}``, as kube-apiserver's
        ``ValidateSpreadConstraintNotRepeat`` (``pkg/apis/core/validation/validation.go``) requires:
        the error names the first of a repeated pair (``Duplicate value``)."""
        constraints = self.topology_spread_constraints
        problems = []
        for i, constraint in enumerate(constraints):
            pair = (constraint.topology_key, constraint.when_unsatisfiable)
            if any((later.topology_key, later.when_unsatisfiable) == pair for later in constraints[i + 1:]):
                problems.append(f"topologySpreadConstraints[{i}].{{topologyKey, whenUnsatisfiable}}: Duplicate value: "
                                f'"{{{pair[0]}, {pair[1]}}}"')
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _unique_host_ports(self) -> PodSpec:
        """One ``hostPort`` per protocol and ``hostIP`` across a pod's containers, as kube-apiserver's
        ``checkHostPortConflicts``/``AccumulateUniqueHostPorts`` require (``Duplicate value:
        "TCP//80"``: protocol/hostIP/port, at the repeat; v1.36.3's wording)."""
        seen: set[str] = set()
        problems = []
        for ci, container in enumerate(self.containers):
            for pi, port in enumerate(container.ports):
                if not port.host_port:
                    continue
                text = f"{port.protocol}/{port.host_ip or ''}/{port.host_port}"
                if text in seen:
                    problems.append(f'containers[{ci}].ports[{pi}].hostPort: Duplicate value: "{text}"')
                seen.add(text)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _unique_container_names(self) -> PodSpec:
        """Container names are unique across ``initContainers`` and ``containers``, as
        kube-apiserver's ``validateInitContainers``/``validateContainers`` require (``Duplicate
        value``); a pod's containers are told apart by name (logs, exec, status)."""
        seen: set[str] = set()
        problems = []
        # as the API server: containers among themselves, then each init container against all seen
        for field, containers in (("containers", self.containers), ("initContainers", self.init_containers)):
            for i, container in enumerate(containers):
                if container.name in seen:
                    problems.append(f"{field}[{i}].name: Duplicate value: {container.name!r}")
                seen.add(container.name)
        if problems:
            raise ValueError("; ".join(problems))
        return self


class PodCondition(LenientModel):
    """``core/v1 PodCondition`` (``PodScheduled`` with reason ``Unschedulable`` marks a pending pod)."""

    type: Str
    status: Literal["True", "False", "Unknown"]
    reason: Str | None = None
    message: Str | None = None


class PodStatus(LenientModel):
    """``core/v1 PodStatus`` (``phase``: Pending, Running, Succeeded, Failed, Unknown)."""

    phase: Str | None = None
    conditions: list[PodCondition] = Field(default_factory=list)
    nominated_node_name: Str | None = None


class Pod(LenientObject):
    """core/v1 ``Pod``."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Pod"
    NAMESPACED: ClassVar[bool] = True

    spec: PodSpec
    status: PodStatus = Field(default_factory=PodStatus)

    @model_validator(mode="after")
    def _no_node_while_gated(self) -> Pod:
        """A Pod created with a ``nodeName`` and ``schedulingGates`` is refused (kube-apiserver's
        ``ValidatePodCreate``: a pod cannot be assigned a node while a scheduling gate is left;
        a pod template is not checked)."""
        if self.spec.node_name and self.spec.scheduling_gates:
            raise ValueError("spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared")
        return self

    @model_validator(mode="after")
    def _defaulted_pod_resources(self) -> Pod:
        """The pod-level resource problems the API server's defaulting of a Pod brings out (a
        pod-level limit below the containers' requests: :func:`pod_resources_problems` with
        ``defaulted``); the others were reported by :meth:`PodSpec._pod_level_resources`."""
        if self.spec.resources is not None:
            problems = pod_resources_problems(self.spec, defaulted=True)
            if problems:
                raise ValueError("; ".join(f"spec.{p}" for p in problems))
        return self

    @model_validator(mode="after")
    def _merged_label_keys(self) -> Pod:
        """:func:`merged_label_keys_problems` with the pod's labels."""
        problems = merged_label_keys_problems(self.spec, self.metadata.labels)
        if problems:
            raise ValueError("; ".join(f"spec.{p}" for p in problems))
        return self

    @model_validator(mode="after")
    def _no_ephemeral_containers(self) -> Pod:
        """kube-apiserver's ``ValidatePodCreate``: ``spec.ephemeralContainers: Forbidden: cannot be set
        on create`` (they are added later through the ``ephemeralcontainers`` subresource)."""
        if self.spec.ephemeral_containers:
            raise ValueError("spec.ephemeralContainers: Forbidden: cannot be set on create")
        return self


class PodTemplateSpec(LenientModel):
    """``core/v1 PodTemplateSpec``: the pod a workload controller stamps out."""

    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec

    @model_validator(mode="after")
    def _merged_label_keys(self) -> PodTemplateSpec:
        """:func:`merged_label_keys_problems` with the template's labels: kube-apiserver takes the
        template, then refuses every pod made from it."""
        problems = merged_label_keys_problems(self.spec, self.metadata.labels)
        if problems:
            raise ValueError("; ".join(f"spec.{p} (kube-apiserver refuses every pod made from this template)" for p in problems))
        return self

    @model_validator(mode="after")
    def _no_ephemeral_containers(self) -> PodTemplateSpec:
        """kube-apiserver's ``ValidatePodTemplateSpec``: ``Forbidden: ephemeral containers not allowed in pod template``."""
        if self.spec.ephemeral_containers:
            raise ValueError("spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template")
        return self


class NodeSpec(LenientModel):
    """``core/v1 NodeSpec`` (``providerID`` links a node to its NodeClaim)."""

    provider_id: Str | None = Field(default=None, alias="providerID")
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: Bool | None = None


class NodeCondition(LenientModel):
    """``core/v1 NodeCondition`` (``Ready``, ``MemoryPressure``...)."""

    type: Str
    status: Literal["True", "False", "Unknown"]
    reason: Str | None = None
    message: Str | None = None


class NodeStatus(LenientModel):
    """``core/v1 NodeStatus``: ``capacity``/``allocatable`` as quantities, and conditions."""

    capacity: ComputeResourceList = Field(default_factory=dict)
    allocatable: ComputeResourceList = Field(default_factory=dict)
    conditions: list[NodeCondition] = Field(default_factory=list)


class Node(LenientObject):
    """core/v1 ``Node``."""

    API_VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "Node"

    spec: NodeSpec = Field(default_factory=NodeSpec)
    status: NodeStatus = Field(default_factory=NodeStatus)
