"""NodeClaim drift: the ``Drifted`` condition (Karpenter ``pkg/controllers/nodeclaim/disruption/drift.go``).

A launched NodeClaim is drifted when, checked in this order:

1. ``NodePoolDrifted``: its ``karpenter.sh/nodepool-hash`` annotation (same hash version) differs
   from the hash of its NodePool's template now;
2. ``RequirementsDrifted``: its Node's labels no longer satisfy the NodePool's requirements;
3. the cloud provider's ``is_drifted`` names a reason (AWS: ``AMIDrift``, ``SubnetDrift``,
   ``SecurityGroupDrift``, ``NodeClassDrift``; KakaoCloud: its own).

The controller sets ``Drifted=True`` with that reason (and clears it when the cause goes away);
the disruption controller's drift method replaces drifted nodes one budget at a time.

The provider is asked again for a claim every :data:`PROVIDER_RECHECK` seconds (Karpenter requeues
drift checks after 5 minutes), and at once when the claim's NodeClass changes (its
``resourceVersion``: a new AMI resolved into the status counts) or the claim is new to us. The
static checks are cheap and run every pass.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.apis.hashing import HASH_VERSION
from karpy_core.apis.labels import ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import NODECLASS_KINDS, Wake
from karpy_core.controllers.conditions import clear_condition, status_conditions
from karpy_core.errors import CloudProviderError, KubeAPIError, NotFoundError, ignore_kube_error
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import REPEAT_BY_ERROR, fields
from karpy_core.state.cluster import condition, is_true
from karpy_core.state.views import NodeClaimView, NodePoolView, NodeView, ViewCache
from karpy_core.utils.clock import Clock, iso

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["NodeClaimDrift", "DriftEvent", "DriftEventKind", "static_drift", "PROVIDER_RECHECK", "REASON_NODEPOOL_DRIFTED",
           "REASON_REQUIREMENTS_DRIFTED", "CONDITION_DRIFTED"]

log = logging.getLogger(__name__)

CONDITION_DRIFTED = "Drifted"
REASON_NODEPOOL_DRIFTED = "NodePoolDrifted"
REASON_REQUIREMENTS_DRIFTED = "RequirementsDrifted"
PROVIDER_RECHECK = 300.0
"""Seconds between two provider drift checks of one NodeClaim (Karpenter ``drift.go``: 5 minutes)."""


def static_drift(nodeclaim: NodeClaimView, node: NodeView | None, nodepool: NodePoolView) -> tuple[str, str]:
    """``(reason, message)`` of the NodeClaim's drift from its NodePool, ``("", "")`` when none.

    ``reason`` is ``NodePoolDrifted`` (template hash changed, same hash version) or
    ``RequirementsDrifted`` (the Node's labels, or the NodeClaim's when there is no Node yet, no
    longer satisfy the NodePool's requirements). The NodePool's hash and requirements are
    computed once per NodePool version (:attr:`NodePoolView.hash`, :attr:`NodePoolView.requirements`).
    """
    ann = nodeclaim.annotations
    have = ann.get(ANNOTATION_NODEPOOL_HASH)
    if have and ann.get(ANNOTATION_NODEPOOL_HASH_VERSION, HASH_VERSION) == HASH_VERSION:
        want = nodepool.hash
        if have != want:
            return REASON_NODEPOOL_DRIFTED, f"NodePool template changed (hash {have} -> {want})"
    reqs = nodepool.requirements
    if reqs is None:
        return "", ""
    why = reqs.matches_labels((node or nodeclaim).labels)
    return (REASON_REQUIREMENTS_DRIFTED, f"requirements no longer satisfied: {why}") if why else ("", "")


class DriftEventKind(StrEnum):
    """What the drift controller changed."""

    DRIFTED = "drifted"
    UNDRIFTED = "undrifted"


@dataclass
class DriftEvent:
    """``kind`` is ``drifted`` (condition set, ``reason`` the drift reason) or ``undrifted``
    (condition cleared)."""

    kind: DriftEventKind
    nodeclaim: str
    reason: str = ""
    message: str = ""


@dataclass
class _ProviderCheck:
    at: float
    nodeclass_version: str | None
    reason: str


class NodeClaimDrift:
    """Keeps each launched NodeClaim's ``Drifted`` condition true to its NodePool and its cloud.

    Args:
        kube: the cluster.
        provider: the cloud provider (``is_drifted``).
        clock: the clock (virtual in the simulator).
        recheck_seconds: seconds between provider checks of one claim (default 300).
        events: where the ``Drifted`` events go; None: not published.
        metrics: ``karpenter_nodeclaims_drifted_total``; None: not counted.
    """

    name = "nodeclaim.disruption.drift"
    wakes_on = (Wake.on("NodePool", NODECLASS_KINDS),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, recheck_seconds: float = PROVIDER_RECHECK,
                 events: EventRecorder | None = None, metrics: Metrics | None = None):
        self.kube = kube
        self.events = events
        self.metrics = metrics
        self.provider = provider
        self.clock = clock
        self.dry_run = False
        """``karpy controller --dry-run``: decided as usual against the dry-run client (its writes
        withheld and logged there); this controller's own lines say ``dry run:``."""
        self.recheck_seconds = recheck_seconds
        self._checks: dict[str, _ProviderCheck] = {}
        self._views = ViewCache()
        """NodeClaim views by version: the pydantic NodeClaim is validated once per version."""

    def next_due(self) -> float | None:
        """Epoch seconds of the next provider re-check, or None when nothing is tracked."""
        return min((c.at + self.recheck_seconds for c in self._checks.values()), default=None)

    async def _nodeclass_version(self, ref: Mapping[str, Any], memo: dict[tuple[str, str], str | None]) -> str | None:
        key = (str(ref.get("kind", "")), str(ref.get("name", "")))
        if key not in memo:
            try:
                obj = await self.kube.get(key[0], key[1])
                memo[key] = str(obj["metadata"].get("resourceVersion"))
            except (KubeAPIError, KeyError, ValueError):
                memo[key] = None  # missing or a kind this cluster does not serve: the timer still re-checks
        return memo[key]

    async def _provider_reason(self, nc: dict[str, Any], now: float, memo: dict[tuple[str, str], str | None]) -> str:
        name = nc["metadata"]["name"]
        version = await self._nodeclass_version(self._views.nodeclaim(nc).node_class_ref, memo)
        last = self._checks.get(name)
        if last is not None and last.nodeclass_version == version and now < last.at + self.recheck_seconds:
            return last.reason
        try:
            reason = await self.provider.is_drifted(self._views.nodeclaim(nc).model)
        except CloudProviderError as exc:
            log.warning("drift check failed; keeping the last answer",
                        extra={**fields(nodeclaim=name, error=exc), REPEAT_BY_ERROR: True})
            return last.reason if last is not None else ""
        self._checks[name] = _ProviderCheck(now, version, reason)
        return reason

    async def reconcile(self) -> list[DriftEvent]:
        """One pass over every NodeClaim; returns the conditions it changed.

        Raises:
            KubeAPIError: a read or status patch failed (other than the claim being gone); the
                operator logs it and retries on its next pass. Provider errors do not raise.
        """
        now = self.clock.now()
        pools = {v.name: v for v in map(self._views.nodepool, await self.kube.list("NodePool")) if v.valid}
        nodes = {v.provider_id: v for v in map(self._views.node, await self.kube.list("Node")) if v.provider_id}
        memo: dict[tuple[str, str], str | None] = {}
        events: list[DriftEvent] = []
        live: set[str] = set()
        for nc in await self.kube.list("NodeClaim"):
            name = nc["metadata"]["name"]
            if nc["metadata"].get("deletionTimestamp") or not is_true(nc, "Launched"):
                continue
            live.add(name)
            pool = pools.get(self._views.nodeclaim(nc).nodepool or "")
            reason, message = "", ""
            if pool is not None:
                nc = await self._restamp(nc, pool.hash)  # the hash: once per NodePool version
                claim = self._views.nodeclaim(nc)
                reason, message = static_drift(claim, nodes.get(claim.provider_id), pool)
            if not reason:
                reason = await self._provider_reason(nc, now, memo)
                message = f"the cloud provider reports {reason}" if reason else ""
            ev = await self._write(nc, reason, message, now)
            if ev is not None:
                events.append(ev)
        for gone in set(self._checks) - live:
            del self._checks[gone]
        self._views.sweep()
        await self._publish(events)
        return events

    async def _publish(self, events: list[DriftEvent]) -> None:
        """A ``Drifted`` event and a ``karpenter_nodeclaims_drifted_total`` count per newly drifted NodeClaim."""
        for ev in events:
            if ev.kind is not DriftEventKind.DRIFTED:
                continue
            if self.metrics is not None:
                claim = await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim))
                pool = (NodeClaimView.of(claim).nodepool or "") if claim is not None else ""
                self.metrics.nodeclaims_drifted.labels(type=ev.reason, nodepool=pool).inc()
            if self.events is not None:
                await self.events.record(karpenter_events.drifted(ev.nodeclaim, ev.message or ev.reason))

    async def _restamp(self, nc: dict[str, Any], pool_hash: str) -> dict[str, Any]:
        """``nc`` with its NodePool hash re-stamped when it carries another hash version (a
        NodeClaim Karpenter launched, after the switch to karpy; or one from an older karpy):
        the version becomes :data:`HASH_VERSION` and, unless the claim is already drifted, the
        hash becomes the NodePool's current one, so a later NodePool change is drift again.
        Karpenter's ``nodepool/hash`` controller does the same when its hash version changes
        (designs/drift-hash-versioning.md). A claim without a hash is left alone (no hash drift)."""
        ann = self._views.nodeclaim(nc).annotations
        if ANNOTATION_NODEPOOL_HASH not in ann or ann.get(ANNOTATION_NODEPOOL_HASH_VERSION) == HASH_VERSION:
            return nc
        patch = {ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION}
        if condition(nc, CONDITION_DRIFTED) is None:
            patch[ANNOTATION_NODEPOOL_HASH] = pool_hash
        try:
            updated = await self.kube.patch("NodeClaim", nc["metadata"]["name"], {"metadata": {"annotations": patch}})
        except NotFoundError:
            return nc
        log.info("dry run: would re-stamp nodepool hash" if self.dry_run else "re-stamped nodepool hash",
                 extra=fields(nodeclaim=nc, **{"hash-version": ann.get(ANNOTATION_NODEPOOL_HASH_VERSION)}))
        if self.dry_run:  # the patch was withheld: judge drift on the claim as re-stamped, as the acting controller does
            meta = {**nc["metadata"], "annotations": {**ann, **patch},  # its own view-cache key
                    "resourceVersion": f"{nc['metadata'].get('resourceVersion', '')}+restamped"}
            return {**nc, "metadata": meta}
        return updated

    async def _write(self, nc: dict[str, Any], reason: str, message: str, now: float) -> DriftEvent | None:
        name = nc["metadata"]["name"]
        cur = condition(nc, CONDITION_DRIFTED)
        if reason:
            if cur is not None and cur.get("status") == "True" and cur.get("reason") == reason:
                return None
            new = {"type": CONDITION_DRIFTED, "status": "True", "reason": reason, "message": message,
                   "lastTransitionTime": cur["lastTransitionTime"] if cur is not None and cur.get("status") == "True"
                   and cur.get("lastTransitionTime") else iso(now)}
            conds = [*clear_condition(status_conditions(nc), CONDITION_DRIFTED), new]
            kind = DriftEventKind.DRIFTED
        else:
            if cur is None:
                return None
            conds = clear_condition(status_conditions(nc), CONDITION_DRIFTED)
            kind = DriftEventKind.UNDRIFTED
        try:
            await self.kube.patch("NodeClaim", name, {"status": {"conditions": sorted(conds, key=lambda c: c["type"])}}, status=True)
        except NotFoundError:
            return None
        said = "nodeclaim drifted" if reason else "nodeclaim no longer drifted"
        log.info(f"dry run: {said} (condition not written)" if self.dry_run else said,
                 extra=fields(nodeclaim=name, reason=reason or None, detail=message or None))
        return DriftEvent(kind, name, reason, message)
