"""Issue 35 (trial 11): the simulated provider offers no type that can hold no pod, and shapes its
catalog per EC2NodeClass (AMI family from ``amiSelectorTerms`` alias, ``kubelet.maxPods``/``podsPerCore``)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.apis.nodepool import NodePool
from karpy_core.cloudprovider.calls import instance_type_problem
from karpy_core.cloudprovider.provider import load_provider
from karpy_core.cloudprovider.simulated import SimulatedProvider, create_plugin, nodeclass_settings
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.errors import ConfigurationError
from karpy_core.kube.memory import InMemoryCluster
from tests.cli import invoke_cli
from tests.cloudprovider.test_simulated import TYPES_OD, claim
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GENERAL = str(EXAMPLES / "nodepools" / "general-purpose.yaml")
INFLATE = str(EXAMPLES / "workloads" / "inflate.yaml")


def _pool(name: str = "default") -> NodePool:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["nodeClassRef"]["name"] = name
    return NodePool.model_validate(doc)


@pytest.mark.parametrize("options", [{"reserved_enis": 2}, {"reserved_enis": 3}, {"vm_memory_overhead_percent": 0.999999}])
def test_types_that_hold_no_pod_are_not_offered(options: dict[str, Any]) -> None:
    plugin = create_plugin(options)
    assert plugin.instance_types
    assert instance_type_problem(plugin.instance_types) == ""  # the run's plugin check passes
    assert all(it.capacity["pods"] > 0 and it.capacity["memory"] > 0 for it in plugin.instance_types)
    if options.get("reserved_enis") == 2:
        names = {it.name for it in plugin.instance_types}
        assert "a1.medium" not in names and "m5.large" in names  # a1.medium has 2 ENIs, m5.large 3


def test_settings_that_leave_no_type_are_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match=r"reserved_enis=100 leaves no instance type"):
        create_plugin({"reserved_enis": 100})
    with pytest.raises(ConfigurationError, match=r"max_pods=0 leaves no instance type"):
        create_plugin({"max_pods": 0})


@pytest.mark.parametrize("args", [["--reserved-enis", "2"], ["--reserved-enis", "3"],
                                  ["--provider-option", "reserved_enis=2"],
                                  ["--vm-memory-overhead-percent", "0.999999"]])
def test_trial_commands_run(args: list[str]) -> None:
    result = invoke_cli("simulate", GENERAL, INFLATE, "--set", "CLUSTER_NAME=demo", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    if "--vm-memory-overhead-percent" not in args:  # that one leaves only a few MiB of memory on any type
        assert json.loads(result.stdout)["summary"]["pods_pending"] == 0


@pytest.mark.parametrize(("args", "words"), [(["--reserved-enis", "100"], "reserved_enis=100"),
                                             (["--provider-option", "max_pods=0"], "max_pods=0")])
def test_no_type_left_is_one_line_exit_2(args: list[str], words: str) -> None:
    result = invoke_cli("simulate", GENERAL, INFLATE, "--set", "CLUSTER_NAME=demo", *args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in result.output


def test_nodeclass_settings() -> None:
    assert nodeclass_settings({"spec": {"amiSelectorTerms": [{"alias": "windows2022@latest"}]}}) == {"ami_family": "Windows2022"}
    assert nodeclass_settings({"spec": {"amiFamily": "AL2", "amiSelectorTerms": [{"alias": "al2023@latest"}]}}) == {"ami_family": "AL2"}
    assert nodeclass_settings({"spec": {"amiSelectorTerms": [{"id": "ami-1"}], "kubelet": {"maxPods": 1, "podsPerCore": 2}}}) == {
        "max_pods": 1, "pods_per_core": 2}
    assert nodeclass_settings({"spec": {"kubelet": {"maxPods": "x"}}}) == {}


def _os(it: InstanceType) -> set[str]:
    req = it.requirements.get("kubernetes.io/os")
    assert req is not None
    return set(req.values)


async def _cluster(**spec: Any) -> InMemoryCluster:
    cluster = InMemoryCluster()
    nc = copy.deepcopy(NODECLASS)
    nc["spec"].update(spec)
    await cluster.create("EC2NodeClass", {"metadata": {"name": "default"}, "spec": nc["spec"]})
    return cluster


async def test_kubelet_max_pods_and_pods_per_core_shape_the_types() -> None:
    cluster = await _cluster(kubelet={"maxPods": 1})
    plugin = create_plugin({"kube": cluster})
    types = await plugin.karpy_get_instance_types(_pool())
    assert {it.capacity["pods"] for it in types} == {1}
    assert await plugin.karpy_get_instance_types(_pool()) is types  # stable while nothing changes
    launched = await plugin.karpy_create(claim("a", TYPES_OD, {"cpu": "1"}))
    assert launched.status.capacity["pods"] == "1"
    per_core = create_plugin({"kube": await _cluster(kubelet={"podsPerCore": 2})})
    m5 = next(it for it in await per_core.karpy_get_instance_types(_pool()) if it.name == "m5.large")
    assert m5.capacity["pods"] == 4  # 2 vCPU x 2, below the ENI limit 29
    fixed = create_plugin({"kube": cluster, "max_pods": 7})  # a provider option overrides the NodeClass
    assert {it.capacity["pods"] for it in await fixed.karpy_get_instance_types(_pool())} == {7}


async def test_windows_alias_makes_windows_types_and_availability_carries_over() -> None:
    cluster = await _cluster(amiSelectorTerms=[{"alias": "windows2022@latest"}])
    await cluster.create("EC2NodeClass", {"metadata": {"name": "linux"}, "spec": NODECLASS["spec"]})
    plugin = create_plugin({"kube": cluster})
    win = {it.name: it for it in await plugin.karpy_get_instance_types(_pool())}
    lin = {it.name: it for it in await plugin.karpy_get_instance_types(_pool("linux"))}
    assert _os(win["m5.large"]) == {"windows"}
    assert _os(lin["m5.large"]) == {"linux"}
    assert win["m5.large"].capacity["pods"] == 110 and lin["m5.large"].capacity["pods"] == 29
    plugin.mark_unavailable("m5.large", "us-east-1a", "on-demand")
    win = {it.name: it for it in await plugin.karpy_get_instance_types(_pool())}
    off = next(o for o in win["m5.large"].offerings if o.zone == "us-east-1a" and o.capacity_type == "on-demand")
    assert not off.available and _os(win["m5.large"]) == {"windows"}
    launched = await plugin.karpy_create(claim("w", [
        *TYPES_OD, {"key": "kubernetes.io/os", "operator": "In", "values": ["windows"]}]))
    assert launched.metadata.labels["kubernetes.io/os"] == "windows"


async def test_ami_family_provider_option_still_overrides() -> None:
    cluster = await _cluster()
    plugin = load_provider("simulated", {"kube": cluster, "ami_family": "Windows2022"}).plugin
    assert isinstance(plugin, SimulatedProvider)
    types = await plugin.karpy_get_instance_types(_pool())
    assert _os(next(it for it in types if it.name == "m5.large")) == {"windows"}


def test_windows_example_launches_windows_nodes(tmp_path: Path) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "win"},
           "spec": {"nodeSelector": {"kubernetes.io/os": "windows"},
                    "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1"}}}]}}
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.safe_dump(pod))
    result = invoke_cli("simulate", str(EXAMPLES / "nodepools" / "windows-2022.yaml"), str(path),
                        "--set", "CLUSTER_NAME=demo", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["summary"]["pods_pending"] == 0 and out["summary"]["nodes"] == 1


def test_max_pods_one_puts_one_pod_a_node(tmp_path: Path) -> None:
    nc = copy.deepcopy(NODECLASS)
    nc["spec"]["kubelet"] = {"maxPods": 1}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([nc, nodepool(), deployment(replicas=3, cpu="100m")]))
    result = invoke_cli("simulate", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["summary"]["pods_pending"] == 0 and out["summary"]["nodes"] == 3
