"""NodePool status: ``resources`` and ``nodes`` launched, and the Ready condition.

``status.resources`` sums the capacity of the pool's live NodeClaims (Kubernetes quantities, plus
``nodes``), as Karpenter's counter controller does; ``status.nodes`` counts them. Conditions
(Karpenter ``pkg/apis/v1/nodepool_status.go``):

* ``ValidationSucceeded`` (the object loaded);
* ``NodeClassReady`` (``nodepool/readiness``): True when the referenced NodeClass exists and is
  ``Ready=True``; False with ``NodeClassNotFound`` when it is absent (or of a kind karpy does not
  serve: there is no object to read), ``NodeClassTerminating`` when it is being deleted,
  ``NodeClassReadinessUnknown`` when its readiness is not reported, else the NodeClass's own
  ``Ready`` reason and message;
* ``NodeRegistrationHealthy`` (``nodepool/registrationhealth``, ``nodeclaim/lifecycle``): Unknown
  until launches are seen (and again when the NodePool's generation or its NodeClass's changes),
  False when at least half of the last 4 launches failed to launch or register (the failed
  launch's reason and message, or ``RegistrationFailed``), True when a registration succeeds
  with fewer failures; it does not gate launches;
* ``Ready`` when ValidationSucceeded and NodeClassReady hold. Only NodePools that are Ready launch capacity.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from karpy_core.apis.labels import LABEL_NODEPOOL
from karpy_core.controllers.base import Wake
from karpy_core.controllers.conditions import NODE_REGISTRATION_HEALTHY
from karpy_core.errors import NotFoundError
from karpy_core.kube.port import KINDS, KubeClient
from karpy_core.scheduling.resources import Resources, add_into, format_resource_list, parse_resource_list
from karpy_core.state.cluster import condition, is_managed
from karpy_core.state.views import NodePoolView
from karpy_core.utils.clock import Clock, iso
from karpy_core.utils.fields import field_of, map_of

__all__ = ["NodePoolStatus", "RegistrationHealth", "REGISTRATION_BUFFER", "UNHEALTHY_FRACTION"]

REGISTRATION_BUFFER = 4
"""Launch outcomes remembered per NodePool (Karpenter ``nodepoolhealth.BufferSize``)."""
UNHEALTHY_FRACTION = 0.5
"""Failed share of the buffer at which ``NodeRegistrationHealthy`` turns False (``ThresholdFalse``)."""


@dataclass
class _Failure:
    reason: str
    message: str


class RegistrationHealth:
    """The last :data:`REGISTRATION_BUFFER` launch outcomes of each NodePool (Karpenter
    ``pkg/state/nodepoolhealth``): the lifecycle controller records them, the NodePool status
    controller turns them into ``NodeRegistrationHealthy``."""

    def __init__(self) -> None:
        self._outcomes: dict[str, deque[bool]] = {}
        self._last_failure: dict[str, _Failure] = {}
        self._generations: dict[str, tuple[Any, Any]] = {}

    def record(self, nodepool: str, ok: bool, reason: str = "", message: str = "") -> None:
        """One NodeClaim of ``nodepool`` registered (``ok``) or was given up on; a failure's
        ``reason``/``message`` are its ``Launched`` condition's (``RegistrationFailed`` when it had launched)."""
        self._outcomes.setdefault(nodepool, deque(maxlen=REGISTRATION_BUFFER)).append(ok)
        if not ok:
            self._last_failure[nodepool] = _Failure(reason or "RegistrationFailed", message or "Failed to register node")

    def reset_on_change(self, nodepool: str, generations: tuple[Any, Any]) -> bool:
        """Forget ``nodepool``'s outcomes when its (NodePool, NodeClass) generations changed; True when reset."""
        prev = self._generations.get(nodepool)
        self._generations[nodepool] = generations
        if prev is not None and prev != generations:
            self._outcomes.pop(nodepool, None)
            self._last_failure.pop(nodepool, None)
            return True
        return False

    def status(self, nodepool: str) -> tuple[str, str, str] | None:
        """``(status, reason, message)`` of ``NodeRegistrationHealthy``, or None with no outcomes yet."""
        outcomes = self._outcomes.get(nodepool)
        if not outcomes:
            return None
        failed = sum(1 for ok in outcomes if not ok)
        if failed / REGISTRATION_BUFFER >= UNHEALTHY_FRACTION:
            f = self._last_failure[nodepool]
            return "False", f.reason, f.message
        return "True", NODE_REGISTRATION_HEALTHY, ""


def _cond(type_: str, ok: bool, reason: str, message: str, now: str, prev: dict[str, Any] | None) -> dict[str, Any]:
    status = "True" if ok else "False"
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt}


class NodePoolStatus:
    """Keeps every NodePool's status current."""

    name = "nodepool.status"
    wakes_on = (Wake.on("NodeClaim", "Node", "NodePool"),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def next_due(self) -> float | None:
        """None: NodePool status runs on changes and the resync."""
        return None

    def __init__(self, *, kube: KubeClient, clock: Clock, registration: RegistrationHealth | None = None,
                 unreported_is_ready: bool = False, managed: Collection[tuple[str, str]] | None = None):
        """``unreported_is_ready``: a NodeClass without a ``Ready`` condition counts as Ready (the
        simulator, which runs no provider's NodeClass status controller); Karpenter's rule, and the
        default, is ``NodeClassReadinessUnknown``. ``managed``: the provider's NodeClass kinds;
        NodePools of other kinds are left alone (:func:`~karpy_core.state.cluster.is_managed`)."""
        self.unreported_is_ready = unreported_is_ready
        self.managed = managed
        self.kube = kube
        self.clock = clock
        self.registration = registration or RegistrationHealth()
        """Launch outcomes per NodePool; the lifecycle controller given the same object records them."""

    async def reconcile(self) -> int:
        """Patch the NodePools whose status changed; returns how many were patched."""
        pools = await self.kube.list("NodePool")
        claims = await self.kube.list("NodeClaim")
        usage: dict[str, Resources] = {}
        for nc in claims:
            if nc["metadata"].get("deletionTimestamp"):
                continue
            pool = map_of(nc, "metadata", "labels").get(LABEL_NODEPOOL)
            if pool:
                u = usage.setdefault(pool, {})
                add_into(u, parse_resource_list(field_of(nc, "status", "capacity")))
                u["nodes"] = u.get("nodes", 0) + 1
        patched = 0
        now = iso(self.clock.now())
        for np_obj in pools:
            view = NodePoolView.of(np_obj)
            if not is_managed(view, self.managed):
                continue  # another cloud's NodePool: its NodeClass may not even be readable here
            name = view.name
            ref = map_of(np_obj, "spec", "template", "spec", "nodeClassRef")
            class_ok, class_reason, class_msg, class_gen = await self._nodeclass_ready(ref)
            u = usage.get(name, {})
            # Karpenter's validation controller: a NodePool the model rejects is ValidationSucceeded=False,
            # so not Ready (the decisions leave it out: ClusterSnapshot)
            valid_msg = "" if view.valid else view.error
            ok = class_ok and view.valid
            why = f"ValidationSucceeded=False: {valid_msg}" if not view.valid else f"NodeClassReady=False: {class_msg}"
            conds = [
                _cond("ValidationSucceeded", view.valid, "ValidationSucceeded" if view.valid else "NodePoolValidationFailed",
                      valid_msg, now, condition(np_obj, "ValidationSucceeded")),
                _cond("NodeClassReady", class_ok, class_reason, class_msg, now, condition(np_obj, "NodeClassReady")),
                self._registration_condition(np_obj, class_gen, now),
                _cond("Ready", ok, "Ready" if ok else "UnhealthyDependents", "" if ok else why, now, condition(np_obj, "Ready")),
            ]
            resources: dict[str, Any] = format_resource_list(u) if u else {}
            status: dict[str, Any] = {
                "resources": resources,
                "nodes": int(u.get("nodes", 0)),
                "conditions": conds,
            }
            if class_gen is not None:  # Karpenter's status.nodeClassObservedGeneration
                status["nodeClassObservedGeneration"] = class_gen
            current = map_of(np_obj, "status")
            if {k: current.get(k) or ({} if k == "resources" else current.get(k)) for k in status} != status:
                # a JSON merge patch only removes a key that is set to null: drop resources no longer in use
                patch = dict(status)
                patch["resources"] = {**dict.fromkeys(map_of(current, "resources")), **resources}
                await self.kube.patch("NodePool", name, {"status": patch}, status=True)
                patched += 1
        return patched

    def _registration_condition(self, np_obj: dict[str, Any], class_gen: Any, now: str) -> dict[str, Any]:
        name = np_obj["metadata"]["name"]
        prev = condition(np_obj, NODE_REGISTRATION_HEALTHY)
        reset = self.registration.reset_on_change(name, (np_obj["metadata"].get("generation"), class_gen))
        observed = field_of(np_obj, "status", "nodeClassObservedGeneration")
        # also across restarts: the NodeClass changed since the status last saw it (Karpenter's rule)
        reset = reset or (observed is not None and class_gen is not None and observed != class_gen)
        found = self.registration.status(name)
        if found is None:
            if prev is not None and not reset and prev.get("status") in ("True", "False"):
                return dict(prev)  # kept across restarts until a launch says otherwise (Karpenter seeds its tracker from it)
            status, reason, message = "Unknown", "AwaitingReconciliation", ""
        else:
            status, reason, message = found
        ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
        return {"type": NODE_REGISTRATION_HEALTHY, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt}

    async def _nodeclass_ready(self, ref: Mapping[str, Any]) -> tuple[bool, str, str, Any]:
        """``(ready, reason, message, NodeClass generation)`` of the NodePool's NodeClass (Karpenter ``nodepool/readiness``)."""
        kind, name = ref.get("kind", ""), ref.get("name", "")
        if kind not in KINDS:
            return False, "NodeClassNotFound", f"NodeClass not found on cluster ({kind}/{name}: not a kind karpy serves)", None
        try:
            obj = await self.kube.get(kind, name)
        except NotFoundError:
            return False, "NodeClassNotFound", f"NodeClass not found on cluster ({kind}/{name})", None
        gen = obj["metadata"].get("generation")
        if obj["metadata"].get("deletionTimestamp"):
            return False, "NodeClassTerminating", "NodeClass is Terminating", gen
        c = condition(obj, "Ready")
        if c is None and self.unreported_is_ready:
            return True, "NodeClassReady", "", gen
        if c is None or c.get("status") not in ("True", "False"):
            return False, "NodeClassReadinessUnknown", "Node Class Readiness Unknown", gen
        if c.get("status") == "False":
            return False, str(c.get("reason") or "NodeClassNotReady"), str(c.get("message") or ""), gen
        return True, "NodeClassReady", "", gen
