"""What the disruption controller decides and reports: its settings, the events of a pass, a
planning pass's record (for the metrics), a decided command, and the fields of Karpenter's
``disrupting node(s)`` log line (``pkg/controllers/disruption/types.go``: ``Command``,
``Command.LogValues``). Values only: the controller (:mod:`.controller`, planning), the queue
(:mod:`.queue`, acting) and the metrics (:mod:`.metrics`) all import them from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.decisions import DecisionKind, NodeDecision
from karpy_core.controllers.disruption.methods.repack import DEFAULT_MIN_SAVINGS
from karpy_core.controllers.disruption.planner import DisruptionPlan
from karpy_core.controllers.provisioning.provisioner import pretty_list
from karpy_core.state.cluster import ClusterSnapshot

__all__ = ["Command", "DisruptionEvent", "DisruptionEventKind", "DisruptionSettings", "PIPELINE_DEPTH", "PlanningPass",
           "REPLACEMENT_TIMEOUT", "VALIDATION_DELAY", "command_key", "command_log_values"]

VALIDATION_DELAY = 15.0
"""Seconds between deciding a command and executing it (Karpenter ``commandValidationDelay``)."""
REPLACEMENT_TIMEOUT = 600.0
"""Seconds a command waits for its replacements to initialize (Karpenter's minimum, 10 min)."""
PIPELINE_DEPTH = 1
"""Decided commands that may wait out the validation delay side by side (karpy's own default;
Karpenter validates one command at a time: 1)."""


@dataclass
class DisruptionSettings:
    """Tunables of the disruption controller.

    Attributes:
        validation_delay: seconds from decision to execution (default 15).
        replacement_timeout: seconds to wait for replacements to be Initialized (default 600).
        max_single_simulations: cap on single-node simulations per pass (None: no cap); stands in
            for Karpenter's 3-minute single-node timeout deterministically.
        min_savings: the fraction of the disrupted nodes' price a repack consolidation must save
            (``KARPY_CONSOLIDATION_MIN_SAVINGS``; a NodePool's ``karpy.sh/consolidation-min-savings``
            wins), in [0, 1).
        pipeline_depth: how many decided commands may wait out their validation delay side by
            side (``KARPY_DISRUPTION_PIPELINE_DEPTH``; 1: one at a time, as Karpenter). The 2nd
            and later are consolidations planned on the view where the earlier ones were
            executed (:mod:`~karpy_core.controllers.disruption.pipeline`), disjoint from them.
    """

    validation_delay: float = VALIDATION_DELAY
    replacement_timeout: float = REPLACEMENT_TIMEOUT
    max_single_simulations: int | None = None
    min_savings: float = DEFAULT_MIN_SAVINGS
    pipeline_depth: int = PIPELINE_DEPTH


class DisruptionEventKind(StrEnum):
    """What the controller did (the values are the event kinds the simulator reports)."""

    DECIDED = "disrupt-decided"
    """A command was decided and waits for the validation delay."""
    INVALIDATED = "disrupt-invalidated"
    """A decided command did not hold on revalidation and was dropped."""
    DISRUPT = "disrupt"
    """Candidates tainted, their ``DisruptionReason`` set, replacements created."""
    REPLACEMENT_CREATE = "replacement-create"
    """A replacement NodeClaim was created."""
    DELETE = "delete"
    """A candidate's NodeClaim was deleted."""
    FAILED = "disrupt-failed"
    """A queued command's replacement failed or timed out; candidates un-tainted."""
    UNTAINT = "untaint"
    """A stale ``karpenter.sh/disrupted`` taint was removed."""
    WOULD_DISRUPT = "disrupt-would"
    """Dry run (:attr:`~karpy_core.controllers.disruption.controller.Disruption.dry_run`): a validated command that would have been executed
    (nothing tainted, created or deleted)."""
    UNDONE = "disrupt-undone"
    """A consolidation's moved pods got a node launched for them: the move is undone and not
    taken again until the workload or the offerings change
    (:mod:`~karpy_core.controllers.disruption.undone`)."""


@dataclass(frozen=True, slots=True)
class DisruptionEvent:
    """Something the controller did.

    Attributes:
        kind: what happened.
        node: node name(s), comma-separated for a multi-node command.
        nodeclaim: the NodeClaim concerned (delete, replacement-create).
        reason: the budget reason (``Empty``, ``Drifted``, ``Underutilized``), or why a command was
            dropped or abandoned, in words.
        details: ``method``, ``decision``, prices, ... (JSON-ready).
        decision: for a dropped or abandoned command, the kind of why.
    """

    kind: DisruptionEventKind
    node: str = ""
    nodeclaim: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    decision: DecisionKind | None = None


@dataclass(frozen=True, slots=True)
class PlanningPass:
    """One run of the planner, for metrics: the snapshot and instance types it read, its decision
    log, how long it took (seconds), the command it decided (or None) and its ``now``."""

    snapshot: ClusterSnapshot
    instance_types: dict[str, list[InstanceType]]
    lines: list[NodeDecision]
    seconds: float
    plan: DisruptionPlan | None
    now: float


@dataclass
class Command:
    """A decided command: its plan, when it was decided and started (epoch seconds; 0 until
    executed) and the names of the replacement NodeClaims created for it."""

    plan: DisruptionPlan
    decided_at: float
    started_at: float = 0.0
    replacements: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        """The candidates' node names."""
        return [c.name for c in self.plan.candidates]


def command_key(plan: DisruptionPlan) -> str:
    """What identifies a command for the dry run's reporting: method, decision, candidates and
    the replacements' cheapest instance types."""
    reps = ";".join(",".join(it.name for it in r.instance_types[:3]) for r in plan.replacements)
    return f"{plan.method.value}|{plan.decision.value}|{','.join(c.name for c in plan.candidates)}|{reps}"


def command_log_values(plan: DisruptionPlan) -> dict[str, Any]:
    """The fields of Karpenter's ``disrupting node(s)`` line (``disruption/queue.go``,
    ``Command.String`` and ``Command.LogValues``): ``command`` (``<reason>/<method>: <decision>:
    nodepools=[...]: [nodes] [-> [N replacement(s)]] (savings: $x.xx)``, savings in USD/hour),
    ``decision``, ``disrupted-node-count``, ``replacement-node-count``, ``pod-count`` (pods to
    reschedule), ``disrupted-nodes`` (Node, NodeClaim, instance-type, capacity-type each) and
    ``replacement-nodes`` (capacity-type, and instance-types when there is one replacement)."""
    nodes = ", ".join(c.name for c in plan.candidates)
    pools = ",".join(dict.fromkeys(c.nodepool for c in plan.candidates if c.nodepool))
    n = len(plan.replacements)
    to = f" -> [{n} replacement{'' if n == 1 else 's'}]" if n else ""
    command = (f"{plan.reason.value}/{plan.method.value}: {plan.decision.value}: nodepools=[{pools}]: [{nodes}]{to} "
               f"(savings: ${plan.savings_per_hour:.2f})")
    replacements = []
    for r in plan.replacements:
        types = r.requirements.get(LABEL_CAPACITY_TYPE)
        allowed = set(types.values) if types is not None and not types.complement else {"reserved", "spot", "on-demand"}
        entry: dict[str, Any] = {"capacity-type": next((t for t in ("reserved", "spot") if t in allowed), "on-demand")}
        if n == 1:
            entry["instance-types"] = pretty_list([it.name for it in r.instance_types])
        replacements.append(entry)
    return {
        "command": command, "decision": plan.decision.value, "disrupted-node-count": len(plan.candidates),
        "replacement-node-count": n, "pod-count": sum(len(c.pods) for c in plan.candidates),
        "disrupted-nodes": [{"Node": {"name": c.name}, "NodeClaim": {"name": c.nodeclaim_name}, "instance-type": c.instance_type,
                             "capacity-type": c.capacity_type} for c in plan.candidates],
        "replacement-nodes": replacements,
    }
