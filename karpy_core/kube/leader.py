"""Leader election on a ``coordination.k8s.io/v1`` Lease, so exactly one replica acts.

Behaviour follows client-go's ``leaderelection`` package:

* A candidate acquires the Lease when it does not exist, when it already holds it, or when the
  holder has not renewed it for ``lease_duration`` seconds **as observed locally** (the time this
  candidate last saw the record change), which tolerates clock skew between replicas.
* The leader renews every ``retry_period`` seconds; if it cannot renew for ``renew_deadline``
  seconds it stops leading (its work is cancelled) and :meth:`LeaderElector.run` returns, so the
  process can exit and restart as a follower.
* Writes use ``resourceVersion`` preconditions (PUT), so two candidates never both win a round.
* On a clean shutdown the leader releases the Lease (empty holder), so a successor takes over at
  once instead of after ``lease_duration``.

Defaults (15 s / 10 s / 2 s) are client-go's and Karpenter's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any

from karpy_core.errors import ConflictError, KubeAPIError, NotFoundError
from karpy_core.kube.port import KubeClient
from karpy_core.utils.clock import Clock

__all__ = ["LeaderElector"]

log = logging.getLogger(__name__)


def _micro(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for a Lease and runs work only while holding it.

    Args:
        kube: the cluster.
        name, namespace: the Lease.
        identity: this replica's unique id (pod name + random suffix).
        clock: time source.
        lease_duration: seconds a lease is valid without renewal.
        renew_deadline: seconds the leader keeps trying to renew before giving up.
        retry_period: seconds between attempts.

    Raises:
        ValueError: durations violate ``lease_duration > renew_deadline > retry_period > 0``.
    """

    def __init__(
        self,
        kube: KubeClient,
        *,
        name: str,
        namespace: str,
        identity: str,
        clock: Clock,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
    ):
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError("leader election needs lease_duration > renew_deadline > retry_period > 0")
        self.kube = kube
        self.name = name
        self.namespace = namespace
        self.identity = identity
        self.clock = clock
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._observed_rv = ""
        self._observed_at = 0.0
        self.is_leader = False
        self.renewed_at: float | None = None
        """Clock time of the last successful acquire or renewal while leading."""
        self.last_contact: float | None = None
        """Clock time of the last lease read or write the API server answered (any answer but a
        transport failure or a 5xx): a standby replica is healthy while this is recent."""

    async def _try(self) -> bool:
        now = self.clock.now()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "renewTime": _micro(now),
        }
        try:
            lease = await self.kube.get("Lease", self.name, self.namespace)
        except NotFoundError:
            try:
                await self.kube.create(
                    "Lease",
                    {"metadata": {"name": self.name, "namespace": self.namespace},
                     "spec": {**spec, "acquireTime": _micro(now), "leaseTransitions": 0}},
                )
            except ConflictError:
                return False
            self._observed_at = now
            return True
        meta = lease["metadata"]
        cur: dict[str, Any] = lease.get("spec") or {}
        if meta.get("resourceVersion") != self._observed_rv:
            self._observed_rv = meta.get("resourceVersion", "")
            self._observed_at = now
        holder = cur.get("holderIdentity") or ""
        duration = float(cur.get("leaseDurationSeconds") or self.lease_duration)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return False
        new_spec = dict(cur)
        new_spec.update(spec)
        if holder != self.identity:
            new_spec["acquireTime"] = _micro(now)
            new_spec["leaseTransitions"] = int(cur.get("leaseTransitions") or 0) + 1
        try:
            updated = await self.kube.replace("Lease", {**lease, "spec": new_spec})
        except ConflictError:
            return False
        self._observed_rv = updated["metadata"].get("resourceVersion", "")
        self._observed_at = now
        return True

    async def _attempt(self) -> bool:
        try:
            won = await self._try()
            self.last_contact = self.clock.now()
            return won
        except (TimeoutError, KubeAPIError, OSError) as exc:
            if isinstance(exc, KubeAPIError) and exc.status < 500:
                self.last_contact = self.clock.now()
            log.warning("leader election: lease update failed", extra={"lease": f"{self.namespace}/{self.name}", "error": exc})
            return False

    async def run(self, lead: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Wait to become leader, then run ``lead()`` until it returns or leadership is lost.

        Returns when ``lead`` finishes (the lease is released) or leadership is lost (``lead`` is
        cancelled). Cancelling ``run`` releases the lease.
        """
        while not await self._attempt():
            await self.clock.sleep(self.retry_period)
        self.is_leader = True
        self.renewed_at = self.clock.now()
        log.info("leader election: acquired the lease", extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
        work = asyncio.create_task(lead(), name="leader-work")
        try:
            while not work.done():
                sleeper = asyncio.ensure_future(self.clock.sleep(self.retry_period))
                try:
                    await asyncio.wait({work, sleeper}, return_when=asyncio.FIRST_COMPLETED)
                finally:  # also when run() is cancelled: the sleep must not outlive it
                    sleeper.cancel()
                if work.done():
                    break
                if await self._attempt():
                    self.renewed_at = self.clock.now()
                elif not self.holds_lease():
                    log.error("leader election: lost the lease",
                              extra={"lease": f"{self.namespace}/{self.name}", "identity": self.identity})
                    break
        finally:
            self.is_leader = False
            self.renewed_at = None
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
            await self.release()
        if work.done() and not work.cancelled() and work.exception() is not None:
            raise work.exception()  # type: ignore[misc]

    def holds_lease(self) -> bool:
        """Whether this replica may still act as leader: it leads and renewed the lease within the
        last ``renew_deadline`` seconds (by its own clock). A leader frozen past its lease (SIGSTOP,
        a stalled VM) resumes with this False at once, before its next renewal attempt has even
        been answered, so nothing it had queued acts (the controllers' synced-before-acting gate
        asks this, :class:`karpy_core.state.synced.ClusterSync`); a successor takes the lease only
        ``lease_duration`` seconds after the last renewal it saw, later than this turns False."""
        return self.is_leader and self.renewed_at is not None and self.clock.now() - self.renewed_at <= self.renew_deadline

    async def release(self) -> None:
        """Give the lease up if held (empty holder), so a successor need not wait it out."""
        try:
            lease = await self.kube.get("Lease", self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = dict(lease["spec"])
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            await self.kube.replace("Lease", {**lease, "spec": spec})
        except (TimeoutError, KubeAPIError, OSError) as exc:
            log.warning("leader election: releasing the lease failed", extra={"lease": f"{self.namespace}/{self.name}", "error": exc})
