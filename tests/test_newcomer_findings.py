"""Issue 35, item 8: the smaller things a newcomer hit. Each input gets a one-line error or a
correct result."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from pathlib import Path

import pytest

from karpy_core.apis.loader import load_documents
from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.errors import ConfigurationError
from karpy_core.sim.report import REASON_COLORS, STACK_COLORS, render_text
from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]
POOL = REPO / "examples/nodepools/general-purpose.yaml"
INFLATE = REPO / "examples/workloads/inflate.yaml"
SCALE_DOWN = REPO / "tests/data/scenarios/scale-down.yaml"
DAEMONSET = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: node-exporter, namespace: monitoring}
spec:
  selector: {matchLabels: {app: ne}}
  template:
    metadata: {labels: {app: ne}}
    spec:
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 180Mi}}}]
"""


@pytest.mark.e2e  # a whole simulated scenario
def test_explain_node_with_timeline_writes_both(tmp_path: Path) -> None:
    first = invoke_cli("simulate", str(SCALE_DOWN), "--until", "3h", "-o", "json")
    node = json.loads(first.stdout)["nodes"][0]["name"]
    png = tmp_path / "t.png"
    result = invoke_cli("simulate", str(SCALE_DOWN), "--until", "3h", "--explain-node", node, "--timeline", str(png))
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"disruption decisions for {node}:")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert result.stderr.strip() == f"timeline: {png}"


def test_validate_takes_max_pods(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(INFLATE.read_text().replace("spec:\n  selector", "spec:\n  replicas: 11\n  selector", 1))
    assert invoke_cli("validate", str(big), "--max-pods", "11").exit_code == 0
    refused = invoke_cli("validate", str(big), "--max-pods", "10")
    assert refused.exit_code == 2 and "spec.replicas: 11 pods" in refused.stderr and "cap of 10" in refused.stderr
    zero = invoke_cli("validate", str(big), "--max-pods", "0")
    assert zero.exit_code == 2 and zero.stderr.strip() == "error: --max-pods must be at least 1, not 0"


def test_budgets_says_it_found_no_nodes() -> None:
    result = invoke_cli("budgets", str(POOL), "--at", "2026-12-04T06:00Z")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stdout.splitlines() if x.startswith("NodePool general-purpose:"))
    assert line.startswith("NodePool general-purpose: 0 node(s) (none found: no Node or NodeClaim labelled "
                           "karpenter.sh/nodepool=general-purpose in the files")
    assert "--nodes N" in line


def test_report_lists_daemonsets_with_their_overhead(tmp_path: Path) -> None:
    ds = tmp_path / "ds.yaml"
    ds.write_text(DAEMONSET)
    result = invoke_cli("simulate", str(POOL), str(INFLATE), str(ds), "--set", "CLUSTER_NAME=x", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["daemonsets"] == [{"namespace": "monitoring", "name": "node-exporter",
                                  "requests": {"cpu": "100m", "memory": "180Mi"}, "pods": len(doc["nodes"]), "pending": 0}]
    text = invoke_cli("simulate", str(POOL), str(INFLATE), str(ds), "--set", "CLUSTER_NAME=x").stdout
    assert "1 DaemonSet (overhead on every node they run on): node-exporter (cpu 100m, memory 180Mi) x1" in text


def test_nodeclassref_name_no_object_can_have_and_zero_expireafter_are_named(tmp_path: Path) -> None:
    """Karpenter's CRD accepts both (nodeClassRef.name: only non-empty; expireAfter:
    ^(([0-9]+(s|m|h))+|Never)$), so karpy loads them too, with a one-line warning each."""
    text = POOL.read_text().replace("name: default", "name: " + "a" * 10_000, 1).replace(
        "    spec:\n      requirements:", "    spec:\n      expireAfter: 0s\n      requirements:", 1)
    path = tmp_path / "np.yaml"
    path.write_text(text)
    loaded = load_documents([path], {"CLUSTER_NAME": "x"})
    assert loaded.nodepools[0].spec.template.spec.expire_after == "0s"
    long_name = [w for w in loaded.warnings if "nodeClassRef.name: 10,000 characters" in w]
    assert len(long_name) == 1 and "never Ready" in long_name[0]
    assert all(len(w) < 400 for w in loaded.warnings)  # the 10,000 characters are not echoed
    assert sum("spec.template.spec.expireAfter: 0s: every NodeClaim expires" in w for w in loaded.warnings) == 1


@pytest.mark.e2e  # a short scenario
def test_pending_pod_on_a_launching_claim_says_so_not_no_nodepool(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text((REPO / "tests/data/scenarios/base.yaml").read_text())
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: short}\nuntil: 30s\n"
                        "steps:\n  - {at: 0s, apply: base.yaml}\n  - {at: 29s, scale: {deployment: web, replicas: 40}}\n")
    result = invoke_cli("simulate", str(scenario), "-o", "json")
    doc = json.loads(result.stdout)
    reasons = {p["reason"] for p in doc["pods"] if not p["node"]}
    assert reasons and all(r.startswith("pending: planned on NodeClaim ") for r in reasons)
    assert not any("is a NodePool defined" in r for r in reasons)
    # the day summary's end USD/hour (every launched instance) is reconciled with the node table
    assert doc["day"]["end_cost_per_hour"] > doc["summary"]["cost_per_hour"]


def test_day_summary_reconciles_the_end_cost_with_the_table() -> None:
    from karpy_core.sim.report import NodeReport, SimulationReport

    node = NodeReport(name="n", nodepool="p", instance_type="m", zone="z", capacity_type="on-demand", price_per_hour=0.5,
                      labels={}, taints=[], allocatable={}, requested={}, launched=True)
    report = SimulationReport(provider={"name": "simulated", "scenario": "s", "until_seconds": 60.0}, nodes=[node], pods=[],
                              events=[], cost_over_time=[{"t": 0.0, "nodes": 2, "cost_per_hour": 1.0}],
                              timeline=[{"t": 0.0, "pending_pods": 0, "nodepools": {}}])
    text = render_text(report)
    assert "1.0000 after the first steps were provisioned -> 1.0000 at end" in text
    assert "the node table's total is 0.5000: 2 instance(s) running at the end, 1 of them registered as Nodes" in text


def test_timeline_stacks_never_take_a_disruption_marker_colour() -> None:
    assert not set(STACK_COLORS) & ({*REASON_COLORS.values(), "grey", "gray"})


@pytest.mark.e2e  # a whole simulated scenario
def test_timeline_x_axis_is_utc(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    import asyncio

    from karpy_core.cli import run_simulation
    from karpy_core.sim.report import timeline_figure

    report = asyncio.run(run_simulation([str(SCALE_DOWN)], until="3h"))
    assert report.start == 1767225600.0  # the virtual clock's 2026-01-01T00:00:00Z
    fig = timeline_figure(report)
    try:
        axis = fig.axes[3]
        assert axis.get_xlabel() == "simulated time (UTC)"
        fig.canvas.draw()
        labels = [t.get_text() for t in axis.get_xticklabels() if t.get_text()]
        assert "01:00" in labels and "02:00" in labels
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)


class _Incomplete:
    """A plugin with one hook: karpy names it by class, never by repr."""

    from karpy_core.cloudprovider import hookimpl

    @hookimpl
    def karpy_name(self) -> str:
        return "incomplete"


def test_plugin_errors_name_the_class_not_a_repr() -> None:
    with pytest.raises(ConfigurationError) as err:
        CloudProvider(_Incomplete())
    message = str(err.value)
    assert message.startswith("cloud provider plugin tests.test_newcomer_findings._Incomplete must implement each hook "
                              "exactly once: karpy_create (found 0), ")
    assert " at 0x" not in message and "<" not in message and "\n" not in message


def test_a_plugin_module_that_fails_to_import_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken_plugin.py").write_text("raise RuntimeError('boom at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    ep = importlib.metadata.EntryPoint("broken", "broken_plugin:create_plugin", "karpy.cloudprovider")
    monkeypatch.setattr(importlib.metadata, "entry_points", lambda group: [ep])
    with pytest.raises(ConfigurationError) as err:
        load_provider("broken")
    assert str(err.value) == "cloud provider 'broken' (broken_plugin:create_plugin) failed to load: RuntimeError: boom at import"
    sys.modules.pop("broken_plugin", None)


@pytest.mark.parametrize("command", ["", "simulate", "validate", "budgets", "controller", "install-crds", "providers"])
def test_help_has_no_rst_backticks_and_cuts_nothing(command: str) -> None:
    result = invoke_cli(*([command] if command else []), "--help")
    assert result.exit_code == 0
    assert "``" not in result.stdout and "…" not in result.stdout
    if command == "":
        for name in ("simulate", "validate", "budgets", "controller", "install-crds", "providers"):
            assert f"  {name}  " in result.stdout
        commands = result.stdout.split("Commands:", 1)[1]
        assert "..." not in commands  # every command's short help in full
    if command == "controller":  # long option names and their environment variables appear whole
        assert "--vm-memory-overhead-percent" in result.stdout and "[INTERRUPTION_QUEUE]" in result.stdout


def test_an_unmodelled_object_defined_twice_is_replaced_not_created_twice(tmp_path: Path) -> None:
    """Without the aws plugin an EC2NodeClass is such an object: examples/nodepools/ defines
    several twice, and `karpy simulate examples/nodepools/ ...` answered 409 AlreadyExists."""
    doc = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: %d}\n"
    (tmp_path / "a.yaml").write_text(doc % 1)
    (tmp_path / "b.yaml").write_text(doc % 2)
    loaded = load_documents([tmp_path / "a.yaml", tmp_path / "b.yaml"])
    widgets = [o for o in loaded.other if o.kind == "Widget"]
    assert len(widgets) == 1 and widgets[0].model_dump(by_alias=True)["spec"] == {"size": 2}
    assert [w for w in loaded.warnings if "redefines Widget/w" in w]
    result = invoke_cli("simulate", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"), "-o", "json")
    assert result.exit_code == 0, result.output


def test_an_unset_nodepool_weight_is_never_printed_as_weight_0() -> None:
    """Karpenter treats an unset ``spec.weight`` as no weight (trial 3, D): no command prints
    ``weight 0`` for the examples' NodePools, none of which sets one."""
    pod = next(p["name"] for p in json.loads(invoke_cli("simulate", str(POOL), str(INFLATE), "-o", "json").stdout)["pods"])
    outputs = {
        "explain": invoke_cli("simulate", str(POOL), str(INFLATE), "--explain", pod),
        "validate": invoke_cli("validate", str(REPO / "examples/nodepools"), str(REPO / "examples/workloads")),
        "budgets": invoke_cli("budgets", str(POOL)),
    }
    for what, result in outputs.items():
        assert result.exit_code == 0, (what, result.output)
        assert "weight 0" not in result.output, (what, result.output)
    # a pending pod's explanation names each NodePool "(no weight)": tests/test_trial_findings.py
