"""matplotlib is the ``sim`` extra: a scenario run without it still succeeds and says how to get
the plot, and nothing but the plot imports it (the controller image does not install it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from karpy_core.cli import app
from karpy_core.sim.report import PLOT_EXTRA

SCENARIO = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "scale-down.yaml"


def test_scenario_without_matplotlib_succeeds_and_says_how_to_get_the_plot(tmp_path, monkeypatch):
    # a None entry in sys.modules makes `import matplotlib` raise ImportError, as when it is not installed
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    png = tmp_path / "t.png"
    result = CliRunner().invoke(app, ["simulate", str(SCENARIO), "--until", "2h", "--timeline", str(png)])
    assert result.exit_code == 0, result.output
    assert "total:" in result.stdout
    assert not png.exists()
    assert PLOT_EXTRA == "pip install 'karpy[sim]'"
    assert result.stderr.strip() == f"timeline: not drawn: matplotlib is not installed; {PLOT_EXTRA} to draw it"


def test_default_timeline_without_matplotlib_does_not_fail_either(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["simulate", str(SCENARIO), "--until", "2h"])
    assert result.exit_code == 0, result.output
    assert PLOT_EXTRA in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_only_the_plot_imports_matplotlib():
    code = ("import sys; import karpy_core.cli, karpy_core.operator, karpy_core.sim.report, karpy_core.sim.simulator; "
            "sys.exit('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
