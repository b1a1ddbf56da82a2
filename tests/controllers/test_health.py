"""Node repair on the in-memory cluster: unhealthy past the toleration -> NodeClaim deleted with an
immediate termination deadline; the 20% valve blocks a pool-wide outage; unmanaged nodes are never touched."""

from __future__ import annotations

from typing import Any, cast

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import RepairPolicy
from karpy_core.controllers.node.health import NodeRepair
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock, iso
from tests.fakes import recording_provider

POLICIES: list[dict[str, Any]] = [{"conditionType": "Ready", "conditionStatus": "False", "tolerationDuration": 1800},
                                  {"conditionType": "Ready", "conditionStatus": "Unknown", "tolerationDuration": "30m"}]


def add_node(cluster: InMemoryCluster, name: str, ready: str, since: float, *, managed: bool = True) -> None:
    labels = {"karpenter.sh/nodepool": "default"} if managed else {}
    pid = f"fake:///zone-a/{name}"
    cluster.create_sync("Node", {"metadata": {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                                 "spec": {"providerID": pid},
                                 "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": iso(since)}]}})
    cluster.create_sync("NodeClaim", {"metadata": {"name": name, "labels": labels, "finalizers": ["karpenter.sh/termination"]},
                                      "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}},
                                      "status": {"providerID": pid, "nodeName": name}})


def setup():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    fake = recording_provider()
    fake.repair = cast("list[RepairPolicy]", POLICIES)  # Karpenter-style mappings, as older plugins return: the facade reads them
    return clock, cluster, NodeRepair(kube=cluster, provider=CloudProvider(fake), clock=clock)


def deleting(cluster: InMemoryCluster) -> list[str]:
    return sorted(c["metadata"]["name"] for c in cluster.objects("NodeClaim") if c["metadata"].get("deletionTimestamp"))


async def test_unhealthy_past_its_toleration_is_replaced_forcefully():
    clock, cluster, repair = setup()
    now = clock.now()
    for i in range(5):
        add_node(cluster, f"ok-{i}", "True", now - 7200)
    add_node(cluster, "sick", "Unknown", now - 1799)
    add_node(cluster, "unmanaged", "False", now - 7200, managed=False)
    assert await repair.reconcile() == [] and deleting(cluster) == []  # 1 s short of 30 min
    clock.advance(1)
    events = await repair.reconcile()
    assert [(e.kind, e.node, e.nodepool) for e in events] == [("repair", "sick", "default")]
    assert "Ready=Unknown for 1800s" in events[0].reason
    assert deleting(cluster) == ["sick"]
    claim = cluster.peek("NodeClaim", "sick")
    assert claim["metadata"]["annotations"]["karpenter.sh/nodeclaim-termination-timestamp"] == iso(clock.now())
    # termination does not wait on evictions a dead kubelet cannot honour: the pod is deleted at once
    cluster.create_sync("Pod", {"metadata": {"name": "p", "namespace": "default", "ownerReferences": [
        {"kind": "ReplicaSet", "name": "rs", "controller": True}]}, "spec": {"nodeName": "sick", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"}})
    await cluster.delete("Node", "sick")
    kinds = [e.kind for e in await NodeTermination(kube=cluster, clock=clock).reconcile()]
    assert "force-delete" in kinds and "evict" not in kinds
    assert cluster.peek("NodeClaim", "unmanaged")["metadata"].get("deletionTimestamp") is None


async def test_more_than_20_percent_unhealthy_blocks_repair_of_the_pool():
    clock, cluster, repair = setup()
    now = clock.now()
    for i in range(7):
        add_node(cluster, f"ok-{i}", "True", now - 7200)
    for i in range(3):  # 3 of 10 > ceil(20% of 10) = 2: a zone outage, not a bad node
        add_node(cluster, f"sick-{i}", "False", now - 7200)
    events = await repair.reconcile()
    assert [e.kind for e in events] == ["repair-blocked"] and "3 of 10 nodes unhealthy" in events[0].reason
    assert deleting(cluster) == []
    assert await repair.reconcile() == []  # reported once while it lasts
    await cluster.patch("Node", "sick-2", {"status": {"conditions": [{"type": "Ready", "status": "True",
                                                                      "lastTransitionTime": iso(now)}]}}, status=True)
    events = await repair.reconcile()
    assert sorted(e.node for e in events if e.kind == "repair") == ["sick-0", "sick-1"]
