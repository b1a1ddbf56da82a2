"""The disruption controller's acting side (Karpenter ``pkg/controllers/disruption/queue.go``):
execute a validated command (taint the candidates, set their ``DisruptionReason``, create the
replacements, or delete the candidates at once when there are none), follow each queued command
until its replacements are Initialized (then delete the candidates) or one failed or timed out
(then un-taint them), and strip stale ``karpenter.sh/disrupted`` taints. Planning, validation
and the pass's order are :mod:`~karpy_core.controllers.disruption.controller`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from karpy_core.apis.labels import TAINT_DISRUPTED
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.disruption.command import Command, DisruptionEvent, DisruptionEventKind, command_log_values
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionReason, NodeDecision, Verdict
from karpy_core.controllers.disruption.undone import UndoneMoves
from karpy_core.controllers.provisioning.provisioner import nodeclaim_from_plan
from karpy_core.errors import KubeAPIError, NotFoundError
from karpy_core.kube.events import Event, EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import Clock, iso

__all__ = ["CommandQueue"]

log = logging.getLogger("karpy.disruption")


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list((node.get("spec") or {}).get("taints") or [])


class CommandQueue:
    """The commands being executed, and the writes that execute them (see the module docstring).

    Args:
        kube: the cluster.
        clock: the controller's clock (the ``DisruptionReason`` transition time).
        replacement_timeout: seconds a command waits for its replacements to be Initialized.
        undone: the consolidations made and undone (told of each command executed and finished).
        log_decisions: appends decision records to the controller's log (abandoned commands).
        events: where Karpenter's disruption events go; None: not published.
    """

    def __init__(self, *, kube: KubeClient, clock: Clock, replacement_timeout: float, undone: UndoneMoves,
                 log_decisions: Callable[[float, list[NodeDecision]], None], events: EventRecorder | None = None):
        self.kube = kube
        self.clock = clock
        self.replacement_timeout = replacement_timeout
        self.undone = undone
        self._log_decisions = log_decisions
        self.events = events
        self.commands: list[Command] = []
        """The executed commands waiting for their replacements, in execution order."""

    def nodes(self) -> set[str]:
        """The candidates' node names of every queued command."""
        return {n for cmd in self.commands for n in cmd.nodes}

    def timeouts(self) -> list[float]:
        """When each queued command times out (epoch seconds)."""
        return [cmd.started_at + self.replacement_timeout for cmd in self.commands]

    async def set_taint(self, node: str, on: bool) -> None:
        """Add (``on``) or remove the ``karpenter.sh/disrupted:NoSchedule`` taint on ``node`` (gone: nothing)."""
        try:
            obj = await self.kube.get("Node", node)
        except NotFoundError:
            return
        taints = [t for t in _taints(obj) if t.get("key") != TAINT_DISRUPTED]
        if on:
            taints.append({"key": TAINT_DISRUPTED, "effect": "NoSchedule"})
        if taints != _taints(obj):
            await self.kube.patch("Node", node, {"spec": {"taints": taints}})

    async def set_reason(self, nodeclaim: str, reason: DisruptionReason | None) -> None:
        """Set (or, with None, clear) the NodeClaim's ``DisruptionReason`` condition (gone: nothing)."""
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

    async def publish(self, evs: list[Event]) -> None:
        """Record ``evs`` as Kubernetes Events (none without a recorder)."""
        if self.events is not None and evs:
            await self.events.record(*evs)

    async def _get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return await self.kube.get(kind, name)
        except KubeAPIError:
            return None

    async def terminating(self, cand_node: str, nodeclaim: dict[str, Any] | None, reason: str) -> None:
        """``DisruptionTerminating`` on the candidate's Node and NodeClaim (Karpenter ``queue.go``)."""
        if self.events is not None:
            await self.publish(karpenter_events.terminating(await self._get("Node", cand_node), nodeclaim, reason))

    async def delete_claim(self, name: str) -> bool:
        """Delete the NodeClaim ``name``; False when it was already gone."""
        try:
            await self.kube.delete("NodeClaim", name)
            return True
        except NotFoundError:
            return False

    async def progress(self, snapshot: ClusterSnapshot, now: float) -> list[DisruptionEvent]:
        """Move each queued command on: once its replacements are all ``Initialized``, delete its
        candidates' NodeClaims; when a replacement failed (deleted) or the replacement timeout
        passed, un-taint the candidates, clear their ``DisruptionReason`` and drop it (its
        decision logged as ``REPLACEMENT_FAILED``/``REPLACEMENT_TIMEOUT``). Returns what was done."""
        events: list[DisruptionEvent] = []
        claims = {c.name: c for c in snapshot.nodeclaim_views}
        keep: list[Command] = []
        for cmd in self.commands:
            failed = [r for r in cmd.replacements if r not in claims or claims[r].deleting]
            timed_out = now - cmd.started_at >= self.replacement_timeout
            if failed or timed_out:
                kind = DecisionKind.REPLACEMENT_FAILED if failed else DecisionKind.REPLACEMENT_TIMEOUT
                why = f"replacement {failed[0]} failed to launch" if failed else "replacements not initialized in time"
                for c in cmd.plan.candidates:
                    await self.set_taint(c.name, False)
                    await self.set_reason(c.nodeclaim_name, None)
                    self._log_decisions(now, [NodeDecision(c.name, cmd.plan.method, Verdict.KEEP, kind, f"command abandoned: {why}")])
                events.append(DisruptionEvent(DisruptionEventKind.FAILED, ",".join(cmd.nodes), reason=why, decision=kind))
                self.undone.finished(cmd.nodes, now)
                continue
            for r in cmd.replacements:
                await self.publish([karpenter_events.launching(claims[r].raw, cmd.plan.reason.value)])
                if not claims[r].is_true("Initialized"):
                    await self.publish([karpenter_events.waiting_on_readiness(claims[r].raw)])
            if all(claims[r].is_true("Initialized") for r in cmd.replacements):
                for c in cmd.plan.candidates:
                    if await self.delete_claim(c.nodeclaim_name):
                        claim = claims.get(c.nodeclaim_name)
                        await self.terminating(c.name, claim.raw if claim is not None else None, cmd.plan.reason.value)
                        events.append(DisruptionEvent(DisruptionEventKind.DELETE, c.name, c.nodeclaim_name, reason=cmd.plan.reason.value,
                                                      details={"method": cmd.plan.method.value}))
                self.undone.finished(cmd.nodes, now)
                continue
            keep.append(cmd)
        self.commands = keep
        return events

    async def strip_stale(self, snapshot: ClusterSnapshot, busy: set[str]) -> list[DisruptionEvent]:
        """Remove the ``karpenter.sh/disrupted`` taint from nodes neither deleting nor in ``busy``
        (the nodes of the decided and queued commands); one :attr:`DisruptionEventKind.UNTAINT` each."""
        events = []
        deleting = {(c.get("status") or {}).get("providerID") for c in await self.kube.list("NodeClaim")
                    if c["metadata"].get("deletionTimestamp")}
        for n in snapshot.node_views:
            if n.deleting or n.name in busy:
                continue
            if n.provider_id in deleting:
                continue
            if n.disrupted:
                await self.set_taint(n.name, False)
                events.append(DisruptionEvent(DisruptionEventKind.UNTAINT, n.name,
                                              reason="stale karpenter.sh/disrupted taint"))
        return events

    async def execute(self, cmd: Command, now: float, snapshot: ClusterSnapshot) -> list[DisruptionEvent]:
        """Execute a validated command (Karpenter ``queue.go``): taint the candidates
        ``karpenter.sh/disrupted:NoSchedule``, set their ``DisruptionReason``, create the
        replacements and queue the command until they are Initialized; without replacements,
        delete the candidates' NodeClaims at once. Returns what was done."""
        plan = cmd.plan
        events: list[DisruptionEvent] = []
        log.info("disrupting node(s)", extra=command_log_values(plan))
        self.undone.executed(plan, snapshot, now)
        for c in plan.candidates:
            await self.set_taint(c.name, True)
            await self.set_reason(c.nodeclaim_name, plan.reason)
        events.append(DisruptionEvent(DisruptionEventKind.DISRUPT, ",".join(cmd.nodes), reason=plan.reason.value,
                                      details={"method": plan.method.value, "decision": plan.decision.value, "price": round(plan.price, 6),
                                               "replacement_price": round(plan.replacement_price, 6),
                                               "savings_per_hour": plan.savings_per_hour}))
        cmd.started_at = now
        for r in plan.replacements:
            created = await self.kube.create("NodeClaim", nodeclaim_from_plan(r))
            cmd.replacements.append(created["metadata"]["name"])
            await self.publish([karpenter_events.launching(created, plan.reason.value)])
            events.append(DisruptionEvent(DisruptionEventKind.REPLACEMENT_CREATE, nodeclaim=created["metadata"]["name"],
                                          reason=plan.reason.value, details={"nodepool": r.nodepool, "for": cmd.nodes,
                                                   "cheapest_price": round(r.cheapest_offering_price(), 6)}))
        self.undone.replacements_created(cmd.nodes, cmd.replacements)
        if not plan.replacements:
            for c in plan.candidates:
                if await self.delete_claim(c.nodeclaim_name):
                    await self.terminating(c.name, c.nodeclaim.raw, plan.reason.value)
                    events.append(DisruptionEvent(DisruptionEventKind.DELETE, c.name, c.nodeclaim_name, reason=plan.reason.value,
                                                  details={"method": plan.method.value}))
            self.undone.finished(cmd.nodes, now)
        else:
            self.commands.append(cmd)
        return events
