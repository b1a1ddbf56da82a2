"""The optional ``karpy_controllers`` hook: providers may add background loops, or none."""

from __future__ import annotations

from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from tests.fakes import WithoutOptionalHooks


def test_plugins_without_the_optional_hook_load_and_report_no_loops():
    assert CloudProvider(WithoutOptionalHooks()).controllers() == []
    assert load_provider("simulated").controllers() == []


def test_aws_plugin_runs_nodeclass_status_and_interruption_loops_when_given_a_cluster():
    provider = load_provider("aws", {"region": "us-east-1", "cluster_name": "demo", "kube": InMemoryCluster()})
    names = [name for name, _ in provider.controllers()]
    assert names == ["aws.nodeclass", "aws.nodeclaim.tagging", "aws.capacityreservation.capacitytype"]
    provider.set_feature_gates(FeatureGates(ReservedCapacity=False))
    assert [name for name, _ in provider.controllers()] == ["aws.nodeclass", "aws.nodeclaim.tagging"]
    with_queue = load_provider("aws", {"region": "us-east-1", "cluster_name": "demo", "kube": InMemoryCluster(),
                                       "interruption_queue": "karpy-demo"})
    assert [name for name, _ in with_queue.controllers()] == ["aws.nodeclass", "aws.nodeclaim.tagging",
                                                              "aws.capacityreservation.capacitytype", "aws.interruption"]
