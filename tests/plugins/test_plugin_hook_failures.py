"""A plugin hook raising a plain exception (trial 2: Tracebacks 1, Wrong results 1 and 7, Doc
mismatches 2 and 4): one line naming the plugin, the hook and the exception, never a traceback;
exit 1 (a run-time failure), a failed create named as the pending pods' reason."""

from __future__ import annotations

import importlib.metadata
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pluggy
import pytest

from karpy_core.apis import registry
from karpy_core.apis.loader import load_text
from karpy_core.cloudprovider import hookimpl, hookspecs
from karpy_core.cloudprovider.calls import NOTHING, call_hook
from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.options import ProviderOptions
from karpy_core.cloudprovider.provider import load_provider
from karpy_core.errors import ConfigurationError, CreateError, PluginHookError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock
from tests.cli import invoke_cli
from tests.plugins import brokenplugin

FILES = ("examples/nodepools/general-purpose.yaml", "examples/workloads/inflate.yaml")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def broken(monkeypatch: pytest.MonkeyPatch) -> None:
    brokenplugin.register(monkeypatch)


@pytest.mark.parametrize("hook", ["karpy_name", "karpy_supported_node_classes", "karpy_get_instance_types",
                                  "karpy_prepare", "karpy_pricing_note", "karpy_list"])
def test_a_failing_hook_is_one_line_and_exit_1(hook: str) -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", f"fail={hook}", *FILES)
    assert result.exit_code == 1, result.output
    plugin = "broken"  # its entry point's name before karpy_name answers (trial 5: it was module.Class)
    assert result.stderr.strip().splitlines()[-1] == (
        f"error: cloud provider plugin {plugin!r}: {hook} raised RuntimeError: boom in {hook}")


@pytest.mark.parametrize("hook", ["karpy_name", "karpy_supported_node_classes"])
def test_validate_names_the_failing_hook(hook: str) -> None:
    result = invoke_cli("validate", "--cloud-provider", "broken", "--provider-option", f"fail={hook}", *FILES)
    assert result.exit_code == 1, result.output
    assert f"{hook} raised RuntimeError: boom in {hook}" in result.stderr


def test_a_failing_create_is_the_pending_reason() -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_create", *FILES)
    assert result.exit_code == 0, result.output
    pending = [line for line in result.stdout.splitlines() if ": pending: " in line]
    assert pending
    assert all("whose launch failed: LaunchFailed: cloud provider plugin 'broken': karpy_create raised RuntimeError: "
               "boom in karpy_create" in line for line in pending), pending


def test_a_failing_delete_does_not_stall_the_run() -> None:
    """The delete fails at every pass: retried and logged, the run goes on to its end (it raised
    "simulation makes no progress" before, counting the failed pass as a change)."""
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_delete",
                        "tests/data/scenarios/scale-down.yaml", "-o", "json")
    assert result.exit_code == 0, result.output
    assert "simulation makes no progress" not in result.output


class _GetRaises:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    @hookimpl
    async def karpy_get(self, provider_id: str) -> Any:
        raise self.exc


def _manager(plugin: object) -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(plugin)
    return pm


async def test_karpy_errors_pass_unwrapped_and_others_are_wrapped() -> None:
    with pytest.raises(PluginHookError) as caught:
        await call_hook(_manager(_GetRaises(KeyError("i-1"))), "p", "karpy_get", provider_id="i-1")
    assert (caught.value.plugin, caught.value.hook) == ("p", "karpy_get")
    assert str(caught.value) == "cloud provider plugin 'p': karpy_get raised KeyError: 'i-1'"
    assert isinstance(caught.value.__cause__, KeyError)
    error = CreateError("down", condition_reason="Down")
    with pytest.raises(CreateError) as kept:
        await call_hook(_manager(_GetRaises(error)), "p", "karpy_get", provider_id="i-1")
    assert kept.value is error


def test_text_for_kube_is_refused_for_a_third_party_plugin() -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "kube=foo", *FILES)
    assert result.exit_code == 2
    assert "broken provider: option(s) kube take an object the program passes (karpy sets them itself), not text" in result.stderr


def test_an_options_model_without_objects_still_refuses_text_for_kube() -> None:
    class ThirdParty(ProviderOptions):
        provider = "third"
        kube: Any = None

    with pytest.raises(ConfigurationError, match="option\\(s\\) kube take an object"):
        ThirdParty.parse({"kube": "foo"})
    assert ThirdParty.parse({"kube": object()}).kube is not None


class _FailingEntryPoint:
    name, value = "mini", "tests:mini"

    def load(self) -> Any:
        def api_kinds() -> Any:
            raise RuntimeError("boom in api_kinds")
        return api_kinds


def test_a_failing_apis_entry_point_warns_once_and_says_so(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(registry, "_FAILED", {})
    monkeypatch.setattr(registry, "entry_points", lambda group: [_FailingEntryPoint()])
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        for _ in range(3):
            registry.kind_registry()
        loaded = load_text("apiVersion: mini.example.org/v1\nkind: MiniNodeClass\nmetadata: {name: default}\n", "m.yaml")
    assert [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()] == [
        "karpy.apis entry point 'mini' (tests:mini) skipped: RuntimeError: boom in api_kinds"]
    assert not [w for w in caught if "skipped" in str(w.message)]
    # the failure itself is its one log line (above); the loader's warning is about the objects (trial 24: not repeated)
    assert loaded.warnings == ["objects of mini.example.org/v1 MiniNodeClass may be the kinds of the karpy.apis entry point "
                               "'mini', which failed to load (its warning above): not validated, not simulated"]


def test_a_failing_create_in_a_scenario_does_not_stall_the_run() -> None:
    """Every create fails: the launch is retried on the next pass, not at the same instant; the run
    ended in a "simulation makes no progress" traceback before (fresh-user trial 3)."""
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_create",
                        "tests/data/scenarios/scale-down.yaml", "-o", "json")
    assert result.exit_code == 0, result.output
    assert "simulation makes no progress" not in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(("hook", "returned", "expected"), [
    ("karpy_name", "int 5", "a non-empty str"),
    ("karpy_supported_node_classes", "list [('a',)]", "a list of (group, kind) pairs of str"),
    ("karpy_create", "str 'x'", "a NodeClaim"),
    ("karpy_list", "NoneType None", "a list of NodeClaim"),
    ("karpy_get_instance_types", "NoneType None", "a list of InstanceType"),
    ("karpy_is_drifted", "int 5", 'a str (the drift reason, "" when not drifted)'),  # the docs' `str`
    ("karpy_repair_policies", "str 'abc'", "a list of RepairPolicy (or mappings)"),
    ("karpy_pricing_note", "int 5", "a str"),
    ("karpy_controllers", "tuple ('loop',)", "a list of (name, coroutine function) pairs"),
    ("karpy_prepare", "str 'prepared'", NOTHING),  # trial 5: the hooks returning None answered anything
    ("karpy_delete", "str 'deleted'", NOTHING),
    ("karpy_close", "str 'closed'", NOTHING),
])
def test_a_hook_returning_the_wrong_type_is_named_not_a_traceback(hook: str, returned: str, expected: str) -> None:
    """Trial 4: five hooks returning the wrong type ended in a traceback, two were taken as they
    were (an int drift reason disrupted every node). Each is the plugin's failure, named in one
    line: exit 1 where the hook is needed to start, a warning and a retry where a run goes on."""
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", f"wrong={hook}",
                        "tests/data/scenarios/scale-down.yaml", "-o", "json")
    assert "Traceback" not in result.output, result.output
    plugin = "broken"  # karpy_name's own failure too: the entry point's name
    line = f"cloud provider plugin {plugin!r}: {hook} returned {returned}, expected {expected}"
    # on stderr, or (a failed launch) as the pending pods' reason in the report
    assert line in (result.stdout if hook == "karpy_create" else result.stderr), result.output
    assert result.exit_code in (0, 1)
    if hook == "karpy_prepare":
        assert result.exit_code == 1 and result.stderr.strip().splitlines()[-1] == f"error: {line}"
    if hook in ("karpy_delete", "karpy_close"):
        assert result.exit_code == 0  # logged and retried (delete), one warning at the end (close)
    if hook == "karpy_is_drifted":
        assert result.exit_code == 0
        assert '"Drifted"' not in result.stdout  # nothing disrupted for a reason the plugin never gave


def _karpy_with_broken(*args: str) -> subprocess.CompletedProcess[str]:
    """``karpy ARGS`` in a subprocess with the broken plugin installed (as :func:`broken` installs
    it here): its real exit status, stdout and stderr."""
    code = ("import pytest; from tests.plugins import brokenplugin; brokenplugin.register(pytest.MonkeyPatch()); "
            "from karpy_core.cli import main; main()")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.parametrize("hook", ["karpy_prepare", "karpy_pricing_note", "karpy_repair_policies"])
@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_validate_calls_the_start_hooks_simulate_calls(command: str, hook: str) -> None:
    """Trial 5: ``karpy validate --cloud-provider`` called neither ``karpy_prepare`` nor
    ``karpy_pricing_note`` (a plugin failing there was valid, and failed simulate); it calls the
    hooks simulate calls before its run, and a failure is simulate's one line and exit 1."""
    result = _karpy_with_broken(command, "--cloud-provider", "broken", "--provider-option", f"fail={hook}", *FILES)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.splitlines() == [f"error: cloud provider plugin 'broken': {hook} raised RuntimeError: boom in {hook}"]
    assert result.stdout == ""


def test_validate_prepares_with_the_simulators_context(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[ProviderContext] = []
    real = brokenplugin.BrokenProvider.karpy_prepare

    def prepare(self: brokenplugin.BrokenProvider, context: ProviderContext) -> None:
        seen.append(context)
        real(self, context)

    monkeypatch.setattr(brokenplugin.BrokenProvider, "karpy_prepare", hookimpl(prepare))
    result = invoke_cli("validate", "--cloud-provider", "broken", "examples/workloads/inflate.yaml")  # no NodePool either
    assert result.exit_code == 0, result.output
    assert len(seen) == 1
    assert seen[0].simulation and isinstance(seen[0].kube, InMemoryCluster) and isinstance(seen[0].clock, VirtualClock)


def test_validate_closes_the_provider_and_a_failing_close_is_a_warning() -> None:
    result = _karpy_with_broken("validate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_close", *FILES)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("valid")
    assert result.stderr.splitlines() == ["warning: the cloud provider was not closed cleanly: cloud provider plugin 'broken': "
                                          "karpy_close raised RuntimeError: boom in karpy_close"]


@pytest.mark.parametrize("answer", ["raise", "wrong"])
def test_a_failing_name_names_the_entry_point_and_its_distribution(monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    """Trial 5: a failing ``karpy_name`` was named by class path (``module.Class``); it is named as
    every other hook failure is, by the plugin's name on the command line (its entry point), with
    the distribution that installed it."""
    from karpy_aws.plugin import AWSProvider

    def name(self: AWSProvider) -> str:
        if answer == "raise":
            raise RuntimeError("boom in karpy_name")
        return 5  # type: ignore[return-value]  # the wrong answer under test

    monkeypatch.setattr(AWSProvider, "karpy_name", hookimpl(name))
    version = importlib.metadata.version("karpy-aws")
    with pytest.raises(PluginHookError) as info:
        load_provider("aws", {"region": "us-east-1", "cluster_name": "trial"})
    assert (info.value.plugin, info.value.hook, info.value.origin) == ("aws", "karpy_name", f"karpy-aws {version}")
    what = "raised RuntimeError: boom in karpy_name" if answer == "raise" else "returned int 5, expected a non-empty str"
    assert str(info.value) == f"cloud provider plugin 'aws' (karpy-aws {version}): karpy_name {what}"
    result = invoke_cli("validate", "--cloud-provider", "aws", "--provider-option", "region=us-east-1",
                        "--provider-option", "cluster_name=trial", *FILES)
    assert result.exit_code == 1
    assert result.stderr.strip() == f"error: {info.value}"
