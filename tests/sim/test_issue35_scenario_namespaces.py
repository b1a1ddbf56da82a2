"""Issue 35 leftovers (fix35): a Scenario's steps name a workload by kind, namespace and name (a
step without ``namespace:`` means ``default``, as kubectl): two Deployments ``web`` in namespaces
``a`` and ``b`` are two workloads for the 404 checks and the pod cap, and messages name
``Kind/namespace/name``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import invoke_cli
from tests.test_input_classes import _nodepool, _problems, _write

# --------------------------------------------------------------------------- 4. steps name kind, namespace and name

WEB = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {ns}}}
spec:
  replicas: 3
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: c, image: pause, resources: {{requests: {{cpu: 100m}}}}}}]
"""


def _two_webs(tmp_path: Path, later: str) -> str:
    """A Scenario applying a NodePool and a Deployment ``web`` in namespaces ``a`` and ``b`` at 0s, then ``later`` at 1h."""
    _write(tmp_path, "np.yaml", _nodepool())
    _write(tmp_path, "webs.yaml", WEB.format(ns="a") + "---\n" + WEB.format(ns="b"))
    return _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nsteps:\n"
                                      "  - {at: 0s, apply: [np.yaml, webs.yaml]}\n" + f"  - {{at: 1h, {later}}}\n")


def test_two_workloads_of_one_name_in_two_namespaces_both_count(tmp_path: Path) -> None:
    scenario = _two_webs(tmp_path, "scale: {deployment: web, namespace: b, replicas: 5}")
    result = invoke_cli("validate", scenario, "--max-pods", "7")
    assert _problems(result) == [f"{scenario}: steps[1].scale: Deployment/b/web: spec.replicas: 5 pods; the simulation "
                                 "would hold 8 pods, more than its cap of 7 (karpy validate --max-pods)"]


def test_a_step_without_namespace_names_the_workload_in_default(tmp_path: Path) -> None:
    scenario = _two_webs(tmp_path, "delete: {kind: Deployment, name: web}")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, scenario)
        assert _problems(result) == [f"{scenario}: steps[1].delete: 404 NotFound: Deployment/default/web does not exist "
                                     "at 1h (no earlier step applies it)"], command


def test_the_run_names_the_workload_by_namespace(tmp_path: Path) -> None:
    scenario = _two_webs(tmp_path, "delete: {kind: Deployment, name: web, namespace: a}")
    result = invoke_cli("simulate", scenario, "--until", "2h", "-o", "json", "--max-pods", "6")
    assert result.exit_code == 0, result.output
    reasons = [e.get("reason") for e in json.loads(result.stdout)["events"] if e["kind"] == "scenario"]
    assert reasons == ["apply: 4 created, 0 updated", "delete Deployment/a/web (and 4 dependent objects)"]
