"""The typed facade controllers use to talk to the one active cloud plugin.

Plugins are discovered through the ``karpy.cloudprovider`` entry-point group, exactly like a third
party's: the entry point names a factory ``create_plugin(options: dict) -> object`` whose result
carries ``@hookimpl`` methods. The facade registers that object in a pluggy ``PluginManager``,
rejects unknown hooks (``check_pending``), demands exactly one implementation of every hook, and
awaits the async hooks so callers get plain values.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

import pluggy

from karpy_core.cloudprovider import hookspecs
from karpy_core.cloudprovider.calls import CloudCalls, PluginCalls, call_hook, call_hook_sync, expect, expect_none
from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.metrics import MeteredCalls
from karpy_core.cloudprovider.overlay import OverlaidCalls, OverlayStore
from karpy_core.cloudprovider.reservations import ReservedCapacityCalls
from karpy_core.cloudprovider.types import RepairPolicy
from karpy_core.errors import ConfigurationError, CreateError, KarpyError, PluginHookError, reraise_interrupt

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.types import InstanceType
    from karpy_core.featuregates import FeatureGates

__all__ = ["ENTRY_POINT_GROUP", "OPTIONAL_HOOKS", "CloudProvider", "Decorated", "available_providers", "compose",
           "load_provider"]

ENTRY_POINT_GROUP = "karpy.cloudprovider"

_HOOKS = [name for name in dir(hookspecs) if name.startswith("karpy_")]
OPTIONAL_HOOKS = frozenset({"karpy_controllers", "karpy_prepare", "karpy_start", "karpy_close", "karpy_pricing_note"})
"""Hooks a plugin may leave out (at most one implementation each)."""

log = logging.getLogger("karpy.cloudprovider")


def plugin_label(plugin: object) -> str:
    """A plugin object named for messages: ``module.Class`` (never its ``repr``, which shows an
    address and may show state)."""
    cls = type(plugin)
    return f"{cls.__module__}.{cls.__qualname__}"


IN_TREE_PLUGINS: dict[str, tuple[str, str]] = {
    "aws": ("karpy-aws", "providers/aws"),
    "kakaocloud": ("karpy-kakaocloud", "providers/kakaocloud"),
}
"""Cloud plugins shipped in karpy's repository, each its own distribution: entry-point name ->
(distribution, directory in a clone). karpy's own install (``pip install -e '.[sim]'``) brings
neither; the ``aws``/``kakaocloud`` extras or an editable install of the directory do."""


def install_hint(name: str) -> str:
    """How to install the in-tree cloud plugin ``name`` (``""`` for any other name), as a clause
    to append to a "not installed" message."""
    if name not in IN_TREE_PLUGINS:
        return ""
    dist, directory = IN_TREE_PLUGINS[name]
    return (f"; {name} is karpy's plugin {dist}, its own distribution, which karpy's install does not bring: "
            f"in a clone of karpy run .venv/bin/pip install -e ./{directory} (next to karpy, in its venv), "
            f"elsewhere pip install 'karpy[{name}]'")


def available_providers() -> list[str]:
    """Names of installed cloud plugins, sorted."""
    return sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


@dataclasses.dataclass(frozen=True, slots=True)
class Decorated:
    """The decorator stack over a plugin's calls (:func:`compose`), outermost first.

    Attributes:
        outer: what the facade's async methods call (overlays over reservations over metrics).
        overlays: the NodeOverlay decorator (its store and generation).
        reserved: the capacity-reservation decorator; its ``get_instance_types`` is the raw,
            non-overlaid view the NodeOverlay controller evaluates.
        metered: the cloud-call metrics decorator, directly over the plugin.
    """

    outer: CloudCalls
    overlays: OverlaidCalls
    reserved: ReservedCapacityCalls
    metered: MeteredCalls

    def layers(self) -> tuple[CloudCalls, ...]:
        """Every decorator, outermost first (each is prepared with the context)."""
        return (self.overlays, self.reserved, self.metered)


def compose(plugin_calls: CloudCalls, provider: str) -> Decorated:
    """Wrap a plugin's calls in karpy's decorators, the one place they are composed:
    NodeOverlays (:class:`~karpy_core.cloudprovider.overlay.OverlaidCalls`) over capacity
    reservations (:class:`~karpy_core.cloudprovider.reservations.ReservedCapacityCalls`) over
    the cloud-call metrics (:class:`~karpy_core.cloudprovider.metrics.MeteredCalls`, innermost,
    so only the cloud's own time is measured). ``provider`` is the metrics' ``provider`` label."""
    metered = MeteredCalls(plugin_calls, provider)
    reserved = ReservedCapacityCalls(metered)
    overlays = OverlaidCalls(reserved)
    return Decorated(outer=overlays, overlays=overlays, reserved=reserved, metered=metered)


class CloudProvider:
    """Calls the hooks of exactly one plugin, through karpy's decorators; the one object
    controllers use to reach the cloud.

    Args:
        plugin: an object whose methods are marked with ``karpy_core.cloudprovider.hookimpl``.
        entry_point: the ``karpy.cloudprovider`` entry point it was loaded from (:func:`load_provider`);
            the plugin's name in messages until its ``karpy_name`` answers (else ``module.Class``).
        distribution: that entry point's distribution and version (``karpy-tinycloud 0.1.0``),
            named after it in those messages.

    Raises:
        ConfigurationError: the plugin misses a hook, implements an unknown one, or a hook has
            more than one implementation.
        PluginHookError: its ``karpy_name`` raised or answered no name (named by entry point and
            distribution when known: ``cloud provider plugin 'tinycloud' (karpy-tinycloud 0.1.0):
            karpy_name raised ...``). Every hook call of the facade raises this
            when the hook raises anything but karpy's errors (:func:`~karpy_core.cloudprovider.calls.call_hook`).
    """

    def __init__(self, plugin: object, *, entry_point: str | None = None, distribution: str | None = None):
        self._pm = pluggy.PluginManager(hookspecs.PROJECT)
        self._pm.add_hookspecs(hookspecs)
        label = entry_point or plugin_label(plugin)
        what = repr(label) + (f" ({distribution})" if distribution else "") if entry_point else label
        if plugin is None:
            raise ConfigurationError(f"cloud provider plugin {what}: its factory (create_plugin) returned None, "
                                     f"expected the plugin object carrying its @hookimpl methods")
        try:
            self._pm.register(plugin)
        except pluggy.PluginValidationError as exc:
            raise ConfigurationError(f"cloud provider plugin {what}: {_registration_problem(exc)}") from exc
        try:
            self._pm.check_pending()
        except pluggy.PluginValidationError as exc:
            raise ConfigurationError(f"cloud provider plugin {what} implements an unknown hook: "
                                     f"{str(exc).replace(repr(plugin), what)}") from exc
        wrong = [(name, len(self._caller(name).get_hookimpls())) for name in _HOOKS]
        wrong = [(name, n) for name, n in wrong if n != 1 and not (name in OPTIONAL_HOOKS and n == 0)]
        if wrong:
            raise ConfigurationError(
                f"cloud provider plugin {what} must implement each hook exactly once: "
                + ", ".join(f"{name} (found {n})" for name, n in wrong)
            )
        self.plugin = plugin
        """The plugin object (for its own tests; karpy calls it only through its hooks)."""
        self.label = label
        """The plugin named in messages (:class:`~karpy_core.errors.PluginHookError`): until its
        ``karpy_name`` answered, its entry point's name (:func:`load_provider`) or, for a plugin
        object given directly, ``module.Class``; then that name."""
        try:
            self.name: str = expect(label, "karpy_name", self._call_sync("karpy_name"), lambda v: isinstance(v, str) and v,
                                    "a non-empty str")
        except PluginHookError as exc:
            if not distribution:
                raise
            cause = exc.__cause__ if not exc.returned else None
            raise PluginHookError(label, exc.hook, cause, returned=exc.returned, origin=distribution) from cause or exc
        self.label = self.name
        self.decorated = compose(PluginCalls(self._pm, self.name), self.name)
        """The decorator stack every async method goes through (:func:`compose`)."""
        self.context = ProviderContext()
        self.dry_run = False
        """True (``karpy controller --dry-run``): :meth:`create` and :meth:`delete` never reach the
        plugin (create raises :class:`~karpy_core.errors.CreateError` with reason ``DryRun``,
        delete logs ``dry run: instance delete withheld``); reads (get, list, instance types,
        drift) go through."""
        """The context of the last :meth:`prepare` (defaults until then)."""

    def _caller(self, hook: str) -> Any:
        return getattr(self._pm.hook, hook)  # the hook caller pluggy made from the hookspec of that name

    def _implemented(self, hook: str) -> bool:
        return bool(self._caller(hook).get_hookimpls())

    def _call_sync(self, hook: str, **kwargs: Any) -> Any:
        return call_hook_sync(self._pm, self.label, hook, **kwargs)

    # ------------------------------------------------------------------ the context
    def prepare(self, context: ProviderContext) -> None:
        """Give ``context`` to the decorators and to the plugin's ``karpy_prepare`` hook (when it
        has one). Called by the composition roots before the controllers run; a later call
        replaces the context.

        Raises:
            PluginHookError: the hook raised, or answered something else than None.
        """
        self.context = context
        for layer in self.decorated.layers():
            layer.prepare(context)
        if self._implemented("karpy_prepare"):
            expect_none(self.label, "karpy_prepare", self._call_sync("karpy_prepare", context=context))

    @property
    def feature_gates(self) -> FeatureGates:
        """The prepared context's feature gates."""
        return self.context.feature_gates

    def set_feature_gates(self, gates: FeatureGates) -> None:
        """:meth:`prepare` with the current context's ``feature_gates`` replaced by ``gates``."""
        self.prepare(dataclasses.replace(self.context, feature_gates=gates))

    async def start(self) -> None:
        """Await the plugin's optional ``karpy_start`` (start-up I/O), once, before the controllers run.

        Raises:
            ConfigurationError: the plugin cannot start with its settings.
            PluginHookError: the hook raised, or answered something else than None.
        """
        if self._implemented("karpy_start"):
            expect_none(self.label, "karpy_start", await call_hook(self._pm, self.label, "karpy_start"))

    async def close(self) -> None:
        """Await the plugin's optional ``karpy_close`` (release its clients).

        Raises:
            PluginHookError: the hook raised, or answered something else than None.
        """
        if self._implemented("karpy_close"):
            expect_none(self.label, "karpy_close", await call_hook(self._pm, self.label, "karpy_close"))

    def pricing_note(self) -> str | None:
        """The plugin's ``karpy_pricing_note`` (where its prices come from), or None when it has none.

        Raises:
            PluginHookError: the hook raised, or answered something else than a ``str``.
        """
        if not self._implemented("karpy_pricing_note"):
            return None
        return cast("str", expect(self.label, "karpy_pricing_note", self._call_sync("karpy_pricing_note"),
                                  lambda v: isinstance(v, str), "a str"))

    # ------------------------------------------------------------------ sync hooks
    def supported_node_classes(self) -> list[tuple[str, str]]:
        """``(group, kind)`` pairs accepted in ``nodeClassRef``; the first is the default."""
        pairs = self._call_sync("karpy_supported_node_classes")
        expect(self.label, "karpy_supported_node_classes", pairs,
               lambda v: isinstance(v, (list, tuple)) and all(
                   isinstance(x, (list, tuple)) and len(x) == 2 and all(isinstance(y, str) for y in x) for x in v),
               "a list of (group, kind) pairs of str")
        return [(str(g), str(k)) for g, k in pairs]

    def managed_node_classes(self) -> frozenset[tuple[str, str]] | None:
        """The NodePools this provider manages, as the ``(group, kind)`` of their ``nodeClassRef``
        (:func:`~karpy_core.state.cluster.is_managed`); None when the provider names none (all)."""
        return frozenset(self.supported_node_classes()) or None

    def controllers(self) -> list[ControllerLoop]:
        """The provider's background loops (see the optional ``karpy_controllers`` hook); ``None``
        from the hook is no loops.

        Raises:
            PluginHookError: the hook raised, or answered something else than a list of
                ``(name, coroutine function)`` pairs.
        """
        if not self._implemented("karpy_controllers"):
            return []
        loops = self._call_sync("karpy_controllers") or []
        expect(self.label, "karpy_controllers", loops,
               lambda v: isinstance(v, (list, tuple)) and all(
                   isinstance(x, (list, tuple)) and len(x) == 2 and isinstance(x[0], str) and callable(x[1]) for x in v),
               "a list of (name, coroutine function) pairs")
        return [(str(name), loop) for name, loop in loops]

    def repair_policies(self) -> list[RepairPolicy]:
        """The provider's node-repair policies; Karpenter-style mappings are read with
        :meth:`RepairPolicy.from_mapping`.

        Raises:
            ValueError: a mapping policy is malformed.
        """
        out: list[RepairPolicy] = []
        policies = self._call_sync("karpy_repair_policies") or []
        expect(self.label, "karpy_repair_policies", policies,
               lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (RepairPolicy, Mapping)) for x in v),
               "a list of RepairPolicy (or mappings)")
        for p in policies:
            out.append(p if isinstance(p, RepairPolicy) else RepairPolicy.from_mapping(cast("Mapping[str, object]", p)))
        return out

    # ------------------------------------------------------------------ NodeOverlays
    @property
    def overlays(self) -> OverlayStore | None:
        """The NodeOverlay store while the ``NodeOverlay`` gate is on (None: off): every
        :meth:`get_instance_types` and :meth:`create` sees overlaid instance types
        (:class:`~karpy_core.cloudprovider.overlay.OverlaidCalls`)."""
        return self.decorated.overlays.store

    @overlays.setter
    def overlays(self, store: OverlayStore | None) -> None:
        self.decorated.overlays.store = store

    @property
    def overlay_generation(self) -> int:
        """Bumped by :meth:`set_overlays` when the store's content changes (cache keys)."""
        return self.decorated.overlays.generation

    def set_overlays(self, store: OverlayStore) -> bool:
        """Use ``store`` from now on; returns True (and bumps :attr:`overlay_generation`) when it
        applies other updates than the current one."""
        return self.decorated.overlays.set_store(store)

    # ------------------------------------------------------------------ async hooks
    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_create`. With NodeOverlays on, the
        launch kernel ranks the NodeClaim's NodePool's overlaid instance types
        (:data:`~karpy_core.cloudprovider.overlay.LAUNCH_OVERLAY`).

        Raises:
            CreateError: in a dry run (:attr:`dry_run`; reason ``DryRun``), without calling the plugin.
        """
        if self.dry_run:
            raise CreateError(f"dry run: NodeClaim {nodeclaim.metadata.name} not launched", condition_reason="DryRun")
        return await self.decorated.outer.create(nodeclaim)

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_delete`. In a dry run (:attr:`dry_run`)
        the plugin is not called: the delete is logged as withheld."""
        if self.dry_run:
            log.info("dry run: instance delete withheld", extra={"NodeClaim": {"name": nodeclaim.metadata.name},
                                                                  "provider-id": nodeclaim.status.provider_id or None,
                                                                  "dryRun": True})
            return
        await self.decorated.outer.delete(nodeclaim)

    async def get(self, provider_id: str) -> NodeClaim:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_get`."""
        return await self.decorated.outer.get(provider_id)

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_get_instance_types` (a new list;
        the instance types themselves are shared with the plugin and must not be mutated). With
        NodeOverlays on, the types the overlays select are overlaid copies; with
        ``ReservedCapacity=false`` no reserved offering is among them."""
        return await self.decorated.outer.get_instance_types(nodepool)

    async def raw_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """The plugin's instance types without NodeOverlays (what the overlay controller evaluates),
        reserved offerings dropped with ``ReservedCapacity=false``."""
        return await self.decorated.reserved.get_instance_types(nodepool)

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_is_drifted`: a reason or ``""``."""
        return await self.decorated.outer.is_drifted(nodeclaim)

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """See :func:`karpy_core.cloudprovider.hookspecs.karpy_list`."""
        return await self.decorated.outer.list()


def _registration_problem(exc: pluggy.PluginValidationError) -> str:
    """One line for a hook pluggy refused at registration, read from pluggy's message (karpy reads
    no plugin attribute): a hookimpl declaring an argument its hookspec does not take
    (``karpy_create(self, claim)``), named with what the hookspec takes; pluggy's own lines joined
    for anything else, its plugin (shown by ``id()``) left out."""
    import inspect
    import re

    text = str(exc)
    hook = re.search(r"for hook '(\w+)'", text)
    args = re.search(r"Argument\(s\) \{(.*?)\} are declared in the hookimpl", text)
    if hook and args and hasattr(hookspecs, hook.group(1)):
        name = hook.group(1)
        unknown = ", ".join(a.strip().strip("'\"") for a in args.group(1).split(","))
        takes = ", ".join(p for p in inspect.signature(getattr(hookspecs, name)).parameters if p != "self")
        return f"hook {name} declares argument(s) {unknown} that its hookspec does not take; {name} takes ({takes})"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return re.sub(r"^Plugin '?[^']*'? for ", "", " ".join(lines)) or type(exc).__name__


def load_provider(name: str, options: dict[str, Any] | None = None) -> CloudProvider:
    """Load the plugin registered as ``name`` in the ``karpy.cloudprovider`` group and wrap it.

    Raises:
        ConfigurationError: no such plugin, its extra is not installed (the message says which
            ``pip install 'karpy[...]'`` to run), its module or factory fails (one line naming the
            entry point and the error), or it misses hooks (named by entry point and distribution).
        KarpyError: what the plugin's factory raised of karpy's errors (e.g. its options).
    """
    eps = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not eps:
        raise ConfigurationError(
            f"no cloud provider named {name!r}; installed: {', '.join(available_providers()) or 'none'}{install_hint(name)}"
        )
    try:
        factory: Callable[[dict[str, Any]], object] = eps[0].load()
    except ImportError as exc:
        reraise_interrupt(exc)
        raise ConfigurationError(f"cloud provider {name!r} (entry point karpy.cloudprovider: {name} = {eps[0].value}) "
                                 f"failed to import: {exc}") from exc
    except Exception as exc:  # a broken plugin module: one line naming it, not a traceback
        reraise_interrupt(exc)
        raise ConfigurationError(f"cloud provider {name!r} ({eps[0].value}) failed to load: {type(exc).__name__}: {exc}") from exc
    _plugin_logs_like_karpy(eps[0].module)
    try:
        plugin = factory(dict(options or {}))
    except KarpyError:
        raise
    except Exception as exc:  # its factory failed other than on its options (those raise ConfigurationError)
        raise ConfigurationError(f"cloud provider {name!r} ({eps[0].value}) failed to start: {type(exc).__name__}: {exc}") from exc
    dist = eps[0].dist
    return CloudProvider(plugin, entry_point=name, distribution=f"{dist.name} {dist.version}" if dist is not None else None)


def _plugin_logs_like_karpy(module: str) -> None:
    """Give the plugin's top-level package logger karpy's level (``LOG_LEVEL``), unless a level
    was already set for it (by name through ``--log-debug-loggers``): a provider plugin is part
    of karpy, not a third-party library kept at WARNING (:func:`karpy_core.observability.configure_logging`)."""
    plugin_logger = logging.getLogger(module.split(".")[0])
    if plugin_logger.level == logging.NOTSET:
        plugin_logger.setLevel(logging.getLogger("karpy").getEffectiveLevel())
