"""The plugin contract as ``typing.Protocol`` classes, for mypy.

:mod:`karpy_core.cloudprovider.hookspecs` is the contract pluggy checks at load (hook names,
argument names); these protocols are the same hooks with their full signatures, so mypy checks a
plugin class against them: a hook with a wrong parameter or return type is a type error where the
plugin declares its conformance, e.g. (the in-tree providers do this)::

    if TYPE_CHECKING:
        _conforms: type[FullCloudProviderPlugin] = MyPlugin

* :class:`CloudProviderPlugin` - the required hooks (every plugin);
* one protocol per optional hook: :class:`PrepareHook`, :class:`StartHook`, :class:`CloseHook`,
  :class:`ControllersHook`, :class:`PricingNoteHook`; a plugin implementing some of them checks
  against a protocol combining those with :class:`CloudProviderPlugin`, e.g.
  ``class Contract(CloudProviderPlugin, PrepareHook, CloseHook, Protocol): pass``;
* :class:`FullCloudProviderPlugin` - the required hooks plus every optional one (the AWS and
  simulated plugins check against it).

``tests/cloudprovider/test_contract.py`` keeps these protocols and the hookspecs in agreement.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.hookspecs import ControllerLoop
    from karpy_core.cloudprovider.types import InstanceType, RepairPolicy

__all__ = ["CloseHook", "CloudProviderPlugin", "ControllersHook", "FullCloudProviderPlugin", "PrepareHook", "PricingNoteHook",
           "StartHook"]


class CloudProviderPlugin(Protocol):
    """The required hooks (see :mod:`karpy_core.cloudprovider.hookspecs` for each one's meaning
    and errors). Async hooks are ``async def`` methods."""

    def karpy_name(self) -> str:
        """The provider's name."""
        ...

    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        """``(group, kind)`` NodeClass kinds, the first the default."""
        ...

    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance."""
        ...

    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate; ``NodeClaimNotFoundError`` once gone."""
        ...

    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """One instance as a NodeClaim."""
        ...

    async def karpy_list(self) -> list[NodeClaim]:
        """Every owned instance."""
        ...

    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Every instance type the NodePool could launch."""
        ...

    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """A drift reason or ``""``."""
        ...

    def karpy_repair_policies(self) -> list[RepairPolicy]:
        """Node-repair policies."""
        ...


class PrepareHook(Protocol):
    """The optional ``karpy_prepare`` hook."""

    def karpy_prepare(self, context: ProviderContext) -> None:
        """Take karpy's context (no I/O)."""
        ...


class StartHook(Protocol):
    """The optional ``karpy_start`` hook."""

    async def karpy_start(self) -> None:
        """Start-up I/O, before the controllers run."""
        ...


class CloseHook(Protocol):
    """The optional ``karpy_close`` hook."""

    async def karpy_close(self) -> None:
        """Release the cloud clients."""
        ...


class ControllersHook(Protocol):
    """The optional ``karpy_controllers`` hook."""

    def karpy_controllers(self) -> list[ControllerLoop]:
        """Background loops while leading."""
        ...


class PricingNoteHook(Protocol):
    """The optional ``karpy_pricing_note`` hook."""

    def karpy_pricing_note(self) -> str:
        """Where the prices come from."""
        ...


class FullCloudProviderPlugin(CloudProviderPlugin, PrepareHook, StartHook, CloseHook, ControllersHook, PricingNoteHook,
                              Protocol):
    """:class:`CloudProviderPlugin` plus every optional hook."""
