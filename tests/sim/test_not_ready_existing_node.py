"""An existing Node karpy does not manage, given without a ``Ready=True`` condition (trial 9's
fuzzer, c0087/c0099): the provisioner and the simulated kube-scheduler decide alike. Neither
filters on conditions (kube-scheduler does not; Karpenter counts an unmanaged node as initialized
capacity, ``statenode.go``); both see the taint kube-controller-manager's node lifecycle controller
keeps on a Node not Ready (``node.kubernetes.io/unreachable:NoSchedule`` without a Ready
condition or with ``Unknown``, ``node.kubernetes.io/not-ready:NoSchedule`` with ``False``), so a
pod that does not tolerate it gets a new node and one that does is bound to the existing node."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.state.views import NodeView
from tests.cli import invoke_cli

DATA = Path(__file__).resolve().parents[1] / "data" / "trial9"


def _simulate(tmp_path: Path, docs: list[dict[str, Any]]) -> dict[str, Any]:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    result = invoke_cli("simulate", str(path), "-o", "json")
    assert result.exit_code == 0, result.output
    out: dict[str, Any] = json.loads(result.stdout)
    return out


def _docs(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all((DATA / name).read_text()))


@pytest.mark.parametrize(("name", "replicas"), [("c0087_existing_node.yaml", 1), ("c0099_existing_node.yaml", 5)])
def test_a_node_without_conditions_is_not_used_and_the_pods_get_a_new_node(tmp_path: Path, name: str, replicas: int) -> None:
    out = _simulate(tmp_path, _docs(name))
    assert out["summary"]["pods_bound"] == replicas and out["summary"]["pods_pending"] == 0
    assert out["summary"]["nodes_launched"] == 1
    assert {p["node"] for p in out["pods"]} != {"n1"} and all(p["node"] != "n1" for p in out["pods"])


def test_a_ready_node_with_room_is_used_and_nothing_is_launched(tmp_path: Path) -> None:
    docs = _docs("c0087_existing_node.yaml")
    node = next(d for d in docs if d["kind"] == "Node")
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    out = _simulate(tmp_path, docs)
    assert out["summary"]["nodes_launched"] == 0 and out["summary"]["pods_pending"] == 0
    assert [p["node"] for p in out["pods"]] == ["n1"]


@pytest.mark.parametrize(("ready", "key"), [(None, "node.kubernetes.io/unreachable"),
                                            ("Unknown", "node.kubernetes.io/unreachable"),
                                            ("False", "node.kubernetes.io/not-ready")])
def test_a_pod_tolerating_the_lifecycle_taint_is_bound_to_the_not_ready_node(tmp_path: Path, ready: str | None, key: str) -> None:
    docs = _docs("c0087_existing_node.yaml")
    node = next(d for d in docs if d["kind"] == "Node")
    if ready is not None:
        node["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["tolerations"] = [{"key": key, "operator": "Exists", "effect": "NoSchedule"}]
    out = _simulate(tmp_path, docs)
    assert out["summary"]["nodes_launched"] == 0 and out["summary"]["pods_pending"] == 0
    assert [p["node"] for p in out["pods"]] == ["n1"]


def test_scheduling_taints_add_the_lifecycle_taint_once() -> None:
    def view(conditions: list[dict[str, str]] | None, taints: list[dict[str, str]] | None = None) -> NodeView:
        status: dict[str, Any] = {} if conditions is None else {"conditions": conditions}
        return NodeView.of({"metadata": {"name": "n"}, "spec": {"taints": taints or []}, "status": status})

    assert [str(t) for t in view(None).scheduling_taints] == ["node.kubernetes.io/unreachable:NoSchedule"]
    assert [str(t) for t in view([{"type": "Ready", "status": "False"}]).scheduling_taints] == [
        "node.kubernetes.io/not-ready:NoSchedule"]
    assert view([{"type": "Ready", "status": "True"}]).scheduling_taints == ()
    already = view([{"type": "Ready", "status": "False"}], [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    assert [str(t) for t in already.scheduling_taints] == ["node.kubernetes.io/not-ready:NoSchedule"]
