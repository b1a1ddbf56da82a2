"""Draining nodes under PodDisruptionBudgets in the simulator: exact eviction counts and times.

Rules followed: the disruption controller's arithmetic (Kubernetes
``pkg/controller/disruption/disruption.go``: expectedPods from the Deployment's scale,
currentHealthy = Ready pods not deleting, disruptionsAllowed = currentHealthy - desiredHealthy),
the Eviction API (``pkg/registry/core/pod/storage/eviction.go``: 429 past the budget, unready pods
by ``unhealthyPodEvictionPolicy``) and Karpenter's drain (``terminator/eviction.go``: a refused
eviction is retried after a per-pod backoff of 100 ms doubling up to 10 s). The simulated
ReplicaSet replaces an evicted pod at once and the replacement is Ready when bound, so the k-th
retry instant after the drain starts is ``r_k = r_(k-1) + min(0.1 * 2**(k-1), 10)``, r_0 = 0.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy_core.cli import run_simulation
from karpy_core.cloudprovider.provider import load_provider
from karpy_core.sim.simulator import Simulator
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool


def retry_instants(n: int) -> list[float]:
    """r_0..r_(n-1): the instants (seconds after the drain starts) at which refused pods retry."""
    out = [0.0]
    for k in range(1, n):
        out.append(out[-1] + min(0.1 * 2 ** (k - 1), 10.0))
    return out


def node(name: str, cpu: str, *, old: bool) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64"},
                         "finalizers": ["karpenter.sh/termination"] if old else []},
            "spec": {},
            "status": {"allocatable": {"cpu": cpu, "memory": "64Gi", "pods": "110"}, "capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pdb(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}


async def drain(replicas: int, old_nodes: int, old_cpu: str, pdb_spec: dict[str, Any], *, unready: int = 0,
                seconds: float = 600.0) -> tuple[Simulator, list[tuple[float, str]], list[str]]:
    """``replicas`` pods of Deployment ``web`` (1 CPU each) packed onto ``old_nodes`` nodes of
    ``old_cpu``; ``unready`` of them (the last by name) then lose Ready; fresh nodes join and
    every old node is deleted at once. Returns the simulator and ``(t since the deletion, pod)``
    of every eviction within ``seconds``, and the ``ns/name`` of the unready pods."""
    provider = load_provider("simulated", {})
    sim = Simulator(provider)
    sim.apply([deployment(replicas=replicas), pdb(**pdb_spec), *[node(f"old-{i:02d}", old_cpu, old=True) for i in range(old_nodes)]])
    await sim.run(max_seconds=60)
    pods = sim.cluster.objects("Pod")
    assert len(pods) == replicas and all(p["spec"].get("nodeName", "").startswith("old-") for p in pods)
    unready_pods = sorted(p["metadata"]["name"] for p in pods)[replicas - unready:]
    for name in unready_pods:
        sim.cluster.patch_sync("Pod", name, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}, "default")
    sim.apply([node(f"new-{i:02d}", "64", old=False) for i in range(4)])
    t0 = sim.clock.now()
    for i in range(old_nodes):
        sim.cluster.delete_sync("Node", f"old-{i:02d}")
    await sim.run(max_seconds=t0 - sim.start + seconds)
    evictions = [(round(e.t - (t0 - sim.start), 3), e.details["pod"]) for e in sim.events if e.kind == "evict"]
    return sim, evictions, [f"default/{n}" for n in unready_pods]


def ready_web_pods(sim: Simulator) -> int:
    return sum(1 for p in sim.cluster.objects("Pod")
               if any(c.get("type") == "Ready" and c.get("status") == "True" for c in p["status"].get("conditions") or ()))


async def test_node_with_all_four_replicas_and_max_unavailable_1_goes_one_pod_at_a_time():
    sim, ev, _ = await drain(4, 1, "8", {"maxUnavailable": 1})
    assert [t for t, _ in ev] == [round(t, 3) for t in retry_instants(4)] == [0.0, 0.1, 0.3, 0.7]
    assert len({p for _, p in ev}) == 4
    assert ready_web_pods(sim) == 4 and sim.cluster.peek("Node", "old-00") is None


async def test_twenty_pods_over_ten_nodes_with_max_unavailable_1_evicts_one_at_a_time():
    # a PDB selecting pods on many nodes: every node drains at once, the budget still allows one
    sim, ev, _ = await drain(20, 10, "2", {"maxUnavailable": 1}, seconds=3600)
    assert [t for t, _ in ev] == [round(t, 3) for t in retry_instants(20)]
    assert ev[1][0] == 0.1 and ev[-1][0] == pytest.approx(12.7 + 12 * 10)
    assert len({p for _, p in ev}) == 20 and ready_web_pods(sim) == 20
    assert not any(n["metadata"]["name"].startswith("old-") for n in sim.cluster.objects("Node"))


async def test_min_available_50_percent_lets_two_of_four_go_together():
    _, ev, _ = await drain(4, 1, "8", {"minAvailable": "50%"})
    assert [t for t, _ in ev] == [0.0, 0.0, 0.1, 0.1]


async def test_max_unavailable_25_percent_of_eight_lets_two_go_together():
    _, ev, _ = await drain(8, 1, "16", {"maxUnavailable": "25%"})
    assert [t for t, _ in ev] == [0.0, 0.0, 0.1, 0.1, 0.3, 0.3, 0.7, 0.7]


async def test_an_unready_pod_goes_first_without_charging_a_healthy_budget():
    # IfHealthyBudget: currentHealthy 3 >= desiredHealthy 3 > 0, so the unready pod is deleted
    # uncharged; the Ready ones wait for its Ready replacement.
    sim, ev, unready = await drain(4, 1, "8", {"maxUnavailable": 1}, unready=1)
    assert [t for t, _ in ev] == [0.0, 0.1, 0.3, 0.7]
    assert ev[0][1] == unready[0]
    assert ready_web_pods(sim) == 4


@pytest.mark.parametrize(("policy", "evicted"), [("IfHealthyBudget", 0), ("AlwaysAllow", 1)])
async def test_unhealthy_pod_eviction_policy_when_the_budget_is_short(policy, evicted):
    # minAvailable 4 of 4 with one pod unready: currentHealthy 3 < desiredHealthy 4. The unready
    # pod may go only under AlwaysAllow; the Ready pods never may.
    _, ev, unready = await drain(4, 1, "8", {"minAvailable": 4, "unhealthyPodEvictionPolicy": policy}, unready=1, seconds=120)
    assert ev == [(0.0, unready[0])][:evicted]


async def test_drift_of_a_node_holding_four_replicas_evicts_them_one_by_one(tmp_path):
    """The issue's scenario end to end: NodePool drift replaces the node holding all 4 replicas of
    a Deployment with ``maxUnavailable: 1``."""
    steps = [
        {"at": "0s", "apply": [nodepool(), NODECLASS, deployment(replicas=4, cpu="100m"), pdb(maxUnavailable=1)]},
        {"at": "1h", "apply": [nodepool(labels={"team": "blue"})]},
    ]
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"},
                                    "until": "2h", "steps": steps}, sort_keys=False))
    doc = (await run_simulation([str(path)])).to_dict()
    ev = [e for e in doc["events"] if e["kind"] == "evict"]
    assert len(ev) == 4
    t0 = ev[0]["t"]
    assert t0 >= 3600 and [round(e["t"] - t0, 3) for e in ev] == [0.0, 0.1, 0.3, 0.7]
    assert doc["summary"]["pods_bound"] == 4 and doc["nodes"][0]["labels"].get("team") == "blue"
