"""New-user trial 19 findings (issue 35): a traceback from ``budgets --at`` far in the future,
Scenario steps ``validate`` passed and ``simulate`` refused with a 404, UTF-16 files kubectl reads.

Elsewhere: reasons for NodePools whose types lack offerings (tests/scheduling/test_reasons.py,
tests/test_trial17_findings.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("at", ["9999-12-31T23:59Z", "0001-01-01T00:00Z"])
def test_budgets_at_a_time_outside_the_previewable_years_is_one_line(at: str) -> None:
    """Trial 19: ``--at 9999-12-31T23:59Z`` ended in an OverflowError traceback from croniter, and
    ``--at 0001-01-01T00:00Z`` said ``error: year 0 is out of range`` without naming ``--at``."""
    example = str(REPO / "docs/examples/business-hours-budgets.yaml")
    result = invoke_cli("budgets", example, "--at", at)
    assert result.exit_code == 2
    assert result.stderr.strip() == (f"error: --at: {at!r} is outside the times budgets previews (1971-01-01 to "
                                     "9900-12-31, UTC)")


BASE = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}}, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


@pytest.mark.parametrize(("step", "problem"), [
    ({"patch": {"kind": "Gadget", "name": "fz", "patch": {"spec": {}}}}, "steps[1].patch: 404 NotFound: kind Gadget is not served"),
    ({"delete": {"kind": "gadget", "name": "fz"}}, "steps[1].delete: 404 NotFound: kind gadget is not served"),
    ({"scale": {"replicaset": "web", "replicas": 2}},
     "steps[1].scale: 404 NotFound: ReplicaSet/default/web does not exist at 1h (no earlier step applies it, and no "
     "Deployment of its namespace is named as its owner would be)"),
])
def test_validate_refuses_the_steps_simulate_refuses(tmp_path: Path, step: dict, problem: str) -> None:
    """Before: ``valid: ...`` from validate, ``404 NotFound`` from simulate, for the same file."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                                        "until": "2h", "steps": [{"at": "0s", "apply": "base.yaml"}, {"at": "1h", **step}]}))
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(scenario))
        assert result.exit_code == 2, (command, result.output)
        assert problem in result.stderr, (command, result.stderr)


def test_a_deployments_replicaset_may_still_be_scaled_by_a_step(tmp_path: Path) -> None:
    """A ReplicaSet named as the Deployment controller names its own passes validate."""
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(BASE))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "s"},
                                        "until": "2h", "steps": [{"at": "0s", "apply": "base.yaml"},
                                                                 {"at": "1h", "scale": {"replicaset": "web-abc", "replicas": 2}}]}))
    result = invoke_cli("validate", str(scenario))
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be"])
def test_a_utf16_file_with_a_byte_order_mark_is_read_as_kubectl_reads_it(tmp_path: Path, codec: str) -> None:
    """Before: ``line 1 column 1: not UTF-8 text: byte 0xFF (offset 0)``; kubectl reads files through
    ``unicode.BOMOverride`` and decodes them (Windows editors and PowerShell's ``>`` write UTF-16)."""
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: u16}\nspec:\n  containers: [{name: c, image: x}]\n"
    path = tmp_path / "pod.yaml"
    path.write_bytes(text.encode(codec) if codec == "utf-16" else b"\xfe\xff" + text.encode(codec))
    assert path.read_bytes()[:2] in (b"\xff\xfe", b"\xfe\xff")
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "valid: 1 Pod"
    path.write_bytes(b"\xff\xfe" + "a: b\n".encode("utf-16-le") + b"x")  # an odd byte left over
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 2
    assert "not UTF-16-LE text after its byte order mark, at offset 12" in result.stderr


def test_small_option_values_trial_19_found_accepted_or_unclear(tmp_path: Path) -> None:
    """``--hook-timeout nan`` was accepted; ``--instance-types`` given a YAML manifest said only
    ``not valid JSON``; ``budgets --nodes 99999999999999999999`` was shown as a node count; an
    ``--explain`` name of 5,000 characters was echoed whole."""
    result = invoke_cli("simulate", "--hook-timeout", "nan")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --hook-timeout must be 0 (wait forever) or more seconds, not nan"
    manifest = str(REPO / "examples/nodepools/spot.yaml")
    result = invoke_cli("simulate", "--instance-types", manifest)
    assert result.exit_code == 2
    assert result.stderr.strip().startswith(f"error: {manifest}: not an instance-types catalog: --instance-types takes "
                                            "Karpenter's KWOK catalog, a JSON list of instance types")
    example = str(REPO / "docs/examples/business-hours-budgets.yaml")
    result = invoke_cli("budgets", example, "--nodes", "99999999999999999999")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("error: --nodes: '99999999999999999999': a node count is at most 2,147,483,647 "
                                     "(an int32)")
    result = invoke_cli("simulate", "--explain", "x" * 5000)
    assert result.exit_code == 2
    assert f"error: no pod default/{'x' * 72}... (5,008 characters) in the simulation" in result.stderr
    assert len(result.stderr) < 400
