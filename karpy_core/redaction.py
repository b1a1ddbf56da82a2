"""Scrubbing credentials out of anything karpy writes: log lines, log fields, tracebacks, Events,
exception messages (:class:`karpy_core.errors.KarpyError`) and every status field stored in the
API server (:func:`redact_stored`, on both KubeClient adapters' write paths).

Two mechanisms, applied together by :meth:`Redactor.scrub`:

* **Known values.** Providers register each secret when they load or receive it
  (:func:`register_secret`): AWS access key id, secret access key and session token (from the
  botocore credentials, at every signing, so refreshed role credentials are covered too),
  KakaoCloud application-credential secret, IAM tokens, signing keys, kubeadm bootstrap tokens.
  Each is searched for as itself, as base64 (standard and URL-safe alphabets, padded or not, and
  the three byte alignments it can have inside a larger base64 blob such as user data) and as hex
  (both cases); bytes values also as Python's ``bytes`` repr body.
* **Patterns**, for values karpy never saw (another library's token, credentials refreshed
  between two signings): the values of ``Authorization``, ``Proxy-Authorization``,
  ``X-Auth-Token``, ``X-Subject-Token``, ``X-Amz-Security-Token`` headers (in ``name: value``
  lines, SigV4 canonical requests, ``{'Name': b'value'}`` dict reprs and httpcore's
  ``(b'Name', b'value')`` tuples), SigV4 signatures (``Signature=``/``Signature:`` and 64 hex
  digits), ``aws_session_token=``/``aws_secret_access_key=`` style
  assignments, quoted ``"…secret…"``/``"…token…"``/``"password"`` fields and their XML
  elements (``<SessionToken>``, ``<SecretAccessKey>`` in STS answers), AWS access key ids
  (``AKIA``/``ASIA`` + 16, the formats in AWS IAM's "Understanding unique ID prefixes") and
  kubeadm bootstrap tokens (``[a-z0-9]{6}.[a-z0-9]{16}``, kubeadm's
  ``cmd/kubeadm/app/apis/bootstraptoken`` ``BootstrapTokenPattern``) and JSON Web Tokens
  (``eyJ….eyJ….sig``: service-account and web-identity tokens, RFC 7519 §3).

Everything found is replaced by ``[REDACTED]``. The registry keeps the newest
:data:`MAX_SECRETS` values (bootstrap and IAM tokens are short-lived and re-issued; a long-running
controller must not grow without bound); older ones are only caught by the patterns.

:class:`RedactingFilter` (a ``logging.Filter``) and :func:`redact_processor` (a structlog
processor) apply the default redactor to stdlib records and structlog event dicts;
:func:`karpy_core.observability.configure_logging` installs both.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, MutableMapping
from typing import Any

import ahocorasick

__all__ = [
    "MASK",
    "MAX_SECRETS",
    "MIN_SECRET_LENGTH",
    "REDACTOR",
    "RedactingFilter",
    "Redactor",
    "redact",
    "redact_processor",
    "redact_stored",
    "register_secret",
]

MASK = "[REDACTED]"
MAX_SECRETS = 512
"""How many registered values are kept (oldest forgotten first). The automaton of 512 values
(a few thousand forms) rebuilds in about 0.1 s; values older than that (expired bootstrap and IAM
tokens) are only caught by the patterns."""
MIN_SECRET_LENGTH = 6
"""Shorter values are not registered: they would blank ordinary words and numbers."""
_MIN_B64_CORE = 12
"""Shortest base64 fragment searched for inside larger blobs (fewer characters match by chance)."""

_HEADER_NAMES = r"proxy-authorization|authorization|x-auth-token|x-subject-token|x-amz-security-token"
_PATTERNS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    # (pattern, replacement, triggers): a pattern runs only when one of its triggers (lower case)
    # is in the ASCII text, which none of them can match otherwise; non-ASCII text runs them all
    # ('X-Auth-Token', 'v') / (b'X-Auth-Token', b'v') (httpcore), {'Authorization': b'v'} (botocore),
    # "Authorization: v" lines, "x-amz-security-token:v" (SigV4 canonical request)
    (re.compile(rf"""(?i)(\b(?:{_HEADER_NAMES})\b['"]?\s*[:,=]\s*b?['"]?)[^'"\r\n]+"""), rf"\g<1>{MASK}",
     ("authorization", "x-auth-token", "x-subject-token", "x-amz-security-token")),
    # aws_session_token=…, AWS_SECRET_ACCESS_KEY: …, X-Amz-Security-Token=… (query strings)
    (re.compile(r"""(?i)(\b(?:aws_session_token|aws_security_token|aws_secret_access_key|x-amz-security-token|"""
                r"""x-amz-credential|x-amz-signature)\b['"]?\s*[:=]\s*b?['"]?)[^'"\s&,;]+"""), rf"\g<1>{MASK}",
     ("aws_session_token", "aws_security_token", "aws_secret_access_key", "x-amz-security-token", "x-amz-credential",
      "x-amz-signature")),
    # SigV4 signatures outside a header line: an error body echoing "…, Signature=<64 hex>",
    # botocore.auth's DEBUG "Signature:\n<64 hex>"
    (re.compile(r"(?i)(\bSignature\s*[=:]\s*)[0-9a-f]{64}\b"), rf"\g<1>{MASK}", ("signature",)),
    # <SecretAccessKey>…</SecretAccessKey>, <SessionToken>… (STS/IAM XML answers botocore logs at DEBUG)
    (re.compile(r"(?i)(<(?:SecretAccessKey|SessionToken|Token|Password)>)[^<]*"), rf"\g<1>{MASK}",
     ("<secretaccesskey>", "<sessiontoken>", "<token>", "<password>")),
    # "secret": "…", 'token': '…', "password": "…" (JSON or dict reprs; quoted values only), but not
    # the idempotency and pagination tokens AWS APIs take (ClientToken, NextToken), which debugging needs
    (re.compile(r"""(?i)(['"](?!(?:client|next|continuation|idempotency)[_-]?token['"])[\w-]*(?:secret|token|password)[\w-]*['"]"""
                r"""\s*:\s*b?['"])[^'"]+"""), rf"\g<1>{MASK}", ("secret", "token", "password")),
    # AWS access key ids: long-term (AKIA) and temporary (ASIA)
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), MASK, ("akia", "asia")),
    # kubeadm bootstrap tokens
    (re.compile(r"\b[a-z0-9]{6}\.[a-z0-9]{16}\b"), MASK, (".",)),
    # JSON Web Tokens (service-account tokens, OIDC web-identity tokens): header.payload.signature
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+"), MASK, ("eyj",)),
)

_TRIGGERS = tuple(re.compile("|".join(re.escape(t) for t in triggers)) for _, _, triggers in _PATTERNS)


def _b64_forms(raw: bytes) -> set[str]:
    """base64 of ``raw`` (std and URL-safe, padded and not) plus, for each of the 3 byte
    alignments it can have inside a longer base64 text, the characters that depend on ``raw`` only."""
    out: set[str] = set()
    for enc in (base64.b64encode, base64.urlsafe_b64encode):
        full = enc(raw).decode()
        out.update((full, full.rstrip("=")))
        for offset in (1, 2):
            text = enc(b"\0" * offset + raw).decode()
            skip = {1: 2, 2: 3}[offset]
            whole_groups = (offset + len(raw)) // 3
            core = text[skip : whole_groups * 4]
            if len(core) >= _MIN_B64_CORE:
                out.add(core)
        if len(raw) % 3:  # aligned at a group start but followed by more data: drop the mixed last group
            core = enc(raw).decode()[: (len(raw) // 3) * 4]
            if len(core) >= _MIN_B64_CORE:
                out.add(core)
    return out


def _forms(value: str | bytes) -> set[str]:
    raw = value.encode() if isinstance(value, str) else value
    forms = {raw.hex(), raw.hex().upper(), *_b64_forms(raw)}
    if isinstance(value, str):
        forms.add(value)
    else:
        forms.add(repr(value)[2:-1])
        try:
            forms.add(value.decode())
        except UnicodeDecodeError:
            pass
    return {f for f in forms if len(f) >= MIN_SECRET_LENGTH}


class Redactor:
    """A thread-safe registry of secret values and the scrubber built from it.

    Registered values (every form, see the module docstring) are searched for with an
    Aho-Corasick automaton (pyahocorasick), so scrubbing costs time linear in the text whatever
    the number of secrets; the automaton is rebuilt lazily, at the first scrub after a
    registration.

    Use the process-wide :data:`REDACTOR` through :func:`register_secret` and :func:`redact`;
    separate instances exist for tests.
    """

    def __init__(self, *, max_secrets: int = MAX_SECRETS):
        self._max = max_secrets
        self._secrets: OrderedDict[str | bytes, frozenset[str]] = OrderedDict()
        self._lock = threading.Lock()
        self._automaton: ahocorasick.Automaton | None = None
        self._dirty = False

    def register(self, value: str | bytes | None) -> None:
        """Remember ``value`` (and its encodings) as secret. None, empty and values shorter than
        :data:`MIN_SECRET_LENGTH` are ignored; registering twice is cheap."""
        if not value or len(value) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            if value in self._secrets:
                self._secrets.move_to_end(value)
                return
            self._secrets[value] = frozenset(_forms(value))
            while len(self._secrets) > self._max:
                self._secrets.popitem(last=False)
            self._dirty = True

    def __len__(self) -> int:
        return len(self._secrets)

    def _matcher(self) -> ahocorasick.Automaton | None:
        if not self._dirty:
            return self._automaton
        with self._lock:
            if self._dirty:
                automaton = ahocorasick.Automaton()
                for forms in self._secrets.values():
                    for form in forms:
                        automaton.add_word(form, len(form))
                if len(automaton):
                    automaton.make_automaton()
                    self._automaton = automaton
                else:
                    self._automaton = None
                self._dirty = False
            return self._automaton

    def scrub(self, text: str) -> str:
        """``text`` with every registered value (any form) and every pattern match replaced by
        ``[REDACTED]`` (see the module docstring)."""
        if not text:
            return text
        automaton = self._matcher()
        if automaton is not None:
            spans: list[list[int]] = []
            for end, length in sorted(automaton.iter(text), key=lambda m: m[0] - m[1]):
                start, stop = end - length + 1, end + 1
                if spans and start <= spans[-1][1]:
                    spans[-1][1] = max(spans[-1][1], stop)
                else:
                    spans.append([start, stop])
            if spans:
                parts, last = [], 0
                for start, stop in spans:
                    parts += [text[last:start], MASK]
                    last = stop
                parts.append(text[last:])
                text = "".join(parts)
        lowered = text.lower() if text.isascii() else None
        for (pattern, repl, _), trigger in zip(_PATTERNS, _TRIGGERS, strict=True):
            if lowered is None or trigger.search(lowered):
                text = pattern.sub(repl, text)
        return text

    def scrub_value(self, value: Any) -> Any:
        """Scrub strings inside ``value`` (str, bytes, and lists, tuples, dicts of them, recursively);
        other values are returned as they are. Bytes come back as scrubbed text when they held any."""
        if isinstance(value, str):
            return self.scrub(value)
        if isinstance(value, bytes):
            shown = repr(value)
            scrubbed = self.scrub(shown)
            return value if scrubbed == shown else scrubbed
        if isinstance(value, Mapping):
            return {k: self.scrub_value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.scrub_value(v) for v in value)
        return value


REDACTOR = Redactor()
"""The process-wide redactor used by karpy's logging, Events and providers."""


def register_secret(value: str | bytes | None) -> None:
    """Register ``value`` with :data:`REDACTOR` (see :meth:`Redactor.register`)."""
    REDACTOR.register(value)


def redact(text: str) -> str:
    """``text`` scrubbed by :data:`REDACTOR` (see :meth:`Redactor.scrub`)."""
    return REDACTOR.scrub(text)


_EVENT_TEXT_FIELDS = ("message", "note", "reason", "action")
_UNSCRUBBED_KINDS = frozenset({"Secret"})
"""Kinds whose stored content is a credential on purpose (a kubeadm bootstrap token Secret)."""


def redact_stored(kind: str, body: Any) -> Any:
    """``body`` (an object, a merge patch or a status patch karpy is about to write to the API
    server) with its free-text fields scrubbed by :data:`REDACTOR`: every string under ``status``
    (condition messages and reasons, any status field) and, for ``Event``, ``message``, ``note``,
    ``reason`` and ``action``. Called by both KubeClient adapters' write paths (``create``,
    ``patch``, ``replace``), so no controller, provider or helper can store a secret by
    forgetting to scrub. ``spec``, ``metadata`` and a ``Secret``'s data are left as they are
    (they carry intended values: a bootstrap token Secret is a credential by design). Returns a
    new dict when anything changed, ``body`` itself otherwise."""
    if not isinstance(body, dict) or kind in _UNSCRUBBED_KINDS:
        return body
    out = body
    status = body.get("status")
    if isinstance(status, (dict, list, str)):
        scrubbed = REDACTOR.scrub_value(status)
        if scrubbed != status:
            out = {**out, "status": scrubbed}
    if kind == "Event":
        for key in _EVENT_TEXT_FIELDS:
            value = body.get(key)
            if isinstance(value, str):
                scrubbed_text = REDACTOR.scrub(value)
                if scrubbed_text != value:
                    out = {**out, key: scrubbed_text}
    return out


_STANDARD_RECORD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class RedactingFilter(logging.Filter):
    """A ``logging.Filter`` for handlers: scrubs the record's message (``msg % args``, then
    ``args`` cleared), ``extra`` fields, the formatted exception (``exc_text``) and
    ``stack_info``. Never drops a record.

    Args:
        redactor: the registry to use (default :data:`REDACTOR`).
    """

    def __init__(self, redactor: Redactor | None = None):
        super().__init__()
        self.redactor = redactor or REDACTOR

    def filter(self, record: logging.LogRecord) -> bool:
        r = self.redactor
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: scrub the pieces
            message = f"{record.msg!s} {record.args!r}"
        record.msg, record.args = r.scrub(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = r.scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = r.scrub(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _STANDARD_RECORD_ATTRS and not key.startswith("_"):
                setattr(record, key, r.scrub_value(value))
        return True


def redact_processor(_logger: Any, _method: str, event_dict: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor: scrub every value of the event dict (message, fields, the rendered
    ``exception``/``stack`` text) with :data:`REDACTOR`. Place it after
    ``format_exc_info`` and before the renderer."""
    for key, value in list(event_dict.items()):
        if key.startswith("_"):  # structlog's own (_record, _from_structlog)
            continue
        event_dict[key] = REDACTOR.scrub_value(value)
    return event_dict
