"""Caches with a clock: the unavailable-offerings (ICE) cache and a small TTL cache.

Both read time from an injected callable (seconds since the epoch), never from the wall clock
directly, so a virtual clock drives them in tests and in the simulator.

Source: Karpenter ``pkg/cache/unavailableofferings.go`` (``UnavailableOfferingsTTL`` = 3 min) and
``pkg/cache/cache.go``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

__all__ = ["UNAVAILABLE_OFFERINGS_TTL", "UnavailableOfferings", "TTLCache"]

UNAVAILABLE_OFFERINGS_TTL = 180.0
"""Seconds an offering stays unavailable after an insufficient-capacity error (Karpenter: 3 min)."""

V = TypeVar("V")


class UnavailableOfferings:
    """(capacity type, instance type, zone) triples that failed recently, plus "all spot".

    Args:
        now: returns the current time in seconds.
        ttl: seconds an entry lives (default :data:`UNAVAILABLE_OFFERINGS_TTL`).

    ``seq`` increases on every change, so callers can tell when cached instance types must be
    re-marked.
    """

    def __init__(self, now: Callable[[], float], ttl: float = UNAVAILABLE_OFFERINGS_TTL):
        self._now = now
        self.ttl = ttl
        self._until: dict[tuple[str, str, str], float] = {}
        self._capacity_types: dict[str, float] = {}
        self.seq = 0

    def mark(self, capacity_type: str, instance_type: str, zone: str, *, reason: str = "") -> None:
        """Make one offering unavailable for ``ttl`` seconds from now."""
        self._until[(capacity_type, instance_type, zone)] = self._now() + self.ttl
        self.seq += 1

    def mark_capacity_type(self, capacity_type: str) -> None:
        """Make every offering of ``capacity_type`` unavailable (missing spot service-linked role)."""
        self._capacity_types[capacity_type] = self._now() + self.ttl
        self.seq += 1

    def _sweep(self) -> None:
        now = self._now()
        expired = [k for k, t in self._until.items() if t <= now]
        for k in expired:
            del self._until[k]
        expired_ct = [k for k, t in self._capacity_types.items() if t <= now]
        for ct in expired_ct:
            del self._capacity_types[ct]
        if expired or expired_ct:
            self.seq += 1

    def is_unavailable(self, capacity_type: str, instance_type: str, zone: str) -> bool:
        self._sweep()
        return capacity_type in self._capacity_types or (capacity_type, instance_type, zone) in self._until

    def snapshot(self) -> tuple[int, frozenset[tuple[str, str, str]], frozenset[str]]:
        """``(seq, unavailable triples, unavailable capacity types)`` after expiring old entries."""
        self._sweep()
        return self.seq, frozenset(self._until), frozenset(self._capacity_types)


class TTLCache(Generic[V]):
    """A dict whose entries expire ``ttl`` seconds after they were set (no size bound: keys are
    NodeClass generations and regions, a handful)."""

    def __init__(self, now: Callable[[], float], ttl: float):
        self._now = now
        self.ttl = ttl
        self._data: dict[Hashable, tuple[float, V]] = {}

    def get(self, key: Hashable) -> V | None:
        hit = self._data.get(key)
        if hit is None:
            return None
        if hit[0] <= self._now():
            del self._data[key]
            return None
        return hit[1]

    def set(self, key: Hashable, value: V) -> V:
        self._data[key] = (self._now() + self.ttl, value)
        return value

    def clear(self) -> None:
        self._data.clear()

    def pop(self, key: Hashable, default: Any = None) -> Any:
        hit = self._data.pop(key, None)
        return default if hit is None else hit[1]
