"""Nominations: nodes that a recent provisioning pass chose for pending pods.

When the provisioner places pending pods on an existing node, or on a NodeClaim still in flight,
that node is *nominated* for a while: kube-scheduler has not bound the pods yet, so the node looks
empty, but it is about to be used. Disruption must not take a nominated node (Karpenter
``pkg/controllers/state/statenode.go``: ``Nominate``/``Nominated`` and ``ValidateNodeDisruptable``
"node is nominated for a pending pod"; ``pkg/controllers/disruption/validation.go`` re-checks it).

The window is ``max(2 x BATCH_MAX_DURATION, 10 s)`` = 20 s with Karpenter's defaults
(``statenode.go`` ``nominationWindow``); each pass that places pods on the node again extends it.
karpy also nominates the NodeClaims a pass creates, for the pods planned on them (Karpenter
reaches the same protection by re-running the provisioner every 10 s while pods are pending).

Names are node names for registered nodes and NodeClaim names for claims without a node, the
names the scheduler's :class:`~karpy_core.scheduling.scheduler.ExistingNode` carries.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["NOMINATION_WINDOW_SECONDS", "Nominations", "nomination_window"]

NOMINATION_WINDOW_SECONDS = 20.0
"""``max(2 x 10 s batch max, 10 s)``: Karpenter ``statenode.go`` ``nominationWindow`` with default options."""


def nomination_window(batch_max_seconds: float) -> float:
    """Seconds a nomination lasts: ``max(2 x batch_max_seconds, 10)`` (Karpenter ``nominationWindow``)."""
    return max(2.0 * batch_max_seconds, 10.0)


class Nominations:
    """Node/NodeClaim name -> time (epoch seconds) until which it is nominated.

    Args:
        window: seconds a nomination lasts (default :data:`NOMINATION_WINDOW_SECONDS`).
    """

    def __init__(self, window: float = NOMINATION_WINDOW_SECONDS):
        self.window = window
        self._until: dict[str, float] = {}

    def nominate(self, names: Iterable[str], now: float) -> None:
        """Nominate each name until ``now + window`` (extending an earlier nomination)."""
        until = now + self.window
        for name in names:
            self._until[name] = max(until, self._until.get(name, until))

    def active(self, now: float) -> dict[str, float]:
        """The nominations still running at ``now`` (name -> until); expired ones are forgotten."""
        self._until = {n: t for n, t in self._until.items() if t > now}
        return dict(self._until)
