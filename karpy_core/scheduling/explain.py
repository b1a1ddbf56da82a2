"""Why a pod stays pending, and the smallest change that would let it schedule.

The reasons come from the scheduler's own checks (:func:`~karpy_core.scheduling.feasibility.check_claim`
on an empty probe NodeClaim of each NodePool, :func:`~karpy_core.scheduling.feasibility.check_node`
for each node) run against the state a run ended in; suggestions are picked by
:class:`~karpy_core.scheduling.infeasible.InfeasibleKind`.
"""

from __future__ import annotations

import numpy as np

from karpy_core.apis.labels import is_well_known
from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.feasibility import Fit, check_node
from karpy_core.scheduling.infeasible import Infeasible, InfeasibleKind, PoolVerdict, Unschedulable
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.requirements import Operator, Requirements
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.taints import untolerated
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable
from karpy_core.utils.quantity import format_quantity

__all__ = ["why", "pool_verdict", "explain_detail", "suggest"]

K = InfeasibleKind
NO_NODEPOOL = Infeasible(K.NO_NODEPOOL, "no NodePool is available to launch capacity (none defined, or none Ready)")
TAKEN = Infeasible(K.TAKEN_BY_PLAN, "fits a new node, but a planned node took the capacity first")


def pool_verdict(run: SchedulingRun, template: NodePoolTemplate, pod: PodInfo) -> PoolVerdict:
    """Why ``pod`` cannot open a new NodeClaim of ``template`` in ``run``'s current state."""
    probe = ClaimState.fresh(run.tables[template.name], -1, "hostname-placeholder-explain")
    att = run.attempts(pod)[-1]
    result = run.check(probe, pod, att, run.verdict(pod, att), explain=True)
    if isinstance(result, Fit) and run.ledger.active and run.ledger.settle(probe.table, probe.hostname, result.requirements,
                                                                          result.mask) is None:
        return PoolVerdict(template.name, (_exhausted(run, probe.table),))
    if isinstance(result, Fit):
        return PoolVerdict(template.name, (TAKEN,))
    offers = [o for it in probe.table.types for o in it.offerings if o.reserved]
    if offers and not any(o.available for o in offers) and any(r.kind is K.NO_OFFERING for r in result):
        # the only offerings left were capacity reservations, and the cloud says they are full
        result = tuple(_exhausted(run, probe.table) if r.kind is K.NO_OFFERING else r for r in result)
    return PoolVerdict(template.name, result)


def _exhausted(run: SchedulingRun, table: TypeTable) -> Infeasible:
    ids = sorted({o.reservation_id for it in table.types for o in it.offerings if o.reserved and o.reservation_id})
    left = ", ".join(f"{rid} ({run.ledger.remaining(rid)} left)" for rid in ids)
    return Infeasible(K.RESERVATION_EXHAUSTED, f"no offering is left but capacity reservations, and every compatible "
                                               f"capacity reservation is used up: {left}")


def why(run: SchedulingRun, pod: PodInfo) -> Unschedulable:
    """Why ``pod`` fits no existing node, planned claim or NodePool: per NodePool (by weight) the
    first check that failed, then the NodePools that are not Ready, then those left out because
    the cloud provider does not serve their NodeClass kind."""
    if pod.unsupported:
        return Unschedulable(general=Infeasible(K.UNSUPPORTED, pod.unsupported))
    pools = [pool_verdict(run, t, pod) for t in run.inputs.templates]
    pools += [PoolVerdict(name, (Infeasible(K.NODEPOOL_NOT_READY, f"not Ready ({reason})"),))
              for name, reason in sorted(run.inputs.unready.items())]
    pools += [PoolVerdict(name, (Infeasible(K.NODEPOOL_NOT_SERVED, f"left out: {reason}"),))
              for name, reason in sorted(run.inputs.unserved.items())]
    if not pools:
        return Unschedulable(general=NO_NODEPOOL)
    return Unschedulable(tuple(pools))


def explain_detail(run: SchedulingRun, pod: PodInfo) -> list[str]:
    """Lines for ``karpy simulate --explain``: per NodePool, the check that ruled the pod out
    and the smallest change that would let it schedule there, where one exists; then each
    existing node and why it does not take the pod."""
    lines = []
    for t in run.inputs.templates:
        verdict = pool_verdict(run, t, pod)
        weight = f"weight {t.weight}" if (t.raw.get("spec") or {}).get("weight") is not None else "no weight"
        lines.append(f"NodePool {t.name} ({weight}): {verdict.message}")
        fix = suggest(run, t, pod, verdict)
        if fix:
            lines.append(f"    smallest change: {fix}")
    for name, reason in sorted(run.inputs.unready.items()):
        lines.append(f"NodePool {name}: not Ready ({reason}); it launches nothing until it is")
    for name, reason in sorted(run.inputs.unserved.items()):
        lines.append(f"NodePool {name}: left out: {reason}")
    for use in run.usage:
        rejected = check_node(use, pod, explain=True)
        lines.append(f"node {use.node.name}: {rejected.detail if rejected is not None else 'fits'}")
    return lines


def suggest(run: SchedulingRun, template: NodePoolTemplate, pod: PodInfo, verdict: PoolVerdict) -> str:
    """The smallest change to the pod or NodePool that removes the first reason (in order) that
    has one, or "" when none is known."""
    for kind in verdict.kinds:
        fix = _suggest(run, template, pod, kind)
        if fix:
            return fix
    return ""


def _suggest(run: SchedulingRun, template: NodePoolTemplate, pod: PodInfo, kind: InfeasibleKind) -> str:
    table = run.tables[template.name]
    if kind is K.UNTOLERATED_TAINT:
        taint = untolerated(template.taints, pod.tolerations)
        if taint is None:
            return ""
        val = f", value: {taint.value}" if taint.value else ""
        return (f"add the toleration {{key: {taint.key}, operator: {'Equal' if taint.value else 'Exists'}{val}, "
                f"effect: {taint.effect}}} to the pod, or drop that taint from the NodePool")
    if kind is K.NODE_LIMIT:
        return "raise the NodePool's limits.nodes"
    if kind is K.LIMIT_EXCEEDED:
        rem = run.remaining[template.name] or {}
        parts = []
        for res, left in sorted(rem.items()):
            i = table.index.get(res)
            if res == "nodes" or i is None or not template.limits:
                continue
            vec = table.vector(pod.requests)
            fit = (table.free >= vec).all(axis=1) if vec is not None else np.zeros(len(table.types), dtype=bool)
            if fit.any():
                need = int(table.capacity[fit, i].min()) - left
                if need > 0:
                    parts.append(f"limits.{res} to at least {format_quantity(res, template.limits[res] + need)}")
        return "raise " + " and ".join(parts) if parts else ""
    if kind is K.INCOMPATIBLE_REQUIREMENTS:
        for term in pod.requirement_terms:
            for r in term:
                mine = template.requirements.get(r.key)
                if mine is not None and not mine.intersects(r):
                    allowed = ", ".join(sorted(mine.values)) if not mine.complement else mine.describe()
                    return (f"the NodePool allows {r.key} in [{allowed}]: select one of those, or add the pod's "
                            f"value to the NodePool's {r.key} requirement")
                if mine is None and r.operator() not in (Operator.NOT_IN, Operator.DOES_NOT_EXIST) and not is_well_known(r.key):
                    label = f"{r.key}={next(iter(r.values))}" if r.operator() == Operator.IN and len(r.values) == 1 else r.key
                    return f"add the label {label} to the NodePool's template labels (or drop it from the pod)"
        return ""
    if kind is K.NO_MATCHING_TYPE:
        for term in pod.requirement_terms:
            for r in term:
                rest = Requirements({k: v for k, v in term.by_key.items() if k != r.key})
                if table.compat_mask(rest).any():
                    return f"relax the pod's requirement {r.describe()}: no instance type of the NodePool has it"
        return ""
    return _FIXED.get(kind, "")


_FIXED = {
    K.NO_ROOM: "lower the pod's requests below the largest type's allocatable, or allow larger instance types in the NodePool",
    K.RESOURCE_NOT_OFFERED: "allow instance types that provide that resource (e.g. GPU types) in the NodePool's requirements",
    K.RESERVATION_EXHAUSTED: "allow karpenter.sh/capacity-type on-demand (or spot) in the NodePool, or enlarge the "
                             "capacity reservation",
    K.MIN_VALUES: "lower minValues, or widen the requirement so enough distinct values remain",
    K.TOPOLOGY_SPREAD: "allow more zones/domains in the NodePool, or raise maxSkew / use whenUnsatisfiable: ScheduleAnyway",
    K.POD_ANTI_AFFINITY: "allow more domains (zones) in the NodePool, or make the anti-affinity preferred",
    K.POD_AFFINITY: "start the pods the affinity term selects first, or make the affinity preferred",
}
