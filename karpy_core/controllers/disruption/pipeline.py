"""Commands validated side by side: the view a later command is planned on while earlier ones
wait out their validation delay (karpy's own; Karpenter validates one command at a time).

:func:`assume_executed` turns a snapshot and a decided command into the cluster as it will be
once the command is executed and its pods have moved: its candidates tainted
``karpenter.sh/disrupted:NoSchedule`` (no pod is placed there; they count against their
NodePools' disruption budgets as the nodes of an executed command do), its replacements in-flight
NodeClaims (no Node yet: a simulation never places a moved pod there), and its pods bound to the
nodes a scheduler over the nodes that stay puts them on (their room is taken). The disruption
controller plans the next command on that view, without the earlier commands' candidates nor the
nodes their pods go to (:attr:`AssumedView.held`), so two commands never share a candidate, a
replacement or a moved pod. Each command is still validated on the true snapshot at its own due
time (:meth:`~karpy_core.controllers.disruption.controller.Disruption._pass`).

Pure: no I/O, no clock; same inputs, same view.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from karpy_core.apis.labels import TAINT_DISRUPTED
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import SimulationContext, claim_capacity
from karpy_core.scheduling.pod import PodInfo
from karpy_core.state.cluster import ClusterSnapshot

__all__ = ["AssumedView", "assume_executed", "overlapping"]


@dataclass(frozen=True, slots=True)
class AssumedView:
    """The cluster once a command is executed (see the module docstring).

    Attributes:
        snapshot: the assumed cluster.
        held: node names the next command must not take: the command's candidates and the nodes
            its pods are assumed to move to.
        pods: ``ns/name`` of the pods the command moves.
    """

    snapshot: ClusterSnapshot
    held: frozenset[str]
    pods: frozenset[str]


def _tainted(raw: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    spec = out.setdefault("spec", {})
    taints = [t for t in spec.get("taints") or [] if t.get("key") != TAINT_DISRUPTED]
    spec["taints"] = [*taints, {"key": TAINT_DISRUPTED, "effect": "NoSchedule"}]
    return out


def _replacement(plan: DisruptionPlan, index: int) -> dict[str, Any]:
    from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan

    r = plan.replacements[index]
    obj = nodeclaim_from_plan(r)
    obj["metadata"]["name"] = f"{r.nodepool}-assumed-{plan.candidates[0].name}-{index}"
    obj["metadata"].pop("generateName", None)
    return obj


def assume_executed(snapshot: ClusterSnapshot, instance_types: dict[str, list[InstanceType]],
                    plan: DisruptionPlan) -> AssumedView | None:
    """``snapshot`` as it will be once ``plan`` is executed and its pods have moved.

    Args:
        snapshot: the cluster (true, or itself assumed after earlier commands).
        instance_types: NodePool name -> instance types (the simulation's templates).
        plan: the decided command (its candidates, pods and replacements as decided).

    Returns:
        The :class:`AssumedView`, or None when the command's pods cannot be given a place that
        agrees with it (a pod that fits nowhere, or a delete whose pods would need a new node):
        then no command is planned behind it.
    """
    names = {c.name for c in plan.candidates}
    present = {n.name for n in snapshot.node_views}
    if not names <= present:
        return None
    ctx = SimulationContext(snapshot, instance_types)
    pods: list[PodInfo] = []
    for c in plan.candidates:
        infos = ctx.pod_infos(c)
        if isinstance(infos, str):
            return None
        pods.extend(infos)
    moved = {p.key for p in pods}
    sched, uninitialized = ctx.scheduler(names, claim_capacity(plan.candidates), pods)
    results = sched.solve(pods)
    if results.errors or len(results.new_claims) > len(plan.replacements):
        return None
    dest = {key: node for key, node in results.existing.items() if node not in uninitialized}
    nodes = [_tainted(n.raw) if n.name in names else n for n in snapshot.node_views]
    claims: list[Any] = list(snapshot.nodeclaim_views)
    claims.extend(_replacement(plan, i) for i in range(len(plan.replacements)))
    out_pods: list[Any] = []
    for p in snapshot.pod_views:
        if p.key not in moved:
            out_pods.append(p)
        elif p.key in dest:  # else it goes to a replacement (or an in-flight node): no Node holds it yet
            raw = copy.deepcopy(p.raw)
            raw.setdefault("spec", {})["nodeName"] = dest[p.key]
            out_pods.append(raw)
    view = ClusterSnapshot(nodes, claims, snapshot.nodepool_views, out_pods, snapshot.daemonsets, snapshot.pdbs, snapshot.pvcs,
                           snapshot.pvs, snapshot.storage_classes, virtual_pods=[v.raw for v in snapshot.virtual_pod_views],
                           unserved=snapshot.unserved_nodepools)
    return AssumedView(view, frozenset(names) | frozenset(dest.values()), frozenset(moved))


def overlapping(plan: DisruptionPlan, held: Sequence[AssumedView]) -> str | None:
    """Why ``plan`` may not run beside the commands whose views are ``held`` (a candidate one of
    them disrupts or moves pods to, a pod one of them moves), or None when it may."""
    pods = {p.key for c in plan.candidates for p in c.pods}
    for view in held:
        taken = sorted(c.name for c in plan.candidates if c.name in view.held)
        if taken:
            return f"node {taken[0]} is a candidate of, or receives the pods of, a command before it"
        shared = sorted(pods & view.pods)
        if shared:
            return f"pod {shared[0]} is moved by a command before it"
    return None
