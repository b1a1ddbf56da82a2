"""New-user trial 11 findings (issue 35, fixa48): ``karpy validate`` refuses a Scenario whose steps
take the pods over ``--max-pods`` as ``simulate`` does, naming the step and its workload; the
warnings of an input that fails are printed with its errors; ``validate``'s warning count agrees
with its lines; ``--explain`` and ``install-crds -h`` wording; thousands separators in the
progress counts."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli import invoke_cli
from tests.test_input_classes import _deployment, _nodepool, _problems, _write
from tests.test_readme_sim_only import _karpy as karpy_without_plugins

INFLATE = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}}}]
"""


def _scenario(tmp_path: Path, later: str) -> str:
    """A Scenario applying a NodePool and ``inflate`` (15 replicas) at 0s, then step ``later`` at 1m."""
    _write(tmp_path, "np.yaml", _nodepool())
    _write(tmp_path, "s1.yaml", INFLATE.format(name="inflate", replicas=15))
    _write(tmp_path, "s2.yaml", INFLATE.format(name="inflate2", replicas=15))
    return _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nsteps:\n"
                                      "  - {at: 0s, apply: [np.yaml, s1.yaml]}\n" + f"  - {{at: 1m, {later}}}\n")


# ---------------------------------------------------------------- 1. the pod cap over a Scenario's steps
@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_a_step_taking_the_pods_over_max_pods_is_refused_naming_the_step_and_its_workload(tmp_path: Path, command: str) -> None:
    """Before: validate said ``valid`` (rc 0); simulate refused, blaming ``inflate`` (the biggest
    workload, applied at 0s) without the step, while the step applying ``inflate2`` crossed the cap."""
    scenario = _scenario(tmp_path, "apply: s2.yaml")
    result = invoke_cli(command, scenario, "--max-pods", "20")
    assert result.exit_code == 2, result.output
    assert _problems(result) == [f"{scenario}: steps[1].apply: Deployment/default/inflate2: spec.replicas: 15 pods; the "
                                 f"simulation would hold 30 pods, more than its cap of 20 (karpy {command} --max-pods)"]


@pytest.mark.parametrize(("step", "named"), [
    ("scale: {deployment: inflate, replicas: 200000}", "steps[1].scale"),
    ("patch: {kind: Deployment, name: inflate, patch: {spec: {replicas: 200000}}}", "steps[1].patch"),
])
def test_a_scale_or_patch_step_over_the_default_cap_is_refused_by_validate(tmp_path: Path, step: str, named: str) -> None:
    scenario = _scenario(tmp_path, step)
    result = invoke_cli("validate", scenario)
    assert result.exit_code == 2, result.output
    assert _problems(result) == [f"{scenario}: {named}: Deployment/default/inflate: spec.replicas: 200,000 pods; the "
                                 "simulation would hold 200,000 pods, more than its cap of 100,000 (karpy validate --max-pods)"]


def test_pods_a_deleted_workload_asked_for_are_not_counted(tmp_path: Path) -> None:
    """The cap holds at each step, not over the sum of every step: 15, deleted, then 15 fits in 20."""
    _write(tmp_path, "np.yaml", _nodepool())
    _write(tmp_path, "s1.yaml", INFLATE.format(name="inflate", replicas=15))
    _write(tmp_path, "s2.yaml", INFLATE.format(name="inflate2", replicas=15))
    scenario = _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nsteps:\n"
                                          "  - {at: 0s, apply: [np.yaml, s1.yaml]}\n"
                                          "  - {at: 1m, delete: {kind: Deployment, name: inflate}}\n"
                                          "  - {at: 2m, apply: s2.yaml}\n")
    result = invoke_cli("validate", scenario, "--max-pods", "20")
    assert result.exit_code == 0, result.output


# ---------------------------------------------------------------- 2. warnings kept when the input fails
CUT = _deployment().replace("  template:", "...\n  template:", 1)


def test_validate_prints_the_not_read_warning_with_the_errors_it_explains(tmp_path: Path) -> None:
    """Before: only ``spec.template: required field is missing``; the ``...`` that ended the
    document before ``template:`` (the loader's "not read" warning) was dropped."""
    app = _write(tmp_path, "app.yaml", CUT)
    result = invoke_cli("validate", app)
    assert result.exit_code == 2
    assert any("spec.template" in p for p in _problems(result)), result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert any(line.startswith(f"warning: {app}: line ") and "not read" in line for line in warnings), result.stderr
    assert result.stderr.index("  - ") < result.stderr.index("warning: ")  # after the errors, as validate prints them


def test_a_scenario_step_keeps_its_files_not_read_warning_with_the_errors(tmp_path: Path) -> None:
    app = _write(tmp_path, "app.yaml", CUT)
    scenario = _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nsteps:\n"
                                          "  - {at: 0s, apply: app.yaml}\n")
    result = invoke_cli("validate", scenario)
    assert result.exit_code == 2
    assert any(line.startswith(f"warning: {scenario}: steps[0].apply: {app}: line ") and "not read" in line
               for line in result.stderr.splitlines()), result.stderr


# ---------------------------------------------------------------- 3. the warning count and the lines agree
def test_validate_counts_every_warning_line_it_prints() -> None:
    """Before: ``valid (36 warnings below)`` over 44 lines: the 8 ``not validated:`` lines were not counted."""
    done = karpy_without_plugins("validate", "examples/nodepools/")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    counted = re.match(r"valid \((\d+) warnings below\)", lines[0])
    assert counted, lines[0]
    shown = [line for line in lines[1:] if line.startswith(("warning: ", "not validated: "))]
    assert len([line for line in shown if line.startswith("not validated: ")]) == 8
    assert int(counted.group(1)) == len(shown) == len(lines) - 1


# ---------------------------------------------------------------- 6. install-crds -h
def test_install_crds_help_names_the_plugin_kinds_as_installed_with_their_plugin() -> None:
    """Before: "... CapacityBuffer, EC2NodeClass, KCNodeClass and the simulated provider's KWOKNodeClass",
    whatever plugins were installed."""
    result = invoke_cli("install-crds", "--help")
    assert result.exit_code == 0
    text = "".join(re.sub(r"[│╭╮╰╯─]", "", result.stdout).split())  # rich wraps the text, also after a hyphen
    assert "CapacityBuffer,EC2NodeClass" not in text
    wanted = ("the NodeClass CRDs of the installed provider plugins (EC2NodeClass with karpy-aws, KCNodeClass with "
              "karpy-kakaocloud, a third-party plugin's kind)")
    assert wanted.replace(" ", "") in text, text
