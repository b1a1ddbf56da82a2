"""What a failing plugin hook tells the user of ``karpy simulate`` (fresh-user trial 3, issue 35):
a consolidation whose instances the cloud never deleted saves nothing and the summary says so
(B1); a hook failing at every pass is one stderr line naming the error per NodeClaim (delete) or
per error (drift check, background loops), then a count (C1, C2)."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path

import pytest

from karpy_core.errors import PluginHookError
from karpy_core.logs import REPEAT_BY_ERROR, ConsoleWarnings, fields
from karpy_core.redaction import register_secret
from tests.cli import invoke_cli
from tests.plugins import brokenplugin

ROOT = Path(__file__).resolve().parents[2]
SCALE_DOWN = str(ROOT / "tests/data/scenarios/scale-down.yaml")
FILES = (str(ROOT / "examples/nodepools/general-purpose.yaml"), str(ROOT / "examples/workloads/inflate.yaml"))
CONSOLIDATION = ("Empty", "Underutilized")


@pytest.fixture(autouse=True)
def broken(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    brokenplugin.register(monkeypatch)
    monkeypatch.chdir(tmp_path)  # the text report of a scenario writes its timeline PNG here


def _broken(fail: str, *args: str) -> tuple[int, str, str]:
    result = invoke_cli("simulate", "--cloud-provider", "broken", "--provider-option", f"fail={fail}", *args)
    return result.exit_code, result.stdout, result.stderr


def _error(hook: str) -> str:
    return f"cloud provider plugin 'broken': {hook} raised RuntimeError: boom in {hook}"


def test_a_consolidation_whose_instances_were_never_deleted_saves_nothing() -> None:
    code, out, _ = _broken("karpy_delete", SCALE_DOWN, "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    day = doc["day"]
    commands = sum(v["commands"] for r, v in day["disruptions"].items() if r in CONSOLIDATION)
    assert commands >= 1  # consolidation was decided ...
    assert not [e for e in doc["events"] if e["kind"] == "terminate"]  # ... but no instance was ever deleted
    assert day["consolidation_savings_usd"] == 0 and day["consolidation_savings_per_hour"] == 0
    assert day["consolidation_incomplete"] == commands - sum(day["undone"].values())
    assert day["end_cost_per_hour"] >= day["start_cost_per_hour"]  # the cost rose: nothing was saved
    code, text, _ = _broken("karpy_delete", SCALE_DOWN)
    assert code == 0
    n = day["consolidation_incomplete"]
    assert (f"{n} consolidation command{'' if n == 1 else 's'} did not complete: the cloud did not delete their "
            "instances by the end (nothing saved)") in text
    assert "saved 0.0000 USD (0.0000 USD/hour removed by 0 commands" in text


def test_a_normal_scale_down_still_counts_its_savings_and_completes() -> None:
    result = invoke_cli("simulate", SCALE_DOWN, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    day = doc["day"]
    assert day["consolidation_incomplete"] == 0
    assert day["consolidation_savings_usd"] > 0 and day["consolidation_savings_per_hour"] > 0
    text = invoke_cli("simulate", SCALE_DOWN).stdout
    assert "did not complete" not in text


def test_a_failing_delete_is_named_once_per_nodeclaim_then_counted() -> None:
    code, _, err = _broken("karpy_delete", SCALE_DOWN)
    assert code == 0
    lines = [line for line in err.splitlines() if "reconciling nodeclaim failed; retrying" in line]
    first = [line for line in lines if line.endswith(": " + _error("karpy_delete"))]
    repeats = [line for line in lines if line not in first]
    assert first, err
    claims = []
    for line in first:
        m = re.fullmatch(r"warning: reconciling nodeclaim failed; retrying \(NodeClaim (\S+)\): (.*)", line)
        assert m is not None, line
        claims.append(m.group(1))
    assert len(set(claims)) == len(claims)  # once per NodeClaim and error
    assert repeats, "a delete retried at every pass is counted at the end"
    for line in repeats:
        assert re.fullmatch(r"warning: reconciling nodeclaim failed; retrying \(NodeClaim (\S+)\): repeated \d+ more times? "
                            r"\(the same error\)", line), line
    assert len(lines) <= 2 * len(claims)  # ~98 identical lines before


def test_a_failing_drift_check_is_one_line_per_error_and_the_run_goes_on() -> None:
    code, out, err = _broken("karpy_is_drifted", SCALE_DOWN, "-o", "json")
    assert code == 0, err
    assert json.loads(out)["day"]["seconds"] == 6 * 3600  # ran to its end
    lines = [line for line in err.splitlines() if "drift check failed" in line]
    assert lines[0] == f"warning: drift check failed; keeping the last answer: {_error('karpy_is_drifted')}"
    assert len(lines) <= 2 and all("repeated" in line for line in lines[1:]), lines


@pytest.mark.parametrize("args", [FILES, (SCALE_DOWN,)])
def test_a_failing_karpy_controllers_is_one_line_and_the_run_goes_on(args: tuple[str, ...]) -> None:
    code, out, err = _broken("karpy_controllers", *args)
    assert code == 0, err
    lines = [line for line in err.splitlines() if "karpy_controllers" in line]
    assert lines == ["warning: the provider's background loops cannot be listed (karpy controller stops on this when it "
                     "starts leading; karpy simulate does not run them): " + _error("karpy_controllers")]
    assert out == _broken("", *args)[1]  # the simulation itself is the same


def test_a_failing_karpy_get_changes_nothing_in_simulate() -> None:
    """karpy's controllers do not call ``karpy_get`` (docs/cloudprovider.md says so): a failing
    one leaves the run and stderr as they are."""
    code, out, err = _broken("karpy_get", SCALE_DOWN)
    assert code == 0
    _, out_ok, err_ok = _broken("", SCALE_DOWN)
    assert (out, err) == (out_ok, err_ok)


def test_console_warnings_name_the_error_count_repeats_and_scrub_secrets() -> None:
    secret = "console-warnings-test-secret-5f3a9c1e"
    register_secret(secret)
    buf = io.StringIO()
    handler = ConsoleWarnings(buf)
    log = logging.getLogger("karpy.test.console")
    log.addHandler(handler)
    try:
        for _ in range(3):
            log.warning("reconciling nodeclaim failed; retrying",
                        extra=fields(nodeclaim="nc-1", error=PluginHookError("p", "karpy_delete", RuntimeError(f"denied {secret}"))))
        log.warning("reconciling nodeclaim failed; retrying", extra=fields(nodeclaim="nc-2", error=ValueError("bad")))
        for name in ("nc-1", "nc-2", "nc-3"):
            log.warning("drift check failed; keeping the last answer",
                        extra={**fields(nodeclaim=name, error=PluginHookError("p", "karpy_is_drifted", KeyError("x"))),
                               REPEAT_BY_ERROR: True})
        handler.finish()
    finally:
        log.removeHandler(handler)
    assert buf.getvalue().splitlines() == [
        "warning: reconciling nodeclaim failed; retrying (NodeClaim nc-1): cloud provider plugin 'p': karpy_delete raised "
        "RuntimeError: denied [REDACTED]",
        "warning: reconciling nodeclaim failed; retrying (NodeClaim nc-2): ValueError: bad",
        "warning: drift check failed; keeping the last answer: cloud provider plugin 'p': karpy_is_drifted raised KeyError: 'x'",
        "warning: reconciling nodeclaim failed; retrying (NodeClaim nc-1): repeated 2 more times (the same error)",
        "warning: drift check failed; keeping the last answer: repeated 2 more times (the same error, for NodeClaim nc-1, "
        "NodeClaim nc-2, NodeClaim nc-3)",
    ]
    assert secret not in buf.getvalue()
