"""Structured logs in Karpenter's shape: one JSON object per line.

A karpy line looks like Karpenter's zap output (``pkg/operator/logging/logging.go``: level key
``level`` with capital names, ``time`` ISO 8601, ``logger``, ``message``, the ``commit``, then
the ``WithValues`` fields)::

    {"level":"INFO","time":"2026-12-01T21:00:00.000Z","logger":"controller","message":"created nodeclaim",
     "commit":"0.1.0","controller":"provisioner","NodePool":{"name":"default"},"NodeClaim":{"name":"default-x7k2p"}}

* ``logger`` is ``controller`` for karpy's own loggers (Karpenter names its one logger so);
  another library's logger keeps its own name (``botocore.endpoint``).
* ``controller`` is the controller whose task wrote the line (:func:`bind_controller`, set by
  the operator for each controller loop) - Karpenter's controller-runtime field; inside one
  object's reconcile (:func:`reconciling`) also the object, ``namespace``, ``name`` and
  ``reconcileID``.
* Objects are fields, not words in the message: ``extra=fields(nodeclaim=..., nodepool=...,
  node=...)`` gives ``{"NodeClaim": {"name": ...}, "NodePool": {"name": ...}, "Node": {"name":
  ...}}`` as Karpenter's ``log.FromContext(ctx).WithValues("NodeClaim", klog.KObj(nc))``.
* An exception (``log.exception``, ``exc_info=``, or an ``error`` field holding one) becomes
  ``error`` (``"Type: message"``) and ``stacktrace`` (the full Python traceback).
* Credentials are scrubbed from every value, nested fields and tracebacks included
  (:mod:`karpy_core.redaction`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import sys
import traceback
import uuid
from collections.abc import Coroutine, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO, TypeVar

import structlog
from structlog.typing import Processor

from karpy_core.errors import KarpyError
from karpy_core.redaction import RedactingFilter, redact, redact_processor

__all__ = [
    "KARPY_LOGGERS",
    "REPEAT_BY_ERROR",
    "ConsoleWarnings",
    "KEY_ORDER",
    "bind_controller",
    "commit",
    "configure_logging",
    "controller_name",
    "fields",
    "parse_debug_loggers",
    "reconciling",
    "spawn",
]

KARPY_LOGGERS = ("karpy", "karpy_core", "karpy_aws", "karpy_kakaocloud")
"""Logger name roots that follow the configured level; every other logger stays at WARNING."""

KEY_ORDER = ("level", "time", "logger", "message", "commit", "controller")
"""Keys first on every line, in this order (zap's order); the fields follow as given."""

T = TypeVar("T")

_CONTROLLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("karpy_controller", default=None)
_RECONCILE: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("karpy_reconcile", default=None)


def controller_name() -> str | None:
    """The controller bound in this context (task), if any."""
    return _CONTROLLER.get()


def spawn(coro: Coroutine[Any, Any, T], *, name: str) -> asyncio.Task[T]:
    """``asyncio.create_task(coro, name=name)`` whose lines carry ``"controller": name``."""
    ctx = contextvars.copy_context()
    ctx.run(_CONTROLLER.set, name)
    return asyncio.create_task(coro, name=name, context=ctx)


@contextmanager
def reconciling(kind: str, name: str, namespace: str = "") -> Iterator[None]:
    """Lines logged inside the block carry what controller-runtime adds to every line of one
    reconcile in Karpenter: the object (``kind`` as the key, ``{"name": ...}`` or with its
    ``namespace``), ``namespace`` ("" for cluster-scoped kinds), ``name`` and a fresh
    ``reconcileID`` (a UUID), so log-based alerts and queries written for Karpenter match."""
    ref: dict[str, str] = {"name": name, **({"namespace": namespace} if namespace else {})}
    token = _RECONCILE.set({kind: ref, "namespace": namespace, "name": name, "reconcileID": str(uuid.uuid4())})
    try:
        yield
    finally:
        _RECONCILE.reset(token)


@contextmanager
def bind_controller(name: str) -> Iterator[None]:
    """Lines logged inside the block (and in tasks it starts) carry ``"controller": name``."""
    token = _CONTROLLER.set(name)
    try:
        yield
    finally:
        _CONTROLLER.reset(token)


def fields(*, nodeclaim: Any = None, nodepool: Any = None, node: Any = None, pod: Any = None,
           provider_id: str | None = None, **more: Any) -> dict[str, Any]:
    """``extra=`` for a log call: Karpenter's object fields plus any ``more`` (keys as given).

    Each object is a name (``str``), a kube dict, or a pydantic API object; a pod may be
    ``"namespace/name"``. Karpenter's keys: ``NodeClaim``, ``NodePool``, ``Node`` and ``Pod`` as
    ``{"name": ...}`` (``{"name": ..., "namespace": ...}`` for a Pod), ``provider-id``.
    None values are left out.
    """
    out: dict[str, Any] = {}
    for key, obj in (("NodeClaim", nodeclaim), ("NodePool", nodepool), ("Node", node)):
        name = _name(obj)
        if name:
            out[key] = {"name": name}
    if pod is not None:
        if isinstance(pod, str):
            namespace, _, name = pod.rpartition("/")
            out["Pod"] = {"name": name, "namespace": namespace or "default"}
        else:
            meta = _meta(pod)
            out["Pod"] = {"name": meta.get("name", ""), "namespace": meta.get("namespace", "default")}
    if provider_id:
        out["provider-id"] = provider_id
    out.update({k: v for k, v in more.items() if v is not None})
    return out


def _meta(obj: Any) -> dict[str, Any]:
    if isinstance(obj, dict):
        return dict(obj.get("metadata") or {})
    meta = getattr(obj, "metadata", None)
    if meta is None:
        return {}
    return {"name": getattr(meta, "name", ""), "namespace": getattr(meta, "namespace", None)}


def _name(obj: Any) -> str:
    if obj is None or isinstance(obj, str):
        return obj or ""
    return str(_meta(obj).get("name") or "")


def commit() -> str:
    """The ``commit`` field: ``$KARPY_COMMIT`` (the image build sets the git revision), else the
    installed package version."""
    env = os.environ.get("KARPY_COMMIT")
    if env:
        return env
    try:
        from importlib.metadata import version

        return version("karpy")
    except Exception:
        return "unknown"


def parse_debug_loggers(spec: str | Sequence[str] | None) -> dict[str, int]:
    """``"botocore,httpx=INFO"`` (or a list of such items) -> ``{"botocore": DEBUG, "httpx": INFO}``.

    A bare name means DEBUG; ``name=LEVEL`` takes any ``logging`` level name.

    Raises:
        ValueError: an unknown level name or an empty logger name.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec or [])
    out: dict[str, int] = {}
    for item in items:
        for part in str(item).split(","):
            name, _, level = part.strip().partition("=")
            name = name.strip()
            if not name and not level:
                continue
            value = logging.getLevelName(level.strip().upper() or "DEBUG")
            if not name or not isinstance(value, int):
                raise ValueError(f"bad logger spec {part.strip()!r}: want NAME or NAME=LEVEL (DEBUG, INFO, WARNING, ERROR)")
            out[name] = value
    return out


# ------------------------------------------------------------------------------- processors
def _karpenter_names(_logger: Any, _method: str, ed: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """Upper-case level (WARNING as WARN, zap's name), ``logger`` ``controller`` for karpy's own
    loggers, the bound ``controller``."""
    level = str(ed.get("level", "")).upper()
    ed["level"] = {"WARNING": "WARN", "CRITICAL": "FATAL", "EXCEPTION": "ERROR"}.get(level, level)
    ed.pop(REPEAT_BY_ERROR, None)  # a hint for :class:`ConsoleWarnings`, not a field
    name = str(ed.get("logger") or "")
    if not name or name.split(".", 1)[0] in KARPY_LOGGERS:
        ed["logger"] = "controller"
    ctl = _CONTROLLER.get()
    if ctl and "controller" not in ed:
        ed["controller"] = ctl
    for key, value in (_RECONCILE.get() or {}).items():
        ed.setdefault(key, value)
    return ed


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _error_fields(_logger: Any, _method: str, ed: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """``exc_info`` (True, an exception, or a ``sys.exc_info()`` tuple) -> ``error`` and
    ``stacktrace``; an exception object given as a field (``error=exc``) -> its text."""
    exc_info = ed.pop("exc_info", None)
    exc: BaseException | None = None
    if isinstance(exc_info, BaseException):
        exc = exc_info
    elif isinstance(exc_info, tuple) and len(exc_info) == 3 and isinstance(exc_info[1], BaseException):
        exc = exc_info[1]
    elif exc_info:
        exc = sys.exc_info()[1]
    given = ed.get("error")
    if exc is None and isinstance(given, BaseException):
        exc = given
    if exc is not None:
        if not isinstance(given, str) or not given:
            ed["error"] = _describe(exc)
        if exc.__traceback__ is not None or exc_info:
            ed["stacktrace"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    for key, value in list(ed.items()):
        if isinstance(value, BaseException):
            ed[key] = _describe(value)
    return ed


def _add_commit(value: str) -> Processor:
    def add(_logger: Any, _method: str, ed: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        ed.setdefault("commit", value)
        return ed

    return add


def _order(_logger: Any, _method: str, ed: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    head = {k: ed.pop(k) for k in KEY_ORDER if k in ed}
    rest = dict(ed)
    ed.clear()
    ed.update(head)
    ed.update(rest)
    return ed


def configure_logging(
    level: str = "INFO",
    *,
    json_output: bool = True,
    debug_loggers: str | Sequence[str] | None = None,
    stream: TextIO | None = None,
    output_paths: str | None = None,
) -> None:
    """Route the standard ``logging`` module through structlog, one JSON object per line in
    Karpenter's shape (module docstring), with credentials scrubbed.

    Args:
        level: level of karpy's own loggers (:data:`KARPY_LOGGERS`), e.g. ``LOG_LEVEL=debug``.
        json_output: JSON lines (default) or structlog's console format.
        debug_loggers: third-party loggers asked for by name (``--log-debug-loggers`` /
            ``KARPY_LOG_DEBUG_LOGGERS``), see :func:`parse_debug_loggers`. Every other library
            logger (botocore, urllib3, httpx, httpcore, aiohttp, kubernetes_asyncio...) stays at
            WARNING whatever ``level`` says: their DEBUG output carries request headers.
        stream: where to write (tests pass a buffer).
        output_paths: Karpenter's ``LOG_OUTPUT_PATHS``: comma separated ``stdout``, ``stderr``
            or file paths (appended to); one handler each. Ignored when ``stream`` is given;
            neither given: stderr.

    Every line passes :class:`karpy_core.redaction.RedactingFilter` (message, ``extra`` fields,
    exception text) and :func:`karpy_core.redaction.redact_processor` (the final event dict,
    ``error`` and ``stacktrace`` included), so registered secrets and credential-shaped values
    are written as ``[REDACTED]`` even from loggers asked for at DEBUG.

    Raises:
        ValueError: an unknown level name (in ``level`` or ``debug_loggers``).
        OSError: a log file in ``output_paths`` cannot be opened.
    """
    wanted = level.upper()
    karpy_level = logging.getLevelName("WARNING" if wanted == "WARN" else wanted)
    if not isinstance(karpy_level, int):
        raise ValueError(f"unknown log level {level!r}: want debug, info, warning or error")
    named = parse_debug_loggers(debug_loggers)
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="%Y-%m-%dT%H:%M:%S.%fZ", utc=True, key="time"),
    ]
    renderer: Processor = (structlog.processors.JSONRenderer(separators=(",", ":"), default=str) if json_output
                           else structlog.dev.ConsoleRenderer(colors=False))
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            _karpenter_names,
            structlog.processors.StackInfoRenderer(),
            _error_fields,
            redact_processor,
            structlog.processors.EventRenamer("message"),
            _add_commit(commit()),
            _order,
            renderer,
        ],
    )
    handlers: list[logging.Handler] = []
    if stream is not None or not output_paths:
        handlers.append(logging.StreamHandler(stream if stream is not None else sys.stderr))
    else:
        for path in (p.strip() for p in output_paths.split(",")):
            if path in ("stdout", "stderr"):
                handlers.append(logging.StreamHandler(sys.stdout if path == "stdout" else sys.stderr))
            elif path:
                handlers.append(logging.FileHandler(path, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
        handler.addFilter(RedactingFilter())
    root = logging.getLogger()
    for old in root.handlers:
        if isinstance(old, logging.FileHandler):
            old.close()
    root.handlers[:] = handlers
    root.setLevel(logging.WARNING)
    for name in KARPY_LOGGERS:
        logging.getLogger(name).setLevel(karpy_level)
    for name, value in named.items():
        logging.getLogger(name).setLevel(value)


# ------------------------------------------------------------------------- console warnings
REPEAT_BY_ERROR = "_karpy_repeat_by_error"
"""``extra`` key (value True) of a warning that :class:`ConsoleWarnings` prints once per error
text, whichever object it names (a failing plugin hook asked about every NodeClaim: one line per
hook and error, not per NodeClaim). Not written to JSON lines."""

_OBJECT_KEYS = ("NodeClaim", "NodePool", "Node", "Pod")


class ConsoleWarnings(logging.Handler):
    """Warnings (and errors) for a person at the command line (``karpy simulate``, which writes
    no JSON log lines): one line each on stderr, ``warning: MESSAGE (NodeClaim NAME): ERROR``,
    the error being the text of the record's ``error`` field or exception (a karpy error's own
    message, e.g. ``cloud provider plugin 'broken': karpy_delete raised RuntimeError: boom``;
    another exception as ``Type: text``). The structured fields that the JSON lines carry are
    otherwise left out.

    A line is printed the first time its (logger, message, objects, error text) is seen; the
    same line again (a failure retried at every pass) is only counted, and :meth:`finish` prints
    one ``... repeated N more time(s)`` line per such warning. A record with
    :data:`REPEAT_BY_ERROR` set is keyed without its objects (one line per error, the objects it
    was repeated for counted).

    Every line goes through :class:`~karpy_core.redaction.RedactingFilter` and
    :func:`~karpy_core.redaction.redact`: secrets never reach the terminal.

    Args:
        stream: where to write; default ``sys.stderr`` looked up at each write (so a test runner
            or a progress bar that swaps it sees the lines).
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(logging.WARNING)
        self._stream = stream
        self._seen: dict[tuple[Any, ...], list[Any]] = {}
        """key -> [message head, repeats, objects seen]"""
        self.addFilter(RedactingFilter())

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(redact(line) + "\n")
        stream.flush()

    @staticmethod
    def _error_text(record: logging.LogRecord) -> str:
        error = getattr(record, "error", None)
        if error is None and record.exc_info and isinstance(record.exc_info, tuple):
            error = record.exc_info[1]
        if isinstance(error, KarpyError):
            return str(error)
        if isinstance(error, BaseException):
            return _describe(error)
        return str(error) if error else ""

    def emit(self, record: logging.LogRecord) -> None:
        """Print ``record`` unless the same warning was printed before (then count it)."""
        try:
            message = record.getMessage()
            objects = []
            for kind in _OBJECT_KEYS:
                ref = getattr(record, kind, None)
                if isinstance(ref, dict) and ref.get("name"):
                    ns = ref.get("namespace")
                    objects.append(f"{kind} {ns + '/' if ns else ''}{ref['name']}")
            error = self._error_text(record)
            by_error = bool(getattr(record, REPEAT_BY_ERROR, False))
            key = (record.name, record.levelno, message, error, *(() if by_error else objects))
            level = "warning" if record.levelno < logging.ERROR else "error"
            head = f"{level}: {message}" + (f" ({', '.join(objects)})" if objects and not by_error else "")
            seen = self._seen.get(key)
            if seen is not None:
                seen[1] += 1
                seen[2].update(objects)
                return
            self._seen[key] = [head, 0, set(objects)]
            self._write(head + (f": {error}" if error else ""))
        except Exception:
            self.handleError(record)

    def repeats(self) -> list[str]:
        """The ``... repeated N more time(s)`` lines :meth:`finish` prints, in first-seen order."""
        out = []
        for head, n, objects in self._seen.values():
            if n:
                times = "time" if n == 1 else "times"
                names = sorted(objects)
                many = (f", for {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                        if len(names) > 1 else "")
                out.append(f"{head}: repeated {n} more {times} (the same error{many})")
        return out

    def finish(self) -> None:
        """Print the repeat counts (see the class docstring) and forget what was seen."""
        for line in self.repeats():
            self._write(line)
        self._seen.clear()
