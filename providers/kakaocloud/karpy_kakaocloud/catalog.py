"""KCNodeClass resolutions and BCS flavors, cached for the plugin's hooks and for create.

:class:`Catalog` resolves a KCNodeClass (:func:`karpy_kakaocloud.nodeclass.resolve`, cached
``nodeclass_ttl`` seconds per name and generation, status written back through the KubeClient
port) and lists the BCS flavors (cached ``catalog_ttl`` seconds) as instance types
(:func:`karpy_kakaocloud.instancetypes.instance_types_from_flavors`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from karpy_core.errors import KubeAPIError, NodeClassNotReadyError, NotFoundError
from karpy_kakaocloud.instancetypes import instance_types_from_flavors
from karpy_kakaocloud.nodeclass import ResolvedNodeClass, resolve, write_status

if TYPE_CHECKING:
    from karpy_core.cloudprovider.types import InstanceType
    from karpy_kakaocloud.deps import KakaoCloudDeps
    from karpy_kakaocloud.pricing import PriceTable

__all__ = ["Catalog"]

log = logging.getLogger("karpy.kakaocloud")


class Catalog:
    """The plugin's KCNodeClass and flavor caches.

    Args:
        prices: the USD/hour table the instance types' offerings carry.
    """

    def __init__(self, prices: PriceTable):
        self.prices = prices
        self._nodeclasses: dict[str, tuple[float, ResolvedNodeClass]] = {}
        self._flavors: tuple[float, list[dict[str, Any]]] | None = None

    async def nodeclass(self, deps: KakaoCloudDeps, name: str) -> ResolvedNodeClass:
        """Resolve (cached ``nodeclass_ttl`` seconds, keyed by name and generation) and write status.

        Raises:
            NodeClassNotReadyError: the KCNodeClass does not exist.
            ConfigurationError: no KubeClient.
        """
        kube = deps.need_kube("reading KCNodeClass objects")
        try:
            obj = await kube.get("KCNodeClass", name)
        except NotFoundError:
            raise NodeClassNotReadyError(f"KCNodeClass {name} does not exist", code="NodeClassNotFound") from None
        key = f"{name}/{obj['metadata'].get('generation', 1)}"
        cached = self._nodeclasses.get(key)
        now = deps.clock()
        if cached and now - cached[0] < deps.settings.nodeclass_ttl:
            return cached[1]
        resolved = await resolve(deps.client, obj, deps.cluster_name)
        self.forget(name)
        self._nodeclasses[key] = (now, resolved)
        try:
            await write_status(kube, resolved, obj, now)
        except KubeAPIError as exc:
            log.warning("could not write KCNodeClass status", extra={"KCNodeClass": {"name": name}, "error": exc})
        return resolved

    def forget(self, name: str) -> None:
        """Drop every cached resolution of the KCNodeClass ``name``."""
        self._nodeclasses = {k: v for k, v in self._nodeclasses.items() if not k.startswith(name + "/")}

    async def flavors(self, deps: KakaoCloudDeps) -> list[dict[str, Any]]:
        """Every BCS flavor (cached ``catalog_ttl`` seconds)."""
        now = deps.clock()
        if self._flavors is None or now - self._flavors[0] >= deps.settings.catalog_ttl:
            self._flavors = (now, await deps.client.list_flavors())
        return self._flavors[1]

    async def instance_types_for(self, deps: KakaoCloudDeps, nc: ResolvedNodeClass) -> list[InstanceType]:
        """Every non-bare-metal flavor as an instance type in the KCNodeClass's zones."""
        flavors = await self.flavors(deps)
        return instance_types_from_flavors(
            flavors, zones=nc.zones, prices=self.prices, root_volume_gib=nc.root_volume_gib, max_pods=deps.max_pods
        )
