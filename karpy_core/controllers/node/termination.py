"""Node termination: drain a deleted managed Node, then let it go.

A Node that karpy manages carries the ``karpenter.sh/termination`` finalizer. When it is deleted
(by the NodeClaim finalizer, or by a user), this controller (Karpenter
``pkg/controllers/node/termination``, ``terminator/terminator.go``, ``eviction.go``):

1. deletes its NodeClaim, if that still exists, so the instance is terminated afterwards;
   then, when the Node is not Ready, asks the cloud provider for its instance (``get``, the
   plugin's ``karpy_get``: Karpenter ``finalize``, the one place Karpenter's core calls
   ``CloudProvider.Get``): an instance that is gone (``NodeClaimNotFoundError``) means nothing
   runs there any more, and the finalizer is removed at once, without a taint or a drain (a
   NotReady Node whose kubelet still runs keeps Ready True, so a Ready Node is never asked
   about). Where Karpenter requeues on any other error, karpy logs it and drains the Node as if
   the instance were there (what a flaky read would otherwise hold up forever);
2. taints it ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands on it;
3. drains it in tiers, each tier gone before the next starts: non-critical non-DaemonSet pods,
   non-critical DaemonSet pods, critical (``priorityClassName`` ``system-cluster-critical`` or
   ``system-node-critical``) non-DaemonSet pods, critical DaemonSet pods. Pods are evicted through
   the Eviction API (PodDisruptionBudgets are enforced by the API server, whose 429 or 500
   leaves the pod to be retried after a per-pod exponential backoff of 100 ms doubling up to
   10 s, as Karpenter's eviction queue does), in :func:`~karpy_core.scheduling.pod.drain_order`
   (hard placement rules first, then the larger pods first: issue 36); ``karpenter.sh/do-not-disrupt`` pods are left alone;
   pods that tolerate
   ``karpenter.sh/disrupted:NoSchedule`` are not drained at all (neither evicted nor waited for:
   they would reschedule onto the node; Karpenter ``pkg/utils/pod/scheduling.go``,
   ``IsDrainable``), nor are pods stuck terminating (deleted more than a minute past their grace
   period: their kubelet is gone, ``IsStuckTerminating``);
4. with a ``terminationGracePeriod`` on the NodeClaim, the drain deadline is the NodeClaim's
   deletion time + that period (written to the ``karpenter.sh/nodeclaim-termination-timestamp``
   annotation); from ``deadline - pod.terminationGracePeriodSeconds`` (default 30 s) on, a pod is
   deleted instead of evicted, PDBs and do-not-disrupt notwithstanding;
5. once no drainable pod remains, waits for the Node's VolumeAttachments to be gone (the
   attach-detach controller removes them; attachments of volumes used by pods that are not
   drained do not count), unless the terminationGracePeriod deadline has passed
   (``VolumesDetached`` Unknown/``AwaitingVolumeDetachment``, True, or False/
   ``TerminationGracePeriodElapsed``; Karpenter ``awaitVolumeDetachment``);
6. removes the finalizer. The NodeClaim finalizer then terminates the instance through the cloud provider.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.labels import (
    ANNOTATION_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
    LABEL_EXCLUDE_BALANCERS,
    TAINT_DISRUPTED,
)
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import Wake, list_views
from karpy_core.controllers.conditions import DRAINED, VOLUMES_DETACHED, patch_conditions, set_condition, status_conditions
from karpy_core.errors import (
    CloudProviderError,
    ConflictError,
    InternalServerError,
    KubeAPIError,
    NodeClaimNotFoundError,
    NotFoundError,
    TooManyRequestsError,
    ignore_not_found,
)
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import REPEAT_BY_ERROR, fields, reconciling
from karpy_core.scheduling.pod import drain_order
from karpy_core.state.views import NodeClaimView, NodeView, PodView, ViewCache, condition_of
from karpy_core.utils.clock import Clock, RealClock, iso
from karpy_core.utils.fields import field_of
from karpy_core.utils.timestamps import parse_rfc3339

if TYPE_CHECKING:
    from karpy_core.cloudprovider.provider import CloudProvider
    from karpy_core.observability import Metrics

__all__ = ["NodeTermination", "TerminationEvent", "TerminationEventKind", "drain_reason"]

EVICTION_BACKOFF_BASE_SECONDS = 0.1
EVICTION_BACKOFF_MAX_SECONDS = 10.0
"""A refused eviction is retried after ``min(0.1 * 2**(failures - 1), 10)`` seconds: Karpenter's
rate-limited eviction queue (``terminator/eviction.go``), "429 (PDB) means backoff from 100 ms to
10 s" in the project's Karpenter notes (reference/karpenter-core-behaviour.md). As there, a 404
(pod gone) or 409 (UID precondition: a new pod under the name) counts as done."""

log = logging.getLogger(__name__)


class TerminationEventKind(StrEnum):
    """What the termination controller did."""

    EVICT = "evict"
    EVICT_BLOCKED = "evict-blocked"
    DRAIN_WAIT = "drain-wait"
    FORCE_DELETE = "force-delete"
    NODE_FINALIZED = "node-finalized"


@dataclass
class TerminationEvent:
    """``kind``: evict, evict-blocked, drain-wait (do-not-disrupt pod waiting), force-delete
    (past the terminationGracePeriod deadline) or node-finalized; ``pod`` is ``ns/name``."""

    kind: TerminationEventKind
    node: str
    pod: str = ""
    reason: str = ""


FORCEFUL_TERMINATION = "Forceful Termination"
"""``karpenter_pods_drained_total``'s ``reason`` when the NodeClaim has no ``DisruptionReason``."""


def _eviction_order(view: PodView) -> tuple[int, int, int, str, str]:
    """:func:`~karpy_core.scheduling.pod.drain_order` of ``view``; a pod that cannot be parsed
    sorts as one without placement rules or requests."""
    info = view.try_info()
    return drain_order(info) if info is not None else (1, 0, 0, view.namespace, view.name)


def drain_reason(claim: NodeClaimView | None) -> str:
    """Why a node's pods are drained: its NodeClaim's ``DisruptionReason`` condition reason when
    True, else ``Forceful Termination`` (Karpenter ``terminator/eviction.go``)."""
    cond = condition_of(claim.conditions, "DisruptionReason") if claim is not None else None
    return cond.reason if cond is not None and cond.is_true and cond.reason else FORCEFUL_TERMINATION


class NodeTermination:
    """Drains deleted Nodes that carry karpy's finalizer (see the module docstring).

    Sets the NodeClaim's ``Drained`` condition (Unknown/``Draining`` while draining, True once
    drained) and publishes Karpenter's termination events to ``events`` when given: ``Evicted``
    and ``Disrupted`` on pods, ``FailedDraining`` and ``TerminationGracePeriodExpiring`` on the
    Node, ``TerminationGracePeriodExpiring`` on the NodeClaim when its deadline is set. With
    ``metrics``: ``karpenter_pods_eviction_requests_total`` (200, 429),
    ``karpenter_pods_drained_total`` and the Node's termination metrics once it is finalized.
    With ``provider`` (the controller and the simulator give it), a NotReady Node whose instance
    the provider no longer has is finalized without a drain (step 1 of the module docstring).
    """

    name = "node.termination"
    wakes_on = (Wake.on("NodeClaim", "Node"), Wake.on("Pod", types=("DELETED",)))
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, clock: Clock | None = None, events: EventRecorder | None = None,
                 metrics: Metrics | None = None, provider: CloudProvider | None = None):
        self.kube = kube
        self.provider = provider
        self.events = events
        self.metrics = metrics
        self.clock = clock or RealClock()
        self.wake: float | None = None
        """The earliest future forced-deletion or eviction-retry time seen by the last pass (the
        simulator jumps its clock there; the operator wakes the controller then), or None."""
        self._backoff: dict[str, tuple[int, float]] = {}
        """Pod uid (or ``ns/name``) -> (refused evictions so far, epoch seconds of the next try)."""
        self._views = ViewCache()
        self.dry_run = False
        """``karpy controller --dry-run``: the drain is decided as usual against the dry-run client
        (its taints, evictions, deletions and finalizer removal withheld and logged there); this
        controller's own lines say ``dry run: would taint node`` / ``would delete node``."""

    def next_due(self) -> float | None:
        """:attr:`wake`: the next forced deletion or eviction retry."""
        return self.wake

    async def _publish(self, *evs: Event) -> None:
        if self.events is not None:
            await self.events.record(*evs)

    async def _set_drained(self, claim: NodeClaimView | None, drained: bool) -> None:
        """``Drained``: Unknown/``Draining`` when first seen draining, True when drained."""
        if claim is None or (not drained and condition_of(claim.conditions, DRAINED) is not None):
            return
        conds = set_condition(status_conditions(claim.raw), DRAINED, "True" if drained else "Unknown",
                              iso(self.clock.now()), "" if drained else "Draining", "" if drained else "Draining")
        patch = patch_conditions(claim.raw, conds)
        if patch is None:
            return
        await ignore_not_found(self.kube.patch("NodeClaim", claim.name, patch, status=True))

    def _wake_at(self, t: float) -> None:
        self.wake = t if self.wake is None else min(self.wake, t)

    async def reconcile(self) -> list[TerminationEvent]:
        """One pass over the deleted Nodes carrying the finalizer; returns what was done."""
        events: list[TerminationEvent] = []
        self.wake = None
        nodes: list[NodeView] = [
            v for v in await list_views(self.kube, "Node", self._views)
            if isinstance(v, NodeView) and v.deleting and FINALIZER_TERMINATION in v.finalizers
        ]
        if not nodes:
            self._views.sweep()
            return events
        pods = [p for p in await list_views(self.kube, "Pod", self._views) if isinstance(p, PodView)]
        live = {p.uid or p.key for p in pods}
        self._backoff = {k: v for k, v in self._backoff.items() if k in live}
        claims = [c for c in await list_views(self.kube, "NodeClaim", self._views) if isinstance(c, NodeClaimView)]
        for node in nodes:
            with reconciling("Node", node.name):
                events.extend(await self._terminate(node, pods, claims))
        self._views.sweep()
        return events

    def _count(self, ev: TerminationEvent, node: NodeView, claims: list[NodeClaimView]) -> None:
        """The metrics of one thing done (as Karpenter's terminator counts them)."""
        m = self.metrics
        if m is None:
            return
        if ev.kind is TerminationEventKind.NODE_FINALIZED:
            m.observe_node_terminated(node.raw, self.clock.now())
        elif ev.kind is TerminationEventKind.EVICT_BLOCKED:
            m.pods_eviction_requests.labels(code="429").inc()
        elif ev.kind in (TerminationEventKind.EVICT, TerminationEventKind.FORCE_DELETE):
            if ev.kind is TerminationEventKind.EVICT:
                m.pods_eviction_requests.labels(code="200").inc()
            m.pods_drained.labels(reason=drain_reason(next((c for c in claims if c.node_name == node.name), None))).inc()

    async def _terminate(self, node: NodeView, pods: list[PodView], claims: list[NodeClaimView]) -> list[TerminationEvent]:
        events = await self._drain(node, pods, claims)
        for ev in events:
            self._count(ev, node, claims)
        return events

    async def _drain(self, node: NodeView, pods: list[PodView], claims: list[NodeClaimView]) -> list[TerminationEvent]:
        name = node.name
        events: list[TerminationEvent] = []
        now = self.clock.now()
        pid = node.provider_id
        for c in claims:
            if pid and c.provider_id == pid and not c.deleting:
                await ignore_not_found(self.kube.delete("NodeClaim", c.name))
        if await self._instance_gone(node):
            events.append(await self._finalize(node, reason="instance gone"))
            return events
        tainted = any(t.key == TAINT_DISRUPTED for t in node.taints)
        excluded = node.labels.get(LABEL_EXCLUDE_BALANCERS) == "karpenter"
        if not tainted or not excluded:
            # as Karpenter's terminator: the disrupted taint, and out of external load balancers
            # before the drain (their targets would otherwise point at a node going away)
            patch: dict[str, Any] = {"metadata": {"labels": {LABEL_EXCLUDE_BALANCERS: "karpenter"}}}
            if not tainted:
                taints = list(field_of(node.raw, "spec", "taints") or [])
                patch["spec"] = {"taints": [*taints, {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}]}
            await self.kube.patch("Node", name, patch)
            # Karpenter's line and keys (node/termination/terminator/terminator.go)
            log.info("dry run: would taint node" if self.dry_run else "tainted node",
                     extra={"taint.Key": TAINT_DISRUPTED, "taint.Value": "", "taint.Effect": "NoSchedule"})
        on_node = [
            p for p in pods
            if p.node_name == name and not p.terminal
            and not p.mirror
            and not p.tolerates_disrupted_taint
            and not p.stuck_terminating(now)
        ]
        claim = next((c for c in claims if pid and c.provider_id == pid), None)
        deadline = await self._deadline(node, claim)
        await self._set_drained(claim, False)
        stamp = claim.annotations.get(ANNOTATION_TERMINATION_TIMESTAMP) if claim is not None else None
        if stamp:
            await self._publish(karpenter_events.node_termination_grace_period_expiring(node.raw, stamp))
        elif deadline is not None:
            await self._publish(karpenter_events.node_termination_grace_period_expiring(node.raw, iso(deadline)))
        evict_reason = drain_reason(claim)
        tiers = sorted({p.drain_tier for p in on_node})
        current = [p for p in on_node if tiers and p.drain_tier == tiers[0]]
        for view in sorted(current, key=_eviction_order):
            pod, key = view.raw, view.key
            grace = view.grace_period_seconds
            if deadline is not None and now < deadline - grace:
                self._wake_at(deadline - grace)
            bkey = view.uid or key
            failures, retry_at = self._backoff.get(bkey, (0, now))
            try:
                if deadline is not None and now >= deadline - grace:
                    await self.kube.delete("Pod", view.name, view.namespace)
                    events.append(TerminationEvent(TerminationEventKind.FORCE_DELETE, name, key, reason="terminationGracePeriod deadline"))
                    await self._publish(karpenter_events.disrupt_pod_delete(pod, max(int(deadline - now), 1), iso(deadline)))
                    continue
                if view.deleting:
                    continue
                if view.do_not_disrupt:
                    events.append(TerminationEvent(TerminationEventKind.DRAIN_WAIT, name, key, reason="karpenter.sh/do-not-disrupt"))
                    continue
                if now < retry_at:
                    self._wake_at(retry_at)
                    continue
                await self.kube.evict(pod)
                self._backoff.pop(bkey, None)
                events.append(TerminationEvent(TerminationEventKind.EVICT, name, key))
                await self._publish(karpenter_events.evict_pod(pod, evict_reason))
            except (NotFoundError, ConflictError):  # gone, or replaced under the same name (UID precondition)
                continue
            except (TooManyRequestsError, InternalServerError) as exc:  # a PDB refused it (or several PDBs select the pod)
                failures += 1
                retry_at = now + min(EVICTION_BACKOFF_BASE_SECONDS * 2 ** (failures - 1), EVICTION_BACKOFF_MAX_SECONDS)
                self._backoff[bkey] = (failures, retry_at)
                self._wake_at(retry_at)
                reason = "; ".join([str(exc), *[c for c in exc.causes if c]])
                events.append(TerminationEvent(TerminationEventKind.EVICT_BLOCKED, name, key, reason=reason))
                several = isinstance(exc, InternalServerError)
                why = "eviction does not support multiple PDBs" if several else "evicting pod violates a PDB"
                await self._publish(karpenter_events.node_failed_to_drain(node.raw, f"{why} (Pod={key})"))
                continue
        if on_node:
            still = {v.key for v in await list_views(self.kube, "Pod", self._views) if isinstance(v, PodView) and v.node_name == name}
            waiting = [p for p in on_node if p.key in still]
            if waiting:
                await self._publish(karpenter_events.node_failed_to_drain(node.raw, f"{len(waiting)} pods are waiting to be evicted"))
                return events
        await self._set_drained(claim, True)
        if not await self._volumes_detached(node, claim, pods, deadline, now):
            return events
        events.append(await self._finalize(node))
        return events

    async def _finalize(self, node: NodeView, reason: str = "") -> TerminationEvent:
        """Remove the termination finalizer (the Node goes away); Karpenter ``removeFinalizer``."""
        finalizers = [f for f in node.finalizers if f != FINALIZER_TERMINATION]
        await ignore_not_found(self.kube.patch("Node", node.name, {"metadata": {"finalizers": finalizers}}))
        log.info("dry run: would delete node" if self.dry_run else "deleted node")  # Karpenter's line (node/termination/controller.go)
        return TerminationEvent(TerminationEventKind.NODE_FINALIZED, node.name, reason=reason)

    async def _instance_gone(self, node: NodeView) -> bool:
        """True when ``node`` is not Ready and the provider answers ``NodeClaimNotFoundError`` for
        its provider ID (Karpenter ``finalize``: ``cloudProvider.Get`` when the Node's Ready
        condition is not True). False for a Ready Node, a Node without a provider ID, without a
        provider, or when ``get`` answers the instance or fails otherwise (logged; the Node is
        drained as usual)."""
        if self.provider is None or node.ready or not node.provider_id:
            return False
        try:
            await self.provider.get(node.provider_id)
        except NodeClaimNotFoundError:
            return True
        except CloudProviderError as exc:
            log.warning("cannot tell whether the instance of a NotReady node is gone; draining it",
                        extra={**fields(node=node.raw), "error": exc, REPEAT_BY_ERROR: True})
        return False

    async def _volumes_detached(self, node: NodeView, claim: NodeClaimView | None, pods: list[PodView],
                                deadline: float | None, now: float) -> bool:
        """True when the drained Node may go: no VolumeAttachment of a drained pod's volume is left,
        or the terminationGracePeriod deadline has passed. Sets ``VolumesDetached`` and publishes
        ``AwaitingVolumeDetachment`` while waiting."""
        name = node.name
        try:
            attachments = [va for va in await self.kube.list("VolumeAttachment") if field_of(va, "spec", "nodeName") == name]
        except KubeAPIError as exc:  # e.g. an install whose RBAC predates the rule: do not hold the node forever
            log.warning("cannot list VolumeAttachments (%s); not waiting for volumes of Node %s", exc, name)
            attachments = []
        if attachments:
            kept = await self._undrained_volumes(name, pods, now)
            attachments = [va for va in attachments
                           if field_of(va, "spec", "source", "persistentVolumeName")
                           and va["spec"]["source"]["persistentVolumeName"] not in kept]
        if not attachments:
            await self._set_condition(claim, VOLUMES_DETACHED, "True")
            return True
        if deadline is not None and now >= deadline:
            await self._set_condition(claim, VOLUMES_DETACHED, "False", "TerminationGracePeriodElapsed")
            return True
        names = sorted(va["metadata"]["name"] for va in attachments)
        await self._publish(karpenter_events.node_awaiting_volume_detachment(node.raw, names))
        await self._set_condition(claim, VOLUMES_DETACHED, "Unknown", "AwaitingVolumeDetachment")
        self._wake_at(now + 5.0)
        return False

    async def _undrained_volumes(self, node: str, pods: list[PodView], now: float) -> set[str]:
        """PersistentVolume names of the claims of the pods on ``node`` that are not drained
        (mirror pods, pods tolerating the disrupted taint, pods stuck terminating); their
        attachments do not hold the node."""
        claims = {(p.namespace, claim) for p in pods if p.node_name == node
                  and (p.mirror or p.tolerates_disrupted_taint or p.stuck_terminating(now))
                  for claim in p.claim_names}
        if not claims:
            return set()
        pvcs = await self.kube.list("PersistentVolumeClaim")
        return {str(c["spec"]["volumeName"]) for c in pvcs
                if (c["metadata"].get("namespace") or "default", c["metadata"]["name"]) in claims
                and field_of(c, "spec", "volumeName")}

    async def _set_condition(self, claim: NodeClaimView | None, type_: str, status: str, reason: str = "") -> None:
        if claim is None:
            return
        current = await ignore_not_found(self.kube.get("NodeClaim", claim.name))
        if current is None:
            return
        conds = set_condition(status_conditions(current), type_, status,
                              iso(self.clock.now()), reason, reason)
        patch = patch_conditions(current, conds)
        if patch is not None:
            await self.kube.patch("NodeClaim", claim.name, patch, status=True)

    async def _deadline(self, node: NodeView, claim: NodeClaimView | None) -> float | None:
        """The drain deadline from the NodeClaim's ``terminationGracePeriod`` (epoch seconds), or
        None; recorded once as the ``karpenter.sh/nodeclaim-termination-timestamp`` annotation."""
        if claim is None:
            return None
        stamp = claim.annotations.get(ANNOTATION_TERMINATION_TIMESTAMP)
        if stamp:
            return parse_rfc3339(stamp)
        try:
            tgp = duration_seconds(claim.termination_grace_period or None)
        except ValueError:
            return None
        if tgp is None:
            return None
        start = parse_rfc3339(claim.deletion_timestamp or node.deletion_timestamp) \
            or self.clock.now()
        deadline = start + tgp
        try:
            await self.kube.patch("NodeClaim", claim.name, {"metadata": {"annotations": {ANNOTATION_TERMINATION_TIMESTAMP: iso(deadline)}}})
        except NotFoundError:
            return deadline
        await self._publish(karpenter_events.nodeclaim_termination_grace_period_expiring(claim.raw, iso(deadline)))
        return deadline
