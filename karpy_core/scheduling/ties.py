"""Which of two provisioning plans wins when they cost (nearly) the same: the one with fewer NodeClaims.

A catalog that prices sizes in proportion to cpu (Karpenter's KWOK catalog: ``c-4x`` costs
0.10859 USD/hour, two ``c-2x`` 0.10858) makes many plans tie to a fraction of a cent; taking the
cheapest to the last digit then takes more, smaller nodes for no saving, and each extra node is
another launch, registration, DaemonSet set and consolidation candidate. Within :data:`TIE_USD`
of the cheapest plan seen (strictly less: a plan a whole cent dearer is dearer), fewer NodeClaims
win, then the cheaper plan (issue 36, item 3).

A *band* rule, not a per-claim allowance: a plan is only considered while it costs less than
:data:`TIE_USD` more than the cheapest plan compared so far, so a chain of ties cannot drift
further than that from the cheapest.

Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TIE_USD", "PlanScore", "better"]

TIE_USD = 0.01
"""USD/hour within which two plans count as costing the same (one cent per hour)."""


@dataclass(frozen=True, slots=True)
class PlanScore:
    """What plans are compared on.

    Attributes:
        pending: pods the plan leaves unplaced (fewer always wins).
        cost: USD/hour of the plan's new NodeClaims (their cheapest offerings).
        claims: NodeClaims the plan opens.
    """

    pending: int
    cost: float
    claims: int


def better(a: PlanScore, b: PlanScore, floor: float, tie: float = TIE_USD) -> bool:
    """Whether plan ``a`` beats plan ``b``: fewer pending pods; then, of two plans less than ``tie``
    USD/hour dearer than ``floor`` (the cheapest cost seen among plans with as few pending pods,
    ``a``'s included), fewer NodeClaims, then the cheaper (to 1e-9); a plan a full ``tie`` or more
    above ``floor`` loses to one within it; two such compare on cost alone."""
    if a.pending != b.pending:
        return a.pending < b.pending
    limit = floor + tie - 1e-9
    a_in, b_in = a.cost < limit, b.cost < limit
    if a_in != b_in:
        return a_in
    if a_in and a.claims != b.claims:
        return a.claims < b.claims
    return round(a.cost, 9) < round(b.cost, 9)
