"""Capacity reservations through ``karpy simulate`` and the simulated provider: reserved
offerings used first, a reservation never over-launched, fallback when it is full, the
``ReservedCapacity`` gate, and the labels a reserved NodeClaim carries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE
from karpy_core.cli import app
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.simulated import SimulatedProvider, create_plugin
from karpy_core.errors import ConfigurationError, InsufficientCapacityError
from karpy_core.featuregates import FeatureGates
from karpy_core.sim.simulator import Simulator
from tests.sim.manifests import EC2NODECLASS, RESERVED_NODEPOOL

RESERVATION = {"id": "cr-0a1b", "instanceType": "m5.large", "availabilityZone": "us-east-1a", "instanceCount": 2}

POOL = RESERVED_NODEPOOL + "---\n" + EC2NODECLASS


def deployment(replicas: int, cpu: str = "1500m") -> dict:
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}


def simulate(tmp_path: Path, replicas: int, *args: str, reservations: list[dict] | None = None) -> dict:
    path = tmp_path / "in.yaml"
    path.write_text(POOL + "\n---\n" + yaml.safe_dump(deployment(replicas)))
    opt = ["--provider-option", "reservations=" + json.dumps(reservations if reservations is not None else [RESERVATION])]
    result = CliRunner().invoke(app, ["simulate", str(path), "-o", "json", *opt, *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def capacity_types(doc: dict) -> list[str]:
    return sorted(n["capacity_type"] for n in doc["nodes"])


def test_two_reserved_then_one_on_demand(tmp_path):
    doc = simulate(tmp_path, 3)
    assert capacity_types(doc) == ["on-demand", "reserved", "reserved"]
    assert all(n["zone"] == "us-east-1a" for n in doc["nodes"] if n["capacity_type"] == "reserved")
    by_ct = {n["capacity_type"]: n["price_per_hour"] for n in doc["nodes"]}
    assert by_ct["reserved"] == pytest.approx(0.096 / 1e7)
    assert by_ct["on-demand"] == pytest.approx(0.096)


def test_gate_off_uses_no_reservation(tmp_path):
    doc = simulate(tmp_path, 3, "--feature-gates", "ReservedCapacity=false")
    assert capacity_types(doc) == ["on-demand"] * 3


def test_reservation_of_a_type_the_pool_cannot_use_is_ignored(tmp_path):
    other = {**RESERVATION, "instanceType": "m5.xlarge"}
    doc = simulate(tmp_path, 2, reservations=[other])
    assert capacity_types(doc) == ["on-demand", "on-demand"]


def _provider(**extra) -> SimulatedProvider:
    return create_plugin({"reservations": [RESERVATION], **extra})


def test_bad_reservation_options_are_refused():
    with pytest.raises(ConfigurationError, match=r"no instance type 'm9\.huge'"):
        create_plugin({"reservations": [{**RESERVATION, "instanceType": "m9.huge"}]})
    with pytest.raises(ConfigurationError, match="reservations"):
        create_plugin({"reservations": [{**RESERVATION, "instanceCount": -1}]})


async def _simulate(provider: CloudProvider, replicas: int, gates: FeatureGates | None = None) -> Simulator:
    sim = Simulator(provider, feature_gates=gates)
    docs = [d for d in yaml.safe_load_all(POOL) if d] + [deployment(replicas)]
    sim.apply(docs)
    await sim.run(max_seconds=600)
    return sim


async def test_nodeclaims_carry_the_reservation_labels_and_units_come_back():
    plugin = _provider()
    provider = CloudProvider(plugin)
    sim = await _simulate(provider, 3)
    claims = await sim.cluster.list("NodeClaim")
    reserved = [c for c in claims if c["metadata"]["labels"].get(LABEL_CAPACITY_TYPE) == "reserved"]
    assert len(reserved) == 2 and len(claims) == 3
    for c in reserved:
        labels = c["metadata"]["labels"]
        assert labels[LABEL_RESERVATION_ID] == "cr-0a1b"
        assert labels[LABEL_RESERVATION_TYPE] == "default"
        req = {r["key"]: r for r in c["spec"]["requirements"]}
        assert req[LABEL_RESERVATION_ID]["values"] == ["cr-0a1b"]
        assert req[LABEL_CAPACITY_TYPE]["values"] == ["reserved"]
    assert plugin.reservation_available("cr-0a1b") == 0
    # a pinned claim launched after the reservation filled up gets InsufficientCapacity
    from karpy_core.apis.nodeclaim import NodeClaim
    extra = NodeClaim.model_validate({**reserved[0], "metadata": {"name": "late", "labels": {}}, "status": {}})
    with pytest.raises(InsufficientCapacityError):
        await provider.create(extra)
    # deleting a reserved instance frees its unit
    await provider.delete(NodeClaim.model_validate(reserved[0]))
    assert plugin.reservation_available("cr-0a1b") == 1


SCENARIO = """
apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {name: reserved}
until: 2h
steps:
  - at: 0s
    apply: base.yaml
  - at: 30m
    scale: {deployment: web, replicas: 4}
  - at: 1h
    scale: {deployment: web, replicas: 1}
"""


def test_scenario_fills_the_reservation_falls_back_then_consolidates_onto_it(tmp_path):
    (tmp_path / "base.yaml").write_text(POOL + "\n---\n" + yaml.safe_dump(deployment(1)))
    (tmp_path / "s.yaml").write_text(SCENARIO)
    opt = ["--provider-option", "reservations=" + json.dumps([RESERVATION])]
    result = CliRunner().invoke(app, ["simulate", str(tmp_path / "s.yaml"), "-o", "json", *opt])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    # at the end one pod is left: consolidation keeps it on a reserved node (the cheapest)
    assert capacity_types(doc) == ["reserved"]


def test_explain_names_the_exhausted_reservation_for_a_reserved_only_pool(tmp_path):
    path = tmp_path / "in.yaml"
    pool = POOL.replace("values: [on-demand, reserved]", "values: [reserved]")
    path.write_text(pool + "\n---\n" + yaml.safe_dump(deployment(3)))
    opt = ["--provider-option", "reservations=" + json.dumps([RESERVATION])]
    first = CliRunner().invoke(app, ["simulate", str(path), "-o", "json", *opt])
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    assert capacity_types(doc) == ["reserved", "reserved"]
    (pending,) = [p["name"] for p in doc["pods"] if not p["node"]]
    result = CliRunner().invoke(app, ["simulate", str(path), "--explain", pending, *opt])
    assert result.exit_code == 0, result.output
    assert "every compatible capacity reservation is used up: cr-0a1b (0 left)" in result.output
    assert "allow karpenter.sh/capacity-type on-demand" in result.output
