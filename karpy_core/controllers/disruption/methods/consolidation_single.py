"""Single-node consolidation (Karpenter ``singlenodeconsolidation.go``): the first candidate that
can be deleted (its pods fit on other nodes) or replaced by one cheaper node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DecisionDetails, DecisionKind, DisruptionMethod
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.methods.consolidation import Consolidation
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import SimulationContext, evaluate_steps
from karpy_core.scheduling.resources import Resources, add_into, subtract
from karpy_core.utils.steps import Steps, run_steps

__all__ = ["SingleNodeConsolidation", "fits_somewhere"]


def fits_somewhere(ctx: SimulationContext, cand: Candidate, free_total: Resources) -> bool:
    """Cheap necessary condition before a simulation: the candidate's pods (cpu, memory) fit in the
    free capacity of all other nodes together (``free_total``: Σ free resources of the initialized
    nodes), or in one instance type of the pool costing less than the candidate (USD/hour)."""
    need: Resources = {}
    infos = ctx.pod_infos(cand)
    for p in infos if not isinstance(infos, str) else []:
        add_into(need, p.requests)
    own = ctx.node(cand.name)
    others = subtract(free_total, own.free()) if own is not None else free_total
    if all(others.get(r, 0) >= v for r, v in need.items() if r in ("cpu", "memory")):
        return True
    if cand.price is None:
        return False
    for t in ctx.templates:
        if t.name != cand.nodepool:
            continue
        for it in t.instance_types:
            offers = [o.price for o in it.offerings if o.available]
            if offers and min(offers) < cand.price and all(it.allocatable.get(r, 0) >= v for r, v in need.items()
                                                          if r in ("cpu", "memory")):
                return True
    return False


@dataclass(frozen=True, slots=True)
class SingleNodeConsolidation(Consolidation):
    """Remove or replace one node (see the module docstring).

    Attributes:
        max_simulations: stop after this many simulations in one pass (a deterministic stand-in
            for Karpenter's 3-minute timeout); None for no limit.
    """

    name: ClassVar[DisruptionMethod] = DisruptionMethod.SINGLE_NODE_CONSOLIDATION
    max_simulations: int | None = None

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The first candidate that can be deleted or replaced by a cheaper node, or None."""
        return run_steps(self.steps(ctx, candidates, budgets))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute`, yielding before each candidate (see :class:`~.base.Method`)."""
        free_total: Resources = {}
        for n in ctx.sim.nodes:
            if n.initialized:
                add_into(free_total, {r: max(0, v) for r, v in n.free().items()})
        sims = 0
        for c in self.consider(ctx, candidates):
            yield
            if budgets.left(c, self.reason) < 1:
                ctx.keep(c, self.name, DecisionKind.BUDGET_EXHAUSTED, f"the disruption budget allows 0 more ({self.reason})",
                         DecisionDetails(budget=self.reason))
                continue
            if not fits_somewhere(ctx.sim, c, free_total):
                ctx.keep(c, self.name, DecisionKind.NO_ROOM, "its pods fit neither on the other nodes nor on a cheaper type",
                         DecisionDetails(price=c.price))
                continue
            if self.max_simulations is not None and sims >= self.max_simulations:
                ctx.keep(c, self.name, DecisionKind.SIMULATION_LIMIT, "not evaluated this pass (simulation limit reached)")
                continue
            sims += 1
            ev = yield from evaluate_steps(ctx.sim, [c], consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev.problem is not None:
                ctx.keep(c, self.name, ev.problem.kind, ev.why, DecisionDetails(price=c.price))
                continue
            budgets.take(c, self.reason)
            return DisruptionPlan(self.name, self.reason, [c], ev.replacements, c.price or 0.0, ev.replacement_price)
        return None
