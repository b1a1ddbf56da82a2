"""The one RFC 3339 parser: Kubernetes and cloud API timestamps -> seconds since the epoch.

Kubernetes writes ``2026-01-01T00:00:00Z`` (second precision, UTC); cloud APIs add fractions and
offsets (``2026-01-01T09:00:00.123+09:00``). Text without an offset is taken as UTC, never as the
machine's local time.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["parse_rfc3339", "try_parse_rfc3339"]


def parse_rfc3339(value: str | datetime | None) -> float | None:
    """``value`` as seconds since the epoch (UTC); None when it is None or empty.

    Args:
        value: RFC 3339 text (``Z`` or ``+hh:mm`` offset, optional fraction) or a
            :class:`~datetime.datetime` (a naive one is taken as UTC).

    Raises:
        ValueError: ``value`` is text that is not an RFC 3339 / ISO 8601 timestamp.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        ts = value
    else:
        text = str(value).strip()
        if not text:
            return None
        if text[-1] in "zZ":
            text = text[:-1] + "+00:00"
        ts = datetime.fromisoformat(text)
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


def try_parse_rfc3339(value: str | datetime | None) -> float | None:
    """Like :func:`parse_rfc3339`, but None for malformed text instead of ``ValueError`` (for
    timestamps from a cloud API that a bad value must not fail the caller over)."""
    try:
        return parse_rfc3339(value)
    except ValueError:
        return None
