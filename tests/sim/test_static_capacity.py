"""Static NodePools (spec.replicas, the StaticCapacity gate) and spot-to-spot consolidation in
scenarios: the same controllers as `karpy controller`, on the in-memory cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from karpy_core.cli import app, run_simulation
from karpy_core.errors import ManifestError
from karpy_core.sim.scenario import load_scenario
from tests.sim.test_scenarios_time import NODECLASS, deployment, kinds, nodepool


def static_nodepool(replicas: int, *, limit: int | None = None, budget: str = "1") -> dict[str, Any]:
    pool = nodepool(disruption={"consolidateAfter": "0s", "budgets": [{"nodes": budget}]})
    pool["metadata"]["name"] = "static"
    pool["spec"]["replicas"] = replicas
    if limit is not None:
        pool["spec"]["limits"] = {"nodes": str(limit)}
    return pool


def write(tmp_path: Path, steps: list[dict[str, Any]], gates: dict[str, bool] | None = None, until: str = "4h") -> str:
    doc: dict[str, Any] = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "until": until,
                           "steps": steps}
    if gates is not None:
        doc["featureGates"] = gates
    p = tmp_path / "scenario.yaml"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(p)


ON = {"StaticCapacity": True}


def static_nodes(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in doc["nodes"] if n["labels"].get("karpenter.sh/nodepool") == "static"]


async def test_static_pool_reaches_replicas_scales_up_and_down_and_is_not_consolidated(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"at": "0s", "apply": [static_nodepool(3), NODECLASS]},
        {"at": "1h", "scale": {"nodepool": "static", "replicas": 5}},
        {"at": "2h", "scale": {"nodepool": "static", "replicas": 2}},
    ], ON)
    doc = (await run_simulation([path])).to_dict()
    creates = [e for e in kinds(doc, "nodeclaim-create") if e["details"].get("nodepool") == "static"]
    assert [e["t"] for e in creates] == [0.0] * 3 + [3600.0] * 2
    deletes = kinds(doc, "nodeclaim-delete")
    assert len(deletes) == 3 and all(e["t"] == 7200.0 for e in deletes)
    assert len(static_nodes(doc)) == 2
    # empty for hours, yet neither emptiness nor consolidation touched them
    assert not kinds(doc, "disrupt")


async def test_static_pool_respects_limits_nodes(tmp_path: Path) -> None:
    path = write(tmp_path, [{"at": "0s", "apply": [static_nodepool(5, limit=3), NODECLASS]}], ON, until="1h")
    doc = (await run_simulation([path])).to_dict()
    assert len(static_nodes(doc)) == 3
    (limit,) = kinds(doc, "static-limit")
    assert limit["reason"] == "limits.nodes (3) reached" and limit["details"]["desired"] == 5


async def test_static_drift_replaces_each_node_within_the_budget(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"at": "0s", "apply": [static_nodepool(3, budget="1"), NODECLASS]},
        {"at": "1h", "patch": {"kind": "NodePool", "name": "static",
                               "patch": {"spec": {"template": {"metadata": {"labels": {"team": "blue"}}}}}}},
    ], ON)
    doc = (await run_simulation([path])).to_dict()
    disrupts = kinds(doc, "disrupt")
    assert len(disrupts) == 3 and all(e["details"]["method"] == "static-drift" for e in disrupts)
    # budget 1: each replacement is up and its drifted node gone before the next command
    finals = sorted(e["t"] for e in kinds(doc, "node-finalized"))
    for i in range(1, len(disrupts)):
        assert any(disrupts[i - 1]["t"] <= f <= disrupts[i]["t"] for f in finals)
    nodes = static_nodes(doc)
    assert len(nodes) == 3 and all(n["labels"].get("team") == "blue" for n in nodes)
    assert not kinds(doc, "nodeclaim-delete")  # the static controller never had to scale down


async def test_gate_off_ignores_static_pools(tmp_path: Path) -> None:
    """Upstream: without the gate the static controllers do not run, and the provisioner never
    uses a static pool for pending pods."""
    path = write(tmp_path, [{"at": "0s", "apply": [static_nodepool(3), NODECLASS, deployment(replicas=1)]}], until="1h")
    doc = (await run_simulation([path])).to_dict()
    assert not static_nodes(doc) and doc["summary"]["pods_pending"] == 1


def test_scale_steps_and_patches_cannot_switch_static_and_dynamic(tmp_path: Path) -> None:
    dynamic = nodepool()
    with pytest.raises(ManifestError, match="Cannot transition NodePool between static"):
        load_scenario(write(tmp_path, [{"at": "0s", "apply": [dynamic, NODECLASS]},
                                       {"at": "1h", "scale": {"nodepool": "default", "replicas": 2}}]))
    with pytest.raises(ManifestError, match="Cannot transition NodePool between static"):
        load_scenario(write(tmp_path, [{"at": "0s", "apply": [static_nodepool(1), NODECLASS]},
                                       {"at": "1h", "patch": {"kind": "NodePool", "name": "static", "patch": {"spec": {"replicas": None}}}}]))
    with pytest.raises(ManifestError, match="'weight' is not supported on static NodePools"):
        load_scenario(write(tmp_path, [{"at": "0s", "apply": [static_nodepool(1), NODECLASS]},
                                       {"at": "1h", "patch": {"kind": "NodePool", "name": "static", "patch": {"spec": {"weight": 10}}}}]))
    with pytest.raises(ManifestError, match="replicas must be a whole number"):
        load_scenario(write(tmp_path, [{"at": "0s", "scale": {"nodepool": "static", "replicas": -1}}]))


def spot_scenario(tmp_path: Path, gate: bool, families: list[str] | None = None) -> str:
    pool = nodepool()
    reqs = pool["spec"]["template"]["spec"]["requirements"]
    reqs[1]["values"] = ["spot"]
    if families:
        reqs.append({"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": families})
    return write(tmp_path, [{"at": "0s", "apply": [pool, NODECLASS, deployment(replicas=8)]},
                            {"at": "1h", "scale": {"deployment": "web", "replicas": 1}}],
                 {"SpotToSpotConsolidation": gate}, until="3h")


def cli(*args: str) -> str:
    result = CliRunner().invoke(app, ["simulate", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.e2e  # a whole simulated scenario (hours of simulated time, seconds of real)
def test_spot_to_spot_in_a_scenario_and_the_explain_lines(tmp_path: Path) -> None:
    # gate on, the whole catalog: a cheaper spot node replaces the underutilized spot node
    doc = json.loads(cli(spot_scenario(tmp_path, True), "-o", "json"))
    # cost-sized at launch: two spot nodes, the pods bound as planned; the scale-down empties the
    # small one (deleted as empty) and the pod left on the large one moves to a cheaper spot launch
    disrupts = kinds(doc, "disrupt")
    assert sorted(e["details"]["method"] for e in disrupts) == ["emptiness", "single-node-consolidation"]
    assert all(e["details"]["savings_per_hour"] > 0 for e in disrupts)
    (node,) = doc["nodes"]
    assert node["labels"]["karpenter.sh/capacity-type"] == "spot" and node["name"] not in {e["node"] for e in disrupts}
    assert [e for e in kinds(doc, "launch") if e["t"] > 3600], "a cheaper spot replacement is launched"
    # gate off: no spot replacement, and --explain-node names the gate
    path = spot_scenario(tmp_path, False)
    doc = json.loads(cli(path, "-o", "json"))
    assert not [e for e in kinds(doc, "launch") if e["t"] > 3600]
    assert len(doc["nodes"]) == 1
    text = cli(path, "--explain-node", doc["nodes"][0]["name"])
    assert "[single-node-consolidation] keep: spot-to-spot consolidation is disabled (SpotToSpotConsolidation gate)" in text
    # gate on, one instance family: too few cheaper spot types
    path = spot_scenario(tmp_path, True, ["c6a"])
    doc = json.loads(cli(path, "-o", "json"))
    assert not [e for e in kinds(doc, "launch") if e["t"] > 3600] and len(doc["nodes"]) == 1
    text = cli(path, "--explain-node", doc["nodes"][0]["name"])
    assert "[single-node-consolidation] keep: spot-to-spot: only " in text and "cheaper spot instance types, needs 15" in text


async def test_expired_static_nodes_are_topped_up(tmp_path: Path) -> None:
    """Expiration is forceful (no budget, as upstream); the static controller replaces the node."""
    pool = static_nodepool(2)
    pool["spec"]["template"]["spec"]["expireAfter"] = "1h"
    doc = (await run_simulation([write(tmp_path, [{"at": "0s", "apply": [pool, NODECLASS]}], ON, until="150m")])).to_dict()
    assert len(kinds(doc, "expire")) == 4  # at 1h and again at 2h, each node
    creates = [e for e in kinds(doc, "nodeclaim-create") if e["reason"] == "static: replicas"]
    assert len(creates) == 6 and len(static_nodes(doc)) == 2


async def test_the_documented_static_capacity_scenario() -> None:
    data = Path(__file__).resolve().parents[1] / "data" / "scenarios" / "static-capacity.yaml"
    doc = (await run_simulation([str(data)])).to_dict()
    assert [e["t"] for e in kinds(doc, "nodeclaim-delete")] == [7200.0] * 3
    disrupts = kinds(doc, "disrupt")
    assert len(disrupts) == 2 and {e["details"]["method"] for e in disrupts} == {"static-drift"}
    assert len(static_nodes(doc)) == 2 and all(n["labels"].get("team") == "blue" for n in static_nodes(doc))
