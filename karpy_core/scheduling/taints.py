"""Taints and tolerations, with the Kubernetes matching rules.

Source: Kubernetes ``k8s.io/api/core/v1/toleration.go`` (``ToleratesTaint``) and the scheduler's
TaintToleration plugin: a pod may land on a node only if it tolerates every ``NoSchedule`` and
``NoExecute`` taint; ``PreferNoSchedule`` is a preference, so it never blocks placement.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Taint", "Toleration", "untolerated", "parse_taints", "parse_tolerations"]

NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint ``key=value:effect``."""

    key: str
    value: str = ""
    effect: str = NO_SCHEDULE

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


@dataclass(frozen=True, slots=True)
class Toleration:
    """A pod toleration. ``operator`` is ``Equal`` (default) or ``Exists``; an empty ``key`` with
    ``Exists`` tolerates everything; an empty ``effect`` matches every effect."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        # Equal: an empty key with Equal is invalid in Kubernetes; treat it as matching nothing.
        return bool(self.key) and self.value == taint.value


def untolerated(taints: Iterable[Taint], tolerations: Sequence[Toleration]) -> Taint | None:
    """The first ``NoSchedule``/``NoExecute`` taint (in the given order) not tolerated, or None."""
    for taint in taints:
        if taint.effect == PREFER_NO_SCHEDULE:
            continue
        if not any(t.tolerates(taint) for t in tolerations):
            return taint
    return None


def parse_taints(raw: Iterable[Mapping[str, object]] | None) -> tuple[Taint, ...]:
    """Build taints from Kubernetes dicts (``{"key","value","effect"}``)."""
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value") or ""), str(t.get("effect") or NO_SCHEDULE)) for t in raw or ()
    )


def parse_tolerations(raw: Iterable[Mapping[str, object]] | None) -> tuple[Toleration, ...]:
    """Build tolerations from Kubernetes dicts."""
    return tuple(
        Toleration(
            str(t.get("key") or ""),
            str(t.get("operator") or "Equal"),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in raw or ()
    )
