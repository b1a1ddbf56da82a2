"""Go-style durations as they appear in karpenter.sh/v1 (``expireAfter: 720h``, ``consolidateAfter: 30s``).

Kubernetes stores these as ``metav1.Duration`` strings; Karpenter's CRDs narrow the grammar with
patterns (no ``d`` unit, no fractions, no sign). karpy checks those patterns and then parses the
text with :mod:`durationpy` (Go's ``time.ParseDuration`` grammar).
"""

from __future__ import annotations

import functools
import re
from datetime import timedelta

import durationpy

__all__ = [
    "NEVER",
    "DURATION_OR_NEVER",
    "DURATION",
    "BUDGET_DURATION",
    "parse_duration",
    "duration_seconds",
    "check_duration",
]

NEVER = "Never"

DURATION_OR_NEVER = re.compile(r"^(([0-9]+(s|m|h))+|Never)$")
"""``expireAfter`` and ``consolidateAfter``: e.g. ``720h``, ``1h30m``, ``0s`` or ``Never``."""
DURATION = re.compile(r"^([0-9]+(s|m|h))+$")
"""``terminationGracePeriod``: e.g. ``24h``, ``90s``; ``Never`` is not allowed."""
BUDGET_DURATION = re.compile(r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$")
"""Disruption budget ``duration``: hours and/or minutes (``8h``, ``30m``, ``1h30m``)."""


def parse_duration(value: str) -> timedelta:
    """Parse a Go duration (``"1h30m"``, ``"90s"``) into a :class:`~datetime.timedelta`.

    Raises:
        ValueError: ``value`` is not a Go duration (``"Never"`` included: handle it first).
    """
    try:
        return durationpy.from_str(value)
    except Exception as exc:  # durationpy raises its own DurationError (a plain Exception)
        raise ValueError(f"{value!r} is not a duration (expected e.g. '30s', '10m', '720h')") from exc


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
    accepted forms.
    """
    allows_never = "Never" in pattern.pattern
    if not pattern.match(value):
        units = "h and m" if pattern is BUDGET_DURATION else "h, m and s"
        forms = f"a duration in whole {units} such as '30m' or '720h'"
        if allows_never:
            forms += ", or 'Never'"
        raise ValueError(f"{value!r} is not {forms}")
    if value != NEVER:
        parse_duration(value)
    return value
