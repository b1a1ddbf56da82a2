"""Garbage collection both ways (Karpenter ``pkg/controllers/nodeclaim/garbagecollection``):

* **leaked instances** (:func:`garbage_collect`): an instance the provider lists (so: owned by
  karpy for this cluster - untagged or unsigned instances are never listed and never touched)
  whose providerID is on no NodeClaim, launched more than ``min_age`` seconds ago (30 s, Karpenter
  AWS ``garbagecollection/controller.go``: a launch may not have been recorded yet), is terminated
  through the provider and its Node deleted. An unclaimed instance GC leaves alone is reported
  with the reason (log line and the ``skipped`` map): ``no-creation-time`` (the provider gave
  none, so its age is unknown), ``too-young`` (within ``min_age``) or ``launch-in-progress`` (the
  NodeClaim it names exists and has no providerID yet: its create may still adopt it);
* **orphaned NodeClaims** (:func:`collect_orphaned_nodeclaims`): a registered NodeClaim whose
  instance the provider no longer lists, and whose Node is missing or not Ready, is deleted (its
  finalizer then cleans up), so pods move to capacity that exists.

Generic over :class:`~karpy_core.cloudprovider.provider.CloudProvider`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.base import Wake
from karpy_core.errors import NodeClaimNotFoundError, ignore_not_found
from karpy_core.logs import fields
from karpy_core.state.synced import ClusterSync
from karpy_core.state.views import NodeClaimView, NodeView

if TYPE_CHECKING:
    from karpy_core.cloudprovider.provider import CloudProvider
    from karpy_core.kube.events import EventRecorder
    from karpy_core.kube.port import KubeClient
    from karpy_core.observability import Metrics
    from karpy_core.utils.clock import Clock

__all__ = ["GC_MIN_AGE_SECONDS", "SKIP_REASONS", "garbage_collect", "collect_orphaned_nodeclaims", "GarbageCollection"]

log = logging.getLogger("karpy.gc")

GC_MIN_AGE_SECONDS = 30.0
"""Seconds an unclaimed instance must have lived before GC terminates it (Karpenter AWS
``pkg/controllers/nodeclaim/garbagecollection/controller.go``: ``time.Second*30``)."""
SKIP_REASONS = ("no-creation-time", "too-young", "launch-in-progress")
"""Why :func:`garbage_collect` leaves an unclaimed instance alone (see the module docstring)."""


async def garbage_collect(
    kube: KubeClient, provider: CloudProvider, clock: Clock, *, min_age: float = GC_MIN_AGE_SECONDS,
    skipped: dict[str, str] | None = None, dry_run: bool = False,
) -> list[str]:
    """One GC pass; returns the providerIDs terminated (with ``dry_run``: those it would
    terminate, logged as ``dry run: would garbage collect leaked instance``, the provider and the
    API server not asked to delete anything).

    Args:
        min_age: seconds (see :data:`GC_MIN_AGE_SECONDS`).
        skipped: filled with providerID -> reason (:data:`SKIP_REASONS`) for every unclaimed
            instance left alone, each also logged (warning for ``no-creation-time``, else info).

    Raises: whatever the provider raises other than NodeClaimNotFoundError.
    """
    claims = [NodeClaimView.of(nc) for nc in await kube.list("NodeClaim")]
    claimed = {nc.provider_id for nc in claims}
    launching = {nc.name for nc in claims if not nc.provider_id}
    now = clock.now()
    done = []
    for cloud in await provider.list():
        pid = cloud.status.provider_id
        if not pid or pid in claimed:
            continue
        created = cloud.metadata.creation_timestamp
        reason = None
        if created is None:
            reason = "no-creation-time"
        elif now - created.timestamp() < min_age:
            reason = "too-young"
        elif cloud.metadata.name and cloud.metadata.name in launching:
            reason = "launch-in-progress"
        if reason is not None:
            if skipped is not None:
                skipped[pid] = reason
            (log.warning if reason == "no-creation-time" else log.info)(
                "garbage collection leaves an unclaimed instance alone",
                extra=fields(nodeclaim=cloud.metadata.name or None, provider_id=pid, reason=reason))
            continue
        if dry_run:
            log.info("dry run: would garbage collect leaked instance", extra=fields(provider_id=pid, dryRun=True))
            done.append(pid)
            continue
        try:
            await provider.delete(cloud)
        except NodeClaimNotFoundError:
            pass  # terminated (or, for a provider that refuses, reported by the provider)
        log.info("garbage collected leaked instance", extra=fields(provider_id=pid))
        done.append(pid)
        for node in map(NodeView.of, await kube.list("Node")):
            if node.provider_id == pid:
                await ignore_not_found(kube.delete("Node", node.name))
    return done


async def collect_orphaned_nodeclaims(kube: KubeClient, provider: CloudProvider, *, dry_run: bool = False) -> list[str]:
    """Delete registered NodeClaims whose instance is gone and whose Node is missing or not Ready;
    returns their names (with ``dry_run``: logs ``dry run: would garbage collect nodeclaim`` instead
    of deleting)."""
    listed = {c.status.provider_id for c in await provider.list()}
    nodes = {n.provider_id: n for n in map(NodeView.of, await kube.list("Node"))}
    done = []
    for nc in map(NodeClaimView.of, await kube.list("NodeClaim")):
        pid = nc.provider_id
        if nc.deleting or not pid or pid in listed or not nc.is_true("Registered"):
            continue
        node = nodes.get(pid)
        if node is not None and node.ready:
            continue
        if dry_run:
            log.info("dry run: would garbage collect nodeclaim: its instance is gone",
                     extra=fields(nodeclaim=nc.name, provider_id=pid, dryRun=True))
            done.append(nc.name)
            continue
        await ignore_not_found(kube.delete("NodeClaim", nc.name))
        log.info("garbage collected nodeclaim: its instance is gone", extra=fields(nodeclaim=nc.name, provider_id=pid))
        done.append(nc.name)
    return done


class GarbageCollection:
    """Both collections, one pass per :meth:`reconcile` (the operator runs it every 2 minutes,
    first 10 s after starting). With ``events``/``metrics``, each NodeClaim deleted because its
    instance is gone gets a ``GarbageCollected`` event and counts in
    ``karpenter_nodeclaims_disrupted_total{reason="garbage_collected"}``."""

    name = "nodeclaim.garbagecollection"
    wakes_on: tuple[Wake, ...] = ()
    resync_seconds: float | None = 120.0
    first_delay = 10.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, events: EventRecorder | None = None,
                 metrics: Metrics | None = None, sync: ClusterSync | None = None):
        self.kube = kube
        self.sync = sync if sync is not None else ClusterSync(kube)
        """The synced-before-acting gate: an instance is never taken as leaked on a view that may
        lack its NodeClaim (:class:`~karpy_core.state.synced.ClusterSync`)."""
        self.dry_run = False
        """``karpy controller --dry-run``: what would be collected is logged, nothing deleted."""
        self.events = events
        self.metrics = metrics
        self.provider = provider
        self.clock = clock
        self.skipped: dict[str, str] = {}
        """providerID -> reason for each unclaimed instance the last pass left alone."""

    async def reconcile(self) -> tuple[list[str], list[str]]:
        """Returns (instances terminated, NodeClaims deleted); :attr:`skipped` says what was left and
        why. Nothing is done while the cluster state is not synced (logged)."""
        if not self.sync.ready(self.name):
            return [], []
        before = {c["metadata"]["name"]: c for c in await self.kube.list("NodeClaim")} if self.metrics is not None else {}
        skipped: dict[str, str] = {}
        leaked = await garbage_collect(self.kube, self.provider, self.clock, skipped=skipped, dry_run=self.dry_run)
        self.skipped = skipped
        orphaned = await collect_orphaned_nodeclaims(self.kube, self.provider, dry_run=self.dry_run)
        for name in orphaned:
            if self.metrics is not None and not self.dry_run:
                self.metrics.observe_disrupted("garbage_collected", before.get(name))
            if self.events is not None:
                await self.events.record(karpenter_events.garbage_collected(name))
        if leaked and not self.dry_run:
            log.info("terminated leaked instances", extra={"provider-ids": list(leaked)})
        return leaked, orphaned

    def next_due(self) -> float | None:
        """None: garbage collection runs every :attr:`resync_seconds`."""
        return None
