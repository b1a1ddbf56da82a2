"""Preference relaxation: the constraint sets a pod is tried with, strictest first.

Karpenter's order (``pkg/controllers/provisioning/scheduling/preferences.go``): with every
preference, then without preferred pod affinity, then without preferred anti-affinity, then
without preferred node affinity, then without ``ScheduleAnyway`` spread - one at a time, the
heaviest kept longest. Under :attr:`PreferencePolicy.IGNORE` only the last (no preferences) is
tried.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.policies import PreferencePolicy
from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.topology import AffinityTerm, SpreadConstraint

__all__ = ["Attempt", "build_attempts"]


class _Soft(Enum):
    """Kinds of preferences, in the order they are relaxed."""

    AFFINITY = "affinity"
    NODE = "node"
    SPREAD = "spread"


@dataclass(frozen=True, slots=True)
class Attempt:
    """A pod's constraints at one preference-relaxation level.

    Attributes:
        terms: node-affinity alternatives (OR), each merged with the kept preferred node term.
        spread: hard spread constraints plus the kept ScheduleAnyway ones.
        affinity: required pod (anti-)affinity plus the kept preferred terms.
        level: how many preferences were dropped.
    """

    terms: tuple[Requirements, ...]
    spread: tuple[SpreadConstraint, ...]
    affinity: tuple[AffinityTerm, ...]
    level: int

    @property
    def constrained(self) -> bool:
        """True when the placement depends on other pods (spread or pod affinity)."""
        return bool(self.spread or self.affinity)


def build_attempts(pod: PodInfo, policy: PreferencePolicy) -> list[Attempt]:
    """The attempts for ``pod``, strictest first; the last one keeps no preference."""
    hard_spread = tuple(c for c in pod.spread if c.hard)
    soft: list[tuple[_Soft, AffinityTerm | Requirements | SpreadConstraint]] = []
    soft += [(_Soft.AFFINITY, t) for t in pod.preferred_affinity if not t.anti]
    soft += [(_Soft.AFFINITY, t) for t in pod.preferred_affinity if t.anti]
    soft += [(_Soft.NODE, r) for r in pod.preferred_node_terms]
    soft += [(_Soft.SPREAD, c) for c in pod.spread if not c.hard]
    first = len(soft) if policy is PreferencePolicy.IGNORE else 0
    out = []
    for level in range(first, len(soft) + 1):
        kept = soft[level:]
        terms = tuple(pod.requirement_terms)
        node_prefs = [r for kind, r in kept if kind is _Soft.NODE and isinstance(r, Requirements)]
        if node_prefs:
            merged = [t.union_with(node_prefs[0]) for t in terms if t.conflict(node_prefs[0]) is None]
            terms = tuple(merged) or terms
        out.append(Attempt(
            terms=terms,
            spread=hard_spread + tuple(c for kind, c in kept if kind is _Soft.SPREAD and isinstance(c, SpreadConstraint)),
            affinity=tuple(pod.affinity) + tuple(t for kind, t in kept if kind is _Soft.AFFINITY and isinstance(t, AffinityTerm)),
            level=level,
        ))
    return out
