"""Cost references for a provisioning plan: Karpenter-style first-fit decreasing, the exact
optimum (MILP) and an LP lower bound, all over exactly the capacities karpy's scheduler sees.
Used by ``karpy simulate`` (the "optimum" / "lower bound" line, :func:`reference`) and by
``benchmarks/cost.py`` (through ``benchmarks/costref.py``, which re-exports this module).
The MILP and LP need HiGHS (``highspy``, in the ``sim`` and ``dev`` extras); FFD does not.

Inputs come from karpy's own code: :class:`~karpy_core.scheduling.template.TypeTable` s (each
NodePool's compatible instance types; ``free = allocatable - DaemonSet overhead`` per type, so
max-pods is the ``pods`` column and the DaemonSets that would run on each type are already
subtracted) and :class:`~karpy_core.scheduling.pod.PodInfo` requests (``effective_requests``, which
counts 1 ``pods`` per pod). :func:`build_problem` turns them into a :class:`Problem`:

* **shapes** ``s``: pods grouped by scheduling signature, with request vector ``r_s`` and count ``n_s``;
* **node kinds** ``k``: an (instance type, offering column = zone x capacity type) pair with price
  ``p_k`` (USD/hour) and free capacity ``F_k``. A shape may use kind ``k`` when one of its
  required node-affinity terms (nodeSelector included) is compatible with the type's labels, the
  zone and capacity type of the column, and the NodePool's requirements, and the pod tolerates
  the NodePool's taints (with several tables, the kinds of every NodePool are pooled, each shape
  on the NodePools their weights allow it, :func:`_weight_allowed`). Kinds of one type whose
  columns admit the same shapes collapse to the cheapest; kinds dominated by another (no cheaper,
  no more capacity in any resource, admitting no more shapes) are dropped for the MILP and LP
  (that cannot change their optimum).

Formulations (:func:`solve_milp`, :func:`lp_bound`):

* MILP, bin-indexed: for kind ``k`` bins ``b = 1..B_k`` with ``B_k = floor(UB / p_k)`` (no plan
  cheaper than the upper bound ``UB`` uses more, capped by the pods that may use ``k``);
  ``y_kb`` binary (bin opened), ``x_skb`` integer (pods of ``s`` in it)::

      min   sum_kb p_k y_kb
      s.t.  sum_kb x_skb = n_s                                   every shape s
            sum_s r_s,res x_skb <= F_k,res y_kb                   every bin, resource
            x_skb <= n_s y_kb,  y_kb >= y_k(b+1)                  linking, symmetry breaking
            sum_kb F_k,res y_kb >= sum_s n_s r_s,res              aggregate (a valid cut)

  with ``x_skb`` fixed to 0 where ``s`` may not use ``k`` or one pod of ``s`` does not fit ``F_k``.
  HiGHS returns the optimum, or under its time limit the best plan and a dual bound.
* LP (a lower bound on every plan, also those with topology spread or affinity, which only add
  constraints): ``z_k >= 0`` nodes of kind ``k``, ``a_sk >= 0`` pods of ``s`` on ``k``::

      min sum_k p_k z_k   s.t.  sum_k a_sk = n_s,  sum_s r_s,res a_sk <= F_k,res z_k

Topology (:class:`TopologyModel`, :func:`topology_model`): hostname spread and hostname
anti-affinity become per-node caps ``sum_{s in g} x_skb <= cap y_kb`` (LP: ``<= cap z_k``), zone
anti-affinity a per-zone cap, zone spread the rows ``E_gz - E_gz' <= maxSkew`` for every pair of
the group's zones (``E_gz``: its pods in zone ``z``) and ``E_gz >= ceil((n_g - (Z - 1) maxSkew) / Z)``;
kinds are then kept per zone. The cover bound gets the same caps and per-zone shares. The model
is of a fresh cluster (only the batch's pods count), and of hostname spread as Karpenter and
karpy apply it to new nodes (at most ``maxSkew`` matching pods per node; kube-scheduler, which
counts every eligible node, can stack more once all have some). Required pod affinity, groups
whose selector matches pods without the rule, host ports, NodePool limits and minValues are not
modelled: with any of them the MILP's optimum is only a lower bound.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_ZONE
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.taints import untolerated
from karpy_core.scheduling.template import TypeTable
from karpy_core.utils.selectors import selector_matches

__all__ = ["Problem", "Plan", "MilpResult", "Reference", "TopologyModel", "build_problem", "ffd_plan", "solve_milp",
           "lp_bound", "cover_bound", "upper_bound_alone", "topology_model", "zone_split", "ZoneSplit", "highs_available",
           "reference"]

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Group = tuple[tuple[int, ...], int]
"""(shape indices, limit): a set of shapes and the number a topology rule allows."""


@dataclass(frozen=True)
class TopologyModel:
    """The topology constraints of a batch that the MILP, the LP and the cover bound keep, all
    linear in their variables. The model is of a fresh cluster: only the batch's own pods count.

    Attributes:
        node_caps: at most ``limit`` pods of these shapes on one node. From hostname spread
            (``DoNotSchedule``), as Karpenter and karpy apply it to new nodes: a new node is always an
            empty domain, so ``globalMin`` is 0 and a node takes ``maxSkew`` matching pods; and from
            hostname anti-affinity between pods that carry the term and match it (limit 1).
        zone_caps: at most ``limit`` pods of these shapes in one zone (zone anti-affinity, limit 1).
        zone_spread: pod counts of these shapes per zone, over the zones they may use, differ by at
            most ``limit`` (``maxSkew``; zone spread, ``DoNotSchedule``, ``minDomains`` 1).
        relaxed: the required constraints left out, one phrase each; with any, the model is a
            relaxation and its optimum only a lower bound. Only groups whose selector matches
            exactly the pods that carry the rule are modelled (as Deployments' spread and
            anti-affinity do); pod affinity is never modelled. Preferences are not constraints.
    """

    node_caps: tuple[Group, ...] = ()
    zone_caps: tuple[Group, ...] = ()
    zone_spread: tuple[Group, ...] = ()
    relaxed: tuple[str, ...] = ()

    @property
    def zoned(self) -> bool:
        """True when pods are counted per zone (kinds of different zones are then not interchangeable)."""
        return bool(self.zone_caps or self.zone_spread)

    @property
    def constrained(self) -> bool:
        """True when some topology rule is modelled (first-fit decreasing, which ignores them, is
        then no upper bound)."""
        return bool(self.node_caps or self.zoned)

    def remapped(self, keep: Sequence[int]) -> TopologyModel:
        """The model over the shapes ``keep`` (old indices, in their new order); shapes dropped
        leave their groups (their pods stay pending, and pending pods count nowhere)."""
        new = {old: i for i, old in enumerate(keep)}

        def fix(groups: tuple[Group, ...]) -> tuple[Group, ...]:
            out = []
            for members, limit in groups:
                m = tuple(new[t] for t in members if t in new)
                if m:
                    out.append((m, limit))
            return tuple(out)

        return TopologyModel(fix(self.node_caps), fix(self.zone_caps), fix(self.zone_spread), self.relaxed)


def topology_model(shapes: Sequence[Sequence[PodInfo]]) -> TopologyModel:
    """The :class:`TopologyModel` of pods grouped into ``shapes`` (lists of interchangeable pods,
    as :meth:`PodInfo.signature` groups them; pods with topology rules are grouped with equal labels)."""
    relaxed: set[str] = set()
    node_caps: dict[tuple[object, ...], int] = {}
    zone_caps: dict[tuple[object, ...], int] = {}
    spread: dict[tuple[object, ...], int] = {}
    parsed: dict[str, dict[str, object]] = {}

    def matched(selector: str, namespaces: Sequence[str] | None) -> tuple[tuple[int, ...], bool]:
        sel = parsed.setdefault(selector, json.loads(selector))
        out, partial = [], False
        for t, g in enumerate(shapes):
            hits = sum(1 for p in g if (namespaces is None or p.namespace in namespaces) and selector_matches(sel, p.labels))
            if hits == len(g):
                out.append(t)
            elif hits:
                partial = True
        return tuple(out), partial

    for s, g in enumerate(shapes):
        rep = g[0]
        for c in rep.spread:
            if not c.hard:
                continue
            if c.key not in (LABEL_HOSTNAME, LABEL_ZONE) or c.min_domains > 1:
                relaxed.add(f"topology spread on {c.key}" + (" with minDomains" if c.min_domains > 1 else ""))
                continue
            members, partial = matched(c.selector, (rep.namespace,))
            if partial or s not in members or any(c not in shapes[t][0].spread for t in members):
                relaxed.add(f"topology spread on {c.key} over pods without that constraint")
                continue
            target = node_caps if c.key == LABEL_HOSTNAME else spread
            k = (c.selector, members)
            target[k] = min(target.get(k, c.max_skew), c.max_skew)
        for term in rep.affinity:
            if not term.anti:
                relaxed.add("required pod affinity")
                continue
            if term.key not in (LABEL_HOSTNAME, LABEL_ZONE):
                relaxed.add(f"pod anti-affinity on {term.key}")
                continue
            members, partial = matched(term.selector, term.namespaces)
            carriers = tuple(t for t in members if term in shapes[t][0].affinity)
            if partial or len(carriers) != len(members) or s not in carriers:
                # only the mutual exclusion of pods that carry the term and match it is modelled
                relaxed.add("pod anti-affinity against pods without that term")
                if s not in carriers:
                    continue
            target = node_caps if term.key == LABEL_HOSTNAME else zone_caps
            target[(term.selector, term.namespaces, carriers)] = 1

    def groups(d: dict[tuple[object, ...], int]) -> tuple[Group, ...]:
        return tuple(sorted((k[-1], v) for k, v in d.items()))  # type: ignore[misc]

    return TopologyModel(groups(node_caps), groups(zone_caps), groups(spread), tuple(sorted(relaxed)))


@dataclass
class Problem:
    """A packing problem (see the module docstring).

    Attributes:
        resources: names of the columns of ``requests`` and ``free`` (karpy internal units).
        requests: ``(shapes, resources)`` request per pod of each shape.
        counts: pods per shape.
        names: kind names ``type@zone/capacity-type``.
        type_names: instance type of each kind.
        prices: USD/hour per kind.
        free: ``(kinds, resources)`` free capacity per kind.
        compat: ``(shapes, kinds)`` whether a shape may run on a kind (selector and fit).
        ffd_order: shape indices in first-fit-decreasing order (cpu, then memory, descending).
        unplaceable: pods that fit no kind (left out of the shapes).
        zones: zone of each kind.
        topology: the topology constraints the model keeps (:class:`TopologyModel`).
    """

    resources: list[str]
    requests: IntArray
    counts: IntArray
    names: list[str]
    type_names: list[str]
    prices: npt.NDArray[np.float64]
    free: IntArray
    compat: BoolArray
    ffd_order: list[int]
    unplaceable: int = 0
    zones: list[str] = field(default_factory=list)
    topology: TopologyModel = field(default_factory=lambda: TopologyModel())
    limits: PoolLimits | None = None
    """NodePool ``limits`` the model keeps (``build_problem(..., limits=True)``), None: ignored."""
    joined: bool = False
    """Some shape may use a lower-weight NodePool only by joining a claim other pods open there
    (:func:`_weight_allowed`): the model lets it open its own, a relaxation."""
    _pruned: Problem | None = field(default=None, init=False, repr=False, compare=False)
    """:meth:`pruned`'s result, kept: the cover bound, the MILP and the LP bound each ask for it."""

    def pruned(self) -> Problem:
        """The problem without dominated kinds (same optimum; see the module docstring).

        Kind ``b`` dominates kind ``a`` when it costs no more, has at least ``a``'s free capacity
        in every resource, admits every shape ``a`` admits, stands in for ``a`` under the limits
        and (with zones counted) is in ``a``'s zone; ``a`` is dropped when such a ``b`` is strictly
        better or an exact equal of lower index. The shape columns (``compat``, the wide part) are
        compared only for the kinds that pass the price and capacity tests: ``O(kinds^2 x
        resources + kinds x shapes x candidates)`` instead of ``O(kinds^2 x shapes)`` (seconds on
        eight NodePools of the AWS catalog). Computed once per problem (the problem is not changed
        after it is built)."""
        if self._pruned is not None:
            return self._pruned
        keep: list[int] = []
        n = len(self.prices)
        zones = np.array(self.zones if self.zones else [""] * n, dtype=object)
        by_zone = self.topology.zoned
        stand_in = self.limits.dominance() if self.limits is not None else None
        admits_any: BoolArray = np.asarray(self.compat.any(axis=0), dtype=bool)
        for a in range(n):
            if not admits_any[a]:
                continue
            cheap_big = (self.prices <= self.prices[a]) & (self.free >= self.free[a]).all(axis=1)
            if stand_in is not None:  # a kind counting more against a limit is no stand-in
                cheap_big &= stand_in[a]
            if by_zone:  # a kind only stands in for one of its own zone when zones are counted
                cheap_big &= zones == zones[a]
            cheap_big[a] = False
            cand = np.flatnonzero(cheap_big)
            if cand.size:
                column = self.compat[:, a:a + 1]
                sub = self.compat[:, cand]
                better = (sub >= column).all(axis=0)
                # among exact equals keep the lowest index
                equal = ((self.prices[cand] == self.prices[a]) & (self.free[cand] == self.free[a]).all(axis=1)
                         & (sub == column).all(axis=0))
                if (better & ~equal).any() or (better & equal & (cand < a)).any():
                    continue
            keep.append(a)
        idx = np.array(keep, dtype=np.int64)
        out = Problem(self.resources, self.requests, self.counts, [self.names[i] for i in keep],
                      [self.type_names[i] for i in keep], self.prices[idx], self.free[idx], self.compat[:, idx],
                      self.ffd_order, self.unplaceable, [str(zones[i]) for i in keep], self.topology,
                      self.limits.take(idx) if self.limits is not None else None, self.joined)
        out._pruned = out  # nothing left to prune: a kind kept here has no dominating kind among the kept
        self._pruned = out
        return out


@dataclass
class PoolLimits:
    """NodePool ``limits`` in the model: the NodePool of each kind, each kind's capacity in the
    limited resources, and each limited NodePool's limits.

    Attributes:
        pools: NodePool name per kind.
        resources: the limited resources (``cpu``, ``memory``... and ``nodes``, a count).
        capacity: ``(kinds, resources)`` what one node of the kind counts against a limit: its
            instance type's capacity (Karpenter counts a NodeClaim's capacity), 1 for ``nodes``.
        limits: NodePool name -> ``{resource: amount}`` (internal units), only limited NodePools.
    """

    pools: list[str]
    resources: list[str]
    capacity: IntArray
    limits: dict[str, dict[str, int]]

    def take(self, idx: IntArray) -> PoolLimits:
        """The same limits over the kinds ``idx`` (in that order)."""
        return PoolLimits([self.pools[int(i)] for i in idx], self.resources, self.capacity[idx], self.limits)

    def dominance(self) -> BoolArray:
        """``(kinds, kinds)``: where kind ``b`` (column) may stand in for kind ``a`` (row) as far
        as the limits go: ``b``'s NodePool is unlimited, or it is ``a``'s and ``b`` counts no more
        against its limits."""
        pools = np.array(self.pools, dtype=object)
        unlimited = np.array([p not in self.limits for p in self.pools], dtype=bool)
        same = pools[:, None] == pools[None, :]
        smaller = (self.capacity[None, :, :] <= self.capacity[:, None, :]).all(axis=2)
        out: BoolArray = unlimited[None, :] | (same & smaller)
        return out


@dataclass
class Plan:
    """A plan: nodes as ``(kind index, {shape index: pods})``, and its USD/hour."""

    nodes: list[tuple[int, dict[int, int]]] = field(default_factory=list)
    cost: float = 0.0
    unplaced: int = 0

    def type_counts(self, problem: Problem) -> dict[str, int]:
        """Nodes per instance type."""
        out: dict[str, int] = {}
        for k, _ in self.nodes:
            out[problem.type_names[k]] = out.get(problem.type_names[k], 0) + 1
        return dict(sorted(out.items()))


@dataclass
class MilpResult:
    """What HiGHS returned: ``value`` (USD/hour of the best plan found, None when none),
    ``bound`` (dual bound: no plan is cheaper), ``optimal`` (proved within HiGHS's default gap),
    ``plan`` (nodes per kind name), ``seconds``."""

    value: float | None
    bound: float
    optimal: bool
    plan: dict[str, int]
    seconds: float
    variables: int


def build_problem(tables: TypeTable | Sequence[TypeTable], pods: Sequence[PodInfo], *, limits: bool = False) -> Problem:
    """The packing problem of ``pods`` on the NodePool of ``tables`` (one table, or several: their
    kinds are pooled, each admitting the pods its NodePool's requirements and taints allow; see the
    module docstring). A resource some pod requests but no table offers makes that pod unplaceable.
    ``limits``: keep the NodePools' ``limits`` (:class:`PoolLimits`): :func:`solve_milp` then plans
    within them, while :func:`ffd_plan` and the bounds still ignore them, so an upper bound given
    to the MILP must come from a plan within the limits.
    """
    table_list = [tables] if isinstance(tables, TypeTable) else list(tables)
    groups: dict[tuple[object, ...], list[PodInfo]] = {}
    for p in pods:
        groups.setdefault(p.signature(), []).append(p)
    shapes = list(groups.values())
    topo = topology_model(shapes)
    used = sorted({r for p in pods for r, v in p.requests.items() if v > 0})
    req = np.array([[g[0].requests.get(r, 0) for r in used] for g in shapes], dtype=np.int64).reshape(len(shapes), len(used))
    names: list[str] = []
    zones: list[str] = []
    tnames: list[str] = []
    prices: list[float] = []
    frees: list[IntArray] = []
    compat: list[BoolArray] = []
    pool_of: list[str] = []
    table_of: list[int] = []
    caps: list[dict[str, int]] = []
    for t_index, table in enumerate(table_list):
        template = table.template
        prefix = f"{template.name}:" if len(table_list) > 1 else ""
        pool_cols = table.column_mask(template.requirements)
        # per shape: (types x columns) admissible
        admit = np.zeros((len(shapes), len(table.types), len(table.offering_columns)), dtype=bool)
        for s, g in enumerate(shapes):
            if untolerated(template.taints, g[0].tolerations) is not None:
                continue
            for term in g[0].requirement_terms:
                if template.requirements.conflict(term) is not None:
                    continue
                admit[s] |= table.compat_mask(term)[:, None] & (table.column_mask(term) & pool_cols)[None, :]
        admit &= np.isfinite(table.prices)[None, :, :]
        free_all = np.zeros((len(table.types), len(used)), dtype=np.int64)
        for c, r in enumerate(used):
            if r in table.index:
                free_all[:, c] = table.free[:, table.index[r]]
        for i, it in enumerate(table.types):
            fit = (free_all[i][None, :] >= req).all(axis=1) if len(shapes) else np.zeros(0, dtype=bool)
            best: dict[tuple[bytes, str], tuple[float, int]] = {}
            for j in range(len(table.offering_columns)):
                if not np.isfinite(table.prices[i, j]) or not pool_cols[j]:
                    continue
                bits = admit[:, i, j] & fit
                # columns admitting the same shapes collapse to the cheapest (of each zone, when zones count)
                group = (bits.tobytes(), table.offering_columns[j][0] if topo.zoned else "")
                if group not in best or table.prices[i, j] < best[group][0]:
                    best[group] = (float(table.prices[i, j]), j)
            for (key, _), (price, j) in best.items():
                zone, ct = table.offering_columns[j]
                names.append(f"{prefix}{it.name}@{zone}/{ct}")
                zones.append(zone)
                tnames.append(it.name)
                prices.append(price)
                frees.append(free_all[i])
                compat.append(np.frombuffer(key, dtype=bool).copy())
                pool_of.append(template.name)
                table_of.append(t_index)
                caps.append({**it.capacity, "nodes": 1})
    compat_arr = np.array(compat, dtype=bool).T.reshape(len(shapes), len(names))
    joined = False
    if len(table_list) > 1 and len(shapes):
        opens, allowed = _weight_allowed(table_list, shapes, compat_arr, np.array(table_of, dtype=np.int64))
        joined = bool((allowed & ~opens & compat_arr).any())
        compat_arr &= allowed
    counts = np.array([len(g) for g in shapes], dtype=np.int64)
    placeable = compat_arr.any(axis=1)
    unplaceable = int(counts[~placeable].sum())
    # shapes no kind admits stay pending in every plan: left out of the problem
    req, counts, compat_arr = req[placeable], counts[placeable], compat_arr[placeable]
    cpu = used.index("cpu") if "cpu" in used else None
    mem = used.index("memory") if "memory" in used else None
    order = sorted(range(len(counts)), key=lambda s: (-(req[s, cpu] if cpu is not None else 0),
                                                      -(req[s, mem] if mem is not None else 0), s))
    pool_limits: PoolLimits | None = None
    limited = {t.template.name: dict(t.template.limits) for t in table_list if t.template.limits}
    if limits and limited:
        keys = sorted({r for lim in limited.values() for r in lim})
        capacity = np.array([[c.get(r, 0) for r in keys] for c in caps], dtype=np.int64).reshape(len(names), len(keys))
        pool_limits = PoolLimits(pool_of, keys, capacity, limited)
    return Problem(used, req, counts, names, tnames, np.array(prices, dtype=np.float64),
                   np.array(frees, dtype=np.int64).reshape(len(names), len(used)), compat_arr, order, unplaceable,
                   zones, topo.remapped([int(i) for i in np.flatnonzero(placeable)]), pool_limits, joined)


def _weight_free(pod: PodInfo) -> bool:
    """Whether a pod may leave a higher-weight NodePool that takes it for reasons the weight rule
    of :func:`_weight_allowed` does not see: a preference (node affinity, pod affinity, a
    ``ScheduleAnyway`` spread: Karpenter first tries it as required, on every NodePool in weight
    order) or a required rule that a fresh node of that NodePool can fail (pod affinity, pod
    anti-affinity or spread on a key other than the hostname, e.g. a zone the NodePool lacks)."""
    if pod.preferred_node_terms or pod.preferred_affinity:
        return True
    if any(not c.hard or c.key != LABEL_HOSTNAME for c in pod.spread):
        return True
    return any(not term.anti or term.key != LABEL_HOSTNAME for term in pod.affinity)


def _weight_allowed(tables: Sequence[TypeTable], shapes: Sequence[Sequence[PodInfo]], compat: BoolArray,
                    table_of: IntArray) -> tuple[BoolArray, BoolArray]:
    """``(shapes, kinds)``: where NodePool weights let a shape use a kind, as karpy's scheduler
    (and Karpenter's) opens NodeClaims: a pod's new claim comes from the highest-weight NodePool
    that takes it (requirements, taints, a type large enough: ``compat`` of the NodePool's kinds).
    Per shape the NodePools that take it are allowed in weight order down to and including the
    first weight whose NodePools include one that can refuse it for no reason the model keeps:
    one without ``limits`` (not modelled, a limited NodePool may be full) and without
    ``minValues`` (a NodePool at the same weight as it stays allowed: karpy orders equal weights
    by name, the model does not). Lower NodePools are not allowed for it. A shape for which a
    NodePool may fail for reasons left out (:func:`_weight_free`) keeps every NodePool. A pod
    also joins a claim already open for other pods, whatever its NodePool: so a NodePool some
    shape may open is allowed to every shape it takes. The result keeps every plan karpy can
    make (it stays a bound on karpy's plan) and drops the lower-weight NodePools no pod of the
    batch would open a claim on. ``table_of``: the table index of each kind. Returns ``(opens,
    allowed)``, both ``(shapes, kinds)``: where a shape may open a claim, and where it may be at all."""
    n_tables = len(tables)
    takes = np.zeros((len(shapes), n_tables), dtype=bool)  # shape x table: some kind of the table admits it
    for t in range(n_tables):
        cols = table_of == t
        if cols.any():
            takes[:, t] = compat[:, cols].any(axis=1)
    final = [not t.template.limits and not any(r.min_values for r in t.template.requirements) for t in tables]
    weights = sorted({t.template.weight for t in tables}, reverse=True)
    opens = np.zeros_like(takes)
    for s, g in enumerate(shapes):
        if _weight_free(g[0]):
            opens[s] = takes[s]
            continue
        for w in weights:
            level = [t for t in range(n_tables) if tables[t].template.weight == w and takes[s, t]]
            opens[s, level] = True
            if any(final[t] for t in level):
                break
    opened: BoolArray = np.asarray(opens.any(axis=0), dtype=bool)
    allowed = opens | (takes & opened[None, :])
    return opens[:, table_of], allowed[:, table_of]


def ffd_plan(problem: Problem) -> Plan:
    """Karpenter-style first-fit decreasing: pods by cpu then memory (descending); each pod goes to
    the first open claim where some kind still holds the claim's pods plus it (the claim keeps the
    kinds that do: it grows while the largest remaining type fits), else opens a claim; each claim
    launches the cheapest kind that holds it. Pods of one shape are added in bulk (as many as the
    largest remaining kind holds), which is what adding them one by one gives."""
    claims: list[tuple[IntArray, BoolArray, dict[int, int]]] = []
    plan = Plan()
    for s in problem.ffd_order:
        left = int(problem.counts[s])
        vec = problem.requests[s]
        ok = problem.compat[s]
        if not ok.any():
            plan.unplaced += left
            continue
        c = 0
        while left > 0:
            if c == len(claims):
                claims.append((np.zeros(len(problem.resources), dtype=np.int64), ok.copy(), {}))
            used, mask, pods = claims[c]
            room = problem.free - used[None, :]
            per = np.where(vec > 0, room // np.maximum(vec, 1), np.iinfo(np.int64).max).min(axis=1) if len(vec) else np.full(len(mask), left)  # noqa: E501
            per = np.where(mask & ok, per, 0)
            k = min(left, int(per.max()))
            if k <= 0:
                c += 1
                continue
            claims[c] = (used + vec * k, mask & ok & (per >= k), {**pods, s: pods.get(s, 0) + k})
            left -= k
    for _used, mask, pods in claims:
        idx = np.flatnonzero(mask)
        best = int(idx[np.argmin(problem.prices[idx])])
        plan.nodes.append((best, pods))
        plan.cost += float(problem.prices[best])
    return plan


def highs_available() -> bool:
    """True when HiGHS (``highspy``) can be imported (the MILP and LP need it)."""
    try:
        import highspy  # noqa: F401
    except ImportError:
        return False
    return True


def _highs() -> object:
    """A silent single-threaded HiGHS instance. HiGHS prints its banner on file descriptor 1 when
    the first instance of a process is made (before any option can be set), which would corrupt
    ``karpy simulate -o json``: descriptor 1 points at /dev/null meanwhile."""
    import highspy

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        h = highspy.Highs()  # type: ignore[no-untyped-call]  # highspy's constructor has no annotations
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    return h


def _run(h: object) -> None:
    """``h.run()`` in a daemon thread, waited for in slices of 50 ms so that Ctrl-C (a
    ``KeyboardInterrupt`` in the main thread, see :func:`karpy_core.cli.main`) stops the caller
    at once instead of after the solve's time limit: HiGHS releases the GIL while it solves, but
    Python runs signal handlers only between bytecodes of the main thread. On an interrupt the
    solve is cancelled (``cancelSolve``) and the thread left to end by itself.

    Raises:
        KeyboardInterrupt: the run was interrupted (the solve's result is then not used).
    """
    import threading

    thread = threading.Thread(target=h.run, name="karpy-highs", daemon=True)  # type: ignore[attr-defined]
    try:
        thread.start()
        while thread.is_alive():
            thread.join(0.05)
    except BaseException:
        h.cancelSolve()  # type: ignore[attr-defined]
        raise


def _scaled(lo: float, hi: float, val: Sequence[float]) -> tuple[float, float, npt.NDArray[np.float64]]:
    """A row divided by its largest coefficient (same feasible set). Memory rows count bytes
    (1e11 per node) next to pod counts of 1: unscaled, HiGHS's tolerances let the LP lose its best
    kind (5,000 x 1 cpu: 192.57 USD/h "optimal" where c6a.48xlarge alone costs 191.80)."""
    v = np.asarray(val, dtype=np.float64)
    m = float(np.abs(v).max()) if v.size else 1.0
    if m <= 0:
        return lo, hi, v
    return lo / m, hi / m, v / m


def _domains(p: Problem, members: Sequence[int]) -> list[str]:
    """The zones where some kind admits some of ``members`` (the domains their zone rules count)."""
    ks = np.flatnonzero(p.compat[list(members)].any(axis=0))
    return sorted({p.zones[k] for k in ks})


def _least_per_zone(count: int, zones: int, skew: int) -> int:
    """The fewest pods of a zone-spread group any zone holds: ``n`` pods over ``Z`` zones whose
    counts differ by at most ``skew`` put at least ``ceil((n - (Z - 1) skew) / Z)`` in each zone."""
    return max(0, -(-(count - (zones - 1) * skew) // zones)) if zones else 0


def _topology_rows(p: Problem, per_kind: Sequence[tuple[int, int, dict[int, int]]],
                   inf: float) -> list[tuple[float, float, list[int], list[float]]]:
    """Rows of :attr:`Problem.topology` over ``per_kind`` entries ``(kind, node column, {shape:
    pods column})``: a MILP bin (node column binary) or an LP kind (node column = node count)."""
    topo = p.topology
    rows: list[tuple[float, float, list[int], list[float]]] = []
    for members, cap in topo.node_caps:
        for _k, y, xs in per_kind:
            idx = [xs[s] for s in members if s in xs]
            if idx and sum(int(p.counts[s]) for s in members if s in xs) > cap:
                rows.append((-inf, 0.0, [*idx, y], [1.0] * len(idx) + [-float(cap)]))

    def in_zone(members: Sequence[int], z: str) -> list[int]:
        return [xs[s] for k, _, xs in per_kind if p.zones[k] == z for s in members if s in xs]

    for members, cap in topo.zone_caps:
        for z in _domains(p, members):
            idx = in_zone(members, z)
            if idx:
                rows.append((-inf, float(cap), idx, [1.0] * len(idx)))
    for members, skew in topo.zone_spread:
        doms = _domains(p, members)
        per = {z: in_zone(members, z) for z in doms}
        least = _least_per_zone(int(sum(p.counts[s] for s in members)), len(doms), skew)
        for a in doms:
            if least:
                rows.append((float(least), inf, per[a], [1.0] * len(per[a])))
            for b in doms:
                if a != b and per[a]:
                    rows.append((-inf, float(skew), per[a] + per[b], [1.0] * len(per[a]) + [-1.0] * len(per[b])))
    return rows


def solve_milp(problem: Problem, upper_bound: float, *, time_limit: float = 10.0,  # noqa: C901
               max_variables: int = 60000, lower_bound: float | None = None,
               fixed: dict[int, int] | None = None) -> MilpResult | None:
    """The bin-indexed MILP (module docstring) on the pruned ``problem``; None when it would have
    more than ``max_variables`` variables (use :func:`lp_bound`). ``upper_bound`` (USD/hour of a
    known plan, e.g. :func:`ffd_plan`) limits the bins per kind. ``lower_bound`` (e.g.
    :func:`cover_bound`'s) is added as the row ``cost >= lower_bound``, which HiGHS's dual bound
    then starts from. ``fixed`` (pruned kind index -> nodes) makes it a feasibility check: exactly
    those nodes, all open (``optimal`` then means the pods fit them).

    Raises:
        ImportError: highspy is not installed.
    """
    import highspy

    p = problem.pruned()
    eps = 1e-9
    shapes = len(p.counts)
    cols_cost: list[float] = []
    upper: list[float] = []
    bins: list[tuple[int, int, dict[int, int]]] = []  # (kind, y col, {shape: x col})
    lower: list[float] = []
    for k in range(len(p.prices)):
        allowed = [s for s in range(shapes) if p.compat[s, k]]
        if fixed is not None:
            nb = fixed.get(k, 0)
        elif not allowed or p.prices[k] > upper_bound + eps:
            continue
        else:
            nb = min(int(np.floor(upper_bound / p.prices[k] + eps)), int(p.counts[allowed].sum()))
        for _ in range(nb):
            y = len(cols_cost)
            cols_cost.append(float(p.prices[k]))
            upper.append(1.0)
            lower.append(1.0 if fixed is not None else 0.0)
            xs = {}
            for s in allowed:
                xs[s] = len(cols_cost)
                cols_cost.append(0.0)
                upper.append(float(p.counts[s]))
                lower.append(0.0)
            bins.append((k, y, xs))
            if len(cols_cost) > max_variables:
                return None
    rows: list[tuple[float, float, list[int], list[float]]] = []
    for s in range(shapes):
        idx = [xs[s] for _, _, xs in bins if s in xs]
        rows.append((float(p.counts[s]), float(p.counts[s]), idx, [1.0] * len(idx)))
    prev: dict[int, int] = {}
    for k, y, xs in bins:
        for r in range(len(p.resources)):
            idx = [xs[s] for s in xs if p.requests[s, r]] + [y]
            val = [float(p.requests[s, r]) for s in xs if p.requests[s, r]] + [-float(p.free[k, r])]
            if len(idx) > 1:
                rows.append((-highspy.kHighsInf, 0.0, idx, val))
        for s, x in xs.items():
            rows.append((-highspy.kHighsInf, 0.0, [x, y], [1.0, -float(p.counts[s])]))
        if k in prev:
            rows.append((0.0, highspy.kHighsInf, [prev[k], y], [1.0, -1.0]))
        prev[k] = y
    for r in range(len(p.resources)):
        demand = float((p.counts * p.requests[:, r]).sum())
        idx = [y for k, y, _ in bins if p.free[k, r] > 0]
        rows.append((demand, highspy.kHighsInf, idx, [float(p.free[k, r]) for k, y, _ in bins if p.free[k, r] > 0]))
    rows.extend(_topology_rows(p, bins, highspy.kHighsInf))
    if p.limits is not None:  # NodePool limits: the capacity of its nodes within each limit
        for pool, lim in sorted(p.limits.limits.items()):
            for res, amount in sorted(lim.items()):
                c = p.limits.resources.index(res)
                held = [(y, float(p.limits.capacity[k, c])) for k, y, _ in bins
                        if p.limits.pools[k] == pool and p.limits.capacity[k, c] > 0]
                if held:
                    rows.append((-highspy.kHighsInf, float(amount), [y for y, _ in held], [v for _, v in held]))
    if lower_bound is not None and fixed is None:
        rows.append((lower_bound * (1 - 1e-9), highspy.kHighsInf, [y for _, y, _ in bins], [float(p.prices[k]) for k, _, _ in bins]))
    rows = [(lo2, hi2, idx, list(v)) for (lo, hi, idx, val) in rows for lo2, hi2, v in [_scaled(lo, hi, val)]]
    lp = highspy.HighsLp()
    n = len(cols_cost)
    lp.num_col_ = n
    lp.num_row_ = len(rows)
    lp.col_cost_ = np.array(cols_cost)
    lp.col_lower_ = np.array(lower)
    lp.col_upper_ = np.array(upper)
    lp.row_lower_ = np.array([r[0] for r in rows])
    lp.row_upper_ = np.array([r[1] for r in rows])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    starts = [0]
    index: list[int] = []
    value: list[float] = []
    for _, _, idx, val in rows:
        index.extend(idx)
        value.extend(val)
        starts.append(len(index))
    lp.a_matrix_.start_ = np.array(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value)
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = len(rows)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n
    h = _highs()
    h.setOptionValue("time_limit", float(time_limit))  # type: ignore[attr-defined]
    h.passModel(lp)  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    _run(h)
    seconds = time.perf_counter() - t0
    info = h.getInfo()  # type: ignore[attr-defined]
    status = h.getModelStatus()  # type: ignore[attr-defined]
    optimal = status == highspy.HighsModelStatus.kOptimal
    has_sol = info.primal_solution_status == 2  # kSolutionStatusFeasible
    plan: dict[str, int] = {}
    value_out: float | None = None
    if has_sol:
        sol = h.getSolution().col_value  # type: ignore[attr-defined]
        value_out = float(info.objective_function_value)
        for k, y, _ in bins:
            if sol[y] > 0.5:
                plan[p.type_names[k]] = plan.get(p.type_names[k], 0) + 1
    bound = float(info.mip_dual_bound) if np.isfinite(info.mip_dual_bound) else 0.0
    if optimal and value_out is not None:
        bound = max(bound, value_out * (1 - 1e-4))
    return MilpResult(value_out, bound, optimal, dict(sorted(plan.items())), seconds, n)


def _per_node(p: Problem, s: int, k: int) -> int:
    """The most pods of shape ``s`` one node of kind ``k`` holds (by resources alone)."""
    req = p.requests[s]
    return int(min((p.free[k, r] // req[r] for r in range(len(req)) if req[r] > 0), default=p.counts[s]))


def cover_bound(problem: Problem, *, time_limit: float = 1.0) -> tuple[float, dict[int, int]] | None:
    """A lower bound that counts nodes in integers: the cheapest multiset of kinds (``z_k`` nodes
    of kind ``k``, integer) whose pooled free capacity covers the pods, dropping only the
    per-node packing::

        min sum_k p_k z_k  s.t.  sum_k F_k,res z_k >= sum_s n_s r_s,res              every resource
                                 sum_{k admits s} m_sk z_k >= n_s                     every shape
                                 sum_{k admits s} F_k,res z_k >= sum_{s' only where s goes} n_s' r_s',res

    with ``m_sk`` the most pods of ``s`` one node of ``k`` holds. Every plan satisfies these rows,
    so the optimum is a lower bound, and usually a tight one on few nodes, where the LP bound is
    loose (the LP buys fractional nodes). Returns ``(USD/hour, {pruned kind index: nodes})``, or
    None when HiGHS finds no proved optimum within ``time_limit`` seconds.

    Raises:
        ImportError: highspy is not installed.
    """
    import highspy

    p = problem.pruned()
    kinds, shapes = len(p.prices), len(p.counts)
    if kinds == 0 or shapes == 0:
        return None
    rows: list[tuple[float, list[int], list[float]]] = []
    for r in range(len(p.resources)):
        demand = float((p.counts * p.requests[:, r]).sum())
        if demand > 0:
            rows.append((demand, list(range(kinds)), [float(v) for v in p.free[:, r]]))
    for s in range(shapes):
        ks = [k for k in range(kinds) if p.compat[s, k]]
        per = [_per_node(p, s, k) for k in ks]
        rows.append((float(p.counts[s]), ks, [float(min(m, p.counts[s])) for m in per]))
        inside = [t for t in range(shapes) if not (p.compat[t] & ~p.compat[s]).any()]
        for r in range(len(p.resources)):
            demand = float(sum(p.counts[t] * p.requests[t, r] for t in inside))
            if demand > 0:
                rows.append((demand, ks, [float(p.free[k, r]) for k in ks]))
    rows.extend(_cover_topology_rows(p))
    h = _highs()
    h.addVars(kinds, np.zeros(kinds), np.full(kinds, highspy.kHighsInf))  # type: ignore[attr-defined]
    h.changeColsCost(kinds, np.arange(kinds, dtype=np.int32), np.array(p.prices, dtype=np.float64))  # type: ignore[attr-defined]
    h.changeColsIntegrality(kinds, np.arange(kinds, dtype=np.int32),  # type: ignore[attr-defined]
                            np.array([highspy.HighsVarType.kInteger] * kinds))
    for lo, idx, val in rows:
        lo, _, v = _scaled(lo, highspy.kHighsInf, val)
        h.addRow(lo, highspy.kHighsInf, len(idx), np.array(idx, dtype=np.int32), v)  # type: ignore[attr-defined]
    h.setOptionValue("time_limit", float(time_limit))  # type: ignore[attr-defined]
    _run(h)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:  # type: ignore[attr-defined]
        return None
    sol = h.getSolution().col_value  # type: ignore[attr-defined]
    z = {k: round(float(sol[k])) for k in range(kinds) if sol[k] > 0.5}
    return float(sum(p.prices[k] * v for k, v in z.items())), z


def _cover_topology_rows(p: Problem) -> list[tuple[float, list[int], list[float]]]:
    """Rows ``sum_k a_k z_k >= b`` of the cover bound for :attr:`Problem.topology`: a node-capped
    group needs nodes for all its pods at most ``cap`` each; each domain zone of a zone-spread group
    needs nodes for its least share (:func:`_least_per_zone`), in pods and in every resource."""
    rows: list[tuple[float, list[int], list[float]]] = []
    topo = p.topology
    for members, cap in topo.node_caps:
        ks = [k for k in range(len(p.prices)) if p.compat[list(members), k].any()]
        per = [min(cap, max(_per_node(p, s, k) for s in members if p.compat[s, k])) for k in ks]
        rows.append((float(sum(p.counts[s] for s in members)), ks, [float(v) for v in per]))
    need: dict[str, npt.NDArray[np.float64]] = {}
    counted: set[int] = set()
    for members, skew in topo.zone_spread:
        if counted & set(members):  # a shape's pods count once in a zone's resource need
            continue
        counted |= set(members)
        doms = _domains(p, members)
        least = _least_per_zone(int(sum(p.counts[s] for s in members)), len(doms), skew)
        if not least:
            continue
        smallest = p.requests[list(members)].min(axis=0).astype(np.float64)
        for z in doms:
            ks = [k for k in range(len(p.prices)) if p.zones[k] == z and p.compat[list(members), k].any()]
            per = [max(_per_node(p, s, k) for s in members if p.compat[s, k]) for k in ks]
            rows.append((float(least), ks, [float(v) for v in per]))
            need[z] = need.get(z, np.zeros(len(p.resources))) + least * smallest
    for z, vec in need.items():
        ks = [k for k in range(len(p.prices)) if p.zones[k] == z]
        for r in range(len(p.resources)):
            if vec[r] > 0:
                rows.append((float(vec[r]), ks, [float(p.free[k, r]) for k in ks]))
    return rows


def lp_bound(problem: Problem) -> float:
    """The LP relaxation (module docstring): USD/hour no plan can beat.

    Raises:
        ImportError: highspy is not installed.
    """
    import highspy

    p = problem.pruned()
    kinds, shapes, res = len(p.prices), len(p.counts), len(p.resources)
    cost = list(map(float, p.prices))
    acol: dict[tuple[int, int], int] = {}
    for s in range(shapes):
        for k in range(kinds):
            if p.compat[s, k]:
                acol[(s, k)] = len(cost)
                cost.append(0.0)
    rows: list[tuple[float, float, list[int], list[float]]] = []
    for s in range(shapes):
        idx = [acol[(s, k)] for k in range(kinds) if (s, k) in acol]
        rows.append((float(p.counts[s]), float(p.counts[s]), idx, [1.0] * len(idx)))
    for k in range(kinds):
        for r in range(res):
            ss = [s for s in range(shapes) if (s, k) in acol and p.requests[s, r]]
            if ss:
                rows.append((-highspy.kHighsInf, 0.0, [acol[(s, k)] for s in ss] + [k],
                             [float(p.requests[s, r]) for s in ss] + [-float(p.free[k, r])]))
    per_kind = [(k, k, {s: acol[(s, k)] for s in range(shapes) if (s, k) in acol}) for k in range(kinds)]
    rows.extend(_topology_rows(p, per_kind, highspy.kHighsInf))
    h = _highs()
    n = len(cost)
    h.addVars(n, np.zeros(n), np.full(n, highspy.kHighsInf))  # type: ignore[attr-defined]
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array(cost))  # type: ignore[attr-defined]
    for lo, hi, idx, val in rows:
        lo, hi, v = _scaled(lo, hi, val)
        h.addRow(lo, hi, len(idx), np.array(idx, dtype=np.int32), v)  # type: ignore[attr-defined]
    _run(h)
    return float(h.getInfo().objective_function_value)  # type: ignore[attr-defined]


@dataclass
class ZoneSplit:
    """:func:`zone_split` 's answer: ``value`` (USD/hour), ``optimal`` (every zone's packing was
    proved optimal, so ``value`` is the optimum; else it is a lower bound), ``plan`` (nodes per
    instance type, ``{}`` unless optimal), ``seconds``."""

    value: float
    optimal: bool
    plan: dict[str, int]
    seconds: float


def zone_split(problem: Problem, *, time_limit: float = 60.0, zone_time_limit: float = 5.0) -> ZoneSplit | None:
    """The optimum of a batch whose only topology rule is zone spread with ``maxSkew`` 1, every
    shape its own group and every group over the same zones (Deployments spread over zones, as in
    ``benchmarks/cost.py``'s zspread workloads); None for any other batch, or past ``time_limit``.

    With ``n_g = q_g Z + r_g``, every zone holds ``q_g`` or ``q_g + 1`` pods of group ``g``, so a
    plan is a choice, per zone, of the set ``S`` of groups that get the extra pod (each group in
    exactly ``r_g`` zones), and each zone is then packed alone. For each zone and each ``S``
    (zones with the same kinds share the packings) the zone's optimum comes from the cover bound
    and the bin MILP (:func:`solve_milp`, ``zone_time_limit`` seconds each); a small assignment
    MILP picks the sets. Exact when every zone packing is proved optimal, else a lower bound (the
    packings' dual bounds). 2^G packings per distinct zone: only for G <= 8 groups.

    Raises:
        ImportError: highspy is not installed.
    """
    import itertools

    import highspy

    t0 = time.perf_counter()
    p = problem.pruned()
    topo = p.topology
    shapes = len(p.counts)
    if topo.node_caps or topo.zone_caps or not topo.zone_spread or topo.relaxed or shapes > 8:
        return None
    groups = sorted(topo.zone_spread)
    if sorted(m[0] for m, _ in groups) != list(range(shapes)) or any(len(m) != 1 or k != 1 for m, k in groups):
        return None
    doms = _domains(p, list(range(shapes)))
    if any(_domains(p, [s]) != doms for s in range(shapes)):
        return None
    z_count = len(doms)
    base = p.counts // z_count
    extra = p.counts % z_count
    ks_of = {z: [k for k in range(len(p.prices)) if p.zones[k] == z] for z in doms}
    cache: dict[tuple[object, ...], tuple[float, bool, dict[str, int]]] = {}
    subsets = [frozenset(c) for r in range(shapes + 1) for c in itertools.combinations(
        [g for g in range(shapes) if extra[g]], r)]
    costs: dict[tuple[str, frozenset[int]], tuple[float, bool, dict[str, int]]] = {}
    for z in doms:
        ks = ks_of[z]
        sig = (p.prices[ks].tobytes(), p.free[ks].tobytes(), p.compat[:, ks].tobytes())
        for subset in subsets:
            counts = base + np.array([1 if g in subset else 0 for g in range(shapes)], dtype=np.int64)
            key = (sig, counts.tobytes())
            if key not in cache:
                if time.perf_counter() - t0 > time_limit:
                    return None
                cache[key] = _zone_packing(p, ks, counts, zone_time_limit)
            costs[(z, subset)] = cache[key]
    # the assignment: one subset per zone, group g extra in exactly r_g zones
    h = _highs()
    cols = list(costs)
    n = len(cols)
    h.addVars(n, np.zeros(n), np.ones(n))  # type: ignore[attr-defined]
    h.changeColsCost(n, np.arange(n, dtype=np.int32), np.array([costs[c][0] for c in cols]))  # type: ignore[attr-defined]
    h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.array([highspy.HighsVarType.kInteger] * n))  # type: ignore[attr-defined]
    for z in doms:
        idx = [i for i, c in enumerate(cols) if c[0] == z]
        h.addRow(1.0, 1.0, len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx)))  # type: ignore[attr-defined]
    for g in range(shapes):
        if extra[g]:
            idx = [i for i, c in enumerate(cols) if g in c[1]]
            h.addRow(float(extra[g]), float(extra[g]), len(idx), np.array(idx, dtype=np.int32), np.ones(len(idx)))  # type: ignore[attr-defined]
    _run(h)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:  # type: ignore[attr-defined]
        return None
    sol = h.getSolution().col_value  # type: ignore[attr-defined]
    chosen = [cols[i] for i in range(n) if sol[i] > 0.5]
    optimal = all(costs[c][1] for c in chosen) and all(v[1] for v in cache.values())
    plan: dict[str, int] = {}
    for c in chosen:
        for t, v in costs[c][2].items():
            plan[t] = plan.get(t, 0) + v
    value = float(sum(costs[c][0] for c in chosen))
    return ZoneSplit(value, optimal, dict(sorted(plan.items())) if optimal else {}, time.perf_counter() - t0)


def _zone_packing(p: Problem, ks: Sequence[int], counts: IntArray, time_limit: float) -> tuple[float, bool, dict[str, int]]:
    """(USD/hour, proved, nodes per type) of packing ``counts`` pods per shape on the kinds ``ks``
    of one zone (no topology left): the optimum when proved, else the MILP's dual bound."""
    keep = counts > 0
    if not keep.any():
        return 0.0, True, {}
    idx = np.array(ks, dtype=np.int64)
    sub = Problem(p.resources, p.requests[keep], counts[keep], [p.names[k] for k in ks], [p.type_names[k] for k in ks],
                  p.prices[idx], p.free[idx], p.compat[keep][:, idx], [], 0, [p.zones[k] for k in ks], TopologyModel())
    if not sub.compat.any(axis=1).all():
        return float("inf"), True, {}
    sub.ffd_order = sorted(range(len(sub.counts)), key=lambda s: tuple(-sub.requests[s]))
    ffd = ffd_plan(sub)
    cover = cover_bound(sub, time_limit=time_limit)
    if cover is not None and ffd.cost <= cover[0] * (1 + 1e-9):
        return ffd.cost, True, ffd.type_counts(sub)
    m = solve_milp(sub, ffd.cost, time_limit=time_limit, lower_bound=cover[0] if cover else None)
    if m is not None and m.optimal and m.value is not None:
        return m.value, True, m.plan
    if m is None:
        return (cover[0] if cover else lp_bound(sub)), False, {}
    return max(m.bound, cover[0] if cover else 0.0), False, {}


REFERENCE_TIME_LIMIT = 2.0
"""Seconds HiGHS may spend on the MILP behind ``karpy simulate``'s optimum line (the default run
stays interactive); past it the report gives the best proved lower bound instead."""
REFERENCE_MILP_PODS = 1000
"""Above this many pods ``karpy simulate`` skips the MILP and gives the LP bound (the bin MILP
grows with pods x kinds; ``benchmarks/cost.py`` uses the same cut)."""


@dataclass(frozen=True)
class Reference:
    """What the cheapest plan for a set of pods costs, to set a plan's cost against.

    Attributes:
        status: ``"optimum"`` (the MILP proved ``value`` optimal and the pods carry no constraint
            the model leaves out), ``"lower bound"`` (no plan costs less than ``value``: the
            MILP's dual bound or the LP bound when the time limit hit, or the optimum of the
            relaxation when some constraint is not modelled), or ``"unavailable"`` (``value`` None;
            ``note`` says why, e.g. HiGHS not installed).
        value: USD/hour, or None.
        plan: nodes per instance type of the optimum (``{}`` unless ``status == "optimum"``).
        pods: pods in the problem (those no instance type can hold are left out, see ``unplaceable``).
        unplaceable: pods no kind admits.
        seconds: wall time of the solver calls, seconds.
        note: why the status is what it is, or ``""``.
    """

    status: str
    value: float | None = None
    plan: dict[str, int] = field(default_factory=dict)
    pods: int = 0
    unplaceable: int = 0
    seconds: float = 0.0
    note: str = ""

    def gap(self, cost: float) -> float | None:
        """``cost / value - 1`` (0.05 = 5% above the reference), or None without a positive value."""
        if self.value is None or self.value <= 0:
            return None
        return cost / self.value - 1.0

    def to_dict(self) -> dict[str, object]:
        """JSON shape (``seconds`` left out: the report of one input is the same on every run)."""
        return {"status": self.status, "cost_per_hour": None if self.value is None else round(self.value, 6),
                "plan": dict(self.plan), "pods": self.pods, "unplaceable": self.unplaceable, "note": self.note}


def upper_bound_alone(problem: Problem) -> float:
    """USD/hour of a plan that meets every modelled rule: each pod alone on the cheapest kind
    that admits it, priced in the dearest of its zones (so any zone split the rules need costs no
    more). An upper bound for the MILP's bins when first-fit decreasing, which ignores topology,
    is none."""
    p = problem
    total = 0.0
    for s in range(len(p.counts)):
        ks = np.flatnonzero(p.compat[s])
        cheapest: dict[str, float] = {}
        for k in ks:
            z = p.zones[k] if p.zones else ""
            cheapest[z] = min(cheapest.get(z, np.inf), float(p.prices[k]))
        total += float(p.counts[s]) * max(cheapest.values())
    return total


def _relaxations(tables: Sequence[TypeTable], pods: Sequence[PodInfo], problem: Problem) -> list[str]:
    """The constraints the model leaves out that these pods or NodePools carry (each makes the
    MILP a relaxation: its optimum is then a lower bound, not necessarily reachable)."""
    out = list(problem.topology.relaxed)
    if any(p.host_ports for p in pods):
        out.append("host ports")
    if any(t.template.limits for t in tables):
        out.append("NodePool limits")
    if any(r.min_values for t in tables for r in t.template.requirements):
        out.append("minValues")
    if problem.joined:
        out.append("pods joining a lower-weight NodePool's claims")
    return out


def _why_nothing_fits(tables: Sequence[TypeTable]) -> str:
    """Why no pod of the reference problem has a kind: every offering unavailable (a provider's
    quota or capacity used up, so its instance types are all marked unavailable), else the pods'
    needs (requests, requirements, taints) that no instance type of the NodePools meets."""
    if not any(np.isfinite(t.prices).any() for t in tables):
        listed = sum(len(t.types) for t in tables)
        if listed:
            return (f"no offering of the NodePools' {listed} instance type(s) is available now (the cloud provider marks "
                    "them unavailable, e.g. its instance quota or capacity is used up)")
        return "the cloud provider lists no instance type for the NodePools"
    return "no pod fits any available instance type (requests, requirements or taints)"


def reference(tables: TypeTable | Sequence[TypeTable], pods: Sequence[PodInfo], *, upper_bound: float | None = None,
              time_limit: float = REFERENCE_TIME_LIMIT, milp_pods: int = REFERENCE_MILP_PODS) -> Reference:
    """The optimum (or a lower bound) of the USD/hour of nodes for ``pods`` on ``tables``'
    NodePools, all within about ``time_limit`` seconds, for up to ``milp_pods`` pods:

    1. :func:`cover_bound` (integer node counts, pooled capacity): when its nodes hold the pods
       (:func:`solve_milp` with ``fixed``), or FFD's plan costs no more, that is the optimum;
    2. else the bin MILP with the cover bound as a row, in the time left;
    3. else (time out, or more than ``milp_pods`` pods) a ``lower bound``: the better of the
       cover bound and the LP bound (both reproducible; the MILP's dual bound at its time limit
       is not, so it is not used).

    An optimum of a model that leaves out a constraint the pods or NodePools carry (topology,
    host ports, limits, minValues) is reported as a ``lower bound``. ``upper_bound`` (USD/hour of
    a known plan, e.g. karpy's) limits the MILP's bins together with :func:`ffd_plan`.

    Never raises for a missing solver: without HiGHS the result is ``status="unavailable"``.
    """
    table_list = [tables] if isinstance(tables, TypeTable) else list(tables)
    if not pods:
        return Reference("unavailable", note="no pods to place")
    if not highs_available():
        return Reference("unavailable", pods=len(pods),
                         note="no MILP solver installed (highspy; pip install 'karpy[sim]')")
    problem = build_problem(table_list, pods)
    n = int(problem.counts.sum())
    if n == 0:
        return Reference("unavailable", pods=0, unplaceable=problem.unplaceable, note=_why_nothing_fits(table_list))
    relaxed = _relaxations(table_list, pods, problem)
    note = f"not modelled: {', '.join(relaxed)}" if relaxed else ""
    ffd = ffd_plan(problem)
    # first-fit decreasing ignores topology: with topology rules modelled its plan may break them
    ffd_ok = not problem.topology.constrained
    ub = ffd.cost if ffd_ok else upper_bound_alone(problem)
    if upper_bound is not None and upper_bound > 0:
        ub = min(ub, upper_bound)
    t0 = time.perf_counter()

    def left() -> float:
        return max(0.1, time_limit - (time.perf_counter() - t0))

    def done(status: str, value: float, plan: dict[str, int], why: str = "") -> Reference:
        if relaxed and status == "optimum":  # the optimum of a relaxation: a bound, maybe not reachable
            status, plan = "lower bound", {}
        return Reference(status, value, plan, n, problem.unplaceable, time.perf_counter() - t0,
                         "; ".join(x for x in (why, note) if x))

    cover = cover_bound(problem, time_limit=left()) if n <= milp_pods else None
    if cover is not None:
        value, z = cover
        if ffd_ok and ub <= value * (1 + 1e-9) and ffd.cost <= value * (1 + 1e-9):
            return done("optimum", ffd.cost, ffd.type_counts(problem))
        check = solve_milp(problem, ub, time_limit=left(), fixed=z)
        if check is not None and check.optimal and check.value is not None:
            return done("optimum", value, check.plan)
    m = solve_milp(problem, ub, time_limit=left(), lower_bound=cover[0] if cover else None) if n <= milp_pods else None
    if m is not None and m.optimal and m.value is not None:
        return done("optimum", m.value, m.plan)
    # the MILP's dual bound at its time limit is left out: it depends on how far HiGHS got, and
    # the same input should print the same report; the cover and LP bounds do not
    bound = max(cover[0] if cover else 0.0, lp_bound(problem))
    why = (f"optimum not proved within {time_limit:g} s" if n <= milp_pods else f"LP bound (over {milp_pods:,} pods)")
    return done("lower bound", bound, {}, why)
