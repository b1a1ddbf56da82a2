"""The composition root of the real controller: builds every controller and runs them.

Pipeline: informer caches (:class:`~karpy_core.kube.cache.CachedKubeClient`) watch pods, nodes,
NodeClaims, NodePools, DaemonSets and PDBs -> the change listener wakes the controllers whose
``wakes_on`` (:class:`~karpy_core.controllers.base.Wake`) matches -> each controller decides on
a snapshot, acts through the Kubernetes API and the cloud provider, and publishes its own events
and metrics. The controllers are built by
:func:`~karpy_core.controllers.wiring.build_controllers`, as the simulator builds them; this
module only runs them.

Only the replica holding the leader Lease runs controllers; every replica serves
``/healthz``/``/readyz``/``/metrics``. Each controller runs as a task named after it (Karpenter's
controller name, also the ``controller`` label of the reconcile and cloud-provider metrics); if
one fails, the others are stopped and :meth:`Operator.run` raises, so the process exits and
restarts cleanly (as kopf's ``run_tasks`` and controller-runtime's manager do).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable

from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.metrics import CloudCallMetrics
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.base import Controller, Observer, Runnable, Waker, wakes
from karpy_core.controllers.disruption.controller import DisruptionSettings
from karpy_core.controllers.nodepool_status import RegistrationHealth
from karpy_core.controllers.provisioning.batcher import Batcher
from karpy_core.controllers.provisioning.controller import PENDING_REQUEUE_SECONDS, awaiting_scheduler
from karpy_core.controllers.wiring import ControllerContext, build_controllers
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.dryrun import DryRunKubeClient
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.leader import LeaderElector
from karpy_core.kube.port import KINDS, KubeClient, WatchEvent
from karpy_core.logs import spawn
from karpy_core.observability import HealthServer, Metrics
from karpy_core.settings import BatchSettings, ControllerSettings, LeaderSettings
from karpy_core.state.nominations import Nominations, nomination_window
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import Clock, RealClock

__all__ = ["BatchSettings", "ControllerSettings", "LeaderSettings", "Operator", "Batcher", "awaiting_scheduler",
           "PENDING_REQUEUE_SECONDS"]

log = logging.getLogger("karpy.operator")

MIN_PASS_INTERVAL = 0.2
"""Seconds between two passes of one controller, however often it is woken."""


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """Wait until ``event`` is set or ``timeout`` seconds pass; True when it was set.

    Uses ``asyncio.wait`` rather than ``asyncio.wait_for``: on Python 3.11 ``wait_for`` can swallow
    a cancellation that arrives as the event fires (CPython gh-86296), which left a controller loop
    running after shutdown.
    """
    if event.is_set():
        return True
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter}, timeout=timeout)
    finally:
        waiter.cancel()
    return bool(done)


class Operator:
    """Builds the controllers (:func:`~karpy_core.controllers.wiring.build_controllers`) and runs them.

    Args:
        kube: the API client (the operator wraps it in informer caches).
        provider: the cloud provider.
        settings: controller settings.
        clock: time source (real by default).
        metrics: metrics registry (a new one by default).
        cluster_ca_pem: the CA ``kube`` trusts (:meth:`AsyncKubeClient.cluster_ca_pem
            <karpy_core.kube.client.AsyncKubeClient.cluster_ca_pem>`), handed to the provider in its context.
    """

    CACHED_KINDS = ("Pod", "Node", "NodeClaim", "NodePool", "DaemonSet", "PodDisruptionBudget")
    GATED_KINDS = {"NodeOverlay": "NodeOverlay"}
    """Kinds cached only while their feature gate (the value) is on."""
    BUFFER_KINDS = ("CapacityBuffer", "PodTemplate")
    """Also cached with the ``CapacityBuffer`` gate."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        provider: CloudProvider,
        settings: ControllerSettings | None = None,
        clock: Clock | None = None,
        metrics: Metrics | None = None,
        cluster_ca_pem: str | None = None,
    ):
        self.settings = settings or ControllerSettings()
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics(now=self.clock.now)
        self.provider = provider
        self.dry_run: DryRunKubeClient | None = None
        """The dry run's client (``settings.dry_run``): every controller, the provider and the event
        recorder get it; writes are withheld and counted in ``karpy_dry_run_writes_withheld_total``."""
        if self.settings.dry_run:
            kube = self._dry_run_client(kube)
        provider.prepare(ProviderContext(
            kube=kube, feature_gates=self.settings.feature_gates, cluster_name=self.settings.cluster_name, clock=self.clock,
            registry=self.metrics.registry, cluster_ca_pem=cluster_ca_pem,
            cloud_call_metrics=CloudCallMetrics(self.metrics.cloudprovider_duration, self.metrics.cloudprovider_errors)))
        node_classes = [kind for _, kind in provider.supported_node_classes() if kind in KINDS]
        gates = self.settings.feature_gates
        buffer_kinds = list(self.BUFFER_KINDS) if gates.CapacityBuffer else []
        gated = [kind for kind, gate in self.GATED_KINDS.items() if getattr(gates, gate)]
        self.kube = CachedKubeClient(kube, [*self.CACHED_KINDS, *node_classes, *buffer_kinds, *gated])
        self.sync = ClusterSync(self.kube)
        """Synced before acting: provisioning, disruption, static capacity and GC decide only while
        the caches are synced and, with leader election, the lease is still held (set in :meth:`run`)."""
        self.metrics.attach_state(self.kube, self.sync.synced)
        self.raw_kube = kube
        self.events = EventRecorder(kube, self.clock)
        if self.dry_run is not None:
            self.kube.write_through = False  # the cache holds what the API server sends, never a withheld write
            self.events.dry_run = True
        self.nominations = Nominations(nomination_window(self.settings.batch.max_seconds))
        """Nodes the provisioner chose for pending pods; disruption leaves them alone meanwhile."""
        self.waker = Waker()
        self.controllers = build_controllers(ControllerContext(
            kube=self.kube, provider=provider, clock=self.clock, feature_gates=gates, nominations=self.nominations,
            events=self.events, metrics=self.metrics, registration=RegistrationHealth(), waker=self.waker,
            batch=self.settings.batch, preference_policy=self.settings.preference_policy,
            min_values_policy=self.settings.min_values_policy, node_repair=self.settings.node_repair,
            disruption=DisruptionSettings(min_savings=self.settings.consolidation_min_savings,
                                          pipeline_depth=self.settings.disruption_pipeline_depth), sync=self.sync,
            dry_run=self.dry_run is not None))
        c = self.controllers
        self.provisioner, self.provisioner_trigger, self.batcher = c.provisioner, c.provisioner_trigger, c.provisioner_trigger.batcher
        self.lifecycle, self.termination, self.nodepool_status = c.lifecycle, c.termination, c.nodepool_status
        self.drift, self.expiration, self.disruption, self.gc, self.repair = c.drift, c.expiration, c.disruption, c.gc, c.repair
        self.overlays, self.buffer_status, self.static = c.overlays, c.buffer_status, c.static
        self._wake: dict[str, asyncio.Event] = {}
        self._routes: dict[tuple[str, str], tuple[list[Callable[[str, WatchEvent], None]], list[str]]] = {}
        self._running: list[Controller | Runnable] = list(self.controllers.schedule())
        for controller in self._running:
            self._register(controller)
        self.health = HealthServer(self.metrics, self.ready, host=self.settings.health_host, port=self.settings.health_port)
        self.metrics_server: HealthServer | None = None
        if self.settings.metrics_port is not None and self.settings.metrics_port != self.settings.health_port:
            self.metrics_server = HealthServer(self.metrics, self.ready, host=self.settings.health_host, port=self.settings.metrics_port)
        self.started = False
        self.elector: LeaderElector | None = None

    def _dry_run_client(self, kube: KubeClient) -> DryRunKubeClient:
        """The dry run: ``kube`` behind a :class:`DryRunKubeClient` (unless it is one already), its
        HTTP transport refusing every request but GET, the provider refusing creates and deletes,
        leader election off (a Lease is a write), and the ``karpy_dry_run_`` metrics registered."""
        dry = self.metrics.enable_dry_run()
        raw = kube.inner if isinstance(kube, DryRunKubeClient) else kube
        transport = getattr(raw, "transport", None)
        if transport is not None and hasattr(transport, "read_only"):
            transport.read_only = True
        client = kube if isinstance(kube, DryRunKubeClient) else DryRunKubeClient(kube, clock=self.clock)
        client.on_withheld = lambda verb, kind: dry.writes_withheld.labels(verb=verb, kind=kind).inc()
        self.provider.dry_run = True
        if self.settings.leader.enabled:
            log.info("dry run: leader election is off (a Lease is a write); run one dry-run replica")
            self.settings = self.settings.model_copy(update={"leader": self.settings.leader.model_copy(update={"enabled": False})})
        log.info("dry run: decisions are logged and counted, nothing is written to the cluster or the cloud", extra={"dryRun": True})
        self.dry_run = client
        return client

    def ready(self) -> tuple[bool, str]:
        """``/readyz``: the leader is ready once its informer caches have listed every kind and
        while none of their watches is failing (the API server unreachable, say). A standby
        replica (waiting for the leader Lease) has no caches; it is ready while its lease
        attempts reach the API server (an answer within the lease duration), as a Karpenter
        standby is: otherwise a Deployment rollout or a PodDisruptionBudget would wait forever
        on replicas that can only become ready by becoming leader."""
        if not self.started:
            elector = self.elector
            if elector is not None and not elector.is_leader and elector.last_contact is not None \
                    and self.clock.now() - elector.last_contact <= elector.lease_duration:
                return True, "standby: waiting for the leader Lease"
            return False, "informer caches not started (not leading yet, or still listing)"
        return self.kube.health()

    # ---- wiring -------------------------------------------------------------------------------
    def _on_change(self, kind: str, ev: WatchEvent) -> None:
        """The change listener: every controller whose ``wakes_on`` matches is woken (an
        :class:`~karpy_core.controllers.base.Observer` gets the event itself: the pod metrics,
        ``metrics.pod``, and the provisioner's batch window)."""
        route = self._routes.get((kind, ev.type))
        if route is None:
            route = self._routes[(kind, ev.type)] = self._route(kind, ev.type)
        observers, names = route
        for observe in observers:
            observe(kind, ev)
        for name in names:
            self.waker.poke(name)

    def _route(self, kind: str, type_: str) -> tuple[list[Callable[[str, WatchEvent], None]], list[str]]:
        """Who a ``type_`` event on a ``kind`` object goes to: the observers' ``observe`` and the
        names of the controllers to wake (worked out once per kind and event type)."""
        observers: list[Callable[[str, WatchEvent], None]] = []
        names: list[str] = []
        for c in self._running:
            if wakes(c.wakes_on, kind, type_):
                if isinstance(c, Observer):
                    observers.append(c.observe)
                else:
                    names.append(c.name)
        return observers, names

    def _register(self, c: Controller | Runnable) -> None:
        if isinstance(c, Runnable):
            self.waker.register(c.name, c.trigger)
        else:
            wake = self._wake.setdefault(c.name, asyncio.Event())
            self.waker.register(c.name, wake.set)

    async def _loop(self, c: Controller) -> None:
        """Run ``c.reconcile()`` whenever it is woken, at the time ``c.next_due()`` names (epoch
        seconds on the operator's clock, e.g. the end of a disruption command's validation
        delay) and at least every ``c.resync_seconds`` (default: the settings' ``resync_seconds``);
        the first pass after ``c.first_delay`` seconds. Each pass is timed in the reconcile
        metrics; a failing pass is logged and retried a second later."""
        wake = self._wake.setdefault(c.name, asyncio.Event())
        if c.first_delay > 0:
            await self.clock.sleep(c.first_delay)
        while True:
            await asyncio.sleep(MIN_PASS_INTERVAL)  # a pass that wakes itself cannot spin the API server
            wake.clear()
            t0 = time.perf_counter()
            try:
                await c.reconcile()
                self.metrics.observe_reconcile(c.name, time.perf_counter() - t0, error=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.metrics.observe_reconcile(c.name, time.perf_counter() - t0, error=True)
                log.exception("reconcile failed; retrying")
                await asyncio.sleep(1.0)
            timeout = c.resync_seconds if c.resync_seconds is not None else self.settings.resync_seconds
            at = c.next_due()
            if at is not None:
                timeout = max(0.0, min(timeout, at - self.clock.now()))
            await wait_event(wake, timeout)

    # ---- running ------------------------------------------------------------------------------
    async def _lead(self) -> None:
        self.metrics.leader.set(1)
        self.metrics.leader_status.labels(name=self.settings.leader.lease_name).set(1)
        loops = [] if self.dry_run is not None else self.controllers.provider_loops()  # a provider's loops act on the cloud
        for loop in loops:
            self._register(loop)
        self.kube.on_change(self._on_change)
        await self.kube.start()
        log.info("caches synced; starting controllers")
        self.started = True
        if self.overlays is not None:  # overlays are evaluated before the first provisioning pass
            try:
                await self.overlays.reconcile()
            except Exception:
                log.exception("node overlay evaluation failed; retrying in its loop")
        self.provisioner_trigger.trigger()  # pending pods that existed before we started
        tasks = [spawn(c.run() if isinstance(c, Runnable) else self._loop(c), name=c.name) for c in [*self._running, *loops]]
        try:
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
            for t in done:
                if t.exception() is not None:
                    log.error("controller stopped", exc_info=t.exception(), extra={"controller": t.get_name()})
                    raise t.exception()  # type: ignore[misc]
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.started = False
            await self.kube.stop()
            self.metrics.leader.set(0)
            self.metrics.leader_status.labels(name=self.settings.leader.lease_name).set(0)

    async def run(self) -> None:
        """Serve health endpoints and run the controllers while leading. Returns when leadership
        is lost (the caller exits the process); raises when a controller fails."""
        await self.health.start()
        if self.metrics_server is not None:
            await self.metrics_server.start()
        log.info("health server started", extra={"address": f"{self.settings.health_host}:{self.health.port}",
                                                  "cloud-provider": self.provider.name})
        try:
            if not self.settings.leader.enabled:
                await self._lead()
                return
            ls = self.settings.leader
            elector = LeaderElector(
                self.raw_kube, name=ls.lease_name, namespace=ls.namespace, identity=self.settings.identity, clock=self.clock,
                lease_duration=ls.lease_duration, renew_deadline=ls.renew_deadline, retry_period=ls.retry_period,
            )
            self.elector = elector
            self.sync.leading = elector.holds_lease
            transport = getattr(self.raw_kube, "transport", None)
            if transport is not None and hasattr(transport, "write_guard"):  # the HTTP client (not the in-memory one)
                transport.write_guard = elector.holds_lease
            await elector.run(self._lead)
        finally:
            await self.health.stop()
            if self.metrics_server is not None:
                await self.metrics_server.stop()


def default_namespace() -> str:
    """The controller's namespace: ``$SYSTEM_NAMESPACE``, the service account's namespace file, or default."""
    env = os.environ.get("SYSTEM_NAMESPACE")
    if env:
        return env
    path = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
    if os.path.exists(path):
        with open(path) as fh:
            return fh.read().strip()
    return "default"
