"""New-user trial 17 findings 1 and 2 (issue 35): a DaemonSet pod bound to a Node it cannot fit
(``existing-1 ... 6321% 7314%``, ``pods: 0 bound, 0 pending``), and pods waiting for a Node that is
not Ready reported as "no provisioning pass placed or refused it", with no warning for the Node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]
POOL = str(REPO / "examples/nodepools/general-purpose.yaml")

EXISTING: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "existing-1", "labels": {
        "karpenter.sh/nodepool": "general-purpose", "node.kubernetes.io/instance-type": "c6a.2xlarge",
        "topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "on-demand",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}},
    "status": {"conditions": [{"type": "Ready", "status": "True"}],
               "capacity": {"cpu": "8", "memory": "16Gi", "pods": "58"},
               "allocatable": {"cpu": "7910m", "memory": "14Gi", "pods": "58"}},
}


def _daemonset(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}}, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}}


def _deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def test_a_daemonset_pod_that_does_not_fit_its_node_stays_pending(tmp_path: Path) -> None:
    """Before: bound to existing-1 at 6321% cpu and 7314% memory, ``pods: 0 bound, 0 pending``."""
    path = _write(tmp_path, [EXISTING, _daemonset("huge", "500", "1Ti"), _daemonset("small", "100m", "64Mi")])
    result = invoke_cli("simulate", POOL, path, "--set", "CLUSTER_NAME=x", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    (node,) = out["nodes"]
    assert node["name"] == "existing-1"
    assert [p.split("/")[1].rsplit("-", 1)[0] for p in node["pods"]] == ["small"]  # the one that fits is bound
    assert node["requested"] == {"cpu": "100m", "memory": "64Mi"}
    (pending,) = [p for p in out["pods"] if p["node"] is None]
    assert pending["name"].startswith("huge-")
    assert pending["reason"] == (
        "pending: DaemonSet pod for Node existing-1, which has no room for it: Insufficient cpu (requests 500, "
        "7910m allocatable, 100m requested by its pods), Insufficient memory (requests 1Ti, 14Gi allocatable, "
        "64Mi requested by its pods); kube-scheduler leaves it Pending and Karpenter does not provision for DaemonSet pods")
    assert out["summary"]["pods_pending"] == 1 and out["summary"]["nodes_launched"] == 0
    assert {d["name"]: d["pods"] for d in out["daemonsets"]} == {"huge": 0, "small": 1}  # running: bound to a node
    table = invoke_cli("simulate", POOL, path, "--set", "CLUSTER_NAME=x")
    assert "pods: 0 bound, 1 pending" in table.stdout
    assert "%" in table.stdout and "6321%" not in table.stdout


def test_the_pending_daemonset_pod_carries_kube_schedulers_condition_and_binds_once_room_frees() -> None:
    """The stand-in for the DaemonSet controller pins the pod to its node by node affinity
    (``matchFields metadata.name``), marks it Unschedulable with kube-scheduler's message, and
    binds it when the node has room (the pods taking it gone)."""
    import asyncio

    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeletSimulator, KubeSchedulerSimulator, pinned_node
    from karpy_core.utils.clock import VirtualClock

    cluster = InMemoryCluster()

    def stored(name: str) -> dict[str, Any]:
        return next(p for p in cluster.snapshot("Pod") if p["metadata"]["name"] == name)

    cluster.create_sync("Node", {k: v for k, v in EXISTING.items() if k not in ("apiVersion", "kind")})
    cluster.create_sync("Pod", {"metadata": {"name": "hog", "namespace": "default"},
                                "spec": {"nodeName": "existing-1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "7"}}}]},
                                "status": {"phase": "Running"}})
    cluster.create_sync("DaemonSet", {"metadata": {"name": "agent", "namespace": "default"}, **{
        k: v for k, v in _daemonset("agent", "2", "1Gi").items() if k == "spec"}})
    kubelet = KubeletSimulator(cluster, VirtualClock(0.0))
    assert kubelet.reconcile() == 1
    (pod,) = [p for p in cluster.snapshot("Pod") if p["metadata"]["name"] != "hog"]
    assert "nodeName" not in pod["spec"] and pinned_node(pod) == "existing-1"
    assert pod["status"]["conditions"] == [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/1 nodes are available: 1 Insufficient cpu."}]
    assert kubelet.reconcile() == 0  # not created again
    asyncio.run(KubeSchedulerSimulator(cluster).reconcile())  # kube-scheduler's stand-in leaves it to the DaemonSet's node
    assert "nodeName" not in stored(pod["metadata"]["name"])["spec"]
    cluster.delete_sync("Pod", "hog", "default")
    assert kubelet.reconcile() == 1
    assert stored(pod["metadata"]["name"])["spec"]["nodeName"] == "existing-1"


def test_daemonset_overhead_on_new_nodes_is_unchanged(tmp_path: Path) -> None:
    """Nodes karpy launches reserve room for the DaemonSets: every DaemonSet pod is bound there."""
    path = _write(tmp_path, [_daemonset("agent", "500m", "512Mi"), _deployment(6)])
    out = json.loads(invoke_cli("simulate", POOL, path, "--set", "CLUSTER_NAME=x", "-o", "json").stdout)
    assert out["summary"]["pods_pending"] == 0 and out["summary"]["nodes_launched"] >= 1
    assert all(any(p.startswith("default/agent-") for p in n["pods"]) for n in out["nodes"])


NOT_READY = {**EXISTING, "status": {k: v for k, v in EXISTING["status"].items() if k != "conditions"}}
PLAIN = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "plain-1", "labels": {"kubernetes.io/os": "linux"}},
         "status": {"conditions": [{"type": "Ready", "status": "False"}], "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def test_a_node_that_is_not_ready_is_warned_about_and_named_in_the_pending_reason(tmp_path: Path) -> None:
    """Before: ``valid`` with no warning, and the pods ``pending: no provisioning pass placed or
    refused it before the run ended``. The decision stays: nothing launched, nothing bound."""
    path = _write(tmp_path, [NOT_READY, PLAIN, _deployment(5)])
    valid = invoke_cli("validate", POOL, path, "--set", "CLUSTER_NAME=x")
    assert valid.exit_code == 0, valid.output
    warned = [line for line in valid.stdout.splitlines() if "not Ready" in line]
    assert warned == [
        f"warning: {path} doc 1 Node/existing-1: not Ready (status.conditions has no Ready condition True), so it is tainted "
        "node.kubernetes.io/unreachable:NoSchedule and kube-scheduler places no pod on it that does not tolerate that; "
        "it is labelled karpenter.sh/nodepool, so karpy (as Karpenter) counts it as capacity on its way and launches "
        "nothing for the pods it would hold",
        f"warning: {path} doc 2 Node/plain-1: not Ready (status.conditions has no Ready condition True), so it is tainted "
        "node.kubernetes.io/not-ready:NoSchedule and kube-scheduler places no pod on it that does not tolerate that",
    ]
    result = invoke_cli("simulate", POOL, path, "--set", "CLUSTER_NAME=x", "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["summary"]["nodes_launched"] == 0 and out["summary"]["pods_bound"] == 0
    reasons = {p["reason"] for p in out["pods"]}
    assert reasons == {"pending: waiting for Node existing-1 to become Ready: karpy (as Karpenter) counts it as capacity "
                       "on its way and launches nothing for this pod, and kube-scheduler places no pod on it until its "
                       "Ready condition is True"}
    assert sum("Node/existing-1: not Ready" in w for w in out["warnings"]) == 1
