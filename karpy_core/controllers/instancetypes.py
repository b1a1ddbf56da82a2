"""The provider's instance types per NodePool, kept between passes: one cache for the disruption
controller (which plans on them) and the simulator (which prices the launched NodeClaims with
them).

An entry is keyed by the NodePool's name, its ``metadata.generation`` (its ``resourceVersion``
when the object has no generation) and the provider's NodeOverlay store generation
(:attr:`~karpy_core.cloudprovider.provider.CloudProvider.overlay_generation`): a spec change or a
new overlay store asks the provider again. An empty answer is never kept: a provider answers
``[]`` while the NodePool's NodeClass is not Ready (the AWS plugin does), and keeping it left
consolidation without prices until the NodePool changed. Karpenter's disruption asks its cloud
provider on every pass (``pkg/controllers/disruption/helpers.go``, ``SimulateScheduling`` through
``provisioner.NewScheduler``); its providers cache the types and see a NodeClass change at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.state.views import NodePoolView
from karpy_core.utils.clock import Clock

__all__ = ["INSTANCE_TYPES_REFRESH", "InstanceTypeCache", "KeptTypes", "types_signature"]

INSTANCE_TYPES_REFRESH = 60.0
"""Seconds the disruption controller reuses a NodePool's instance types before asking the
provider again: offerings marked unavailable after an insufficient-capacity error come back
after 3 minutes (Karpenter's ``UnavailableOfferingsTTL``), and prices and NodeClass status
change between NodePool generations; the provider's own cache makes the call cheap."""


def types_signature(types: list[InstanceType]) -> str:
    """A digest (16 hex digits) of what a plan reads from ``types``: names, and each offering's
    zone, capacity type, price, availability and reservation (so an idle disruption pass notices
    when they change)."""
    h = hashlib.sha256()
    for it in types:
        h.update(it.name.encode())
        for o in it.offerings:
            h.update(f"|{o.zone}:{o.capacity_type}:{o.price!r}:{o.available}:{o.reservation_id}:{o.reservation_capacity}".encode())
        h.update(b";")
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class KeptTypes:
    """One NodePool's instance types as last asked: when (epoch seconds on the cache's clock),
    the provider's answer and its :func:`types_signature`."""

    fetched_at: float
    types: list[InstanceType]
    signature: str


class InstanceTypeCache:
    """NodePool -> the provider's instance types (see the module docstring).

    Args:
        provider: the cloud provider (its ``get_instance_types`` and ``overlay_generation``).
        clock: the controller's clock.
        refresh_seconds: an entry older than this is asked again (seconds); None: kept until
            the NodePool or the overlay store changes (the simulator, whose prices change only
            with them).
    """

    def __init__(self, provider: CloudProvider, clock: Clock, *, refresh_seconds: float | None = INSTANCE_TYPES_REFRESH):
        self.provider = provider
        self.clock = clock
        self.refresh_seconds = refresh_seconds
        self._kept: dict[tuple[str, int | None, str | None, int], KeptTypes] = {}
        """(NodePool name, generation, resourceVersion when no generation, overlay generation) -> kept types."""

    def _key(self, pool: NodePoolView) -> tuple[str, int | None, str | None, int]:
        gen = pool.generation or None
        return pool.name, gen, pool.resource_version if gen is None else None, self.provider.overlay_generation

    async def get(self, pool: NodePoolView) -> tuple[KeptTypes, bool]:
        """``pool``'s instance types, and True when the provider was asked for them by this call
        (a new key, an expired entry, or an empty answer kept last time).

        Raises: whatever the provider's ``get_instance_types`` raises."""
        key = self._key(pool)
        kept = self._kept.get(key)
        now = self.clock.now()
        if kept is not None and (self.refresh_seconds is None or now - kept.fetched_at < self.refresh_seconds):
            return kept, False
        types = await self.provider.get_instance_types(pool.model)
        for old in [k for k in self._kept if k[0] == pool.name]:
            del self._kept[old]
        kept = KeptTypes(now, types, types_signature(types))
        if types:
            self._kept[key] = kept
        return kept, True

    async def of(self, pools: Iterable[NodePoolView]) -> dict[str, KeptTypes]:
        """NodePool name -> kept types, for each of ``pools`` in order (:meth:`get`)."""
        return {pool.name: (await self.get(pool))[0] for pool in pools}
