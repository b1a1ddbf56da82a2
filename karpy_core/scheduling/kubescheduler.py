"""kube-scheduler's placement of pending pods, as karpy models it: one function the simulator's
kube-scheduler stand-in (:class:`~karpy_core.sim.kubelet.KubeSchedulerSimulator`) binds pods with,
and the disruption planner replays to check that the pods a consolidation moves land where it
counted on (:func:`replacement_node`, :func:`moved_pods_fit`).

The model is karpy's scheduler over existing nodes only (no NodePool: kube-scheduler launches
nothing): pods in queue order (cpu, then memory, descending; then creation time and name), each
on its ``status.nominatedNodeName`` first, else the first node by name that passes taints, node
affinity, free resources, host ports, topology spread and pod (anti-)affinity. A pod no node
takes stays pending. That first fit is the stand-in's default. With ``scoring``, each pod goes
instead to the node that takes it with the highest kube-scheduler default score
(:mod:`~karpy_core.scheduling.scoring`: ``NodeResourcesFit`` ``LeastAllocated``,
``NodeResourcesBalancedAllocation``, ``PodTopologySpread``), ties to the first or the last node by
name (kube-scheduler draws among ties at random). :func:`moved_pods_fit` replays both, so it does
not rely on the order of the nodes' names nor on first fit. Nor on the order the pods come in:
a drain evicts its pods by name, a few at a time as their PodDisruptionBudgets allow, and
kube-scheduler binds each replacement pod as it is created, so the small pods may take the room
the simulation kept for a large one; :func:`moved_pods_fit` replays that arrival too
(:func:`arrival_schedule`: in the drain's waves, and smallest first).

Pure: no I/O; same inputs, same placement.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Mapping, Sequence

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_INSTANCE_TYPE
from karpy_core.scheduling.claim import PlannedNodeClaim
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.resources import Resources, subtract
from karpy_core.scheduling.scheduler import Scheduler, SchedulingResults

__all__ = ["ARRIVAL_REPLAYS", "MAX_ORDERINGS", "SCORED_REPLAYS", "arrival_schedule", "kube_schedule", "moved_pods_fit",
           "replacement_node"]

MAX_ORDERINGS = 12
"""Most node orders :func:`moved_pods_fit` replays (the replacements first and last, each in up
to 6 orders among themselves: every order for up to 3 replacements)."""

SCORED_REPLAYS: tuple[str, ...] = ("first", "last")
"""The tie-breaks :func:`moved_pods_fit` replays kube-scheduler's scoring placement with."""

ARRIVAL_REPLAYS: tuple[str | None, ...] = (None, "first")
"""The placements :func:`moved_pods_fit` replays with the moved pods arriving in the drain's waves
(else smallest first; :func:`arrival_schedule`): first fit by name (None) and kube-scheduler's
scores, ties to the first. Empty: no arrival replay (before issue 36's undone36 fix)."""


def kube_schedule(nodes: Sequence[ExistingNode], bound: Sequence[PodInfo], pods: Sequence[PodInfo],
                  nominated: Mapping[str, str] | None = None, *, scoring: str | None = None) -> SchedulingResults:
    """Place ``pods`` as kube-scheduler would (see the module docstring).

    Args:
        nodes: the Ready, schedulable nodes (``requested``: the pods bound there, internal units).
        bound: the pods bound to ``nodes`` (for host ports, topology spread and pod affinity).
        pods: the pending pods.
        nominated: pod key (``namespace/name``) -> its ``status.nominatedNodeName`` (tried
            first, the room of the pods nominated to a node held for them, KEP-1923).
        scoring: None: first fit by node name. ``"first"``/``"last"``: each pod on the node
            kube-scheduler's default scores rank highest (:mod:`~karpy_core.scheduling.scoring`),
            ties to the first/last node by name (kube-scheduler draws among ties at random).

    Returns:
        ``existing``: pod key -> node name for the pods bound; ``errors``: the pods left
        pending, with why. ``new_claims`` is always empty.
    """
    ready = [n if n.initialized else ExistingNode(n.name, n.labels, n.taints, n.allocatable, n.requested, n.nodepool,
                                                  True, (), n.host_ports) for n in nodes]
    return Scheduler([], ready, bound_pods=bound, nominated=dict(nominated or {}), node_scoring=scoring).solve(pods)


def _shape(pod: PodInfo) -> tuple[int, int]:
    return pod.requests.get("cpu", 0), pod.requests.get("memory", 0)


def arrival_schedule(nodes: Sequence[ExistingNode], bound: Sequence[PodInfo], pods: Sequence[PodInfo], *,
                     scoring: str | None = None, waves: Sequence[Sequence[PodInfo]] | None = None) -> SchedulingResults:
    """Place ``pods`` as they come to kube-scheduler one group after another: each group is
    placed by :func:`kube_schedule` (``scoring`` as there; one scheduling cycle, its pods in
    kube-scheduler's queue order) on ``nodes`` as the groups before left them (their pods bound:
    their requests added to their node's ``requested``, their copies joining ``bound`` for
    topology and host ports).

    The groups are ``waves`` when given (the drain's: :func:`~karpy_core.controllers.disruption.simulation.drain_waves`),
    else the pods smallest first, one group per shape (cpu, then memory, ascending).

    Why: a drain evicts its pods by name, a few at a time as their PodDisruptionBudgets allow,
    and kube-scheduler binds each replacement pod when it is created, not all of them at once
    the largest first as :func:`kube_schedule`'s queue order does. A large pod of the first wave
    takes the emptiest node, the small pods of the next spread over the emptiest left
    (``LeastAllocated``), and a large pod of a later wave finds no node with its room left
    (issue 36: a replace moved six 1-core and four 2-core pods, PDBs letting four and one go at a
    time; the fourth 2-core pod stayed pending with 1.75 cores free on the best node). Smallest
    first is the order that breaks up the most room before the large pods come.

    Args:
        nodes, bound: as :func:`kube_schedule`.
        pods: the pods that will arrive (those of no wave come last, as one group).
        scoring: as :func:`kube_schedule`.
        waves: the groups in the order they come; None: smallest first.

    Returns:
        ``existing``: pod key -> node for every pod bound; ``errors``: the pods left pending
        (of every group: a later group is still placed around them).
    """
    if waves is None:
        order = sorted(pods, key=lambda p: (_shape(p), p.key))
        groups = [list(g) for _, g in itertools.groupby(order, key=_shape)]
    else:
        keys = {p.key for p in pods}
        groups = [[p for p in w if p.key in keys] for w in waves]
        seen = {p.key for g in groups for p in g}
        groups.append([p for p in pods if p.key not in seen])
    now = list(nodes)
    held = list(bound)
    out = SchedulingResults([], {}, {})
    for batch in groups:
        if not batch:
            continue
        results = kube_schedule(now, held, batch, scoring=scoring)
        out.existing.update(results.existing)
        out.errors.update(results.errors)
        if not results.existing:
            continue
        by_key = {p.key: p for p in batch}
        grown: dict[str, Resources] = {}
        for key, node in results.existing.items():
            pod = by_key[key]
            acc = grown.setdefault(node, {})
            for r, v in pod.requests.items():
                acc[r] = acc.get(r, 0) + v
            placed = copy.copy(pod)
            placed.node_name = node
            held.append(placed)
        now = [n if n.name not in grown else dataclasses.replace(
            n, requested={r: n.requested.get(r, 0) + grown[n.name].get(r, 0) for r in {*n.requested, *grown[n.name]}})
            for n in now]
    return out


def replacement_node(claim: PlannedNodeClaim, name: str) -> ExistingNode:
    """The Node a planned replacement ``claim`` becomes, at its smallest: every resource at the
    least any of its instance types allocates (each type holds all the claim's pods, so this
    does too), the claim's DaemonSet overhead requested, labels from its requirements (the first
    value of each ``In``; the cheapest type's name), the NodePool's taints; named ``name``.
    Whatever type launches, the real node has at least this room."""
    alloc: Resources = {}
    for i, it in enumerate(claim.instance_types):
        for r, v in it.allocatable.items():
            alloc[r] = v if i == 0 else min(alloc.get(r, 0), v)
        if i:
            for r in [r for r in alloc if r not in it.allocatable]:
                alloc[r] = 0
    pods: Resources = {}
    for p in claim.pods:
        for r, v in p.requests.items():
            pods[r] = pods.get(r, 0) + v
    overhead = {r: v for r, v in subtract(claim.requests, pods).items() if v > 0}
    labels = dict(claim.template.labels)
    for sel in claim.requirements.to_selectors():
        values = sel.get("values")
        if sel.get("operator") == "In" and isinstance(values, list) and values:
            labels[str(sel["key"])] = str(sorted(str(v) for v in values)[0])
    if claim.instance_types:
        labels[LABEL_INSTANCE_TYPE] = claim.instance_types[0].name
    labels[LABEL_HOSTNAME] = name
    return ExistingNode(name, labels, claim.template.taints, alloc, overhead, claim.nodepool, True)


def moved_pods_fit(nodes: Sequence[ExistingNode], bound: Sequence[PodInfo], pods: Sequence[PodInfo],
                   replacements: Sequence[PlannedNodeClaim], *, first_fit: bool = True,
                   waves: Sequence[Sequence[PodInfo]] | None = None) -> tuple[str, str] | None:
    """Do ``pods`` (those a disruption command evicts) all land when kube-scheduler places them
    (:func:`kube_schedule`) on ``nodes`` (the initialized nodes that stay) plus the command's
    ``replacements`` (:func:`replacement_node`), whatever the replacements' names? The names
    (``generateName``) decide where the replacements fall in the first fit's node order, so the
    placement is replayed with the replacements before every other node and after them, each
    time in every order among themselves (at most :data:`MAX_ORDERINGS` replays in all).

    kube-scheduler places by score, not by name: the placement is also replayed by its default
    scores (:func:`kube_schedule` with ``scoring``), ties to the first node and to the last (the
    replacements first by name: they win ties, then lose them). Pods other moved pods crowd out
    under scoring - a zone-spread pod whose zone's room the scores gave to others, refused by
    its spread everywhere else - are found there (issue 36: on the real control plane the
    consolidations the next launch undid all moved such pods; :data:`SCORED_REPLAYS`). Only
    for commands that move a pod with a hard topology spread or required pod (anti-)affinity:
    those are the pods another pod's room strands, first fit or not; a command of plain pods
    alone keeps the first fit replays (a multi-node delete at 300 nodes of
    ``benchmarks/consolidation_pass.py``'s baseline, 250 plain pods, spent 1 s in the scoring
    replays).
    ``first_fit=False`` replays the scoring placement only (for a caller that placed the pods
    by first fit itself).

    The pods come to kube-scheduler as the drain evicts them, not all at once: the placement is
    also replayed with them arriving (:func:`arrival_schedule`; first fit and by scores,
    :data:`ARRIVAL_REPLAYS`, the replacements first by name) in the drain's ``waves`` when given
    (:func:`~karpy_core.controllers.disruption.simulation.drain_waves`), else smallest first
    (both: a 35-node multi-node replace of ``tests/controllers/test_consolidation_pinned.py``'s
    mixed cluster cost 12.2 CPU seconds instead of 2.5, and smallest first refused it; the
    waves alone: 3.6, and it stands), when
    the order can change it: the moved pods have more than one shape (cpu and memory requests),
    or one has a hard topology spread or required pod (anti-)affinity. Pods of one shape and no
    such rule land in any order as long as they land at all (each takes one of a node's slots
    for that shape).

    Returns:
        None when every replay places every pod, else ``(pod key, why)`` for the first pod one
        leaves pending.
    """
    if not pods:
        return None
    orders = list(itertools.islice(itertools.permutations(range(len(replacements))), MAX_ORDERINGS // 2))
    runs: list[tuple[str, tuple[int, ...], str | None]] = \
        [(p, o, None) for p in ("\x00", "\U0010ffff") for o in orders] if first_fit else []
    constrained = any(any(c.hard for c in p.spread) or p.affinity for p in pods)
    if constrained:
        runs += [("\x00", orders[0], ties) for ties in SCORED_REPLAYS]
    arrivals: list[tuple[str | None, Sequence[Sequence[PodInfo]] | None]] = []
    if constrained or len({_shape(p) for p in pods}) > 1:
        arrivals = [(how, w) for w in ([waves] if waves else [None]) for how in ARRIVAL_REPLAYS]
    for prefix, order, scoring in runs:
        extra = [replacement_node(replacements[i], f"{prefix}replacement-{rank:03d}") for rank, i in enumerate(order)]
        results = kube_schedule([*nodes, *extra], bound, pods, scoring=scoring)
        if results.errors:
            return sorted(results.errors)[0], _misfit(scoring, "")
    if arrivals:
        extra = [replacement_node(replacements[i], f"\x00replacement-{rank:03d}") for rank, i in enumerate(orders[0])]
        for scoring, groups in arrivals:
            results = arrival_schedule([*nodes, *extra], bound, pods, scoring=scoring, waves=groups)
            if results.errors:
                when = " as the drain sends them" if groups is not None else " as they arrive, smallest first"
                return sorted(results.errors)[0], _misfit(scoring, when)
    return None


def _misfit(scoring: str | None, when: str) -> str:
    how = ("by kube-scheduler's default scores (LeastAllocated, BalancedAllocation, PodTopologySpread)"
           if scoring else "first fit by node name")
    return f"no node that stays or replaces takes it when the moved pods are placed{when} {how}"
