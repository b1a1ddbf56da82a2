"""Spot-to-spot consolidation (Karpenter's ``SpotToSpotConsolidation`` feature gate): the cheaper
spot replacement of spot candidates.

Source: kubernetes-sigs/karpenter ``pkg/controllers/disruption/consolidation.go``
``computeSpotToSpotConsolidation`` and ``MinInstanceTypesForSpotToSpotConsolidation``. With the gate
on, when every candidate is spot and the replacement may be spot:

1. the replacement is pinned to ``karpenter.sh/capacity-type In [spot]``;
2. only the instance types whose most expensive compatible spot offering costs less than the
   candidates together are kept (Karpenter ``RemoveInstanceTypeOptionsByPriceAndMinValues``;
   ``minValues`` must still hold);
3. multi-node consolidation takes them all;
4. single-node consolidation needs at least :data:`MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT` of them
   and launches only that many cheapest (or as many as ``minValues`` needs, if more): the spot
   launch then lands on one of them, none of which has 15 cheaper options left, so the new node
   is not consolidated again at once (the churn upstream's comment describes).

With the gate off, karpy keeps its own rule (spot candidates may only move to cheaper on-demand,
:func:`~karpy_core.controllers.disruption.simulation.evaluate`), where Karpenter refuses any
replacement of a spot node whose NodePool allows spot.

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.decisions import DecisionKind
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.scheduler import PlannedNodeClaim

__all__ = ["MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT", "SpotToSpot", "allows_spot", "spot_to_spot"]

MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT = 15
"""Cheaper spot instance types single-node spot-to-spot consolidation needs, and the most it
launches (Karpenter ``MinInstanceTypesForSpotToSpotConsolidation``)."""


@dataclass(frozen=True, slots=True)
class SpotToSpot:
    """The outcome: a replacement, or why there is none.

    Attributes:
        replacement: the spot NodeClaim to launch (its types cheapest first), or None.
        kind: why not (None with a replacement).
        why: in words (the ``--explain-node`` text).
        options: how many cheaper spot instance types there were.
    """

    replacement: PlannedNodeClaim | None
    kind: DecisionKind | None
    why: str
    options: int = 0


def allows_spot(claim: PlannedNodeClaim) -> bool:
    """True when ``claim``'s requirements allow ``karpenter.sh/capacity-type: spot``."""
    ct = claim.requirements.get(LABEL_CAPACITY_TYPE)
    return ct is None or ct.has("spot")


def _spot_price(it: InstanceType, reqs: Requirements, worst: bool) -> float:
    prices = [o.price for o in it.compatible_offerings(reqs)]
    if not prices:
        return float("inf")
    return max(prices) if worst else min(prices)


def _values(it: InstanceType, key: str) -> frozenset[str]:
    r = it.requirements.get(key)
    return r.values if r is not None and not r.complement else frozenset()


def _min_values_prefix(types: Sequence[InstanceType], reqs: Requirements) -> int | None:
    """The shortest prefix of ``types`` meeting every ``minValues`` of ``reqs`` (0 when none is
    set), or None when even all of ``types`` do not."""
    need = 0
    for r in reqs:
        if not r.min_values:
            continue
        seen: set[str] = set()
        for i, it in enumerate(types):
            seen |= _values(it, r.key)
            if len(seen) >= r.min_values:
                need = max(need, i + 1)
                break
        else:
            return None
    return need


def spot_to_spot(claim: PlannedNodeClaim, price: float, *, single: bool) -> SpotToSpot:
    """The spot replacement for spot candidates costing ``price`` together (USD/hour), whose pods
    the simulation put on ``claim`` (see the module docstring). ``single``: a single-node
    consolidation (the 15-option rule applies)."""
    reqs = claim.requirements.copy()
    reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset({"spot"})))
    ranked = sorted(((_spot_price(it, reqs, worst=False), it.name, it) for it in claim.instance_types
                     if _spot_price(it, reqs, worst=True) < price), key=lambda t: (t[0], t[1]))
    cheaper = [it for _, _, it in ranked]
    if not cheaper:
        return SpotToSpot(None, DecisionKind.NOT_CHEAPER,
                          f"spot-to-spot: no spot instance type cheaper than {price:.4f} USD/hour fits the pods")
    floor = _min_values_prefix(cheaper, claim.template.requirements)
    if floor is None:
        return SpotToSpot(None, DecisionKind.NOT_CHEAPER,
                          "spot-to-spot: the cheaper spot instance types do not meet the NodePool's minValues", len(cheaper))
    if single:
        if len(cheaper) < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT:
            return SpotToSpot(None, DecisionKind.SPOT_TO_SPOT_OPTIONS,
                              f"spot-to-spot: only {len(cheaper)} cheaper spot instance types, needs "
                              f"{MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT}", len(cheaper))
        cheaper = cheaper[: max(MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT, floor)]
    reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in cheaper)))
    replacement = dataclasses.replace(claim, instance_types=cheaper, requirements=reqs)
    return SpotToSpot(replacement, None, f"replace with a cheaper spot node ({len(cheaper)} instance types)", len(ranked))
