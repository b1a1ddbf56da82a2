"""New-user trial 12 findings (issue 35, fix12): ``karpy validate`` (and ``simulate``'s refusal)
lists the admission problems (a missing PriorityClass) with the schema problems in one run;
``--explain`` prints a workload's header for one pod too; budgets refuses a NodePool given twice in
``--nodes`` and warns about a redefined NodePool as validate does; ``--region ''`` is refused."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

from tests.cli import invoke_cli
from tests.test_input_classes import _nodepool, _problems, _write

WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata:
      labels: {{app: {name}, team: {team}}}
    spec:
      priorityClassName: {priority}
      containers:
        - {{name: c, image: nginx, resources: {{requests: {{cpu: 100m}}}}}}
"""

PRIORITY_CLASS = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: {name}}}\nvalue: {value}\n"

MISSING = "priorityClassName: no PriorityClass with name nosuch-class was found"


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_a_type_error_does_not_hide_a_missing_priority_class_of_the_same_object(tmp_path: Path, command: str) -> None:
    """Trial 12's stage.yaml: ``team: y`` (a YAML bool) and a missing PriorityClass in one
    Deployment: both problems in one run, not the second after the first is fixed."""
    path = _write(tmp_path, "stage.yaml", WEB.format(name="web", team="y", priority="nosuch-class"))
    result = invoke_cli(command, *([] if command == "validate" else [_write(tmp_path, "np.yaml", _nodepool())]), path)
    assert result.exit_code == 2
    problems = _problems(result)
    assert [p.partition(": ")[2].split(":")[0] for p in problems] == [
        "spec.template.metadata.labels.team", "spec.template.spec.priorityClassName"], problems
    assert problems[1].startswith(f"{path} doc 1 Deployment/web: spec.template.spec.{MISSING} (kube-apiserver's Priority "
                                  "admission refuses the pods of this Deployment"), problems


def test_a_type_error_in_one_object_does_not_hide_a_missing_priority_class_in_another(tmp_path: Path) -> None:
    bad = _write(tmp_path, "a.yaml", WEB.format(name="a", team="y", priority="system-node-critical"))
    missing = _write(tmp_path, "b.yaml", WEB.format(name="b", team="x", priority="nosuch-class"))
    problems = _problems(invoke_cli("validate", bad, missing))
    assert len(problems) == 2, problems
    assert problems[0].startswith(f"{bad} doc 1 Deployment/a: spec.template.metadata.labels.team: must be a string")
    assert problems[1].startswith(f"{missing} doc 1 Deployment/b: spec.template.spec.{MISSING}")


def test_a_refused_priority_class_is_not_reported_missing(tmp_path: Path) -> None:
    """A PriorityClass the loader refuses is still defined in the inputs: the workload naming it is
    not told it is missing (only the class's own problem is listed)."""
    classes = _write(tmp_path, "pc.yaml", PRIORITY_CLASS.format(name="high", value="'1000'"))
    web = _write(tmp_path, "web.yaml", WEB.format(name="web", team="x", priority="high"))
    problems = _problems(invoke_cli("validate", classes, web))
    assert len(problems) == 1 and problems[0].startswith(f"{classes} doc 1 PriorityClass/high: value"), problems


def test_without_schema_problems_the_admission_problems_are_listed_once(tmp_path: Path) -> None:
    path = _write(tmp_path, "web.yaml", WEB.format(name="web", team="x", priority="nosuch-class"))
    problems = _problems(invoke_cli("validate", path))
    assert len(problems) == 1 and MISSING in problems[0], problems


def test_explain_gives_a_one_pod_workload_its_header() -> None:
    """The README's own example: ``--explain default/frontend`` (one replica) opens with the
    workload's header, as ``--explain inflate`` (20 pods) does."""
    result = invoke_cli("simulate", "examples/nodepools/general-purpose.yaml", "examples/workloads/online-boutique.yaml",
                        "--explain", "default/frontend")
    assert result.exit_code == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "default/frontend: workload frontend, 1 pod", lines
    assert lines[1].startswith("default/frontend-") and "bound to" in lines[1], lines


def test_simulate_refuses_an_empty_region() -> None:
    result = invoke_cli("simulate", "examples/nodepools/general-purpose.yaml", "examples/workloads/inflate.yaml", "--region", "")
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == "error: --region: empty name; give a region (the simulated provider's default is us-east-1)\n"


@pytest.mark.parametrize(("nodes", "said"), [
    (["business=3", "business=4"], "error: --nodes: NodePool business is given twice (business=3 and business=4); "
                                   "give each NodePool once\n"),
    (["3", "4"], "error: --nodes: the count of every NodePool is given twice (3 and 4); give it once\n"),
])
def test_budgets_refuses_a_count_given_twice(nodes: list[str], said: str) -> None:
    args = [arg for n in nodes for arg in ("--nodes", n)]
    result = invoke_cli("budgets", "docs/examples/business-hours-budgets.yaml", *args)
    assert result.exit_code == 2 and result.stderr == said, result.stderr


def test_budgets_warns_about_a_redefined_nodepool_as_validate_does(tmp_path: Path) -> None:
    first = _write(tmp_path, "a.yaml", _nodepool())
    second = _write(tmp_path, "b.yaml", _nodepool())
    line = f"{second} doc 1 NodePool/default: redefines NodePool/default from {first} doc 1; the later definition is used"
    assert f"warning: {line}" in invoke_cli("validate", first, second).stdout.splitlines()
    result = invoke_cli("budgets", first, second, "--nodes", "3")
    assert result.exit_code == 0, result.stderr
    assert f"warning: {line}" in result.stderr.splitlines(), result.stderr


class _Console(io.StringIO):
    """A terminal's stdout or stderr (``isatty`` true), recording what was written."""

    def isatty(self) -> bool:
        return True


class _Interrupted(Exception):
    """Raised by the fake ``os._exit``."""


def _leave_now_after(monkeypatch: pytest.MonkeyPatch, *writes: str) -> str:
    """What ``_leave_now`` writes on a terminal's stderr after ``writes`` reached stdout (both the
    same terminal), through the wrapper ``main`` installs."""
    from karpy_core import cli

    out, err = _Console(), _Console()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    cli._track_line_ends()
    assert isinstance(sys.stdout, cli._LineEnds)
    for text in writes:
        sys.stdout.write(text)

    def _exit(code: int) -> None:
        raise _Interrupted(code)

    monkeypatch.setattr(os, "_exit", _exit)
    with pytest.raises(_Interrupted):
        cli._leave_now(2, None)
    return err.getvalue()


def test_the_interrupt_message_starts_a_line_of_its_own_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 12: a Ctrl-C while the report was printed gave ``... +185 morekarpy: interrupted``."""
    assert _leave_now_after(monkeypatch, "node-1: 4 pods\n", "+185 more") == "\nkarpy: interrupted\n"


def test_after_a_whole_line_the_interrupt_message_adds_no_blank_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _leave_now_after(monkeypatch, "node-1: 4 pods\n") == "karpy: interrupted\n"
    assert _leave_now_after(monkeypatch) == "karpy: interrupted\n"


def test_stdout_is_not_wrapped_when_it_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from karpy_core import cli

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", _Console())
    cli._track_line_ends()
    assert sys.stdout is out


def test_no_cyclic_collection_starts_while_a_simulation_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 12: Ctrl-C took up to 1.25 s in the provisioning phase of 20,000 pods at load 10-11:
    each full collection walked the whole heap in one uninterruptible C call. The run's objects are
    frozen and the collector paused while it runs, and everything is as before afterwards."""
    import gc

    from karpy_core.sim.simulator import Simulator

    seen: list[tuple[bool, int]] = []
    run = Simulator.run

    async def spy(self: Simulator) -> None:
        seen.append((gc.isenabled(), gc.get_freeze_count()))
        await run(self)

    monkeypatch.setattr(Simulator, "run", spy)
    assert gc.isenabled()
    result = invoke_cli("simulate", "examples/nodepools/general-purpose.yaml", "examples/workloads/inflate.yaml")
    assert result.exit_code == 0, result.stderr
    assert len(seen) == 1 and seen[0][0] is False and seen[0][1] > 0, seen
    assert gc.isenabled() and gc.get_freeze_count() == 0
