"""Metrics, health endpoints and structured logs.

Metrics use Karpenter's names where Karpenter has the metric (``pkg/metrics/metrics.go``,
``pkg/controllers/provisioning/scheduling/metrics.go``, ``pkg/cloudprovider/metrics``), so existing
Grafana dashboards keep working; karpy-only metrics start with ``karpy_``.

The HTTP server (aiohttp, already a dependency of kubernetes-asyncio) serves ``/healthz``
(liveness: the event loop answers), ``/readyz`` (readiness: informer caches synced) and
``/metrics`` (Prometheus text format).

Logs are one JSON object per line (structlog over the standard library ``logging``), with
``time``, ``level``, ``logger`` and ``message`` keys like Karpenter's zap output, ``extra``
fields as keys, and ``exception`` (the traceback) for ``log.exception``. Credentials are scrubbed
from every line (:mod:`karpy_core.redaction`); third-party loggers stay at WARNING unless asked
for by name.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from structlog.typing import Processor

from karpy_core.redaction import RedactingFilter, redact_processor

__all__ = ["KARPY_LOGGERS", "HealthServer", "Metrics", "configure_logging", "parse_debug_loggers"]


class Metrics:
    """The controller's metrics, in their own registry (one per controller instance)."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created_total", "NodeClaims created, by reason and NodePool.",
            ["reason", "nodepool", "min_values_relaxed"], registry=r,
        )
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated_total", "NodeClaims terminated, by reason and NodePool.", ["reason", "nodepool"], registry=r
        )
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted_total", "NodeClaims disrupted, by reason and NodePool.", ["reason", "nodepool"], registry=r
        )
        self.nodeclaims_drifted = Counter(
            "karpenter_nodeclaims_drifted_total", "NodeClaims found drifted, by drift type and NodePool.", ["type", "nodepool"], registry=r
        )
        self.nodes_created = Counter("karpenter_nodes_created_total", "Nodes registered, by NodePool.", ["nodepool"], registry=r)
        self.nodes_terminated = Counter("karpenter_nodes_terminated_total", "Nodes deleted, by NodePool.", ["nodepool"], registry=r)
        self.scheduling_duration = Histogram(
            "karpenter_provisioner_scheduling_duration_seconds", "Duration of one scheduling simulation, seconds.", ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60), registry=r,
        )
        self.scheduling_queue_depth = Gauge(
            "karpenter_provisioner_scheduling_queue_depth", "Pods waiting in the current scheduling pass.", ["controller"], registry=r
        )
        self.pods_unschedulable = Gauge(
            "karpy_pods_unschedulable", "Pending pods the last provisioning pass could not place.", registry=r
        )
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds", "Duration of cloud provider calls, seconds.",
            ["controller", "method", "provider", "error"], registry=r,
        )
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors_total", "Cloud provider call errors.", ["controller", "method", "provider", "error"], registry=r
        )
        self.nodepool_usage = Gauge(
            "karpenter_nodepools_usage", "Resources launched per NodePool (cores, bytes, counts).",
            ["nodepool", "resource_type"], registry=r
        )
        self.nodepool_limit = Gauge(
            "karpenter_nodepools_limit", "NodePool limits (cores, bytes, counts).", ["nodepool", "resource_type"], registry=r
        )
        self.leader = Gauge("karpy_leader", "1 while this replica holds the leader lease.", registry=r)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class HealthServer:
    """Serves ``/healthz``, ``/readyz`` and ``/metrics`` on 127.0.0.1 or all interfaces.

    Args:
        metrics: the registry to expose.
        ready: callable returning True when the controller is ready (caches synced), or a
            ``(ready, reason)`` pair whose reason is the 503 answer's body.
        host, port: where to listen (port 0 picks a free port; see :attr:`port` after start).
    """

    def __init__(self, metrics: Metrics, ready: Callable[[], bool | tuple[bool, str]], *, host: str = "0.0.0.0",
                 port: int = 8081):
        self.metrics = metrics
        self.ready = ready
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = getattr(site, "_server", None)
        if sockets is not None and sockets.sockets:
            self.port = sockets.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        answer = self.ready()
        ok, why = answer if isinstance(answer, tuple) else (answer, "" if answer else "not ready")
        return web.Response(text="ok") if ok else web.Response(status=503, text=why or "not ready")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})


KARPY_LOGGERS = ("karpy", "karpy_core", "karpy_aws", "karpy_kakaocloud")
"""Logger name roots that follow the configured level; every other logger stays at WARNING."""


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


def configure_logging(
    level: str = "INFO",
    *,
    json_output: bool = True,
    debug_loggers: str | Sequence[str] | None = None,
    stream: TextIO | None = None,
    output_paths: str | None = None,
) -> None:
    """Route the standard ``logging`` module through structlog, one JSON object per line on
    ``stream`` (stderr by default), with credentials scrubbed.

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
    tracebacks included), so registered secrets and credential-shaped values are written as
    ``[REDACTED]`` even from loggers asked for at DEBUG.

    Raises:
        ValueError: an unknown level name (in ``level`` or ``debug_loggers``).
    """
    karpy_level = logging.getLevelName(level.upper())
    if not isinstance(karpy_level, int):
        raise ValueError(f"unknown log level {level!r}: want debug, info, warning or error")
    named = parse_debug_loggers(debug_loggers)
    shared: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", key="time"),
    ]
    renderer = structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer(colors=False)
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redact_processor,
            structlog.processors.EventRenamer("message"),
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
