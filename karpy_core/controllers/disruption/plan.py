"""A disruption command as a value: which nodes go, for which reason, with which replacements."""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, DisruptionReason
from karpy_core.scheduling.scheduler import PlannedNodeClaim

__all__ = ["DisruptionPlan", "move_key", "pod_shape"]


def pod_shape(namespace: str, owner_kind: str, owner_name: str, requests: dict[str, int] | None) -> str:
    """``namespace/OwnerKind/owner{cpu=..,memory=..}``: a pod as a move sees it, the same for the
    replica a ReplicaSet makes to replace an evicted one (names differ, shapes do not)."""
    res = ",".join(f"{k}={v}" for k, v in sorted((requests or {}).items()))
    return f"{namespace}/{owner_kind}/{owner_name}{{{res}}}"


@dataclass(frozen=True, slots=True)
class DisruptionPlan:
    """One disruption command.

    Attributes:
        method: the method that found it.
        reason: the budget reason (``Empty``, ``Drifted`` or ``Underutilized``).
        candidates: the nodes to disrupt (in decision order).
        replacements: NodeClaims to create first (``nodeclaim_from_plan``), each Initialized
            before any candidate is deleted.
        price: Σ candidate prices, USD/hour (0 when unknown).
        replacement_price: Σ cheapest replacement prices, USD/hour.
    """

    method: DisruptionMethod
    reason: DisruptionReason
    candidates: list[Candidate]
    replacements: list[PlannedNodeClaim] = field(default_factory=list)
    price: float = 0.0
    replacement_price: float = 0.0

    @property
    def decision(self) -> DecisionKind:
        """:attr:`DecisionKind.REPLACE` when there are replacements, else :attr:`DecisionKind.DELETE`
        (``replace`` / ``delete`` as text)."""
        return DecisionKind.REPLACE if self.replacements else DecisionKind.DELETE

    @property
    def savings_per_hour(self) -> float:
        """Σ candidate prices - Σ replacement prices, USD/hour, rounded to 6 decimals."""
        return round(self.price - self.replacement_price, 6)

    def move_key(self) -> str:
        """:func:`move_key` of this command."""
        return move_key(self)

    def describe(self) -> str:
        """One line: ``method: decision nodes [with N node(s) [types...]] (price -> price USD/hour)``;
        with several replacements, the cheapest type of each: ``[t1, t2...]``."""
        names = ", ".join(c.name for c in self.candidates)
        out = f"{self.method}: {self.decision} {names}"
        if len(self.replacements) == 1:
            types = ", ".join(it.name for it in self.replacements[0].instance_types[:3])
            out += f" with 1 node(s) [{types}...]"
        elif self.replacements:
            types = ", ".join(r.instance_types[0].name if r.instance_types else "?" for r in self.replacements)
            out += f" with {len(self.replacements)} node(s) [{types}...]"
        return out + f" ({self.price:.4f} -> {self.replacement_price:.4f} USD/hour)"


def move_key(plan: DisruptionPlan) -> str:
    """What a consolidation moves, as a string that is the same the next time the same pods
    (by owner and requests, :func:`pod_shape`) would be moved into the same replacements (by
    NodePool and cheapest instance type), whichever nodes hold them: the moved pods' shapes,
    sorted, then ``->`` and the replacements. The disruption controller remembers the key of a
    move that was undone (:class:`~karpy_core.controllers.disruption.undone.UndoneMoves`) and the
    planner does not take it again."""
    shapes = []
    for c in plan.candidates:
        for p in c.pods:
            info = p.try_info()
            shapes.append(p.key if info is None else pod_shape(info.namespace, info.owner_kind, info.owner_name, info.requests))
    shapes.sort()
    repl = sorted(f"{r.nodepool}:{r.instance_types[0].name if r.instance_types else '?'}" for r in plan.replacements)
    return ";".join(shapes) + " -> " + ";".join(repl)

