"""Kubernetes resource quantities, parsed once at the edge into integers.

karpy keeps every resource amount as a Python ``int`` inside the engine:

* ``cpu`` in **millicores** (``"1"`` -> 1000, ``"250m"`` -> 250),
* every other resource (``memory``, ``ephemeral-storage``, ``pods``, extended resources such as
  ``nvidia.com/gpu``) in its **base unit** (bytes for memory and storage, a count otherwise),
  rounded up the way the kubelet rounds ``Quantity.Value()``.

The quantity grammar is apimachinery's ``resource.ParseQuantity`` (:func:`parse_quantity`): a
signed decimal number of ASCII digits, then a binary suffix (``Ki Mi Gi Ti Pi Ei``), a decimal
suffix (``n u m k M G T P E``), a decimal exponent (``e3``, ``E-3``) or nothing.
"""

from __future__ import annotations

import functools
from decimal import ROUND_CEILING, ROUND_UP, Context, Decimal

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
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_GO_SPACE = frozenset("\t\n\v\f\r \u0085\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
                      "\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
"""Go's ``unicode.IsSpace``, which ``strings.TrimSpace`` strips (Python's ``str.strip`` also strips
U+001C..U+001F, which Go keeps)."""
_MAX_INT32 = 2**31 - 1


def _scan(text: str) -> tuple[bool, str, str, str] | None:
    """apimachinery's ``parseQuantityString``: (positive, numerator digits, denominator digits,
    suffix), or None for ``ErrFormatWrong``. ASCII digits only; a lone sign or ``.`` reads as 0."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        return None
    return positive, num, denom, text[suffix_start:]


def _exponent(suffix: str) -> int | None:
    """The decimal exponent of an ``e``/``E`` suffix (``"e-3"`` -> -3), as ``quantitySuffixer.interpret``:
    ``strconv.ParseInt(s[1:], 10, 64)`` (a sign, then ASCII digits), within +/-MaxInt32; else None."""
    if len(suffix) < 2 or suffix[0] not in "eE":
        return None
    digits = suffix[1:].removeprefix("+").removeprefix("-") if suffix[1] in "+-" else suffix[1:]
    if not digits or any(c not in _DIGITS for c in digits):
        return None
    value = int(digits) * (-1 if suffix[1] == "-" else 1)
    return value if -_MAX_INT32 <= value <= _MAX_INT32 else None


_NANO = Decimal("1e-9")
_CONTEXT = Context(prec=200, rounding=ROUND_UP, Emax=1000, Emin=-1000)
"""Exact for any amount the magnitude checks let through (at most 2^64 and 40 decimals below one);
digits past 200 are rounded away from zero, as upstream rounds up."""
_TOO_LARGE = Decimal(2) ** 64
"""Anything larger in magnitude is kept as a bound only (the callers refuse more than 2^63-1);
computing ``1e2147483647`` exactly would take minutes."""


def parse_quantity(value: str | int | float) -> Decimal:
    """Parse a Kubernetes quantity into an exact :class:`~decimal.Decimal` in base units, with the
    grammar of apimachinery's ``resource.ParseQuantity`` (``k8s.io/apimachinery/pkg/api/resource/
    quantity.go``) after the ``strings.TrimSpace`` its ``UnmarshalJSON`` applies::

        <quantity> ::= <sign>? <digits>? ("." <digits>?)? <suffix>
        <suffix>   ::= "" | n | u | m | k | M | G | T | P | E | Ki | Mi | Gi | Ti | Pi | Ei
                     | (e | E) <sign>? <digits>          (the exponent within +/-2^31-1)

    ASCII digits only (Arabic-Indic twelve, U+0661 U+0662, or a fullwidth 1Gi are refused, as the API server refuses them);
    ``"1."``, ``".5"`` and ``"1.G"`` are accepted, and so are a lone sign or ``"."`` (zero), as
    upstream's scanner accepts them. Magnitudes above 2^64 come back as a bound (``2^64 + 1`` with
    the sign), not computed, so an exponent of a billion costs nothing.

    ``"1Gi"`` -> ``Decimal(1073741824)``, ``"250m"`` -> ``Decimal("0.250")``, ``2`` -> ``Decimal(2)``.

    Raises:
        QuantityError: the value does not follow the grammar (the message quotes it), or is a
            float that is not finite.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise QuantityError(f"{value!r} is not a quantity (not a finite number)")
        return Decimal(repr(value))
    return _parse_text(str(value))


@functools.lru_cache(maxsize=8192)
def _parse_text(value: str) -> Decimal:
    """:func:`parse_quantity` of a string, memoized (a manifest repeats the same few quantities;
    Decimals are immutable; errors are not cached)."""
    text = value
    start, end = 0, len(text)
    while start < end and text[start] in _GO_SPACE:
        start += 1
    while end > start and text[end - 1] in _GO_SPACE:
        end -= 1
    text = text[start:end]
    scanned = _scan(text) if text else None
    if scanned is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi')")
    positive, num, denom, suffix = scanned
    if suffix in _BINARY:
        scale, exponent = Decimal(_BINARY[suffix]), 0
    elif suffix in _DECIMAL:
        scale, exponent = _DECIMAL[suffix], 0
    else:
        parsed = _exponent(suffix)
        if parsed is None:
            raise QuantityError(f"{value!r} is not a Kubernetes quantity: unknown suffix {suffix!r} "
                                "(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei or an exponent e3)")
        scale, exponent = Decimal(1), parsed
    number = Decimal(f"{num}.{denom or '0'}")
    magnitude = number.adjusted() + exponent if number else 0
    if magnitude > 40:
        amount = _TOO_LARGE + 1
    elif magnitude < -40:
        amount = _NANO  # upstream rounds any non-zero amount up to 1n
    else:
        amount = _CONTEXT.multiply(_CONTEXT.scaleb(number, exponent) if exponent else number, scale)
    return amount if positive else -amount


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


_DECIMAL_BYTES = (("E", 10**18), ("P", 10**15), ("T", 10**12), ("G", 10**9), ("M", 10**6), ("k", 10**3))


def format_bytes(amount: int) -> str:
    """Format a byte count with the largest exact suffix, binary or decimal, whichever is shorter
    (binary on a tie): ``7945060352`` -> ``"7577Mi"``, ``10**18`` -> ``"1E"`` (not ``"976562500000000Ki"``),
    ``1024000`` -> ``"1024k"`` (not ``"1000Ki"``)."""
    if amount == 0:
        return "0"
    best = str(amount)
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if amount % unit == 0:
            best = f"{amount // unit}{suffix}"
            break
    for suffix, unit in _DECIMAL_BYTES:
        if amount % unit == 0:
            decimal = f"{amount // unit}{suffix}"
            if len(decimal) < len(best):
                best = decimal
            break
    return best


def format_quantity(resource: str, amount: int) -> str:
    """Format an internal integer for ``resource`` back into Kubernetes notation."""
    if resource == "cpu":
        return format_cpu(amount)
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
        return format_bytes(amount)
    return str(amount)
