"""NodeClaim lifecycle: launch, registration, initialization, liveness, and finalization.

Phases (Karpenter ``pkg/controllers/nodeclaim/lifecycle/``):

* **launch**: add the ``karpenter.sh/termination`` finalizer, call the provider's ``create``,
  copy the resolved labels, provider ID, capacity and allocatable onto the NodeClaim, set
  ``Launched``. Insufficient capacity or a NodeClass that is not Ready deletes the claim (its pods
  provision again); a ``CreateError`` sets ``Launched=Unknown`` with its reason and is retried.
* **registration**: the Node with the same ``spec.providerID`` gets the finalizer, the
  NodeClaim's labels and taints, loses ``karpenter.sh/unregistered`` and is labelled
  ``karpenter.sh/registered=true``; ``Registered`` and ``status.nodeName`` are set.
* **initialization**: the Node is Ready, its startup taints and the ephemeral taints
  (``node.kubernetes.io/not-ready``, ``unreachable``, ``node.cloudprovider.kubernetes.io/uninitialized``)
  are gone and every requested extended resource is allocatable -> label
  ``karpenter.sh/initialized=true``, ``Initialized`` and ``Ready``.
* **liveness**: no launch within 5 minutes or no registration within 15 minutes deletes the claim.
* **finalization** (claim being deleted): delete the Node, call the provider's ``delete`` until it
  reports the instance gone (``InstanceTerminating=True`` from the first call), then remove the finalizer.
* **consistency** (Karpenter ``nodeclaim/consistency``, every 10 minutes per initialized claim):
  the Node's capacity must be at least 90% of the NodeClaim's for every requested resource;
  ``ConsistentStateFound`` True, or False/``ConsistencyCheckFailed`` with a ``FailedConsistencyCheck`` event.

With ``events``, Karpenter's lifecycle events are published: ``InsufficientCapacityError`` and
``NodeClassNotReady`` when a launch fails so. With ``registration``, each registration and each
liveness deletion is recorded for the NodePool's ``NodeRegistrationHealthy`` condition.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.labels import (
    FINALIZER_TERMINATION,
    LABEL_CAPACITY_TYPE,
    LABEL_HOSTNAME,
    LABEL_INITIALIZED,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_REGISTERED,
    LABEL_ZONE,
    TAINT_UNREGISTERED,
    nodeclass_label_key,
)
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import CONSISTENT_STATE_FOUND, INSTANCE_TERMINATING, patch_conditions, set_condition
from karpy_core.controllers.nodepool_status import RegistrationHealth
from karpy_core.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    KubeAPIError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields, reconciling
from karpy_core.scheduling.resources import parse_resource_list
from karpy_core.state.cluster import condition, is_true
from karpy_core.state.nominations import Nominations
from karpy_core.state.views import ViewCache
from karpy_core.utils.clock import Clock, iso
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = ["NodeClaimLifecycle", "LifecycleEvent", "LAUNCH_TTL", "REGISTRATION_TTL"]

log = logging.getLogger(__name__)

LAUNCH_TTL = 5 * 60.0
"""Seconds a NodeClaim may stay un-launched before liveness deletes it (Karpenter ``liveness.go``)."""
REGISTRATION_TTL = 15 * 60.0
"""Seconds a launched NodeClaim may stay unregistered before liveness deletes it."""
CONSISTENCY_SCAN_SECONDS = 10 * 60.0
"""Seconds between two consistency checks of one NodeClaim (Karpenter ``scanPeriod``)."""
CONSISTENCY_MIN_FRACTION = 0.9
"""Share of the NodeClaim's capacity the Node must report per requested resource (``nodeshape.go``)."""

EPHEMERAL_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.cloudprovider.kubernetes.io/uninitialized",
)


@dataclass
class LifecycleEvent:
    """Something the lifecycle controller did: ``kind`` is launch, register, initialize,
    launch-failed, liveness-delete, delete or terminate."""

    kind: str
    nodeclaim: str
    node: str = ""
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)


def _set_condition(conds: list[dict[str, Any]], type_: str, status: str, reason: str, message: str, now: str) -> list[dict[str, Any]]:
    out = [c for c in conds if c.get("type") != type_]
    prev = next((c for c in conds if c.get("type") == type_), None)
    ltt = prev["lastTransitionTime"] if prev and prev.get("status") == status and prev.get("lastTransitionTime") else now
    out.append({"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": ltt})
    return sorted(out, key=lambda c: c["type"])


class NodeClaimLifecycle:
    """Drives every NodeClaim through launch -> registration -> initialization, and finalizes
    deleted ones.

    Args:
        kube: the cluster.
        provider: the active cloud provider.
        clock: the clock (virtual in the simulator).
        events: where Karpenter's lifecycle events go; none: not published.
        registration: launch outcomes for ``NodeRegistrationHealthy`` (shared with the NodePool status controller).
        nominations: the provisioner's pod nominations: at registration, before the
            ``karpenter.sh/unregistered`` taint goes, each pending pod nominated to the NodeClaim
            gets ``status.nominatedNodeName`` = the Node's name, which kube-scheduler tries first
            and holds room for (KEP-1923 "try nominated node first"; its nominator counts a node's
            nominated pods against other pods of no higher priority), so the pods land as planned.
    """

    name = "nodeclaim.lifecycle"

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, events: EventRecorder | None = None,
                 registration: RegistrationHealth | None = None, nominations: Nominations | None = None):
        self.kube = kube
        self.nominations = nominations
        self.provider = provider
        self.clock = clock
        self.events = events
        self.registration = registration
        self._scanned: dict[str, float] = {}
        """NodeClaim uid -> epoch seconds of its last consistency check."""
        self._views = ViewCache()
        """NodeClaim views by version: the pydantic NodeClaim handed to the provider is validated
        once per version, however many passes retry a launch or a termination."""

    async def reconcile(self) -> list[LifecycleEvent]:
        """One pass over every NodeClaim; returns what happened."""
        events: list[LifecycleEvent] = []
        nodes = await self.kube.list("Node")
        by_pid = {str(n["spec"]["providerID"]): n for n in nodes if (n.get("spec") or {}).get("providerID")}
        failures = 0
        for nc in await self.kube.list("NodeClaim"):
            with reconciling("NodeClaim", nc["metadata"]["name"]):
                try:
                    events.extend(await self.reconcile_one(nc, by_pid))
                except (KubeAPIError, CloudProviderError, ValueError) as exc:
                    # one NodeClaim's failure must not stall the others; it is retried next pass
                    failures += 1
                    log.warning("reconciling nodeclaim failed; retrying", extra=fields(nodeclaim=nc, error=exc))
        if failures:
            events.append(LifecycleEvent("reconcile-failed", "", reason=f"{failures} NodeClaim(s) failed; retrying"))
        self._views.sweep()
        return events

    async def reconcile_one(self, nc: dict[str, Any], nodes_by_pid: dict[str, dict[str, Any]]) -> list[LifecycleEvent]:
        name = nc["metadata"]["name"]
        if nc["metadata"].get("deletionTimestamp"):
            return await self._finalize(nc, nodes_by_pid)
        if FINALIZER_TERMINATION not in (nc["metadata"].get("finalizers") or []):
            nc = await self.kube.patch(
                "NodeClaim", name, {"metadata": {"finalizers": [*(nc["metadata"].get("finalizers") or []), FINALIZER_TERMINATION]}}
            )
        now = self.clock.now()
        created = parse_rfc3339(nc["metadata"].get("creationTimestamp")) or now
        if not is_true(nc, "Launched"):
            if now - created > LAUNCH_TTL and condition(nc, "Launched") is not None:
                self._record(nc, False)
                await self.kube.delete("NodeClaim", name)
                return [LifecycleEvent("liveness-delete", name, reason="not launched within 5m",
                                       details={"nodepool": (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, "")})]
            return await self._launch(nc)
        pid = str((nc.get("status") or {}).get("providerID") or "")
        node = nodes_by_pid.get(pid)
        if not is_true(nc, "Registered"):
            if node is None:
                launched_at = parse_rfc3339((condition(nc, "Launched") or {}).get("lastTransitionTime")) or created
                if now - launched_at > REGISTRATION_TTL:
                    self._record(nc, False)
                    await self.kube.delete("NodeClaim", name)
                    return [LifecycleEvent("liveness-delete", name, reason="not registered within 15m",
                                           details={"nodepool": (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, "")})]
                return []
            return await self._register(nc, node)
        if node is not None:
            await self._hydrate(nc, node)
        if node is not None and not is_true(nc, "Initialized"):
            return await self._initialize(nc, node)
        if node is not None:
            await self._check_consistency(nc, node, now)
        return []

    async def _hydrate(self, nc: dict[str, Any], node: dict[str, Any]) -> None:
        """Karpenter's hydration controllers: a NodeClaim and Node made before the NodeClass label
        existed get ``<group>/<kind lower-cased>: <NodeClass name>``."""
        ref = (nc.get("spec") or {}).get("nodeClassRef") or {}
        if not (ref.get("group") and ref.get("kind") and ref.get("name")):
            return
        key, value = nodeclass_label_key(str(ref["group"]), str(ref["kind"])), str(ref["name"])
        for kind, obj in (("NodeClaim", nc), ("Node", node)):
            if (obj["metadata"].get("labels") or {}).get(key) != value:
                await self.kube.patch(kind, obj["metadata"]["name"], {"metadata": {"labels": {key: value}}})

    def _record(self, nc: dict[str, Any], ok: bool) -> None:
        pool = (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, "")
        if self.registration is None or not pool:
            return
        launched = condition(nc, "Launched") or {}
        if ok or launched.get("status") == "True":
            self.registration.record(pool, ok)
        else:
            self.registration.record(pool, False, str(launched.get("reason") or ""), str(launched.get("message") or ""))

    async def _check_consistency(self, nc: dict[str, Any], node: dict[str, Any], now: float) -> None:
        """Karpenter's node-shape check, at most every :data:`CONSISTENCY_SCAN_SECONDS` per claim."""
        uid = str(nc["metadata"].get("uid") or nc["metadata"]["name"])
        last = self._scanned.get(uid)
        if last is not None and now - last < CONSISTENCY_SCAN_SECONDS:
            return
        self._scanned[uid] = now
        if len(self._scanned) > 50_000:
            self._scanned = {k: t for k, t in self._scanned.items() if now - t < CONSISTENCY_SCAN_SECONDS}
        requested = parse_resource_list(((nc.get("spec") or {}).get("resources") or {}).get("requests"))
        expected = parse_resource_list((nc.get("status") or {}).get("capacity"))
        have = parse_resource_list((node.get("status") or {}).get("capacity"))
        raw_expected = (nc.get("status") or {}).get("capacity") or {}
        raw_have = (node.get("status") or {}).get("capacity") or {}
        issues = []
        for r, v in sorted(requested.items()):
            if v <= 0 or expected.get(r, 0) <= 0:
                continue
            pct = have.get(r, 0) / expected[r]
            if pct < CONSISTENCY_MIN_FRACTION:
                issues.append(f"expected {raw_expected.get(r)} of resource {r}, but found {raw_have.get(r, '0')} "
                              f"({pct * 100:.1f}% of expected)")
        conds = list((nc.get("status") or {}).get("conditions") or [])
        stamp = iso(now)
        if issues:
            for issue in issues:
                log.info("failed consistency check: NodeClaim %s: %s", nc["metadata"]["name"], issue)
                if self.events is not None:
                    await self.events.record(karpenter_events.failed_consistency_check(nc, issue))
            conds = set_condition(conds, CONSISTENT_STATE_FOUND, "False", stamp, "ConsistencyCheckFailed", "Consistency Check Failed")
        elif not is_true(nc, CONSISTENT_STATE_FOUND):
            conds = set_condition(conds, CONSISTENT_STATE_FOUND, "True", stamp)
        patch = patch_conditions(nc, conds)
        if patch is not None:
            await self.kube.patch("NodeClaim", nc["metadata"]["name"], patch, status=True)

    # ---- phases -----------------------------------------------------------------------------
    async def _launch(self, nc: dict[str, Any]) -> list[LifecycleEvent]:
        name = nc["metadata"]["name"]
        now = iso(self.clock.now())
        try:
            launched = await self.provider.create(self._views.nodeclaim(nc).model)
        except (InsufficientCapacityError, NodeClassNotReadyError) as exc:
            if self.events is not None:
                build = (karpenter_events.insufficient_capacity if isinstance(exc, InsufficientCapacityError)
                         else karpenter_events.nodeclass_not_ready)
                await self.events.record(build(nc, str(exc)))
            await self.kube.delete("NodeClaim", name)
            return [LifecycleEvent("launch-failed", name, reason=type(exc).__name__, details={"message": str(exc)})]
        except CreateError as exc:
            conds = _set_condition(
                (nc.get("status") or {}).get("conditions") or [], "Launched", "Unknown", exc.condition_reason, exc.condition_message, now
            )
            await self.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True)
            return [LifecycleEvent("launch-failed", name, reason=exc.condition_reason, details={"message": exc.condition_message})]
        out = launched.model_dump(by_alias=True, exclude_none=True, mode="json")
        labels = dict(nc["metadata"].get("labels") or {})
        labels.update((out.get("metadata") or {}).get("labels") or {})
        annotations = dict(nc["metadata"].get("annotations") or {})
        annotations.update((out.get("metadata") or {}).get("annotations") or {})
        await self.kube.patch("NodeClaim", name, {"metadata": {"labels": labels, "annotations": annotations}})
        status = dict(out.get("status") or {})
        status["conditions"] = _set_condition(
            (nc.get("status") or {}).get("conditions") or [], "Launched", "True", "Launched", "", now
        )
        for t in ("Registered", "Initialized", "Ready"):
            if condition({"status": status}, t) is None:
                status["conditions"] = _set_condition(status["conditions"], t, "Unknown", "AwaitingReconciliation", "", now)
        await self.kube.patch("NodeClaim", name, {"status": status}, status=True)
        log.info("launched nodeclaim", extra=fields(  # Karpenter's line and keys (nodeclaim/lifecycle/launch.go)
            provider_id=status.get("providerID", ""), **{"instance-type": labels.get(LABEL_INSTANCE_TYPE, ""),
                                                         "zone": labels.get(LABEL_ZONE, ""),
                                                         "capacity-type": labels.get(LABEL_CAPACITY_TYPE, ""),
                                                         "allocatable": status.get("allocatable") or {}}))
        return [
            LifecycleEvent(
                "launch",
                name,
                details={
                    "providerID": status.get("providerID", ""),
                    "instanceType": labels.get(LABEL_INSTANCE_TYPE, ""),
                    "zone": labels.get(LABEL_ZONE, ""),
                    "capacityType": labels.get(LABEL_CAPACITY_TYPE, ""),
                },
            )
        ]

    async def _register(self, nc: dict[str, Any], node: dict[str, Any]) -> list[LifecycleEvent]:
        name = nc["metadata"]["name"]
        node_name = node["metadata"]["name"]
        spec = nc.get("spec") or {}
        node_taints = (node.get("spec") or {}).get("taints") or []
        if LABEL_REGISTERED not in (node["metadata"].get("labels") or {}) and not any(
                t.get("key") == TAINT_UNREGISTERED and t.get("effect") == "NoExecute" for t in node_taints):
            log.error("NodeClaim %s: Node %s registered without the %s:NoExecute taint that prevents registration races",
                      name, node_name, TAINT_UNREGISTERED)
            if self.events is not None:
                await self.events.record(karpenter_events.unregistered_taint_missing(nc))
        labels = dict(node["metadata"].get("labels") or {})
        labels.update(nc["metadata"].get("labels") or {})
        labels[LABEL_REGISTERED] = "true"
        labels.setdefault(LABEL_HOSTNAME, node_name)
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") != TAINT_UNREGISTERED]
        have = {(t.get("key"), t.get("effect")) for t in taints}
        for t in [*(spec.get("taints") or []), *(spec.get("startupTaints") or [])]:
            if (t.get("key"), t.get("effect")) not in have:
                taints.append(dict(t))
        await self._nominate_pods(name, node_name)
        finalizers = list(node["metadata"].get("finalizers") or [])
        if FINALIZER_TERMINATION not in finalizers:
            finalizers.append(FINALIZER_TERMINATION)
        owner = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": name, "uid": nc["metadata"].get("uid", "")}
        await self.kube.patch(
            "Node",
            node_name,
            {"metadata": {"labels": labels, "finalizers": finalizers, "ownerReferences": [owner]}, "spec": {"taints": taints}},
        )
        now = iso(self.clock.now())
        conds = _set_condition((nc.get("status") or {}).get("conditions") or [], "Registered", "True", "Registered", "", now)
        await self.kube.patch("NodeClaim", name, {"status": {"nodeName": node_name, "conditions": conds}}, status=True)
        pool = (nc["metadata"].get("labels") or {}).get("karpenter.sh/nodepool", "")
        self._record(nc, True)
        log.info("registered nodeclaim", extra=fields(node=node_name, provider_id=(nc.get("status") or {}).get("providerID")))
        return [LifecycleEvent("register", name, node=node_name, details={"nodepool": pool})]

    async def _nominate_pods(self, nodeclaim: str, node_name: str) -> None:
        """Set ``status.nominatedNodeName`` on the pods nominated to ``nodeclaim`` that are still
        pending (a pod gone, bound or deleting meanwhile is skipped). A hint only: an API error
        (a chart without the ``pods/status`` grant, a timeout) is logged and registration goes
        on, since an unregistered node would be deleted by liveness."""
        if self.nominations is None:
            return
        for key in self.nominations.pods_of(nodeclaim):
            namespace, _, pod = key.partition("/")
            try:
                current = await self.kube.get("Pod", pod, namespace)
                spec, meta = current.get("spec") or {}, current.get("metadata") or {}
                if spec.get("nodeName") or meta.get("deletionTimestamp") or \
                        (current.get("status") or {}).get("nominatedNodeName") == node_name:
                    continue
                await self.kube.patch("Pod", pod, {"status": {"nominatedNodeName": node_name}}, namespace, status=True)
            except KubeAPIError as exc:
                if exc.status != 404:
                    log.warning("nominating pod %s to node %s failed; registering anyway", key, node_name,
                                extra=fields(error=exc))

    async def _initialize(self, nc: dict[str, Any], node: dict[str, Any]) -> list[LifecycleEvent]:
        name = nc["metadata"]["name"]
        node_name = node["metadata"]["name"]
        if not is_true(node, "Ready"):
            return []
        startup = {(t.get("key"), t.get("effect")) for t in (nc.get("spec") or {}).get("startupTaints") or []}
        for t in (node.get("spec") or {}).get("taints") or []:
            if (t.get("key"), t.get("effect")) in startup or t.get("key") in EPHEMERAL_TAINTS:
                return []
        requested = parse_resource_list(((nc.get("spec") or {}).get("resources") or {}).get("requests"))
        alloc = parse_resource_list((node.get("status") or {}).get("allocatable"))
        for r, v in requested.items():
            if "/" in r and v > 0 and alloc.get(r, 0) == 0:
                return []
        await self.kube.patch("Node", node_name, {"metadata": {"labels": {LABEL_INITIALIZED: "true"}}})
        now = iso(self.clock.now())
        conds = (nc.get("status") or {}).get("conditions") or []
        conds = _set_condition(conds, "Initialized", "True", "Initialized", "", now)
        conds = _set_condition(conds, "Ready", "True", "Ready", "", now)
        await self.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True)
        log.info("initialized nodeclaim", extra=fields(node=node_name, provider_id=(nc.get("status") or {}).get("providerID"),
                                                       allocatable=(node.get("status") or {}).get("allocatable") or {}))
        return [LifecycleEvent("initialize", name, node=node_name)]

    async def _finalize(self, nc: dict[str, Any], nodes_by_pid: dict[str, dict[str, Any]]) -> list[LifecycleEvent]:
        name = nc["metadata"]["name"]
        if FINALIZER_TERMINATION not in (nc["metadata"].get("finalizers") or []):
            return []
        events: list[LifecycleEvent] = []
        pid = (nc.get("status") or {}).get("providerID")
        node = nodes_by_pid.get(pid) if pid else None
        if node is not None:
            if not node["metadata"].get("deletionTimestamp"):
                await self.kube.delete("Node", node["metadata"]["name"])
                events.append(LifecycleEvent("delete", name, node=node["metadata"]["name"], reason="NodeClaim deleted"))
            return events  # wait for the Node's own termination to finish
        if pid:
            if not is_true(nc, INSTANCE_TERMINATING):
                conds = set_condition(list((nc.get("status") or {}).get("conditions") or []), INSTANCE_TERMINATING, "True",
                                      iso(self.clock.now()))
                try:
                    await self.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True)
                except KubeAPIError as exc:
                    if exc.status != 404:
                        raise
            try:
                await self.provider.delete(self._views.nodeclaim(nc).model)
                return events  # retried until the provider says the instance is gone
            except NodeClaimNotFoundError:
                events.append(LifecycleEvent("terminate", name, reason="instance terminated",
                                             details={"nodepool": (nc["metadata"].get("labels") or {}).get(LABEL_NODEPOOL, "")}))
        finalizers = [f for f in nc["metadata"].get("finalizers") or [] if f != FINALIZER_TERMINATION]
        try:
            await self.kube.patch("NodeClaim", name, {"metadata": {"finalizers": finalizers}})
        except KubeAPIError as exc:
            if exc.status != 404:
                raise
        log.info("deleted nodeclaim", extra=fields(provider_id=pid))
        return events
