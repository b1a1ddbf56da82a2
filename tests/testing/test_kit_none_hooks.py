"""The conformance kit fails a plugin whose ``karpy_prepare`` raises (fresh-user trial 5, issue 35:
it passed, since nothing in the kit prepared the provider), and one whose hooks documented as
returning None answer a value (``karpy_prepare``, ``karpy_delete``, ``karpy_close``): karpy's facade
refuses such an answer as a wrong result, and the kit's failure names the hook. The kit runs in a
real pytest session over the broken plugin fixture (``tests/plugins/brokenplugin.py``, its
``fail=``/``wrong=`` options), as a plugin author runs it."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from karpy_core.cloudprovider.calls import NOTHING
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import PluginHookError
from tests.plugins import brokenplugin

ROOT = Path(__file__).resolve().parents[2]

KITS = {"Good": {}, "PrepareRaises": {"fail": "karpy_prepare"}, "PrepareAnswers": {"wrong": "karpy_prepare"},
        "DeleteAnswers": {"wrong": "karpy_delete"}, "CloseAnswers": {"wrong": "karpy_close"}}
"""Kit subclass name -> the broken plugin's options."""

MODULE = '''
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.testing import ProviderConformance
from tests.plugins import brokenplugin

def kit(options):
    class Kit(ProviderConformance):
        async def make_provider(self) -> CloudProvider:
            return CloudProvider(brokenplugin.create_plugin(options))

        def unknown_provider_id(self, provider: CloudProvider) -> str:
            return "simulated:///us-east-1a/i-ffffffff"
    return Kit
'''


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[str]]]:
    """Run the kit once per entry of :data:`KITS` in one pytest session: kit -> test -> the
    messages of its failures and errors (empty: passed)."""
    tmp = tmp_path_factory.mktemp("kit")
    (tmp / "test_kits.py").write_text(MODULE + "".join(f"Test{name} = kit({options!r})\n" for name, options in KITS.items()))
    report = tmp / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "test_kits.py", "-q", "-p", "no:cacheprovider", "-o", "asyncio_mode=auto",
                           "-o", "asyncio_default_fixture_loop_scope=function", f"--junitxml={report}"],
                          cwd=tmp, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=600, check=False)
    assert report.exists(), proc.stdout + proc.stderr
    found: dict[str, dict[str, list[str]]] = {name: {} for name in KITS}
    for case in ET.parse(report).getroot().iter("testcase"):
        kit = case.get("classname", "").rsplit(".", 1)[-1].removeprefix("Test")
        found[kit].setdefault(case.get("name", ""), []).extend(
            el.get("message", "") for el in case if el.tag in ("failure", "error"))
    return found


def test_a_plugin_without_faults_passes_every_test(outcomes: dict[str, dict[str, list[str]]]) -> None:
    assert len(outcomes["Good"]) >= 8
    assert {test: problems for test, problems in outcomes["Good"].items() if problems} == {}


def test_a_raising_prepare_fails_every_test_naming_the_hook(outcomes: dict[str, dict[str, list[str]]]) -> None:
    tests = outcomes["PrepareRaises"]
    assert tests.keys() == outcomes["Good"].keys()
    for test, problems in tests.items():
        assert problems, f"{test} passed with a raising karpy_prepare"
        assert any("cloud provider plugin 'broken': karpy_prepare raised RuntimeError: boom in karpy_prepare" in p
                   for p in problems), problems


def test_a_prepare_answering_a_value_fails_every_test(outcomes: dict[str, dict[str, list[str]]]) -> None:
    for test, problems in outcomes["PrepareAnswers"].items():
        assert any(f"karpy_prepare returned str 'prepared', expected {NOTHING}" in p for p in problems), (test, problems)


@pytest.mark.parametrize("kit", ["DeleteAnswers", "CloseAnswers"])
def test_a_delete_or_close_answering_a_value_fails_the_kit(outcomes: dict[str, dict[str, list[str]]], kit: str) -> None:
    hook, value = {"DeleteAnswers": ("karpy_delete", "'deleted'"), "CloseAnswers": ("karpy_close", "'closed'")}[kit]
    failed = {test: problems for test, problems in outcomes[kit].items() if problems}
    assert failed
    assert all(any(f"{hook} returned str {value}, expected {NOTHING}" in p for p in problems)
               for problems in failed.values()), failed
    if kit == "CloseAnswers":  # the teardown of every test closes the provider
        assert failed.keys() == outcomes["Good"].keys()
    else:
        assert "test_hook_results_are_typed" in failed and "test_delete_is_idempotent" in failed


@pytest.mark.parametrize("hook", ["karpy_prepare", "karpy_start", "karpy_close"])
async def test_the_facade_refuses_an_answer_from_a_hook_returning_none(hook: str) -> None:
    provider = CloudProvider(brokenplugin.create_plugin({"wrong": hook}))
    call = {"karpy_prepare": lambda: provider.prepare(provider.context), "karpy_start": provider.start,
            "karpy_close": provider.close}[hook]
    with pytest.raises(PluginHookError) as info:
        got = call()
        if got is not None:
            await got
    assert (info.value.plugin, info.value.hook) == ("broken", hook)
    assert info.value.returned == f"{type(brokenplugin.WRONG[hook]).__name__} {brokenplugin.WRONG[hook]!r}, expected {NOTHING}"
    if hook != "karpy_close":
        await provider.close()
