"""A plugin whose ``karpy_close`` hook raises (fresh-user trial 4, issue 35): ``karpy simulate``
closes the provider at the end of its run (it never did: a failing close went unnoticed, and a
plugin's cloud clients were never closed); a failure is one warning line naming the plugin and
the hook, the report is printed and the exit status is the run's."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from karpy_core.cli import _close_provider
from karpy_core.cloudprovider import hookimpl
from karpy_core.errors import ConfigurationError, PluginHookError
from tests.cli import invoke_cli
from tests.plugins import brokenplugin

ROOT = Path(__file__).resolve().parents[2]
FILES = (str(ROOT / "examples/nodepools/general-purpose.yaml"), str(ROOT / "examples/workloads/inflate.yaml"))
SCENARIO = str(ROOT / "tests/data/scenarios/scale-down.yaml")
LINE = ("warning: the cloud provider was not closed cleanly: cloud provider plugin 'broken': karpy_close raised "
        "RuntimeError: boom in karpy_close")


@pytest.fixture(autouse=True)
def broken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    brokenplugin.register(monkeypatch)
    monkeypatch.chdir(tmp_path)  # a scenario's text report writes its timeline PNG here


def test_a_failing_close_is_one_warning_and_the_report_stands() -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_close", *FILES)
    assert result.exit_code == 0, result.output
    assert "total: " in result.stdout and ", 0 pending" in result.stdout
    assert [line for line in result.stderr.splitlines() if "karpy_close" in line] == [LINE], result.stderr


def test_a_failing_close_after_a_scenario_keeps_the_json_report() -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_close", SCENARIO,
                        "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout is the whole report, nothing else
    assert doc["day"]["disruptions"]
    assert [line for line in result.stderr.splitlines() if "karpy_close" in line] == [LINE], result.stderr


def test_a_working_close_says_nothing() -> None:
    result = invoke_cli("simulate", "--cloud-provider", "broken", *FILES)
    assert result.exit_code == 0, result.output
    assert "karpy_close" not in result.stderr and "not closed" not in result.stderr


def test_a_failing_run_keeps_its_error_and_exit_status_when_close_fails_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run fails (its pricing note raises) and the close fails after it: the run's error and
    exit 1 are what the user sees, the close failure one warning line before them."""
    calls: list[str] = []

    async def close(self: brokenplugin.BrokenProvider) -> None:
        calls.append("close")
        raise RuntimeError("boom in karpy_close")

    monkeypatch.setattr(brokenplugin.BrokenProvider, "karpy_close", hookimpl(close))
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", "fail=karpy_pricing_note", *FILES)
    assert calls == ["close"]
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "error: cloud provider plugin 'broken': karpy_pricing_note raised RuntimeError: boom in karpy_pricing_note"
    assert LINE in lines


class _Closing:
    """A facade stand-in whose ``close`` raises ``error``."""

    label = "mini"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def close(self) -> None:
        raise self.error


@pytest.mark.parametrize("error", [PluginHookError("mini", "karpy_close", RuntimeError("down")),
                                   ConfigurationError("bad endpoint")])
async def test_close_failures_name_the_plugin_and_the_hook(error: Exception, caplog: pytest.LogCaptureFixture) -> None:
    """``karpy controller``'s shutdown goes through the same function: a karpy error the hook
    raised as it is (not wrapped by ``call_hook``) is named with the plugin and the hook too."""
    with caplog.at_level(logging.WARNING, logger="karpy.cli"):
        await _close_provider(_Closing(error))
    (record,) = caplog.records
    got: Any = record.__dict__["error"]
    assert isinstance(got, PluginHookError)
    assert (got.plugin, got.hook) == ("mini", "karpy_close")
    assert record.exc_info is None  # no traceback on the console or in the JSON log


def test_a_failing_close_exits_0_as_a_process() -> None:
    """The real entry point in a subprocess: exit status 0, the report on stdout, no traceback."""
    script = ("import pytest; from tests.plugins import brokenplugin; brokenplugin.register(pytest.MonkeyPatch()); "
              "from karpy_core.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", script, "simulate", "--cloud-provider", "broken",
                           "--provider-option", "fail=karpy_close", *FILES],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "total: " in proc.stdout
    assert LINE in proc.stderr.splitlines()
