"""``hack/devcluster.py build`` with a fake ``go`` (a shell script): progress lines, Ctrl-C / SIGHUP
exit codes and clean-up, and removal of staging directories left by dead builds.

No real Go build runs here; the fake ``go`` answers ``env GOVERSION``, ``list -m`` and ``build -o DIR``
(touching the five binaries after sleeping ``$FAKE_GO_SLEEP`` seconds).
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))
import devcluster  # noqa: E402

FAKE_GO = """#!/bin/sh
case "$1" in
env) echo go1.26.0 ;;
list) echo "$FAKE_KWOK_DIR" ;;
build)
  out=""; prev=""
  for a in "$@"; do [ "$prev" = "-o" ] && out="$a"; prev="$a"; done
  sleep "${FAKE_GO_SLEEP:-0}"
  for b in etcd kube-apiserver kube-controller-manager kube-scheduler kwok; do : > "$out$b"; done ;;
esac
"""


@pytest.fixture
def fake_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a ``build`` subprocess: fake go, fake kwok module dir, private cache dir."""
    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    kwok = tmp_path / "kwok-module"
    for rel in devcluster._KWOK_STAGE_FILES:
        (kwok / rel).parent.mkdir(parents=True, exist_ok=True)
        (kwok / rel).write_text(f"kind: Stage\nmetadata: {{name: {Path(rel).stem}}}\n")
    env = dict(os.environ)
    env.update(KARPY_GO=str(go), FAKE_KWOK_DIR=str(kwok), KARPY_CACHE_DIR=str(tmp_path / "cache"), FAKE_GO_SLEEP="0")
    return env


def _sigint_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT's default action. A test run started in the background of
    a non-interactive shell (``cmd &``) inherits SIGINT ignored, and then neither Python's
    KeyboardInterrupt nor the fake go's ``sleep`` would see the Ctrl-C these tests send."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _build(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(REPO / "hack" / "devcluster.py"), "build", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=_sigint_as_in_a_terminal,
    )


def _staging_dirs(env: dict[str, str]) -> list[Path]:
    return sorted((Path(env["KARPY_CACHE_DIR"]) / "bin").glob(".build-*"))


def _wait_for_staging(env: dict[str, str], proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
    while not _staging_dirs(env):
        assert proc.poll() is None, "build exited before creating its staging directory"
        assert time.monotonic() < deadline, "no staging directory after 30 s"
        time.sleep(0.05)
    time.sleep(0.3)  # let it reach the (sleeping) go build


def test_build_prints_one_line_per_step_and_the_total_once(fake_env: dict[str, str]) -> None:
    proc = _build(fake_env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert [line.split(" building ")[0] for line in lines if "] building " in line] == ["devcluster: [1/2]", "devcluster: [2/2]"]
    assert sum("] built " in line for line in lines) == 2
    assert "kube-apiserver" in next(line for line in lines if "[1/2] built " in line)
    assert sum("built everything in" in line for line in lines) == 1
    assert not any("ready in" in line for line in lines)
    assert {line.split("\t")[0] for line in out.splitlines()} == {*devcluster.BINARIES, "kwok-stages"}
    assert _staging_dirs(fake_env) == []

    # A second run finds the cache and says so, once.
    again = _build(fake_env)
    _, err2 = again.communicate(timeout=60)
    assert again.returncode == 0
    assert [line for line in err2.splitlines() if "ready in" in line or "built" in line] == [
        next(line for line in err2.splitlines() if "cached binaries ready in" in line)
    ]


@pytest.mark.parametrize(
    ("sig", "code", "message"), [(signal.SIGINT, 130, "devcluster: interrupted"), (signal.SIGHUP, 129, "devcluster: stopped by SIGHUP")]
)
def test_interrupted_build_exits_with_one_line_and_removes_staging(fake_env: dict[str, str], sig: int, code: int, message: str) -> None:
    fake_env["FAKE_GO_SLEEP"] = "30"
    proc = _build(fake_env)
    _wait_for_staging(fake_env, proc)
    os.killpg(proc.pid, sig)  # as a terminal does: the whole foreground process group
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert err.splitlines()[-1] == message
    assert "Traceback" not in err
    assert _staging_dirs(fake_env) == []
    assert not (Path(fake_env["KARPY_CACHE_DIR"]) / "bin" / devcluster.K8S_VERSION / ".stamp").exists()


def test_build_removes_stale_staging_but_not_a_running_builds(fake_env: dict[str, str]) -> None:
    parent = Path(fake_env["KARPY_CACHE_DIR"]) / "bin"
    stale_same = parent / f".build-{devcluster.K8S_VERSION}-ab_c1"
    stale_other = parent / ".build-v1.35.0-zz9"
    running_other = parent / ".build-v1.34.2-q1w2"
    for d in (stale_same, stale_other, running_other):
        d.mkdir(parents=True)
        (d / "etcd").write_text("partial")
    with open(parent / ".v1.34.2.lock", "w") as held:  # a build of v1.34.2 is running
        fcntl.flock(held, fcntl.LOCK_EX)
        proc = _build(fake_env)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert _staging_dirs(fake_env) == [running_other]
    assert f"removed {stale_same.name} (left by an interrupted build)" in err
    assert f"removed {stale_other.name} (left by an interrupted build)" in err


def test_remove_stale_staging_ignores_other_names(tmp_path: Path) -> None:
    (tmp_path / ".build-").mkdir()  # no version
    (tmp_path / ".build-v1.0.0-x").write_text("a file, not a staging dir")
    (tmp_path / "build-v1.0.0-y").mkdir()
    (tmp_path / f".build-{devcluster.K8S_VERSION}-k").mkdir()
    assert devcluster.remove_stale_staging(tmp_path) == [tmp_path / f".build-{devcluster.K8S_VERSION}-k"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".build-", ".build-v1.0.0-x", "build-v1.0.0-y"]
