"""``karpy validate`` and ``karpy simulate`` on hostile input: a one-line error and exit 2, or a
normal report, never a traceback (issue 10, section 4). Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from karpy_core.cli import app

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: r
  subnetSelectorTerms: [{{tags: {{a: b}}}}]
  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]
  amiSelectorTerms: [{{alias: al2023@latest}}]
"""


def deployment(name: str = "web", replicas: int = 1, containers: list[dict] | None = None) -> str:
    containers = containers or [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: {json.dumps(containers)}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def invoke(*args: str):
    result = CliRunner().invoke(app, list(args))
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def test_negative_cpu_is_refused_by_validate_and_simulate(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(replicas=50, containers=[{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]))
    for command in ("validate", "simulate"):
        result = invoke(command, np_file, app_file)
        assert result.exit_code == 2, result.output
        assert "spec.template.spec.containers[0].resources.requests.cpu: must not be negative; got '-1'" in result.stderr


def test_containers_summing_beyond_int64_leave_the_pod_pending(tmp_path):
    # each request fits a Kubernetes quantity (2^63-1 cores), their sum in millicores does not fit int64
    huge = {"requests": {"cpu": "9223372036854775807"}}
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(containers=[{"name": "a", "resources": huge}, {"name": "b", "resources": huge}]))
    result = invoke("simulate", np_file, app_file, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["pods_pending"] == 1 and doc["summary"]["nodes_launched"] == 0
    assert "no instance type has room" in doc["pods"][0]["reason"]


def test_nodepool_named_dash_x_fails_fast_with_one_message(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name='"-x"'))
    app_file = write(tmp_path, "app.yaml", deployment())
    for command in ("validate", "simulate"):
        result = invoke(command, np_file, app_file)
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 2, result.stderr  # the header and one problem
        assert "NodePool/-x: metadata.name: must be a lowercase RFC 1123 subdomain" in result.stderr
