"""The disruption controller: acts on :func:`~karpy_core.controllers.disruption.planner.plan_disruption`.

One :meth:`Disruption.reconcile` pass (Karpenter ``pkg/controllers/disruption/controller.go``,
``queue.go``, ``validation.go``; the real controller polls every 10 s):

1. records pod events: when the set of reschedulable pods on a node changes, the NodeClaim's
   ``status.lastPodEventTime`` is set to now (``Consolidatable`` counts from it);
2. moves queued commands on: a command whose replacements are all ``Initialized`` deletes its
   candidates' NodeClaims; one whose replacement failed (deleted) or timed out (10 min) is
   dropped and its candidates are un-tainted;
3. strips stale ``karpenter.sh/disrupted`` taints (not deleting, not in a queued command);
4. a command decided by an earlier pass is executed once the 15 s validation delay has passed
   and :func:`~karpy_core.controllers.disruption.planner.validate_plan` accepts it on a fresh
   snapshot: taint the candidates ``karpenter.sh/disrupted:NoSchedule``, set their
   ``DisruptionReason`` condition, create the replacements (``nodeclaim_from_plan``), and delete
   the candidates at once when there are none;
5. otherwise, a new command is planned and held for validation.

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

import hashlib
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, TAINT_DISRUPTED
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import CONSOLIDATABLE, clear_condition, patch_conditions, set_condition
from karpy_core.controllers.disruption.budgets import next_budget_change
from karpy_core.controllers.disruption.candidates import build_candidates, consolidatable_at
from karpy_core.controllers.disruption.decisions import (
    DecisionKind,
    DecisionStage,
    DisruptionReason,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.expiration import next_expiry
from karpy_core.controllers.disruption.karpenter_events import decision_events
from karpy_core.controllers.disruption.methods.repack import DEFAULT_MIN_SAVINGS
from karpy_core.controllers.disruption.planner import DisruptionPlan, plan_disruption, validate_plan
from karpy_core.controllers.disruption.undone import UndoneMoves, workload_fingerprint
from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan, pretty_list
from karpy_core.errors import KubeAPIError, NotFoundError, ignore_not_found
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.state.cluster import ClusterSnapshot, buffer_pods, collect_snapshot, with_virtual_pods
from karpy_core.state.nominations import Nominations
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import Clock, iso

if TYPE_CHECKING:
    from karpy_core.controllers.disruption.metrics import DisruptionMetrics
    from karpy_core.observability import Metrics

__all__ = ["Disruption", "DisruptionEvent", "DisruptionEventKind", "DisruptionSettings", "PlanningPass"]

log = logging.getLogger("karpy.disruption")

VALIDATION_DELAY = 15.0
"""Seconds between deciding a command and executing it (Karpenter ``commandValidationDelay``)."""
REPLACEMENT_TIMEOUT = 600.0
"""Seconds a command waits for its replacements to initialize (Karpenter's minimum, 10 min)."""


@dataclass
class DisruptionSettings:
    """Tunables of the disruption controller.

    Attributes:
        validation_delay: seconds from decision to execution (default 15).
        replacement_timeout: seconds to wait for replacements to be Initialized (default 600).
        max_single_simulations: cap on single-node simulations per pass (None: no cap); stands in
            for Karpenter's 3-minute single-node timeout deterministically.
        min_savings: the fraction of the disrupted nodes' price a repack consolidation must save
            (``KARPY_CONSOLIDATION_MIN_SAVINGS``; a NodePool's ``karpy.sh/consolidation-min-savings``
            wins), in [0, 1).
    """

    validation_delay: float = VALIDATION_DELAY
    replacement_timeout: float = REPLACEMENT_TIMEOUT
    max_single_simulations: int | None = None
    min_savings: float = DEFAULT_MIN_SAVINGS


class DisruptionEventKind(StrEnum):
    """What the controller did (the values are the event kinds the simulator reports)."""

    DECIDED = "disrupt-decided"
    """A command was decided and waits for the validation delay."""
    INVALIDATED = "disrupt-invalidated"
    """A decided command did not hold on revalidation and was dropped."""
    DISRUPT = "disrupt"
    """Candidates tainted, their ``DisruptionReason`` set, replacements created."""
    REPLACEMENT_CREATE = "replacement-create"
    """A replacement NodeClaim was created."""
    DELETE = "delete"
    """A candidate's NodeClaim was deleted."""
    FAILED = "disrupt-failed"
    """A queued command's replacement failed or timed out; candidates un-tainted."""
    UNTAINT = "untaint"
    """A stale ``karpenter.sh/disrupted`` taint was removed."""
    WOULD_DISRUPT = "disrupt-would"
    """Dry run (:attr:`Disruption.dry_run`): a validated command that would have been executed
    (nothing tainted, created or deleted)."""
    UNDONE = "disrupt-undone"
    """A consolidation's moved pods got a node launched for them: the move is undone and not
    taken again until the workload or the offerings change
    (:mod:`~karpy_core.controllers.disruption.undone`)."""


@dataclass(frozen=True, slots=True)
class DisruptionEvent:
    """Something the controller did.

    Attributes:
        kind: what happened.
        node: node name(s), comma-separated for a multi-node command.
        nodeclaim: the NodeClaim concerned (delete, replacement-create).
        reason: the budget reason (``Empty``, ``Drifted``, ``Underutilized``), or why a command was
            dropped or abandoned, in words.
        details: ``method``, ``decision``, prices, ... (JSON-ready).
        decision: for a dropped or abandoned command, the kind of why.
    """

    kind: DisruptionEventKind
    node: str = ""
    nodeclaim: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    decision: DecisionKind | None = None


INSTANCE_TYPES_REFRESH = 60.0
"""Seconds the disruption controller reuses a NodePool's instance types before asking the
provider again: offerings marked unavailable after an insufficient-capacity error come back
after 3 minutes (Karpenter's ``UnavailableOfferingsTTL``), and prices and NodeClass status
change between NodePool generations; the provider's own cache makes the call cheap."""


def _types_signature(types: list[InstanceType]) -> str:
    """A digest of what a plan reads from ``types``: names, and each offering's zone, capacity
    type, price and availability (so the idle pass notices when they change)."""
    h = hashlib.sha256()
    for it in types:
        h.update(it.name.encode())
        for o in it.offerings:
            h.update(f"|{o.zone}:{o.capacity_type}:{o.price!r}:{o.available}:{o.reservation_id}:{o.reservation_capacity}".encode())
        h.update(b";")
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class PlanningPass:
    """One run of the planner, for metrics: the snapshot and instance types it read, its decision
    log, how long it took (seconds), the command it decided (or None) and its ``now``."""

    snapshot: ClusterSnapshot
    instance_types: dict[str, list[InstanceType]]
    lines: list[NodeDecision]
    seconds: float
    plan: DisruptionPlan | None
    now: float


@dataclass
class _Command:
    plan: DisruptionPlan
    decided_at: float
    started_at: float = 0.0
    replacements: list[str] = field(default_factory=list)

    @property
    def nodes(self) -> list[str]:
        return [c.name for c in self.plan.candidates]


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


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
        self.pending: _Command | None = None
        self.queued: list[_Command] = []
        self.decisions: dict[str, list[tuple[float, NodeDecision]]] = {}
        """Node name -> (time, decision) lines; a line equal to the node's last line of the same
        method (or stage) is not repeated."""
        self._pods_seen: dict[str, frozenset[str]] = {}
        self._types: dict[tuple[str, Any, Any, int], tuple[float, list[InstanceType], str]] = {}
        """(NodePool name, generation, resourceVersion, overlay generation) -> (fetched at, the
        provider's instance types, :func:`_types_signature`)."""
        self._signatures: dict[str, str] = {}
        """NodePool name -> :func:`_types_signature` of the types the last pass read."""
        self._idle: tuple[str, float | None] | None = None
        self._wake: float | None = None
        self.undone = UndoneMoves()
        """The consolidations made, those undone (a launch for the pods they moved) and not to be
        made again, and the replacements whose pods are on their way (nominated meanwhile)."""
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

    # ---- helpers ------------------------------------------------------------------------------
    async def instance_types(self, snapshot: ClusterSnapshot) -> dict[str, list[InstanceType]]:
        """NodePool name -> instance types, kept per NodePool generation (and NodeOverlay store)
        for at most :data:`INSTANCE_TYPES_REFRESH` seconds of the controller's clock; an empty
        list is never kept. A provider answers ``[]`` while the NodePool's NodeClass is not
        Ready (the AWS plugin does): kept, that left consolidation without prices until the
        NodePool changed. Karpenter's disruption asks its cloud provider on every pass; its
        providers cache the types and see a NodeClass change at once."""
        now = self.clock.now()
        out: dict[str, list[InstanceType]] = {}
        for pool in snapshot.nodepool_views:
            gen = pool.generation or None
            key = (pool.name, gen, pool.resource_version if gen is None else None,
                   getattr(self.provider, "overlay_generation", 0))
            kept = self._types.get(key)
            if kept is None or now - kept[0] >= INSTANCE_TYPES_REFRESH:
                types = await self.provider.get_instance_types(pool.model)
                for old in [k for k in self._types if k[0] == pool.name]:
                    del self._types[old]
                kept = (now, types, _types_signature(types))
                if types:
                    self._types[key] = kept
            out[pool.name] = kept[1]
            self._signatures[pool.name] = kept[2]
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

    def _busy(self) -> set[str]:
        out = {n for cmd in self.queued for n in cmd.nodes}
        if self.pending is not None:
            out |= set(self.pending.nodes)
        return out

    async def _set_taint(self, node: str, on: bool) -> None:
        try:
            obj = await self.kube.get("Node", node)
        except NotFoundError:
            return
        taints = [t for t in _taints(obj) if t.get("key") != TAINT_DISRUPTED]
        if on:
            taints.append({"key": TAINT_DISRUPTED, "effect": "NoSchedule"})
        if taints != _taints(obj):
            await self.kube.patch("Node", node, {"spec": {"taints": taints}})

    async def _set_reason(self, nodeclaim: str, reason: DisruptionReason | None) -> None:
        try:
            nc = await self.kube.get("NodeClaim", nodeclaim)
        except NotFoundError:
            return
        conds = [c for c in (nc.get("status") or {}).get("conditions") or [] if c.get("type") != "DisruptionReason"]
        if reason:
            conds.append({"type": "DisruptionReason", "status": "True", "reason": reason.value, "message": "",
                          "lastTransitionTime": iso(self.clock.now())})
        await self.kube.patch("NodeClaim", nodeclaim, {"status": {"conditions": sorted(conds, key=lambda c: c["type"])}},
                              status=True)

    async def _publish(self, evs: list[Event]) -> None:
        if self.events is not None and evs:
            await self.events.record(*evs)

    async def _get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(kind, name)
        except KubeAPIError:
            return None

    async def _terminating(self, cand_node: str, nodeclaim: dict[str, Any] | None, reason: str) -> None:
        """``DisruptionTerminating`` on the candidate's Node and NodeClaim (Karpenter ``queue.go``)."""
        if self.events is not None:
            await self._publish(karpenter_events.terminating(await self._get("Node", cand_node), nodeclaim, reason))

    async def _delete_claim(self, name: str) -> bool:
        try:
            await self.kube.delete("NodeClaim", name)
            return True
        except NotFoundError:
            return False

    # ---- the pass ------------------------------------------------------------------------------
    async def reconcile(self) -> list[DisruptionEvent]:
        """One pass (see the module docstring) and its metrics; returns what was done."""
        events = await self._pass()
        if self.metrics is not None:
            await self.metrics.observe_events(events)
        return events

    async def _pass(self) -> list[DisruptionEvent]:
        now = self.clock.now()
        events: list[DisruptionEvent] = []
        if not self.sync.ready("disruption"):  # Karpenter disruption/controller.go: "waiting on cluster sync"
            return events
        snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        if await self._pod_events(snapshot, now):
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        if await self._consolidatable(snapshot, now):
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        events += await self._progress(snapshot, now)
        events += await self._strip_stale(snapshot)
        if events:
            snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes())
        if self.capacity_buffers:
            snapshot = with_virtual_pods(snapshot, await buffer_pods(self.kube))
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
        if self.pending is not None:
            due = self.pending.decided_at + self.settings.validation_delay
            if now < due:
                self._wake = due
                return events
            cmd, self.pending = self.pending, None
            why = validate_plan(snapshot, types, now, cmd.plan, nominated=nominated, min_savings=self.settings.min_savings,
                                feature_gates=self.feature_gates)
            if why is not None:
                self._log(now, [NodeDecision(c.name, DecisionStage.VALIDATION, Verdict.KEEP, why.kind, f"command dropped: {why.message}")
                                for c in cmd.plan.candidates])
                events.append(DisruptionEvent(DisruptionEventKind.INVALIDATED, ",".join(cmd.nodes), reason=why.message,
                                              details={"method": cmd.plan.method.value}, decision=why.kind))
                self._idle = None
            elif not self.sync.ready("disruption"):
                self.pending = cmd  # decided on a synced view; validated again once synced
                return events
            else:
                events += await self._execute(cmd, now, snapshot)
                snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes(), buffers=self.capacity_buffers)
        if self.pending is None:
            # a new NodeOverlay store re-plans too (upstream marks the cluster unconsolidated)
            # new instance types (a NodeClass turned Ready, offerings or prices changed) re-plan too
            fp = (self._fingerprint(snapshot) + ",".join(sorted(nominated)) + f"|{getattr(self.provider, 'overlay_generation', 0)}|"
                  + f"{len(avoid)}|"
                  + ",".join(f"{k}={v}" for k, v in sorted(self._signatures.items()) if k in types))
            if self._idle is not None and self._idle[0] == fp and (self._idle[1] is None or now < self._idle[1]):
                wake.extend(w for w in (self._idle[1],) if w is not None)
            else:
                lines: list[NodeDecision] = []
                t0 = time.perf_counter()
                plan = plan_disruption(snapshot, types, now, log=lines, exclude=frozenset(self._busy()),
                                       max_single_simulations=self.settings.max_single_simulations, nominated=nominated,
                                       min_savings=self.settings.min_savings, feature_gates=self.feature_gates, avoid=avoid)
                plan = self._unreported(fp, plan)
                if self.observer is not None:
                    self.observer(PlanningPass(snapshot, types, lines, time.perf_counter() - t0, plan, now))
                self._log(now, lines)
                await self._publish(_decision_events(snapshot, lines))
                if plan is not None:
                    self.pending = _Command(plan, now)
                    self._idle = None
                    wake.append(now + self.settings.validation_delay)
                    events.append(DisruptionEvent(DisruptionEventKind.DECIDED, ",".join(c.name for c in plan.candidates),
                                                  reason=plan.reason.value,
                                                  details={"method": plan.method.value, "decision": plan.decision.value,
                                                           "summary": plan.describe()}))
                else:
                    threshold = self._threshold(snapshot, types, now)
                    self._idle = (fp, threshold)
                    if threshold is not None:
                        wake.append(threshold)
        for cmd in self.queued:
            wake.append(cmd.started_at + self.settings.replacement_timeout)
        exp = next_expiry(snapshot.nodeclaim_views, now)
        if exp is not None:
            wake.append(exp)
        self._wake = min(wake) if wake else None
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

    async def _progress(self, snapshot: ClusterSnapshot, now: float) -> list[DisruptionEvent]:
        events: list[DisruptionEvent] = []
        claims = {c.name: c for c in snapshot.nodeclaim_views}
        keep: list[_Command] = []
        for cmd in self.queued:
            failed = [r for r in cmd.replacements if r not in claims or claims[r].deleting]
            timed_out = now - cmd.started_at >= self.settings.replacement_timeout
            if failed or timed_out:
                kind = DecisionKind.REPLACEMENT_FAILED if failed else DecisionKind.REPLACEMENT_TIMEOUT
                why = f"replacement {failed[0]} failed to launch" if failed else "replacements not initialized in time"
                for c in cmd.plan.candidates:
                    await self._set_taint(c.name, False)
                    await self._set_reason(c.nodeclaim_name, None)
                    self._log(now, [NodeDecision(c.name, cmd.plan.method, Verdict.KEEP, kind, f"command abandoned: {why}")])
                events.append(DisruptionEvent(DisruptionEventKind.FAILED, ",".join(cmd.nodes), reason=why, decision=kind))
                self.undone.finished(cmd.nodes, now)
                continue
            for r in cmd.replacements:
                await self._publish([karpenter_events.launching(claims[r].raw, cmd.plan.reason.value)])
                if not claims[r].is_true("Initialized"):
                    await self._publish([karpenter_events.waiting_on_readiness(claims[r].raw)])
            if all(claims[r].is_true("Initialized") for r in cmd.replacements):
                for c in cmd.plan.candidates:
                    if await self._delete_claim(c.nodeclaim_name):
                        claim = claims.get(c.nodeclaim_name)
                        await self._terminating(c.name, claim.raw if claim is not None else None, cmd.plan.reason.value)
                        events.append(DisruptionEvent(DisruptionEventKind.DELETE, c.name, c.nodeclaim_name, reason=cmd.plan.reason.value,
                                                      details={"method": cmd.plan.method.value}))
                self.undone.finished(cmd.nodes, now)
                continue
            keep.append(cmd)
        self.queued = keep
        return events

    async def _strip_stale(self, snapshot: ClusterSnapshot) -> list[DisruptionEvent]:
        busy = self._busy()
        events = []
        deleting = {(c.get("status") or {}).get("providerID") for c in await self.kube.list("NodeClaim")
                    if c["metadata"].get("deletionTimestamp")}
        for n in snapshot.node_views:
            if n.deleting or n.name in busy:
                continue
            if n.provider_id in deleting:
                continue
            if n.disrupted:
                await self._set_taint(n.name, False)
                events.append(DisruptionEvent(DisruptionEventKind.UNTAINT, n.name,
                                              reason="stale karpenter.sh/disrupted taint"))
        return events

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
        if plan is not None and self._reported == (fp, _command_key(plan)):
            log.debug("dry run: command already reported on this cluster state", extra=command_log_values(plan))
            return None
        return plan

    async def _would_execute(self, cmd: _Command) -> list[DisruptionEvent]:
        """Dry run: report a validated command instead of executing it (see :attr:`dry_run`)."""
        plan = cmd.plan
        log.info("dry run: would disrupt node(s)", extra={**command_log_values(plan), "dryRun": True,
                                                           "price": round(plan.price, 6),
                                                           "replacement-price": round(plan.replacement_price, 6)})
        for c in plan.candidates:
            await self._terminating(c.name, c.nodeclaim.raw, plan.reason.value)
        m = self.metrics.metrics.dry_run if self.metrics is not None else None
        if m is not None:
            labels = {"reason": plan.reason.value, "method": plan.method.value}
            m.disruption_decisions.labels(decision=plan.decision.value, **labels).inc()
            m.disruption_nodes.labels(**labels).inc(len(plan.candidates))
            m.disruption_savings.labels(**labels).inc(max(0.0, plan.savings_per_hour))
        self._reported = (None, _command_key(plan))
        self._idle = None
        return [DisruptionEvent(DisruptionEventKind.WOULD_DISRUPT, ",".join(cmd.nodes), reason=plan.reason.value,
                                details={"method": plan.method.value, "decision": plan.decision.value, "price": round(plan.price, 6),
                                         "replacement_price": round(plan.replacement_price, 6),
                                         "savings_per_hour": plan.savings_per_hour,
                                         "replacements": [[it.name for it in r.instance_types[:5]] for r in plan.replacements]})]

    async def _execute(self, cmd: _Command, now: float, snapshot: ClusterSnapshot) -> list[DisruptionEvent]:
        if self.dry_run:
            return await self._would_execute(cmd)
        plan = cmd.plan
        events: list[DisruptionEvent] = []
        log.info("disrupting node(s)", extra=command_log_values(plan))
        self.undone.executed(plan, snapshot, now)
        for c in plan.candidates:
            await self._set_taint(c.name, True)
            await self._set_reason(c.nodeclaim_name, plan.reason)
        events.append(DisruptionEvent(DisruptionEventKind.DISRUPT, ",".join(cmd.nodes), reason=plan.reason.value,
                                      details={"method": plan.method.value, "decision": plan.decision.value, "price": round(plan.price, 6),
                                               "replacement_price": round(plan.replacement_price, 6),
                                               "savings_per_hour": plan.savings_per_hour}))
        cmd.started_at = now
        for r in plan.replacements:
            created = await self.kube.create("NodeClaim", nodeclaim_from_plan(r))
            cmd.replacements.append(created["metadata"]["name"])
            await self._publish([karpenter_events.launching(created, plan.reason.value)])
            events.append(DisruptionEvent(DisruptionEventKind.REPLACEMENT_CREATE, nodeclaim=created["metadata"]["name"],
                                          reason=plan.reason.value, details={"nodepool": r.nodepool, "for": cmd.nodes,
                                                   "cheapest_price": round(r.cheapest_offering_price(), 6)}))
        self.undone.replacements_created(cmd.nodes, cmd.replacements)
        if not plan.replacements:
            for c in plan.candidates:
                if await self._delete_claim(c.nodeclaim_name):
                    await self._terminating(c.name, c.nodeclaim.raw, plan.reason.value)
                    events.append(DisruptionEvent(DisruptionEventKind.DELETE, c.name, c.nodeclaim_name, reason=plan.reason.value,
                                                  details={"method": plan.method.value}))
            self.undone.finished(cmd.nodes, now)
        else:
            self.queued.append(cmd)
        return events


def _command_key(plan: DisruptionPlan) -> str:
    """What identifies a command for the dry run's reporting: method, decision, candidates and
    the replacements' cheapest instance types."""
    reps = ";".join(",".join(it.name for it in r.instance_types[:3]) for r in plan.replacements)
    return f"{plan.method.value}|{plan.decision.value}|{','.join(c.name for c in plan.candidates)}|{reps}"


def command_log_values(plan: DisruptionPlan) -> dict[str, Any]:
    """The fields of Karpenter's ``disrupting node(s)`` line (``disruption/queue.go``,
    ``Command.String`` and ``Command.LogValues``): ``command`` (``<reason>/<method>: <decision>:
    nodepools=[...]: [nodes] [-> [N replacement(s)]] (savings: $x.xx)``, savings in USD/hour),
    ``decision``, ``disrupted-node-count``, ``replacement-node-count``, ``pod-count`` (pods to
    reschedule), ``disrupted-nodes`` (Node, NodeClaim, instance-type, capacity-type each) and
    ``replacement-nodes`` (capacity-type, and instance-types when there is one replacement)."""
    nodes = ", ".join(c.name for c in plan.candidates)
    pools = ",".join(dict.fromkeys(c.nodepool for c in plan.candidates if c.nodepool))
    n = len(plan.replacements)
    to = f" -> [{n} replacement{'' if n == 1 else 's'}]" if n else ""
    command = (f"{plan.reason.value}/{plan.method.value}: {plan.decision.value}: nodepools=[{pools}]: [{nodes}]{to} "
               f"(savings: ${plan.savings_per_hour:.2f})")
    replacements = []
    for r in plan.replacements:
        types = r.requirements.get(LABEL_CAPACITY_TYPE)
        allowed = set(types.values) if types is not None and not types.complement else {"reserved", "spot", "on-demand"}
        entry: dict[str, Any] = {"capacity-type": next((t for t in ("reserved", "spot") if t in allowed), "on-demand")}
        if n == 1:
            entry["instance-types"] = pretty_list([it.name for it in r.instance_types])
        replacements.append(entry)
    return {
        "command": command, "decision": plan.decision.value, "disrupted-node-count": len(plan.candidates),
        "replacement-node-count": n, "pod-count": sum(len(c.pods) for c in plan.candidates),
        "disrupted-nodes": [{"Node": {"name": c.name}, "NodeClaim": {"name": c.nodeclaim_name}, "instance-type": c.instance_type,
                             "capacity-type": c.capacity_type} for c in plan.candidates],
        "replacement-nodes": replacements,
    }


def _decision_events(snapshot: ClusterSnapshot, lines: list[NodeDecision]) -> list[Event]:
    nodes = {n.name: n for n in snapshot.node_views}
    claims = {n.name: c for n in snapshot.node_views if (c := snapshot.nodeclaim_by_provider_id(n.provider_id)) is not None}
    pools = {p.name: p for p in snapshot.nodepool_views}
    return decision_events(lines, nodes, claims, pools)


def poll_tick(start: float, t: float, period: float = 10.0) -> float:
    """The first poll time at or after ``t`` on a ``period`` grid starting at ``start``."""
    return start + math.ceil(round((t - start) / period, 9)) * period
