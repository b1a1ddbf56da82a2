"""``karpy validate`` and ``karpy simulate`` name an object the same way: ``Kind/name``, or
``Kind/namespace/name`` when the manifest sets a namespace (as ``KubeObject.ref`` does)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {{name: web{namespace}}}
spec:
  replicas: 5
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: c, image: nginx, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def _problem_lines(args: list[str]) -> list[str]:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    return [line for line in result.stderr.splitlines() if line.startswith("  - ")]


@pytest.mark.parametrize(("namespace", "ref"), [("", "Deployment/web"), (", namespace: shop", "Deployment/shop/web")])
def test_pod_cap_problem_names_the_workload_alike(tmp_path: Path, examples_dir: Path, namespace: str, ref: str) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(DEPLOYMENT.format(namespace=namespace))
    validated = _problem_lines(["validate", str(path), "--max-pods", "2"])
    simulated = _problem_lines(["simulate", str(examples_dir / "nodepools/general-purpose.yaml"), str(path), "--max-pods", "2",
                                "--set", "CLUSTER_NAME=demo"])
    assert [line.replace("karpy validate", "karpy simulate") for line in validated] == simulated
    assert simulated == [f"  - {path} doc 1 {ref}: spec.replicas: 5 pods; the simulation would hold 5 pods, more than its cap "
                         "of 2 (karpy simulate --max-pods)"]


def test_field_problems_name_the_namespace_as_the_other_messages_do(tmp_path: Path) -> None:
    path = tmp_path / "app.yaml"
    path.write_text(DEPLOYMENT.format(namespace=", namespace: shop").replace("replicas: 5", "replicas: 5\n  bogus: 1"))
    validated = _problem_lines(["validate", str(path)])
    assert validated == _problem_lines(["simulate", str(path)])
    assert validated[0].startswith(f"  - {path} doc 1 Deployment/shop/web: spec.bogus: unknown field")
