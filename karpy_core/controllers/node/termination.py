"""Node termination: drain a deleted managed Node, then let it go.

A Node that karpy manages carries the ``karpenter.sh/termination`` finalizer. When it is deleted
(by the NodeClaim finalizer, or by a user), this controller (Karpenter
``pkg/controllers/node/termination``):

1. deletes its NodeClaim, if that still exists, so the instance is terminated afterwards;
2. taints it ``karpenter.sh/disrupted:NoSchedule`` so nothing new lands on it;
3. evicts its pods through the Eviction API (so PodDisruptionBudgets are enforced by the API
   server; a 429 leaves the pod for the next pass), DaemonSet pods last and not at all when the
   only ones left;
4. removes the finalizer once no evictable pod remains. The NodeClaim finalizer then terminates
   the instance through the cloud provider.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from karpy_core.apis.labels import FINALIZER_TERMINATION, TAINT_DISRUPTED
from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KubeClient

__all__ = ["NodeTermination", "TerminationEvent"]

log = logging.getLogger(__name__)


@dataclass
class TerminationEvent:
    """``kind`` is evict, evict-blocked or node-finalized."""

    kind: str
    node: str
    pod: str = ""
    reason: str = ""


def _owned_by_daemonset(pod: dict[str, Any]) -> bool:
    return any(r.get("kind") == "DaemonSet" for r in pod["metadata"].get("ownerReferences") or ())


def _is_mirror(pod: dict[str, Any]) -> bool:
    return "kubernetes.io/config.mirror" in (pod["metadata"].get("annotations") or {})


class NodeTermination:
    """Drains deleted Nodes that carry karpy's finalizer (see the module docstring)."""

    name = "node.termination"

    def __init__(self, *, kube: KubeClient):
        self.kube = kube

    async def reconcile(self) -> list[TerminationEvent]:
        events: list[TerminationEvent] = []
        nodes = [
            n for n in await self.kube.list("Node")
            if n["metadata"].get("deletionTimestamp") and FINALIZER_TERMINATION in (n["metadata"].get("finalizers") or [])
        ]
        if not nodes:
            return events
        pods = await self.kube.list("Pod")
        claims = await self.kube.list("NodeClaim")
        for node in nodes:
            events.extend(await self._terminate(node, pods, claims))
        return events

    async def _terminate(self, node: dict[str, Any], pods: list[dict[str, Any]], claims: list[dict[str, Any]]) -> list[TerminationEvent]:
        name = node["metadata"]["name"]
        events: list[TerminationEvent] = []
        pid = (node.get("spec") or {}).get("providerID")
        for claim in claims:
            if pid and (claim.get("status") or {}).get("providerID") == pid and not claim["metadata"].get("deletionTimestamp"):
                try:
                    await self.kube.delete("NodeClaim", claim["metadata"]["name"])
                except KubeAPIError as exc:
                    if exc.status != 404:
                        raise
        taints = list((node.get("spec") or {}).get("taints") or [])
        if not any(t.get("key") == TAINT_DISRUPTED for t in taints):
            taints.append({"key": TAINT_DISRUPTED, "effect": "NoSchedule"})
            await self.kube.patch("Node", name, {"spec": {"taints": taints}})
        on_node = [
            p for p in pods
            if (p.get("spec") or {}).get("nodeName") == name
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not _is_mirror(p)
        ]
        regular = [p for p in on_node if not _owned_by_daemonset(p) and not p["metadata"].get("deletionTimestamp")]
        remaining = [p for p in on_node if not _owned_by_daemonset(p)]
        for pod in regular:
            key = f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"
            try:
                await self.kube.evict(pod)
                events.append(TerminationEvent("evict", name, key))
            except KubeAPIError as exc:
                if exc.status == 404:
                    continue
                if exc.status == 429:
                    events.append(TerminationEvent("evict-blocked", name, key, reason=str(exc)))
                    continue
                raise
        if remaining:
            return events
        finalizers = [f for f in node["metadata"].get("finalizers") or [] if f != FINALIZER_TERMINATION]
        try:
            await self.kube.patch("Node", name, {"metadata": {"finalizers": finalizers}})
        except KubeAPIError as exc:
            if exc.status != 404:
                raise
        events.append(TerminationEvent("node-finalized", name))
        return events
