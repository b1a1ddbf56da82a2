"""What a long ``karpy simulate`` shows while it runs: the simulator's phases and pods bound, and
the stderr display (a rich bar on a terminal, phase lines in a log)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from karpy_core.cli import StderrProgress, run_simulation
from tests.test_cli_interrupt import NODEPOOL


class Recorder:
    """A :class:`~karpy_core.sim.progress.Progress` that keeps every call."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, int | None, int]] = []
        self.updates: list[int] = []

    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        self.phases.append((name, total, completed))

    def update(self, completed: int) -> None:
        self.updates.append(completed)


def test_a_simulation_reports_its_phases_and_the_pods_bound(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(NODEPOOL.replace("replicas: 100000", "replicas: 1200"))
    rec = Recorder()
    report = asyncio.run(run_simulation([str(path)], progress=rec))
    assert report.summary()["pods_bound"] == 1200
    names = [name for name, _, _ in rec.phases]
    assert names[0] == "loading manifests"
    assert ("creating pods of Deployment default/big", 1200, 0) in rec.phases
    assert rec.updates and max(rec.updates) < 1200 and rec.updates == sorted(rec.updates)
    assert any(n.startswith("provisioning: karpy's scheduler places 1,200 pending pods") for n in names)
    assert any(n.startswith("launching and registering nodes") for n in names)
    counted = [(total, done) for name, total, done in rec.phases if name.endswith("(pods bound)")]
    assert all(total == 1200 and 0 < done <= 1200 for total, done in counted)  # counted every 0.5 s of wall time: maybe none
    # before a first pod is bound: no 0/1200 bar frozen through the first passes, a phase without a total
    waiting = [(name, total) for name, total, _ in rec.phases if name.endswith("(none of 1,200 pods bound yet)")]
    assert waiting and all(total is None for _, total in waiting)
    assert any(name.startswith("scheduling pods on the nodes there are") for name, _ in waiting)
    first_bar = next((i for i, (name, _, _) in enumerate(rec.phases) if name.endswith("(pods bound)")), len(rec.phases))
    assert not any(name.endswith("bound yet)") for name, _, _ in rec.phases[first_bar:])
    assert names[-2:] == ["building the report", "computing the cheapest plan for comparison (HiGHS, at most 2 s)"]


def test_stderr_progress_writes_each_phase_once_in_a_log_after_its_delay() -> None:
    out = io.StringIO()
    progress = StderrProgress(out)
    progress.log_after = 3600.0
    with progress:
        progress.phase("loading manifests")
        assert out.getvalue() == ""  # a quick run: nothing
        progress.log_after = 0.0
        progress.phase("creating pods", total=10)
        progress.update(5)
        progress.phase("creating pods", total=10, completed=7)
        progress.phase("building the report")
    assert out.getvalue() == "karpy: creating pods\nkarpy: building the report\n"


def test_stderr_progress_draws_a_bar_on_a_terminal_and_erases_it() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    progress = StderrProgress(out)
    progress.delay = 0.0
    with progress:
        progress.phase("creating pods", total=4000)
        progress._show()  # what the timer does after the delay (called here, not waited for)
        progress.update(2000)
        progress._bar.refresh()
        drawn = out.getvalue()
    assert "creating pods" in drawn and "2000/4000" in drawn
    assert progress._bar is None  # stopped; transient: the bar's lines are cleared


def test_a_phase_without_a_total_draws_no_count_on_a_terminal() -> None:
    """The passes before a first pod is bound (and loading) have no total: the bar shows the phase
    and its time, not ``0/?`` or a count frozen at 0/N."""
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    progress = StderrProgress(out)
    with progress:
        progress.phase("provisioning (none of 20,000 pods bound yet)")
        progress._show()
        progress._bar.refresh()
        drawn = out.getvalue()
        progress.phase("launching (pods bound)", total=20000, completed=5000)
        progress._bar.refresh()
        counted = out.getvalue()[len(drawn):]
    assert "provisioning (none of 20,000 pods bound yet)" in drawn
    assert "/?" not in drawn and "0/20000" not in drawn and "/None" not in drawn
    assert "5000/20000" in counted
