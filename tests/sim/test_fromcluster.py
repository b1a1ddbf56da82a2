"""``karpy simulate --from-cluster`` on an in-memory cluster standing in for the live one: the
translation of live objects and the per-node verdicts with their blockers
(:mod:`karpy_core.sim.fromcluster`). The same scenarios run against the real kube-apiserver in
``tests/integration/test_fromcluster_e2e.py``."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.controllers.disruption.decisions import DecisionKind, DecisionStage, NodeDecision, Verdict
from karpy_core.errors import KubeAPIError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import KINDS
from karpy_core.sim.fromcluster import Blocker, LiveRead, blocker_of, dry_run, read_cluster, render_live_text, translate
from karpy_core.utils.clock import VirtualClock
from tests.livecluster import INSTANCE_TYPE, LiveCluster

NOW = 1767225600.0 + 86400  # a day after the NodeClaims were initialized


class ListOnly:
    """A KubeClient that serves ``list`` from an in-memory cluster and fails any other call."""

    def __init__(self, cluster: InMemoryCluster):
        self.cluster = cluster
        self.calls: list[str] = []

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        self.calls.append(kind)
        if kind not in KINDS:  # kube-apiserver: 404 for a resource it does not serve
            raise KubeAPIError.from_status(f"the server could not find the requested resource ({kind})", status=404,
                                           reason="NotFound")
        return await self.cluster.list(kind, namespace, label_selector)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"--from-cluster called {name} on the live cluster; only list is allowed")


def live(c: LiveCluster) -> ListOnly:
    cluster = InMemoryCluster(VirtualClock(NOW))
    for obj in c.objects():
        cluster.create_sync(obj["kind"], obj)
    return ListOnly(cluster)


def two_nodes(name: str, **kw: Any) -> tuple[LiveCluster, str, str]:
    """Two m5.xlarge nodes (4 vCPU) with a 500m pod each: either pod fits on the other node."""
    c = LiveCluster(name, **kw)
    a, b = c.add_node("a"), c.add_node("b")
    return c, a, b


async def test_translate_keeps_bindings_and_drops_deployment_owners() -> None:
    read = LiveRead({
        "Pod": [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default",
                                                                  "managedFields": [{"manager": "kubectl"}]},
                 "spec": {"nodeName": "n1", "containers": []}, "status": {"phase": "Running"}}],
        "ReplicaSet": [
            {"metadata": {"name": "web-abc", "namespace": "default",
                          "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]},
             "spec": {"replicas": 3}},
            {"metadata": {"name": "web-old", "namespace": "default"}, "spec": {"replicas": 0}},
        ],
        "Job": [{"metadata": {"name": "done", "namespace": "default"}, "spec": {},
                 "status": {"conditions": [{"type": "Complete", "status": "True"}]}},
                {"metadata": {"name": "running", "namespace": "default"}, "spec": {}, "status": {"active": 1}}],
    }, [], 0.0)
    out = translate(read)
    by = {(o["kind"], o["metadata"]["name"]): o for o in out}
    pod = by[("Pod", "p")]
    assert pod["spec"]["nodeName"] == "n1" and pod["status"] == {"phase": "Running"}
    assert "managedFields" not in pod["metadata"]
    rs = by[("ReplicaSet", "web-abc")]
    assert "ownerReferences" not in rs["metadata"] and rs["apiVersion"] == "apps/v1" and rs["kind"] == "ReplicaSet"
    assert ("ReplicaSet", "web-old") not in by  # an old revision keeps no pods
    assert ("Job", "done") not in by and ("Job", "running") in by
    assert [o["kind"] for o in out] == ["ReplicaSet", "Job", "Pod"]  # seeding order: pods last
    assert read.objects["ReplicaSet"][0]["metadata"]["ownerReferences"]  # the input is not modified


async def test_read_cluster_lists_only_and_names_missing_kinds() -> None:
    c, a, _ = two_nodes("rd")
    c.add_pod("x", a)
    kube = live(c)
    read = await read_cluster(kube, ["Node", "Pod", "NodeClaim", "NoSuchKind"])
    assert read.count() == {"Node": 2, "NodeClaim": 2, "Pod": 1}
    assert read.missing == ["NoSuchKind"]


class NoPriorityClasses(ListOnly):
    """A user whose ClusterRole predates ``priorityclasses`` (403 on that list only)."""

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        if kind == "PriorityClass":
            raise KubeAPIError.from_status('priorityclasses.scheduling.k8s.io is forbidden', status=403, reason="Forbidden")
        if kind == "Node":
            raise KubeAPIError.from_status("nodes is forbidden", status=403, reason="Forbidden")
        return await super().list(kind, namespace, label_selector)


async def test_priority_classes_forbidden_are_rebuilt_from_the_pods_and_other_403s_stop() -> None:
    c, a, _ = two_nodes("pc")
    name = c.add_pod("x", a)
    kube = live(c)
    kube.cluster.patch_sync("Pod", name, {"spec": {"priorityClassName": "batch-low", "priority": -10,
                                                   "preemptionPolicy": "Never"}}, "default")
    forbidden = NoPriorityClasses(kube.cluster)
    read = await read_cluster(forbidden, ["PriorityClass", "Pod"])
    assert read.forbidden == ["PriorityClass"] and read.missing == []
    classes = [o for o in translate(read) if o["kind"] == "PriorityClass"]
    assert classes == [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch-low"},
                        "value": -10, "preemptionPolicy": "Never"}]
    with pytest.raises(KubeAPIError, match="403"):
        await read_cluster(forbidden, ["Node", "Pod"])


async def test_unblocked_node_is_deleted_with_its_real_type_and_price() -> None:
    c, a, b = two_nodes("free")
    c.add_pod("x", a)
    c.add_pod("y", b)
    kube = live(c)
    r = await dry_run(kube, now=NOW, reference_seconds=None)
    assert set(kube.calls) >= {"NodePool", "NodeClaim", "Node", "Pod", "PodDisruptionBudget", "KWOKNodeClass"}
    actions = {v.node: v.action for v in r.verdicts}
    assert sorted(actions.values()) == ["delete", "keep"]  # one goes, its pod moves to the other
    kept = next(v for v in r.verdicts if v.action == "keep")
    assert kept.blocker is Blocker.NO_CHEAPER_FIT
    for v in r.verdicts:
        assert v.instance_type == INSTANCE_TYPE and v.zone == "us-east-1a" and v.capacity_type == "on-demand"
        assert v.price is not None and v.price > 0
    assert kept.price is not None and r.cost_now == pytest.approx(2 * kept.price)
    assert r.cost_after == pytest.approx(kept.price)
    assert not r.unpriced and not r.pending and not r.created
    text = render_live_text(r)
    assert "delete" in text and f"{r.cost_now:.4f}" in text


async def test_pdb_blocks_the_node_of_its_pod() -> None:
    c, a, b = two_nodes("pdb")
    guarded = c.add_pod("guarded", a)
    c.add_pod("free", b)
    c.add_pdb(guarded, {"maxUnavailable": 0})
    r = await dry_run(live(c), now=NOW, reference_seconds=None)
    v = r.verdict(a)
    assert v is not None and v.action == "keep" and v.blocker is Blocker.PDB and v.kind is DecisionKind.PDB_BLOCKS
    assert "maxUnavailable" in v.fix
    assert r.verdict(b) is not None and r.verdict(b).action == "delete"  # type: ignore[union-attr]


async def test_do_not_disrupt_pod_blocks_its_node() -> None:
    c, a, b = two_nodes("dnd")
    c.add_pod("pinned", a, annotations={"karpenter.sh/do-not-disrupt": "true"})
    c.add_pod("free", b)
    r = await dry_run(live(c), now=NOW, reference_seconds=None)
    v = r.verdict(a)
    assert v is not None and v.action == "keep" and v.blocker is Blocker.DO_NOT_DISRUPT
    assert r.verdict(b).action == "delete"  # type: ignore[union-attr]


async def test_closed_budget_window_keeps_every_node() -> None:
    c, a, b = two_nodes("budget", budgets=[{"nodes": "0", "schedule": "@daily", "duration": "24h"}])
    c.add_pod("x", a)
    c.add_pod("y", b)
    r = await dry_run(live(c), now=NOW, reference_seconds=None)
    for node in (a, b):
        v = r.verdict(node)
        assert v is not None and v.action == "keep" and v.blocker is Blocker.BUDGET, v
    pool = next(b for b in r.budgets if b["nodepool"] == "budget")
    assert pool["allowed"]["Underutilized"] == 0
    assert r.cost_after == pytest.approx(r.cost_now)


async def test_zone_spread_is_a_topology_blocker() -> None:
    c = LiveCluster("topo")
    a, b = c.add_node("a", "us-east-1a"), c.add_node("b", "us-east-1b")
    c.add_pod("s1", a, spread="topo")
    c.add_pod("s2", b, spread="topo")
    r = await dry_run(live(c), now=NOW, reference_seconds=None)
    for node in (a, b):
        v = r.verdict(node)
        assert v is not None and v.action == "keep" and v.blocker is Blocker.TOPOLOGY, v


async def test_files_on_top_change_the_verdict() -> None:
    c, a, b = two_nodes("ontop")
    c.add_pod("x", a)
    c.add_pod("y", b)
    pool = c.nodepool()
    pool["spec"]["disruption"]["budgets"] = [{"nodes": "0"}]
    import tempfile

    import yaml

    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        yaml.safe_dump(pool, f)
    r = await dry_run(live(c), [f.name], now=NOW, reference_seconds=None)
    assert {v.action for v in r.verdicts} == {"keep"}
    assert {v.blocker for v in r.verdicts} == {Blocker.BUDGET}


async def test_pending_pod_gets_a_nodeclaim() -> None:
    """A pending 3.6-vCPU pod fits neither node (3.5 vCPU free each): karpy would create one
    m5.xlarge NodeClaim for it, and the pod is explained as placed there."""
    c, a, b = two_nodes("pend")
    c.add_pod("x", a)
    c.add_pod("y", b)
    c.add_pod("big", a, cpu="3600m")
    big = next(p for p in c.pods if p["metadata"]["name"].endswith("-big"))
    del big["spec"]["nodeName"]  # pending
    r = await dry_run(live(c), now=NOW, reference_seconds=None)
    assert not r.pending
    assert len(r.created) == 1
    claim = r.created[0]
    assert claim["instanceType"] == INSTANCE_TYPE and claim["nodepool"] == "pend" and claim["pods"] == ["default/pend-big"]
    assert claim["pricePerHour"] is not None and r.cost_provisioned == pytest.approx(r.cost_now + claim["pricePerHour"])
    where = next(p for p in r.placed.pods if p.name == "pend-big")
    assert where.node is not None and where.node not in (a, b)


def test_blocker_of_maps_topology_words() -> None:
    topo = NodeDecision("n", DecisionStage.CANDIDATE, Verdict.KEEP, DecisionKind.POD_UNSCHEDULABLE,
                        "pod default/x would not schedule: topology spread on topology.kubernetes.io/zone: maxSkew 1")
    room = NodeDecision("n", DecisionStage.CANDIDATE, Verdict.KEEP, DecisionKind.POD_UNSCHEDULABLE,
                        "pod default/x would not schedule: no instance type has room")
    assert blocker_of(topo) is Blocker.TOPOLOGY
    assert blocker_of(room) is Blocker.NO_CHEAPER_FIT
    assert blocker_of(NodeDecision("n", DecisionStage.CANDIDATE, Verdict.KEEP, DecisionKind.NOT_INITIALIZED, "x")) \
        is Blocker.NOT_CANDIDATE


async def test_evicted_replicaset_pods_come_back_and_need_room() -> None:
    """Pods of a live ReplicaSet owned by a Deployment are recreated when the round evicts them,
    so the nodes that stay must hold them all: 6 nodes with 3 pods of 500m (1.5 of 4 vCPU) each
    consolidate onto 3 nodes (6 pods = 3 vCPU each), not fewer."""
    c = LiveCluster("rs")
    for i in range(6):
        node = c.add_node(f"{i}")
        for j in range(3):
            c.add_pod(f"{i}-{j}", node, owned=True)
    kube = live(c)
    rs = kube.cluster.peek("ReplicaSet", "rs-rs", "default")
    assert rs is not None
    kube.cluster.patch_sync("ReplicaSet", "rs-rs", {"metadata": {"ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rs", "controller": True}]}}, "default")
    r = await dry_run(kube, now=NOW, reference_seconds=None)
    bound = [p for p in r.simulation.pods if p.node]
    assert len(bound) == 18 and not r.pending
    kept = [v for v in r.verdicts if v.action == "keep"]
    assert len(kept) == 3 and sum(v.action == "delete" for v in r.verdicts) == 3
    assert r.cost_after == pytest.approx(r.cost_now / 2)
    assert {n.name for n in r.simulation.nodes} == {v.node for v in kept}


def _retarget(c: LiveCluster, group: str, kind: str, spec: dict[str, Any], types: dict[str, str]) -> list[dict[str, Any]]:
    """``c``'s objects with its NodePool and NodeClaims pointing at a ``kind`` NodeClass and its
    nodes relabelled with ``types`` (node name -> instance type)."""
    out = []
    for obj in c.objects():
        if obj["kind"] == "KWOKNodeClass":
            obj = {"apiVersion": f"{group}/{'v1' if kind == 'EC2NodeClass' else 'v1alpha1'}", "kind": kind,
                   "metadata": {"name": c.name}, "spec": spec,
                   "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                              "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        elif obj["kind"] == "NodePool":
            obj["spec"]["template"]["spec"]["nodeClassRef"] = {"group": group, "kind": kind, "name": c.name}
            obj["spec"]["template"]["spec"]["requirements"] = []
        elif obj["kind"] in ("Node", "NodeClaim"):
            if obj["kind"] == "NodeClaim":
                obj["spec"]["nodeClassRef"] = {"group": group, "kind": kind, "name": c.name}
                obj["spec"]["requirements"] = []
            obj["metadata"]["labels"]["node.kubernetes.io/instance-type"] = types[obj["metadata"]["name"]]
        out.append(obj)
    return out


@pytest.mark.parametrize(("group", "kind", "spec"), [
    ("karpenter.k8s.aws", "EC2NodeClass", {"role": "KarpenterNodeRole", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                                           "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                                           "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}),
    ("karpenter.kakaocloud.com", "KCNodeClass", {"imageID": "img-1", "subnetIDs": ["subnet-1"]}),
])
async def test_cloud_nodeclasses_priced_offline_and_missing_prices_named(group: str, kind: str, spec: dict[str, Any]) -> None:
    """An EC2NodeClass or KCNodeClass cluster without cloud credentials: the simulated provider's
    offline catalog prices the EC2 types; a type it does not know (a KakaoCloud flavor) is named,
    its price not guessed, and consolidation keeps that node as price-unknown."""
    c, a, b = two_nodes(kind.lower())
    c.add_pod("x", a)
    c.add_pod("y", b)
    cluster = InMemoryCluster(VirtualClock(NOW))
    for obj in _retarget(c, group, kind, spec, {a: "m5.large", b: "m2a.xlarge"}):
        cluster.create_sync(obj["kind"], obj)
    r = await dry_run(ListOnly(cluster), now=NOW, reference_seconds=None)
    va, vb = r.verdict(a), r.verdict(b)
    assert va is not None and vb is not None
    assert va.price is not None and va.price > 0
    assert vb.price is None
    assert r.unpriced == [f"{b}: instance type m2a.xlarge is not in the catalog"]
    assert r.cost_now == pytest.approx(va.price)
    assert vb.action == "keep" and vb.blocker is Blocker.PRICE_UNKNOWN
    assert "m2a.xlarge is not in the catalog" in render_live_text(r)


@pytest.mark.parametrize(("args", "message"), [
    (["--from-cluster", "--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: no such file"),
    (["--from-cluster", "--timeline", "t.png"], "--timeline: not with --from-cluster"),
    (["--from-cluster", "--cloud-provider", "aws"], "--cloud-provider: not with --from-cluster"),
    (["--from-cluster", "--until", "5x"], "--until: '5x' is not a duration"),
    (["--kubeconfig", "k.yaml"], "--kubeconfig and --context go with --from-cluster"),
])
def test_cli_refuses_bad_from_cluster_options(args: list[str], message: str) -> None:
    from tests.cli import invoke_cli

    result = invoke_cli("simulate", *args)
    assert result.exit_code == 2
    assert message in result.output


async def test_zone_pinned_volumes_are_read_and_keep_their_pods_nodes() -> None:
    """StorageClasses, PersistentVolumes and PersistentVolumeClaims are read from the cluster and
    used: each pod's volume is pinned to its node's zone, so neither pod can move and both nodes
    stay (with nothing read, one node goes: :func:`test_unblocked_node_is_deleted_with_its_real_type_and_price`).
    It found the disruption simulation ignoring volume topology: node a was deleted, its pod moved
    to the other zone, where its volume cannot attach (Karpenter injects volume topology there too)."""
    c = LiveCluster("vol")
    a, b = c.add_node("a", "us-east-1a"), c.add_node("b", "us-east-1b")
    pods = {c.add_pod("x", a): "us-east-1a", c.add_pod("y", b): "us-east-1b"}
    extra: list[dict[str, Any]] = [{"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "zonal"},
                                    "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer"}]
    for pod in c.pods:
        zone = pods[pod["metadata"]["name"]]
        claim = f"data-{pod['metadata']['name']}"
        pod["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        extra += [
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"pv-{claim}"},
             "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "zonal",
                      "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": f"vol-{claim}"},
                      "claimRef": {"namespace": "default", "name": claim},
                      "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                          {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}},
             "status": {"phase": "Bound"}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": "default"},
             "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "zonal", "volumeName": f"pv-{claim}",
                      "resources": {"requests": {"storage": "1Gi"}}},
             "status": {"phase": "Bound"}},
        ]
    kube = live(c)
    for obj in extra:
        kube.cluster.create_sync(obj["kind"], obj)
    r = await dry_run(kube, now=NOW, reference_seconds=None)
    assert {"StorageClass", "PersistentVolume", "PersistentVolumeClaim"} <= set(kube.calls)
    assert r.read["StorageClass"] == 1 and r.read["PersistentVolume"] == 2 and r.read["PersistentVolumeClaim"] == 2
    assert {v.node: v.action for v in r.verdicts} == {a: "keep", b: "keep"}, [(v.node, v.reason) for v in r.verdicts]


async def test_node_overlays_on_the_cluster_price_the_pass_at_the_live_instant() -> None:
    """A NodeOverlay read from the cluster (gate NodeOverlay on) sets the prices of the pass at the
    live instant and the cost now, as it does in the round (it was applied only once the round
    stepped); with the gate off it is read, named in a warning and not applied."""
    from karpy_core.featuregates import FeatureGates

    c, a, b = two_nodes("ovl")
    c.add_pod("x", a)
    c.add_pod("y", b)
    overlay = {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": "cheap"},
               "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]}],
                        "price": "0.0125"}}
    cost = {}
    for gate in (True, False):
        kube = live(c)
        kube.cluster.create_sync("NodeOverlay", overlay)
        r = await dry_run(kube, now=NOW, reference_seconds=None, feature_gates=FeatureGates(NodeOverlay=gate))
        assert "NodeOverlay" in kube.calls and r.read["NodeOverlay"] == 1
        assert any("NodeOverlay" in w for w in r.warnings) is not gate
        cost[gate] = r.cost_now
    assert cost[True] == pytest.approx(2 * 0.0125) and cost[False] == pytest.approx(2 * 0.192)
