"""A call-recording fake cloud provider for plugin authors' and karpy's tests.

:class:`RecordingProvider` is a plugin (every hook of :mod:`karpy_core.cloudprovider.hookspecs`,
the optional ones included) that

* records every hook call, in order, as a :class:`HookCall` (hook name without the ``karpy_``
  prefix, arguments by name; NodeClaims and NodePools recorded as deep copies, as they were when
  called);
* lets a test inject errors per call: :meth:`RecordingProvider.fail` (the next *n* calls of a
  hook raise), :meth:`RecordingProvider.fail_call` (the *k*-th call of a hook raises);
* either **wraps** another plugin (``RecordingProvider(create_plugin({...}))``: every call is
  recorded, then answered by that plugin through its own facade), or **stands alone** as an
  in-memory cloud with a configurable catalog (:func:`default_catalog` unless
  ``instance_types`` is given): create launches the cheapest offering the NodeClaim allows with
  the core launch kernel (idempotent by NodeClaim name), delete raises
  ``NodeClaimNotFoundError`` once the instance is gone, get and list report each instance
  created at its launch time (on the prepared context's clock), ``is_drifted`` answers from
  :attr:`RecordingProvider.drift`.

Use it through the facade, as karpy does::

    recorder = RecordingProvider()
    cloud = CloudProvider(recorder)
    recorder.fail("create", InsufficientCapacityError("no capacity"))
    ...  # run the controller or code under test with ``cloud``
    assert [c.hook for c in recorder.calls_of("create")] == ["create", "create"]
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from karpy_core.apis.labels import LABEL_ARCH, LABEL_INSTANCE_TYPE, LABEL_OS
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.launch import ProviderID, cheapest_launchable, launch_constraints, stamp_launched
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType, Offering, Overhead, RepairPolicy
from karpy_core.errors import NodeClaimNotFoundError
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import parse_resource_list

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.contract import FullCloudProviderPlugin
    from karpy_core.cloudprovider.hookspecs import ControllerLoop

__all__ = ["DEFAULT_ZONES", "HookCall", "RecordingProvider", "default_catalog"]

DEFAULT_ZONES = ("test-zone-a", "test-zone-b")
"""The standalone catalog's zones."""

_CATALOG = {  # name: (cpu, memory, on-demand USD/hour)
    "rec.small": ("2", "4Gi", 0.05),
    "rec.medium": ("4", "8Gi", 0.10),
    "rec.large": ("8", "32Gi", 0.30),
}


def default_catalog(zones: Sequence[str] = DEFAULT_ZONES, spot_discount: float = 0.6) -> list[InstanceType]:
    """Three instance types (``rec.small`` 2 CPU/4 GiB 0.05 USD/hour, ``rec.medium`` 4/8 GiB 0.10,
    ``rec.large`` 8/32 GiB 0.30), amd64 linux, each offered on-demand and spot (price x ``1 -
    spot_discount``) in every zone of ``zones``; 110 pods, 100m CPU and 512 MiB kube-reserved."""
    out = []
    for name, (cpu, memory, price) in _CATALOG.items():
        spot = round(price * (1 - spot_discount), 4)
        out.append(InstanceType(
            name=name,
            requirements=Requirements.of(Requirement.new(LABEL_INSTANCE_TYPE, "In", [name]),
                                         Requirement.new(LABEL_ARCH, "In", ["amd64"]),
                                         Requirement.new(LABEL_OS, "In", ["linux"])),
            offerings=[Offering(z, ct, p, True) for ct, p in (("on-demand", price), ("spot", spot)) for z in zones],
            capacity=parse_resource_list({"cpu": cpu, "memory": memory, "pods": "110"}),
            overhead=Overhead(kube_reserved=parse_resource_list({"cpu": "100m", "memory": "512Mi"})),
        ))
    return out


@dataclass(frozen=True, slots=True)
class HookCall:
    """One hook call.

    Attributes:
        hook: the hook's name without ``karpy_`` (``create``, ``get_instance_types``, ``prepare``...).
        args: the arguments by name (pydantic models as deep copies taken at the call).
    """

    hook: str
    args: Mapping[str, Any] = field(default_factory=dict)


class RecordingProvider:
    """The call-recording fake provider (see the module docstring).

    Args:
        inner: a plugin to wrap (any object with ``@hookimpl`` methods; loaded through its own
            :class:`~karpy_core.cloudprovider.provider.CloudProvider`, so it is validated as at
            load), or None to stand alone.
        name: ``karpy_name`` when standalone (wrapping: the inner plugin's name).
        instance_types: the standalone catalog (default :func:`default_catalog`); a test may
            replace :attr:`instance_types` at any time.
        node_classes: ``karpy_supported_node_classes`` when standalone.
        repair_policies: ``karpy_repair_policies`` when standalone.

    Raises:
        ConfigurationError: ``inner`` is not a valid plugin.
    """

    def __init__(
        self,
        inner: object | None = None,
        *,
        name: str = "recording",
        instance_types: Sequence[InstanceType] | None = None,
        node_classes: Sequence[tuple[str, str]] = (("karpenter.k8s.aws", "EC2NodeClass"),),
        repair_policies: Sequence[RepairPolicy] = (),
    ):
        self.inner = CloudProvider(inner) if inner is not None else None
        """The wrapped plugin's facade, or None (standalone)."""
        self.calls: list[HookCall] = []
        """Every hook call so far, in order."""
        self.name = self.inner.name if self.inner is not None else name
        self.instance_types: list[InstanceType] = list(instance_types) if instance_types is not None else default_catalog()
        self.node_classes = list(node_classes)
        self.repair = list(repair_policies)
        self.instances: dict[str, NodeClaim] = {}
        """Standalone inventory: provider ID -> the launched NodeClaim."""
        self.drift: dict[str, str] = {}
        """Standalone: NodeClaim name -> the reason ``is_drifted`` answers (``""`` when absent)."""
        self.context: ProviderContext | None = None
        """The context of the last ``karpy_prepare``."""
        self.launched_at: dict[str, float | None] = {}
        """Standalone: provider ID -> the launch time (epoch seconds) get and list report as its
        ``creationTimestamp``; a test may set it (an instance launched earlier, or None: one
        reported without a creation time, as some clouds list theirs)."""
        self._ids = itertools.count(1)
        self._next_errors: dict[str, list[BaseException]] = {}
        self._call_errors: dict[tuple[str, int], BaseException] = {}

    def __repr__(self) -> str:
        return f"RecordingProvider(name={self.name!r}, calls={len(self.calls)})"

    # ------------------------------------------------------------------ test controls
    def fail(self, hook: str, error: BaseException, *, times: int = 1) -> None:
        """The next ``times`` calls of ``hook`` (``"create"``, ``"get_instance_types"``...) raise
        ``error`` (recorded first, never reaching the wrapped plugin or the standalone cloud).

        Raises:
            ValueError: ``hook`` names no hook, or ``times`` < 1.
        """
        self._check_hook(hook)
        if times < 1:
            raise ValueError(f"times must be at least 1, not {times}")
        self._next_errors.setdefault(hook, []).extend([error] * times)

    def fail_call(self, hook: str, number: int, error: BaseException) -> None:
        """The ``number``-th call (1-based, counting every call of ``hook`` since construction)
        raises ``error``.

        Raises:
            ValueError: ``hook`` names no hook, or ``number`` < 1.
        """
        self._check_hook(hook)
        if number < 1:
            raise ValueError(f"call numbers start at 1, not {number}")
        self._call_errors[(hook, number)] = error

    def calls_of(self, hook: str) -> list[HookCall]:
        """The calls of ``hook``, in order."""
        return [c for c in self.calls if c.hook == hook]

    def reset(self) -> None:
        """Forget the recorded calls and every error not raised yet (call numbers restart at 1)."""
        self.calls.clear()
        self._next_errors.clear()
        self._call_errors.clear()

    @staticmethod
    def _check_hook(hook: str) -> None:
        from karpy_core.cloudprovider import hookspecs

        if not hook.isidentifier() or not callable(vars(hookspecs).get(f"karpy_{hook}")):
            raise ValueError(f"no hook karpy_{hook}")

    def _enter(self, hook: str, **args: Any) -> None:
        """Record the call, then raise the error injected for it, if any."""
        recorded = {k: v.model_copy(deep=True) if isinstance(v, BaseModel) else v for k, v in args.items()}
        self.calls.append(HookCall(hook, recorded))
        number = sum(1 for c in self.calls if c.hook == hook)
        error = self._call_errors.pop((hook, number), None)
        queued = self._next_errors.get(hook)
        if error is None and queued:
            error = queued.pop(0)
        if error is not None:
            raise error

    # ------------------------------------------------------------------ sync hooks
    @hookimpl
    def karpy_name(self) -> str:
        return self.name

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        self._enter("supported_node_classes")
        return self.inner.supported_node_classes() if self.inner is not None else list(self.node_classes)

    @hookimpl
    def karpy_repair_policies(self) -> list[RepairPolicy]:
        self._enter("repair_policies")
        return self.inner.repair_policies() if self.inner is not None else list(self.repair)

    @hookimpl
    def karpy_controllers(self) -> list[ControllerLoop]:
        self._enter("controllers")
        return self.inner.controllers() if self.inner is not None else []

    @hookimpl
    def karpy_pricing_note(self) -> str:
        self._enter("pricing_note")
        note = self.inner.pricing_note() if self.inner is not None else None
        return note or f"{self.name}: a recording fake provider's fixed catalog (USD/hour)"

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        """Record and keep ``context``; a wrapped plugin gets it without the cloud-call metrics
        (the outer facade observes those, once)."""
        self._enter("prepare", context=context)
        self.context = context
        if self.inner is not None:
            self.inner.prepare(dataclasses.replace(context, cloud_call_metrics=None))

    # ------------------------------------------------------------------ async hooks
    @hookimpl
    async def karpy_start(self) -> None:
        self._enter("start")
        if self.inner is not None:
            await self.inner.start()

    @hookimpl
    async def karpy_close(self) -> None:
        self._enter("close")
        if self.inner is not None:
            await self.inner.close()

    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        self._enter("get_instance_types", nodepool=nodepool)
        if self.inner is not None:
            return await self.inner.get_instance_types(nodepool)
        return list(self.instance_types)

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Standalone: the instance already launched for this NodeClaim name, else the cheapest
        offering the NodeClaim allows (``InsufficientCapacityError`` when none, ``CreateError``
        for bad requirements)."""
        self._enter("create", nodeclaim=nodeclaim)
        if self.inner is not None:
            return await self.inner.create(nodeclaim)
        for launched in self.instances.values():
            if launched.metadata.name == nodeclaim.metadata.name:
                return launched.model_copy(deep=True)
        choice = cheapest_launchable(self.instance_types, launch_constraints(nodeclaim), what=f"{self.name} instance type")
        zone = choice.offering.zone
        launched = stamp_launched(nodeclaim, choice.instance_type, zone=zone, capacity_type=choice.offering.capacity_type,
                                  provider_id=ProviderID(self.name, zone, f"r-{next(self._ids):06d}"))
        self.instances[str(launched.status.provider_id)] = launched
        clock = self.context.clock if self.context is not None else None
        self.launched_at[str(launched.status.provider_id)] = clock.now() if clock is not None else time.time()
        return launched.model_copy(deep=True)

    def _as_listed(self, provider_id: str) -> NodeClaim:
        """The stored instance as get/list answer it: created at :attr:`launched_at` (its launch
        time on the context's clock unless a test changed it; None: no creation time)."""
        out = self.instances[provider_id].model_copy(deep=True)
        at = self.launched_at.get(provider_id)
        out.metadata.creation_timestamp = datetime.fromtimestamp(at, UTC) if at is not None else None
        return out

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Standalone: remove the instance; ``NodeClaimNotFoundError`` when there is none (done)."""
        self._enter("delete", nodeclaim=nodeclaim)
        if self.inner is not None:
            await self.inner.delete(nodeclaim)
            return
        provider_id = nodeclaim.status.provider_id or ""
        if self.instances.pop(provider_id, None) is None:
            raise NodeClaimNotFoundError(f"{self.name}: no instance {provider_id or '(no providerID)'}")

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """Standalone: the launched NodeClaim; ``NodeClaimNotFoundError`` when unknown."""
        self._enter("get", provider_id=provider_id)
        if self.inner is not None:
            return await self.inner.get(provider_id)
        if provider_id not in self.instances:
            raise NodeClaimNotFoundError(f"{self.name}: no instance {provider_id}")
        return self._as_listed(provider_id)

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        self._enter("list")
        if self.inner is not None:
            return await self.inner.list()
        return [self._as_listed(pid) for pid in sorted(self.instances)]

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """Standalone: :attr:`drift` for the NodeClaim's name (``""`` when absent)."""
        self._enter("is_drifted", nodeclaim=nodeclaim)
        if self.inner is not None:
            return await self.inner.is_drifted(nodeclaim)
        return self.drift.get(nodeclaim.metadata.name or "", "")


if TYPE_CHECKING:
    _conforms: type[FullCloudProviderPlugin] = RecordingProvider  # mypy checks every hook's signature
