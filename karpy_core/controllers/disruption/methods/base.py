"""What every disruption method is: the :class:`Method` protocol and the per-pass context it reads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import (
    DecisionDetails,
    DecisionKind,
    DisruptionMethod,
    DisruptionReason,
    Invalidation,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import SimulationContext
from karpy_core.featuregates import FeatureGates
from karpy_core.utils.steps import Steps

__all__ = ["Method", "PassContext"]


@dataclass(frozen=True, slots=True)
class PassContext:
    """What one planning pass shares between its methods.

    Attributes:
        now: seconds since the epoch.
        sim: the scheduling simulation's precomputed inputs.
        log: the decision log; methods append a ``keep`` line per candidate they pass over.
        gates: ``FEATURE_GATES`` (``SpotToSpotConsolidation`` changes consolidation's replacements).
        instance_types: NodePool name -> its instance types (static drift builds its replacements
            from them: static pools have no scheduling template in ``sim``).
        avoid: :func:`~karpy_core.controllers.disruption.plan.move_key` of the moves undone since
            the workload and the offerings last changed: not taken again.
    """

    now: float
    sim: SimulationContext
    log: list[NodeDecision]
    gates: FeatureGates = field(default_factory=FeatureGates)
    instance_types: Mapping[str, list[InstanceType]] = field(default_factory=dict)
    avoid: frozenset[str] = frozenset()

    def keep(self, cand: Candidate, method: DisruptionMethod, kind: DecisionKind, reason: str,
             details: DecisionDetails | None = None) -> None:
        """Record that ``method`` leaves ``cand`` alone, and why."""
        self.log.append(NodeDecision(cand.name, method, Verdict.KEEP, kind, reason, details or DecisionDetails()))


class Method(Protocol):
    """A disruption method (Karpenter ``pkg/controllers/disruption/types.go`` ``Method``).

    Attributes:
        name: the method.
        reason: the budget reason its commands count against.
        consolidation: consolidation semantics: the method waits while pending pods can be placed,
            its simulation allows at most one cheaper replacement, and a revalidated replacement
            must keep its instance types.
    """

    @property
    def name(self) -> DisruptionMethod: ...

    @property
    def reason(self) -> DisruptionReason: ...

    @property
    def consolidation(self) -> bool: ...

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The method's command for this pass, or None. ``candidates`` are every eligible node
        (sorted by name, blocked ones included: the method decides whether a block matters);
        budgets taken for the command are counted in ``budgets``. Appends ``keep`` lines to
        ``ctx.log`` for the candidates it passes over."""
        ...

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute` as a generator (:data:`~karpy_core.utils.steps.Steps`) that yields at
        checkpoints (between two simulations or candidates) and returns the same command, so the
        disruption controller can let the event loop run meanwhile
        (:func:`~karpy_core.utils.steps.run_steps_async`)."""
        ...

    def may_disrupt_blocked(self, cand: Candidate) -> bool:
        """True when the method may disrupt ``cand`` although do-not-disrupt or a PDB blocks it."""
        ...

    def still_applies(self, cand: Candidate, now: float) -> Invalidation | None:
        """On revalidation: None when ``cand`` (rebuilt from a fresh snapshot) still qualifies for
        the method at ``now`` (epoch seconds), else why not."""
        ...

    def needs_resimulation(self, cands: Sequence[Candidate]) -> bool:
        """On revalidation: whether the command's pods must be simulated again."""
        ...
