"""Multi-node consolidation (Karpenter ``multinodeconsolidation.go``): the first
:data:`MULTI_NODE_MAX_CANDIDATES` consolidation candidates within the ``Underutilized`` budget; the
largest prefix (at least 2) that can be deleted, or replaced by one cheaper node, found by binary
search, then grown greedily by the candidates after it that can go with it
(:meth:`MultiNodeConsolidation.extend`, karpy's addition)."""

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
from karpy_core.controllers.disruption.simulation import Evaluation, evaluate_steps
from karpy_core.utils.steps import Steps, run_steps

__all__ = ["MultiNodeConsolidation", "MULTI_NODE_MAX_CANDIDATES"]

MULTI_NODE_MAX_CANDIDATES = 100
"""Candidates multi-node consolidation considers at once (Karpenter ``MultiNodeConsolidation``)."""

GREEDY_SIMULATIONS = 50
"""Simulations the greedy extension (:meth:`MultiNodeConsolidation.extend`) makes at most in one pass."""


@dataclass(frozen=True, slots=True)
class MultiNodeConsolidation(Consolidation):
    """Remove several nodes at once (see the module docstring)."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.MULTI_NODE_CONSOLIDATION

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The largest removable prefix of at least 2 candidates, or None (see :class:`~.base.Method`)."""
        return run_steps(self.steps(ctx, candidates, budgets))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute`, yielding before each simulation (see :class:`~.base.Method`)."""
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
            ev = yield from evaluate_steps(ctx.sim, prefix, consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev.ok:
                best = (prefix, ev)
                lo = mid + 1
            else:
                hi = mid - 1
        best = yield from self.extend_steps(ctx, within, best)
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

    def extend(self, ctx: PassContext, within: Sequence[Candidate], best: tuple[list[Candidate], Evaluation] | None
               ) -> tuple[list[Candidate], Evaluation] | None:
        """Grow the command the binary search found (or none) greedily: each candidate of ``within``
        after it, in order, joins when the set with it can still go (one :func:`evaluate` of the
        whole set, so the pods of every node must fit together), up to :data:`GREEDY_SIMULATIONS`
        tries. Returns the larger of the two commands (at least 2 nodes), or ``best``.

        karpy's addition to Karpenter's ``firstNConsolidationOption``: its binary search assumes
        that a prefix that cannot go makes every longer prefix fail, so one node that must stay
        near the front leaves the rest to single-node consolidation, one node per command and
        validation delay (issue 36: after a 70% scale-in, 25 single-node commands 15 s apart).
        """
        return run_steps(self.extend_steps(ctx, within, best))

    def extend_steps(self, ctx: PassContext, within: Sequence[Candidate], best: tuple[list[Candidate], Evaluation] | None
                     ) -> Steps[tuple[list[Candidate], Evaluation] | None]:
        """:meth:`extend`, yielding before each simulation."""
        kept: list[Candidate] = list(best[0]) if best is not None else []
        ev_kept = best[1] if best is not None else None
        names = {c.name for c in kept}
        tries = 0
        for c in within:
            if c.name in names:
                continue
            if tries >= GREEDY_SIMULATIONS:
                break
            tries += 1
            ev = yield from evaluate_steps(ctx.sim, [*kept, c], consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev.ok:
                kept.append(c)
                names.add(c.name)
                ev_kept = ev
        if ev_kept is None or len(kept) < 2 or (best is not None and len(kept) <= len(best[0])):
            return best
        return kept, ev_kept
