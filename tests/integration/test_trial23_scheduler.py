"""Trial 23 (issue 35): a DaemonSet pod whose node already runs a pod holding the same host port,
against the real kube-controller-manager (its DaemonSet controller) and kube-scheduler: the pod is
pinned to the node and stays Pending, ``Unschedulable`` for the NodePorts filter, as karpy's
stand-in (:class:`~karpy_core.sim.kubelet.KubeletSimulator`) now leaves it (both were bound,
each holding 9100/TCP)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.kubelet import KubeletSimulator, pinned_node, ports_message
from karpy_core.state.cluster import condition
from karpy_core.utils.clock import VirtualClock

from .karpy_env import delete_quietly, kwok_node, unschedulable_pod

pytestmark = pytest.mark.devcluster

PORT = [{"containerPort": 9100, "hostPort": 9100}]


def _holder(name: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
            "spec": {"nodeName": node_name, "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "ports": PORT,
                                     "resources": {"requests": {"cpu": "100m"}}}]}}


def _daemonset(name: str, tag: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"ds-tag": tag}, "tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9", "ports": PORT,
                                         "resources": {"requests": {"cpu": "100m"}}}]}}}}


async def test_a_daemonset_pod_whose_host_port_is_taken_stays_pending_as_in_the_simulator(devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    name, node_name, holder = f"agent-{tag}", f"kwok-hp-{tag}", f"holder-{tag}"
    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    try:
        await kube.create("Node", kwok_node(node_name, {"ds-tag": tag}, cpu="2", memory="4Gi"))
        await kube.create("Pod", _holder(holder, node_name))
        await kube.create("DaemonSet", _daemonset(name, tag))
        real = await unschedulable_pod(kube, name)
        nodes = len(await kube.list("Node"))
    finally:
        await delete_quietly(kube, [("DaemonSet", name, "default"), ("Pod", holder, "default"), ("Node", node_name, None)])
        await kube.close()
    assert not real["spec"].get("nodeName") and pinned_node(real) == node_name
    message = str((condition(real, "PodScheduled") or {}).get("message"))
    assert message.startswith(ports_message(nodes)), message  # then kube-scheduler's preemption attempt

    cluster = InMemoryCluster()  # karpy's stand-in, on the same Node, pod and DaemonSet
    strip = ("apiVersion", "kind")
    cluster.create_sync("Node", {k: v for k, v in kwok_node(node_name, {"ds-tag": tag}, cpu="2", memory="4Gi").items()
                                 if k not in strip})
    cluster.create_sync("Pod", {k: v for k, v in _holder(holder, node_name).items() if k not in strip})
    cluster.create_sync("DaemonSet", {k: v for k, v in _daemonset(name, tag).items() if k not in strip})
    KubeletSimulator(cluster, VirtualClock()).reconcile()
    (mine,) = [p for p in cluster.snapshot("Pod") if p["metadata"]["labels"].get("app") == name]
    assert not mine["spec"].get("nodeName") and pinned_node(mine) == node_name
    scheduled = condition(mine, "PodScheduled") or {}
    assert scheduled.get("reason") == "Unschedulable"
    assert scheduled.get("message") == ports_message(1)
