"""Pod admission as the API server's RuntimeClass and Priority plugins do it, and a gated pod's condition, for the in-memory cluster.

A pod created with ``spec.runtimeClassName`` gets, before it is stored (Kubernetes
``plugin/pkg/admission/runtimeclass/admission.go``):

* ``spec.overhead`` = the RuntimeClass's ``overhead.podFixed`` (mutating ``setOverhead``); a pod
  that already sets an overhead different from it is rejected;
* ``scheduling.nodeSelector`` merged into ``spec.nodeSelector`` (a key the pod sets to another
  value is rejected) and ``scheduling.tolerations`` merged into ``spec.tolerations``, dropping a
  toleration another one covers (``pkg/util/tolerations``, ``MergeTolerations``/``isSuperset``);
* rejection when the RuntimeClass does not exist.

A pod that sets ``spec.overhead`` without a RuntimeClass defining one is rejected too
(validating ``validateOverhead``). Every rejection is HTTP 403 ``Forbidden`` with the API server's
message. Only creation is admitted (the plugin handles ``CREATE`` only). An empty ``overhead`` map
counts as unset: karpy's serialisers drop empty maps, as Go's ``omitempty`` does on the wire.

Priority admission (``plugin/pkg/admission/priority/admission.go``, :func:`admit_priority`): a pod
naming ``spec.priorityClassName`` gets that PriorityClass's ``value`` as ``spec.priority`` and its
``preemptionPolicy`` (default ``PreemptLowerPriority``) as ``spec.preemptionPolicy``; a pod naming
none gets the ``globalDefault`` class's. A missing class, or a ``priority``/``preemptionPolicy``
the pod sets to another value, is refused (403). ``system-cluster-critical`` and
``system-node-critical`` exist in every cluster (:data:`SYSTEM_PRIORITY_CLASSES`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from karpy_core.apis.core import PREEMPT_LOWER_PRIORITY, SYSTEM_PRIORITY_VALUES, PodSpec, pod_resources_problems
from karpy_core.errors import KubeAPIError
from karpy_core.utils.clone import clone
from karpy_core.utils.quantity import QuantityError, parse_quantity

if TYPE_CHECKING:
    from karpy_core.apis.loader import LoadedManifests
    from karpy_core.apis.workloads import DaemonSet, Deployment, Job, ReplicaSet, StatefulSet

__all__ = ["SCHEDULING_GATED", "admit_pod", "admit_priority", "scheduling_gated", "runtime_class_problems",
           "validate_pod_level_resources", "pod_level_resources_problems",
           "needs_priority_admission", "merge_tolerations",
           "SYSTEM_PRIORITY_CLASSES", "PREEMPT_LOWER_PRIORITY"]


SYSTEM_PRIORITY_CLASSES: dict[str, dict[str, Any]] = {
    name: {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
           "preemptionPolicy": PREEMPT_LOWER_PRIORITY}
    for name, value in SYSTEM_PRIORITY_VALUES.items()
}
"""The PriorityClasses kube-apiserver creates in every cluster, as objects
(:data:`~karpy_core.apis.core.SYSTEM_PRIORITY_VALUES`)."""


def _forbidden(pod: Mapping[str, Any], why: str) -> KubeAPIError:
    name = (pod.get("metadata") or {}).get("name") or ""
    return KubeAPIError.from_status(f'pods "{name}" is forbidden: {why}', status=403, reason="Forbidden")


def _quantities(raw: Mapping[str, Any] | None) -> dict[str, Decimal | str] | None:
    """A resource list as comparable values (``Quantity.Cmp`` semantics); None when unset/empty."""
    if not raw:
        return None
    out: dict[str, Decimal | str] = {}
    for k, v in raw.items():
        try:
            out[str(k)] = parse_quantity(v)
        except QuantityError:
            out[str(k)] = str(v)
    return out


def _normal(t: Mapping[str, Any]) -> tuple[str, str, str, str, int | None]:
    secs = t.get("tolerationSeconds")
    return (str(t.get("key") or ""), str(t.get("operator") or ""), str(t.get("value") or ""),
            str(t.get("effect") or ""), None if secs is None else int(secs))


def _is_superset(ss: Mapping[str, Any], t: Mapping[str, Any]) -> bool:
    """Whether toleration ``ss`` tolerates every taint ``t`` does (Kubernetes
    ``pkg/util/tolerations/tolerations.go``, ``isSuperset``)."""
    s_key, s_op, s_val, s_eff, s_secs = _normal(ss)
    t_key, t_op, t_val, t_eff, t_secs = _normal(t)
    if _normal(ss) == _normal(t):
        return True
    if t_key != s_key and (s_key != "" or s_op != "Exists"):
        return False
    if t_eff != s_eff and s_eff != "":
        return False
    if s_eff == "NoExecute" and s_secs is not None and (t_secs is None or t_secs > s_secs):
        return False
    if s_op in ("Equal", ""):
        return t_op == "Equal" and t_val == s_val
    return s_op == "Exists"


def merge_tolerations(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``first`` then ``second``, dropping each toleration that another one covers (of two equal
    ones, the first is kept). Kubernetes ``pkg/util/tolerations/tolerations.go``
    ``MergeTolerations``."""
    every = [*first, *second]
    merged: list[dict[str, Any]] = []
    for i, t in enumerate(every):
        if any(_is_superset(m, t) for m in merged):
            continue
        if any(_normal(t) != _normal(t2) and _is_superset(t2, t) for t2 in every[i + 1:]):
            continue
        merged.append(t)
    return merged


SCHEDULING_GATED = "SchedulingGated"
"""The ``PodScheduled=False`` reason of a pod created with ``spec.schedulingGates`` (``v1.PodReasonSchedulingGated``)."""


def scheduling_gated(pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` (a Pod dict with ``spec.schedulingGates``) as kube-apiserver stores it on create:
    with a ``PodScheduled=False`` condition, reason ``SchedulingGated``, unless it has a
    ``PodScheduled`` condition already (Kubernetes ``pkg/registry/core/pod/strategy.go``
    ``applySchedulingGatedCondition``, in ``PrepareForCreate``). kube-scheduler does not try the
    pod while a gate is left (its ``SchedulingGates`` PreEnqueue plugin), and Karpenter does not
    provision for it: the reason is not ``Unschedulable``
    (:func:`karpy_core.state.views.is_provisionable`). Returns a new dict when it adds the
    condition (``pod``'s status is not changed), else ``pod``."""
    status = pod.get("status") or {}
    conditions = list(status.get("conditions") or ())
    if any(c.get("type") == "PodScheduled" for c in conditions):
        return pod
    conditions.append({"type": "PodScheduled", "status": "False", "reason": SCHEDULING_GATED,
                       "message": "Scheduling is blocked due to non-empty scheduling gates"})
    return {**pod, "status": {**status, "phase": status.get("phase") or "Pending", "conditions": conditions}}


def admit_pod(pod: dict[str, Any], runtime_classes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The pod as the RuntimeClass admission plugin stores it (a new dict; ``pod`` is untouched).

    Args:
        pod: a core/v1 Pod dict being created.
        runtime_classes: node.k8s.io/v1 RuntimeClass dicts by name.

    Raises:
        KubeAPIError: 403 Forbidden when the named RuntimeClass does not exist, when the pod's own
            ``spec.overhead`` differs from the RuntimeClass's ``overhead.podFixed`` or is set
            without a RuntimeClass overhead, or when its ``nodeSelector`` conflicts with the
            RuntimeClass's ``scheduling.nodeSelector``.
    """
    spec = pod.get("spec") or {}
    name = spec.get("runtimeClassName")
    rc: Mapping[str, Any] | None = None
    if name:
        rc = runtime_classes.get(str(name))
        if rc is None:
            raise _forbidden(pod, f'pod rejected: RuntimeClass "{name}" not found')
    out = clone(pod)
    ospec = out.setdefault("spec", {})
    overhead = rc.get("overhead") if rc is not None else None
    if overhead is not None:
        fixed = overhead.get("podFixed")
        if _quantities(ospec.get("overhead")) is not None and _quantities(ospec.get("overhead")) != _quantities(fixed):
            raise _forbidden(pod, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        if fixed:
            ospec["overhead"] = copy.deepcopy(dict(fixed))
        else:
            ospec.pop("overhead", None)
    elif _quantities(ospec.get("overhead")) is not None:
        raise _forbidden(pod, "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")
    scheduling = rc.get("scheduling") if rc is not None else None
    if scheduling:
        selector = dict(ospec.get("nodeSelector") or {})
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            if key in selector and selector[key] != value:
                raise _forbidden(
                    pod,
                    f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                    f"pod.spec.nodeSelector[{key}] = {selector[key]}",
                )
            selector[key] = value
        if selector:
            ospec["nodeSelector"] = selector
        tolerations = merge_tolerations(list(ospec.get("tolerations") or []),
                                        copy.deepcopy(list(scheduling.get("tolerations") or [])))
        if tolerations:
            ospec["tolerations"] = tolerations
    return out


def needs_priority_admission(pod: Mapping[str, Any], priority_classes: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether :func:`admit_priority` could change or refuse ``pod``: it names a PriorityClass or
    sets ``priority``/``preemptionPolicy``, or a stored class is ``globalDefault``. A pod with
    none of these would get ``priority: 0``, which every reader already assumes when it is unset,
    so the in-memory cluster leaves it as created."""
    spec = pod.get("spec") or {}
    if spec.get("priorityClassName") or spec.get("priority") is not None or spec.get("preemptionPolicy") is not None:
        return True
    return any(pc.get("globalDefault") is True for pc in priority_classes.values())


def admit_priority(pod: dict[str, Any], priority_classes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The pod as the Priority admission plugin stores it (a new dict; ``pod`` is untouched).

    As ``admitPod`` in Kubernetes ``plugin/pkg/admission/priority/admission.go`` (on create):
    ``spec.priorityClassName`` names the class (the ``globalDefault`` one, whose name is then
    set, when empty; none: priority 0, ``PreemptLowerPriority``); ``spec.priority`` becomes its
    ``value`` and ``spec.preemptionPolicy`` its ``preemptionPolicy``.

    Args:
        pod: a core/v1 Pod dict being created.
        priority_classes: scheduling.k8s.io/v1 PriorityClass dicts by name (the two system
            classes are added when missing: :data:`SYSTEM_PRIORITY_CLASSES`).

    Raises:
        KubeAPIError: 403 Forbidden when the named class does not exist (``no PriorityClass with
            name NAME was found``), or the pod's own ``priority``/``preemptionPolicy`` differs
            from the class's, in the API server's words.
    """
    classes = {**SYSTEM_PRIORITY_CLASSES, **priority_classes}
    spec = pod.get("spec") or {}
    name = spec.get("priorityClassName")
    pc: Mapping[str, Any] | None
    if name:
        pc = classes.get(str(name))
        if pc is None:
            raise _forbidden(pod, f"no PriorityClass with name {name} was found")
    else:
        defaults = sorted((c for c in classes.values() if c.get("globalDefault") is True),
                          key=lambda c: int(c.get("value") or 0))  # several: the lowest value (getDefaultPriorityClass)
        pc = defaults[0] if defaults else None
    priority = int(pc.get("value") or 0) if pc is not None else 0
    policy = str((pc.get("preemptionPolicy") if pc is not None else None) or PREEMPT_LOWER_PRIORITY)
    given = spec.get("priority")
    if given is not None and given != priority:
        raise _forbidden(pod, f"the integer value of priority ({given}) must not be provided in pod spec; priority "
                              f"admission controller computed {priority} from the given PriorityClass name")
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise _forbidden(pod, f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
                              f"priority admission controller computed {policy} from the given PriorityClass name")
    out = {**pod, "spec": {**spec, "priority": priority, "preemptionPolicy": policy}}
    if pc is not None and not name:
        out["spec"]["priorityClassName"] = (pc.get("metadata") or {}).get("name")
    return out


def runtime_class_problems(loaded: LoadedManifests) -> list[str]:
    """What the RuntimeClass admission plugin (:func:`admit_pod`) refuses in the pods of ``loaded``
    (manifests given to ``karpy validate``/``simulate``), one line each naming the object and the
    API server's words: an ``overhead`` without a RuntimeClass defining one (``pod rejected: Pod
    Overhead set without corresponding RuntimeClass defined Overhead``), a ``runtimeClassName``
    that is not among the inputs (``RuntimeClass "x" not found``), a conflicting node selector.

    A bare Pod is refused by kube-apiserver (403); a workload is accepted but none of its pods is
    created, so the simulation would leave them out: reported for both, as
    :func:`karpy_core.apis.loader.priority_class_problems` reports Priority admission.
    """
    from karpy_core.apis.loader import refused_names

    classes = {rc.name: rc.model_dump(mode="json", by_alias=True, exclude_none=True) for rc in loaded.runtimeclasses}
    unknown = refused_names(loaded, "node.k8s.io/v1", "RuntimeClass")  # defined, but refused: not "not found"
    objects: list[Any] = [*loaded.pods, *loaded.deployments, *loaded.replicasets, *loaded.statefulsets, *loaded.daemonsets,
                          *loaded.jobs]
    problems = []
    for obj in objects:
        bare = obj.KIND == "Pod"
        spec = obj.spec if bare else obj.spec.template.spec
        if (not spec.runtime_class_name and not spec.overhead) or spec.runtime_class_name in unknown:
            continue
        pod = {"metadata": {"name": obj.name}, "spec": {
            "runtimeClassName": spec.runtime_class_name, "overhead": dict(spec.overhead), "nodeSelector": dict(spec.node_selector),
            "tolerations": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in spec.tolerations]}}
        try:
            admit_pod(pod, classes)
        except KubeAPIError as exc:
            whose = "the pod" if bare else f"the pods of this {obj.KIND}"
            why = str(exc).partition("is forbidden: ")[2] or str(exc)
            problems.append(f"{obj.source} {obj.ref()}: {'spec' if bare else 'spec.template.spec'}: {why} (kube-apiserver's "
                            f"RuntimeClass admission refuses {whose})")
    return problems


def validate_pod_level_resources(pod: Mapping[str, Any]) -> None:
    """Refuse a Pod being created whose pod-level ``spec.resources``, once the API server has
    defaulted it, is invalid, as kube-apiserver v1.36.3 does (``SetDefaults_Pod``'s
    ``defaultPodRequests`` then ``validatePodResources``; checked by
    ``tests/integration/test_trial5_apiserver.py``): a pod-level limit below the containers'
    requests (``spec.resources.requests: Invalid value: "100m": must be less than or equal to cpu
    limit of 50m``). A workload's template is stored without that defaulting, so its pods are the
    ones refused (the ReplicaSet controller's ``FailedCreate``). A pod without ``spec.resources``
    costs one dict lookup.

    Raises:
        KubeAPIError: 422 Invalid, ``Pod "NAME" is invalid: spec.resources...`` with every problem.
    """
    spec = pod.get("spec") or {}
    if not spec.get("resources"):
        return
    try:
        model = PodSpec.model_validate(spec, by_alias=True, by_name=False)
    except ValidationError:
        return  # a spec the loader refuses; not this check's to word
    problems = pod_resources_problems(model, defaulted=True)
    if problems:
        name = (pod.get("metadata") or {}).get("name") or ""
        raise KubeAPIError.from_status(f'Pod "{name}" is invalid: ' + ", ".join(f"spec.{p}" for p in problems),
                                       status=422, reason="Invalid")


def pod_level_resources_problems(loaded: LoadedManifests) -> list[str]:
    """The workloads of ``loaded`` (manifests given to ``karpy validate``/``simulate``) whose every
    pod kube-apiserver would refuse for its pod-level resources (:func:`validate_pod_level_resources`:
    the API server stores the workload, its template not defaulted, then refuses each pod its
    controller creates), one line each naming the object and the API server's words. A bare Pod is
    refused by the loader itself (:class:`karpy_core.apis.core.Pod`)."""
    problems = []
    workloads: list[Deployment | ReplicaSet | StatefulSet | DaemonSet | Job] = [
        *loaded.deployments, *loaded.replicasets, *loaded.statefulsets, *loaded.daemonsets, *loaded.jobs]
    for obj in workloads:
        spec = obj.spec.template.spec
        if spec.resources is None:
            continue
        for why in pod_resources_problems(spec, defaulted=True):
            problems.append(f"{obj.source} {obj.ref()}: spec.template.spec.{why} (kube-apiserver refuses the pods of this "
                            f"{obj.KIND}: their pod-level requests default to the containers' and are checked against "
                            "the pod-level limits)")
    return problems
