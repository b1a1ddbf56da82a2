"""Undone consolidations: a command whose moved pods, once evicted, got a node launched for them.

A consolidation saves only if the pods it evicts land on the nodes that stay and on its
replacements. When kube-scheduler places them otherwise and one stays pending, the provisioner
launches a node for it: the saving is gone, and the next pass finds the same under-used nodes
and tries the same move again (issue 34: 216 commands in 8 simulated hours, one pod pending at
the end). The planner rules out the moves kube-scheduler cannot reproduce
(:func:`~karpy_core.scheduling.kubescheduler.moved_pods_fit`); this module is the backstop for
what it cannot foresee, and the protection of a command's replacements while its pods move:

* :meth:`UndoneMoves.executed` records each consolidation command with pods when it starts: its
  :meth:`~karpy_core.controllers.disruption.plan.DisruptionPlan.move_key`, the owners of the pods
  it moves (namespace, kind, name), the NodeClaims that exist then and its replacements;
* :meth:`UndoneMoves.observe`, each pass: a NodeClaim that did not exist then, is not one of the
  command's replacements (nor another watched command's: disruption launched it, not a pending
  pod) and was launched for a pending pod of one of those owners (the
  provisioner's pod nominations name it; without nominations, any new claim while such a pod is
  pending) makes the move *undone*, unless that owner has more pods than when the command started
  (a scale-up's new replicas are pending for their own reasons: a launch for them undoes
  nothing). Reported once (the controller logs it, counts
  ``karpenter_voluntary_disruption_undone_total{reason, consolidation_type}`` and the simulator's
  day summary counts it), and its key is kept with the workload's fingerprint
  (:func:`workload_fingerprint`);
* :meth:`UndoneMoves.avoid`: the keys of the undone moves while the workload and the offerings
  are as they were (any change forgets them all): the planner does not take those moves again
  (``plan_disruption(avoid=...)``);
* :meth:`UndoneMoves.protected`: the replacements of a command whose pods are still on their way
  (a candidate node still exists, or a pod of a moved owner is pending), as nominations: no
  method, emptiness included, takes them meanwhile (Karpenter ``ValidateNodeDisruptable``:
  "node is nominated for a pending pod").

A move is watched from its start until :data:`UNDONE_WINDOW` seconds after its candidates were
deleted (or the command dropped).

Pure bookkeeping: no I/O; ``now`` is passed in.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from karpy_core.controllers.disruption.decisions import DisruptionMethod, DisruptionReason
from karpy_core.controllers.disruption.plan import DisruptionPlan, pod_shape
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import PodView

__all__ = ["UNDONE_WINDOW", "Undone", "UndoneMoves", "workload_fingerprint"]

UNDONE_WINDOW = 600.0
"""Seconds after a command's candidates were deleted during which a launch for the pods it moved
counts as undoing it (the replacement timeout's 10 minutes: the drain, the rescheduling and a
provisioning batch all fit well within)."""

Owner = tuple[str, str, str]
"""(namespace, owner kind, owner name) of a pod."""


def _owner(p: PodView) -> Owner | None:
    info = p.try_info()
    if info is None or not info.owner_name:
        return None
    return info.namespace, info.owner_kind, info.owner_name


def workload_fingerprint(snapshot: ClusterSnapshot, signatures: Mapping[str, str]) -> str:
    """A digest of what decides whether a move can be made again: every pod's shape
    (:func:`~karpy_core.controllers.disruption.plan.pod_shape`: owner and requests, counted, not
    named, so replicas made again for evicted pods leave it unchanged), the NodePools (name and
    generation) and the instance types' offerings (``signatures``: NodePool -> digest of names,
    zones, capacity types, prices and availability)."""
    shapes: Counter[str] = Counter()
    for p in snapshot.pod_views:
        if p.deleting or p.terminal:
            continue
        info = p.try_info()
        if info is None:
            shapes[p.key] += 1
        elif info.owner_kind != "DaemonSet":
            shapes[pod_shape(info.namespace, info.owner_kind, info.owner_name, info.requests)] += 1
    h = hashlib.sha256()
    for shape, n in sorted(shapes.items()):
        h.update(f"{shape}x{n};".encode())
    for pool in snapshot.nodepool_views:
        h.update(f"p:{pool.name}:{pool.generation};".encode())
    for name, sig in sorted(signatures.items()):
        h.update(f"t:{name}={sig};".encode())
    return h.hexdigest()


def _owner_sizes(snapshot: ClusterSnapshot, owners: frozenset[Owner]) -> dict[Owner, int]:
    """owner -> its pods in ``snapshot`` that are neither deleting nor terminal (pending included)."""
    sizes: dict[Owner, int] = {}
    for p in snapshot.pod_views:
        if p.deleting or p.terminal:
            continue
        o = _owner(p)
        if o is not None and o in owners:
            sizes[o] = sizes.get(o, 0) + 1
    return sizes


@dataclass
class _Move:
    key: str
    method: DisruptionMethod
    reason: DisruptionReason
    nodes: list[str]
    owners: frozenset[Owner]
    known: frozenset[str]
    """NodeClaim names when the command started."""
    started: float
    sizes: Mapping[Owner, int] = field(default_factory=dict)
    """Pods of each moved owner when the command started (a launch for an owner that grew since
    may be for its new replicas: not evidence the move was undone)."""
    replacements: list[str] = field(default_factory=list)
    done_at: float | None = None
    """When its candidates were deleted or the command dropped."""


@dataclass(frozen=True, slots=True)
class Undone:
    """A move found undone.

    Attributes:
        key: its :meth:`~karpy_core.controllers.disruption.plan.DisruptionPlan.move_key`.
        method: the method that decided it.
        reason: its budget reason (``Underutilized``).
        nodes: the nodes it disrupted.
        nodeclaim: the NodeClaim launched for its pods.
        pods: the pending pods (``namespace/name``) of the moved owners that NodeClaim is for.
    """

    key: str
    method: DisruptionMethod
    reason: DisruptionReason
    nodes: tuple[str, ...]
    nodeclaim: str
    pods: tuple[str, ...]


class UndoneMoves:
    """The disruption controller's memory of the moves it made and of those undone (see the
    module docstring). ``window``: :data:`UNDONE_WINDOW` seconds."""

    def __init__(self, window: float = UNDONE_WINDOW):
        self.window = window
        self._moves: list[_Move] = []
        self._undone: dict[str, str] = {}
        """move key -> the workload fingerprint when it was undone."""

    def executed(self, plan: DisruptionPlan, snapshot: ClusterSnapshot, now: float) -> None:
        """Start watching ``plan`` (executed at ``now`` on ``snapshot``) when it is a consolidation
        that moves pods; others are ignored."""
        if plan.reason is not DisruptionReason.UNDERUTILIZED:
            return
        owners = frozenset(o for c in plan.candidates for p in c.pods if (o := _owner(p)) is not None)
        if not owners:
            return
        self._moves.append(_Move(plan.move_key(), plan.method, plan.reason, [c.name for c in plan.candidates], owners,
                                 frozenset(nc.name for nc in snapshot.nodeclaim_views), now,
                                 _owner_sizes(snapshot, owners)))

    def replacements_created(self, nodes: Iterable[str], claims: Iterable[str]) -> None:
        """The command disrupting ``nodes`` created the replacement NodeClaims ``claims``."""
        key = list(nodes)
        for m in reversed(self._moves):
            if m.nodes == key and m.done_at is None:
                m.replacements.extend(claims)
                return

    def finished(self, nodes: Iterable[str], now: float) -> None:
        """The command disrupting ``nodes`` deleted its candidates (or was dropped) at ``now``:
        watched :attr:`window` seconds more."""
        key = list(nodes)
        for m in reversed(self._moves):
            if m.nodes == key and m.done_at is None:
                m.done_at = now
                return

    def observe(self, snapshot: ClusterSnapshot, now: float, pods_of: Callable[[str], list[str]] | None,
                fingerprint: str | Callable[[], str]) -> list[Undone]:
        """The moves undone since the last call (see the module docstring), each reported once.

        Args:
            snapshot: the cluster now.
            now: seconds since the epoch.
            pods_of: NodeClaim name -> the pending pods (``namespace/name``) the provisioner
                launched or chose it for (its pod nominations,
                :meth:`~karpy_core.state.nominations.Nominations.pods_of`); None when unknown (any
                new NodeClaim while a pod of a moved owner is pending counts).
            fingerprint: :func:`workload_fingerprint` now (or a function computing it, called
                only when a move is found undone), kept with each undone move.
        """
        if not self._moves:
            return []
        pending: dict[Owner, list[str]] = {}
        for p in snapshot.pending_pod_views():
            o = _owner(p)
            if o is not None:
                pending.setdefault(o, []).append(p.key)
        out: list[Undone] = []
        keep: list[_Move] = []
        sizes: dict[Owner, int] | None = None
        # a replacement of any command is launched by disruption, not for a pending pod: a moved
        # pod that waits for another command's replacement launched nothing (undone36)
        replacements = {r for m in self._moves for r in m.replacements}
        for m in self._moves:
            if m.done_at is not None and now >= m.done_at + self.window:
                continue
            if sizes is None and any(o in pending for o in m.owners):
                sizes = _owner_sizes(snapshot, frozenset(pending))
            grown = {o for o in m.owners if sizes is not None and sizes.get(o, 0) > m.sizes.get(o, 0)}
            hit = self._launch_for(m, snapshot, {o: v for o, v in pending.items() if o not in grown}, pods_of, replacements)
            if hit is None:
                keep.append(m)
                continue
            if callable(fingerprint):
                fingerprint = fingerprint()
            self._undone[m.key] = fingerprint
            out.append(Undone(m.key, m.method, m.reason, tuple(m.nodes), hit[0], hit[1]))
        self._moves = keep
        return out

    @staticmethod
    def _launch_for(m: _Move, snapshot: ClusterSnapshot, pending: Mapping[Owner, list[str]],
                    pods_of: Callable[[str], list[str]] | None, replacements: set[str]) -> tuple[str, tuple[str, ...]] | None:
        waiting = sorted(k for o in m.owners for k in pending.get(o, ()))
        if not waiting:
            return None
        own = set(m.replacements) | replacements
        for nc in snapshot.nodeclaim_views:
            if nc.name in m.known or nc.name in own:
                continue
            if pods_of is None:
                return nc.name, tuple(waiting)
            mine = set(pods_of(nc.name))
            pods = tuple(k for k in waiting if k in mine)
            if pods:
                return nc.name, pods
        return None

    def avoid(self, fingerprint: str | Callable[[], str]) -> frozenset[str]:
        """The keys of the moves undone while the workload and offerings were ``fingerprint`` (or
        what a function returns, called only when some move was undone); those undone under
        another are forgotten."""
        if not self._undone:
            return frozenset()
        fp = fingerprint() if callable(fingerprint) else fingerprint
        self._undone = {k: f for k, f in self._undone.items() if f == fp}
        return frozenset(self._undone)

    def protected(self, snapshot: ClusterSnapshot, until: float) -> dict[str, float]:
        """NodeClaim name -> ``until`` for the replacements of each command whose pods are on
        their way: a candidate node still in ``snapshot``, or a pod of a moved owner pending."""
        nodes = {n.name for n in snapshot.node_views}
        pending = {o for p in snapshot.pending_pod_views() if (o := _owner(p)) is not None}
        out: dict[str, float] = {}
        for m in self._moves:
            if m.replacements and (any(n in nodes for n in m.nodes) or m.owners & pending):
                for r in m.replacements:
                    out[r] = until
        return out
