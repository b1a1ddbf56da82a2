"""The requirements algebra: sets of allowed label values, intersected and compared.

A :class:`Requirement` is one label key with either a set of allowed values (``In``,
``DoesNotExist`` = the empty set) or the complement of a set (``NotIn``, ``Exists`` = the
complement of the empty set), optionally bounded by integer limits (``Gt``/``Lt``, and the
inclusive ``Gte``/``Lte``), plus a ``min_values`` flexibility floor. :class:`Requirements` maps keys
to requirements; adding one intersects with what is already there.

The semantics follow Kubernetes node affinity and Karpenter's ``pkg/scheduling/requirement.go``:
``NotIn`` and ``DoesNotExist`` are satisfied by a node that lacks the label, everything else needs
the label. Bounds are stored as inclusive integers (``Gt 2`` == ``Gte 3``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from karpy_core.apis.labels import is_well_known

__all__ = ["Operator", "Requirement", "Requirements", "IncompatibleError"]


class Operator:
    """Node selector operators (``Gte``/``Lte`` are karpenter.sh/v1 additions)."""

    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GT = "Gt"
    LT = "Lt"
    GTE = "Gte"
    LTE = "Lte"
    ALL = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, LT, GTE, LTE)


class IncompatibleError(ValueError):
    """Two sets of requirements cannot both hold; the message names the key and both sides."""


def _as_int(value: str) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One label key's allowed values.

    Attributes:
        key: the label key.
        complement: False -> allowed = ``values``; True -> allowed = everything except ``values``.
        values: the value set (allowed, or excluded when ``complement``).
        gte: inclusive lower integer bound, or None.
        lte: inclusive upper integer bound, or None.
        min_values: how many distinct values the instance-type options must keep (NodePool
            ``minValues``), or None.
    """

    key: str
    complement: bool
    values: frozenset[str] = frozenset()
    gte: int | None = None
    lte: int | None = None
    min_values: int | None = None

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def new(cls, key: str, operator: str, values: Iterable[str] = (), min_values: int | None = None) -> Requirement:
        """Build a requirement from a node-selector expression.

        Raises:
            ValueError: unknown operator, or ``Gt``/``Lt``/``Gte``/``Lte`` without exactly one
                integer value.
        """
        vals = frozenset(str(v) for v in values)
        if operator == Operator.IN:
            return cls(key, False, vals, min_values=min_values)
        if operator == Operator.NOT_IN:
            return cls(key, True, vals, min_values=min_values)
        if operator == Operator.EXISTS:
            return cls(key, True, frozenset(), min_values=min_values)
        if operator == Operator.DOES_NOT_EXIST:
            return cls(key, False, frozenset(), min_values=min_values)
        if operator in (Operator.GT, Operator.LT, Operator.GTE, Operator.LTE):
            if len(vals) != 1 or _as_int(next(iter(vals))) is None:
                raise ValueError(f"operator {operator} on {key!r} needs exactly one integer value, got {sorted(vals)}")
            n = int(next(iter(vals)))
            if operator == Operator.GT:
                return cls(key, True, frozenset(), gte=n + 1, min_values=min_values)
            if operator == Operator.GTE:
                return cls(key, True, frozenset(), gte=n, min_values=min_values)
            if operator == Operator.LT:
                return cls(key, True, frozenset(), lte=n - 1, min_values=min_values)
            return cls(key, True, frozenset(), lte=n, min_values=min_values)
        raise ValueError(f"unknown operator {operator!r} for key {key!r}")

    # ---- queries ------------------------------------------------------------------------
    @property
    def bounded(self) -> bool:
        return self.gte is not None or self.lte is not None

    def _within(self, value: str) -> bool:
        if not self.bounded:
            return True
        n = _as_int(value)
        if n is None:
            return False
        return (self.gte is None or n >= self.gte) and (self.lte is None or n <= self.lte)

    def has(self, value: str) -> bool:
        """True when ``value`` is allowed."""
        if self.complement:
            return value not in self.values and self._within(value)
        return value in self.values and self._within(value)

    def matches_label(self, present: bool, value: str | None) -> bool:
        """True when a node whose label is ``present`` with ``value`` satisfies this requirement."""
        if not present:
            return self.operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST)
        return self.has(value or "")

    def is_empty(self) -> bool:
        """True when no value is allowed (``DoesNotExist`` or an impossible intersection)."""
        if self.complement:
            if self.gte is not None and self.lte is not None and self.gte > self.lte:
                return True
            return False
        return not self.values

    def size(self) -> float:
        """Number of allowed values (``inf`` for complements)."""
        if self.complement:
            return float("inf")
        return float(len(self.values))

    def operator(self) -> str:
        """The node-selector operator that best describes this requirement."""
        if self.complement:
            if self.bounded and not self.values:
                if self.gte is not None and self.lte is None:
                    return Operator.GT
                if self.lte is not None and self.gte is None:
                    return Operator.LT
            return Operator.NOT_IN if self.values else Operator.EXISTS
        return Operator.IN if self.values else Operator.DOES_NOT_EXIST

    def any_value(self) -> str | None:
        """A deterministic allowed value (smallest), or None when there is none or it is open."""
        if self.complement:
            if self.gte is not None:
                n = self.gte
                while str(n) in self.values:
                    n += 1
                return str(n) if self._within(str(n)) else None
            return None
        return min(self.values) if self.values else None

    # ---- algebra ------------------------------------------------------------------------
    def intersection(self, other: Requirement) -> Requirement:
        """The requirement allowing exactly the values both allow (keys are assumed equal)."""
        gte = self.gte if other.gte is None else (other.gte if self.gte is None else max(self.gte, other.gte))
        lte = self.lte if other.lte is None else (other.lte if self.lte is None else min(self.lte, other.lte))
        mv = self.min_values if other.min_values is None else (
            other.min_values if self.min_values is None else max(self.min_values, other.min_values)
        )
        if self.complement and other.complement:
            values = self.values | other.values
            complement = True
        elif self.complement:
            values = other.values - self.values
            complement = False
        elif other.complement:
            values = self.values - other.values
            complement = False
        else:
            values = self.values & other.values
            complement = False
        if not complement and (gte is not None or lte is not None):
            values = frozenset(
                v for v in values if (n := _as_int(v)) is not None and (gte is None or n >= gte) and (lte is None or n <= lte)
            )
        return Requirement(self.key, complement, values, gte, lte, mv)

    def intersects(self, other: Requirement) -> bool:
        """True when at least one label state satisfies both, counting "label absent"."""
        absent_ok = self.operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST) and other.operator() in (
            Operator.NOT_IN,
            Operator.DOES_NOT_EXIST,
        )
        return absent_ok or not self.intersection(other).is_empty()

    def describe(self) -> str:
        """Human text such as ``zone In [a, b]`` or ``instance-generation > 2``."""
        op = self.operator()
        if op in (Operator.IN, Operator.NOT_IN):
            # an empty value written "" (a nodeSelector value ""), not left as "In []" (trial 20)
            text = f"{self.key} {op} [{', '.join(v if v else chr(34) * 2 for v in sorted(self.values))}]"
        elif op in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
            text = f"{self.key} {op}"
        else:
            text = self.key
        if self.gte is not None:
            text += f" >= {self.gte}"
        if self.lte is not None:
            text += f" <= {self.lte}"
        return text

    def to_selector(self) -> dict[str, object]:
        """A node-selector requirement dict (``{"key","operator","values"}``) for output."""
        op = self.operator()
        out: dict[str, object] = {"key": self.key, "operator": op}
        if op == Operator.GT:
            out["values"] = [str((self.gte or 0) - 1)]
        elif op == Operator.LT:
            out["values"] = [str((self.lte or 0) + 1)]
        elif self.values:
            out["values"] = sorted(self.values)
        if self.min_values is not None:
            out["minValues"] = self.min_values
        return out


@dataclass(slots=True)
class Requirements:
    """A conjunction of :class:`Requirement`, one per key.

    ``add`` intersects; the mapping is kept sorted on iteration so decisions stay deterministic.
    """

    by_key: dict[str, Requirement] = field(default_factory=dict)

    @classmethod
    def of(cls, *reqs: Requirement) -> Requirements:
        out = cls()
        for r in reqs:
            out.add(r)
        return out

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Requirements:
        """Each label becomes ``key In [value]``."""
        return cls({k: Requirement(k, False, frozenset((v,))) for k, v in labels.items()})

    @classmethod
    def from_selector_terms(cls, exprs: Iterable[Mapping[str, object]]) -> Requirements:
        """Build from node-selector expressions (dicts with key/operator/values/minValues)."""
        out = cls()
        for e in exprs:
            values = cast("Iterable[object]", e.get("values") or [])
            mv = cast("int | None", e.get("minValues"))
            out.add(Requirement.new(str(e["key"]), str(e["operator"]), [str(v) for v in values], mv))
        return out

    def copy(self) -> Requirements:
        return Requirements(dict(self.by_key))

    def add(self, req: Requirement) -> None:
        """Intersect ``req`` into this set, in place."""
        existing = self.by_key.get(req.key)
        self.by_key[req.key] = req if existing is None else existing.intersection(req)

    def add_all(self, other: Requirements) -> None:
        for r in other.by_key.values():
            self.add(r)

    def union_with(self, other: Requirements) -> Requirements:
        """A new set holding both (intersected per key)."""
        out = self.copy()
        out.add_all(other)
        return out

    def get(self, key: str) -> Requirement | None:
        return self.by_key.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self.by_key

    def __iter__(self) -> Iterator[Requirement]:
        for key in sorted(self.by_key):
            yield self.by_key[key]

    def __len__(self) -> int:
        return len(self.by_key)

    def keys(self) -> list[str]:
        return sorted(self.by_key)

    def labels(self) -> dict[str, str]:
        """The labels a node built from these requirements gets: keys with exactly one ``In`` value."""
        out: dict[str, str] = {}
        for key in sorted(self.by_key):
            r = self.by_key[key]
            if not r.complement and len(r.values) == 1:
                out[key] = next(iter(r.values))
        return out

    def conflict(self, other: Requirements, *, allow_undefined: bool = True) -> str | None:
        """Why ``other`` (e.g. a pod's node affinity) cannot hold together with ``self`` (e.g. a
        NodePool template or an instance type), or None when compatible.

        A key that ``self`` does not define is acceptable when it is a well-known label (a
        provider resolves it later) and ``allow_undefined`` is set, or when ``other`` only
        excludes values (``NotIn``/``DoesNotExist``). Otherwise a custom label that the node would
        not carry is a conflict, as in Karpenter's ``Requirements.Compatible``.
        """
        for key in sorted(other.by_key):
            theirs = other.by_key[key]
            mine = self.by_key.get(key)
            if mine is None:
                if theirs.operator() in (Operator.NOT_IN, Operator.DOES_NOT_EXIST):
                    continue
                if allow_undefined and is_well_known(key):
                    continue
                return f"label {key!r} is not set on the node ({theirs.describe()} required)"
            if not mine.intersects(theirs):
                return f"{theirs.describe()} conflicts with {mine.describe()}"
        return None

    def intersects(self, other: Requirements) -> bool:
        """True when every shared key's requirements overlap (undefined keys are ignored)."""
        for key, theirs in other.by_key.items():
            mine = self.by_key.get(key)
            if mine is not None and not mine.intersects(theirs):
                return False
        return True

    def admits(self, labels: Mapping[str, str]) -> bool:
        """True when a node with exactly ``labels`` passes these requirements:
        ``matches_labels(labels) is None`` without building the reason (the scheduler's check of
        every existing node, where the reason is dropped, spent a third of its time wording it)."""
        for key, req in self.by_key.items():
            value = labels.get(key)
            if not req.matches_label(value is not None or key in labels, value):
                return False
        return True

    def matches_labels(self, labels: Mapping[str, str]) -> str | None:
        """Why a node with exactly ``labels`` fails these requirements, or None when it passes."""
        for key in sorted(self.by_key):
            req = self.by_key[key]
            present = key in labels
            if not req.matches_label(present, labels.get(key)):
                have = f"{key}={labels[key]}" if present else f"{key} absent"
                return f"{req.describe()} (node has {have})"
        return None

    def describe(self) -> str:
        return ", ".join(r.describe() for r in self)

    def to_selectors(self) -> list[dict[str, object]]:
        return [r.to_selector() for r in self]
