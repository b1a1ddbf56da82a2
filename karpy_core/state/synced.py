"""Synced before acting: the one gate provisioning, disruption and garbage collection pass before
they decide anything.

A decision on a view that lacks objects the API server holds is a wrong decision: after an API
server restart the informer caches relist, and a pass on a cache that had dropped the NodeClaims
this process had just created planned the same pending pods again (issue 34: 52 NodeClaims for a
10-node workload). Karpenter's provisioner and disruption controller return early while
``state.Cluster.Synced`` is false (``pkg/controllers/provisioning/provisioner.go`` ``Schedule``:
"waiting on cluster sync"; ``pkg/controllers/disruption/controller.go`` ``Reconcile``; the
``karpenter_cluster_state_synced`` gauge). :class:`ClusterSync` is that check here:

* the view is synced when its source says so (:class:`SyncSource`: the informer cache,
  :meth:`karpy_core.kube.cache.CachedKubeClient.state_synced`: Nodes, NodeClaims, NodePools and
  pods listed since their watches last restarted, and no watch failing); a source that does not
  implement it (the in-memory cluster of ``karpy simulate`` and the tests) is always synced;
* and, with leader election, while this replica's lease is still its own
  (``leading``: :meth:`karpy_core.kube.leader.LeaderElector.holds_lease`): a leader frozen past
  its lease (SIGSTOP, a long GC pause) that resumes must not act before it notices it lost.

A pass that finds the gate closed does nothing, logs why (once per reason) and leaves the gauge
at 0; the next pass (the controllers' resync, or the wake-up of the relist's own events) tries
again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = ["ClusterSync", "SyncSource"]

log = logging.getLogger("karpy.state")


@runtime_checkable
class SyncSource(Protocol):
    """A client whose view can be behind the API server: ``state_synced()`` is ``(True, "")``
    when it holds every Node, NodeClaim, NodePool and pod the API server lists (plus what this
    process wrote since), else ``(False, reason)``."""

    def state_synced(self) -> tuple[bool, str]: ...


class ClusterSync:
    """Whether a pass may decide now (see the module docstring).

    Args:
        source: the client passes read from (synced when it is no :class:`SyncSource`).
        leading: returns False once this replica may no longer act as leader (None: always may).
    """

    def __init__(self, source: object = None, leading: Callable[[], bool] | None = None):
        self.source = source
        self.leading = leading
        self._said: dict[str, str] = {}
        """Controller name -> the last reason logged for it (each reason is logged once)."""

    def check(self) -> tuple[bool, str]:
        """``(True, "")`` when a pass may decide, else ``(False, why)``."""
        if self.leading is not None and not self.leading():
            return False, "the leader lease is no longer held (not renewed within the renew deadline)"
        if isinstance(self.source, SyncSource):
            return self.source.state_synced()
        return True, ""

    def synced(self) -> bool:
        """The ``karpenter_cluster_state_synced`` gauge's value (1 when True)."""
        return self.check()[0]

    def ready(self, controller: str) -> bool:
        """Whether ``controller`` may run a deciding pass now. When not, logs (once per reason and
        controller, Karpenter's "waiting on cluster sync") that the pass does nothing and why;
        the first synced pass after that logs that it resumes."""
        ok, why = self.check()
        if ok:
            if self._said.pop(controller, None) is not None:
                log.info("cluster state synced; deciding again", extra={"controller": controller})
            return True
        if self._said.get(controller) != why:
            self._said[controller] = why
            log.info("waiting on cluster sync; the pass does nothing", extra={"controller": controller, "reason": why})
        return False
