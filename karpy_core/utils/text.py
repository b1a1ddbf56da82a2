"""Text from a user's input made safe to print on a terminal.

Error messages quote what a manifest, a flag or a file name held. A control character in it (an
escape sequence, a bell, a carriage return, a bidirectional override) would be acted on by the
terminal instead of shown: a colour change, a cleared screen, a line that hides the one before.
karpy prints such characters escaped, the way Python's ``repr`` writes them."""

from __future__ import annotations

import re

__all__ = ["visible"]

_HIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u2028-\u202e\u2066-\u2069]")
"""C0 controls but tab and newline, DEL, C1 controls, the line and paragraph separators (U+2028,
U+2029: line breaks to many editors and log viewers, trial 22), and the bidirectional marks,
embeddings, overrides and isolates (U+200E, U+200F, U+202A-U+202E, U+2066-U+2069)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with each control character (see ``_HIDDEN``) written as ``\\xNN`` or ``\\uNNNN``;
    tab and newline are kept. Text without one is returned unchanged (the same object)."""
    return _HIDDEN.sub(_escape, text) if _HIDDEN.search(text) else text
