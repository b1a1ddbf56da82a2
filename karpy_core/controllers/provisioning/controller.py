"""The ``provisioner`` controller as the operator runs it, :class:`ProvisionerTrigger`: the batch
window that pod events open, one :class:`~karpy_core.controllers.provisioning.provisioner.Provisioner`
pass per closed batch, and what the pass publishes (Karpenter ``provisioning/controller.go``'s pod
trigger, the batching and event half of ``provisioning/provisioner.go``, ``scheduling/events.go``).

Two names, two things: :class:`~karpy_core.controllers.provisioning.provisioner.Provisioner` is
the engine (pending pods -> scheduling decision -> NodeClaims, one ``reconcile()`` pass, no loop;
the simulator calls it directly); :class:`ProvisionerTrigger` is the controller that decides when
a pass runs and reports it. It keeps Karpenter's controller name ``provisioner`` (the
``controller`` label of the reconcile and scheduler metrics). Its former name,
``ProvisioningController``, still imports from this module, with a ``DeprecationWarning``.

Pod watch events open and extend a batch (:class:`~karpy_core.controllers.provisioning.batcher.Batcher`);
pods kube-scheduler has not marked yet hold it open (:func:`awaiting_scheduler`). Each pass
publishes ``Provisioned`` per NodeClaim, ``Nominated`` per pod placed (on a new NodeClaim, at
most 50 per claim, or an existing node, at most 100), ``FailedScheduling`` per pod left pending
(at most 100) and ``NoCompatibleInstanceTypes`` per NodePool without types, and counts
``karpenter_nodeclaims_created_total{reason="provisioned"}``, the scheduling duration and the
reconcile metrics. While provisionable pods remain, another pass follows
:data:`PENDING_REQUEUE_SECONDS` after the last. A batch cut at its maximum while pods keep arriving
(:attr:`Batcher.cut`) may leave its remainder NodeClaims' pods to the next batch
(:func:`~karpy_core.controllers.provisioning.provisioner.remainder_claims`), which then opens at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_NODEPOOL, min_values_relaxed
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import Wake
from karpy_core.controllers.provisioning.batcher import Batcher, BatchWindow
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import WatchEvent
from karpy_core.state.views import is_provisionable
from karpy_core.utils.clock import Clock
from karpy_core.utils.fields import field_of, map_of

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["ProvisionerTrigger", "awaiting_scheduler", "PENDING_REQUEUE_SECONDS"]

log = logging.getLogger("karpy.operator")

UNSYNCED_RETRY_SECONDS = 1.0
"""A pass that found the cluster state not synced is tried again after this long (Karpenter's
provisioner requeues on the next batch, which its pod trigger opens within a second)."""

PENDING_REQUEUE_SECONDS = 10.0
"""While provisionable pods remain, provisioning runs again after this long without any event
(Karpenter's pod trigger controller requeues each provisionable pod after 10 s)."""


def awaiting_scheduler(pod: dict[str, Any]) -> bool:
    """A pod kube-scheduler has not looked at yet: no ``nodeName``, no ``PodScheduled``
    condition, not terminating or finished, not a DaemonSet or static pod, and for the default
    scheduler. Such pods are about to be marked Unschedulable or bound; their arrival keeps the
    provisioning batch open so one pass sees the whole burst."""
    meta, spec, status = map_of(pod, "metadata"), map_of(pod, "spec"), map_of(pod, "status")
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    if spec.get("schedulerName") not in (None, "", "default-scheduler"):
        return False
    if any(r.get("kind") in ("DaemonSet", "Node") for r in meta.get("ownerReferences") or ()):
        return False
    return not any(c.get("type") == "PodScheduled" for c in status.get("conditions") or ())


def _pod_key(pod: dict[str, Any]) -> str:
    meta = map_of(pod, "metadata")
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


class ProvisionerTrigger:
    """The ``provisioner`` controller: pod events open batches, each closed batch triggers one
    :class:`Provisioner` pass, whose events and metrics it publishes.

    Args:
        provisioner: the deciding-and-creating pass.
        clock: the batch window's clock.
        batch: the window (``idle_seconds``, ``max_seconds``).
        events: where the provisioning events go; None: not published.
        metrics: where its metrics go; None: not counted.
    """

    name = "provisioner"
    wakes_on = (Wake.on("Pod"),)

    def __init__(self, provisioner: Provisioner, *, clock: Clock, batch: BatchWindow, events: EventRecorder | None = None,
                 metrics: Metrics | None = None):
        self.provisioner = provisioner
        self.clock = clock
        self.events = events
        self.metrics = metrics
        self._retry: asyncio.Task[None] | None = None
        """The re-trigger after a pass that found the cluster state not synced."""
        self._unmarked: set[str] = set()
        """UIDs of pods kube-scheduler has not marked or bound yet (see :func:`awaiting_scheduler`)."""
        self.batcher = Batcher(clock, batch, hold=lambda: bool(self._unmarked))

    def observe(self, kind: str, event: WatchEvent) -> None:
        """A pod changed: a pod awaiting kube-scheduler opens or extends the batch and holds it
        open; a provisionable one opens or extends it."""
        pod = event.object
        uid = field_of(pod, "metadata", "uid") or _pod_key(pod)
        if event.type != "DELETED" and awaiting_scheduler(pod):
            self._unmarked.add(uid)
            self.batcher.trigger((uid, "arrived"))
        else:
            self._unmarked.discard(uid)
            if event.type != "DELETED" and is_provisionable(pod):
                self.batcher.trigger((uid, "unschedulable"))

    def trigger(self) -> None:
        """Start a batch (pods that existed before, a NodeOverlay or CapacityBuffer change)."""
        self.batcher.trigger()

    async def _retrigger(self, seconds: float) -> None:
        await self.clock.sleep(seconds)
        self.batcher.trigger()

    async def _requeue_pending(self) -> None:
        await self.clock.sleep(PENDING_REQUEUE_SECONDS)
        self.batcher.trigger()

    async def run(self) -> None:
        """Batches, then one provisioning pass each; while pods stay pending, another pass follows
        :data:`PENDING_REQUEUE_SECONDS` after the last (it re-nominates the nodes they wait for)."""
        requeue: asyncio.Task[None] | None = None
        try:
            while True:
                await self.batcher.wait()
                if requeue is not None:
                    requeue.cancel()
                    requeue = None
                pending = await self.provision_once(streaming=self.batcher.cut)
                if pending:
                    requeue = asyncio.create_task(self._requeue_pending())
        finally:
            if requeue is not None:
                requeue.cancel()
            if self._retry is not None:
                self._retry.cancel()

    async def provision_once(self, *, streaming: bool = False) -> int:
        """One provisioning pass with its metrics, logs and events; returns the number of
        provisionable pods it saw (0 after a failed pass, which re-triggers the batch).

        ``streaming``: the batch was cut at its maximum while pods kept arriving
        (:attr:`Batcher.cut`); the pass may leave its remainder NodeClaims' pods for the next
        batch (:func:`~karpy_core.controllers.provisioning.provisioner.remainder_claims`), and
        then opens that batch at once; a pod waits at most
        :data:`~karpy_core.controllers.provisioning.provisioner.REMAINDER_PASSES` more windows."""
        t0 = time.perf_counter()
        try:
            result = await self.provisioner.reconcile(streaming=streaming)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("provisioning failed; retrying at the next batch")
            await asyncio.sleep(1.0)
            self.batcher.trigger()
            return 0
        seconds = time.perf_counter() - t0
        if result.deferred:
            self.batcher.trigger()
        if not result.synced:  # the cluster state is not synced (logged): look again shortly
            if self._retry is None or self._retry.done():
                self._retry = asyncio.create_task(self._retrigger(UNSYNCED_RETRY_SECONDS), name="provisioner-unsynced-retry")
            if not result.created:
                return 0
        if self.metrics is not None:
            self.metrics.observe_reconcile(self.name, seconds, error=False)
            self.metrics.observe_scheduling(self.name, uuid.uuid4().hex, seconds,
                                            result.results.errors if result.results is not None else ())
        if self.provisioner.dry_run and self.metrics is not None and self.metrics.dry_run is not None and result.synced:
            self.metrics.dry_run.observe_launches((plan.nodepool, plan.cheapest_offering_price()) for plan, _ in result.would_launch)
        if result.results is None:
            return result.pending
        for plan, claim in result.would_launch:  # dry run: the events of the launches it would make, logged only
            if self.events is not None:
                await self.events.record(karpenter_events.provisioned(claim, len(plan.pods), [it.name for it in plan.instance_types[:5]]))
        for claim, plan in zip(result.created, result.results.new_claims, strict=False):
            if self.metrics is not None:
                self.metrics.nodeclaims_created.labels(reason="provisioned", nodepool=claim["metadata"]["labels"].get(LABEL_NODEPOOL, ""),
                                                       min_values_relaxed=min_values_relaxed(claim)).inc()
            if self.events is None:
                continue
            await self.events.record(karpenter_events.provisioned(claim, len(plan.pods), [it.name for it in plan.instance_types[:5]]))
            for pod in [p for p in plan.pods if p.key in result.pods][:50]:  # not the CapacityBuffer virtual pods
                await self.events.record(karpenter_events.nominate_pod(
                    {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}},
                    nodeclaim=claim["metadata"]["name"]))
        if self.events is None:
            return result.pending
        for key, node in sorted(result.results.existing.items())[:100]:
            info = result.pods.get(key)
            ns, _, name = key.partition("/")
            await self.events.record(karpenter_events.nominate_pod(
                {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns, "uid": info.uid if info else None}},
                node=node))
        for key, reason in sorted(result.results.errors.items())[:100]:
            ns, _, name = key.partition("/")
            await self.events.record(karpenter_events.pod_failed_to_schedule(
                {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns}}, str(reason)))
        for pool in result.no_instance_types:
            await self.events.record(karpenter_events.no_compatible_instance_types(pool))
        return result.pending


def __getattr__(name: str) -> type[ProvisionerTrigger]:
    """``ProvisioningController``: the former name of :class:`ProvisionerTrigger`, kept for imports."""
    if name == "ProvisioningController":
        import warnings

        warnings.warn("ProvisioningController is now ProvisionerTrigger (karpy_core.controllers.provisioning.controller)",
                      DeprecationWarning, stacklevel=2)
        return ProvisionerTrigger
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
