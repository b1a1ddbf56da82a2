"""Resource lists as plain ``dict[str, int]`` in karpy's internal units.

Units (see :mod:`karpy_core.utils.quantity`): ``cpu`` in millicores, ``memory`` and
``ephemeral-storage`` in bytes, ``pods`` and extended resources as counts. A missing key means 0.
These helpers never mutate their arguments unless the name says so (``add_into``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from karpy_core.utils.quantity import format_quantity, to_internal

Resources = dict[str, int]
"""A resource list: resource name -> amount in internal units."""

__all__ = [
    "Resources",
    "parse_resource_list",
    "format_resource_list",
    "merge",
    "add_into",
    "subtract",
    "max_of",
    "fits",
    "exceeding",
]


def parse_resource_list(raw: Mapping[str, str | int | float] | None) -> Resources:
    """Parse a Kubernetes ResourceList (``{"cpu": "500m", "memory": "1Gi"}``) into internal units.

    Raises:
        karpy_core.utils.quantity.QuantityError: a value is not a quantity.
    """
    if not raw:
        return {}
    return {name: to_internal(name, value) for name, value in raw.items()}


def format_resource_list(resources: Mapping[str, int]) -> dict[str, str]:
    """Format internal amounts back into Kubernetes notation, keys sorted."""
    return {name: format_quantity(name, resources[name]) for name in sorted(resources)}


def merge(*lists: Mapping[str, int]) -> Resources:
    """Sum resource lists key by key."""
    out: Resources = {}
    for lst in lists:
        for name, amount in lst.items():
            out[name] = out.get(name, 0) + amount
    return out


def add_into(target: Resources, other: Mapping[str, int]) -> None:
    """Add ``other`` into ``target`` in place."""
    for name, amount in other.items():
        target[name] = target.get(name, 0) + amount


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> Resources:
    """``a - b`` key by key over the union of keys (results may be negative)."""
    out: Resources = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) - amount
    return out


def max_of(lists: Iterable[Mapping[str, int]]) -> Resources:
    """Key-wise maximum of several resource lists."""
    out: Resources = {}
    for lst in lists:
        for name, amount in lst.items():
            if amount > out.get(name, 0) or name not in out:
                out[name] = amount
    return out


def fits(requests: Mapping[str, int], available: Mapping[str, int]) -> bool:
    """True when every requested amount is at most what is available (missing = 0)."""
    for name, amount in requests.items():
        if amount > 0 and amount > available.get(name, 0):
            return False
    return True


def exceeding(requests: Mapping[str, int], available: Mapping[str, int]) -> list[str]:
    """Names of the resources whose request exceeds what is available, sorted."""
    return sorted(n for n, a in requests.items() if a > 0 and a > available.get(n, 0))
