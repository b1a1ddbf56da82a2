"""Launch (Karpenter ``nodeclaim/lifecycle/launch.go``): create the instance through the cloud
provider and copy what it resolved onto the NodeClaim.

The provider's ``create`` gets the pydantic NodeClaim; its labels, annotations, provider ID,
capacity and allocatable are written back and ``Launched`` set (``Registered``, ``Initialized``
and ``Ready`` start Unknown). Insufficient capacity or a NodeClass that is not Ready deletes the
claim (its pods provision again) with Karpenter's ``InsufficientCapacityError`` /
``NodeClassNotReady`` event; a ``CreateError`` sets ``Launched=Unknown`` with its reason and is
retried; any other ``CloudProviderError`` (a plugin hook's own exception arrives as
``PluginHookError``) sets ``Launched=Unknown`` with reason ``LaunchFailed`` and the error as its
message (Karpenter ``launch.go``) and is retried. Publishes ``Launched`` or ``LaunchFailed`` and counts failed creates in
``karpenter_cloudprovider_errors_total``.
"""

from __future__ import annotations

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import status_conditions
from karpy_core.controllers.nodeclaim.lifecycle.common import (
    CONTROLLER,
    LifecycleDeps,
    LifecycleEvent,
    LifecycleEventKind,
    log,
    set_lifecycle_condition,
)
from karpy_core.errors import CloudProviderError, CreateError, InsufficientCapacityError, NodeClassNotReadyError
from karpy_core.logs import fields
from karpy_core.state.views import NodeClaimView, condition_of
from karpy_core.utils.clock import iso
from karpy_core.utils.fields import map_of

__all__ = ["Launch", "launch_attempted"]


class Launch:
    """The launch phase (see the module docstring)."""

    def __init__(self, deps: LifecycleDeps):
        self.deps = deps

    async def _failed(self, nc: NodeClaimView, reason: str, message: str) -> list[LifecycleEvent]:
        d = self.deps
        if d.metrics is not None:
            d.metrics.cloudprovider_errors.labels(controller=CONTROLLER, method="Create", provider=d.provider.name,
                                                  error=reason).inc()
        await d.publish(karpenter_events.launch_failed(nc.name, reason, message))
        return [LifecycleEvent(LifecycleEventKind.LAUNCH_FAILED, nc.name, reason=reason, details={"message": message})]

    async def reconcile(self, nc: NodeClaimView) -> list[LifecycleEvent]:
        """Launch ``nc``'s instance; returns ``launch`` or ``launch-failed``."""
        d = self.deps
        name = nc.name
        now = iso(d.clock.now())
        conditions = status_conditions(nc.raw)
        try:
            launched = await d.provider.create(nc.model)
        except (InsufficientCapacityError, NodeClassNotReadyError) as exc:
            build = (karpenter_events.insufficient_capacity if isinstance(exc, InsufficientCapacityError)
                     else karpenter_events.nodeclass_not_ready)
            await d.publish(build(dict(nc.raw), str(exc)))
            await d.kube.delete("NodeClaim", name)
            return await self._failed(nc, type(exc).__name__, str(exc))
        except CreateError as exc:
            conds = set_lifecycle_condition(conditions, "Launched", "Unknown", exc.condition_reason, exc.condition_message, now)
            await d.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True)
            return await self._failed(nc, exc.condition_reason, exc.condition_message)
        except CloudProviderError as exc:  # any other cloud/plugin failure (a hook's own exception: PluginHookError)
            # Karpenter launch.go: Launched=Unknown, reason LaunchFailed, the error as its message; retried
            conds = set_lifecycle_condition(conditions, "Launched", "Unknown", "LaunchFailed", str(exc), now)
            await d.kube.patch("NodeClaim", name, {"status": {"conditions": conds}}, status=True)
            return await self._failed(nc, "LaunchFailed", str(exc))
        out = launched.model_dump(by_alias=True, exclude_none=True, mode="json")
        labels = {**nc.labels, **launched.metadata.labels}
        annotations = {**nc.annotations, **launched.metadata.annotations}
        await d.kube.patch("NodeClaim", name, {"metadata": {"labels": labels, "annotations": annotations}})
        status = dict(map_of(out, "status"))
        status["conditions"] = set_lifecycle_condition(conditions, "Launched", "True", "Launched", "", now)
        present = {c["type"] for c in status["conditions"]}
        for t in ("Registered", "Initialized", "Ready"):
            if t not in present:
                status["conditions"] = set_lifecycle_condition(status["conditions"], t, "Unknown", "AwaitingReconciliation", "", now)
        await d.kube.patch("NodeClaim", name, {"status": status}, status=True)
        details = {
            "providerID": status.get("providerID", ""),
            "instanceType": labels.get(LABEL_INSTANCE_TYPE, ""),
            "zone": labels.get(LABEL_ZONE, ""),
            "capacityType": labels.get(LABEL_CAPACITY_TYPE, ""),
        }
        log.info("launched nodeclaim", extra=fields(  # Karpenter's line and keys (nodeclaim/lifecycle/launch.go)
            provider_id=details["providerID"], **{"instance-type": details["instanceType"], "zone": details["zone"],
                                                  "capacity-type": details["capacityType"],
                                                  "allocatable": map_of(status, "allocatable")}))
        await d.publish(karpenter_events.launched(name, details))
        return [LifecycleEvent(LifecycleEventKind.LAUNCH, name, details=details)]


def launch_attempted(nc: NodeClaimView) -> bool:
    """The NodeClaim has a ``Launched`` condition at all (a launch was tried)."""
    return condition_of(nc.conditions, "Launched") is not None
