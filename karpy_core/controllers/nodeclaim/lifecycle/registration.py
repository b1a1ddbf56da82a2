"""Registration (Karpenter ``nodeclaim/lifecycle/registration.go``): adopt the Node that came up
for a launched NodeClaim.

The Node with the NodeClaim's ``spec.providerID`` gets the ``karpenter.sh/termination``
finalizer, the NodeClaim as owner, its labels, taints and startup taints, loses
``karpenter.sh/unregistered`` and is labelled ``karpenter.sh/registered=true``; the NodeClaim
gets ``Registered`` and ``status.nodeName``. Publishes ``Registered`` (and Karpenter's
``UnregisteredTaintMissing`` when the Node lacked the taint) and counts
``karpenter_nodes_created_total``.

Like Karpenter, registration writes nothing on the pods planned for the claim. karpy used to set
their ``status.nominatedNodeName`` here (a GET and a status PATCH per pod before the taint came
off); on the real control plane that made every Node wait for its pods' round trips and made
kube-scheduler account for thousands of nominated pods on every attempt: 5,000 pending pods took
356 s to run instead of 125 s, and 1,000 pods 39 s instead of 32 s
(``benchmarks/controller_apiserver.py --catalog kwok``, issue 36). The provisioner's own
nominations (``karpy_core/state/nominations.py``) still keep the pods' room on an in-flight claim.
"""

from __future__ import annotations

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
from karpy_core.logs import fields
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.clock import iso
from karpy_core.utils.fields import field_of, map_of

__all__ = ["Registration"]


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
