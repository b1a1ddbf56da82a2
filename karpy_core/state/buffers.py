"""CapacityBuffer headroom: how many chunks a buffer asks for, and the virtual pods that stand for them.

Pure: views in (:class:`~karpy_core.state.views.CapacityBufferView`,
:class:`~karpy_core.state.views.PodTemplateOwnerView`, parsed once where the objects are read),
virtual Pod dicts out. Source: kubernetes-sigs/karpenter ``pkg/controllers/capacitybuffer``
(``computeReplicas``, ``calculateLimitReplicas``, ``calculatePercentageReplicas``),
``pkg/state/virtualpods`` (``BuildVirtualPods``, ``sanitizeVirtualPodSpec``) and
``pkg/apis/autoscaling/v1beta1/constants.go`` (annotations, conditions, reasons).

* Chunks: the larger of ``replicas`` and ``ceil(percentage * workload replicas / 100)`` (at least
  1 when both are positive), capped by ``limits`` (for each resource both in the limits and the
  chunk's requests, ``floor(limit / request)``, the smallest wins); with neither ``replicas`` nor
  ``percentage``, the limits alone decide.
* A virtual pod is the chunk's pod spec without ``nodeName`` and without PVC-backed or ephemeral
  volumes (and their mounts), priority int32 min, ``PodScheduled=False/Unschedulable``, named
  ``capacity-buffer-<buffer>-<i>`` in the buffer's namespace and annotated
  ``karpenter.sh/capacity-buffer-fake-pod: "true"`` plus the buffer's name and namespace. It is
  scheduled like a pending pod, never created or bound.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from karpy_core.scheduling.pod import effective_requests
from karpy_core.scheduling.resources import parse_resource_list
from karpy_core.state.views import CapacityBufferView, PodTemplateOwnerView, PodView

__all__ = [
    "ANNOTATION_BUFFER_NAME",
    "ANNOTATION_BUFFER_NAMESPACE",
    "ANNOTATION_FAKE_POD",
    "CONDITION_PROVISIONING",
    "CONDITION_READY_FOR_PROVISIONING",
    "Resolution",
    "buffer_key",
    "buffer_ready",
    "compute_replicas",
    "is_virtual_pod",
    "percentage_replicas",
    "limit_replicas",
    "resolve_buffer",
    "virtual_pods",
    "virtual_pods_of",
]

ANNOTATION_FAKE_POD = "karpenter.sh/capacity-buffer-fake-pod"
ANNOTATION_BUFFER_NAME = "karpenter.sh/capacity-buffer-name"
ANNOTATION_BUFFER_NAMESPACE = "karpenter.sh/capacity-buffer-namespace"
CONDITION_READY_FOR_PROVISIONING = "ReadyForProvisioning"
CONDITION_PROVISIONING = "Provisioning"
VIRTUAL_POD_PRIORITY = -(2**31)
"""Karpenter's ``VirtualPodPriority`` (int32 min)."""

REASON_RESOLVED = "Resolved"
REASON_SCALABLE_NOT_FOUND = "ScalableRefNotFound"
REASON_TEMPLATE_NOT_FOUND = "PodTemplateNotFound"
REASON_RESOLUTION_FAILED = "ResolutionFailed"
REASON_FITS_EXISTING = "FitsExistingCapacity"
REASON_REQUIRES_NEW = "RequiresNewCapacity"
REASON_NOT_READY = "NotReadyForProvisioning"
REASON_EMPTY = "BufferEmpty"

Raw = dict[str, Any]


def buffer_key(buffer: CapacityBufferView) -> str:
    """``namespace/name`` of a CapacityBuffer."""
    return buffer.key


def is_virtual_pod(pod: PodView) -> bool:
    """True for a CapacityBuffer's virtual pod (the fake-pod annotation is ``"true"``)."""
    return pod.annotations.get(ANNOTATION_FAKE_POD) == "true"


def percentage_replicas(workload_replicas: int, percentage: int) -> int:
    """``ceil(workload_replicas * percentage / 100)``, at least 1 when both are positive."""
    n = math.ceil(workload_replicas * percentage / 100)
    return max(n, 1) if workload_replicas > 0 and percentage > 0 else n


def limit_replicas(limits: Mapping[str, Any], pod_spec: Mapping[str, Any]) -> int | None:
    """How many chunks of ``pod_spec``'s requests fit in ``limits``; None when no limited resource
    is requested (the limits then constrain nothing).

    Raises:
        karpy_core.utils.quantity.QuantityError: a limit or request is not a quantity.
    """
    requests = effective_requests(pod_spec)
    caps = parse_resource_list(limits)
    counts = [caps[r] // requests[r] for r in sorted(caps) if requests.get(r)]
    return min(counts) if counts else None


def compute_replicas(buffer: CapacityBufferView, pod_spec: Mapping[str, Any] | None, workload_replicas: int | None) -> int:
    """The chunks ``buffer`` asks for (module docstring): ``pod_spec`` is the chunk's pod spec,
    ``workload_replicas`` the scalableRef's replicas (None for a podTemplateRef buffer).

    Raises:
        karpy_core.utils.quantity.QuantityError: a limit or request is not a quantity.
    """
    candidates: list[int] = []
    if buffer.percentage is not None and workload_replicas:
        candidates.append(percentage_replicas(workload_replicas, buffer.percentage))
    if buffer.replicas is not None:
        candidates.append(buffer.replicas)
    desired = max(candidates, default=0)
    if buffer.limits and pod_spec is not None:
        cap = limit_replicas(buffer.limits, pod_spec)
        if cap is not None:
            return min(desired, cap) if candidates else cap
    return desired


@dataclass(frozen=True)
class Resolution:
    """What a buffer resolves to.

    Attributes:
        template: the chunk's pod template (``{metadata, spec}``), None when unresolved.
        replicas: the chunks (:func:`compute_replicas`); 0 when unresolved.
        reason, message: the ``ReadyForProvisioning`` condition's reason and message.
        pod_template: the PodTemplate's name (podTemplateRef buffers), and its generation.
    """

    template: Mapping[str, Any] | None
    replicas: int
    reason: str
    message: str
    pod_template: str | None = None
    pod_template_generation: int | None = None

    @property
    def ready(self) -> bool:
        return self.template is not None


def _find(objects: Iterable[PodTemplateOwnerView], kind: str, namespace: str, name: str) -> PodTemplateOwnerView | None:
    for o in objects:
        if o.kind == kind and o.namespace == namespace and o.name == name:
            return o
    return None


def resolve_buffer(buffer: CapacityBufferView, pod_templates: Sequence[PodTemplateOwnerView],
                   workloads: Mapping[str, Sequence[PodTemplateOwnerView]]) -> Resolution:
    """Resolve ``buffer``'s pod shape and chunk count (Karpenter ``resolveAndUpdateStatus``).

    Args:
        buffer: the CapacityBuffer.
        pod_templates: the PodTemplates.
        workloads: kind (Deployment, ReplicaSet, StatefulSet) -> the objects of that kind.
    """
    ns = buffer.namespace
    ref = buffer.pod_template_ref
    scalable = buffer.scalable_ref
    if not ref and not scalable:
        return Resolution(None, 0, REASON_RESOLUTION_FAILED, "Neither podTemplateRef nor scalableRef is set")
    try:
        if ref:
            found = _find(pod_templates, "PodTemplate", ns, ref)
            if found is None:
                return Resolution(None, 0, REASON_TEMPLATE_NOT_FOUND, f'podtemplates "{ref}" not found')
            template = found.template
            return Resolution(template, compute_replicas(buffer, template.get("spec") or {}, None), REASON_RESOLVED,
                              "Pod template resolved successfully", ref, found.generation)
        assert scalable is not None  # neither-set returned above
        kind, name = scalable
        if kind not in workloads:
            return Resolution(None, 0, REASON_RESOLUTION_FAILED,
                              f"unsupported scalableRef kind {kind!r} (Deployment, ReplicaSet or StatefulSet)")
        found = _find(workloads[kind], kind, ns, name)
        if found is None:
            return Resolution(None, 0, REASON_SCALABLE_NOT_FOUND, f'{kind.lower()}s "{name}" not found')
        template = found.template
        return Resolution(template, compute_replicas(buffer, template.get("spec") or {}, found.replicas), REASON_RESOLVED,
                          "Pod template resolved successfully")
    except (ValueError, TypeError, ArithmeticError) as exc:  # a malformed quantity in the template or limits
        return Resolution(None, 0, REASON_RESOLUTION_FAILED, str(exc))


def buffer_ready(buffer: CapacityBufferView) -> bool:
    """True when the buffer's status says ``ReadyForProvisioning=True`` with replicas > 0 (what
    Karpenter's virtual-pod cache serves)."""
    if not buffer.status_replicas > 0:
        return False
    cond = buffer.condition(CONDITION_READY_FOR_PROVISIONING)
    return cond is not None and cond.is_true


def _sanitize(spec: Mapping[str, Any]) -> Raw:
    out = copy.deepcopy(dict(spec))
    out.pop("nodeName", None)
    dropped = {v.get("name") for v in out.get("volumes") or () if "persistentVolumeClaim" in v or "ephemeral" in v}
    if dropped:
        out["volumes"] = [v for v in out.get("volumes") or () if v.get("name") not in dropped]
        for key in ("containers", "initContainers"):
            for c in out.get(key) or ():
                if c.get("volumeMounts"):
                    c["volumeMounts"] = [m for m in c["volumeMounts"] if m.get("name") not in dropped]
    out["priority"] = VIRTUAL_POD_PRIORITY
    return out


def virtual_pods(buffer: CapacityBufferView, template: Mapping[str, Any], replicas: int) -> list[Raw]:
    """``replicas`` virtual pods of ``buffer`` shaped by ``template`` (module docstring), as the
    Pod dicts the snapshot parses like any pod."""
    name, ns, uid = buffer.name, buffer.namespace, buffer.uid or buffer.key
    spec = _sanitize(template.get("spec") or {})
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"capacity-buffer-{name}-{i}", "namespace": ns, "uid": f"{uid}-{i}", "labels": dict(labels),
                     "annotations": {ANNOTATION_FAKE_POD: "true", ANNOTATION_BUFFER_NAME: name, ANNOTATION_BUFFER_NAMESPACE: ns}},
        "spec": copy.deepcopy(spec),
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    } for i in range(1, replicas + 1)]


def virtual_pods_of(buffers: Sequence[CapacityBufferView], pod_templates: Sequence[PodTemplateOwnerView],
                    workloads: Mapping[str, Sequence[PodTemplateOwnerView]]) -> list[Raw]:
    """Every virtual pod of the ready buffers (:func:`buffer_ready`), buffers in key order; the
    count is the buffer's ``status.replicas``, the shape resolved from its spec now."""
    out: list[Raw] = []
    for b in sorted(buffers, key=buffer_key):
        if not buffer_ready(b):
            continue
        res = resolve_buffer(b, pod_templates, workloads)
        if res.template is None:
            continue
        out.extend(virtual_pods(b, res.template, b.status_replicas))
    return out
