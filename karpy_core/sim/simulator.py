"""The simulator: karpy's real controllers running against an in-memory cluster on a virtual clock.

Pipeline per step (the same decisions the real controller makes, only the cluster is simulated):

1. workloads -> pods (:mod:`karpy_core.sim.workloads`);
2. the simulated kube-scheduler binds what fits and marks the rest Unschedulable;
3. karpy's :class:`~karpy_core.controllers.provisioning.provisioner.Provisioner` turns
   Unschedulable pods into NodeClaims after the batch idle window;
4. karpy's :class:`~karpy_core.controllers.nodeclaim.lifecycle.NodeClaimLifecycle` launches them
   through the cloud provider, registers and initialises the Nodes the simulated kubelets create.

When nothing changes, the clock jumps to the next scheduled thing (a node finishing its boot, a
startup taint clearing); with nothing scheduled the run is over.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.lifecycle import LifecycleEvent, NodeClaimLifecycle
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import KINDS
from karpy_core.sim.kubelet import KubeletSimulator, KubeSchedulerSimulator
from karpy_core.sim.workloads import WorkloadSimulator
from karpy_core.state.cluster import is_provisionable
from karpy_core.utils.clock import VirtualClock

__all__ = ["Simulator", "SimEvent", "SIMULATED_KINDS"]

SIMULATED_KINDS = frozenset(KINDS)
"""Kinds the in-memory cluster stores; other kinds in the input are ignored (and reported)."""

BATCH_IDLE_SECONDS = 1.0
"""Provisioning batch idle window (Karpenter ``BATCH_IDLE_DURATION``, 1 s)."""


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
        provider: the cloud provider (normally ``simulated``).
        clock: virtual clock (a fresh one by default).
        boot_seconds: launch -> Node registration delay, seconds.
        startup_taint_seconds: registration -> startup taints removed, seconds.
    """

    def __init__(
        self,
        provider: CloudProvider,
        *,
        clock: VirtualClock | None = None,
        boot_seconds: float = 30.0,
        startup_taint_seconds: float = 10.0,
        preference_policy: str = "Respect",
    ):
        self.clock = clock or VirtualClock()
        self.start = self.clock.now()
        self.provider = provider
        self.cluster = InMemoryCluster(self.clock)
        self.workloads = WorkloadSimulator(self.cluster)
        self.kube_scheduler = KubeSchedulerSimulator(self.cluster)
        self.kubelet = KubeletSimulator(self.cluster, self.clock, boot_seconds=boot_seconds, startup_taint_seconds=startup_taint_seconds)
        self.provisioner = Provisioner(kube=self.cluster, provider=provider, preference_policy=preference_policy)
        self.lifecycle = NodeClaimLifecycle(kube=self.cluster, provider=provider, clock=self.clock)
        self.events: list[SimEvent] = []
        self.pending_reasons: dict[str, str] = {}
        self.explanations: dict[str, list[str]] = {}
        """Per pending pod (``ns/name``): the detailed explanation of the last provisioning pass."""

    def apply(self, objects: list[dict[str, Any]]) -> list[str]:
        """Create objects (Kubernetes dicts) in the cluster; returns ``kind/name`` of those ignored
        because the simulator does not model their kind."""
        ignored = []
        for obj in objects:
            kind = obj.get("kind", "")
            if kind not in SIMULATED_KINDS:
                ignored.append(f"{kind}/{(obj.get('metadata') or {}).get('name', '')}")
                continue
            if kind == "Pod" and not (obj.get("spec") or {}).get("nodeName"):
                obj = {**obj, "status": {"phase": "Pending"}}
            self.cluster.create_sync(kind, obj)
        return ignored

    def _record(self, events: list[LifecycleEvent]) -> None:
        t = self.clock.now() - self.start
        for e in events:
            self.events.append(SimEvent(t, e.kind, e.nodeclaim, e.node, e.reason, dict(e.details)))

    async def step(self) -> int:
        """One pass of every simulated and real controller; returns how many things changed."""
        changes = self.workloads.reconcile()
        changes += await self.kube_scheduler.reconcile()
        pending = [p for p in self.cluster.objects("Pod") if is_provisionable(p)]
        if pending:
            self.clock.advance(BATCH_IDLE_SECONDS)
            result = await self.provisioner.reconcile()
            if result.results is not None:
                self.pending_reasons = dict(result.results.errors)
                if result.scheduler is not None:
                    self.explanations = {
                        key: result.scheduler.explain_detail(result.pods[key]) for key in result.results.errors if key in result.pods
                    }
            t = self.clock.now() - self.start
            for nc in result.created:
                self.events.append(SimEvent(t, "nodeclaim-create", nc["metadata"]["name"], reason="provisioning",
                                            details={"nodepool": nc["metadata"]["labels"].get("karpenter.sh/nodepool", "")}))
            changes += len(result.created)
        else:
            self.pending_reasons = {}
        ev = await self.lifecycle.reconcile()
        self._record(ev)
        changes += len(ev)
        changes += self.kubelet.reconcile()
        ev = await self.lifecycle.reconcile()
        self._record(ev)
        changes += len(ev)
        return changes

    async def run(self, *, max_seconds: float = 24 * 3600.0, max_steps: int = 10_000) -> None:
        """Step until nothing changes and nothing is scheduled, or ``max_seconds`` of simulated
        time pass."""
        for _ in range(max_steps):
            changes = await self.step()
            if changes:
                continue
            due = self.kubelet.next_due()
            if due is None or due - self.start > max_seconds:
                return
            self.clock.advance_to(due)
