"""New-user trial 16 findings (issue 35): the cheapest plan ``karpy simulate`` compares with used
a NodePool that is not Ready (its NodeClass not given), which launches nothing, and called karpy's
plan 10x the optimum."""

from __future__ import annotations

from pathlib import Path

from tests.cli import invoke_cli

ORPHAN = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: orphan}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}
      requirements: [{key: kubernetes.io/os, operator: In, values: [linux]}]
"""

REPO = Path(__file__).resolve().parents[1]


def test_the_reference_leaves_out_a_nodepool_that_is_not_ready(tmp_path: Path) -> None:
    """Before: ``optimum: 0.0068 USD/hour ... (1 x t3.nano, 1 x t4g.small): karpy's plan costs
    1023.8% more`` with the orphan NodePool; without it, ``karpy's plan is optimal``."""
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text(ORPHAN)
    common = [str(REPO / "examples/nodepools/general-purpose.yaml"), str(REPO / "examples/workloads/online-boutique.yaml"),
              "--set", "CLUSTER_NAME=demo"]
    alone = invoke_cli("simulate", *common)
    beside = invoke_cli("simulate", *common, str(orphan))
    assert alone.exit_code == 0 and beside.exit_code == 0, beside.output

    def reference_line(output: str) -> str:
        return next(line for line in output.splitlines() if line.startswith(("optimum:", "lower bound:")))

    assert reference_line(alone.stdout).endswith("karpy's plan is optimal")
    assert reference_line(beside.stdout) == reference_line(alone.stdout)


def test_budgets_at_names_a_date_that_does_not_exist() -> None:
    """Trial 16: ``--at 2026-02-29T00:00Z`` was "not an ISO 8601 time such as 2026-12-07T08:00Z":
    it is written as one; the day does not exist."""
    import pytest

    from karpy_core.errors import ConfigurationError
    from karpy_core.sim.budgets import parse_at

    with pytest.raises(ConfigurationError) as bad_day:
        parse_at("2026-02-29T00:00Z", 0.0)
    assert str(bad_day.value) == ("--at: '2026-02-29T00:00Z' is no such time: day is out of range for month "
                                  "(an ISO 8601 time such as 2026-12-07T08:00Z)")
    with pytest.raises(ConfigurationError) as garbage:
        parse_at("noon", 0.0)
    assert str(garbage.value) == "--at: 'noon' is not an ISO 8601 time such as 2026-12-07T08:00Z"
    assert parse_at("2024-02-29T00:00Z", 0.0) == 1709164800.0  # a leap day that exists


def test_the_node_table_stays_in_line_with_huge_prices_and_long_capacity_types() -> None:
    """Trial 16: a plugin's price of 50,000,000 USD/hour (``50000000.0000``) and a capacity type
    longer than ``on-demand`` pushed the columns after them out of line."""
    from karpy_core.scheduling.resources import Resources
    from karpy_core.sim.report import NodeReport, SimulationReport, render_text

    nodes = [NodeReport("n-cheap", "default", "t.small", "z1", "on-demand", 0.5, {}, [], Resources(), Resources(), launched=True),
             NodeReport("n-dear", "default", "t.small", "z1", "preemptible-x", 50_000_000.0, {}, [], Resources(), Resources(),
                        launched=True)]
    report = SimulationReport(provider={"inputs": "in.yaml"}, nodes=nodes, pods=[], events=[], workloads=[])
    lines = render_text(report).splitlines()
    table = [line for line in lines if line.startswith(("NODE ", "n-"))]
    assert len(table) == 3
    assert len({len(line) for line in table}) == 1, table  # every column right-aligned to the same end
    assert len({line.index("USD/HOUR") + len("USD/HOUR") for line in table[:1]} | {line.index(".0000") + 5 for line in table[2:]}
               | {line.index(".5000") + 5 for line in table[1:2]}) == 1, table
    assert "50,000,000.0000" in table[2] and "preemptible-x" in table[2]
