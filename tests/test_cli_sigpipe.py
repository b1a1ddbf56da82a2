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


def _big_deployment(path: Path, replicas: int) -> Path:
    inflate = (ROOT / "examples/workloads/inflate.yaml").read_text()
    path.write_text(inflate.replace("spec:\n  selector:", f"spec:\n  replicas: {replicas}\n  selector:", 1))
    return path


def _head_c_100(command: str, *, unbuffered: bool, cwd: Path) -> tuple[str, str, str]:
    """``command | head -c 100`` in bash: (what head printed, karpy's exit status, karpy's stderr)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if unbuffered:
        env["PYTHONUNBUFFERED"] = "1"
    err = cwd / "err"
    proc = subprocess.run(f"{command} 2>{err} | head -c 100; status=${{PIPESTATUS[0]}}; echo; echo \"status=$status\"", shell=True,
                          executable="/bin/bash", capture_output=True, text=True, timeout=300, check=False, env=env, cwd=cwd)
    *head, status = proc.stdout.splitlines()
    return "\n".join(head), status, err.read_text()


@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED=1", "buffered"])
def test_a_large_write_into_a_closed_pipe_is_exit_141(unbuffered: bool, tmp_path: Path) -> None:
    """One write far larger than the pipe (1 MiB): under PYTHONUNBUFFERED=1 (karpy's image sets
    it) the text layer dropped what the pipe did not take and karpy exited 0 (trial 5)."""
    code = ("import typer; from karpy_core import cli; "
            "cli.app.command('big')(lambda: typer.echo('x' * (1 << 20))); cli.main()")
    head, status, err = _head_c_100(f"{sys.executable} -c \"{code}\" big", unbuffered=unbuffered, cwd=tmp_path)
    assert head == "x" * 100
    assert status == "status=141", err
    assert err == ""


def test_the_unbuffered_stdout_still_writes_everything(tmp_path: Path) -> None:
    """The buffered stdout :func:`karpy_core.cli.main` gives an unbuffered process loses nothing and
    shows each line at once (a reader that waits for a line before the next is written gets it)."""
    code = ("import sys, typer; from karpy_core import cli; "
            "cli.app.command('lines')(lambda: [(typer.echo(f'line {i}'), sys.stdout.write('partial '), print('end'), "
            "sys.stdin.readline()) for i in range(3)] and None); cli.main()")
    proc = subprocess.Popen([sys.executable, "-c", code, "lines"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert proc.stdin is not None and proc.stdout is not None
    for i in range(3):
        assert proc.stdout.readline() == f"line {i}\n"  # would hang if the line sat in a buffer
        assert proc.stdout.readline() == "partial end\n"
        proc.stdin.write("next\n")
        proc.stdin.flush()
    out, err = proc.communicate(timeout=60)
    assert (out, err, proc.returncode) == ("", "", 0)


@pytest.mark.e2e  # simulates 5,000 pods
@pytest.mark.parametrize("unbuffered", [True, False], ids=["PYTHONUNBUFFERED=1", "buffered"])
def test_a_large_simulate_json_into_head_is_exit_141(unbuffered: bool, tmp_path: Path) -> None:
    """``karpy simulate -o json | head -c 100`` with a 5,000-replica Deployment (about 1 MB of JSON)
    exits 141 as a small one does; it exited 0 under PYTHONUNBUFFERED=1 (fresh-user trial 5)."""
    big = _big_deployment(tmp_path / "big.yaml", 5000)
    karpy = f"{sys.executable} -c 'from karpy_core.cli import main; main()'"
    head, status, err = _head_c_100(f"{karpy} simulate {ROOT / 'examples/nodepools/general-purpose.yaml'} {big} -o json",
                                    unbuffered=unbuffered, cwd=tmp_path)
    assert head.startswith('{\n  "provider": {')
    assert status == "status=141", err
    assert err == ""
