"""PDB parity: the same evictions against kube-apiserver (with kube-controller-manager's disruption
controller keeping PDB status) and against the in-memory cluster give the same answers.

Procedure, identical on both sides: a Deployment of 4 pods on one node and a PDB; then rounds, each
trying to evict every original pod still there (by name order) and recording the HTTP status of
each answer (201 allowed, 429 refused). The node is cordoned during a round, so no replacement can
become Ready in the middle of one (kwok readies a pod within milliseconds, which made the real
sequence depend on timing); between rounds it is uncordoned, the Deployment's replacements become
Ready and the PDB status settles (Kubernetes
``pkg/registry/core/pod/storage/eviction.go``, ``pkg/controller/disruption/disruption.go``).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from karpy_core.errors import InternalServerError, KubeAPIError, TooManyRequestsError
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import KubeClient
from karpy_core.sim.kubelet import KubeSchedulerSimulator
from karpy_core.sim.workloads import WorkloadSimulator
from karpy_core.utils.pdb import EVICTION_DENIED_MESSAGE, pod_ready

from .karpy_env import kwok_node, wait_for

pytestmark = pytest.mark.devcluster

REPLICAS = 4


def node(name: str) -> dict[str, Any]:
    return kwok_node(name, {"kubernetes.io/arch": "amd64"})


def deployment(app: str, node_name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": "default"},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}}, "spec": {
                         "nodeSelector": {"kubernetes.io/hostname": node_name},
                         "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                         "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def pdb(app: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app, "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}


async def app_pods(kube: KubeClient, app: str) -> list[dict[str, Any]]:
    return [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == app]


async def settled(kube: KubeClient, app: str, allowed: int) -> bool:
    """All replicas Ready and none deleting, and the PDB status caught up with them."""
    pods = await app_pods(kube, app)
    if len(pods) != REPLICAS or not all(pod_ready(p) and not p["metadata"].get("deletionTimestamp") for p in pods):
        return False
    b = await kube.get("PodDisruptionBudget", app, "default")
    st = b.get("status") or {}
    return (st.get("observedGeneration") == b["metadata"].get("generation") and st.get("currentHealthy") == REPLICAS
            and st.get("expectedPods") == REPLICAS and st.get("disruptionsAllowed") == allowed and not st.get("disruptedPods"))


async def eviction_rounds(kube: KubeClient, app: str, node_name: str, settle: Callable[[], Awaitable[None]]) -> list[list[int]]:
    """Evict the original pods round by round; returns the status codes per round."""
    await settle()
    originals = sorted(p["metadata"]["name"] for p in await app_pods(kube, app))
    assert len(originals) == REPLICAS
    rounds: list[list[int]] = []
    while originals and len(rounds) < REPLICAS + 1:
        await kube.patch("Node", node_name, {"spec": {"unschedulable": True}})
        codes = []
        for name in list(originals):
            try:
                await kube.evict(await kube.get("Pod", name, "default"))
                codes.append(201)
                originals.remove(name)
            except KubeAPIError as exc:
                assert (exc.status, str(exc)) == (429, f"429 TooManyRequests: {EVICTION_DENIED_MESSAGE}"), exc
                assert isinstance(exc, TooManyRequestsError)  # what the drain catches, from either client
                codes.append(exc.status)
        rounds.append(codes)
        await kube.patch("Node", node_name, {"spec": {"unschedulable": None}})
        await settle()
    return rounds


CASES = [({"maxUnavailable": 1}, 1), ({"minAvailable": "50%"}, 2), ({"maxUnavailable": "25%"}, 1), ({"minAvailable": 3}, 1)]


async def in_memory_rounds(spec: dict[str, Any], allowed: int) -> list[list[int]]:
    cluster = InMemoryCluster()
    workloads, scheduler = WorkloadSimulator(cluster), KubeSchedulerSimulator(cluster)
    app = "web"
    cluster.create_sync("Node", node("kwok-mem"))
    cluster.create_sync("Deployment", deployment(app, "kwok-mem"))
    cluster.create_sync("PodDisruptionBudget", pdb(app, spec))

    async def settle() -> None:
        for _ in range(5):
            workloads.reconcile()
            await scheduler.reconcile()
        assert await settled(cluster, app, allowed)

    return await eviction_rounds(cluster, app, "kwok-mem", settle)


@pytest.mark.parametrize(("spec", "allowed"), CASES)
async def test_evictions_match_kube_apiserver(devcluster, spec, allowed):
    tag = "t" + uuid.uuid4().hex[:5]
    app, node_name = f"pdb-{tag}", f"kwok-pdb-{tag}"
    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    try:
        await kube.create("Node", node(node_name))
        await kube.create("Deployment", deployment(app, node_name))
        await kube.create("PodDisruptionBudget", pdb(app, spec))

        async def settle() -> None:
            await wait_for(lambda: settled(kube, app, allowed), 90, f"{app}: {REPLICAS} Ready pods and a settled PDB status")

        real = await eviction_rounds(kube, app, node_name, settle)
    finally:
        for kind, name, ns in (("PodDisruptionBudget", app, "default"), ("Deployment", app, "default"), ("Node", node_name, None)):
            try:
                await kube.delete(kind, name, ns)
            except KubeAPIError:
                pass
        await kube.close()
    memory = await in_memory_rounds(spec, allowed)
    assert memory == real
    # the rule both follow: `allowed` evictions per round, then 429 until the replacements are Ready
    expected, left = [], REPLICAS
    while left:
        expected.append([201] * min(allowed, left) + [429] * max(0, left - allowed))
        left -= min(allowed, left)
    assert real == expected


async def test_two_pdbs_on_a_pod_answer_the_same(devcluster):
    """eviction.go: a pod selected by more than one PDB cannot be evicted (500)."""
    tag = "t" + uuid.uuid4().hex[:5]
    app, node_name = f"pdb2-{tag}", f"kwok-pdb2-{tag}"

    async def refusal(kube: KubeClient, settle: Callable[[], Awaitable[None]]) -> tuple[int, str, str]:
        await kube.create("PodDisruptionBudget", pdb(app, {"maxUnavailable": 1}))
        second = pdb(app, {"minAvailable": 1})
        second["metadata"]["name"] = f"{app}-second"
        await kube.create("PodDisruptionBudget", second)
        await settle()
        victim = sorted(p["metadata"]["name"] for p in await app_pods(kube, app))[0]
        with pytest.raises(InternalServerError) as exc:  # what the drain catches, from either client
            await kube.evict(await kube.get("Pod", victim, "default"))
        return exc.value.status, exc.value.reason, str(exc.value)

    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    try:
        await kube.create("Node", node(node_name))
        await kube.create("Deployment", deployment(app, node_name))

        async def settle_real() -> None:
            await wait_for(lambda: settled(kube, app, 1), 90, f"{app}: {REPLICAS} Ready pods")

        real = await refusal(kube, settle_real)
    finally:
        for kind, name, ns in (("PodDisruptionBudget", app, "default"), ("PodDisruptionBudget", f"{app}-second", "default"),
                               ("Deployment", app, "default"), ("Node", node_name, None)):
            try:
                await kube.delete(kind, name, ns)
            except KubeAPIError:
                pass
        await kube.close()
    cluster = InMemoryCluster()
    workloads, scheduler = WorkloadSimulator(cluster), KubeSchedulerSimulator(cluster)
    cluster.create_sync("Node", node(node_name))
    cluster.create_sync("Deployment", deployment(app, node_name))

    async def settle_memory() -> None:
        for _ in range(5):
            workloads.reconcile()
            await scheduler.reconcile()

    memory = await refusal(cluster, settle_memory)
    assert memory == real
    assert real[0] == 500
