"""kube-scheduler's default node scores, for the placements karpy replays
(:meth:`~karpy_core.scheduling.run.SchedulingRun.place_scored`).

Read from Kubernetes v1.36 (``pkg/scheduler/framework/plugins``) and its default plugin weights
(``pkg/scheduler/apis/config/v1/default_plugins.go``):

* ``NodeResourcesFit``, strategy ``LeastAllocated`` (weight 1; ``noderesources/least_allocated.go``):
  per resource of cpu and memory (weight 1 each) that the node allocates,
  ``(allocatable - requested) * 100 / allocatable`` (0 when ``requested`` exceeds it), averaged,
  integer division. ``requested`` is the node's requests plus the pod's, the pod's cpu or memory
  counted as 100m and 200 MiB when it requests none (``GetNonZeroRequests``; karpy applies that
  to the pod scored, not to the pods already bound).
* ``NodeResourcesBalancedAllocation`` (weight 1; ``noderesources/balanced_allocation.go``): with
  ``f_r = min(1, requested_r / allocatable_r)`` for cpu and memory, ``b = int((1 - |f_cpu - f_mem| / 2) * 100)``,
  with the pod (``b1``) and without it (``b0``); the score is ``50 + (50 + b1 - b0) // 2``. Not
  scored (0 everywhere) for a pod that requests neither.
* ``PodTopologySpread`` (weight 2; ``podtopologyspread/scoring.go``): only the pod's
  ``ScheduleAnyway`` constraints. Per constraint, on a node with its key,
  ``count(domain) * ln(domains + 2) + (maxSkew - 1)``, summed and rounded; then normalized over the
  scored nodes to ``100 * (max + min - s) // max`` (100 everywhere when ``max`` is 0). Hostname
  counts are per node and ``domains`` the nodes scored. Kubernetes' system default constraints
  (for pods without constraints of their own) are not modelled.

Not modelled: ``TaintToleration`` (PreferNoSchedule taints), ``NodeAffinity`` preferred terms,
``InterPodAffinity`` preferred terms and ``ImageLocality`` (karpy tries preferences as attempts,
strictest first, instead), and ``percentageOfNodesToScore`` (kube-scheduler scores a sample of a
large cluster's feasible nodes, from a rotating start). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_HOSTNAME
from karpy_core.scheduling.nodes import NodeUsage
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.topology import SpreadConstraint

__all__ = ["DEFAULT_CPU_REQUEST", "DEFAULT_MEMORY_REQUEST", "node_scores", "resource_scores", "spread_scores", "usage_arrays"]

MAX_NODE_SCORE = 100
DEFAULT_CPU_REQUEST = 100
"""Millicores counted for a pod requesting no cpu (``schedutil.DefaultMilliCPURequest``)."""
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
"""Bytes counted for a pod requesting no memory (``schedutil.DefaultMemoryRequest``)."""
_RESOURCES = ("cpu", "memory")
_WEIGHT_FIT, _WEIGHT_BALANCED, _WEIGHT_SPREAD = 1, 1, 2
IntArray = npt.NDArray[np.int64]


def resource_scores(alloc: IntArray, requested: IntArray, pod: Mapping[str, int]) -> IntArray:
    """``LeastAllocated`` plus ``BalancedAllocation`` (weights 1 and 1) for many nodes at once.

    Args:
        alloc: allocatable cpu (millicores) and memory (bytes) per node, shape ``(n, 2)``.
        requested: what the pods on each node request, same shape and units.
        pod: the pod's requests (internal units).

    Returns:
        The score per node, shape ``(n,)``, exactly as kube-scheduler's integer arithmetic
        (see the module docstring).
    """
    want = np.array([pod.get("cpu", 0), pod.get("memory", 0)], dtype=np.int64)
    nonzero = np.where(want > 0, want, np.array([DEFAULT_CPU_REQUEST, DEFAULT_MEMORY_REQUEST], dtype=np.int64))
    has = alloc > 0
    safe = np.where(has, alloc, 1)
    total = requested + nonzero
    per = np.where(has & (total <= alloc), (alloc - total) * MAX_NODE_SCORE // safe, 0)
    count = has.sum(axis=1)
    least = np.where(count > 0, per.sum(axis=1) // np.maximum(count, 1), 0)
    if not want.any():
        return least
    both = has.all(axis=1)

    def balance(req: IntArray) -> IntArray:
        frac = np.minimum(1.0, req / safe)
        std = np.where(both, np.abs((frac[:, 0] - frac[:, 1]) / 2), 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)

    balanced = MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + balance(requested + want) - balance(requested)) // 2
    out: IntArray = _WEIGHT_FIT * least + _WEIGHT_BALANCED * balanced
    return out


def usage_arrays(nodes: Sequence[NodeUsage]) -> tuple[IntArray, IntArray]:
    """(allocatable, requested) cpu and memory of ``nodes``, as :func:`resource_scores` takes them."""
    alloc = np.array([[u.node.allocatable.get(r, 0) for r in _RESOURCES] for u in nodes], dtype=np.int64).reshape(-1, 2)
    req = np.array([[u.requested.get(r, 0) for r in _RESOURCES] for u in nodes], dtype=np.int64).reshape(-1, 2)
    return alloc, req


def node_scores(nodes: Sequence[NodeUsage], pod: PodInfo, counts: Sequence[Mapping[str, int]] = (),
                soft: Sequence[SpreadConstraint] = ()) -> list[int]:
    """kube-scheduler's weighted score of each of ``nodes`` for ``pod`` (see the module docstring).

    Args:
        nodes: the nodes that take the pod (with ``soft`` constraints: all of them, the
            normalization spans them), with the requests of the pods on them (internal units).
        pod: the pod to place.
        counts: per constraint of ``soft``: pods the constraint's selector matches per domain of
            its key (:meth:`~karpy_core.scheduling.topology.Topology.spread_counts`).
        soft: the pod's ``ScheduleAnyway`` spread constraints.

    Returns:
        One integer score per node, in ``nodes``' order (higher is preferred).
    """
    alloc, req = usage_arrays(nodes)
    return [int(v) for v in resource_scores(alloc, req, pod.requests) + spread_scores(nodes, counts, soft)]


def spread_scores(nodes: Sequence[NodeUsage], counts: Sequence[Mapping[str, int]], soft: Sequence[SpreadConstraint]) -> IntArray:
    """``PodTopologySpread``'s normalized score times its weight, per node of ``nodes`` (all
    zero without ``soft`` constraints; arguments as :func:`node_scores`)."""
    scores = np.zeros(len(nodes), dtype=np.int64)
    if not soft:
        return scores
    weights = []
    for c in soft:
        size = len(nodes) if c.key == LABEL_HOSTNAME else len({u.node.labels[c.key] for u in nodes if c.key in u.node.labels})
        weights.append(math.log(size + 2))
    raw: list[int | None] = []
    for u in nodes:
        labels = u.node.labels
        if not all(c.key in labels for c in soft):  # IgnoredNodes: scored 0
            raw.append(None)
            continue
        total = sum(cnt.get(labels[c.key], 0) * w + (c.max_skew - 1) for c, cnt, w in zip(soft, counts, weights, strict=True))
        raw.append(math.floor(total + 0.5))  # Go's math.Round, total >= 0
    valid = [s for s in raw if s is not None]
    hi, lo = max(valid, default=0), min(valid, default=0)
    for i, s in enumerate(raw):
        norm = 0 if s is None else MAX_NODE_SCORE if hi == 0 else MAX_NODE_SCORE * (hi + lo - s) // hi
        scores[i] += _WEIGHT_SPREAD * norm
    return scores
