"""The CapacityBuffer controllers (feature gate ``CapacityBuffer``, off by default as in Karpenter).

* :class:`CapacityBufferStatus` (Karpenter ``pkg/controllers/capacitybuffer/controller.go``):
  resolves each buffer's pod shape (its PodTemplate, or the pods of its ``scalableRef``
  workload), computes the chunks (:func:`karpy_core.state.buffers.compute_replicas`) and writes
  ``status.replicas``, ``status.podTemplateRef``/``podTemplateGeneration``,
  ``status.provisioningStrategy`` and the ``ReadyForProvisioning`` condition (``Resolved``, or
  ``PodTemplateNotFound`` / ``ScalableRefNotFound`` / ``ResolutionFailed``).
* :func:`provisioning_conditions` (Karpenter ``pkg/controllers/provisioning/buffers.go``): after
  a provisioning pass, each buffer's ``Provisioning`` condition: True/``FitsExistingCapacity``
  when every virtual pod fits on existing capacity, False/``RequiresNewCapacity`` when some
  needed a new NodeClaim or failed, False/``NotReadyForProvisioning`` or ``BufferEmpty``.

The provisioner schedules the virtual pods with the real pending ones
(:mod:`karpy_core.controllers.provisioning.provisioner`); consolidation must find them room too
(:mod:`karpy_core.controllers.disruption.simulation`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.capacitybuffer import ACTIVE_CAPACITY
from karpy_core.controllers.base import Wake, Waker
from karpy_core.controllers.conditions import set_condition, status_conditions
from karpy_core.errors import KubeAPIError, ignore_not_found
from karpy_core.kube.port import KubeClient
from karpy_core.state.buffers import (
    ANNOTATION_BUFFER_NAME,
    ANNOTATION_BUFFER_NAMESPACE,
    CONDITION_PROVISIONING,
    CONDITION_READY_FOR_PROVISIONING,
    REASON_EMPTY,
    REASON_FITS_EXISTING,
    REASON_NOT_READY,
    REASON_REQUIRES_NEW,
    buffer_key,
    buffer_ready,
    resolve_buffer,
)
from karpy_core.state.cluster import read_pod_template_owners
from karpy_core.state.views import CapacityBufferView, PodTemplateOwnerView
from karpy_core.utils.clock import Clock, RealClock, iso
from karpy_core.utils.fields import field_of, map_of

__all__ = ["BufferPlacement", "CapacityBufferStatus", "desired_status", "provisioning_conditions", "REQUEUE_SECONDS"]

REQUEUE_SECONDS = 30.0
"""Karpenter's buffer controller reconciles each buffer again after 30 s (``RequeueAfter``)."""


def desired_status(buffer: CapacityBufferView, pod_templates: Sequence[PodTemplateOwnerView],
                   workloads: Mapping[str, Sequence[PodTemplateOwnerView]], now: float) -> dict[str, Any]:
    """The status :class:`CapacityBufferStatus` writes for ``buffer`` (a new dict; ``now`` in epoch
    seconds stamps a changed condition)."""
    status = dict(map_of(buffer.raw, "status"))  # written back: the API dict
    res = resolve_buffer(buffer, pod_templates, workloads)
    generation = buffer.generation
    conds = list(status.get("conditions") or [])
    if res.ready:
        status["replicas"] = res.replicas
        conds = set_condition(conds, CONDITION_READY_FOR_PROVISIONING, "True", iso(now), res.reason, res.message, generation)
    else:
        conds = set_condition(conds, CONDITION_READY_FOR_PROVISIONING, "False", iso(now), res.reason, res.message, generation)
    if res.pod_template is not None:
        status["podTemplateRef"] = {"name": res.pod_template}
        if res.pod_template_generation is not None:
            status["podTemplateGeneration"] = res.pod_template_generation
    else:
        status.pop("podTemplateRef", None)
        status.pop("podTemplateGeneration", None)
    status["provisioningStrategy"] = buffer.provisioning_strategy or ACTIVE_CAPACITY
    status["conditions"] = conds
    return status


class CapacityBufferStatus:
    """Writes every CapacityBuffer's status (module docstring).

    Args:
        kube: the cluster.
        clock: the time stamped on changed conditions.
        waker: wakes the provisioner after a pass with a ready buffer (its headroom is re-placed:
            a real pod that took it makes a new node); None: nobody is woken.
    """

    name = "capacitybuffer"
    wakes_on = (Wake.on("CapacityBuffer", "PodTemplate"),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, clock: Clock | None = None, waker: Waker | None = None):
        self.kube = kube
        self.clock = clock or RealClock()
        self.waker = waker
        self._due: float | None = None

    def next_due(self) -> float | None:
        """:data:`REQUEUE_SECONDS` after the last pass began (upstream's requeue)."""
        return self._due

    async def reconcile(self) -> int:
        """One pass over every buffer; returns how many ready buffers there are (0: no headroom
        to provision), and wakes provisioning when there are some.

        Raises:
            KubeAPIError: as :meth:`write_status`.
        """
        self._due = self.clock.now() + REQUEUE_SECONDS
        ready = await self.write_status()
        if ready and self.waker is not None:
            self.waker.poke("provisioner")
        return ready

    async def write_status(self) -> int:
        """Write every buffer's status; returns how many are ready. The CapacityBuffer kind not
        served or not permitted counts as none.

        Raises:
            KubeAPIError: listing PodTemplates or workloads, or patching a status, failed.
        """
        try:
            buffers = [CapacityBufferView.of(b) for b in await self.kube.list("CapacityBuffer")]
        except KubeAPIError:
            return 0
        if not buffers:
            return 0
        templates = await read_pod_template_owners(self.kube, "PodTemplate") if any(b.pod_template_ref for b in buffers) else []
        kinds = {b.scalable_ref[0] for b in buffers if b.scalable_ref is not None}
        workloads: dict[str, list[PodTemplateOwnerView]] = {}
        for kind in ("Deployment", "ReplicaSet", "StatefulSet"):  # SCALABLE_KINDS, spelled out for the RBAC check
            workloads[kind] = await read_pod_template_owners(self.kube, kind) if kind in kinds else []
        ready = 0
        for b in buffers:
            status = desired_status(b, templates, workloads, self.clock.now())
            if status != map_of(b.raw, "status"):
                # a buffer deleted meanwhile needs no status
                await ignore_not_found(self.kube.patch("CapacityBuffer", b.name, {"status": status}, b.namespace, status=True))
            ready += buffer_ready(CapacityBufferView.of({**b.raw, "status": status}))
        return ready


@dataclass
class BufferPlacement:
    """Where one provisioning pass put a buffer's virtual pods.

    Attributes:
        existing: pod key -> existing node or in-flight NodeClaim name.
        new: pod key -> index of the planned NodeClaim in the pass's ``new_claims``.
        failed: pod key -> why it could not be placed.
    """

    existing: dict[str, str] = field(default_factory=dict)
    new: dict[str, int] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return len(self.existing) + len(self.new) + len(self.failed)


def owner_of(pod_annotations: Mapping[str, str]) -> str:
    """``namespace/name`` of the buffer a virtual pod's annotations name."""
    return f"{pod_annotations.get(ANNOTATION_BUFFER_NAMESPACE, '')}/{pod_annotations.get(ANNOTATION_BUFFER_NAME, '')}"


def provisioning_conditions(buffers: Sequence[Mapping[str, Any]], placements: Mapping[str, BufferPlacement],
                            now: float) -> dict[str, list[dict[str, Any]]]:
    """Buffer key -> its conditions with ``Provisioning`` set from the pass (module docstring);
    buffers whose condition does not change, or that had no virtual pod in the pass while ready,
    are left out (as upstream, which leaves the condition alone then)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for b in buffers:
        key = buffer_key(CapacityBufferView.of(dict(b)))
        status = map_of(b, "status")
        conds = status_conditions(b)
        gen = field_of(b, "metadata", "generation")
        ready = any(c.get("type") == CONDITION_READY_FOR_PROVISIONING and c.get("status") == "True" for c in conds)
        replicas = int(status.get("replicas") or 0)
        place = placements.get(key)
        if not ready:
            new = set_condition(conds, CONDITION_PROVISIONING, "False", iso(now), REASON_NOT_READY,
                                "Buffer is not ReadyForProvisioning", gen)
        elif replicas == 0:
            new = set_condition(conds, CONDITION_PROVISIONING, "False", iso(now), REASON_EMPTY, "Buffer has zero desired replicas", gen)
        elif place is None:
            continue
        elif place.new or place.failed:
            new = set_condition(conds, CONDITION_PROVISIONING, "False", iso(now), REASON_REQUIRES_NEW,
                                f"{len(place.new)}/{replicas} virtual pods required new capacity, {len(place.failed)} failed", gen)
        elif len(place.existing) == replicas:
            new = set_condition(conds, CONDITION_PROVISIONING, "True", iso(now), REASON_FITS_EXISTING,
                                f"All {replicas} virtual pods fit on existing capacity", gen)
        else:
            continue
        if new != conds:
            out[key] = new
    return out
