"""The disruption planner: a snapshot and ``now`` in, one :class:`DisruptionPlan` (or None) out.

Methods, in Karpenter's order, the first that yields a command wins
(``pkg/controllers/disruption/controller.go``):

1. **emptiness** (``emptiness.go``): every empty, ``Consolidatable`` candidate within its pool's
   ``Empty`` budget, deleted together;
2. **drift** (``drift.go``): the first ``Drifted`` candidate (empty ones first, then oldest) within
   the ``Drifted`` budget whose pods all fit elsewhere, with as many replacements as they need;
3. **multi-node consolidation** (``multinodeconsolidation.go``): the first 100 consolidation
   candidates within the ``Underutilized`` budget; the largest prefix (at least 2) that can be
   deleted, or replaced by one cheaper node, found by binary search;
4. **single-node consolidation** (``singlenodeconsolidation.go``): the first candidate that can be
   deleted (its pods fit on other nodes) or replaced by one cheaper node.

Simulation (``helpers.go`` ``SimulateScheduling``): a fresh :class:`~karpy_core.scheduling.scheduler.Scheduler`
over the cluster without the candidates, solving the candidates' pods. A command is rejected if a
pod cannot be placed, lands on a node that is not initialized yet, or needs more than one new
node (consolidation). A replacement keeps only the instance types whose worst compatible offering
costs less than the candidates together (``WorstLaunchPrice`` < Σ price); spot candidates are
never replaced by spot (``SpotToSpotConsolidation`` is off by default).

Consolidation waits while pending pods could be placed (on a node or a new NodeClaim): their
capacity is still being decided. Karpenter adds pending pods to the consolidation simulation, and
any new NodeClaim they need then rules out a delete; karpy reaches the same outcome by checking
once per pass. Pending pods that cannot schedule anywhere (an impossible selector, a NodePool
limit) do not hold consolidation back, as in Karpenter.

Pure: no I/O, no clock, sorted iteration; same snapshot and ``now``, same plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.budgets import (
    REASON_DRIFTED,
    REASON_EMPTY,
    REASON_UNDERUTILIZED,
    allowed_disruptions,
)
from karpy_core.controllers.disruption.candidates import (
    Candidate,
    NodeDecision,
    build_candidates,
    disrupting_counts,
)
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.scheduling.requirements import Requirement
from karpy_core.scheduling.resources import Resources, add_into, parse_resource_list, subtract
from karpy_core.scheduling.scheduler import PlannedNodeClaim, Scheduler
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable, template_from_nodepool, type_tables
from karpy_core.state.cluster import (
    ClusterSnapshot,
    bound_pod_infos,
    daemonset_pod_infos,
    existing_nodes,
    nodepool_usage,
    ready_nodepools,
)

__all__ = [
    "DisruptionPlan",
    "plan_disruption",
    "validate_plan",
    "MULTI_NODE_MAX_CANDIDATES",
    "METHOD_EMPTINESS",
    "METHOD_DRIFT",
    "METHOD_MULTI",
    "METHOD_SINGLE",
]

METHOD_EMPTINESS = "emptiness"
METHOD_DRIFT = "drift"
METHOD_MULTI = "multi-node-consolidation"
METHOD_SINGLE = "single-node-consolidation"

MULTI_NODE_MAX_CANDIDATES = 100
"""Candidates multi-node consolidation considers at once (Karpenter ``MultiNodeConsolidation``)."""


@dataclass
class DisruptionPlan:
    """One disruption command.

    Attributes:
        method: ``emptiness``, ``drift``, ``multi-node-consolidation`` or ``single-node-consolidation``.
        reason: the budget reason: ``Empty``, ``Drifted`` or ``Underutilized``.
        candidates: the nodes to disrupt (in decision order).
        replacements: NodeClaims to create first (``nodeclaim_from_plan``), each Initialized
            before any candidate is deleted.
        price: Σ candidate prices, USD/hour (0 when unknown).
        replacement_price: Σ cheapest replacement prices, USD/hour.
    """

    method: str
    reason: str
    candidates: list[Candidate]
    replacements: list[PlannedNodeClaim] = field(default_factory=list)
    price: float = 0.0
    replacement_price: float = 0.0

    @property
    def decision(self) -> str:
        """``delete`` or ``replace``."""
        return "replace" if self.replacements else "delete"

    @property
    def savings_per_hour(self) -> float:
        return round(self.price - self.replacement_price, 6)

    def describe(self) -> str:
        names = ", ".join(c.name for c in self.candidates)
        out = f"{self.method}: {self.decision} {names}"
        if self.replacements:
            types = ", ".join(it.name for it in self.replacements[0].instance_types[:3])
            out += f" with {len(self.replacements)} node(s) [{types}...]"
        return out + f" ({self.price:.4f} -> {self.replacement_price:.4f} USD/hour)"


@dataclass
class _Evaluation:
    ok: bool
    why: str
    replacements: list[PlannedNodeClaim] = field(default_factory=list)
    replacement_price: float = 0.0


class _Context:
    """Per-pass precomputation shared by every simulation: templates, DaemonSets, the cluster's
    nodes as scheduler values and the pods bound to them."""

    def __init__(self, snapshot: ClusterSnapshot, instance_types: dict[str, list[InstanceType]]):
        self.snapshot = snapshot
        self.templates: list[NodePoolTemplate] = []
        for np_obj in (pool.raw for pool in ready_nodepools(snapshot)[0]):
            self.templates.append(template_from_nodepool(np_obj, instance_types.get(np_obj["metadata"]["name"], [])))
        startup = {t.name: t.startup_taints for t in self.templates}
        self.nodes = existing_nodes(snapshot, startup)
        self.daemonsets = daemonset_pod_infos(snapshot.daemonsets)
        self.bound = bound_pod_infos(snapshot)
        self.usage = nodepool_usage(snapshot)
        self._tables: dict[str, TypeTable] | None = None
        self._pod_infos: dict[str, PodInfo] = {}
        self._schedulable_pending: list[str] | None = None

    def schedulable_pending(self) -> list[str]:
        """``ns/name`` of the pending pods a scheduler over the whole cluster would place (on a
        node or a new NodeClaim); computed once per pass. Pods that cannot be parsed or placed are
        left out: they do not wait on consolidation."""
        if self._schedulable_pending is None:
            infos = []
            for p in self.snapshot.pending_pods():
                try:
                    infos.append(pod_info(p))
                except ValueError:
                    continue
            if not infos:
                self._schedulable_pending = []
            else:
                sched, _ = self.scheduler(set(), {})
                results = sched.solve(infos)
                self._schedulable_pending = sorted(i.key for i in infos if i.key not in results.errors)
        return self._schedulable_pending

    def pod_infos(self, cand: Candidate) -> list[PodInfo] | str:
        out = []
        for p in cand.pods:
            key = f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
            info = self._pod_infos.get(key)
            if info is None:
                try:
                    raw = {**p, "spec": {k: v for k, v in (p.get("spec") or {}).items() if k != "nodeName"}}
                    info = pod_info(raw)
                except ValueError as exc:
                    return f"pod {key} cannot be simulated: {exc}"
                self._pod_infos[key] = info
            out.append(info)
        return out

    def scheduler(self, removed: set[str], removed_claims: dict[str, Resources]) -> tuple[Scheduler, set[str]]:
        """A fresh scheduler over every node but ``removed``; returns it and the names of the
        uninitialized nodes (in-flight claims) it may place pods on."""
        nodes = [n for n in self.nodes if n.name not in removed]  # the scheduler never modifies them
        usage = {k: dict(v) for k, v in self.usage.items()}
        for pool, cap in removed_claims.items():
            if pool in usage:
                usage[pool] = {r: v for r, v in subtract(usage[pool], cap).items()}
        bound = [b for b in self.bound if b.node_name not in removed]
        if self._tables is None:  # type tables are pure functions of (template, DaemonSets): build once
            self._tables = type_tables(self.templates, self.daemonsets)
        sched = Scheduler(self.templates, nodes, self.daemonsets, usage, bound_pods=bound, tables=self._tables)
        return sched, {n.name for n in nodes if not n.initialized}


def _claim_capacity(cands: Sequence[Candidate]) -> dict[str, Resources]:
    out: dict[str, Resources] = {}
    for c in cands:
        status = c.nodeclaim.get("status") or {}
        cap = status.get("capacity") or ((c.nodeclaim.get("spec") or {}).get("resources") or {}).get("requests") or {}
        acc = out.setdefault(c.nodepool, {})
        add_into(acc, parse_resource_list(cap))
        acc["nodes"] = acc.get("nodes", 0) + 1
    return out


def _worst_price(it: InstanceType, plan: PlannedNodeClaim) -> float:
    offers = it.compatible_offerings(plan.requirements)
    return max((o.price for o in offers), default=float("inf"))


def _evaluate(ctx: _Context, cands: Sequence[Candidate], *, consolidation: bool) -> _Evaluation:
    """Simulate removing ``cands``: where do their pods go?"""
    pods: list[PodInfo] = []
    for c in cands:
        infos = ctx.pod_infos(c)
        if isinstance(infos, str):
            return _Evaluation(False, infos)
        pods.extend(infos)
    sched, uninitialized = ctx.scheduler({c.name for c in cands}, _claim_capacity(cands))
    results = sched.solve(pods)
    if results.errors:
        key, why = sorted(results.errors.items())[0]
        return _Evaluation(False, f"pod {key} would not schedule: {why}")
    for key, node in sorted(results.existing.items()):
        if node in uninitialized:
            return _Evaluation(False, f"pod {key} would land on {node}, which is not initialized yet")
    claims = results.new_claims
    if not consolidation:
        return _Evaluation(True, "pods fit", claims, sum(c.cheapest_offering_price() for c in claims))
    if not claims:
        return _Evaluation(True, "pods fit on other nodes")
    if len(claims) > 1:
        return _Evaluation(False, f"pods would need {len(claims)} new nodes (at most 1 for consolidation)")
    claim = claims[0]
    total = sum(c.price or 0.0 for c in cands)
    if any(c.price is None for c in cands):
        return _Evaluation(False, "current price unknown")
    cheaper = [it for it in claim.instance_types if _worst_price(it, claim) < total]
    if not cheaper:
        return _Evaluation(False, f"no instance type cheaper than {total:.4f} USD/hour fits the pods")
    reqs = claim.requirements.copy()
    reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in cheaper)))
    if all(c.capacity_type == "spot" for c in cands):
        # SpotToSpotConsolidation is off by default: spot candidates may only move to on-demand
        ct = reqs.get(LABEL_CAPACITY_TYPE)
        if ct is not None and not ct.has("on-demand"):
            return _Evaluation(False, "spot-to-spot consolidation is disabled (SpotToSpotConsolidation gate)")
        reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset({"on-demand"})))
        pinned = dataclasses.replace(claim, requirements=reqs)
        cheaper = [it for it in cheaper if _worst_price(it, pinned) < total]
        if not cheaper:
            return _Evaluation(False, "spot-to-spot consolidation is disabled and no cheaper on-demand type fits")
        reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in cheaper)))
    replacement = dataclasses.replace(claim, instance_types=cheaper, requirements=reqs)
    return _Evaluation(True, "replace with a cheaper node", [replacement], replacement.cheapest_offering_price())


class _Budgets:
    def __init__(self, snapshot: ClusterSnapshot, now: float):
        self.now = now
        self.total, self.disrupting = disrupting_counts(snapshot)
        self.used: dict[tuple[str, str], int] = {}

    def left(self, cand: Candidate, reason: str) -> int:
        allowed = allowed_disruptions(cand.pool, reason, self.now, total=self.total.get(cand.nodepool, 0),
                                      disrupting=self.disrupting.get(cand.nodepool, 0))
        return allowed - self.used.get((cand.nodepool, reason), 0)

    def take(self, cand: Candidate, reason: str) -> None:
        self.used[(cand.nodepool, reason)] = self.used.get((cand.nodepool, reason), 0) + 1


def _policy(cand: Candidate) -> str:
    return ((cand.pool.get("spec") or {}).get("disruption") or {}).get("consolidationPolicy", "WhenEmptyOrUnderutilized")


def _score(c: Candidate) -> tuple[float, str]:
    return (-(c.price or 0.0) / max(c.disruption_cost, 1e-9), c.name)


def _fits_somewhere(ctx: _Context, cand: Candidate, free_total: Resources) -> bool:
    """Cheap necessary condition before a simulation: the candidate's pods fit in the free
    capacity of all other nodes together, or in one instance type of the pool costing less."""
    need: Resources = {}
    infos = ctx.pod_infos(cand)
    for p in infos if not isinstance(infos, str) else []:
        add_into(need, p.requests)
    own = next((n for n in ctx.nodes if n.name == cand.name), None)
    others = subtract(free_total, own.free()) if own is not None else free_total
    if all(others.get(r, 0) >= v for r, v in need.items() if r in ("cpu", "memory")):
        return True
    if cand.price is None:
        return False
    for t in ctx.templates:
        if t.name != cand.nodepool:
            continue
        for it in t.instance_types:
            offers = [o.price for o in it.offerings if o.available]
            if offers and min(offers) < cand.price and all(it.allocatable.get(r, 0) >= v for r, v in need.items()
                                                          if r in ("cpu", "memory")):
                return True
    return False


def plan_disruption(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    *,
    log: list[NodeDecision] | None = None,
    methods: Sequence[str] = (METHOD_EMPTINESS, METHOD_DRIFT, METHOD_MULTI, METHOD_SINGLE),
    exclude: frozenset[str] = frozenset(),
    max_single_simulations: int | None = None,
    nominated: Mapping[str, float] | None = None,
) -> DisruptionPlan | None:
    """Decide one disruption command for ``snapshot`` at ``now``.

    Args:
        snapshot: nodes, NodeClaims, NodePools, pods, DaemonSets and PDBs read at one moment.
        instance_types: NodePool name -> the provider's instance types for it (prices, shapes).
        now: seconds since the epoch.
        log: when given, one :class:`NodeDecision` per node and method considered is appended.
        methods: the methods to try, in order (default: all four).
        exclude: node names not to consider (already queued in another command).
        max_single_simulations: stop single-node consolidation after this many simulations
            (a deterministic stand-in for Karpenter's 3-minute timeout); None for no limit.
        nominated: node/NodeClaim name -> epoch seconds until which it is nominated for pending
            pods; nominated nodes are not candidates (see :func:`build_candidates`).

    Returns:
        The first command found, or None. Never raises for cluster content; a NodePool with a
        malformed budget schedule raises ``ValueError`` (the API validation rejects those).
    """
    _log = log if log is not None else []
    cands = [c for c in build_candidates(snapshot, instance_types, now, log=_log, nominated=nominated) if c.name not in exclude]
    budgets = _Budgets(snapshot, now)
    ctx = _Context(snapshot, instance_types)

    def note(c: Candidate, method: str, verdict: str, reason: str, **details: Any) -> None:
        _log.append(dataclasses.replace(NodeDecision(c.name, method, verdict, reason), details=details))

    voluntary = []
    for c in cands:
        if c.blocked:
            note(c, "candidate", "keep", c.blocked)
        else:
            voluntary.append(c)

    for method in methods:
        if method == METHOD_EMPTINESS:
            plan = _emptiness(voluntary, budgets, now, note)
        elif method == METHOD_DRIFT:
            drift_cands = [c for c in cands if not c.blocked or _has_tgp(c)]
            plan = _drift(ctx, drift_cands, budgets, note)
        elif ctx.schedulable_pending():
            waiting = ctx.schedulable_pending()
            for c in voluntary:
                if not c.empty:
                    note(c, method, "keep", f"{len(waiting)} pending pod(s) (e.g. {waiting[0]}) can be placed: "
                                            "consolidation waits for provisioning")
            return None
        elif method == METHOD_MULTI:
            plan = _multi(ctx, _consolidation_candidates(voluntary, now, note, method), budgets, note)
        elif method == METHOD_SINGLE:
            plan = _single(ctx, _consolidation_candidates(voluntary, now, note, method), budgets, note,
                           max_single_simulations)
        else:
            raise ValueError(f"unknown disruption method {method!r}")
        if plan is not None:
            for c in plan.candidates:
                note(c, plan.method, "disrupt", f"{plan.decision} ({plan.reason})", price=c.price,
                     replacement_price=round(plan.replacement_price, 6), nodes=len(plan.candidates))
            return plan
    return None


def _has_tgp(c: Candidate) -> bool:
    return bool((c.nodeclaim.get("spec") or {}).get("terminationGracePeriod"))


def _emptiness(cands: list[Candidate], budgets: _Budgets, now: float, note: Any) -> DisruptionPlan | None:
    chosen = []
    for c in cands:
        if not c.empty:
            continue
        if c.consolidatable_at is None:
            note(c, METHOD_EMPTINESS, "keep", "empty, but consolidateAfter is Never")
            continue
        if now < c.consolidatable_at:
            note(c, METHOD_EMPTINESS, "keep", f"empty, consolidatable in {c.consolidatable_at - now:.0f}s (consolidateAfter)")
            continue
        if budgets.left(c, REASON_EMPTY) < 1:
            note(c, METHOD_EMPTINESS, "keep", "empty, but the NodePool's disruption budget allows 0 more (Empty)",
                 budget=REASON_EMPTY)
            continue
        budgets.take(c, REASON_EMPTY)
        chosen.append(c)
    if not chosen:
        return None
    return DisruptionPlan(METHOD_EMPTINESS, REASON_EMPTY, chosen, price=sum(c.price or 0.0 for c in chosen))


def _drift(ctx: _Context, cands: list[Candidate], budgets: _Budgets, note: Any) -> DisruptionPlan | None:
    drifted = sorted((c for c in cands if c.drifted), key=lambda c: (not c.empty, c.created, c.name))
    for c in drifted:
        if budgets.left(c, REASON_DRIFTED) < 1:
            note(c, METHOD_DRIFT, "keep", f"drifted ({c.drifted}), but the disruption budget allows 0 more (Drifted)",
                 budget=REASON_DRIFTED)
            continue
        ev = _evaluate(ctx, [c], consolidation=False)
        if not ev.ok:
            note(c, METHOD_DRIFT, "keep", f"drifted, but {ev.why}")
            continue
        budgets.take(c, REASON_DRIFTED)
        return DisruptionPlan(METHOD_DRIFT, REASON_DRIFTED, [c], ev.replacements, c.price or 0.0, ev.replacement_price)
    return None


def _consolidation_candidates(cands: list[Candidate], now: float, note: Any, method: str) -> list[Candidate]:
    out = []
    for c in cands:
        if c.empty:
            continue  # emptiness' business
        if _policy(c) == "WhenEmpty":
            note(c, method, "keep", "consolidationPolicy is WhenEmpty and the node is not empty")
        elif c.consolidatable_at is None:
            note(c, method, "keep", "consolidateAfter is Never")
        elif now < c.consolidatable_at:
            note(c, method, "keep", f"not consolidatable for {c.consolidatable_at - now:.0f}s more (consolidateAfter)")
        elif c.price is None:
            note(c, method, "keep", f"price of {c.instance_type} ({c.zone}, {c.capacity_type}) unknown")
        else:
            out.append(c)
    return sorted(out, key=_score)


def _multi(ctx: _Context, cands: list[Candidate], budgets: _Budgets, note: Any) -> DisruptionPlan | None:
    within: list[Candidate] = []
    taken: dict[str, int] = {}
    for c in cands:
        if len(within) >= MULTI_NODE_MAX_CANDIDATES:
            break
        if budgets.left(c, REASON_UNDERUTILIZED) - taken.get(c.nodepool, 0) < 1:
            continue
        taken[c.nodepool] = taken.get(c.nodepool, 0) + 1
        within.append(c)
    if len(within) < 2:
        return None
    best: tuple[list[Candidate], _Evaluation] | None = None
    lo, hi = 1, len(within) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        prefix = within[: mid + 1]
        ev = _evaluate(ctx, prefix, consolidation=True)
        if ev.ok:
            best = (prefix, ev)
            lo = mid + 1
        else:
            hi = mid - 1
    if best is None:
        return None
    prefix, ev = best
    if ev.replacements and len({c.instance_type for c in prefix}) == 1 and \
            {it.name for it in ev.replacements[0].instance_types} <= {prefix[0].instance_type}:
        return None  # filterOutSameInstanceType: no point replacing N nodes by one of the same type
    for c in prefix:
        budgets.take(c, REASON_UNDERUTILIZED)
    return DisruptionPlan(METHOD_MULTI, REASON_UNDERUTILIZED, prefix, ev.replacements,
                          sum(c.price or 0.0 for c in prefix), ev.replacement_price)


def _single(ctx: _Context, cands: list[Candidate], budgets: _Budgets, note: Any,
            max_simulations: int | None) -> DisruptionPlan | None:
    free_total: Resources = {}
    for n in ctx.nodes:
        if n.initialized:
            add_into(free_total, {r: max(0, v) for r, v in n.free().items()})
    sims = 0
    for c in cands:
        if budgets.left(c, REASON_UNDERUTILIZED) < 1:
            note(c, METHOD_SINGLE, "keep", "the disruption budget allows 0 more (Underutilized)", budget=REASON_UNDERUTILIZED)
            continue
        if not _fits_somewhere(ctx, c, free_total):
            note(c, METHOD_SINGLE, "keep", "its pods fit neither on the other nodes nor on a cheaper type", price=c.price)
            continue
        if max_simulations is not None and sims >= max_simulations:
            note(c, METHOD_SINGLE, "keep", "not evaluated this pass (simulation limit reached)")
            continue
        sims += 1
        ev = _evaluate(ctx, [c], consolidation=True)
        if not ev.ok:
            note(c, METHOD_SINGLE, "keep", ev.why, price=c.price)
            continue
        budgets.take(c, REASON_UNDERUTILIZED)
        return DisruptionPlan(METHOD_SINGLE, REASON_UNDERUTILIZED, [c], ev.replacements, c.price or 0.0, ev.replacement_price)
    return None


def validate_plan(
    snapshot: ClusterSnapshot,
    instance_types: dict[str, list[InstanceType]],
    now: float,
    plan: DisruptionPlan,
    nominated: Mapping[str, float] | None = None,
) -> str | None:
    """Re-check ``plan`` on a fresh snapshot after the validation delay (Karpenter
    ``validation.go``): every candidate must still be a candidate (not nominated for pending pods
    meanwhile: ``nominated`` as in :func:`plan_disruption`) for the same method, within
    budget, and a new simulation must give the same shape (delete, or one replacement whose
    instance types are a subset of the new simulation's). Returns None when valid, else why not."""
    cands = {c.name: c for c in build_candidates(snapshot, instance_types, now, nominated=nominated)}
    budgets = _Budgets(snapshot, now)
    fresh: list[Candidate] = []
    for old in plan.candidates:
        c = cands.get(old.name)
        if c is None:
            return f"{old.name} is no longer a disruption candidate"
        if c.blocked and not (plan.method == METHOD_DRIFT and _has_tgp(c)):
            return f"{old.name}: {c.blocked}"
        if budgets.left(c, plan.reason) < 1:
            return f"{old.name}: the disruption budget allows 0 more ({plan.reason})"
        budgets.take(c, plan.reason)
        if plan.method == METHOD_EMPTINESS and not (c.empty and c.consolidatable(now)):
            return f"{old.name} is no longer empty and consolidatable"
        if plan.method == METHOD_DRIFT and not c.drifted:
            return f"{old.name} is no longer drifted"
        if plan.method in (METHOD_MULTI, METHOD_SINGLE) and not c.consolidatable(now):
            return f"{old.name} is no longer consolidatable"
        fresh.append(c)
    if plan.method == METHOD_EMPTINESS:
        return None
    if plan.method == METHOD_DRIFT and all(c.empty for c in fresh):
        return None
    ctx = _Context(snapshot, instance_types)
    if plan.method in (METHOD_MULTI, METHOD_SINGLE) and ctx.schedulable_pending():
        return "pending pods can be placed: consolidation waits for provisioning"
    ev = _evaluate(ctx, fresh, consolidation=plan.method != METHOD_DRIFT)
    if not ev.ok:
        return f"re-simulation failed: {ev.why}"
    if len(ev.replacements) != len(plan.replacements):
        return f"re-simulation needs {len(ev.replacements)} replacement(s), the command has {len(plan.replacements)}"
    if plan.method != METHOD_DRIFT and plan.replacements:
        new_types = {it.name for it in ev.replacements[0].instance_types}
        if not {it.name for it in plan.replacements[0].instance_types} <= new_types:
            return "replacement instance types are no longer all valid"
    return None
