"""One place that builds every acting controller, for the controller (``karpy_core/operator.py``)
and the simulator (``karpy_core/sim/simulator.py``) alike.

:func:`build_controllers` takes one :class:`ControllerContext` (the cluster, the cloud provider,
the clock, the feature gates, where events and metrics go, the shared nominations and
registration outcomes) and returns :class:`Controllers`: each controller by role, and
:meth:`Controllers.schedule`, the one :class:`Schedule` of what runs, gated as Karpenter gates
them (``NodeOverlay``, ``CapacityBuffer``, ``StaticCapacity``, ``NodeRepair``). The operator
spawns each entry of the schedule (Karpenter's ``pkg/controllers/controllers.go`` list); the
simulator steps the same entries, in the schedule's order, on its virtual clock
(``Simulator.step``): a controller added to the schedule runs in both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.base import Controller, Runnable, Wake, Waker
from karpy_core.controllers.capacitybuffer import CapacityBufferStatus
from karpy_core.controllers.disruption.controller import Disruption, DisruptionEvent, DisruptionSettings
from karpy_core.controllers.disruption.expiration import Expiration, ExpirationEvent
from karpy_core.controllers.metrics.pod import PodMetrics
from karpy_core.controllers.node.health import NodeRepair
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.controllers.nodeclaim.drift import NodeClaimDrift
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.controllers.nodeoverlay import NodeOverlayController
from karpy_core.controllers.nodepool_status import NodePoolStatus, RegistrationHealth
from karpy_core.controllers.provisioning.batcher import BatchWindow
from karpy_core.controllers.provisioning.controller import ProvisionerTrigger
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.controllers.static.controller import StaticCapacity
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.state.nominations import Nominations
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import Clock

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["ControllerContext", "Controllers", "DisruptionLoop", "DisruptionLoopResult", "ProviderLoop", "Schedule", "Scheduled",
           "build_controllers"]


@dataclass(frozen=True)
class _Window:
    idle_seconds: float = 1.0
    max_seconds: float = 10.0


@dataclass
class ControllerContext:
    """What every controller is built from.

    Attributes:
        kube: the cluster (the operator's informer-cached client, or the in-memory cluster).
        provider: the cloud provider.
        clock: real or virtual.
        feature_gates: ``FEATURE_GATES``.
        nominations: the provisioner's nominations, shared with disruption.
        events: where Kubernetes Events go; None (the simulator): none published.
        metrics: the Prometheus metrics; None (the simulator): none counted.
        registration: launch outcomes shared by lifecycle and NodePool status; None: not recorded
            (the simulator: NodePool status keeps its own, empty).
        waker: lets one controller wake another (the operator registers each controller's wake-up).
        batch: the provisioning batch window (``idle_seconds``, ``max_seconds``).
        preference_policy: ``Respect`` or ``Ignore``.
        min_values_policy: ``Strict`` or ``BestEffort``.
        disruption: the disruption controller's settings (minimum savings, ...).
        node_repair: run node repair (Karpenter's ``NodeRepair`` gate, overridable by the setting).
        unreported_is_ready: NodePool status counts a NodeClass without ``Ready`` as Ready (the
            simulator, which runs no provider's NodeClass status controller).
        sync: the synced-before-acting gate of provisioning, disruption (with expiration), static
            capacity and garbage collection; None: one over ``kube`` (the in-memory cluster is
            always synced).
    """

    kube: KubeClient
    provider: CloudProvider
    clock: Clock
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    nominations: Nominations = field(default_factory=Nominations)
    events: EventRecorder | None = None
    metrics: Metrics | None = None
    registration: RegistrationHealth | None = None
    waker: Waker = field(default_factory=Waker)
    batch: BatchWindow = field(default_factory=_Window)
    preference_policy: str = "Respect"
    min_values_policy: str = "Strict"
    disruption: DisruptionSettings = field(default_factory=DisruptionSettings)
    node_repair: bool = True
    unreported_is_ready: bool = False
    sync: ClusterSync | None = None
    dry_run: bool = False
    """``karpy controller --dry-run``: provisioning, disruption, expiration and garbage collection
    decide and report what they would do (their ``dry_run``); drift, termination and node repair
    run against the dry-run client (:class:`~karpy_core.kube.dryrun.DryRunKubeClient`: their
    writes are withheld and logged) without Karpenter's metrics of acts; the NodeClaim lifecycle
    (launches) is not run."""


class DisruptionLoop:
    """The operator's ``disruption`` controller: expiration, then one disruption pass (Karpenter
    runs expiration as its own controller; one loop keeps a deletion and the next plan ordered).
    Woken by CapacityBuffer/PodTemplate changes (the headroom consolidation must keep) and by
    deleted NodeClaims and Nodes (a finished disruption frees its budget for the next command)."""

    name = "disruption"
    wakes_on = (Wake.on("CapacityBuffer", "PodTemplate"), Wake.on("NodeClaim", "Node", types=("DELETED",)))
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, expiration: Expiration, disruption: Disruption):
        self.expiration = expiration
        self.disruption = disruption

    def next_due(self) -> float | None:
        """The disruption controller's next due time (validation delay, budget edge, expiry)."""
        return self.disruption.next_due()

    async def reconcile(self) -> DisruptionLoopResult:
        """Delete expired NodeClaims, then one disruption pass; returns what each did (the
        simulator records both). Neither runs while the cluster state is not synced (the
        disruption's gate)."""
        if not self.disruption.sync.ready(self.name):
            return DisruptionLoopResult()
        expired = await self.expiration.reconcile()
        return DisruptionLoopResult(expired, await self.disruption.reconcile())


@dataclass(frozen=True)
class DisruptionLoopResult:
    """One :meth:`DisruptionLoop.reconcile`: the NodeClaims expiration deleted, then what the
    disruption pass did."""

    expired: list[ExpirationEvent] = field(default_factory=list)
    events: list[DisruptionEvent] = field(default_factory=list)


class ProviderLoop:
    """A cloud provider's background controller (``karpy_controllers`` hook) as a :class:`Runnable`."""

    wakes_on: tuple[Wake, ...] = ()

    def __init__(self, name: str, loop: Callable[[], Awaitable[None]]):
        self.name = name
        self._loop = loop

    async def run(self) -> None:
        """The provider's loop."""
        await self._loop()

    def trigger(self) -> None:
        """Provider loops run on their own schedule."""


Scheduled: TypeAlias = Controller | Runnable
"""One entry of a :class:`Schedule`: a controller the runner calls (``reconcile``) or one with its
own loop (``run``; the provisioner's batch window)."""


@dataclass(frozen=True)
class Schedule:
    """What runs, in order: the operator's start order and the simulator's step order
    (:meth:`Controllers.schedule`). Iterating yields the entries."""

    entries: tuple[Scheduled, ...]

    def __iter__(self) -> Iterator[Scheduled]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, item: object) -> bool:
        return item in self.entries

    @property
    def names(self) -> list[str]:
        """Each entry's controller name (Karpenter's), in order."""
        return [c.name for c in self.entries]


@dataclass
class Controllers:
    """Every controller, by role (None: off by its feature gate or setting)."""

    provisioner: Provisioner
    provisioner_trigger: ProvisionerTrigger
    lifecycle: NodeClaimLifecycle
    termination: NodeTermination
    nodepool_status: NodePoolStatus
    drift: NodeClaimDrift
    expiration: Expiration
    disruption: Disruption
    gc: GarbageCollection
    repair: NodeRepair | None = None
    overlays: NodeOverlayController | None = None
    buffer_status: CapacityBufferStatus | None = None
    static: StaticCapacity | None = None
    provider: CloudProvider | None = None
    pod_metrics: PodMetrics | None = None
    """The ``metrics.pod`` controller; None without a metrics registry (the simulator)."""
    dry_run: bool = False
    """Built for a dry run (:attr:`ControllerContext.dry_run`)."""

    def schedule(self) -> Schedule:
        """What runs, in order (a new :class:`Schedule` each call; its :class:`DisruptionLoop` is
        new too): the pod metrics (with a metrics registry: first, so they see each pod event
        before the provisioner's batch window), NodePool status (whose ``Ready`` gates provisioning), the gated NodeOverlay,
        CapacityBuffer status and static capacity controllers, the provisioner, the NodeClaim
        lifecycle, termination, node repair (gated), drift, disruption (with expiration) and
        garbage collection. The operator spawns them in this order (they then run concurrently);
        the simulator steps them in it. The provider's own loops are not in it
        (:meth:`provider_loops`). A dry run leaves out the NodeClaim lifecycle: it launches
        instances, and no NodeClaim of a dry run exists."""
        before: list[Scheduled] = [c for c in (self.overlays, self.buffer_status, self.static) if c is not None]
        lifecycle: list[Scheduled] = [] if self.dry_run else [self.lifecycle]
        repair: list[Scheduled] = [self.repair] if self.repair is not None else []
        pod_metrics: list[Scheduled] = [self.pod_metrics] if self.pod_metrics is not None else []
        return Schedule((*pod_metrics, self.nodepool_status, *before, self.provisioner_trigger, *lifecycle, self.termination,
                         *repair, self.drift, DisruptionLoop(self.expiration, self.disruption), self.gc))

    def provider_loops(self) -> list[ProviderLoop]:
        """The cloud provider's own controllers (its ``karpy_controllers`` hook, asked when called)."""
        return [ProviderLoop(name, loop) for name, loop in self.provider.controllers()] if self.provider is not None else []


def build_controllers(ctx: ControllerContext) -> Controllers:
    """Build every controller from ``ctx``, honouring its feature gates."""
    gates = ctx.feature_gates
    kube, provider, clock = ctx.kube, ctx.provider, ctx.clock
    sync = ctx.sync if ctx.sync is not None else ClusterSync(kube)
    provisioner = Provisioner(kube=kube, provider=provider, preference_policy=ctx.preference_policy,
                              min_values_policy=ctx.min_values_policy, nominations=ctx.nominations, clock=clock,
                              capacity_buffers=gates.CapacityBuffer, sync=sync)
    disruption = Disruption(kube=kube, provider=provider, clock=clock, nominations=ctx.nominations, events=ctx.events,
                            feature_gates=gates, settings=ctx.disruption, metrics=ctx.metrics, sync=sync)
    disruption.capacity_buffers = gates.CapacityBuffer
    acts = None if ctx.dry_run else ctx.metrics  # Karpenter's metrics of acts: none in a dry run, which acts on nothing
    built = Controllers(
        provisioner=provisioner,
        provisioner_trigger=ProvisionerTrigger(provisioner, clock=clock, batch=ctx.batch, events=ctx.events, metrics=ctx.metrics),
        lifecycle=NodeClaimLifecycle(kube=kube, provider=provider, clock=clock, events=ctx.events, metrics=acts,
                                     registration=ctx.registration),
        termination=NodeTermination(kube=kube, clock=clock, events=ctx.events, metrics=acts, provider=provider),
        nodepool_status=NodePoolStatus(kube=kube, clock=clock, registration=ctx.registration,
                                       unreported_is_ready=ctx.unreported_is_ready, managed=provider.managed_node_classes()),
        drift=NodeClaimDrift(kube=kube, provider=provider, clock=clock, events=ctx.events, metrics=acts),
        expiration=Expiration(kube=kube, clock=clock, events=ctx.events, metrics=acts),
        disruption=disruption,
        gc=GarbageCollection(kube=kube, provider=provider, clock=clock, events=ctx.events, metrics=ctx.metrics, sync=sync),
        repair=NodeRepair(kube=kube, provider=provider, clock=clock, events=ctx.events, metrics=acts)
        if ctx.node_repair else None,
        overlays=NodeOverlayController(kube=kube, provider=provider, clock=clock, waker=ctx.waker) if gates.NodeOverlay else None,
        buffer_status=CapacityBufferStatus(kube=kube, clock=clock, waker=ctx.waker) if gates.CapacityBuffer else None,
        static=StaticCapacity(kube=kube, provider=provider, clock=clock, metrics=acts, sync=sync) if gates.StaticCapacity else None,
        provider=provider,
        pod_metrics=PodMetrics(ctx.metrics) if ctx.metrics is not None else None,
        dry_run=ctx.dry_run,
    )
    if ctx.dry_run:
        provisioner.dry_run = disruption.dry_run = built.expiration.dry_run = built.gc.dry_run = True
        built.termination.dry_run = built.drift.dry_run = True
        if built.repair is not None:
            built.repair.dry_run = True
    return built
