"""One scheduling run: the inputs it reads and the mutable state it keeps.

:class:`Inputs` is what a :class:`~karpy_core.scheduling.scheduler.Scheduler` was built with
(NodePools, their type tables, nodes, bound pods, limits left, policies); it is never modified.
A :class:`SchedulingRun` holds everything a run changes - the NodeClaims it plans, what it adds
to each existing node (:class:`~karpy_core.scheduling.nodes.NodeUsage`), the limits it uses up,
topology counts and the per-signature search cursors - and the placement steps over them (on an
existing node, on a planned claim, on a new claim).

Speed: a pod's placement-relevant identity (:meth:`PodInfo.signature`) is the cache key. Nodes
and planned claims only fill up during a run, so once a signature fails on one it fails for good;
each signature keeps a cursor and never retries them (amortised O(1) per pod).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_ZONE
from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.feasibility import BoolArray, Fit, IntArray, check_claim, check_node, limit_mask
from karpy_core.scheduling.infeasible import Infeasible
from karpy_core.scheduling.nodeindex import INDEXED_NODES, NodeIndex
from karpy_core.scheduling.nodes import ExistingNode, NodeUsage
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import MinValuesPolicy, PreferencePolicy
from karpy_core.scheduling.preferences import Attempt, build_attempts
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.reservations import ReservationLedger
from karpy_core.scheduling.resources import Resources
from karpy_core.scheduling.scoring import resource_scores, spread_scores, usage_arrays
from karpy_core.scheduling.taints import Taint
from karpy_core.scheduling.template import NodePoolTemplate, TypeTable, request_vector
from karpy_core.scheduling.topology import AffinityTerm, Placement, SpreadConstraint, Topology, Verdict

__all__ = ["Inputs", "SchedulingRun"]

_NO_ROOM_KNOWN = np.iinfo(np.int64).max
ROOM_SCAN = 8
"""Claims :meth:`SchedulingRun.roomy` checks one by one before it compares the rest at once (first
fit usually stops within the first few; a vector compare has a fixed cost of some microseconds)."""
NODE_SCAN = 8
"""Existing nodes :meth:`SchedulingRun.place_existing` checks one by one before it narrows the
rest with the node index (first chunk ``4 * NODE_SCAN`` nodes, each next one four times larger):
where nodes have room, first fit stops within a few and a whole-cluster mask per pod cost more
(``consolidation_pass.py`` baseline, 5,000 nodes: 1.1 s a pass with no index, 2.4 s with whole masks)."""


@dataclass(frozen=True, slots=True)
class Inputs:
    """What a scheduler was built with (read-only for runs).

    Attributes:
        templates: Ready NodePools, by weight (descending) then name.
        tables: type table per NodePool name.
        nodes: existing nodes, initialized first, then by name.
        bound_pods: pods running on ``nodes``.
        limits_left: per NodePool, ``limits - usage`` (internal units, ``nodes`` a count), None
            for a NodePool without limits.
        unready: NodePools left out because they are not Ready: name -> why.
        unserved: NodePools left out because the cloud provider does not serve their NodeClass
            kind: name -> why.
        preference_policy, min_values_policy: the policies.
        max_instance_types: instance types kept per NodeClaim.
        use_caches: False tries every node and claim for every pod (the pod-by-pod reference).
        sizing: new claims of plain pods sized by cost (:mod:`~karpy_core.scheduling.sizing`);
            False keeps Karpenter's sizes (fill while the largest type fits).
    """

    templates: tuple[NodePoolTemplate, ...]
    tables: Mapping[str, TypeTable]
    nodes: tuple[ExistingNode, ...]
    bound_pods: tuple[PodInfo, ...]
    limits_left: Mapping[str, Resources | None]
    unready: Mapping[str, str]
    preference_policy: PreferencePolicy
    min_values_policy: MinValuesPolicy
    max_instance_types: int
    use_caches: bool
    sizing: bool = False
    unserved: Mapping[str, str] = field(default_factory=dict)
    memo: dict[str, dict[Any, Any]] = field(default_factory=dict, compare=False)
    """Answers that depend on these inputs alone (domains per NodePool and per pod signature),
    shared by every run of one scheduler (:meth:`Scheduler.solve` may plan a batch several ways)."""
    node_index: NodeIndex | None = field(default=None, compare=False)
    """An index over (a superset of) ``nodes`` shared by many schedulers (a consolidation pass
    builds one for all its simulations); None: a run with many nodes builds its own."""
    node_scoring: str | None = None
    """None: an existing node is chosen by first fit (:meth:`SchedulingRun.place_existing`).
    ``"first"`` or ``"last"``: by kube-scheduler's default scores
    (:meth:`SchedulingRun.place_scored`), ties going to the first or the last node in order."""


SETTLE_PASSES = 3
"""Passes of single-claim moves :meth:`SchedulingRun.settle_open_zones` makes at most."""


def _zone_breaks(counts: Mapping[str, int], carriers: Mapping[str, int], max_skew: int) -> int:
    """Pods carrying a hard zone spread (``carriers``: per zone) whose zone's count of pods the
    spread selects (``counts``: per zone, every zone of the spread's domain) ends more than
    ``max_skew`` above the least loaded zone: those kube-scheduler refuses there once every
    other pod is bound (PodTopologySpread, ``DoNotSchedule``)."""
    low = min(counts.values(), default=0)
    return sum(n for z, n in carriers.items() if n and counts.get(z, 0) - low > max_skew)


class SchedulingRun:
    """The mutable state of one :meth:`Scheduler.solve` call, and the placement steps.

    Args:
        inputs: the scheduler's inputs.
        pods: the pods of this run (their topology keys decide which domains are counted).
    """

    def __init__(self, inputs: Inputs, pods: tuple[PodInfo, ...] | list[PodInfo] = ()):
        self.inputs = inputs
        self.tables = inputs.tables
        self.remaining: dict[str, Resources | None] = {
            name: (dict(left) if left is not None else None) for name, left in inputs.limits_left.items()
        }
        self.usage = [NodeUsage(n) for n in inputs.nodes]
        self.claims: list[ClaimState] = []
        self.claim_caps: tuple[Mapping[str, BoolArray], ...] = ()
        """Size caps for new claims, smallest first: a new claim starts with only the types of
        the first cap (per NodePool table) that takes its pod, else with every type
        (:meth:`Scheduler.solve` tries capped plans for pods with topology rules)."""
        self._spread_at: dict[str, tuple[str, list[tuple[str, SpreadConstraint]]]] = {}
        """Pod key -> (zone, its hard zone spreads as (namespace, constraint)) for the pods placed
        with their zone known (on existing nodes and settled claims); :meth:`settle_open_zones`
        adds the pods of claims settled since."""
        self.room_scan = ROOM_SCAN
        """Claims :meth:`roomy` yields before it compares rooms: 0 for a plan under a size cap,
        whose small claims fill within a few pods (Karpenter's diverse mix at 5,000 pods under
        cap 4: 21,757 of 54,774 claim checks failed on room, most on those first claims; comparing
        every claim's room first made the plan ~25% faster, and first fit ~40% slower)."""
        names = sorted({r for t in inputs.tables.values() for r in t.resources})
        self._room_index = {r: i for i, r in enumerate(names)}
        self._rooms = np.full((16, len(names)), _NO_ROOM_KNOWN, dtype=np.int64)
        """Row ``i``: per resource (every table's, internal units), the most any type of claim
        ``i`` has left as of its last pod (:meth:`roomy`); a resource its table lacks is 0."""
        self._room_vectors: dict[tuple[Any, ...], IntArray | None] = {}
        self._room_columns: dict[int, npt.NDArray[np.intp]] = {}
        self._stale_rooms: set[int] = set()
        self._locks: dict[str, npt.NDArray[np.bool_]] = {}
        """Per topology key: which claims no pod may settle on it any more (:meth:`locked`)."""
        self._locks_watched = 0
        self._index: NodeIndex | None = None
        """Set on the first :meth:`place_existing` (:meth:`_indexed`): rows ``self._index_rows``
        of it are this run's nodes, in :attr:`usage`'s order."""
        self._index_rows: npt.NDArray[np.intp] | None = None
        self._index_tried = False
        self._score_arrays: tuple[IntArray, IntArray] | None = None
        """Allocatable and requested cpu and memory per node of :attr:`usage` (this run's pods
        included), for :meth:`place_scored`; made on its first call."""
        self._free: IntArray | None = None
        """Free room per node of :attr:`usage` (row) and resource of the index (column), less
        what this run placed through :meth:`place_existing`; never below the true free room."""
        self._admit: dict[tuple[Any, ...], BoolArray] = {}
        self._pod_vectors: dict[tuple[Any, ...], tuple[IntArray | None, IntArray]] = {}
        self._stale_locks: set[int] = set()
        self.ledger = ReservationLedger(inputs.tables)
        """Capacity reservations left and held by the planned claims (Karpenter ReservationManager)."""
        self._node_cursor: dict[tuple[Any, ...], int] = {}
        self._claim_cursor: dict[tuple[Any, ...], int] = {}
        self.new_failed: dict[tuple[Any, ...], set[str]] = {}
        self._attempt_cache: dict[tuple[Any, ...], list[Attempt]] = {}
        self._pod_domain_cache: dict[tuple[Any, ...], dict[str, set[str]]] = inputs.memo.setdefault("pod_domains", {})
        self._template_domain_cache: dict[tuple[str, str], set[str]] = inputs.memo.setdefault("template_domains", {})
        keys: set[str] = set()
        for p in [*pods, *inputs.bound_pods]:
            keys |= {c.key for c in p.spread} | {t.key for t in p.affinity} | {t.key for t in p.preferred_affinity}
        self.topology = Topology(self._domains(keys))
        by_name = {u.node.name: u for u in self.usage}
        for bp in inputs.bound_pods:
            use = by_name.get(bp.node_name)
            if use is None:
                continue
            use.add_ports(bp.host_ports)
            anti = [t for t in bp.affinity if t.anti]
            self.topology.record(bp.namespace, bp.labels, Placement(use.node.labels, use.node.taints), anti)

    # ---- domains ------------------------------------------------------------------------
    def _template_domains(self, t: NodePoolTemplate, key: str) -> set[str]:
        hit = self._template_domain_cache.get((t.name, key))
        if hit is None:
            hit = self._template_domain_cache[(t.name, key)] = self._template_domains_uncached(t, key)
        return hit

    def _template_domains_uncached(self, t: NodePoolTemplate, key: str) -> set[str]:
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
            for t in self.inputs.templates:
                out[key] |= self._template_domains(t, key)
            if self._indexed():
                assert self._index is not None and self._index_rows is not None
                out[key].update(v for v in set(self._index.label_values(key)[self._index_rows].tolist()) if v is not None)
                continue
            for n in self.inputs.nodes:
                if key in n.labels:
                    out[key].add(n.labels[key])
        return out

    def pod_domains(self, pod: PodInfo, keys: set[str]) -> dict[str, set[str]]:
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
                for t in self.inputs.templates:
                    if t.requirements.conflict(term) is not None:
                        continue
                    out[key] |= {v for v in self._template_domains(t, key) if allowed is None or allowed.has(v)}
            if self._indexed():
                assert self._index is not None and self._index_rows is not None
                values = self._index.label_values(key)[self._index_rows]
                out[key].update(v for v in values[self._index.matching(pod.requirement_terms)[self._index_rows]]
                                if v is not None)
                continue
            for n in self.inputs.nodes:
                if key in n.labels and any(t.admits(n.labels) for t in pod.requirement_terms):
                    out[key].add(n.labels[key])
        self._pod_domain_cache[cache_key] = out
        return out

    # ---- constraints --------------------------------------------------------------------
    def attempts(self, pod: PodInfo) -> list[Attempt]:
        """The pod's preference-relaxation attempts, strictest first (cached per signature)."""
        sig = pod.signature()
        cached = self._attempt_cache.get(sig)
        if cached is None:
            cached = self._attempt_cache[sig] = build_attempts(pod, self.inputs.preference_policy)
        return cached

    def pod_key(self, pod: PodInfo) -> tuple[Any, ...]:
        """The key under which pods are interchangeable in this run: the pod's
        :meth:`~karpy_core.scheduling.pod.PodInfo.signature`, plus its namespace and labels when
        it has no topology rules of its own but a placed pod's anti-affinity selects it. Such a
        plain pod is kept out of domains by labels its signature leaves out, so a look-alike with
        other labels may go where it may not (packers' buckets, placement cursors and failed
        NodePools are keyed by this)."""
        sig = pod.signature()
        if pod.has_topology or not self.topology.has_anti or not self.topology.anti_selects(pod.namespace, pod.labels):
            return sig
        return (*sig, pod.namespace, tuple(sorted(pod.labels.items())))

    def verdict(self, pod: PodInfo, att: Attempt) -> Verdict | None:
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
            universe=self.pod_domains(pod, spread_keys) if spread_keys else None,
        )

    def cached(self, att: Attempt, verdict: Verdict | None) -> bool:
        """Whether a signature's failures are final. Nodes and claims only fill up, so resource,
        taint and requirement failures are; so are anti-affinity and hostname-spread failures
        (counts only grow, the hostname minimum stays 0). Zonal spread and affinity are not."""
        if not self.inputs.use_caches:
            return False
        if verdict is None:
            return True
        return all(c.key == LABEL_HOSTNAME for c in att.spread) and all(t.anti for t in att.affinity)

    def record(self, pod: PodInfo, att: Attempt, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> None:
        """Count a placed pod in the topology (with its anti-affinity terms)."""
        anti = [t for t in att.affinity if t.anti]
        self.topology.record(pod.namespace, pod.labels, Placement(dict(labels), taints), anti)
        if att.spread:
            self.topology.watch(pod.namespace, att.spread)
            if LABEL_ZONE in labels and any(c.hard and c.key == LABEL_ZONE for c in att.spread):
                self._spread_at[pod.key] = (labels[LABEL_ZONE], [(pod.namespace, c) for c in att.spread if c.hard and c.key == LABEL_ZONE])
        fences = [t for t in anti if t.key != LABEL_HOSTNAME and t.key in labels]
        if fences:
            self._fence(fences, labels)

    def _fence(self, terms: list[AffinityTerm], labels: Mapping[str, str]) -> None:
        """Keep the planned NodeClaims whose domain on a term's key is still open out of the
        domain (``labels[term.key]``) a pod with these required anti-affinity terms just took,
        when they hold a pod the term selects. kube-scheduler binds those pods first (they were
        placed first), so it would refuse the new pod if such a claim launched in that domain;
        counts cannot see it while the claim is open (Karpenter leaves this gap). A claim is left
        as it is when no offering of its types, limits and minValues remain outside the domain:
        the same gap as before, never a claim that cannot launch (:meth:`_narrow`)."""
        for claim in self.claims:
            if not claim.pods:
                continue
            for t in terms:
                domain = labels[t.key]
                req = claim.requirements.get(t.key)
                if claim.settled(t.key) or (req is not None and not req.has(domain)) or not claim.matching(t.selector, t.namespaces):
                    continue
                self._narrow(claim, Requirement(t.key, True, frozenset((domain,))))

    def _narrow(self, claim: ClaimState, requirement: Requirement) -> bool:
        """Add ``requirement`` (on an offering key: zone or capacity type) to a planned claim, with
        its types, limits, minValues and reservations checked again; the claim's pods count in
        the domains it settles from then on (:meth:`~karpy_core.scheduling.topology.Topology.settle`).
        False, and the claim unchanged, when no offering of its types would be left, or limits,
        minValues (Strict) or reservations would not hold."""
        best_effort = self.inputs.min_values_policy is MinValuesPolicy.BEST_EFFORT
        table = claim.table
        before = claim.requirements.labels()
        narrowed = claim.requirements.copy()
        narrowed.add(requirement)
        mask = self.limit_mask(claim, claim.mask & table.offering_mask(narrowed))
        if not np.count_nonzero(mask) or not (best_effort or table.min_values_problem(mask, narrowed) is None):
            return False
        if requirement.complement and requirement.key in (LABEL_ZONE, LABEL_CAPACITY_TYPE):
            # NotIn leaving one value offered settles the key: the claim's pods count there
            cols = table.column_mask(narrowed) & np.isfinite(table.prices[mask]).any(axis=0)
            left = {table.offering_columns[j][0 if requirement.key == LABEL_ZONE else 1] for j in np.flatnonzero(cols)}
            if len(left) == 1:
                narrowed.add(Requirement(requirement.key, False, frozenset(left)))
        if self.ledger.active:
            settled = self.ledger.settle(table, claim.hostname, narrowed, mask)
            if settled is None:
                return False
            narrowed, mask, held = settled
            self.ledger.commit(claim.hostname, held)
            claim.reservations = held
        claim.requirements, claim.mask, claim.price, claim.free_room = narrowed, mask, None, None
        self.room_changed(claim)
        self.reserve(claim, mask)
        now = {**narrowed.labels(), LABEL_HOSTNAME: claim.hostname}
        newly = frozenset(now).difference(before, (LABEL_HOSTNAME,))
        if newly:  # left one domain: its pods count there from now on
            where = Placement(now, table.template.taints)
            for p in claim.pods:
                self.topology.settle(p.namespace, p.labels, where, newly)
        return True

    def settle_open_zones(self) -> int:  # noqa: C901
        """Pick a zone for each planned claim still open on zone that holds pods a hard zone
        spread of a placed pod counts (:attr:`~karpy_core.scheduling.topology.Topology.watched`);
        returns how many claims were pinned. Run once the plan is made.

        While a claim's zone is open its pods count nowhere, so the spread pods placed meanwhile
        chose their zones without them. Launched in whatever zone its cheapest offering is in,
        the claim can then raise a spread pod's zone above ``maxSkew`` over the least loaded
        one, and kube-scheduler, once every other pod is bound, refuses that pod there
        (Karpenter leaves this gap). The zones are chosen together (:func:`_zone_breaks` is
        what they minimise: spread pods whose zone ends above ``maxSkew`` over the least
        loaded), each claim among the zones its types are offered in and a placed pod's
        anti-affinity leaves to its pods: first greedily, claims holding the most such pods
        first, by fewest breaks, then the claim's price there, then load (its matching pods
        times the zone's count), then claim position (claims rotate over zones); then moves of
        one claim to another zone while they lower the breaks, or keep them and lower the price.
        A zone dearer than the claim's cheapest is only taken where it breaks fewer spreads
        (Karpenter's diverse mix at 5,000 pods on the AWS catalog, under cap 4: us-east-1e lacks
        the cheapest types; 1.2% dearer, and spread pods kube-scheduler would refuse 829 -> 326).
        A claim stays open when no zone is left, or its limits, minValues or reservations would
        not hold in the zone chosen (:meth:`_narrow`). The claim gives up the other zones'
        offerings as launch fallbacks."""
        watched = [(ns, c) for ns, c in self.topology.watched if c.key == LABEL_ZONE]
        if not watched:
            return 0
        zones = sorted(self.topology.domains.get(LABEL_ZONE, ()))
        carriers: list[dict[str, int]] = [dict.fromkeys(zones, 0) for _ in watched]
        where = {w: i for i, w in enumerate(watched)}

        def carry(z: str, spreads: list[tuple[str, SpreadConstraint]]) -> None:
            for w in spreads:
                if w in where:
                    carriers[where[w]][z] = carriers[where[w]].get(z, 0) + 1

        for z, spreads in self._spread_at.values():
            carry(z, spreads)
        todo: list[tuple[ClaimState, list[int], dict[str, float]]] = []
        for claim in self.claims:
            if not claim.pods:
                continue
            if claim.settled(LABEL_ZONE):
                z = claim.requirements.labels()[LABEL_ZONE]
                for p in claim.pods:
                    if p.spread and p.key not in self._spread_at:
                        carry(z, [(p.namespace, c) for c in p.spread])
                continue
            hits = [claim.matching(c.selector, (ns,)) for ns, c in watched]
            if not any(hits):
                continue
            req = claim.requirements.get(LABEL_ZONE)
            options: dict[str, float] = {}
            for z in zones:
                if (req is not None and not req.has(z)) or self.topology.anti_occupied(claim, LABEL_ZONE, z):
                    continue
                narrowed = claim.requirements.copy()
                narrowed.add(Requirement(LABEL_ZONE, False, frozenset((z,))))
                price = self.claim_price(claim.table, narrowed, claim.mask & claim.table.offering_mask(narrowed))
                if price != float("inf"):
                    options[z] = price
            if options:
                todo.append((claim, hits, options))
        if not todo:
            return 0
        todo.sort(key=lambda t: (-sum(t[1]), t[0].index))
        counts = [{z: self.topology.spread_counts(c, ns).get(z, 0) for z in zones} for ns, c in watched]
        skews = [c.max_skew for _, c in watched]
        active = [[(i, h) for i, h in enumerate(hits) if h] for _, hits, _ in todo]

        def breaks_with(act: list[tuple[int, int]], z: str) -> int:
            # spread pods above maxSkew over the spreads the claim's pods count for, with them in z
            out = 0
            for i, h in act:
                cnt = counts[i]
                cnt[z] += h
                out += _zone_breaks(cnt, carriers[i], skews[i])
                cnt[z] -= h
            return out

        chosen: list[str] = []
        rank = {z: r for r, z in enumerate(zones)}
        for (claim, _, options), act in zip(todo, active, strict=True):
            cheapest = min(options.values())
            lows = {i: min(counts[i].values()) for i, _ in act}

            def greedy_key(z: str, act: list[tuple[int, int]] = act, lows: dict[int, int] = lows,
                           options: dict[str, float] = options, cheapest: float = cheapest,
                           index: int = claim.index) -> tuple[int, float, int, int]:
                # the claim's matching pods that would lift a zone holding spread pods above maxSkew
                over = sum(h for i, h in act if carriers[i].get(z, 0) and counts[i][z] + h - lows[i] > skews[i])
                return over, round(options[z] - cheapest, 9), sum(h * counts[i][z] for i, h in act), (rank[z] - index) % len(zones)

            best = min(options, key=greedy_key)
            for i, h in act:
                counts[i][best] += h
            chosen.append(best)
        for _ in range(SETTLE_PASSES):
            moved = False
            for j, ((_, _, options), act) in enumerate(zip(todo, active, strict=True)):
                if len(options) < 2:
                    continue
                z0 = chosen[j]
                for i, h in act:
                    counts[i][z0] -= h
                keys = {z: (breaks_with(act, z), options[z]) for z in options}
                best = min(options, key=lambda z: (*keys[z], z != z0))
                if keys[best] < keys[z0]:
                    chosen[j], moved = best, True
                for i, h in act:
                    counts[i][chosen[j]] += h
            if not moved:
                break
        pinned = 0
        for (claim, _, _), z in zip(todo, chosen, strict=True):
            pinned += self._narrow(claim, Requirement(LABEL_ZONE, False, frozenset((z,))))
        return pinned

    # ---- existing nodes -----------------------------------------------------------------
    def place_existing(self, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> ExistingNode | None:
        """Put ``pod`` on the first existing node that takes it; returns that node or None.
        With :attr:`Inputs.node_scoring` set, on the one kube-scheduler scores highest instead
        (:meth:`place_scored`).

        With many nodes, only those the :class:`~karpy_core.scheduling.nodeindex.NodeIndex` keeps
        (tolerations and node affinity admit the pod, free room for its requests) are checked:
        the others would be refused, so the node chosen is the same."""
        if self.inputs.node_scoring is not None:
            return self.place_scored(pod, att, verdict)
        cached = self.cached(att, verdict)
        sig = (self.pod_key(pod), att.level)
        start = self._node_cursor.get(sig, 0) if cached else 0
        for i in self._existing_positions(pod, att, start):
            if self.place_on(self.usage[i], pod, att, verdict):
                if self._free is not None:
                    self._free[i] -= self._pod_vector(pod)[1]
                if cached:
                    self._node_cursor[sig] = i
                return self.usage[i].node
        if cached:
            self._node_cursor[sig] = len(self.usage)
        return None

    def place_scored(self, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> ExistingNode | None:
        """Put ``pod`` on the existing node that takes it (:meth:`place_on`'s checks) with the
        highest kube-scheduler score (:func:`node_scores`); ties go to the first node in
        :attr:`usage`'s order, or the last with ``Inputs.node_scoring == "last"`` (kube-scheduler
        picks among ties at random). Returns that node or None.

        Nodes are scored from the highest down and the first that takes the pod wins; with a
        pod's ``ScheduleAnyway`` spreads, whose scores are normalized over the nodes that take
        the pod, those nodes are found first."""
        positions = self._scored_positions(pod, att)
        soft = [c for c in pod.spread if not c.hard]
        if soft and len(positions):
            positions = positions[[self._takes(self.usage[i], pod, att, verdict) for i in positions.tolist()]]
        if not len(positions):
            return None
        if self._score_arrays is None:
            self._score_arrays = usage_arrays(self.usage)
        alloc, requested = self._score_arrays
        scores = resource_scores(alloc[positions], requested[positions], pod.requests)
        if soft:
            scores += spread_scores([self.usage[i] for i in positions.tolist()],
                                    [self.topology.spread_counts(c, pod.namespace) for c in soft], soft)
        tie = -positions if self.inputs.node_scoring == "last" else positions
        ranked: list[int] = positions[np.lexsort((tie, -scores))].tolist()
        for i in ranked:
            if self.place_on(self.usage[i], pod, att, verdict):
                requested[i, 0] += pod.requests.get("cpu", 0)
                requested[i, 1] += pod.requests.get("memory", 0)
                if self._free is not None:
                    self._free[i] -= self._pod_vector(pod)[1]
                return self.usage[i].node
        return None

    def _scored_positions(self, pod: PodInfo, att: Attempt) -> npt.NDArray[np.intp]:
        """Positions in :attr:`usage` worth checking for ``pod`` under ``att``, ascending: with the
        node index, those it keeps (tolerations, node affinity, room), all at once; else all."""
        n = len(self.usage)
        if not self._indexed():
            return np.arange(n, dtype=np.intp)
        assert self._index is not None and self._index_rows is not None and self._free is not None
        vec, _ = self._pod_vector(pod)
        if vec is None:
            return np.arange(n, dtype=np.intp)
        key = (pod.signature(), att.level)
        admit = self._admit.get(key)
        if admit is None:
            admit = self._admit[key] = self._index.admitted(pod.tolerations, att.terms or pod.requirement_terms)[self._index_rows]
        return np.flatnonzero(admit & (self._free >= vec).all(axis=1)).astype(np.intp)

    @staticmethod
    def _takes(use: NodeUsage, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """:meth:`place_on`'s checks without placing: the node ``use`` takes ``pod``."""
        node = use.node
        if check_node(use, pod, att.terms) is not None:
            return False
        if verdict is not None:
            candidate = {k: (frozenset((node.labels[k],)) if k in node.labels else None) for k in verdict.rules}
            if isinstance(verdict.choose(candidate), Infeasible):
                return False
        return True

    def _indexed(self) -> bool:
        """Whether this run narrows existing nodes with a :class:`NodeIndex` (set up on first use:
        the inputs' shared one when it holds every node, else its own for :data:`INDEXED_NODES`
        nodes or more; never for the pod-by-pod reference, ``use_caches=False``)."""
        if not self._index_tried:
            self._index_tried = True
            if not self.inputs.use_caches:
                return False
            index = self.inputs.node_index
            rows = index.rows(self.inputs.nodes) if index is not None else None
            if rows is None and len(self.usage) >= INDEXED_NODES:
                # built once per scheduler: its runs (the plans Scheduler.solve compares) share the nodes
                own = self.inputs.memo.setdefault("node_index", {})
                index = own.get("index")
                if index is None:
                    index = own["index"] = NodeIndex(self.inputs.nodes)
                rows = np.arange(len(self.usage), dtype=np.intp)
            if index is not None and rows is not None:
                self._index, self._index_rows = index, rows
                self._free = index.free[rows]
        return self._index is not None

    def _pod_vector(self, pod: PodInfo) -> tuple[IntArray | None, IntArray]:
        """The pod's requests over the index's columns: (for the room test, None when it names a
        resource no node has; what placing it takes)."""
        assert self._index is not None
        sig = pod.signature()
        hit = self._pod_vectors.get(sig)
        if hit is None:
            hit = self._pod_vectors[sig] = (self._index.vector(pod.requests), self._index.charge(pod.requests))
        return hit

    def _existing_positions(self, pod: PodInfo, att: Attempt, start: int) -> Iterator[int]:
        """Positions in :attr:`usage` from ``start`` worth checking for ``pod`` under ``att``, in
        order, lazily: the first :data:`NODE_SCAN` as they come (first fit usually stops there, on
        a cluster with room), then those the index keeps, compared a growing chunk at a time."""
        n = len(self.usage)
        if start >= n or not self._indexed():
            yield from range(start, n)
            return
        assert self._index is not None and self._index_rows is not None and self._free is not None
        vec, _ = self._pod_vector(pod)
        if vec is None:
            yield from range(start, n)
            return
        head = min(n, start + NODE_SCAN)
        yield from range(start, head)
        key = (pod.signature(), att.level)  # the signature holds the tolerations and the terms att.terms derive from
        admit = self._admit.get(key)
        if admit is None:
            admit = self._admit[key] = self._index.admitted(pod.tolerations, att.terms or pod.requirement_terms)[self._index_rows]
        lo, size = head, 4 * NODE_SCAN
        while lo < n:
            hi = min(n, lo + size)
            keep = admit[lo:hi] & (self._free[lo:hi] >= vec).all(axis=1)
            for i in np.flatnonzero(keep).tolist():
                yield lo + i
            lo, size = hi, size * 4

    def place_on(self, use: NodeUsage, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """Put ``pod`` on the existing node ``use`` when it takes it (taints, node affinity, free
        room, host ports, the topology verdict); returns whether it did."""
        if not self._takes(use, pod, att, verdict):
            return False
        use.add(pod)
        self.record(pod, att, use.node.labels, use.node.taints)
        return True

    # ---- planned claims -----------------------------------------------------------------
    def place_planned(self, pod: PodInfo, att: Attempt, verdict: Verdict | None, *, free: bool = False) -> bool:
        """Add ``pod`` to the first NodeClaim planned in this run that takes it. With ``free``,
        only to one whose cheapest offering does not get dearer with it (the pod fits the room
        the claim's price already pays for; :meth:`place_free`). A claim that refuses a signature
        never takes it later (claims only fill up), so each signature keeps a cursor."""
        cached = self.cached(att, verdict)
        sig = (self.pod_key(pod), att.level, free)
        start = self._claim_cursor.get(sig, 0) if cached else 0
        for i in self.roomy(pod, start, self.locked(verdict)):
            claim = self.claims[i]
            if free and not self._keeps_price(claim, pod, att, verdict):
                continue
            if self.try_add(claim, pod, att, verdict):
                if cached:
                    self._claim_cursor[sig] = i
                return True
        if cached:
            self._claim_cursor[sig] = len(self.claims)
        return False

    def roomy(self, pod: PodInfo, start: int, skip: BoolArray | None = None) -> Iterator[int]:
        """Positions from ``start`` of the planned claims that might take ``pod``, in order: every
        claim but those that lack room for it - some resource it requests exceeds what every one
        of the claim's types has left, so :func:`check_claim` would refuse it (on room, or on a
        resource its NodePool does not offer), only slower - and those ``skip`` marks (indexed by
        claim position; :meth:`locked`). Lazy: the first :attr:`room_scan` claims come without the
        room check (first fit usually stops there), the rest compared at once only when the
        caller asks for more."""
        n = len(self.claims)
        head = min(n, start + self.room_scan)
        yield from (range(start, head) if skip is None else (i for i in range(start, head) if not skip[i]))
        if head >= n:
            return
        sig = pod.signature()
        if sig in self._room_vectors:
            vec = self._room_vectors[sig]
        else:
            vec = self._room_vectors[sig] = request_vector(pod.requests, self._room_index)
        if vec is None:
            return
        if self._stale_rooms or n > len(self._rooms):
            self._refresh_rooms()
        fits = (self._rooms[head:n] >= vec).all(axis=1)
        if skip is not None:
            fits &= ~skip[head:n]
        for i in np.flatnonzero(fits):
            yield head + int(i)

    def locked(self, verdict: Verdict | None) -> BoolArray | None:
        """Which planned claims (a row per claim position) the pod of ``verdict`` cannot join
        because it would settle a topology key on them: the claim has not settled the key and holds
        more pods of some placed pod's hard spread on that key (:attr:`Topology.watched`) than its
        ``maxSkew``. Settled in any domain, those pods alone would exceed the skew over the least
        loaded one, so every :class:`~karpy_core.scheduling.topology.OpenCheck` refuses it, and
        keeps refusing (the claim only gains pods): the scan skips such claims instead of asking
        :func:`check_claim` each time. None when the pod settles no such key."""
        if verdict is None or not verdict.open_checks:
            return None
        watched = self.topology.watched
        keys = [k for k in verdict.open_checks if any(c.key == k for _, c in watched)]
        if not keys:
            return None
        n = len(self.claims)
        if self._locks_watched != len(watched):
            self._locks_watched = len(watched)
            self._stale_locks = set(range(n))
        for key in {c.key for _, c in watched}:
            arr = self._locks.get(key)
            if arr is None or len(arr) < n:
                grown = np.zeros(max(16, 2 * n), dtype=bool)
                if arr is not None:
                    grown[: len(arr)] = arr
                self._locks[key] = grown
        for i in self._stale_locks:
            if i >= n:
                continue
            claim = self.claims[i]
            for key, arr in self._locks.items():
                arr[i] = not claim.settled(key) and any(
                    c.key == key and claim.matching(c.selector, (ns,)) > c.max_skew for ns, c in watched)
        self._stale_locks = set()
        out = self._locks[keys[0]][:n].copy()
        for key in keys[1:]:
            out |= self._locks[key][:n]
        return out

    def room_changed(self, claim: ClaimState) -> None:
        """Mark ``claim``'s row of :attr:`_rooms` and its lock (:meth:`locked`) stale after a pod
        joined it (:meth:`_refresh_rooms` and :meth:`locked` recompute them when needed)."""
        if claim.index >= 0:
            self._stale_rooms.add(claim.index)
            self._stale_locks.add(claim.index)

    def _refresh_rooms(self) -> None:
        """Recompute the stale rows of :attr:`_rooms` from the planned claims they belong to."""
        n = len(self.claims)
        if n > len(self._rooms):
            grown = np.full((2 * n + 16, self._rooms.shape[1]), _NO_ROOM_KNOWN, dtype=np.int64)
            grown[:len(self._rooms)] = self._rooms
            self._rooms = grown
        for i in self._stale_rooms:
            if i >= n:
                continue  # a claim dropped by restore; its position is marked again when reused
            claim = self.claims[i]
            table = claim.table
            cols = self._room_columns.get(id(table))
            if cols is None:
                cols = self._room_columns[id(table)] = np.array([self._room_index[r] for r in table.resources], dtype=np.intp)
            row = np.zeros(self._rooms.shape[1], dtype=np.int64)
            if claim.mask.any():
                row[cols] = table.free[claim.mask].max(axis=0) - claim.requests
            self._rooms[i] = row
        self._stale_rooms.clear()

    def place_free(self, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """:meth:`place_planned` onto room a claim's price already pays for; False when no
        planned claim takes ``pod`` without getting dearer."""
        return self.place_planned(pod, att, verdict, free=True)

    def _keeps_price(self, claim: ClaimState, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """Whether ``pod`` fits ``claim`` with its cheapest offering no dearer (the room check on
        the types at the current price first, then :meth:`check`)."""
        if not self._room_at_price(claim, pod):
            return False
        fit = self.check(claim, pod, att, verdict)
        return isinstance(fit, Fit) and \
            self.claim_price(claim.table, fit.requirements, fit.mask) <= self.current_price(claim) + 1e-12

    def _room_at_price(self, claim: ClaimState, pod: PodInfo) -> bool:
        """Whether some type of ``claim`` at its current price has room left for ``pod`` (a
        vector compare; necessary for the pod to join without raising the price)."""
        vec = claim.table.vector(pod.requests)
        return vec is not None and bool((self._free_rooms(claim) >= vec).all(axis=1).any())

    @staticmethod
    def _free_rooms(claim: ClaimState) -> IntArray:
        """Room left (``free - requests``, a row per type over the table's resources) on each of
        the claim's types at its current price; cached on the claim per pod count."""
        if claim.free_room is not None and claim.free_room[0] == len(claim.pods):
            return claim.free_room[1]
        table = claim.table
        prices = table.cheapest_prices(claim.requirements)
        live = claim.mask & np.isfinite(prices)
        if not live.any():
            rooms = np.zeros((0, len(table.resources)), dtype=np.int64)
        else:
            cheapest = live & (prices <= prices[live].min() + 1e-12)
            rooms = table.free[cheapest] - claim.requests
        claim.free_room = (len(claim.pods), rooms)
        return rooms

    def check(self, claim: ClaimState, pod: PodInfo, att: Attempt, verdict: Verdict | None, *,
              explain: bool = False) -> Fit | tuple[Infeasible, ...]:
        """:func:`~karpy_core.scheduling.feasibility.check_claim` against this run's state (what
        :meth:`try_add` decides with)."""
        return check_claim(
            claim, pod, att, verdict,
            remaining=self.remaining[claim.table.template.name],
            domains=self.topology.domains,
            min_values=self.inputs.min_values_policy,
            explain=explain,
        )

    def try_add(self, claim: ClaimState, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """Add ``pod`` to ``claim`` when :meth:`check` allows it; True when added."""
        fit = check_claim(claim, pod, att, verdict, self.remaining[claim.table.template.name], self.topology.domains,
                          self.inputs.min_values_policy)
        if not isinstance(fit, Fit):
            return False
        table = claim.table
        before = claim.requirements.labels() if claim.pods else None
        requirements, mask, held = fit.requirements, fit.mask, frozenset[str]()
        if self.ledger.active:
            settled = self.ledger.settle(table, claim.hostname, requirements, mask)
            if settled is None:
                return False
            requirements, mask, held = settled
        labels = {**requirements.labels(), LABEL_HOSTNAME: claim.hostname}
        newly = frozenset(labels).difference(before, (LABEL_HOSTNAME,)) if before is not None else frozenset()
        if newly and (self.topology.has_anti or self.topology.watched) and self.topology.settle_refused(
                claim, pod.namespace, pod.labels, {k: labels[k] for k in newly},
                verdict.open_checks if verdict is not None else ()) is not None:
            return False  # the pod's own requirements would settle the claim where its pods may not go
        if self.ledger.active:
            self.ledger.commit(claim.hostname, held)
            claim.reservations = held
        claim.requirements = requirements
        claim.mask = mask
        claim.requests = fit.requests
        self.room_changed(claim)
        claim.relaxed = claim.relaxed or fit.relaxed
        claim.pods.append(pod)
        claim.host_ports |= pod.host_ports
        self.reserve(claim, mask)
        if newly:  # the pod settled a domain: count the claim's earlier pods there (Topology.settle)
            where = Placement(labels, table.template.taints)
            for p in claim.pods[:-1]:
                self.topology.settle(p.namespace, p.labels, where, newly)
        self.record(pod, att, labels, table.template.taints)
        return True

    def claim_price(self, table: TypeTable, requirements: Requirements, mask: BoolArray) -> float:
        """USD/hour of the cheapest offering among ``mask``'s types that ``requirements`` allow
        (``inf`` when none)."""
        prices = table.cheapest_prices(requirements)[mask]
        return float(prices.min()) if prices.size else float("inf")

    def current_price(self, claim: ClaimState) -> float:
        """:meth:`claim_price` of ``claim`` as it stands (cached on the claim per pod count: a
        claim's requirements and types only change when a pod joins it)."""
        if claim.price is None or claim.price[0] != len(claim.pods):
            claim.price = (len(claim.pods), self.claim_price(claim.table, claim.requirements, claim.mask))
        return claim.price[1]

    def place_cheapest(self, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """Put ``pod`` where it adds the least USD/hour: on the planned claim whose cheapest
        offering rises least with it, or on a new claim when that costs less (the marginal-cost
        rule, a variant :meth:`Scheduler.solve` tries for pods with topology rules); ties keep
        the earlier claim, then a planned claim over a new one. True when placed."""
        best: tuple[float, int] | None = None
        locked = self.locked(verdict)
        # A pod never makes a claim cheaper (its types and offerings only narrow), so the first
        # claim that takes it at its current price is the answer: look for it first among the
        # claims with room at that price (a vector compare), then scan the rest.
        checked: dict[int, float | None] = {}
        for i in self.roomy(pod, 0, locked):
            claim = self.claims[i]
            if not self._room_at_price(claim, pod):
                continue
            delta = self._delta(claim, pod, att, verdict)
            checked[i] = delta
            if delta is not None and delta <= 1e-12:
                best = (delta, i)
                break
        else:
            for i in self.roomy(pod, 0, locked):
                delta = checked[i] if i in checked else self._delta(self.claims[i], pod, att, verdict)
                if delta is not None and (best is None or delta < best[0] - 1e-12):
                    best = (delta, i)
        if best is not None:
            # what place_new would open: a claim of the first NodePool (by weight) that takes the pod
            alone = next((a for a in (self._alone_price(t, pod, att, verdict) for t in self.inputs.templates)
                          if a != float("inf")), float("inf"))
            if best[0] <= alone + 1e-12 and self.try_add(self.claims[best[1]], pod, att, verdict):
                return True
        return self.place_new(pod, att, verdict)

    def _delta(self, claim: ClaimState, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> float | None:
        """How much ``claim``'s cheapest offering rises with ``pod`` (USD/hour, >= 0), or None
        when the claim cannot take it."""
        fit = self.check(claim, pod, att, verdict)
        if not isinstance(fit, Fit):
            return None
        return self.claim_price(claim.table, fit.requirements, fit.mask) - self.current_price(claim)

    def _alone_price(self, template: NodePoolTemplate, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> float:
        """USD/hour of a new claim of ``template`` holding only ``pod`` (``inf`` when it cannot)."""
        claim = ClaimState.fresh(self.tables[template.name], len(self.claims))
        fit = self.check(claim, pod, att, verdict)
        return self.claim_price(claim.table, fit.requirements, fit.mask) if isinstance(fit, Fit) else float("inf")

    # ---- new claims ---------------------------------------------------------------------
    def place_new(self, pod: PodInfo, att: Attempt, verdict: Verdict | None) -> bool:
        """Open a NodeClaim for ``pod`` from the first NodePool (by weight) that takes it."""
        sig = (self.pod_key(pod), att.level)
        failed = self.new_failed.setdefault(sig, set()) if self.cached(att, verdict) else set()
        for template in self.inputs.templates:
            if template.name in failed:
                continue
            claim = ClaimState.fresh(self.tables[template.name], len(self.claims))
            added = False
            for caps in self.claim_caps:
                # a cap is a preference within the NodePool: a pod no capped type takes gets the
                # next cap's claim, then an uncapped one of the same NodePool, never one of a lower weight
                claim.mask = caps[template.name].copy()
                added = self.try_add(claim, pod, att, verdict)
                if added:
                    break
                claim = ClaimState.fresh(self.tables[template.name], len(self.claims))
            if added or self.try_add(claim, pod, att, verdict):
                self.claims.append(claim)
                rem = self.remaining[template.name]
                if rem is not None and "nodes" in rem:
                    rem["nodes"] -= 1
                return True
            failed.add(template.name)
        return False

    # ---- limits -------------------------------------------------------------------------
    def limit_mask(self, claim: ClaimState, mask: BoolArray) -> BoolArray:
        """``mask`` without the types the claim's NodePool limits no longer admit."""
        return limit_mask(self.remaining[claim.table.template.name], claim.table, mask, claim.reserved)

    def reserve(self, claim: ClaimState, mask: BoolArray) -> None:
        """Count the largest capacity among ``mask`` against the claim's NodePool limits."""
        rem = self.remaining[claim.table.template.name]
        if rem is None:
            return
        table = claim.table
        new_reserved: Resources = {}
        for r in rem:
            i = table.index.get(r)
            if r == "nodes" or i is None:
                continue
            new_reserved[r] = int(table.capacity[mask, i].max())
        for r, v in new_reserved.items():
            rem[r] = rem[r] + claim.reserved.get(r, 0) - v
        claim.reserved = new_reserved

    def release_above(self, claim: ClaimState, target: int) -> None:
        """Where the claim's NodePool has limits: drop the claim's types larger than type
        ``target`` (row of its table, one that holds the claim's pods) in a limited resource, and
        count only what is left against the limits. A claim reserves its largest type's capacity
        (Karpenter's rule); once a packer sized it for ``target``, holding the rest kept the
        NodePool's limit for types the claim will not launch, and the next claims saw a limit far
        from reached as used up (a 24-cpu limit held by a claim sized at 4 cpu; 200 cpu held by
        three one-pod claims, each reserving the 64-cpu type it could have launched). The claim
        keeps every type up to ``target``'s size, and where that leaves fewer distinct values than
        a ``minValues`` the claim met, the next larger types too (by their largest ratio to
        ``target`` over the limited resources) until it is met again (Karpenter keeps the minimum).
        A no-op without limits, when ``target`` is not among the claim's types, or when nothing
        would be dropped."""
        rem = self.remaining[claim.table.template.name]
        if rem is None or not claim.mask[target]:
            return
        table = claim.table
        cols = [table.index[r] for r in rem if r != "nodes" and r in table.index]
        if not cols:
            return
        cap = table.capacity[:, cols].astype(np.float64)
        base = cap[target]
        # how many times target's size each type is, in its most limited resource (<= 1: no
        # larger; inf: has some of a limited resource target has none of)
        ratio = np.where(base > 0, cap / np.where(base > 0, base, 1.0), np.where(cap > 0, np.inf, 0.0)).max(axis=1)
        mask = claim.mask & (ratio <= 1.0)
        if table.min_values_problem(mask, claim.requirements) is not None and \
                table.min_values_problem(claim.mask, claim.requirements) is None:
            for step in np.unique(ratio[claim.mask & (ratio > 1.0)]):
                mask = claim.mask & (ratio <= step)
                if table.min_values_problem(mask, claim.requirements) is None:
                    break
        if mask.sum() == claim.mask.sum():
            return
        claim.mask = mask
        self.reserve(claim, mask)
        self.room_changed(claim)

    def release_finished(self, claim: ClaimState, target: int | None = None) -> None:
        """:meth:`release_above` for a claim a packer has finished: to ``target`` while the claim
        still has that type, else to its cheapest type (price, then name), the one it launches."""
        if self.remaining[claim.table.template.name] is None:
            return
        if target is None or not claim.mask[target]:
            prices = np.where(claim.mask, claim.table.cheapest_prices(claim.requirements), np.inf)
            finite = np.flatnonzero(np.isfinite(prices))
            if finite.size == 0:
                return
            target = int(finite[np.lexsort((claim.table.name_rank[finite], prices[finite]))[0]])
        self.release_above(claim, target)

    # ---- alternatives -------------------------------------------------------------------
    def checkpoint(self) -> tuple[Any, ...]:
        """State to :meth:`restore` when trying an alternative packing of new claims."""
        return (len(self.claims), copy.deepcopy(self.remaining), self.topology.checkpoint(), copy.deepcopy(self.new_failed),
                self.ledger.checkpoint())

    def restore(self, mark: tuple[Any, ...]) -> None:
        """Drop the claims opened since ``mark`` and restore limits, topology, failures and
        reservations."""
        n, remaining, topo, new_failed, reservations = mark
        del self.claims[n:]
        self.ledger.restore(reservations)
        self.remaining = copy.deepcopy(remaining)
        self.topology.restore(topo)
        self.new_failed = copy.deepcopy(new_failed)

    def new_claims_cost(self, start: int) -> float:
        """USD/hour of the cheapest option of every claim opened since ``start``."""
        total = 0.0
        for claim in self.claims[start:]:
            prices = claim.table.cheapest_prices(claim.requirements)[claim.mask]
            finite = prices[np.isfinite(prices)]
            total += float(finite.min()) if finite.size else 0.0
        return total
