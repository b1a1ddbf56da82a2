"""Existing nodes as the scheduler sees them, and their per-run usage.

:class:`ExistingNode` is input: the scheduler never changes it. What a run adds to a node (pods'
requests and host ports) lives in a :class:`NodeUsage` owned by that run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy_core.scheduling.claim import HostPort
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.resources import Resources, subtract
from karpy_core.scheduling.taints import Taint

__all__ = ["ExistingNode", "NodeUsage"]


EPHEMERAL_TAINTS = frozenset({
    ("karpenter.sh/unregistered", "NoExecute"),
    ("node.kubernetes.io/not-ready", "NoSchedule"),
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
})
"""(key, effect) of the taints a node not initialized yet is expected to lose (Karpenter
``pkg/scheduling/taints.go`` ``KnownEphemeralTaints``)."""


@dataclass(frozen=True, slots=True, eq=False)
class ExistingNode:
    """A node (or a launched NodeClaim whose node has not registered yet) that pods may use.
    Input to the scheduler, which never changes it (nor its dicts and sets).

    Attributes:
        name: node name (or NodeClaim name while in flight).
        labels: node labels.
        taints: node taints.
        allocatable: internal units.
        requested: sum of the requests of pods bound to it, internal units.
        nodepool: owning NodePool name, or None for nodes karpy does not manage.
        initialized: False while in flight; startup taints and ``unregistered`` are ignored then.
        startup_taints: taints expected to disappear once the node initialises.
        host_ports: host ports held by the pods bound to it.
    """

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    allocatable: Resources
    requested: Resources = field(default_factory=dict)
    nodepool: str | None = None
    initialized: bool = True
    startup_taints: tuple[Taint, ...] = ()
    host_ports: set[HostPort] = field(default_factory=set)

    def effective_taints(self) -> tuple[Taint, ...]:
        """Taints pods must tolerate: all of them once initialized; before that, without the
        startup taints and the known ephemeral taints (:data:`EPHEMERAL_TAINTS`: ``unregistered``,
        and the not-ready, unreachable and cloud-provider-uninitialized taints kube-controller-manager
        and a cloud controller put on a node that is still starting), as Karpenter's
        ``statenode.go`` ``Taints`` ignores ``scheduling.KnownEphemeralTaints`` on a managed node
        not initialized yet. Without that, a registered node whose not-ready taint kube-controller-
        manager had not lifted yet (slow after an API server restart) held no room, and its pods
        got a second NodeClaim."""
        if self.initialized:
            return self.taints
        ignore = set(self.startup_taints)
        return tuple(t for t in self.taints
                     if t not in ignore and t.key != "karpenter.sh/unregistered" and (t.key, t.effect) not in EPHEMERAL_TAINTS)

    def free(self) -> Resources:
        """``allocatable - requested`` (internal units; may be negative)."""
        return subtract(self.allocatable, self.requested)


class NodeUsage:
    """One run's view of an :class:`ExistingNode`: its requests and host ports plus those of the
    pods the run placed there. Copies the node's values on the first change (copy on write), so
    the node itself is never modified."""

    __slots__ = ("_own_ports", "_own_requested", "host_ports", "node", "requested")

    def __init__(self, node: ExistingNode):
        self.node = node
        self.requested: Resources = node.requested
        self.host_ports: set[HostPort] = node.host_ports
        self._own_requested = False
        self._own_ports = False

    def free(self) -> Resources:
        """``allocatable - requested`` including this run's pods (internal units)."""
        return subtract(self.node.allocatable, self.requested)

    def add_ports(self, ports: frozenset[HostPort]) -> None:
        """Mark ``ports`` as held on the node for the rest of the run."""
        if not ports:
            return
        if not self._own_ports:
            self.host_ports = set(self.host_ports)
            self._own_ports = True
        self.host_ports |= ports

    def add(self, pod: PodInfo) -> None:
        """Count ``pod`` (requests and host ports) on the node for the rest of the run."""
        if not self._own_requested:
            self.requested = dict(self.requested)
            self._own_requested = True
        for r, v in pod.requests.items():
            self.requested[r] = self.requested.get(r, 0) + v
        self.add_ports(pod.host_ports)
