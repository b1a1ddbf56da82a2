"""CapacityBuffer in the simulator: headroom launched as if pending, displaced by real pods, kept by
consolidation, shown in the report with its cost; ignored with the gate off."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import yaml

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.featuregates import FeatureGates
from karpy_core.sim.report import build_report, render_text
from karpy_core.sim.simulator import Simulator
from tests.cli import invoke_cli
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool

ONE_TYPE = {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}
"""m5.large (2 vCPU): one 1-cpu chunk per node, after the kubelet's reservation."""


def pod_template(cpu: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "chunk", "namespace": "default"},
            "template": {"metadata": {"labels": {"app": "headroom"}},
                         "spec": {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}}


def capacity_buffer(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": "headroom", "namespace": "default"}, "spec": spec}


def simulator(gate: bool = True) -> Simulator:
    return Simulator(load_provider("simulated", {}), feature_gates=FeatureGates(CapacityBuffer=gate), disruption=True)


def headroom(sim: Simulator) -> dict[str, Any]:
    """The CapacityBuffer these tests apply, as stored."""
    obj = sim.cluster.peek("CapacityBuffer", "headroom", "default")
    assert obj is not None
    return obj


def nodes(sim: Simulator) -> list[str]:
    return sorted(n["metadata"]["name"] for n in sim.cluster.objects("Node"))


async def test_three_replicas_of_a_one_cpu_template_launch_room_for_three_and_a_real_pod_displaces_one() -> None:
    sim = simulator()
    sim.apply([NODECLASS, nodepool(tspec=ONE_TYPE), pod_template(), capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=3)])
    await sim.run(max_seconds=300)
    first = nodes(sim)
    assert len(first) == 3 and not sim.cluster.objects("Pod")  # room only: no pod is created or bound
    status = headroom(sim)["status"]
    assert status["replicas"] == 3
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {"ReadyForProvisioning": "Resolved",
                                                                      "Provisioning": "FitsExistingCapacity"}
    placed = sim.provisioner.last.buffers["default/headroom"]
    assert sorted(placed.existing.values()) == first and not placed.new and not placed.failed
    created = [e for e in sim.events if e.kind == "nodeclaim-create"]
    assert [e.details.get("capacity_buffer_pods") for e in created] == [1, 1, 1]  # the event says why the node came

    # consolidation keeps the headroom: the three nodes hold only virtual pods, yet none is "empty"
    await sim.run(max_seconds=1800)
    assert nodes(sim) == first
    assert any("CapacityBuffer headroom" in line for line in sim.disruption.explain(first[0]))

    sim.apply([deployment(replicas=1)])  # a real 1-cpu pod takes one node's room ...
    await sim.run(max_seconds=2400)
    (web,) = sim.cluster.objects("Pod")
    assert web["spec"]["nodeName"] in first
    after = nodes(sim)
    assert len(after) == 4 and set(first) < set(after)  # ... and a fourth node is launched for the displaced chunk
    placed = sim.provisioner.last.buffers["default/headroom"]
    assert web["spec"]["nodeName"] not in placed.existing.values() and len(placed.existing) == 3

    report = await build_report(sim)
    room = report.headroom
    assert room is not None and room.buffers == {"default/headroom": 3}
    assert sorted(n.node for n in room.nodes) == sorted(set(after) - {web["spec"]["nodeName"]})
    price: dict[str, float] = {}
    for n in report.nodes:
        assert n.price_per_hour is not None
        price[n.name] = n.price_per_hour
    assert all(0 < n.fraction <= 1 for n in room.nodes)
    assert room.cost_per_hour == round(sum(price[n.node] * n.fraction for n in room.nodes), 6) > 0
    text = render_text(report)
    assert "capacity buffers: 1 buffer(s), 3 virtual pod(s), headroom costs" in text
    summary = report.summary()
    assert summary["pods_pending"] == 0 and summary["pods_bound"] == 1  # virtual pods are not pods
    assert report.to_dict()["capacity_buffers"]["cost_per_hour"] == room.cost_per_hour


async def test_percentage_of_a_deployment() -> None:
    sim = simulator()
    web = deployment(replicas=4, cpu="500m")
    sim.apply([NODECLASS, nodepool(), web,
               capacity_buffer(scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "web"}, percentage=50)])
    await sim.run(max_seconds=300)
    status = headroom(sim)["status"]
    assert status["replicas"] == 2 and "podTemplateRef" not in status  # ceil(4 * 50%)
    placed = sim.provisioner.last.buffers["default/headroom"]
    assert len(placed.existing) == 2 and not placed.new
    # the headroom is room for two more 500m pods: scaling the Deployment to 6 launches nothing new at once
    before = nodes(sim)
    sim.cluster.patch_sync("Deployment", "web", {"spec": {"replicas": 6}}, "default")
    await sim.run(max_seconds=600)
    assert all(p["spec"].get("nodeName") in before for p in sim.cluster.objects("Pod"))
    assert headroom(sim)["status"]["replicas"] == 3  # ceil(6 * 50%)


async def test_gate_off_ignores_buffers() -> None:
    sim = simulator(gate=False)
    sim.apply([NODECLASS, nodepool(tspec=ONE_TYPE), pod_template(), capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=3)])
    await sim.run(max_seconds=300)
    assert nodes(sim) == [] and "status" not in headroom(sim)
    report = await build_report(sim)
    assert report.headroom is None
    assert any("CapacityBuffer feature gate is off" in w for w in report.warnings)
    # gate on, no PodTemplate of that name: said, not silent
    on = simulator()
    on.apply([NODECLASS, nodepool(tspec=ONE_TYPE), capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=3)])
    await on.run(max_seconds=300)
    assert any("PodTemplate default/chunk, which is not among the manifests" in w for w in (await build_report(on)).warnings)


def buffer_scenario(tmp_path: Path, buffer: dict[str, Any]) -> Path:
    """A 10-minute Scenario (CapacityBuffer gate on) applying the one-type NodePool, the chunk
    PodTemplate and ``buffer``."""
    (tmp_path / "m.yaml").write_text(yaml.safe_dump_all([NODECLASS, nodepool(tspec=ONE_TYPE), pod_template(), buffer]))
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump({"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "cb"},
                                        "featureGates": {"CapacityBuffer": True}, "until": "10m",
                                        "steps": [{"at": "0s", "apply": "m.yaml"}]}))
    return scenario


def test_simulate_scenario_with_the_gate_reports_headroom(tmp_path: Path) -> None:
    scenario = buffer_scenario(tmp_path, capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=2))
    result = invoke_cli("simulate", str(scenario), "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["capacity_buffers"]["buffers"] == {"default/headroom": 2}
    assert len(doc["capacity_buffers"]["nodes"]) == 2 and doc["summary"]["nodes"] == 2
    off = invoke_cli("simulate", str(scenario), "-o", "json", "--feature-gates", "CapacityBuffer=false")
    assert off.exit_code == 0 and "capacity_buffers" not in json.loads(off.stdout)


def test_the_v1alpha1_buffer_of_karpenters_docs_is_read_as_v1beta1(tmp_path: Path) -> None:
    """``autoscaling.x-k8s.io/v1alpha1`` (the version Karpenter's docs show) loads, validates and
    provisions exactly as v1beta1; an unknown field is still named."""
    alpha = {**capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=2), "apiVersion": "autoscaling.x-k8s.io/v1alpha1"}
    result = invoke_cli("simulate", str(buffer_scenario(tmp_path, alpha)), "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["capacity_buffers"]["buffers"] == {"default/headroom": 2}
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**alpha, "spec": {**alpha["spec"], "replicaz": 2}}))
    out = invoke_cli("validate", str(bad))
    assert out.exit_code != 0 and "replicaz" in out.output


async def test_controller_wiring_with_the_gate() -> None:
    """The controller (Operator) caches CapacityBuffers and PodTemplates, writes their status,
    triggers provisioning for a ready buffer and launches its headroom; Nominate events name real
    pods only."""
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.operator import ControllerSettings, Operator
    from karpy_core.utils.clock import VirtualClock

    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    settings = ControllerSettings.model_validate(dict(feature_gates=FeatureGates(CapacityBuffer=True)))
    op = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock, settings=settings)
    assert {"CapacityBuffer", "PodTemplate"} <= set(op.kube.kinds)
    off = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock)
    assert off.buffer_status is None and "CapacityBuffer" not in off.kube.kinds
    ready = {**nodepool(tspec=ONE_TYPE), "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    for obj in (NODECLASS, ready, pod_template(), capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=2)):
        cluster.create_sync(obj["kind"], obj)
    await op.kube.start()
    try:
        assert op.buffer_status is not None
        await op.buffer_status.reconcile()
        assert op.batcher._event.is_set()  # a ready buffer triggers a provisioning pass
        assert op.buffer_status.next_due() == clock.now() + 30
        for _ in range(20):  # the informer sees the status patch
            await asyncio.sleep(0)
        assert await op.provisioner_trigger.provision_once() == 0  # no real pending pod ...
        assert len(cluster.objects("NodeClaim")) == 2  # ... but room for the two chunks
        assert not [e for e in cluster.objects("Event") if e.get("reason") == "Nominated"]
    finally:
        await op.kube.stop()


async def test_shrinking_a_buffer_lets_emptiness_remove_the_extra_room_only() -> None:
    sim = simulator()
    sim.apply([NODECLASS, nodepool(tspec=ONE_TYPE), pod_template(), capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=3)])
    await sim.run(max_seconds=300)
    nodes_before = nodes(sim)
    assert len(nodes_before) == 3
    sim.cluster.patch_sync("CapacityBuffer", "headroom", {"spec": {"replicas": 1}}, "default")
    await sim.run(max_seconds=1800)
    left = nodes(sim)
    assert len(left) == 1  # two nodes no longer hold headroom: empty, deleted; one keeps the remaining chunk
    assert headroom(sim)["status"]["replicas"] == 1
    (decided,) = [e for e in sim.events if e.kind == "disrupt-decided"]
    assert (decided.reason, decided.details["method"]) == ("Empty", "emptiness")
    assert sorted(decided.node.split(",")) == sorted(set(nodes_before) - set(left))
    assert list(sim.provisioner.last.buffers["default/headroom"].existing.values()) == left


async def test_an_empty_buffer_node_goes_once_its_headroom_fits_on_another_node() -> None:
    """Seven 1-cpu pods fill an m5.2xlarge (B); a buffer of one 1-cpu chunk then launches an
    m5.large (A) for it. Scaled to 5 pods, B has room for the chunk: A, empty but for the
    headroom, is deleted and the chunk is counted on B (before: A was kept as holding headroom,
    because the first-fit placement of the chunk took A, first by name)."""
    types = {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.2xlarge"]}]}
    sim = simulator()
    sim.apply([NODECLASS, nodepool(tspec=types), pod_template(), deployment(replicas=7)])
    await sim.run(max_seconds=600)
    (b,) = nodes(sim)
    sim.apply([capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=1)])
    await sim.run(max_seconds=600)
    (a,) = set(nodes(sim)) - {b}
    assert a < b  # the chunk's first-fit placement takes A first
    sim.cluster.patch_sync("Deployment", "web", {"spec": {"replicas": 5}}, "default")
    await sim.run(max_seconds=3600)
    assert nodes(sim) == [b]
    (decided,) = [e for e in sim.events if e.kind == "disrupt-decided"]
    assert (decided.node, decided.details["method"]) == (a, "emptiness")
    assert list(sim.provisioner.last.buffers["default/headroom"].existing.values()) == [b]


async def test_consolidation_keeps_room_for_the_headroom() -> None:
    """Six 1-cpu pods on m5.xlarge nodes (4 vCPU), scaled down to two: without a buffer one node
    is left; with a buffer of three 1-cpu chunks consolidation must leave room for five cpu."""
    xlarge = {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.xlarge"]}]}

    async def settle(gate: bool) -> Simulator:
        sim = simulator(gate)
        sim.apply([NODECLASS, nodepool(tspec=xlarge), pod_template(), deployment(replicas=6),
                   capacity_buffer(podTemplateRef={"name": "chunk"}, replicas=3)])
        await sim.run(max_seconds=600)
        sim.cluster.patch_sync("Deployment", "web", {"spec": {"replicas": 2}}, "default")
        await sim.run(max_seconds=4 * 3600)
        return sim

    off, on = await settle(False), await settle(True)
    assert len(nodes(off)) == 1
    assert len(nodes(on)) == 2
    assert [e for e in on.events if e.kind == "disrupt-decided"]  # it did consolidate (9 cpu took 3 nodes), down to 5 cpu of room
    placed = on.provisioner.last.buffers["default/headroom"]
    assert len(placed.existing) == 3 and not placed.new and not placed.failed  # the headroom still fits, on existing nodes
    assert {p["spec"]["nodeName"] for p in on.cluster.objects("Pod")} <= set(nodes(on))
