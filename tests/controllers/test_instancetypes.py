"""The instance-type cache the disruption controller and the simulator share
(karpy_core/controllers/instancetypes.py): keyed by NodePool generation and NodeOverlay store,
refreshed on a timer or kept, never keeping an empty answer."""

from __future__ import annotations

from typing import Any

from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.instancetypes import INSTANCE_TYPES_REFRESH, InstanceTypeCache, types_signature
from karpy_core.state.views import NodePoolView
from karpy_core.utils.clock import VirtualClock
from tests.scheduling.helpers import make_type, nodepool

TYPES = [make_type("small", 2, 4), make_type("large", 8, 16)]


class Counting:
    """Answers ``answer`` and counts the calls; ``overlay_generation`` as the facade has it."""

    def __init__(self) -> None:
        self.calls = 0
        self.overlay_generation = 0
        self.answer: list[InstanceType] = list(TYPES)

    async def get_instance_types(self, nodepool: Any) -> list[InstanceType]:
        self.calls += 1
        return self.answer


def view(generation: int) -> NodePoolView:
    pool = nodepool()
    pool["metadata"]["generation"] = generation
    return NodePoolView.of(pool)


async def test_kept_per_generation_and_overlay_store_until_refresh() -> None:
    clock = VirtualClock(1_000.0)
    provider = Counting()
    cache = InstanceTypeCache(provider, clock)  # type: ignore[arg-type]
    kept, fetched = await cache.get(view(1))
    assert fetched and [t.name for t in kept.types] == ["small", "large"] and kept.signature == types_signature(TYPES)
    assert (await cache.get(view(1)))[1] is False and provider.calls == 1
    assert (await cache.get(view(2)))[1] is True and provider.calls == 2  # the spec changed
    provider.overlay_generation = 1
    assert (await cache.get(view(2)))[1] is True and provider.calls == 3  # a new overlay store
    clock.advance(INSTANCE_TYPES_REFRESH - 1)
    assert (await cache.get(view(2)))[1] is False
    clock.advance(1)
    assert (await cache.get(view(2)))[1] is True and provider.calls == 4  # refreshed


async def test_without_refresh_kept_until_the_nodepool_changes_and_empty_is_never_kept() -> None:
    clock = VirtualClock(1_000.0)
    provider = Counting()
    provider.answer = []
    cache = InstanceTypeCache(provider, clock, refresh_seconds=None)  # type: ignore[arg-type]
    assert (await cache.get(view(1)))[0].types == [] and (await cache.get(view(1)))[1] is True  # [] asked again
    provider.answer = list(TYPES)
    assert (await cache.get(view(1)))[1] is True and provider.calls == 3
    clock.advance(10 * INSTANCE_TYPES_REFRESH)
    assert (await cache.get(view(1)))[1] is False and provider.calls == 3  # kept: no timer
    got = await cache.of([view(1)])
    assert list(got) == ["default"] and got["default"].types == TYPES
