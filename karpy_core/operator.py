"""The composition root of the real controller: builds every controller and runs them.

Pipeline: informer caches (:class:`~karpy_core.kube.cache.CachedKubeClient`) watch pods, nodes,
NodeClaims, NodePools, DaemonSets and PDBs -> change listeners wake the controllers -> each
controller decides on a snapshot and acts through the Kubernetes API and the cloud provider.

Only the replica holding the leader Lease runs controllers; every replica serves
``/healthz``/``/readyz``/``/metrics``. Each controller runs as a named task; if one fails, the
others are stopped and :meth:`Operator.run` raises, so the process exits and restarts cleanly
(as kopf's ``run_tasks`` and controller-runtime's manager do).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry
from pydantic import BaseModel, Field

from karpy_core.apis.labels import ANNOTATION_MIN_VALUES_RELAXED, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.capacitybuffer import REQUEUE_SECONDS as CAPACITY_BUFFER_REQUEUE
from karpy_core.controllers.capacitybuffer import CapacityBufferStatus
from karpy_core.controllers.disruption import Disruption, Expiration
from karpy_core.controllers.disruption.budgets import allowed_disruptions
from karpy_core.controllers.disruption.candidates import disrupting_counts
from karpy_core.controllers.disruption.controller import DisruptionSettings, PlanningPass
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, DisruptionReason
from karpy_core.controllers.disruption.methods import DEFAULT_MIN_SAVINGS, DEFAULT_ORDER
from karpy_core.controllers.node.health import UNHEALTHY_THRESHOLD_PERCENT, NodeRepair
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.controllers.nodeclaim.drift import NodeClaimDrift
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.controllers.nodeoverlay import NodeOverlayController
from karpy_core.controllers.nodepool_status import NodePoolStatus, RegistrationHealth
from karpy_core.controllers.provisioning.batcher import Batcher
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.controllers.static.controller import StaticCapacity
from karpy_core.errors import KubeAPIError
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.leader import LeaderElector
from karpy_core.kube.port import KINDS, KubeClient, WatchEvent
from karpy_core.logs import fields, spawn
from karpy_core.observability import CONSOLIDATION_TYPES, HealthServer, Metrics
from karpy_core.state.cluster import condition, is_provisionable
from karpy_core.state.nominations import Nominations, nomination_window
from karpy_core.utils.clock import Clock, RealClock

__all__ = ["ControllerSettings", "Operator", "Batcher", "awaiting_scheduler", "PENDING_REQUEUE_SECONDS"]

log = logging.getLogger("karpy.operator")

MIN_PASS_INTERVAL = 0.2
"""Seconds between two passes of one controller, however often it is woken."""
PENDING_REQUEUE_SECONDS = 10.0
"""While provisionable pods remain, provisioning runs again after this long without any event
(Karpenter's pod trigger controller requeues each provisionable pod after 10 s)."""


class BatchSettings(BaseModel):
    """Provisioning batch window (Karpenter ``BATCH_IDLE_DURATION``/``BATCH_MAX_DURATION``)."""

    idle_seconds: float = Field(1.0, gt=0, description="Seconds without a new pending pod that close the batch (default 1).")
    max_seconds: float = Field(10.0, gt=0, description="Longest batch, seconds from its first pod (default 10).")


class LeaderSettings(BaseModel):
    """Leader election on a coordination.k8s.io Lease (client-go defaults)."""

    enabled: bool = Field(True, description="Campaign for the Lease; off runs the controllers at once (single replica).")
    lease_name: str = Field("karpy-leader-election", description="Lease name.")
    namespace: str = Field("default", description="Lease namespace (the controller's own; SYSTEM_NAMESPACE).")
    lease_duration: float = Field(15.0, description="Seconds a lease lasts without renewal.")
    renew_deadline: float = Field(10.0, description="Seconds the leader tries to renew before giving up.")
    retry_period: float = Field(2.0, description="Seconds between attempts.")


class ControllerSettings(BaseModel):
    """Everything the controller is configured with, grouped."""

    cluster_name: str = Field("", description="Cluster name, passed to the cloud provider (tags, ownership).")
    batch: BatchSettings = Field(default_factory=BatchSettings)
    leader: LeaderSettings = Field(default_factory=LeaderSettings)
    health_port: int = Field(8081, description="Port for /healthz, /readyz and /metrics (0 = pick a free one).")
    health_host: str = Field("0.0.0.0", description="Interface for the health server.")
    metrics_port: int | None = Field(None, description="A separate port for /metrics (None: served on health_port too).")
    resync_seconds: float = Field(10.0, description="Each controller also runs this often without any change.")
    preference_policy: str = Field("Respect", description="Respect (relax preferences one at a time) or Ignore.")
    min_values_policy: str = Field("Strict", description="Strict or BestEffort (relax minValues and annotate the NodeClaim).")
    node_repair: bool = Field(True, description="Replace nodes failing the provider's repair policies (Karpenter's NodeRepair gate).")
    feature_gates: FeatureGates = Field(default_factory=FeatureGates,
                                        description="FEATURE_GATES (NodeRepair here is overridden by node_repair).")
    kube_client_qps: float = Field(200.0, gt=0, description="Sustained API requests per second (Karpenter KUBE_CLIENT_QPS).")
    kube_client_burst: int = Field(300, gt=0, description="Requests allowed at once above the QPS (KUBE_CLIENT_BURST).")
    consolidation_min_savings: float = Field(DEFAULT_MIN_SAVINGS, ge=0, lt=1, description=(
        "Fraction of the disrupted nodes' price a repack consolidation must save (KARPY_CONSOLIDATION_MIN_SAVINGS)."))
    identity: str = Field(default_factory=lambda: f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}",
                          description="This replica's leader-election identity.")


def launched_message(details: dict[str, Any]) -> str:
    """The ``Launched`` event's text: ``Launched <type> (<capacity type>) in <zone>, providerID <id>``
    from the lifecycle's launch details (parts that are unknown are left out)."""
    parts = [details.get("instanceType") or "an instance"]
    if details.get("capacityType"):
        parts.append(f"({details['capacityType']})")
    if details.get("zone"):
        parts.append(f"in {details['zone']}")
    text = "Launched " + " ".join(parts)
    return text + (f", providerID {details['providerID']}" if details.get("providerID") else "")


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


_CONTROLLER_NAMES = {
    "lifecycle": "nodeclaim.lifecycle", "termination": "node.termination", "nodepool": "nodepool.status",
    "health": "node.health", "drift": "nodeclaim.disruption.drift", "disruption": "disruption",
    "nodeoverlay": "nodeoverlay.controller",
    "static": "static.provisioning",
}
"""Loop name -> the ``controller`` label of the controller-runtime metrics (Karpenter's controller names)."""


def _min_values_relaxed(claim: dict[str, Any] | None) -> str:
    """``min_values_relaxed`` label: the NodeClaim's ``karpenter.sh/nodeclaim-min-values-relaxed`` annotation."""
    ann = ((claim or {}).get("metadata") or {}).get("annotations") or {}
    return "true" if ann.get(ANNOTATION_MIN_VALUES_RELAXED) == "true" else "false"


def _drain_reason(node: str, claims: dict[str, dict[str, Any]]) -> str:
    """``karpenter_pods_drained_total``'s ``reason``: the node's NodeClaim's ``DisruptionReason``
    condition reason when True, else ``Forceful Termination`` (Karpenter ``terminator/eviction.go``)."""
    for claim in claims.values():
        if (claim.get("status") or {}).get("nodeName") == node:
            cond = condition(claim, "DisruptionReason")
            if cond is not None and cond.get("status") == "True" and cond.get("reason"):
                return str(cond["reason"])
            break
    return "Forceful Termination"


def _pod_key(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def awaiting_scheduler(pod: dict[str, Any]) -> bool:
    """A pod kube-scheduler has not looked at yet: no ``nodeName``, no ``PodScheduled``
    condition, not terminating or finished, not a DaemonSet or static pod, and for the default
    scheduler. Such pods are about to be marked Unschedulable or bound; their arrival keeps the
    provisioning batch open so one pass sees the whole burst."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    if spec.get("nodeName") or meta.get("deletionTimestamp") or status.get("phase") in ("Succeeded", "Failed"):
        return False
    if spec.get("schedulerName") not in (None, "", "default-scheduler"):
        return False
    if any(r.get("kind") in ("DaemonSet", "Node") for r in meta.get("ownerReferences") or ()):
        return False
    return not any(c.get("type") == "PodScheduled" for c in status.get("conditions") or ())


class Operator:
    """Builds and runs the controllers.

    Args:
        kube: the API client (the operator wraps it in informer caches).
        provider: the cloud provider.
        settings: controller settings.
        clock: time source (real by default).
        metrics: metrics registry (a new one by default).
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
    ):
        self.settings = settings or ControllerSettings()
        self.clock = clock or RealClock()
        self.metrics = metrics or Metrics(now=self.clock.now)
        self.provider = provider
        provider.observer = self._observe_cloud_call
        if hasattr(provider, "set_feature_gates"):
            provider.set_feature_gates(self.settings.feature_gates)
        provider_registry = getattr(provider.plugin, "metrics_registry", None)
        if isinstance(provider_registry, CollectorRegistry):
            self.metrics.adopt(provider_registry)
        node_classes = [kind for _, kind in provider.supported_node_classes() if kind in KINDS]
        gates = self.settings.feature_gates
        buffer_kinds = list(self.BUFFER_KINDS) if gates.CapacityBuffer else []
        gated = [kind for kind, gate in self.GATED_KINDS.items() if getattr(gates, gate)]
        self.kube = CachedKubeClient(kube, [*self.CACHED_KINDS, *node_classes, *buffer_kinds, *gated])
        self.metrics.attach_state(self.kube, self.kube.synced)
        self.raw_kube = kube
        self.events = EventRecorder(kube, self.clock)
        self.nominations = Nominations(nomination_window(self.settings.batch.max_seconds))
        """Nodes the provisioner chose for pending pods; disruption leaves them alone meanwhile."""
        self.provisioner = Provisioner(kube=self.kube, provider=provider, preference_policy=self.settings.preference_policy,
                                       min_values_policy=self.settings.min_values_policy, nominations=self.nominations,
                                       clock=self.clock, capacity_buffers=gates.CapacityBuffer)
        self.buffer_status = CapacityBufferStatus(kube=self.kube, clock=self.clock) if gates.CapacityBuffer else None
        """CapacityBuffer status (gate ``CapacityBuffer``); each pass with a ready buffer triggers provisioning."""
        self._buffer_due: float | None = None
        self.registration = RegistrationHealth()
        self.lifecycle = NodeClaimLifecycle(kube=self.kube, provider=provider, clock=self.clock, events=self.events,
                                            registration=self.registration, nominations=self.nominations)
        self.termination = NodeTermination(kube=self.kube, clock=self.clock, events=self.events)
        self.disruption = Disruption(kube=self.kube, provider=provider, clock=self.clock, nominations=self.nominations,
                                     events=self.events, feature_gates=self.settings.feature_gates,
                                     settings=DisruptionSettings(min_savings=self.settings.consolidation_min_savings))
        self.static = StaticCapacity(kube=self.kube, provider=provider, clock=self.clock) \
            if self.settings.feature_gates.StaticCapacity else None
        """Static NodePools' node counts (Karpenter's StaticCapacity gate); None when the gate is off."""
        self.disruption.observer = self._observe_planning
        self.disruption.capacity_buffers = gates.CapacityBuffer
        self._offerings_seen: tuple[tuple[str, int], ...] = ()
        """The instance-type lists the offering gauges were last built from (NodePool name, list id)."""
        self.expiration = Expiration(kube=self.kube, clock=self.clock)
        self.drift = NodeClaimDrift(kube=self.kube, provider=provider, clock=self.clock)
        self.repair = NodeRepair(kube=self.kube, provider=provider, clock=self.clock)
        self.nodepool_status = NodePoolStatus(kube=self.kube, clock=self.clock, registration=self.registration,
                                              managed=provider.managed_node_classes())
        self.gc = GarbageCollection(kube=self.kube, provider=provider, clock=self.clock)
        self.overlays = NodeOverlayController(kube=self.kube, provider=provider, clock=self.clock) \
            if self.settings.feature_gates.NodeOverlay else None
        """The NodeOverlay controller (``NodeOverlay`` gate): overlaid instance types for every controller."""
        self._unmarked: set[str] = set()
        """UIDs of pods kube-scheduler has not marked or bound yet (see :func:`awaiting_scheduler`)."""
        self.batcher = Batcher(self.clock, self.settings.batch, hold=lambda: bool(self._unmarked))
        self._wake: dict[str, asyncio.Event] = {}
        self.health = HealthServer(self.metrics, self.ready, host=self.settings.health_host, port=self.settings.health_port)
        self.metrics_server: HealthServer | None = None
        if self.settings.metrics_port is not None and self.settings.metrics_port != self.settings.health_port:
            self.metrics_server = HealthServer(self.metrics, self.ready, host=self.settings.health_host, port=self.settings.metrics_port)
        self.started = False
        self.elector: LeaderElector | None = None
        self.first_nodeclaim_at: float | None = None

    def _observe_cloud_call(self, method: str, seconds: float, error: str) -> None:
        """``karpenter_cloudprovider_duration_seconds`` / ``..._errors_total``, labelled with the
        calling controller (the asyncio task's name, e.g. ``nodeclaim.lifecycle``)."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # called outside an event loop
            task = None
        labels = {"controller": task.get_name() if task is not None else "", "method": method, "provider": self.provider.name}
        self.metrics.cloudprovider_duration.labels(**labels).observe(seconds)
        if error:
            self.metrics.cloudprovider_errors.labels(**labels, error=error).inc()

    def _observe_planning(self, p: PlanningPass) -> None:
        """Metrics of one disruption planning pass: eligible nodes per method, evaluation time,
        allowed disruptions per NodePool and reason, and the instance-type offering gauges."""
        considered: dict[str, set[str]] = {}
        for line in p.lines:
            considered.setdefault(str(line.method), set()).add(line.node)
        # the methods run in order until one decides a command (each reports its count, 0 included, as upstream);
        # karpy's repack, after Karpenter's four, does not overwrite single-node's eligible count
        methods = [m.value for m in DEFAULT_ORDER if m is not DisruptionMethod.REPACK_CONSOLIDATION]
        if p.plan is not None and p.plan.method.value in methods:
            methods = methods[: methods.index(p.plan.method.value) + 1]
        last = p.plan.method.value if p.plan is not None else methods[-1]
        self.metrics.observe_disruption_pass({m: len(considered.get(m, ())) for m in methods}, p.seconds, last)
        if any(line.kind == DecisionKind.SIMULATION_LIMIT and line.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION
               for line in p.lines):  # karpy's stand-in for the 3-minute timeout
            self.metrics.consolidation_timeouts.labels(consolidation_type="single").inc()
        total, _ = disrupting_counts(p.snapshot)
        allowed: dict[tuple[str, ...], float] = {}
        for pool in p.snapshot.nodepool_views:
            name = pool.name
            for reason in DisruptionReason:
                try:  # the budget's allowance before the nodes already disrupting, as upstream's gauge
                    n = allowed_disruptions(pool.budgets, reason, p.now, total=total.get(name, 0), disrupting=0)
                except ValueError:
                    continue
                allowed[(name, reason.value)] = float(max(n, 0))
        self.metrics.nodepools_allowed_disruptions.replace(allowed)
        fingerprint = tuple(sorted((name, id(types)) for name, types in p.instance_types.items()))
        if fingerprint != self._offerings_seen:  # the provider's lists are cached per NodePool version: rebuild when they change
            self._offerings_seen = fingerprint
            seen: dict[str, Any] = {}
            for types in p.instance_types.values():
                for it in types:
                    seen.setdefault(it.name, it)
            self.metrics.observe_instance_types(seen.values())

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
        if kind == "Pod":
            self.metrics.observe_pod(ev.type, ev.object)
            uid = (ev.object.get("metadata") or {}).get("uid") or _pod_key(ev.object)
            if ev.type != "DELETED" and awaiting_scheduler(ev.object):
                self._unmarked.add(uid)
                self.batcher.trigger((uid, "arrived"))
            else:
                self._unmarked.discard(uid)
                if ev.type != "DELETED" and is_provisionable(ev.object):
                    self.batcher.trigger((uid, "unschedulable"))
        if kind in ("NodeClaim", "Node"):
            self._poke("lifecycle")
            self._poke("termination")
            self._poke("nodepool")
        if kind == "Pod" and ev.type == "DELETED":
            self._poke("termination")
        if kind == "NodePool":
            self._poke("nodepool")
        if kind in ("CapacityBuffer", "PodTemplate"):
            self._poke("capacitybuffer")
            self._poke("disruption")  # the headroom consolidation must keep changed
        if kind in ("NodePool", "NodeClaim"):
            self._poke("static")
        if kind == "NodePool" or kind.endswith("NodeClass"):
            self._poke("drift")
        if kind in ("NodeOverlay", "NodePool") or kind.endswith("NodeClass"):
            self._poke("nodeoverlay")
        if kind in ("NodeClaim", "Node") and ev.type == "DELETED":
            self._poke("disruption")  # a finished disruption frees its budget for the next command

    def _poke(self, name: str) -> None:
        ev = self._wake.get(name)
        if ev is not None:
            ev.set()

    async def _loop(self, name: str, step: Callable[[], Awaitable[Any]], due: Callable[[], float | None] | None = None) -> None:
        """Run ``step`` whenever the controller is poked, at the time ``due()`` names (epoch
        seconds on the operator's clock, e.g. the end of a disruption command's validation
        delay) and at least every ``resync_seconds``."""
        wake = self._wake.setdefault(name, asyncio.Event())
        while True:
            await asyncio.sleep(MIN_PASS_INTERVAL)  # a pass that wakes itself cannot spin the API server
            wake.clear()
            t0 = time.perf_counter()
            try:
                await step()
                self.metrics.observe_reconcile(_CONTROLLER_NAMES.get(name, name), time.perf_counter() - t0, error=False)
            except asyncio.CancelledError:
                raise
            except Exception:
                self.metrics.observe_reconcile(_CONTROLLER_NAMES.get(name, name), time.perf_counter() - t0, error=True)
                log.exception("reconcile failed; retrying")
                await asyncio.sleep(1.0)
            timeout = self.settings.resync_seconds
            at = due() if due is not None else None
            if at is not None:
                timeout = max(0.0, min(timeout, at - self.clock.now()))
            await wait_event(wake, timeout)

    async def _requeue_pending(self) -> None:
        await self.clock.sleep(PENDING_REQUEUE_SECONDS)
        self.batcher.trigger()

    async def _provisioning_loop(self) -> None:
        """Batches, then one provisioning pass each; while pods stay pending, another pass follows
        :data:`PENDING_REQUEUE_SECONDS` after the last (it re-nominates the nodes they wait for)."""
        requeue: asyncio.Task[None] | None = None
        try:
            while True:
                await self.batcher.wait()
                if requeue is not None:
                    requeue.cancel()
                    requeue = None
                pending = await self._provision_once()
                if pending:
                    requeue = asyncio.create_task(self._requeue_pending())
        finally:
            if requeue is not None:
                requeue.cancel()

    async def _provision_once(self) -> int:
        """One provisioning pass with its metrics, logs and events; returns the number of
        provisionable pods it saw."""
        t0 = time.perf_counter()
        try:
            result = await self.provisioner.reconcile()
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("provisioning failed; retrying at the next batch")
            await asyncio.sleep(1.0)
            self.batcher.trigger()
            return 0
        seconds = time.perf_counter() - t0
        self.metrics.observe_reconcile("provisioner", seconds, error=False)
        self.metrics.observe_scheduling("provisioner", uuid.uuid4().hex, seconds,
                                        result.results.errors if result.results is not None else ())
        if result.results is None:
            return result.pending
        for claim, plan in zip(result.created, result.results.new_claims, strict=False):
            if self.first_nodeclaim_at is None:
                self.first_nodeclaim_at = self.clock.now()
            pool = claim["metadata"]["labels"].get("karpenter.sh/nodepool", "")
            self.metrics.nodeclaims_created.labels(reason="provisioned", nodepool=pool, min_values_relaxed=_min_values_relaxed(claim)).inc()
            types = [it.name for it in plan.instance_types[:5]]
            await self.events.publish(
                claim, "Normal", "Provisioned",
                f"NodeClaim for {len(plan.pods)} pod(s); instance types (cheapest first): {', '.join(types)}",
            )
            for pod in [p for p in plan.pods if p.key in result.pods][:50]:  # not the CapacityBuffer virtual pods
                await self.events.record(karpenter_events.nominate_pod(
                    {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}},
                    nodeclaim=claim["metadata"]["name"]))
        for key, node in sorted(result.results.existing.items())[:100]:
            info = result.pods.get(key)
            ns, _, name = key.partition("/")
            await self.events.record(karpenter_events.nominate_pod(
                {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns, "uid": info.uid if info else None}},
                node=node))
        for key, reason in sorted(result.results.errors.items())[:100]:
            ns, _, name = key.partition("/")
            await self.events.record(karpenter_events.pod_failed_to_schedule(
                {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": name, "namespace": ns}}, str(reason)))
        for pool in result.no_instance_types:
            await self.events.record(karpenter_events.no_compatible_instance_types(pool))
        return result.pending

    def _cached(self, kind: str) -> dict[str, dict[str, Any]]:
        """name -> the cached object, read before a pass (so metrics keep the labels and timestamps
        of objects the pass removes)."""
        return {v.name: v.raw for v in self.kube.views(kind) or ()}

    async def _lifecycle_step(self) -> None:
        claims = self._cached("NodeClaim")
        for ev in await self.lifecycle.reconcile():
            nc = {"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1", "metadata": {"name": ev.nodeclaim}}
            if ev.kind == "launch":
                await self.events.publish(nc, "Normal", "Launched", launched_message(ev.details))
            elif ev.kind == "register":
                zone = ((claims.get(ev.nodeclaim) or {}).get("metadata", {}).get("labels") or {}).get(LABEL_ZONE, "")
                self.metrics.nodes_created.labels(nodepool=ev.details.get("nodepool", ""), zone=zone).inc()
                await self.events.publish(nc, "Normal", "Registered", f"Node {ev.node} registered")
            elif ev.kind == "initialize":
                await self.events.publish(nc, "Normal", "Initialized", f"Node {ev.node} initialized")
            elif ev.kind == "launch-failed":
                self.metrics.cloudprovider_errors.labels(
                    controller="nodeclaim.lifecycle", method="Create", provider=self.provider.name, error=ev.reason
                ).inc()
                await self.events.publish(nc, "Warning", "LaunchFailed", f"{ev.reason}: {ev.details.get('message', '')}")
            elif ev.kind in ("liveness-delete", "terminate"):
                claim = claims.get(ev.nodeclaim) or {"metadata": {"labels": {LABEL_NODEPOOL: ev.details.get("nodepool", "")}}}
                if ev.kind == "terminate":
                    self.metrics.observe_nodeclaim_terminated(claim, self.clock.now())
                else:
                    self.metrics.observe_disrupted("liveness", claim)
                await self.events.publish(nc, "Normal", "Terminated" if ev.kind == "terminate" else "LivenessDeleted", ev.reason)

    async def _termination_step(self) -> None:
        nodes = self._cached("Node")
        claims = self._cached("NodeClaim")
        for ev in await self.termination.reconcile():
            if ev.kind == "node-finalized":
                self.metrics.observe_node_terminated(nodes.get(ev.node) or {"metadata": {"name": ev.node}}, self.clock.now())
            elif ev.kind == "evict-blocked":
                self.metrics.pods_eviction_requests.labels(code="429").inc()
            elif ev.kind in ("evict", "force-delete"):
                if ev.kind == "evict":
                    self.metrics.pods_eviction_requests.labels(code="200").inc()
                self.metrics.pods_drained.labels(reason=_drain_reason(ev.node, claims)).inc()

    async def _claim(self, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get("NodeClaim", name)
        except KubeAPIError:
            return None

    async def _nodepool(self, name: str) -> dict[str, Any] | None:
        if not name:
            return None
        try:
            return await self.kube.get("NodePool", name)
        except KubeAPIError:
            return None

    async def _pool_of(self, nodeclaim: str) -> str:
        try:
            nc = await self.kube.get("NodeClaim", nodeclaim)
        except KubeAPIError:
            return ""
        return (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, "")

    async def _drift_step(self) -> None:
        """One drift pass: ``Drifted`` conditions, a ``karpenter_nodeclaims_drifted_total`` count
        and an event per newly drifted NodeClaim."""
        for ev in await self.drift.reconcile():
            if ev.kind != "drifted":
                continue
            self.metrics.nodeclaims_drifted.labels(type=ev.reason, nodepool=await self._pool_of(ev.nodeclaim)).inc()
            await self.events.publish({"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1", "metadata": {"name": ev.nodeclaim}},
                                      "Normal", "Drifted", ev.message or ev.reason)

    async def _repair_step(self) -> None:
        """One node-repair pass: ``karpenter_nodeclaims_disrupted_total{reason="unhealthy"}`` and a
        ``NodeRepair`` event per repaired node, ``NodeRepairBlocked`` on a NodePool past its 20% valve."""
        for ev in await self.repair.reconcile():
            if ev.kind == "repair":
                self.metrics.observe_disrupted("unhealthy", await self._claim(ev.nodeclaim)
                                               or {"metadata": {"labels": {LABEL_NODEPOOL: ev.nodepool}}})
                await self.events.publish({"kind": "Node", "apiVersion": "v1", "metadata": {"name": ev.node}},
                                          "Warning", "NodeRepair", f"deleting NodeClaim {ev.nodeclaim}: {ev.reason}")
            else:
                await self.events.publish({"kind": "NodePool", "apiVersion": "karpenter.sh/v1", "metadata": {"name": ev.nodepool}},
                                          "Warning", "NodeRepairBlocked", ev.reason)
                for node in filter(None, ev.node.split(",")):  # Karpenter's, on each unhealthy Node (node/health/events.go)
                    await self.events.record(*karpenter_events.node_repair_blocked(
                        {"kind": "Node", "metadata": {"name": node}}, None,
                        {"kind": "NodePool", "metadata": {"name": ev.nodepool}},
                        f"more than {UNHEALTHY_THRESHOLD_PERCENT}% nodes are unhealthy in the nodepool"))

    async def _disruption_step(self) -> None:
        """Expiration, then one disruption pass (polled every ``resync_seconds``, 10 s by default,
        and at the disruption controller's own next-due time). Deleted NodeClaims count in
        ``karpenter_nodeclaims_disrupted_total`` (reason ``expired``, ``empty``, ``drifted``,
        ``underutilized``) and get a ``DisruptionTerminating`` event."""
        for expired in await self.expiration.reconcile():
            self.metrics.observe_disrupted("expired", await self._claim(expired.nodeclaim))
            await self.events.publish({"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1", "metadata": {"name": expired.nodeclaim}},
                                      "Normal", "DisruptionTerminating", "Disrupting NodeClaim: Expired")
        for ev in await self.disruption.reconcile():
            if ev.kind in ("disrupt-decided", "disrupt", "disrupt-invalidated"):
                log.info(f"disruption {ev.kind.removeprefix('disrupt').lstrip('-') or 'started'}", extra=fields(
                    node=ev.node, nodeclaim=ev.nodeclaim or None, method=ev.details.get("method") or None,
                    reason=ev.details.get("summary") or ev.reason))
            if ev.kind == "disrupt":
                self.metrics.observe_disruption_decision(ev.details.get("method", ""), ev.details.get("decision", ""))
            elif ev.kind == "disrupt-invalidated":
                self.metrics.disruption_failed_validations.labels(
                    consolidation_type=CONSOLIDATION_TYPES.get(ev.details.get("method", ""), ("", ""))[1]).inc()
            if ev.kind == "delete":
                claim = await self._claim(ev.nodeclaim)
                pool = await self._nodepool(((claim or {}).get("metadata", {}).get("labels") or {}).get(LABEL_NODEPOOL, ""))
                self.metrics.observe_disrupted(ev.reason.lower(), claim, pool,
                                               consolidation=ev.details.get("method", "") != "drift")
            elif ev.kind == "replacement-create":
                self.metrics.nodeclaims_created.labels(reason=ev.reason.lower(), nodepool=ev.details.get("nodepool", ""),
                                                       min_values_relaxed=_min_values_relaxed(await self._claim(ev.nodeclaim))).inc()
            elif ev.kind == "disrupt-failed":
                log.warning("disruption abandoned", extra=fields(node=ev.node, nodeclaim=ev.nodeclaim or None, reason=ev.reason))

    async def _gc_loop(self) -> None:
        """Garbage collection every 2 minutes (Karpenter's steady cadence), first after 10 s."""
        await self.clock.sleep(10.0)
        while True:
            try:
                claims_before = self._cached("NodeClaim")
                leaked, orphaned = await self.gc.reconcile()
                for name in orphaned:
                    self.metrics.observe_disrupted("garbage_collected", claims_before.get(name))
                    await self.events.publish({"kind": "NodeClaim", "apiVersion": "karpenter.sh/v1", "metadata": {"name": name}},
                                              "Normal", "GarbageCollected", "the instance no longer exists")
                if leaked:
                    log.info("terminated leaked instances", extra={"provider-ids": list(leaked)})
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("garbage collection failed; retrying")
            await self.clock.sleep(120.0)

    async def _nodepool_step(self) -> None:
        await self.nodepool_status.reconcile()

    async def _overlay_step(self) -> None:
        """One NodeOverlay pass; when the overlaid prices or capacities change, provisioning runs
        again (pending pods may fit now) and consolidation re-evaluates (upstream marks the
        cluster unconsolidated)."""
        assert self.overlays is not None
        result = await self.overlays.reconcile()
        if result.changed:
            log.info("node overlays applied", extra={"applied": result.store.applied, "conflicts": result.store.conflicts,
                                                     "invalid": sorted(result.store.invalid)})
            self.batcher.trigger()
            self._poke("disruption")
    async def _buffer_step(self) -> None:
        """CapacityBuffer status, then a provisioning pass while some buffer is ready (its headroom
        is re-placed: a real pod that took it makes a new node), every 30 s as upstream requeues."""
        assert self.buffer_status is not None
        self._buffer_due = self.clock.now() + CAPACITY_BUFFER_REQUEUE
        if await self.buffer_status.reconcile():
            self.batcher.trigger()

    async def _static_step(self) -> None:
        """Scale static NodePools to ``spec.replicas`` (Karpenter ``static.provisioning`` and
        ``static.deprovisioning``)."""
        if self.static is None:
            return
        for ev in await self.static.reconcile():
            if ev.kind == "nodeclaim-create":  # Karpenter's static provisioner counts them as "provisioned"
                self.metrics.nodeclaims_created.labels(reason="provisioned", nodepool=ev.nodepool, min_values_relaxed="false").inc()

    # ---- running ------------------------------------------------------------------------------
    async def _lead(self) -> None:
        self.metrics.leader.set(1)
        self.metrics.leader_status.labels(name=self.settings.leader.lease_name).set(1)
        self.kube.on_change(self._on_change)
        await self.kube.start()
        log.info("caches synced; starting controllers")
        self.started = True
        if self.overlays is not None:  # overlays are evaluated before the first provisioning pass
            try:
                await self._overlay_step()
            except Exception:
                log.exception("node overlay evaluation failed; retrying in its loop")
        self.batcher.trigger()  # pending pods that existed before we started
        tasks = [
            spawn(self._provisioning_loop(), name="provisioner"),
            spawn(self._loop("lifecycle", self._lifecycle_step), name="nodeclaim.lifecycle"),
            spawn(self._loop("termination", self._termination_step, lambda: self.termination.wake), name="node.termination"),
            spawn(self._loop("nodepool", self._nodepool_step), name="nodepool.status"),
            *([spawn(self._loop("nodeoverlay", self._overlay_step), name="nodeoverlay.controller")] if self.overlays else []),
            *([spawn(self._loop("capacitybuffer", self._buffer_step, lambda: self._buffer_due), name="capacitybuffer")]
              if self.buffer_status is not None else []),
            *([spawn(self._loop("static", self._static_step), name="static.provisioning")] if self.static is not None else []),
            *([spawn(self._loop("health", self._repair_step), name="node.health")] if self.settings.node_repair else []),
            spawn(self._loop("drift", self._drift_step, self.drift.next_due), name="nodeclaim.disruption.drift"),
            spawn(self._loop("disruption", self._disruption_step, self.disruption.next_due), name="disruption"),
            spawn(self._gc_loop(), name="nodeclaim.garbagecollection"),
        ]
        for name, loop in self.provider.controllers():
            tasks.append(spawn(loop(), name=name))
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
