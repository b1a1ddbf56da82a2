"""Workload kinds karpy expands into pods, PodDisruptionBudgets, and a passthrough for the rest.

* apps/v1 ``Deployment``, ``ReplicaSet``, ``StatefulSet`` (``replicas`` defaults to 1, as the
  API server defaults it), ``DaemonSet`` (one pod per eligible node);
* batch/v1 ``Job`` (``parallelism`` defaults to 1; pods running at once = min(parallelism,
  completions));
* policy/v1 ``PodDisruptionBudget`` (``minAvailable`` or ``maxUnavailable``, int or percent);
* :class:`Passthrough`: any other kind (Service, ConfigMap, Namespace...), kept but ignored.

All are lenient (unknown fields kept). Source: ``k8s.io/api/{apps,batch,policy}/v1/types.go``.
"""

from __future__ import annotations

import json
import re
from functools import partial
from typing import Annotated, Any, ClassVar

from pydantic import BeforeValidator, Field, Strict, field_validator, model_validator

from karpy_core.apis.base import FieldPathError, Int32, LenientModel, LenientObject, Str
from karpy_core.apis.core import LabelSelector, PodTemplateSpec

__all__ = [
    "INT32_MAX",
    "Replicas",
    "IntOrPercent",
    "IntOrAnyPercent",
    "RollingUpdateDeployment",
    "DeploymentStrategy",
    "DaemonSetUpdateStrategy",
    "StatefulSetUpdateStrategy",
    "DeploymentSpec",
    "Deployment",
    "ReplicaSetSpec",
    "ReplicaSet",
    "StatefulSetSpec",
    "StatefulSet",
    "DaemonSetSpec",
    "DaemonSet",
    "JobSpec",
    "Job",
    "PodDisruptionBudgetSpec",
    "PodDisruptionBudget",
    "Passthrough",
]

_PERCENT = re.compile(r"^[0-9]+%$")

INT32_MAX = 2**31 - 1
"""``replicas``, ``parallelism`` and ``completions`` are ``int32`` in ``k8s.io/api/{apps,batch}/v1/types.go``;
the API server's JSON decoder rejects larger numbers, and validation rejects negative ones
(``ValidateNonnegativeField``)."""

Replicas = Annotated[int, Strict(), Field(ge=0, le=INT32_MAX)]
"""A non-negative ``int32`` count (0 .. 2,147,483,647)."""

DefaultedReplicas = Annotated[Replicas, BeforeValidator(lambda value: 1 if value is None else value)]
"""``replicas`` of a Deployment/ReplicaSet/StatefulSet: ``null`` is defaulted to 1, as the API server
does (``SetDefaults_Deployment``: a nil ``*int32`` becomes 1)."""


def _selector_matches(selector: LabelSelector, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy ``selector`` (``metav1.LabelSelectorAsSelector`` semantics)."""
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


class _SelectsTemplate(LenientModel):
    """A workload spec whose ``selector`` must select its own ``template``'s labels, as apps/v1
    validation (``ValidateDeploymentSpec`` and its ReplicaSet/StatefulSet/DaemonSet peers in
    ``pkg/apis/apps/validation/validation.go``) requires: ``selector does not match template labels``."""

    selector: LabelSelector
    template: PodTemplateSpec
    min_ready_seconds: Int32 | None = None
    """Seconds a new pod must be ready before it counts as available (not simulated); kube-apiserver's
    ``ValidateNonnegativeField``: ``must be greater than or equal to 0``."""

    @field_validator("min_ready_seconds")
    @classmethod
    def _non_negative(cls, value: int | None) -> int | None:
        if value is not None and value < 0:
            raise ValueError(f"Invalid value: {value}: must be greater than or equal to 0")
        return value

    @model_validator(mode="after")
    def _pods_restart_always(self) -> _SelectsTemplate:
        """``template.spec.restartPolicy`` ``Always`` (or unset: defaulted to it), as apps/v1
        validation requires of a controller that keeps its pods running (``ValidatePodTemplateSpecForReplicaSet``
        and its StatefulSet/DaemonSet peers: ``Unsupported value: "Never": supported values: "Always"``)."""
        policy = self.template.spec.restart_policy
        if policy not in (None, "Always"):
            raise ValueError(f'template.spec.restartPolicy: Unsupported value: "{policy}": supported values: "Always"')
        return self

    EMPTY_SELECTOR_KIND: ClassVar[str] = "deployment"
    """The word kube-apiserver's ``empty selector is invalid for <kind>`` uses for this spec
    (``ValidateReplicaSetSpec`` also says ``deployment``)."""

    @model_validator(mode="after")
    def _selector_not_empty(self) -> _SelectsTemplate:
        """An empty ``selector`` (``{}`` or ``matchLabels: {}``) would select every pod of the
        namespace: apps/v1 validation refuses it (``empty selector is invalid for deployment``)."""
        if not self.selector.match_labels and not self.selector.match_expressions:
            raise ValueError(f"selector: Invalid value: {{}}: empty selector is invalid for {self.EMPTY_SELECTOR_KIND}")
        return self

    @model_validator(mode="after")
    def _selector_selects_template(self) -> _SelectsTemplate:
        labels = self.template.metadata.labels
        if not _selector_matches(self.selector, labels):
            # kube-apiserver prints the labels as JSON (field.Invalid of a map): null when not set
            given = labels or "labels" in self.template.metadata.model_fields_set
            shown = json.dumps(dict(sorted(labels.items())), separators=(",", ":")) if given else "null"
            raise FieldPathError(f"template.metadata.labels: Invalid value: {shown}: `selector` does not match template `labels`")
        return self


_PERCENT_MESSAGE = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', "
                    "regex used for validation is '[0-9]+%')")
"""apimachinery's ``IsValidPercent`` message, as kube-apiserver gives it."""


def _int_or_percent(value: Any, *, at_most_100: bool = True) -> int | str:
    """``intstr.IntOrString`` as kube-apiserver's ``ValidatePositiveIntOrPercent`` checks it
    (``pkg/apis/apps/validation/validation.go``): an int in 0 .. 2^31-1, or a string ``"N%"``
    (``IsValidPercent``); with ``at_most_100``, a percentage above 100% is refused too
    (``IsNotMoreThan100Percent``: PDBs, ``maxUnavailable``).

    Raises:
        ValueError: anything else, in the API server's words where it has them.
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"must be an integer or a percentage such as '25%'; got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must not be negative; got {value}")
        if value > INT32_MAX:  # intstr.IntOrString holds an int32
            raise ValueError(f"{value} does not fit in an int32 (an int-or-string's integer: at most {INT32_MAX})")
        return value
    if not _PERCENT.fullmatch(value):
        raise ValueError(f"{value!r}: {_PERCENT_MESSAGE}")
    if at_most_100 and int(value[:-1]) > 100:  # kube-apiserver's IsNotMoreThan100Percent
        raise ValueError(f"{value!r} must not be greater than 100%")
    return value


IntOrPercent = Annotated[Any, BeforeValidator(_int_or_percent)]
"""``intstr.IntOrString`` as PDBs and ``maxUnavailable`` use it: a non-negative int, or a string
``"N%"`` of at most 100%."""

IntOrAnyPercent = Annotated[Any, BeforeValidator(partial(_int_or_percent, at_most_100=False))]
"""``intstr.IntOrString`` as a Deployment's ``maxSurge`` uses it: a non-negative int, or any ``"N%"``."""


def _supported(value: str | None, allowed: tuple[str, ...]) -> str | None:
    """``value`` when unset, empty or one of ``allowed``; else ValueError in kube-apiserver's words."""
    if value not in (None, "", *allowed):
        raise ValueError(f'Unsupported value: "{value}": supported values: ' + ", ".join(f'"{a}"' for a in allowed))
    return value


def _is_zero(value: int | str) -> bool:
    """kube-apiserver's ``getIntOrPercentValue(...) == 0``: ``0`` or ``"0%"``."""
    return int(value[:-1]) == 0 if isinstance(value, str) else value == 0


class RollingUpdateDeployment(LenientModel):
    """apps/v1 ``RollingUpdateDeployment``: how many pods above (``maxSurge``) and below
    (``maxUnavailable``) ``replicas`` a rollout may go; each defaults to ``25%``
    (``SetDefaults_Deployment``). Not simulated (a changed template replaces every pod)."""

    max_unavailable: IntOrPercent | None = None
    max_surge: IntOrAnyPercent | None = None


class DeploymentStrategy(LenientModel):
    """apps/v1 ``DeploymentStrategy``, checked as kube-apiserver's ``ValidateDeploymentStrategy``
    does after ``SetDefaults_Deployment`` (an empty ``type`` is ``RollingUpdate``, an unset
    ``maxSurge``/``maxUnavailable`` is ``25%``).

    Raises (as a validation error):
        ValueError: ``type`` neither ``Recreate`` nor ``RollingUpdate``; ``rollingUpdate`` with
        ``Recreate``; ``maxSurge`` and ``maxUnavailable`` both 0.
    """

    type: Str | None = None
    """``Recreate`` or ``RollingUpdate`` (empty or unset: ``RollingUpdate``)."""
    rolling_update: RollingUpdateDeployment | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        return _supported(value, ("Recreate", "RollingUpdate"))

    @model_validator(mode="after")
    def _fits_type(self) -> DeploymentStrategy:
        if self.type == "Recreate":
            if self.rolling_update is not None:
                raise ValueError("rollingUpdate: Forbidden: may not be specified when strategy `type` is 'Recreate'")
            return self
        rolling = self.rolling_update or RollingUpdateDeployment()
        surge = "25%" if rolling.max_surge is None else rolling.max_surge
        unavailable = "25%" if rolling.max_unavailable is None else rolling.max_unavailable
        if _is_zero(surge) and _is_zero(unavailable):
            raise ValueError(f"rollingUpdate.maxUnavailable: {unavailable!r}: may not be 0 when `maxSurge` is 0")
        return self


class RollingUpdateDaemonSet(LenientModel):
    """apps/v1 ``RollingUpdateDaemonSet``: ``maxUnavailable`` (default 1) and ``maxSurge`` (default
    0), each an int or a percentage of at most 100%."""

    max_unavailable: IntOrPercent | None = None
    max_surge: IntOrPercent | None = None


class DaemonSetUpdateStrategy(LenientModel):
    """apps/v1 ``DaemonSetUpdateStrategy``, checked as kube-apiserver's
    ``ValidateDaemonSetUpdateStrategy`` does after ``SetDefaults_DaemonSet`` (checked by dryRun=All
    on v1.36.3): ``type`` ``RollingUpdate`` (default) or ``OnDelete``; with ``RollingUpdate``,
    ``maxUnavailable`` and ``maxSurge`` not both 0 and not both non-zero.

    Raises (as a validation error):
        ValueError: an unknown ``type``, both 0, or both non-zero.
    """

    type: Str | None = None
    """``RollingUpdate`` or ``OnDelete`` (empty or unset: ``RollingUpdate``)."""
    rolling_update: RollingUpdateDaemonSet | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        return _supported(value, ("RollingUpdate", "OnDelete"))

    @model_validator(mode="after")
    def _one_of_surge_and_unavailable(self) -> DaemonSetUpdateStrategy:
        if self.type == "OnDelete":
            return self
        rolling = self.rolling_update or RollingUpdateDaemonSet()
        unavailable = 1 if rolling.max_unavailable is None else rolling.max_unavailable
        surge = 0 if rolling.max_surge is None else rolling.max_surge
        if _is_zero(unavailable) and _is_zero(surge):
            raise ValueError("rollingUpdate.maxUnavailable: Required value: cannot be 0 when maxSurge is 0")
        if not _is_zero(unavailable) and not _is_zero(surge):
            raise ValueError(f"rollingUpdate.maxSurge: {surge!r}: may not be set when maxUnavailable is non-zero")
        return self


class RollingUpdateStatefulSetStrategy(LenientModel):
    """apps/v1 ``RollingUpdateStatefulSetStrategy``: ``partition`` >= 0 (``maxUnavailable`` is kept
    as read: kube-apiserver v1.36.3 accepts any value there)."""

    partition: Int32 | None = Field(default=None, ge=0)


class StatefulSetUpdateStrategy(LenientModel):
    """apps/v1 ``StatefulSetUpdateStrategy``, checked as kube-apiserver's ``ValidateStatefulSetSpec``
    does: ``type`` ``RollingUpdate`` (default) or ``OnDelete``; ``rollingUpdate`` only with
    ``RollingUpdate``.

    Raises (as a validation error):
        ValueError: an unknown ``type``, or ``rollingUpdate`` with ``OnDelete``.
    """

    type: Str | None = None
    """``RollingUpdate`` or ``OnDelete`` (empty or unset: ``RollingUpdate``)."""
    rolling_update: RollingUpdateStatefulSetStrategy | None = None

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str | None) -> str | None:
        if value not in (None, "", "RollingUpdate", "OnDelete"):
            raise ValueError(f"{value!r}: must be 'RollingUpdate' or 'OnDelete'")
        return value

    @model_validator(mode="after")
    def _rolling_only_with_rolling_update(self) -> StatefulSetUpdateStrategy:
        if self.type == "OnDelete" and self.rolling_update is not None:
            raise ValueError("rollingUpdate: only allowed for updateStrategy 'RollingUpdate'")
        return self


class DeploymentSpec(_SelectsTemplate):
    """apps/v1 ``DeploymentSpec`` (``strategy`` is checked, not simulated; the rest is kept)."""

    replicas: DefaultedReplicas = 1
    strategy: DeploymentStrategy | None = None
    progress_deadline_seconds: Int32 | None = None
    """Seconds before a stuck rollout is reported (not simulated); defaulted to 600 and checked
    against ``minReadySeconds`` (:meth:`_progress_deadline`)."""

    @model_validator(mode="after")
    def _progress_deadline(self) -> DeploymentSpec:
        """kube-apiserver's ``ValidateDeploymentSpec`` after ``SetDefaults_Deployment`` (an unset
        ``progressDeadlineSeconds`` is 600): not negative, and greater than ``minReadySeconds``; both
        problems are reported together, as the API server does."""
        deadline = 600 if self.progress_deadline_seconds is None else self.progress_deadline_seconds
        problems = []
        if deadline < 0:
            problems.append(f"progressDeadlineSeconds: Invalid value: {deadline}: must be greater than or equal to 0")
        if deadline <= (self.min_ready_seconds or 0):
            problems.append(f"progressDeadlineSeconds: Invalid value: {deadline}: must be greater than minReadySeconds")
        if problems:
            raise ValueError("; ".join(problems))
        return self


class Deployment(LenientObject):
    """apps/v1 ``Deployment``: ``replicas`` copies of ``template``."""

    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "Deployment"
    NAMESPACED: ClassVar[bool] = True

    spec: DeploymentSpec


class ReplicaSetSpec(_SelectsTemplate):
    """apps/v1 ``ReplicaSetSpec``."""

    replicas: DefaultedReplicas = 1


class ReplicaSet(LenientObject):
    """apps/v1 ``ReplicaSet``."""

    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "ReplicaSet"
    NAMESPACED: ClassVar[bool] = True

    spec: ReplicaSetSpec


class StatefulSetSpec(_SelectsTemplate):
    """apps/v1 ``StatefulSetSpec``; ``volumeClaimTemplates`` are kept as read (PVC manifests)."""

    EMPTY_SELECTOR_KIND: ClassVar[str] = "statefulset"

    replicas: DefaultedReplicas = 1
    service_name: Str | None = None
    update_strategy: StatefulSetUpdateStrategy | None = None
    volume_claim_templates: list[dict[str, Any]] = Field(default_factory=list)


class StatefulSet(LenientObject):
    """apps/v1 ``StatefulSet``: pods ``<name>-0`` .. ``<name>-(replicas-1)``."""

    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "StatefulSet"
    NAMESPACED: ClassVar[bool] = True

    spec: StatefulSetSpec


class DaemonSetSpec(_SelectsTemplate):
    """apps/v1 ``DaemonSetSpec`` (``updateStrategy`` is checked, not simulated)."""

    EMPTY_SELECTOR_KIND: ClassVar[str] = "daemonset"

    update_strategy: DaemonSetUpdateStrategy | None = None


class DaemonSet(LenientObject):
    """apps/v1 ``DaemonSet``: one pod on every node it tolerates and selects; Karpenter reserves
    room for these pods on each node it launches."""

    API_VERSION: ClassVar[str] = "apps/v1"
    KIND: ClassVar[str] = "DaemonSet"
    NAMESPACED: ClassVar[bool] = True

    spec: DaemonSetSpec


class JobSpec(LenientModel):
    """batch/v1 ``JobSpec``: ``parallelism`` (default 1) pods run at once, ``completions``
    (None = any one success completes the job)."""

    parallelism: Replicas = 1
    completions: Replicas | None = None
    template: PodTemplateSpec
    selector: LabelSelector | None = None
    manual_selector: bool | None = None
    """``true``: ``selector`` is the user's (required, must select the template's labels); unset or
    ``false``: kube-apiserver generates it (see :meth:`Job._selector`)."""

    @model_validator(mode="after")
    def _restart_policy(self) -> JobSpec:
        # kube-apiserver (pkg/apis/batch/validation ValidateJobSpec): a Job's pods restart
        # OnFailure or Never; the pod default, Always, is refused
        if self.template.spec.restart_policy not in ("OnFailure", "Never"):
            got = self.template.spec.restart_policy
            raise ValueError('template.spec.restartPolicy: '
                             + ('Required value' if got is None else f'Unsupported value: "{got}"')
                             + ': valid values: "OnFailure", "Never"')
        return self


class Job(LenientObject):
    """batch/v1 ``Job``."""

    API_VERSION: ClassVar[str] = "batch/v1"
    KIND: ClassVar[str] = "Job"
    NAMESPACED: ClassVar[bool] = True

    spec: JobSpec

    @model_validator(mode="after")
    def _selector(self) -> Job:
        """kube-apiserver's Job selector rules (``pkg/registry/batch/job/strategy.go``
        ``generateSelector`` then ``pkg/apis/batch/validation`` ``validateGeneratedSelector`` and
        ``validateJobSpec``). Without ``manualSelector: true`` the server adds the labels
        ``batch.kubernetes.io/job-name``/``job-name`` (the Job's name) and
        ``batch.kubernetes.io/controller-uid``/``controller-uid`` (its new uid) to the template, and
        ``batch.kubernetes.io/controller-uid`` to the selector's ``matchLabels``: a template label of
        those keys with another value is refused (``must be '<name>'``), and so is a selector that
        then selects more than the uid label (``spec.selector: ... `selector` not auto-generated``:
        any ``matchLabels`` of the user's). With ``manualSelector: true`` the selector is required
        and must select the template's labels. Raises ValueError with the server's words."""
        spec, name = self.spec, self.metadata.name or ""
        labels = dict(spec.template.metadata.labels)
        problems = []
        selector = spec.selector
        if spec.manual_selector:
            if selector is None:
                raise ValueError("spec.selector: Required value")
        else:
            for key, value in ((_JOB_NAME_LABEL, name), (_LEGACY_JOB_NAME_LABEL, name),
                               (_CONTROLLER_UID_LABEL, _UID), (_LEGACY_CONTROLLER_UID_LABEL, _UID)):
                if key not in labels:
                    labels[key] = value
                elif labels[key] != value and key in (_JOB_NAME_LABEL, _LEGACY_JOB_NAME_LABEL):
                    problems.append(f"spec.template.metadata.labels[{key}]: Invalid value: {_go_map(labels)}: must be '{value}'")
            generated = (selector or LabelSelector()).model_copy(deep=True)
            generated.match_labels.setdefault(_CONTROLLER_UID_LABEL, _UID)
            if not _selector_matches(generated, {_CONTROLLER_UID_LABEL: _UID}):
                problems.append("spec.selector: Invalid value: the selector (with the generated "
                                f"{_CONTROLLER_UID_LABEL}): `selector` not auto-generated (set spec.manualSelector: true "
                                "to give a selector)")
            selector = generated
        if not _selector_matches(selector, labels):
            problems.append(f"spec.template.metadata.labels: Invalid value: {_go_map(labels, hide=_UID)}: "
                            "`selector` does not match template `labels`")
        if problems:
            raise ValueError("; ".join(problems))
        return self


_JOB_NAME_LABEL, _LEGACY_JOB_NAME_LABEL = "batch.kubernetes.io/job-name", "job-name"
_CONTROLLER_UID_LABEL, _LEGACY_CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid", "controller-uid"
_UID = "<uid>"
"""Stands for the uid the API server gives a new Job (never one a user could write)."""


def _go_map(labels: dict[str, str], hide: str = "") -> str:
    """``labels`` as kube-apiserver prints a ``map[string]string`` in an error (``map[k:v ...]``,
    keys sorted), leaving out the pairs whose value is ``hide``."""
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(labels.items()) if not hide or v != hide) + "]"


class PodDisruptionBudgetSpec(LenientModel):
    """policy/v1 ``PodDisruptionBudgetSpec``. At most one of ``minAvailable``/``maxUnavailable``
    (int or ``"N%"``); a null ``selector`` selects no pods, an empty one selects all pods in the
    namespace."""

    selector: LabelSelector | None = None
    min_available: IntOrPercent | None = None
    max_unavailable: IntOrPercent | None = None
    unhealthy_pod_eviction_policy: Str | None = None

    @model_validator(mode="after")
    def _one_of(self) -> PodDisruptionBudgetSpec:
        if self.min_available is not None and self.max_unavailable is not None:
            raise ValueError("minAvailable and maxUnavailable cannot both be set")
        return self


class PodDisruptionBudget(LenientObject):
    """policy/v1 ``PodDisruptionBudget``."""

    API_VERSION: ClassVar[str] = "policy/v1"
    KIND: ClassVar[str] = "PodDisruptionBudget"
    NAMESPACED: ClassVar[bool] = True

    spec: PodDisruptionBudgetSpec = Field(default_factory=PodDisruptionBudgetSpec)


class Passthrough(LenientObject):
    """Any kind karpy does not model (Service, ConfigMap, ServiceAccount, Namespace,
    StorageClass, PersistentVolume(Claim)...): ``apiVersion``/``kind``/``metadata`` are read and
    everything else kept. The loader lists these as ignored; they never affect a decision.

    Unlike modelled kinds, ``apiVersion`` and ``kind`` are whatever the document says."""

    @classmethod
    def group(cls) -> str:  # pragma: no cover - per-instance for passthroughs
        return ""

    def ref(self) -> str:
        """``Kind/name`` (with namespace when set)."""
        ns = f"{self.metadata.namespace}/" if self.metadata.namespace else ""
        return f"{self.kind}/{ns}{self.name}"
