"""Kubernetes resource quantities, parsed once at the edge into integers.

karpy keeps every resource amount as a Python ``int`` inside the engine:

* ``cpu`` in **millicores** (``"1"`` -> 1000, ``"250m"`` -> 250),
* every other resource (``memory``, ``ephemeral-storage``, ``pods``, extended resources such as
  ``nvidia.com/gpu``) in its **base unit** (bytes for memory and storage, a count otherwise),
  rounded up the way the kubelet rounds ``Quantity.Value()``.

The quantity grammar is the one documented for ``k8s.io/apimachinery/pkg/api/resource.Quantity``:
a signed decimal number, optionally with a decimal exponent (``1e3``, ``1E3``), followed by a binary
suffix (``Ki Mi Gi Ti Pi Ei``), a decimal suffix (``n u m k M G T P E``) or nothing.
"""

from __future__ import annotations

import functools
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

from karpy_core.errors import QuantityError

__all__ = [
    "QuantityError",
    "parse_quantity",
    "to_internal",
    "format_cpu",
    "format_bytes",
    "format_quantity",
]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+\.?\d*|\.\d+))(?:(?P<bin>Ki|Mi|Gi|Ti|Pi|Ei)|(?P<exp>[eE][+-]?\d+)|(?P<dec>[numkMGTPE]?))$"
)



def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity into an exact :class:`~decimal.Decimal` in base units.

    ``"1Gi"`` -> ``Decimal(1073741824)``, ``"250m"`` -> ``Decimal("0.250")``, ``2`` -> ``Decimal(2)``.

    Raises:
        QuantityError: the value does not follow the quantity grammar.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')")
    try:
        number = Decimal(match["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex already guards this
        raise QuantityError(f"{value!r} is not a Kubernetes quantity") from exc
    if match["bin"]:
        return number * _BINARY[match["bin"]]
    if match["exp"]:
        return number * (Decimal(10) ** int(match["exp"][1:]))
    return number * _DECIMAL[match["dec"] or ""]


def to_internal(resource: str, value: str | int | float) -> int:
    """Convert a quantity for ``resource`` into karpy's integer unit (millicores for ``cpu``).

    Rounds up, as Kubernetes does for ``MilliValue()``/``Value()``. A pure function of its
    arguments, memoized (a cluster repeats the same few request strings on thousands of pods;
    ``typed`` keeps ``True`` apart from ``1``; errors are not cached).

    Raises:
        QuantityError: the value is not a quantity.
    """
    return _to_internal(resource, value)


@functools.lru_cache(maxsize=8192, typed=True)
def _to_internal(resource: str, value: str | int | float) -> int:
    amount = parse_quantity(value)
    if resource == "cpu":
        amount = amount * 1000
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def format_cpu(millicores: int) -> str:
    """Format millicores the way ``kubectl`` does: ``1500`` -> ``"1500m"``, ``2000`` -> ``"2"``."""
    if millicores % 1000 == 0:
        return str(millicores // 1000)
    return f"{millicores}m"


def format_bytes(amount: int) -> str:
    """Format a byte count with the largest exact binary suffix: ``7945060352`` -> ``"7577Mi"``."""
    if amount == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount % unit == 0:
            return f"{amount // unit}{suffix}"
    return str(amount)


def format_quantity(resource: str, amount: int) -> str:
    """Format an internal integer for ``resource`` back into Kubernetes notation."""
    if resource == "cpu":
        return format_cpu(amount)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)
