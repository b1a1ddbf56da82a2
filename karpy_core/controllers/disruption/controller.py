"""The disruption controller: acts on :func:`~karpy_core.controllers.disruption.planner.plan_disruption`.

One :meth:`Disruption.reconcile` pass (Karpenter ``pkg/controllers/disruption/controller.go``,
``queue.go``, ``validation.go``; the real controller polls every 10 s):

1. records pod events: when the set of reschedulable pods on a node changes, the NodeClaim's
   ``status.lastPodEventTime`` is set to now (``Consolidatable`` counts from it);
2. moves queued commands on: a command whose replacements are all ``Initialized`` deletes its
   candidates' NodeClaims; one whose replacement failed (deleted) or timed out (10 min) is
   dropped and its candidates are un-tainted;
3. strips stale ``karpenter.sh/disrupted`` taints (not deleting, not in a queued command);
4. a consolidation command decided by an earlier pass is executed once the 15 s validation delay
   has passed and :func:`~karpy_core.controllers.disruption.planner.validate_plan` accepts it on a
   fresh snapshot (a drift command is executed in the pass that decides it, as Karpenter's
   ``drift.go``, which has no validator): taint the candidates ``karpenter.sh/disrupted:NoSchedule``, set their
   ``DisruptionReason`` condition, create the replacements (``nodeclaim_from_plan``), and delete
   the candidates at once when there are none;
5. otherwise, a new command is planned and held for validation;
6. while fewer than ``pipeline_depth`` commands wait (karpy's own, ``KARPY_DISRUPTION_PIPELINE_DEPTH``;
   1 is Karpenter's one at a time), a consolidation is planned behind them on the cluster as it
   will be once they are executed (:mod:`~karpy_core.controllers.disruption.pipeline`: their
   candidates tainted and counted against their budgets, their pods moved, their replacements in
   flight), without their candidates nor the nodes their pods go to. Each waiting command is
   validated in order at its own due time on the true snapshot of that moment (the ones before it
   executed by then); when one is dropped (invalidated, or not executed because this replica may
   no longer act), every command behind it is dropped too and the next pass plans again. Nothing
   waiting survives a restart.

Each pass also looks for consolidations undone (a node launched for the pods a command moved:
:mod:`~karpy_core.controllers.disruption.undone`): a ``disruption undone`` warning and a
:attr:`DisruptionEventKind.UNDONE` event each, and the move is not planned again until the
workload or the offerings change (``plan_disruption(avoid=...)``); a command's replacements are
nominated while the pods they are for are on their way, so no method (emptiness included) takes
them meanwhile.

Every pass appends the planner's typed per-node decision records
(:class:`~karpy_core.controllers.disruption.decisions.NodeDecision`) to :attr:`Disruption.decisions`,
the log ``karpy simulate --explain-node`` prints; each new record is also logged at debug level
(logger ``karpy.disruption``), and the events of dropped or abandoned commands carry its kind.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.conditions import CONSOLIDATABLE, clear_condition, patch_conditions, set_condition
from karpy_core.controllers.disruption.budgets import next_budget_change
from karpy_core.controllers.disruption.candidates import build_candidates, consolidatable_at
from karpy_core.controllers.disruption.command import (
    REPLACEMENT_TIMEOUT,
    VALIDATION_DELAY,
    Command,
    DisruptionEvent,
    DisruptionEventKind,
    DisruptionSettings,
    PlanningPass,
    command_key,
    command_log_values,
)
from karpy_core.controllers.disruption.decisions import (
    DecisionKind,
    DecisionStage,
    DisruptionMethod,
    DisruptionReason,
    Invalidation,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.expiration import next_expiry
from karpy_core.controllers.disruption.karpenter_events import decision_events
from karpy_core.controllers.disruption.methods import DEFAULT_ORDER
from karpy_core.controllers.disruption.pipeline import AssumedView, assume_executed, overlapping
from karpy_core.controllers.disruption.planner import DisruptionPlan, narrow_emptiness, plan_disruption_steps, validate_plan
from karpy_core.controllers.disruption.queue import CommandQueue
from karpy_core.controllers.disruption.undone import UndoneMoves, workload_fingerprint
from karpy_core.controllers.instancetypes import InstanceTypeCache
from karpy_core.errors import ignore_not_found
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.state.cluster import ClusterSnapshot, buffer_pods, collect_snapshot, with_virtual_pods
from karpy_core.state.nominations import Nominations
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import Clock, iso
from karpy_core.utils.steps import SLICE_SECONDS, run_steps_async

if TYPE_CHECKING:
    from karpy_core.controllers.disruption.metrics import DisruptionMetrics
    from karpy_core.observability import Metrics

__all__ = ["Disruption", "DisruptionEvent", "DisruptionEventKind", "DisruptionSettings", "PlanningPass", "REPLACEMENT_TIMEOUT",
           "VALIDATION_DELAY", "command_log_values"]
"""(The value types are :mod:`.command`'s, named here too for the modules that import them from the controller.)"""

log = logging.getLogger("karpy.disruption")

BEHIND_METHODS = tuple(m for m in DEFAULT_ORDER if m in (DisruptionMethod.MULTI_NODE_CONSOLIDATION,
                                                           DisruptionMethod.SINGLE_NODE_CONSOLIDATION,
                                                           DisruptionMethod.REPACK_CONSOLIDATION))
"""The methods a command planned behind waiting ones may come from: the consolidations (emptiness
and drift only ever decide on the true snapshot, as before)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Waiting:
    """A decided command waiting out its validation delay, and the cluster as it will be once it is
    executed (None until a command is planned behind it)."""

    command: Command
    view: AssumedView | None = None


class Disruption:
    """Consolidation, emptiness and drift (see the module docstring).

    Args:
        kube: the cluster.
        provider: the cloud provider (instance types and prices).
        clock: the clock; ``now`` is read once per pass and handed to the pure planner.
        settings: :class:`DisruptionSettings`.
        nominations: the provisioner's nominations (nodes chosen for pending pods are not
            disrupted); none when not given.
        events: where Karpenter's disruption events go (``DisruptionBlocked``, ``Unconsolidatable``,
            ``DisruptionLaunching``, ``DisruptionWaitingReadiness``, ``DisruptionTerminating``); none: not published.
        feature_gates: ``FEATURE_GATES`` handed to the planner (karpy's defaults when None).
        metrics: where the controller's metrics (and its per-command log lines) go
            (:class:`~karpy_core.controllers.disruption.metrics.DisruptionMetrics`); None: not published.

    Attributes:
        observer: called after each planning pass with a :class:`PlanningPass` (with
            ``metrics``: the planning metrics); None for none.
    """

    name = "disruption"

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, settings: DisruptionSettings | None = None,
                 nominations: Nominations | None = None, events: EventRecorder | None = None,
                 feature_gates: FeatureGates | None = None, metrics: Metrics | None = None, sync: ClusterSync | None = None):
        self.kube = kube
        self.sync = sync if sync is not None else ClusterSync(kube)
        """The synced-before-acting gate (:class:`~karpy_core.state.synced.ClusterSync`)."""
        self.feature_gates = feature_gates or FeatureGates()
        self.events = events
        self.provider = provider
        self.clock = clock
        self.settings = settings or DisruptionSettings()
        self.nominations = nominations
        self.capacity_buffers = False
        """The ``CapacityBuffer`` gate: simulations must keep room for the buffers' virtual pods."""
        self.pipeline: list[Waiting] = []
        """The decided commands waiting out the validation delay, in decision order (at most
        ``settings.pipeline_depth``; the first is planned on the true snapshot, each later one on
        the view where the ones before it were executed)."""
        self._moving: list[tuple[Command, AssumedView]] = []
        """Commands executed from the pipeline while their replacements come up, with the nodes and
        pods they hold: a later command may take none of them."""
        self._behind_idle: str | None = None
        """The cluster and pipeline on which planning behind found nothing (not tried again on them)."""
        self.decisions: dict[str, list[tuple[float, NodeDecision]]] = {}
        """Node name -> (time, decision) lines; a line equal to the node's last line of the same
        method (or stage) is not repeated."""
        self._pods_seen: dict[str, frozenset[str]] = {}
        self.types = InstanceTypeCache(provider, clock)
        """The NodePools' instance types between passes (:class:`~karpy_core.controllers.instancetypes.InstanceTypeCache`)."""
        self._signatures: dict[str, str] = {}
        """NodePool name -> :func:`~karpy_core.controllers.instancetypes.types_signature` of the types the last pass read."""
        self._idle: tuple[str, float | None] | None = None
        self._wake: float | None = None
        self.undone = UndoneMoves()
        """The consolidations made, those undone (a launch for the pods they moved) and not to be
        made again, and the replacements whose pods are on their way (nominated meanwhile)."""
        self.queue = CommandQueue(kube=kube, clock=clock, replacement_timeout=self.settings.replacement_timeout, undone=self.undone,
                                  log_decisions=self._log, events=events)
        """The commands being executed and the writes that execute them (:mod:`.queue`)."""
        self.metrics: DisruptionMetrics | None = None
        if metrics is not None:  # imported here: the simulator, which counts nothing, need not load the metrics stack
            from karpy_core.controllers.disruption.metrics import DisruptionMetrics

            self.metrics = DisruptionMetrics(metrics, kube)
        self.observer: Callable[[PlanningPass], None] | None = self.metrics.observe_planning if self.metrics is not None else None
        self.dry_run = False
        """``karpy controller --dry-run``: plan and validate as usual; a command that passes
        validation is logged (``dry run: would disrupt node(s)``, the fields of Karpenter's
        ``disrupting node(s)``), its ``DisruptionTerminating`` events logged, counted in the
        ``karpy_dry_run_`` metrics and returned as :attr:`DisruptionEventKind.WOULD_DISRUPT`, and
        never executed: nothing is queued, so no pass waits for a replacement that does not exist.
        The same command on the same cluster state is reported once (the idle pass keeps it)."""
        self._reported: tuple[str | None, str] | None = None
        """Dry run: (cluster fingerprint or None until the next plan, command key) last reported."""
        self.slice_seconds = SLICE_SECONDS
        """Seconds of planning between two turns of the event loop: a pass plans in slices
        (:func:`~karpy_core.utils.steps.run_steps_async`), so the watches, the provisioner and the
        leader Lease renewal run while it plans (one pass over a large cluster is seconds of CPU)."""

    # ---- helpers ------------------------------------------------------------------------------
    async def instance_types(self, snapshot: ClusterSnapshot) -> dict[str, list[InstanceType]]:
        """NodePool name -> instance types, from :attr:`types` (kept per NodePool generation and
        NodeOverlay store for at most :data:`~karpy_core.controllers.instancetypes.INSTANCE_TYPES_REFRESH`
        seconds of the controller's clock; an empty list never kept); each NodePool's types
        signature is remembered for the idle pass's fingerprint."""
        out: dict[str, list[InstanceType]] = {}
        for name, kept in (await self.types.of(snapshot.nodepool_views)).items():
            out[name] = kept.types
            self._signatures[name] = kept.signature
        return out

    def _log(self, now: float, lines: list[NodeDecision]) -> None:
        debug = log.isEnabledFor(logging.DEBUG)
        for d in lines:
            hist = self.decisions.setdefault(d.node, [])
            # one line per change of verdict per method: a pass logs a node at several methods
            last = next((h for _, h in reversed(hist) if h.method == d.method), None)
            if last == d:
                continue
            hist.append((now, d))
            if debug:
                log.debug("disruption decision", extra=fields(node=d.node, reason=d.text(), decision=d.to_dict()))
            if len(hist) > 200:
                del hist[: len(hist) - 200]

    def explain(self, node: str) -> list[str]:
        """The decision log of ``node`` as text lines ``<RFC 3339 time> [method] verdict: reason``."""
        return [f"{iso(t)} {d.text()}" for t, d in self.decisions.get(node, [])]

    def records(self, node: str) -> list[dict[str, Any]]:
        """The decision log of ``node`` as JSON-ready records: ``t`` (RFC 3339) and the fields of
        :meth:`NodeDecision.to_dict`."""
        return [{"t": iso(t), **d.to_dict()} for t, d in self.decisions.get(node, [])]

    def next_due(self) -> float | None:
        """The earliest time a pass could decide differently with no cluster change (validation
        delay over, a node turning consolidatable, a budget window edge, an expiry, a command
        timing out), or None."""
        return self._wake

    @property
    def queued(self) -> list[Command]:
        """The executed commands waiting for their replacements (:attr:`CommandQueue.commands`)."""
        return self.queue.commands

    @property
    def pending(self) -> Command | None:
        """The first command waiting out the validation delay (:attr:`pipeline`), or None."""
        return self.pipeline[0].command if self.pipeline else None

    def _busy(self) -> set[str]:
        out = self.queue.nodes()
        for w in self.pipeline:
            out |= set(w.command.nodes)
        return out

    def _held(self) -> set[str]:
        """The nodes commands executed from the pipeline hold while their replacements come up
        (their candidates and the nodes their pods go to; none with ``pipeline_depth`` 1)."""
        return {n for _, view in self._moving for n in view.held}

    def _due(self, cmd: Command) -> float:
        return cmd.decided_at + self.settings.validation_delay

    def _dropped(self, now: float, cmd: Command, why: Invalidation, prefix: str = "command dropped") -> DisruptionEvent:
        """Log ``cmd``'s candidates as kept (``why``) and return its INVALIDATED event."""
        self._log(now, [NodeDecision(c.name, DecisionStage.VALIDATION, Verdict.KEEP, why.kind, f"{prefix}: {why.message}")
                        for c in cmd.plan.candidates])
        self._idle = None
        return DisruptionEvent(DisruptionEventKind.INVALIDATED, ",".join(cmd.nodes), reason=why.message,
                               details={"method": cmd.plan.method.value}, decision=why.kind)

    def _drop_behind(self, now: float, ahead: Command) -> list[DisruptionEvent]:
        """Drop every waiting command (all planned behind ``ahead``, which was not executed)."""
        why = Invalidation(DecisionKind.EARLIER_COMMAND_DROPPED,
                           f"planned behind the command on {','.join(ahead.nodes)}, which was not executed")
        out = [self._dropped(now, w.command, why) for w in self.pipeline]
        self.pipeline = []
        self._behind_idle = None
        return out

    async def _publish(self, evs: list[Event]) -> None:
        await self.queue.publish(evs)

    # ---- the pass ------------------------------------------------------------------------------
    async def reconcile(self) -> list[DisruptionEvent]:
        """One pass (see the module docstring) and its metrics; returns what was done."""
        events = await self._pass()
        if self.metrics is not None:
            await self.metrics.observe_events(events)
        return events

    def _validate(self, cmd: Command, snapshot: ClusterSnapshot, types: dict[str, list[InstanceType]], now: float,
                  nominated: dict[str, float]) -> tuple[Command, Invalidation | None]:
        """``cmd`` after its validation delay: the command to run (an emptiness command without
        the nodes that are no longer empty, Karpenter's ``EmptinessValidator``; their keep lines
        logged) and None, or the command and why it no longer holds (:func:`validate_plan`)."""
        narrowed, dropped = narrow_emptiness(snapshot, types, now, cmd.plan, nominated=nominated)
        if narrowed is None:
            return cmd, dropped[0][1]
        if dropped:
            self._log(now, [NodeDecision(name, DecisionStage.VALIDATION, Verdict.KEEP, why.kind,
                                         f"dropped from the command: {why.message}") for name, why in dropped])
        if narrowed.method is DisruptionMethod.EMPTINESS:  # narrow_emptiness was its whole validation
            return (cmd if narrowed is cmd.plan else dataclasses.replace(cmd, plan=narrowed)), None
        return cmd, validate_plan(snapshot, types, now, narrowed, nominated=nominated, min_savings=self.settings.min_savings,
                                  feature_gates=self.feature_gates)

    async def _pass(self) -> list[DisruptionEvent]:
        now = self.clock.now()
        events: list[DisruptionEvent] = []
        if not self.sync.ready("disruption"):  # Karpenter disruption/controller.go: "waiting on cluster sync"
            return events
        snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        await asyncio.sleep(0)  # a turn of the loop between the pass's phases (each is up to a second at 5,000 nodes)
        if await self._pod_events(snapshot, now):
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        if await self._consolidatable(snapshot, now):
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        await asyncio.sleep(0)
        events += await self.queue.progress(snapshot, now)
        events += await self.queue.strip_stale(snapshot, self._busy())
        if events:
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        if self.capacity_buffers:
            snapshot = with_virtual_pods(snapshot, await buffer_pods(self.kube))
        await asyncio.sleep(0)
        types = await self.instance_types(snapshot)
        nominated = self.nominations.active(now) if self.nominations is not None else {}
        # a command's replacements are not candidates while its pods are on their way to them, nor
        # is a NodeClaim the provisioner launched or chose for pods still pending (pod nominations)
        nominated = {**nominated, **self.undone.protected(snapshot, now + self.undone.window)}
        if self.nominations is not None:
            waiting = self.nominations.claims_for({p.key for p in snapshot.pending_pod_views()})
            nominated.update({claim: max(nominated.get(claim, 0.0), now + self.nominations.window) for claim in sorted(waiting)})
        cached: list[str] = []

        def workload() -> str:  # computed only when a move is undone or remembered
            if not cached:
                cached.append(workload_fingerprint(snapshot, {k: v for k, v in self._signatures.items() if k in types}))
            return cached[0]

        events += self._undone(snapshot, now, workload)
        avoid = self.undone.avoid(workload)
        wake: list[float] = []
        snapshot, held = await self._run_due(snapshot, types, now, nominated, events)
        if held:  # validated, but this replica may not act now: validated again once synced
            return events
        if self.pipeline:  # the first is not due yet
            events += await self._plan_behind(snapshot, types, now, nominated, avoid)
            self._wake = self._due(self.pipeline[0].command)
            return events
        # a new NodeOverlay store re-plans too (upstream marks the cluster unconsolidated)
        # new instance types (a NodeClass turned Ready, offerings or prices changed) re-plan too
        fp = (self._fingerprint(snapshot) + ",".join(sorted(nominated)) + f"|{self.provider.overlay_generation}|"
              + f"{len(avoid)}|"
              + ",".join(f"{k}={v}" for k, v in sorted(self._signatures.items()) if k in types))
        if self._idle is not None and self._idle[0] == fp and (self._idle[1] is None or now < self._idle[1]):
            wake.extend(w for w in (self._idle[1],) if w is not None)
        else:
            lines: list[NodeDecision] = []
            t0 = time.perf_counter()
            plan = await run_steps_async(plan_disruption_steps(
                snapshot, types, now, log=lines, exclude=frozenset(self._busy() | self._held()),
                max_single_simulations=self.settings.max_single_simulations, nominated=nominated,
                min_savings=self.settings.min_savings, feature_gates=self.feature_gates, avoid=avoid),
                slice_seconds=self.slice_seconds, pause_gc=True)
            plan = self._unreported(fp, plan)
            if self.observer is not None:
                self.observer(PlanningPass(snapshot, types, lines, time.perf_counter() - t0, plan, now))
            self._log(now, lines)
            await asyncio.sleep(0)
            await self._publish(_decision_events(snapshot, lines))
            if plan is not None:
                self._idle = None
                events.append(DisruptionEvent(DisruptionEventKind.DECIDED, ",".join(c.name for c in plan.candidates),
                                              reason=plan.reason.value,
                                              details={"method": plan.method.value, "decision": plan.decision.value,
                                                       "summary": plan.describe()}))
                if plan.reason is DisruptionReason.DRIFTED:
                    # Karpenter validates consolidation only (emptiness, multi- and single-node
                    # consolidation: commandValidationDelay); a drift command, computed on this
                    # pass's view, is executed at once (disruption/drift.go has no validator)
                    events += await self._execute(Command(plan, now), now, snapshot)
                    wake.append(now)
                else:
                    self.pipeline = [Waiting(Command(plan, now))]
                    wake.append(now + self.settings.validation_delay)
                    events += await self._plan_behind(snapshot, types, now, nominated, avoid)
            else:
                await asyncio.sleep(0)
                threshold = self._threshold(snapshot, types, now)
                self._idle = (fp, threshold)
                if threshold is not None:
                    wake.append(threshold)
        wake.extend(self.queue.timeouts())
        exp = next_expiry(snapshot.nodeclaim_views, now)
        if exp is not None:
            wake.append(exp)
        self._wake = min(wake) if wake else None
        return events

    async def _run_due(self, snapshot: ClusterSnapshot, types: dict[str, list[InstanceType]], now: float,
                       nominated: dict[str, float], events: list[DisruptionEvent]) -> tuple[ClusterSnapshot, bool]:
        """Validate and execute the waiting commands that are due, in decision order, each on a
        fresh snapshot (the ones before it executed); the first one dropped drops every one behind
        it. Appends what was done to ``events``; returns the latest snapshot and True when a valid
        command is held because this replica may not act now (nothing after it is looked at)."""
        self._moving = [(c, v) for c, v in self._moving if any(c is q for q in self.queue.commands)]
        while self.pipeline and now >= self._due(self.pipeline[0].command):
            head = self.pipeline.pop(0)
            cmd, why = self._validate(head.command, snapshot, types, now, nominated)
            if why is None and (clash := overlapping(cmd.plan, [v for _, v in self._moving])) is not None:
                why = Invalidation(DecisionKind.OVERLAPS_EARLIER_COMMAND, clash)
            if why is not None:
                events.append(self._dropped(now, cmd, why))
                events += self._drop_behind(now, cmd)
                break
            if not self.sync.ready("disruption"):
                self.pipeline.insert(0, head)  # decided on a synced view; validated again once synced
                return snapshot, True
            done = await self._execute(cmd, now, snapshot)
            events += done
            if not done:  # not executed: what was planned behind it assumed it was
                events += self._drop_behind(now, cmd)
                break
            if head.view is not None and not self.dry_run:
                self._moving.append((cmd, head.view))
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes(), buffers=self.capacity_buffers)
        return snapshot, False

    async def _plan_behind(self, snapshot: ClusterSnapshot, types: dict[str, list[InstanceType]], now: float,
                           nominated: dict[str, float], avoid: frozenset[str]) -> list[DisruptionEvent]:
        """Plan consolidations (:data:`BEHIND_METHODS`) behind the waiting commands until
        ``pipeline_depth`` wait, each on the view where those before it were executed
        (:func:`~karpy_core.controllers.disruption.pipeline.assume_executed` of ``snapshot``),
        without their candidates nor the nodes their pods go to. Only the chosen candidates'
        decision lines are logged (the others were judged on an assumed cluster). Nothing in a
        dry run. Returns the ``DECIDED`` events."""
        events: list[DisruptionEvent] = []
        if self.dry_run or not self.pipeline or len(self.pipeline) >= self.settings.pipeline_depth:
            # a dry run executes nothing: what it reports is one command at a time on the live
            # cluster (the same command on the same state reported once, :meth:`_unreported`)
            return events
        key = "|".join([self._fingerprint(snapshot), ",".join(sorted(nominated)), str(len(avoid)),
                        *(f"{w.command.decided_at}:{','.join(w.command.nodes)}" for w in self.pipeline)])
        if key == self._behind_idle:
            return events
        view = snapshot
        held = self._busy() | self._held()
        for i, w in enumerate(self.pipeline):
            assumed = assume_executed(view, types, w.command.plan)
            if assumed is None:
                self._behind_idle = key
                return events
            self.pipeline[i] = Waiting(w.command, assumed)
            view, held = assumed.snapshot, held | assumed.held
        while len(self.pipeline) < self.settings.pipeline_depth:
            await asyncio.sleep(0)
            lines: list[NodeDecision] = []
            plan = await run_steps_async(plan_disruption_steps(
                view, types, now, log=lines, methods=BEHIND_METHODS, exclude=frozenset(held),
                max_single_simulations=self.settings.max_single_simulations, nominated=nominated,
                min_savings=self.settings.min_savings, feature_gates=self.feature_gates, avoid=avoid),
                slice_seconds=self.slice_seconds, pause_gc=True)
            if plan is None or overlapping(plan, [w.view for w in self.pipeline if w.view is not None]) is not None:
                self._behind_idle = key
                break
            names = {c.name for c in plan.candidates}
            self._log(now, [d for d in lines if d.node in names and d.verdict is Verdict.DISRUPT])
            events.append(DisruptionEvent(DisruptionEventKind.DECIDED, ",".join(c.name for c in plan.candidates),
                                          reason=plan.reason.value,
                                          details={"method": plan.method.value, "decision": plan.decision.value,
                                                   "summary": plan.describe(), "behind": len(self.pipeline)}))
            assumed = assume_executed(view, types, plan)
            self.pipeline.append(Waiting(Command(plan, now), assumed))
            if assumed is None:
                break
            view, held = assumed.snapshot, held | assumed.held
        return events

    def _fingerprint(self, snapshot: ClusterSnapshot) -> str:
        h = hashlib.sha256()
        for kind, views in (("n", snapshot.node_views), ("c", snapshot.nodeclaim_views), ("p", snapshot.nodepool_views)):
            for view in views:
                h.update(f"{kind}:{view.name}:{view.resource_version};".encode())
        for kind, objs in (("b", snapshot.pdbs), ("d", snapshot.daemonsets)):
            for o in objs:
                h.update(f"{kind}:{o['metadata'].get('name')}:{o['metadata'].get('resourceVersion')};".encode())
        for p in snapshot.pod_views:
            h.update(f"{p.key}@{p.node_name}:{p.phase}:{p.deleting};".encode())
        for v in snapshot.virtual_pod_views:  # CapacityBuffer headroom: its size and shape change the plan too
            h.update(f"v:{v.key}:{json.dumps(v.raw.get('spec'), sort_keys=True)};".encode())
        return h.hexdigest()

    def _threshold(self, snapshot: ClusterSnapshot, types: dict[str, list[InstanceType]], now: float) -> float | None:
        """When time alone could change the plan: a node turning consolidatable, a budget window
        edge, a do-not-disrupt duration ending."""
        times: list[float] = []
        for c in build_candidates(snapshot, types, now):
            if c.consolidatable_at is not None and c.consolidatable_at > now:
                times.append(c.consolidatable_at)
        for pool in snapshot.nodepool_views:
            t = next_budget_change(pool.budgets, now)
            if t is not None:
                times.append(t)
        return min(times) if times else None

    async def _pod_events(self, snapshot: ClusterSnapshot, now: float) -> bool:
        """Set ``status.lastPodEventTime`` on NodeClaims whose node gained or lost a pod since
        the last pass (Karpenter ``nodeclaim/podevents``). Returns True when something was written."""
        by_node: dict[str, set[str]] = {}
        for p in snapshot.pod_views:
            if p.node_name and p.reschedulable:
                by_node.setdefault(p.node_name, set()).add(p.key)
        claims = {c.node_name: c for c in snapshot.nodeclaim_views if c.node_name}
        wrote = False
        seen: dict[str, frozenset[str]] = {}
        for n in snapshot.node_views:
            name = n.name
            pods = frozenset(by_node.get(name, ()))
            seen[name] = pods
            prev = self._pods_seen.get(name)
            nc = claims.get(name)
            if prev is not None and prev != pods and nc is not None and not nc.deleting:
                await self.kube.patch("NodeClaim", nc.name, {"status": {"lastPodEventTime": iso(now)}}, status=True)
                wrote = True
        self._pods_seen = seen
        return wrote

    async def _consolidatable(self, snapshot: ClusterSnapshot, now: float) -> bool:
        """Keep each NodeClaim's ``Consolidatable`` condition (Karpenter ``nodeclaim/disruption/consolidation.go``):
        True from ``consolidateAfter`` past the last pod event (or initialization), absent before,
        without ``Initialized`` or with ``consolidateAfter: Never``. Returns True when something was written."""
        wrote = False
        for nc in snapshot.nodeclaim_views:
            pool = snapshot.nodepool(nc.nodepool or "")
            if pool is None or nc.deleting:
                continue
            at = consolidatable_at(nc, pool) if nc.is_true("Initialized") else None
            conds = list((nc.raw.get("status") or {}).get("conditions") or [])  # written back: the API dicts
            if at is not None and now >= at:
                if nc.is_true(CONSOLIDATABLE):
                    continue
                conds = set_condition(conds, CONSOLIDATABLE, "True", iso(now))
            else:
                conds = clear_condition(conds, CONSOLIDATABLE)
            patch = patch_conditions(nc.raw, sorted(conds, key=lambda c: str(c.get("type"))))
            if patch is not None:
                await ignore_not_found(self.kube.patch("NodeClaim", nc.name, patch, status=True))
                wrote = True
        return wrote

    def _undone(self, snapshot: ClusterSnapshot, now: float, workload: Callable[[], str]) -> list[DisruptionEvent]:
        """The consolidations found undone this pass (:meth:`UndoneMoves.observe`): one warning
        line and one :attr:`DisruptionEventKind.UNDONE` event each."""
        pods_of = self.nominations.pods_of if self.nominations is not None else None
        out = []
        for u in self.undone.observe(snapshot, now, pods_of, workload):
            log.warning("disruption undone", extra=fields(
                node=",".join(u.nodes), nodeclaim=u.nodeclaim, method=u.method.value,
                reason=f"a node was launched for {len(u.pods)} pod(s) the command moved (e.g. {u.pods[0]}); "
                       "the same move is not made again until the workload or the offerings change"))
            out.append(DisruptionEvent(DisruptionEventKind.UNDONE, ",".join(u.nodes), u.nodeclaim, reason=u.reason.value,
                                       details={"method": u.method.value, "pods": list(u.pods)}))
        if out:
            self._idle = None
        return out

    def _unreported(self, fp: str, plan: DisruptionPlan | None) -> DisruptionPlan | None:
        """Dry run: None for the command already reported on this cluster state (fingerprint
        ``fp``), so a state that does not change is reported once; else ``plan``."""
        if not self.dry_run or self._reported is None:
            return plan
        if self._reported[0] is None:  # the pass that reported it: this is the state it held on
            self._reported = (fp, self._reported[1])
        if plan is not None and self._reported == (fp, command_key(plan)):
            log.debug("dry run: command already reported on this cluster state", extra=command_log_values(plan))
            return None
        return plan

    async def _would_execute(self, cmd: Command) -> list[DisruptionEvent]:
        """Dry run: report a validated command instead of executing it (see :attr:`dry_run`)."""
        plan = cmd.plan
        log.info("dry run: would disrupt node(s)", extra={**command_log_values(plan), "dryRun": True,
                                                           "price": round(plan.price, 6),
                                                           "replacement-price": round(plan.replacement_price, 6)})
        for c in plan.candidates:
            await self.queue.terminating(c.name, c.nodeclaim.raw, plan.reason.value)
        m = self.metrics.metrics.dry_run if self.metrics is not None else None
        if m is not None:
            labels = {"reason": plan.reason.value, "method": plan.method.value}
            m.disruption_decisions.labels(decision=plan.decision.value, **labels).inc()
            m.disruption_nodes.labels(**labels).inc(len(plan.candidates))
            m.disruption_savings.labels(**labels).inc(max(0.0, plan.savings_per_hour))
        self._reported = (None, command_key(plan))
        self._idle = None
        return [DisruptionEvent(DisruptionEventKind.WOULD_DISRUPT, ",".join(cmd.nodes), reason=plan.reason.value,
                                details={"method": plan.method.value, "decision": plan.decision.value, "price": round(plan.price, 6),
                                         "replacement_price": round(plan.replacement_price, 6),
                                         "savings_per_hour": plan.savings_per_hour,
                                         "replacements": [[it.name for it in r.instance_types[:5]] for r in plan.replacements]})]

    async def _execute(self, cmd: Command, now: float, snapshot: ClusterSnapshot) -> list[DisruptionEvent]:
        """Execute ``cmd`` (or, in a dry run, report it). Nothing is executed once this replica may
        no longer act (:meth:`ClusterSync.ready`: the leader Lease not renewed within the renew
        deadline, e.g. lost while the pass planned, or the caches out of sync): the command is
        dropped with a log line, and a later pass plans again on a fresh view if it still leads."""
        if not self.sync.ready("disruption"):
            log.info("disruption command not executed: this replica may no longer act", extra=command_log_values(cmd.plan))
            self._idle = None
            return []
        if self.dry_run:
            return await self._would_execute(cmd)
        return await self.queue.execute(cmd, now, snapshot)


def _decision_events(snapshot: ClusterSnapshot, lines: list[NodeDecision]) -> list[Event]:
    nodes = {n.name: n for n in snapshot.node_views}
    claims = {n.name: c for n in snapshot.node_views if (c := snapshot.nodeclaim_by_provider_id(n.provider_id)) is not None}
    pools = {p.name: p for p in snapshot.nodepool_views}
    return decision_events(lines, nodes, claims, pools)
