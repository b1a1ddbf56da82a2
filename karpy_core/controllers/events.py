"""Karpenter's events: the reasons, types, involved objects, messages and dedupe rules its
controllers publish, as builders the acting controllers call at the same moments.

Reasons are ``pkg/events/reason.go``; each builder names the upstream file it matches. Messages
are human text (a Karpenter runbook's ``kubectl get events --field-selector reason=...`` and its
message filters keep working). Objects are the Kubernetes dicts the controllers hold; a builder
given ``None`` for an optional object skips that event.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from karpy_core.kube.events import NORMAL, WARNING, Event, TokenBucket
from karpy_core.utils.fields import field_of, map_of

__all__ = [
    "DISRUPTION_BLOCKED", "DISRUPTION_LAUNCHING", "DISRUPTION_TERMINATING", "DISRUPTION_WAITING_READINESS",
    "UNCONSOLIDATABLE", "FAILED_SCHEDULING", "NO_COMPATIBLE_INSTANCE_TYPES", "NOMINATED", "NODE_REPAIR_BLOCKED",
    "DISRUPTED", "EVICTED", "FAILED_DRAINING", "TERMINATION_GRACE_PERIOD_EXPIRING", "TERMINATION_FAILED",
    "FAILED_CONSISTENCY_CHECK", "INSUFFICIENT_CAPACITY_ERROR", "UNREGISTERED_TAINT_MISSING", "NODE_CLASS_NOT_READY",
    "AWAITING_VOLUME_DETACHMENT", "POD_NOMINATION_RATE_LIMITER",
    "launching", "waiting_on_readiness", "terminating", "unconsolidatable", "blocked", "nodepool_blocked",
    "nominate_pod", "no_compatible_instance_types", "pod_failed_to_schedule", "node_repair_blocked", "evict_pod",
    "disrupt_pod_delete", "node_failed_to_drain", "node_awaiting_volume_detachment",
    "node_termination_grace_period_expiring", "nodeclaim_termination_grace_period_expiring",
    "failed_consistency_check", "insufficient_capacity", "nodeclass_not_ready", "unregistered_taint_missing",
    "title", "Reason", "PUBLISH_DEDUPE_SECONDS", "ref",
    "provisioned", "launched", "launched_message", "launch_failed", "registered", "initialized", "liveness_deleted",
    "nodeclaim_terminated", "drifted", "node_repair", "nodepool_repair_blocked", "garbage_collected", "expired",
]

class Reason(StrEnum):
    """Every event reason karpy publishes: Karpenter's ``pkg/events/reason.go`` and its
    controllers' own (``Launched``, ``Registered``, ...)."""

    DISRUPTION_BLOCKED = "DisruptionBlocked"
    DISRUPTION_LAUNCHING = "DisruptionLaunching"
    DISRUPTION_TERMINATING = "DisruptionTerminating"
    DISRUPTION_WAITING_READINESS = "DisruptionWaitingReadiness"
    UNCONSOLIDATABLE = "Unconsolidatable"
    FAILED_SCHEDULING = "FailedScheduling"
    NO_COMPATIBLE_INSTANCE_TYPES = "NoCompatibleInstanceTypes"
    NOMINATED = "Nominated"
    NODE_REPAIR_BLOCKED = "NodeRepairBlocked"
    DISRUPTED = "Disrupted"
    EVICTED = "Evicted"
    FAILED_DRAINING = "FailedDraining"
    TERMINATION_GRACE_PERIOD_EXPIRING = "TerminationGracePeriodExpiring"
    TERMINATION_FAILED = "FailedTermination"
    FAILED_CONSISTENCY_CHECK = "FailedConsistencyCheck"
    INSUFFICIENT_CAPACITY_ERROR = "InsufficientCapacityError"
    UNREGISTERED_TAINT_MISSING = "UnregisteredTaintMissing"
    NODE_CLASS_NOT_READY = "NodeClassNotReady"
    AWAITING_VOLUME_DETACHMENT = "AwaitingVolumeDetachment"
    # the NodeClaim's life, as the controllers that act publish it
    PROVISIONED = "Provisioned"
    LAUNCHED = "Launched"
    LAUNCH_FAILED = "LaunchFailed"
    REGISTERED = "Registered"
    INITIALIZED = "Initialized"
    LIVENESS_DELETED = "LivenessDeleted"
    TERMINATED = "Terminated"
    DRIFTED = "Drifted"
    NODE_REPAIR = "NodeRepair"
    GARBAGE_COLLECTED = "GarbageCollected"


# pkg/events/reason.go (the plain strings, as before the enum)
DISRUPTION_BLOCKED = Reason.DISRUPTION_BLOCKED.value
DISRUPTION_LAUNCHING = Reason.DISRUPTION_LAUNCHING.value
DISRUPTION_TERMINATING = Reason.DISRUPTION_TERMINATING.value
DISRUPTION_WAITING_READINESS = Reason.DISRUPTION_WAITING_READINESS.value
UNCONSOLIDATABLE = Reason.UNCONSOLIDATABLE.value
FAILED_SCHEDULING = Reason.FAILED_SCHEDULING.value
NO_COMPATIBLE_INSTANCE_TYPES = Reason.NO_COMPATIBLE_INSTANCE_TYPES.value
NOMINATED = Reason.NOMINATED.value
NODE_REPAIR_BLOCKED = Reason.NODE_REPAIR_BLOCKED.value
DISRUPTED = Reason.DISRUPTED.value
EVICTED = Reason.EVICTED.value
FAILED_DRAINING = Reason.FAILED_DRAINING.value
TERMINATION_GRACE_PERIOD_EXPIRING = Reason.TERMINATION_GRACE_PERIOD_EXPIRING.value
TERMINATION_FAILED = Reason.TERMINATION_FAILED.value
FAILED_CONSISTENCY_CHECK = Reason.FAILED_CONSISTENCY_CHECK.value
INSUFFICIENT_CAPACITY_ERROR = Reason.INSUFFICIENT_CAPACITY_ERROR.value
UNREGISTERED_TAINT_MISSING = Reason.UNREGISTERED_TAINT_MISSING.value
NODE_CLASS_NOT_READY = Reason.NODE_CLASS_NOT_READY.value
AWAITING_VOLUME_DETACHMENT = Reason.AWAITING_VOLUME_DETACHMENT.value

MINUTE = 60.0

POD_NOMINATION_RATE_LIMITER = TokenBucket(5, 10)
"""Shared by every ``Nominated`` event (Karpenter ``PodNominationRateLimiter``: 5/s, burst 10)."""


_API = {"Node": "v1", "Pod": "v1", "NodeClaim": "karpenter.sh/v1", "NodePool": "karpenter.sh/v1"}


def _as(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """``obj`` with its ``kind``/``apiVersion`` (list responses leave them out of items)."""
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {**obj, "kind": kind, "apiVersion": _API[kind]}


def _uid(obj: dict[str, Any]) -> str:
    meta = map_of(obj, "metadata")
    return str(meta.get("uid") or meta.get("name") or "")


def _name(obj: dict[str, Any]) -> str:
    return str(field_of(obj, "metadata", "name") or "")


def _kind_name(obj: dict[str, Any]) -> tuple[str, str]:
    """Dedupe values of the events Karpenter keys by name: the kind too, so a Node and its
    NodeClaim of the same name do not suppress each other's event."""
    return str(obj.get("kind") or ""), _name(obj)


def title(reason: str) -> str:
    """The first letter of each word upper-cased, the rest kept (``cases.Title(..., NoLower)``)."""
    return " ".join(w[:1].upper() + w[1:] for w in reason.split(" "))


def _pair(node: dict[str, Any] | None, nodeclaim: dict[str, Any] | None, type_: str, reason: str, message: str,
          extra: tuple[str, ...] = (), timeout: float = 2 * MINUTE) -> list[Event]:
    out = []
    for obj in (node, nodeclaim):
        if obj is not None:
            out.append(Event(obj, type_, reason, message, (_uid(obj), *extra), timeout))
    return out


# ---- disruption (pkg/controllers/disruption/events/events.go) ----------------------------------------

def launching(nodeclaim: dict[str, Any], reason: str) -> Event:
    """A disruption command's replacement NodeClaim was created: ``Launching NodeClaim: <Reason>``."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, NORMAL, DISRUPTION_LAUNCHING, f"Launching NodeClaim: {title(reason)}", (_uid(nodeclaim), reason))


def waiting_on_readiness(nodeclaim: dict[str, Any]) -> Event:
    """A replacement NodeClaim the command waits on is not initialized yet."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, NORMAL, DISRUPTION_WAITING_READINESS, "Waiting on readiness to continue disruption", (_uid(nodeclaim),))


def terminating(node: dict[str, Any] | None, nodeclaim: dict[str, Any] | None, reason: str) -> list[Event]:
    """A candidate is disrupted: ``Disrupting Node: <Reason>`` and ``Disrupting NodeClaim: <Reason>``."""
    node = _as(node, "Node") if node is not None else None
    nodeclaim = _as(nodeclaim, "NodeClaim") if nodeclaim is not None else None
    out = []
    if node is not None:
        out.append(Event(node, NORMAL, DISRUPTION_TERMINATING, f"Disrupting Node: {title(reason)}", (_uid(node), reason)))
    if nodeclaim is not None:
        out.append(Event(nodeclaim, NORMAL, DISRUPTION_TERMINATING, f"Disrupting NodeClaim: {title(reason)}",
                         (_uid(nodeclaim), reason)))
    return out


def unconsolidatable(node: dict[str, Any] | None, nodeclaim: dict[str, Any] | None, message: str) -> list[Event]:
    """The Node and NodeClaim cannot be consolidated, and why (deduplicated for 15 minutes)."""
    node = _as(node, "Node") if node is not None else None
    nodeclaim = _as(nodeclaim, "NodeClaim") if nodeclaim is not None else None
    return _pair(node, nodeclaim, NORMAL, UNCONSOLIDATABLE, message, timeout=15 * MINUTE)


def blocked(node: dict[str, Any] | None, nodeclaim: dict[str, Any] | None, message: str) -> list[Event]:
    """The Node and NodeClaim cannot be disrupted at all (do-not-disrupt, a PDB, no NodePool...)."""
    node = _as(node, "Node") if node is not None else None
    nodeclaim = _as(nodeclaim, "NodeClaim") if nodeclaim is not None else None
    return _pair(node, nodeclaim, NORMAL, DISRUPTION_BLOCKED, message)


def nodepool_blocked(nodepool: dict[str, Any], reason: str | None = None) -> Event:
    """A NodePool's budgets allow no disruption (for ``reason``, or for every reason), deduplicated for a minute."""
    nodepool = _as(nodepool, "NodePool")
    if reason is None:
        return Event(nodepool, NORMAL, DISRUPTION_BLOCKED, "No allowed disruptions due to blocking budget", (_uid(nodepool),), MINUTE)
    return Event(nodepool, NORMAL, DISRUPTION_BLOCKED,
                 f"No allowed disruptions for disruption reason {reason} due to blocking budget", (_uid(nodepool), reason), MINUTE)


# ---- provisioning (pkg/controllers/provisioning/scheduling/events.go) -------------------------------

def nominate_pod(pod: dict[str, Any], *, nodeclaim: str = "", node: str = "") -> Event:
    """The pod should land on ``nodeclaim`` / ``node`` (rate-limited: 5/s, burst 10)."""
    pod = _as(pod, "Pod")
    info = [*([f"nodeclaim/{nodeclaim}"] if nodeclaim else []), *([f"node/{node}"] if node else [])]
    return Event(pod, NORMAL, NOMINATED, f"Pod should schedule on: {', '.join(info)}", (_uid(pod),),
                 rate_limiter=POD_NOMINATION_RATE_LIMITER)


def no_compatible_instance_types(nodepool: dict[str, Any], min_values: bool = False) -> Event:
    """The NodePool's requirements leave no available instance type."""
    nodepool = _as(nodepool, "NodePool")
    message = ("NodePool requirements filtered out all compatible available instance types due to minValues incompatibility"
               if min_values else "NodePool requirements filtered out all compatible available instance types")
    return Event(nodepool, WARNING, NO_COMPATIBLE_INSTANCE_TYPES, message, (_uid(nodepool),), MINUTE)


def pod_failed_to_schedule(pod: dict[str, Any], error: str) -> Event:
    """``Failed to schedule pod, <why>`` (deduplicated for 5 minutes)."""
    pod = _as(pod, "Pod")
    return Event(pod, WARNING, FAILED_SCHEDULING, f"Failed to schedule pod, {error}", (_uid(pod),), 5 * MINUTE)


# ---- node health (pkg/controllers/node/health/events.go) --------------------------------------------

def node_repair_blocked(node: dict[str, Any], nodeclaim: dict[str, Any] | None, nodepool: dict[str, Any] | None,
                        reason: str) -> list[Event]:
    """Repair is blocked (too many unhealthy nodes); published on the Node, keyed by each object."""
    node = _as(node, "Node")
    keys = [o for o in (node, nodeclaim, nodepool) if o is not None]
    return [Event(node, WARNING, NODE_REPAIR_BLOCKED, reason, (_uid(o),), 15 * MINUTE) for o in keys]


# ---- termination (pkg/controllers/node/termination/terminator/events/events.go) ---------------------

def evict_pod(pod: dict[str, Any], reason: str) -> Event:
    """The pod was evicted while its node drains: ``Evicted pod: <reason>``."""
    pod = _as(pod, "Pod")
    return Event(pod, NORMAL, EVICTED, f"Evicted pod: {reason}", (_name(pod),))


def disrupt_pod_delete(pod: dict[str, Any], grace_seconds: int, termination_time: str) -> Event:
    """The pod was deleted at its node's terminationGracePeriod deadline."""
    pod = _as(pod, "Pod")
    declared = field_of(pod, "spec", "terminationGracePeriodSeconds")
    message = (f"Deleting the pod to accommodate the terminationTime {termination_time} of the node. The pod was granted "
               f"{grace_seconds} seconds of grace-period of its {declared if declared is not None else 30} "
               "terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.")
    return Event(pod, NORMAL, DISRUPTED, message, (_name(pod),))


def node_failed_to_drain(node: dict[str, Any], error: str) -> Event:
    """``Failed to drain node, <why>``."""
    node = _as(node, "Node")
    return Event(node, WARNING, FAILED_DRAINING, f"Failed to drain node, {error}", _kind_name(node))


def node_awaiting_volume_detachment(node: dict[str, Any], attachments: Sequence[str]) -> Event:
    """The node's VolumeAttachments are not gone yet (at most 5 names listed)."""
    node = _as(node, "Node")
    names = ", ".join(attachments[:5]) + (f" and {len(attachments) - 5} other(s)" if len(attachments) > 5 else "")
    return Event(node, NORMAL, AWAITING_VOLUME_DETACHMENT, f"Awaiting deletion of bound volumeattachments ({names})", _kind_name(node))


def node_termination_grace_period_expiring(node: dict[str, Any], termination_time: str) -> Event:
    """``All pods will be deleted by <RFC 3339 time>`` on the Node."""
    node = _as(node, "Node")
    return Event(node, WARNING, TERMINATION_GRACE_PERIOD_EXPIRING, f"All pods will be deleted by {termination_time}", _kind_name(node))


def nodeclaim_termination_grace_period_expiring(nodeclaim: dict[str, Any], termination_time: str) -> Event:
    """``All pods will be deleted by <RFC 3339 time>`` on the NodeClaim."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, WARNING, TERMINATION_GRACE_PERIOD_EXPIRING, f"All pods will be deleted by {termination_time}",
                 _kind_name(nodeclaim))


# ---- NodeClaim consistency and lifecycle (nodeclaim/consistency, nodeclaim/lifecycle events.go) ------

def failed_consistency_check(nodeclaim: dict[str, Any], issue: str) -> Event:
    """The Node does not match its NodeClaim (``issue`` says how)."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, WARNING, FAILED_CONSISTENCY_CHECK, issue, (_uid(nodeclaim), issue))


def _truncate(message: str, limit: int = 300) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def insufficient_capacity(nodeclaim: dict[str, Any], error: str) -> Event:
    """The launch found no capacity: ``NodeClaim <name> event: <error>``."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, WARNING, INSUFFICIENT_CAPACITY_ERROR, f"NodeClaim {_name(nodeclaim)} event: {_truncate(error)}",
                 (_uid(nodeclaim),))


def nodeclass_not_ready(nodeclaim: dict[str, Any], error: str) -> Event:
    """The launch found the NodeClass not Ready: ``NodeClaim <name> event: <error>``."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, WARNING, NODE_CLASS_NOT_READY, f"NodeClaim {_name(nodeclaim)} event: {_truncate(error)}",
                 (_uid(nodeclaim),))


def unregistered_taint_missing(nodeclaim: dict[str, Any]) -> Event:
    """The registering Node lacked the ``karpenter.sh/unregistered`` taint."""
    nodeclaim = _as(nodeclaim, "NodeClaim")
    return Event(nodeclaim, WARNING, UNREGISTERED_TAINT_MISSING,
                 "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on "
                 "Karpenter-managed nodes", (_uid(nodeclaim),))


# ---- the NodeClaim's life as karpy's controllers publish it --------------------------------------
# These name their object by kind and name only and are deduplicated as EventRecorder.publish does
# (same object, reason and message within 5 minutes).

PUBLISH_DEDUPE_SECONDS = 300.0
"""Suppression window of the events below (``EventRecorder.publish``'s default)."""


def ref(kind: str, name: str) -> dict[str, Any]:
    """The object reference these events are published on: ``kind``, its apiVersion and ``metadata.name``."""
    return {"kind": kind, "apiVersion": _API[kind], "metadata": {"name": name}}


def _published(obj: Mapping[str, Any], type_: str, reason: Reason, message: str) -> Event:
    meta = map_of(obj, "metadata")
    values = (str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
              str(meta.get("uid") or ""), message)
    return Event(dict(obj), type_, reason.value, message, values, PUBLISH_DEDUPE_SECONDS)


def provisioned(nodeclaim: dict[str, Any], pods: int, instance_types: Sequence[str]) -> Event:
    """A NodeClaim was created for ``pods`` pods: ``NodeClaim for <n> pod(s); instance types
    (cheapest first): <the first five>``."""
    return _published(nodeclaim, NORMAL, Reason.PROVISIONED,
                      f"NodeClaim for {pods} pod(s); instance types (cheapest first): {', '.join(instance_types)}")


def launched_message(details: Mapping[str, Any]) -> str:
    """The ``Launched`` event's text: ``Launched <type> (<capacity type>) in <zone>, providerID <id>``
    from the launch details (``instanceType``, ``capacityType``, ``zone``, ``providerID``; parts
    that are unknown are left out)."""
    parts = [details.get("instanceType") or "an instance"]
    if details.get("capacityType"):
        parts.append(f"({details['capacityType']})")
    if details.get("zone"):
        parts.append(f"in {details['zone']}")
    text = "Launched " + " ".join(parts)
    return text + (f", providerID {details['providerID']}" if details.get("providerID") else "")


def launched(nodeclaim: str, details: Mapping[str, Any]) -> Event:
    """The NodeClaim's instance was created (:func:`launched_message`)."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.LAUNCHED, launched_message(details))


def launch_failed(nodeclaim: str, reason: str, message: str) -> Event:
    """The launch failed: ``<error reason>: <message>``."""
    return _published(ref("NodeClaim", nodeclaim), WARNING, Reason.LAUNCH_FAILED, f"{reason}: {message}")


def registered(nodeclaim: str, node: str) -> Event:
    """``Node <name> registered``."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.REGISTERED, f"Node {node} registered")


def initialized(nodeclaim: str, node: str) -> Event:
    """``Node <name> initialized``."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.INITIALIZED, f"Node {node} initialized")


def liveness_deleted(nodeclaim: str, why: str) -> Event:
    """Liveness deleted the NodeClaim (``not launched within 5m``, ``not registered within 15m``)."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.LIVENESS_DELETED, why)


def nodeclaim_terminated(nodeclaim: str, why: str) -> Event:
    """The NodeClaim's instance is gone and its finalizer removed."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.TERMINATED, why)


def drifted(nodeclaim: str, message: str) -> Event:
    """The NodeClaim drifted (the drift message, or its reason)."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.DRIFTED, message)


def node_repair(node: str, nodeclaim: str, why: str) -> Event:
    """An unhealthy Node's NodeClaim is deleted: ``deleting NodeClaim <name>: <why>``."""
    return _published(ref("Node", node), WARNING, Reason.NODE_REPAIR, f"deleting NodeClaim {nodeclaim}: {why}")


def nodepool_repair_blocked(nodepool: str, why: str) -> Event:
    """Repair is blocked on the NodePool (karpy's, beside Karpenter's per-Node :func:`node_repair_blocked`)."""
    return _published(ref("NodePool", nodepool), WARNING, Reason.NODE_REPAIR_BLOCKED, why)


def garbage_collected(nodeclaim: str) -> Event:
    """The NodeClaim's instance no longer exists: the NodeClaim was deleted."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.GARBAGE_COLLECTED, "the instance no longer exists")


def expired(nodeclaim: str) -> Event:
    """The NodeClaim outlived ``expireAfter``: ``Disrupting NodeClaim: Expired``."""
    return _published(ref("NodeClaim", nodeclaim), NORMAL, Reason.DISRUPTION_TERMINATING, "Disrupting NodeClaim: Expired")
