"""Sizing new NodeClaims by cost: how many claims of which size the plain pods need.

Karpenter (and :func:`~karpy_core.scheduling.packing.fill`) keeps adding pods to a claim while the
largest instance type still fits them, then launches the cheapest type that holds them: the last
claim of a batch is usually a large node left mostly empty (32 pods of the embedded default
scenario: one c6a.8xlarge, 1.224 USD/hour, where c6a.4xlarge + c6a.2xlarge cost 0.918), and at
scale the largest type is rarely the cheapest per cpu.

:func:`fill_sized` packs the same pods one claim at a time, but picks a *target* instance type for
each claim before filling it: the type whose greedy filling from the remaining pods buys the most
value per USD, value being the pods' requests priced at the resource unit prices of the batch's
LP dual (:func:`unit_prices`). The classic greedy for covering with priced bins (Chvátal's set
cover greedy; "best cost per unit of requested resource"). Pods are then added while they fit the
target's room; the claim keeps every instance type that fits its pods (the target or cheaper
ones first, larger ones as launch alternatives), so NodePool limits, minValues, offerings and
requirements are checked exactly as for any other claim, by
:func:`~karpy_core.scheduling.feasibility.check_claim`.

Pure: numpy over the NodePool's :class:`~karpy_core.scheduling.template.TypeTable`; no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.feasibility import IntArray
from karpy_core.scheduling.packing import add_identical, ffd_key, fill
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import PackingPolicy
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.template import TypeTable

__all__ = ["fill_best", "fill_sized", "unit_prices", "choose_target"]

FloatArray = npt.NDArray[np.float64]
_BIG = np.iinfo(np.int64).max // 4
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


def pareto(prices: FloatArray, free: IntArray, compat: npt.NDArray[np.bool_]) -> npt.NDArray[np.intp]:
    """Indices of the candidates no other candidate dominates (no dearer, at least as much free
    room in every column, compatible with at least the same buckets); among equals the first.
    A dominated type can never give a better :func:`choose_target` score."""
    n = len(prices)
    if n <= 1:
        return np.arange(n)
    le_price = prices[None, :] <= prices[:, None]  # [t, u]: u no dearer than t
    ge_free = (free[None, :, :] >= free[:, None, :]).all(axis=2)
    ge_comp = (compat[:, None, :] >= compat[:, :, None]).all(axis=0) if compat.size else np.ones((n, n), dtype=bool)
    dom = le_price & ge_free & ge_comp
    equal = (prices[None, :] == prices[:, None]) & (free[None, :, :] == free[:, None, :]).all(axis=2)
    if compat.size:
        equal &= (compat[:, None, :] == compat[:, :, None]).all(axis=0)
    idx = np.arange(n)
    # u dominates t strictly, or is an equal that comes first
    beaten = (dom & ~equal).any(axis=1) | (equal & (idx[None, :] < idx[:, None])).any(axis=1)
    return np.flatnonzero(~beaten)


def choose_target(
    prices: FloatArray,
    free: IntArray,
    room: IntArray,
    seed_value: float,
    vecs: IntArray,
    counts: IntArray,
    compat: npt.NDArray[np.bool_],
    values: FloatArray,
) -> tuple[int, list[tuple[int, int]]]:
    """The target type for a claim and the greedy plan that fills it.

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

    Returns:
        (index of the target candidate, its plan: [(bucket, pods)] in order).
    """
    nb, nt = len(counts), len(prices)
    if nb == 0:
        scores = seed_value / prices
        return int(np.lexsort((-prices, -np.round(scores, 9)))[0]), []
    left = room.copy()
    rem = np.where(compat, counts[:, None], 0)  # (buckets, types)
    packed = np.zeros(nt, dtype=np.float64)
    steps: list[tuple[npt.NDArray[np.intp], IntArray]] = []
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
    best = int(np.lexsort((-prices, -np.round(scores, 9)))[0])
    plan: list[tuple[int, int]] = []
    for b, k in steps:
        if k[best] > 0:
            if plan and plan[-1][0] == int(b[best]):
                plan[-1] = (plan[-1][0], plan[-1][1] + int(k[best]))
            else:
                plan.append((int(b[best]), int(k[best])))
    return best, plan


def fill_best(run: SchedulingRun, pods: list[PodInfo]) -> list[PodInfo]:
    """Pack plain pods and keep the cheapest plan (fewer unplaced pods first, then USD/hour of
    the claims' cheapest offerings; ties keep the earlier): :func:`fill_sized` first; when its
    plan is more than :data:`GOOD_ENOUGH` above the batch's lower bound (the LP dual value of
    :func:`unit_prices`), also the balanced mix and first-fit decreasing as Karpenter does
    (:func:`~karpy_core.scheduling.packing.fill`), as a floor: the plan is never dearer than the
    fill-the-largest-type packers'. All deterministic. Returns the unplaced pods."""
    if not pods:
        return []
    mark = run.checkpoint()
    bound: list[float] = []
    failed = fill_sized(run, pods, bound)
    cost = run.new_claims_cost(mark[0])
    if not failed and bound and cost <= bound[0] * (1 + GOOD_ENOUGH):
        return failed
    packers: list[Any] = [lambda r, ps: fill_sized(r, ps), lambda r, ps: fill(r, ps, PackingPolicy.BALANCED),
                          lambda r, ps: fill(r, ps, PackingPolicy.FIRST_FIT_DECREASING)]
    best = (len(failed), round(cost, 9), 0)
    for i in (1, 2):
        run.restore(mark)
        failed = packers[i](run, pods)
        score = (len(failed), round(run.new_claims_cost(mark[0]), 9), i)
        if score < best:
            best = score
    if best[2] != 2:
        run.restore(mark)
        failed = packers[best[2]](run, pods)
    return failed


def fill_sized(run: SchedulingRun, pods: list[PodInfo], bound: list[float] | None = None) -> list[PodInfo]:
    """Pack plain pods into new NodeClaims sized by cost (see the module docstring); returns the
    pods that fit nowhere. ``bound``, when given, receives one number: a lower bound (USD/hour)
    on any plan for the pods that went to new claims (the sum over NodePools of the LP dual value
    of their pods), valid when every pod of the batch uses one NodePool."""
    buckets: dict[tuple[Any, ...], list[PodInfo]] = {}
    for p in pods:
        buckets.setdefault(p.signature(), []).append(p)
    failed: list[PodInfo] = []
    weights: dict[str, FloatArray] = {}
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
            if cand.size > CANDIDATES:
                # no type can score above its upper bound: the value of its whole room, or of all
                # the remaining pods it may take, whichever is less
                room_value = (np.maximum(table.free[cand] - claim.requests, 0) @ w)
                ub = (seed_value + np.minimum(room_value, (values * counts) @ comp)) / all_prices[cand]
                top = np.argsort(-ub, kind="stable")[:CANDIDATES]
                cand, comp = cand[top], comp[:, top]
            keep = pareto(all_prices[cand], table.free[np.ix_(cand, used)], comp)
            cand, comp = cand[keep], comp[:, keep]
            t, plan = choose_target(all_prices[cand], table.free[np.ix_(cand, used)],
                                    table.free[np.ix_(cand, used)] - claim.requests[used], seed_value,
                                    vecs[:, used], counts, comp, values)
            target = int(cand[t])
            if not plan:
                break
            progressed = False
            for b, k in plan:
                sig = kept[b]
                bucket = buckets.get(sig)
                if not bucket:
                    continue
                if not claim.mask[target]:
                    break
                if not (claim.requests + vecs[b] <= table.free[target]).all():
                    continue
                if not run.try_add(claim, bucket[0], run.attempts(bucket[0])[-1], None):
                    excluded.add(sig)
                    continue
                added = 1
                if k > 1 and claim.mask[target]:
                    added += add_identical(run, claim, bucket[1:k], vecs[b], target=target)
                progressed = True
                del bucket[:added]
                if not bucket:
                    del buckets[sig]
            if not progressed or not claim.mask[target]:
                # the target fell out (a pod narrowed the claim's zones or types): fill again
                # towards the best type still possible, unless nothing moved
                if not progressed:
                    break
                continue
            break
    return failed
