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

Determinism: every iteration is over sorted or insertion-ordered sequences, never over sets.

Speed: a pod's placement-relevant identity (:meth:`PodInfo.signature`) is the cache key. Nodes
and planned claims only fill up during a run, so once a signature fails on one it fails for good;
each signature keeps a cursor and never retries them (amortised O(1) per pod).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_ZONE, is_well_known
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources, fits, subtract
from karpy_core.scheduling.taints import Taint, untolerated
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable
from karpy_core.scheduling.topology import AffinityTerm, Placement, SpreadConstraint, Topology, Verdict
from karpy_core.utils.quantity import format_quantity

__all__ = ["ExistingNode", "PlannedNodeClaim", "SchedulingResults", "Scheduler", "MAX_INSTANCE_TYPES"]

MAX_INSTANCE_TYPES = 600
"""Instance types kept per NodeClaim, cheapest first (Karpenter ``MaxInstanceTypes``, #2430)."""


@dataclass(eq=False)
class ExistingNode:
    """A node (or a launched NodeClaim whose node has not registered yet) that pods may use.

    Attributes:
        name: node name (or NodeClaim name while in flight).
        labels: node labels.
        taints: node taints.
        allocatable: internal units.
        requested: sum of the requests of pods bound to it, internal units.
        nodepool: owning NodePool name, or None for nodes karpy does not manage.
        initialized: False while in flight; startup taints and ``unregistered`` are ignored then.
        startup_taints: taints expected to disappear once the node initialises.
    """

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    nodepool: str | None = None
    initialized: bool = True
    startup_taints: tuple[Taint, ...] = ()
    host_ports: set[tuple[str, int, str]] = field(default_factory=set)

    def effective_taints(self) -> tuple[Taint, ...]:
        if self.initialized:
            return self.taints
        ignore = set(self.startup_taints)
        return tuple(t for t in self.taints if t not in ignore and t.key != "karpenter.sh/unregistered")

    def free(self) -> Resources:
        return subtract(self.allocatable, self.requested)


@dataclass(eq=False)
class PlannedNodeClaim:
    """A NodeClaim the plan wants created.

    Attributes:
        nodepool: the NodePool name.
        template: its template.
        pods: pods planned onto it.
        requirements: template ∩ every pod's chosen node-affinity term, plus
            ``node.kubernetes.io/instance-type In [...]`` and ``karpenter.sh/capacity-type In [...]``.
        instance_types: remaining options, cheapest first, at most :data:`MAX_INSTANCE_TYPES`.
        requests: pods' requests plus the smallest DaemonSet overhead among the options.
        hostname: placeholder hostname used for hostname-keyed constraints during the run.
    """

    nodepool: str
    template: NodePoolTemplate
    pods: list[PodInfo]
    requirements: Requirements
    instance_types: list[InstanceType]
    requests: Resources
    hostname: str
    min_values_relaxed: bool = False
    """True when minValues could not be met and the BestEffort policy relaxed it."""

    def cheapest_offering_price(self) -> float:
        """USD/hour of the cheapest available offering among the options (the first type is the
        cheapest: options are ordered by price)."""
        if not self.instance_types:
            return 0.0
        o = self.instance_types[0].cheapest(self.requirements)
        return o.price if o is not None else 0.0

    def spec_requirements(self) -> list[dict[str, object]]:
        """``spec.requirements`` for the NodeClaim object (node-selector dicts)."""
        return self.requirements.to_selectors()


@dataclass
class SchedulingResults:
    """The plan: new claims, pods placed on existing nodes, and pods left pending with reasons."""

    new_claims: list[PlannedNodeClaim]
    existing: dict[str, str]
    """pod key (``ns/name``) -> existing node name."""
    errors: dict[str, str]
    """pod key -> human reason it cannot be scheduled."""

    def pods_placed(self) -> int:
        return len(self.existing) + sum(len(c.pods) for c in self.new_claims)


class _Claim:
    """Mutable in-run state of a planned NodeClaim."""

    __slots__ = ("host_ports", "hostname", "index", "mask", "pods", "relaxed", "requests", "requirements", "reserved", "table")

    def __init__(self, table: TypeTable, requirements: Requirements, hostname: str, index: int):
        self.table = table
        self.requirements = requirements
        self.pods: list[PodInfo] = []
        self.requests = np.zeros(len(table.resources), dtype=np.int64)
        self.mask = np.ones(len(table.types), dtype=bool)
        self.reserved: Resources = {}
        self.hostname = hostname
        self.index = index
        self.host_ports: set[tuple[str, int, str]] = set(table.daemon_host_ports)
        self.relaxed = False


@dataclass(frozen=True)
class _Attempt:
    """A pod's constraints at one preference-relaxation level."""

    terms: tuple[Requirements, ...]
    spread: tuple[SpreadConstraint, ...]
    affinity: tuple[AffinityTerm, ...]
    level: int

    @property
    def constrained(self) -> bool:
        return bool(self.spread or self.affinity)


HostPort = tuple[str, int, str]


def _ports_conflict(a: set[HostPort] | frozenset[HostPort], b: frozenset[HostPort]) -> HostPort | None:
    for ip, port, proto in b:
        for ip2, port2, proto2 in a:
            if port == port2 and proto == proto2 and (ip == ip2 or "0.0.0.0" in (ip, ip2)):
                return (ip, port, proto)
    return None


def _counts_that_fit(free: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """Per row of ``free`` (types x resources), how many copies of ``vec`` fit (negative when
    even zero do not)."""
    per = free // np.maximum(vec, 1)
    per[:, vec == 0] = np.iinfo(np.int64).max
    return per.min(axis=1)


class Scheduler:
    """Solves pending pods against existing nodes and NodePool templates.

    Args:
        templates: NodePools that may launch (already filtered to Ready ones).
        existing_nodes: nodes and in-flight NodeClaims.
        daemonsets: one :class:`PodInfo` per DaemonSet (from its pod template).
        nodepool_usage: per NodePool, resources already launched (capacity sums, ``nodes`` count),
            counted against ``limits``.
        bound_pods: pods already running on ``existing_nodes`` (for topology and host ports; their
            resources are already in ``ExistingNode.requested``).
        preference_policy: ``Respect`` (try preferences, relax them one at a time) or ``Ignore``.
    """

    def __init__(
        self,
        templates: Sequence[NodePoolTemplate],
        existing_nodes: Sequence[ExistingNode] = (),
        daemonsets: Sequence[PodInfo] = (),
        nodepool_usage: Mapping[str, Resources] | None = None,
        *,
        bound_pods: Sequence[PodInfo] = (),
        preference_policy: str = "Respect",
        max_instance_types: int = MAX_INSTANCE_TYPES,
        use_caches: bool = True,
        min_values_policy: str = "Strict",
    ):
        self.templates = sorted(templates, key=lambda t: (-t.weight, t.name))
        self.tables = {t.name: TypeTable(t, daemonsets) for t in self.templates}
        self.nodes = sorted(existing_nodes, key=lambda n: (not n.initialized, n.name))
        self.bound_pods = list(bound_pods)
        self.preference_policy = preference_policy
        self.max_instance_types = max_instance_types
        self.use_caches = use_caches
        self.min_values_policy = min_values_policy
        self.unready: dict[str, str] = {}
        """NodePools left out because they are not Ready: name -> why (for explanations)."""
        """``Strict`` rejects options that break a requirement's minValues; ``BestEffort`` keeps
        them and marks the NodeClaim (Karpenter's ``MIN_VALUES_POLICY``)."""
        """False: try every node and claim for every pod (the pod-by-pod reference run)."""
        usage = nodepool_usage or {}
        self.remaining: dict[str, Resources | None] = {}
        for t in self.templates:
            if t.limits is None:
                self.remaining[t.name] = None
            else:
                self.remaining[t.name] = subtract(t.limits, {k: v for k, v in usage.get(t.name, {}).items() if k in t.limits})
        self._claims: list[_Claim] = []
        self._node_cursor: dict[tuple[Any, ...], int] = {}
        self._claim_cursor: dict[tuple[Any, ...], int] = {}
        self._new_failed: dict[tuple[Any, ...], set[str]] = {}
        self.topology = Topology({})
        self._anti_keys: set[str] = set()
        self._attempt_cache: dict[tuple[Any, ...], list[_Attempt]] = {}
        self._pod_domain_cache: dict[tuple[Any, ...], dict[str, set[str]]] = {}

    # ------------------------------------------------------------------------------------
    def _template_domains(self, t: NodePoolTemplate, key: str) -> set[str]:
        req = t.requirements.get(key)
        if key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
            table = self.tables[t.name]
            vals = {o.zone if key == LABEL_ZONE else o.capacity_type for it in table.types for o in it.offerings if o.available}
            return {v for v in vals if req is None or req.has(v)}
        if req is not None and not req.complement:
            return set(req.values)
        return set()

    def _domains(self, keys: set[str]) -> dict[str, set[str]]:
        """Every domain a NodeClaim or existing node can be in, per topology key."""
        out: dict[str, set[str]] = {k: set() for k in keys}
        for key in keys:
            if key == LABEL_HOSTNAME:
                continue
            for t in self.templates:
                out[key] |= self._template_domains(t, key)
            for n in self.nodes:
                if key in n.labels:
                    out[key].add(n.labels[key])
        return out

    def _pod_domains(self, pod: PodInfo, keys: set[str]) -> dict[str, set[str]]:
        """The domains this pod could ever reach, per key: those of NodePools its node affinity is
        compatible with (narrowed by that affinity) and of existing nodes it matches. Spread counts
        its skew over these only, as kube-scheduler does with ``nodeAffinityPolicy: Honor``."""
        cache_key = (pod.signature(), tuple(sorted(keys)))
        hit = self._pod_domain_cache.get(cache_key)
        if hit is not None:
            return hit
        out: dict[str, set[str]] = {k: set() for k in keys if k != LABEL_HOSTNAME}
        for key in out:
            for term in pod.requirement_terms:
                allowed = term.get(key)
                for t in self.templates:
                    if t.requirements.conflict(term) is not None:
                        continue
                    out[key] |= {v for v in self._template_domains(t, key) if allowed is None or allowed.has(v)}
            for n in self.nodes:
                if key in n.labels and any(t.matches_labels(n.labels) is None for t in pod.requirement_terms):
                    out[key].add(n.labels[key])
        self._pod_domain_cache[cache_key] = out
        return out

    def _attempts(self, pod: PodInfo) -> list[_Attempt]:
        """Constraint sets to try, strictest first (Karpenter's relaxation order: preferred pod
        affinity, preferred anti-affinity, preferred node affinity, ScheduleAnyway spread).
        Cached per pod signature."""
        sig = pod.signature()
        cached = self._attempt_cache.get(sig)
        if cached is None:
            cached = self._attempt_cache[sig] = self._build_attempts(pod)
        return cached

    def _build_attempts(self, pod: PodInfo) -> list[_Attempt]:
        hard_spread = tuple(c for c in pod.spread if c.hard)
        soft: list[tuple[str, Any]] = []
        soft += [("affinity", t) for t in pod.preferred_affinity if not t.anti]
        soft += [("affinity", t) for t in pod.preferred_affinity if t.anti]
        soft += [("node", r) for r in pod.preferred_node_terms]
        soft += [("spread", c) for c in pod.spread if not c.hard]
        first = len(soft) if self.preference_policy == "Ignore" else 0
        out = []
        for level in range(first, len(soft) + 1):
            kept = soft[level:]
            terms = tuple(pod.requirement_terms)
            node_prefs = [r for kind, r in kept if kind == "node"]
            if node_prefs:
                merged = []
                for t in terms:
                    if t.conflict(node_prefs[0]) is None:
                        merged.append(t.union_with(node_prefs[0]))
                terms = tuple(merged) or terms
            out.append(_Attempt(
                terms=terms,
                spread=hard_spread + tuple(c for kind, c in kept if kind == "spread"),
                affinity=tuple(pod.affinity) + tuple(t for kind, t in kept if kind == "affinity"),
                level=level,
            ))
        return out

    def solve(self, pods: Sequence[PodInfo]) -> SchedulingResults:
        """Place ``pods``; returns the plan. Never raises for unschedulable pods: they get reasons."""
        keys: set[str] = set()
        for p in [*pods, *self.bound_pods]:
            keys |= {c.key for c in p.spread} | {t.key for t in p.affinity} | {t.key for t in p.preferred_affinity}
        self.topology = Topology(self._domains(keys))
        by_name = {n.name: n for n in self.nodes}
        for bp in self.bound_pods:
            node = by_name.get(bp.node_name)
            if node is None:
                continue
            node.host_ports |= bp.host_ports
            anti = [t for t in bp.affinity if t.anti]
            self._anti_keys |= {t.key for t in anti}
            self.topology.record(bp.namespace, bp.labels, Placement(node.labels, node.taints), anti)
        queue = sorted(
            pods,
            key=lambda p: (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.created, p.namespace, p.name),
        )
        existing: dict[str, str] = {}
        errors: dict[str, str] = {}
        # Phase 1: pods whose placement depends on other pods or on preferences, first-fit decreasing.
        # Phase 2: the rest go to existing nodes and the claims phase 1 opened, first fit.
        # Phase 3: what is left is packed into new claims one claim at a time, mixing shapes so that
        #          no resource runs out long before the others (see _fill_balanced).
        leftover: list[PodInfo] = []
        for phase, pods_in_phase in ((1, [p for p in queue if not self._plain(p)]), (2, [p for p in queue if self._plain(p)])):
            for pod in pods_in_phase:
                if pod.unsupported:
                    errors[pod.key] = pod.unsupported
                    continue
                placed = False
                for att in self._attempts(pod):
                    verdict = self._verdict(pod, att)
                    node = self._place_existing(pod, att, verdict)
                    if node is not None:
                        existing[pod.key] = node.name
                        placed = True
                        break
                    if self._place_planned(pod, att, verdict) or (phase == 1 and self._place_new(pod, att, verdict)):
                        placed = True
                        break
                if not placed:
                    if phase == 1:
                        errors[pod.key] = self.explain(pod)
                    else:
                        leftover.append(pod)
        for pod in self._fill_best(leftover):
            errors[pod.key] = self.explain(pod)
        return SchedulingResults([self._finalize(c) for c in self._claims], existing, errors)

    @staticmethod
    def _plain(pod: PodInfo) -> bool:
        """Pods with no topology, pod-affinity or preference constraints (interchangeable per shape)."""
        return not (pod.unsupported or pod.has_topology or pod.preferred_node_terms)

    def _fill_best(self, pods: list[PodInfo]) -> list[PodInfo]:
        """Pack plain pods with both packers (balanced mix, and first-fit decreasing as Karpenter
        does) and keep the cheaper plan (fewer unplaced pods first, then USD/hour). Balanced wins on
        catalogs priced per resource; FFD can win where specialised families (compute- or
        memory-optimised) are cheaper per unit. Both are deterministic."""
        if not pods:
            return []
        mark = self._checkpoint()
        failed_ffd = self._fill_balanced(pods, balanced=False)
        cost_ffd = self._new_claims_cost(mark[0])
        self._restore(mark)
        failed_bal = self._fill_balanced(pods, balanced=True)
        cost_bal = self._new_claims_cost(mark[0])
        if (len(failed_bal), cost_bal) <= (len(failed_ffd), cost_ffd):
            return failed_bal
        self._restore(mark)
        return self._fill_balanced(pods, balanced=False)

    def _checkpoint(self) -> tuple[Any, ...]:
        import copy

        return (len(self._claims), copy.deepcopy(self.remaining), self.topology.checkpoint(), copy.deepcopy(self._new_failed))

    def _restore(self, mark: tuple[Any, ...]) -> None:
        n, remaining, topo, new_failed = mark
        del self._claims[n:]
        import copy

        self.remaining = copy.deepcopy(remaining)
        self.topology.restore(topo)
        self._new_failed = copy.deepcopy(new_failed)

    def _new_claims_cost(self, start: int) -> float:
        """USD/hour of the cheapest option of every claim opened since ``start``."""
        total = 0.0
        for claim in self._claims[start:]:
            prices = claim.table.cheapest_prices(claim.requirements)[claim.mask]
            finite = prices[np.isfinite(prices)]
            total += float(finite.min()) if finite.size else 0.0
        return total

    def _fill_balanced(self, pods: list[PodInfo], *, balanced: bool = True) -> list[PodInfo]:
        """Pack plain pods into new NodeClaims; returns the pods that fit nowhere.

        One claim at a time: it is opened for the largest remaining pod, then repeatedly given a
        chunk of the pod shape that keeps its dominant resource share lowest
        (``max(cpu share, memory share)`` of the largest type it may still become) - memory-heavy
        and cpu-heavy pods end up together, so the cheapest type that fits a claim is used evenly
        instead of running out of cpu while memory sits idle (first-fit decreasing by cpu, which
        Karpenter uses, packs cpu-heavy pods together first). Chunks are
        ``ceil(room / shapes)`` pods, so shapes interleave finely while large groups of
        identical pods cost few decisions.
        """
        buckets: dict[tuple[Any, ...], list[PodInfo]] = {}
        for p in pods:  # pods arrive in first-fit-decreasing order; buckets keep it
            buckets.setdefault(p.signature(), []).append(p)
        failed: list[PodInfo] = []
        while buckets:
            first_sig = min(buckets, key=lambda k: self._ffd_key(buckets[k][0]))
            seed = buckets[first_sig].pop(0)
            att = self._attempts(seed)[-1]
            if not self._place_new(seed, att, self._verdict(seed, att)):
                failed.append(seed)
                failed.extend(buckets.pop(first_sig))  # identical pods fail identically
                continue
            if not buckets[first_sig]:
                del buckets[first_sig]
            claim = self._claims[-1]
            table = claim.table
            cols = [table.index[r] for r in ("cpu", "memory") if r in table.index]
            excluded: set[tuple[Any, ...]] = set()
            while True:
                best: tuple[float, tuple[Any, ...], Any] | None = None
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
                    if not (room >= need).all(axis=1).any():
                        excluded.add(sig)
                        continue
                    share = max((need[c] / ref[c] if ref[c] else 0.0) for c in cols) if cols else 0.0
                    key = (share if balanced else 0.0, self._ffd_key(bucket[0]))
                    if best is None or key < (best[0], self._ffd_key(buckets[best[1]][0])):
                        best = (key[0], sig, vec)
                if best is None:
                    break
                _, sig, vec = best
                bucket = buckets[sig]
                per_type = _counts_that_fit(room - claim.requests, vec)
                fit = int(per_type.max()) if per_type.size else 0
                live = sum(1 for k in buckets if k not in excluded)
                chunk = max(1, min(len(bucket), -(-fit // max(1, live)) if balanced else fit))
                added = 0
                if self._try_add(claim, bucket[0], self._attempts(bucket[0])[-1], None):
                    added = 1 + self._add_identical(claim, bucket[1:chunk], vec)
                del bucket[:added]
                if not bucket:
                    del buckets[sig]
                if added == 0:
                    excluded.add(sig)
        return failed

    def _add_identical(self, claim: _Claim, pods: list[PodInfo], vec: np.ndarray) -> int:
        """Add up to ``len(pods)`` pods identical to the one just added (same signature, no host
        ports) in one step; returns how many were added."""
        if not pods or pods[0].host_ports:
            return 0
        table = claim.table
        per_type = _counts_that_fit(table.free - claim.requests, vec)
        per_type = np.where(claim.mask, per_type, -1)
        k = min(len(pods), int(per_type.max()) if per_type.size else 0)
        pool = table.template.name
        while k > 0:
            mask = claim.mask & (per_type >= k)
            mask = self._limit_mask(pool, table, mask, claim.reserved)
            if mask.any() and (self.min_values_policy == "BestEffort" or table.min_values_problem(mask) is None):
                break
            k //= 2
        if k <= 0:
            return 0
        claim.mask = mask
        claim.requests = claim.requests + vec * k
        claim.pods.extend(pods[:k])
        self._reserve(pool, table, claim, mask)
        where = Placement({**claim.requirements.labels(), LABEL_HOSTNAME: claim.hostname}, table.template.taints)
        for pod in pods[:k]:  # plain pods carry no anti-affinity terms
            self.topology.record(pod.namespace, pod.labels, where)
        return k

    @staticmethod
    def _ffd_key(p: PodInfo) -> tuple[Any, ...]:
        return (-p.requests.get("cpu", 0), -p.requests.get("memory", 0), p.created, p.namespace, p.name)

    def _verdict(self, pod: PodInfo, att: _Attempt) -> Verdict | None:
        """The pod's topology verdict for this attempt, or None when topology cannot matter."""
        if not att.constrained and not (self.topology.has_anti and self.topology.anti_selects(pod.namespace, pod.labels)):
            return None
        spread_keys = {c.key for c in att.spread if c.honor_affinity}
        return self.topology.prepare(
            namespace=pod.namespace,
            labels=pod.labels,
            spread=att.spread,
            affinity=att.affinity,
            node_terms=list(pod.requirement_terms),
            tolerations=pod.tolerations,
            universe=self._pod_domains(pod, spread_keys) if spread_keys else None,
        )

    def _cached(self, att: _Attempt, verdict: Verdict | None) -> bool:
        """Whether a signature's failures are final. Nodes and claims only fill up, so resource,
        taint and requirement failures are; so are anti-affinity and hostname-spread failures
        (counts only grow, the hostname minimum stays 0). Zonal spread and affinity are not."""
        if not self.use_caches:
            return False
        if verdict is None:
            return True
        return all(c.key == LABEL_HOSTNAME for c in att.spread) and all(t.anti for t in att.affinity)

    def _record(self, pod: PodInfo, att: _Attempt, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> None:
        anti = [t for t in att.affinity if t.anti]
        if anti:
            self._anti_keys |= {t.key for t in anti}
        self.topology.record(pod.namespace, pod.labels, Placement(dict(labels), taints), anti)

    # ---- existing nodes -----------------------------------------------------------------
    def _place_existing(self, pod: PodInfo, att: _Attempt, verdict: Verdict | None) -> ExistingNode | None:
        cached = self._cached(att, verdict)
        sig = (pod.signature(), att.level)
        start = self._node_cursor.get(sig, 0) if cached else 0
        for i in range(start, len(self.nodes)):
            node = self.nodes[i]
            if self._node_rejects(node, pod, att.terms) is not None:
                continue
            if verdict is not None:
                candidate = {k: (frozenset((node.labels[k],)) if k in node.labels else None) for k in verdict.rules}
                if isinstance(verdict.choose(candidate), str):
                    continue
            for r, v in pod.requests.items():
                node.requested[r] = node.requested.get(r, 0) + v
            node.host_ports |= pod.host_ports
            self._record(pod, att, node.labels, node.taints)
            if cached:
                self._node_cursor[sig] = i
            return node
        if cached:
            self._node_cursor[sig] = len(self.nodes)
        return None

    @staticmethod
    def _node_rejects(node: ExistingNode, pod: PodInfo, terms: Sequence[Requirements] | None = None) -> str | None:
        taint = untolerated(node.effective_taints(), pod.tolerations)
        if taint is not None:
            return f"taint {taint} not tolerated"
        problems = [t.matches_labels(node.labels) for t in (terms or pod.requirement_terms)]
        if all(problems):
            return f"node affinity: {problems[0]}"
        if not fits(pod.requests, node.free()):
            return "not enough free " + ", ".join(r for r in sorted(pod.requests) if pod.requests[r] > node.free().get(r, 0))
        clash = _ports_conflict(node.host_ports, pod.host_ports)
        if clash is not None:
            return f"host port {clash[1]}/{clash[2]} already in use"
        return None

    # ---- planned claims -----------------------------------------------------------------
    def _place_planned(self, pod: PodInfo, att: _Attempt, verdict: Verdict | None) -> bool:
        cached = self._cached(att, verdict)
        sig = (pod.signature(), att.level)
        start = self._claim_cursor.get(sig, 0) if cached else 0
        for i in range(start, len(self._claims)):
            claim = self._claims[i]
            if self._try_add(claim, pod, att, verdict):
                if cached:
                    self._claim_cursor[sig] = i
                return True
        if cached:
            self._claim_cursor[sig] = len(self._claims)
        return False

    def _candidate(self, claim: _Claim, reqs: Requirements, keys: set[str]) -> dict[str, frozenset[str] | None]:
        out: dict[str, frozenset[str] | None] = {}
        for key in keys:
            if key == LABEL_HOSTNAME:
                out[key] = frozenset((claim.hostname,))
                continue
            req = reqs.get(key)
            universe = self.topology.domains.get(key, set())
            if req is None:
                out[key] = frozenset(universe) or None
            elif req.complement:
                out[key] = frozenset(v for v in universe if req.has(v)) or None
            else:
                vals = frozenset(req.values)
                out[key] = (vals & universe) or vals or None
        return out

    def _try_add(self, claim: _Claim, pod: PodInfo, att: _Attempt | None = None, verdict: Verdict | None = None) -> bool:
        table = claim.table
        template = table.template
        if untolerated(template.taints, pod.tolerations) is not None:
            return False
        if pod.host_ports and _ports_conflict(claim.host_ports, pod.host_ports) is not None:
            return False
        vec = table.vector(pod.requests)
        if vec is None:
            return False
        if att is None:
            att = self._attempts(pod)[-1]
            verdict = self._verdict(pod, att)
        if verdict is not None:
            host_rule = verdict.rules.get(LABEL_HOSTNAME)
            if host_rule is not None and (claim.hostname in host_rule.forbidden or (
                    host_rule.allowed is not None and claim.hostname not in host_rule.allowed)):
                return False
        need = claim.requests + vec
        for term in att.terms:
            if claim.requirements.conflict(term) is not None:
                continue
            reqs = claim.requirements.union_with(term)
            if verdict is not None:
                choice = verdict.choose(self._candidate(claim, reqs, set(verdict.rules)))
                if isinstance(choice, str):
                    continue
                for key, domain in choice.items():
                    if key != LABEL_HOSTNAME and (reqs.get(key) is None or reqs.get(key).size() != 1):  # type: ignore[union-attr]
                        reqs.add(Requirement(key, False, frozenset((domain,))))
                    elif key != LABEL_HOSTNAME:
                        r = reqs.get(key)
                        if r is not None and not r.has(domain):
                            reqs = None  # type: ignore[assignment]
                            break
                if reqs is None:
                    continue
            mask = claim.mask & table.compat_mask(term) & table.offering_mask(reqs)
            if not mask.any():
                continue
            mask &= (table.free >= need).all(axis=1)
            if not mask.any():
                continue
            mask = self._limit_mask(template.name, table, mask, claim.reserved)
            if not mask.any():
                continue
            if table.min_values_problem(mask) is not None:
                if self.min_values_policy != "BestEffort":
                    continue
                claim.relaxed = True
            claim.requirements = reqs
            claim.mask = mask
            claim.requests = need
            claim.pods.append(pod)
            claim.host_ports |= pod.host_ports
            self._reserve(template.name, table, claim, mask)
            labels = {**reqs.labels(), LABEL_HOSTNAME: claim.hostname}
            self._record(pod, att, labels, template.taints)
            return True
        return False

    # ---- new claims ---------------------------------------------------------------------
    def _place_new(self, pod: PodInfo, att: _Attempt, verdict: Verdict | None) -> bool:
        sig = (pod.signature(), att.level)
        failed = self._new_failed.setdefault(sig, set()) if self._cached(att, verdict) else set()
        for template in self.templates:
            if template.name in failed:
                continue
            rem = self.remaining[template.name]
            if rem is not None and "nodes" in rem and rem["nodes"] < 1:
                failed.add(template.name)
                continue
            table = self.tables[template.name]
            claim = _Claim(table, template.requirements.copy(), f"hostname-placeholder-{len(self._claims):04d}", len(self._claims))
            claim.requirements.add(Requirement(LABEL_HOSTNAME, False, frozenset((claim.hostname,))))
            if self._try_add(claim, pod, att, verdict):
                self._claims.append(claim)
                if rem is not None and "nodes" in rem:
                    rem["nodes"] -= 1
                return True
            failed.add(template.name)
        return False

    # ---- limits -------------------------------------------------------------------------
    def _limit_mask(self, pool: str, table: TypeTable, mask: np.ndarray, reserved: Resources) -> np.ndarray:
        rem = self.remaining[pool]
        if rem is None:
            return mask
        out = mask.copy()
        for r, left in rem.items():
            if r == "nodes":
                continue
            i = table.index.get(r)
            if i is None:
                continue
            out &= table.capacity[:, i] <= left + reserved.get(r, 0)
        return out

    def _reserve(self, pool: str, table: TypeTable, claim: _Claim, mask: np.ndarray) -> None:
        rem = self.remaining[pool]
        if rem is None:
            return
        new_reserved: Resources = {}
        for r in rem:
            i = table.index.get(r)
            if r == "nodes" or i is None:
                continue
            new_reserved[r] = int(table.capacity[mask, i].max())
        for r, v in new_reserved.items():
            rem[r] = rem[r] + claim.reserved.get(r, 0) - v
        claim.reserved = new_reserved

    # ---- output -------------------------------------------------------------------------
    def _finalize(self, claim: _Claim) -> PlannedNodeClaim:
        table = claim.table
        reqs = claim.requirements.copy()
        reqs.by_key.pop(LABEL_HOSTNAME, None)
        prices = table.cheapest_prices(reqs)
        idx = np.flatnonzero(claim.mask & np.isfinite(prices))
        order = idx[np.lexsort((table.name_rank[idx], prices[idx]))]
        chosen = [int(i) for i in order[: self.max_instance_types]]
        types = [table.types[i] for i in chosen]
        cols = table.column_mask(reqs) & np.isfinite(table.prices[chosen]).any(axis=0) if chosen else np.zeros(0, dtype=bool)
        used = [table.offering_columns[j] for j in np.flatnonzero(cols)]
        cts = sorted({c for _, c in used})
        zones = sorted({z for z, _ in used})
        reqs.add(Requirement(LABEL_INSTANCE_TYPE, False, frozenset(it.name for it in types)))
        reqs.add(Requirement(LABEL_CAPACITY_TYPE, False, frozenset(cts)))
        reqs.add(Requirement(LABEL_ZONE, False, frozenset(zones)))
        daemon_min = table.daemon[chosen].min(axis=0) if chosen else np.zeros(len(table.resources), dtype=np.int64)
        total = claim.requests + daemon_min
        requests = {r: int(total[i]) for i, r in enumerate(table.resources) if total[i]}
        return PlannedNodeClaim(
            nodepool=table.template.name,
            template=table.template,
            pods=claim.pods,
            requirements=reqs,
            instance_types=types,
            requests=requests,
            hostname=claim.hostname,
            min_values_relaxed=claim.relaxed,
        )

    # ---- explanations -------------------------------------------------------------------
    def explain(self, pod: PodInfo) -> str:
        """Why ``pod`` fits no existing node, planned claim or NodePool: one clause per NodePool
        naming the first check that failed (taint, requirement, resources, limits, offerings)."""
        if pod.unsupported:
            return pod.unsupported
        parts = [f"NodePool {t.name}: {self._explain_template(t, pod)}" for t in self.templates]
        parts += [f"NodePool {name}: not Ready ({why})" for name, why in sorted(self.unready.items())]
        if not parts:
            return "no NodePool is available to launch capacity (none defined, or none Ready)"
        return "; ".join(parts)

    def explain_detail(self, pod: PodInfo) -> list[str]:
        """Lines for ``karpy simulate --explain``: per NodePool, the check that ruled the pod out
        and the smallest change that would let it schedule there, where one exists."""
        lines = []
        for t in self.templates:
            reason = self._explain_template(t, pod)
            lines.append(f"NodePool {t.name} (weight {t.weight}): {reason}")
            fix = self._suggest(t, pod, reason)
            if fix:
                lines.append(f"    smallest change: {fix}")
        for name, why in sorted(self.unready.items()):
            lines.append(f"NodePool {name}: not Ready ({why}); it launches nothing until it is")
        for node in self.nodes:
            why = self._node_rejects(node, pod)
            lines.append(f"node {node.name}: {why or 'fits'}")
        return lines

    def _suggest(self, template: NodePoolTemplate, pod: PodInfo, reason: str) -> str:
        table = self.tables[template.name]
        taint = untolerated(template.taints, pod.tolerations)
        if taint is not None:
            val = f", value: {taint.value}" if taint.value else ""
            return (f"add the toleration {{key: {taint.key}, operator: {'Equal' if taint.value else 'Exists'}{val}, "
                    f"effect: {taint.effect}}} to the pod, or drop that taint from the NodePool")
        if reason.startswith("limits.nodes"):
            return "raise the NodePool's limits.nodes"
        if "limits." in reason and "would be exceeded" in reason:
            rem = self.remaining[template.name] or {}
            parts = []
            for r, left in sorted(rem.items()):
                i = table.index.get(r)
                if r == "nodes" or i is None or not template.limits:
                    continue
                vec = table.vector(pod.requests)
                fit = (table.free >= vec).all(axis=1) if vec is not None else np.zeros(len(table.types), dtype=bool)
                if fit.any():
                    need = int(table.capacity[fit, i].min()) - left
                    if need > 0:
                        parts.append(f"limits.{r} to at least {format_quantity(r, template.limits[r] + need)}")
            return "raise " + " and ".join(parts) if parts else ""
        if reason.startswith("incompatible requirements"):
            for term in pod.requirement_terms:
                for r in term:
                    mine = template.requirements.get(r.key)
                    if mine is not None and not mine.intersects(r):
                        allowed = ", ".join(sorted(mine.values)) if not mine.complement else mine.describe()
                        return (f"the NodePool allows {r.key} in [{allowed}]: select one of those, or add the pod's "
                                f"value to the NodePool's {r.key} requirement")
                    if mine is None and r.operator() not in ("NotIn", "DoesNotExist") and not is_well_known(r.key):
                        label = f"{r.key}={next(iter(r.values))}" if r.operator() == "In" and len(r.values) == 1 else r.key
                        return f"add the label {label} to the NodePool's template labels (or drop it from the pod)"
        if reason.startswith("no instance type matches"):
            for term in pod.requirement_terms:
                for r in term:
                    rest = Requirements({k: v for k, v in term.by_key.items() if k != r.key})
                    if table.compat_mask(rest).any():
                        return f"relax the pod's requirement {r.describe()}: no instance type of the NodePool has it"
        if "no instance type has room" in reason:
            return "lower the pod's requests below the largest type's allocatable, or allow larger instance types in the NodePool"
        if "no instance type offers resource" in reason:
            return "allow instance types that provide that resource (e.g. GPU types) in the NodePool's requirements"
        if reason.startswith("requirement minValues"):
            return "lower minValues, or widen the requirement so enough distinct values remain"
        if "topology spread" in reason:
            return "allow more zones/domains in the NodePool, or raise maxSkew / use whenUnsatisfiable: ScheduleAnyway"
        if "anti-affinity" in reason:
            return "allow more domains (zones) in the NodePool, or make the anti-affinity preferred"
        if "pod affinity" in reason:
            return "start the pods the affinity term selects first, or make the affinity preferred"
        return ""

    def _explain_template(self, template: NodePoolTemplate, pod: PodInfo) -> str:
        taint = untolerated(template.taints, pod.tolerations)
        if taint is not None:
            return f"pod does not tolerate taint {taint}"
        table = self.tables[template.name]
        rem = self.remaining[template.name]
        if rem is not None and "nodes" in rem and rem["nodes"] < 1:
            return f"limits.nodes={format_quantity('nodes', template.limits.get('nodes', 0) if template.limits else 0)} reached"
        vec = table.vector(pod.requests)
        if vec is None:
            missing = [r for r in sorted(pod.requests) if r not in table.index]
            return f"no instance type offers resource {', '.join(missing)}"
        clash = _ports_conflict(set(table.daemon_host_ports), pod.host_ports)
        if clash is not None:
            return f"host port {clash[1]}/{clash[2]} is held by a DaemonSet on every node of this NodePool"
        reasons: list[str] = []
        for term in pod.requirement_terms:
            conflict = template.requirements.conflict(term)
            if conflict is not None:
                reasons.append(f"incompatible requirements: {conflict}")
                continue
            reqs = template.requirements.union_with(term)
            mask = table.compat_mask(term)
            if not mask.any():
                reasons.append(f"no instance type matches {term.describe() or 'the NodePool requirements'}")
                continue
            mask = mask & table.offering_mask(reqs)
            if not mask.any():
                reasons.append(
                    "no available offering for "
                    + ", ".join(r.describe() for r in (reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE)) if r)
                )
                continue
            fit = mask & (table.free >= vec).all(axis=1)
            if not fit.any():
                need = ", ".join(f"{r} {format_quantity(r, v)}" for r, v in sorted(pod.requests.items()))
                largest = table.types[int(np.flatnonzero(mask)[np.argmax(table.free[mask, table.index['cpu']])])]
                reasons.append(
                    f"no instance type has room for the pod's requests ({need}) plus DaemonSet overhead; "
                    f"largest compatible type by cpu is {largest.name} with allocatable "
                    + ", ".join(f"{r} {format_quantity(r, v)}" for r, v in sorted(largest.allocatable.items()) if r in pod.requests)
                )
                continue
            limited = self._limit_mask(template.name, table, fit, {})
            if not limited.any():
                assert rem is not None and template.limits is not None
                which = []
                for r, left in sorted(rem.items()):
                    i = table.index.get(r)
                    if r == "nodes" or i is None:
                        continue
                    smallest = int(table.capacity[fit, i].min())
                    if smallest > left:
                        which.append(
                            f"limits.{r}={format_quantity(r, template.limits[r])} would be exceeded "
                            f"({format_quantity(r, max(left, 0))} left, the smallest fitting type adds {format_quantity(r, smallest)})"
                        )
                reasons.append("; ".join(which) or "limits exceeded")
                continue
            problem = table.min_values_problem(limited)
            if problem is not None:
                reasons.append(f"requirement {problem}")
                continue
            att = self._attempts(pod)[-1]
            verdict = self._verdict(pod, att)
            if verdict is not None:
                probe = _Claim(table, reqs.copy(), "hostname-placeholder-explain", -1)
                choice = verdict.choose(self._candidate(probe, reqs, set(verdict.rules)))
                if isinstance(choice, str):
                    reasons.append(choice)
                    continue
            reasons.append("fits a new node, but a planned node took the capacity first")
        return " | ".join(dict.fromkeys(reasons))
