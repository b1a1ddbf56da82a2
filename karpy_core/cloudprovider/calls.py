"""The async call surface of a cloud provider, and the decorators' base.

:class:`CloudCalls` is what the controllers' facade (:class:`~karpy_core.cloudprovider.provider.CloudProvider`)
delegates its async methods to. :class:`PluginCalls` makes those calls on the plugin's hooks
(through pluggy); decorators wrap a ``CloudCalls`` in another one, as Karpenter wraps its
``cloudprovider.CloudProvider`` (``pkg/cloudprovider/metrics``, ``pkg/cloudprovider/overlay``):

* :class:`~karpy_core.cloudprovider.metrics.MeteredCalls` - the cloud-call metrics;
* :class:`~karpy_core.cloudprovider.reservations.ReservedCapacityCalls` - no capacity
  reservation offered with ``ReservedCapacity=false``;
* :class:`~karpy_core.cloudprovider.overlay.OverlaidCalls` - NodeOverlay prices and capacities.

The facade composes them in one place (:func:`~karpy_core.cloudprovider.provider.compose`).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    import pluggy

    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.types import InstanceType

__all__ = ["CallsDecorator", "CloudCalls", "PluginCalls"]


class CloudCalls(Protocol):
    """The provider's async operations (the hookspecs' async hooks, awaited), as the
    controllers see them. Errors are the hooks' (see :mod:`karpy_core.cloudprovider.hookspecs`)."""

    def prepare(self, context: ProviderContext) -> None:
        """Take the context (decorators read their settings from it; no I/O)."""
        ...

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance; the NodeClaim as launched."""
        ...

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate; ``NodeClaimNotFoundError`` once gone."""
        ...

    async def get(self, provider_id: str) -> NodeClaim:
        """The instance as a NodeClaim; ``NodeClaimNotFoundError`` when there is none."""
        ...

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Every instance type the NodePool could launch (a new list; never mutate the types)."""
        ...

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """A drift reason or ``""``."""
        ...

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """Every owned instance as a NodeClaim."""
        ...


async def _awaited(value: Any) -> Any:
    """A hook's result: awaited when it is awaitable (an ``async def`` implementation), as it is
    otherwise (a plain ``def`` returning the value)."""
    return await value if inspect.isawaitable(value) else value


class PluginCalls:
    """:class:`CloudCalls` on a plugin's async hooks, through its pluggy ``PluginManager``
    (exactly one implementation of each, checked by the facade)."""

    def __init__(self, pm: pluggy.PluginManager):
        self._hook = pm.hook

    def prepare(self, context: ProviderContext) -> None:
        """Nothing: the facade calls the plugin's ``karpy_prepare`` hook itself."""

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """``karpy_create``."""
        return cast("NodeClaim", await _awaited(self._hook.karpy_create(nodeclaim=nodeclaim)[0]))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """``karpy_delete``."""
        await _awaited(self._hook.karpy_delete(nodeclaim=nodeclaim)[0])

    async def get(self, provider_id: str) -> NodeClaim:
        """``karpy_get``."""
        return cast("NodeClaim", await _awaited(self._hook.karpy_get(provider_id=provider_id)[0]))

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """``karpy_get_instance_types``, as a new list."""
        types: Any = await _awaited(self._hook.karpy_get_instance_types(nodepool=nodepool)[0])
        return [*types]

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``karpy_is_drifted`` (a falsy answer is ``""``)."""
        return str(await _awaited(self._hook.karpy_is_drifted(nodeclaim=nodeclaim)[0]) or "")

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """``karpy_list``, as a new list."""
        claims: Any = await _awaited(self._hook.karpy_list()[0])
        return [*claims]


class CallsDecorator:
    """Forwards every call to ``inner``; subclasses override what they change.

    Args:
        inner: the calls being decorated.
    """

    def __init__(self, inner: CloudCalls):
        self.inner = inner

    def prepare(self, context: ProviderContext) -> None:
        """Nothing of its own: subclasses read their settings here."""

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Forwarded."""
        return await self.inner.create(nodeclaim)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """Forwarded."""
        await self.inner.delete(nodeclaim)

    async def get(self, provider_id: str) -> NodeClaim:
        """Forwarded."""
        return await self.inner.get(provider_id)

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Forwarded."""
        return await self.inner.get_instance_types(nodepool)

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """Forwarded."""
        return await self.inner.is_drifted(nodeclaim)

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """Forwarded."""
        return await self.inner.list()
