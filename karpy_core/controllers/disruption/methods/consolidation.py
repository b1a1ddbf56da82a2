"""What single- and multi-node consolidation share: which candidates they consider, in which
order, and how a decided command is re-checked (Karpenter ``consolidation.go``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, DisruptionReason, Invalidation
from karpy_core.controllers.disruption.methods.base import PassContext

__all__ = ["Consolidation", "consolidation_policy", "consolidation_order"]


def consolidation_policy(cand: Candidate) -> str:
    """The candidate's NodePool ``spec.disruption.consolidationPolicy`` (default ``WhenEmptyOrUnderutilized``)."""
    return cand.pool.consolidation_policy


def consolidation_order(c: Candidate) -> tuple[float, str]:
    """Sort key: highest price per unit of disruption cost first, then by name."""
    return (-(c.price or 0.0) / max(c.disruption_cost, 1e-9), c.name)


class Consolidation:
    """Base of the two consolidation methods: ``Underutilized`` budget, consolidation semantics,
    voluntary (blocked nodes are never consolidated)."""

    name: ClassVar[DisruptionMethod]
    reason: ClassVar[DisruptionReason] = DisruptionReason.UNDERUTILIZED
    consolidation: ClassVar[bool] = True

    def consider(self, ctx: PassContext, candidates: Sequence[Candidate]) -> list[Candidate]:
        """The non-empty, unblocked candidates consolidation may move: not of a static NodePool, policy
        ``WhenEmptyOrUnderutilized``, ``Consolidatable`` at ``ctx.now``, price known; sorted by
        :func:`consolidation_order`. A ``keep`` line for each of the others (empty ones are
        emptiness' business, blocked ones were logged by the candidate stage)."""
        out: list[Candidate] = []
        for c in candidates:
            if c.blocked or c.empty:
                continue
            if c.pool.static:
                ctx.keep(c, self.name, DecisionKind.STATIC_NODEPOOL, "static NodePool (spec.replicas): never consolidated")
            elif consolidation_policy(c) == "WhenEmpty":
                ctx.keep(c, self.name, DecisionKind.POLICY_WHEN_EMPTY, "consolidationPolicy is WhenEmpty and the node is not empty")
            elif c.consolidatable_at is None:
                ctx.keep(c, self.name, DecisionKind.CONSOLIDATE_AFTER_NEVER, "consolidateAfter is Never")
            elif ctx.now < c.consolidatable_at:
                ctx.keep(c, self.name, DecisionKind.NOT_CONSOLIDATABLE_YET,
                         f"not consolidatable for {c.consolidatable_at - ctx.now:.0f}s more (consolidateAfter)")
            elif c.price is None:
                ctx.keep(c, self.name, DecisionKind.PRICE_UNKNOWN, f"price of {c.instance_type} ({c.zone}, {c.capacity_type}) unknown")
            else:
                out.append(c)
        return sorted(out, key=consolidation_order)

    def may_disrupt_blocked(self, cand: Candidate) -> bool:
        """Never: consolidation is voluntary."""
        return False

    def still_applies(self, cand: Candidate, now: float) -> Invalidation | None:
        """The node must still be consolidatable."""
        if cand.consolidatable(now):
            return None
        return Invalidation(DecisionKind.NO_LONGER_CONSOLIDATABLE, f"{cand.name} is no longer consolidatable")

    def needs_resimulation(self, cands: Sequence[Candidate]) -> bool:
        """Always: the pods must still fit, on the same shape of replacement."""
        return True
