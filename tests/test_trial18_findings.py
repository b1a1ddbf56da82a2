"""New-user trial 18 findings (issue 35) not covered elsewhere: a plain Node that is not Ready went
unnamed in its pending pods' reason; a DaemonSet's summary said ``x0`` next to its pending pod; a
structured provider option given text that is not JSON got pydantic's words about item 0.

Elsewhere: the progress line's ``[sim 31s]`` (tests/sim/test_progress.py), sizing by pod slots
(tests/scheduling/test_sizing.py), resources only types without offerings have
(tests/test_trial17_findings.py), pod affinity topology keys against the real kube-apiserver
(tests/integration/test_trial18_apiserver.py; the loader's lines are checked here too)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli import invoke_cli


def _node(name: str, ready: str | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    conditions = [{"type": "Ready", "status": ready}] if ready is not None else []
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64", **(labels or {})}},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"},
                       "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110"}, "conditions": conditions}}


def _deployment(name: str, replicas: int, cpu: str, tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}


def _write(tmp_path: Path, docs: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


def _pending(out: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["reason"] for p in out["pods"] if p["node"] is None}


@pytest.mark.parametrize(("ready", "taint"), [("False", "node.kubernetes.io/not-ready:NoSchedule"),
                                              (None, "node.kubernetes.io/unreachable:NoSchedule")])
def test_a_plain_node_not_ready_is_named_in_the_pending_pods_reason(tmp_path: Path, ready: str | None, taint: str) -> None:
    """Before: ``no NodePool is available to launch capacity (none defined, or none Ready)`` alone;
    the README says the pending pods' reason names such a Node. A pod tolerating the taint is not
    told about it (it would go there: here it does)."""
    tolerating = [{"key": taint.split(":")[0], "operator": "Exists", "effect": "NoSchedule"}]
    path = _write(tmp_path, [_node("nr-plain", ready), _deployment("web", 2, "1"), _deployment("tol", 1, "1", tolerating)])
    result = invoke_cli("simulate", path, "-o", "json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    pending = _pending(out)
    assert len(pending) == 2 and all(name.startswith("web-") for name in pending)
    for reason in pending.values():
        assert reason == ("no NodePool is available to launch capacity (none defined, or none Ready); Node nr-plain is not "
                          f"Ready (no Ready condition True), so tainted {taint}, which the pod does not tolerate")
    assert [p["node"] for p in out["pods"] if p["name"].startswith("tol-")] == ["nr-plain"]


def test_the_pods_reason_names_at_most_three_nodes_not_ready(tmp_path: Path) -> None:
    docs = [_node(f"nr-{i}", "False") for i in range(5)] + [_node("big-ready", "True"), _deployment("web", 1, "100")]
    result = invoke_cli("simulate", _write(tmp_path, docs), "-o", "json")
    assert result.exit_code == 0, result.output
    (reason,) = _pending(json.loads(result.stdout)).values()
    assert "; Nodes nr-0, nr-1, nr-2 (+2 more) are not Ready (no Ready condition True), so tainted " in reason
    assert "big-ready" not in reason


def test_a_daemonset_summary_counts_its_pending_pods(tmp_path: Path) -> None:
    """Before: ``agent (cpu 1, memory 512Mi) x0`` while ``default/agent-...`` was listed pending."""
    daemonset = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
                 "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {
                     "metadata": {"labels": {"app": "agent"}},
                     "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "15500m"}}}]}}}}
    path = _write(tmp_path, [_node("small", "True"), _deployment("hog", 1, "1"), daemonset])
    result = invoke_cli("simulate", path)
    assert result.exit_code == 0, result.output
    assert "1 DaemonSet (overhead on every node they run on): agent (cpu 15500m) x0 (1 pending)" in result.stdout
    assert "pods: 1 bound, 1 pending" in result.stdout
    out = json.loads(invoke_cli("simulate", path, "-o", "json").stdout)
    assert [(d["name"], d["pods"], d["pending"]) for d in out["daemonsets"]] == [("agent", 0, 1)]


@pytest.mark.parametrize("text", ["notjson", "a,b", "[bad", '{"id": "cr-1"}'])
def test_a_list_of_objects_option_given_other_text_says_it_takes_json(text: str) -> None:
    """Before: ``reservations.0: Input should be a valid dictionary or instance of SimulatedReservation``."""
    result = invoke_cli("simulate", "--provider-option", f"reservations={text}")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == (
        "error: simulated provider: invalid option(s): reservations: expected a list of objects ('[{...}, ...]') in JSON; "
        "the text given is not one")
    # a JSON list with a bad item still gets the field's own words
    result = invoke_cli("simulate", "--provider-option", 'reservations=[{"id": "cr-1"}]')
    assert result.exit_code == 2 and "reservations.0.instanceType: Field required" in result.stderr


@pytest.mark.parametrize(("key", "problem"), [
    ("", "topologyKey: Required value: can not be empty"),
    ("-bad-", "topologyKey: Invalid value: '-bad-': name part must consist of alphanumeric characters"),
])
def test_a_pod_affinity_term_needs_a_label_key_as_topology_key(tmp_path: Path, key: str, problem: str) -> None:
    """Before: ``valid: 1 Deployment``, and simulate launched nodes for pods kube-apiserver refuses."""
    web = _deployment("web", 1, "1")
    web["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": key}]}}
    path = _write(tmp_path, [web])
    for command in ("validate", "simulate"):
        result = invoke_cli(command, path)
        assert result.exit_code == 2, result.output
        assert ("Deployment/web: spec.template.spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                f"[0].{problem}") in result.stderr


def test_a_mistyped_label_with_a_dotted_key_is_said_once(tmp_path: Path) -> None:
    """Before: twice, as ``metadata.labels.node.kubernetes.io/instance-type: must be a string; got a
    list`` and as ``metadata.labels["node.kubernetes.io/instance-type"]: ...`` (the schema walk and
    the model wrote the path differently, so the second was not seen as said)."""
    web = _deployment("web", 1, "1")
    web["metadata"]["labels"] = {"node.kubernetes.io/instance-type": ["a"], "tier": True}
    result = invoke_cli("validate", _write(tmp_path, [web]))
    assert result.exit_code == 2
    problems = [line for line in result.stderr.splitlines() if line.startswith("  - ")]
    assert [p.split(": ", 1)[1] for p in problems] == [
        'metadata.labels["node.kubernetes.io/instance-type"]: must be a string; got a list',
        "metadata.labels.tier: must be a string; got true (quote it in YAML so it stays text)"], problems

