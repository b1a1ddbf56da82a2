"""Scenario validation stays linear with a small constant, and ``karpy validate`` prints a summary.

50,000 steps took ~15 ms each (minutes) and the ``valid:`` line listed every step: each step read
the ``karpy.apis`` entry points again (a scan of every installed distribution), and each patch was
dumped with the pure-Python YAML emitter. The tests count the work per step instead of timing it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core.apis import loader, registry
from karpy_core.cli import app
from karpy_core.errors import ManifestError
from karpy_core.sim.scenario import format_seconds, load_scenario
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool, scenario


def _patch(i: int) -> dict[str, Any]:
    """A NodePool patch; only two distinct ones for even ``i``."""
    return {"kind": "NodePool", "name": "default", "patch": {"metadata": {"labels": {"team": f"t{i % 4}"}}}}


def _steps(n: int) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]}]
    for i in range(1, n):
        if i % 2:
            steps.append({"at": f"{i}m", "scale": {"deployment": "web", "replicas": i % 5}})
        else:
            steps.append({"at": f"{i}m", "patch": _patch(i)})
    return steps


def test_validate_prints_one_summary_line_with_counts_per_step_kind(tmp_path: Path) -> None:
    path = scenario(tmp_path, [*_steps(200), {"at": "200m", "delete": {"kind": "Deployment", "name": "web"}}], until="6h")
    result = CliRunner().invoke(app, ["validate", path])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "valid: Scenario t: 201 steps (1 apply, 100 scale, 1 delete, 99 patch) from 0s to 3h20m, until 6h"]


def test_the_kind_registry_is_read_once_and_a_repeated_patch_is_validated_once(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[int] = []
    loads: list[str] = []
    real_registry, real_load_text = registry.kind_registry, loader.load_text

    def counting_registry() -> Any:
        reads.append(1)
        return real_registry()

    def counting_load_text(text: str, source_name: str = "<text>", *args: Any, **kwargs: Any) -> Any:
        loads.append(source_name)
        return real_load_text(text, source_name, *args, **kwargs)

    monkeypatch.setattr(registry, "kind_registry", counting_registry)
    monkeypatch.setattr(loader, "load_text", counting_load_text)
    for n in (40, 400):
        reads.clear()
        loads.clear()
        loaded = load_scenario(scenario(tmp_path, _steps(n)))
        assert len(loaded.steps) == n
        assert len(reads) == 1  # per scenario, not per step
        assert len(loads) == 3  # the inline apply, then the two distinct patched NodePools: the same for 10x the steps


def test_a_repeated_invalid_patch_is_reported_at_every_step(tmp_path: Path) -> None:
    bad = {"kind": "NodePool", "name": "default", "patch": {"spec": {"disruption": {"consolidateAfter": "soon"}}}}
    steps = [{"at": "0s", "apply": [nodepool(), NODECLASS]}, {"at": "1h", "patch": bad}, {"at": "2h", "patch": bad}]
    with pytest.raises(ManifestError) as info:
        load_scenario(scenario(tmp_path, steps))
    problems = info.value.problems
    for i in (1, 2):
        mine = [q for q in problems if f"steps[{i}].patch: the patched NodePool would be invalid: " in q]
        assert mine and all("consolidateAfter" in q for q in mine)
    assert all("\x00" not in q for q in problems)
    first = [q.split("steps[1].patch", 1)[1] for q in problems if "steps[1].patch" in q]
    second = [q.split("steps[2].patch", 1)[1] for q in problems if "steps[2].patch" in q]
    assert first == second  # the second step's problems come from the first's validation, worded the same


def test_the_same_manifest_file_applied_again_is_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    (tmp_path / "base.yaml").write_text(yaml.safe_dump_all([nodepool(), NODECLASS, deployment(replicas=1)]))
    reads: list[list[str]] = []
    real = loader.load_documents

    def counting(paths: Any, *args: Any, **kwargs: Any) -> Any:
        reads.append([str(p) for p in paths])
        return real(paths, *args, **kwargs)

    monkeypatch.setattr(loader, "load_documents", counting)
    load_scenario(scenario(tmp_path, [{"at": f"{i}h", "apply": "base.yaml"} for i in range(30)]))
    assert reads == [[str((tmp_path / "base.yaml").resolve())]]


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (45, "45s"), (90, "1m30s"), (7200, "2h"), (3725, "1h2m5s"), (1.5, "1.5s")])
def test_format_seconds(seconds: float, text: str) -> None:
    assert format_seconds(seconds) == text


# ---- issue 35, trial 5: unknown keys are errors, a step after the end is said ---------------------------
def _problems(path: str) -> list[str]:
    with pytest.raises(ManifestError) as exc:
        load_scenario(path)
    return list(exc.value.problems)


@pytest.mark.parametrize(("step", "expected"), [
    ({"at": "1h", "scale": {"deployment": "web", "replica": 3}}, "steps[1].scale: replica: unknown field 'replica'; did you mean 'replicas'?"),
    ({"at": "1h", "scale": {"deployment": "web", "replicas": 1, "namepsace": "x"}},
     "steps[1].scale: namepsace: unknown field 'namepsace'; did you mean 'namespace'?"),
    ({"at": "1h", "delete": {"kind": "Deployment", "name": "web", "grace": 0}}, "steps[1].delete: grace: unknown field 'grace' (known: kind, name, namespace)"),
    ({"at": "1h", "patch": {"kind": "NodePool", "name": "default", "patches": {}}},
     "steps[1].patch: patches: unknown field 'patches'; did you mean 'patch'?"),
    ({"at": "1h", "scale": {"deployment": "web", "replicas": 1}, "att": "2h"},
     "steps[1]: att: unknown field 'att'; did you mean 'at'?"),
])
def test_an_unknown_key_in_a_step_is_an_error_naming_it(tmp_path: Path, step: dict[str, Any], expected: str) -> None:
    path = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]}, step])
    problems = _problems(path)
    assert any(expected in q for q in problems), problems


def test_an_unknown_top_level_key_is_an_error_naming_it(tmp_path: Path) -> None:
    import yaml

    doc = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "untill": "6h",
           "spec": {"stepz": []}, "steps": [{"at": "0s", "apply": [nodepool(), NODECLASS]}]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    problems = _problems(str(path))
    assert f"{path}: untill: unknown field 'untill'; did you mean 'until'?" in problems, problems
    assert f"{path}: spec.stepz: unknown field 'stepz'; did you mean 'steps'?" in problems, problems


def test_a_step_after_until_is_a_warning_of_validate_and_of_the_run(tmp_path: Path) -> None:
    """The step at 8h never runs in a 6h run: ``validate`` and ``simulate`` say so (a warning,
    since ``--until 12h`` runs it)."""
    from karpy_core.sim.scenario import unreached_steps

    path = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]},
                               {"at": "8h", "scale": {"deployment": "web", "replicas": 0}}], until="6h")
    result = CliRunner().invoke(app, ["validate", path])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1:] == [
        f"warning: {path}: steps[1] (scale at 8h) never runs: the run ends at 6h (until: 6h; a later --until runs it)"]
    loaded = load_scenario(path)
    assert unreached_steps(loaded, 12 * 3600.0, "--until 12h") == []
    assert [w.partition(" never runs")[0] for w in unreached_steps(loaded, 3600.0, "--until 1h")] == [
        f"{path}: steps[1] (scale at 8h)"]


async def test_the_report_of_a_run_cut_short_by_until_names_the_steps_it_never_ran(tmp_path: Path) -> None:
    from karpy_core.cli import run_simulation

    path = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=1)]},
                               {"at": "2h", "scale": {"deployment": "web", "replicas": 0}}], until="6h")
    report = await run_simulation([path], until="1h")
    assert f"{path}: steps[1] (scale at 2h) never runs: the run ends at 1h (--until 1h; a later --until runs it)" \
        in report.warnings, report.warnings
    # without --until, the run's warning is validate's, word for word (trial 23: the hint was missing)
    plain = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=1)]},
                                {"at": "8h", "scale": {"deployment": "web", "replicas": 0}}], until="6h")
    report = await run_simulation([plain])
    assert f"{plain}: steps[1] (scale at 8h) never runs: the run ends at 6h (until: 6h; a later --until runs it)" \
        in report.warnings, report.warnings
    assert not [e for e in report.events if e["kind"] == "scenario" and "scale" in str(e["reason"])]
