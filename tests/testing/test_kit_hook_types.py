"""The conformance kit fails a plugin whose hooks answer the wrong type (fresh-user trial 4, issue
35): one failure of ``test_hook_results_are_typed`` naming each such hook and the type its
hookspec promises, for the broken plugin fixture's ``wrong=HOOK`` (``tests/plugins/brokenplugin.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.simulated import SimulatedProvider
from karpy_core.errors import PluginHookError
from karpy_core.testing import ProviderConformance
from tests.plugins import brokenplugin

UNKNOWN = "simulated:///us-east-1a/i-ffffffff"


class _BrokenKit(ProviderConformance):
    """The kit over the broken plugin with ``wrong`` hooks."""

    def __init__(self, wrong: str = "") -> None:
        self.wrong = wrong

    async def make_provider(self) -> CloudProvider:
        return CloudProvider(brokenplugin.create_plugin({"wrong": self.wrong}))

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return UNKNOWN


async def _typed_check(wrong: str) -> str:
    """The kit's hook-type test on the broken plugin: its failure message ('' when it passed);
    every instance it launched is gone afterwards."""
    kit = _BrokenKit(wrong)
    provider = await kit.make_provider()
    try:
        try:
            await kit.test_hook_results_are_typed(provider)
        except AssertionError as exc:
            return str(exc)
        return ""
    finally:
        assert await SimulatedProvider.karpy_list(provider.plugin) == []  # type: ignore[arg-type]  # the cloud's own list
        await kit.close_provider(provider)


@pytest.mark.parametrize(("hook", "returned", "expected"), [
    ("karpy_supported_node_classes", "list [('a',)]", "a list of (group, kind) pairs of str"),
    ("karpy_repair_policies", "str 'abc'", "a list of RepairPolicy (or mappings)"),
    ("karpy_pricing_note", "int 5", "a str"),
    ("karpy_controllers", "tuple ('loop',)", "a list of (name, coroutine function) pairs"),
    ("karpy_get_instance_types", "NoneType None", "a list of InstanceType"),
    ("karpy_create", "str 'x'", "a NodeClaim"),
    ("karpy_get", "NoneType None", "a NodeClaim"),
    ("karpy_is_drifted", "int 5", 'a str (the drift reason, "" when not drifted)'),  # the docs' `str`
    ("karpy_list", "NoneType None", "a list of NodeClaim"),
])
async def test_the_kit_names_the_hook_and_the_expected_type(hook: str, returned: str, expected: str) -> None:
    message = await _typed_check(hook)
    assert message.startswith("cloud provider plugin 'broken': hook results not of the hookspecs' types"), message
    assert f"{hook} returned {returned}, expected {expected}" in message, message
    assert message.count(" returned ") == 1  # that hook alone


@pytest.mark.parametrize(("hook", "value", "returned"), [
    ("karpy_get_instance_types", {"m5.large": 1}, "dict {'m5.large': 1}"),
    ("karpy_list", ("i-1", "i-2"), "tuple ('i-1', 'i-2')"),
    ("karpy_create", None, "NoneType None"),
    ("karpy_is_drifted", 5, "int 5"),
])
async def test_the_trials_wrong_results_fail_the_kit(monkeypatch: pytest.MonkeyPatch, hook: str, value: Any,
                                                      returned: str) -> None:
    """The results the trial named: a dict of instance types, a tuple of str from list, None from
    create, 5 from the drift check."""
    monkeypatch.setitem(brokenplugin.WRONG, hook, value)
    message = await _typed_check(hook)
    assert f"{hook} returned {returned}, expected " in message, message


async def test_every_wrong_hook_is_named_in_one_failure() -> None:
    message = await _typed_check("karpy_pricing_note,karpy_get,karpy_list")
    named = [part.split(" returned ")[0] for part in message.split("hookspecs.py): ", 1)[1].split("; ")]
    assert named == ["karpy_pricing_note", "karpy_get", "karpy_list"], message


async def test_a_wrong_name_fails_when_the_facade_is_built() -> None:
    with pytest.raises(PluginHookError) as info:
        await _BrokenKit("karpy_name").make_provider()
    assert info.value.hook == "karpy_name" and info.value.returned == "int 5, expected a non-empty str"


async def test_a_plugin_of_the_right_types_passes() -> None:
    assert await _typed_check("") == ""


async def test_a_hook_that_raises_is_shown_as_it_is() -> None:
    """A raising hook is not a wrong result: the kit lets the PluginHookError through."""
    kit = _BrokenKit()
    provider = CloudProvider(brokenplugin.create_plugin({"fail": "karpy_get"}))
    try:
        with pytest.raises(PluginHookError, match="karpy_get raised RuntimeError: boom in karpy_get"):
            await kit.test_hook_results_are_typed(provider)
        assert await provider.list() == []
    finally:
        await kit.close_provider(provider)
