"""The provisioning scheduler: pending pods in, a placement plan out. Pure and synchronous.

Algorithm (Karpenter ``pkg/controllers/provisioning/scheduling/scheduler.go``, first-fit
decreasing):

1. Order pods by cpu, then memory (both descending), then creation time, then name.
2. For each pod try, in order:
   a. existing nodes (initialized first, then by name): taints, labels, free resources;
   b. NodeClaims already planned in this run, oldest first: taints, requirements (the claim's
      requirements narrow to the intersection), and at least one remaining instance type that
      fits all its pods plus DaemonSet overhead and has an available offering;
   c. a new NodeClaim from each NodePool, by weight (descending) then name, within the pool's
      ``limits`` (each open claim reserves the largest capacity among its remaining types).
3. Pods that fit nowhere get a reason naming, per NodePool, the first check that ruled it out.

Before all of this, pods nominated to an existing node (``nominated``: the NodeClaims a previous
pass planned them on, still in flight) go back there while it takes them, and count as bound
to it for the rest of the solve (:meth:`Scheduler._keep_nominated`).

Where each concern lives: the placement checks in :mod:`~karpy_core.scheduling.feasibility`,
preference relaxation in :mod:`~karpy_core.scheduling.preferences`, a run's mutable state and
placement steps in :mod:`~karpy_core.scheduling.run`, packing of plain pods into new claims in
:mod:`~karpy_core.scheduling.packing`, planned claims in :mod:`~karpy_core.scheduling.claim`,
explanations in :mod:`~karpy_core.scheduling.explain`. This module orders the queue and runs the
phases.

Inputs are never modified: what a run adds to existing nodes, limits and topology lives in its
:class:`~karpy_core.scheduling.run.SchedulingRun`.

Determinism: every iteration is over sorted or insertion-ordered sequences, never over sets.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.scheduling.claim import MAX_INSTANCE_TYPES, PlannedNodeClaim, finalize
from karpy_core.scheduling.exact import ClassTable, class_table
from karpy_core.scheduling.explain import explain_detail, why
from karpy_core.scheduling.infeasible import Unschedulable
from karpy_core.scheduling.nodeindex import NodeIndex
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import MinValuesPolicy, PreferencePolicy
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, subtract
from karpy_core.scheduling.run import Inputs, SchedulingRun
from karpy_core.scheduling.sizing import fill_best, unit_prices
from karpy_core.scheduling.taints import untolerated
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable, type_tables
from karpy_core.scheduling.ties import PlanScore, better
from karpy_core.scheduling.topology import AffinityTerm, SpreadConstraint
from karpy_core.utils.selectors import selector_matches
from karpy_core.utils.steps import Steps, run_steps

__all__ = ["ExistingNode", "PlannedNodeClaim", "SchedulingResults", "Scheduler", "MAX_INSTANCE_TYPES"]


@dataclass
class SchedulingResults:
    """The plan: new claims, pods placed on existing nodes, and pods left pending with reasons."""

    new_claims: list[PlannedNodeClaim]
    existing: dict[str, str]
    """pod key (``ns/name``) -> existing node name."""
    errors: dict[str, str]
    """pod key -> human reason it cannot be scheduled."""
    reasons: dict[str, Unschedulable] = field(default_factory=dict)
    """pod key -> the typed reason behind ``errors`` (for the pods the scheduler rejected)."""

    def pods_placed(self) -> int:
        """Pods placed on existing nodes or new claims."""
        return len(self.existing) + sum(len(c.pods) for c in self.new_claims)


def queue_order(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """Pods by cpu, then memory (both descending), creation time, namespace, name."""
    return sorted(pods, key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.created, p.namespace, p.name))


SEARCHED_TOPOLOGY_PODS = 100
"""Batches with at most this many pods with topology rules are also planned with size caps, by
marginal cost and pinned by zone, and the cheapest plan wins (:meth:`Scheduler.solve`); larger
ones get one plan under :func:`predicted_cap` (:meth:`Scheduler._solve_large`).

Why 100 (issue 27, item 5: solve time within 1.2x of the planner before cost sizing): the
search makes up to :data:`MAX_SIZE_CAPS` + 3 plans, the marginal-cost ones several times slower
than first fit, so it costs 10-40x one plan at any size; one plan under the predicted cap costs
about one first-fit plan. Karpenter's diverse mix (4 pods in 5 with topology rules) on its 400
fake types, search against one plan (``benchmarks/topology_paths.py``): 200 pods 50.05 USD/hour
in 0.45 s against 51.62 in 0.03 s; 500 pods 117.40 in 1.69 s against 121.81 in 0.07 s (first
fit, the plan before cost sizing: 143.21 in 0.07 s). Up to 100 such pods the search takes at most
about 0.5 s, well inside one batch window (``BATCH_IDLE_DURATION``, 1 s), and it is where one plan
misses most: zone spreads (60 pods, 1.40x the search's cost) and StatefulSets with host ports
(1.34x)."""
MAX_SIZE_CAPS = 8
"""Size caps tried per batch at most (:func:`size_caps`)."""


def size_caps(tables: Iterable[TypeTable], pods: Sequence[PodInfo]) -> list[int]:
    """vCPU sizes to cap the claims of ``pods`` at (smallest first): the distinct vCPU counts of the
    NodePools' launchable types from the smallest that holds the smallest pod's cpu request up to
    (not including) the largest; when there are more than :data:`MAX_SIZE_CAPS`, for each power of
    two the largest size not above it, smallest first, at most :data:`MAX_SIZE_CAPS` of them."""
    sizes: set[int] = set()
    for t in tables:
        launchable = np.isfinite(t.prices).any(axis=1)
        sizes |= {int(v) // 1000 for v in t.capacity[launchable, t.index["cpu"]]} if "cpu" in t.index else set()
    need = min((p.requests.get("cpu", 0) for p in pods), default=0)
    ordered = sorted(s for s in sizes if s * 1000 >= need and s > 0)
    if len(ordered) < 2:
        return []
    ordered = ordered[:-1]
    if len(ordered) <= MAX_SIZE_CAPS:
        return ordered
    picks: list[int] = []
    power = 1
    while len(picks) < MAX_SIZE_CAPS and power <= 2 * ordered[-1]:
        below = [s for s in ordered if s <= power]
        if below and below[-1] not in picks:
            picks.append(below[-1])
        power *= 2
    return picks


CAP_PER_CORE_SLACK = 0.05
"""How much dearer per vCPU (a fraction) the cheapest type under a predicted cap may be than the
cheapest type of all (:func:`predicted_cap`). On the AWS catalog the cheapest 2-vCPU type is 0.5%
dearer per vCPU than the cheapest of all (c6a.large against c6a.4xlarge); on the catalogs where
the capped plan was dearer than first fit it was 29-50% dearer."""


def forced_nodes(pods: Sequence[PodInfo]) -> int:
    """The most nodes some hostname rule forces ``pods`` onto (0 when none does): the largest group
    of pods that share one required ``kubernetes.io/hostname`` anti-affinity term (selector and
    namespaces) and that the term's selector matches, so no two of them may share a node (a
    Deployment with self anti-affinity: one node per replica); or, for a hard
    ``kubernetes.io/hostname`` topology spread, the pods of one namespace its selector matches
    divided by its ``maxSkew``, rounded up (a new node is a domain with no pods, so a claim takes
    at most ``maxSkew`` of them while another node has none).

    Counting the spreads (measured with ``benchmarks/topology_paths.py``, one plan under
    :func:`predicted_cap`, 300 pods in hostname spreads with DaemonSets): AWS catalog 15.77 ->
    12.55 USD/hour, KWOK catalog 10.99 -> 8.71 (the variant search's 12.00 and 8.71)."""
    groups: dict[tuple[str, tuple[str, ...] | None], int] = {}
    spreads: dict[tuple[str, str, int], int] = {}
    for p in pods:
        for t in _own_node_terms(p):
            groups[(t.selector, t.namespaces)] = groups.get((t.selector, t.namespaces), 0) + 1
        for c in p.spread:
            if c.hard and c.key == LABEL_HOSTNAME and selector_matches(_selector(c.selector), p.labels):
                k = (p.namespace, c.selector, max(c.max_skew, 1))
                spreads[k] = spreads.get(k, 0) + 1
    return max(max(groups.values(), default=0), max((-(-n // k[2]) for k, n in spreads.items()), default=0))


_selector = functools.lru_cache(maxsize=4096)(json.loads)
"""A label selector parsed from its JSON text, shared (callers only read it)."""


def _own_node_terms(pod: PodInfo) -> list[AffinityTerm]:
    """The required ``kubernetes.io/hostname`` anti-affinity terms of ``pod`` that select ``pod``
    itself: while it has one, no other pod of its group may share its node."""
    return [t for t in pod.affinity if t.anti and t.key == LABEL_HOSTNAME and t.looks_in(pod.namespace)
            and selector_matches(_selector(t.selector), pod.labels)]


def own_nodes_first(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """``pods`` (in queue order) with those that need a node of their own (:func:`_own_node_terms`:
    a Deployment with self anti-affinity on hostname) moved to the front, each group keeping its
    order. Placed first, each opens its claim and the others then fill those claims; in first-fit
    decreasing order the small ones come last, when every claim already holds one of their group,
    and each opens a claim holding nothing else (Karpenter's diverse mix at 500 pods, AWS: nine
    c8a.medium with one 100m pod each, 0.46 USD/hour)."""
    return sorted(pods, key=lambda p: not _own_node_terms(p))


def predicted_cap(tables: Iterable[TypeTable], pods: Sequence[PodInfo], caps: Sequence[int]) -> int | None:
    """The size cap (vCPUs, one of ``caps``) for a batch too large to plan once per cap
    (:meth:`Scheduler.solve`): the batch needs at least ``m`` nodes (:func:`forced_nodes`),
    so with its cpu requests ``D`` (millicores) spread evenly each holds ``D / m``; the smallest
    cap with a type whose free cpu (allocatable minus DaemonSet overhead) holds that. None when
    nothing forces two or more nodes, no capped type holds ``D / m``, or the types of that cap
    that hold it are all more than :data:`CAP_PER_CORE_SLACK` dearer per vCPU than the cheapest
    type per vCPU (then no cap: where larger types are cheaper per core the capped plan was up to
    2x first fit's).

    Measured (single plans, uncapped vs the predicted cap; Karpenter's diverse mix, ``m = n/5``,
    ``D / m`` = 3.35 cores, cap 4): 5,000 pods on the AWS catalog 201.19 -> 157.50 USD/hour, on
    the KWOK catalog 116.29 -> 102.43; on Karpenter's 400 fake types 1,519 -> 1,197 at 5,000
    pods and 3,113 -> 2,397 at 10,000 (before :meth:`~karpy_core.scheduling.topology.Topology.settle`;
    now 203.97 -> 158.68, 116.03 -> 102.70, 1,524 -> 1,200 at 5,000). Caps of 8 and of 1-2 vCPUs
    were dearer on each. The diverse mix is planned under this cap (:meth:`Scheduler._solve_large`)."""
    m = forced_nodes(pods)
    tables = [t for t in tables if "cpu" in t.index and t.prices.size]
    if m < 2 or not caps or not tables:
        return None
    demand = sum(p.requests.get("cpu", 0) for p in pods) / m
    per_core = [t.prices.min(axis=1) / np.maximum(t.capacity[:, t.index["cpu"]], 1) for t in tables]
    cheapest = min(float(v.min()) for v in per_core)
    for cap in sorted(caps):
        for t, unit in zip(tables, per_core, strict=True):
            c = t.index["cpu"]
            holds = np.isfinite(unit) & (t.capacity[:, c] <= cap * 1000) & (t.free[:, c] >= demand)
            if holds.any():
                # only where a type that holds the share is as cheap per core as any: else first
                # fit's larger nodes can be cheaper, and this plan is not compared with it
                return cap if float(unit[holds].min()) <= cheapest * (1 + CAP_PER_CORE_SLACK) else None
    return None


LIMIT_FILLS = (1.0,)
"""Shares of a limited NodePool's cpu left that :meth:`Scheduler._limit_deals` hands out by
saving per core (claims round the pods' requests up to whole instance types, so a full share
may not fit)."""


def _pool_cpu(results: SchedulingResults, pool: str) -> int:
    """Millicores of the cheapest instance types of the claims ``results`` opens in NodePool ``pool``."""
    return sum(c.instance_types[0].capacity.get("cpu", 0) for c in results.new_claims if c.nodepool == pool and c.instance_types)


def _admits(template: NodePoolTemplate, pod: PodInfo) -> bool:
    """Whether a NodePool may hold ``pod`` at all: its taints tolerated and one of its
    node-affinity terms compatible with the NodePool's requirements."""
    return untolerated(template.taints, pod.tolerations) is None and any(
        template.requirements.conflict(term) is None for term in pod.requirement_terms)


def _narrowed(pod: PodInfo, requirement: Requirement, **changes: Any) -> PodInfo:
    """A copy of ``pod`` with ``requirement`` added to each of its node-affinity terms (and the
    other fields in ``changes``)."""
    terms = []
    for t in pod.requirement_terms:
        term = t.copy()
        term.add(requirement)
        terms.append(term)
    return dataclasses.replace(pod, requirement_terms=terms, _signature=None, **changes)


def _in_pool(pod: PodInfo, pool: str, inside: bool) -> PodInfo:
    """A copy of ``pod`` whose node-affinity terms also ask for NodePool ``pool``
    (``karpenter.sh/nodepool`` In, or NotIn when not ``inside``)."""
    return _narrowed(pod, Requirement(LABEL_NODEPOOL, not inside, frozenset((pool,))))


def _pinned(pod: PodInfo, zone: str) -> PodInfo:
    """A copy of ``pod`` without spread constraints, its node-affinity terms narrowed to ``zone``."""
    return _narrowed(pod, Requirement(LABEL_ZONE, False, frozenset((zone,))), spread=())


def _zone_spread_only(constrained: Sequence[PodInfo]) -> bool:
    """Whether every pod of ``constrained`` has one rule, a hard zone topology spread without
    ``minDomains`` above 1 (the batches :meth:`Scheduler._zonal` may pin; it checks the rest)."""
    return bool(constrained) and all(
        len(p.spread) == 1 and p.spread[0].key == LABEL_ZONE and p.spread[0].hard and p.spread[0].min_domains <= 1
        and not p.affinity and not p.preferred_affinity and not p.preferred_node_terms for p in constrained)


def _zonal_assignment(inputs: Inputs, pods: Sequence[PodInfo], base: SchedulingRun) -> dict[str, str] | None:
    """Pod key -> zone for the spread pods of a zone-spread-only batch (see :meth:`Scheduler._zonal`),
    or None when the batch does not qualify."""
    constrained = [p for p in pods if not _plain(p)]
    if not _zone_spread_only(constrained):
        return None
    groups: dict[tuple[str, SpreadConstraint], list[PodInfo]] = {}
    for p in constrained:
        groups.setdefault((p.namespace, p.spread[0]), []).append(p)
    where: dict[str, str] = {}
    for claim in base.claims:
        zone_req = claim.requirements.get(LABEL_ZONE)
        for p in claim.pods:
            if zone_req is not None and not zone_req.complement and len(zone_req.values) == 1:
                where[p.key] = next(iter(zone_req.values))
    if any(p.key not in where for p in constrained):
        return None
    for (ns, c), members in groups.items():
        sel = json.loads(c.selector)
        keys = {m.key for m in members}
        if any(not selector_matches(sel, m.labels) for m in members):
            return None
        if any(q.namespace == ns and q.key not in keys and selector_matches(sel, q.labels) for q in [*pods, *inputs.bound_pods]):
            return None
    # loads per zone (cpu and memory shares of the batch's spread pods), the base share first
    total = {r: max(1, sum(p.requests.get(r, 0) for p in constrained)) for r in ("cpu", "memory")}
    load: dict[str, float] = {}

    def weight(p: PodInfo) -> float:
        return sum(p.requests.get(r, 0) / total[r] for r in total)

    out: dict[str, str] = {}
    deals: list[tuple[float, list[PodInfo], list[str]]] = []
    for (_ns, c), members in sorted(groups.items(), key=lambda kv: -weight(kv[1][0])):
        domains = sorted(base.pod_domains(members[0], {LABEL_ZONE}).get(LABEL_ZONE, set()))
        counts = {z: 0 for z in domains}
        for m in members:
            counts[where[m.key]] = counts.get(where[m.key], 0) + 1
        q, r = divmod(len(members), len(domains)) if domains else (0, 0)
        ordered = sorted(members, key=lambda m: (where[m.key], m.key))
        if c.max_skew != 1 or set(counts) != set(domains) or sorted(counts.values()) != [q] * (len(domains) - r) + [q + 1] * r:
            for m in ordered:  # keep first fit's zones
                out[m.key] = where[m.key]
                load[where[m.key]] = load.get(where[m.key], 0.0) + weight(m)
            continue
        for i, z in enumerate(domains):
            for m in ordered[i * q:(i + 1) * q]:
                out[m.key] = z
            load[z] = load.get(z, 0.0) + q * weight(members[0])
        deals.append((weight(members[0]), ordered[len(domains) * q:], domains))
    levels = _zone_price_levels(inputs, constrained, sorted({z for *_x, ds in deals for z in ds}))
    for w, extra, domains in sorted(deals, key=lambda d: -d[0]):
        for m in extra:  # one extra pod per zone: to the cheapest zones for it, then the least loaded
            z = min((d for d in domains if d not in {out.get(e.key) for e in extra if e.key in out}),
                    key=lambda d: (round(_pod_value(m, levels.get(d, {})), 4), load.get(d, 0.0), d))
            out[m.key] = z
            load[z] = load.get(z, 0.0) + w
    return out


DEAL_SWEEPS = 12
"""Most improving moves the zone-pinned variant's local search makes (:func:`_improve_deal`)."""


def _improve_deal(inputs: Inputs, pods: Sequence[PodInfo], zones: dict[str, str]) -> dict[str, str]:  # noqa: C901
    """``zones`` (pod key -> zone, from :func:`_zonal_assignment`) improved by local search on
    the exact cost of each zone's pods (:func:`~karpy_core.scheduling.exact.class_table`): move a
    spread group's pod from one zone to another, or swap pods of two groups between two zones,
    where every group's counts stay within its ``maxSkew``; the move that saves most is made, up
    to :data:`DEAL_SWEEPS` times. Applies when every pod of the batch is pinned, every group's
    pods are alike and each zone's packing is small enough to solve exactly; else ``zones``."""
    if any(p.key not in zones for p in pods):
        return zones  # plain pods go anywhere: a zone's packing would not account for them
    groups: dict[tuple[str, SpreadConstraint], list[PodInfo]] = {}
    for p in pods:
        groups.setdefault((p.namespace, p.spread[0]), []).append(p)
    keys = sorted(groups, key=lambda k: (k[0], k[1].selector, k[1].max_skew))
    members = [sorted(groups[k], key=lambda m: m.key) for k in keys]
    if any(len({m.signature()[:5] for m in ms}) != 1 for ms in members):
        return zones
    domains = sorted({*zones.values()})
    count = {z: [sum(1 for m in ms if zones[m.key] == z) for ms in members] for z in domains}
    skew = [k[1].max_skew for k in keys]
    run = SchedulingRun(inputs, [])
    most = tuple(min(len(ms), max(count[z][g] for z in domains) + skew[g]) for g, ms in enumerate(members))
    tables: dict[str, ClassTable] = {}
    for z in domains:
        table = class_table(run, [_pinned(ms[0], z) for ms in members], most)
        if table is None:
            return zones  # a zone's pods open claims of several classes, or too many to solve exactly
        tables[z] = table

    def cost(z: str, vec: tuple[int, ...]) -> float:
        t = tables[z]
        return float("inf") if any(v > c for v, c in zip(vec, t.counts, strict=True)) else t.cost(vec)

    def within(g: int, a: str, b: str) -> bool:
        after = [count[z][g] - (z == a) + (z == b) for z in domains]
        return max(after) - min(after) <= skew[g]

    current = {z: cost(z, tuple(count[z])) for z in domains}
    if not all(np.isfinite(v) for v in current.values()):
        return zones
    for _ in range(DEAL_SWEEPS):
        best: tuple[float, str, str, list[int], list[int]] | None = None
        for a in domains:
            for b in domains:
                if a == b:
                    continue
                for g in range(len(members)):
                    if not count[a][g] or not within(g, a, b):
                        continue
                    for h in [None, *range(len(members))]:
                        va, vb = list(count[a]), list(count[b])
                        va[g] -= 1
                        vb[g] += 1
                        if h is not None:
                            if h == g or not count[b][h] or not within(h, b, a):
                                continue
                            va[h] += 1
                            vb[h] -= 1
                        delta = cost(a, tuple(va)) + cost(b, tuple(vb)) - current[a] - current[b]
                        if delta < -1e-9 and (best is None or delta < best[0] - 1e-12):
                            best = (delta, a, b, va, vb)
        if best is None:
            break
        _, a, b, va, vb = best
        count[a], count[b] = va, vb
        current[a], current[b] = cost(a, tuple(va)), cost(b, tuple(vb))
    out: dict[str, str] = {}
    for g, ms in enumerate(members):
        it = iter(ms)
        for z in domains:
            for _ in range(count[z][g]):
                out[next(it).key] = z
    return out


def _zone_price_levels(inputs: Inputs, pods: Sequence[PodInfo], zones: Sequence[str]) -> dict[str, dict[str, float]]:
    """USD/hour per unit of cpu and memory in each zone: the LP-dual unit prices
    (:func:`~karpy_core.scheduling.sizing.unit_prices`) of the pods' demand over the types each
    NodePool offers in that zone, of the NodePool where that demand is cheapest. Zones priced alike (one
    on-demand price everywhere) get equal levels; spot prices and missing families make a zone dearer."""
    out: dict[str, dict[str, float]] = {}
    for z in zones:
        reqs = Requirements.of(Requirement(LABEL_ZONE, False, frozenset((z,))))
        best: dict[str, float] = {}
        best_value = float("inf")
        for t in inputs.templates:
            table = inputs.tables[t.name]
            demand = np.zeros(len(table.resources), dtype=np.int64)
            for p in pods:
                for r, v in p.requests.items():
                    if r in table.index:
                        demand[table.index[r]] += v
            w = unit_prices(table, table.cheapest_prices(reqs.copy()), demand)
            level: dict[str, float] = {r: float(w[table.index[r]]) for r in ("cpu", "memory") if r in table.index}
            value = float(demand @ w)  # the batch priced at this NodePool's levels, USD/hour
            if value < best_value:
                best, best_value = level, value
        out[z] = best
    return out


def _pod_value(pod: PodInfo, level: Mapping[str, float]) -> float:
    """A pod's requests priced at a zone's :func:`_zone_price_levels` (USD/hour)."""
    return sum(pod.requests.get(r, 0) * w for r, w in level.items())


def _zone_skew_breaks(results: SchedulingResults, run: SchedulingRun, constrained: Sequence[PodInfo]) -> int:
    """How many hard zone-spread constraints of ``constrained`` the finished plan breaks, counting
    the pods each selector matches on new claims whose zone is settled and on existing nodes,
    all at once: stricter than kube-scheduler, which checks a constraint when its pod is bound,
    so pods without the constraint that a selector matches may skew the zones later. The run
    checks a constraint when its pod is placed, with the claims that settle later counted then
    (:meth:`~karpy_core.scheduling.topology.Topology.settle`,
    :class:`~karpy_core.scheduling.topology.OpenCheck`); the plan variants of
    :meth:`Scheduler.solve` are held to no more breaks than first fit."""
    zone_of: list[tuple[PodInfo, str]] = []
    for claim in results.new_claims:
        req = claim.requirements.get(LABEL_ZONE)
        if req is not None and not req.complement and len(req.values) == 1:
            z = next(iter(req.values))
            zone_of.extend((p, z) for p in claim.pods)
    zones_by_node = {n.name: n.labels.get(LABEL_ZONE) for n in run.inputs.nodes}
    for p in run.inputs.bound_pods:
        if zones_by_node.get(p.node_name):
            zone_of.append((p, str(zones_by_node[p.node_name])))
    for key, node in results.existing.items():
        pod = next((p for p in constrained if p.key == key), None)
        if pod is not None and zones_by_node.get(node):
            zone_of.append((pod, str(zones_by_node[node])))
    breaks = 0
    seen: set[tuple[str, SpreadConstraint]] = set()
    for p in constrained:
        for c in p.spread:
            if c.key != LABEL_ZONE or not c.hard or (p.namespace, c) in seen:
                continue
            seen.add((p.namespace, c))
            sel = json.loads(c.selector)
            domains = run.pod_domains(p, {LABEL_ZONE}).get(LABEL_ZONE, set())
            counts = dict.fromkeys(domains, 0)
            for q, z in zone_of:
                if q.namespace == p.namespace and z in counts and selector_matches(sel, q.labels):
                    counts[z] += 1
            if counts and max(counts.values()) - min(counts.values()) > c.max_skew:
                breaks += 1
    return breaks


def _plain(pod: PodInfo) -> bool:
    """Pods with no topology, pod-affinity or preference constraints (interchangeable per shape)."""
    return not (pod.unsupported or pod.has_topology or pod.preferred_node_terms)


Plan = tuple[SchedulingResults, float, SchedulingRun]
"""One plan: its results, the USD/hour of its new claims' cheapest offerings, and its run."""


@dataclass
class _Judge:
    """Keeps the best of a batch's plans (:attr:`best`, starting with the first-fit plan): a
    variant replaces it when it leaves fewer pods pending, or as many and wins on USD/hour and
    NodeClaims (:func:`~karpy_core.scheduling.ties.better`: within
    :data:`~karpy_core.scheduling.ties.TIE_USD` of the cheapest plan seen, fewer NodeClaims, then
    the cheaper), and relaxes minValues on no more claims (``relaxed``) and breaks no more zone
    spreads (``skew_breaks``, :func:`_zone_skew_breaks`) than the first-fit plan."""

    best: Plan
    relaxed: int
    skew_breaks: int
    constrained: Sequence[PodInfo]
    floor: float = float("inf")
    """USD/hour of the cheapest admissible plan seen with as few pending pods as :attr:`best`."""

    @classmethod
    def against(cls, base: Plan, constrained: Sequence[PodInfo]) -> _Judge:
        """The judge of variants of ``base`` (the first-fit plan of the batch ``constrained`` belongs to)."""
        return cls(base, sum(c.min_values_relaxed for c in base[0].new_claims),
                   _zone_skew_breaks(base[0], base[2], constrained), constrained, base[1])

    def __call__(self, trial: Plan | None) -> None:
        if trial is None:
            return
        if sum(c.min_values_relaxed for c in trial[0].new_claims) > self.relaxed:
            return  # a variant must not cost a minValues the uncapped plan keeps
        if _zone_skew_breaks(trial[0], trial[2], self.constrained) > self.skew_breaks:
            return  # nor a zone spread the first-fit plan keeps (see _zone_skew_breaks)
        score, best = _score(trial), _score(self.best)
        if score.pending < best.pending:
            self.floor = score.cost
        elif score.pending == best.pending:
            self.floor = min(self.floor, score.cost)
        if better(score, best, self.floor):
            self.best = trial


def _score(plan: Plan) -> PlanScore:
    """A plan's pending pods, USD/hour and NodeClaims, as :func:`~karpy_core.scheduling.ties.better` compares them."""
    return PlanScore(len(plan[0].errors), plan[1], len(plan[0].new_claims))


class Scheduler:
    """Solves pending pods against existing nodes and NodePool templates. Never modifies its
    arguments; every :meth:`solve` starts from them afresh.

    Args:
        templates: NodePools that may launch (already filtered to Ready ones).
        existing_nodes: nodes and in-flight NodeClaims.
        daemonsets: one :class:`PodInfo` per DaemonSet (from its pod template).
        nodepool_usage: per NodePool, resources already launched (capacity sums, ``nodes`` count),
            counted against ``limits``.
        bound_pods: pods already running on ``existing_nodes`` (for topology and host ports; their
            resources are already in ``ExistingNode.requested``).
        preference_policy: :class:`PreferencePolicy` (or its spelling, ``Respect``/``Ignore``).
        max_instance_types: instance types kept per NodeClaim.
        use_caches: False tries every node and claim for every pod (the pod-by-pod reference run).
        min_values_policy: :class:`MinValuesPolicy` (or its spelling, ``Strict``/``BestEffort``).
        tables: type tables to reuse, by NodePool name (from :func:`type_tables` over the same
            templates and DaemonSets); a table built for another template object is rebuilt.
        unready: NodePools left out because they are not Ready: name -> why (for explanations).
        unserved: NodePools left out because the cloud provider does not serve their NodeClass
            kind: name -> why (for explanations; :attr:`ClusterSnapshot.unserved_nodepools`).
        nominated: pod key (``namespace/name``) -> the name of the existing node (or in-flight
            NodeClaim) a previous pass planned it on: each such pod goes back there first, while
            the node takes it (:meth:`_keep_nominated`), so a pass never re-packs what an
            earlier one planned.
        sizing: size new NodeClaims of plain pods by cost (:func:`~karpy_core.scheduling.sizing.fill_best`;
            the provisioner's choice). False (the default) keeps Karpenter's sizes - fill a claim
            while its largest type fits, launch the cheapest that holds it - which Karpenter-style
            consolidation relies on: it takes at most one replacement, and a sized plan may split
            one replacement into two cheaper ones.
        node_index: a :class:`~karpy_core.scheduling.nodeindex.NodeIndex` over (a superset of)
            ``existing_nodes``, the same objects, shared by many schedulers so its static masks
            are computed once (a consolidation pass's simulations); None: a run with many nodes
            builds its own.
        node_scoring: None (the default): an existing node is chosen by first fit in name order.
            ``"first"``/``"last"``: the one kube-scheduler's default scores rank highest
            (:mod:`~karpy_core.scheduling.scoring`), ties to the first/last by name
            (:meth:`~karpy_core.scheduling.run.SchedulingRun.place_scored`).

    Raises:
        ValueError: a policy spelling is unknown, or ``node_scoring`` is none of the above.
    """

    def __init__(
        self,
        templates: Sequence[NodePoolTemplate],
        existing_nodes: Sequence[ExistingNode] = (),
        daemonsets: Sequence[PodInfo] = (),
        nodepool_usage: Mapping[str, Resources] | None = None,
        *,
        bound_pods: Sequence[PodInfo] = (),
        preference_policy: PreferencePolicy | str = PreferencePolicy.RESPECT,
        max_instance_types: int = MAX_INSTANCE_TYPES,
        use_caches: bool = True,
        min_values_policy: MinValuesPolicy | str = MinValuesPolicy.STRICT,
        tables: Mapping[str, TypeTable] | None = None,
        unready: Mapping[str, str] | None = None,
        sizing: bool = False,
        nominated: Mapping[str, str] | None = None,
        unserved: Mapping[str, str] | None = None,
        node_index: NodeIndex | None = None,
        node_scoring: str | None = None,
    ):
        if node_scoring not in (None, "first", "last"):
            raise ValueError(f"node_scoring: {node_scoring!r} is not None, 'first' or 'last'")
        ordered = tuple(sorted(templates, key=lambda t: (-t.weight, t.name)))
        given = tables or {}
        missing = [t for t in ordered if t.name not in given or given[t.name].template is not t]
        built = type_tables(missing, daemonsets)
        usage = nodepool_usage or {}
        self.inputs = Inputs(
            templates=ordered,
            tables={t.name: built[t.name] if t.name in built else given[t.name] for t in ordered},
            nodes=tuple(sorted(existing_nodes, key=lambda n: (not n.initialized, n.name))),
            bound_pods=tuple(bound_pods),
            limits_left={
                t.name: None if t.limits is None
                else subtract(t.limits, {k: v for k, v in usage.get(t.name, {}).items() if k in t.limits})
                for t in ordered
            },
            unready=dict(unready or {}),
            preference_policy=PreferencePolicy(preference_policy),
            min_values_policy=MinValuesPolicy(min_values_policy),
            max_instance_types=max_instance_types,
            use_caches=use_caches,
            sizing=sizing,
            unserved=dict(unserved or {}),
            node_index=node_index,
            node_scoring=node_scoring,
        )
        self._base = self.inputs
        self.nominated: Mapping[str, str] = dict(nominated or {})
        self._last: SchedulingRun | None = None

    @property
    def templates(self) -> tuple[NodePoolTemplate, ...]:
        """The NodePools, by weight (descending) then name."""
        return self.inputs.templates

    @property
    def tables(self) -> Mapping[str, TypeTable]:
        """Type table per NodePool name."""
        return self.inputs.tables

    def solve(self, pods: Sequence[PodInfo]) -> SchedulingResults:
        """Place ``pods``; returns the plan. Never raises for unschedulable pods: they get reasons.

        With ``sizing``, a batch with at most :data:`SEARCHED_TOPOLOGY_PODS` pods that carry topology
        rules (spread, pod affinity, preferences) is also planned once per size cap
        (:func:`size_caps`), once by marginal cost and, when zone spread is its only rule, once
        pinned by zone (:meth:`_zonal`). Under a cap, the claims those pods open
        prefer types of at most that many vCPUs (a pod no capped type holds gets the next cap's
        claim, then an uncapped one of the same NodePool, so NodePool weights, preferences and
        requirements decide exactly as without the cap): first fit spreads them over more,
        smaller nodes instead of stacking one pod of every group on the first claims (Karpenter's
        order). By marginal cost (:meth:`SchedulingRun.place_cheapest`), each such pod goes to the
        planned claim whose price rises least with it, or to a new claim when that is cheaper;
        pods that need a node of their own go first (:func:`own_nodes_first`).
        The marginal-cost plan is also made with its plain pods joining planned claims only where
        the claim's price stays the same (:meth:`SchedulingRun.place_free`; the rest sized by cost
        as new claims). The cheapest plan that leaves no more pods
        pending and relaxes minValues on no more claims wins; ties keep the uncapped plan.
        Deterministic. Measured on ``benchmarks/cost.py``, searched: zone spread (60 pods) from
        1.40x and 1.42x of the MILP optimum to 1.04x and 1.01x (then the zone-pinned plan: at the
        optimum); hostname spread (300 pods) at the proved optimum on both catalogs (from 1.26x
        and 1.31x); Karpenter's diverse mix at 500 pods 23% cheaper (AWS 18.80 -> 14.51 USD/hour,
        KWOK 12.63 -> 9.82), but solving in 1.7-2.7 s instead of 0.07-0.12. Those two now have
        more than :data:`SEARCHED_TOPOLOGY_PODS` pods with rules and get one plan
        (:meth:`_solve_large`): hostname spread 12.55 (AWS, 1.05x the search) and 8.71 (KWOK,
        the same), diverse mix 15.77 (1.09x) and 10.17 (1.04x), each in 0.02-0.08 s
        (``benchmarks/topology_paths.py``)."""
        kept, pods = self._start(pods)
        results = self._solve(pods)
        if kept:
            results.existing = {**kept, **results.existing}
        return results

    def solve_steps(self, pods: Sequence[PodInfo]) -> Steps[SchedulingResults]:
        """:meth:`solve` (same plan) as a generator (:data:`~karpy_core.utils.steps.Steps`) that
        yields before each pod it places, so a caller on an event loop can give the loop a turn
        during a long solve (a disruption simulation of 100 candidates moves over 1,000 pods).
        Without ``sizing`` only (the disruption simulations): with it, the whole :meth:`solve`
        runs in one step."""
        if self._base.sizing:
            return self.solve(pods)
        kept, pods = self._start(pods)
        results = (yield from self._solve_once_steps(pods, queue_order(pods), None))[0]  # _solve without sizing
        if kept:
            results.existing = {**kept, **results.existing}
        return results

    def _start(self, pods: Sequence[PodInfo]) -> tuple[dict[str, str], Sequence[PodInfo]]:
        """Reset :attr:`inputs` for a solve and keep the nominated pods where they are
        (:meth:`_keep_nominated`): pod key -> node name of those kept, and the pods left to place."""
        self.inputs = self._base
        if not self.nominated:
            return {}, pods
        kept, self.inputs = self._keep_nominated(pods)
        return kept, ([p for p in pods if p.key not in kept] if kept else pods)

    def _keep_nominated(self, pods: Sequence[PodInfo]) -> tuple[dict[str, str], Inputs]:
        """Put each pod of ``pods`` nominated to an existing node back on it, in queue order
        (then again the ones refused, while that keeps more: a topology spread may refuse a pod
        until the rest of its plan is back, as kube-scheduler retries it), where the node still
        takes it (taints, node affinity, free room, host ports, topology:
        :meth:`SchedulingRun.place_on`, trying its preferences as a placement does). Returns the
        pods kept (pod key -> node name) and the inputs the rest is solved with: those nodes'
        ``requested`` grown by the kept pods, which join ``bound_pods`` (copies bound to the
        node), so topology and host ports count them."""
        run = SchedulingRun(self.inputs, list(pods))
        by_name = {u.node.name: u for u in run.usage}
        kept: dict[str, str] = {}
        bound: list[PodInfo] = []
        waiting = [p for p in queue_order([p for p in pods if p.key in self.nominated])
                   if not p.unsupported and self.nominated[p.key] in by_name]
        while waiting:  # a pod a spread refuses now may fit once the rest of its plan is back
            refused: list[PodInfo] = []
            for pod in waiting:
                use = by_name[self.nominated[pod.key]]
                if any(run.place_on(use, pod, att, run.verdict(pod, att)) for att in run.attempts(pod)):
                    kept[pod.key] = use.node.name
                    held = copy.copy(pod)
                    held.node_name = use.node.name
                    bound.append(held)
                else:
                    refused.append(pod)
            if len(refused) == len(waiting):
                break
            waiting = refused
        if not kept:
            return kept, self.inputs
        nodes = tuple(dataclasses.replace(u.node, requested=u.requested) if u.requested is not u.node.requested else u.node
                      for u in run.usage)
        return kept, dataclasses.replace(self.inputs, nodes=nodes, bound_pods=(*self.inputs.bound_pods, *bound), memo={})

    def _solve(self, pods: Sequence[PodInfo]) -> SchedulingResults:
        """:meth:`solve` of the pods no nomination kept."""
        queue = queue_order(pods)
        constrained = [p for p in queue if not _plain(p)]
        if self.inputs.sizing and len(constrained) > SEARCHED_TOPOLOGY_PODS:
            return self._solve_large(pods, queue, constrained)
        best: tuple[SchedulingResults, float, SchedulingRun] = self._solve_once(pods, queue, None)
        if self.inputs.sizing and not constrained:
            for deal in self._limit_deals(pods, best[0]):
                if (len(deal[0].errors), deal[1]) < (len(best[0].errors), best[1] * (1 - 1e-9)):
                    best = deal
            self._last = best[2]
            return best[0]
        if not self.inputs.sizing:
            return best[0]
        caps = size_caps(self.inputs.tables.values(), constrained)
        consider = _Judge.against(best, constrained)
        variants: list[tuple[int | str | None, bool]] = [*((c, False) for c in caps), ("marginal", False), ("marginal", True),
                                                         ("zonal", False)]
        for cap, slack in variants:
            trial = self._zonal(pods, consider.best[2]) if cap == "zonal" else self._solve_once(pods, queue, cap, caps, slack=slack)
            consider(trial)
        self._last = consider.best[2]
        return consider.best[0]

    def _solve_large(self, pods: Sequence[PodInfo], queue: list[PodInfo], constrained: Sequence[PodInfo]) -> SchedulingResults:
        """A batch with more than :data:`SEARCHED_TOPOLOGY_PODS` constrained pods, too many to plan
        once per variant: one plan under the :func:`predicted_cap`. It stands when it leaves
        nothing pending and relaxes no minValues; otherwise the first-fit plan is made too and the
        capped one must beat it as a variant must (:class:`_Judge`). When no cap is predicted,
        the first-fit plan, and for a batch whose only rule is a hard zone spread
        (:func:`_zone_spread_only`) also the zone-pinned plan (:meth:`_zonal`), the cheaper one.

        Hard zone spreads no longer keep a batch on first fit: that rule rested on replaying
        plans with the claims still open on zone counted nowhere, where first fit's ~990 open
        claims (of ~1,000) hid their pods. Launched in their zones, first fit's plan of
        Karpenter's diverse mix at 5,000 pods leaves 342-678 of its 1,000 zone-spread pods where
        kube-scheduler refuses them once every other pod is bound; under cap 4, with
        :meth:`SchedulingRun.settle_open_zones`, 0-99 (``benchmarks/spread_replay.py``, "final").

        Measured (second solve of one scheduler, first fit -> predicted cap 4): Karpenter's
        diverse mix without its zone-spread fifth, 4,000 pods: Karpenter's 400 fake types
        1,243.89 -> 1,006.57 USD/hour (1.06 -> 1.30 s), AWS catalog 174.95 -> 132.06 (1.16 ->
        1.52 s), KWOK catalog 95.73 -> 86.69 (0.82 -> 0.75 s); the whole mix at 5,000 pods:
        1,524.33 -> 1,199.82, AWS 204.99 -> 160.57, KWOK 116.03 -> 102.70."""
        caps = size_caps(self.inputs.tables.values(), constrained)
        cap = predicted_cap(self.inputs.tables.values(), pods, caps)
        if cap is None:
            first = self._solve_once(pods, queue, None)
            if not _zone_spread_only(constrained):
                return first[0]
            consider = _Judge.against(first, constrained)
            consider(self._zonal(pods, first[2]))
            self._last = consider.best[2]
            return consider.best[0]
        trial = self._solve_once(pods, queue, cap, caps)
        if not trial[0].errors and not any(c.min_values_relaxed for c in trial[0].new_claims):
            return trial[0]
        consider = _Judge.against(self._solve_once(pods, queue, None), constrained)
        consider(trial)
        self._last = consider.best[2]
        return consider.best[0]

    def _limit_deals(self, pods: Sequence[PodInfo], base: SchedulingResults) -> list[tuple[SchedulingResults, float, SchedulingRun]]:
        """Plans of a batch of plain pods where a NodePool's cpu limit sent pods to a NodePool of
        lower weight (first fit fills the limited NodePool with the largest pods, whatever they
        save there): the limited NodePool's cpu goes to the pods it saves the most on, per core
        (each pod's value under either NodePool's LP dual prices, :func:`unit_prices`; pods it
        saves nothing on still fill it, it is the preferred NodePool), up to :data:`LIMIT_FILLS`
        of its cpu left; those pods are pinned to it (``karpenter.sh/nodepool`` In), the other
        candidates kept out of it (NotIn), and the batch planned again. A plan that gives the
        preferred NodePool less cpu than first fit did is dropped (weight is a preference: a
        NodePool of prepaid capacity is filled first). Empty when no pod was sent past a limited
        NodePool. The caller keeps the cheapest plan that leaves no more pods pending.

        Measured (``benchmarks/cost.py`` limit-general-first: a 24-cpu general-purpose NodePool
        preferred over a compute one, mix6-120): AWS 7.165 -> 5.640 USD/hour against the
        limits-aware MILP's 5.532 (bound 5.408), solve 0.43 -> 1.2 s; on KWOK the dealt plan
        (3.854) used less of the preferred NodePool than first fit and is dropped: 4.247 stays
        (MILP 3.745)."""
        order = {t.name: i for i, t in enumerate(self.inputs.templates)}
        by_name = {t.name: t for t in self.inputs.templates}
        placed = {p.key: c.nodepool for c in base.new_claims for p in c.pods}
        spilled: dict[str, str] = {}  # pod key -> the limited NodePool it would have preferred
        for p in pods:
            pool = placed.get(p.key)
            if pool is None:
                continue
            for t in self.inputs.templates[:order[pool]]:
                left = self.inputs.limits_left.get(t.name)
                if left is None or "cpu" not in left or not _admits(t, p):
                    continue
                spilled[p.key] = t.name
                break
        if not spilled:
            return []
        limited = by_name[sorted(set(spilled.values()), key=order.__getitem__)[0]]
        candidates = [p for p in pods if _admits(limited, p) and placed.get(p.key) is not None]
        others = {placed[p.key] for p in candidates if placed[p.key] != limited.name}
        if not others:
            return []
        fallback = by_name[sorted(others, key=order.__getitem__)[0]]
        values = {}
        for t in (limited, fallback):
            table = self.inputs.tables[t.name]
            demand = np.zeros(len(table.resources), dtype=np.int64)
            for p in candidates:
                vec = table.vector(p.requests)
                if vec is not None:
                    demand += vec
            values[t.name] = (table, unit_prices(table, table.cheapest_prices(t.requirements), demand))
        def saving(p: PodInfo) -> float:
            out = []
            for name in (fallback.name, limited.name):
                table, w = values[name]
                vec = table.vector(p.requests)
                out.append(float(vec @ w) if vec is not None else float("inf"))
            return (out[0] - out[1]) / max(p.requests.get("cpu", 0), 1)
        ranked = sorted(candidates, key=lambda p: (-saving(p), p.key))
        budget = (self.inputs.limits_left[limited.name] or {}).get("cpu", 0)
        keyed = {p.key: p for p in pods}
        trials = []
        for fill in LIMIT_FILLS:
            chosen: set[str] = set()
            used = 0
            for p in ranked:
                cpu = p.requests.get("cpu", 0)
                if used + cpu > fill * budget:
                    continue
                chosen.add(p.key)
                used += cpu
            batch = [_in_pool(p, limited.name, p.key in chosen) if p.key in spilled or p.key in chosen or
                     placed.get(p.key) == limited.name else p for p in pods]
            results, usd, run = self._solve_once(batch, queue_order(batch), None)
            for c in results.new_claims:  # the plan carries the caller's pods, not the pinned copies
                c.pods[:] = [keyed[q.key] for q in c.pods]
            if _pool_cpu(results, limited.name) >= _pool_cpu(base, limited.name):
                trials.append((results, usd, run))  # never less of the preferred NodePool than first fit
        return trials

    def _zonal(self, pods: Sequence[PodInfo], base: SchedulingRun) -> tuple[SchedulingResults, float, SchedulingRun] | None:
        """The zone-pinned variant, for batches whose only topology rules are zone spread: keep
        how many pods of each spread group go to each zone (re-dealing, for ``maxSkew`` 1, which
        zones get a group's extra pods: where their requests are cheapest, then where the zones'
        requests even out; :func:`_zonal_assignment`), pin every such pod to its
        zone and plan the whole batch as plain pods, sized by cost. None when the batch has other
        rules, a group's selector also matches bound pods or other groups' pods, or the first-fit
        plan (``base``) left a spread pod without a single zone."""
        zones = _zonal_assignment(self.inputs, pods, base)
        if zones is None:
            return None
        zones = _improve_deal(self.inputs, pods, zones)
        pinned: dict[str, PodInfo] = {}
        batch: list[PodInfo] = []
        for p in pods:
            if p.key in zones:
                q = _pinned(p, zones[p.key])
                pinned[q.key] = p
                batch.append(q)
            else:
                batch.append(p)
        results, usd, run = self._solve_once(batch, queue_order(batch), None)
        for c in results.new_claims:  # the plan carries the caller's pods, not the pinned copies
            c.pods[:] = [pinned.get(q.key, q) for q in c.pods]
        return results, usd, run

    def _solve_once(self, pods: Sequence[PodInfo], queue: list[PodInfo], cap: int | str | None,
                    caps: Sequence[int] = (), *, slack: bool = False) -> tuple[SchedulingResults, float, SchedulingRun]:
        """One plan (results, USD/hour of the new claims' cheapest offerings, its run); ``cap``:
        the vCPUs the claims opened for constrained pods prefer at most (None: any; a pod no
        capped type holds tries the larger of ``caps`` in turn, then any type), or
        ``"marginal"``: constrained pods go where they add the least USD/hour
        (:meth:`SchedulingRun.place_cheapest`) instead of first fit. ``slack``: plain pods join
        planned claims only where the claim's price stays the same (:meth:`SchedulingRun.place_free`),
        the rest go to new claims sized by cost."""
        return run_steps(self._solve_once_steps(pods, queue, cap, caps, slack=slack))

    def _solve_once_steps(self, pods: Sequence[PodInfo], queue: list[PodInfo], cap: int | str | None,
                          caps: Sequence[int] = (), *, slack: bool = False) -> Steps[tuple[SchedulingResults, float, SchedulingRun]]:
        """:meth:`_solve_once`, yielding before each pod it places."""
        run = self._last = SchedulingRun(self.inputs, list(pods))
        existing: dict[str, str] = {}
        reasons: dict[str, Unschedulable] = {}
        # Phase 1: pods whose placement depends on other pods or on preferences, first-fit decreasing.
        # Phase 2: the rest go to existing nodes and the claims phase 1 opened, first fit.
        # Phase 3: what is left is packed into new claims one claim at a time, sized by cost when
        #          ``sizing`` is on (see sizing.fill_best), else as Karpenter sizes them (packing.fill).
        # Then the claims still open on zone that hold pods a placed hard zone spread counts get a
        # zone (SchedulingRun.settle_open_zones).
        marginal = cap == "marginal"
        if isinstance(cap, int):
            run.room_scan = 0
            run.claim_caps = tuple({name: t.capacity[:, t.index["cpu"]] <= c * 1000 for name, t in self.inputs.tables.items()}
                                   for c in [cap, *(c for c in caps if c > cap)])
        leftover: list[PodInfo] = []
        first = [p for p in queue if not _plain(p)]
        if marginal:
            first = own_nodes_first(first)
        for phase, pods_in_phase in ((1, first), (2, [p for p in queue if _plain(p)])):
            if phase == 2:
                run.claim_caps = ()
            for pod in pods_in_phase:
                yield
                if pod.unsupported:
                    reasons[pod.key] = why(run, pod)
                    continue
                placed = False
                for att in run.attempts(pod):
                    verdict = run.verdict(pod, att)
                    node = run.place_existing(pod, att, verdict)
                    if node is not None:
                        existing[pod.key] = node.name
                        placed = True
                        break
                    if phase == 1 and marginal:
                        if run.place_cheapest(pod, att, verdict):
                            placed = True
                            break
                    elif phase == 2 and slack:
                        if run.place_free(pod, att, verdict):
                            placed = True
                            break
                    elif run.place_planned(pod, att, verdict) or (phase == 1 and run.place_new(pod, att, verdict)):
                        placed = True
                        break
                if not placed:
                    if phase == 1:
                        reasons[pod.key] = why(run, pod)
                    else:
                        leftover.append(pod)
        for pod in fill_best(run, leftover, self.inputs.sizing):
            reasons[pod.key] = why(run, pod)
        run.settle_open_zones()
        cost = run.new_claims_cost(0)
        claims = [finalize(c, self.inputs.max_instance_types) for c in run.claims]
        return SchedulingResults(claims, existing, {k: r.message for k, r in reasons.items()}, reasons), cost, run

    def _run(self) -> SchedulingRun:
        if self._last is None:
            self._last = SchedulingRun(self.inputs)
        return self._last

    def why(self, pod: PodInfo) -> Unschedulable:
        """The typed reason ``pod`` fits nowhere, as of the end of the last :meth:`solve`."""
        return why(self._run(), pod)

    def explain(self, pod: PodInfo) -> str:
        """Why ``pod`` fits no existing node, planned claim or NodePool: one clause per NodePool
        naming the first check that failed (taint, requirement, resources, limits, offerings)."""
        return self.why(pod).message

    def explain_detail(self, pod: PodInfo) -> list[str]:
        """Lines for ``karpy simulate --explain``: per NodePool, the check that ruled the pod out
        and the smallest change that would let it schedule there, where one exists."""
        return explain_detail(self._run(), pod)
