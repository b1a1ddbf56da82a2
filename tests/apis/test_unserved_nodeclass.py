"""A NodeClass in the manifests whose kind no installed plugin models (trial 9: ``karpy-zeta``
uninstalled): ``karpy validate`` says no installed cloud provider plugin serves its group/kind,
not that the NodePool's NodeClass is missing from the manifests, nor "kind not modelled"."""

from __future__ import annotations

from pathlib import Path

from karpy_core.apis.loader import load_text
from tests.cli import invoke_cli

TEXT = """
apiVersion: zeta.example.io/v1beta1
kind: ZetaNodeClass
metadata: {name: default}
spec: {flavorImage: zimg-7}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: zp}
spec:
  template:
    spec:
      nodeClassRef: {group: zeta.example.io, kind: ZetaNodeClass, name: default}
      requirements: []
"""
SERVES = "no installed cloud provider plugin serves zeta.example.io/ZetaNodeClass (karpy providers lists what is installed)"


def test_the_loader_says_no_installed_plugin_serves_the_kind() -> None:
    loaded = load_text(TEXT, "z.yaml")
    assert loaded.warnings == [
        f"z.yaml doc 2 NodePool/zp: spec.template.spec.nodeClassRef names zeta.example.io ZetaNodeClass/default: {SERVES}"]


def test_a_missing_nodeclass_of_an_unknown_kind_is_still_said_missing() -> None:
    text = TEXT.split("---", 1)[1]
    assert load_text(text, "z.yaml").warnings == [
        "z.yaml doc 1 NodePool/zp: spec.template.spec.nodeClassRef names zeta.example.io ZetaNodeClass/default, "
        "which is not among the loaded manifests"]


def test_validate_names_the_unserved_kind(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(TEXT)
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert f"not validated: {SERVES}: zeta.example.io/v1beta1 ZetaNodeClass/default ({path} doc 1)" in lines
    assert not any("kind not modelled" in line or "not among the loaded manifests" in line for line in lines), lines
