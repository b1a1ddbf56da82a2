"""Metrics, health endpoints and structured logs.

Metrics use Karpenter's names where Karpenter has the metric (``pkg/metrics/metrics.go``,
``pkg/controllers/provisioning/scheduling/metrics.go``, ``pkg/cloudprovider/metrics``), so existing
Grafana dashboards keep working; karpy-only metrics start with ``karpy_``.

The HTTP server (aiohttp, already a dependency of kubernetes-asyncio) serves ``/healthz``
(liveness: the event loop answers), ``/readyz`` (readiness: informer caches synced) and
``/metrics`` (Prometheus text format).

Logs: :mod:`karpy_core.logs` (Karpenter's JSON shape; :func:`configure_logging` is re-exported
here).
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

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


# The logs' configuration lives in karpy_core.logs; these names stay importable from here.
from karpy_core.logs import KARPY_LOGGERS, configure_logging, parse_debug_loggers  # noqa: E402
