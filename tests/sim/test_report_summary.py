"""The simulation report as a summary (issue 13 part 4): the day summary of a scenario (USD spent,
USD/hour at start and end, consolidation savings, disruptions by reason, peak pending pods) on
cases computed by hand, the per-NodePool timeline series in JSON, the timeline figure, and the
optimum / lower bound next to the total of a plain run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app, run_simulation
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.scheduling.template import template_from_nodepool, type_tables
from karpy_core.sim import optimum
from karpy_core.sim.report import day_summary, render_text, timeline_figure, write_timeline_png
from tests.scheduling.helpers import make_type
from tests.scheduling.helpers import nodepool as sched_nodepool
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool, scenario

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"


def karpenter_only_scale_down(tmp_path: Path) -> str:
    """tests/data/scenarios/scale-down.yaml with karpy's repack consolidation held off (the
    NodePool's minimum-savings annotation at 0.99), so only Karpenter's methods act and the
    numbers below follow by hand."""
    path = tmp_path / "scale-down-karpenter-only.yaml"
    path.write_text(f"""apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {{name: scale-down}}
until: 6h
steps:
  - at: 0s
    apply: {DATA / "base.yaml"}
  - at: 0s
    patch: {{kind: NodePool, name: default, patch: {{metadata: {{annotations: {{karpy.sh/consolidation-min-savings: "0.99"}}}}}}}}
  - at: 2h
    scale: {{deployment: web, replicas: 2}}
""")
    return str(path)


async def karpenter_run(path: str):
    """Simulate the scenario at ``path`` as Karpenter would plan it (first-fit claim sizes, not
    karpy's cost sizing), so the one-node plan and its consolidation follow by hand."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.sim.report import build_report
    from karpy_core.sim.scenario import load_scenario, run_scenario
    from karpy_core.sim.simulator import Simulator

    scenario = load_scenario(path)
    provider = load_provider("simulated", {})
    sim = Simulator(provider, disruption=True)
    sim.provisioner.sizing = False
    end = scenario.until or 6 * 3600.0
    await run_scenario(sim, scenario, end)
    return await build_report(sim, provider_info={"name": provider.name, "region": "us-east-1",
                                                  "pricing": getattr(provider.plugin, "pricing_note", None),
                                                  "scenario": scenario.name, "until_seconds": end})
C6A_XLARGE = 0.153
"""us-east-1 on-demand list price of c6a.xlarge, USD/hour (the catalog's; docs/scenarios.md)."""


def _pinned_pool(name: str = "default", types: tuple[str, ...] = ("c6a.xlarge",), capacity: str = "on-demand") -> dict[str, Any]:
    pool = nodepool()
    pool["metadata"]["name"] = name
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    reqs[1]["values"] = [capacity]
    reqs.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": list(types)})
    reqs.append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a"]})
    return pool


async def test_one_node_for_two_hours_costs_its_price_times_the_hours(tmp_path):
    # 2 pods of 1 cpu on one c6a.xlarge (4 vCPU), launched after the 1 s batch window, kept to 2h
    path = scenario(tmp_path, [{"at": "0s", "apply": [_pinned_pool(), NODECLASS, deployment(replicas=2, cpu="1")]}], until="2h")
    report = await run_simulation([path])
    assert [n.instance_type for n in report.nodes] == ["c6a.xlarge"]
    assert report.nodes[0].price_per_hour == pytest.approx(C6A_XLARGE)
    launched = next(s["t"] for s in report.cost_over_time if s["nodes"] == 1)
    assert launched == 1.0
    day = day_summary(report)
    assert day.seconds == 7200
    assert day.total_usd == pytest.approx(C6A_XLARGE * (7200 - 1) / 3600)
    assert (day.start_cost_per_hour, day.end_cost_per_hour, day.peak_cost_per_hour) == (C6A_XLARGE, C6A_XLARGE, C6A_XLARGE)
    assert day.consolidation_savings_usd == 0 and day.disruptions == {}
    assert day.peak_pending_pods == 2  # both pods wait for the node
    text = render_text(report)
    assert "summary of the run (2h00m simulated):" in text
    assert f"spent:          {C6A_XLARGE * 7199 / 3600:.4f} USD" in text
    assert "disruptions:    none" in text and "pending pods:   peak 2" in text
    doc = report.to_dict()
    assert doc["day"]["total_usd"] == pytest.approx(C6A_XLARGE * 7199 / 3600, abs=1e-6)  # rounded to 6 places


async def test_scale_down_summary_counts_the_consolidation_saving(tmp_path):
    # tests/data/scenarios/scale-down.yaml: 10 x 1 cpu on a c6a.4xlarge (0.612), scaled to 2 at 2h;
    # consolidation replaces it by a c6a.xlarge (0.153) at 2h01m20s, the old node gone 40 s later
    report = await karpenter_run(karpenter_only_scale_down(tmp_path))
    day = day_summary(report)
    disrupt = [e for e in report.events if e["kind"] == "disrupt"]
    assert [(e["t"], e["reason"], e["details"]["savings_per_hour"]) for e in disrupt] == [(7280.0, "Underutilized", 0.459)]
    assert day.seconds == 6 * 3600
    assert day.disruptions == {"Underutilized": {"commands": 1, "nodes": 1}}
    assert (day.start_cost_per_hour, day.end_cost_per_hour) == (0.612, 0.153)
    assert day.peak_cost_per_hour == pytest.approx(0.612 + 0.153)  # old node and replacement together
    # 0.612 from the launch (1 s) to the replacement's launch (7280 s), both for 40 s, then 0.153
    assert day.total_usd == pytest.approx((0.612 * 7279 + 0.765 * 40 + 0.153 * (21600 - 7320)) / 3600)
    # savings: the 0.459 USD/hour removed, from the old instance's termination (not the command)
    # to the end of the run
    assert [e["t"] for e in report.events if e["kind"] == "terminate"] == [7320.0]
    assert day.consolidation_savings_per_hour == pytest.approx(0.459)
    assert day.consolidation_savings_usd == pytest.approx(0.459 * (21600 - 7320) / 3600)
    assert day.consolidation_commands == 1 and day.consolidation_incomplete == 0
    assert day.peak_pending_pods == 10
    assert day.undone == {}  # the replacement held the pods: nothing launched for them
    text = render_text(report)
    assert text.splitlines()[-6:] == [
        f"  spent:          {day.total_usd:.4f} USD (USD/hour integrated over the run)",
        "  USD/hour:       0.6120 after the first steps were provisioned -> 0.1530 at end (peak 0.7650)",
        f"  consolidation:  saved {0.459 * 14280 / 3600:.4f} USD (0.4590 USD/hour removed by 1 command, each counted from "
        "its instances' termination to the end)",
        "  disruptions:    Underutilized: 1 command, 1 node",
        "  undone:         none (a node launched for the pods a consolidation moved)",
        f"  pending pods:   peak 10 at {int(day.peak_pending_t)}s",
    ]


def _event(t: float, kind: str, claim: str | None, node: str | None, reason: str = "", **details: Any) -> dict[str, Any]:
    return {"t": t, "kind": kind, "nodeclaim": claim, "node": node, "reason": reason, "details": details}


def test_a_command_saves_from_its_last_instance_gone_and_an_unfinished_one_saves_nothing():
    """Fresh-user trial 3 (issue 35, B1): a consolidation saves only once its candidates'
    instances are terminated; one whose instances the cloud never deleted saves nothing and the
    summary says so."""
    from karpy_core.sim.report import SimulationReport

    events = [
        *(_event(10.0, "register", f"c{i}", f"n{i}") for i in (1, 2, 3)),
        _event(100.0, "disrupt", None, "n1,n2", "Empty", savings_per_hour=1.0),  # two nodes, gone at 150 and 200
        _event(150.0, "terminate", "c1", None, "instance terminated"),
        _event(200.0, "terminate", "c2", None, "instance terminated"),
        _event(300.0, "disrupt", "c3", "n3", "Underutilized", savings_per_hour=0.5),  # never terminated
        _event(400.0, "register", "c4", "n4"),
        _event(500.0, "disrupt", None, "n4", "Underutilized", savings_per_hour=0.25),
        _event(900.0, "disrupt-failed", None, "n4", "replacement c5 failed to launch"),  # abandoned: no saving, not incomplete
    ]
    report = SimulationReport(provider={"until_seconds": 3800.0, "scenario": "s"}, nodes=[], pods=[], events=events,
                              cost_over_time=[{"t": 0.0, "nodes": 3, "cost_per_hour": 2.0}])
    day = day_summary(report)
    assert day.consolidation_savings_per_hour == pytest.approx(1.0)
    assert day.consolidation_savings_usd == pytest.approx(1.0 * (3800 - 200) / 3600)
    assert (day.consolidation_commands, day.consolidation_incomplete) == (1, 1)
    assert day.disruptions == {"Empty": {"commands": 1, "nodes": 2}, "Underutilized": {"commands": 2, "nodes": 2}}
    assert report.to_dict()["day"]["consolidation_incomplete"] == 1
    lines = render_text(report).splitlines()
    assert "  consolidation:  saved 1.0000 USD (1.0000 USD/hour removed by 1 command, each counted from its instances' " \
           "termination to the end)" in lines
    assert "                  1 consolidation command did not complete: the cloud did not delete their instances by the end " \
           "(nothing saved)" in lines


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
def test_timeline_json_carries_series_per_nodepool(tmp_path):
    od = _pinned_pool("od")
    spot = _pinned_pool("spot", capacity="spot")
    a = deployment("a", replicas=2, cpu="1")
    a["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "od"}
    b = deployment("b", replicas=3, cpu="500m")
    b["spec"]["template"]["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "spot"}
    path = scenario(tmp_path, [{"at": "0s", "apply": [od, spot, NODECLASS, a, b]}, {"at": "1h", "scale": {"deployment": "b", "replicas": 0}}],
                    until="3h")
    result = CliRunner().invoke(app, ["simulate", path, "-o", "json", "--timeline", str(tmp_path / "t.png")])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    series = doc["timeline"]
    settled = [s for s in series if s["t"] < 3600 and s["pending_pods"] == 0 and len(s["nodepools"]) == 2]
    assert settled, series
    s = settled[-1]
    assert set(s["nodepools"]) == {"od", "spot"}
    assert list(s["nodepools"]["od"]["cost_by_capacity_type"]) == ["on-demand"]
    assert list(s["nodepools"]["spot"]["cost_by_capacity_type"]) == ["spot"]
    assert s["nodepools"]["od"]["cpu_requested"] == pytest.approx(2.0)  # 2 x 1 cpu (no DaemonSets)
    assert s["nodepools"]["spot"]["cpu_requested"] == pytest.approx(1.5)  # 3 x 500m
    assert s["nodepools"]["od"]["memory_requested_mib"] == pytest.approx(2 * 1024)
    for pool in s["nodepools"].values():
        assert pool["cpu_allocatable"] >= pool["cpu_requested"] and pool["nodes"] >= 1
        assert pool["cost_per_hour"] == pytest.approx(sum(pool["cost_by_capacity_type"].values()))
    # the per-pool costs add up to the cluster's cost_over_time at the same moment
    at = max((c for c in doc["cost_over_time"] if c["t"] <= s["t"]), key=lambda c: c["t"])
    assert at["cost_per_hour"] == pytest.approx(sum(p["cost_per_hour"] for p in s["nodepools"].values()))
    # after b is scaled to 0 its pool's node is consolidated away (Empty)
    assert "spot" not in series[-1]["nodepools"] or series[-1]["nodepools"]["spot"]["nodes"] == 0
    assert doc["day"]["disruptions"].get("Empty", {}).get("nodes") == 1
    assert (tmp_path / "t.png").stat().st_size > 0  # -o json --timeline writes the PNG too


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
async def test_timeline_figure_has_legends_and_reason_marks(tmp_path):
    pytest.importorskip("matplotlib")
    report = await karpenter_run(karpenter_only_scale_down(tmp_path))
    fig = timeline_figure(report)
    try:
        assert len(fig.axes) == 5  # cost (+ its nodes axis), cpu, memory, pending
        legend = fig.axes[0].get_legend()
        assert legend is not None
        labels = [t.get_text() for t in legend.get_texts()]
        assert labels == ["default / on-demand", "nodes (line, right axis)", "disruption: Underutilized (1)"]
        for ax in fig.axes[1:4]:
            assert ax.get_legend() is not None
        nodes_axis = fig.axes[4]
        assert all(float(t).is_integer() for t in nodes_axis.get_yticks())
        # the node count is on its own labelled right-hand axis, coloured as its line, and stands clear of the
        # top of the cost axis (it was read as a USD value when both peaked at the same height)
        from matplotlib.colors import same_color

        from karpy_core.sim.report import NODES_COLOR

        (line,) = nodes_axis.get_lines()
        assert str(nodes_axis.yaxis.get_label_position()) == "right"
        assert nodes_axis.get_ylabel() == "nodes (line, right axis)" and fig.axes[0].get_ylabel() == "USD/hour (areas, left axis)"
        assert same_color(line.get_color(), NODES_COLOR) and same_color(nodes_axis.yaxis.label.get_color(), NODES_COLOR)
        assert same_color(nodes_axis.spines["right"].get_edgecolor(), NODES_COLOR)
        import numpy as np

        peak = float(np.max(np.asarray(line.get_ydata(), dtype=float)))
        assert nodes_axis.get_ylim()[1] >= 1.5 * peak + 1
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    out = write_timeline_png(report, str(tmp_path / "day.png"))
    data = Path(out).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


async def test_default_simulate_reports_what_it_simulated_and_the_optimum():
    report = await run_simulation([])
    assert sum(w["pods"] for w in report.workloads) == 32
    assert {"kind": "Deployment", "namespace": "default", "name": "inflate", "pods": 20} in report.workloads
    ref = report.reference
    assert ref is not None and ref.status == "optimum" and ref.pods == 32
    # 0.918 USD/h is the optimum over the general-purpose NodePool's types (issue 13; benchmarks/cost.py)
    assert ref.value == pytest.approx(0.918)
    cost = report.cost_per_hour
    assert cost >= ref.value - 1e-9
    assert ref.gap(cost) == pytest.approx(cost / ref.value - 1)
    assert ref.seconds < optimum.REFERENCE_TIME_LIMIT + 1
    text = render_text(report)
    assert text.splitlines()[3].startswith("simulated: 32 pods from 13 workloads (the embedded default")
    assert "inflate x20" in text
    line = next(x for x in text.splitlines() if x.startswith("optimum: "))
    assert line.startswith("optimum: 0.9180 USD/hour for the 32 pods on launched nodes (")
    if cost > ref.value + 1e-9:
        assert line.endswith(f"karpy's plan costs {100 * (cost / ref.value - 1):.1f}% more ({cost - ref.value:+.4f} USD/hour)")
    else:
        assert line.endswith("karpy's plan is optimal")
    doc = report.to_dict()
    assert doc["reference"]["status"] == "optimum" and doc["reference"]["gap"] == pytest.approx(cost / ref.value - 1, abs=1e-6)


async def test_without_a_solver_the_report_says_so(monkeypatch):
    monkeypatch.setattr(optimum, "highs_available", lambda: False)
    report = await run_simulation([])
    assert report.reference is not None and report.reference.status == "unavailable"
    assert "optimum: not computed: no MILP solver installed (highspy; pip install 'karpy[sim]')" in render_text(report)


def test_json_stdout_is_not_polluted_by_the_solver_banner():
    result = CliRunner().invoke(app, ["simulate", "-o", "json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["reference"]["status"] == "optimum"


def _pods(n: int, cpu: str, **spec: Any) -> list[PodInfo]:
    return [pod_info({"metadata": {"name": f"p{i}", "namespace": "default", "labels": {"app": "p"}},
                      "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec}})
            for i in range(n)]


THREE = [make_type("small", 1, 4, price=0.05), make_type("medium", 2, 8, price=0.08), make_type("large", 4, 16, price=0.20)]


def _table(types=THREE):
    template = template_from_nodepool(sched_nodepool(), types)
    return type_tables([template], [])[template.name]


def test_reference_by_hand_cover_bound_proves_the_optimum():
    pytest.importorskip("highspy")
    # 4 x 1 cpu: two mediums (0.16) beat one large (0.20) and four smalls (0.20)
    ref = optimum.reference(_table(), _pods(4, "1"), upper_bound=0.20)
    assert (ref.status, ref.plan) == ("optimum", {"medium": 2})
    assert ref.value == pytest.approx(0.16)
    assert ref.gap(0.20) == pytest.approx(0.25)
    cover = optimum.cover_bound(optimum.build_problem(_table(), _pods(4, "1")))
    assert cover is not None and cover[0] == pytest.approx(0.16)


def test_reference_models_hostname_anti_affinity():
    pytest.importorskip("highspy")
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "p"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
    ref = optimum.reference(_table(), _pods(4, "1", **anti), upper_bound=0.20)
    # one pod per node: four smalls (0.20), where two mediums (0.16) hold the pods without the rule
    assert (ref.status, ref.plan) == ("optimum", {"small": 4})
    assert ref.value == pytest.approx(0.20) and ref.note == ""


def _spread(key: str, skew: int) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "p"}}}]}


def test_reference_models_zone_spread():
    pytest.importorskip("highspy")
    types = [make_type("small", 1, 4, price=0.05), make_type("large", 4, 16, price=0.12)]  # zone-a and zone-b
    plain = optimum.reference(_table(types), _pods(4, "1"))
    assert (plain.status, plain.plan) == ("optimum", {"large": 1}) and plain.value == pytest.approx(0.12)
    # two pods per zone: two smalls in each (0.20) beat a large in each (0.24)
    ref = optimum.reference(_table(types), _pods(4, "1", **_spread("topology.kubernetes.io/zone", 1)))
    assert (ref.status, ref.plan) == ("optimum", {"small": 4}) and ref.value == pytest.approx(0.20)
    # maxSkew 4 lets all four go to one zone
    loose = optimum.reference(_table(types), _pods(4, "1", **_spread("topology.kubernetes.io/zone", 4)))
    assert loose.value == pytest.approx(0.12)


def test_reference_models_hostname_spread_as_karpenter_applies_it():
    pytest.importorskip("highspy")
    types = [make_type("small", 1, 4, price=0.05), make_type("medium", 2, 8, price=0.08), make_type("large", 4, 16, price=0.12)]
    # each new node takes at most maxSkew = 2 matching pods: two mediums (0.16), not one large (0.12)
    ref = optimum.reference(_table(types), _pods(4, "1", **_spread("kubernetes.io/hostname", 2)))
    assert (ref.status, ref.plan) == ("optimum", {"medium": 2}) and ref.value == pytest.approx(0.16)
    assert optimum.lp_bound(optimum.build_problem(_table(types), _pods(4, "1", **_spread("kubernetes.io/hostname", 2)))) \
        == pytest.approx(0.16)


def test_reference_is_a_lower_bound_when_a_constraint_is_not_modelled():
    pytest.importorskip("highspy")
    affinity = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "p"}}, "topologyKey": "topology.kubernetes.io/zone"}]}}}
    ref = optimum.reference(_table(), _pods(4, "1", **affinity), upper_bound=0.20)
    assert ref.status == "lower bound" and ref.value == pytest.approx(0.16)
    assert "required pod affinity" in ref.note and ref.plan == {}


def test_topology_model_keeps_only_groups_whose_selector_matches_the_carriers():
    # a spread selector that also matches plain pods (labels app=p, no constraint) is left out
    spread = _pods(3, "1", **_spread("kubernetes.io/hostname", 1))
    plain = [pod_info({"metadata": {"name": f"q{i}", "namespace": "default", "labels": {"app": "p"}},
                       "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}}) for i in range(2)]
    model = optimum.build_problem(_table(), spread + plain).topology
    assert model.node_caps == () and model.relaxed == ("topology spread on kubernetes.io/hostname over pods without that constraint",)
    alone = optimum.build_problem(_table(), spread).topology
    assert alone.node_caps == (((0,), 1),) and alone.relaxed == ()


def test_zone_split_is_the_optimum_by_zone():
    pytest.importorskip("highspy")
    types = [make_type("small", 1, 4, price=0.05), make_type("large", 4, 16, price=0.12)]  # zone-a and zone-b
    # 5 pods over 2 zones: 3 in one (a large, 0.12, beats three smalls, 0.15), 2 in the other (two smalls, 0.10)
    problem = optimum.build_problem(_table(types), _pods(5, "1", **_spread("topology.kubernetes.io/zone", 1)))
    split = optimum.zone_split(problem)
    assert split is not None and split.optimal
    assert split.value == pytest.approx(0.22) and split.plan == {"large": 1, "small": 2}
    # the bin MILP with the zone rows agrees
    m = optimum.solve_milp(problem, optimum.upper_bound_alone(problem), time_limit=10)
    assert m is not None and m.optimal and m.value == pytest.approx(0.22)
    # anything but zone spread alone is not its case
    assert optimum.zone_split(optimum.build_problem(_table(types), _pods(4, "1"))) is None
    assert optimum.zone_split(optimum.build_problem(_table(types), _pods(4, "1", **_spread("kubernetes.io/hostname", 1)))) is None


async def test_the_total_line_counts_one_node_in_the_singular(tmp_path: Path):
    import yaml

    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump_all([nodepool(), NODECLASS, deployment(replicas=1)]))
    text = render_text(await run_simulation([str(path)]))
    assert next(x for x in text.splitlines() if x.startswith("total: ")).startswith("total: 1 node (1 launched by karpy), ")


def test_lower_bound_line_says_how_much_karpy_may_overpay_not_a_percentage_within():
    from types import SimpleNamespace

    from karpy_core.sim.report import _reference_line

    bound = optimum.Reference("lower bound", 0.40, pods=10, note="not modelled: topology spread")
    line = _reference_line(SimpleNamespace(reference=bound, cost_per_hour=1.2072))  # type: ignore[arg-type]
    # was "within 201.8% of the cheapest possible": read as "less than"; now the distance and the ratio
    assert line is not None and line.endswith(
        ": karpy's plan costs at most 0.8072 USD/hour more than the cheapest possible (3.02x the lower bound)")
    assert "within" not in line
    exact = optimum.Reference("optimum", 0.40, {"m": 2}, pods=10)
    exact_line = _reference_line(SimpleNamespace(reference=exact, cost_per_hour=0.5))  # type: ignore[arg-type]
    assert exact_line is not None and exact_line.endswith("karpy's plan costs 25.0% more (+0.1000 USD/hour)")


def test_reference_names_unavailable_offerings_when_a_quota_is_the_limit():
    """A provider whose instance quota is used up marks every offering unavailable (the plugin
    guide's tinycloud with max_instances): the reference says so, not that no pod fits."""
    pytest.importorskip("highspy")
    import dataclasses

    used_up = [dataclasses.replace(t, offerings=[dataclasses.replace(o, available=False) for o in t.offerings]) for t in THREE]
    ref = optimum.reference(_table(used_up), _pods(4, "1"))
    assert ref.status == "unavailable" and ref.value is None
    assert ref.note == ("no offering of the NodePools' 3 instance type(s) is available now (the cloud provider marks them "
                        "unavailable, e.g. its instance quota or capacity is used up)")
    too_big = optimum.reference(_table(), _pods(2, "64"))  # offerings available, but no type holds 64 cores
    assert too_big.note == "no pod fits any available instance type (requests, requirements or taints)"


def test_a_run_without_nodes_says_no_nodes_instead_of_an_empty_table(examples_dir: Path) -> None:
    """A workload and no NodePool: no node is launched, and the text report says ``no nodes`` where
    the NODE table would be, with no table header (fresh-user trial, issue 35); with nodes the
    header is there and the line is not."""
    runner = CliRunner()
    result = runner.invoke(app, ["simulate", str(examples_dir / "workloads/inflate.yaml")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "no nodes (none given, none launched)" in lines
    assert not any(line.startswith("NODE ") for line in lines)
    assert lines[lines.index("no nodes (none given, none launched)") + 2].startswith("total: 0 nodes")
    result = runner.invoke(app, ["simulate", str(examples_dir / "nodepools/general-purpose.yaml"),
                                 str(examples_dir / "workloads/inflate.yaml")])
    assert result.exit_code == 0, result.output
    assert any(line.startswith("NODE ") for line in result.stdout.splitlines())
    assert "no nodes" not in result.stdout
