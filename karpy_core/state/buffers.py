"""CapacityBuffer headroom: how many chunks a buffer asks for, and the virtual pods that stand for them.

Pure (dicts in, dicts out). Source: kubernetes-sigs/karpenter ``pkg/controllers/capacitybuffer``
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


def _ns(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def buffer_key(buffer: Mapping[str, Any]) -> str:
    """``namespace/name`` of a CapacityBuffer."""
    return f"{_ns(buffer)}/{_name(buffer)}"


def is_virtual_pod(pod: Mapping[str, Any]) -> bool:
    """True for a CapacityBuffer's virtual pod (the fake-pod annotation is ``"true"``)."""
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_FAKE_POD) == "true"


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


def compute_replicas(spec: Mapping[str, Any], pod_spec: Mapping[str, Any] | None, workload_replicas: int | None) -> int:
    """The chunks a buffer asks for (module docstring): ``spec`` is ``CapacityBuffer.spec``,
    ``workload_replicas`` the scalableRef's replicas (None for a podTemplateRef buffer)."""
    candidates: list[int] = []
    if spec.get("percentage") is not None and workload_replicas:
        candidates.append(percentage_replicas(workload_replicas, int(spec["percentage"])))
    if spec.get("replicas") is not None:
        candidates.append(int(spec["replicas"]))
    desired = max(candidates, default=0)
    if spec.get("limits") and pod_spec is not None:
        cap = limit_replicas(spec["limits"], pod_spec)
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

    template: Raw | None
    replicas: int
    reason: str
    message: str
    pod_template: str | None = None
    pod_template_generation: int | None = None

    @property
    def ready(self) -> bool:
        return self.template is not None


def _find(objects: Iterable[Mapping[str, Any]], kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    for o in objects:
        if o.get("kind", kind) == kind and _ns(o) == namespace and _name(o) == name:
            return o
    return None


def resolve_buffer(buffer: Mapping[str, Any], pod_templates: Sequence[Mapping[str, Any]],
                   workloads: Mapping[str, Sequence[Mapping[str, Any]]]) -> Resolution:
    """Resolve ``buffer``'s pod shape and chunk count (Karpenter ``resolveAndUpdateStatus``).

    Args:
        buffer: the CapacityBuffer dict.
        pod_templates: the PodTemplate dicts.
        workloads: kind (Deployment, ReplicaSet, StatefulSet) -> the objects of that kind.
    """
    spec = buffer.get("spec") or {}
    ns = _ns(buffer)
    ref = spec.get("podTemplateRef")
    scalable = spec.get("scalableRef")
    if not ref and not scalable:
        return Resolution(None, 0, REASON_RESOLUTION_FAILED, "Neither podTemplateRef nor scalableRef is set")
    try:
        if ref:
            found = _find(pod_templates, "PodTemplate", ns, str(ref.get("name") or ""))
            if found is None:
                return Resolution(None, 0, REASON_TEMPLATE_NOT_FOUND, f'podtemplates "{ref.get("name")}" not found')
            template = dict(found.get("template") or {})
            gen = (found.get("metadata") or {}).get("generation")
            return Resolution(template, compute_replicas(spec, template.get("spec") or {}, None), REASON_RESOLVED,
                              "Pod template resolved successfully", str(ref.get("name")), int(gen) if gen is not None else None)
        assert scalable is not None  # neither-set returned above
        kind = str(scalable.get("kind") or "")
        if kind not in workloads:
            return Resolution(None, 0, REASON_RESOLUTION_FAILED,
                              f"unsupported scalableRef kind {kind!r} (Deployment, ReplicaSet or StatefulSet)")
        found = _find(workloads[kind], kind, ns, str(scalable.get("name") or ""))
        if found is None:
            return Resolution(None, 0, REASON_SCALABLE_NOT_FOUND, f'{kind.lower()}s "{scalable.get("name")}" not found')
        wspec = found.get("spec") or {}
        template = dict(wspec.get("template") or {})
        replicas = int(wspec.get("replicas", 1) if wspec.get("replicas") is not None else 1)
        return Resolution(template, compute_replicas(spec, template.get("spec") or {}, replicas), REASON_RESOLVED,
                          "Pod template resolved successfully")
    except (ValueError, TypeError, ArithmeticError) as exc:  # a malformed quantity in the template or limits
        return Resolution(None, 0, REASON_RESOLUTION_FAILED, str(exc))


def buffer_ready(buffer: Mapping[str, Any]) -> bool:
    """True when the buffer's status says ``ReadyForProvisioning=True`` with replicas > 0 (what
    Karpenter's virtual-pod cache serves)."""
    status = buffer.get("status") or {}
    if not int(status.get("replicas") or 0) > 0:
        return False
    return any(c.get("type") == CONDITION_READY_FOR_PROVISIONING and c.get("status") == "True"
               for c in status.get("conditions") or ())


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


def virtual_pods(buffer: Mapping[str, Any], template: Mapping[str, Any], replicas: int) -> list[Raw]:
    """``replicas`` virtual pods of ``buffer`` shaped by ``template`` (module docstring)."""
    meta = buffer.get("metadata") or {}
    name, ns, uid = _name(buffer), _ns(buffer), str(meta.get("uid") or buffer_key(buffer))
    spec = _sanitize(template.get("spec") or {})
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    return [{
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"capacity-buffer-{name}-{i}", "namespace": ns, "uid": f"{uid}-{i}", "labels": dict(labels),
                     "annotations": {ANNOTATION_FAKE_POD: "true", ANNOTATION_BUFFER_NAME: name, ANNOTATION_BUFFER_NAMESPACE: ns}},
        "spec": copy.deepcopy(spec),
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]},
    } for i in range(1, replicas + 1)]


def virtual_pods_of(buffers: Sequence[Mapping[str, Any]], pod_templates: Sequence[Mapping[str, Any]],
                    workloads: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[Raw]:
    """Every virtual pod of the ready buffers (:func:`buffer_ready`), buffers in key order; the
    count is the buffer's ``status.replicas``, the shape resolved from its spec now."""
    out: list[Raw] = []
    for b in sorted(buffers, key=buffer_key):
        if not buffer_ready(b):
            continue
        res = resolve_buffer(b, pod_templates, workloads)
        if res.template is None:
            continue
        out.extend(virtual_pods(b, res.template, int((b.get("status") or {}).get("replicas") or 0)))
    return out
