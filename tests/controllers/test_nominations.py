"""Pod nominations: a pass never re-packs what an earlier pass planned on NodeClaims in flight,
and the pods keep that room on every later pass (issue 27). Registration writes nothing on the pods (issue 36)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from karpy_core.cli import _load_sim_provider
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.controllers.provisioning.provisioner import Provisioner, ProvisioningResult
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.scheduler import Scheduler
from karpy_core.sim.kubelet import KubeSchedulerSimulator
from karpy_core.sim.report import build_report
from karpy_core.sim.simulator import Simulator
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.nominations import Nominations, in_flight_targets
from karpy_core.utils.clock import VirtualClock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cost

GIB = 1024**3


def _pod(name: str, cpu: str, mem: str = "1Gi", nominated: str = "") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}]},
            "status": {"phase": "Pending", **({"nominatedNodeName": nominated} if nominated else {})}}


def _launched_claim_and_node(cluster: Any) -> None:
    """NodeClaim ``np-abc`` (launched, ``fake:///i-1``) and its Node ``n1``, still carrying the unregistered taint."""
    cluster.create_sync("NodeClaim", {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                                      "metadata": {"name": "np-abc", "labels": {"karpenter.sh/nodepool": "np"}},
                                      "spec": {}, "status": {"providerID": "fake:///i-1"}})
    cluster.create_sync("Node", {"metadata": {"name": "n1", "labels": {}},
                                 "spec": {"providerID": "fake:///i-1",
                                          "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
                                 "status": {}})


def _claim_node(name: str, cpu: int, memory_gib: int) -> ExistingNode:
    """An in-flight NodeClaim as the scheduler sees it: its requests are its room."""
    return ExistingNode(name=name, labels={"kubernetes.io/hostname": name}, taints=(),
                        allocatable={"cpu": cpu * 1000, "memory": memory_gib * GIB, "pods": 110}, initialized=False)


def test_nominated_pods_go_back_to_their_claim_and_hold_its_room():
    """Claim a was planned for two memory pods (1 cpu, 3 GiB each: room 2 cpu, 6 GiB), claim b for
    two cpu pods (2 cpu/1 GiB and 1 cpu/1 GiB: room 3 cpu, 2 GiB). First fit in queue order (cpu
    first) puts the 2-cpu pod on a, and then no claim has room for a memory pod; the nominations
    put every pod back where it was planned."""
    pods = [pod_info(_pod(n, c, m)) for n, c, m in (("c1", "2", "1Gi"), ("c2", "1", "1Gi"), ("m1", "1", "3Gi"), ("m2", "1", "3Gi"))]
    nodes = [_claim_node("a", 2, 6), _claim_node("b", 3, 2)]
    greedy = Scheduler([], nodes).solve(pods)
    assert greedy.existing["default/c1"] == "a" and greedy.errors  # what a pass without nominations does
    nominated = {"default/c1": "b", "default/c2": "b", "default/m1": "a", "default/m2": "a"}
    kept = Scheduler([], nodes, nominated=nominated).solve(pods)
    assert kept.existing == nominated and not kept.errors and not kept.new_claims
    # a pod nominated to a node that is gone is placed afresh, in the room the kept pods left
    moved = Scheduler([], nodes, nominated={**nominated, "default/c2": "gone"}).solve(pods)
    assert moved.existing == nominated and not moved.errors


def test_in_flight_targets_follow_the_claim_until_it_is_initialized():
    claim: dict[str, Any] = {"metadata": {"name": "np-abc", "labels": {"karpenter.sh/nodepool": "np"}}, "spec": {}, "status": {}}
    assert in_flight_targets(ClusterSnapshot(nodeclaims=[claim])) == {"np-abc": "np-abc"}
    launched = {**claim, "status": {"providerID": "fake:///i-1", "nodeName": "ip-10-0-0-1"}}
    node = {"metadata": {"name": "ip-10-0-0-1", "labels": {"karpenter.sh/nodepool": "np"}}, "spec": {"providerID": "fake:///i-1"},
            "status": {}}
    assert in_flight_targets(ClusterSnapshot(nodeclaims=[launched], nodes=[node])) == {"ip-10-0-0-1": "np-abc"}
    ready = {**launched, "status": {**launched["status"], "conditions": [{"type": "Initialized", "status": "True"}]}}
    assert in_flight_targets(ClusterSnapshot(nodeclaims=[ready], nodes=[node])) == {}
    deleting = {**claim, "metadata": {**claim["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}
    assert in_flight_targets(ClusterSnapshot(nodeclaims=[deleting])) == {}
    noms = Nominations()
    noms.nominate_pods({"default/a": "np-abc", "default/b": "np-abc", "default/c": "np-x"})
    assert noms.pods_of("np-abc") == ["default/a", "default/b"]
    assert noms.pod_targets({"default/a", "default/c"}) == {"default/a": "np-abc", "default/c": "np-x"}
    assert noms.pods_of("np-abc") == ["default/a"]  # b is no longer pending: forgotten


def _mix6_120() -> list[dict[str, Any]]:
    """benchmarks/cost.py's mix6-120 on the default scenario's NodePool and EC2NodeClass, as
    applied objects."""
    objs = [d for d in cost._default_docs() if d.get("kind") in ("NodePool", "EC2NodeClass")]
    for d in cost.mix(6, 120, 2):
        d = {**d, "apiVersion": "apps/v1"}
        d["spec"]["selector"] = {"matchLabels": d["spec"]["template"]["metadata"]["labels"]}
        objs.append(d)
    return objs


async def _simulate(objs: list[dict[str, Any]], nominations: Nominations | None = None) -> tuple[Simulator, list[ProvisioningResult]]:
    provider, clock, cluster, _ = _load_sim_provider("simulated", None, None, None)
    sim = Simulator(provider, clock=clock, cluster=cluster)
    if nominations is not None:
        sim.provisioner.nominations = nominations
    sim.apply(objs)
    passes: list[ProvisioningResult] = []
    run = sim.provisioner.reconcile

    async def spy(*, streaming: bool = False) -> ProvisioningResult:
        result = await run(streaming=streaming)
        passes.append(result)
        return result

    sim.provisioner.reconcile = spy  # type: ignore[method-assign]
    await sim.run()
    return sim, passes


async def test_simulator_launches_exactly_what_the_first_pass_planned_for_mix6_120():
    sim, passes = await _simulate(_mix6_120())
    first = passes[0].results
    assert first is not None and not first.errors
    planned = sum(c.cheapest_offering_price() for c in first.new_claims)
    report = (await build_report(sim, reference_time_limit=None)).to_dict()
    assert report["summary"]["pods_pending"] == 0 and report["summary"]["pods_bound"] == 120
    assert report["summary"]["nodes_launched"] == len(first.new_claims)
    assert report["summary"]["cost_per_hour"] == pytest.approx(planned, abs=1e-6)
    # every later pass put the pods back on the claims the first one made
    assert all(not p.created for p in passes[1:])
    # each pod was bound on the NodeClaim it was planned on (the simulated node is named after it)
    planned_on = {p.key: passes[0].created[i]["metadata"]["name"] for i, c in enumerate(first.new_claims) for p in c.pods}
    bound = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p["spec"]["nodeName"] for p in sim.cluster.objects("Pod")}
    assert bound == planned_on


async def test_without_pod_nominations_the_second_pass_launches_more():
    """What the nominations prevent, on the same workload: a Nominations object that forgets pod
    nominations (as karpy did before, or a restarted controller) re-packs the pending pods over
    the in-flight claims' exact room and launches more claims than the first pass planned."""

    class Forgetful(Nominations):
        def nominate_pods(self, targets: Any) -> None:
            return None

    sim, passes = await _simulate(_mix6_120(), Forgetful())
    first = passes[0].results
    assert first is not None
    report = (await build_report(sim, reference_time_limit=None)).to_dict()
    assert report["summary"]["nodes_launched"] > len(first.new_claims)
    assert report["summary"]["cost_per_hour"] > sum(c.cheapest_offering_price() for c in first.new_claims) + 0.1


async def test_registration_writes_nothing_on_the_pods_planned_for_the_claim():
    """Like Karpenter's, registration patches only the Node and the NodeClaim: setting each
    planned pod's status.nominatedNodeName (a GET and a PATCH a pod, before the taint came off)
    made 5,000 pending pods take 356 s to run instead of 125 s on the real control plane
    (issue 36, benchmarks/controller_apiserver.py)."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    cluster.create_sync("Pod", _pod("web", "1"))
    _launched_claim_and_node(cluster)
    writes: list[str] = []
    real_patch = cluster.patch

    async def spy(kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *,
                  status: bool = False) -> dict[str, Any]:
        writes.append(f"{kind}/{name}")
        return await real_patch(kind, name, patch, namespace, status=status)

    cluster.patch = spy  # type: ignore[method-assign]
    provider, _, _, _ = _load_sim_provider("simulated", None, None, None)
    lifecycle = NodeClaimLifecycle(kube=cluster, provider=provider, clock=clock)
    await lifecycle.registration.reconcile(lifecycle.deps.claim(await cluster.get("NodeClaim", "np-abc")),
                                           lifecycle.deps.node(await cluster.get("Node", "n1")))
    assert writes == ["Node/n1", "NodeClaim/np-abc"]
    assert "nominatedNodeName" not in (await cluster.get("Pod", "web", "default"))["status"]
    assert not (await cluster.get("Node", "n1"))["spec"].get("taints")


async def test_simulated_kube_scheduler_binds_nominated_pods_first():
    """The nodes of the test above, Ready: first fit would bind the 2-cpu pod on a and leave the
    memory pods unbound; with nominatedNodeName every pod is bound, on its own node."""
    cluster = InMemoryCluster(VirtualClock())
    for name, cpu, mem in (("a", "2", "6Gi"), ("b", "3", "2Gi")):
        cluster.create_sync("Node", {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}, "spec": {},
                                     "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"},
                                                "conditions": [{"type": "Ready", "status": "True"}]}})
    for name, cpu, mem, node in (("c1", "2", "1Gi", "b"), ("c2", "1", "1Gi", "b"), ("m1", "1", "3Gi", "a"), ("m2", "1", "3Gi", "a")):
        cluster.create_sync("Pod", _pod(name, cpu, mem, nominated=node))
    assert await KubeSchedulerSimulator(cluster).reconcile() == 4
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in cluster.objects("Pod")} == \
        {"c1": "b", "c2": "b", "m1": "a", "m2": "a"}


async def test_provisioner_second_pass_creates_nothing_for_pods_nominated_to_in_flight_claims():
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    for obj in _mix6_120()[:2]:
        cluster.create_sync(obj["kind"], obj)
    for d in cost.mix(6, 120, 2):
        tmpl = d["spec"]["template"]
        for i in range(d["spec"]["replicas"]):
            cluster.create_sync("Pod", {"metadata": {"name": f"{d['metadata']['name']}-{i}", "namespace": "default",
                                                     "labels": tmpl["metadata"]["labels"]},
                                        "spec": tmpl["spec"],
                                        "status": {"phase": "Pending", "conditions": [
                                            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    provider, _, _, _ = _load_sim_provider("simulated", None, None, None)
    noms = Nominations()
    prov = Provisioner(kube=cluster, provider=provider, nominations=noms, clock=clock)
    first = await prov.reconcile()
    assert first.created and first.results is not None and not first.results.errors
    second = await prov.reconcile()
    assert not second.created and second.results is not None
    names = {i: c["metadata"]["name"] for i, c in enumerate(first.created)}
    assert second.results.existing == {p.key: names[i] for i, c in enumerate(first.results.new_claims) for p in c.pods}
    planned = {p.key: names[i] for i, c in enumerate(first.results.new_claims) for p in c.pods}
    # a fresh provisioner (a restart, a new leader: no nominations in memory) reads them back from
    # the claims' karpy.sh/nominated-pods annotation and launches nothing more (issue 34)
    fresh_noms = Nominations()
    fresh = await Provisioner(kube=cluster, provider=provider, nominations=fresh_noms, clock=clock).reconcile()
    assert not fresh.created and fresh.results is not None and fresh.results.existing == planned
    assert fresh_noms.pods_of(names[0]) == sorted(p.key for p in first.results.new_claims[0].pods)
    # without the record (what a restarted controller had before) the pods are re-packed and more launched
    for c in cluster.objects("NodeClaim"):
        cluster.patch_sync("NodeClaim", c["metadata"]["name"], {"metadata": {"annotations": {"karpy.sh/nominated-pods": None}}})
    forgetful = await Provisioner(kube=cluster, provider=provider, clock=clock).reconcile()
    assert forgetful.created
