"""``karpy simulate --explain NAME``: pod name, then workload name, then an unambiguous pod-name prefix;
a workload's pods shown so each node appears, with a count of the rest."""

from __future__ import annotations

from types import SimpleNamespace

from typer.testing import CliRunner

from karpy_core.cli import app, render_explain
from karpy_core.sim.report import PodReport


def _node(name: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, instance_type="m5.large", zone="us-east-1a", capacity_type="on-demand", nodepool="default")


def _report(pods: list[PodReport]) -> SimpleNamespace:
    nodes = sorted({p.node for p in pods if p.node})
    return SimpleNamespace(pods=pods, nodes=[_node(n) for n in nodes], explanations={})


def test_workload_name_shows_every_node_and_counts_the_rest() -> None:
    pods = [PodReport("default", f"inflate-abc-{i:02d}", "node-a", None, "inflate") for i in range(14)]
    pods += [PodReport("default", f"inflate-abc-{i:02d}", "node-b", None, "inflate") for i in range(14, 20)]
    lines = render_explain(_report(pods), "inflate").splitlines()
    assert lines[0] == "default/inflate: workload inflate, 20 pods"
    shown = lines[1:-1]
    assert len(shown) == 5
    assert any("node-a" in line for line in shown) and any("node-b" in line for line in shown)
    assert lines[-1] == "+15 more not shown (11 on node-a, 4 on node-b)"


def test_more_nodes_than_five_shows_one_pod_per_node() -> None:
    pods = [PodReport("default", f"web-x-{i}", f"node-{i % 8}", None, "web") for i in range(16)]
    pods.append(PodReport("default", "web-x-p", None, "no NodePool fits", "web"))
    text = render_explain(_report(pods), "default/web")
    assert {f"node-{i}" for i in range(8)} <= {w for w in text.replace("(", " ").split() if w.startswith("node-")}
    assert "default/web-x-p: pending" in text
    assert text.splitlines()[-1] == "+8 more not shown (" + ", ".join(f"1 on node-{i}" for i in range(8)) + ")"


def test_exact_pod_name_wins_and_prefix_needs_one_workload() -> None:
    pods = [
        PodReport("default", "redis-cart-h-1", "n1", None, "redis-cart"),
        PodReport("default", "redis-cart-h-2", "n1", None, "redis-cart"),
        PodReport("default", "redis-h-1", "n1", None, "redis"),
        PodReport("default", "cache-0", "n1", None, "cache"),
        PodReport("default", "cache-store-0", "n1", None, "cache-store"),
    ]
    report = _report(pods)
    # exact workload "redis": not redis-cart's pods, which its name prefixes
    assert render_explain(report, "redis").splitlines() == [
        "default/redis-h-1: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)"
    ]
    # exact pod name
    assert render_explain(report, "redis-cart-h-2").splitlines() == [
        "default/redis-cart-h-2: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)"
    ]
    # a prefix of one workload's pods: says which workload it picked
    assert render_explain(report, "redis-cart-h").splitlines()[0].endswith("showing workload redis-cart (2 pod(s) named redis-cart-h-...)")
    # a prefix of two workloads' pods: refused, naming both
    assert render_explain(report, "cache").splitlines() == [
        "default/cache-0: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)"
    ]
    assert render_explain(report, "cach").startswith("no pod default/cach in the simulation")
    assert render_explain(
        _report([PodReport("default", "a-b-1", "n1", None, "a-b"), PodReport("default", "a-c-1", "n1", None, "a-c")]), "a"
    ) == ("no pod or workload default/a in the simulation; pods of 2 workloads start with a-: a-b, a-c")


def test_cli_explain_inflate_of_the_default_scenario_counts_hidden_pods() -> None:
    result = CliRunner().invoke(app, ["simulate", "--explain", "inflate"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("default/inflate: workload inflate, ")
    total = int(lines[0].split(", ")[1].split()[0])
    bound = [line for line in lines if ": bound to " in line]
    assert lines[-1].startswith(f"+{total - len(bound)} more not shown (")
    hidden_nodes = {part.split(" on ")[1] for part in lines[-1].split("(", 1)[1].rstrip(")").split(", ")}
    assert hidden_nodes <= {line.split(" bound to ")[1].split()[0] for line in bound}
