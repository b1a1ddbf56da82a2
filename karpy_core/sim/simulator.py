"""The simulator: karpy's real controllers running against an in-memory cluster on a virtual clock.

The controllers are the operator's: built by
:func:`~karpy_core.controllers.wiring.build_controllers` and reached only through
:meth:`~karpy_core.controllers.wiring.Controllers.schedule`, whose entries :meth:`Simulator.step`
runs in the schedule's order. Around them, simulator-only "cluster" actors stand in for what a
real cluster has: the workload controllers (:mod:`karpy_core.sim.workloads`), kube-scheduler and
the kubelets (:mod:`karpy_core.sim.kubelet`), and the simulated cloud's NodeClass status loop.

One step:

1. workloads -> pods; the simulated kube-scheduler binds what fits and marks the rest Unschedulable;
2. each entry of the schedule, in order: NodePool status (``Ready`` gates provisioning), the
   NodeOverlay controller (gate ``NodeOverlay``; when a NodeOverlay or NodePool spec changed),
   CapacityBuffer status (gate ``CapacityBuffer``), static capacity (gate ``StaticCapacity``);
   the provisioner, when the pending set or the cluster changed since its last pass, after the
   batch idle window for pods new to the set; the NodeClaim lifecycle, before and after the
   simulated kubelets (launch, then register and initialise the Nodes they create); node
   termination; node repair; with ``disruption=True``, drift and then expiration with the
   disruption pass, polled every 10 s of simulated time but only when the cluster changed since
   the last poll or the disruption controller asked to be woken (validation delay over, a node
   turning consolidatable, a budget window edge, an expiry); garbage collection. An entry without
   a rule of its own here (a controller added to the schedule) runs ``first_delay`` after the
   start, then every ``resync_seconds`` (:data:`RESYNC_SECONDS` when None) or at its
   ``next_due``, as the operator's loop runs it.

When nothing changes, the clock jumps to the next scheduled thing (a node finishing its boot, a
startup taint clearing, a disruption wake-up, a controller's ``next_due``); periodic resyncs alone
do not keep a run going; with nothing scheduled the run is over.
``cost_over_time`` samples ``{t, nodes, cost_per_hour}`` whenever the node set changes;
``timeline`` samples, whenever the cluster changed, per NodePool nodes, USD/hour (by capacity
type), requested and allocatable cpu and memory, and the pending pods (:meth:`Simulator._sample_timeline`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.simulated import SimulatedProvider
from karpy_core.controllers.base import Controller, Runnable
from karpy_core.controllers.capacitybuffer import CapacityBufferStatus
from karpy_core.controllers.disruption.controller import Disruption
from karpy_core.controllers.disruption.expiration import Expiration
from karpy_core.controllers.instancetypes import InstanceTypeCache
from karpy_core.controllers.node.health import NodeRepair
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.controllers.nodeclaim.drift import NodeClaimDrift
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.controllers.nodeclaim.lifecycle import LifecycleEvent, LifecycleEventKind, NodeClaimLifecycle
from karpy_core.controllers.nodeoverlay import NodeOverlayController
from karpy_core.controllers.nodepool_status import NodePoolStatus
from karpy_core.controllers.provisioning.controller import ProvisionerTrigger
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.controllers.static.controller import StaticCapacity, StaticEvent, StaticEventKind
from karpy_core.controllers.wiring import ControllerContext, DisruptionLoop, Schedule, Scheduled, build_controllers
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import KINDS, serve_plugin_node_classes
from karpy_core.scheduling.resources import parse_resource_list
from karpy_core.sim.kubelet import KubeletSimulator, KubeSchedulerSimulator
from karpy_core.sim.progress import NO_PROGRESS, Progress, SimulatedTimeProgress, count_pods
from karpy_core.sim.workloads import DEFAULT_MAX_PODS, WorkloadSimulator
from karpy_core.state.cluster import is_managed
from karpy_core.state.nominations import Nominations, nomination_window
from karpy_core.state.views import NodeClaimView, NodePoolView, PodView, condition_of
from karpy_core.utils.clock import VirtualClock

__all__ = ["Simulator", "SimEvent", "SIMULATED_KINDS", "is_simulated"]

SIMULATED_KINDS = frozenset(KINDS)
"""Kinds the in-memory cluster stores; other kinds in the input are ignored (and reported)."""


def poll_tick(start: float, t: float, period: float = 10.0) -> float:
    """The first poll time at or after ``t`` (epoch seconds) on a ``period``-second grid starting at ``start``."""
    return start + math.ceil(round((t - start) / period, 9)) * period


def is_simulated(api_version: Any, kind: Any) -> bool:
    """True when the in-memory cluster stores objects of this ``apiVersion``/``kind``: the kind is
    in :data:`SIMULATED_KINDS` *and* the apiVersion is the one it is served at. A
    ``example.com/v1 NodePool`` is someone else's kind: ignored (and reported), as ``karpy
    validate`` lists it, never stored as a karpenter.sh NodePool."""
    info = KINDS.get(kind) if isinstance(kind, str) else None
    return info is not None and api_version == info.api_version


MIB = 1024 * 1024
"""Bytes per MiB (memory in the timeline is in MiB)."""
BATCH_IDLE_SECONDS = 1.0
"""Provisioning batch idle window (Karpenter ``BATCH_IDLE_DURATION``, 1 s)."""
BATCH_MAX_SECONDS = 10.0
"""Provisioning batch maximum (Karpenter ``BATCH_MAX_DURATION``, 10 s)."""
DISRUPTION_POLL_SECONDS = 10.0
"""Disruption controller poll period (Karpenter: 10 s)."""
RESYNC_SECONDS = 10.0
"""How often an entry of the schedule without ``resync_seconds`` of its own runs without a change
(the operator's ``resync_seconds`` default, 10 s)."""


_RULED = (NodePoolStatus, NodeOverlayController, CapacityBufferStatus, StaticCapacity, ProvisionerTrigger, NodeClaimLifecycle,
          NodeTermination, NodeClaimDrift, DisruptionLoop)
"""The schedule entries :meth:`Simulator.step` has a rule of its own for; the others run periodically."""


@dataclass
class SimEvent:
    """One thing that happened, at ``t`` seconds since the simulation start."""

    t: float
    kind: str
    nodeclaim: str = ""
    node: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 3), "kind": self.kind, "nodeclaim": self.nodeclaim, "node": self.node,
                "reason": self.reason, "details": self.details}


class Simulator:
    """Runs karpy on an in-memory cluster.

    Args:
        provider: the cloud provider (normally ``simulated``; ``karpy simulate --cloud-provider``
            loads any installed one).
        clock: virtual clock (a fresh one by default).
        cluster: the in-memory cluster to run on (a fresh one on ``clock`` by default); pass it
            when the provider was given it as its ``kube`` option.
        boot_seconds: launch -> Node registration delay, seconds.
        startup_taint_seconds: registration -> startup taints removed, seconds.
        max_pods: most pods the workloads may ask for in all
            (:data:`~karpy_core.sim.workloads.DEFAULT_MAX_PODS`); :meth:`step` raises
            :class:`~karpy_core.errors.ManifestError` naming the workload beyond it.
        feature_gates: Karpenter's feature gates (karpy's defaults when None).
        min_values_policy: ``MIN_VALUES_POLICY`` (``Strict`` or ``BestEffort``).
        batch_idle_seconds: ``BATCH_IDLE_DURATION``: the clock advances this much (at most
            ``batch_max_seconds``) before a provisioning pass that has new pending pods.
        batch_max_seconds: ``BATCH_MAX_DURATION``: sets the node nomination window
            (:func:`~karpy_core.state.nominations.nomination_window`).
        progress: told the phases of :meth:`run` (creating pods and kube-scheduler's binds,
            counted; provisioning, launching, disruption passes; :mod:`karpy_core.sim.progress`).
        kube_scoring: the kube-scheduler stand-in's placement
            (:class:`~karpy_core.sim.kubelet.KubeSchedulerSimulator` ``scoring``): None (the
            default) first fit by node name; ``"first"``/``"last"`` kube-scheduler's default
            scores, ties to the first/last node by name.
    """

    def __init__(
        self,
        provider: CloudProvider,
        *,
        clock: VirtualClock | None = None,
        cluster: InMemoryCluster | None = None,
        boot_seconds: float = 30.0,
        startup_taint_seconds: float = 10.0,
        preference_policy: str = "Respect",
        disruption: bool = False,
        max_pods: int = DEFAULT_MAX_PODS,
        feature_gates: FeatureGates | None = None,
        min_values_policy: str = "Strict",
        batch_idle_seconds: float = BATCH_IDLE_SECONDS,
        batch_max_seconds: float = BATCH_MAX_SECONDS,
        progress: Progress = NO_PROGRESS,
        kube_scoring: str | None = None,
    ):
        self.clock = clock or VirtualClock()
        self.start = self.clock.now()
        self.progress: Progress = SimulatedTimeProgress(progress, lambda: self.clock.now() - self.start)
        """The run's phases, each after its simulated time (the report's own phases go to ``progress``
        as given: :attr:`report_progress`)."""
        self.report_progress = progress
        self.feature_gates = feature_gates or FeatureGates()
        """``FEATURE_GATES`` for this run (``karpy simulate --feature-gates``, a scenario's
        ``featureGates``): the controllers below take them as the controller's do."""
        self.provider = provider
        if cluster is None:
            serve_plugin_node_classes()
            cluster = InMemoryCluster(self.clock)
        self.cluster = cluster
        # a plugin built without a kube client reads its NodeClasses from this cluster; the rest of
        # an earlier context (a test's Operator: its metrics registry) is kept
        provider.prepare(dataclasses.replace(provider.context, kube=self.cluster, feature_gates=self.feature_gates,
                                             clock=self.clock, simulation=True))
        plugin = provider.plugin
        self._nodeclasses = plugin if isinstance(plugin, SimulatedProvider) else None
        """The simulated cloud's NodeClass status loop, run each step (NodeClassReady needs their Ready)."""
        self.workloads = WorkloadSimulator(self.cluster, max_pods=max_pods, progress=self.progress)
        self.kubelet = KubeletSimulator(self.cluster, self.clock, boot_seconds=boot_seconds, startup_taint_seconds=startup_taint_seconds)
        self.batch_idle_seconds = batch_idle_seconds
        self.batch_max_seconds = batch_max_seconds
        self.nominations = Nominations(nomination_window(batch_max_seconds))
        self.kube_scheduler = KubeSchedulerSimulator(self.cluster, planned=self.nominations.planned_pods, progress=self.progress,
                                                     scoring=kube_scoring)
        self.controllers = build_controllers(ControllerContext(
            kube=self.cluster, provider=provider, clock=self.clock, feature_gates=self.feature_gates, nominations=self.nominations,
            preference_policy=preference_policy, min_values_policy=min_values_policy, unreported_is_ready=True))
        """Every controller, built as the operator builds them (no EventRecorder, no metrics)."""
        self.schedule: Schedule = self.controllers.schedule()
        """What :meth:`step` runs, in order: the operator's schedule (:meth:`Controllers.schedule`)."""
        self.disruption_enabled = disruption
        """Run drift, expiration and disruption (off: a provisioning-only run)."""
        self.driven: set[str] = set()
        """The names of the schedule's controllers :meth:`step` has run a pass of."""
        self._due: dict[str, float] = {}
        """Controller name -> when its next periodic pass is due (entries without a rule of their own)."""
        self._buffered = 0
        """Ready CapacityBuffers seen by this step's CapacityBuffer status pass (headroom to provision)."""
        self._polling: bool | None = None
        """This step's disruption poll decision (None: not taken yet), shared by drift and disruption."""
        self._types = InstanceTypeCache(provider, self.clock, refresh_seconds=None)
        """The NodePools' instance types, for the prices of the launched NodeClaims."""
        self._overlay_inputs: Any = None
        self._disruption_rv: int | None = None
        self._pending_keys: frozenset[str] = frozenset()
        self._provisioned: tuple[frozenset[str], int] | None = None
        self._next_poll = self.start
        self._seen: set[tuple[str, str, str]] = set()
        self._draining: set[str] = set()
        self.cost_over_time: list[dict[str, Any]] = []
        self.timeline: list[dict[str, Any]] = []
        """Scenario runs: ``[{t, pending_pods, nodepools: {name: {nodes, cost_per_hour,
        cost_by_capacity_type: {type: USD/hour}, cpu_requested, cpu_allocatable (cores),
        memory_requested_mib, memory_allocatable_mib}}}]``, one sample each time it changed."""
        self._timeline_rev: int | None = None
        self._prices: dict[tuple[str, str, str, str], float] = {}
        self.events: list[SimEvent] = []
        self.pending_reasons: dict[str, str] = {}
        self.placed_existing: dict[str, str] = {}
        """Per pod (``ns/name``): the existing node (or in-flight NodeClaim) the last provisioning
        pass counted it on (:attr:`SchedulingResults.existing`), so launched nothing for it."""
        self.given: dict[str, set[str]] = {"Node": set(), "NodeClaim": set()}
        """The names of the Nodes and NodeClaims :meth:`apply` created (the inputs: capacity that
        existed before the run, not launched by karpy; the report tells them apart)."""
        self.explanations: dict[str, list[str]] = {}
        """Per pending pod (``ns/name``): the detailed explanation of the last provisioning pass."""

    # the controllers by role, each from :attr:`controllers` (the report and the tests read them)
    @property
    def provisioner(self) -> Provisioner:
        """The provisioner's deciding-and-creating pass."""
        return self.controllers.provisioner

    @property
    def lifecycle(self) -> NodeClaimLifecycle:
        """The NodeClaim lifecycle controller."""
        return self.controllers.lifecycle

    @property
    def termination(self) -> NodeTermination:
        """The node termination controller."""
        return self.controllers.termination

    @property
    def disruption(self) -> Disruption:
        """The disruption controller (its decision log: ``--explain-node``)."""
        return self.controllers.disruption

    @property
    def expiration(self) -> Expiration:
        """The expiration controller."""
        return self.controllers.expiration

    @property
    def drift(self) -> NodeClaimDrift:
        """The drift controller."""
        return self.controllers.drift

    @property
    def nodepool_status(self) -> NodePoolStatus:
        """The NodePool status controller."""
        return self.controllers.nodepool_status

    @property
    def static(self) -> StaticCapacity | None:
        """Static NodePools' node counts (the StaticCapacity gate), as in the controller."""
        return self.controllers.static

    @property
    def overlays(self) -> NodeOverlayController | None:
        """The NodeOverlay controller (gate ``NodeOverlay``); None: NodeOverlay objects are stored but ignored."""
        return self.controllers.overlays

    @property
    def buffer_status(self) -> CapacityBufferStatus | None:
        """The CapacityBuffer status controller (only with the CapacityBuffer gate)."""
        return self.controllers.buffer_status

    def apply(self, objects: list[dict[str, Any]]) -> list[str]:
        """Create objects (Kubernetes dicts) in the cluster; returns ``kind/name`` of those ignored
        because the simulator does not model their ``apiVersion``/``kind`` (:func:`is_simulated`;
        an object without ``apiVersion`` is taken to be at its kind's served version)."""
        ignored = []
        nodes = {n["metadata"]["name"] for n in self.cluster.snapshot("Node")}
        nodes.update(str((o.get("metadata") or {}).get("name")) for o in objects if o.get("kind") == "Node")
        for obj in objects:
            kind = obj.get("kind", "")
            if not is_simulated(obj.get("apiVersion", KINDS[kind].api_version if kind in KINDS else None), kind):
                ignored.append(f"{kind}/{(obj.get('metadata') or {}).get('name', '')}")
                continue
            if kind == "Pod" and (obj.get("spec") or {}).get("nodeName") not in nodes:  # unbound, or bound to no Node: no kubelet
                obj = {**obj, "status": {"phase": "Pending"}}
            elif kind == "Pod" and not obj.get("status"):  # bound, and its kubelet runs it: Ready
                obj = {**obj, "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                                            {"type": "Ready", "status": "True"}]}}
            created = self.cluster.create_sync(kind, obj)
            if kind in self.given:
                self.given[kind].add(created["metadata"]["name"])
        return ignored

    async def refresh_status(self) -> None:
        """Mark the simulated cloud's NodeClasses Ready, write the NodePools' status and apply the
        NodeOverlays (gate on), as the first :meth:`step` does: for a caller that plans before
        stepping (``--from-cluster``'s pass at the live instant and its cost now)."""
        if self._nodeclasses is not None:
            await self._nodeclasses.reconcile_nodeclasses()
        await self.nodepool_status.reconcile()
        if self.overlays is not None:
            await self._reconcile_overlays(self.overlays)

    def enable_disruption(self) -> None:
        """Turn disruption on from now: the next :meth:`step` runs a disruption pass (a run
        that provisioned first, without disruption, then consolidates)."""
        self.disruption_enabled = True
        self._next_poll = self.clock.now()

    def _record(self, events: list[LifecycleEvent]) -> None:
        t = self.clock.now() - self.start
        for e in events:
            self.events.append(SimEvent(t, e.kind, e.nodeclaim, e.node, e.reason, dict(e.details)))

    def _record_static(self, events: list[StaticEvent]) -> int:
        """Record the static capacity controller's events; returns how many changed the cluster."""
        t = self._t()
        n = 0
        for e in events:
            self.events.append(SimEvent(t, e.kind, e.nodeclaim, reason=e.reason, details={"nodepool": e.nodepool, **e.details}))
            n += e.kind is not StaticEventKind.STATIC_LIMIT
        return n

    def last_price(self, labels: dict[str, str]) -> float | None:
        """The price (USD/hour) the cost series last knew for a launched node or NodeClaim with
        ``labels`` (NodePool, instance type, zone, capacity type), or None. It outlives the
        NodePool's instance types: once a step deletes a plugin's NodeClass, the provider lists no
        types for it, yet its running nodes are still billed (trial 22: the node table priced them
        ``-`` and totalled 0.0000 beside a summary billing 0.2000 USD/hour)."""
        return self._prices.get((labels.get(LABEL_NODEPOOL, ""), labels.get(LABEL_INSTANCE_TYPE, ""),
                                 labels.get(LABEL_ZONE, ""), labels.get(LABEL_CAPACITY_TYPE, "")))

    def _t(self) -> float:
        return self.clock.now() - self.start

    def _record_termination(self, events: list[Any]) -> int:
        t = self._t()
        n = 0
        for e in events:
            if e.node not in self._draining and e.kind != "node-finalized":
                self._draining.add(e.node)
                self.events.append(SimEvent(t, "drain", node=e.node, reason="node deleted"))
            if e.kind in ("drain-wait", "evict-blocked"):
                if (e.kind, e.node, e.pod) in self._seen:
                    continue
                self._seen.add((e.kind, e.node, e.pod))
            else:
                n += 1
            if e.kind == "node-finalized":
                self._draining.discard(e.node)
            self.events.append(SimEvent(t, e.kind, node=e.node, reason=e.reason, details={"pod": e.pod} if e.pod else {}))
        return n

    def _disruption_due(self) -> float | None:
        """When the disruption controller should run next, on its 10 s poll grid, or None."""
        if not self.disruption_enabled:
            return None
        now = self.clock.now()
        if self._disruption_rv != self.cluster.revision:
            return max(self._next_poll, poll_tick(self.start, now, DISRUPTION_POLL_SECONDS))
        due = self.disruption.next_due()
        if due is None:
            return None
        return max(self._next_poll, poll_tick(self.start, due, DISRUPTION_POLL_SECONDS))

    def _poll(self) -> bool:
        """Whether drift and disruption run in this step: decided once per step, by the first of
        them, on the disruption controller's 10 s poll grid (:meth:`_disruption_due`)."""
        if self._polling is None:
            due = self._disruption_due()
            self._polling = due is not None and self.clock.now() >= due
        return self._polling

    async def _drift(self, drift: NodeClaimDrift) -> int:
        """The drift pass of a disruption poll; records each condition it changed."""
        if not self._poll():
            return 0
        self.driven.add(drift.name)
        t = self._t()
        changes = 0
        for drifted in await drift.reconcile():
            self.events.append(SimEvent(t, drifted.kind, drifted.nodeclaim, reason=drifted.reason,
                                        details={"message": drifted.message} if drifted.message else {}))
            changes += 1
        return changes

    async def _disrupt(self, loop: DisruptionLoop) -> int:
        """Expiration and the disruption pass of a disruption poll (the operator's
        :class:`~karpy_core.controllers.wiring.DisruptionLoop`); records what each did and sets
        the next poll."""
        if not self._poll():
            return 0
        self.driven.add(loop.name)
        t = self._t()
        self.progress.phase("disruption: expiry, drift, consolidation")
        done = await loop.reconcile()
        for expired in done.expired:
            self.events.append(SimEvent(t, expired.kind, expired.nodeclaim, reason=expired.reason))
        for e in done.events:
            self.events.append(SimEvent(t, e.kind, e.nodeclaim, e.node, e.reason, dict(e.details)))
        self._disruption_rv = self.cluster.revision
        self._next_poll = poll_tick(self.start, self.clock.now() + DISRUPTION_POLL_SECONDS, DISRUPTION_POLL_SECONDS)
        return len(done.expired) + len(done.events)

    async def _sample_cost(self) -> None:
        """Append ``{t, nodes, cost_per_hour}`` to :attr:`cost_over_time` when it changed."""
        managed = self.provider.managed_node_classes()
        for pool in self.cluster.views("NodePool") or ():
            assert isinstance(pool, NodePoolView)
            if not is_managed(pool, managed):  # launches nothing: its NodeClass kind is not the provider's to price
                continue
            kept, fetched = await self._types.get(pool)  # overlaid prices with NodeOverlay on
            if not fetched:
                continue
            for it in kept.types:
                for o in it.offerings:
                    self._prices[(pool.name, it.name, o.zone, o.capacity_type)] = o.price
        nodes = 0
        cost = 0.0
        for nc in self.cluster.snapshot("NodeClaim"):
            labels = nc["metadata"].get("labels") or {}
            if not (nc.get("status") or {}).get("providerID"):
                continue
            nodes += 1
            cost += self._prices.get((labels.get("karpenter.sh/nodepool", ""), labels.get("node.kubernetes.io/instance-type", ""),
                                      labels.get("topology.kubernetes.io/zone", ""),
                                      labels.get("karpenter.sh/capacity-type", "")), 0.0)
        sample = {"t": round(self._t(), 3), "nodes": nodes, "cost_per_hour": round(cost, 6)}
        last = self.cost_over_time[-1] if self.cost_over_time else None
        if last is None or (last["nodes"], last["cost_per_hour"]) != (nodes, sample["cost_per_hour"]):
            if last is not None and last["t"] == sample["t"]:
                self.cost_over_time[-1] = sample
            else:
                self.cost_over_time.append(sample)

    async def _reconcile_overlays(self, overlays: NodeOverlayController) -> None:
        """Run the NodeOverlay controller when a NodeOverlay or NodePool spec changed (the
        controller's watch on both, ``GenerationChangedPredicate``), before provisioning."""
        inputs = tuple(sorted((kind, o["metadata"]["name"], o["metadata"].get("generation")) for kind in ("NodeOverlay", "NodePool")
                              for o in self.cluster.snapshot(kind)))
        if inputs == self._overlay_inputs:
            return
        self._overlay_inputs = inputs
        self.driven.add(overlays.name)
        await overlays.reconcile()

    def _sample_timeline(self) -> None:
        """Append a :attr:`timeline` sample when the cluster changed since the last one and the
        sample differs (same ``t``: the newer replaces it). Per NodePool (label
        ``karpenter.sh/nodepool``): launched NodeClaims (with a providerID) and their offering
        prices (USD/hour, split by ``karpenter.sh/capacity-type``); the Nodes' allocatable and the
        requests of the pods bound to them (DaemonSet pods included, as kube-scheduler counts
        them), cpu in cores and memory in MiB. ``pending_pods``: pods not bound to a node, not
        finished and not deleting."""
        if self._timeline_rev == self.cluster.revision:
            return
        self._timeline_rev = self.cluster.revision
        pools: dict[str, dict[str, Any]] = {}

        def pool_of(name: str) -> dict[str, Any]:
            return pools.setdefault(name, {"nodes": 0, "cost_per_hour": 0.0, "cost_by_capacity_type": {}, "cpu_requested": 0.0,
                                           "cpu_allocatable": 0.0, "memory_requested_mib": 0.0, "memory_allocatable_mib": 0.0})

        for nc in self.cluster.snapshot("NodeClaim"):
            labels = nc["metadata"].get("labels") or {}
            pool = labels.get(LABEL_NODEPOOL)
            if not pool or not (nc.get("status") or {}).get("providerID"):
                continue
            entry = pool_of(pool)
            ct = labels.get(LABEL_CAPACITY_TYPE, "")
            price = self._prices.get((pool, labels.get(LABEL_INSTANCE_TYPE, ""), labels.get(LABEL_ZONE, ""), ct), 0.0)
            entry["nodes"] += 1
            entry["cost_per_hour"] += price
            entry["cost_by_capacity_type"][ct] = entry["cost_by_capacity_type"].get(ct, 0.0) + price
        node_pool: dict[str, str] = {}
        for node in self.cluster.snapshot("Node"):
            pool = (node["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)
            if not pool:
                continue
            node_pool[node["metadata"]["name"]] = pool
            try:
                alloc = parse_resource_list((node.get("status") or {}).get("allocatable"))
            except ValueError:
                continue
            entry = pool_of(pool)
            entry["cpu_allocatable"] += alloc.get("cpu", 0) / 1000
            entry["memory_allocatable_mib"] += alloc.get("memory", 0) / MIB
        pending = 0
        for view in self.cluster.views("Pod") or ():
            assert isinstance(view, PodView)
            if view.terminal or view.deleting:
                continue
            if not view.node_name:
                pending += 1
                continue
            pool = node_pool.get(view.node_name)
            info = view.try_info() if pool else None
            if pool and info is not None:
                entry = pool_of(pool)
                entry["cpu_requested"] += info.requests.get("cpu", 0) / 1000
                entry["memory_requested_mib"] += info.requests.get("memory", 0) / MIB
        for entry in pools.values():
            entry["cost_per_hour"] = round(entry["cost_per_hour"], 6)
            entry["cost_by_capacity_type"] = {k: round(v, 6) for k, v in sorted(entry["cost_by_capacity_type"].items())}
            for k in ("cpu_requested", "cpu_allocatable"):
                entry[k] = round(entry[k], 3)
            for k in ("memory_requested_mib", "memory_allocatable_mib"):
                entry[k] = round(entry[k], 1)
        sample = {"t": round(self._t(), 3), "pending_pods": pending, "nodepools": dict(sorted(pools.items()))}
        last = self.timeline[-1] if self.timeline else None
        if last is not None and (last["pending_pods"], last["nodepools"]) == (pending, sample["nodepools"]):
            return
        if last is not None and last["t"] == sample["t"]:
            self.timeline[-1] = sample
        else:
            self.timeline.append(sample)

    async def step(self) -> int:
        """One pass of the simulated cluster actors and of every entry of :attr:`schedule`, in its
        order (see the module docstring); returns how many things changed."""
        changes = self.workloads.reconcile()
        changes += await self.kube_scheduler.reconcile()
        if self._nodeclasses is not None:
            await self._nodeclasses.reconcile_nodeclasses()
        self._buffered = 0
        self._polling = None
        for entry in self.schedule:
            changes += await self._drive(entry)
        if self.disruption_enabled:
            await self._sample_cost()
            self._sample_timeline()
        return changes

    async def _drive(self, entry: Scheduled) -> int:
        """Run one entry of the schedule by its rule (see the module docstring); returns how many
        things it changed.

        Raises:
            TypeError: ``entry`` is a :class:`~karpy_core.controllers.base.Runnable` (its own
                loop) the simulator has no rule for: it cannot be stepped.
        """
        if isinstance(entry, NodePoolStatus):  # NodeClassReady/Ready gate provisioning, as in the controller
            self.driven.add(entry.name)
            await entry.reconcile()
            return 0
        if isinstance(entry, NodeOverlayController):
            await self._reconcile_overlays(entry)
            return 0
        if isinstance(entry, CapacityBufferStatus):
            self.driven.add(entry.name)
            self._buffered = await entry.reconcile()
            return 0
        if isinstance(entry, StaticCapacity):
            self.driven.add(entry.name)
            return self._record_static(await entry.reconcile())
        if isinstance(entry, ProvisionerTrigger):
            return await self._provision(entry)
        if isinstance(entry, NodeClaimLifecycle):
            return await self._lifecycle(entry)
        if isinstance(entry, NodeTermination):
            self.driven.add(entry.name)
            return self._record_termination(await entry.reconcile())
        if isinstance(entry, NodeClaimDrift):
            return await self._drift(entry)
        if isinstance(entry, DisruptionLoop):
            return await self._disrupt(entry)
        if isinstance(entry, Controller):
            return await self._periodic(entry)
        assert isinstance(entry, Runnable)
        raise TypeError(f"the simulator cannot step {entry.name!r}: a controller with its own loop and no simulator rule")

    async def _provision(self, provisioning: ProvisionerTrigger) -> int:
        """A provisioning pass when the pending set or the cluster changed since the last one
        (see :meth:`step`); records the NodeClaims created and why pods stay pending."""
        pending = [v for v in self.cluster.views("Pod") or () if isinstance(v, PodView) and v.provisionable]  # is_provisionable
        keys = frozenset(f"{v.namespace}/{v.name}" for v in pending)
        # Provision when the pending set or the cluster changed since the last pass; only pods new
        # to the set wait out the batch window. A pod that can never schedule is then tried once
        # per cluster change, and neither burns a second per step nor pushes the disruption poll
        # off its 10 s grid (which froze consolidation, drift and expiration behind it).
        if (pending or self._buffered) and (keys, self.cluster.revision) != self._provisioned:  # buffers: headroom kept on every change
            if keys - self._pending_keys:
                # the batch closes once idle, or at its maximum (all pods arrive in one step here)
                self.clock.advance(min(self.batch_idle_seconds, self.batch_max_seconds))
            self._pending_keys = keys
            self.progress.phase(f"provisioning: {count_pods(len(pending))} pending")
            self.driven.add(provisioning.name)
            result = await provisioning.provisioner.reconcile()  # every batch planned whole (no streaming cut)
            if result.results is not None:
                self.pending_reasons = dict(result.results.errors)
                self.placed_existing = dict(result.results.existing)
                if result.scheduler is not None:
                    self.explanations = {
                        key: result.scheduler.explain_detail(result.pods[key]) for key in result.results.errors if key in result.pods
                    }
            t = self.clock.now() - self.start
            headroom: dict[int, int] = {}  # planned claim -> CapacityBuffer virtual pods it was launched for
            for place in result.buffers.values():
                for i in place.new.values():
                    headroom[i] = headroom.get(i, 0) + 1
            for i, nc in enumerate(result.created):
                details: dict[str, Any] = {"nodepool": nc["metadata"]["labels"].get("karpenter.sh/nodepool", "")}
                if headroom.get(i):
                    details["capacity_buffer_pods"] = headroom[i]
                self.events.append(SimEvent(t, "nodeclaim-create", nc["metadata"]["name"], reason="provisioning", details=details))
            self._provisioned = (keys, self.cluster.revision)
            return len(result.created)
        if not pending:
            self.pending_reasons = {}
            self.placed_existing = {}
            self._pending_keys = frozenset()
        return 0

    async def _lifecycle(self, lifecycle: NodeClaimLifecycle) -> int:
        """The lifecycle pass, the simulated kubelets, and the lifecycle pass again: launch, the
        kubelets register and initialise the Nodes, the lifecycle sees them. A pass whose NodeClaims
        failed (a cloud call raised; recorded, retried at the next pass) changed nothing: counted
        as a change it ran again at the same instant forever (a plugin's ``karpy_delete`` raising)."""
        # named for the controller (a pass that comes round, not a step in order), and only while a
        # NodeClaim is on its way in or out: "launching and registering nodes" after the pods were
        # bound read as a step back (trial 15)
        if any(isinstance(v, NodeClaimView) and (v.deleting or getattr(condition_of(v.conditions, "Initialized"), "status", "") != "True")
               for v in self.cluster.views("NodeClaim") or ()):
            self.progress.phase("NodeClaim lifecycle")
        self.driven.add(lifecycle.name)
        ev = await lifecycle.reconcile()
        self._record(ev)
        changes = _changed(ev) + self.kubelet.reconcile()
        ev = await lifecycle.reconcile()
        self._record(ev)
        return changes + _changed(ev)

    async def _periodic(self, controller: Controller) -> int:
        """A pass of ``controller`` when due, as the operator's loop runs it without a watch event:
        ``first_delay`` after the start, then ``resync_seconds`` (:data:`RESYNC_SECONDS` when None)
        after its last pass, or at its ``next_due``. Records what node repair and garbage
        collection did; another controller's result counts as that many changes when it is a list."""
        now = self.clock.now()
        due = self._due.setdefault(controller.name, self.start + controller.first_delay)
        asked = controller.next_due()
        if now < due and (asked is None or now < asked):
            return 0
        self.driven.add(controller.name)
        self._due[controller.name] = now + (controller.resync_seconds if controller.resync_seconds is not None else RESYNC_SECONDS)
        t = self._t()
        if isinstance(controller, NodeRepair):
            repairs = await controller.reconcile()
            for r in repairs:
                self.events.append(SimEvent(t, r.kind, r.nodeclaim, r.node, r.reason, {"nodepool": r.nodepool}))
            return len(repairs)
        if isinstance(controller, GarbageCollection):
            leaked, orphaned = await controller.reconcile()
            for pid in leaked:
                self.events.append(SimEvent(t, "garbage-collect-instance", reason="leaked instance", details={"providerID": pid}))
            for name in orphaned:
                self.events.append(SimEvent(t, "garbage-collect-nodeclaim", name, reason="its instance is gone"))
            return len(leaked) + len(orphaned)
        result = await controller.reconcile()
        return len(result) if isinstance(result, list) else 0

    def _periodic_dues(self) -> list[float]:
        """The ``next_due`` of every entry :meth:`_periodic` runs (their resyncs alone do not wake a run)."""
        return [at for entry in self.schedule
                if isinstance(entry, Controller) and not isinstance(entry, _RULED) and (at := entry.next_due()) is not None]

    async def run(self, *, max_seconds: float = 24 * 3600.0, max_steps: int = 10_000) -> None:
        """Step until nothing changes and nothing is scheduled, or ``max_seconds`` of simulated
        time pass."""
        for _ in range(max_steps):
            changes = await self.step()
            if changes:
                continue
            dues = [d for d in (self.kubelet.next_due(), self._disruption_due(), self.termination.wake, *self._periodic_dues())
                    if d is not None and d > self.clock.now()]
            due = min(dues) if dues else None
            if due is None or due - self.start > max_seconds:
                return
            self.clock.advance_to(due)

    async def run_until(self, end: float, *, max_steps: int = 1_000_000) -> None:
        """Step, jumping the clock to each next due event, until ``end`` (epoch seconds); the clock
        then stands at ``end``. Raises ``RuntimeError`` when the controllers keep changing the
        cluster without time passing (a bug: 2,000 steps at one instant)."""
        same_instant = 0
        last_now = self.clock.now()
        for _ in range(max_steps):
            changes = await self.step()
            now = self.clock.now()
            same_instant = same_instant + 1 if now == last_now else 0
            last_now = now
            if same_instant > 2000:
                raise RuntimeError(f"simulation makes no progress at t={now - self.start:.0f}s")
            if changes:
                continue
            dues = [d for d in (self.kubelet.next_due(), self._disruption_due(), self.termination.wake, *self._periodic_dues())
                    if d is not None and d > now]
            due = min(dues) if dues else None
            if due is None or due > end:
                self.clock.advance_to(end)
                return
            self.clock.advance_to(due)


_NO_PROGRESS = frozenset({LifecycleEventKind.RECONCILE_FAILED, LifecycleEventKind.LAUNCH_FAILED})
"""Lifecycle events that moved nothing forward: a failed pass, a create the cloud refused (its
retry waits for the next pass, as controller-runtime's requeue backs off, not the same instant)."""


def _changed(events: list[LifecycleEvent]) -> int:
    """How many of a lifecycle pass's ``events`` changed the cluster (:data:`_NO_PROGRESS` did not)."""
    return sum(1 for e in events if e.kind not in _NO_PROGRESS)
