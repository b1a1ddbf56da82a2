"""Scenarios over simulated time: consolidation, emptiness, budgets, PDBs, do-not-disrupt,
expiration with terminationGracePeriod, drift, and no consolidation loop (simulated provider,
AWS us-east-1 catalog)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from karpy_core.cli import app, run_simulation
from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
from karpy_core.cloudprovider.launch import zone_start
from karpy_core.errors import ManifestError
from tests.cli import invoke_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "scenarios"

NODECLASS: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
    "spec": {"role": "r", "subnetSelectorTerms": [{"tags": {"a": "b"}}], "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
             "amiSelectorTerms": [{"alias": "al2023@latest"}]},
}


def nodepool(disruption=None, tspec=None, labels=None):
    spec = {
        "requirements": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["4"]},
        ],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
        **(tspec or {}),
    }
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": spec},
                     "disruption": disruption or {"consolidateAfter": "1m", "budgets": [{"nodes": "100%"}]}}}


def deployment(name="web", replicas=10, cpu="1", annotations=None, anti=False):
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": "kubernetes.io/hostname"}]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}, "annotations": annotations or {}}, "spec": spec}}}


def scenario(tmp_path, steps, until="6h"):
    doc = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "until": until, "steps": steps}
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(p)


async def run(path, until=None):
    return (await run_simulation([path], until=until)).to_dict()


def kinds(doc, kind):
    return [e for e in doc["events"] if e["kind"] == kind]


async def test_scale_down_consolidates_onto_cheaper_nodes(tmp_path):
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=10, cpu="1", anti=False)]},
        # 10 x 1 cpu start on two nodes sized by cost (c6a.2xlarge + c6a.xlarge); 3 left need
        # consolidation (scaling to 2 only empties the larger node: emptiness, no eviction)
        {"at": "2h", "scale": {"deployment": "web", "replicas": 3}},
    ])
    doc = await run(path)
    series = doc["cost_over_time"]
    peak = max(s["cost_per_hour"] for s in series if s["t"] < 7200)
    assert series[-1]["cost_per_hour"] < peak
    # before the scale-down only the repack acts: it splits the one first-fit node into cheaper ones
    assert kinds(doc, "disrupt") and all(e["t"] >= 7200 or e["details"]["method"] == "repack-consolidation"
                                         for e in kinds(doc, "disrupt"))
    assert any(e["t"] >= 7200 for e in kinds(doc, "disrupt"))
    assert doc["summary"]["pods_pending"] == 0 and doc["summary"]["pods_bound"] == 3
    # the replacement was created before the candidate was deleted
    create = kinds(doc, "replacement-create")
    delete = [e for e in doc["events"] if e["kind"] == "delete" and e["details"].get("method")]
    for made in create:
        # (the command that made it: its candidates are the event's "for"; they go after it; two
        # commands may be executed in one pass, e.g. an emptiness delete beside a replace)
        candidates = set(made["details"]["for"])
        assert candidates and made["t"] < min(e["t"] for e in delete if e.get("node") in candidates)
    # an evicted pod is replaced by a pod with a new name, as a ReplicaSet does
    evicted = {e["details"]["pod"].rsplit("/", 1)[-1] for e in kinds(doc, "evict")}
    assert evicted and evicted.isdisjoint(p["name"] for p in doc["pods"])


async def test_empty_node_goes_after_consolidate_after_and_not_before(tmp_path):
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool({"consolidateAfter": "10m"}), NODECLASS, deployment(replicas=2)]},
        {"at": "1h", "scale": {"deployment": "web", "replicas": 0}},
    ], until="3h")
    doc = await run(path)
    deletes = [e for e in doc["events"] if e["kind"] == "delete" and e["details"].get("method") == "emptiness"]
    assert deletes, [e["kind"] for e in doc["events"]]
    # pods gone at 1h -> consolidatable at 1h10m; validation delay 15 s on the 10 s poll grid
    assert 3600 + 600 <= deletes[0]["t"] <= 3600 + 600 + 40
    assert doc["summary"]["nodes"] == 0


async def test_budget_window_blocks_then_releases(tmp_path):
    disruption = {"consolidateAfter": "0s", "budgets": [{"nodes": "0", "schedule": "0 1 * * *", "duration": "2h"},
                                                         {"nodes": "100%"}]}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(disruption), NODECLASS, deployment(replicas=2)]},
        {"at": "1h30m", "scale": {"deployment": "web", "replicas": 0}},
    ], until="5h")
    doc = await run(path)
    deletes = [e for e in doc["events"] if e["kind"] == "delete" and e["details"].get("method")]
    assert deletes
    assert 3 * 3600 <= deletes[0]["t"] <= 3 * 3600 + 40  # window 01:00-03:00 UTC; released at its end


async def test_pdb_with_zero_disruptions_keeps_the_node(tmp_path):
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "web"}}}}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=10), pdb]},
        # the pods land as planned (3 on c6a.xlarge, 7 on c6a.2xlarge); 8 left keep pods on both
        # nodes (5 would empty the smaller one: emptiness needs no PDB)
        {"at": "2h", "scale": {"deployment": "web", "replicas": 8}},
    ], until="4h")
    report = await run_simulation([path])
    doc = report.to_dict()
    assert not kinds(doc, "disrupt")
    node = doc["nodes"][0]["name"]
    assert any("PodDisruptionBudget web allows 0 disruptions" in line for line in report.decisions[node])


async def test_do_not_disrupt_blocks_consolidation_but_not_expiration(tmp_path):
    tspec = {"expireAfter": "3h", "terminationGracePeriod": "30m"}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(tspec=tspec), NODECLASS,
                               deployment(replicas=10, annotations={"karpenter.sh/do-not-disrupt": "true"})]},
        # the pods land as planned (3 on c6a.xlarge, 7 on c6a.2xlarge); 8 left keep pods on both
        # nodes (5 would empty the smaller one, and an empty node carries no do-not-disrupt pod)
        {"at": "1h", "scale": {"deployment": "web", "replicas": 8}},
    ], until="5h")
    doc = await run(path)
    assert not [e for e in kinds(doc, "disrupt") if e["t"] < 3 * 3600]
    expire = kinds(doc, "expire")
    assert expire and 3 * 3600 <= expire[0]["t"] <= 3 * 3600 + 10
    forced = kinds(doc, "force-delete")
    assert forced and all(e["t"] >= expire[0]["t"] + 1800 - 30 - 1 for e in forced)
    assert kinds(doc, "drain-wait")
    assert doc["summary"]["pods_pending"] == 0  # the pods came back on a new node


async def test_drift_rolls_nodes_one_budget_at_a_time(tmp_path):
    disruption = {"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(disruption), NODECLASS, deployment(replicas=3, anti=True)]},
        {"at": "2h", "patch": {"kind": "NodePool", "name": "default",
                               "patch": {"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}}},
    ], until="6h")
    report = await run_simulation([path])
    doc = report.to_dict()
    disrupts = kinds(doc, "disrupt")
    assert len(disrupts) == 3 and all(e["details"]["method"] == "drift" for e in disrupts)
    # one at a time: each drifted node is gone (node-finalized) before the next command starts
    finals = sorted(e["t"] for e in kinds(doc, "node-finalized"))
    for i in range(1, len(disrupts)):
        assert any(disrupts[i - 1]["t"] <= f <= disrupts[i]["t"] for f in finals)
    assert len(doc["nodes"]) == 3 and all(n["labels"].get("team") == "blue" for n in doc["nodes"])


async def test_nodeclass_change_drifts_through_the_provider(tmp_path):
    """A NodeClass edit is drift the provider reports (NodeClassDrift), not a NodePool change: the
    drift controller sets Drifted on each claim and the drift method rolls them under the budget."""
    disruption = {"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(disruption), NODECLASS, deployment(replicas=2, anti=True)]},
        {"at": "1h", "patch": {"kind": "EC2NodeClass", "name": "default", "patch": {"spec": {"tags": {"patch": "2026-11"}}}}},
    ], until="4h")
    doc = await run(path)
    before = {e["nodeclaim"] for e in kinds(doc, "launch") if e["t"] < 3600}
    drifted = kinds(doc, "drifted")
    assert {e["nodeclaim"] for e in drifted} == before and len(before) == 2
    assert all(e["reason"] == "NodeClassDrift" and e["t"] >= 3600 for e in drifted)
    disrupts = kinds(doc, "disrupt")
    assert len(disrupts) == 2 and all(e["details"]["method"] == "drift" for e in disrupts)
    assert {n["name"] for n in doc["nodes"]}.isdisjoint(before) and len(doc["nodes"]) == 2
    assert doc["summary"]["pods_pending"] == 0


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
async def test_a_pod_that_can_never_schedule_does_not_freeze_disruption(tmp_path):
    """One pending pod no NodePool can run (a typo'd selector) sits next to a workload that scales
    down: consolidation and drift go on (Karpenter needs only the non-pending pods to reschedule)."""
    never = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "never"},
             "spec": {"nodeSelector": {"does-not-exist": "x"},
                      "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}]}}
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=10, cpu="1"), never]},
        {"at": "2h", "scale": {"deployment": "web", "replicas": 1}},
        {"at": "4h", "patch": {"kind": "NodePool", "name": "default",
                               "patch": {"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}}},
    ], until="8h")
    t0 = time.perf_counter()
    doc = await run(path)
    assert time.perf_counter() - t0 < 20
    assert doc["summary"]["pods_pending"] == 1 and doc["summary"]["pods_bound"] == 1
    assert [e for e in kinds(doc, "disrupt") if 7200 <= e["t"] < 4 * 3600], "no consolidation after the scale-down"
    assert [e for e in kinds(doc, "drifted") if e["t"] >= 4 * 3600], "no drift after the NodePool change"
    assert len(doc["nodes"]) == 1 and doc["nodes"][0]["labels"].get("team") == "blue"


async def test_no_consolidation_loop_over_a_steady_day(tmp_path):
    workloads = [deployment("a", 7, "500m"), deployment("b", 5, "1500m"), deployment("c", 3, "3")]
    path = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, *workloads]}], until="24h")
    doc = await run(path)
    late = [e for e in doc["events"] if e["t"] > 3600 and e["kind"] in ("nodeclaim-create", "replacement-create", "disrupt")]
    assert late == []
    assert doc["summary"]["pods_pending"] == 0


def day_of_scale_downs(tmp_path: Path, replicas: int = 100) -> str:
    """Ten Deployments of ``replicas`` pods (250m/500m/1 core), w0 scaled to a fifth at 4 h and w1
    to a tenth at 8 h, over 24 h. benchmarks/simulate_day.py times it at 1,000 pods."""
    workloads = [deployment(f"w{i}", replicas, ["250m", "500m", "1"][i % 3]) for i in range(10)]
    return scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, *workloads]},
        {"at": "4h", "scale": {"deployment": "w0", "replicas": replicas // 5}},
        {"at": "8h", "scale": {"deployment": "w1", "replicas": replicas // 10}},
    ], until="24h")


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
async def test_a_day_of_scale_downs_binds_every_remaining_pod(tmp_path):
    doc = await run(day_of_scale_downs(tmp_path, replicas=20))
    assert doc["summary"]["pods_bound"] == 166 and doc["summary"]["pods_pending"] == 0


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
def test_cli_scenario_json_explain_node_and_png(tmp_path):
    result = CliRunner().invoke(app, ["simulate", str(DATA / "scale-down.yaml"), "--until", "4h", "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["cost_over_time"][0] == {"t": 0.0, "nodes": 0, "cost_per_hour": 0.0}
    assert {"scenario", "disrupt", "drain", "evict", "delete"} <= {e["kind"] for e in doc["events"]}
    first = next(e for e in doc["events"] if e["kind"] == "disrupt")
    node, method = first["node"], first["details"]["method"]
    result = CliRunner().invoke(app, ["simulate", str(DATA / "scale-down.yaml"), "--until", "4h", "--explain-node", node])
    assert method in result.stdout
    result = CliRunner().invoke(app, ["simulate", str(DATA / "scale-down.yaml"), "--until", "4h", "--explain-node", node, "-o", "json"])
    records = json.loads(result.stdout)["decisions"]
    assert {(r["node"], r["method"], r["verdict"]) for r in records} >= {(node, method, "disrupt")}
    assert all(r["kind"] and r["t"] for r in records)
    png = tmp_path / "t.png"
    result = CliRunner().invoke(app, ["simulate", str(DATA / "scale-down.yaml"), "--until", "4h", "--timeline", str(png)])
    assert result.exit_code == 0, result.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_scenarios_fail_before_running_and_name_the_step(tmp_path):
    base = [nodepool(), NODECLASS, deployment(replicas=2)]

    def problems(steps, *args):
        result = CliRunner().invoke(app, ["simulate", scenario(tmp_path, steps), *args])
        assert result.exit_code == 2, result.output
        return result.stderr

    assert "steps[1].at: '-5m' is before the start" in problems([{"at": "0s", "apply": base}, {"at": "-5m", "apply": base}])
    assert "steps[1].scale: replicas must be a whole number >= 0, got -3" in problems(
        [{"at": "0s", "apply": base}, {"at": "1h", "scale": {"deployment": "web", "replicas": -3}}])
    assert "steps[1].apply:" in problems([{"at": "0s", "apply": base}, {"at": "5h", "apply": "missing.yaml"}])
    assert "steps[0].patch: needs kind and name" in problems([{"at": "0s", "patch": {"patch": {}}}])
    err = problems([{"at": "0s", "apply": base},
                    {"at": "1h", "patch": {"kind": "NodePool", "name": "default", "patch": {"spec": {"disruption": {"consolidateAfter": "soon"}}}}},
                    {"at": "2h", "patch": {"kind": "EC2NodeClass", "name": "default", "patch": {"spec": {"role": 5}}}}])
    assert "steps[1].patch: the patched NodePool would be invalid" in err and "consolidateAfter" in err
    assert "--until" in problems([{"at": "0s", "apply": base}], "--until", "-1h")


def test_scenario_feature_gates_are_read_and_checked(tmp_path: Path) -> None:
    from karpy_core.featuregates import FeatureGates
    from karpy_core.sim.scenario import load_scenario

    good = tmp_path / "good.yaml"
    good.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: g}\n"
                    "featureGates: {NodeRepair: false}\nsteps: []\n")
    assert load_scenario(good).feature_gates == FeatureGates(NodeRepair=False)
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: b}\nfeatureGates: [NodeRepair]\nsteps: []\n")
    with pytest.raises(ManifestError, match="featureGates must be a mapping"):
        load_scenario(bad)


async def test_anti_affinity_nodes_spread_over_zones_on_equal_prices(tmp_path):
    """Six single-pod nodes of a hostname anti-affinity Deployment: the offerings of their type
    cost the same in every zone, so the zone follows each NodeClaim's name (launch kernel
    tie-break) and the nodes do not all land in the first zone by name."""
    path = scenario(tmp_path, [{"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=6, anti=True)]}], until="10m")
    doc = await run(path)
    nodes = doc["nodes"]
    assert len(nodes) == 6 and doc["summary"]["pods_pending"] == 0
    zones = [n["labels"]["topology.kubernetes.io/zone"] for n in nodes]
    assert [n["labels"]["topology.kubernetes.io/zone"] for n in (await run(path))["nodes"]] == zones  # deterministic
    assert len(set(zones)) >= 3, zones
    # each zone is the one the claim's name picks among the type's equal-price zones
    catalog = {it.name: it for it in load_aws_catalog()}
    for n in nodes:
        it = catalog[n["labels"]["node.kubernetes.io/instance-type"]]
        od = [o for o in it.offerings if o.capacity_type == "on-demand" and o.available]
        cheapest = min(o.price for o in od)
        tied = sorted({o.zone for o in od if o.price == cheapest})
        assert n["labels"]["topology.kubernetes.io/zone"] == tied[zone_start(n["name"]) % len(tied)]


async def test_steps_due_at_one_instant_are_applied_together_and_events_stay_in_time_order(tmp_path):
    """Two steps at 0s: the second was applied after a provisioning pass had run (1 s batch
    window) and its event was recorded at 0.0 after events at 1.0 (fresh-user trial, issue 35)."""
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]},
        {"at": "0s", "scale": {"deployment": "web", "replicas": 12}},
        {"at": "30m", "scale": {"deployment": "web", "replicas": 3}},
    ], until="2h")
    doc = await run(path)
    times = [e["t"] for e in doc["events"]]
    assert times == sorted(times)
    steps = kinds(doc, "scenario")
    assert [e["t"] for e in steps[:2]] == [0.0, 0.0] and steps[2]["t"] >= 1800
    order = [e["kind"] for e in doc["events"]]
    assert order.index("nodeclaim-create") > 1  # both 0s steps come before the first provisioning pass


async def test_deleting_a_nodepool_or_a_deployment_deletes_what_it_owns(tmp_path):
    """As kube-controller-manager's garbage collector does: a deleted NodePool's NodeClaims go (and
    Karpenter drains and terminates their nodes; the pods wait, no NodePool is left), a deleted
    Deployment's pods go. The node stayed billed with no NodePool before (fresh-user trial)."""
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]},
        {"at": "1h", "delete": {"kind": "NodePool", "name": "default"}},
    ], until="2h")
    doc = await run(path)
    step = kinds(doc, "scenario")[1]
    assert step["t"] == 3600 and "dependent object" in step["reason"], step
    assert doc["summary"]["nodes"] == 0 and doc["day"]["end_cost_per_hour"] == 0.0
    assert doc["summary"]["pods_pending"] == 2
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]},
        {"at": "1h", "delete": {"kind": "Deployment", "name": "web"}},
    ], until="2h")
    doc = await run(path)
    assert doc["summary"]["pods_bound"] == 0 and doc["summary"]["pods_pending"] == 0


def test_validate_refuses_a_step_on_an_object_that_does_not_exist_then(tmp_path):
    """``validate`` passed scenarios ``simulate`` refused at a step with 404 (fresh-user trial)."""
    path = scenario(tmp_path, [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=2)]},
        {"at": "30m", "scale": {"deployment": "nope", "replicas": 1}},
        {"at": "40m", "delete": {"kind": "Deployment", "name": "web"}},
        {"at": "1h", "scale": {"deployment": "web", "replicas": 0}},
        {"at": "2h", "patch": {"kind": "NodePool", "name": "default", "patch": {"spec": {"weight": 5}}}},
    ])
    for command in ("validate", "simulate"):
        result = invoke_cli(command, path)
        assert result.exit_code == 2, result.output
        assert 'steps[1].scale: 404 NotFound: Deployment/default/nope does not exist at 30m (no earlier step applies it)' in result.output
        assert 'steps[3].scale: 404 NotFound: Deployment/default/web does not exist at 1h (steps[2] deleted it at 40m)' in result.output
        assert "steps[4]" not in result.output
