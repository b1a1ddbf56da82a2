"""Issue 36 (undone37): the hypothesis that a consolidation of a zone's last node leaves its
zone-spread pods pending while the tainted node still makes the zone a spread domain, and that
the provisioner then launches in that zone for pods kube-scheduler would place elsewhere once the
node is gone. These tests pin the two behaviours the hypothesis turns on; neither needs a change:

* consolidation counts a zone a spread domain while a NodePool can launch there (Karpenter's
  ``buildDomainGroups``), so it never plans the pods of a zone's last node onto the other zones
  when the spread sends them back: it replaces that node with one pinned to the zone;
* the simulator's kube-scheduler stand-in counts a tainted, draining node's zone as a domain
  (``nodeTaintsPolicy: Ignore``, kube-scheduler's default): the evicted pod waits; once the node
  is gone the zone is no domain for it and the pod goes to another zone.

The cluster: zones a, b and c, one 8-core node each (``a1``, ``b1``, ``c1``), one ``web`` pod on
each (maxSkew 1 on the zone, ``DoNotSchedule``); ``a1`` and ``b1`` also run a 5-core pod that
stays (``karpenter.sh/do-not-disrupt``), so ``c1`` is the one candidate."""

from __future__ import annotations

from typing import Any

from karpy_core.controllers.disruption.decisions import DecisionKind, NodeDecision
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.state.cluster import ClusterSnapshot
from tests.controllers.test_disruption import NOW, node_and_claim
from tests.scheduling.helpers import make_type, nodepool

ZONES = ("zone-a", "zone-b", "zone-c")
TYPES = {"default": [make_type("small", 2, 4, zones=ZONES), make_type("large", 8, 16, zones=ZONES)]}
SPREAD = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
           "labelSelector": {"matchLabels": {"app": "web"}}}]


def app_pod(name: str, node: str | None, app: str = "web", cpu: str = "500m") -> dict[str, Any]:
    """A ``web`` pod (zone spread) or, for another ``app``, a pod that stays on ``node``."""
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    if app == "web":
        spec["topologySpreadConstraints"] = SPREAD
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                         "annotations": {} if app == "web" else {"karpenter.sh/do-not-disrupt": "true"},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-1", "controller": True}]},
            "spec": spec, "status": {"phase": "Running"} if node else {"phase": "Pending"}}


def nodes_and_claims() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    nodes, claims = [], []
    for name, zone in (("a1", "zone-a"), ("b1", "zone-b"), ("c1", "zone-c")):
        node, claim = node_and_claim(name, "large", 8, pool=pool)
        for obj in (node, claim):
            obj["metadata"]["labels"]["topology.kubernetes.io/zone"] = zone
        nodes.append(node)
        claims.append(claim)
    return nodes, claims, pool


STAYING = [app_pod("busy-a1", "a1", "busy", "5"), app_pod("busy-b1", "b1", "busy", "5")]


def test_the_last_node_of_a_zone_is_replaced_in_its_zone_not_deleted():
    nodes, claims, pool = nodes_and_claims()
    pods = [*STAYING, app_pod("web-a", "a1"), app_pod("web-b", "b1"), app_pod("web-c", "c1")]
    log: list[NodeDecision] = []
    plan = plan_disruption(ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=[pool], pods=pods), TYPES, NOW, log=log)
    assert plan is not None and [c.name for c in plan.candidates] == ["c1"]
    assert [d.kind for d in log if d.node == "c1"] == [DecisionKind.REPLACE]
    (replacement,) = plan.replacements  # web-c must stay in zone c (a and b hold one each): a new zone-c node
    zone = replacement.requirements.get("topology.kubernetes.io/zone")
    assert zone is not None and set(zone.values) == {"zone-c"}


async def test_the_stand_in_counts_a_tainted_draining_nodes_zone_until_the_node_is_gone():
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeSchedulerSimulator
    from karpy_core.utils.clock import VirtualClock

    kube = InMemoryCluster(VirtualClock())
    nodes, _, _ = nodes_and_claims()
    nodes[2]["spec"]["taints"] = [{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}]  # c1 draining
    for node in nodes:
        kube.create_sync("Node", node)
    for pod in [*STAYING, app_pod("web-a", "a1"), app_pod("web-b", "b1"), app_pod("web-c2", None)]:  # web-c evicted
        kube.create_sync("Pod", pod)
    sched = KubeSchedulerSimulator(kube, scoring="first")

    def where() -> str | None:
        return next(p["spec"].get("nodeName") for p in kube.objects("Pod") if p["metadata"]["name"] == "web-c2")

    await sched.reconcile()
    assert where() is None  # zone c: a domain with 0 web pods, its only node tainted
    kube.delete_sync("Node", "c1")
    await sched.reconcile()
    assert where() in ("a1", "b1")  # zone c is no domain now: a and b hold one each, skew 1 allows 2
