"""Trial 17 (issue 35): a DaemonSet pod whose node has no room for it, against the real
kube-controller-manager (its DaemonSet controller) and kube-scheduler: the pod is created pinned to
the node by ``matchFields metadata.name`` and stays Pending, ``Unschedulable`` for ``Insufficient
cpu``, as karpy's stand-in (:class:`~karpy_core.sim.kubelet.KubeletSimulator`) leaves it."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.kubelet import KubeletSimulator, insufficient_message, pinned_node
from karpy_core.state.cluster import condition
from karpy_core.utils.clock import VirtualClock

from .karpy_env import delete_quietly, kwok_node, unschedulable_pod

pytestmark = pytest.mark.devcluster


def node(name: str, tag: str) -> dict[str, Any]:
    return kwok_node(name, {"ds-tag": tag}, cpu="2", memory="4Gi")


def daemonset(name: str, tag: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeSelector": {"ds-tag": tag}, "tolerations": [{"operator": "Exists"}],
                         "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                         "resources": {"requests": {"cpu": "500"}}}]}}}}


async def test_a_daemonset_pod_without_room_stays_pending_as_in_the_simulator(devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    name, node_name = f"huge-{tag}", f"kwok-ds-{tag}"
    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    try:
        await kube.create("Node", node(node_name, tag))
        await kube.create("Node", node(f"{node_name}-other", "other"))  # not selected: the message counts it
        await kube.create("DaemonSet", daemonset(name, tag))
        real = await unschedulable_pod(kube, name)
        nodes = len(await kube.list("Node"))
    finally:
        await delete_quietly(kube, [("DaemonSet", name, "default"), ("Node", node_name, None), ("Node", f"{node_name}-other", None)])
        await kube.close()
    assert not real["spec"].get("nodeName") and pinned_node(real) == node_name
    message = str((condition(real, "PodScheduled") or {}).get("message"))
    assert message.startswith(insufficient_message(["cpu"], nodes)), message  # then kube-scheduler's preemption attempt

    cluster = InMemoryCluster()  # karpy's stand-in, on the same Node and DaemonSet
    cluster.create_sync("Node", {k: v for k, v in node(node_name, tag).items() if k not in ("apiVersion", "kind")})
    cluster.create_sync("DaemonSet", {k: v for k, v in daemonset(name, tag).items() if k not in ("apiVersion", "kind")})
    KubeletSimulator(cluster, VirtualClock()).reconcile()
    (mine,) = cluster.snapshot("Pod")
    assert not mine["spec"].get("nodeName") and pinned_node(mine) == node_name
    assert (mine["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            == real["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"])
    scheduled = condition(mine, "PodScheduled") or {}
    assert scheduled.get("reason") == "Unschedulable"
    assert str(scheduled.get("message")).startswith("0/1 nodes are available: 1 Insufficient cpu")
