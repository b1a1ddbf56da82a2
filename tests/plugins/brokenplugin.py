"""A third-party-style cloud plugin whose hooks raise a plain exception on demand (trial 2,
Tracebacks 1): the simulated provider, renamed ``broken``, with ``--provider-option fail=HOOK``
making ``HOOK`` raise ``RuntimeError("boom in HOOK")`` and ``wrong=HOOK[,HOOK...]`` making each
return a value of the wrong type (:data:`WRONG`, trial 4). Registered in-process by
:func:`register` (no install)."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

import pytest

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.apis.nodepool import NodePool
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.catalog.aws import DEFAULT_REGION
from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.simulated import SimulatedOptions, SimulatedProvider
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy

NAME = "broken"

WRONG: dict[str, Any] = {"karpy_name": 5, "karpy_supported_node_classes": [("a",)], "karpy_create": "x",
                         "karpy_list": None, "karpy_get_instance_types": None, "karpy_is_drifted": 5,
                         "karpy_repair_policies": "abc", "karpy_get": None, "karpy_pricing_note": 5,
                         "karpy_controllers": ("loop",), "karpy_prepare": "prepared", "karpy_start": True,
                         "karpy_close": "closed", "karpy_delete": "deleted"}
"""hook -> what it returns with ``wrong=HOOK``: the values trial 4 found tracebacks (or silence) for,
and (trial 5) an answer from each hook whose hookspec returns None (after doing its work)."""


class BrokenProvider(SimulatedProvider):
    """The simulated provider named ``broken``; the hook named by :attr:`fail` raises."""

    fail = ""
    wrong: frozenset[str] = frozenset()

    def _wrong(self, hook: str) -> bool:
        """Raise for the hook named by :attr:`fail`; True when ``hook`` is to answer :data:`WRONG`."""
        if self.fail == hook:
            raise RuntimeError(f"boom in {hook}")
        return hook in self.wrong

    @hookimpl
    def karpy_name(self) -> str:
        if self._wrong("karpy_name"):
            return WRONG["karpy_name"]
        return NAME

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        if self._wrong("karpy_supported_node_classes"):
            return WRONG["karpy_supported_node_classes"]
        return super().karpy_supported_node_classes()

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        if self._wrong("karpy_create"):
            return WRONG["karpy_create"]
        return await super().karpy_create(nodeclaim)

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        wrong = self._wrong("karpy_delete")
        await super().karpy_delete(nodeclaim)
        if wrong:
            return WRONG["karpy_delete"]  # the wrong answer under test
        return None

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        if self._wrong("karpy_get"):
            return WRONG["karpy_get"]
        return await super().karpy_get(provider_id)

    @hookimpl
    def karpy_controllers(self) -> list[ControllerLoop]:
        if self._wrong("karpy_controllers"):
            return WRONG["karpy_controllers"]
        return super().karpy_controllers()

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        if self._wrong("karpy_list"):
            return WRONG["karpy_list"]
        return await super().karpy_list()

    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        if self._wrong("karpy_get_instance_types"):
            return WRONG["karpy_get_instance_types"]
        return await super().karpy_get_instance_types(nodepool)

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        wrong = self._wrong("karpy_prepare")
        super().karpy_prepare(context)
        if wrong:
            return WRONG["karpy_prepare"]  # the wrong answer under test
        return None

    @hookimpl
    async def karpy_start(self) -> None:
        wrong = self._wrong("karpy_start")
        await super().karpy_start()
        if wrong:
            return WRONG["karpy_start"]  # the wrong answer under test
        return None

    @hookimpl
    async def karpy_close(self) -> None:
        wrong = self._wrong("karpy_close")
        await super().karpy_close()
        if wrong:
            return WRONG["karpy_close"]  # the wrong answer under test
        return None

    @hookimpl
    def karpy_pricing_note(self) -> str:
        if self._wrong("karpy_pricing_note"):
            return WRONG["karpy_pricing_note"]
        return super().karpy_pricing_note()

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        if self._wrong("karpy_is_drifted"):
            return WRONG["karpy_is_drifted"]
        return await super().karpy_is_drifted(nodeclaim)

    @hookimpl
    def karpy_repair_policies(self) -> list[RepairPolicy]:
        if self._wrong("karpy_repair_policies"):
            return WRONG["karpy_repair_policies"]
        return super().karpy_repair_policies()


def create_plugin(options: Mapping[str, Any] | None = None) -> BrokenProvider:
    """The ``broken`` plugin: option ``fail`` (a hook name), the simulated provider's others."""
    opts = dict(options or {})
    fail = str(opts.pop("fail", ""))
    wrong = str(opts.pop("wrong", ""))
    parsed = SimulatedOptions.parse(opts)
    plugin = BrokenProvider(region=parsed.region or DEFAULT_REGION, clock=parsed.clock, kube=parsed.kube,
                            node_backend=parsed.node_backend, catalog_options=parsed.catalog_options())
    plugin.fail = fail
    plugin.wrong = frozenset(h for h in wrong.split(",") if h)
    return plugin


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``broken`` an installed ``karpy.cloudprovider`` entry point for this test."""
    real = importlib.metadata.entry_points
    ep = importlib.metadata.EntryPoint(name=NAME, value=f"{__name__}:create_plugin", group="karpy.cloudprovider")

    def entry_points(**kw: Any) -> Any:
        found = real(**kw)
        return [*found, ep] if kw.get("group") == "karpy.cloudprovider" else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
