"""An index over existing nodes that narrows which nodes a pod is tried on (issue 36).

First fit over existing nodes (:meth:`~karpy_core.scheduling.run.SchedulingRun.place_existing`)
tries nodes in order until one takes the pod. On a converged cluster almost every node is full or
refuses the pod's tolerations and node affinity, so each pod was checked against nearly every node:
a consolidation pass, which runs one scheduling simulation per candidate node, cost O(nodes²) node
checks (1,000 nodes: 32.8 s of CPU, most of it in :func:`~karpy_core.scheduling.feasibility.check_node`).

The index answers two questions at once for all nodes, with numpy:

* **static**: which nodes the pod's tolerations and node-affinity terms admit. That depends on the
  node's labels and taints only, so it is computed once per (tolerations, terms) and reused by
  every scheduling run built on the same :class:`NodeIndex` (a consolidation pass builds one);
* **room**: which nodes have free room (``allocatable - requested``) for every resource the pod
  requests, kept per run as pods are placed.

Both are prefilters. A node they rule out is one ``check_node`` would refuse, so the first node that
takes the pod is the same; the nodes they keep still get the full check (ports, topology).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import requirement_key
from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.taints import Toleration, untolerated
from karpy_core.scheduling.template import VECTOR_CAP, request_vector

__all__ = ["NodeIndex", "INDEXED_NODES"]

BoolArray = npt.NDArray[np.bool_]
IntArray = npt.NDArray[np.int64]

INDEXED_NODES = 48
"""A scheduling run with at least this many existing nodes and no index given builds its own
(:meth:`~karpy_core.scheduling.run.SchedulingRun.place_existing`); below it, trying the nodes one
by one costs less than building the arrays."""


class NodeIndex:
    """Existing nodes as arrays: free room per resource and cached static admission masks.

    Args:
        nodes: the nodes, in any order; row ``i`` is ``nodes[i]``. The nodes are never modified.

    Attributes:
        nodes: the nodes, one row each.
        columns: resource name -> column (every resource any node has allocatable or requested).
        free: ``allocatable - requested`` per node and column, internal units (millicores, bytes,
            counts), capped at :data:`~karpy_core.scheduling.template.VECTOR_CAP`; shape
            ``(len(nodes), len(columns))``.
    """

    def __init__(self, nodes: Sequence[ExistingNode]):
        self.nodes = tuple(nodes)
        self._row = {id(n): i for i, n in enumerate(self.nodes)}
        names = sorted({r for n in self.nodes for r in (*n.allocatable, *n.requested)})
        self.columns: dict[str, int] = {r: i for i, r in enumerate(names)}
        self.free: IntArray = np.zeros((len(self.nodes), len(names)), dtype=np.int64)
        for i, n in enumerate(self.nodes):
            row = self.free[i]
            for r, v in n.allocatable.items():
                row[self.columns[r]] = v
            for r, v in n.requested.items():
                row[self.columns[r]] -= v
        np.minimum(self.free, VECTOR_CAP, out=self.free)
        self._static: dict[tuple[Any, ...], BoolArray] = {}
        self._labels: dict[str, npt.NDArray[np.object_]] = {}

    def rows(self, nodes: Sequence[ExistingNode]) -> npt.NDArray[np.intp] | None:
        """The row of each of ``nodes`` (the same objects), in their order; None when one is not indexed."""
        out = np.empty(len(nodes), dtype=np.intp)
        for j, n in enumerate(nodes):
            i = self._row.get(id(n))
            if i is None or self.nodes[i] is not n:
                return None
            out[j] = i
        return out

    def vector(self, requests: Mapping[str, int]) -> IntArray | None:
        """``requests`` as a row over :attr:`columns` (capped like :attr:`free`); None when a
        positive request names a resource no node has (every node refuses it: nothing to narrow)."""
        return request_vector(requests, self.columns)

    def charge(self, requests: Mapping[str, int]) -> IntArray:
        """``requests`` over :attr:`columns`, resources no node has left out: what placing the pod
        takes from a node's free row."""
        vec = np.zeros(len(self.columns), dtype=np.int64)
        for r, v in requests.items():
            i = self.columns.get(r)
            if i is not None:
                vec[i] = min(v, VECTOR_CAP)
        return vec

    def matching(self, terms: Sequence[Requirements]) -> BoolArray:
        """Per row: one of ``terms`` (node-affinity alternatives) admits the node's labels.
        Cached per terms; callers must not modify the array."""
        key = ("terms", tuple(requirement_key(t) for t in terms))
        hit = self._static.get(key)
        if hit is None:
            hit = np.fromiter((any(t.admits(n.labels) for t in terms) for n in self.nodes), dtype=np.bool_,
                              count=len(self.nodes))
            self._static[key] = hit
        return hit

    def label_values(self, key: str) -> npt.NDArray[np.object_]:
        """Per row: the node's value of label ``key``, or None. Cached; callers must not modify it."""
        hit = self._labels.get(key)
        if hit is None:
            hit = self._labels[key] = np.array([n.labels.get(key) for n in self.nodes], dtype=object)
        return hit

    def admitted(self, tolerations: tuple[Toleration, ...], terms: Sequence[Requirements]) -> BoolArray:
        """Per row: the node's effective taints are all tolerated and one of ``terms`` admits its
        labels (:func:`~karpy_core.scheduling.feasibility.check_node`'s first two checks). Cached
        per (tolerations, terms); callers must not modify the array."""
        key = (tolerations, tuple(requirement_key(t) for t in terms))
        hit = self._static.get(key)
        if hit is None:
            hit = np.fromiter(
                (untolerated(n.effective_taints(), tolerations) is None and any(t.admits(n.labels) for t in terms)
                 for n in self.nodes),
                dtype=np.bool_, count=len(self.nodes))
            self._static[key] = hit
        return hit
