"""New-user trial 15 findings (issue 35): an inline NodePool applied by a Scenario step after the
step applying its NodeClass brought the "not among the loaded manifests" warning back when the
simulation ran the step (validate did not print it); a misspelt kind in a version karpy knows
every kind of (``kind: Nodepool`` in ``karpenter.sh/v1``) was ignored with a warning, and the
NodePool lost, where kubectl refuses it (``no matches for kind``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli import invoke_cli
from tests.test_trial14_findings import _scenario_file

INLINE_POOL = """\
  - at: 1m
    apply:
      - apiVersion: karpenter.sh/v1
        kind: NodePool
        metadata: {name: extra}
        spec:
          template:
            spec:
              nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
              requirements: []
"""


def test_an_inline_nodepool_after_its_nodeclass_warns_in_neither_command(tmp_path: Path) -> None:
    path = _scenario_file(tmp_path, "  - {at: 0s, apply: class.yaml}\n" + INLINE_POOL)
    for command in (["validate"], ["simulate", "--until", "5m"]):
        result = invoke_cli(*command, str(path))
        assert result.exit_code == 0, result.output
        assert "not among the loaded manifests" not in result.output, (command, result.output)


def test_an_inline_nodepool_before_its_nodeclass_warns_in_both_once(tmp_path: Path) -> None:
    path = _scenario_file(tmp_path, INLINE_POOL + "  - {at: 10m, apply: class.yaml}\n")
    for command in (["validate"], ["simulate", "--until", "20m"]):
        result = invoke_cli(*command, str(path))
        assert result.exit_code == 0, result.output
        assert result.output.count("which is not among the loaded manifests") == 1, (command, result.output)


@pytest.mark.parametrize(("api_version", "kind", "said"), [
    ("karpenter.sh/v1", "Nodepool", 'no matches for kind "Nodepool" in version "karpenter.sh/v1"; did you mean NodePool?'),
    ("karpenter.sh/v1", "NodeClam", 'no matches for kind "NodeClam" in version "karpenter.sh/v1"; did you mean NodeClaim?'),
    ("karpenter.sh/v1", "Widget", 'no matches for kind "Widget" in version "karpenter.sh/v1"; karpenter.sh/v1 serves NodeClaim, NodePool'),
    ("karpenter.k8s.aws/v1", "EC2Nodeclass",
     'no matches for kind "EC2Nodeclass" in version "karpenter.k8s.aws/v1"; did you mean EC2NodeClass?'),
])
def test_a_kind_the_version_does_not_serve_is_refused_by_both(tmp_path: Path, api_version: str, kind: str, said: str) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(f"apiVersion: {api_version}\nkind: {kind}\nmetadata: {{name: x}}\nspec: {{}}\n")
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(path))
        assert result.exit_code == 2, result.output
        assert f"{path} doc 1 {kind}/x: kind: {said}" in result.stderr, result.stderr


def test_a_kind_of_another_karpenter_version_is_still_ignored(tmp_path: Path) -> None:
    """karpenter.sh/v1alpha1 (NodeOverlay's version) may serve kinds karpy does not model: listed as ignored."""
    path = tmp_path / "in.yaml"
    path.write_text("apiVersion: karpenter.sh/v1alpha1\nkind: NodeExample\nmetadata: {name: x}\nspec: {}\n")
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 0 and "karpy does not model karpenter.sh/v1alpha1 NodeExample; ignored" in result.output


def test_the_total_writes_dollars_with_thousands_separators() -> None:
    """Trial 15: ``~2806993.08 USD/month`` at 100,000 pods, where the counts beside it read ``20,000``."""
    from karpy_core.scheduling.resources import Resources
    from karpy_core.sim.optimum import Reference
    from karpy_core.sim.report import NodeReport, SimulationReport, render_text

    nodes = [NodeReport(f"n{i}", "default", "c6a.48xlarge", "us-east-1a", "on-demand", 7.344, {}, [],
                        Resources(), Resources(), launched=True) for i in range(500)]
    report = SimulationReport(provider={"inputs": "in.yaml"}, nodes=nodes, pods=[], events=[], workloads=[],
                              reference=Reference("lower bound", 3_500.5, {"c6a.48xlarge": 480}, 0, 0, note="LP bound"))
    lines = render_text(report).splitlines()
    assert "total: 500 nodes (500 launched by karpy), 3,672.0000 USD/hour (~2,680,560.00 USD/month at 730 h)" in lines
    assert any(line.startswith("lower bound: 3,500.5000 USD/hour") and "at most 171.5000 USD/hour more" in line
               for line in lines)


_POOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {ref}}}
      requirements: []
{extra}"""


def test_warnings_come_in_file_order(tmp_path: Path) -> None:
    """Trial 15: a NodePool's missing-NodeClass warning came after every warning read from the
    files, so ``b.yaml``'s dropped null was printed before ``a.yaml``'s missing NodeClass. The
    NodePool checks made once every file is read now go with their NodePool."""
    from karpy_core.apis.loader import load_documents

    (tmp_path / "a.yaml").write_text(_POOL.format(name="a", ref="missing-a", extra="  limits: {cpu: '-1'}\n"))
    (tmp_path / "b.yaml").write_text(_POOL.format(name="b", ref="missing-b", extra="  limits: {cpu: null}\n"))
    loaded = load_documents([tmp_path])
    assert [(w.split()[0].rpartition("/")[2], w.split(": ", 2)[1]) for w in loaded.warnings] == [
        ("a.yaml", "spec.limits.cpu"), ("a.yaml", "spec.template.spec.nodeClassRef names karpenter.k8s.aws EC2NodeClass/missing-a, "
                                                  "which is not among the loaded manifests"),
        ("b.yaml", "spec.limits.cpu"), ("b.yaml", "spec.template.spec.nodeClassRef names karpenter.k8s.aws EC2NodeClass/missing-b, "
                                                  "which is not among the loaded manifests")]
    assert "negative" in loaded.warnings[0] and "null dropped" in loaded.warnings[2]
    # the missing NodeClasses as data (the Scenario reads these, not the text)
    assert sorted(loaded.missing_node_classes.values()) == [("karpenter.k8s.aws", "EC2NodeClass", "missing-a"),
                                                            ("karpenter.k8s.aws", "EC2NodeClass", "missing-b")]
    assert set(loaded.missing_node_classes) == {loaded.warnings[1], loaded.warnings[3]}
