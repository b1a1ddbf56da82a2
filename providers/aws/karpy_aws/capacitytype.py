"""Reserved -> on-demand when a capacity reservation ends (karpenter-provider-aws
``pkg/controllers/capacityreservation/capacitytype``).

An instance launched into a capacity reservation keeps running as a plain on-demand instance
when the reservation expires or is cancelled. Every minute, for each NodeClaim labelled
``karpenter.sh/capacity-type=reserved`` (not being deleted) whose
``karpenter.k8s.aws/capacity-reservation-id`` is no longer among its EC2NodeClass's active
reservations (``status.capacityReservations``, resolved with ``CapacityReservationsReady=True``:
an API failure relabels nothing), the NodeClaim and its registered Node get
``karpenter.sh/capacity-type=on-demand`` and lose the reservation ID and type labels.

karpy differs from upstream in the signal: upstream compares with the capacity type the cloud
provider's ``List`` reports for the instance (its ``CapacityReservationId``); karpy reads the
NodeClass's resolved reservations, because moto reports no ``CapacityReservationId``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from karpy_aws.nodeclass import COND_CAPACITY_RESERVATIONS, condition
from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    LABEL_CAPACITY_TYPE,
    LABEL_REGISTERED,
    LABEL_RESERVATION_ID,
    LABEL_RESERVATION_TYPE,
)
from karpy_core.errors import CloudProviderError, KubeAPIError
from karpy_core.logs import fields

if TYPE_CHECKING:
    from karpy_aws.apis import EC2NodeClass
    from karpy_aws.nodeclass import NodeClassResolver
    from karpy_core.kube.port import KubeClient

__all__ = ["ON_DEMAND_PATCH", "CapacityTypeSync", "reservation_ended"]

log = logging.getLogger(__name__)

ON_DEMAND_PATCH: dict[str, Any] = {"metadata": {"labels": {
    LABEL_CAPACITY_TYPE: CAPACITY_TYPE_ON_DEMAND, LABEL_RESERVATION_ID: None, LABEL_RESERVATION_TYPE: None}}}
"""The merge patch applied to the NodeClaim and its Node (null deletes a label)."""


def reservation_ended(nodeclaim: dict[str, Any], nodeclass: EC2NodeClass | None) -> bool:
    """True when ``nodeclaim`` is labelled reserved, is not being deleted, and its reservation is
    not among ``nodeclass``'s resolved active reservations (which must have resolved:
    ``CapacityReservationsReady=True``). Pure."""
    meta = nodeclaim.get("metadata") or {}
    labels = meta.get("labels") or {}
    if meta.get("deletionTimestamp") or labels.get(LABEL_CAPACITY_TYPE) != CAPACITY_TYPE_RESERVED:
        return False
    if nodeclass is None:
        return False
    cond = condition(nodeclass, COND_CAPACITY_RESERVATIONS)
    if cond is None or cond.status != "True":
        return False
    rid = labels.get(LABEL_RESERVATION_ID)
    return rid not in {r.id for r in nodeclass.status.capacity_reservations}


class CapacityTypeSync:
    """Relabels NodeClaims and Nodes whose reservation ended (see the module docstring).

    Args:
        kube: the cluster.
        resolver: EC2NodeClass resolution (cached 60 s).
        nodeclass: name -> the EC2NodeClass (None when missing), e.g. the plugin's ``get_nodeclass``.
    """

    name = "aws.capacityreservation.capacitytype"

    def __init__(self, *, kube: KubeClient, resolver: NodeClassResolver, nodeclass: Any):
        self.kube = kube
        self.resolver = resolver
        self.nodeclass = nodeclass

    async def reconcile(self) -> list[str]:
        """One pass; returns the NodeClaims relabelled. A failure on one is logged and retried next
        pass; a failed NodeClaim list raises ``KubeAPIError``."""
        resolved: dict[str, EC2NodeClass | None] = {}
        done: list[str] = []
        for nc in await self.kube.list("NodeClaim"):
            labels = (nc.get("metadata") or {}).get("labels") or {}
            if labels.get(LABEL_CAPACITY_TYPE) != CAPACITY_TYPE_RESERVED:
                continue
            ref = ((nc.get("spec") or {}).get("nodeClassRef") or {}).get("name", "")
            if ref not in resolved:
                resolved[ref] = await self._resolved(ref)
            if not reservation_ended(nc, resolved[ref]):
                continue
            name = nc["metadata"]["name"]
            try:
                await self.kube.patch("NodeClaim", name, ON_DEMAND_PATCH)
                node = (nc.get("status") or {}).get("nodeName")
                if node:
                    await self._relabel_node(node)
            except KubeAPIError as exc:
                log.warning("relabelling a NodeClaim whose capacity reservation ended failed; retrying",
                            extra=fields(nodeclaim=name, error=exc))
                continue
            log.info("capacity reservation ended: the NodeClaim is on-demand now",
                     extra={**fields(nodeclaim=name), "capacity-reservation-id": labels.get(LABEL_RESERVATION_ID)})
            done.append(name)
        return done

    async def _resolved(self, name: str) -> EC2NodeClass | None:
        if not name:
            return None
        nodeclass = await self.nodeclass(name)
        if nodeclass is None:
            return None
        try:
            return (await self.resolver.resolve(nodeclass)).nodeclass
        except CloudProviderError:
            return None

    async def _relabel_node(self, name: str) -> None:
        try:
            node = await self.kube.get("Node", name)
        except KubeAPIError:
            return  # gone already
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        if meta.get("deletionTimestamp") or labels.get(LABEL_REGISTERED) != "true":
            return
        if labels.get(LABEL_CAPACITY_TYPE) == CAPACITY_TYPE_RESERVED:
            await self.kube.patch("Node", name, ON_DEMAND_PATCH)
