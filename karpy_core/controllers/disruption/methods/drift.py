"""Drift as a disruption method (Karpenter ``drift.go``): the first ``Drifted`` candidate (empty ones
first, then oldest) within the ``Drifted`` budget whose pods all fit elsewhere, with as many
replacements as they need. Whether a NodeClaim is drifted is decided elsewhere
(:mod:`karpy_core.controllers.nodeclaim.drift`, read through ``Candidate.drifted``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import (
    DecisionDetails,
    DecisionKind,
    DisruptionMethod,
    DisruptionReason,
    Invalidation,
)
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import evaluate_steps
from karpy_core.utils.steps import Steps, run_steps

__all__ = ["Drift", "DriftRules", "keep_over_budget"]


def keep_over_budget(ctx: PassContext, cand: Candidate, method: DisruptionMethod) -> None:
    """Record that drifted ``cand`` stays because the ``Drifted`` budget allows no more."""
    ctx.keep(cand, method, DecisionKind.BUDGET_EXHAUSTED,
             f"drifted ({cand.drifted}), but the disruption budget allows 0 more ({DisruptionReason.DRIFTED})",
             DecisionDetails(budget=DisruptionReason.DRIFTED))


class DriftRules:
    """What both drift methods (:class:`Drift`, :class:`~.static_drift.StaticDrift`) ask of a
    candidate besides its plan: may a blocked node go, and does the command still apply."""

    __slots__ = ()

    def may_disrupt_blocked(self, cand: Candidate) -> bool:
        """Only when ``cand``'s NodeClaim sets ``spec.terminationGracePeriod``: drift may then
        go through do-not-disrupt and PDBs, as in Karpenter."""
        return bool(cand.nodeclaim.termination_grace_period)

    def still_applies(self, cand: Candidate, now: float) -> Invalidation | None:
        """None while ``cand`` is drifted, else why the drift command no longer applies."""
        if cand.drifted:
            return None
        return Invalidation(DecisionKind.NO_LONGER_DRIFTED, f"{cand.name} is no longer drifted")


@dataclass(frozen=True, slots=True)
class Drift(DriftRules):
    """Replace one drifted node (see the module docstring)."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.DRIFT
    reason: ClassVar[DisruptionReason] = DisruptionReason.DRIFTED
    consolidation: ClassVar[bool] = False

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The first drifted candidate whose pods fit elsewhere, with its replacements, or None
        (static NodePools' nodes are :class:`~.static_drift.StaticDrift`'s)."""
        return run_steps(self.steps(ctx, candidates, budgets))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute`, yielding before each simulation (see :class:`~.base.Method`)."""
        drifted = sorted((c for c in candidates if c.drifted and not c.pool.static
                          and (not c.blocked or self.may_disrupt_blocked(c))),
                         key=lambda c: (not c.empty, c.created, c.name))
        for c in drifted:
            if budgets.left(c, self.reason) < 1:
                keep_over_budget(ctx, c, self.name)
                continue
            ev = yield from evaluate_steps(ctx.sim, [c], consolidation=False)
            if ev.problem is not None:
                ctx.keep(c, self.name, ev.problem.kind, f"drifted, but {ev.why}")
                continue
            budgets.take(c, self.reason)
            return DisruptionPlan(self.name, self.reason, [c], ev.replacements, c.price or 0.0, ev.replacement_price)
        return None

    def needs_resimulation(self, cands: Sequence[Candidate]) -> bool:
        """Unless every node is empty now."""
        return not all(c.empty for c in cands)
