"""The conformance kit fails a plugin whose instance types have a field of the wrong type or no
room for pods (trial 9, the ``zeta`` plugin's ``string_price`` and ``zero_cpu``) with a message
naming the hook, the instance type and the field: the run's rule
(:func:`karpy_core.cloudprovider.calls.instance_type_problem`), not a bare ``TypeError`` or
``AssertionError``."""

from __future__ import annotations

import pytest

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import PluginHookError
from karpy_core.testing import ProviderConformance
from tests.plugins import mistakeplugin


class _MistakenKit(ProviderConformance):
    """The kit over the ``mistake`` plugin making ``mistake``."""

    def __init__(self, mistake: str) -> None:
        self.mistake = mistake

    async def make_provider(self) -> CloudProvider:
        plugin = mistakeplugin.create_plugin({"mistake": self.mistake})
        assert plugin is not None
        return CloudProvider(plugin)


@pytest.mark.parametrize(("mistake", "field"), [
    ("price_str", "with offering price '0.1' (str) (on-demand in "),
    ("cpu_zero", "with capacity cpu 0, expected > 0 (millicores)"),
    ("cpu_str", "with capacity cpu '4' (str), expected an int"),
])
async def test_well_formed_names_hook_type_and_field(mistake: str, field: str) -> None:
    kit = _MistakenKit(mistake)
    provider = await kit.make_provider()
    try:
        with pytest.raises(PluginHookError) as caught:
            await kit.test_instance_types_well_formed(provider)
        message = str(caught.value)
        assert message.startswith("cloud provider plugin 'mistake': karpy_get_instance_types returned instance type '"), message
        assert field in message
        assert "\n" not in message
    finally:
        await kit.close_provider(provider)


@pytest.mark.parametrize("mistake", ["price_str", "cpu_zero"])
async def test_hook_types_test_names_the_instance_type_problem(mistake: str) -> None:
    kit = _MistakenKit(mistake)
    provider = await kit.make_provider()
    try:
        with pytest.raises(AssertionError, match=r"karpy_get_instance_types returned instance type '[^']+' with "):
            await kit.test_hook_results_are_typed(provider)
    finally:
        await kit.close_provider(provider)


async def test_the_kit_passes_the_unspoiled_plugin() -> None:
    kit = _MistakenKit("")
    provider = await kit.make_provider()
    try:
        await kit.test_instance_types_well_formed(provider)
    finally:
        await kit.close_provider(provider)
