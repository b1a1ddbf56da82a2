"""A fresh user's trial (val45): where the loader disagreed with kube-apiserver v1.36.3 or said
less than it does for built-in kinds, now agreeing. The real API server's answers to the same
manifests are compared in ``tests/integration/test_trial3_apiserver.py`` and
``tests/integration/test_trial5_apiserver.py`` (val45 cases)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import LoadedManifests, load_text
from karpy_core.errors import ManifestError
from karpy_core.utils.kubeyaml import KubeYAMLDumper

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}
NODEPOOL: dict[str, Any] = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "np"},
                            "spec": {"template": {"spec": {"requirements": [], "nodeClassRef": REF}}}}


def load(text: str) -> LoadedManifests:
    return load_text(text, "in.yaml")


def problems(obj: dict[str, Any] | str) -> list[str]:
    try:
        load(obj if isinstance(obj, str) else yaml.dump(obj, Dumper=KubeYAMLDumper))
    except ManifestError as exc:
        return list(exc.problems)
    return []


# ----------------------------------------------------------------- unknown fields of karpy's kinds

NODEPOOL_TYPOS = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: np}
spec:
  limitz: {cpu: 10}
  disruption:
    budgets: [{nodess: "10%"}]
  template:
    spec:
      taint: []
      requirements: [{key: kubernetes.io/arch, operater: In, values: [amd64]}]
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}
"""
NODECLAIM_TYPOS = """\
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: nc}
spec:
  requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}
  expireAftr: 720h
"""
EC2_TYPOS = """\
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: d}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tagss: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
  metadataOptions: {httpTokenz: required}
"""
KC_TYPOS = """\
apiVersion: karpenter.kakaocloud.com/v1alpha1
kind: KCNodeClass
metadata: {name: d}
spec:
  subnetSelectorTerms: [{id: s}]
  securityGroupSelectorTerms: [{id: g}]
  bootstrap: {kubernetesVersion: "1.31"}
  rootVolume: {sizeGib: 50}
"""


@pytest.mark.parametrize(("text", "expected"), [
    (NODEPOOL_TYPOS, {"spec.limitz": "limits", "spec.disruption.budgets[0].nodess": "nodes",
                      "spec.template.spec.taint": "taints", "spec.template.spec.requirements[0].operater": "operator"}),
    (NODECLAIM_TYPOS, {"spec.expireAftr": "expireAfter"}),
    (EC2_TYPOS, {"spec.subnetSelectorTerms[0].tagss": "tags", "spec.metadataOptions.httpTokenz": "httpTokens"}),
    (KC_TYPOS, {"spec.rootVolume.sizeGib": "sizeGiB"}),
])
def test_an_unknown_field_of_a_karpy_kind_gets_a_did_you_mean(text: str, expected: dict[str, str]) -> None:
    """Built-in kinds named the closest declared field (``imagePullPolicyy`` -> ``imagePullPolicy``);
    NodePool, NodeClaim, EC2NodeClass and KCNodeClass said only "unknown field"."""
    found = problems(text)
    for path, suggestion in expected.items():
        line = next((p for p in found if f": {path}: unknown field" in p), None)
        assert line is not None, (path, found)
        assert line.endswith(f"did you mean {suggestion!r}?"), line
    assert len([p for p in found if "unknown field" in p]) == len(expected), found


def test_an_unknown_field_far_from_any_declared_one_gets_no_suggestion() -> None:
    (line,) = problems({**NODEPOOL, "spec": {**NODEPOOL["spec"], "zzzzzz": 1}})
    assert 'unknown field "zzzzzz"' in line and "did you mean" not in line, line
