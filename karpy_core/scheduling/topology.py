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

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
]


def _canonical(selector: Mapping[str, Any] | None) -> str:
    return json.dumps(selector or {}, sort_keys=True)


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
    """One pod (anti-)affinity term: ``selector`` (canonical JSON), ``key``, namespaces it looks in
    (empty = the pod's own), and ``weight`` (0 for required terms)."""

    key: str
    selector: str
    namespaces: tuple[str, ...]
    anti: bool
    weight: int = 0


def parse_spread(raw: Iterable[Mapping[str, Any]] | None, labels: Mapping[str, str]) -> list[SpreadConstraint]:
    """Spread constraints from a pod spec's ``topologySpreadConstraints``."""
    out = []
    for c in raw or ():
        selector = dict(c.get("labelSelector") or {})
        keys = [k for k in c.get("matchLabelKeys") or () if k in labels]
        if keys:
            exprs = list(selector.get("matchExpressions") or [])
            exprs += [{"key": k, "operator": "In", "values": [labels[k]]} for k in keys]
            selector["matchExpressions"] = exprs
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


def parse_affinity_terms(affinity: Mapping[str, Any] | None, namespace: str) -> tuple[list[AffinityTerm], list[AffinityTerm]]:
    """(required, preferred) pod affinity and anti-affinity terms of a pod spec's ``affinity``."""
    required: list[AffinityTerm] = []
    preferred: list[AffinityTerm] = []
    for field_name, anti in (("podAffinity", False), ("podAntiAffinity", True)):
        section = (affinity or {}).get(field_name) or {}
        for term in section.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
            required.append(_term(term, namespace, anti, 0))
        for wt in section.get("preferredDuringSchedulingIgnoredDuringExecution") or ():
            preferred.append(_term(wt.get("podAffinityTerm") or {}, namespace, anti, int(wt.get("weight") or 1)))
    preferred.sort(key=lambda t: -t.weight)
    return required, preferred


def _term(term: Mapping[str, Any], namespace: str, anti: bool, weight: int) -> AffinityTerm:
    return AffinityTerm(
        key=str(term.get("topologyKey") or LABEL_HOSTNAME),
        selector=_canonical(term.get("labelSelector") or {}),
        namespaces=tuple(sorted(term.get("namespaces") or ())) or (namespace,),
        anti=anti,
        weight=weight,
    )


@dataclass(frozen=True)
class Placement:
    """Where a pod sits, for topology bookkeeping: its domain per label (node labels, or the single
    values of a NodeClaim's requirements) and the node's taints."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()


@dataclass
class _KeyRule:
    """What one pod's constraints allow for one topology key."""

    allowed: set[str] | None = None  # None: any value
    forbidden: set[str] = field(default_factory=set)
    counts: dict[str, int] | None = None  # spread counts, to pick the least-loaded domain
    why: Infeasible | None = None

    def restrict(self, values: Iterable[str], why: Infeasible) -> None:
        vals = set(values)
        self.allowed = vals if self.allowed is None else self.allowed & vals
        self.why = self.why or why


@dataclass
class Verdict:
    """A pod's topology constraints evaluated against the current counts: per key, the domains it
    may use. Computed once per pod (counts do not change while one pod looks for a place) and then
    checked cheaply against every candidate node or NodeClaim."""

    rules: dict[str, _KeyRule]
    failure: Infeasible | None = None

    def choose(self, candidate: Mapping[str, frozenset[str] | None]) -> dict[str, str] | Infeasible:
        """``{key: domain}`` to pin on the candidate, or why the candidate is ruled out."""
        if self.failure is not None:
            return self.failure
        out: dict[str, str] = {}
        for key, rule in self.rules.items():
            vals = candidate.get(key)
            if vals is None:
                return Infeasible(InfeasibleKind.TOPOLOGY_LABEL, f"the node has no {key} label, needed by a topology constraint")
            ok = [v for v in vals if v not in rule.forbidden and (rule.allowed is None or v in rule.allowed)]
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
        # placed pods: namespace, labels, where, and the labels as a sorted tuple (the match cache's key)
        self._placed: list[tuple[str, Mapping[str, str], Placement, tuple[tuple[str, str], ...]]] = []
        # anti-affinity terms of placed pods: (key, selector, namespaces) -> domains they occupy
        self._anti: dict[tuple[str, str, tuple[str, ...]], set[str]] = {}
        self._selectors: dict[str, dict[str, Any]] = {}
        self._matches: dict[tuple[str, str, tuple[tuple[str, str], ...]], bool] = {}

    def checkpoint(self) -> tuple[Any, ...]:
        """State to :meth:`restore` later (the scheduler tries alternative packings)."""
        return (len(self._placed), {k: dict(v) for k, v in self._counts.items()}, {k: set(v) for k, v in self._anti.items()})

    def restore(self, mark: tuple[Any, ...]) -> None:
        n, counts, anti = mark
        del self._placed[n:]
        self._counts = {k: dict(v) for k, v in counts.items()}
        self._anti = {k: set(v) for k, v in anti.items()}

    @property
    def has_anti(self) -> bool:
        return bool(self._anti)

    def _sel(self, selector: str) -> dict[str, Any]:
        parsed = self._selectors.get(selector)
        if parsed is None:
            parsed = self._selectors[selector] = json.loads(selector)
        return parsed

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
            for ns, labels, where, lkey in self._placed:
                if (namespaces is None or ns in namespaces) and key in where.labels and self._match(selector, labels, lkey):
                    d = where.labels[key]
                    counts[d] = counts.get(d, 0) + 1
        return counts

    def record(self, namespace: str, labels: Mapping[str, str], where: Placement, anti_terms: Iterable[AffinityTerm] = ()) -> None:
        """Count a pod placed at ``where`` (existing pods and each pod the scheduler places)."""
        lkey = tuple(sorted(labels.items()))
        self._placed.append((namespace, labels, where, lkey))
        for (key, selector, namespaces), counts in self._counts.items():
            if (namespaces is None or namespace in namespaces) and key in where.labels and self._match(selector, labels, lkey):
                d = where.labels[key]
                counts[d] = counts.get(d, 0) + 1
        for t in anti_terms:
            if t.key in where.labels:
                self._anti.setdefault((t.key, t.selector, t.namespaces), set()).add(where.labels[t.key])

    def anti_selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """True when some placed pod's anti-affinity term selects a pod with these labels."""
        lkey = tuple(sorted(labels.items()))
        return any(namespace in ns and self._match(sel, labels, lkey) for (_, sel, ns) in self._anti)

    def _spread_counts(self, c: SpreadConstraint, namespace: str, node_filter: Any) -> dict[str, int]:
        if node_filter is None:
            return self._group(c.key, c.selector, (namespace,))
        counts: dict[str, int] = {}
        for ns, labels, where, lkey in self._placed:
            if ns == namespace and c.key in where.labels and node_filter(where) and self._match(c.selector, labels, lkey):
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
            return rules.setdefault(key, _KeyRule())

        for (key, sel, nss), occupied in self._anti.items():
            if namespace in nss and self._match(sel, labels, lkey):
                r = rule(key)
                r.forbidden |= occupied
                r.why = r.why or Infeasible(
                    InfeasibleKind.POD_ANTI_AFFINITY,
                    f"a placed pod's anti-affinity on {key} excludes this pod from {', '.join(sorted(occupied)[:3])}",
                )
        for t in affinity:
            counts = self._group(t.key, t.selector, t.namespaces)
            occupied = {d for d, n in counts.items() if n > 0}
            r = rule(t.key)
            if t.anti:
                r.forbidden |= occupied
                r.why = r.why or Infeasible(
                    InfeasibleKind.POD_ANTI_AFFINITY, f"pod anti-affinity on {t.key}: every reachable domain already has a matching pod"
                )
            elif occupied:
                r.restrict(occupied, Infeasible(
                    InfeasibleKind.POD_AFFINITY, f"pod affinity on {t.key}: no matching pod in a domain this node can be in"))
            elif not (namespace in t.namespaces and self._match(t.selector, labels, lkey)):
                return Verdict(rules, Infeasible(
                    InfeasibleKind.POD_AFFINITY, f"pod affinity on {t.key}: no pod matches the term anywhere yet"))
        terms_matter = bool(node_terms) and any(len(t) for t in node_terms or ())
        for c in spread:
            node_filter = None
            if (c.honor_affinity and terms_matter) or c.honor_taints:
                def node_filter(where: Placement, c: SpreadConstraint = c) -> bool:
                    if c.honor_affinity and terms_matter and all(t.matches_labels(where.labels) for t in node_terms or ()):
                        return False
                    return not (c.honor_taints and untolerated(where.taints, tolerations) is not None)
            counts = self._spread_counts(c, namespace, node_filter)
            self_match = 1 if self._match(c.selector, labels, lkey) else 0
            r = rule(c.key)
            why = Infeasible(
                InfeasibleKind.TOPOLOGY_SPREAD,
                f"topology spread on {c.key} (maxSkew {c.max_skew}): every domain this node can be in would exceed the skew",
            )
            if c.key == LABEL_HOSTNAME:
                r.forbidden |= {d for d, n in counts.items() if n + self_match > c.max_skew}
                r.why = r.why or why
            else:
                reach = universe.get(c.key) if universe is not None and c.honor_affinity else None
                domains = reach if reach is not None else self.domains.get(c.key, set())
                universe_c = domains | {d for d in counts if reach is None or d in reach}
                global_min = min((counts.get(d, 0) for d in universe_c), default=0)
                if len(universe_c) < c.min_domains:
                    global_min = 0
                r.restrict({d for d in universe_c if counts.get(d, 0) + self_match - global_min <= c.max_skew}, why)
            r.counts = counts if r.counts is None else {d: r.counts.get(d, 0) + counts.get(d, 0) for d in set(r.counts) | set(counts)}
        return Verdict(rules)

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
