"""Emptiness (Karpenter ``emptiness.go``): every empty, ``Consolidatable`` candidate within its
pool's ``Empty`` budget, deleted together, no simulation needed."""

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
from karpy_core.utils.steps import Steps, done

__all__ = ["Emptiness"]


@dataclass(frozen=True, slots=True)
class Emptiness:
    """Delete every empty node past ``consolidateAfter``, within the ``Empty`` budget (see the
    module docstring). Blocked nodes (do-not-disrupt, PDB) and static NodePools' nodes are left alone."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.EMPTINESS
    reason: ClassVar[DisruptionReason] = DisruptionReason.EMPTY
    consolidation: ClassVar[bool] = False

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The empty candidates that may go now, or None when there are none (see :class:`Method`)."""
        chosen: list[Candidate] = []
        for c in candidates:
            if c.blocked or not c.empty:
                continue
            if c.pool.static:
                ctx.keep(c, self.name, DecisionKind.STATIC_NODEPOOL, "empty, but of a static NodePool (spec.replicas): never emptied")
                continue
            if c.consolidatable_at is None:
                ctx.keep(c, self.name, DecisionKind.CONSOLIDATE_AFTER_NEVER, "empty, but consolidateAfter is Never")
                continue
            if ctx.now < c.consolidatable_at:
                ctx.keep(c, self.name, DecisionKind.NOT_CONSOLIDATABLE_YET,
                         f"empty, consolidatable in {c.consolidatable_at - ctx.now:.0f}s (consolidateAfter)")
                continue
            if budgets.left(c, self.reason) < 1:
                ctx.keep(c, self.name, DecisionKind.BUDGET_EXHAUSTED,
                         f"empty, but the NodePool's disruption budget allows 0 more ({self.reason})",
                         DecisionDetails(budget=self.reason))
                continue
            held = ctx.sim.buffer_hosts().get(c.name, 0)
            # Karpenter emptiness.go: a node hosting buffer pods is not empty; karpy lets it go
            # when the headroom fits on the nodes that stay (with every node chosen so far gone)
            if held and not ctx.sim.buffer_fits_without({*(x.name for x in chosen), c.name}):
                ctx.keep(c, self.name, DecisionKind.NO_ROOM,
                         f"empty, but it holds CapacityBuffer headroom ({held} virtual pod(s)) that fits on no other node")
                continue
            budgets.take(c, self.reason)
            chosen.append(c)
        if not chosen:
            return None
        return DisruptionPlan(self.name, self.reason, chosen, price=sum(c.price or 0.0 for c in chosen))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute` in one step (no simulation: nothing to cut; see :class:`~.base.Method`)."""
        return done(self.compute(ctx, candidates, budgets))

    def may_disrupt_blocked(self, cand: Candidate) -> bool:
        """Never: emptiness is voluntary."""
        return False

    def still_applies(self, cand: Candidate, now: float) -> Invalidation | None:
        """The node must still be empty and consolidatable."""
        if cand.empty and cand.consolidatable(now):
            return None
        return Invalidation(DecisionKind.NO_LONGER_EMPTY, f"{cand.name} is no longer empty and consolidatable")

    def needs_resimulation(self, cands: Sequence[Candidate]) -> bool:
        """Never: an empty node has no pods to place."""
        return False
