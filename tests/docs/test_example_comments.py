"""The comments of docs/examples/*.yaml state what a run shows: the figures they give are read from
the comment and checked against a simulation, so comment and behaviour cannot drift apart."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from karpy_core.cli import run_simulation

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "docs" / "examples"


def _comment(path: Path) -> str:
    """The leading ``#`` lines of ``path``, joined into one line of text."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def _figures(text: str, word: str) -> tuple[float, int]:
    """``(USD/hour, nodes)`` of ``<word> at X USD/hour on N nodes``."""
    found = re.search(rf"{word} at ([0-9.]+) USD/hour on ([0-9]+) nodes", text)
    assert found, f"no '{word} at X USD/hour on N nodes' in: {text}"
    return float(found.group(1)), int(found.group(2))


async def test_default_scale_down_comment_states_the_runs_start_and_end() -> None:
    path = EXAMPLES / "default-scale-down.yaml"
    text = _comment(path)
    start_cost, start_nodes = _figures(text, "starts")
    end_cost, end_nodes = _figures(text, "ends")
    start_types = re.search(r"starts at [^(]*\(a (\S+) and a (\S+?):", text)
    end_types = re.search(r"into a (\S+) and a (\S+?):", text)
    assert start_types and end_types, text

    # the cluster settles 2h02m40s in (the scale-down is at 2h): 2h10m of the scenario's 6h suffice
    report = await run_simulation([str(path)], until="2h10m")
    doc = report.to_dict()
    series = [p for p in doc["cost_over_time"] if p["nodes"]]
    assert (series[0]["cost_per_hour"], series[0]["nodes"]) == (pytest.approx(start_cost), start_nodes)
    assert doc["day"]["start_cost_per_hour"] == pytest.approx(start_cost)
    first = sorted(e["details"]["instanceType"] for e in doc["events"] if e["kind"] == "launch" and e["t"] == series[0]["t"])
    assert first == sorted(start_types.groups())
    assert (report.cost_per_hour, len(report.nodes)) == (pytest.approx(end_cost), end_nodes)
    assert sorted(n.instance_type for n in report.nodes) == sorted(end_types.groups())
    # the steps the comment names, in order: Empty, then two Underutilized (single-node, repack)
    methods = [e["details"]["method"] for e in doc["events"] if e["kind"] == "disrupt"]
    assert methods == ["emptiness", "single-node-consolidation", "repack-consolidation"]
    assert doc["summary"]["pods_pending"] == 0 and doc["summary"]["pods_bound"] == 16


def test_every_docs_example_comment_is_checked() -> None:
    """A new docs/examples file gets its comment checked too (here or by the test named)."""
    checked = {"default-scale-down.yaml": "tests/docs/test_example_comments.py",
               "business-hours-budgets.yaml": "tests/sim/test_budgets_cli.py"}
    assert sorted(p.name for p in EXAMPLES.glob("*.yaml")) == sorted(checked)
    for name, test in checked.items():
        assert name in (REPO / test).read_text(), (name, test)
