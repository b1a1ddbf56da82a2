"""Pod names as the API server generates them (``names.SimpleNameGenerator``: base cut to 58
characters + 5 random), and a Deployment whose ReplicaSet name the API server refuses (yaml46)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.workloads import WorkloadSimulator, generated_name
from tests.cli import invoke_cli


def _workload(kind: str, name: str, replicas: int = 2) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "w"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    spec: dict[str, Any] = {"template": template}
    if kind == "Job":
        spec["parallelism"] = replicas
    else:
        spec.update(replicas=replicas, selector={"matchLabels": {"app": "w"}})
    return {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_generated_name_cuts_the_base_to_58_characters() -> None:
    assert generated_name("web-", "abcde") == "web-abcde"
    assert generated_name("x" * 70 + "-", "abcde") == "x" * 58 + "abcde"
    assert len(generated_name("y" * 58, "abcde")) == 63


def test_pods_of_long_named_workloads_have_names_of_at_most_63_characters() -> None:
    cluster = InMemoryCluster()
    for kind, name in (("Deployment", "d" * 242), ("ReplicaSet", "r" * 100), ("Job", "j" * 200), ("Deployment", "short")):
        cluster.create_sync(kind, _workload(kind, name))
    workloads = WorkloadSimulator(cluster)
    workloads.reconcile()
    pods = cluster.objects("Pod")
    names = sorted(p["metadata"]["name"] for p in pods)
    assert len(pods) == 8 and len(set(names)) == 8, names
    assert all(len(n) <= 63 for n in names), names
    assert {n[:58] for n in names if n.startswith("d")} == {"d" * 58}
    short = [n for n in names if n.startswith("short-")]
    assert len(short) == 2 and all(len(n) == len("short-") + 10 + 1 + 5 for n in short), short
    assert not workloads.failed_creates
    assert workloads.reconcile() == 0  # stable: the same pods are found again


def test_a_deployment_whose_replicaset_name_passes_253_characters_creates_no_pods() -> None:
    cluster = InMemoryCluster()
    name = "a" * 253
    cluster.create_sync("Deployment", _workload("Deployment", name))
    workloads = WorkloadSimulator(cluster)
    workloads.reconcile()
    assert cluster.objects("Pod") == [] and cluster.objects("ReplicaSet") == []
    (why,) = workloads.failed_creates.values()
    assert list(workloads.failed_creates) == [f"Deployment/default/{name}"]
    assert why.startswith(f'422 Invalid: ReplicaSet.apps "{name}-') and why.endswith(
        "is invalid: metadata.name: Invalid value: \"" + why.split('"')[1] + '": must be no more than 253 characters')


def test_simulate_reports_the_deployment_as_creating_no_pods_with_the_servers_message(tmp_path: Path) -> None:
    name = "a" * 253
    path = tmp_path / "d.yaml"
    path.write_text(yaml.safe_dump(_workload("Deployment", name)))
    result = invoke_cli("simulate", str(path))
    assert result.exit_code == 0, result.output
    assert f"Deployment/default/{name}: pods not created: 422 Invalid: ReplicaSet.apps" in result.output
    assert "must be no more than 253 characters" in result.output
    assert "pods: 0 bound, 0 pending" in result.output
