"""Status conditions as Karpenter's ``operatorpkg/status`` writes them.

A condition is ``{type, status, reason, message, lastTransitionTime}`` (plus
``observedGeneration`` where the object has one); ``lastTransitionTime`` moves only when the
status changes. ``SetTrue`` uses the type as the reason, as upstream does. The NodeClaim and
NodePool condition types and reasons karpy sets are listed here with the upstream file setting them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "set_condition", "clear_condition", "patch_conditions", "status_conditions",
    "CONSOLIDATABLE", "DRAINED", "VOLUMES_DETACHED", "INSTANCE_TERMINATING", "CONSISTENT_STATE_FOUND",
    "NODE_REGISTRATION_HEALTHY", "NODE_CLASS_READY", "VALIDATION_SUCCEEDED", "READY",
]

# NodeClaim (pkg/apis/v1/nodeclaim_status.go)
CONSOLIDATABLE = "Consolidatable"
"""True once ``consolidateAfter`` has passed since the last pod event (``nodeclaim/disruption/consolidation.go``);
removed while it has not, when ``consolidateAfter`` is ``Never`` or before ``Initialized``."""
DRAINED = "Drained"
"""Unknown/``Draining`` while the Node drains, True when drained (``node/termination/controller.go``)."""
VOLUMES_DETACHED = "VolumesDetached"
"""Unknown/``AwaitingVolumeDetachment`` while VolumeAttachments remain, True when none, False/
``TerminationGracePeriodElapsed`` when the grace period ran out first."""
INSTANCE_TERMINATING = "InstanceTerminating"
"""True once the cloud provider was asked to terminate the instance."""
CONSISTENT_STATE_FOUND = "ConsistentStateFound"
"""True when the Node matches its NodeClaim, False/``ConsistencyCheckFailed`` otherwise (``nodeclaim/consistency``)."""
# NodePool (pkg/apis/v1/nodepool_status.go)
VALIDATION_SUCCEEDED = "ValidationSucceeded"
NODE_CLASS_READY = "NodeClassReady"
NODE_REGISTRATION_HEALTHY = "NodeRegistrationHealthy"
READY = "Ready"


def status_conditions(obj: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """A new list of ``obj``'s ``status.conditions`` (the API's dicts, shared: replace, do not
    modify), empty when it has none or ``obj`` is None: what :func:`set_condition` and
    :func:`patch_conditions` take."""
    status = obj.get("status") if obj is not None else None
    return list(status.get("conditions") or ()) if status else []


def set_condition(conds: list[dict[str, Any]], type_: str, status: str, now: str, reason: str = "", message: str = "",
                  observed_generation: int | None = None) -> list[dict[str, Any]]:
    """``conds`` with ``type_`` set (a new list, sorted by type); ``reason`` defaults to ``type_``
    for True and to ``AwaitingReconciliation`` otherwise; ``now`` is RFC 3339."""
    prev = next((c for c in conds if c.get("type") == type_), None)
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
    new: dict[str, Any] = {"type": type_, "status": status,
                           "reason": reason or (type_ if status == "True" else "AwaitingReconciliation"),
                           "message": message, "lastTransitionTime": ltt}
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    return sorted([*(c for c in conds if c.get("type") != type_), new], key=lambda c: str(c.get("type")))


def clear_condition(conds: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    """``conds`` without ``type_``."""
    return [c for c in conds if c.get("type") != type_]


def patch_conditions(obj: dict[str, Any], conds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The status patch replacing ``obj``'s conditions by ``conds``, or None when nothing changes
    (the list compared without order)."""
    have = sorted(status_conditions(obj), key=lambda c: str(c.get("type")))
    return None if have == conds else {"status": {"conditions": conds}}
