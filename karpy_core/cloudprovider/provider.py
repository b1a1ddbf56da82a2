"""The typed facade controllers use to talk to the one active cloud plugin.

Plugins are discovered through the ``karpy.cloudprovider`` entry-point group, exactly like a third
party's: the entry point names a factory ``create_plugin(options: dict) -> object`` whose result
carries ``@hookimpl`` methods. The facade registers that object in a pluggy ``PluginManager``,
rejects unknown hooks (``check_pending``), demands exactly one implementation of every hook, and
awaits the async hooks so callers get plain values.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import pluggy

from karpy_core.cloudprovider import hookspecs
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.overlay import OverlayStore, launch_overlay
from karpy_core.cloudprovider.types import RepairPolicy, without_reserved
from karpy_core.errors import ConfigurationError
from karpy_core.featuregates import FeatureGates

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.types import InstanceType

__all__ = ["ENTRY_POINT_GROUP", "CloudProvider", "available_providers", "load_provider"]

ENTRY_POINT_GROUP = "karpy.cloudprovider"

_HOOKS = [name for name in dir(hookspecs) if name.startswith("karpy_")]
OPTIONAL_HOOKS = frozenset({"karpy_controllers"})
"""Hooks a plugin may leave out (at most one implementation each)."""


def available_providers() -> list[str]:
    """Names of installed cloud plugins, sorted."""
    return sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


class CloudProvider:
    """Calls the hooks of exactly one plugin and awaits them.

    Args:
        plugin: an object whose methods are marked with ``karpy_core.cloudprovider.hookimpl``.

    Raises:
        ConfigurationError: the plugin misses a hook, implements an unknown one, or a hook has
            more than one implementation.
    """

    def __init__(self, plugin: object):
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        self._pm.register(plugin)
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise ConfigurationError(f"cloud provider plugin {plugin!r} implements an unknown hook: {exc}") from exc
        for name in _HOOKS:
            impls = getattr(self._pm.hook, name).get_hookimpls()
            if name in OPTIONAL_HOOKS and len(impls) <= 1:
                continue
            if len(impls) != 1:
                raise ConfigurationError(
                    f"cloud provider plugin {plugin!r} must implement hook {name} exactly once (found {len(impls)})"
                )
        self.plugin = plugin
        self.name: str = self._call_sync("karpy_name")
        self.observer: Callable[[str, float, str], None] | None = None
        """Called after every async hook with (method, seconds, error class name or "")."""
        self.feature_gates = FeatureGates()
        """Set by the operator and the simulator; with ``ReservedCapacity=false``
        :meth:`get_instance_types` drops every ``reserved`` offering (Karpenter's AWS provider
        then builds none), so nothing schedules or launches into a capacity reservation. The
        plugin sees the gates too, as its ``feature_gates`` attribute when it has one."""
        self.overlays: OverlayStore | None = None
        """The NodeOverlay store while the ``NodeOverlay`` gate is on (None: off): every
        :meth:`get_instance_types` and :meth:`create` sees overlaid instance types, as upstream's
        ``pkg/cloudprovider/overlay`` decorator wraps the cloud provider."""
        self.overlay_generation = 0
        """Bumped by :meth:`set_overlays` when the store's content changes (cache keys)."""

    def set_feature_gates(self, gates: FeatureGates) -> None:
        """Give the facade (and a plugin with a ``feature_gates`` attribute) ``gates``."""
        self.feature_gates = gates
        if hasattr(self.plugin, "feature_gates"):
            self.plugin.feature_gates = gates

    def _call_sync(self, hook: str, **kwargs: Any) -> Any:
        return getattr(self._pm.hook, hook)(**kwargs)[0]

    async def _call(self, hook: str, **kwargs: Any) -> Any:
        start = time.perf_counter()
        error = ""
        try:
            return await _maybe_await(self._call_sync(hook, **kwargs))
        except Exception as exc:
            error = type(exc).__name__
            raise
        finally:
            if self.observer is not None:
                method = "".join(part.capitalize() for part in hook.removeprefix("karpy_").split("_"))
                self.observer(method, time.perf_counter() - start, error)

    def supported_node_classes(self) -> list[tuple[str, str]]:
        """``(group, kind)`` pairs accepted in ``nodeClassRef``; the first is the default."""
        return list(self._call_sync("karpy_supported_node_classes"))

    def managed_node_classes(self) -> frozenset[tuple[str, str]] | None:
        """The NodePools this provider manages, as the ``(group, kind)`` of their ``nodeClassRef``
        (:func:`~karpy_core.state.cluster.is_managed`); None when the provider names none (all)."""
        return frozenset(self.supported_node_classes()) or None

    def controllers(self) -> list[ControllerLoop]:
        """The provider's background loops (see the optional ``karpy_controllers`` hook)."""
        hook = self._pm.hook.karpy_controllers
        if not hook.get_hookimpls():
            return []
        return list(hook()[0] or [])

    def repair_policies(self) -> list[RepairPolicy]:
        """The provider's node-repair policies; Karpenter-style mappings are read with
        :meth:`RepairPolicy.from_mapping`.

        Raises:
            ValueError: a mapping policy is malformed.
        """
        out: list[RepairPolicy] = []
        for p in self._call_sync("karpy_repair_policies") or []:
            out.append(p if isinstance(p, RepairPolicy) else RepairPolicy.from_mapping(cast("Mapping[str, object]", p)))
        return out

    def set_overlays(self, store: OverlayStore) -> bool:
        """Use ``store`` from now on; returns True (and bumps :attr:`overlay_generation`) when it
        applies other updates than the current one."""
        current = self.overlays
        if current is not None and current.fingerprint() == store.fingerprint():
            current.invalid, current.conflicts, current.applied = store.invalid, store.conflicts, store.applied
            return False
        self.overlays = store
        self.overlay_generation += 1
        return True

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_create`. With NodeOverlays on, the
        launch kernel ranks the NodeClaim's NodePool's overlaid instance types
        (:data:`~karpy_core.cloudprovider.overlay.LAUNCH_OVERLAY`)."""
        nodepool = nodeclaim.metadata.labels.get("karpenter.sh/nodepool", "")
        with launch_overlay(self.overlays, nodepool):
            return cast("NodeClaim", await self._call("karpy_create", nodeclaim=nodeclaim))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_delete`."""
        await self._call("karpy_delete", nodeclaim=nodeclaim)

    async def get(self, provider_id: str) -> NodeClaim:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_get`."""
        return cast("NodeClaim", await self._call("karpy_get", provider_id=provider_id))

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_get_instance_types` (a new list;
        the instance types themselves are shared with the plugin and must not be mutated). With
        NodeOverlays on, the types the overlays select are overlaid copies."""
        types = await self.raw_instance_types(nodepool)
        store = self.overlays
        return types if store is None else store.apply_all(nodepool.metadata.name or "", types)

    async def raw_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """The plugin's instance types without NodeOverlays (what the overlay controller evaluates),
        reserved offerings dropped with ``ReservedCapacity=false``."""
        types = list(await self._call("karpy_get_instance_types", nodepool=nodepool))
        return types if self.feature_gates.ReservedCapacity else without_reserved(types)

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_is_drifted`: a reason or ``""``."""
        return str(await self._call("karpy_is_drifted", nodeclaim=nodeclaim) or "")

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_list`."""
        return list(await self._call("karpy_list"))


def load_provider(name: str, options: dict[str, Any] | None = None) -> CloudProvider:
    """Load the plugin registered as ``name`` in the ``karpy.cloudprovider`` group and wrap it.

    Raises:
        ConfigurationError: no such plugin, or its extra is not installed (the message says which
            ``pip install 'karpy[...]'`` to run).
    """
    eps = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not eps:
        raise ConfigurationError(
            f"no cloud provider named {name!r}; installed: {', '.join(available_providers()) or 'none'}"
        )
    try:
        factory: Callable[[dict[str, Any]], object] = eps[0].load()
    except ImportError as exc:
        raise ConfigurationError(str(exc)) from exc
    _plugin_logs_like_karpy(eps[0].module)
    return CloudProvider(factory(dict(options or {})))


def _plugin_logs_like_karpy(module: str) -> None:
    """Give the plugin's top-level package logger karpy's level (``LOG_LEVEL``), unless a level
    was already set for it (by name through ``--log-debug-loggers``): a provider plugin is part
    of karpy, not a third-party library kept at WARNING (:func:`karpy_core.observability.configure_logging`)."""
    plugin_logger = logging.getLogger(module.split(".")[0])
    if plugin_logger.level == logging.NOTSET:
        plugin_logger.setLevel(logging.getLogger("karpy").getEffectiveLevel())
