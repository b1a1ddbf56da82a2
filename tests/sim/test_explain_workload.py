"""``karpy simulate --explain NAME``: pod name, then workload name, then an unambiguous pod-name prefix;
a workload's pods shown so each node appears, with a count of the rest."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app, render_explain
from karpy_core.errors import ConfigurationError
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


def _redis_cache() -> SimpleNamespace:
    return _report([
        PodReport("default", "redis-cart-h-1", "n1", None, "redis-cart"),
        PodReport("default", "redis-cart-h-2", "n1", None, "redis-cart"),
        PodReport("default", "redis-h-1", "n1", None, "redis"),
        PodReport("default", "cache-0", "n1", None, "cache"),
        PodReport("default", "cache-store-0", "n1", None, "cache-store"),
    ])


def test_exact_pod_name_then_exact_workload_name() -> None:
    report = _redis_cache()
    # exact workload "redis": not redis-cart's pods, which its name prefixes
    assert render_explain(report, "redis").splitlines() == [
        "default/redis: workload redis, 1 pod",  # a header for a one-pod workload too (trial 12)
        "default/redis-h-1: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)",
    ]
    assert render_explain(report, "redis-cart-h-2").splitlines() == [
        "default/redis-cart-h-2: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)"
    ]
    assert render_explain(report, "cache").splitlines() == [
        "default/cache: workload cache, 1 pod",
        "default/cache-0: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)",
    ]


def test_prefix_of_one_pod_is_explained_even_mid_segment() -> None:
    report = _redis_cache()
    # "redis-cart-h-" and "redis-cart-h-1"[:-1] would both be refused by a prefix that must end at a "-"
    lines = render_explain(report, "cache-st").splitlines()
    assert lines == [
        "default/cache-st: no pod or workload of that name; showing the one pod named cache-st...",
        "default/cache-store-0: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)",
    ]
    pods = [PodReport("default", "inflate-6lcxst22xp-2mabc", "n1", None, "inflate"),
            PodReport("default", "inflate-6lcxst22xp-q5mjz", "n1", None, "inflate")]
    assert render_explain(_report(pods), "inflate-6lcxst22xp-2m").splitlines()[1].startswith(
        "default/inflate-6lcxst22xp-2mabc: bound to n1")


def test_prefix_of_one_workloads_pods_is_explained_and_says_how_many() -> None:
    report = _redis_cache()
    assert render_explain(report, "redis-cart-h").splitlines() == [
        "default/redis-cart-h: no pod or workload of that name; showing workload redis-cart (all 2 pods named redis-cart-h...)",
        "default/redis-cart-h-1: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)",
        "default/redis-cart-h-2: bound to n1 (m5.large, us-east-1a, on-demand, NodePool default)",
    ]
    web = [PodReport("default", f"web-{i:02d}", "n1", None, "web") for i in range(12)]
    assert render_explain(_report(web), "web-0").splitlines()[0] == (
        "default/web-0: no pod or workload of that name; showing workload web (10 of its 12 pods named web-0...)"
    )
    header = render_explain(_report(web), "web-").splitlines()[0]
    assert header == "default/web-: no pod or workload of that name; showing workload web (all 12 pods named web-...)"


def test_ambiguous_prefix_is_one_line_naming_candidates_and_count() -> None:
    with pytest.raises(ConfigurationError) as caught:
        render_explain(_redis_cache(), "cach")
    assert str(caught.value) == ("--explain default/cach is ambiguous: 2 pods of 2 workloads in the simulation start with cach: "
                                 "cache-0 (cache), cache-store-0 (cache-store); give more of the name")
    pods = [PodReport("default", f"a-{i}", "n1", None, f"a{i % 3}") for i in range(9)]
    with pytest.raises(ConfigurationError) as caught:
        render_explain(_report(pods), "a-", "in the cluster")
    text = str(caught.value)
    assert "\n" not in text
    assert text.startswith("--explain default/a- is ambiguous: 9 pods of 3 workloads in the cluster start with a-: a-0 (a0), ")
    assert text.endswith(", +4 more; give more of the name")


def test_nothing_matching_says_no_pod() -> None:
    with pytest.raises(ConfigurationError, match=r"^no pod default/zzz in the simulation \(give a pod name"):
        render_explain(_redis_cache(), "zzz")
    with pytest.raises(ConfigurationError, match=r"^no pod kube-system/redis in the simulation"):
        render_explain(_redis_cache(), "kube-system/redis")


def test_cli_ambiguous_and_unique_prefix_of_the_default_scenario() -> None:
    runner = CliRunner()
    full = runner.invoke(app, ["simulate", "-o", "json"])
    assert full.exit_code == 0, full.output
    names = [p["name"] for p in json.loads(full.stdout)["pods"] if p["name"].startswith("inflate-")]
    one = next(n for n in names if sum(m.startswith(n[:-2]) for m in names) == 1)
    result = runner.invoke(app, ["simulate", "--explain", one[:-2]])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1].startswith(f"default/{one}: bound to ")
    # "c" starts cartservice-..., checkoutservice-..., currencyservice-...: refused on one line, exit 2
    result = runner.invoke(app, ["simulate", "--explain", "c"])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: --explain default/c is ambiguous: 3 pods of 3 workloads")
    assert len(result.stderr.strip().splitlines()) == 1


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


def test_readme_words_the_workload_explanation_as_printed() -> None:
    """The README quotes ``--explain inflate`` on the embedded default (fresh-user trial, issue 35: it
    said "a pod per node" where 3 pods on one node and 2 on the other are printed): its quoted header
    and last line are the command's, and the pods shown per node are as it says."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    text = " ".join(readme.split())
    header = "default/inflate: workload inflate, 20 pods"
    last = "+15 more not shown (11 on general-purpose-s4bcb, 4 on general-purpose-5wpcb)"
    assert f"(`{header}`)" in text and f"(`{last}`:" in text
    assert "3 pods on one node and 2 on the other" in text
    result = CliRunner().invoke(app, ["simulate", "--explain", "inflate"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert lines[0] == header and lines[-1] == last
    per_node: dict[str, int] = {}
    for line in lines[1:-1]:
        node = line.split(" bound to ")[1].split()[0]
        per_node[node] = per_node.get(node, 0) + 1
    assert sorted(per_node.values()) == [2, 3]


@pytest.mark.parametrize(("args", "message"), [
    (["--explain", ""], "error: --explain: empty name; give a pod's or a workload's name (NAMESPACE/NAME outside default)"),
    (["--explain", "  "], "error: --explain: empty name; give a pod's or a workload's name (NAMESPACE/NAME outside default)"),
    (["--explain", "default/"], "error: --explain default/: empty name after the namespace; give NAMESPACE/NAME"),
    (["--explain-node", ""], "error: --explain-node: empty name; give a node's name"),
    (["--explain", "", "--from-cluster"], "error: --explain: empty name; give a pod's or a workload's name"),
])
def test_an_empty_name_is_refused_on_one_line(args: list[str], message: str) -> None:
    """``--explain ''`` was silently ignored (the whole report printed, exit 0): an empty name is
    refused on one line, exit 2, before anything is loaded or any cluster is read."""
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith(message) and len(result.stderr.strip().splitlines()) == 1
