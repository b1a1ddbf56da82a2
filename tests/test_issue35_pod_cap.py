"""Issue 35 leftovers (fix35): ``karpy simulate`` and ``karpy validate`` check the pod cap of plain
manifests with one function (``_check_pod_cap`` over ``pod_cap_problem``), so they cannot drift."""

from __future__ import annotations

from pathlib import Path

from tests.cli import invoke_cli
from tests.test_input_classes import _nodepool, _write

# --------------------------------------------------------------------------- 5. one pod cap for plain manifests

OWNED_POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web-abc-1
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-abc, uid: u1, controller: true}]
spec:
  containers: [{name: c, image: pause, resources: {requests: {cpu: 100m}}}]
"""


def test_simulate_counts_the_pod_cap_as_validate_does(tmp_path: Path) -> None:
    """A pod its owner counts is not counted again: validate accepted these two pods under
    ``--max-pods 1`` while simulate refused them (its own count took every Pod)."""
    nodepool = _write(tmp_path, "np.yaml", _nodepool())
    app = _write(tmp_path, "app.yaml", OWNED_POD + "---\n" + OWNED_POD.replace("web-abc-1", "bare").replace(
        "  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-abc, uid: u1, controller: true}]\n", ""))
    validated = invoke_cli("validate", nodepool, app, "--max-pods", "1")
    simulated = invoke_cli("simulate", nodepool, app, "--max-pods", "1")
    assert validated.exit_code == 0, validated.output
    assert simulated.exit_code == 0, simulated.output


def test_one_pod_cap_function() -> None:
    import karpy_core.cli as cli

    text = Path(cli.__file__).read_text()
    assert text.count("pod_cap_problem(") == 1 and text.count("_check_pod_cap(") == 3  # its definition and the two commands
