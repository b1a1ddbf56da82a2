"""Node termination: drain a deleted managed Node, then let it go.

A Node that karpy manages carries the ``karpenter.sh/termination`` finalizer. When it is deleted
(by the NodeClaim finalizer, or by a user), this controller (Karpenter
``pkg/controllers/node/termination``, ``terminator/terminator.go``, ``eviction.go``):

1. deletes its NodeClaim, if that still exists, so the instance is terminated afterwards;
2. taints it ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands on it;
3. drains it in tiers, each tier gone before the next starts: non-critical non-DaemonSet pods,
   non-critical DaemonSet pods, critical (``priorityClassName`` ``system-cluster-critical`` or
   ``system-node-critical``) non-DaemonSet pods, critical DaemonSet pods. Pods are evicted through
   the Eviction API (PodDisruptionBudgets are enforced by the API server, whose 429 or 500
   leaves the pod to be retried after a per-pod exponential backoff of 100 ms doubling up to
   10 s, as Karpenter's eviction queue does); ``karpenter.sh/do-not-disrupt`` pods are left alone;
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
from typing import Any

from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.labels import (
    ANNOTATION_DO_NOT_DISRUPT,
    ANNOTATION_TERMINATION_TIMESTAMP,
    FINALIZER_TERMINATION,
    LABEL_EXCLUDE_BALANCERS,
    TAINT_DISRUPTED,
)
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import DRAINED, VOLUMES_DETACHED, patch_conditions, set_condition
from karpy_core.errors import KubeAPIError
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import reconciling
from karpy_core.scheduling.taints import Taint, parse_tolerations, untolerated
from karpy_core.utils.clock import Clock, RealClock, iso
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = ["NodeTermination", "TerminationEvent", "drain_tier", "tolerates_disrupted_taint", "is_stuck_terminating",
           "CRITICAL_PRIORITY_CLASSES"]

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
"""Priority classes whose pods drain last (Karpenter ``terminator.go``)."""
DEFAULT_POD_GRACE_SECONDS = 30
"""``terminationGracePeriodSeconds`` of a pod that sets none (Kubernetes default)."""
EVICTION_BACKOFF_BASE_SECONDS = 0.1
EVICTION_BACKOFF_MAX_SECONDS = 10.0
"""A refused eviction is retried after ``min(0.1 * 2**(failures - 1), 10)`` seconds: Karpenter's
rate-limited eviction queue (``terminator/eviction.go``), "429 (PDB) means backoff from 100 ms to
10 s" in the project's Karpenter notes (reference/karpenter-core-behaviour.md). As there, a 404
(pod gone) or 409 (UID precondition: a new pod under the name) counts as done."""

log = logging.getLogger(__name__)


@dataclass
class TerminationEvent:
    """``kind`` is evict, evict-blocked, drain-wait (do-not-disrupt pod waiting), force-delete
    (past the terminationGracePeriod deadline) or node-finalized."""

    kind: str
    node: str
    pod: str = ""
    reason: str = ""


def _owned_by_daemonset(pod: dict[str, Any]) -> bool:
    return any(r.get("kind") == "DaemonSet" for r in pod["metadata"].get("ownerReferences") or ())


def _is_mirror(pod: dict[str, Any]) -> bool:
    return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})


_DISRUPTED_NO_SCHEDULE = (Taint(TAINT_DISRUPTED, "", "NoSchedule"),)


def tolerates_disrupted_taint(pod: dict[str, Any]) -> bool:
    """True when ``pod`` tolerates ``karpenter.sh/disrupted:NoSchedule`` (a keyed toleration, or
    an ``operator: Exists`` one without key); such pods are not drained (Karpenter
    ``pkg/utils/pod/scheduling.go``, ``ToleratesDisruptedNoScheduleTaint``)."""
    tolerations = parse_tolerations((pod.get("spec") or {}).get("tolerations"))
    return untolerated(_DISRUPTED_NO_SCHEDULE, tolerations) is None


STUCK_TERMINATING_SECONDS = 60.0
"""A pod whose ``deletionTimestamp`` (deletion time + its grace period, as the API server sets it)
is more than this many seconds past is stuck terminating (its kubelet is gone) and no longer holds
the drain: Karpenter ``pkg/utils/pod/scheduling.go`` ``IsStuckTerminating`` (one minute)."""


def is_stuck_terminating(pod: dict[str, Any], now: float) -> bool:
    """True when ``pod`` is being deleted and its ``deletionTimestamp`` lies more than
    :data:`STUCK_TERMINATING_SECONDS` before ``now`` (epoch seconds)."""
    deleted = parse_rfc3339(pod["metadata"].get("deletionTimestamp"))
    return deleted is not None and now - deleted > STUCK_TERMINATING_SECONDS


def drain_tier(pod: dict[str, Any]) -> int:
    """Drain order of ``pod``: 0 non-critical non-DaemonSet, 1 non-critical DaemonSet, 2 critical
    non-DaemonSet, 3 critical DaemonSet."""
    critical = (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES
    return 2 * int(critical) + int(_owned_by_daemonset(pod))


def _key(pod: dict[str, Any]) -> str:
    return f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"


class NodeTermination:
    """Drains deleted Nodes that carry karpy's finalizer (see the module docstring).

    Sets the NodeClaim's ``Drained`` condition (Unknown/``Draining`` while draining, True once
    drained) and publishes Karpenter's termination events to ``events`` when given: ``Evicted``
    and ``Disrupted`` on pods, ``FailedDraining`` and ``TerminationGracePeriodExpiring`` on the
    Node, ``TerminationGracePeriodExpiring`` on the NodeClaim when its deadline is set.
    """

    name = "node.termination"

    def __init__(self, *, kube: KubeClient, clock: Clock | None = None, events: EventRecorder | None = None):
        self.kube = kube
        self.events = events
        self.clock = clock or RealClock()
        self.wake: float | None = None
        """The earliest future forced-deletion or eviction-retry time seen by the last pass (the
        simulator jumps its clock there; the operator wakes the controller then), or None."""
        self._backoff: dict[str, tuple[int, float]] = {}
        """Pod uid (or ``ns/name``) -> (refused evictions so far, epoch seconds of the next try)."""

    async def _publish(self, *evs: Event) -> None:
        if self.events is not None:
            await self.events.record(*evs)

    async def _set_drained(self, claim: dict[str, Any] | None, drained: bool) -> None:
        """``Drained``: Unknown/``Draining`` when first seen draining, True when drained."""
        if claim is None or (not drained and any(c.get("type") == DRAINED for c in (claim.get("status") or {}).get("conditions") or [])):
            return
        conds = set_condition(list((claim.get("status") or {}).get("conditions") or []), DRAINED, "True" if drained else "Unknown",
                              iso(self.clock.now()), "" if drained else "Draining", "" if drained else "Draining")
        patch = patch_conditions(claim, conds)
        if patch is None:
            return
        try:
            await self.kube.patch("NodeClaim", claim["metadata"]["name"], patch, status=True)
        except KubeAPIError as exc:
            if exc.status != 404:
                raise

    def _wake_at(self, t: float) -> None:
        self.wake = t if self.wake is None else min(self.wake, t)

    async def reconcile(self) -> list[TerminationEvent]:
        events: list[TerminationEvent] = []
        self.wake = None
        nodes = [
            n for n in await self.kube.list("Node")
            if n["metadata"].get("deletionTimestamp") and FINALIZER_TERMINATION in (n["metadata"].get("finalizers") or [])
        ]
        if not nodes:
            return events
        pods = await self.kube.list("Pod")
        live = {p["metadata"].get("uid") or _key(p) for p in pods}
        self._backoff = {k: v for k, v in self._backoff.items() if k in live}
        claims = await self.kube.list("NodeClaim")
        for node in nodes:
            with reconciling("Node", node["metadata"]["name"]):
                events.extend(await self._terminate(node, pods, claims))
        return events

    async def _terminate(self, node: dict[str, Any], pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[TerminationEvent]:  # noqa: C901
        name = node["metadata"]["name"]
        events: list[TerminationEvent] = []
        now = self.clock.now()
        pid = (node.get("spec") or {}).get("providerID")
        for c in claims:
            if pid and (c.get("status") or {}).get("providerID") == pid and not c["metadata"].get("deletionTimestamp"):
                try:
                    await self.kube.delete("NodeClaim", c["metadata"]["name"])
                except KubeAPIError as exc:
                    if exc.status != 404:
                        raise
        taints = list((node.get("spec") or {}).get("taints") or [])
        tainted = any(t.get("key") == TAINT_DISRUPTED for t in taints)
        excluded = (node["metadata"].get("labels") or {}).get(LABEL_EXCLUDE_BALANCERS) == "karpenter"
        if not tainted or not excluded:
            # as Karpenter's terminator: the disrupted taint, and out of external load balancers
            # before the drain (their targets would otherwise point at a node going away)
            patch: dict[str, Any] = {"metadata": {"labels": {LABEL_EXCLUDE_BALANCERS: "karpenter"}}}
            if not tainted:
                patch["spec"] = {"taints": [*taints, {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}]}
            await self.kube.patch("Node", name, patch)
            # Karpenter's line and keys (node/termination/terminator/terminator.go)
            log.info("tainted node", extra={"taint.Key": TAINT_DISRUPTED, "taint.Value": "", "taint.Effect": "NoSchedule"})
        on_node = [
            p for p in pods
            if (p.get("spec") or {}).get("nodeName") == name
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not _is_mirror(p)
            and not tolerates_disrupted_taint(p)
            and not is_stuck_terminating(p, now)
        ]
        deadline = await self._deadline(node, claims)
        claim: dict[str, Any] | None = next((c for c in claims if pid and (c.get("status") or {}).get("providerID") == pid), None)
        await self._set_drained(claim, False)
        ann = (claim["metadata"].get("annotations") or {}) if claim is not None else {}
        if ann.get(ANNOTATION_TERMINATION_TIMESTAMP):
            await self._publish(karpenter_events.node_termination_grace_period_expiring(node, ann[ANNOTATION_TERMINATION_TIMESTAMP]))
        elif deadline is not None:
            await self._publish(karpenter_events.node_termination_grace_period_expiring(node, iso(deadline)))
        evict_reason = "Forceful Termination"
        for c in ((claim or {}).get("status") or {}).get("conditions") or []:
            if c.get("type") == "DisruptionReason" and c.get("status") == "True" and c.get("reason"):
                evict_reason = str(c["reason"])
        remaining = list(on_node)
        tiers = sorted({drain_tier(p) for p in on_node})
        current = [p for p in on_node if tiers and drain_tier(p) == tiers[0]]
        for pod in sorted(current, key=lambda p: (p["metadata"].get("namespace", ""), p["metadata"]["name"])):
            key = f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"
            grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
            grace = DEFAULT_POD_GRACE_SECONDS if grace is None else int(grace)
            if deadline is not None and now < deadline - grace:
                self._wake_at(deadline - grace)
            bkey = pod["metadata"].get("uid") or key
            failures, retry_at = self._backoff.get(bkey, (0, now))
            try:
                if deadline is not None and now >= deadline - grace:
                    await self.kube.delete("Pod", pod["metadata"]["name"], pod["metadata"].get("namespace"))
                    events.append(TerminationEvent("force-delete", name, key, reason="terminationGracePeriod deadline"))
                    await self._publish(karpenter_events.disrupt_pod_delete(pod, max(int(deadline - now), 1), iso(deadline)))
                    continue
                if pod["metadata"].get("deletionTimestamp"):
                    continue
                if (pod["metadata"].get("annotations") or {}).get(ANNOTATION_DO_NOT_DISRUPT) == "true":
                    events.append(TerminationEvent("drain-wait", name, key, reason="karpenter.sh/do-not-disrupt"))
                    continue
                if now < retry_at:
                    self._wake_at(retry_at)
                    continue
                await self.kube.evict(pod)
                self._backoff.pop(bkey, None)
                events.append(TerminationEvent("evict", name, key))
                await self._publish(karpenter_events.evict_pod(pod, evict_reason))
            except KubeAPIError as exc:
                if exc.status in (404, 409):  # gone, or replaced under the same name (UID precondition)
                    continue
                if exc.status in (429, 500):  # a PDB refused it (or several PDBs select the pod)
                    failures += 1
                    retry_at = now + min(EVICTION_BACKOFF_BASE_SECONDS * 2 ** (failures - 1), EVICTION_BACKOFF_MAX_SECONDS)
                    self._backoff[bkey] = (failures, retry_at)
                    self._wake_at(retry_at)
                    reason = "; ".join([str(exc), *[c for c in exc.causes if c]])
                    events.append(TerminationEvent("evict-blocked", name, key, reason=reason))
                    why = "eviction does not support multiple PDBs" if exc.status == 500 else "evicting pod violates a PDB"
                    await self._publish(karpenter_events.node_failed_to_drain(node, f"{why} (Pod={key})"))
                    continue
                raise
        if remaining:
            left = await self.kube.list("Pod")
            still = {(p["metadata"].get("namespace"), p["metadata"]["name"]) for p in left
                     if (p.get("spec") or {}).get("nodeName") == name}
            waiting = [p for p in remaining if (p["metadata"].get("namespace"), p["metadata"]["name"]) in still]
            if waiting:
                await self._publish(karpenter_events.node_failed_to_drain(node, f"{len(waiting)} pods are waiting to be evicted"))
                return events
        await self._set_drained(claim, True)
        if not await self._volumes_detached(node, claim, pods, deadline, now):
            return events
        finalizers = [f for f in node["metadata"].get("finalizers") or [] if f != FINALIZER_TERMINATION]
        try:
            await self.kube.patch("Node", name, {"metadata": {"finalizers": finalizers}})
        except KubeAPIError as exc:
            if exc.status != 404:
                raise
        log.info("deleted node")  # Karpenter's line (node/termination/controller.go)
        events.append(TerminationEvent("node-finalized", name))
        return events

    async def _volumes_detached(self, node: dict[str, Any], claim: dict[str, Any] | None, pods: list[dict[str, Any]],
                                deadline: float | None, now: float) -> bool:
        """True when the drained Node may go: no VolumeAttachment of a drained pod's volume is left,
        or the terminationGracePeriod deadline has passed. Sets ``VolumesDetached`` and publishes
        ``AwaitingVolumeDetachment`` while waiting."""
        name = node["metadata"]["name"]
        try:
            attachments = [va for va in await self.kube.list("VolumeAttachment") if (va.get("spec") or {}).get("nodeName") == name]
        except KubeAPIError as exc:  # e.g. an install whose RBAC predates the rule: do not hold the node forever
            log.warning("cannot list VolumeAttachments (%s); not waiting for volumes of Node %s", exc, name)
            attachments = []
        if attachments:
            kept = await self._undrained_volumes(name, pods, now)
            attachments = [va for va in attachments
                           if ((va.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
                           and va["spec"]["source"]["persistentVolumeName"] not in kept]
        if not attachments:
            await self._set_condition(claim, VOLUMES_DETACHED, "True")
            return True
        if deadline is not None and now >= deadline:
            await self._set_condition(claim, VOLUMES_DETACHED, "False", "TerminationGracePeriodElapsed")
            return True
        await self._publish(karpenter_events.node_awaiting_volume_detachment(node, sorted(va["metadata"]["name"] for va in attachments)))
        await self._set_condition(claim, VOLUMES_DETACHED, "Unknown", "AwaitingVolumeDetachment")
        self._wake_at(now + 5.0)
        return False

    async def _undrained_volumes(self, node: str, pods: list[dict[str, Any]], now: float) -> set[str]:
        """PersistentVolume names of the claims of the pods on ``node`` that are not drained
        (mirror pods, pods tolerating the disrupted taint, pods stuck terminating); their
        attachments do not hold the node."""
        claims = {(p["metadata"].get("namespace") or "default", v["persistentVolumeClaim"]["claimName"])
                  for p in pods if (p.get("spec") or {}).get("nodeName") == node
                  and (_is_mirror(p) or tolerates_disrupted_taint(p) or is_stuck_terminating(p, now))
                  for v in (p.get("spec") or {}).get("volumes") or [] if (v.get("persistentVolumeClaim") or {}).get("claimName")}
        if not claims:
            return set()
        pvcs = await self.kube.list("PersistentVolumeClaim")
        return {str(c["spec"]["volumeName"]) for c in pvcs
                if (c["metadata"].get("namespace") or "default", c["metadata"]["name"]) in claims
                and (c.get("spec") or {}).get("volumeName")}

    async def _set_condition(self, claim: dict[str, Any] | None, type_: str, status: str, reason: str = "") -> None:
        if claim is None:
            return
        try:
            current = await self.kube.get("NodeClaim", claim["metadata"]["name"])
        except KubeAPIError as exc:
            if exc.status == 404:
                return
            raise
        conds = set_condition(list((current.get("status") or {}).get("conditions") or []), type_, status,
                              iso(self.clock.now()), reason, reason)
        patch = patch_conditions(current, conds)
        if patch is not None:
            await self.kube.patch("NodeClaim", claim["metadata"]["name"], patch, status=True)

    async def _deadline(self, node: dict[str, Any], claims: list[dict[str, Any]]) -> float | None:
        """The drain deadline from the NodeClaim's ``terminationGracePeriod`` (epoch seconds), or
        None; recorded once as the ``karpenter.sh/nodeclaim-termination-timestamp`` annotation."""
        pid = (node.get("spec") or {}).get("providerID")
        claim = next((c for c in claims if pid and (c.get("status") or {}).get("providerID") == pid), None)
        if claim is None:
            return None
        ann = claim["metadata"].get("annotations") or {}
        if ann.get(ANNOTATION_TERMINATION_TIMESTAMP):
            return parse_rfc3339(ann[ANNOTATION_TERMINATION_TIMESTAMP])
        try:
            tgp = duration_seconds((claim.get("spec") or {}).get("terminationGracePeriod"))
        except ValueError:
            return None
        if tgp is None:
            return None
        start = parse_rfc3339(claim["metadata"].get("deletionTimestamp") or node["metadata"].get("deletionTimestamp")) or self.clock.now()
        deadline = start + tgp
        try:
            await self.kube.patch("NodeClaim", claim["metadata"]["name"],
                                  {"metadata": {"annotations": {ANNOTATION_TERMINATION_TIMESTAMP: iso(deadline)}}})
        except KubeAPIError as exc:
            if exc.status != 404:
                raise
            return deadline
        await self._publish(karpenter_events.nodeclaim_termination_grace_period_expiring(claim, iso(deadline)))
        return deadline
