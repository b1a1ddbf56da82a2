"""Multi-node consolidation (Karpenter ``multinodeconsolidation.go``): the first
:data:`MULTI_NODE_MAX_CANDIDATES` consolidation candidates within the ``Underutilized`` budget; the
largest prefix (at least 2) that can be deleted, or replaced by one cheaper node, found by binary
search, then grown greedily by the candidates after it that can go with it
(:meth:`MultiNodeConsolidation.extend`, karpy's addition). A set that :class:`RoomBound` rules
out is not simulated: its simulation could only fail."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from karpy_core.controllers.disruption.budgets import BudgetTracker
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.decisions import DisruptionMethod
from karpy_core.controllers.disruption.methods.base import PassContext
from karpy_core.controllers.disruption.methods.consolidation import Consolidation
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.simulation import Evaluation, SimulationContext, evaluate_steps
from karpy_core.scheduling.pod import requirement_key
from karpy_core.scheduling.requirements import Requirements
from karpy_core.utils.steps import Steps, run_steps

__all__ = ["MultiNodeConsolidation", "MULTI_NODE_MAX_CANDIDATES", "RoomBound"]

MULTI_NODE_MAX_CANDIDATES = 100
"""Candidates multi-node consolidation considers at once (Karpenter ``MultiNodeConsolidation``)."""

GREEDY_SIMULATIONS = 50
"""Simulations the greedy extension (:meth:`MultiNodeConsolidation.extend`) makes at most in one pass."""


class RoomBound:
    """A necessary condition for a set of candidates to go in one consolidation command, checked
    without a simulation (cpu millicores, memory bytes, USD/hour).

    A consolidation simulation that succeeds (:func:`evaluate`, SpotToSpotConsolidation off) puts
    every moved pod on an initialized node outside the set, where its request fits the node's free
    room (``allocatable - requested``), or on the one new NodeClaim: the claim's requirements
    include one node-affinity term of each pod on it, and each of its instance types has an
    offering compatible with them priced below the set's price. So the pods whose cpu or memory
    request exceeds the largest free cpu or memory of the initialized nodes outside the set
    ("stranded") must all fit one offering (of any NodePool template's types) cheaper than the
    set, whose type's requirements and zone/capacity type meet one term of each stranded pod, with
    room (allocatable cpu and memory) for their sum. When none does, the simulation fails, and
    :meth:`may_go` says so without running it. Everything else (taints, DaemonSets, per-node
    packing, keys a type leaves undefined) is left out, which only lets more sets pass: a set this
    rules out would fail its simulation, so skipping it changes no decision.

    Args:
        sim: the pass's simulation context (its initialized nodes and NodePool templates).
    """

    __slots__ = ("_by_cpu", "_by_mem", "_offers")

    def __init__(self, sim: SimulationContext):
        nodes = [n for n in sim.nodes if n.initialized]
        self._by_cpu = sorted(((n.allocatable.get("cpu", 0) - n.requested.get("cpu", 0), n.name) for n in nodes), reverse=True)
        self._by_mem = sorted(((n.allocatable.get("memory", 0) - n.requested.get("memory", 0), n.name) for n in nodes),
                              reverse=True)
        types = {id(it): it for t in sim.templates for it in t.instance_types}  # pools often share one catalog
        self._offers = sorted(((o.price, i, it, o) for i, it in enumerate(types.values()) for o in it.offerings),
                              key=lambda x: (x[0], x[1]))
        """(price, position, type, offering) of every offering of every type, cheapest first."""

    @staticmethod
    def _largest(free: list[tuple[int, str]], removed: set[str]) -> int | None:
        return next((room for room, name in free if name not in removed), None)

    def may_go(self, sim: SimulationContext, cands: Sequence[Candidate]) -> bool:
        """False when the consolidation simulation of removing ``cands`` together must fail (see
        the class); True when it may succeed (or a pod cannot be parsed or a price is unknown:
        the simulation says why)."""
        removed = {c.name for c in cands}
        max_cpu, max_mem = self._largest(self._by_cpu, removed), self._largest(self._by_mem, removed)
        need_cpu = need_mem = 0
        stranded: dict[tuple[object, ...], list[Requirements]] = {}
        for c in cands:
            infos = sim.pod_infos(c)
            if isinstance(infos, str) or c.price is None:
                return True
            for p in infos:
                cpu, mem = p.requests.get("cpu", 0), p.requests.get("memory", 0)
                if max_cpu is None or max_mem is None or cpu > max_cpu or mem > max_mem:
                    need_cpu += cpu
                    need_mem += mem
                    stranded.setdefault(tuple(requirement_key(t) for t in p.requirement_terms), p.requirement_terms)
        if not stranded:
            return True
        total = sum(c.price or 0.0 for c in cands)
        for price, _, it, o in self._offers:
            if price >= total:
                return False
            alloc = it.allocatable
            if alloc.get("cpu", 0) < need_cpu or alloc.get("memory", 0) < need_mem:
                continue
            if all(any(o.compatible(t) and it.requirements.intersects(t) for t in terms) for terms in stranded.values()):
                return True
        return False


@dataclass(frozen=True, slots=True)
class MultiNodeConsolidation(Consolidation):
    """Remove several nodes at once (see the module docstring)."""

    name: ClassVar[DisruptionMethod] = DisruptionMethod.MULTI_NODE_CONSOLIDATION

    def compute(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> DisruptionPlan | None:
        """The largest removable prefix of at least 2 candidates, or None (see :class:`~.base.Method`)."""
        return run_steps(self.steps(ctx, candidates, budgets))

    def steps(self, ctx: PassContext, candidates: Sequence[Candidate], budgets: BudgetTracker) -> Steps[DisruptionPlan | None]:
        """:meth:`compute`, yielding before each simulation (see :class:`~.base.Method`)."""
        within: list[Candidate] = []
        taken: dict[str, int] = {}
        for c in self.consider(ctx, candidates):
            if len(within) >= MULTI_NODE_MAX_CANDIDATES:
                break
            if budgets.left(c, self.reason) - taken.get(c.nodepool, 0) < 1:
                continue
            taken[c.nodepool] = taken.get(c.nodepool, 0) + 1
            within.append(c)
        if len(within) < 2:
            return None
        best: tuple[list[Candidate], Evaluation] | None = None
        room = None if ctx.gates.SpotToSpotConsolidation else RoomBound(ctx.sim)  # a spot replacement is priced otherwise
        lo, hi = 1, len(within) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            prefix = within[: mid + 1]
            ev = None
            if room is None or room.may_go(ctx.sim, prefix):
                ev = yield from evaluate_steps(ctx.sim, prefix, consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev is not None and ev.ok:
                best = (prefix, ev)
                lo = mid + 1
            else:
                hi = mid - 1
        best = yield from self.extend_steps(ctx, within, best, room)
        if best is None:
            return None
        prefix, ev = best
        if ev.replacements and len({c.instance_type for c in prefix}) == 1 and \
                {it.name for it in ev.replacements[0].instance_types} <= {prefix[0].instance_type}:
            return None  # filterOutSameInstanceType: no point replacing N nodes by one of the same type
        for c in prefix:
            budgets.take(c, self.reason)
        return DisruptionPlan(self.name, self.reason, prefix, ev.replacements,
                              sum(c.price or 0.0 for c in prefix), ev.replacement_price)

    def extend(self, ctx: PassContext, within: Sequence[Candidate], best: tuple[list[Candidate], Evaluation] | None,
               room: RoomBound | None = None) -> tuple[list[Candidate], Evaluation] | None:
        """Grow the command the binary search found (or none) greedily: each candidate of ``within``
        after it, in order, joins when the set with it can still go (one :func:`evaluate` of the
        whole set, so the pods of every node must fit together), up to :data:`GREEDY_SIMULATIONS`
        tries. Returns the larger of the two commands (at least 2 nodes), or ``best``. A set
        ``room`` (:class:`RoomBound`) rules out counts as a try without its simulation: the result is
        the same, and a converged pass (no candidate can go) pays for at most a few simulations
        instead of :data:`GREEDY_SIMULATIONS`.

        karpy's addition to Karpenter's ``firstNConsolidationOption``: its binary search assumes
        that a prefix that cannot go makes every longer prefix fail, so one node that must stay
        near the front leaves the rest to single-node consolidation, one node per command and
        validation delay (issue 36: after a 70% scale-in, 25 single-node commands 15 s apart).
        """
        return run_steps(self.extend_steps(ctx, within, best, room))

    def extend_steps(self, ctx: PassContext, within: Sequence[Candidate], best: tuple[list[Candidate], Evaluation] | None,
                     room: RoomBound | None = None) -> Steps[tuple[list[Candidate], Evaluation] | None]:
        """:meth:`extend`, yielding before each simulation."""
        kept: list[Candidate] = list(best[0]) if best is not None else []
        ev_kept = best[1] if best is not None else None
        names = {c.name for c in kept}
        tries = 0
        for c in within:
            if c.name in names:
                continue
            if tries >= GREEDY_SIMULATIONS:
                break
            tries += 1
            if room is not None and not room.may_go(ctx.sim, [*kept, c]):
                continue
            ev = yield from evaluate_steps(ctx.sim, [*kept, c], consolidation=True, spot_to_spot=ctx.gates.SpotToSpotConsolidation)
            if ev.ok:
                kept.append(c)
                names.add(c.name)
                ev_kept = ev
        if ev_kept is None or len(kept) < 2 or (best is not None and len(kept) <= len(best[0])):
            return best
        return kept, ev_kept
