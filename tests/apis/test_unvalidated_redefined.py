"""A NodeClass whose plugin is not installed, defined twice: the "not validated" warning names the
definition that is used (the later one), as ``karpy validate``'s listing does (a fresh-user check:
simulate named the first file, validate the last)."""

from __future__ import annotations

from pathlib import Path

from karpy_core.apis.loader import load_documents
from karpy_core.apis.registry import kind_registry

NODECLASS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms: [{{alias: al2023@latest}}]
  role: {role}
"""


def test_the_not_validated_warning_names_the_definition_used(tmp_path: Path) -> None:
    registry = {k: v for k, v in kind_registry().items() if k[1] != "EC2NodeClass"}  # karpy-aws not installed
    (tmp_path / "a.yaml").write_text(NODECLASS.format(role="first"))
    (tmp_path / "b.yaml").write_text(NODECLASS.format(role="second"))
    loaded = load_documents([str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml")], registry=registry)
    lines = [w for w in loaded.warnings if "not validated" in w]
    assert lines == [f"{tmp_path / 'b.yaml'} doc 1 EC2NodeClass/default: not validated: its plugin, "
                     "karpy-aws (providers/aws), is not installed (the simulated cloud does not need it)"]
    assert loaded.unvalidated_warnings == lines
    [used] = [o for o in loaded.other if o.kind == "EC2NodeClass"]
    assert used.model_dump(mode="json", by_alias=True)["spec"]["role"] == "second"
