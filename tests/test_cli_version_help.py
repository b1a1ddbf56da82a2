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
