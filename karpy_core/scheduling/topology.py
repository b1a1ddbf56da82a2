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


@dataclass
class _Group:
    """Counts of matching pods per domain for one (selector, namespaces, key)."""

    key: str
    selector: dict[str, Any]
    namespaces: tuple[str, ...] | None  # None = any namespace of the owner (spread uses the pod's)
    counts: dict[str, int] = field(default_factory=dict)

    def matches(self, namespace: str, labels: Mapping[str, str]) -> bool:
        if self.namespaces is not None and namespace not in self.namespaces:
            return False
        return selector_matches(self.selector, labels)


@dataclass(frozen=True)
class Placement:
    """Where a pod sits, for topology bookkeeping: its domain per label (node labels, or the single
    values of a NodeClaim's requirements) and the node's taints."""

    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()


class Topology:
    """Counts pods per topology domain and answers "which domains may this pod use".

    Args:
        domains: every reachable domain value per topology key (from NodePools, offerings and
            existing nodes); hostname domains are open-ended and need not be listed.
    """

    def __init__(self, domains: Mapping[str, set[str]]):
        self.domains = {k: set(v) for k, v in domains.items()}
        self._groups: dict[tuple[str, str, tuple[str, ...] | None], _Group] = {}
        self._placed: list[tuple[str, Mapping[str, str], Placement]] = []  # (namespace, labels, where)
        self._anti: list[tuple[AffinityTerm, str, str]] = []  # (term, owner namespace, domain) of placed pods

    def _group(self, key: str, selector: str, namespaces: tuple[str, ...] | None) -> _Group:
        gk = (key, selector, namespaces)
        g = self._groups.get(gk)
        if g is None:
            g = _Group(key, json.loads(selector), namespaces)
            for ns, labels, where in self._placed:
                self._count(g, ns, labels, where)
            self._groups[gk] = g
        return g

    @staticmethod
    def _count(g: _Group, namespace: str, labels: Mapping[str, str], where: Placement) -> None:
        if g.matches(namespace, labels) and g.key in where.labels:
            d = where.labels[g.key]
            g.counts[d] = g.counts.get(d, 0) + 1

    def record(self, namespace: str, labels: Mapping[str, str], where: Placement, anti_terms: Iterable[AffinityTerm] = ()) -> None:
        """Count a pod placed at ``where`` (existing pods and each pod the scheduler places)."""
        self._placed.append((namespace, labels, where))
        for g in self._groups.values():
            self._count(g, namespace, labels, where)
        for t in anti_terms:
            if t.key in where.labels:
                self._anti.append((t, namespace, where.labels[t.key]))

    def _spread_counts(self, c: SpreadConstraint, namespace: str, node_filter: Any) -> dict[str, int]:
        # Spread counts only nodes admitted by the policies; recount from placements when filtered.
        if node_filter is None:
            return self._group(c.key, c.selector, (namespace,)).counts
        sel = json.loads(c.selector)
        counts: dict[str, int] = {}
        for ns, labels, where in self._placed:
            if ns == namespace and c.key in where.labels and node_filter(where) and selector_matches(sel, labels):
                d = where.labels[c.key]
                counts[d] = counts.get(d, 0) + 1
        return counts

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
    ) -> dict[str, str] | str:
        """Pick a domain per constrained key for a candidate node or NodeClaim.

        Args:
            candidate: per topology key, the values the candidate can still take (a single value for
                an existing node, several for a NodeClaim not yet pinned; None = the candidate does
                not have the key).

        Returns:
            ``{key: domain}`` to pin, or a string saying which constraint rules the candidate out.
        """
        choice: dict[str, str] = {}
        spread = list(spread)
        affinity = list(affinity)
        keys = {c.key for c in spread} | {t.key for t in affinity}
        options: dict[str, set[str]] = {}
        for key in keys:
            vals = candidate.get(key)
            if vals is None:
                return f"the node has no {key} label, needed by a topology constraint"
            options[key] = set(vals)
        # inverse anti-affinity: placed pods' anti-affinity terms that select this pod
        for term, _owner_ns, domain in self._anti:
            selects_pod = namespace in term.namespaces and selector_matches(json.loads(term.selector), labels)
            if term.key in options and selects_pod:
                options[term.key].discard(domain)
                if not options[term.key]:
                    return f"a placed pod's anti-affinity on {term.key} excludes this pod from {domain}"
            elif term.key not in options and term.key in candidate and candidate[term.key] is not None:
                vals = candidate[term.key] or frozenset()
                if len(vals) == 1 and domain in vals and selects_pod:
                    return f"a placed pod's anti-affinity on {term.key} excludes this pod from {domain}"
        for t in affinity:
            g = self._group(t.key, t.selector, t.namespaces)
            occupied = {d for d, n in g.counts.items() if n > 0}
            if t.anti:
                options[t.key] -= occupied
                if not options[t.key]:
                    return f"pod anti-affinity on {t.key}: every reachable domain already has a matching pod"
            else:
                if occupied:
                    options[t.key] &= occupied
                    if not options[t.key]:
                        return f"pod affinity on {t.key}: no matching pod in a domain this node can be in"
                elif not (namespace in t.namespaces and g.matches(namespace, labels)):
                    return f"pod affinity on {t.key}: no pod matches the term anywhere yet"
        for c in spread:
            node_filter = None
            if (c.honor_affinity and node_terms) or (c.honor_taints):
                def node_filter(where: Placement, c: SpreadConstraint = c) -> bool:
                    if c.honor_affinity and node_terms and all(t.matches_labels(where.labels) for t in node_terms):
                        return False
                    return not (c.honor_taints and untolerated(where.taints, tolerations) is not None)
            counts = self._spread_counts(c, namespace, node_filter)
            self_match = 1 if selector_matches(json.loads(c.selector), labels) else 0
            if c.key == LABEL_HOSTNAME:
                global_min = 0
            else:
                universe = self.domains.get(c.key, set()) | set(counts)
                global_min = min((counts.get(d, 0) for d in universe), default=0)
                if len(universe) < c.min_domains:
                    global_min = 0
            ok = sorted(
                (d for d in options[c.key] if counts.get(d, 0) + self_match - global_min <= c.max_skew),
                key=lambda d: (counts.get(d, 0), d),
            )
            if not ok:
                return (
                    f"topology spread on {c.key} (maxSkew {c.max_skew}): every domain this node can be in "
                    f"would exceed the skew"
                )
            options[c.key] = {ok[0]}
        for key, vals in options.items():
            if len(vals) == 1:
                choice[key] = next(iter(vals))
            else:
                choice[key] = min(vals)
        return choice
