"""The NodeOverlay controller: evaluates every NodeOverlay, hands the result to the cloud provider
facade, and reports each overlay's ``ValidationSucceeded`` and ``Ready`` conditions.

Behaviour reference: kubernetes-sigs/karpenter ``pkg/controllers/nodeoverlay/controller.go``
(one pass compares every overlay with every other against every NodePool's instance types; the
store is swapped only after the statuses are written; a NodePool whose instance types cannot be
listed is skipped and the error returned, the others still evaluated). Runs only with the
``NodeOverlay`` feature gate on; the rules themselves are :func:`karpy_core.cloudprovider.overlay.compile_overlays`.

Conditions (``operatorpkg/status`` ready set ``[ValidationSucceeded]``):

* ``ValidationSucceeded`` True; or False reason ``RuntimeValidation`` (the validation message) or
  ``Conflict`` (``conflict with another overlay``);
* ``Ready`` mirrors it (reason ``Ready`` when True, ``UnhealthyDependents`` when False).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.nodepool import NodePool
from karpy_core.cloudprovider.overlay import (
    CONFLICT_MESSAGE,
    REASON_CONFLICT,
    REASON_RUNTIME_VALIDATION,
    OverlayStore,
    PoolTypes,
    compile_overlays,
)
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.base import NODECLASS_KINDS, Wake, Waker
from karpy_core.controllers.conditions import patch_conditions, set_condition, status_conditions
from karpy_core.errors import ConflictError, NotFoundError
from karpy_core.kube.port import KubeClient
from karpy_core.utils.clock import Clock, iso

__all__ = ["NodeOverlayController", "OverlayPass"]

log = logging.getLogger(__name__)

VALIDATION_SUCCEEDED = "ValidationSucceeded"
READY = "Ready"


@dataclass
class OverlayPass:
    """What one pass did: ``changed`` (the store applies other updates than before), ``patched``
    (overlays whose status was written), ``errors`` (NodePools whose instance types could not be
    listed, name -> message), and the ``store``."""

    store: OverlayStore
    changed: bool = False
    patched: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


class NodeOverlayController:
    """Evaluates NodeOverlays against the NodePools' instance types.

    Args:
        kube: the API client (NodeOverlay and NodePool lists, NodeOverlay status patches).
        provider: the facade; its raw instance types are evaluated and :meth:`CloudProvider.set_overlays`
            receives the store.
        clock: for the conditions' ``lastTransitionTime``.
        waker: wakes the provisioner and the disruption controller when the overlaid prices or
            capacities change (pending pods may fit now; upstream marks the cluster
            unconsolidated); None: nobody is woken (the simulator steps them anyway).
    """

    name = "nodeoverlay.controller"
    wakes_on = (Wake.on("NodeOverlay", "NodePool", NODECLASS_KINDS),)
    resync_seconds: float | None = None
    first_delay = 0.0

    def __init__(self, *, kube: KubeClient, provider: CloudProvider, clock: Clock, waker: Waker | None = None):
        self.kube = kube
        self.waker = waker
        self.provider = provider
        self.clock = clock
        if provider.overlays is None:
            provider.overlays = OverlayStore()
        self._inputs: Any = None
        """What the last pass evaluated: overlay and NodePool generations, the instance types' identities."""

    def next_due(self) -> float | None:
        """None: overlays are evaluated on changes and the resync."""
        return None

    async def reconcile(self) -> OverlayPass:
        """One pass (see the module docstring); when the overlaid instance types changed, logs
        the store and wakes provisioning and disruption.

        Raises:
            KubeAPIError: as :meth:`evaluate`.
        """
        result = await self.evaluate()
        if result.changed:
            log.info("node overlays applied", extra={"applied": result.store.applied, "conflicts": result.store.conflicts,
                                                     "invalid": sorted(result.store.invalid)})
            if self.waker is not None:
                self.waker.poke("provisioner")
                self.waker.poke("disruption")
        return result

    async def evaluate(self) -> OverlayPass:
        """Evaluate the NodeOverlays and write their status (see the module docstring).

        Raises:
            KubeAPIError: listing NodeOverlays or NodePools failed (a status patch that fails with
                404/409 is skipped: the next pass sees the new object).
        """
        overlays = await self.kube.list("NodeOverlay")
        pools: list[PoolTypes] = []
        errors: dict[str, str] = {}
        for np_obj in await self.kube.list("NodePool"):
            name = np_obj["metadata"]["name"]
            if np_obj["metadata"].get("deletionTimestamp"):
                continue
            try:
                model = NodePool.model_validate(np_obj)
                types = await self.provider.raw_instance_types(model)
            except Exception as exc:  # one broken NodePool must not block the others (as upstream)
                errors[name] = f"{type(exc).__name__}: {exc}"
                continue
            labels = dict(model.spec.template.metadata.labels)
            pools.append(PoolTypes(name, labels, types))
        inputs: Any = (
            tuple(sorted((o["metadata"]["name"], o["metadata"].get("generation"), o["metadata"].get("uid")) for o in overlays)),
            tuple((p.name, tuple(sorted(p.labels.items())), tuple(id(it) for it in p.instance_types)) for p in pools),
            tuple(sorted(errors)),
        )
        current = self.provider.overlays
        if inputs == self._inputs and current is not None:  # nothing to re-evaluate (a resync)
            return OverlayPass(store=current, errors=errors)
        store = compile_overlays(overlays, pools)
        result = OverlayPass(store=store, errors=errors)
        now = iso(self.clock.now())
        for obj in overlays:
            name = obj["metadata"]["name"]
            conds = status_conditions(obj)
            gen = obj["metadata"].get("generation")
            if name in store.invalid:
                conds = set_condition(conds, VALIDATION_SUCCEEDED, "False", now, REASON_RUNTIME_VALIDATION, store.invalid[name], gen)
            elif name in store.conflicts:
                conds = set_condition(conds, VALIDATION_SUCCEEDED, "False", now, REASON_CONFLICT, CONFLICT_MESSAGE, gen)
            else:
                conds = set_condition(conds, VALIDATION_SUCCEEDED, "True", now, observed_generation=gen)
            ok = name not in store.invalid and name not in store.conflicts
            conds = set_condition(conds, READY, "True" if ok else "False", now, "" if ok else "UnhealthyDependents",
                                  "" if ok else f"{VALIDATION_SUCCEEDED}=False", gen)
            patch = patch_conditions(obj, conds)
            if patch is None:
                continue
            try:
                await self.kube.patch("NodeOverlay", name, patch, status=True)
                result.patched.append(name)
            except (NotFoundError, ConflictError):
                inputs = None  # evaluate again next pass
        result.changed = self.provider.set_overlays(store)
        self._inputs = inputs
        if errors:
            log.warning("node overlays: instance types of some NodePools could not be listed", extra={"nodepools": errors})
        return result
