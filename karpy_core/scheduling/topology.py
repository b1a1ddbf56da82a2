"""Topology spread constraints and pod (anti-)affinity for the provisioning scheduler.

Semantics follow the kube-scheduler plugins PodTopologySpread and InterPodAffinity, as Karpenter
simulates them (``pkg/controllers/provisioning/scheduling/topology.go``, ``topologygroup.go``):

* **Spread** (``maxSkew``, ``minDomains``, ``whenUnsatisfiable``): a pod may go to domain ``d``
  when ``count(d) + self - globalMin <= maxSkew``, where ``self`` is 1 if the pod matches its own
  selector, and ``globalMin`` is the smallest count over the eligible domains - 0 for
  ``kubernetes.io/hostname`` (a new node is always a new, empty domain) and 0 when fewer than
  ``minDomains`` domains exist. The least-loaded allowed domain is chosen.
  ``nodeAffinityPolicy: Honor`` (default) counts only nodes the pod's node affinity admits;
  ``nodeTaintsPolicy: Honor`` counts only nodes whose taints the pod tolerates (default Ignore).
  ``matchLabelKeys`` adds ``key In [pod's value]`` to the selector.
* **Affinity** (required): the domain must already hold a matching pod; when none exists
  anywhere and the pod matches its own term, it may start a domain (self-affinity bootstrap).
* **Anti-affinity** (required): the domain must hold no matching pod; and a pod may not go where
  an already placed pod's anti-affinity term matches it (the inverse rule, which is symmetric in
  kube-scheduler).

Domains a new NodeClaim can offer come from the NodePools' requirements and the zones and
capacity types where their instance types have offerings, so spread never counts a domain no
NodeClaim could reach.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Callable, Collection, Container, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from karpy_core.apis.labels import LABEL_HOSTNAME
from karpy_core.scheduling.infeasible import Infeasible, InfeasibleKind
from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.taints import Taint, Toleration, untolerated
from karpy_core.utils.selectors import selector_matches

__all__ = [
    "SpreadConstraint",
    "AffinityTerm",
    "parse_spread",
    "parse_affinity_terms",
    "Topology",
    "OpenCheck",
    "OpenClaim",
    "Verdict",
]


_CANONICAL = json.JSONEncoder(sort_keys=True)
"""``json.dumps(..., sort_keys=True)``'s encoder, built once (``dumps`` builds one per call when
given an option)."""


def _canonical(selector: Mapping[str, Any] | None) -> str:
    """Canonical JSON of a label selector: ``null`` (no selector: matches no pod) stays ``null``."""
    return _CANONICAL.encode(selector)


@dataclass(frozen=True)
class SpreadConstraint:
    """One ``topologySpreadConstraints`` entry, with ``matchLabelKeys`` already folded into the selector."""

    key: str
    max_skew: int
    hard: bool  # DoNotSchedule
    selector: str  # canonical JSON of the label selector
    min_domains: int = 1
    honor_affinity: bool = True
    honor_taints: bool = False


@dataclass(frozen=True)
class AffinityTerm:
    """One pod (anti-)affinity term: ``selector`` (canonical JSON; ``null`` when the term has no
    ``labelSelector``, which matches no pod), ``key``, the namespaces it looks in (None: every
    namespace), and ``weight`` (0 for required terms)."""

    key: str
    selector: str
    namespaces: tuple[str, ...] | None
    anti: bool
    weight: int = 0

    def looks_in(self, namespace: str) -> bool:
        """Whether the term counts pods of ``namespace``."""
        return self.namespaces is None or namespace in self.namespaces


def parse_spread(raw: Iterable[Mapping[str, Any]] | None, labels: Mapping[str, str]) -> list[SpreadConstraint]:
    """Spread constraints from a pod spec's ``topologySpreadConstraints``. A constraint without a
    ``labelSelector`` matches no pod (as kube-scheduler's ``LabelSelectorAsSelector(nil)``), so it
    never restricts.

    Raises:
        ValueError: a ``topologyKey`` is empty (kube-apiserver's ``ValidateTopologyKey`` refuses it;
            a pod read past the API server must not reach a reason naming a blank label).
    """
    out = []
    for i, c in enumerate(raw or ()):
        if not c.get("topologyKey"):
            raise ValueError(f"topologySpreadConstraints[{i}].topologyKey: Required value: can not be empty")
        selector = _with_label_keys(c.get("labelSelector"), labels, c.get("matchLabelKeys"), ())
        out.append(
            SpreadConstraint(
                key=str(c["topologyKey"]),
                max_skew=int(c.get("maxSkew") or 1),
                hard=(c.get("whenUnsatisfiable") or "DoNotSchedule") == "DoNotSchedule",
                selector=_canonical(selector),
                min_domains=int(c.get("minDomains") or 1),
                honor_affinity=(c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                honor_taints=(c.get("nodeTaintsPolicy") or "Ignore") == "Honor",
            )
        )
    return out


def _with_label_keys(selector: Mapping[str, Any] | None, labels: Mapping[str, str],
                     match: Iterable[str] | None, mismatch: Iterable[str] | None) -> dict[str, Any] | None:
    """``selector`` with ``key In [pod's value]`` for each ``matchLabelKeys`` key the pod has and
    ``key NotIn [pod's value]`` for each ``mismatchLabelKeys`` key; None stays None (no pod)."""
    if selector is None:
        return None
    out = dict(selector)
    extra = [{"key": k, "operator": "In", "values": [labels[k]]} for k in match or () if k in labels]
    extra += [{"key": k, "operator": "NotIn", "values": [labels[k]]} for k in mismatch or () if k in labels]
    if extra:
        out["matchExpressions"] = [*(out.get("matchExpressions") or ()), *extra]
    return out


def parse_affinity_terms(affinity: Mapping[str, Any] | None, namespace: str,
                         labels: Mapping[str, str] | None = None) -> tuple[list[AffinityTerm], list[AffinityTerm]]:
    """(required, preferred) pod affinity and anti-affinity terms of a pod spec's ``affinity``,
    for a pod in ``namespace`` with ``labels`` (for ``matchLabelKeys``/``mismatchLabelKeys``)."""
    required: list[AffinityTerm] = []
    preferred: list[AffinityTerm] = []
    for field_name, anti in (("podAffinity", False), ("podAntiAffinity", True)):
        section = (affinity or {}).get(field_name) or {}
        for term in section.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            required.append(_term(term, namespace, labels or {}, anti, 0))
        for wt in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            preferred.append(_term(wt.get("podAffinityTerm") or {}, namespace, labels or {}, anti, int(wt.get("weight") or 1)))
    preferred.sort(key=lambda t: -t.weight)
    return required, preferred


def _term(term: Mapping[str, Any], namespace: str, labels: Mapping[str, str], anti: bool, weight: int) -> AffinityTerm:
    """One term. Namespaces, as kube-scheduler reads them: ``namespaces`` and ``namespaceSelector``
    both unset = the pod's own; an empty ``namespaceSelector`` (``{}``) = every namespace; else the
    listed ones plus those the selector picks. The scheduler sees no Namespace objects, so a
    non-empty ``namespaceSelector`` is read as every namespace for anti-affinity (never co-locates
    pods kube-scheduler would keep apart; at worst a node too many) and as the listed namespaces
    (else the pod's own) for affinity."""
    listed = tuple(sorted(str(n) for n in term.get("namespaces") or ()))
    ns_selector = term.get("namespaceSelector")
    namespaces: tuple[str, ...] | None = listed or (namespace,)
    if isinstance(ns_selector, Mapping) and (anti or not (ns_selector.get("matchLabels") or ns_selector.get("matchExpressions"))):
        namespaces = None
    return AffinityTerm(
        key=str(term.get("topologyKey") or LABEL_HOSTNAME),
        selector=_canonical(_with_label_keys(term.get("labelSelector"), labels, term.get("matchLabelKeys"),
                                             term.get("mismatchLabelKeys"))),
        namespaces=namespaces,
        anti=anti,
        weight=weight,
    )


@dataclass(frozen=True)
class Placement:
    """Where a pod sits, for topology bookkeeping: its domain per label (node labels, or the single
    values of a NodeClaim's requirements) and the node's taints."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()


class _Excluded:
    """Domains a rule rules out: the union of the collections added (held, not copied: the counts
    and occupied sets they come from do not change while one pod looks for a place, and copying
    every occupied hostname for every pod with hostname anti-affinity made a batch quadratic)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list[Collection[str]] = []

    def add(self, values: Collection[str]) -> None:
        if values:
            self.parts.append(values)

    def __contains__(self, value: object) -> bool:
        for p in self.parts:
            if value in p:
                return True
        return False


@dataclass
class _KeyRule:
    """What one pod's constraints allow for one topology key."""

    allowed: set[str] | None = None  # None: any value
    forbidden: _Excluded = field(default_factory=lambda: _Excluded())
    counts: dict[str, int] | None = None  # spread counts, to pick the least-loaded domain
    why: Infeasible | None = None
    needs_label: bool = False  # a spread or affinity on the key: a node without the label is out

    def restrict(self, values: Iterable[str], why: Infeasible) -> None:
        vals = set(values)
        self.allowed = vals if self.allowed is None else self.allowed & vals
        self.why = self.why or why


@dataclass(frozen=True)
class OpenCheck:
    """A rule on a key other than the hostname, kept for NodeClaims that have not settled that key:
    the pods already on such a claim will be in whatever domain the pod pins it to, though no count
    holds them yet (:meth:`Topology.settle` counts them after). With ``k`` the claim's pods the
    selector matches, by ``kind``:

    * ``"spread"``, the pod's hard spread or one a placed pod carries (:attr:`Topology.watched`):
      domain ``d`` only when ``counts[d] + k <= bar``, where ``bar = maxSkew + min - self``
      (``min`` as now: it can only rise, so this is never looser than kube-scheduler counting
      those pods; ``self`` 1 when the pod itself matches);
    * ``"anti"``, the pod's required anti-affinity term: no such claim at all when ``k > 0``;
    * ``"inverse"``, a placed pod's anti-affinity term (``counts``: the domains it occupies): none
      of those domains when ``k > 0``.

    A claim still open when it launches gets its zone from the offering chosen then, which no count
    sees (Karpenter has the same gap)."""

    kind: str
    key: str
    selector: str
    namespaces: tuple[str, ...] | None
    counts: Mapping[str, int] = field(default_factory=dict)
    bar: int = 0


_OPEN_SPREAD = Infeasible(InfeasibleKind.TOPOLOGY_SPREAD,
                          "topology spread: the NodeClaim's pods, counted in the domain it would settle in, would exceed the skew")
_OPEN_ANTI = Infeasible(InfeasibleKind.POD_ANTI_AFFINITY,
                        "pod anti-affinity: the NodeClaim holds a pod that would share the domain it settles in")


class OpenClaim(Protocol):
    """What :meth:`Verdict.choose` asks of a candidate NodeClaim that holds pods
    (:class:`~karpy_core.scheduling.claim.ClaimState`)."""

    def settled(self, key: str) -> bool:
        """Whether the claim's requirements hold ``key`` to one value (its pods count there)."""
        ...

    def matching(self, selector: str, namespaces: tuple[str, ...] | None) -> int:
        """How many of its pods ``selector`` (canonical JSON) matches in ``namespaces`` (None: any)."""
        ...


@dataclass
class Verdict:
    """A pod's topology constraints evaluated against the current counts: per key, the domains it
    may use. Computed once per pod (counts do not change while one pod looks for a place) and then
    checked cheaply against every candidate node or NodeClaim."""

    rules: dict[str, _KeyRule]
    failure: Infeasible | None = None
    open_checks: dict[str, list[OpenCheck]] = field(default_factory=dict)
    """:class:`OpenCheck` per key (only keys of :attr:`rules`: a pod settles only those)."""

    def _open_filter(self, key: str, ok: list[str], claim: OpenClaim) -> list[str] | Infeasible:
        """``ok`` (domains on ``key``) without those :attr:`open_checks` rule out for ``claim``, or
        why none is left."""
        for oc in self.open_checks[key]:
            k = claim.matching(oc.selector, oc.namespaces)
            if not k:
                continue
            if oc.kind == "anti":
                return _OPEN_ANTI
            ok = [v for v in ok if v not in oc.counts] if oc.kind == "inverse" else [v for v in ok if oc.counts.get(v, 0) + k <= oc.bar]
            if not ok:
                return _OPEN_ANTI if oc.kind == "inverse" else _OPEN_SPREAD
        return ok

    def blocked(self, claim: OpenClaim, domains: Callable[[str], frozenset[str] | None]) -> Infeasible | None:
        """Why ``claim`` (holding pods; ``domains``: the domains it can be in per key, before this
        pod's own requirements narrow them) cannot take the pod whatever its requirements, by
        :attr:`open_checks` alone; None when it might. A cheap early test of :meth:`choose`:
        requirements only narrow the domains."""
        for key in self.open_checks:
            rule = self.rules[key]
            if claim.settled(key):
                continue
            vals = domains(key)
            if vals is None:
                continue
            ok = [v for v in vals if v not in rule.forbidden and (rule.allowed is None or v in rule.allowed)]
            if not ok:
                continue  # choose says why
            left = self._open_filter(key, ok, claim)
            if isinstance(left, Infeasible):
                return left
        return None

    def choose(self, candidate: Mapping[str, frozenset[str] | None],
               claim: OpenClaim | None = None) -> dict[str, str] | Infeasible:
        """``{key: domain}`` to pin on the candidate, or why the candidate is ruled out. With
        ``claim`` (a NodeClaim that holds pods), :attr:`open_checks` apply on the keys the claim
        has not settled yet."""
        if self.failure is not None:
            return self.failure
        out: dict[str, str] = {}
        for key, rule in self.rules.items():
            vals = candidate.get(key)
            if vals is None:
                if not rule.needs_label:
                    # anti-affinity only: a node without the key is in no domain, so no pod shares
                    # one with it (kube-scheduler's InterPodAffinity filter; Karpenter's anti-affinity
                    # domains allow DoesNotExist). Refused before: trial 20's pods stayed pending.
                    continue
                return Infeasible(InfeasibleKind.TOPOLOGY_LABEL, f"the node has no {key} label, needed by a topology constraint")
            ok = [v for v in vals if v not in rule.forbidden and (rule.allowed is None or v in rule.allowed)]
            if ok and claim is not None and key in self.open_checks and not claim.settled(key):
                left = self._open_filter(key, ok, claim)
                if isinstance(left, Infeasible):
                    return left
                ok = left
            if not ok:
                return rule.why or Infeasible(InfeasibleKind.TOPOLOGY, f"topology constraint on {key}")
            counts = rule.counts
            if counts is not None:
                out[key] = min(ok, key=lambda d: (counts.get(d, 0), d))
            else:
                out[key] = min(ok)
        return out


class Topology:
    """Counts pods per topology domain and answers "which domains may this pod use".

    Args:
        domains: every reachable domain value per topology key (from NodePools, offerings and
            existing nodes); hostname domains are open-ended and need not be listed.
    """

    def __init__(self, domains: Mapping[str, set[str]]):
        self.domains = {k: set(v) for k, v in domains.items()}
        # (key, selector, namespaces or None) -> domain -> matching pods placed there
        self._counts: dict[tuple[str, str, tuple[str, ...] | None], dict[str, int]] = {}
        # placed pods: namespace, labels, where, the labels as a sorted tuple (the match cache's
        # key; None until first needed, :meth:`_placed_key`), and the keys the entry counts for (None:
        # every key of ``where``; see :meth:`settle`)
        self._placed: list[tuple[str, Mapping[str, str], Placement, tuple[tuple[str, str], ...] | None, frozenset[str] | None]] = []
        # anti-affinity terms of placed pods: (key, selector, namespaces) -> domains they occupy
        self._anti: dict[tuple[str, str, tuple[str, ...] | None], set[str]] = {}
        self._selects: dict[tuple[str, tuple[tuple[str, str], ...]], bool] = {}
        """:meth:`anti_selects` per (namespace, sorted labels); cleared when a term joins :attr:`_anti`."""
        self._selectors: dict[str, dict[str, Any] | None] = {}
        self._watched: list[tuple[str, SpreadConstraint]] = []
        """(namespace, constraint): hard spreads on keys other than the hostname that a placed pod
        carries (:meth:`watch`). Those pods chose their domains by counts that left out pods on
        claims still open then, so a pod that settles such a claim must not break any of these
        with the claim's pods (:class:`OpenCheck`), whether or not it carries the constraint. A
        spread no placed pod carries yet needs no such check: its pods will see the settled counts."""
        self._watched_set: set[tuple[str, SpreadConstraint]] = set()
        self._matches: dict[tuple[str, str, tuple[tuple[str, str], ...]], bool] = {}

    def checkpoint(self) -> tuple[Any, ...]:
        """State to :meth:`restore` later (the scheduler tries alternative packings)."""
        return (len(self._placed), {k: dict(v) for k, v in self._counts.items()}, {k: set(v) for k, v in self._anti.items()},
                len(self._watched))

    def restore(self, mark: tuple[Any, ...]) -> None:
        n, counts, anti, watched = mark
        for w in self._watched[watched:]:
            self._watched_set.discard(w)
        del self._watched[watched:]
        del self._placed[n:]
        self._counts = {k: dict(v) for k, v in counts.items()}
        self._anti = {k: set(v) for k, v in anti.items()}
        self._selects.clear()

    @property
    def has_anti(self) -> bool:
        return bool(self._anti)

    def _sel(self, selector: str) -> dict[str, Any] | None:
        if selector not in self._selectors:
            self._selectors[selector] = json.loads(selector)
        return self._selectors[selector]

    def _match(self, selector: str, labels: Mapping[str, str], lkey: tuple[tuple[str, str], ...] | None = None) -> bool:
        key = (selector, "", lkey if lkey is not None else tuple(sorted(labels.items())))
        hit = self._matches.get(key)
        if hit is None:
            hit = self._matches[key] = selector_matches(self._sel(selector), labels)
        return hit

    def _group(self, key: str, selector: str, namespaces: tuple[str, ...] | None) -> dict[str, int]:
        gk = (key, selector, namespaces)
        counts = self._counts.get(gk)
        if counts is None:
            counts = self._counts[gk] = {}
            for i, (ns, labels, where, lkey, only) in enumerate(self._placed):
                if (namespaces is None or ns in namespaces) and key in where.labels and (only is None or key in only) \
                        and self._match(selector, labels, lkey or self._placed_key(i)):
                    d = where.labels[key]
                    counts[d] = counts.get(d, 0) + 1
        return counts

    def _placed_key(self, i: int) -> tuple[tuple[str, str], ...]:
        """The sorted labels of placed pod ``i`` (the match cache's key), made on first use and
        kept: recording a pod while no group counts (plain pods, no rule anywhere) skips it."""
        ns, labels, where, lkey, only = self._placed[i]
        if lkey is None:
            lkey = tuple(sorted(labels.items()))
            self._placed[i] = (ns, labels, where, lkey, only)
        return lkey

    def record(self, namespace: str, labels: Mapping[str, str], where: Placement, anti_terms: Iterable[AffinityTerm] = ()) -> None:
        """Count a pod placed at ``where`` (existing pods and each pod the scheduler places)."""
        self._count(namespace, labels, where, None)
        for t in anti_terms:
            if t.key in where.labels:
                tk = (t.key, t.selector, t.namespaces)
                if tk not in self._anti:
                    self._anti[tk] = set()
                    self._selects.clear()
                self._anti[tk].add(where.labels[t.key])

    @property
    def watched(self) -> list[tuple[str, SpreadConstraint]]:
        """(namespace, constraint) of the hard spreads on keys other than the hostname that placed
        pods carry, in the order they were first placed (see :meth:`watch`)."""
        return self._watched

    def watch(self, namespace: str, spread: Iterable[SpreadConstraint]) -> None:
        """Note the hard spreads on keys other than the hostname of a pod just placed in
        ``namespace`` (see :attr:`_watched`)."""
        for c in spread:
            if c.hard and c.key != LABEL_HOSTNAME and (namespace, c) not in self._watched_set:
                self._watched_set.add((namespace, c))
                self._watched.append((namespace, c))

    def settle(self, namespace: str, labels: Mapping[str, str], where: Placement, keys: frozenset[str]) -> None:
        """Count a pod recorded earlier on a NodeClaim in the domains of ``keys``, which the claim
        has settled since (a later pod narrowed them to one value each); ``where`` is the claim's
        placement now. Karpenter counts a pod on a claim only in the domains settled when it was
        added (``topology.go`` Record); counting it again once they settle keeps a selector over
        pods without the rule - Karpenter's diverse mix - from over-filling a zone unseen. The pod's
        own anti-affinity terms need no settling: a term on a key pins that key when the pod joins."""
        self._count(namespace, labels, where, keys)

    def _count(self, namespace: str, labels: Mapping[str, str], where: Placement, only: frozenset[str] | None) -> None:
        lkey = tuple(sorted(labels.items())) if self._counts else None  # else made when first needed (_placed_key)
        self._placed.append((namespace, labels, where, lkey, only))
        for (key, selector, namespaces), counts in self._counts.items():
            if ((namespaces is None or namespace in namespaces) and key in where.labels and (only is None or key in only)
                    and self._match(selector, labels, lkey)):
                d = where.labels[key]
                counts[d] = counts.get(d, 0) + 1

    def settle_refused(self, claim: OpenClaim, namespace: str, labels: Mapping[str, str],
                       settles: Mapping[str, str], checked: Container[str] = ()) -> Infeasible | None:
        """Why a pod in ``namespace`` with ``labels`` may not settle ``claim`` (holding pods) at
        ``settles`` (``{key: domain}``, the keys other than the hostname it pins by its own
        requirements), or None. The claim's pods would count there from then on
        (:meth:`settle`), so the pod is refused where they break a placed pod's anti-affinity
        term (the inverse rule) or a hard spread a placed pod carries (:attr:`watched`), as
        :class:`OpenCheck` rules it for keys the pod's verdict covers. Keys in ``checked`` are
        skipped: the pod's :class:`Verdict` ruled them already."""
        for key, domain in settles.items():
            if key in checked or key == LABEL_HOSTNAME:
                continue
            for (k, sel, nss), occupied in self._anti.items():
                if k == key and domain in occupied and claim.matching(sel, nss):
                    return _OPEN_ANTI
            lkey: tuple[tuple[str, str], ...] | None = None
            for ns, c in self._watched:
                if c.key != key:
                    continue
                n = claim.matching(c.selector, (ns,))
                if not n:
                    continue
                counts = self._group(c.key, c.selector, (ns,))
                domains = self.domains.get(c.key, set()) | set(counts)
                global_min = min((counts.get(d, 0) for d in domains), default=0) if len(domains) >= c.min_domains else 0
                if lkey is None:
                    lkey = tuple(sorted(labels.items()))
                self_match = 1 if ns == namespace and self._match(c.selector, labels, lkey) else 0
                if counts.get(domain, 0) + n > c.max_skew + global_min - self_match:
                    return _OPEN_SPREAD
        return None

    def spread_counts(self, c: SpreadConstraint, namespace: str) -> Mapping[str, int]:
        """Pods counted per domain of ``c``'s key that ``c``'s selector matches in ``namespace``
        (every node counted: the node filters of :meth:`prepare` left out). Read only."""
        return self._group(c.key, c.selector, (namespace,))

    def anti_occupied(self, claim: OpenClaim, key: str, domain: str) -> bool:
        """True when a placed pod's anti-affinity term on ``key`` occupies ``domain`` and selects
        one of ``claim``'s pods (the inverse rule keeps them out of it)."""
        return any(k == key and domain in occupied and claim.matching(sel, nss) for (k, sel, nss), occupied in self._anti.items())

    def anti_selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when some placed pod's anti-affinity term selects a pod with these labels."""
        lkey = tuple(sorted(labels.items()))
        hit = self._selects.get((namespace, lkey))
        if hit is None:
            hit = self._selects[(namespace, lkey)] = any(
                (ns is None or namespace in ns) and self._match(sel, labels, lkey) for (_, sel, ns) in self._anti)
        return hit

    def _spread_counts(self, c: SpreadConstraint, namespace: str, node_filter: Any) -> dict[str, int]:
        if node_filter is None:
            return self._group(c.key, c.selector, (namespace,))
        counts: dict[str, int] = {}
        for i, (ns, labels, where, lkey, only) in enumerate(self._placed):
            if (ns == namespace and c.key in where.labels and (only is None or c.key in only) and node_filter(where)
                    and self._match(c.selector, labels, lkey or self._placed_key(i))):
                d = where.labels[c.key]
                counts[d] = counts.get(d, 0) + 1
        return counts

    def prepare(
        self,
        *,
        namespace: str,
        labels: Mapping[str, str],
        spread: Iterable[SpreadConstraint],
        affinity: Iterable[AffinityTerm],
        node_terms: list[Requirements] | None = None,
        tolerations: tuple[Toleration, ...] = (),
        universe: Mapping[str, set[str]] | None = None,
    ) -> Verdict:
        """Evaluate a pod's constraints (and placed pods' anti-affinity against it) once."""
        rules: dict[str, _KeyRule] = {}
        lkey = tuple(sorted(labels.items()))

        def rule(key: str) -> _KeyRule:
            r = rules.get(key)
            if r is None:  # not setdefault: that builds a rule on every call
                r = rules[key] = _KeyRule()
            return r

        for (key, sel, nss), occupied in self._anti.items():
            if (nss is None or namespace in nss) and self._match(sel, labels, lkey):
                r = rule(key)
                r.forbidden.add(occupied)
                r.why = r.why or Infeasible(
                    InfeasibleKind.POD_ANTI_AFFINITY,
                    f"a placed pod's anti-affinity on {key} excludes this pod from {', '.join(heapq.nsmallest(3, occupied))}",
                )
        for t in affinity:
            counts = self._group(t.key, t.selector, t.namespaces)  # domains with a matching pod (counts >= 1)
            r = rule(t.key)
            if t.anti:
                r.forbidden.add(counts)
                r.why = r.why or Infeasible(
                    InfeasibleKind.POD_ANTI_AFFINITY, f"pod anti-affinity on {t.key}: every reachable domain already has a matching pod"
                )
            else:
                r.needs_label = True  # kube-scheduler: "All topology labels must exist on the node", the first pod's too
                if counts:
                    r.restrict(counts, Infeasible(
                        InfeasibleKind.POD_AFFINITY, f"pod affinity on {t.key}: no matching pod in a domain this node can be in"))
                elif not (t.looks_in(namespace) and self._match(t.selector, labels, lkey)):
                    return Verdict(rules, Infeasible(
                        InfeasibleKind.POD_AFFINITY, f"pod affinity on {t.key}: no pod matches the term anywhere yet"))
        open_checks = [OpenCheck("anti", t.key, t.selector, t.namespaces) for t in affinity if t.anti and t.key != LABEL_HOSTNAME]
        # the inverse rule for a claim's earlier pods: a placed pod's anti-affinity term on a key
        # other than the hostname keeps the claim out of its domains when it selects one of them
        open_checks += [OpenCheck("inverse", key, sel, nss, dict.fromkeys(occupied, 1))
                        for (key, sel, nss), occupied in self._anti.items() if key != LABEL_HOSTNAME]
        terms_matter = bool(node_terms) and any(len(t) for t in node_terms or ())
        own: set[tuple[str, SpreadConstraint]] = set()
        for c in spread:
            node_filter = None
            if (c.honor_affinity and terms_matter) or c.honor_taints:
                # placed pods share their node's labels and taints objects: one answer per node
                seen: dict[tuple[int, int], bool] = {}

                def node_filter(where: Placement, c: SpreadConstraint = c, seen: dict[tuple[int, int], bool] = seen) -> bool:
                    k = (id(where.labels), id(where.taints))
                    hit = seen.get(k)
                    if hit is None:
                        hit = seen[k] = not (
                            (c.honor_affinity and terms_matter and not any(t.admits(where.labels) for t in node_terms or ()))
                            or (c.honor_taints and untolerated(where.taints, tolerations) is not None))
                    return hit
            counts = self._spread_counts(c, namespace, node_filter)
            self_match = 1 if self._match(c.selector, labels, lkey) else 0
            r = rule(c.key)
            r.needs_label = True  # PodTopologySpread filters out a node without the key
            why = Infeasible(
                InfeasibleKind.TOPOLOGY_SPREAD,
                f"topology spread on {c.key} (maxSkew {c.max_skew}): every domain this node can be in would exceed the skew",
            )
            if c.key == LABEL_HOSTNAME:
                r.forbidden.add({d for d, n in counts.items() if n + self_match > c.max_skew})
                r.why = r.why or why
            else:
                reach = universe.get(c.key) if universe is not None and c.honor_affinity else None
                domains = reach if reach is not None else self.domains.get(c.key, set())
                universe_c = domains | {d for d in counts if reach is None or d in reach}
                global_min = min((counts.get(d, 0) for d in universe_c), default=0)
                if len(universe_c) < c.min_domains:
                    global_min = 0
                r.restrict({d for d in universe_c if counts.get(d, 0) + self_match - global_min <= c.max_skew}, why)
                if c.hard:
                    open_checks.append(OpenCheck("spread", c.key, c.selector, (namespace,), counts, c.max_skew + global_min - self_match))
                    own.add((namespace, c))
            r.counts = counts if r.counts is None else {d: r.counts.get(d, 0) + counts.get(d, 0) for d in set(r.counts) | set(counts)}
        for ns, c in self._watched:
            if (ns, c) in own or c.key not in rules:
                continue
            counts = self._group(c.key, c.selector, (ns,))
            domains = self.domains.get(c.key, set()) | set(counts)
            global_min = min((counts.get(d, 0) for d in domains), default=0) if len(domains) >= c.min_domains else 0
            self_match = 1 if ns == namespace and self._match(c.selector, labels, lkey) else 0
            open_checks.append(OpenCheck("spread", c.key, c.selector, (ns,), counts, c.max_skew + global_min - self_match))
        by_key: dict[str, list[OpenCheck]] = {}
        for oc in open_checks:
            if oc.key in rules:
                by_key.setdefault(oc.key, []).append(oc)
        return Verdict(rules, open_checks=by_key)

    def allowed(
        self,
        *,
        namespace: str,
        labels: Mapping[str, str],
        spread: Iterable[SpreadConstraint],
        affinity: Iterable[AffinityTerm],
        candidate: Mapping[str, frozenset[str] | None],
        node_terms: list[Requirements] | None = None,
        tolerations: tuple[Toleration, ...] = (),
    ) -> dict[str, str] | Infeasible:
        """One-shot :meth:`prepare` + :meth:`Verdict.choose` for a single candidate."""
        verdict = self.prepare(namespace=namespace, labels=labels, spread=spread, affinity=affinity,
                               node_terms=node_terms, tolerations=tolerations)
        return verdict.choose(candidate)
