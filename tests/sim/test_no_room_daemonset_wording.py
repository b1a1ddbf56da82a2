"""A pod no type has room for: "plus DaemonSet overhead" only when DaemonSets take room."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from karpy_core.cli import app

BIG_POD = """apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, image: nginx, resources: {requests: {cpu: "1000"}}}]
"""
DAEMONSET = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers: [{name: a, image: agent, resources: {requests: {cpu: 100m}}}]
"""


def _reason(tmp_path: Path, examples_dir: Path, *docs: str) -> str:
    path = tmp_path / "in.yaml"
    path.write_text("---\n".join(docs))
    result = CliRunner().invoke(app, ["simulate", str(examples_dir / "nodepools/general-purpose.yaml"), str(path),
                                      "--set", "CLUSTER_NAME=demo", "-o", "json"])
    assert result.exit_code == 0, result.output
    pod = next(p for p in json.loads(result.stdout)["pods"] if p["name"] == "big")
    assert pod["node"] is None
    return str(pod["reason"])


def test_no_daemonsets_no_overhead_words(tmp_path: Path, examples_dir: Path) -> None:
    reason = _reason(tmp_path, examples_dir, BIG_POD)
    assert "no instance type has room for the pod's requests (cpu 1000, pods 1)" in reason
    assert "DaemonSet" not in reason


def test_with_a_daemonset_the_overhead_is_named(tmp_path: Path, examples_dir: Path) -> None:
    reason = _reason(tmp_path, examples_dir, BIG_POD, DAEMONSET)
    assert "no instance type has room for the pod's requests (cpu 1000, pods 1) plus DaemonSet overhead" in reason
