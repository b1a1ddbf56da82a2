"""A command whose stdout is closed early (``karpy validate ... | head -1``, fresh-user trial 4,
issue 35) stops quietly, as a Unix tool killed by SIGPIPE: no traceback, no message, exit 141
(128 + SIGPIPE). It exited 1 (typer's ``BrokenPipeError`` handling), or printed "Exception
ignored ... BrokenPipeError" when the last write was only flushed at exit. One place handles it
for every command: the ``karpy`` group and :func:`karpy_core.cli.main`."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from karpy_core import cli

ROOT = Path(__file__).resolve().parents[1]
SCALE_DOWN = "docs/examples/default-scale-down.yaml"
BUDGETS = "docs/examples/business-hours-budgets.yaml"
COMMANDS = [
    ["validate", "examples/nodepools", "examples/workloads"],
    ["simulate", "examples/nodepools/general-purpose.yaml", "examples/workloads/inflate.yaml"],
    ["simulate", "examples/nodepools/general-purpose.yaml", "examples/workloads/inflate.yaml", "-o", "json"],
    ["simulate", SCALE_DOWN, "--until", "2h", "-o", "json"],
    ["budgets", BUDGETS, "--nodes", "25"],
    ["budgets", BUDGETS, "--nodes", "25", "-o", "json"],
    ["providers"],
    ["--help"],
    ["simulate", "--help"],
]


def _karpy(args: list[str], *, stdout: int, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", "from karpy_core.cli import main; main()", *args],
                            stdout=stdout, stderr=subprocess.PIPE, text=True, cwd=cwd)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_a_closed_stdout_is_exit_141_and_silence(args: list[str], tmp_path: Path) -> None:
    read, write = os.pipe()
    os.close(read)  # the reader is gone before karpy writes a byte (as `| true`, or `| head` after its line)
    try:
        proc = _karpy([a if not a.startswith(("examples/", "docs/")) else str(ROOT / a) for a in args],
                      stdout=write, cwd=tmp_path)
    finally:
        os.close(write)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == cli.EXIT_SIGPIPE == 141, err
    assert err == ""
    assert not list(tmp_path.glob("karpy-timeline-*"))  # stopped at its first write, as SIGPIPE would stop it


def test_head_reads_the_first_line_and_karpy_stops_quietly(tmp_path: Path) -> None:
    proc = subprocess.run(f"{sys.executable} -c 'from karpy_core.cli import main; main()' validate "
                          f"{ROOT / 'examples/nodepools'} {ROOT / 'examples/workloads'} 2>{tmp_path / 'err'} | head -1; "
                          "echo \"status=${PIPESTATUS[0]}\"",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=300, check=False)
    first, status = proc.stdout.splitlines()
    assert first.startswith("valid (")
    assert status in ("status=141", "status=0")  # 0 when everything fitted in the pipe before head left
    assert (tmp_path / "err").read_text() == ""


def test_a_reader_that_reads_everything_sees_everything(tmp_path: Path) -> None:
    proc = _karpy(["validate", str(ROOT / "examples/nodepools")], stdout=subprocess.PIPE, cwd=tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert out.startswith("valid") and out.endswith("\n")


def test_an_epipe_that_is_not_stdout_stays_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A socket whose peer went away (the API server) raises EPIPE too: only a stdout whose reader
    is gone is the quiet exit."""
    read, write = os.pipe()
    with os.fdopen(write, "w") as out:
        monkeypatch.setattr(sys, "stdout", out)
        epipe = BrokenPipeError(errno.EPIPE, "Broken pipe")
        assert not cli._is_closed_stdout(epipe)  # stdout's reader is there: the EPIPE came from elsewhere
        os.close(read)
        assert cli._is_closed_stdout(epipe)
        assert not cli._is_closed_stdout(OSError(errno.ENOSPC, "No space left on device"))
        monkeypatch.undo()
