"""Repack consolidation (karpy's own; Karpenter has no counterpart): replace N nodes by M cheaper
ones for any M, including the 1 -> 2 splits and N -> M merges Karpenter's consolidation never
makes (it replaces 1 node by 1 cheaper node or N by 1, kubernetes-sigs/karpenter#1962).

Tried after Karpenter's four methods, so it only acts where they find nothing. Each pass:

1. the consolidation candidates (:meth:`Consolidation.consider`: unblocked by do-not-disrupt and
   PDBs, non-empty, ``Consolidatable``, price known), in consolidation order, within the
   ``Underutilized`` budget of their NodePools;
2. groups, in this order until :data:`REPACK_MAX_SIMULATIONS` scheduler runs are spent: each
   candidate alone (a split), and after the i-th candidate the prefix of the first i+1 (a merge),
   up to :data:`REPACK_MAX_GROUP` nodes; a prefix only takes candidates its pools' budgets allow
   together;
3. per group, the provisioning scheduler plans its pods with the group removed, once over the
   NodePools' full instance type lists with new claims sized by cost (the fresh-plan machinery
   that sizes new NodeClaims for pending pods: ``Scheduler(sizing=True)``), and once per *size
   cap* (only the types with at most ``c`` allocatable millicores, for each distinct ``c``
   between the largest pod and the group's total request), those filling each claim while its
   largest type fits. A group with a pod carrying topology rules is never sized: its sized solve
   would plan every size cap and marginal-cost variant, seconds for a few hundred pods. Sizing
   the uncapped run brought ``benchmarks/repack.py``'s oddratio-72, after a 70% scale-down,
   from 1.152x to 1.041x of the remaining pods' lower bound (the fresh plan's cost), no other
   workload changed, in about the same simulation time; sizing every capped run as well changed
   nothing more and made passes up to 15x slower. A capped run
   makes the scheduler fill smaller claims, which on a price-linear catalog is how "one big node"
   becomes "two smaller, cheaper ones"; the cheapest run wins. Pods may also move onto other
   nodes' free room (the :data:`REPACK_NEIGHBOURS` roomiest when no topology constraint is
   involved, else every node). A run is rejected when a pod does not schedule or would land on a node that
   is not initialized, and when kube-scheduler would not reproduce it: the run packs the pods one
   exact way, but once evicted they are placed by kube-scheduler, first fit in its own order
   (:func:`~karpy_core.scheduling.kubescheduler.moved_pods_fit`, the placement the simulator's
   stand-in binds with, replayed with the replacements at their smallest and first or last by
   name); where that leaves a pod pending, the provisioner would launch a node for it and the
   saving is gone (issue 34: a 1% threshold on a memory-heavy mix repacked every 100 s for 8
   hours). Such a run is made roomier (:func:`_with_slack`: a replacement gives up its smallest
   types, up to :data:`REPACK_SLACK_STEPS` times, while the threshold holds) before the next
   cheapest run is tried; a group whose every qualifying run fails says
   ``kube-scheduler-misfit``;
4. churn control: the command must save at least ``min_savings`` (a fraction) of the price of the
   nodes it disrupts: ``Σ price - Σ replacement price >= min_savings x Σ price`` (USD/hour), with
   each replacement priced at the worst offering of the instance types it keeps (the price
   Karpenter's consolidation checks, ``WorstLaunchPrice``). ``min_savings`` is the controller's
   ``KARPY_CONSOLIDATION_MIN_SAVINGS`` (default :data:`DEFAULT_MIN_SAVINGS`) unless a candidate's
   NodePool sets the ``karpy.sh/consolidation-min-savings`` annotation; a group spanning pools
   takes the strictest. Each replacement keeps the types whose worst price fits the slack left
   after the cheapest choice (shared equally between the replacements), so any launch meets the
   threshold, and no fewer than the NodePool's ``minValues`` ask. Spot candidates are only
   replaced by on-demand with ``SpotToSpotConsolidation`` off; with it on, by spot too, where a
   spot replacement keeps at least 15 instance types (:func:`_priced`);
5. the group saving the most USD/hour wins (ties: fewer nodes, then the order above; a move
   undone since the workload and the offerings last changed, ``PassContext.avoid``, is passed
   over: ``undone-before``); its
   replacements are launched and Initialized before the candidates are drained (the disruption
   controller's replace-before-delete), after the 15 s validation delay and a re-run of
   :func:`repack_group` on a fresh snapshot (:meth:`RepackConsolidation.revalidate`).

Every command saves a positive amount, at least ``min_savings`` of what it disrupts, so a run of
commands on an unchanged workload ends: the cost is bounded below and falls each time.

The command's budget reason is ``Underutilized``, as Karpenter's consolidation reports it.

Pure: no I/O, no clock; same snapshot, same command.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DecisionDetails, DecisionKind, DisruptionMethod, Invalidation
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.methods.consolidation import Consolidation
from karpy_core.controllers.disruption.methods.consolidation_multi import MULTI_NODE_MAX_CANDIDATES
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import SimulationContext, claim_capacity, drain_waves, worst_prices
from karpy_core.controllers.disruption.spot_to_spot import MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT, allows_spot
from karpy_core.scheduling.kubescheduler import moved_pods_fit, replacement_node
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.requirements import Requirement
from karpy_core.scheduling.resources import Resources, subtract
from karpy_core.scheduling.scheduler import PlannedNodeClaim, Scheduler
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable, type_tables
from karpy_core.state.views import NodePoolView
from karpy_core.utils.steps import Steps, run_steps

__all__ = [
    "ANNOTATION_MIN_SAVINGS",
    "DEFAULT_MIN_SAVINGS",
    "REPACK_MAX_GROUP",
    "REPACK_MAX_SIMULATIONS",
    "RepackConsolidation",
    "RepackOutcome",
    "min_savings_of",
    "parse_min_savings",
    "repack_group",
    "repack_group_steps",
]

ANNOTATION_MIN_SAVINGS = "karpy.sh/consolidation-min-savings"
"""NodePool annotation overriding the controller's minimum savings fraction for its nodes, e.g.
``"0.2"``: a repack must save at least 20 % of the price of the nodes it disrupts. karpy's own
prefix: Karpenter has no such setting."""

DEFAULT_MIN_SAVINGS = 0.10
"""The default minimum savings fraction. 10 %: a split or merge of on-demand nodes in a
price-linear family saves 25-50 % when it is worth doing (a 16-vCPU node holding 10 vCPU of pods
becomes 8 + 4 vCPU: 25 %), so the default lets those through, while moves that only shave a few
percent (a memory-optimized type for a general-purpose one at close prices, a 5 % zone price
difference) do not evict pods. It is also the ``1 - ConsolidationPriceImprovementFactor`` of
0.9 that Karpenter's proposal (kubernetes-sigs/karpenter PR #2562) discusses as a sensible
operator default."""

REPACK_MAX_GROUP = 10
"""Most nodes re-planned together in one merge."""

REPACK_MAX_SIMULATIONS = 60
"""Scheduler runs one pass may spend (each group costs one per size cap, plus one uncapped)."""

REPACK_NEIGHBOURS = 32
"""Initialized nodes (those with the most free cpu) offered to a group's plain pods besides new
claims, when neither they nor any bound pod has topology or anti-affinity constraints: placing
them there is valid in the whole cluster, and a run costs a few milliseconds instead of a pass
over every bound pod. Otherwise every node is offered."""

REPACK_SLACK_STEPS = 6
"""Most times a repack makes one replacement of a run kube-scheduler cannot reproduce roomier
(its smallest types given up) to find one it can (:func:`_with_slack`)."""

_EPS = 1e-9


def parse_min_savings(text: str) -> float:
    """``"0.2"`` -> 0.2. Raises ``ValueError`` unless it is a number in [0, 1)."""
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{text!r} is not a fraction in [0, 1)")
    return value


def min_savings_of(pool: NodePoolView, default: float) -> float:
    """The minimum savings fraction for nodes of NodePool ``pool``: its
    :data:`ANNOTATION_MIN_SAVINGS` when set to a fraction in [0, 1), else ``default`` (a value
    that does not parse is ignored, as Karpenter ignores malformed annotations)."""
    raw = pool.annotations.get(ANNOTATION_MIN_SAVINGS)
    if raw is None:
        return default
    try:
        return parse_min_savings(str(raw).strip())
    except ValueError:
        return default


@dataclass(frozen=True, slots=True)
class RepackOutcome:
    """What re-planning one group gives.

    Attributes:
        group: the candidates removed together.
        problem: why the group cannot be repacked (None when it can be, below the threshold or not).
        price: Σ candidate prices, USD/hour.
        required: the savings the threshold asks for, USD/hour (``min_savings x price``).
        min_savings: the fraction behind ``required``.
        replacements: the NodeClaims the best run needs (types trimmed to the threshold).
        replacement_price: Σ worst prices of the cheapest type of each replacement, USD/hour
            (what the threshold is checked against).
        launch_price: Σ cheapest offering prices of ``replacements``, USD/hour.
        rejected: why the first other run (another size cap) that scheduled every pod could not
            be kept (spot-to-spot, minValues), "" when none was.
    """

    group: tuple[Candidate, ...]
    problem: Invalidation | None
    price: float
    required: float
    min_savings: float
    replacements: list[PlannedNodeClaim] = field(default_factory=list)
    replacement_price: float = 0.0
    launch_price: float = 0.0
    rejected: str = ""

    @property
    def savings(self) -> float:
        """``price - replacement_price``, USD/hour."""
        return self.price - self.replacement_price

    @property
    def ok(self) -> bool:
        """True when the group can be repacked and saves at least the threshold (and something)."""
        return self.problem is None and self.savings + _EPS >= self.required and self.savings > _EPS

    def threshold_text(self) -> str:
        """``would save X USD/h, below the threshold (f x P = T USD/h)`` (``would cost X USD/h more,
        so it saves nothing (threshold ...)`` when the replacement costs more), and why another run
        was rejected when one was."""
        if self.savings < -_EPS:  # the replacement costs more: no saving to compare with the threshold
            text = (f"would cost {-self.savings:.4f} USD/h more, so it saves nothing (threshold {self.min_savings:g} x "
                    f"{self.price:.4f} = {self.required:.4f} USD/h)")
        else:
            text = (f"would save {max(self.savings, 0.0):.4f} USD/h, below the threshold ({self.min_savings:g} x {self.price:.4f} = "
                    f"{self.required:.4f} USD/h)")
        return text + (f"; another packing was rejected: {self.rejected}" if self.rejected else "")


class _Caps:
    """Per-pass cache: templates and type tables restricted to types with at most ``cap``
    allocatable millicores (None: unrestricted); the initialized nodes by free cpu (most first)
    and whether any bound pod has an anti-affinity term (see :data:`REPACK_NEIGHBOURS`)."""

    def __init__(self, sim: SimulationContext):
        self.sim = sim
        self._by_cap: dict[int | None, tuple[list[NodePoolTemplate], dict[str, TypeTable]]] = {}
        self.sizes = sorted({it.allocatable.get("cpu", 0) for t in sim.templates for it in t.instance_types})
        self.roomiest = sorted((n for n in sim.nodes if n.initialized), key=lambda n: (-n.free().get("cpu", 0), n.name))
        self.bound_anti = any(t.anti for b in sim.bound for t in b.affinity)

    def get(self, cap: int | None) -> tuple[list[NodePoolTemplate], dict[str, TypeTable]]:
        if cap not in self._by_cap:
            if cap is None:
                templates = list(self.sim.templates)
            else:
                templates = [dataclasses.replace(t, instance_types=[it for it in t.instance_types if it.allocatable.get("cpu", 0) <= cap])
                             for t in self.sim.templates]
            self._by_cap[cap] = (templates, type_tables(templates, self.sim.daemonsets))
        return self._by_cap[cap]

    def for_pods(self, pods: Sequence[PodInfo]) -> list[int | None]:
        """None, then each size between the largest pod's cpu and the pods' total, largest first."""
        biggest = max((p.requests.get("cpu", 0) for p in pods), default=0)
        total = sum(p.requests.get("cpu", 0) for p in pods)
        return [None, *sorted((s for s in self.sizes if biggest <= s < total), reverse=True)]


def _solve(sim: SimulationContext, caps: _Caps, cap: int | None, group: Sequence[Candidate], pods: Sequence[PodInfo]
           ) -> tuple[list[PlannedNodeClaim] | None, Invalidation | None]:
    """One scheduler run over the cluster without ``group`` and with the types of size ``cap``."""
    templates, tables = caps.get(cap)
    removed = {c.name for c in group} | sim.leaving  # an earlier command's nodes: their pods are placed too
    leaving = sim.leaving_pods()
    pods = [*pods, *leaving]
    usage: dict[str, Resources] = {k: dict(v) for k, v in sim.usage.items()}
    for pool, cap_res in claim_capacity(group).items():
        if pool in usage:
            usage[pool] = subtract(usage[pool], cap_res)
    virtual = {v.key for v in sim.virtual}  # CapacityBuffer headroom must fit as well, anywhere in the cluster
    if caps.bound_anti or virtual or any(p.has_topology for p in pods):
        nodes = [n for n in sim.nodes if n.name not in removed]
        bound = sim.relevant_bound([*pods, *sim.virtual], removed)  # the bound pods that can change this run
    else:
        nodes = [n for n in caps.roomiest if n.name not in removed][:REPACK_NEIGHBOURS]
        nodes += [n for n in sim.nodes if not n.initialized]
        offered = {n.name for n in nodes}
        bound = [b for b in sim.bound if b.node_name in offered]
    # sized by cost on the uncapped run of plain pods only: with topology rules a sized solve
    # plans every size cap and the marginal-cost variants (seconds for a few hundred pods)
    sized = cap is None and not any(p.has_topology for p in pods)
    sched = Scheduler(templates, nodes, sim.daemonsets, usage, bound_pods=bound, tables=tables, sizing=sized)
    results = sched.solve([*pods, *sim.virtual])
    if results.errors:
        key, why = sorted(results.errors.items())[0]
        return None, Invalidation(DecisionKind.POD_UNSCHEDULABLE, f"pod {key} would not schedule: {why}")
    uninitialized = {n.name for n in nodes if not n.initialized}
    exempt = virtual | {p.key for p in leaving}  # as the simulation's evaluate: those may land on their replacement
    for key, node in sorted(results.existing.items()):
        if node in uninitialized and key not in exempt:  # headroom may sit on an in-flight node
            return None, Invalidation(DecisionKind.TARGET_NOT_INITIALIZED, f"pod {key} would land on {node}, which is not initialized yet")
    return results.new_claims, None


def _min_values_short(claim: PlannedNodeClaim, types: Sequence[InstanceType]) -> str | None:
    """The NodePool's ``minValues`` requirement ``types`` no longer meet (``"minValues N on
    KEY"``), or None: a replacement keeps Karpenter's launch flexibility, as a consolidation
    replacement there must (``SatisfiesMinValues``)."""
    for req in claim.template.requirements:
        if not req.min_values:
            continue
        seen: set[str] = set()
        for it in types:
            r = it.requirements.get(req.key)
            if r is not None and not r.complement:
                seen |= {v for v in r.values if req.has(v)}
        if len(seen) < req.min_values:
            return f"minValues {req.min_values} on {req.key}"
    return None


def _priced(claims: list[PlannedNodeClaim], group: Sequence[Candidate], budget: float, *, spot_to_spot: bool = False
            ) -> tuple[list[PlannedNodeClaim], float, Invalidation | None]:
    """Trim each claim's types to what keeps Σ worst prices within ``budget`` (USD/hour); returns
    the trimmed claims, Σ of their cheapest worst prices and a problem (spot-to-spot) or None.
    When even the cheapest choice exceeds ``budget`` the claims are returned untrimmed with that
    price (the caller sees it is below the threshold).

    A group of spot nodes is replaced by on-demand only, unless ``spot_to_spot`` (the
    ``SpotToSpotConsolidation`` gate): then a replacement whose NodePool allows spot is pinned to
    spot (Karpenter's spot-to-spot replacement), priced at its worst spot offering, and must keep
    at least :data:`MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT` instance types within the budget, the
    churn guard of Karpenter's single-node spot-to-spot consolidation."""
    spot = all(c.capacity_type == "spot" for c in group)
    pinned: list[PlannedNodeClaim] = []
    for claim in claims:
        if spot and spot_to_spot and allows_spot(claim):  # pinned to spot, as Karpenter's spot-to-spot replacement
            reqs = claim.requirements.copy()
            reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset({"spot"})))
            claim = dataclasses.replace(claim, requirements=reqs)
        elif spot:
            ct = claim.requirements.get(LABEL_CAPACITY_TYPE)
            if ct is not None and not ct.has("on-demand"):
                return [], 0.0, Invalidation(DecisionKind.SPOT_TO_SPOT,
                                             "spot-to-spot consolidation is disabled (SpotToSpotConsolidation gate)")
            reqs = claim.requirements.copy()
            reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset({"on-demand"})))
            claim = dataclasses.replace(claim, requirements=reqs)
        pinned.append(claim)
    worsts = [sorted((w, i) for i, w in enumerate(worst_prices(c))) for c in pinned]
    if any(not w or w[0][0] == float("inf") for w in worsts):
        return [], 0.0, Invalidation(DecisionKind.SPOT_TO_SPOT if spot else DecisionKind.NOT_CHEAPER,
                                     "a replacement has no launchable offering" + (" on-demand" if spot else ""))
    cheapest = sum(w[0][0] for w in worsts)
    if cheapest > budget + _EPS or not pinned:
        return pinned, cheapest, None
    share = (budget - cheapest) / len(pinned)
    out: list[PlannedNodeClaim] = []
    for claim, w in zip(pinned, worsts, strict=True):
        limit = w[0][0] + share + _EPS
        keep = sorted(i for p, i in w if p <= limit)
        types = [claim.instance_types[i] for i in keep]
        short = _min_values_short(claim, types)
        if short is not None:
            return [], 0.0, Invalidation(DecisionKind.NOT_CHEAPER, f"too few instance types are cheap enough to keep {short}")
        if spot and spot_to_spot and allows_spot(claim) and len(types) < MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT:
            return [], 0.0, Invalidation(DecisionKind.SPOT_TO_SPOT_OPTIONS,
                                         f"spot-to-spot: only {len(types)} instance types are cheap enough, needs "
                                         f"{MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT}")
        reqs = claim.requirements.copy()
        reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in types)))
        out.append(dataclasses.replace(claim, instance_types=types, requirements=reqs))
    return out, cheapest, None


def repack_group(sim: SimulationContext, group: Sequence[Candidate], default_min_savings: float, *,
                 caps: _Caps | None = None, limit: list[int] | None = None, spot_to_spot: bool = False) -> RepackOutcome:
    """Re-plan ``group``'s pods with ``group`` removed (see the module docstring, steps 3-4).

    Args:
        sim: the pass's simulation inputs.
        group: the candidates to remove together (prices known).
        default_min_savings: the controller's fraction, for pools without the annotation.
        caps: a per-pass cache (internal; built when None).
        limit: a one-element budget of scheduler runs, decremented per run (None: no limit).
        spot_to_spot: the ``SpotToSpotConsolidation`` gate (see :func:`_priced`).

    Returns:
        The best outcome; ``problem`` set when no run schedules every pod, the runs ran out, or
        (spot) no on-demand replacement exists. Never raises for cluster content.
    """
    return run_steps(repack_group_steps(sim, group, default_min_savings, caps=caps, limit=limit, spot_to_spot=spot_to_spot))


def repack_group_steps(sim: SimulationContext, group: Sequence[Candidate], default_min_savings: float, *,
                       caps: _Caps | None = None, limit: list[int] | None = None, spot_to_spot: bool = False
                       ) -> Steps[RepackOutcome]:
    """:func:`repack_group` (same arguments and result), yielding before each scheduler run."""
    price = sum(c.price or 0.0 for c in group)
    fraction = max(min_savings_of(c.pool, default_min_savings) for c in group)
    required = fraction * price
    base = RepackOutcome(tuple(group), None, price, required, fraction)
    if limit is not None and limit[0] <= 0:
        return dataclasses.replace(base, problem=Invalidation(DecisionKind.SIMULATION_LIMIT,
                                                              "not evaluated this pass (simulation limit reached)"))
    pods: list[PodInfo] = []
    for c in group:
        infos = sim.pod_infos(c)
        if isinstance(infos, str):
            return dataclasses.replace(base, problem=Invalidation(DecisionKind.POD_NOT_SIMULATABLE, infos))
        pods.extend(infos)
    cache = caps if caps is not None else _Caps(sim)
    runs: list[RepackOutcome] = []
    untrimmed: list[list[PlannedNodeClaim]] = []
    first_problem: Invalidation | None = None
    priced_problem: Invalidation | None = None  # a run that scheduled but could not be priced (spot, minValues)
    for cap in cache.for_pods(pods):
        if limit is not None:
            if limit[0] <= 0:
                break
            limit[0] -= 1
        yield
        claims, problem = _solve(sim, cache, cap, group, pods)
        if claims is None:
            first_problem = first_problem or problem
            continue
        trimmed, cost, problem = _priced(claims, group, price - required, spot_to_spot=spot_to_spot)
        if problem is not None:
            first_problem = first_problem or problem
            priced_problem = priced_problem or problem
            continue
        runs.append(dataclasses.replace(base, replacements=trimmed, replacement_price=cost,
                                        launch_price=sum(c.cheapest_offering_price() for c in trimmed)))
        untrimmed.append(claims)
    rejected = priced_problem.message if priced_problem is not None else ""
    misfit: Invalidation | None = None
    while runs:
        i = _cheapest(runs)
        out, claims = runs.pop(i), untrimmed.pop(i)
        if not out.ok:  # the cheapest run left falls short of the threshold: the dearer ones do too
            break
        yield
        misfit = _kube_misfit(sim, group, pods, out.replacements)
        if misfit is None:
            return dataclasses.replace(out, rejected=rejected)
        yield
        roomier = _with_slack(sim, group, pods, claims, base, spot_to_spot)
        if roomier is not None:
            return dataclasses.replace(roomier, rejected=rejected)
    else:
        out = None
    if misfit is not None:  # a cheaper run saved enough but kube-scheduler would not reproduce it
        return dataclasses.replace(base, problem=misfit)
    if out is not None:
        return dataclasses.replace(out, rejected=rejected)
    return dataclasses.replace(base, problem=first_problem or Invalidation(DecisionKind.SIMULATION_LIMIT,
                                                                            "not evaluated this pass (simulation limit reached)"))


def _cheapest(runs: Sequence[RepackOutcome]) -> int:
    """The index of the cheapest run (Σ worst replacement prices; within 1e-9 USD/hour, fewer
    replacements; then the first made)."""
    best = 0
    for i, out in enumerate(runs):
        b = runs[best]
        if out.replacement_price < b.replacement_price - _EPS or \
                (abs(out.replacement_price - b.replacement_price) <= _EPS and len(out.replacements) < len(b.replacements)):
            best = i
    return best


def _with_slack(sim: SimulationContext, group: Sequence[Candidate], pods: Sequence[PodInfo], claims: list[PlannedNodeClaim],
                base: RepackOutcome, spot_to_spot: bool) -> RepackOutcome | None:
    """A run whose moved pods kube-scheduler would not all place, made roomier: up to
    :data:`REPACK_SLACK_STEPS` times, one replacement gives up the instance types that make its
    smallest room (those with the least cpu or memory among its types,
    :func:`~karpy_core.scheduling.kubescheduler.replacement_node`), the one whose run then costs
    least, until kube-scheduler places every pod (:func:`_kube_misfit`) or the threshold is no
    longer met. Returns the first such run that qualifies, else None."""
    current = list(claims)
    for _ in range(REPACK_SLACK_STEPS):
        best: tuple[float, list[PlannedNodeClaim], list[PlannedNodeClaim]] | None = None
        for i, claim in enumerate(current):
            if len(claim.instance_types) <= 1:
                continue
            # the types that make the replacement's smallest room (replacement_node): the least of a resource
            floor = replacement_node(claim, "").allocatable
            types = [it for it in claim.instance_types
                     if not any(it.allocatable.get(r, 0) <= floor.get(r, 0) for r in ("cpu", "memory"))]
            if not types:
                continue
            reqs = claim.requirements.copy()
            reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in types)))
            variant = [*current[:i], dataclasses.replace(claim, instance_types=types, requirements=reqs), *current[i + 1:]]
            trimmed, cost, problem = _priced(variant, group, base.price - base.required, spot_to_spot=spot_to_spot)
            if problem is None and (best is None or cost < best[0] - _EPS):
                best = (cost, variant, trimmed)
        if best is None:
            return None
        cost, current, trimmed = best
        out = dataclasses.replace(base, replacements=trimmed, replacement_price=cost,
                                  launch_price=sum(c.cheapest_offering_price() for c in trimmed))
        if not out.ok:
            return None
        if _kube_misfit(sim, group, pods, trimmed) is None:
            return out
    return None


def _kube_misfit(sim: SimulationContext, group: Sequence[Candidate], pods: Sequence[PodInfo],
                 replacements: Sequence[PlannedNodeClaim]) -> Invalidation | None:
    """None when kube-scheduler, placing ``pods`` on the initialized nodes left without ``group``
    and on ``replacements`` at their smallest, binds every one whatever the replacements' names
    (:func:`~karpy_core.scheduling.kubescheduler.moved_pods_fit`); else why not. A run packs the
    pods as the provisioning scheduler would (sized by cost, one exact arrangement); the pods
    are then evicted and kube-scheduler places them first fit in its own order: where that
    leaves one pending, the provisioner launches a node for it and the saving is gone; they come
    as the drain sends them (:func:`~karpy_core.controllers.disruption.simulation.drain_waves`),
    which is replayed too."""
    nodes, bound, everyone = sim.replay_inputs({c.name for c in group}, pods)  # with an earlier command's pods
    miss = moved_pods_fit(nodes, bound, everyone, replacements, waves=drain_waves(group, pods, everyone[len(pods):]))
    if miss is None:
        return None
    return Invalidation(DecisionKind.KUBE_SCHEDULER_MISFIT,
                        f"pod {miss[0]} would stay pending where kube-scheduler places the moved pods: {miss[1]}")


def _groups(alone: Sequence[Candidate], within: Sequence[Candidate]) -> list[tuple[Candidate, ...]]:
    """Each candidate of ``alone``, and after the i-th the first i+1 of ``within`` (2 to
    :data:`REPACK_MAX_GROUP` of them)."""
    out: list[tuple[Candidate, ...]] = []
    for i in range(max(len(alone), min(len(within), REPACK_MAX_GROUP))):
        if i < len(alone):
            out.append((alone[i],))
        if 1 <= i < min(len(within), REPACK_MAX_GROUP):
            out.append(tuple(within[: i + 1]))
    return out


def _plan(method: RepackConsolidation, out: RepackOutcome) -> DisruptionPlan:
    return DisruptionPlan(method.name, method.reason, list(out.group), out.replacements, out.price, out.launch_price)


def _better(a: RepackOutcome, b: RepackOutcome | None) -> bool:
    if b is None:
        return True
    if a.savings > b.savings + _EPS:
        return True
    return abs(a.savings - b.savings) <= _EPS and len(a.group) < len(b.group)


@dataclass(frozen=True, slots=True)
class RepackConsolidation(Consolidation):
    """Replace N nodes by M cheaper ones (see the module docstring).

    Attributes:
        min_savings: the controller's minimum savings fraction in [0, 1) (NodePool annotation wins).
        max_simulations: scheduler runs per pass.
    """

    name: ClassVar[DisruptionMethod] = DisruptionMethod.REPACK_CONSOLIDATION
    min_savings: float = DEFAULT_MIN_SAVINGS
    max_simulations: int = REPACK_MAX_SIMULATIONS

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The group whose repack saves the most (at least its threshold), or None; a ``keep``
        line for each candidate evaluated alone that does not qualify (see :class:`~.base.Method`)."""
        return run_steps(self.steps(ctx, candidates, budgets))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute`, yielding before each group (see :class:`~.base.Method`)."""
        alone: list[Candidate] = []
        within: list[Candidate] = []
        taken: dict[str, int] = {}
        for c in self.consider(ctx, candidates):
            left = budgets.left(c, self.reason)
            if left < 1:
                ctx.keep(c, self.name, DecisionKind.BUDGET_EXHAUSTED, f"the disruption budget allows 0 more ({self.reason})",
                         DecisionDetails(budget=self.reason))
                continue
            alone.append(c)
            if len(within) < MULTI_NODE_MAX_CANDIDATES and left - taken.get(c.nodepool, 0) >= 1:
                taken[c.nodepool] = taken.get(c.nodepool, 0) + 1
                within.append(c)
        if not alone:
            return None
        caps = _Caps(ctx.sim)
        limit = [self.max_simulations]
        best: RepackOutcome | None = None
        for group in _groups(alone, within):
            out = yield from repack_group_steps(ctx.sim, group, self.min_savings, caps=caps, limit=limit,
                                                spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if out.ok and ctx.avoid and _plan(self, out).move_key() in ctx.avoid:
                out = dataclasses.replace(out, problem=Invalidation(
                    DecisionKind.UNDONE_BEFORE, "the same move was undone (a node launched for the pods it moved) since the "
                    "workload and the offerings last changed"))
            if out.ok:
                if _better(out, best):
                    best = out
                continue
            if len(group) == 1:
                c = group[0]
                if out.problem is not None:
                    ctx.keep(c, self.name, out.problem.kind, out.problem.message, DecisionDetails(price=c.price))
                else:
                    ctx.keep(c, self.name, DecisionKind.BELOW_MIN_SAVINGS, out.threshold_text(),
                             DecisionDetails(price=c.price, replacement_price=round(out.replacement_price, 6)))
        if best is None:
            return None
        for c in best.group:
            budgets.take(c, self.reason)
        return _plan(self, best)

    def revalidate(self, sim: SimulationContext, cands: Sequence[Candidate], plan: DisruptionPlan, *,
                   spot_to_spot: bool = False) -> Invalidation | None:
        """After the validation delay, on a fresh snapshot: the same group must still repack
        within the threshold into as many replacements, each planned replacement's instance types
        among those of one fresh replacement. None when the command holds, else why not.
        ``spot_to_spot``: the ``SpotToSpotConsolidation`` gate."""
        out = repack_group(sim, cands, self.min_savings, spot_to_spot=spot_to_spot)
        if out.problem is not None:
            return Invalidation(out.problem.kind, f"re-simulation failed: {out.problem.message}")
        if not out.ok:
            return Invalidation(DecisionKind.BELOW_MIN_SAVINGS, f"re-simulation {out.threshold_text()}")
        if len(out.replacements) != len(plan.replacements):
            return Invalidation(DecisionKind.REPLACEMENTS_CHANGED,
                                f"re-simulation needs {len(out.replacements)} replacement(s), the command has {len(plan.replacements)}")
        free = [{it.name for it in r.instance_types} for r in out.replacements]
        for r in plan.replacements:
            names = {it.name for it in r.instance_types}
            match = next((i for i, f in enumerate(free) if names <= f), None)
            if match is None:
                return Invalidation(DecisionKind.REPLACEMENT_TYPES_CHANGED, "replacement instance types are no longer all valid")
            free.pop(match)
        return None

