"""Disruption: emptiness, drift, consolidation (planner + controller) and expiration.

* :mod:`.decisions` - the vocabulary as enums (methods, budget reasons, verdicts, reason kinds)
  and the typed decision log (:class:`NodeDecision`);
* :mod:`.budgets` - disruption budgets per NodePool and reason (pure);
* :mod:`.candidates` - which nodes may be disrupted, their price, pods, drift and
  ``Consolidatable`` time (pure);
* :mod:`.simulation` - the scheduling simulation every method runs (pure);
* :mod:`.methods` - one module per method behind the ``Method`` protocol (pure);
* :mod:`.plan` - :class:`DisruptionPlan`, a command as a value;
* :mod:`.planner` - the order of the methods, the pending-pods guard, :func:`plan_disruption` and
  :func:`validate_plan` (pure);
* :mod:`.controller` - :class:`Disruption`, which acts on plans (taint, replace, delete);
* :mod:`.expiration` - :class:`Expiration`, forceful deletion past ``expireAfter``.
"""

from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.controller import Disruption, DisruptionEvent, DisruptionEventKind, DisruptionSettings
from karpy_core.controllers.disruption.decisions import (
    DecisionDetails,
    DecisionKind,
    DecisionStage,
    DisruptionMethod,
    DisruptionReason,
    Invalidation,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.expiration import Expiration, ExpirationEvent, ExpirationEventKind
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.planner import plan_disruption, validate_plan

__all__ = [
    "Candidate",
    "NodeDecision",
    "DecisionDetails",
    "DecisionKind",
    "DecisionStage",
    "DisruptionMethod",
    "DisruptionReason",
    "Invalidation",
    "Verdict",
    "Disruption",
    "DisruptionEvent",
    "DisruptionEventKind",
    "DisruptionSettings",
    "Expiration",
    "ExpirationEvent",
    "ExpirationEventKind",
    "DisruptionPlan",
    "plan_disruption",
    "validate_plan",
]
