"""A third-party-style cloud plugin making the mistakes a fresh plugin author made (trial 7, the
``acme`` plugin): the ``broken`` test plugin (:mod:`tests.plugins.brokenplugin`) renamed
``mistake``, whose option ``mistake=NAME`` picks one of :data:`MISTAKES`. Registered in-process
by :func:`register` (no install), with a second entry point, ``mistake-gone``, naming a module
that does not exist."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import time
from collections.abc import Mapping
from typing import Any

import pytest

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.apis.nodepool import NodePool
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.catalog.aws import DEFAULT_REGION
from karpy_core.cloudprovider.simulated import SimulatedOptions
from karpy_core.cloudprovider.types import InstanceType
from tests.plugins.brokenplugin import BrokenProvider

NAME = "mistake"
GONE = "mistake-gone"
UNMODELLED = ("mistake.example.com", "MistakeNodeClass")
"""The NodeClass kind ``mistake=unmodelled_kind`` serves, which no ``karpy.apis`` entry point models."""

PRICES: dict[str, Any] = {"price_nan": float("nan"), "price_inf": float("inf"), "price_negative": -0.5, "price_zero": 0.0,
                          "price_str": "0.1"}
"""``mistake=`` -> the price every offering gets (``price_str``: a str, trial 9's ``string_price``)."""


SHAPES: dict[str, Any] = {
    "cpu_zero": lambda t: dataclasses.replace(t, capacity={**t.capacity, "cpu": 0}),
    "cpu_str": lambda t: dataclasses.replace(t, capacity={**t.capacity, "cpu": "4"}),
    "pods_float": lambda t: dataclasses.replace(t, capacity={**t.capacity, "pods": 58.0}),
    "overhead_none": lambda t: dataclasses.replace(t, overhead=None),
}
"""``mistake=`` -> how the first instance type is spoiled (trial 9's ``zero_cpu`` and its kin)."""


class _Mistaken(BrokenProvider):
    """The ``broken`` provider named ``mistake``, with the instance-type and hang mistakes."""

    mistake = ""
    hang_seconds = 3600.0

    @hookimpl
    def karpy_name(self) -> str:
        return NAME

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        if self.mistake == "unmodelled_kind":
            return [UNMODELLED]
        return super().karpy_supported_node_classes()

    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        if self.mistake == "git_hang":
            await asyncio.sleep(self.hang_seconds)
        if self.mistake == "git_block":
            time.sleep(self.hang_seconds)  # noqa: ASYNC251 - the mistake under test: a hook blocking the event loop
        types = await super().karpy_get_instance_types(nodepool)
        if self.mistake in PRICES:
            return self._priced(types, PRICES[self.mistake])
        if self.mistake == "dup_names":
            return [*types, types[0]]
        if self.mistake in SHAPES:
            return [SHAPES[self.mistake](types[0]), *types[1:]]
        if self.mistake == "no_zone":
            return [dataclasses.replace(types[0], offerings=[dataclasses.replace(o, zone="") for o in types[0].offerings]),
                    *types[1:]]
        return types

    def _priced(self, types: list[InstanceType], price: float) -> list[InstanceType]:
        cached: list[InstanceType] | None = getattr(self, "_priced_types", None)
        if cached is None:
            cached = [dataclasses.replace(t, offerings=[dataclasses.replace(o, price=price) for o in t.offerings])
                      for t in types]
            self._priced_types = cached
        return cached

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        if self.mistake == "create_hang":
            await asyncio.sleep(self.hang_seconds)
        return await super().karpy_create(nodeclaim)

    @hookimpl
    def karpy_pricing_note(self) -> str:
        if self.mistake == "note_block":
            time.sleep(self.hang_seconds)
        return super().karpy_pricing_note()


class _WrongArg(_Mistaken):
    @hookimpl
    async def karpy_create(self, claim: NodeClaim) -> NodeClaim:  # the mistake under test (positional: mypy accepts it)
        return await super().karpy_create(claim)


class _AsyncName(_Mistaken):
    @hookimpl
    async def karpy_name(self) -> str:  # type: ignore[override]  # the mistake under test
        return NAME


MISTAKES = ("wrong_arg", "async_name", "return_none", "unmodelled_kind", "dup_names", "no_zone", "git_hang",
            "git_block", "create_hang", "note_block", *PRICES, *SHAPES)
"""What ``mistake=`` takes."""


def create_plugin(options: Mapping[str, Any] | None = None) -> _Mistaken | None:
    """The ``mistake`` plugin: option ``mistake`` (one of :data:`MISTAKES`), ``hang_seconds``
    (how long the hang mistakes sleep, default an hour), the ``broken`` plugin's others."""
    opts = dict(options or {})
    mistake = str(opts.pop("mistake", ""))
    hang = float(opts.pop("hang_seconds", 3600.0))
    if mistake == "return_none":
        return None
    parsed = SimulatedOptions.parse(opts)
    cls = {"wrong_arg": _WrongArg, "async_name": _AsyncName}.get(mistake, _Mistaken)
    plugin = cls(region=parsed.region or DEFAULT_REGION, clock=parsed.clock, kube=parsed.kube,
                 node_backend=parsed.node_backend, catalog_options=parsed.catalog_options())
    plugin.mistake = mistake
    plugin.hang_seconds = hang
    return plugin


def register(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``mistake`` and ``mistake-gone`` installed ``karpy.cloudprovider`` entry points for this test."""
    real = importlib.metadata.entry_points
    eps = [importlib.metadata.EntryPoint(name=NAME, value=f"{__name__}:create_plugin", group="karpy.cloudprovider"),
           importlib.metadata.EntryPoint(name=GONE, value="tests.plugins.no_such_module:create_plugin",
                                         group="karpy.cloudprovider")]

    def entry_points(**kw: Any) -> Any:
        found = real(**kw)
        return [*found, *eps] if kw.get("group") == "karpy.cloudprovider" else found

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
