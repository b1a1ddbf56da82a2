"""The disruption methods, one module each, behind the :class:`~.base.Method` protocol:

* :mod:`.emptiness` - delete empty nodes (``Empty`` budget);
* :mod:`.static_drift` - replace drifted nodes of a static NodePool one-for-one (``Drifted`` budget);
* :mod:`.drift` - replace a drifted node (``Drifted`` budget);
* :mod:`.consolidation_multi` - remove several underutilized nodes at once (``Underutilized``);
* :mod:`.consolidation_single` - remove or replace one underutilized node (``Underutilized``);
* :mod:`.repack` - replace N underutilized nodes by M cheaper ones for any M (karpy's own,
  ``Underutilized``);
* :mod:`.consolidation` - what the consolidation methods share.

:data:`DEFAULT_ORDER` is Karpenter's order with the repack last; the planner tries them in it and
the first command wins.
"""

from karpy_core.controllers.disruption.decisions import DisruptionMethod
from karpy_core.controllers.disruption.methods.base import Method, PassContext
from karpy_core.controllers.disruption.methods.consolidation_multi import MULTI_NODE_MAX_CANDIDATES, MultiNodeConsolidation
from karpy_core.controllers.disruption.methods.consolidation_single import SingleNodeConsolidation
from karpy_core.controllers.disruption.methods.drift import Drift
from karpy_core.controllers.disruption.methods.emptiness import Emptiness
from karpy_core.controllers.disruption.methods.repack import DEFAULT_MIN_SAVINGS, RepackConsolidation
from karpy_core.controllers.disruption.methods.static_drift import StaticDrift

__all__ = [
    "Method",
    "PassContext",
    "Emptiness",
    "Drift",
    "StaticDrift",
    "MultiNodeConsolidation",
    "SingleNodeConsolidation",
    "RepackConsolidation",
    "DEFAULT_MIN_SAVINGS",
    "MULTI_NODE_MAX_CANDIDATES",
    "DEFAULT_ORDER",
    "build_methods",
]

DEFAULT_ORDER: tuple[DisruptionMethod, ...] = (
    DisruptionMethod.EMPTINESS,
    DisruptionMethod.STATIC_DRIFT,
    DisruptionMethod.DRIFT,
    DisruptionMethod.MULTI_NODE_CONSOLIDATION,
    DisruptionMethod.SINGLE_NODE_CONSOLIDATION,
    DisruptionMethod.REPACK_CONSOLIDATION,
)
"""Karpenter's order (``pkg/controllers/disruption/controller.go``), then karpy's repack: it acts
only where Karpenter's methods find nothing."""


def build_methods(*, max_single_simulations: int | None = None,
                  min_savings: float = DEFAULT_MIN_SAVINGS) -> dict[DisruptionMethod, Method]:
    """One instance of each method, by name. ``max_single_simulations``: see
    :class:`SingleNodeConsolidation`; ``min_savings``: the repack's minimum savings fraction
    (see :class:`RepackConsolidation`)."""
    methods: tuple[Method, ...] = (Emptiness(), StaticDrift(), Drift(), MultiNodeConsolidation(),
                                   SingleNodeConsolidation(max_simulations=max_single_simulations),
                                   RepackConsolidation(min_savings=min_savings))
    return {m.name: m for m in methods}
