"""What a long ``karpy simulate`` shows while it runs: the simulator's phases and pods bound, and
the stderr display (a rich bar on a terminal, phase lines in a log)."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from karpy_core.cli import LINE_WIDTH, SPARE_COLUMNS, StderrProgress, run_simulation
from karpy_core.sim.progress import shorten
from tests.test_cli_interrupt import NODEPOOL


class Recorder:
    """A :class:`~karpy_core.sim.progress.Progress` that keeps every call: each phase's name without
    the simulated time the simulator puts before it (``[sim 1m40s] ``), which goes to :attr:`times`
    (None for a phase without one: loading, the report)."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, int | None, int]] = []
        self.times: list[str | None] = []
        self.updates: list[int] = []

    def phase(self, name: str, total: int | None = None, completed: int = 0) -> None:
        timed = re.fullmatch(r"\[sim ([0-9hms]+)\] (.*)", name)
        self.times.append(timed.group(1) if timed else None)
        self.phases.append((timed.group(2) if timed else name, total, completed))

    def update(self, completed: int) -> None:
        self.updates.append(completed)


def test_a_simulation_reports_its_phases_with_honest_counts(tmp_path: Path) -> None:
    """Each phase says what it does; a counted phase has its own total and ends at it (before the
    fix the display reused the last total: ``building the report 0/1200``, creating pods ended at
    1000/1200, and ``pods bound 1200/1200`` was shown for the phases after kube-scheduler's)."""
    path = tmp_path / "pods.yaml"
    path.write_text(NODEPOOL.replace("replicas: 100000", "replicas: 1200"))
    rec = Recorder()
    report = asyncio.run(run_simulation([str(path)], progress=rec))
    assert report.summary()["pods_bound"] == 1200
    names = [name for name, _, _ in rec.phases]
    assert names[0] == "loading manifests"
    creating = names.index("creating pods: default/big")
    assert rec.phases[creating] == ("creating pods: default/big", 1200, 0)
    binding = names.index("kube-scheduler: binding pods")
    assert rec.phases[binding] == ("kube-scheduler: binding pods", 1200, 0)
    # the updates of each counted phase: rising, and the last one is its total (the bar ends filled)
    assert rec.updates[-1] == 1200 and 1200 in rec.updates[:rec.updates.index(1200) + 1]
    assert rec.updates == sorted(rec.updates[:rec.updates.index(1200) + 1]) + sorted(rec.updates[rec.updates.index(1200) + 1:])
    assert "kube-scheduler: 1,200 pods pending" in names[creating:binding]
    assert "provisioning: 1,200 pods pending" in names[creating:binding]
    assert "NodeClaim lifecycle" in names[creating:binding]
    # only the two counted phases have a total: no phase shows a count it does not make
    assert {(name, total) for name, total, _ in rec.phases if total is not None} == {
        ("creating pods: default/big", 1200), ("kube-scheduler: binding pods", 1200)}
    assert names[-2:] == ["building the report", "cheapest plan to compare (HiGHS, 2 s solving)"]
    assert all(len(name) <= 45 for name in names)


def test_a_long_workload_name_is_shortened_in_the_middle(tmp_path: Path) -> None:
    path = tmp_path / "pods.yaml"
    path.write_text(NODEPOOL.replace("replicas: 100000", "replicas: 1000").replace("name: big", "name: " + "a" * 40 + "-z"))
    rec = Recorder()
    asyncio.run(run_simulation([str(path)], progress=rec))
    creating = [name for name, _, _ in rec.phases if name.startswith("creating pods")]
    assert creating == ["creating pods: default/aa…aaaaaaa-z"]
    assert shorten("default/big", 20) == "default/big" and shorten("default/very-long-name", 12) == "defaul…-name"


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


def _terminal(width: int = 80) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=width, color_system=None), out


def _frames(drawn: str) -> list[str]:
    """The lines rich drew (each redraw starts with a carriage return or an erase), escapes removed."""
    return [text for piece in re.split(r"\r|\n|\x1b\[2K|\x1b\[\d*A", drawn)
            if (text := re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", piece)).strip()]


def _screen(drawn: str, width: int = 80) -> list[str]:
    """What a terminal ``width`` columns wide shows after ``drawn`` (a VT100's autowrap: a character
    written past the last column goes to the next line; carriage return, newline, cursor up,
    erase line), trailing blank lines dropped."""
    rows: list[list[str]] = [[]]
    row = col = 0
    for token in re.findall(r"\x1b\[[0-9;?]*[A-Za-z]|.", drawn, flags=re.S):
        if token.startswith("\x1b["):
            if token.endswith("A"):
                row = max(0, row - int(token[2:-1] or 1))
            elif token == "\x1b[2K":
                rows[row] = []
        elif token == "\r":
            col = 0
        elif token == "\n":
            row += 1
            col = 0
        else:
            if col >= width:  # the pending wrap
                row += 1
                col = 0
            while len(rows) <= row:
                rows.append([])
            line = rows[row]
            line.extend(" " * (col + 1 - len(line)))
            line[col] = token
            col += 1
        while len(rows) <= row:
            rows.append([])
    lines = ["".join(r).rstrip() for r in rows]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def test_each_phase_on_a_terminal_has_its_own_total_and_ends_filled() -> None:
    """The display as a user sees it, 80 columns: a phase without a total shows no count (before
    the fix rich kept the last phase's total: ``building the report 0/20000``), a counted phase
    shows its total, its last frame is the filled bar, and no line is wider than the terminal."""
    console, out = _terminal(80)
    progress = StderrProgress(console=console)
    with progress:
        progress.phase("loading manifests")
        progress._show()  # what the timer does after the delay (called here, not waited for)
        progress._bar.refresh()
        progress.phase("creating pods: default/big", total=20000)
        progress.update(19000)
        progress._bar.refresh()
        progress.update(20000)  # the end of the phase: drawn at once, filled
        progress.phase("kube-scheduler: 20,000 pods pending")
        progress._bar.refresh()
        progress.phase("kube-scheduler: binding pods", total=20000)
        progress._bar.refresh()
        progress.update(20000)
        progress.phase("building the report")
        progress._bar.refresh()
        progress.phase("cheapest plan to compare (HiGHS, 2 s solving)")
        progress._bar.refresh()
        frames = _frames(out.getvalue())
    assert frames and all(cell_len(f) <= 80 - SPARE_COLUMNS for f in frames), [f for f in frames if cell_len(f) > 77]

    def shown(phase: str) -> list[str]:
        return [f for f in frames if phase in f]

    assert shown("loading manifests") and not any("/" in f for f in shown("loading manifests"))
    assert any("19,000/20,000" in f for f in shown("creating pods: default/big"))
    assert "20,000/20,000" in shown("creating pods: default/big")[-1]  # filled at its end
    assert "━" * 14 in shown("creating pods: default/big")[-1]
    assert shown("kube-scheduler: 20,000 pods pending") and not any(
        re.search(r"\d/\d", f) for f in shown("kube-scheduler: 20,000 pods pending"))
    assert "0/20,000" in shown("kube-scheduler: binding pods")[0]
    assert "20,000/20,000" in shown("kube-scheduler: binding pods")[-1]
    for phase in ("building the report", "cheapest plan to compare (HiGHS, 2 s solving)"):
        assert shown(phase) and not any("/2" in f for f in shown(phase)), shown(phase)  # no total of another phase
    assert _screen(out.getvalue()) == []  # erased at the end


@pytest.mark.parametrize("width", [60, 80, 200])
def test_a_phase_name_too_long_for_the_terminal_is_cut_not_wrapped(width: int) -> None:
    """At most 77 columns on any terminal (a wide one keeps the bar beside the name), 3 fewer
    than a narrower one; the name gives way, the count stays whole."""
    console, out = _terminal(width)
    progress = StderrProgress(console=console)
    with progress:
        progress.phase("x" * 120, total=100000, completed=5)
        progress._show()
        progress._bar.refresh()
        frames = _frames(out.getvalue())
    assert frames and all(cell_len(f) <= min(LINE_WIDTH, width - SPARE_COLUMNS) for f in frames)
    assert all("5/100,000" in f and "x…" in f for f in frames)


@pytest.mark.parametrize("width", [80, 200])
def test_ctrl_c_leaves_no_progress_line_on_the_screen(width: int) -> None:
    """On Ctrl-C the terminal echoes ``^C`` where the cursor is, at the end of the progress line;
    before the fix the line filled all 80 columns, the echo wrapped onto a new line, and rich's
    erasing (one line up) erased that one: the last frame stayed above ``karpy: interrupted``."""
    console, out = _terminal(width)
    progress = StderrProgress(console=console)
    with pytest.raises(KeyboardInterrupt), progress:
        progress.phase(f"provisioning: {'20,000 pods pending'}")
        progress._show()
        progress.phase("kube-scheduler: binding pods", total=20000, completed=1500)
        progress._bar.refresh()
        out.write("^C")  # the terminal's echo of Ctrl-C
        raise KeyboardInterrupt
    assert progress._bar is None
    out.write("karpy: interrupted\n")  # what karpy_core.cli.main writes next
    assert _screen(out.getvalue(), width) == ["karpy: interrupted"]


def test_the_erasing_screen_model_sees_a_full_width_line_left_behind() -> None:
    """The check above fails without the spare columns: a line drawn to the last column, ``^C``
    echoed after it, then rich's erasing leaves the line on screen (this model, as a terminal)."""
    drawn = "\r\x1b[2K" + "x" * 80 + "^C" + "\n\r\x1b[1A\x1b[2K" + "karpy: interrupted\n"
    assert _screen(drawn) == ["x" * 80, "karpy: interrupted"]
    assert _screen(drawn.replace("x" * 80, "x" * 77)) == ["karpy: interrupted"]


def test_stderr_progress_draws_nothing_but_log_lines_when_stderr_is_not_a_terminal() -> None:
    """A pipe or a file: no bar, no escape or carriage return, whatever the run does (a phase line
    once the run has lasted ``log_after``)."""
    out = io.StringIO()
    progress = StderrProgress(out)
    progress.delay = 0.0
    progress.log_after = 0.0
    with progress:
        progress._show()  # the timer's call, were it started: it draws nothing here
        progress.phase("creating pods: default/big", total=20000)
        progress.update(20000)
        progress.phase("building the report")
    assert progress._bar is None
    assert out.getvalue() == "karpy: creating pods: default/big\nkarpy: building the report\n"




def test_counts_have_thousands_separators_and_fit_beside_a_full_phase_name() -> None:
    """The counted phases separate thousands as the phase names do (before: ``provisioning: 20,000
    pods pending`` but ``binding pods 9000/20000``); a 35-character phase and ``100,000/100,000``
    still fit 80 columns with the name whole."""
    console, out = _terminal(80)
    progress = StderrProgress(console=console)
    with progress:
        progress.phase("b" * 35, total=100000, completed=100000)
        progress._show()
        progress._bar.refresh()
        frames = _frames(out.getvalue())
    assert frames and all(cell_len(f) <= 80 - SPARE_COLUMNS for f in frames)
    assert all("b" * 35 in f and "100,000/100,000" in f for f in frames), frames


def test_a_phase_that_comes_round_again_shows_the_simulated_time_moving_on(tmp_path: Path) -> None:
    """Trial 15: the line went from ``reading N pods bound`` back to ``launching and registering
    nodes`` (the next round, for pods still pending) and read as a step back. Each phase of the
    run now opens with the simulated time, which never goes back; the loading and the report's
    phases, outside simulated time, have none."""
    from karpy_core.sim.progress import duration_text

    path = tmp_path / "pods.yaml"
    path.write_text(NODEPOOL.replace("replicas: 100000", "replicas: 1200"))
    rec = Recorder()
    asyncio.run(run_simulation([str(path)], progress=rec))
    names = [name for name, _, _ in rec.phases]
    untimed = {name for name, t in zip(names, rec.times, strict=True) if t is None}
    assert untimed == {"loading manifests", "building the report", "cheapest plan to compare (HiGHS, 2 s solving)"}
    seconds = [_seconds(t) for t in rec.times if t is not None]
    assert seconds == sorted(seconds) and seconds[-1] > seconds[0]
    lifecycle = [t for name, t in zip(names, rec.times, strict=True) if name == "NodeClaim lifecycle"]
    assert len(set(lifecycle)) >= 2  # the controller's pass comes round at later times
    assert "launching and registering nodes" not in names
    assert (duration_text(12), duration_text(100), duration_text(7260), duration_text(7261)) == ("12s", "1m40s", "2h01m", "2h01m01s")


def _seconds(text: str) -> int:
    """``1m40s`` -> 100 (:func:`~karpy_core.sim.progress.duration_text` read back)."""
    parts = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text)
    assert parts is not None, text
    h, m, s = (int(x or 0) for x in parts.groups())
    return 3600 * h + 60 * m + s


def test_the_simulated_time_before_a_phase_is_drawn_on_a_terminal() -> None:
    """``[sim 31s] kube-scheduler: binding pods`` on a terminal as on a pipe: drawn as rich markup,
    the bracketed time read as a style tag and vanished from the line (trial 18), and a phase name
    holding ``[/x]`` would have raised rich's MarkupError."""
    console, out = _terminal(80)
    progress = StderrProgress(console=console)
    with progress:
        progress.phase("[sim 31s] kube-scheduler: binding pods", total=10)
        progress._show()
        progress._bar.refresh()
        progress.phase("[sim 45s] [/x] provisioning: 3 pods pending")
        progress._bar.refresh()
        frames = _frames(out.getvalue())
    assert any("[sim 31s] kube-scheduler: binding pods" in f for f in frames), frames
    assert any("[sim 45s] [/x] provisioning" in f for f in frames), frames
