"""NodePool status: ``resources`` and ``nodes`` launched, and the Ready condition.

``status.resources`` sums the capacity of the pool's live NodeClaims (Kubernetes quantities, plus
``nodes``), as Karpenter's counter controller does; ``status.nodes`` counts them. Conditions
(Karpenter ``pkg/apis/v1/nodepool_status.go``): ``ValidationSucceeded`` (the object loaded),
``NodeClassReady`` (the referenced NodeClass exists and is not ``Ready=False``), and ``Ready``
when both hold. Only NodePools that are Ready launch capacity.
"""

from __future__ import annotations

from typing import Any

from karpy_core.apis.labels import LABEL_NODEPOOL
from karpy_core.kube.port import KINDS, KubeClient
from karpy_core.scheduling.resources import Resources, add_into, format_resource_list, parse_resource_list
from karpy_core.state.cluster import condition
from karpy_core.utils.clock import Clock, iso

__all__ = ["NodePoolStatus"]


def _cond(type_: str, ok: bool, reason: str, message: str, now: str, prev: dict[str, Any] | None) -> dict[str, Any]:
    status = "True" if ok else "False"
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
    return {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt}


class NodePoolStatus:
    """Keeps every NodePool's status current."""

    name = "nodepool.status"

    def __init__(self, *, kube: KubeClient, clock: Clock):
        self.kube = kube
        self.clock = clock

    async def reconcile(self) -> int:
        """Patch the NodePools whose status changed; returns how many were patched."""
        pools = await self.kube.list("NodePool")
        claims = await self.kube.list("NodeClaim")
        usage: dict[str, Resources] = {}
        for nc in claims:
            if nc["metadata"].get("deletionTimestamp"):
                continue
            pool = (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL)
            if pool:
                u = usage.setdefault(pool, {})
                add_into(u, parse_resource_list((nc.get("status") or {}).get("capacity")))
                u["nodes"] = u.get("nodes", 0) + 1
        patched = 0
        now = iso(self.clock.now())
        for np_obj in pools:
            name = np_obj["metadata"]["name"]
            ref = ((np_obj.get("spec") or {}).get("template") or {}).get("spec", {}).get("nodeClassRef") or {}
            class_ok, class_msg = await self._nodeclass_ready(ref)
            u = usage.get(name, {})
            conds = [
                _cond("ValidationSucceeded", True, "ValidationSucceeded", "", now, condition(np_obj, "ValidationSucceeded")),
                _cond("NodeClassReady", class_ok, "NodeClassReady" if class_ok else "NodeClassNotReady", class_msg, now,
                      condition(np_obj, "NodeClassReady")),
                _cond("Ready", class_ok, "Ready" if class_ok else "UnhealthyDependents",
                      "" if class_ok else f"NodeClassReady=False: {class_msg}", now, condition(np_obj, "Ready")),
            ]
            resources: dict[str, Any] = format_resource_list(u) if u else {}
            status: dict[str, Any] = {
                "resources": resources,
                "nodes": int(u.get("nodes", 0)),
                "conditions": conds,
            }
            current = np_obj.get("status") or {}
            if {k: current.get(k) or ({} if k == "resources" else current.get(k)) for k in status} != status:
                # a JSON merge patch only removes a key that is set to null: drop resources no longer in use
                patch = dict(status)
                patch["resources"] = {**dict.fromkeys(current.get("resources") or {}), **resources}
                await self.kube.patch("NodePool", name, {"status": patch}, status=True)
                patched += 1
        return patched

    async def _nodeclass_ready(self, ref: dict[str, Any]) -> tuple[bool, str]:
        kind = ref.get("kind", "")
        if kind not in KINDS:
            return True, ""  # a provider kind karpy does not serve: the provider validates it
        try:
            obj = await self.kube.get(kind, ref.get("name", ""))
        except Exception:
            return False, f"{kind} {ref.get('name')!r} not found"
        c = condition(obj, "Ready")
        if c is not None and c.get("status") == "False":
            return False, f"{kind} {ref.get('name')!r} is not Ready: {c.get('message') or c.get('reason')}"
        return True, ""
