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
not rely on the order of the nodes' names nor on first fit.

Pure: no I/O; same inputs, same placement.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_INSTANCE_TYPE
from karpy_core.scheduling.claim import PlannedNodeClaim
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.resources import Resources, subtract
from karpy_core.scheduling.scheduler import Scheduler, SchedulingResults

__all__ = ["MAX_ORDERINGS", "SCORED_REPLAYS", "kube_schedule", "moved_pods_fit", "replacement_node"]

MAX_ORDERINGS = 12
"""Most node orders :func:`moved_pods_fit` replays (the replacements first and last, each in up
to 6 orders among themselves: every order for up to 3 replacements)."""

SCORED_REPLAYS: tuple[str, ...] = ("first", "last")
"""The tie-breaks :func:`moved_pods_fit` replays kube-scheduler's scoring placement with."""


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
                   replacements: Sequence[PlannedNodeClaim], *, first_fit: bool = True) -> tuple[str, str] | None:
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

    Returns:
        None when every replay places every pod, else ``(pod key, why)`` for the first pod one
        leaves pending.
    """
    if not pods:
        return None
    orders = list(itertools.islice(itertools.permutations(range(len(replacements))), MAX_ORDERINGS // 2))
    runs: list[tuple[str, tuple[int, ...], str | None]] = \
        [(p, o, None) for p in ("\x00", "\U0010ffff") for o in orders] if first_fit else []
    if any(any(c.hard for c in p.spread) or p.affinity for p in pods):
        runs += [("\x00", orders[0], ties) for ties in SCORED_REPLAYS]
    for prefix, order, scoring in runs:
        extra = [replacement_node(replacements[i], f"{prefix}replacement-{rank:03d}") for rank, i in enumerate(order)]
        results = kube_schedule([*nodes, *extra], bound, pods, scoring=scoring)
        if results.errors:
            key = sorted(results.errors)[0]
            how = ("by kube-scheduler's default scores (LeastAllocated, BalancedAllocation, PodTopologySpread)"
                   if scoring else "first fit by node name")
            return key, f"no node that stays or replaces takes it when the moved pods are placed {how}"
    return None
