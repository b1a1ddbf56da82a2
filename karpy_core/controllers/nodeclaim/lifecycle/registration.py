"""Registration (Karpenter ``nodeclaim/lifecycle/registration.go``): adopt the Node that came up
for a launched NodeClaim.

The Node with the NodeClaim's ``spec.providerID`` gets the ``karpenter.sh/termination``
finalizer, the NodeClaim as owner, its labels, taints and startup taints, loses
``karpenter.sh/unregistered`` and is labelled ``karpenter.sh/registered=true``; the NodeClaim
gets ``Registered`` and ``status.nodeName``. Before the unregistered taint goes, each pending pod
the provisioner nominated to the NodeClaim gets ``status.nominatedNodeName`` (concurrently; kube-scheduler
tries that node first). Publishes ``Registered`` (and Karpenter's ``UnregisteredTaintMissing``
when the Node lacked the taint) and counts ``karpenter_nodes_created_total``.
"""

from __future__ import annotations

import asyncio
from typing import Any

from karpy_core.apis.labels import FINALIZER_TERMINATION, LABEL_HOSTNAME, LABEL_REGISTERED, LABEL_ZONE, TAINT_UNREGISTERED
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import status_conditions
from karpy_core.controllers.nodeclaim.lifecycle.common import (
    LifecycleDeps,
    LifecycleEvent,
    LifecycleEventKind,
    log,
    set_lifecycle_condition,
)
from karpy_core.errors import KubeAPIError, NotFoundError
from karpy_core.logs import fields
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.clock import iso
from karpy_core.utils.fields import field_of, map_of

__all__ = ["NOMINATION_CONCURRENCY", "Registration"]

NOMINATION_CONCURRENCY = 32
"""Pod nominations a registration sends at once (see :meth:`Registration._nominate_pods`)."""


class Registration:
    """The registration phase (see the module docstring)."""

    def __init__(self, deps: LifecycleDeps):
        self.deps = deps

    async def reconcile(self, nc: NodeClaimView, node: NodeView) -> list[LifecycleEvent]:
        """Register ``node`` for ``nc``; returns ``register``."""
        d = self.deps
        name, node_name = nc.name, node.name
        if LABEL_REGISTERED not in node.labels and not any(
                t.key == TAINT_UNREGISTERED and t.effect == "NoExecute" for t in node.taints):
            log.error("NodeClaim %s: Node %s registered without the %s:NoExecute taint that prevents registration races",
                      name, node_name, TAINT_UNREGISTERED)
            await d.publish(karpenter_events.unregistered_taint_missing(dict(nc.raw)))
        labels = {**node.labels, **nc.labels}
        labels[LABEL_REGISTERED] = "true"
        labels.setdefault(LABEL_HOSTNAME, node_name)
        raw_taints: list[dict[str, Any]] = field_of(node.raw, "spec", "taints") or []  # written back as they are
        taints = [t for t in raw_taints if t.get("key") != TAINT_UNREGISTERED]
        have = {(t.get("key"), t.get("effect")) for t in taints}
        spec = map_of(nc.raw, "spec")
        for t in [*(spec.get("taints") or []), *(spec.get("startupTaints") or [])]:
            if (t.get("key"), t.get("effect")) not in have:
                taints.append(dict(t))
        await self._nominate_pods(name, node_name)
        finalizers = list(node.raw["metadata"].get("finalizers") or [])
        if FINALIZER_TERMINATION not in finalizers:
            finalizers.append(FINALIZER_TERMINATION)
        owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": name, "uid": nc.raw["metadata"].get("uid", "")}
        await d.kube.patch(
            "Node",
            node_name,
            {"metadata": {"labels": labels, "finalizers": finalizers, "ownerReferences": [owner]}, "spec": {"taints": taints}},
        )
        now = iso(d.clock.now())
        conds = set_lifecycle_condition(status_conditions(nc.raw), "Registered", "True",
                                        "Registered", "", now)
        await d.kube.patch("NodeClaim", name, {"status": {"nodeName": node_name, "conditions": conds}}, status=True)
        pool = nc.nodepool or ""
        d.record_registration(nc, True)
        log.info("registered nodeclaim", extra=fields(node=node_name, provider_id=nc.provider_id or None))
        if d.metrics is not None:
            d.metrics.nodes_created.labels(nodepool=pool, zone=nc.labels.get(LABEL_ZONE, "")).inc()
        await d.publish(karpenter_events.registered(name, node_name))
        return [LifecycleEvent(LifecycleEventKind.REGISTER, name, node=node_name, details={"nodepool": pool})]

    async def _nominate_pods(self, nodeclaim: str, node_name: str) -> None:
        """Set ``status.nominatedNodeName`` on the pods nominated to ``nodeclaim`` that are still
        pending (a pod gone, bound or deleting meanwhile is skipped). A hint only: an API error
        (a chart without the ``pods/status`` grant, a timeout) is logged and registration goes
        on, since an unregistered node would be deleted by liveness.

        The pods are nominated concurrently, at most :data:`NOMINATION_CONCURRENCY` requests
        (a GET and a PATCH each) in flight: one at a time, a claim planned for 255 pods kept its
        Node tainted ``karpenter.sh/unregistered`` for the 510 round trips (10-40 s on a busy
        control plane, issue 36), and the lifecycle pass, which takes NodeClaims one by one, kept
        every later claim waiting behind it."""
        d = self.deps
        if d.nominations is None:
            return
        gate = asyncio.Semaphore(NOMINATION_CONCURRENCY)

        async def nominate(key: str) -> None:
            namespace, _, pod = key.partition("/")
            async with gate:
                try:
                    current = await d.kube.get("Pod", pod, namespace)
                    if field_of(current, "spec", "nodeName") or field_of(current, "metadata", "deletionTimestamp") or \
                            field_of(current, "status", "nominatedNodeName") == node_name:
                        return
                    await d.kube.patch("Pod", pod, {"status": {"nominatedNodeName": node_name}}, namespace, status=True)
                except NotFoundError:
                    return
                except KubeAPIError as exc:
                    log.warning("nominating pod %s to node %s failed; registering anyway", key, node_name,
                                extra=fields(error=exc))

        await asyncio.gather(*(nominate(key) for key in d.nominations.pods_of(nodeclaim)))
