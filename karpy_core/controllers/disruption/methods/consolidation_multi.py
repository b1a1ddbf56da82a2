"""Multi-node consolidation (Karpenter ``multinodeconsolidation.go``): the first
:data:`MULTI_NODE_MAX_CANDIDATES` consolidation candidates within the ``Underutilized`` budget; the
largest prefix (at least 2) that can be deleted, or replaced by one cheaper node, found by binary
search."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DisruptionMethod
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.methods.consolidation import Consolidation
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import Evaluation, evaluate

__all__ = ["MultiNodeConsolidation", "MULTI_NODE_MAX_CANDIDATES"]

MULTI_NODE_MAX_CANDIDATES = 100
"""Candidates multi-node consolidation considers at once (Karpenter ``MultiNodeConsolidation``)."""


@dataclass(frozen=True, slots=True)
class MultiNodeConsolidation(Consolidation):
    """Remove several nodes at once (see the module docstring)."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.MULTI_NODE_CONSOLIDATION

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The largest removable prefix of at least 2 candidates, or None (see :class:`Method`)."""
        within: list[Candidate] = []
        taken: dict[str, int] = {}
        for c in self.consider(ctx, candidates):
            if len(within) >= MULTI_NODE_MAX_CANDIDATES:
                break
            if budgets.left(c, self.reason) - taken.get(c.nodepool, 0) < 1:
                continue
            taken[c.nodepool] = taken.get(c.nodepool, 0) + 1
            within.append(c)
        if len(within) < 2:
            return None
        best: tuple[list[Candidate], Evaluation] | None = None
        lo, hi = 1, len(within) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            prefix = within[: mid + 1]
            ev = evaluate(ctx.sim, prefix, consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev.ok:
                best = (prefix, ev)
                lo = mid + 1
            else:
                hi = mid - 1
        if best is None:
            return None
        prefix, ev = best
        if ev.replacements and len({c.instance_type for c in prefix}) == 1 and \
                {it.name for it in ev.replacements[0].instance_types} <= {prefix[0].instance_type}:
            return None  # filterOutSameInstanceType: no point replacing N nodes by one of the same type
        for c in prefix:
            budgets.take(c, self.reason)
        return DisruptionPlan(self.name, self.reason, prefix, ev.replacements,
                              sum(c.price or 0.0 for c in prefix), ev.replacement_price)
