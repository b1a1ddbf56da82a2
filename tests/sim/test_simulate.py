"""End-to-end decisions through ``karpy simulate`` on real manifests (simulated provider)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app, run_simulation

DATA = Path(__file__).resolve().parents[1] / "data"


def simulate_json(*args: str) -> dict:
    result = CliRunner().invoke(app, ["simulate", *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_general_purpose_online_boutique_binds_every_pod(examples_dir):
    doc = simulate_json(
        str(examples_dir / "nodepools/general-purpose.yaml"),
        str(examples_dir / "workloads/online-boutique.yaml"),
        "--set", "CLUSTER_NAME=demo",
    )
    summary = doc["summary"]
    assert summary["pods_pending"] == 0
    assert summary["pods_bound"] == 12  # 12 Deployments of one replica each
    assert summary["nodes_launched"] >= 1 and summary["cost_per_hour"] > 0
    for node in doc["nodes"]:
        assert node["nodepool"] == "general-purpose"
        assert node["capacity_type"] == "on-demand"
        assert node["instance_type"].split(".")[0][0] in "cmr"  # instance-category In [c, m, r]
        assert int(node["instance_type"].split(".")[0][1]) > 2  # instance-generation Gt 2
        assert node["price_per_hour"] > 0
    assert round(sum(n["price_per_hour"] for n in doc["nodes"]), 6) == summary["cost_per_hour"]
    bound = {p["name"]: p["node"] for p in doc["pods"]}
    assert all(bound.values())


def test_seed_004_kcnodeclass_demo_on_simulated_provider():
    doc = simulate_json(str(DATA / "seeds/004-kcnodeclass.yaml"), str(DATA / "seeds/004-nodepool.yaml"),
                        str(DATA / "seeds/004-karpenter-demo.yaml"),
                        "--set", "SUBNET_ID=subnet-1", "--set", "WORKER_SECURITY_GROUP_ID=sg-1", "--set", "KUBERNETES_VERSION=1.34")
    assert doc["summary"]["pods_bound"] == 3 and doc["summary"]["pods_pending"] == 0
    for node in doc["nodes"]:
        assert node["labels"]["workload-type"] == "karpenter"
        assert node["labels"]["kakaoi.io/kke-nodepool"] == "karpenter-default"
    # 3 x (1 cpu, 2Gi) on the cheapest amd64 on-demand shapes
    total_pods = sum(len(n["pods"]) for n in doc["nodes"])
    assert total_pods == 3


def test_karpenters_kwok_nodepool_and_kwoknodeclass_place_every_pod():
    """Karpenter's kwok/README NodePool and KWOKNodeClass, unchanged: the class is served (not
    ignored), Ready by its CRD default, and the pool places the pods on spot amd64 nodes."""
    doc = simulate_json(str(DATA / "kwok/karpenter-kwok-nodepool.yaml"), str(DATA / "kwok/inflate.yaml"))
    assert not doc["ignored"]
    assert doc["summary"]["pods_pending"] == 0 and doc["summary"]["pods_bound"] == 10
    assert doc["nodes"]
    for node in doc["nodes"]:
        assert node["nodepool"] == "default" and node["capacity_type"] == "spot"
        assert node["labels"]["kubernetes.io/arch"] == "amd64"
        assert node["labels"]["karpenter.kwok.sh/kwoknodeclass"] == "default"
    assert sum(len(n["pods"]) for n in doc["nodes"]) == 10


def test_seed_000_cpu_limit_stops_growth(examples_dir):
    doc = simulate_json(str(DATA / "seeds/000-repaired.yaml"), str(DATA / "sim/000-inflate.yaml"), "--region", "ap-northeast-2")
    nodes = doc["nodes"]
    cpus = sum(int(n["labels"]["karpenter.k8s.aws/instance-cpu"]) for n in nodes)
    assert cpus <= 5
    assert all(n["instance_type"] in ("t2.small", "t2.medium") for n in nodes)
    assert all(n["zone"] in ("ap-northeast-2a", "ap-northeast-2b") for n in nodes)
    pending = [p for p in doc["pods"] if p["node"] is None]
    assert pending, "the limit must leave pods pending"
    for p in pending:
        assert "limits.cpu=5 would be exceeded" in p["reason"]


def test_invalid_input_exits_2_with_named_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: x}\n"
        "spec:\n  template:\n    spec:\n      requirements: [{key: a, operator: Near, values: [b]}]\n"
        "      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}\n"
    )
    result = CliRunner().invoke(app, ["simulate", str(bad)])
    assert result.exit_code == 2
    assert "NodePool/x" in result.output and "spec.template.spec.requirements[0].operator" in result.output


async def test_default_scenario_runs_and_binds_everything():
    report = await run_simulation([])
    s = report.summary()
    assert s["pods_pending"] == 0 and s["pods_bound"] == 32  # 12 boutique services + 20 inflate
    assert s["cost_per_hour"] > 0


def test_text_report_shows_costs_and_pending_reasons(examples_dir, tmp_path):
    pool = (examples_dir / "nodepools/general-purpose.yaml").read_text()
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: armpod}\n"
        "spec:\n  nodeSelector: {kubernetes.io/arch: arm64}\n  containers: [{name: c, image: x, resources: {requests: {cpu: '1'}}}]\n"
    )
    (tmp_path / "pool.yaml").write_text(pool)
    (tmp_path / "pod.yaml").write_text(pod)
    result = CliRunner().invoke(app, ["simulate", str(tmp_path), "--set", "CLUSTER_NAME=x"])
    assert result.exit_code == 0, result.output
    assert "pending pods:" in result.output
    assert "default/armpod: NodePool general-purpose: incompatible requirements: kubernetes.io/arch In [arm64] conflicts with kubernetes.io/arch In [amd64]" in result.output
    assert "USD/hour" in result.output


@pytest.mark.parametrize("region", ["us-east-1", "ap-northeast-2"])
def test_regions_choose_their_zones(examples_dir, region):
    doc = simulate_json(str(examples_dir / "nodepools/general-purpose.yaml"), str(examples_dir / "workloads/inflate.yaml"),
                        "--set", "CLUSTER_NAME=x", "--region", region)
    assert doc["nodes"] and all(n["zone"].startswith(region) for n in doc["nodes"])


def test_nodepool_without_its_nodeclass_launches_nothing_and_says_why():
    """As in the controller: NodeClassReady=False makes the NodePool not Ready."""
    doc = simulate_json(str(DATA / "sim/missing-nodeclass.yaml"))
    assert doc["summary"]["nodes_launched"] == 0 and doc["summary"]["pods_pending"] == 2
    reasons = {p["reason"] for p in doc["pods"]}
    assert reasons == {"NodePool orphan: not Ready (NodeClassReady=False: NodeClass not found on cluster (EC2NodeClass/nope))"}


def test_scenario_only_options_and_unknown_names_fail_clearly(tmp_path, examples_dir):
    plain = str(examples_dir / "nodepools/general-purpose.yaml")
    for args in (["--until", "2h"], ["--timeline", str(tmp_path / "t.png")], ["--explain-node", "x"]):
        result = CliRunner().invoke(app, ["simulate", plain, *args, "--set", "CLUSTER_NAME=demo"])
        assert result.exit_code == 2 and "a single Scenario file" in result.stderr, (args, result.output)
    assert not (tmp_path / "t.png").exists()
    result = CliRunner().invoke(app, ["simulate", "--explain", "default/nope"])
    assert result.exit_code == 2 and "no pod default/nope" in result.stderr and result.stdout == ""
    result = CliRunner().invoke(app, ["simulate", str(DATA / "scenarios/scale-down.yaml"), "--until", "10m",
                                      "--explain-node", "no-such-node"])
    assert result.exit_code == 2 and "no node no-such-node" in result.stderr


def test_validate_reports_every_label_checks_scenarios_and_hints(tmp_path, examples_dir):
    bad = tmp_path / "labels.yaml"
    bad.write_text("""apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: labels}
spec:
  template:
    metadata:
      labels: {good: "bad value", "bad key!": x, karpenter.sh/nodepool: "y"}
    spec:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: KCNodeClass, name: d}
""")
    result = CliRunner().invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2
    for key in ("['good']", "['bad key!']", "['karpenter.sh/nodepool']"):
        assert key in result.stderr
    bad.write_text(bad.read_text().replace('{good: "bad value", "bad key!": x, karpenter.sh/nodepool: "y"}', "{team: web}"))
    result = CliRunner().invoke(app, ["validate", str(bad)])
    assert result.exit_code == 0 and "kind KCNodeClass is not a NodeClass of group karpenter.k8s.aws" in result.stdout
    shutil.copytree(examples_dir / "nodepools", tmp_path / "tree" / "nodepools")
    result = CliRunner().invoke(app, ["validate", str(tmp_path / "tree")])
    assert "subdirectories are not read" in result.stdout and "nodepools" in result.stdout
    # examples/ itself (a fresh user's first try): no catalog sits beside the manifests any more, so it is
    # valid, and names the subfolders it did not read; the catalog in examples/catalogs/ is not an object
    result = CliRunner().invoke(app, ["validate", str(examples_dir)])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("valid") and "subdirectories are not read" in result.stdout
    assert "nodepools" in result.stdout and "workloads" in result.stdout
    result = CliRunner().invoke(app, ["validate", str(examples_dir / "catalogs")])
    assert result.exit_code == 2
    assert "kwok-instance-types.json doc 1: expected a Kubernetes object (a mapping); got a list" in result.stderr
    result = CliRunner().invoke(app, ["validate", str(DATA / "scenarios/scale-down.yaml")])
    assert result.exit_code == 0 and result.stdout.startswith("valid: Scenario scale-down: 2 steps (1 apply, 1 scale)")


def test_explain_honours_json_output():
    doc = simulate_json("--explain", "default/frontend")
    assert doc["explain"] == "default/frontend" and any("bound to" in line for line in doc["lines"])
