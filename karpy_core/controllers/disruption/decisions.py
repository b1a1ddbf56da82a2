"""The disruption vocabulary: methods, budget reasons, verdicts, reason kinds, and the typed decision log.

Every value here is a ``str`` enum whose value is the text Karpenter and karpy have always
printed, so metrics labels (``empty``, ``drifted``, ``underutilized``), event text and the
``--explain-node`` lines read exactly as before, while code compares members, never text.

The decision log is a list of :class:`NodeDecision` records: one per node and stage of a pass
(the eligibility check, each method, the validation of a decided command, the execution of a
queued one). :func:`~karpy_core.controllers.disruption.planner.plan_disruption` produces them;
the disruption controller keeps them per node (``karpy simulate --explain-node``) and logs them.

Pure: no imports beyond the standard library.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any

__all__ = [
    "DisruptionMethod",
    "DecisionStage",
    "DisruptionReason",
    "Verdict",
    "DecisionKind",
    "DecisionDetails",
    "NodeDecision",
    "Invalidation",
]


class DisruptionMethod(StrEnum):
    """A disruption method, in Karpenter's order (``pkg/controllers/disruption/controller.go``)."""

    EMPTINESS = "emptiness"
    STATIC_DRIFT = "static-drift"
    """Drift of a static NodePool's nodes (Karpenter ``staticdrift.go``)."""
    DRIFT = "drift"
    MULTI_NODE_CONSOLIDATION = "multi-node-consolidation"
    SINGLE_NODE_CONSOLIDATION = "single-node-consolidation"
    REPACK_CONSOLIDATION = "repack-consolidation"
    """karpy's own, tried after Karpenter's four: N nodes replaced by M cheaper ones for any M."""


class DecisionStage(StrEnum):
    """A stage of the decision log that is not a method: the eligibility check of every node, and
    the re-check of a decided command after the validation delay."""

    CANDIDATE = "candidate"
    VALIDATION = "validation"


class DisruptionReason(StrEnum):
    """The budget reason of a command (``spec.disruption.budgets[].reasons`` in a NodePool, the
    NodeClaim's ``DisruptionReason`` condition). :attr:`metric_label` is the lower-case label of
    ``karpenter_nodeclaims_disrupted_total``."""

    EMPTY = "Empty"
    DRIFTED = "Drifted"
    UNDERUTILIZED = "Underutilized"

    @property
    def metric_label(self) -> str:
        """``empty``, ``drifted`` or ``underutilized``."""
        return self.value.lower()


class Verdict(StrEnum):
    """What the stage decided for the node: leave it (``keep``) or disrupt it (``disrupt``)."""

    KEEP = "keep"
    DISRUPT = "disrupt"


class DecisionKind(StrEnum):
    """Why, as a value: the kind behind each decision line's text (tests and tools match these,
    not the wording)."""

    # eligibility (build_candidates)
    NODEPOOL_NOT_FOUND = "nodepool-not-found"
    NODE_DELETING = "node-deleting"
    NOT_INITIALIZED = "not-initialized"
    ALREADY_DISRUPTING = "already-disrupting"
    NO_NODECLAIM = "no-nodeclaim"
    NODECLAIM_DELETING = "nodeclaim-deleting"
    NOMINATED = "nominated"
    DO_NOT_DISRUPT = "do-not-disrupt"
    PDB_BLOCKS = "pdb-blocks"
    # a method's own conditions
    CONSOLIDATE_AFTER_NEVER = "consolidate-after-never"
    NOT_CONSOLIDATABLE_YET = "not-consolidatable-yet"
    BUDGET_EXHAUSTED = "budget-exhausted"
    POLICY_WHEN_EMPTY = "policy-when-empty"
    PRICE_UNKNOWN = "price-unknown"
    PENDING_PODS = "pending-pods"
    NO_ROOM = "no-room"
    SIMULATION_LIMIT = "simulation-limit"
    # the scheduling simulation
    POD_NOT_SIMULATABLE = "pod-not-simulatable"
    POD_UNSCHEDULABLE = "pod-unschedulable"
    TARGET_NOT_INITIALIZED = "target-not-initialized"
    TOO_MANY_REPLACEMENTS = "too-many-replacements"
    NOT_CHEAPER = "not-cheaper"
    SPOT_TO_SPOT = "spot-to-spot"
    BELOW_MIN_SAVINGS = "below-min-savings"
    SPOT_TO_SPOT_OPTIONS = "spot-to-spot-options"
    """Single-node spot-to-spot needs 15 cheaper spot instance types."""
    KUBE_SCHEDULER_MISFIT = "kube-scheduler-misfit"
    """The moved pods fit the planned arrangement, but kube-scheduler's own placement of them
    (``scheduling/kubescheduler.py``) leaves one pending: the move would be undone."""
    UNDONE_BEFORE = "undone-before"
    """The same move was taken and undone (a launch for the pods it moved) since the workload and
    the offerings last changed."""
    # static NodePools (spec.replicas)
    STATIC_NODEPOOL = "static-nodepool"
    """Static pools are never consolidated or emptied, and their drift is ``static-drift``'s."""
    STATIC_SCALING = "static-scaling"
    """A static pool has more NodeClaims than replicas: drift waits for the scale-down."""
    NODE_LIMIT = "node-limit"
    """A static pool's ``limits.nodes`` leaves no room for a replacement."""
    # a command
    DELETE = "delete"
    REPLACE = "replace"
    NO_LONGER_CANDIDATE = "no-longer-candidate"
    NO_LONGER_EMPTY = "no-longer-empty"
    NO_LONGER_DRIFTED = "no-longer-drifted"
    NO_LONGER_CONSOLIDATABLE = "no-longer-consolidatable"
    REPLACEMENTS_CHANGED = "replacements-changed"
    REPLACEMENT_TYPES_CHANGED = "replacement-types-changed"
    REPLACEMENT_FAILED = "replacement-failed"
    REPLACEMENT_TIMEOUT = "replacement-timeout"
    EARLIER_COMMAND_DROPPED = "earlier-command-dropped"
    """A command planned behind another one (validated side by side) is dropped with it: it was
    planned on a view where the earlier command had been executed."""
    OVERLAPS_EARLIER_COMMAND = "overlaps-earlier-command"
    """A command planned behind another one would take a node or a pod of that command."""


@dataclass(frozen=True, slots=True)
class DecisionDetails:
    """Optional facts attached to a decision line; only the fields that are set are printed.

    Attributes:
        budget: the budget reason that allowed no more disruptions.
        price: the node's price, USD/hour.
        replacement_price: Σ cheapest replacement prices of the command, USD/hour.
        nodes: number of nodes in the command.
        until: RFC 3339 time a nomination lasts until.
    """

    budget: DisruptionReason | None = None
    price: float | None = None
    replacement_price: float | None = None
    nodes: int | None = None
    until: str | None = None

    def items(self) -> list[tuple[str, Any]]:
        """``(name, value)`` of the set fields, sorted by name."""
        out = [(f.name, getattr(self, f.name)) for f in fields(self)]
        return sorted((k, v) for k, v in out if v is not None)


@dataclass(frozen=True, slots=True)
class NodeDecision:
    """One line of the decision log: why ``node`` was (``disrupt``) or was not (``keep``)
    disrupted at ``method`` (a method, or the candidate / validation stage) in one pass.

    Attributes:
        node: Node name.
        method: the method or stage that decided.
        verdict: keep or disrupt.
        kind: why, as a value.
        reason: why, in words (the text ``--explain-node`` prints).
        details: optional facts (budget, prices, node count, nomination end).
    """

    node: str
    method: DisruptionMethod | DecisionStage
    verdict: Verdict
    kind: DecisionKind
    reason: str
    details: DecisionDetails = field(default_factory=DecisionDetails)

    def text(self) -> str:
        """``[method] verdict: reason (key=value, ...)``."""
        extra = ", ".join(f"{k}={v}" for k, v in self.details.items())
        return f"[{self.method}] {self.verdict}: {self.reason}" + (f" ({extra})" if extra else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``node``, ``method``, ``verdict``, ``kind``, ``reason``, ``details``
        (the set fields of :class:`DecisionDetails`)."""
        return {"node": self.node, "method": self.method.value, "verdict": self.verdict.value, "kind": self.kind.value,
                "reason": self.reason, "details": {k: (v.value if isinstance(v, StrEnum) else v) for k, v in self.details.items()}}


@dataclass(frozen=True, slots=True)
class Invalidation:
    """Why a decided command no longer holds (:func:`~karpy_core.controllers.disruption.planner.validate_plan`)
    or a simulation rejected a set of candidates: a kind and the words for it."""

    kind: DecisionKind
    message: str

    def __str__(self) -> str:
        return self.message
