"""Disruption: emptiness, drift, consolidation (planner + controller) and expiration.

* :mod:`.budgets` - disruption budgets per NodePool and reason (pure);
* :mod:`.candidates` - which nodes may be disrupted, their price, pods, drift and
  ``Consolidatable`` time (pure);
* :mod:`.planner` - :func:`plan_disruption` and :func:`validate_plan` (pure);
* :mod:`.controller` - :class:`Disruption`, which acts on plans (taint, replace, delete);
* :mod:`.expiration` - :class:`Expiration`, forceful deletion past ``expireAfter``.
"""

from karpy_core.controllers.disruption.candidates import Candidate, NodeDecision
from karpy_core.controllers.disruption.controller import Disruption, DisruptionEvent, DisruptionSettings
from karpy_core.controllers.disruption.expiration import Expiration, ExpirationEvent
from karpy_core.controllers.disruption.planner import DisruptionPlan, plan_disruption, validate_plan

__all__ = [
    "Candidate",
    "NodeDecision",
    "Disruption",
    "DisruptionEvent",
    "DisruptionSettings",
    "Expiration",
    "ExpirationEvent",
    "DisruptionPlan",
    "plan_disruption",
    "validate_plan",
]
