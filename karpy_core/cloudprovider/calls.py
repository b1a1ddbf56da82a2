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
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

from karpy_core.cloudprovider.watch import watched
from karpy_core.errors import KarpyError, PluginHookError

if TYPE_CHECKING:
    import pluggy

    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.types import InstanceType

__all__ = ["NOTHING", "STR_DRIFT_REASON", "CallsDecorator", "CloudCalls", "PluginCalls", "call_hook", "call_hook_sync",
           "check_instance_types", "expect", "expect_none", "instance_type_problem",
           "instance_type_shape_problem"]


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


async def call_hook(pm: pluggy.PluginManager, plugin: str, hook: str, **kwargs: Any) -> Any:
    """The one implementation of ``hook`` called with ``kwargs`` (awaited when it is ``async``).

    Raises:
        KarpyError: what the hook raised of karpy's errors, as it is (``CreateError``...).
        PluginHookError: the hook raised any other ``Exception``; it names ``plugin``, ``hook``
            and the exception (chained as its ``__cause__``), so no caller shows a traceback.
    """
    try:
        with watched(plugin, hook):
            return await _awaited(getattr(pm.hook, hook)(**kwargs)[0])
    except KarpyError:
        raise
    except Exception as exc:
        raise PluginHookError(plugin, hook, exc) from exc


def call_hook_sync(pm: pluggy.PluginManager, plugin: str, hook: str, **kwargs: Any) -> Any:
    """:func:`call_hook` for a plain (``def``) hook: its first result, or None when it returned
    nothing (``karpy_prepare``). Same errors."""
    try:
        with watched(plugin, hook):
            results = getattr(pm.hook, hook)(**kwargs)
    except KarpyError:
        raise
    except Exception as exc:
        raise PluginHookError(plugin, hook, exc) from exc
    return results[0] if results else None


def expect(plugin: str, hook: str, value: Any, check: Any, expected: str) -> Any:
    """``value`` when ``check(value)`` holds; else :meth:`PluginHookError.wrong_result` (a hook
    returning the wrong type is the plugin's failure, one line, never a traceback further on)."""
    try:
        ok = bool(check(value))
    except Exception:
        ok = False
    if not ok:
        if inspect.iscoroutine(value):  # an ``async def`` where a plain ``def`` was due: never awaited, so close it
            value.close()
        raise PluginHookError.wrong_result(plugin, hook, value, expected)
    return value


STR_DRIFT_REASON = 'a str (the drift reason, "" when not drifted)'
"""What ``karpy_is_drifted`` is expected to answer, in words, as docs/cloudprovider.md's hooks table
spells it (returns ``str``: the reason, ``""`` if none); None is taken as ``""`` too."""

NOTHING = "None (karpy reads nothing from this hook)"
"""What a hook whose hookspec returns ``None`` (``karpy_delete``, ``karpy_prepare``, ``karpy_start``,
``karpy_close``) is expected to answer, in :meth:`PluginHookError.wrong_result` messages."""


def expect_none(plugin: str, hook: str, value: Any) -> None:
    """Nothing when ``value`` is None; else :meth:`PluginHookError.wrong_result`. A hook whose
    hookspec returns ``None`` and answers something (``"deleted"``, ``True``) is refused as any
    other wrong result: Karpenter's Go interface leaves no room for one (``Delete`` returns only
    an ``error``), and an answer karpy dropped silently would let a plugin believe it was read."""
    expect(plugin, hook, value, lambda v: v is None, NOTHING)


def _all(kind: type) -> Any:
    """A check: a list or tuple whose items are all ``kind``."""
    return lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, kind) for x in v)


_CHECKED: weakref.WeakSet[Any] = weakref.WeakSet()
"""Instance types :func:`check_instance_types` found well formed (each checked once: plugins
return the same, shared objects on every call)."""


_RESOURCE_UNITS = {"cpu": "millicores", "memory": "bytes", "pods": "pods"}
"""The resources every instance type must offer (> 0 in capacity and in allocatable), with their
internal units (:mod:`karpy_core.scheduling.resources`)."""


def _is_number(value: object) -> bool:
    """True for an ``int`` or ``float`` that is not a ``bool``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _wrong_type(value: object) -> str:
    """``value`` shown with its type, short: ``'0.02' (str)``."""
    shown = repr(value)
    return f"{shown if len(shown) <= 40 else shown[:37] + '...'} ({type(value).__name__})"


def _resources_problem(what: str, value: object) -> str:
    """What is wrong with a resource list ``value`` (``capacity``, ``overhead.kube_reserved``...):
    not a mapping of ``str`` to ``int`` >= 0 in internal units; ``""`` when nothing is."""
    if not isinstance(value, Mapping):
        return f"{what} {_wrong_type(value)}, expected a dict of resource name to int (internal units)"
    for name, amount in value.items():
        if not isinstance(name, str):
            return f"{what} key {_wrong_type(name)}, expected a resource name (str)"
        if not isinstance(amount, int) or isinstance(amount, bool):
            return (f"{what} {name} {_wrong_type(amount)}, expected an int in internal units "
                    f"({_RESOURCE_UNITS.get(name, 'millicores for cpu, bytes for memory, a count otherwise')}; "
                    f"parse_resource_list converts quantities such as '4' or '16Gi')")
        if amount < 0:
            return f"{what} {name} {amount}, expected >= 0"
    return ""


def instance_type_shape_problem(it: InstanceType) -> str:
    """What is wrong with one instance type's own fields, in words (``""``: nothing): a field of the
    wrong type (``name`` not a ``str``, ``offerings`` not a list of :class:`Offering`, an offering's
    ``price`` not a number, ``capacity`` or an ``overhead`` part not ``dict[str, int]``), a
    capacity of ``cpu``, ``memory`` or ``pods`` that is not > 0 (a node of that type could never
    hold a pod). An overhead at or above the capacity is accepted (:attr:`InstanceType.allocatable`
    is then 0): it comes from the user's settings as often as from the plugin
    (``kube_reserved={"cpu": "1"}`` leaves 1-vCPU types no cpu, ``--vm-memory-overhead-percent 0.2``
    leaves t4g.nano no memory), and Karpenter keeps such a type, its scheduler never fitting a pod on it.
    Offerings' prices and zones are :func:`instance_type_problem`'s.

    The one rule for both the run (:func:`check_instance_types`) and the conformance kit
    (:mod:`karpy_core.testing.conformance`); the message names the type and the field, e.g.
    ``instance type 'z1.micro' with capacity cpu 0, expected > 0 (millicores)``.
    """
    from karpy_core.cloudprovider.types import Offering, Overhead

    if not isinstance(it.name, str) or not it.name:
        return f"an instance type with name {_wrong_type(it.name)}, expected a non-empty str"
    head = f"instance type {it.name!r} with"
    if not isinstance(it.offerings, list | tuple):
        return f"{head} offerings {_wrong_type(it.offerings)}, expected a list of Offering"
    for o in it.offerings:
        if not isinstance(o, Offering):
            return f"{head} an offering {_wrong_type(o)}, expected an Offering"
        where = f"({o.capacity_type!s} in {o.zone!s})"
        if not isinstance(o.zone, str) or not isinstance(o.capacity_type, str):
            field_, value = ("zone", o.zone) if not isinstance(o.zone, str) else ("capacity_type", o.capacity_type)
            return f"{head} offering {field_} {_wrong_type(value)} {where}, expected a str"
        if not _is_number(o.price):
            return f"{head} offering price {_wrong_type(o.price)} {where}, expected a number (USD/hour, a float)"
        if not isinstance(o.available, bool):
            return f"{head} offering available {_wrong_type(o.available)} {where}, expected a bool"
        if not isinstance(o.reservation_capacity, int) or isinstance(o.reservation_capacity, bool):
            return f"{head} offering reservation_capacity {_wrong_type(o.reservation_capacity)} {where}, expected an int"
    problem = _resources_problem("capacity", it.capacity)
    if problem:
        return f"{head} {problem}"
    if not isinstance(it.overhead, Overhead):
        return f"{head} overhead {_wrong_type(it.overhead)}, expected an Overhead"
    for part in ("kube_reserved", "system_reserved", "eviction_threshold"):
        problem = _resources_problem(f"overhead.{part}", getattr(it.overhead, part))
        if problem:
            return f"{head} {problem}"
    for name, unit in _RESOURCE_UNITS.items():
        amount = it.capacity.get(name, 0)
        if amount <= 0:
            return f"{head} capacity {name} {amount}, expected > 0 ({unit})"
    return ""


def instance_type_problem(types: Sequence[InstanceType]) -> str:
    """What is wrong with a plugin's instance types, in words (``""``: nothing): a name twice, a
    field of the wrong type, no cpu, memory or pods capacity (:func:`instance_type_shape_problem`),
    an offering without a zone or capacity type, a price that is NaN, infinite or negative. The same checks as the conformance kit's
    ``test_instance_types_well_formed`` (:mod:`karpy_core.testing.conformance`) that a run cannot
    do without (a NaN price makes the cheapest-offering search never settle; a negative one gives
    negative costs; a price given as a str raised ``TypeError`` deep in the run, trial 9). A zero
    price is accepted: a free offering is plausible (a prepaid or on-premises pool)."""
    seen: set[str] = set()
    for it in types:
        if it in _CHECKED:
            if it.name in seen:
                return f"instance type {it.name!r} twice (names must be unique)"
            seen.add(it.name)
            continue
        shape = instance_type_shape_problem(it)
        if shape:
            return shape
        if it.name in seen:
            return f"instance type {it.name!r} twice (names must be unique)"
        seen.add(it.name)
        for o in it.offerings:
            if not o.zone or not o.capacity_type:
                return (f"instance type {it.name!r} with an offering without a "
                        f"{'zone' if not o.zone else 'capacity type'} ({o.capacity_type or '?'} in {o.zone or '?'})")
            if not (math.isfinite(o.price) and o.price >= 0):
                return (f"instance type {it.name!r} with offering price {o.price} ({o.capacity_type} in {o.zone}), "
                        f"expected a finite price >= 0 (USD/hour)")
        _CHECKED.add(it)
    return ""


def check_instance_types(plugin: str, types: Sequence[InstanceType], warned: set[str] | None = None) -> None:
    """Nothing when :func:`instance_type_problem` finds nothing in ``karpy_get_instance_types``'s
    answer ``types``. An instance type without offerings is a warning line (nothing can launch it;
    the conformance kit's ``test_instance_types_well_formed`` fails it: a plugin lists unavailable
    offerings with ``available=False``), not an error: Karpenter skips such a type. ``warned``
    holds the names already warned about (a :class:`PluginCalls`' own set, so once per plugin
    instance and type name); the names warned about now are added to it.

    Raises:
        PluginHookError: one line naming the plugin, the hook and the offending instance type.
    """
    problem = instance_type_problem(types)
    if problem:
        raise PluginHookError(plugin, "karpy_get_instance_types", None, returned=problem)
    warned = set() if warned is None else warned
    for it in types:
        if not it.offerings and it.name not in warned:
            warned.add(it.name)
            _log.warning(f"cloud provider plugin {plugin!r}: karpy_get_instance_types returned instance type {it.name!r} "
                         "without offerings: nothing can launch it (list unavailable ones with available=False; the "
                         "conformance kit fails it)")


_log = logging.getLogger("karpy.cloudprovider")


class PluginCalls:
    """:class:`CloudCalls` on a plugin's async hooks, through its pluggy ``PluginManager``
    (exactly one implementation of each, checked by the facade). A hook raising anything but
    karpy's errors raises :class:`~karpy_core.errors.PluginHookError` (:func:`call_hook`).

    Args:
        pm: the plugin's manager.
        plugin: the plugin's name for messages (``karpy_name``).
    """

    def __init__(self, pm: pluggy.PluginManager, plugin: str = "?"):
        self._pm = pm
        self.plugin = plugin
        self._checked: Any = object()  # the last list karpy_get_instance_types answered, once checked
        self._checked_len = 0
        self._no_offerings: set[str] = set()
        """Instance types warned about as having no offerings (:func:`check_instance_types`)."""

    def prepare(self, context: ProviderContext) -> None:
        """Nothing: the facade calls the plugin's ``karpy_prepare`` hook itself."""

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """``karpy_create``."""
        from karpy_core.apis.nodeclaim import NodeClaim

        got = await call_hook(self._pm, self.plugin, "karpy_create", nodeclaim=nodeclaim)
        return cast("NodeClaim", expect(self.plugin, "karpy_create", got, lambda v: isinstance(v, NodeClaim), "a NodeClaim"))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """``karpy_delete`` (which answers None: :func:`expect_none`)."""
        expect_none(self.plugin, "karpy_delete", await call_hook(self._pm, self.plugin, "karpy_delete", nodeclaim=nodeclaim))

    async def get(self, provider_id: str) -> NodeClaim:
        """``karpy_get``."""
        from karpy_core.apis.nodeclaim import NodeClaim

        got = await call_hook(self._pm, self.plugin, "karpy_get", provider_id=provider_id)
        return cast("NodeClaim", expect(self.plugin, "karpy_get", got, lambda v: isinstance(v, NodeClaim), "a NodeClaim"))

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """``karpy_get_instance_types``, as a new list."""
        from karpy_core.cloudprovider.types import InstanceType

        types: Any = await call_hook(self._pm, self.plugin, "karpy_get_instance_types", nodepool=nodepool)
        if types is self._checked and len(types) == self._checked_len:  # the same list as last time: checked
            return [*types]
        got = [*expect(self.plugin, "karpy_get_instance_types", types, _all(InstanceType), "a list of InstanceType")]
        check_instance_types(self.plugin, got, self._no_offerings)
        self._checked, self._checked_len = types, len(got)
        return got

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``karpy_is_drifted`` (a falsy answer is ``""``)."""
        got = await call_hook(self._pm, self.plugin, "karpy_is_drifted", nodeclaim=nodeclaim)
        return str(expect(self.plugin, "karpy_is_drifted", got, lambda v: v is None or isinstance(v, str),
                          STR_DRIFT_REASON) or "")

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """``karpy_list``, as a new list."""
        from karpy_core.apis.nodeclaim import NodeClaim

        claims: Any = await call_hook(self._pm, self.plugin, "karpy_list")
        return [*expect(self.plugin, "karpy_list", claims, _all(NodeClaim), "a list of NodeClaim")]


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
