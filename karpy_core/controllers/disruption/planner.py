"""The disruption planner: a snapshot and ``now`` in, one :class:`DisruptionPlan` (or None) out.

Methods, in Karpenter's order, the first that yields a command wins
(``pkg/controllers/disruption/controller.go``):

1. **emptiness** (``emptiness.go``): every empty, ``Consolidatable`` candidate within its pool's
   ``Empty`` budget, deleted together (static NodePools' nodes never);
2. **static drift** (``staticdrift.go``): drifted nodes of one static NodePool (``spec.replicas``),
   within its ``Drifted`` budget and ``limits.nodes``, each replaced one-for-one from the template;
3. **drift** (``drift.go``): the first ``Drifted`` candidate (empty ones first, then oldest) within
   the ``Drifted`` budget whose pods all fit elsewhere, with as many replacements as they need;
4. **multi-node consolidation** (``multinodeconsolidation.go``): the first 100 consolidation
   candidates within the ``Underutilized`` budget; the largest prefix (at least 2) that can be
   deleted, or replaced by one cheaper node, found by binary search;
5. **single-node consolidation** (``singlenodeconsolidation.go``): the first candidate that can be
   deleted (its pods fit on other nodes) or replaced by one cheaper node;
6. **repack consolidation** (karpy's own, :mod:`~karpy_core.controllers.disruption.methods.repack`):
   where the others find nothing, the group of candidates (one node, or a prefix of up to 10) whose
   pods the provisioning scheduler re-plans most cheaply into any number of new nodes, saving at
   least ``min_savings`` of what it disrupts.

Each method simulates removing its candidates (``helpers.go`` ``SimulateScheduling``; the rules,
one cheaper replacement at most for consolidation, spot-to-spot only with its gate, are in
:mod:`~karpy_core.controllers.disruption.simulation`).

Consolidation waits while pending pods could be placed (on a node or a new NodeClaim): their
capacity is still being decided. Karpenter adds pending pods to the consolidation simulation, and
any new NodeClaim they need then rules out a delete; karpy reaches the same outcome by checking
once per pass. Pending pods that cannot schedule anywhere (an impossible selector, a NodePool
limit) do not hold consolidation back, as in Karpenter.

Layout: one module per method under :mod:`karpy_core.controllers.disruption.methods` (the
:class:`~karpy_core.controllers.disruption.methods.Method` protocol), the simulation in
:mod:`~karpy_core.controllers.disruption.simulation`; this module keeps the order, the one
pending-pods guard, :func:`plan_disruption` and :func:`validate_plan`. Every node considered gets
typed :class:`~karpy_core.controllers.disruption.decisions.NodeDecision` lines in the log.

Pure: no I/O, no clock, sorted iteration; same snapshot and ``now``, same plan. (For speed only,
:func:`plan_disruption` pauses CPython's cyclic garbage collector while it runs:
:mod:`karpy_core.utils.gcpause`.)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate, build_candidates
from karpy_core.controllers.disruption.decisions import (
    DecisionDetails,
    DecisionKind,
    DecisionStage,
    DisruptionMethod,
    Invalidation,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.methods import (
    DEFAULT_ORDER,
    MULTI_NODE_MAX_CANDIDATES,
    Method,
    PassContext,
    RepackConsolidation,
    build_methods,
)
from karpy_core.controllers.disruption.methods.repack import DEFAULT_MIN_SAVINGS
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import SimulationContext, evaluate
from karpy_core.featuregates import FeatureGates
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.gcpause import gc_paused
from karpy_core.utils.steps import Steps, run_steps

__all__ = [
    "PassCoverage",
    "SKIP_KINDS",
    "pass_coverage",
    "DisruptionPlan",
    "plan_disruption",
    "plan_disruption_steps",
    "narrow_emptiness",
    "validate_plan",
    "MULTI_NODE_MAX_CANDIDATES",
    "METHOD_EMPTINESS",
    "METHOD_DRIFT",
    "METHOD_MULTI",
    "METHOD_SINGLE",
    "METHOD_REPACK",
]

METHOD_EMPTINESS = DisruptionMethod.EMPTINESS
METHOD_DRIFT = DisruptionMethod.DRIFT
METHOD_MULTI = DisruptionMethod.MULTI_NODE_CONSOLIDATION
METHOD_SINGLE = DisruptionMethod.SINGLE_NODE_CONSOLIDATION
METHOD_REPACK = DisruptionMethod.REPACK_CONSOLIDATION

_METHODS = build_methods()
"""The methods with default settings, for :func:`validate_plan`."""


def _ordered(names: Iterable[DisruptionMethod | str], max_single_simulations: int | None,
             min_savings: float = DEFAULT_MIN_SAVINGS) -> list[Method]:
    """The methods to try, in the given order; ``ValueError`` for an unknown name."""
    by_name = build_methods(max_single_simulations=max_single_simulations, min_savings=min_savings)
    out: list[Method] = []
    for name in names:
        try:
            out.append(by_name[DisruptionMethod(name)])
        except ValueError:
            raise ValueError(f"unknown disruption method {name!r}") from None
    return out


def _pending_guard(ctx: PassContext, method: Method, cands: list[Candidate]) -> bool:
    """Consolidation waits while pending pods could be placed: True (and a ``keep`` line for each
    non-empty, unblocked candidate) when ``method`` must wait, else False."""
    if not method.consolidation:
        return False
    waiting = ctx.sim.schedulable_pending()
    if not waiting:
        return False
    for c in cands:
        if not c.blocked and not c.empty:
            ctx.keep(c, method.name, DecisionKind.PENDING_PODS,
                     f"{len(waiting)} pending pod(s) (e.g. {waiting[0]}) can be placed: consolidation waits for provisioning")
    return True


def plan_disruption(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    *,
    log: list[NodeDecision] | None = None,
    methods: Iterable[DisruptionMethod | str] = DEFAULT_ORDER,
    exclude: frozenset[str] = frozenset(),
    max_single_simulations: int | None = None,
    nominated: Mapping[str, float] | None = None,
    min_savings: float = DEFAULT_MIN_SAVINGS,
    feature_gates: FeatureGates | None = None,
    avoid: frozenset[str] = frozenset(),
) -> DisruptionPlan | None:
    """Decide one disruption command for ``snapshot`` at ``now``.

    Args:
        snapshot: nodes, NodeClaims, NodePools, pods, DaemonSets and PDBs read at one moment.
        instance_types: NodePool name -> the provider's instance types for it (prices, shapes).
        now: seconds since the epoch.
        log: when given, one :class:`NodeDecision` per node and stage considered is appended.
        methods: the methods to try, in order (default: Karpenter's four in Karpenter's order,
            then the repack); members of :class:`DisruptionMethod` or their values.
        exclude: node names not to consider (already queued in another command).
        max_single_simulations: stop single-node consolidation after this many simulations
            (a deterministic stand-in for Karpenter's 3-minute timeout); None for no limit.
        nominated: node/NodeClaim name -> epoch seconds until which it is nominated for pending
            pods; nominated nodes are not candidates (see :func:`build_candidates`).
        min_savings: the repack's minimum savings, a fraction in [0, 1) of the price of the nodes
            a command disrupts (a NodePool's ``karpy.sh/consolidation-min-savings`` wins).
        feature_gates: ``FEATURE_GATES`` (karpy's defaults when None): ``SpotToSpotConsolidation``
            lets consolidation replace spot nodes by cheaper spot ones.
        avoid: :meth:`DisruptionPlan.move_key` of the consolidations undone since the workload
            and the offerings last changed (the disruption controller's
            :class:`~karpy_core.controllers.disruption.undone.UndoneMoves`): a method whose
            command is one of them is passed over (the repack tries its next group).

    Returns:
        The first command found, or None. Never raises for cluster content; a NodePool with a
        malformed budget schedule raises ``ValueError`` (the API validation rejects those), as
        does an unknown method name.
    """
    with gc_paused():  # a pass allocates many long-lived objects and no cycles (see karpy_core.utils.gcpause)
        return run_steps(_plan(snapshot, instance_types, now, log, methods, exclude, max_single_simulations, nominated, min_savings,
                               feature_gates, avoid))


def plan_disruption_steps(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    *,
    log: list[NodeDecision] | None = None,
    methods: Iterable[DisruptionMethod | str] = DEFAULT_ORDER,
    exclude: frozenset[str] = frozenset(),
    max_single_simulations: int | None = None,
    nominated: Mapping[str, float] | None = None,
    min_savings: float = DEFAULT_MIN_SAVINGS,
    feature_gates: FeatureGates | None = None,
    avoid: frozenset[str] = frozenset(),
) -> Steps[DisruptionPlan | None]:
    """:func:`plan_disruption` (same arguments, same command, same ``log`` lines) as a generator
    that yields at its checkpoints: before each method, and inside the simulating methods before
    each simulation or candidate (:meth:`Method.steps`). The disruption controller drives it with
    :func:`~karpy_core.utils.steps.run_steps_async`, so the event loop (watches, provisioning, the
    leader Lease renewal) runs during a long pass; :func:`~karpy_core.utils.steps.run_steps` gives
    :func:`plan_disruption`'s result. The inputs must not change until it returns (a snapshot is
    immutable; the caller hands over fresh ``nominated``/``exclude``/``avoid`` values). Unlike
    :func:`plan_disruption` it does not pause the garbage collector: the driver does, per slice."""
    return _plan(snapshot, instance_types, now, log, methods, exclude, max_single_simulations, nominated, min_savings,
                 feature_gates, avoid)


def _plan(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    log: list[NodeDecision] | None,
    methods: Iterable[DisruptionMethod | str],
    exclude: frozenset[str],
    max_single_simulations: int | None,
    nominated: Mapping[str, float] | None,
    min_savings: float,
    feature_gates: FeatureGates | None,
    avoid: frozenset[str] = frozenset(),
) -> Steps[DisruptionPlan | None]:
    """:func:`plan_disruption`'s body (same arguments), yielding at its checkpoints."""
    order = _ordered(methods, max_single_simulations, min_savings)
    _log = log if log is not None else []
    cands = [c for c in build_candidates(snapshot, instance_types, now, log=_log, nominated=nominated) if c.name not in exclude]
    yield
    budgets = BudgetTracker(snapshot, now)
    yield
    # the bound pods, parsed in slices before the simulation context reads them (the first pass
    # parses every pod: seconds at 5,000 nodes); each view keeps its parse, so nothing else changes
    for i, p in enumerate(snapshot.pod_views):
        if p.bound:
            p.try_info()
        if i % 64 == 63:
            yield
    ctx = PassContext(now, SimulationContext(snapshot, instance_types), _log, feature_gates or FeatureGates(), instance_types,
                      avoid)
    for c in cands:
        if c.blocked:
            _log.append(NodeDecision(c.name, DecisionStage.CANDIDATE, Verdict.KEEP, c.blocked_kind or DecisionKind.DO_NOT_DISRUPT,
                                     c.blocked))
    for method in order:
        yield
        if _pending_guard(ctx, method, cands):
            return None
        plan = yield from method.steps(ctx, cands, budgets)
        if plan is not None and avoid and method.consolidation and plan.move_key() in avoid:
            for c in plan.candidates:
                ctx.keep(c, method.name, DecisionKind.UNDONE_BEFORE, "the same move was undone (a node launched for the pods "
                         "it moved) since the workload and the offerings last changed")
            budgets = BudgetTracker(snapshot, now)  # the passed-over command's nodes were taken from it
            continue
        if plan is not None:
            for c in plan.candidates:
                details = DecisionDetails(price=c.price, replacement_price=round(plan.replacement_price, 6), nodes=len(plan.candidates))
                _log.append(NodeDecision(c.name, plan.method, Verdict.DISRUPT, plan.decision, f"{plan.decision} ({plan.reason})", details))
            return plan
    return None


def validate_plan(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    plan: DisruptionPlan,
    nominated: Mapping[str, float] | None = None,
    min_savings: float = DEFAULT_MIN_SAVINGS,
    feature_gates: FeatureGates | None = None,
) -> Invalidation | None:
    """Re-check ``plan`` on a fresh snapshot after the validation delay (Karpenter
    ``validation.go``): every candidate must still be a candidate (not nominated for pending pods
    meanwhile: ``nominated`` as in :func:`plan_disruption`) for the same method, within
    budget, and a new simulation must give the same shape (delete, or one replacement whose
    instance types are a subset of the new simulation's; for the repack, as many replacements
    still within ``min_savings``: :meth:`RepackConsolidation.revalidate`). Returns None when
    valid, else why not (kind and message). The same ``feature_gates`` as the plan."""
    method = _METHODS[plan.method]
    cands = {c.name: c for c in build_candidates(snapshot, instance_types, now, nominated=nominated)}
    budgets = BudgetTracker(snapshot, now)
    fresh: list[Candidate] = []
    for old in plan.candidates:
        c, problem = _candidate_problem(cands, budgets, method, plan, old.name, now)
        if problem is not None:
            return problem
        assert c is not None
        fresh.append(c)
    if not method.needs_resimulation(fresh):
        return None
    ctx = SimulationContext(snapshot, instance_types)
    if method.consolidation and ctx.schedulable_pending():
        return Invalidation(DecisionKind.PENDING_PODS, "pending pods can be placed: consolidation waits for provisioning")
    gates = feature_gates or FeatureGates()
    if isinstance(method, RepackConsolidation):
        return RepackConsolidation(min_savings=min_savings).revalidate(ctx, fresh, plan, spot_to_spot=gates.SpotToSpotConsolidation)
    ev = evaluate(ctx, fresh, consolidation=method.consolidation, spot_to_spot=gates.SpotToSpotConsolidation)
    if ev.problem is not None:
        return Invalidation(ev.problem.kind, f"re-simulation failed: {ev.why}")
    if len(ev.replacements) != len(plan.replacements):
        return Invalidation(DecisionKind.REPLACEMENTS_CHANGED,
                            f"re-simulation needs {len(ev.replacements)} replacement(s), the command has {len(plan.replacements)}")
    if method.consolidation and plan.replacements:
        new_types = {it.name for it in ev.replacements[0].instance_types}
        if not {it.name for it in plan.replacements[0].instance_types} <= new_types:
            return Invalidation(DecisionKind.REPLACEMENT_TYPES_CHANGED, "replacement instance types are no longer all valid")
    return None


def _candidate_problem(cands: Mapping[str, Candidate], budgets: BudgetTracker, method: Method, plan: DisruptionPlan,
                       name: str, now: float) -> tuple[Candidate | None, Invalidation | None]:
    """The fresh candidate ``name`` of ``plan`` and None, or None and why it no longer holds (not
    a candidate, blocked, over budget - its budget is taken when it holds - or no longer what
    ``method`` disrupts)."""
    c = cands.get(name)
    if c is None:
        return None, Invalidation(DecisionKind.NO_LONGER_CANDIDATE, f"{name} is no longer a disruption candidate")
    if c.blocked and not method.may_disrupt_blocked(c):
        return None, Invalidation(c.blocked_kind or DecisionKind.DO_NOT_DISRUPT, f"{name}: {c.blocked}")
    if budgets.left(c, plan.reason) < 1:
        return None, Invalidation(DecisionKind.BUDGET_EXHAUSTED, f"{name}: the disruption budget allows 0 more ({plan.reason})")
    budgets.take(c, plan.reason)
    problem = method.still_applies(c, now)
    return (None, problem) if problem is not None else (c, None)


def narrow_emptiness(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    plan: DisruptionPlan,
    nominated: Mapping[str, float] | None = None,
) -> tuple[DisruptionPlan | None, list[tuple[str, Invalidation]]]:
    """An emptiness command after its validation delay, without the nodes that no longer hold
    (Karpenter ``validation.go`` ``EmptinessValidator``: the candidates still empty, not nominated
    and within budget go ahead; the command fails only when none is left). Returns the narrowed
    plan (``plan`` itself when every node holds, None when none does) and each dropped node with
    why. Any other method's plan is returned as it is: its validation is all or nothing
    (:func:`validate_plan`), as Karpenter's consolidation validation is."""
    if plan.method is not DisruptionMethod.EMPTINESS:
        return plan, []
    method = _METHODS[plan.method]
    cands = {c.name: c for c in build_candidates(snapshot, instance_types, now, nominated=nominated)}
    budgets = BudgetTracker(snapshot, now)
    fresh: list[Candidate] = []
    dropped: list[tuple[str, Invalidation]] = []
    for old in plan.candidates:
        c, problem = _candidate_problem(cands, budgets, method, plan, old.name, now)
        if problem is not None:
            dropped.append((old.name, problem))
        elif c is not None:
            fresh.append(c)
    if not dropped:
        return plan, []
    if not fresh:
        return None, dropped
    return replace(plan, candidates=fresh, price=sum(c.price or 0.0 for c in fresh)), dropped


SKIP_KINDS = frozenset({DecisionKind.SIMULATION_LIMIT})
"""The ``keep`` kinds that mean a method did not examine a candidate at all (its per-pass budget of
simulations ran out), as opposed to examining it and keeping it."""


@dataclass(frozen=True, slots=True)
class PassCoverage:
    """What one pass examined, read from its decision log (issue 36: Karpenter's multi- and
    single-node consolidation give up after 1 and 3 minutes, ``MultiNodeConsolidationTimeoutDuration``
    and ``SingleNodeConsolidationTimeoutDuration`` in ``pkg/controllers/disruption``, and leave
    the rest unexamined without saying which; karpy's methods examine every candidate, except
    where a method's own budget of simulations runs out, and then say which they skipped).

    Attributes:
        examined: method value -> candidates (nodes) the method wrote a decision line for.
        skipped: method value -> decision kind value -> candidates the method skipped unexamined
            (:data:`SKIP_KINDS`).
        skipped_nodes: method value -> the names of those candidates, in log order.
    """

    examined: Mapping[str, int]
    skipped: Mapping[str, Mapping[str, int]]
    skipped_nodes: Mapping[str, tuple[str, ...]]

    @property
    def complete(self) -> bool:
        """True when no method skipped a candidate."""
        return not self.skipped

    def to_dict(self) -> dict[str, Any]:
        """Plain values (for JSON): ``examined``, ``skipped`` as above."""
        return {"examined": dict(self.examined), "skipped": {m: dict(k) for m, k in self.skipped.items()}}


def pass_coverage(log: Iterable[NodeDecision]) -> PassCoverage:
    """The :class:`PassCoverage` of a pass's decision ``log`` (``plan_disruption(log=...)``)."""
    examined: dict[str, set[str]] = {}
    skipped: dict[str, dict[str, int]] = {}
    nodes: dict[str, list[str]] = {}
    for line in log:
        if line.method is DecisionStage.CANDIDATE:
            continue
        method = str(line.method)
        examined.setdefault(method, set()).add(line.node)
        if line.kind in SKIP_KINDS:
            kinds = skipped.setdefault(method, {})
            kinds[line.kind.value] = kinds.get(line.kind.value, 0) + 1
            nodes.setdefault(method, []).append(line.node)
    return PassCoverage({m: len(v) for m, v in examined.items()}, skipped, {m: tuple(v) for m, v in nodes.items()})
