"""Parity with the real kube-apiserver for trial 14's findings 2 and 5 (fix14b): an EC2NodeClass
read without karpy-aws is type-checked as the API server checks it against the CRD's structural
schema (same fields refused, same accepted), and a NodePool update adding ``spec.replicas`` to a
pool with ``weight`` breaks both the transition rule and the weight rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import load_text
from karpy_core.apis.registry import kind_registry
from karpy_core.errors import KubeAPIError, ManifestError

pytestmark = pytest.mark.devcluster

VALID_SPEC: dict[str, Any] = {"role": "KarpenterNodeRole-demo", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                              "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}
VALID: dict[str, Any] = {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "trial14"},
         "spec": VALID_SPEC}

CASES: dict[str, tuple[Any, str]] = {
    # name: (spec, the field both refuse; "" when both accept)
    "valid": (VALID_SPEC, ""),
    "spec-string": ("abc", "spec"),
    "spec-number": (5, "spec"),
    "spec-list": ([], "spec"),
    "ami-terms-string": ({**VALID_SPEC, "amiSelectorTerms": "x"}, "spec.amiSelectorTerms"),
    "subnet-terms-number": ({**VALID_SPEC, "subnetSelectorTerms": 5}, "spec.subnetSelectorTerms"),
    "tags-list": ({**VALID_SPEC, "tags": [1, 2]}, "spec.tags"),
    "kubelet-string": ({**VALID_SPEC, "kubelet": "abc"}, "spec.kubelet"),
    "bdm-number": ({**VALID_SPEC, "blockDeviceMappings": [7]}, "spec.blockDeviceMappings[0]"),
    "max-pods-string": ({**VALID_SPEC, "kubelet": {"maxPods": "ten"}}, "spec.kubelet.maxPods"),
}


def _unplugged_problems(obj: dict[str, Any]) -> list[str]:
    registry = {k: v for k, v in kind_registry().items() if not k[0].startswith("karpenter.k8s.aws/")}
    try:
        load_text(yaml.safe_dump(obj), "in.yaml", registry=registry)
    except ManifestError as exc:
        return list(exc.problems)
    return []


@pytest.mark.parametrize("case", sorted(CASES))
async def test_unplugged_ec2nodeclass_types_agree_with_the_apiserver(kube, case: str) -> None:
    spec, path = CASES[case]
    obj = {**copy.deepcopy(VALID), "spec": copy.deepcopy(spec)}
    try:
        await kube._request("POST", "/apis/karpenter.k8s.aws/v1/ec2nodeclasses",
                            query=[("dryRun", "All"), ("fieldValidation", "Strict")], body=obj)
        server = ""
    except KubeAPIError as exc:
        assert exc.status in (400, 422), exc
        server = str(exc)
    mine = _unplugged_problems(obj)
    if not path:
        assert (server, mine) == ("", [])
        return
    assert f"{path}: Invalid value" in server and "must be of type" in server, server
    assert [p.split(": ", 1)[1].split(":", 1)[0] for p in mine] == [path], mine


async def test_replicas_added_to_a_weighted_nodepool_breaks_both_rules(kube) -> None:
    """What docs/scenarios.md says a Scenario patch reports, from the API server itself."""
    pool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "trial14-weighted"},
            "spec": {"weight": 10, "template": {"spec": {
                "requirements": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}}}}
    created = await kube._request("POST", "/apis/karpenter.sh/v1/nodepools", body=pool)
    try:
        updated = copy.deepcopy(created)
        updated["spec"]["replicas"] = 2
        with pytest.raises(KubeAPIError) as caught:
            await kube._request("PUT", "/apis/karpenter.sh/v1/nodepools/trial14-weighted", query=[("dryRun", "All")], body=updated)
        text = str(caught.value)
        transition = text.find("Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                               "provisioning modes")
        weight = text.find("'weight' is not supported on static NodePools")
        assert 0 <= transition < weight, text
    finally:
        await kube._request("DELETE", "/apis/karpenter.sh/v1/nodepools/trial14-weighted")
