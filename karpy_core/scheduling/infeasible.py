"""Why a pod cannot go somewhere, as typed values.

Every placement check of the scheduler (:mod:`karpy_core.scheduling.feasibility`) answers with
an :class:`Infeasible`: a :class:`InfeasibleKind` saying which check failed and a human
``detail`` (empty while the scheduler searches; filled in when it explains). Explanations
(:mod:`karpy_core.scheduling.explain`) are built from the same values, so the reason a pod is
reported pending is always the check that actually ruled it out, and suggestions are chosen by
kind, never by reading the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["InfeasibleKind", "Infeasible", "PoolVerdict", "Unschedulable", "quiet"]


class InfeasibleKind(Enum):
    """Which check ruled a pod out of a NodePool, planned NodeClaim or existing node."""

    UNSUPPORTED = "unsupported"
    """The pod uses something karpy cannot provision for (matchFields, invalid affinity, volumes)."""
    NO_NODEPOOL = "no-nodepool"
    """No NodePool is defined or Ready."""
    NODEPOOL_NOT_READY = "nodepool-not-ready"
    NODEPOOL_NOT_SERVED = "nodepool-not-served"
    """The NodePool's NodeClass is of a kind the loaded cloud provider does not serve: karpy
    leaves the NodePool out (Karpenter's ``nodepoolutils.IsManaged``)."""
    UNTOLERATED_TAINT = "untolerated-taint"
    NODE_LIMIT = "node-limit"
    """The NodePool's ``limits.nodes`` is reached."""
    RESOURCE_NOT_OFFERED = "resource-not-offered"
    """The pod requests a resource no instance type of the NodePool has."""
    HOST_PORT = "host-port"
    INCOMPATIBLE_REQUIREMENTS = "incompatible-requirements"
    """The pod's node selector or affinity conflicts with the NodePool's (or node's) labels."""
    NO_MATCHING_TYPE = "no-matching-type"
    NO_OFFERING = "no-offering"
    NO_ROOM = "no-room"
    """No instance type (or node) has room for the requests."""
    LIMIT_EXCEEDED = "limit-exceeded"
    """A resource limit of the NodePool would be exceeded."""
    MIN_VALUES = "min-values"
    TOPOLOGY_SPREAD = "topology-spread"
    POD_ANTI_AFFINITY = "pod-anti-affinity"
    POD_AFFINITY = "pod-affinity"
    TOPOLOGY = "topology"
    """Some other topology rule (a domain the candidate cannot be in)."""
    TOPOLOGY_LABEL = "topology-label"
    """A topology constraint's key is not a label the node or claim can carry."""
    TAKEN_BY_PLAN = "taken-by-plan"
    """The pod fits a new node, but NodeClaims planned earlier in the run took the capacity."""
    RESERVATION_EXHAUSTED = "reservation-exhausted"
    """No offering is left but capacity reservations (the NodePool allows only ``reserved``, or the
    others are unavailable), and every compatible one is used up (by instances, or by NodeClaims
    planned earlier in the run)."""


@dataclass(frozen=True, slots=True)
class Infeasible:
    """One failed check.

    Attributes:
        kind: which check failed.
        detail: the human sentence (empty when produced by the scheduler's search, which does not
            need text).
    """

    kind: InfeasibleKind
    detail: str = ""

    def __str__(self) -> str:
        return self.detail or self.kind.value


_QUIET = {kind: Infeasible(kind) for kind in InfeasibleKind}


def quiet(kind: InfeasibleKind) -> Infeasible:
    """The shared detail-less :class:`Infeasible` of ``kind`` (no allocation on the hot path)."""
    return _QUIET[kind]


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    """Why a pod cannot use one NodePool: one :class:`Infeasible` per node-affinity term (OR'ed
    terms each fail on their own), or a single one for a check before the terms."""

    nodepool: str
    reasons: tuple[Infeasible, ...]

    @property
    def kinds(self) -> tuple[InfeasibleKind, ...]:
        """The kinds of :attr:`reasons`, in order."""
        return tuple(r.kind for r in self.reasons)

    @property
    def message(self) -> str:
        """The reasons' details joined with `` | `` (duplicates once)."""
        return " | ".join(dict.fromkeys(r.detail for r in self.reasons))


@dataclass(frozen=True, slots=True)
class Unschedulable:
    """Why a pod stays pending: a reason that applies everywhere (``general``), or one
    :class:`PoolVerdict` per NodePool (Ready ones by weight, then those not Ready)."""

    pools: tuple[PoolVerdict, ...] = ()
    general: Infeasible | None = None

    @property
    def kinds(self) -> frozenset[InfeasibleKind]:
        """Every kind named anywhere in this reason."""
        out = {r.kind for p in self.pools for r in p.reasons}
        if self.general is not None:
            out.add(self.general.kind)
        return frozenset(out)

    def pool(self, name: str) -> PoolVerdict:
        """The verdict for NodePool ``name``.

        Raises:
            KeyError: no verdict for that NodePool.
        """
        for p in self.pools:
            if p.nodepool == name:
                return p
        raise KeyError(name)

    @property
    def message(self) -> str:
        """The one-line reason reported for the pending pod (``NodePool a: ...; NodePool b: ...``)."""
        if self.general is not None:
            return self.general.detail
        return "; ".join(f"NodePool {p.nodepool}: {p.message}" for p in self.pools)
