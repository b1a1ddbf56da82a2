"""``karpy --version``, ``-h`` as ``--help``, and a ``--kubeconfig`` that is not a regular file."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from karpy_core.cli import app


def _karpy(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the console entry point as a user does (``main``: usage errors as one ``error:`` line)."""
    code = "from karpy_core.cli import main; main()"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120)


def test_version_prints_the_installed_version() -> None:
    proc = _karpy("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"karpy {importlib.metadata.version('karpy')}\n"


def test_h_is_help_for_the_group_and_commands() -> None:
    runner = CliRunner()
    for args in ([], ["simulate"], ["validate"], ["controller"]):
        short, long_ = runner.invoke(app, [*args, "-h"]), runner.invoke(app, [*args, "--help"])
        assert short.exit_code == 0 and long_.exit_code == 0, short.output
        assert short.output == long_.output
        assert short.output.startswith("Usage: ")
    assert "-h, --help" in runner.invoke(app, ["-h"]).output


def test_kubeconfig_that_is_not_a_regular_file_says_so(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for path in (os.devnull, str(fifo)):
        proc = _karpy("simulate", "--from-cluster", "--kubeconfig", path)
        assert proc.returncode == 2, proc.stderr
        assert f"--kubeconfig {path}: not a regular file, not a kubeconfig file" in proc.stderr
        assert "no such file" not in proc.stderr
    missing = _karpy("simulate", "--from-cluster", "--kubeconfig", str(tmp_path / "nope"))
    assert f"--kubeconfig {tmp_path / 'nope'}: no such file" in missing.stderr


def test_no_python_type_is_shown_as_a_metavar() -> None:
    """Every option and argument of every command that takes a value shows a readable metavar
    (``--set VAR=VALUE``, ``--feature-gates NAME=BOOL,...``, ``PATH``), not typer's Python type
    (``<str>``, ``<list[str]>``: fresh-user trial, issue 35). Checked on the help text and on the
    click parameters, so a new option without a :data:`~karpy_core.cli.METAVARS` entry fails here."""
    import re

    import typer

    from karpy_core.cli import readable_metavars

    group = typer.main.get_command(app)
    readable_metavars(group)
    runner = CliRunner()
    commands = group.commands  # type: ignore[attr-defined]
    assert {"simulate", "validate", "budgets", "controller"} <= set(commands)
    for name, command in commands.items():
        helptext = runner.invoke(app, [name, "-h"], env={"COLUMNS": "200"}).output
        assert not re.search(r"<(str|int|float|bool|list\[[a-z]+\]|Path)>", helptext), (name, helptext)
        for param in command.params:
            if getattr(param, "is_flag", False) or getattr(param, "count", False):
                continue
            assert param.metavar and re.fullmatch(r"[A-Za-z0-9_./=,|\[\]-]+(\.\.\.)?", param.metavar), (name, param.name)
    simulate = runner.invoke(app, ["simulate", "-h"], env={"COLUMNS": "200"}).output
    assert "--set VAR=VALUE" in simulate and "--provider-option NAME=VALUE" in simulate
    assert "--feature-gates NAME=BOOL,..." in simulate and "--instance-types FILE" in simulate
    assert "\n  PATH  YAML or JSON files or directories" in simulate
