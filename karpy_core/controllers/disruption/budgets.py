"""Disruption budgets: how many nodes of a NodePool may be disrupted right now, per reason.

Source: Karpenter ``pkg/apis/v1/nodepool.go`` (``GetAllowedDisruptionsByReason``,
``Budget.IsActive``) and ``pkg/controllers/disruption/helpers.go``
(``BuildDisruptionBudgetMapping``). Pure functions: ``now`` is a value, never read from a clock.

* A budget without ``schedule`` is always active. With ``schedule`` (cron, UTC) and
  ``duration``, it is active for ``duration`` after each tick of the schedule.
* ``nodes`` is ``"N"`` or ``"N%"`` of the pool's nodes, percentages rounded **up**.
* The allowed count is the minimum over the active budgets whose ``reasons`` list the reason (or
  list none), minus the nodes already being disrupted (deleting, tainted
  ``karpenter.sh/disrupted`` or NotReady), never below zero.
* A NodePool without ``disruption.budgets`` gets Karpenter's default ``[{nodes: "10%"}]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from croniter import CroniterBadDateError, croniter  # type: ignore[import-untyped, unused-ignore]

from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.nodepool import Budget
from karpy_core.controllers.disruption.candidates import Candidate, disrupting_counts
from karpy_core.controllers.disruption.decisions import DisruptionReason
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import DEFAULT_BUDGET

__all__ = [
    "DEFAULT_BUDGET",
    "REASON_EMPTY",
    "REASON_DRIFTED",
    "REASON_UNDERUTILIZED",
    "budget_active",
    "budget_nodes",
    "allowed_disruptions",
    "budget_limit",
    "next_budget_change",
    "BudgetTracker",
    "BudgetStep",
    "PREVIEW_ALL",
    "preview_budgets",
]

REASON_EMPTY = DisruptionReason.EMPTY
REASON_DRIFTED = DisruptionReason.DRIFTED
REASON_UNDERUTILIZED = DisruptionReason.UNDERUTILIZED

Budgets = Sequence[Budget]
"""A NodePool's ``spec.disruption.budgets``, validated (:attr:`karpy_core.state.views.NodePoolView.budgets`,
``NodePool.spec.disruption.budgets``); empty means Karpenter's default ``[{nodes: "10%"}]``."""

_MACROS = {
    "@annually": "0 0 1 1 *",
    "@yearly": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def _cron(schedule: str) -> str:
    return _MACROS.get(schedule.strip(), schedule)


def _or_default(budgets: Budgets) -> Budgets:
    return budgets if budgets else (DEFAULT_BUDGET,)


CRON_YEARS_SEARCHED = 5
"""Years after a time that robfig/cron's ``SpecSchedule.Next`` (Karpenter's cron library) searches
for the next tick before it gives up and returns Go's zero time."""


def next_tick(schedule: str, after: float) -> float | None:
    """The first tick of ``schedule`` (a validated cron or macro, UTC) after ``after`` (seconds
    since the epoch), or None when there is none within :data:`CRON_YEARS_SEARCHED` years, as
    robfig/cron answers (a schedule that never fires, such as ``0 0 31 2 *``, February 31st)."""
    start = datetime.fromtimestamp(after, UTC)
    try:
        tick: float = croniter(_cron(schedule), start, max_years_between_matches=CRON_YEARS_SEARCHED + 1).get_next(float)
    except CroniterBadDateError:
        return None
    return tick if datetime.fromtimestamp(tick, UTC).year <= start.year + CRON_YEARS_SEARCHED else None


def budget_active(budget: Budget, now: float) -> bool:
    """True when ``budget`` applies at ``now`` (seconds since the epoch, UTC).

    Karpenter's rule (``Budget.IsActive``): the first schedule tick after ``now - duration`` is not
    after ``now``. A schedule with no tick within robfig/cron's search (:func:`next_tick`: None)
    leaves Go's zero time, which is not after ``now`` either, so such a budget is always active
    there, and here. The model has validated the schedule and duration already.
    """
    if not budget.schedule:
        return True
    duration = duration_seconds(budget.duration or "0s") or 0.0
    nxt = next_tick(budget.schedule, now - duration)
    return nxt is None or nxt <= now


def budget_nodes(budget: Budget, total: int) -> int:
    """``nodes`` of ``budget`` resolved against ``total`` nodes: ``"3"`` -> 3, ``"10%"`` of 15 -> 2
    (rounded up)."""
    raw = budget.nodes
    if raw.endswith("%"):
        return math.ceil(int(raw[:-1]) * total / 100)
    return int(raw)


def allowed_disruptions(budgets: Budgets, reason: str, now: float, *, total: int, disrupting: int) -> int:
    """Nodes of a NodePool that may start being disrupted for ``reason`` at ``now``.

    Args:
        budgets: the NodePool's budgets (:attr:`NodePoolView.budgets <karpy_core.state.views.NodePoolView.budgets>`).
        reason: ``Empty``, ``Drifted`` or ``Underutilized``.
        now: seconds since the epoch.
        total: the pool's managed, initialized, not-deleting nodes (the base of percentages).
        disrupting: nodes of the pool already being disrupted (they count against the budget).
    """
    allowed = budget_limit(budgets, reason, now, total=total)
    if allowed is None:  # no active budget for this reason: unlimited (Karpenter: MaxInt)
        allowed = total
    return max(0, allowed - disrupting)


def budget_limit(budgets: Budgets, reason: str, now: float, *, total: int) -> int | None:
    """The fewest nodes any of ``budgets`` active at ``now`` for ``reason`` allows (``total`` is
    the base of percentages), or None when no budget applies: unlimited, as Karpenter's
    ``GetAllowedDisruptionsByReason`` returns MaxInt32 then."""
    allowed: int | None = None
    for b in _or_default(budgets):
        if b.reasons and reason not in b.reasons:
            continue
        if not budget_active(b, now):
            continue
        n = budget_nodes(b, total)
        allowed = n if allowed is None else min(allowed, n)
    return allowed


def next_budget_change(budgets: Budgets, now: float) -> float | None:
    """The earliest time after ``now`` at which one of ``budgets`` with a schedule starts or stops
    applying (for the simulator's clock jumps), or None when no budget has a schedule."""
    best: float | None = None
    for b in budgets:
        if not b.schedule:
            continue
        duration = duration_seconds(b.duration or "0s") or 0.0
        after = now - duration
        for _ in range(3):
            tick = next_tick(b.schedule, after)
            if tick is None:  # no tick within robfig/cron's search: always active (budget_active), never changes
                break
            after = tick
            for edge in (tick, tick + duration):
                if edge > now and (best is None or edge < best):
                    best = edge
    return best


class BudgetTracker:
    """The budgets of one pass: what each NodePool allows per reason at ``now``, minus what this
    pass has already taken.

    Args:
        snapshot: the cluster (node counts per pool: total and already disrupting).
        now: seconds since the epoch.
    """

    def __init__(self, snapshot: ClusterSnapshot, now: float):
        self.now = now
        self.total, self.disrupting = disrupting_counts(snapshot)
        self.used: dict[tuple[str, DisruptionReason], int] = {}

    def left(self, cand: Candidate, reason: DisruptionReason) -> int:
        """Nodes of ``cand``'s pool that may still be disrupted for ``reason`` (may be negative
        when the budget shrank)."""
        allowed = allowed_disruptions(cand.pool.budgets, reason, self.now, total=self.total.get(cand.nodepool, 0),
                                      disrupting=self.disrupting.get(cand.nodepool, 0))
        return allowed - self.used.get((cand.nodepool, reason), 0)

    def take(self, cand: Candidate, reason: DisruptionReason) -> None:
        """Count ``cand`` against its pool's ``reason`` budget for the rest of the pass."""
        self.used[(cand.nodepool, reason)] = self.used.get((cand.nodepool, reason), 0) + 1


PREVIEW_ALL = "all"
"""The preview column of what every reason may disrupt (the most restrictive active budget)."""


@dataclass(frozen=True)
class BudgetStep:
    """The allowance of one NodePool from ``at`` until the next step (``karpy budgets``).

    Attributes:
        at: seconds since the epoch (UTC) from which this allowance holds.
        allowed: reason (``Empty``, ``Drifted``, ``Underutilized``) and :data:`PREVIEW_ALL` ->
            nodes that may be disrupted at once (Karpenter ``GetAllowedDisruptionsByReason``: the
            minimum over the active budgets listing the reason or no reason), None where no
            budget is active for the reason: unlimited (Karpenter's MaxInt32; the controller then
            lets every node of the pool go).
        active: indices (0-based) into the pool's budgets active at ``at``.
    """

    at: float
    allowed: dict[str, int | None]
    active: tuple[int, ...]


def preview_budgets(budgets: Budgets, total: int, start: float, *, horizon: float = 24 * 3600.0) -> list[BudgetStep]:
    """The disruption allowance of a NodePool with ``budgets`` at ``start`` and at every change in
    ``(start, start + horizon]``: each step starts where a scheduled budget opens or closes and
    changes some count (steps that change nothing are merged into the previous one).

    Args:
        budgets: the NodePool's validated budgets (empty: the default 10%).
        total: the pool's node count, the base of percentages (rounded up, as Karpenter).
        start: seconds since the epoch (UTC).
        horizon: seconds after ``start`` to look ahead (24 h by default).
    """
    reasons = [r.value for r in DisruptionReason]
    budgets = _or_default(budgets)
    steps: list[BudgetStep] = []
    t = start
    while t <= start + horizon:
        allowed: dict[str, int | None] = {r: budget_limit(budgets, r, t, total=total) for r in reasons}
        limited = [v for v in allowed.values() if v is not None]
        allowed[PREVIEW_ALL] = min(limited) if limited else None
        active = tuple(i for i, b in enumerate(budgets) if budget_active(b, t))
        if not steps or steps[-1].allowed != allowed:
            steps.append(BudgetStep(t, allowed, active))
        nxt = next_budget_change(budgets, t)
        if nxt is None or nxt <= t:
            break
        t = nxt
    return steps
