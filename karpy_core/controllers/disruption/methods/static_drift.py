"""Drift of static NodePools' nodes (Karpenter ``staticdrift.go``): each drifted node of a static
pool (``spec.replicas``) is replaced one-for-one by a fresh NodeClaim from the pool's template,
created first and Initialized before the drifted one is deleted, so the pool keeps its count.

Per pool, in name order: nothing while the pool has more NodeClaims (active + being disrupted)
than ``replicas`` (a scale-down is still under way); otherwise as many drifted nodes as the
``Drifted`` budget allows, capped so every NodeClaim of the pool plus the replacements stays
within ``limits.nodes`` (with ``limits.nodes == replicas`` no replacement fits: upstream waits
too). The first pool with something to replace gives the command. No scheduling simulation: a
replacement is the template, the pods move to it or wherever kube-scheduler puts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import (
    DecisionKind,
    DisruptionMethod,
    DisruptionReason,
)
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.methods.drift import DriftRules, keep_over_budget
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.static.capacity import node_limit, static_claim, static_counts
from karpy_core.scheduling.template import template_from_nodepool
from karpy_core.utils.steps import Steps, done

__all__ = ["StaticDrift"]


@dataclass(frozen=True, slots=True)
class StaticDrift(DriftRules):
    """Replace drifted nodes of static NodePools (see the module docstring); which blocked nodes
    may go and when a command no longer applies are :class:`DriftRules`', as for :class:`Drift`."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.STATIC_DRIFT
    reason: ClassVar[DisruptionReason] = DisruptionReason.DRIFTED
    consolidation: ClassVar[bool] = False

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """Up to the budget's worth of one static pool's drifted nodes with a replacement each, or None."""
        by_pool: dict[str, list[Candidate]] = {}
        for c in candidates:
            if c.drifted and c.pool.static and (not c.blocked or self.may_disrupt_blocked(c)):
                by_pool.setdefault(c.nodepool, []).append(c)
        snapshot = ctx.sim.snapshot
        for pool_name in sorted(by_pool):
            cands = sorted(by_pool[pool_name], key=lambda c: (not c.empty, c.created, c.name))
            pool = snapshot.nodepool(pool_name)
            if pool is None or pool.replicas is None:
                continue
            left = budgets.left(cands[0], self.reason)
            if left < 1:
                for c in cands:
                    keep_over_budget(ctx, c, self.name)
                continue
            counts = static_counts(snapshot, pool_name)
            if counts.active + counts.pending_disruption > pool.replicas:
                for c in cands:
                    ctx.keep(c, self.name, DecisionKind.STATIC_SCALING,
                             f"drifted, but NodePool {pool_name} has {counts.active + counts.pending_disruption} NodeClaims "
                             f"for {pool.replicas} replicas: waiting for the scale-down")
                continue
            n = min(left, len(cands))
            limit = node_limit(pool)
            if limit is not None:
                n = min(n, limit - counts.total)
            if n < 1:
                for c in cands:
                    ctx.keep(c, self.name, DecisionKind.NODE_LIMIT,
                             f"drifted, but a replacement would exceed limits.nodes ({limit}) of NodePool {pool_name}")
                continue
            plan = static_claim(template_from_nodepool(pool.raw, list(ctx.instance_types.get(pool_name, []))), ctx.sim.daemonsets)
            if plan is None:
                for c in cands:
                    ctx.keep(c, self.name, DecisionKind.POD_UNSCHEDULABLE,
                             "drifted, but no instance type satisfies the NodePool's requirements for a replacement")
                continue
            chosen = cands[:n]
            for c in chosen:
                budgets.take(c, self.reason)
            price = plan.cheapest_offering_price()
            return DisruptionPlan(self.name, self.reason, chosen, [plan] * len(chosen),
                                  sum(c.price or 0.0 for c in chosen), price * len(chosen))
        return None

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute` in one step (no simulation: nothing to cut; see :class:`~.base.Method`)."""
        return done(self.compute(ctx, candidates, budgets))

    def needs_resimulation(self, cands: Sequence[Candidate]) -> bool:
        """Never: the replacements are the pool's template, not a simulation's result."""
        return False
