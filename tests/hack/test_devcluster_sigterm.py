"""A test run ended by SIGTERM (``timeout ./scripts/test``, a CI cancel) stops the dev clusters it
started: ``devcluster.stop_clusters_on_sigterm`` turns SIGTERM into ``KeyboardInterrupt``, so the
teardown and the ``atexit`` clean-up run. A fresh-user check found a kube-apiserver left running,
orphaned, after ``timeout 420 ./scripts/test`` (restarted off the main thread by a chaos test,
without PDEATHSIG)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import subprocess, sys, time
sys.path.insert(0, {hack!r})
import devcluster
child = subprocess.Popen(["sleep", "300"])
class Cluster:  # stands in for a DevCluster: stop() ends its processes
    def stop(self):
        child.kill()
        child.wait()
devcluster._LIVE_CLUSTERS.add(Cluster())
if {install}:
    assert devcluster.stop_clusters_on_sigterm()
print(child.pid, flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _run_and_terminate(install: bool) -> int:
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT.format(hack=str(REPO / "hack"), install=install)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    pid = int(proc.stdout.readline())
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    return pid


def test_sigterm_stops_the_clusters_started() -> None:
    pid = _run_and_terminate(install=True)
    deadline = time.monotonic() + 5
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_without_it_sigterm_leaves_them_running() -> None:
    """The behaviour before: SIGTERM's default action skips ``atexit``, and the child is left."""
    pid = _run_and_terminate(install=False)
    try:
        time.sleep(0.3)
        assert _alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_it_is_not_installed_over_another_handler() -> None:
    sys.path.insert(0, str(REPO / "hack"))
    import devcluster

    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        assert devcluster.stop_clusters_on_sigterm() is False
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, previous)


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="process signals as on Linux")
