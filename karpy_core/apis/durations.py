"""Go-style durations as they appear in karpenter.sh/v1 (``expireAfter: 720h``, ``consolidateAfter: 30s``).

Kubernetes stores these as ``metav1.Duration`` strings; Karpenter's CRDs narrow the grammar with
patterns (no ``d`` unit, no fractions, no sign). karpy checks those patterns (the whole text, ASCII
digits only, as Go's regexp does) and then parses the text as Go's ``time.ParseDuration`` does
(:func:`parse_duration`), including its range: a ``time.Duration`` is an int64 of nanoseconds, at
most ``2562047h47m16.854775807s`` (about 292 years); anything longer is an error, not a date
past year 9999 somewhere later.
"""

from __future__ import annotations

import functools
import re
from datetime import timedelta

__all__ = [
    "NEVER",
    "MAX_DURATION_NS",
    "DURATION_OR_NEVER",
    "DURATION",
    "BUDGET_DURATION",
    "parse_duration",
    "duration_seconds",
    "go_duration_seconds",
    "check_duration",
]

NEVER = "Never"

DURATION_OR_NEVER = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
"""``expireAfter`` and ``consolidateAfter``: e.g. ``720h``, ``1h30m``, ``0s`` or ``Never``."""
DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
"""``terminationGracePeriod``: e.g. ``24h``, ``90s``; ``Never`` is not allowed."""
BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
"""Disruption budget ``duration``: hours and/or minutes (``8h``, ``30m``, ``1h30m``)."""


MAX_DURATION_NS = 2**63 - 1
"""Longest Go ``time.Duration``, in nanoseconds (``2562047h47m16.854775807s``)."""

_UNIT_NS = {"ns": 1, "us": 1_000, "\u00b5s": 1_000, "\u03bcs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
            "m": 60_000_000_000, "h": 3_600_000_000_000}
"""Go's ``unitMap`` (``time/format.go``): both micro signs are accepted."""
_DIGITS = frozenset("0123456789")


def _go_duration_ns(text: str) -> int:  # noqa: C901 - one scanner, as Go's
    """Nanoseconds in ``text``, Go's ``time.ParseDuration`` step by step: ``[-+]?([0-9]*(\\.[0-9]*)?[a-z]+)+``
    or ``0``, ASCII digits only, every component needs a unit, the total within an int64.

    Raises:
        ValueError: not that grammar ("invalid duration", "missing unit", "unknown unit"), or
            out of range.
    """
    bad = ValueError(f"{text!r} is not a duration (expected e.g. '30s', '10m', '720h')")
    out_of_range = ValueError(f"{text!r} is out of range: a duration is at most 2562047h47m16.854775807s "
                              "(Go's time.Duration, about 292 years)")
    s, neg = text, False
    if s[:1] in ("-", "+"):
        neg, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise bad
    total = 0
    while s:
        if s[0] != "." and s[0] not in _DIGITS:
            raise bad
        i = 0
        while i < len(s) and s[i] in _DIGITS:
            i += 1
        whole_digits, s = s[:i], s[i:]
        whole = int(whole_digits) if whole_digits else 0
        if whole > 2**63:  # Go's leadingInt overflows here
            raise out_of_range
        frac_digits = ""
        if s[:1] == ".":
            s = s[1:]
            j = 0
            while j < len(s) and s[j] in _DIGITS:
                j += 1
            frac_digits, s = s[:j], s[j:]
            if not whole_digits and not frac_digits:
                raise bad
        elif not whole_digits:
            raise bad
        k = 0
        while k < len(s) and s[k] != "." and s[k] not in _DIGITS:
            k += 1
        unit_text, s = s[:k], s[k:]
        if not unit_text:
            raise ValueError(f"{text!r} is not a duration: a unit is missing (ns, us, ms, s, m or h)")
        unit = _UNIT_NS.get(unit_text)
        if unit is None:
            raise ValueError(f"{text!r} is not a duration: unknown unit {unit_text!r} (ns, us, ms, s, m or h)")
        if whole > 2**63 // unit:
            raise out_of_range
        value = whole * unit
        if frac_digits:
            # Go: v += uint64(float64(f) * (float64(unit) / scale)), f keeping the digits that fit
            kept = frac_digits
            while kept and int(kept) > (2**63 - 1) // 10:
                kept = kept[:-1]
            value += int(float(int(kept or "0")) * (float(unit) / 10 ** len(kept))) if kept else 0
            if value > 2**63:
                raise out_of_range
        total += value
        if total > 2**63:
            raise out_of_range
    if not neg and total > MAX_DURATION_NS:
        raise out_of_range
    return -total if neg else total


def parse_duration(value: str) -> timedelta:
    """Parse a Go duration (``"1h30m"``, ``"90s"``, ``"1.5h"``, ``"-2m"``) into a
    :class:`~datetime.timedelta` (nanoseconds truncated to microseconds), as Go's
    ``time.ParseDuration``: units ns, us (µs), ms, s, m, h; ASCII digits; at most
    ``2562047h47m16.854775807s`` either way.

    Raises:
        ValueError: ``value`` is not a Go duration (``"Never"`` included: handle it first), or
            is longer than a Go ``time.Duration`` holds; the message quotes the value.
    """
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration (expected a string such as '30s', '10m', '720h')")
    ns = _go_duration_ns(value)
    micros = -((-ns) // 1000) if ns < 0 else ns // 1000
    return timedelta(microseconds=micros)


def go_duration_seconds(value: str) -> float:
    """Seconds in a Go duration string, nanoseconds kept (``"1ns"`` -> ``1e-09``, where
    :func:`parse_duration` truncates to microseconds): for settings Go reads with
    ``time.ParseDuration`` (``flag.DurationVar``), which keep every positive value positive.

    Raises:
        ValueError: as :func:`parse_duration`.
    """
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration (expected a string such as '30s', '10m', '720h')")
    return _go_duration_ns(value) / 1e9


def duration_seconds(value: str | None) -> float | None:
    """Seconds in a karpenter duration string; ``None`` for ``"Never"`` (or ``None``).

    ``"720h"`` -> ``2592000.0``, ``"0s"`` -> ``0.0``, ``"Never"`` -> ``None``.

    Raises:
        ValueError: ``value`` is neither ``Never`` nor a Go duration.
    """
    if value is None or value == NEVER:
        return None
    if isinstance(value, str):
        return _seconds(value)
    return parse_duration(value).total_seconds()


@functools.lru_cache(maxsize=1024)
def _seconds(value: str) -> float:
    """:func:`duration_seconds` of a string, memoized (a pass reads the same few durations on
    every NodeClaim; errors are not cached)."""
    return parse_duration(value).total_seconds()


def check_duration(value: str, pattern: re.Pattern[str] = DURATION_OR_NEVER) -> str:
    """Validate ``value`` against a Karpenter CRD duration ``pattern`` and Go's grammar.

    Returns ``value`` unchanged. Raises ``ValueError`` with a message quoting the value and the
    accepted forms, or saying it is longer than a Go ``time.Duration`` holds (``9999999999h``).
    """
    allows_never = "Never" in pattern.pattern
    if not pattern.fullmatch(value):  # the whole text, as Go's regexp (Python's $ also matches before a final newline)
        units = "h and m" if pattern is BUDGET_DURATION else "h, m and s"
        forms = f"a duration in whole {units} such as '30m' or '720h'"
        if allows_never:
            forms += ", or 'Never'"
        raise ValueError(f"{value!r} is not {forms}")
    if value != NEVER:
        parse_duration(value)
    return value
