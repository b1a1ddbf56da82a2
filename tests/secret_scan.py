"""Helpers of the secret-scan tests (issue 10, section 3): capture every log line karpy's own
logging setup writes, and search text for secrets in the forms they leak in.

A secret is looked for as:

* raw text (for bytes: their UTF-8 text when printable, else Python's ``bytes`` repr body, which
  is how ``%r``/``str()`` of bytes shows them in a log line);
* base64, standard and URL-safe alphabets, with and without ``=`` padding;
* hex, lower and upper case.

The forms are computed here, independently of :mod:`karpy_core.redaction`, so the test does not
trust the code under test to say what a leak looks like.
"""

from __future__ import annotations

import base64
import contextlib
import io
import logging
from collections.abc import Iterable, Iterator

from karpy_core.observability import configure_logging

__all__ = ["THIRD_PARTY", "capture_logs", "find_leaks", "forms"]

THIRD_PARTY = ("botocore", "aiobotocore", "boto3", "aioboto3", "httpx", "httpcore", "urllib3", "aiohttp", "kubernetes_asyncio")
"""Library loggers the scan asks for by name, as a user debugging them would."""


def forms(secret: str | bytes) -> dict[str, str]:
    """Every form of ``secret`` to search for, keyed by form name (``raw``, ``b64``, ``b64-nopad``,
    ``b64url``, ``b64url-nopad``, ``hex``, ``HEX``)."""
    raw = secret.encode() if isinstance(secret, str) else secret
    try:
        text = raw.decode("utf-8")
        if not text.isprintable():
            raise ValueError
    except ValueError:
        text = repr(raw)[2:-1]
    std = base64.b64encode(raw).decode()
    url = base64.urlsafe_b64encode(raw).decode()
    return {
        "raw": text, "b64": std, "b64-nopad": std.rstrip("="), "b64url": url, "b64url-nopad": url.rstrip("="),
        "hex": raw.hex(), "HEX": raw.hex().upper(),
    }


def find_leaks(haystacks: dict[str, str], secrets: dict[str, str | bytes]) -> list[str]:
    """``"<secret name> as <form> in <haystack name>: …context…"`` for every hit (empty: no leak)."""
    hits = []
    for sname, secret in secrets.items():
        for fname, needle in forms(secret).items():
            if len(needle) < 8:
                continue
            for hname, text in haystacks.items():
                at = text.find(needle)
                if at >= 0:
                    hits.append(f"{sname} as {fname} in {hname}: …{text[max(0, at - 120):at + len(needle) + 40]}…")
    return hits


@contextlib.contextmanager
def capture_logs(loggers: Iterable[str] = THIRD_PARTY) -> Iterator[io.StringIO]:
    """Run karpy's :func:`configure_logging` at DEBUG with ``loggers`` asked for by name, writing
    to a buffer; restore the logging state afterwards (pytest's handlers included)."""
    root = logging.getLogger()
    names = ["karpy", "karpy_core", "karpy_aws", "karpy_kakaocloud", *loggers]
    saved = (list(root.handlers), root.level, {n: logging.getLogger(n).level for n in names})
    buf = io.StringIO()
    try:
        configure_logging("DEBUG", debug_loggers=list(loggers), stream=buf)
        yield buf
    finally:
        for h in root.handlers:
            h.flush()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
        for n, level in saved[2].items():
            logging.getLogger(n).setLevel(level)
