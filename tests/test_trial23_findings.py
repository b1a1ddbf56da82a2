"""New-user trial 23 findings (issue 35): a DaemonSet pod bound next to a pod holding its host port
(the simulated DaemonSet controller skipped kube-scheduler's NodePorts filter; the real one is in
tests/integration/test_trial23_scheduler.py), and a Scenario run that did not name the NodePools
its provider leaves out, as a plain run does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.cli import invoke_cli

REPO = Path(__file__).resolve().parents[1]

NODE: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "existing-1", "labels": {"kubernetes.io/hostname": "existing-1", "kubernetes.io/arch": "amd64",
                                                  "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "us-east-1a"}},
    "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
               "allocatable": {"cpu": "3920m", "memory": "14Gi", "pods": "58"}, "conditions": [{"type": "Ready", "status": "True"}]},
}


def _spec(port: int) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "ports": [{"containerPort": port, "hostPort": port}],
                            "resources": {"requests": {"cpu": "100m"}}}]}


DAEMONSET: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
             "spec": {"selector": {"matchLabels": {"app": "agent"}},
                      "template": {"metadata": {"labels": {"app": "agent"}}, "spec": _spec(9100)}}}
DEPLOYMENT: dict[str, Any] = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "p"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "p"}},
                       "template": {"metadata": {"labels": {"app": "p"}}, "spec": _spec(9100)}}}


def _ports_per_node(report: dict[str, Any]) -> dict[str, list[str]]:
    return {n["name"]: n["pods"] for n in report["nodes"]}


def test_a_daemonset_pod_does_not_share_a_host_port_with_a_pod_bound_first(tmp_path: Path) -> None:
    """Trial 23: ``existing-1 ['default/agent-...', 'default/p-...']``, both holding 9100/TCP."""
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([NODE, DAEMONSET, DEPLOYMENT]))
    result = invoke_cli("simulate", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    on_node = _ports_per_node(report)["existing-1"]
    assert len(on_node) == 1, on_node  # one holder of 9100/TCP: the Deployment's pod bound first
    pending = {p["name"]: p["reason"] for p in report["pods"] if not p["node"]}
    agent = [reason for name, reason in pending.items() if name.startswith("agent-")]
    assert agent == ["pending: DaemonSet pod for Node existing-1, where a pod bound first holds its host port 9100/TCP "
                     "(kube-scheduler's NodePorts filter); kube-scheduler leaves it Pending and Karpenter does not "
                     "provision for DaemonSet pods"], pending


def test_a_pod_arriving_after_the_daemonset_pod_stays_off_its_port(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump_all([NODE, DAEMONSET]))
    (tmp_path / "dep.yaml").write_text(yaml.safe_dump(DEPLOYMENT))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: hp}\nuntil: 1h\nsteps:\n"
                        "  - {at: 0s, apply: base.yaml}\n  - {at: 10m, apply: dep.yaml}\n")
    result = invoke_cli("simulate", str(scenario), "-o", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [p.split("/")[1].split("-")[0] for p in _ports_per_node(report)["existing-1"]] == ["agent"]
    assert sorted(p["name"].split("-")[0] for p in report["pods"] if not p["node"]) == ["p", "p"]


def test_a_scenario_names_the_nodepools_its_provider_leaves_out(tmp_path: Path) -> None:
    pools = tmp_path / "pools.yaml"
    pools.write_text("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: foo}\nspec:\n  template:\n    spec:\n"
                     "      nodeClassRef: {group: example.com, kind: FooNodeClass, name: x}\n      requirements: []\n")
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: lo}\nuntil: 1h\nsteps:\n"
                        f"  - {{at: 0s, apply: [pools.yaml, {REPO / 'examples/workloads/inflate.yaml'}]}}\n")
    result = invoke_cli("simulate", str(scenario))
    assert result.exit_code == 0, result.output
    assert (f"warning: {scenario}: NodePool/foo: left out, launches nothing: its NodeClass kind FooNodeClass (example.com) "
            "is not served by cloud provider simulated") in result.output, result.output


# ---------------------------------------------------------------- trial 24
def test_a_pod_a_nodes_host_port_turns_away_is_told_which_node_and_port(tmp_path: Path) -> None:
    """Trial 24: with no NodePool, the reason said only "no NodePool is available"; the port was in ``--explain``."""
    web = {**DEPLOYMENT, "metadata": {"name": "web"}, "spec": {**DEPLOYMENT["spec"], "replicas": 2}}
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([NODE, web]))
    result = invoke_cli("simulate", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    (reason,) = [p["reason"] for p in json.loads(result.stdout)["pods"] if not p["node"]]
    assert reason == ("no NodePool is available to launch capacity (none defined, or none Ready); "
                      "Node existing-1 has host port 9100/TCP in use")


def test_the_namespaces_kube_apiserver_creates_may_be_patched_by_a_step(tmp_path: Path) -> None:
    """Trial 24: a patch of Namespace ``default`` was a 404 (it "does not exist") beside the 403 for its delete."""
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: ns}\nuntil: 2h\nsteps:\n"
                        f"  - {{at: 0s, apply: {REPO / 'examples/workloads/inflate.yaml'}}}\n"
                        "  - {at: 1h, patch: {kind: Namespace, name: kube-system, patch: {metadata: {labels: {team: blue}}}}}\n")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(scenario))
        assert result.exit_code == 0, result.output
    result = invoke_cli("simulate", str(scenario), "-o", "json")
    assert any(e["kind"] == "scenario" and "patch Namespace/kube-system" in str(e["reason"]) for e in json.loads(result.stdout)["events"])


def test_one_bad_object_in_an_apply_step_is_one_problem_not_false_404s_later(tmp_path: Path) -> None:
    """Trial 24: a PDB with ``minAvailable: -1`` beside a valid Deployment and NodePool made the later
    ``scale`` and ``patch`` steps on those "404 NotFound ... (no earlier step applies it)"."""
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "p"},
           "spec": {"minAvailable": -1, "selector": {"matchLabels": {"app": "p"}}}}
    (tmp_path / "base.yaml").write_text(yaml.safe_dump_all([DEPLOYMENT, pdb]))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: c}\nuntil: 3h\nsteps:\n"
                        f"  - {{at: 0s, apply: [{REPO / 'examples/nodepools/general-purpose.yaml'}, base.yaml]}}\n"
                        "  - {at: 1h, scale: {deployment: p, replicas: 5}}\n"
                        "  - {at: 2h, patch: {kind: NodePool, name: general-purpose, patch: {metadata: {labels: {a: b}}}}}\n"
                        "  - {at: 150m, delete: {kind: Deployment, name: p}}\n"
                        "  - {at: 160m, scale: {deployment: p, replicas: 1}}\n")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(scenario), "--set", "CLUSTER_NAME=demo")
        assert result.exit_code == 2, result.output
        assert [line for line in result.output.splitlines() if line.startswith("  - ")] == [
            f"  - {scenario}: steps[0].apply: {tmp_path / 'base.yaml'} doc 2 PodDisruptionBudget/p: spec.minAvailable: "
            "must not be negative; got -1",
            f"  - {scenario}: steps[4].scale: 404 NotFound: Deployment/default/p does not exist at 2h40m "
            "(steps[3] deleted it at 2h30m)"], result.output


def test_an_apply_list_mixing_file_names_and_manifests_says_so(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text("apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: m}\nuntil: 2h\nsteps:\n"
                        f"  - at: 0s\n    apply:\n    - {REPO / 'examples/nodepools/general-purpose.yaml'}\n"
                        f"    - {json.dumps(DEPLOYMENT)}\n  - {{at: 1h, scale: {{deployment: p, replicas: 3}}}}\n")
    result = invoke_cli("validate", str(scenario))
    assert result.exit_code == 2, result.output
    assert [line for line in result.output.splitlines() if line.startswith("  - ")] == [
        f"  - {scenario}: steps[0].apply: a list of file or directory names, or of inline manifests, not both; "
        "give each its own step"]
