"""The cheapest packing of a small batch of plain pods into new NodeClaims, found exactly.

:mod:`~karpy_core.scheduling.sizing` sizes claims greedily (cost per unit of value, one look
ahead). That is within a fraction of a percent of the optimum for large batches, where many pods
of each shape average out, but a batch of ten pods - one zone's share of a zone-spread Deployment
mix - can cost a few percent more than its best packing. Small batches are cheap to solve exactly:

* the pods are grouped into *classes*: pods whose new claim would have the same NodePool and the
  same requirements (:func:`claim_class`; a zone-pinned pod's class is its zone);
* within a class, pods with the same :meth:`~karpy_core.scheduling.pod.PodInfo.signature` are one
  *bucket*, and a claim's content is a vector ``k`` of pods per bucket; its cost is the price of
  the cheapest instance type whose free room (allocatable minus DaemonSet overhead, max-pods as
  the ``pods`` column) holds ``sum_b k_b * request_b`` (:func:`pattern_costs`);
* :func:`solve_class` finds the cheapest claims for every sub-batch of a class by dynamic
  programming over covers, ``F(r) = min over k of cost(k) + F(max(r - k, 0))`` with ``k`` among
  the contents *maximal* for some type and holding a pod of ``r``'s first non-empty bucket (the
  first-bucket rule removes orderings of the same claims). Exact: a claim costs no more with
  fewer pods, so a cover is as good as a partition, and every claim's content grows into a
  maximal one at no extra cost. Its work, states times maximal contents, is bounded by
  :data:`EXACT_WORK`; :func:`optimal_bins` reads the whole batch's plan from it.

:func:`fill_exact` then opens the claims of the optimal partition with the run's own placement
steps (:meth:`~karpy_core.scheduling.run.SchedulingRun.place_new`, ``try_add``), so limits,
minValues, offerings and reservations are checked as for every other claim; a pod those checks
refuse is packed by :func:`~karpy_core.scheduling.packing.fill` instead. The plan is *proved*
optimal (and :func:`~karpy_core.scheduling.sizing.fill_best` skips its other packers) when every
claim opened as planned (in its class's NodePool, at the planned price) and no two classes could
share a claim (all in one NodePool, pairwise conflicting requirements).

Pure: numpy and the run's state; no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_HOSTNAME
from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.feasibility import Fit, IntArray
from karpy_core.scheduling.packing import add_identical, ffd_key, fill, pareto
from karpy_core.scheduling.pod import PodInfo, requirement_key
from karpy_core.scheduling.policies import PackingPolicy
from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.template import TypeTable
from karpy_core.scheduling.ties import TIE_USD, PlanScore, better

__all__ = ["EXACT_STATES", "EXACT_WORK", "BatchPlan", "ClassTable", "ExactPlan", "claim_class", "fill_exact", "optimal_bins",
           "pattern_costs", "plan_batch", "solve_class"]

FloatArray = npt.NDArray[np.float64]
EXACT_STATES = 20_000
"""Most count vectors (``prod(count_b + 1)`` over a class's buckets) a class may have to be solved
exactly: 14 pods of distinct shapes, 6 shapes of 4 pods, or 19,999 identical pods."""
_PER_CLAIM = 1e-9
"""USD/hour added per claim inside the dynamic programme by default: of plans that cost exactly the
same, the one with fewer claims wins (fewer nodes to run for the same price); :func:`optimal_bins`'
``tie`` widens that to plans within a cent."""
_CHUNK = 4_000_000
"""Most (state, content, bucket) cells the dynamic programme compares in one numpy step."""
EXACT_WORK = 3_000_000
"""Most (state, maximal content) pairs per class. Measured on the 2-core development machine: a
class near the limit takes ~0.1-0.2 s, one zone's ten pods of six shapes tens of milliseconds;
ten times the limit took up to 1.8 s for no cheaper plan on the cases tried."""


@dataclass(frozen=True, slots=True)
class ExactPlan:
    """The optimum of one class: ``bins`` as (pods per bucket, row of the type table priced),
    largest first; ``cost`` their summed price (USD/hour)."""

    cost: float
    bins: tuple[tuple[tuple[int, ...], int], ...]


def pattern_costs(vecs: IntArray, counts: IntArray, free: IntArray, prices: FloatArray
                  ) -> tuple[IntArray, FloatArray, npt.NDArray[np.intp], npt.NDArray[np.bool_]]:
    """Every claim content ``k <= counts`` with its cost.

    Args:
        vecs: ``(buckets, columns)`` requests per pod of each bucket (internal units).
        counts: pods per bucket.
        free: ``(types, columns)`` free room per candidate type.
        prices: USD/hour per candidate type (finite).

    Returns:
        (``(states, buckets)`` every vector ``k``, in :func:`numpy.ravel_multi_index` order over
        radices ``counts + 1``; USD/hour of the cheapest type holding each, ``inf`` for the empty
        vector and for contents no type holds; that type's index into ``prices``, -1 where none;
        whether ``k`` is *maximal* for some type: it fits the type, and one more pod of any bucket
        with pods to spare does not).
    """
    radix = tuple(int(c) + 1 for c in counts)
    grid = np.indices(radix).reshape(len(radix), -1).T.astype(np.int64)
    order = np.argsort(prices, kind="stable")
    sums: IntArray = grid @ vecs
    fits: npt.NDArray[np.bool_] = np.all(sums[:, None, :] <= free[order][None, :, :], axis=2)
    any_fit = fits.any(axis=1)
    first = fits.argmax(axis=1)
    cost = np.where(any_fit, prices[order][first], np.inf)
    cost[0] = np.inf
    kind = np.where(any_fit, order[first], -1).astype(np.intp)
    strides = _strides(radix)
    grows = np.zeros_like(fits)  # [k, t]: some k + e_b (b with pods to spare) still fits t
    for b, st in enumerate(strides):
        spare = grid[:, b] < counts[b]
        idx = np.flatnonzero(spare)
        grows[idx] |= fits[idx + st]
    maximal: npt.NDArray[np.bool_] = np.any(fits & ~grows, axis=1)
    maximal[0] = False
    return grid, cost, kind, maximal


def _strides(radix: Sequence[int]) -> list[int]:
    """Index step per bucket in :func:`numpy.ravel_multi_index` order (the last bucket fastest)."""
    out = [1] * len(radix)
    for b in range(len(radix) - 2, -1, -1):
        out[b] = out[b + 1] * radix[b + 1]
    return out


@dataclass(frozen=True, slots=True)
class ClassTable:
    """The optimum of every sub-batch of one class (:func:`solve_class`): for every vector
    ``r <= counts`` of pods per bucket, the cheapest claims holding them.

    Attributes:
        counts: the most pods per bucket the table answers for.
        prices: USD/hour per candidate type (the ``kind`` of a bin indexes it).
    """

    counts: tuple[int, ...]
    prices: FloatArray
    _grid: IntArray
    _strides: tuple[int, ...]
    _best: FloatArray
    _choice: npt.NDArray[np.intp]
    _kind: npt.NDArray[np.intp]

    def _index(self, r: Sequence[int]) -> int:
        if len(r) != len(self.counts) or any(x < 0 or x > c for x, c in zip(r, self.counts, strict=True)):
            raise ValueError(f"pods per bucket {tuple(r)} outside the table's {self.counts}")
        return sum(int(x) * st for x, st in zip(r, self._strides, strict=True))

    def cost(self, r: Sequence[int]) -> float:
        """USD/hour of the cheapest claims for ``r`` pods per bucket (``inf`` when some pod fits
        no type), plus :data:`_PER_CLAIM` per claim. Raises ValueError for a vector outside
        :attr:`counts`."""
        return float(self._best[self._index(r)])

    def plan(self, r: Sequence[int]) -> ExactPlan | None:
        """The claims behind :meth:`cost` (None when infeasible): each bin's pods per bucket and
        the cheapest type (index into :attr:`prices`) holding them, dearest first."""
        idx = self._index(r)
        if not np.isfinite(self._best[idx]):
            return None
        left = np.array(r, dtype=np.int64)
        bins: list[tuple[tuple[int, ...], int]] = []
        while idx:
            k = self._grid[int(self._choice[idx])]
            took = np.minimum(k, left)  # the covering content, cut to the pods left
            left = left - took
            t = int(self._kind[int(took @ np.array(self._strides))])
            bins.append((tuple(int(x) for x in took), t))
            idx = int(left @ np.array(self._strides))
        bins.sort(key=lambda b: -float(self.prices[b[1]]))
        return ExactPlan(float(sum(self.prices[t] for _, t in bins)), tuple(bins))


def solve_class(vecs: IntArray, counts: IntArray, free: IntArray, prices: FloatArray, *,
                states: int = EXACT_STATES, work: int = EXACT_WORK, per_claim: float = _PER_CLAIM) -> ClassTable | None:
    """The cheapest claims for every sub-batch ``r <= counts`` of one class, by dynamic programming
    over covers: ``F(r) = min over maximal contents k with k_f >= 1 (f: r's first non-empty
    bucket) of cost(k) + F(max(r - k, 0))``. Covering is exact because a claim's cost never rises
    when pods are taken off it, and only contents *maximal* for some type (:func:`pattern_costs`)
    are tried because every claim's content grows into one at no extra cost; the first-bucket rule
    removes orderings of the same claims. States are solved a layer of equal pod totals at a time.

    Arguments as for :func:`pattern_costs`; ``per_claim`` (USD/hour) is added to every claim's
    price inside the programme, so a plan with one claim more must save that much to win
    (:data:`_PER_CLAIM` by default: exact ties only). Returns None when ``prod(counts + 1)`` exceeds
    ``states``, states times maximal contents exceeds ``work``, or nothing fits.
    """
    radix = [int(c) + 1 for c in counts]
    n = int(np.prod(radix)) if radix else 1
    if n > states or n <= 1:
        return None
    grid, cost, kind, maximal = pattern_costs(vecs, counts, free, prices)
    pats = np.flatnonzero(maximal)
    # ties go to the first content tried: the dearest, fullest claims first (as first fit fills them)
    pats = pats[np.lexsort((-grid[pats].sum(axis=1), -cost[pats]))]
    if pats.size == 0 or n * pats.size > work:
        return None
    pk = grid[pats]
    pcost = cost[pats] + per_claim
    strides = np.array(_strides(radix), dtype=np.int64)
    best = np.full(n, np.inf)
    best[0] = 0.0
    choice = np.zeros(n, dtype=np.intp)
    first_bucket = (grid > 0).argmax(axis=1)
    total_pods = grid.sum(axis=1)
    chunk = max(1, _CHUNK // max(1, pats.size * len(radix)))
    for s in range(1, int(total_pods[-1]) + 1):
        layer_all = np.flatnonzero(total_pods == s)
        for lo in range(0, layer_all.size, chunk):
            layer = layer_all[lo:lo + chunk]
            ok = pk[:, first_bucket[layer]].T > 0  # (layer, patterns)
            rest = np.maximum(grid[layer][:, None, :] - pk[None, :, :], 0) @ strides
            vals = np.where(ok, pcost[None, :] + best[rest], np.inf)
            j = vals.argmin(axis=1)
            best[layer] = vals[np.arange(layer.size), j]
            choice[layer] = pats[j]
    return ClassTable(tuple(int(c) for c in counts), prices, grid, tuple(int(x) for x in strides), best, choice, kind)


def optimal_bins(vecs: IntArray, counts: IntArray, free: IntArray, prices: FloatArray, *,
                 states: int = EXACT_STATES, work: int = EXACT_WORK, tie: float = 0.0) -> ExactPlan | None:
    """The cheapest partition of the pods ``counts`` into claims (:func:`solve_class` for the
    whole batch). Arguments as for :func:`pattern_costs`; None when too large or infeasible.

    ``tie`` (USD/hour, :data:`~karpy_core.scheduling.ties.TIE_USD` for the provisioner): when the
    cheapest partition has two or more claims, the programme is solved again with ``tie`` added
    per claim, and its plan is taken instead when it has fewer claims and costs at most ``tie``
    more (:func:`~karpy_core.scheduling.ties.better`): of plans that cost the same to a cent, the
    one with fewer, larger NodeClaims (one ``c-4x`` rather than two ``c-2x`` on the KWOK catalog,
    where they differ by 0.00001 USD/hour). Solving twice costs a second programme of the same
    size; 0 (the default) keeps the cheapest partition.
    """
    table = solve_class(vecs, counts, free, prices, states=states, work=work)
    if table is None:
        return None
    want = tuple(int(c) for c in counts)
    plan = table.plan(want)
    if plan is None or tie <= 0 or len(plan.bins) < 2:
        return plan
    fewer = solve_class(vecs, counts, free, prices, states=states, work=work, per_claim=tie)
    alt = fewer.plan(want) if fewer is not None else None
    if alt is not None and better(PlanScore(0, alt.cost, len(alt.bins)), PlanScore(0, plan.cost, len(plan.bins)),
                                  floor=min(plan.cost, alt.cost), tie=tie):
        return alt
    return plan


def claim_class(run: SchedulingRun, pod: PodInfo) -> tuple[str, Requirements] | None:
    """(NodePool name, requirements) of the claim :meth:`SchedulingRun.place_new` would open for
    ``pod`` alone - the first NodePool by weight whose check admits it - without opening it; None
    when none does."""
    att = run.attempts(pod)[-1]
    verdict = run.verdict(pod, att)
    for template in run.inputs.templates:
        claim = ClaimState.fresh(run.tables[template.name], len(run.claims))
        fit = run.check(claim, pod, att, verdict)
        if isinstance(fit, Fit):
            return template.name, fit.requirements
    return None


def class_table(run: SchedulingRun, reps: Sequence[PodInfo], counts: Sequence[int]) -> ClassTable | None:
    """:func:`solve_class` for up to ``counts`` pods like each of ``reps`` (one pod per bucket),
    when they all open claims of one class (:func:`claim_class`); None when they do not, or the
    class is too large."""
    cls = [claim_class(run, p) for p in reps]
    if not cls or any(c is None for c in cls):
        return None
    name, reqs = cls[0]  # type: ignore[misc]
    key0 = _class_key(name, reqs)
    if any(_class_key(*c) != key0 for c in cls[1:]):  # type: ignore[misc]
        return None
    table = run.tables[name]
    vec_list = [table.vector(p.requests) for p in reps]
    if any(v is None for v in vec_list):
        return None
    vecs = np.array(vec_list, dtype=np.int64)
    rows, prices, used = _candidates(table, reqs, vecs, counts)
    if rows.size == 0:
        return None
    return solve_class(vecs[:, used], np.array(counts, dtype=np.int64), table.free[np.ix_(rows, used)], prices)


def _class_key(name: str, reqs: Requirements) -> tuple[Any, ...]:
    """A class's identity: NodePool and requirements, without the claim's placeholder hostname."""
    return name, tuple(r for r in requirement_key(reqs) if r[0] != LABEL_HOSTNAME)


def _candidates(table: TypeTable, reqs: Requirements, vecs: IntArray, counts: Sequence[int] | IntArray
                ) -> tuple[npt.NDArray[np.intp], FloatArray, npt.NDArray[np.intp]]:
    """The rows of ``table`` a claim with ``reqs`` may become that an optimal plan for ``counts``
    pods of ``vecs`` can need, their prices (USD/hour) and the resource columns the pods use.
    Left out: every row that holds the whole batch but the cheapest such (it could take any
    claim's pods for no more), then every row another beats on price with at least as much room
    in each used column (:func:`~karpy_core.scheduling.packing.pareto`)."""
    used = np.flatnonzero(vecs.any(axis=0))
    prices = table.cheapest_prices(reqs)
    rows = np.flatnonzero(table.compat_mask(reqs) & np.isfinite(prices))
    free = table.free[np.ix_(rows, used)]
    covers = np.all(free >= np.asarray(counts, dtype=np.int64) @ vecs[:, used], axis=1)
    if covers.any():
        cheapest = int(np.flatnonzero(covers)[np.argmin(prices[rows][covers])])
        covers[cheapest] = False
        rows, free = rows[~covers], free[~covers]
    keep = pareto(prices[rows], free, np.ones((0, rows.size), dtype=bool))
    sel = rows[keep]
    return sel, prices[sel], used


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """The optimum per class of a batch (:func:`plan_batch`).

    Attributes:
        classes: per class, (type table, candidate rows priced, its :class:`ExactPlan`, the pods
            of each bucket).
        failed: pods no NodePool admits.
        shared: two classes could share a claim (different NodePools, or compatible requirements),
            so the sum of the class optima is not proved to be the batch's.
    """

    classes: tuple[tuple[TypeTable, npt.NDArray[np.intp], ExactPlan, list[list[PodInfo]]], ...]
    failed: tuple[PodInfo, ...]
    shared: bool

    @property
    def cost(self) -> float:
        """USD/hour of the planned claims."""
        return sum(c[2].cost for c in self.classes)


def plan_batch(run: SchedulingRun, pods: Sequence[PodInfo]) -> BatchPlan | None:
    """The optimal partition of each class of plain ``pods`` (module docstring), without opening
    claims; None when some class is too large for :func:`optimal_bins`, some pod holds host ports
    (a claim's ports are not modelled) or asks for a resource no type offers."""
    if not pods or any(p.host_ports for p in pods):
        return None
    by_sig: dict[tuple[Any, ...], list[PodInfo]] = {}
    for p in pods:  # the caller's order (first-fit decreasing) within each bucket
        by_sig.setdefault(run.pod_key(p), []).append(p)
    classes: dict[tuple[Any, ...], tuple[str, Requirements, dict[tuple[Any, ...], list[PodInfo]]]] = {}
    failed: list[PodInfo] = []
    for sig, group in sorted(by_sig.items(), key=lambda kv: ffd_key(kv[1][0])):
        cls = claim_class(run, group[0])
        if cls is None:
            failed.extend(group)
            continue
        classes.setdefault(_class_key(*cls), (cls[0], cls[1], {}))[2][sig] = group
    if any(int(np.prod([len(g) + 1 for g in c[2].values()])) > EXACT_STATES for c in classes.values()):
        return None
    plans: list[tuple[TypeTable, npt.NDArray[np.intp], ExactPlan, list[list[PodInfo]]]] = []
    for name, reqs, buckets in classes.values():
        table = run.tables[name]
        groups = list(buckets.values())
        vec_list = [table.vector(g[0].requests) for g in groups]
        if any(v is None for v in vec_list):
            return None
        vecs = np.array(vec_list, dtype=np.int64)
        counts = np.array([len(g) for g in groups], dtype=np.int64)
        rows, prices, used = _candidates(table, reqs, vecs, counts)
        if rows.size == 0:
            return None
        plan = optimal_bins(vecs[:, used], counts, table.free[np.ix_(rows, used)], prices, tie=TIE_USD)
        if plan is None:
            return None
        plans.append((table, rows, plan, groups))
    found = list(classes.values())
    # classes of different NodePools could share a claim too (first fit puts a heavier pool's pod
    # on a lighter pool's planned claim), so those are never proved apart
    shared = len({c[0] for c in found}) > 1 or any(
        a[1].conflict(b[1]) is None for i, a in enumerate(found) for b in found[i + 1:])
    return BatchPlan(tuple(plans), tuple(failed), shared)


def fill_exact(run: SchedulingRun, pods: list[PodInfo]) -> tuple[list[PodInfo], bool] | None:
    """Open the claims of :func:`plan_batch`'s plan; returns (the pods that fit nowhere, whether
    the plan is proved optimal), or None - with the run untouched - where :func:`plan_batch` is."""
    batch = plan_batch(run, pods)
    if batch is None:
        return None
    failed = list(batch.failed)
    start = len(run.claims)
    leftover: list[PodInfo] = []
    for table, rows, plan, groups in batch.classes:
        taken = [0] * len(groups)
        for k, kind in plan.bins:
            members = [(b, groups[b][taken[b]:taken[b] + n]) for b, n in enumerate(k) if n]
            for b, n in enumerate(k):
                taken[b] += n
            leftover.extend(_open(run, members, table, int(rows[kind])))
    if leftover:
        failed.extend(fill(run, sorted(leftover, key=ffd_key), PackingPolicy.BALANCED))
    # proved: every claim opened as planned - in its class's NodePool (limits can send a claim to
    # the next one at the same price) and at no more than the planned price - and no two classes
    # could have shared a claim
    planned = [t for t, _rows, plan, _g in batch.classes for _ in plan.bins]
    in_place = len(run.claims) - start == len(planned) and all(
        c.table is t for c, t in zip(run.claims[start:], planned, strict=True))
    proved = (not leftover and not batch.shared and in_place
              and run.new_claims_cost(start) <= batch.cost * (1 + 1e-9) + 1e-12)
    return failed, proved


def _open(run: SchedulingRun, members: list[tuple[int, list[PodInfo]]], table: TypeTable, target: int) -> list[PodInfo]:
    """Open one claim for ``members`` ((bucket, pods), pods of a bucket identical), aiming at row
    ``target`` of ``table``; returns the pods the run's checks refused."""
    refused: list[PodInfo] = []
    claim: ClaimState | None = None
    for _b, group in members:
        rest = list(group)
        if claim is None:
            seed = rest.pop(0)
            att = run.attempts(seed)[-1]
            if not run.place_new(seed, att, run.verdict(seed, att)):
                return [seed, *rest, *(p for _x, g in members[1:] for p in g)]
            claim = run.claims[-1]
        elif not run.try_add(claim, rest[0], run.attempts(rest[0])[-1], run.verdict(rest[0], run.attempts(rest[0])[-1])):
            refused.extend(rest)
            continue
        else:
            rest.pop(0)
        if rest:
            vec = claim.table.vector(rest[0].requests)
            aim = target if claim.table is table and claim.mask[target] else None
            added = add_identical(run, claim, rest, vec, target=aim) if vec is not None else 0
            refused.extend(rest[added:])
    if claim is not None:  # a limited NodePool keeps room for the next claims (issue 35)
        run.release_finished(claim, target if claim.table is table else None)
    return refused
