"""Packing plain pods (no topology, pod affinity or preferences) into new NodeClaims.

:func:`~karpy_core.scheduling.sizing.fill_best` packs with both policies of :class:`PackingPolicy` and
the cost-sized packer and keeps the cheapest plan;
:func:`fill` opens one claim at a time and hands it chunks of pod shapes;
:func:`add_identical` adds many pods of one shape to a claim in one step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_HOSTNAME
from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.feasibility import IntArray
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import MinValuesPolicy, PackingPolicy
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.topology import Placement

__all__ = ["fill", "add_identical", "ffd_key", "counts_that_fit", "pareto"]

FloatArray = npt.NDArray[np.float64]


def ffd_key(p: PodInfo) -> tuple[Any, ...]:
    """First-fit-decreasing order: cpu, then memory (both descending), creation time, namespace, name."""
    return (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.created, p.namespace, p.name)


def counts_that_fit(free: IntArray, vec: IntArray) -> IntArray:
    """Per row of ``free`` (types x resources), how many copies of ``vec`` fit (negative when
    even zero do not)."""
    per = free // np.maximum(vec, 1)
    per[:, vec == 0] = np.iinfo(np.int64).max
    out: IntArray = per.min(axis=1)
    return out


def fill(run: SchedulingRun, pods: list[PodInfo], policy: PackingPolicy = PackingPolicy.BALANCED) -> list[PodInfo]:
    """Pack plain pods into new NodeClaims; returns the pods that fit nowhere.

    One claim at a time: it is opened for the largest remaining pod, then repeatedly given a
    chunk of the pod shape that keeps its dominant resource share lowest
    (``max(cpu share, memory share)`` of the largest type it may still become) - memory-heavy
    and cpu-heavy pods end up together, so the cheapest type that fits a claim is used evenly
    instead of running out of cpu while memory sits idle (first-fit decreasing by cpu, which
    Karpenter uses, packs cpu-heavy pods together first). Chunks are
    ``ceil(room / shapes)`` pods, so shapes interleave finely while large groups of
    identical pods cost few decisions. Under :attr:`PackingPolicy.FIRST_FIT_DECREASING` the
    largest shape that still fits goes first, as many as fit.
    """
    balanced = policy is PackingPolicy.BALANCED
    buckets: dict[tuple[Any, ...], list[PodInfo]] = {}
    for p in pods:  # pods arrive in first-fit-decreasing order; buckets keep it
        buckets.setdefault(run.pod_key(p), []).append(p)
    failed: list[PodInfo] = []
    while buckets:
        first_sig = min(buckets, key=lambda k: ffd_key(buckets[k][0]))
        seed = buckets[first_sig].pop(0)
        att = run.attempts(seed)[-1]
        if not run.place_new(seed, att, run.verdict(seed, att)):
            failed.append(seed)
            failed.extend(buckets.pop(first_sig))  # identical pods fail identically
            continue
        if not buckets[first_sig]:
            del buckets[first_sig]
        claim = run.claims[-1]
        table = claim.table
        cols = [table.index[r] for r in ("cpu", "memory") if r in table.index]
        excluded: set[tuple[Any, ...]] = set()
        while True:
            best: tuple[float, tuple[Any, ...], IntArray] | None = None
            room = table.free[claim.mask]
            if room.size == 0:
                break
            ref = room.max(axis=0)
            for sig, bucket in buckets.items():
                if sig in excluded:
                    continue
                vec = table.vector(bucket[0].requests)
                if vec is None:
                    excluded.add(sig)
                    continue
                need = claim.requests + vec
                if not np.count_nonzero((room >= need).all(axis=1)):
                    excluded.add(sig)
                    continue
                share = max((need[c] / ref[c] if ref[c] else 0.0) for c in cols) if cols else 0.0
                key = (share if balanced else 0.0, ffd_key(bucket[0]))
                if best is None or key < (best[0], ffd_key(buckets[best[1]][0])):
                    best = (key[0], sig, vec)
            if best is None:
                break
            _, sig, vec = best
            bucket = buckets[sig]
            per_type = counts_that_fit(room - claim.requests, vec)
            fit = int(per_type.max()) if per_type.size else 0
            live = sum(1 for k in buckets if k not in excluded)
            chunk = max(1, min(len(bucket), -(-fit // max(1, live)) if balanced else fit))
            added = 0
            if run.try_add(claim, bucket[0], run.attempts(bucket[0])[-1], run.verdict(bucket[0], run.attempts(bucket[0])[-1])):
                added = 1 + add_identical(run, claim, bucket[1:chunk], vec)
            del bucket[:added]
            if not bucket:
                del buckets[sig]
            if added == 0:
                excluded.add(sig)
    return failed


def add_identical(run: SchedulingRun, claim: ClaimState, pods: list[PodInfo], vec: IntArray, *, target: int | None = None) -> int:
    """Add up to ``len(pods)`` pods identical to the one just added (same signature, no host
    ports) in one step; returns how many were added. Halves the count until the claim's
    remaining types, limits and minValues admit it. With ``target`` (a row of the claim's table
    still in its mask) no more are added than fit that type."""
    if not pods or pods[0].host_ports:
        return 0
    table = claim.table
    per_type = counts_that_fit(table.free - claim.requests, vec)
    per_type = np.where(claim.mask, per_type, -1)
    most = int(per_type[target]) if target is not None else (int(per_type.max()) if per_type.size else 0)
    k = min(len(pods), most)
    best_effort = run.inputs.min_values_policy is MinValuesPolicy.BEST_EFFORT
    mask = claim.mask
    while k > 0:
        mask = run.limit_mask(claim, claim.mask & (per_type >= k))
        if np.count_nonzero(mask) and (best_effort or table.min_values_problem(mask, claim.requirements) is None):
            break
        k //= 2
    if k <= 0:
        return 0
    claim.mask = mask
    claim.requests = claim.requests + vec * k
    claim.pods.extend(pods[:k])
    run.room_changed(claim)
    run.reserve(claim, mask)
    where = Placement({**claim.requirements.labels(), LABEL_HOSTNAME: claim.hostname}, table.template.taints)
    for pod in pods[:k]:  # plain pods carry no anti-affinity terms
        run.topology.record(pod.namespace, pod.labels, where)
    return k


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
