"""NodeOverlay end to end: karpy validate on upstream-shaped manifests, karpy simulate with the gate
on and off, the controller's status conditions on the in-memory cluster."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app, run_simulation
from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.nodeoverlay import NodeOverlayController
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.settings import load_settings
from karpy_core.state.views import NodePoolView
from karpy_core.utils.clock import VirtualClock
from tests.sim.manifests import EC2NODECLASS

DATA = Path(__file__).resolve().parents[1] / "data" / "nodeoverlay"

NODEPOOL = EC2NODECLASS + """---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: nginx, resources: {requests: {cpu: "1", memory: 1Gi}}}
"""

DISCOUNT = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: discount}
spec:
  weight: 10
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
  priceAdjustment: "-90%"
"""

HUGEPAGES = """
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: hugepages}
spec:
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
  capacity: {hugepages-2Mi: 1Gi, example.com/fpga: "2"}
---
apiVersion: v1
kind: Pod
metadata: {name: hp}
spec:
  containers:
  - name: c
    image: x
    resources:
      requests: {cpu: 500m, memory: 512Mi, hugepages-2Mi: 512Mi, example.com/fpga: "1"}
      limits: {memory: 512Mi, hugepages-2Mi: 512Mi, example.com/fpga: "1"}
"""


def simulate(tmp_path: Path, *docs: str, gates: str | None = None, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    paths = []
    for i, text in enumerate(docs):
        p = tmp_path / f"m{i}.yaml"
        p.write_text(text)
        paths.append(str(p))
    args = ["simulate", *paths, "-o", "json", *extra, *(["--feature-gates", gates] if gates else [])]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_validate_accepts_upstream_shaped_examples() -> None:
    result = CliRunner().invoke(app, ["validate", str(DATA / "upstream-examples.yaml")])
    assert result.exit_code == 0, result.output
    assert "5 NodeOverlay" in result.output


def test_validate_names_the_field_of_every_error() -> None:
    result = CliRunner().invoke(app, ["validate", str(DATA / "invalid.yaml")])
    assert result.exit_code == 2
    out = " ".join(result.output.split())
    for expected in (
        "NodeOverlay/both-prices: spec: cannot set both 'price' and 'priceAdjustment'",
        "NodeOverlay/bad-fields: spec.requirements[0].key: label domain \"karpenter.sh\" is restricted",
        "spec.requirements[1].key: label \"kubernetes.io/hostname\" is restricted",
        "spec.requirements[2].values: requirements with operator 'NotIn' must have a value defined",
        "spec.requirements[3].values: requirements operator 'Gt' must have a single positive integer value",
        "spec.priceAdjustment: must be a signed amount",
        "spec.capacity: invalid resource restricted: memory",
        "spec.weight: must be <= 10000",
        "NodeOverlay/no-requirements: spec.requirements: required field is missing",
        "NodeOverlay/no-requirements: spec.price: must be a non-negative decimal price",
    ):
        assert expected in out, (expected, out)


def test_a_discount_overlay_changes_the_chosen_instance_type_and_the_cost(tmp_path: Path) -> None:
    plain = simulate(tmp_path, NODEPOOL)
    (node,) = plain["nodes"]
    assert node["instance_type"] != "m5.large"
    discounted = simulate(tmp_path, NODEPOOL, DISCOUNT, gates="NodeOverlay=true")
    (onode,) = discounted["nodes"]
    assert onode["instance_type"] == "m5.large"
    assert onode["price_per_hour"] == pytest.approx(0.096 * 0.1)  # the report prices by the overlay
    assert discounted["summary"]["cost_per_hour"] == pytest.approx(0.0096)
    assert discounted["overlays"][onode["name"]] == [
        f"price of m5.large on-demand {onode['zone']} 0.096 -> 0.0096 USD/h by NodeOverlay discount (weight 10)"]


def test_gate_off_ignores_overlays_and_says_so(tmp_path: Path) -> None:
    plain = simulate(tmp_path, NODEPOOL)
    ignored = simulate(tmp_path, NODEPOOL, DISCOUNT)
    assert [n["instance_type"] for n in ignored["nodes"]] == [n["instance_type"] for n in plain["nodes"]]
    assert "overlays" not in ignored
    assert any("NodeOverlay feature gate is off" in w for w in ignored["warnings"])


def test_capacity_overlay_makes_an_extended_resource_pod_schedulable(tmp_path: Path) -> None:
    without = simulate(tmp_path, NODEPOOL, HUGEPAGES)
    pending = {p["name"]: p for p in without["pods"] if not p["node"]}
    assert "hp" in pending and "example.com/fpga" in pending["hp"]["reason"]
    with_gate = simulate(tmp_path, NODEPOOL, HUGEPAGES, gates="NodeOverlay=true")
    assert with_gate["summary"]["pods_pending"] == 0
    hp_node = next(p["node"] for p in with_gate["pods"] if p["name"] == "hp")
    node = next(n for n in with_gate["nodes"] if n["name"] == hp_node)
    assert node["instance_type"].startswith("m5.")
    assert any("example.com/fpga=2 by NodeOverlay hugepages" in line for line in with_gate["overlays"][hp_node])


async def test_the_launched_node_carries_the_overlay_capacity(tmp_path: Path) -> None:
    from karpy_core.sim import report as report_module

    (tmp_path / "a.yaml").write_text(NODEPOOL)
    (tmp_path / "b.yaml").write_text(HUGEPAGES)
    seen: list[dict[str, Any]] = []
    build = report_module.build_report

    async def spy(sim: Any, **kw: Any) -> Any:
        seen.extend(sim.cluster.objects("Node"))
        return await build(sim, **kw)

    report_module.build_report = spy
    try:
        await run_simulation([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")], feature_gates="NodeOverlay=true")
    finally:
        report_module.build_report = build
    m5 = [n for n in seen if n["metadata"]["labels"]["node.kubernetes.io/instance-type"].startswith("m5.")]
    assert m5 and all(n["status"]["allocatable"]["example.com/fpga"] == "2" and n["status"]["capacity"]["hugepages-2Mi"] == "1Gi"
                      for n in m5)


def test_explain_prints_the_overlay_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(NODEPOOL)
    (tmp_path / "b.yaml").write_text(DISCOUNT)
    result = CliRunner().invoke(app, ["simulate", str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"),
                                      "--feature-gates", "NodeOverlay=true", "--explain", "web"])
    assert result.exit_code == 0, result.output
    found = re.search(r"\(m5\.large, (us-east-1[a-f]), on-demand, NodePool default\)", result.output)
    assert found, result.output  # the zone: among equal prices, the one the NodeClaim's name picks
    assert f"price of m5.large on-demand {found.group(1)} 0.096 -> 0.0096 USD/h by NodeOverlay discount (weight 10)" in result.output


def _overlay(name: str, weight: int | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"requirements": spec.pop("requirements", []), **spec}
    if weight is not None:
        body["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": body}


async def test_controller_sets_validation_conditions_and_feeds_the_provider() -> None:
    import yaml

    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    for doc in yaml.safe_load_all(NODEPOOL):
        if doc["kind"] == "NodePool":
            cluster.create_sync("NodePool", doc)
    cluster.create_sync("NodeOverlay", _overlay("b-price", price="0.5"))
    cluster.create_sync("NodeOverlay", _overlay("a-price", price="0.7"))  # same weight, same offerings: conflicts
    cluster.create_sync("NodeOverlay", _overlay("heavy", weight=50, priceAdjustment="-10%",
                                                requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                               "values": ["m5.large"]}]))
    cluster.create_sync("NodeOverlay", {**_overlay("bad"), "spec": {"requirements": [], "capacity": {"pods": "10"}}})
    provider = load_provider("simulated")
    ctl = NodeOverlayController(kube=cluster, provider=provider, clock=clock)
    result = await ctl.reconcile()
    assert result.changed and sorted(result.patched) == ["a-price", "b-price", "bad", "heavy"]

    def conds(name: str) -> dict[str, tuple[str, str, str]]:
        obj = next(o for o in cluster.objects("NodeOverlay") if o["metadata"]["name"] == name)
        return {c["type"]: (c["status"], c["reason"], c["message"]) for c in obj["status"]["conditions"]}

    assert conds("heavy") == {"ValidationSucceeded": ("True", "ValidationSucceeded", ""), "Ready": ("True", "Ready", "")}
    assert conds("b-price")["ValidationSucceeded"][0] == "True"
    assert conds("a-price") == {"ValidationSucceeded": ("False", "Conflict", "conflict with another overlay"),
                                "Ready": ("False", "UnhealthyDependents", "ValidationSucceeded=False")}
    assert conds("bad")["ValidationSucceeded"] == ("False", "RuntimeValidation", "invalid capacity: pods in resource, restricted")
    # the facade now serves overlaid types: heavy on m5.large, b-price on everything else
    pool = next(v for v in cluster.views("NodePool") or ())
    assert isinstance(pool, NodePoolView)
    types = {it.name: it for it in await provider.get_instance_types(pool.model)}
    raw = {it.name: it for it in await provider.raw_instance_types(pool.model)}
    m5_raw = next(o for o in raw["m5.large"].offerings if o.capacity_type == "on-demand")
    m5 = next(o for o in types["m5.large"].offerings if (o.zone, o.capacity_type) == (m5_raw.zone, "on-demand"))
    assert m5.price == pytest.approx(m5_raw.price * 0.9)
    assert {o.price for o in types["c5.large"].offerings} == {0.5}
    # a second pass with nothing new changes nothing and writes nothing
    again = await ctl.reconcile()
    assert not again.changed and again.patched == []
    generation = provider.overlay_generation
    cluster.delete_sync("NodeOverlay", "b-price")
    third = await ctl.reconcile()
    assert third.changed and provider.overlay_generation == generation + 1
    assert conds("a-price")["ValidationSucceeded"][0] == "True"  # the conflict is gone


def test_the_controller_settings_take_the_gate() -> None:
    settings = load_settings({}, {"FEATURE_GATES": "NodeOverlay=true"}).controller_settings()
    assert settings.feature_gates == FeatureGates(NodeOverlay=True)


async def test_scenario_discount_applied_later_drives_consolidation(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(NODEPOOL)
    (tmp_path / "deal.yaml").write_text(DISCOUNT)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: overlay}\nuntil: 3h\n"
                        "featureGates: {NodeOverlay: true}\nsteps:\n- {at: 0s, apply: base.yaml}\n- {at: 1h, apply: deal.yaml}\n")
    report = await run_simulation([str(scenario)])
    (node,) = report.nodes
    assert node.instance_type == "m5.large" and node.price_per_hour == pytest.approx(0.0096)
    costs = [s["cost_per_hour"] for s in report.cost_over_time or []]
    assert max(costs) > 0.05 and costs[-1] == pytest.approx(0.0096)  # priced by the overlay once it applies
    lines = [line for lines in report.decisions.values() for line in lines]
    assert any("01:00:00Z [single-node-consolidation] disrupt: replace" in line and "replacement_price=0.0096" in line for line in lines)
    # the same scenario with the gate off keeps the first node
    scenario.write_text(scenario.read_text().replace("NodeOverlay: true", "NodeOverlay: false"))
    report = await run_simulation([str(scenario)])
    assert [n.instance_type for n in report.nodes] != ["m5.large"]


async def test_the_operator_runs_the_overlay_controller_only_with_the_gate() -> None:
    import yaml

    from karpy_core.operator import ControllerSettings, Operator

    clock = VirtualClock()
    off = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated"), clock=clock)
    assert off.overlays is None and "NodeOverlay" not in off.kube.kinds and off.provider.overlays is None
    cluster = InMemoryCluster(clock)
    for doc in yaml.safe_load_all(NODEPOOL):
        if doc["kind"] == "NodePool":
            cluster.create_sync("NodePool", doc)
    cluster.create_sync("NodeOverlay", yaml.safe_load(DISCOUNT))
    provider = load_provider("simulated")
    on = Operator(kube=cluster, provider=provider, clock=clock,
                  settings=ControllerSettings.model_validate(dict(feature_gates=FeatureGates(NodeOverlay=True))))
    assert on.overlays is not None and "NodeOverlay" in on.kube.kinds
    await on.kube.start()
    try:
        await on.overlays.reconcile()
    finally:
        await on.kube.stop()
    pool = next(v for v in cluster.views("NodePool") or ())
    assert isinstance(pool, NodePoolView)
    m5 = next(it for it in await provider.get_instance_types(pool.model) if it.name == "m5.large")
    assert {round(o.price, 4) for o in m5.offerings if o.capacity_type == "on-demand"} == {0.0096}
    status = next(o for o in cluster.objects("NodeOverlay"))["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {"Ready": "True", "ValidationSucceeded": "True"}


async def test_the_documented_overlay_scenario() -> None:
    report = await run_simulation([str(DATA.parent / "scenarios" / "overlay-discount.yaml")])
    assert sorted(n.instance_type for n in report.nodes) == ["m5.2xlarge", "m5.xlarge"]
    assert sum(n.price_per_hour or 0 for n in report.nodes) == pytest.approx((0.384 + 0.192) / 2)  # overlay prices
    costs = [s["cost_per_hour"] for s in report.cost_over_time or []]
    # the numbers docs/scenarios.md quotes: 0.497 at launch (cost-sized), 0.384 once the discount
    # replaced both by one m5.4xlarge, 0.288 after the repack of that one
    assert [c for c in costs if c in (0.612, 0.497, 0.384, 0.288)] == [0.497, 0.384, 0.288]
    assert costs[-1] == pytest.approx(0.288)
    assert all(len(lines) == 1 and "by NodeOverlay m5-discount (weight 10)" in lines[0] for lines in report.overlays.values())


def test_simulate_warns_about_overlays_not_applied(tmp_path: Path) -> None:
    conflicting = (
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: a-price}\nspec: {requirements: [], price: '0.5'}\n---\n"
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: b-price}\nspec: {requirements: [], price: '0.7'}\n"
    )
    doc = simulate(tmp_path, NODEPOOL, conflicting, gates="NodeOverlay=true")
    assert doc["warnings"] == ["NodeOverlay a-price not applied: conflict with another overlay of weight 0"]
    assert doc["summary"]["cost_per_hour"] == pytest.approx(0.7)  # b-price (later in the alphabet) applies
