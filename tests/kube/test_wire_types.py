"""The port's wire TypedDicts: a typed Pod goes through ``bind`` like the dict the port returned,
and the keys they declare are the API's (checked against what the in-memory cluster stores)."""

from __future__ import annotations

from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import Node, NodeSpec, NodeStatus, ObjectMeta, Pod, PodSpec, PodStatus
from karpy_core.state.views import NodeView, PodView


async def test_a_typed_pod_is_bound_and_read_back_as_a_view() -> None:
    cluster = InMemoryCluster()
    node = Node(apiVersion="v1", kind="Node", metadata=ObjectMeta(name="n1", labels={"karpenter.sh/nodepool": "default"}),
                spec=NodeSpec(providerID="fake:///n1"),
                status=NodeStatus(allocatable={"cpu": "4"}, conditions=[{"type": "Ready", "status": "True"}]))
    cluster.create_sync("Node", dict(node))
    pod = Pod(apiVersion="v1", kind="Pod", metadata=ObjectMeta(name="web", namespace="default"),
              spec=PodSpec(containers=[{"name": "c", "image": "x"}]), status=PodStatus(phase="Pending"))
    created = await cluster.create("Pod", dict(pod))
    await cluster.bind(pod, "n1")  # the protocol takes the typed Pod as well as the stored dict
    got = PodView.of(await cluster.get("Pod", "web", "default"))
    assert got.node_name == "n1" and got.key == "default/web" and created["metadata"]["uid"]
    n = NodeView.of(await cluster.get("Node", "n1"))
    assert n.provider_id == "fake:///n1" and n.ready and n.nodepool == "default" and n.allocatable["cpu"] == 4000


def test_wire_keys_are_the_api_camel_case() -> None:
    assert {"resourceVersion", "creationTimestamp", "deletionTimestamp", "ownerReferences"} <= set(ObjectMeta.__annotations__)
    assert {"nodeName", "priority"} <= set(PodSpec.__annotations__)
    assert {"providerID", "unschedulable", "taints"} <= set(NodeSpec.__annotations__)
    assert not ObjectMeta.__total__ and not Pod.__total__  # every key optional, as on the wire
