"""``karpy budgets``: the 24-hour disruption-budget preview, checked against counts worked out by hand."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from karpy_core.apis.nodepool import Budget
from karpy_core.controllers.disruption.budgets import preview_budgets
from tests.cli import invoke_cli

BUSINESS = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: business}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements: []
  disruption:
    budgets:
      - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h}
      - {nodes: "10%"}
      - {nodes: "5", reasons: [Drifted]}
"""


def _node(name: str, pool: str) -> str:
    return f"""\
---
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels: {{karpenter.sh/nodepool: {pool}}}
"""


def ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    path = tmp_path / "np.yaml"
    path.write_text(BUSINESS + "".join(_node(f"n{i}", "business") for i in range(25)))
    return path


def test_preview_counts_by_hand() -> None:
    pool = [Budget(nodes="0", schedule="0 9 * * mon-fri", duration="8h"), Budget(nodes="10%")]
    # Friday 06:00 UTC, 25 nodes: 10% of 25 rounds up to 3; 09:00-17:00 the 0 budget wins
    steps = preview_budgets(pool, 25, ts("2026-12-04T06:00:00"))
    assert [(s.at, s.allowed["all"], s.active) for s in steps] == [
        (ts("2026-12-04T06:00:00"), 3, (1,)),
        (ts("2026-12-04T09:00:00"), 0, (0, 1)),
        (ts("2026-12-04T17:00:00"), 3, (1,)),
    ]
    # Saturday: no weekday window in the next 24 h, one step
    assert [s.allowed["Empty"] for s in preview_budgets(pool, 25, ts("2026-12-05T00:00:00"))] == [3]
    # started inside the window: 0 now, 3 from 17:00
    inside = preview_budgets(pool, 25, ts("2026-12-04T12:30:00"))
    assert [(s.at, s.allowed["Underutilized"]) for s in inside] == [(ts("2026-12-04T12:30:00"), 0), (ts("2026-12-04T17:00:00"), 3)]


def test_a_reason_without_an_active_budget_is_unlimited(tmp_path: Path) -> None:
    """Only Underutilized has a budget: Empty and Drifted are unlimited (Karpenter's MaxInt32),
    not the node count; ``all`` is the one limit there is."""
    pool = [Budget(nodes="2", reasons=["Underutilized"])]
    (step,) = preview_budgets(pool, 25, ts("2026-12-04T06:00:00"))
    assert step.allowed == {"Empty": None, "Drifted": None, "Underutilized": 2, "all": 2}
    path = tmp_path / "np.yaml"
    path.write_text(BUSINESS.replace("""      - {nodes: "0", schedule: "0 9 * * mon-fri", duration: 8h}
      - {nodes: "10%"}
      - {nodes: "5", reasons: [Drifted]}
""", """      - {nodes: "5", reasons: [Drifted]}
""") + "".join(_node(f"n{i}", "business") for i in range(25)))
    out = invoke_cli("budgets", str(path), "--at", "2026-12-04T06:00:00Z").stdout
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("2026-")]
    assert rows == [["2026-12-04T06:00:00Z", "unlimited", "5", "unlimited", "5", "budget[0]"]]
    doc = json.loads(invoke_cli("budgets", str(path), "--at", "2026-12-04T06:00:00Z", "-o", "json").stdout)
    assert doc["nodepools"][0]["steps"][0]["allowed"] == {"Empty": None, "Drifted": 5, "Underutilized": None, "all": 5}


def test_cli_table_counts_nodes_in_manifests(manifests: Path) -> None:
    result = invoke_cli("budgets", str(manifests), "--at", "2026-12-04T06:00:00Z")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "NodePool business: 25 node(s) (Nodes in the manifests)" in out
    rows = [line.split() for line in out.splitlines() if line.strip().startswith("2026-")]
    # FROM EMPTY DRIFTED UNDERUTILIZED ALL ACTIVE: Drifted is min(10% of 25 -> 3, 5) = 3
    assert rows == [["2026-12-04T06:00:00Z", "3", "3", "3", "3", "budget[1],budget[2]"],
                    ["2026-12-04T09:00:00Z", "0", "0", "0", "0", "budget[0],budget[1],budget[2]"],
                    ["2026-12-04T17:00:00Z", "3", "3", "3", "3", "budget[1],budget[2]"]]


def test_cli_json_with_node_count_option(manifests: Path) -> None:
    result = invoke_cli("budgets", str(manifests), "--nodes", "business=80", "-o", "json", "--at", "2026-12-04T18:00")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (pool,) = doc["nodepools"]
    assert (pool["name"], pool["nodes"], pool["nodesFrom"]) == ("business", 80, "--nodes")
    # 80 nodes: 10% -> 8, Drifted also limited to 5; Friday 18:00 to Saturday 18:00 has no window: one step
    assert [s["from"] for s in pool["steps"]] == ["2026-12-04T18:00:00Z"]
    assert pool["steps"][0]["allowed"] == {"Empty": 8, "Drifted": 5, "Underutilized": 8, "all": 5}


def test_cli_errors_name_the_option(manifests: Path) -> None:
    bad = invoke_cli("budgets", str(manifests), "--nodes", "x=y")
    assert bad.exit_code == 2 and "--nodes" in bad.stderr
    unknown = invoke_cli("budgets", str(manifests), "--nodes", "other=3")
    assert unknown.exit_code == 2 and "no NodePool named other" in unknown.stderr
    when = invoke_cli("budgets", str(manifests), "--at", "tomorrow")
    assert when.exit_code == 2 and "--at" in when.stderr


async def test_allowed_disruptions_gauge_is_the_budget_as_upstream() -> None:
    """``karpenter_nodepools_allowed_disruptions{nodepool,reason}``: the most restrictive active
    budget (Karpenter sets it before subtracting the nodes already disrupting)."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.controllers.disruption.controller import PlanningPass
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.operator import Operator
    from karpy_core.state.cluster import ClusterSnapshot
    from tests.metrics_expectations import parse
    from tests.test_metrics import node

    op = Operator(kube=InMemoryCluster(), provider=load_provider("simulated", {}))
    from tests.scheduling.helpers import nodepool

    pool = nodepool()  # a valid NodePool (one without a template is left out of every decision)
    pool["spec"]["disruption"] = {"budgets": [{"nodes": "3"}, {"nodes": "1", "reasons": ["Drifted"]}]}
    deleting = node("n2")
    deleting["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    assert op.disruption.metrics is not None
    op.disruption.metrics.observe_planning(PlanningPass(ClusterSnapshot(nodes=[node("n1"), deleting], nodepools=[pool]), {}, [], 0.1, None,
                                      ts("2026-12-04T06:00:00")))
    samples = {(labels["nodepool"], labels["reason"]): v
               for _, labels, v in parse(op.metrics.render().decode())["karpenter_nodepools_allowed_disruptions"][1]}
    assert samples == {("default", "Empty"): 3, ("default", "Underutilized"): 3, ("default", "Drifted"): 1}


def test_cli_reads_a_scenarios_nodepools(tmp_path: Path) -> None:
    (tmp_path / "np.yaml").write_text(BUSINESS)
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\n"
                        "steps:\n  - {at: 0s, apply: np.yaml}\n")
    result = invoke_cli("budgets", str(scenario), "--nodes", "30", "-o", "json", "--at", "2026-12-04T10:00Z")
    assert result.exit_code == 0, result.output
    (pool,) = json.loads(result.stdout)["nodepools"]
    assert [(s["from"], s["allowed"]["all"]) for s in pool["steps"]] == [("2026-12-04T10:00:00Z", 0), ("2026-12-04T17:00:00Z", 3)]


def test_readme_budgets_example_is_what_the_shipped_file_prints() -> None:
    # the README's `karpy budgets` block runs on docs/examples/business-hours-budgets.yaml and shows its output
    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    start = readme.index("$ karpy budgets docs/examples/business-hours-budgets.yaml")
    block = readme[start:readme.index("```", start)].splitlines()
    args = block[0].split()[3:]  # after "$ karpy budgets"
    result = invoke_cli("budgets", str(root / args[0]), *args[1:])
    assert result.exit_code == 0, result.output
    assert result.stdout.rstrip("\n").splitlines() == block[1:]
