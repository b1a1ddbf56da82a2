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

Pods are nominated too: each pending pod a pass places on a NodeClaim still in flight (created,
launched or registered, not yet initialized) is nominated to that NodeClaim by name, and the
next pass keeps it there while it still fits (``Scheduler(nominated=...)``) instead of packing
the pending pods afresh over the claims' exact room, which left some without room and launched
a second claim for them (``karpy simulate`` of ``benchmarks/cost.py``'s mix6-120: 9 NodeClaims,
6.549 USD/hour, for a 5-claim plan of 5.409). A pod nomination has no time limit: it lasts while
the pod is pending and its NodeClaim is in flight (:func:`in_flight_targets`), so a boot longer
than the node window cannot undo it. Karpenter re-plans the pending pods over its in-flight
NodeClaims on every pass (it nominates nodes, ``NominateNodeForPod``, not pods to them).

Pod nominations are held in memory and also recorded on each NodeClaim the provisioner creates
(the ``karpy.sh/nominated-pods`` annotation): a restarted controller, or a new leader after a
failover, reads them back from the in-flight NodeClaims (:func:`recorded_targets`) and keeps
those pods where they were planned, instead of packing them afresh over the claims' exact room
(which launched a second NodeClaim for a pod whose first one was on its way: issue 34). A relist
changes nothing: the nominations are not tied to the informer cache.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from karpy_core.apis.labels import ANNOTATION_NOMINATED_PODS

if TYPE_CHECKING:
    from karpy_core.state.cluster import ClusterSnapshot

__all__ = ["NOMINATION_WINDOW_SECONDS", "Nominations", "in_flight_targets", "nomination_window", "recorded_targets"]

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
        self._pods: dict[str, str] = {}
        self._by_claim: tuple[dict[str, str], dict[str, list[str]], set[str]] | None = None
        """(the ``_pods`` dict grouped, NodeClaim -> its pods, NodeClaims whose list is sorted)."""

    def nominate(self, names: Iterable[str], now: float) -> None:
        """Nominate each name until ``now + window`` (extending an earlier nomination)."""
        until = now + self.window
        for name in names:
            self._until[name] = max(until, self._until.get(name, until))

    def active(self, now: float) -> dict[str, float]:
        """The nominations still running at ``now`` (name -> until); expired ones are forgotten."""
        self._until = {n: t for n, t in self._until.items() if t > now}
        return dict(self._until)

    def nominate_pods(self, targets: Mapping[str, str]) -> None:
        """Nominate pods (``namespace/name``) to NodeClaims (by name), replacing any earlier
        nomination of the same pods."""
        self._pods.update(targets)
        self._by_claim = None

    def planned_pods(self) -> dict[str, str]:
        """Every pod nomination: pod key (``namespace/name``) -> NodeClaim name (a copy)."""
        return dict(self._pods)

    def pods_of(self, nodeclaim: str) -> list[str]:
        """The pods (``namespace/name``, sorted) nominated to the NodeClaim ``nodeclaim``. The
        pods are grouped by NodeClaim once per change of the nominations (one scan for all
        NodeClaims: registering each of N NodeClaims scanned every nominated pod)."""
        if self._by_claim is None or self._by_claim[0] is not self._pods:
            grouped: dict[str, list[str]] = {}
            for k, v in self._pods.items():
                grouped.setdefault(v, []).append(k)
            self._by_claim = (self._pods, grouped, set())
        _, groups, done = self._by_claim
        if nodeclaim not in done:
            groups.get(nodeclaim, []).sort()
            done.add(nodeclaim)
        return list(groups.get(nodeclaim, ()))

    def claims_for(self, pending: Collection[str]) -> set[str]:
        """The NodeClaims (by name) some of the ``pending`` pods are nominated to; forgets nothing
        (the disruption controller's read: those claims are not taken while their pods are on
        their way)."""
        return {v for k, v in self._pods.items() if k in pending}

    def target_of(self, pod: str) -> str | None:
        """The NodeClaim the pod ``namespace/name`` is nominated to, or None (read only)."""
        return self._pods.get(pod)

    def pod_targets(self, pending: Collection[str]) -> dict[str, str]:
        """The pod nominations of the ``pending`` pods (pod key -> NodeClaim name); those of pods
        no longer pending are forgotten."""
        self._pods = {k: v for k, v in self._pods.items() if k in pending}
        return dict(self._pods)


def in_flight_targets(snapshot: ClusterSnapshot) -> dict[str, str]:
    """NodeClaims in flight, by the name the scheduler's ``ExistingNode`` carries for them ->
    NodeClaim name: every NodeClaim not deleting and not ``Initialized``, under its Node's name
    once the Node is registered (and not deleting), else under its own name. Pods nominated to
    any other NodeClaim are planned afresh."""
    out: dict[str, str] = {}
    for nc in snapshot.nodeclaim_views:
        if nc.deleting or nc.is_true("Initialized"):
            continue
        node = snapshot.node_by_provider_id(nc.provider_id) if nc.provider_id else None
        if node is None:
            out[nc.name] = nc.name
        elif not node.deleting and not node.initialized:
            out[node.name] = nc.name
    return out


def recorded_targets(snapshot: ClusterSnapshot, pending: Collection[str]) -> dict[str, str]:
    """The pod nominations recorded on the NodeClaims in flight (:func:`in_flight_targets`):
    pod key (``namespace/name``) -> NodeClaim name, for the ``pending`` pods each in-flight claim's
    ``karpy.sh/nominated-pods`` annotation names. A pod named by two claims (a planner's retry)
    goes to the one created first (then by name). Claims deleting or initialized record nothing."""
    claims = set(in_flight_targets(snapshot).values())
    out: dict[str, str] = {}
    ordered = sorted((nc for nc in snapshot.nodeclaim_views if nc.name in claims), key=lambda nc: (nc.created, nc.name))
    for nc in ordered:
        recorded = nc.annotations.get(ANNOTATION_NOMINATED_PODS)
        if not recorded:
            continue
        for pod in recorded.split(","):
            if pod in pending:
                out.setdefault(pod, nc.name)
    return out
