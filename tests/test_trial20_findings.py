"""New-user trial 20 findings (issue 35): required pod anti-affinity on a topology key a node does
not carry kept pods off that node (``0 bound, 3 pending`` beside ``--explain``'s ``node n1: fits``).
kube-scheduler's InterPodAffinity filter lets them on: a node without the key is in no domain, so no
matching pod shares one with it; Karpenter's anti-affinity domains likewise allow DoesNotExist.
Required affinity and topology spread still need the label (``All topology labels must exist on
the node``; PodTopologySpread's missing required label)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]

NODE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}},
    "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
               "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]},
}


def _web(rule: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {**rule, "containers": [{"name": "c", "image": "x",
                                                 "resources": {"requests": {"cpu": "100m", "memory": "100Mi"}}}]}}}}


def _term(kind: str) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "example.com/rack"}]}}}


SPREAD = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "example.com/rack", "whenUnsatisfiable": "DoNotSchedule",
                                         "labelSelector": {"matchLabels": {"app": "web"}}}]}


@pytest.mark.parametrize(("rule", "bound"), [(_term("podAntiAffinity"), 3), (_term("podAffinity"), 0), (SPREAD, 0)])
def test_a_node_without_the_topology_key_takes_anti_affinity_pods_only(tmp_path: Path, rule: dict[str, Any], bound: int) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([NODE, _web(rule)]))
    result = invoke_cli("simulate", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    pods = json.loads(result.stdout)["pods"]
    assert sorted(p["node"] or "" for p in pods) == ["n1"] * bound + [""] * (3 - bound)


def test_a_nodepool_without_the_key_launches_for_anti_affinity_pods(tmp_path: Path) -> None:
    """Before: nothing launched (``the node has no example.com/rack label``); now one node holds all
    three, as none of its nodes is in a domain of that key."""
    path = tmp_path / "web.yaml"
    path.write_text(yaml.safe_dump(_web(_term("podAntiAffinity"))))
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(path), "--set", "CLUSTER_NAME=x",
                        "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert all(p["node"] for p in out["pods"]) and len(out["nodes"]) == 1


def test_an_object_name_holding_a_newline_is_quoted_in_its_problems(tmp_path: Path) -> None:
    """Trial 20: a NodePool named ``"web\\n"`` split each of its problem lines in two."""
    docs = [d for d in yaml.safe_load_all((REPO / "examples/nodepools/general-purpose.yaml").read_text()) if d]
    pool = next(d for d in docs if d["kind"] == "NodePool")
    pool["metadata"]["name"] = "web\n"
    path = tmp_path / "np.yaml"
    path.write_text(yaml.safe_dump(pool))
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 2
    problems = result.stderr.strip().splitlines()[1:]
    assert problems and all(line.startswith(f"  - {path} doc 1 'NodePool/web\\n': ") for line in problems), problems


def test_an_empty_label_value_is_written_as_empty_quotes_in_reasons() -> None:
    """Trial 20: a ``nodeSelector`` value ``""`` read ``In []`` in a pending reason, an empty set."""
    from karpy_core.scheduling.requirements import Requirement

    assert Requirement.new("team", "In", [""]).describe() == 'team In [""]'
    assert Requirement.new("team", "NotIn", ["a", ""]).describe() == 'team NotIn ["", a]'


def test_a_suspended_job_creates_no_pods(tmp_path: Path) -> None:
    """Trial 21: a Job with ``suspend: true`` and ``parallelism: 4`` got 4 pods and nodes launched
    for them; the Job controller creates none while it is suspended."""
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "batch"},
           "spec": {"suspend": True, "parallelism": 4, "completions": 4, "template": {"spec": {
               "restartPolicy": "Never",
               "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}}}
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(path), "--set", "CLUSTER_NAME=x",
                        "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["pods"] == [] and out["nodes"] == []
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(path), "--set", "CLUSTER_NAME=x",
                        "--explain", "batch")
    assert result.exit_code == 2
    assert "workload batch (Job) has spec.suspend true: no pods in the simulation to explain" in result.stderr


def test_explain_of_a_pod_on_a_node_without_karpys_labels(tmp_path: Path) -> None:
    """Trial 21: ``bound to n1 (, , , NodePool None)`` for a Node given without instance-type,
    zone, capacity-type and NodePool labels."""
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([NODE, _web(_term("podAntiAffinity"))]))
    result = invoke_cli("simulate", str(path), "--explain", "web")
    assert result.exit_code == 0, result.output
    bound = [line for line in result.stdout.splitlines() if ": bound to " in line]
    assert len(bound) == 3 and all(line.endswith(": bound to n1 (no NodePool)") for line in bound), bound


STS_WITH_CLAIMS = """\
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-east-1b]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: 500m, memory: 1Gi}},
                    volumeMounts: [{name: data, mountPath: /d}]}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec: {accessModes: [ReadWriteOnce], storageClassName: gp3, resources: {requests: {storage: 10Gi}}}
"""


def test_a_statefulsets_claims_carry_their_storage_class_topology(tmp_path: Path) -> None:
    """Trial 21: a StatefulSet's pods went to us-east-1f although their claims' WaitForFirstConsumer
    StorageClass allows only us-east-1b: the claims of ``volumeClaimTemplates`` were not made, so
    the volume topology Karpenter's provisioner honours was never seen."""
    path = tmp_path / "sts.yaml"
    path.write_text(STS_WITH_CLAIMS)
    result = invoke_cli("simulate", str(REPO / "examples/nodepools/general-purpose.yaml"), str(path), "--set", "CLUSTER_NAME=x",
                        "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert len([p for p in out["pods"] if p["node"]]) == 3
    assert {n["zone"] for n in out["nodes"]} == {"us-east-1b"}


def test_ctrl_c_while_a_plugin_module_imports_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial 21: Ctrl-C while the ``aws`` entry point imported surfaced as ``SchemaError`` around
    the ``KeyboardInterrupt``; the registry skipped the entry point with a warning and the run went
    on to exit 0. An error caused by an interrupt is the interrupt again."""
    from karpy_core.apis import registry
    from karpy_core.errors import reraise_interrupt

    def broken() -> Any:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise RuntimeError("schema build failed") from exc

    class EntryPoint:
        name, value = "interrupted", "x:y"

        def load(self) -> Any:
            return broken

    monkeypatch.setattr(registry, "entry_points", lambda group: [EntryPoint()])
    with pytest.raises(KeyboardInterrupt):
        registry.api_entries()
    reraise_interrupt(RuntimeError("plain"))  # no interrupt behind it: nothing raised
