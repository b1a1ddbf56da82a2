"""Sizing new NodeClaims by cost: how many claims of which size the plain pods need.

Karpenter (and :func:`~karpy_core.scheduling.packing.fill`) keeps adding pods to a claim while the
largest instance type still fits them, then launches the cheapest type that holds them: the last
claim of a batch is usually a large node left mostly empty (32 pods of the embedded default
scenario: one c6a.8xlarge, 1.224 USD/hour, where c6a.4xlarge + c6a.2xlarge, or c6a.4xlarge +
c6a.xlarge + 2 x c6a.large, cost 0.918), and at scale the largest type is rarely the cheapest per
cpu (5,000 x 1 cpu: 14 nodes, mostly c8i.96xlarge, 235 USD/hour; 28 c6a.48xlarge-sized ones, 192).

:func:`fill_sized` packs the same pods one claim at a time, but picks a *target* instance type for
each claim before filling it (:func:`evaluate_targets`): the type whose fill from the remaining
pods buys the most value per USD, value being the pods' requests priced at the unit prices of the
batch's LP dual (:func:`unit_prices`) - the classic greedy for covering with priced bins
(Chvátal's set-cover greedy: best cost per unit of requested resource). A type is filled either
greedily (Toyoda's multi-dimensional knapsack rule: value per share of the scarcest room left) or
first with the largest proportional slice of the remaining pods (so no claim is left with only the
pods that pack badly), then greedily. Only a shortlist of types is evaluated (:func:`shortlist`:
the best score upper bounds, then the Pareto front). Batches of at most :data:`ROLLOUT_PODS`
pods look one plan ahead (:func:`rollout`): each of the best few targets (:data:`ROLLOUT_TARGETS`)
plus a greedy plan for what it leaves, cheapest total wins.

Pods are then added while they fit the target's room; the claim keeps every instance type that
fits its pods (the target or cheaper ones first, larger ones as launch alternatives), so NodePool
limits, minValues, offerings, requirements and host ports are checked exactly as for any other
claim, by :func:`~karpy_core.scheduling.feasibility.check_claim`. :func:`fill_best` keeps the
cheapest of the sized plans and Karpenter's (:func:`~karpy_core.scheduling.packing.fill`), so a
plan is never dearer than before. Pods stay in the NodePool :meth:`SchedulingRun.place_new` opens
their claim in (weight order).

Small batches (per class of interchangeable claims, at most
:data:`~karpy_core.scheduling.exact.EXACT_STATES` count vectors) are first packed exactly by
:mod:`~karpy_core.scheduling.exact`; the greedy packers here then only compete with it where its
plan is not proved optimal.

Pure: numpy over the NodePool's :class:`~karpy_core.scheduling.template.TypeTable`; no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.exact import fill_exact
from karpy_core.scheduling.feasibility import IntArray
from karpy_core.scheduling.packing import add_identical, ffd_key, fill, pareto
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import PackingPolicy
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.template import TypeTable
from karpy_core.scheduling.ties import PlanScore, better

__all__ = ["GOOD_ENOUGH", "ROLLOUT_PODS", "choose_target", "evaluate_targets", "fill_best", "fill_sized", "pareto",
           "plan_of", "ranking", "rollout", "shortlist", "unit_prices"]

FloatArray = npt.NDArray[np.float64]
_BIG = np.iinfo(np.int64).max // 4
ROLLOUT_PODS = 200
"""Batches (per NodePool) of at most this many pods look one plan ahead when sizing a claim."""
ROLLOUT_STEPS = 600
"""Look-ahead claims (:func:`rollout` steps) one :func:`fill_sized` packing may plan; past it the
remaining claims take the greedy target. benchmarks/cost.py's workloads use at most 148; 200 pods
of 18 shapes on a NodePool open to the whole AWS catalog used thousands (26 s for one solve; 3.3 s
at 500 steps, its plan 5% dearer: still never dearer than Karpenter's sizes, the floor)."""
ROLLOUT_TARGETS = (4, 8)
"""Targets compared by look-ahead per claim: small batches are packed with each (a wider look
can be misled by the greedy estimate as often as it helps; the cheaper plan is kept)."""
CANDIDATES = 48
"""Instance types evaluated per claim: those with the highest score upper bound."""
GOOD_ENOUGH = 0.005
"""A sized plan within this fraction of the batch's lower bound is kept without trying the other
packers (they cannot gain more than this; skipping them keeps large batches fast)."""


def unit_prices(table: TypeTable, prices: FloatArray, demand: IntArray) -> FloatArray:
    """USD/hour per unit of each resource column of ``table`` (cpu per millicore, memory per
    byte; 0 for the others): an optimal solution of the dual of the LP bound over cpu and memory,
    ``max D_cpu w_cpu + D_mem w_mem  s.t.  free_t,cpu w_cpu + free_t,mem w_mem <= price_t`` for
    every type ``t`` with a finite price, ``w >= 0``. The dual is concave in ``w_cpu`` once
    ``w_mem`` is set to its largest feasible value, so a golden-section search finds it.

    Args:
        table: the NodePool's type table.
        prices: USD/hour per row of ``table`` (``inf`` where it cannot be launched).
        demand: summed requests of the pods, a row over ``table.resources``.

    Returns:
        a row over ``table.resources``; every type's free capacity is worth at most its price.
    """
    out = np.zeros(len(table.resources), dtype=np.float64)
    ok = np.isfinite(prices)
    ic, im = table.index.get("cpu"), table.index.get("memory")
    if not ok.any() or ic is None or im is None:
        return out
    p = prices[ok]
    fc = np.maximum(table.free[ok, ic].astype(np.float64), 0.0)
    fm = np.maximum(table.free[ok, im].astype(np.float64), 0.0)
    dc, dm = float(demand[ic]), float(demand[im])
    pos_c, pos_m = fc > 0, fm > 0
    hi = float((p[pos_c] / fc[pos_c]).min()) if pos_c.any() else 0.0

    def wm_for(wc: float) -> float:
        slack = p - fc * wc
        return float(max(0.0, (slack[pos_m] / fm[pos_m]).min())) if pos_m.any() else 0.0

    def value(wc: float) -> float:
        return dc * wc + dm * wm_for(wc)

    lo, g = 0.0, (5 ** 0.5 - 1) / 2
    a, b = lo + (1 - g) * (hi - lo), lo + g * (hi - lo)
    va, vb = value(a), value(b)
    for _ in range(60):
        if va < vb:
            lo, a, va = a, b, vb
            b = lo + g * (hi - lo)
            vb = value(b)
        else:
            hi, b, vb = b, a, va
            a = lo + (1 - g) * (hi - lo)
            va = value(a)
    candidates = [0.0, lo, hi, float((p[pos_c] / fc[pos_c]).min()) if pos_c.any() else 0.0]
    wc = max(candidates, key=value)
    out[ic] = wc
    out[im] = wm_for(wc)
    return out


def evaluate_targets(
    prices: FloatArray,
    free: IntArray,
    room: IntArray,
    seed_value: float,
    vecs: IntArray,
    counts: IntArray,
    compat: npt.NDArray[np.bool_],
    values: FloatArray,
    proportional: bool = False,
) -> tuple[FloatArray, list[tuple[npt.NDArray[np.intp], IntArray]]]:
    """Every candidate target type for a claim, scored, with the greedy fill behind the score.

    Every candidate type ``t`` is filled from the remaining buckets in steps: each step takes the
    bucket with the most value per share of the room *left* in its scarcest resource (Toyoda's
    multi-dimensional knapsack greedy: what runs short gets dear, so cpu-heavy and memory-heavy
    pods end up together), ``ceil(fit / live buckets)`` pods at a time; the target is the type
    with the most ``(seed_value + packed value) / price``, ties to the dearer (larger) type.

    Args:
        prices: USD/hour per candidate.
        free: ``(candidates, columns)`` free capacity per candidate (allocatable minus DaemonSets).
        room: same shape, free room after the claim's current pods.
        seed_value: value of the pods already on the claim (USD/hour).
        vecs: ``(buckets, columns)`` request per pod of each bucket.
        counts: pods per bucket.
        compat: ``(buckets, candidates)`` whether a bucket may join the claim as that type.
        values: value per pod of each bucket (USD/hour).
        proportional: first put in the largest slice of the remaining pods, every bucket in
            proportion to its count, that fits (so every claim has the batch's mix and none is
            left with the pods that pack badly), then fill the rest greedily.

    Returns:
        (score per candidate, the fill's steps: per step, the bucket and pods taken per
        candidate; :func:`plan_of` turns them into one candidate's plan).
    """
    nb, nt = len(counts), len(prices)
    if nb == 0:
        return seed_value / prices, []
    left = room.copy()
    rem = np.where(compat, counts[:, None], 0)  # (buckets, types)
    packed = np.zeros(nt, dtype=np.float64)
    steps: list[tuple[npt.NDArray[np.intp], IntArray]] = []
    if proportional:
        need = rem.T.astype(np.float64) @ vecs.astype(np.float64)  # (types, columns)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(need > 0, np.maximum(left, 0) / np.where(need > 0, need, 1.0), np.inf)
        alpha = np.minimum(ratio.min(axis=1), 1.0)
        alpha = np.where(np.isfinite(alpha), alpha, 0.0)
        k_all = np.floor(rem * alpha[None, :]).astype(np.int64)  # (buckets, types)
        left -= k_all.T @ vecs
        rem -= k_all
        packed += values @ k_all
        for b in range(nb):
            if k_all[b].any():
                steps.append((np.full(nt, b, dtype=np.intp), k_all[b]))
    vf = vecs.astype(np.float64)
    zero = vecs == 0
    cols = np.arange(nt)
    for _ in range(8 * nb + 32):
        per = left[None, :, :] // np.maximum(vecs, 1)[:, None, :]  # (buckets, types, columns)
        per = np.where(zero[:, None, :], _BIG, per).min(axis=2)
        fit = np.minimum(per, rem)
        active = fit > 0
        live = active.sum(axis=0)
        if not live.any():
            break
        share = (vf[:, None, :] / np.maximum(left, 1)[None, :, :]).max(axis=2)
        score = np.where(active, values[:, None] / np.maximum(share, 1e-12), -np.inf)
        b = score.argmax(axis=0)
        f = fit[b, cols]
        k = np.where(live > 0, np.maximum(1, -(-f // np.maximum(live, 1))), 0)
        k = np.minimum(k, f)
        left -= vecs[b] * k[:, None]
        rem[b, cols] -= k
        packed += k * values[b]
        steps.append((b, k))
    scores = (seed_value + packed) / prices
    return scores, steps


def plan_of(steps: list[tuple[npt.NDArray[np.intp], IntArray]], t: int) -> list[tuple[int, int]]:
    """Candidate ``t``'s plan from :func:`evaluate_targets`' steps: [(bucket, pods)] in order."""
    plan: list[tuple[int, int]] = []
    for b, k in steps:
        if k[t] > 0:
            if plan and plan[-1][0] == int(b[t]):
                plan[-1] = (plan[-1][0], plan[-1][1] + int(k[t]))
            else:
                plan.append((int(b[t]), int(k[t])))
    return plan


def ranking(scores: FloatArray, prices: FloatArray) -> npt.NDArray[np.intp]:
    """Candidates best first: highest score (to 1e-9), then the dearer (larger) type."""
    return np.lexsort((-prices, -np.round(scores, 9)))


def choose_target(
    prices: FloatArray,
    free: IntArray,
    room: IntArray,
    seed_value: float,
    vecs: IntArray,
    counts: IntArray,
    compat: npt.NDArray[np.bool_],
    values: FloatArray,
    proportional: bool = False,
) -> tuple[int, list[tuple[int, int]]]:
    """The best candidate of :func:`evaluate_targets` (same arguments) and its plan."""
    scores, steps = evaluate_targets(prices, free, room, seed_value, vecs, counts, compat, values, proportional)
    best = int(ranking(scores, prices)[0])
    return best, plan_of(steps, best)


def shortlist(prices: FloatArray, room_full: IntArray, free_used: IntArray, seed_value: float, values: FloatArray,
              counts: IntArray, comp: npt.NDArray[np.bool_], w: FloatArray, slots: IntArray | None = None) -> npt.NDArray[np.intp]:
    """The candidates worth evaluating: the :data:`CANDIDATES` with the highest score upper bound
    (a type scores at most the least of: the value of its whole room at the unit prices ``w``,
    the value of all the remaining pods it may take, and its pod slots left (``slots``, its
    max-pods room, a row per candidate; None: not counted) times the most valuable pod it may
    take; per USD), then those no other dominates (:func:`pareto`).

    The pod slots matter for small pods: ``w`` prices cpu and memory only, so without them every
    type's room looked worth about its price, and 20,000 pods of 10m/16Mi went mostly to
    c6a.4xlarge (234 pods, 0.612 USD/hour) instead of c8i-flex.xlarge (118 pods, 0.178): 47.51
    USD/hour against 30.18 (trial 18), the c8i-flex types having fallen out of the shortlist."""
    idx = np.arange(len(prices))
    if len(idx) > CANDIDATES:
        room_value = np.maximum(room_full, 0) @ w
        cap = (values * counts) @ comp
        if slots is not None and len(values):
            cap = np.minimum(cap, np.maximum(slots, 0) * np.where(comp, values[:, None], 0.0).max(axis=0))
        ub = (seed_value + np.minimum(room_value, cap)) / prices
        idx = np.argsort(-ub, kind="stable")[:CANDIDATES]
    keep = pareto(prices[idx], free_used[idx], comp[:, idx])
    out: npt.NDArray[np.intp] = idx[keep]
    return out


def _slots(table: TypeTable, room: IntArray) -> IntArray | None:
    """The ``pods`` column of ``room`` (rows of ``table``'s columns): pod slots left per type, or
    None when the table has no such column."""
    i = table.index.get("pods")
    return None if i is None else room[:, i]


def _full_compat(table: TypeTable, run: SchedulingRun, pods: list[PodInfo]) -> npt.NDArray[np.bool_]:
    """``(buckets, types)``: which rows of ``table`` each bucket's pod may use (any of its
    node-affinity terms), ignoring what a claim already holds."""
    rows = np.zeros((len(pods), len(table.types)), dtype=bool)
    for i, p in enumerate(pods):
        for term in run.attempts(p)[-1].terms:
            rows[i] |= table.compat_mask(term)
    return rows


def rollout(table: TypeTable, prices: FloatArray, used: npt.NDArray[np.intp], vecs: IntArray, counts: IntArray,
            compat: npt.NDArray[np.bool_], values: FloatArray, w: FloatArray, proportional: bool,
            budget: list[int] | None = None) -> float:
    """USD/hour of the greedy plan (:func:`evaluate_targets`, best target per claim) for the pods
    ``counts`` leaves, on empty claims of ``table``; ``inf`` when some pod fits no type. An
    estimate on arrays only: a claim's requirements narrowing (zones) is not modelled.
    ``budget`` (one number) is decreased by one per claim planned."""
    counts = counts.copy()
    total = 0.0
    free_used = table.free[:, used]
    order = sorted(range(len(counts)), key=lambda b: (-int(vecs[b, used[0]]) if len(used) else 0, -float(values[b])))
    while counts.any():
        s = next(b for b in order if counts[b] > 0)
        fits = compat[s] & np.isfinite(prices) & (table.free >= vecs[s]).all(axis=1)
        cand = np.flatnonzero(fits)
        if cand.size == 0:
            return float("inf")
        counts[s] -= 1
        comp = compat[:, cand]
        room = table.free[cand] - vecs[s]
        keep = shortlist(prices[cand], room, free_used[cand], float(values[s]), values, counts, comp, w, _slots(table, room))
        cand, comp = cand[keep], comp[:, keep]
        f = free_used[cand]
        scores, steps = evaluate_targets(prices[cand], f, f - vecs[s, used], float(values[s]), vecs[:, used], counts,
                                         comp, values, proportional)
        t = int(ranking(scores, prices[cand])[0])
        for b, k in plan_of(steps, t):
            counts[b] -= k
        total += float(prices[cand[t]])
        if budget is not None:
            budget[0] -= 1
    return total


def fill_best(run: SchedulingRun, pods: list[PodInfo], sizing: bool = True) -> list[PodInfo]:
    """Pack plain pods and keep the cheapest plan (fewer unplaced pods first, then USD/hour of
    the claims' cheapest offerings, where plans within :data:`~karpy_core.scheduling.ties.TIE_USD`
    of the cheapest count as equal and the one with fewer NodeClaims wins,
    :func:`~karpy_core.scheduling.ties.better`; full ties keep the earlier packer). With ``sizing``: first the
    exact packer (:func:`~karpy_core.scheduling.exact.fill_exact`, small batches only), whose plan
    is kept outright when it is proved optimal, competes with the others when it is not, and is
    dropped when a claim of it would relax minValues; then
    :func:`fill_sized` (proportional, then greedy), stopping as soon as a plan is within
    :data:`GOOD_ENOUGH` of the batch's lower bound (the LP dual value of :func:`unit_prices`);
    then the balanced mix and first-fit decreasing as Karpenter does
    (:func:`~karpy_core.scheduling.packing.fill`), as a floor: the plan is never dearer than the
    fill-the-largest-type packers'. Without ``sizing`` only those two (Karpenter's claim sizes).
    All deterministic. Returns the unplaced pods."""
    if not pods:
        return []
    mark = run.checkpoint()
    exact = fill_exact(run, pods) if sizing else None
    if exact is not None and any(c.relaxed for c in run.claims[mark[0]:]):
        run.restore(mark)  # its tight claims would relax a minValues (BestEffort): not taken
        exact = None
    if exact is not None and exact[1]:
        return exact[0]  # proved optimal: no other packer is cheaper
    best: tuple[PlanScore, int] | None = None
    floor = float("inf")  # the cheapest plan seen with as few pending pods as the best
    if exact is not None:  # not proved: its plan competes as packer -1
        best = (_plan_score(run, mark[0], exact[0]), -1)
        floor = best[0].cost
        run.restore(mark)
    packers: list[Any] = [
        lambda r, ps, b=None: fill(r, ps, PackingPolicy.BALANCED),
        lambda r, ps, b=None: fill(r, ps, PackingPolicy.FIRST_FIT_DECREASING),
    ]
    if sizing:
        sized: list[Any] = []
        for targets in ROLLOUT_TARGETS if len(pods) <= ROLLOUT_PODS else ROLLOUT_TARGETS[:1]:
            sized.append(lambda r, ps, b=None, t=targets: fill_sized(r, ps, b, proportional=True, targets=t))
            sized.append(lambda r, ps, b=None, t=targets: fill_sized(r, ps, b, targets=t))
        packers[:0] = sized
    bound: list[float] = []
    failed: list[PodInfo] = []
    for i, packer in enumerate(packers):
        if i:
            run.restore(mark)
        failed = packer(run, pods, bound if i == 0 and sizing else None)
        score = _plan_score(run, mark[0], failed)
        if best is None or score.pending < best[0].pending:
            floor = score.cost
        elif score.pending == best[0].pending:
            floor = min(floor, score.cost)
        if best is None or better(score, best[0], floor):
            best = (score, i)
        if not best[0].pending and bound and best[0].cost <= bound[0] * (1 + GOOD_ENOUGH):
            break
    assert best is not None
    if best[1] == -1:
        run.restore(mark)
        redo = fill_exact(run, pods)
        assert redo is not None
        return redo[0]
    if best[1] != i:
        run.restore(mark)
        failed = packers[best[1]](run, pods)
    return failed


def _plan_score(run: SchedulingRun, start: int, failed: list[PodInfo]) -> PlanScore:
    """The packing just done (claims opened since ``start``) as :func:`~karpy_core.scheduling.ties.better` compares it."""
    return PlanScore(len(failed), run.new_claims_cost(start), len(run.claims) - start)


def fill_sized(run: SchedulingRun, pods: list[PodInfo], bound: list[float] | None = None, *,  # noqa: C901
               proportional: bool = False, targets: int = ROLLOUT_TARGETS[0]) -> list[PodInfo]:
    """Pack plain pods into new NodeClaims sized by cost (see the module docstring); returns the
    pods that fit nowhere. ``targets``: how many targets the look-ahead compares per claim.
    ``bound``, when given, receives one number: a lower bound (USD/hour)
    on any plan for the pods that went to new claims (the sum over NodePools of the LP dual value
    of their pods), valid when every pod of the batch uses one NodePool."""
    buckets: dict[tuple[Any, ...], list[PodInfo]] = {}
    for p in pods:
        buckets.setdefault(run.pod_key(p), []).append(p)
    failed: list[PodInfo] = []
    weights: dict[str, FloatArray] = {}
    budget = [ROLLOUT_STEPS]  # look-ahead claims left for this packing
    while buckets:
        first_sig = min(buckets, key=lambda k: ffd_key(buckets[k][0]))
        seed = buckets[first_sig].pop(0)
        att = run.attempts(seed)[-1]
        if not run.place_new(seed, att, run.verdict(seed, att)):
            failed.append(seed)
            failed.extend(buckets.pop(first_sig))
            continue
        if not buckets[first_sig]:
            del buckets[first_sig]
        claim: ClaimState = run.claims[-1]
        table = claim.table
        all_prices = table.cheapest_prices(claim.requirements)
        w = weights.get(table.template.name)
        if w is None:
            demand = np.zeros(len(table.resources), dtype=np.int64)
            for bucket in [*buckets.values(), [seed]]:
                vec = table.vector(bucket[0].requests)
                if vec is not None:
                    demand += vec * len(bucket)
            w = weights[table.template.name] = unit_prices(table, all_prices, demand)
            if bound is not None:
                bound[:] = [float(demand @ w) + (bound[0] if bound else 0.0)] if len(weights) == 1 else []
        excluded: set[tuple[Any, ...]] = set()
        sized: int | None = None  # the type the claim was filled towards
        while True:
            cand = np.flatnonzero(claim.mask & np.isfinite(all_prices))
            if cand.size == 0:
                break
            sigs = [s for s in buckets if s not in excluded]
            if not sigs:
                break
            vec_list: list[IntArray] = []
            comp_rows: list[npt.NDArray[np.bool_]] = []
            kept: list[tuple[Any, ...]] = []
            for s in sigs:
                p0 = buckets[s][0]
                vec = table.vector(p0.requests)
                if vec is None:
                    excluded.add(s)
                    continue
                row = np.zeros(cand.size, dtype=bool)
                for term in run.attempts(p0)[-1].terms:
                    if claim.requirements.conflict(term) is None:
                        row |= table.compat_mask(term)[cand]
                if not row.any():
                    excluded.add(s)
                    continue
                kept.append(s)
                vec_list.append(vec)
                comp_rows.append(row)
            if not kept:
                break
            vecs = np.array(vec_list, dtype=np.int64)
            counts = np.array([len(buckets[s]) for s in kept], dtype=np.int64)
            comp = np.array(comp_rows)
            used = np.flatnonzero(vecs.any(axis=0) | claim.requests.astype(bool))
            values = vecs.astype(np.float64) @ w
            seed_value = float(claim.requests @ w)
            room = table.free[cand] - claim.requests
            keep = shortlist(all_prices[cand], room, table.free[np.ix_(cand, used)], seed_value, values, counts, comp, w,
                             _slots(table, room))
            cand, comp = cand[keep], comp[:, keep]
            free_c = table.free[np.ix_(cand, used)]
            scores, steps = evaluate_targets(all_prices[cand], free_c, free_c - claim.requests[used], seed_value,
                                             vecs[:, used], counts, comp, values, proportional)
            order = ranking(scores, all_prices[cand])
            t = int(order[0])
            if int(counts.sum()) <= ROLLOUT_PODS and len(order) > 1 and budget[0] > 0:
                # small batches: look one plan ahead; each shortlisted target plus a greedy
                # plan for what it leaves, cheapest total wins
                full = _full_compat(table, run, [buckets[k][0] for k in kept])
                best_total = np.inf
                for c in order[:targets]:
                    took = np.zeros(len(kept), dtype=np.int64)
                    for b, k in plan_of(steps, int(c)):
                        took[b] += k
                    total = float(all_prices[cand[c]]) + rollout(table, all_prices, used, vecs, counts - took, full,
                                                                 values, w, proportional, budget)
                    if total < best_total - 1e-9:
                        best_total, t = total, int(c)
            plan = plan_of(steps, t)
            target = int(cand[t])
            if not plan:
                break
            progressed = False
            for b, k in plan:
                sig = kept[b]
                group = buckets.get(sig)
                if not group:
                    continue
                if not claim.mask[target]:
                    break
                if not (claim.requests + vecs[b] <= table.free[target]).all():
                    continue
                if not run.try_add(claim, group[0], run.attempts(group[0])[-1], run.verdict(group[0], run.attempts(group[0])[-1])):
                    excluded.add(sig)
                    continue
                added = 1
                if k > 1 and claim.mask[target]:
                    added += add_identical(run, claim, group[1:k], vecs[b], target=target)
                progressed = True
                del group[:added]
                if not group:
                    del buckets[sig]
            if not progressed or not claim.mask[target]:
                # the target fell out (a pod narrowed the claim's zones or types): fill again
                # towards the best type still possible, unless nothing moved
                if not progressed:
                    break
                continue
            sized = target
            break
        # a limited NodePool keeps room for its next claims: the claim reserves only up to the
        # type it was filled towards, or its cheapest type when no pod joined its seed (issue 35)
        run.release_finished(claim, sized)
    return failed
