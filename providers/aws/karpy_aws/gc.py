"""Garbage collection of leaked instances (Karpenter
``pkg/controllers/nodeclaim/garbagecollection/controller.go``).

An instance the provider lists (so: tagged by karpy for this cluster; untagged instances are never
listed and never touched) whose providerID is on no NodeClaim in the cluster, and which was
launched more than ``min_age`` seconds ago (30 s: a launch may not have been recorded yet), is
terminated through the provider, and a Node with that providerID is deleted.
Generic over :class:`~karpy_core.cloudprovider.provider.CloudProvider`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from karpy_core.errors import KubeAPIError, NodeClaimNotFoundError

if TYPE_CHECKING:
    from karpy_core.cloudprovider.provider import CloudProvider
    from karpy_core.kube.port import KubeClient
    from karpy_core.utils.clock import Clock

__all__ = ["GC_MIN_AGE_SECONDS", "garbage_collect"]

log = logging.getLogger("karpy.aws")

GC_MIN_AGE_SECONDS = 30.0


async def garbage_collect(kube: KubeClient, provider: CloudProvider, clock: Clock, *, min_age: float = GC_MIN_AGE_SECONDS) -> list[str]:
    """One GC pass; returns the providerIDs terminated.

    Raises: whatever the provider raises other than NodeClaimNotFoundError.
    """
    claimed = {(nc.get("status") or {}).get("providerID") for nc in await kube.list("NodeClaim")}
    now = clock.now()
    done = []
    for cloud in await provider.list():
        pid = cloud.status.provider_id
        if not pid or pid in claimed:
            continue
        created = cloud.metadata.creation_timestamp
        if created is None or now - created.timestamp() < min_age:
            continue
        try:
            await provider.delete(cloud)
        except NodeClaimNotFoundError:
            pass
        log.info("garbage collected leaked instance %s", pid)
        done.append(pid)
        for node in await kube.list("Node"):
            if (node.get("spec") or {}).get("providerID") == pid:
                try:
                    await kube.delete("Node", node["metadata"]["name"])
                except KubeAPIError as exc:
                    if exc.status != 404:
                        raise
    return done
