"""Model-level behaviour: defaults, strictness, and the CEL-equivalent rules of each kind."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from karpy_aws.apis import EC2NodeClass
from karpy_kakaocloud.apis import KCNodeClass, KCNodeClassSpec
from pydantic import ValidationError

from karpy_core.apis import registry
from karpy_core.apis.base import Condition, ObjectMeta, to_kube_dict
from karpy_core.apis.core import Node, Pod, Taint
from karpy_core.apis.durations import duration_seconds
from karpy_core.apis.loader import format_path
from karpy_core.apis.nodeclaim import NodeClaim, NodeClaimSpec
from karpy_core.apis.nodepool import NodePool
from karpy_core.apis.workloads import Deployment, Job, PodDisruptionBudget, StatefulSet


def validate(cls: Any, data: dict[str, Any]) -> Any:
    """Validate the way the loader does: wire (camelCase) names only."""
    return cls.model_validate(data, by_alias=True, by_name=False)


def errors(cls: Any, data: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for every validation error."""
    with pytest.raises(ValidationError) as info:
        validate(cls, data)
    return [(format_path(e["loc"]), e["msg"]) for e in info.value.errors()]


def nodepool(**spec_overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": "default"},
        "spec": {
            "template": {
                "spec": {
                    "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                }
            }
        },
    }
    doc["spec"].update(spec_overrides)
    return doc


def with_requirement(req: dict[str, Any]) -> dict[str, Any]:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"].append(req)
    return doc


def ec2nodeclass(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "role": "KarpenterNodeRole-demo",
        "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "demo"}}],
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
    }
    base.update(spec)
    base = {k: v for k, v in base.items() if v is not None}
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": base}


def kcnodeclass(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "subnetSelectorTerms": [{"id": "3f1c0a52-0000-4000-8000-000000000001"}],
        "securityGroupSelectorTerms": [{"id": "7a2b0a52-0000-4000-8000-000000000002"}],
        "bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.34"},
    }
    base.update(spec)
    return {
        "apiVersion": "karpenter.kakaocloud.com/v1alpha1",
        "kind": "KCNodeClass",
        "metadata": {"name": "karpenter-default"},
        "spec": base,
    }


# --------------------------------------------------------------------------- durations


def test_duration_seconds() -> None:
    assert duration_seconds("720h") == 720 * 3600
    assert duration_seconds("1h30m") == 5400
    assert duration_seconds("0s") == 0
    assert duration_seconds("Never") is None
    assert duration_seconds(None) is None
    with pytest.raises(ValueError, match="not a duration"):
        duration_seconds("soon")


# --------------------------------------------------------------------------- NodePool


def test_nodepool_defaults() -> None:
    np = validate(NodePool, nodepool())
    assert np.api_version == "karpenter.sh/v1" and np.kind == "NodePool"
    assert np.spec.template.spec.expire_after == "720h"
    assert np.spec.template.spec.termination_grace_period is None
    assert np.spec.disruption.consolidation_policy == "WhenEmptyOrUnderutilized"
    assert np.spec.disruption.consolidate_after == "0s"
    assert [b.nodes for b in np.spec.disruption.budgets] == ["10%"]
    assert np.spec.disruption.budgets[0].reasons is None
    assert np.spec.limits == {} and np.spec.weight is None and np.spec.replicas is None


def test_nodepool_dump_is_kubernetes_shaped() -> None:
    out = to_kube_dict(validate(NodePool, nodepool(limits={"cpu": 100, "nodes": "10"})))
    assert out["apiVersion"] == "karpenter.sh/v1"
    assert out["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert out["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "default",
    }
    assert out["spec"]["disruption"] == {
        "consolidationPolicy": "WhenEmptyOrUnderutilized",
        "consolidateAfter": "0s",
        "budgets": [{"nodes": "10%"}],
    }
    assert out["spec"]["limits"] == {"cpu": "100", "nodes": "10"}
    assert "taints" not in out["spec"]["template"]["spec"]  # empty optional lists omitted
    assert "labels" not in out["metadata"]
    assert validate(NodePool, out) == validate(NodePool, nodepool(limits={"cpu": 100, "nodes": "10"}))


def test_nodepool_python_construction_by_field_name() -> None:
    np = NodePool.model_validate(
        {
            "metadata": {"name": "x"},
            "spec": {
                "template": {
                    "spec": {
                        "requirements": [],
                        "node_class_ref": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"},
                    }
                }
            },
        }
    )
    assert np.kind == "NodePool" and np.api_version == "karpenter.sh/v1"


def test_snake_case_keys_are_unknown_fields_on_the_wire() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["expire_after"] = "1h"
    assert ("spec.template.spec.expire_after", "Extra inputs are not permitted") in errors(NodePool, doc)


def test_nodepool_wrong_api_version_or_kind() -> None:
    doc = nodepool()
    doc["apiVersion"] = "karpenter.sh/v1beta1"
    assert errors(NodePool, doc)[0][0] == "apiVersion"
    doc = nodepool()
    doc["kind"] = "NodeClaim"
    assert errors(NodePool, doc)[0][0] == "kind"


def test_nodepool_unknown_field_rejected() -> None:
    assert ("spec.cluster", "Extra inputs are not permitted") in errors(NodePool, nodepool(cluster={"name": "eks"}))


def test_nodepool_template_metadata_only_labels_and_annotations() -> None:
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"name": "x"}
    assert errors(NodePool, doc)[0][0] == "spec.template.metadata.name"


def test_requirement_bad_operator() -> None:
    errs = errors(NodePool, with_requirement({"key": "kubernetes.io/os", "operator": "Equals", "values": ["linux"]}))
    assert errs[0][0] == "spec.template.spec.requirements[1].operator"
    assert "'In', 'NotIn', 'Exists', 'DoesNotExist', 'Gt', 'Lt', 'Gte' or 'Lte'" in errs[0][1]


def test_requirement_in_needs_values() -> None:
    for req in (
        {"key": "kubernetes.io/os", "operator": "In"},
        {"key": "kubernetes.io/os", "operator": "In", "values": []},
    ):
        errs = errors(NodePool, with_requirement(req))
        assert errs == [
            ("spec.template.spec.requirements[1].values", "Value error, operator 'In' needs at least one value")
        ]


def test_requirement_min_values() -> None:
    ok = validate(
        NodePool, with_requirement({"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 5})
    )
    assert ok.spec.template.spec.requirements[1].min_values == 5
    validate(
        NodePool, with_requirement({"key": "a.example.com/x", "operator": "In", "values": ["a", "b"], "minValues": 2})
    )
    errs = errors(
        NodePool, with_requirement({"key": "a.example.com/x", "operator": "In", "values": ["a"], "minValues": 2})
    )
    assert errs[0][0] == "spec.template.spec.requirements[1].minValues"
    assert "minValues is 2 but operator 'In' lists only 1 value(s)" in errs[0][1]
    for bad in (0, 51):
        errs = errors(NodePool, with_requirement({"key": "a.example.com/x", "operator": "Exists", "minValues": bad}))
        assert errs[0][0] == "spec.template.spec.requirements[1].minValues"


@pytest.mark.parametrize("operator", ["Gt", "Lt", "Gte", "Lte"])
def test_requirement_integer_operators(operator: str) -> None:
    key = "karpenter.k8s.aws/instance-generation"
    validate(NodePool, with_requirement({"key": key, "operator": operator, "values": ["2"]}))
    for values in (["x"], ["1", "2"], [], ["-1"]):
        errs = errors(NodePool, with_requirement({"key": key, "operator": operator, "values": values}))
        assert errs[0][0] == "spec.template.spec.requirements[1].values"
        assert f"operator {operator!r} needs" in errs[0][1]


def test_requirements_at_most_100() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["requirements"] = [
        {"key": f"example.com/k{i}", "operator": "Exists"} for i in range(101)
    ]
    assert errors(NodePool, doc)[0][0] == "spec.template.spec.requirements"


@pytest.mark.parametrize(
    "key", ["kubernetes.io/hostname", "karpenter.sh/custom", "kubernetes.io/custom", "example.k8s.io/x"]
)
def test_restricted_label_in_requirements(key: str) -> None:
    errs = errors(NodePool, with_requirement({"key": key, "operator": "Exists"}))
    assert errs[0][0] == "spec.template.spec.requirements[1].key"
    assert f"label key {key!r} is restricted" in errs[0][1]


@pytest.mark.parametrize(
    "key",
    [
        "karpenter.sh/capacity-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "karpenter.k8s.aws/instance-family",
        "example.com/team",
    ],
)
def test_allowed_requirement_keys(key: str) -> None:
    validate(NodePool, with_requirement({"key": key, "operator": "Exists"}))


def test_nodepool_requirement_key_is_restricted_in_a_nodepool_only() -> None:
    """Karpenter v1.15.0's NodePool CRD: ``label "karpenter.sh/nodepool" is restricted`` in a pool's
    requirements; the NodeClaims it makes carry that requirement."""
    errs = errors(NodePool, with_requirement({"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}))
    assert len(errs) == 1
    assert 'requirements[1].key: Invalid value: "karpenter.sh/nodepool": label "karpenter.sh/nodepool" is restricted' in errs[0][1]
    spec = {"requirements": [{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}],
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
    NodeClaimSpec.model_validate(spec)


def test_restricted_template_labels() -> None:
    for key in ("kubernetes.io/hostname", "karpenter.sh/nodepool", "karpenter.sh/anything"):
        doc = nodepool()
        doc["spec"]["template"]["metadata"] = {"labels": {"team": "a", key: "x"}}
        errs = errors(NodePool, doc)
        assert errs[0][0] == "spec.template.metadata.labels"
        assert repr(key) in errs[0][1]
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"labels": {"team": "a", "karpenter.sh/capacity-type": "spot"}}
    validate(NodePool, doc)


def test_label_values_checked() -> None:
    doc = nodepool()
    doc["spec"]["template"]["metadata"] = {"labels": {"team": "has spaces"}}
    assert "not a valid label value" in errors(NodePool, doc)[0][1]


def test_durations() -> None:
    np = validate(NodePool, nodepool(disruption={"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"}))
    assert np.spec.disruption.consolidate_after == "Never"
    assert duration_seconds(np.spec.disruption.consolidate_after) is None
    doc = nodepool()
    doc["spec"]["template"]["spec"].update(expireAfter="Never", terminationGracePeriod="24h")
    validate(NodePool, doc)
    for field, value in (("expireAfter", "30d"), ("expireAfter", "1.5h"), ("terminationGracePeriod", "Never")):
        doc = nodepool()
        doc["spec"]["template"]["spec"][field] = value
        errs = errors(NodePool, doc)
        assert errs[0][0] == f"spec.template.spec.{field}" and repr(value) in errs[0][1]
    doc = nodepool()
    doc["spec"]["template"]["spec"]["expireAfter"] = 720
    assert errors(NodePool, doc) == [("spec.template.spec.expireAfter", "Input should be a valid string")]


def test_consolidation_policy_enum() -> None:
    validate(NodePool, nodepool(disruption={"consolidationPolicy": "Balanced"}))
    errs = errors(NodePool, nodepool(disruption={"consolidationPolicy": "WhenUnderutilized"}))
    assert errs[0][0] == "spec.disruption.consolidationPolicy"


def test_budgets() -> None:
    np = validate(
        NodePool,
        nodepool(
            disruption={
                "budgets": [
                    {
                        "nodes": "0",
                        "schedule": "0 9 * * mon-fri",
                        "duration": "8h",
                        "reasons": ["Drifted", "Underutilized"],
                    },
                    {"nodes": "100%", "schedule": "@daily", "duration": "1h30m"},
                    {"nodes": "5"},
                ]
            }
        ),
    )
    assert [b.nodes for b in np.spec.disruption.budgets] == ["0", "100%", "5"]
    cases = [
        (
            {"nodes": "10%", "schedule": "* * *", "duration": "1h"},
            "spec.disruption.budgets[0].schedule",
            "not a cron schedule",
        ),
        (
            {"nodes": "10%", "schedule": "0 0 0 * * *", "duration": "1h"},
            "spec.disruption.budgets[0].schedule",
            "not a cron",
        ),
        (
            {"nodes": "10%", "schedule": "@daily"},
            "spec.disruption.budgets[0]",
            "'schedule' must be set with 'duration'",
        ),
        ({"nodes": "10%", "duration": "1h"}, "spec.disruption.budgets[0]", "'schedule' must be set with 'duration'"),
        ({"nodes": "110%"}, "spec.disruption.budgets[0].nodes", "percentage"),
        ({"nodes": 3}, "spec.disruption.budgets[0].nodes", "valid string"),
        ({"nodes": "1", "schedule": "@daily", "duration": "30s"}, "spec.disruption.budgets[0].duration", "'30s'"),
        (
            {"nodes": "1", "reasons": ["Expired"]},
            "spec.disruption.budgets[0].reasons[0]",
            "'Underutilized', 'Empty' or 'Drifted'",
        ),
    ]
    for budget, path, text in cases:
        errs = errors(NodePool, nodepool(disruption={"budgets": [budget]}))
        assert errs[0][0] == path and text in errs[0][1], (budget, errs)
    errs = errors(NodePool, nodepool(disruption={"budgets": [{"nodes": "1"}] * 51}))
    assert errs[0][0] == "spec.disruption.budgets"


def test_limits_are_quantities() -> None:
    np = validate(NodePool, nodepool(limits={"cpu": 5, "memory": "160Gi", "nodes": 10, "nvidia.com/gpu": "2"}))
    assert np.spec.limits == {"cpu": "5", "memory": "160Gi", "nodes": "10", "nvidia.com/gpu": "2"}
    errs = errors(NodePool, nodepool(limits={"cpu": "lots", "memory": True}))
    assert errs[0][0] == "spec.limits.cpu" and "'lots' is not a Kubernetes quantity" in errs[0][1]
    assert errs[1][0] == "spec.limits.memory"


def test_weight_and_replicas() -> None:
    assert validate(NodePool, nodepool(weight=100)).spec.weight == 100
    assert validate(NodePool, nodepool(replicas=3, limits={"nodes": "5"})).spec.replicas == 3
    # a static pool (replicas) takes neither weight nor limits other than nodes (Karpenter nodepool.go)
    assert errors(NodePool, nodepool(weight=100, replicas=3)) == [("spec", "Value error, 'weight' is not supported on static NodePools")]
    assert errors(NodePool, nodepool(replicas=3, limits={"cpu": "10"})) == \
        [("spec", "Value error, only 'limits.nodes' is supported on static NodePools")]
    for weight in (0, 101):
        assert errors(NodePool, nodepool(weight=weight))[0][0] == "spec.weight"
    assert errors(NodePool, nodepool(weight="10")) == [("spec.weight", "Input should be a valid integer")]
    assert errors(NodePool, nodepool(replicas=-1))[0][0] == "spec.replicas"


def test_node_class_ref() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws/v1"
    assert errors(NodePool, doc) == [("spec.template.spec.nodeClassRef.group", "Value error, Invalid value: "
                                      "\"karpenter.k8s.aws/v1\": should match '^[^/]*$' (an API group without a version: "
                                      "'karpenter.k8s.aws')")]
    doc["spec"]["template"]["spec"]["nodeClassRef"]["group"] = "karpenter.k8s.aws/latest"
    assert errors(NodePool, doc) == [("spec.template.spec.nodeClassRef.group", "Value error, Invalid value: "
                                      "\"karpenter.k8s.aws/latest\": should match '^[^/]*$'")]
    doc = nodepool()
    del doc["spec"]["template"]["spec"]["nodeClassRef"]
    assert errors(NodePool, doc) == [("spec.template.spec.nodeClassRef", "Field required")]
    doc = nodepool()
    doc["spec"]["template"]["spec"]["nodeClassRef"]["name"] = ""
    assert errors(NodePool, doc)[0][0] == "spec.template.spec.nodeClassRef.name"


def test_taints() -> None:
    doc = nodepool()
    doc["spec"]["template"]["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    doc["spec"]["template"]["spec"]["startupTaints"] = [
        {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
    ]
    np = validate(NodePool, doc)
    assert np.spec.template.spec.startup_taints[0] == Taint(
        key="node.cilium.io/agent-not-ready", value="true", effect="NoExecute"
    )
    doc["spec"]["template"]["spec"]["taints"] = [{"key": "dedicated", "effect": "NoWay"}]
    assert errors(NodePool, doc)[0][0] == "spec.template.spec.taints[0].effect"


def test_nodepool_status() -> None:
    doc = nodepool()
    doc["status"] = {
        "resources": {"cpu": "4", "nodes": "2"},
        "nodes": 2,
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z"}
        ],
    }
    np = validate(NodePool, doc)
    assert np.status.conditions[0] == Condition(
        type="Ready", status="True", reason="Ready", last_transition_time=np.status.conditions[0].last_transition_time
    )
    doc["status"]["conditions"][0]["status"] = True
    assert errors(NodePool, doc)[0][0] == "status.conditions[0].status"


# --------------------------------------------------------------------------- NodeClaim


def test_nodeclaim() -> None:
    nc = validate(
        NodeClaim,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodeClaim",
            "metadata": {
                "generateName": "default-",
                "name": "default-abcde",
                "labels": {"karpenter.sh/nodepool": "default"},
                "ownerReferences": [
                    {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": "u1"}
                ],
                "finalizers": ["karpenter.sh/termination"],
            },
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]},
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["m5.large", "m5.xlarge"],
                        "minValues": 2,
                    },
                ],
                "resources": {"requests": {"cpu": "1500m", "memory": "2Gi", "pods": "3"}},
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            },
            "status": {
                "nodeName": "ip-10-0-0-1",
                "providerID": "aws:///us-east-1a/i-0123",
                "imageID": "ami-123",
                "capacity": {"cpu": "2"},
                "allocatable": {"cpu": "1930m"},
                "conditions": [{"type": "Launched", "status": "True"}],
                "lastPodEventTime": "2026-01-01T00:00:00Z",
            },
        },
    )
    assert nc.spec.expire_after == "720h"
    assert nc.status.provider_id == "aws:///us-east-1a/i-0123" and nc.status.image_id == "ami-123"
    assert nc.metadata.owner_references[0].name == "default"
    out = to_kube_dict(nc)
    assert out["status"]["providerID"] == "aws:///us-east-1a/i-0123"
    assert out["spec"]["resources"]["requests"]["cpu"] == "1500m"
    bad = copy.deepcopy(out)
    bad["spec"]["requirements"][1]["minValues"] = 3
    assert errors(NodeClaim, bad)[0][0] == "spec.requirements[1].minValues"


# --------------------------------------------------------------------------- EC2NodeClass


def test_ec2nodeclass_metadata_options_defaults() -> None:
    nc = validate(EC2NodeClass, ec2nodeclass())
    opts = nc.spec.metadata_options
    assert (opts.http_endpoint, opts.http_protocol_ipv6, opts.http_put_response_hop_limit, opts.http_tokens) == (
        "enabled",
        "disabled",
        1,
        "required",
    )
    assert to_kube_dict(nc)["spec"]["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }
    partial = validate(EC2NodeClass, ec2nodeclass(metadataOptions={"httpPutResponseHopLimit": 2}))
    assert partial.spec.metadata_options.http_put_response_hop_limit == 2
    assert partial.spec.metadata_options.http_tokens == "required"
    errs = errors(EC2NodeClass, ec2nodeclass(metadataOptions={"httpTokens": "maybe", "httpPutResponseHopLimit": 65}))
    assert {p for p, _ in errs} == {"spec.metadataOptions.httpTokens", "spec.metadataOptions.httpPutResponseHopLimit"}


def test_ec2nodeclass_resolved_family() -> None:
    assert validate(EC2NodeClass, ec2nodeclass()).spec.resolved_ami_family() == "AL2023"
    nc = validate(EC2NodeClass, ec2nodeclass(amiFamily="Custom", amiSelectorTerms=[{"alias": "bottlerocket@latest"}]))
    assert nc.spec.resolved_ami_family() == "Custom"


@pytest.mark.parametrize(
    ("spec", "path", "text"),
    [
        ({"instanceProfile": "p"}, "spec", "exactly one of ['role', 'instanceProfile']"),
        ({"role": None}, "spec", "exactly one of ['role', 'instanceProfile']"),
        ({"role": ""}, "spec.role", "at least 1 character"),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest"}, {"id": "ami-123"}]},
            "spec.amiSelectorTerms",
            "'alias' is mutually exclusive",
        ),
        (
            {"amiSelectorTerms": [{"alias": "al2023@latest", "owner": "self"}]},
            "spec.amiSelectorTerms[0]",
            "'alias' is mutually exclusive",
        ),
        (
            {"amiSelectorTerms": [{"id": "ami-123", "name": "x"}], "amiFamily": "AL2"},
            "spec.amiSelectorTerms[0]",
            "'id' is mutually exclusive",
        ),
        ({"amiSelectorTerms": [{}]}, "spec.amiSelectorTerms[0]", "expected at least one"),
        ({"amiSelectorTerms": []}, "spec.amiSelectorTerms", "at least 1 item"),
        (
            {"amiSelectorTerms": [{"alias": "windows2022@v1"}]},
            "spec.amiSelectorTerms[0].alias",
            "only specify version 'latest'",
        ),
        ({"amiSelectorTerms": [{"alias": "ubuntu@latest"}]}, "spec.amiSelectorTerms[0].alias", "not supported"),
        ({"amiSelectorTerms": [{"alias": "al2023"}]}, "spec.amiSelectorTerms[0].alias", "family@version"),
        ({"amiSelectorTerms": [{"id": "ami-123"}]}, "spec", "must specify amiFamily"),
        ({"amiFamily": "AL2"}, "spec", "must be 'AL2023' or 'Custom'"),
        ({"amiFamily": "Ubuntu"}, "spec.amiFamily", "'AL2', 'AL2023'"),
        (
            {"subnetSelectorTerms": [{"id": "subnet-1", "tags": {"a": "b"}}]},
            "spec.subnetSelectorTerms[0]",
            "'id' is mutually exclusive",
        ),
        ({"subnetSelectorTerms": [{"id": "vpc-1"}]}, "spec.subnetSelectorTerms[0].id", "not a subnet id"),
        (
            {"subnetSelectorTerms": [{"tags": {"a": ""}}]},
            "spec.subnetSelectorTerms[0].tags",
            "empty tag keys or values",
        ),
        ({"subnetSelectorTerms": [{"tags": {"a": "b"}}] * 31}, "spec.subnetSelectorTerms", "at most 30"),
        (
            {"securityGroupSelectorTerms": [{"name": "a", "tags": {"a": "b"}}]},
            "spec.securityGroupSelectorTerms[0]",
            "'name' is mutually exclusive",
        ),
        ({"tags": {"kubernetes.io/cluster/demo": "owned"}}, "spec.tags", "restricted tag"),
        ({"tags": {"karpenter.sh/nodepool": "x"}}, "spec.tags", "restricted tag"),
        ({"tags": {"": "x"}}, "spec.tags", "empty tag keys"),
        ({"instanceStorePolicy": "RAID1"}, "spec.instanceStorePolicy", "'RAID0'"),
        ({"detailedMonitoring": "yes"}, "spec.detailedMonitoring", "valid boolean"),
        ({"userDatas": "x"}, "spec.userDatas", "Extra inputs"),
    ],
)
def test_ec2nodeclass_rules(spec: dict[str, Any], path: str, text: str) -> None:
    errs = errors(EC2NodeClass, ec2nodeclass(**spec))
    assert any(p == path and text in m for p, m in errs), errs


def test_ec2nodeclass_block_devices() -> None:
    bdm: list[dict[str, Any]] = [
        {
            "deviceName": "/dev/xvda",
            "rootVolume": True,
            "ebs": {
                "volumeSize": "100Gi",
                "volumeType": "gp3",
                "iops": 3000,
                "throughput": 125,
                "encrypted": True,
                "kmsKeyID": "k",
                "deleteOnTermination": True,
            },
        },
        {"deviceName": "/dev/xvdb", "ebs": {"snapshotID": "snap-1", "volumeInitializationRate": 200}},
    ]
    nc = validate(EC2NodeClass, ec2nodeclass(blockDeviceMappings=bdm))
    assert nc.spec.block_device_mappings[0].ebs.kms_key_id == "k"
    assert nc.spec.block_device_mappings[1].ebs.snapshot_id == "snap-1"
    assert to_kube_dict(nc)["spec"]["blockDeviceMappings"][0]["ebs"]["kmsKeyID"] == "k"
    cases = [
        ([{**bdm[0]}, {**bdm[0]}], "spec.blockDeviceMappings", "only one blockDeviceMappings with rootVolume"),
        (
            [{"deviceName": "/dev/xvda", "ebs": {"volumeType": "gp3"}}],
            "spec.blockDeviceMappings[0].ebs",
            "snapshotID or volumeSize",
        ),
        (
            [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "volumeType": "gp4"}}],
            "spec.blockDeviceMappings[0].ebs.volumeType",
            "'gp3'",
        ),
        (
            [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Mi"}}],
            "spec.blockDeviceMappings[0].ebs.volumeSize",
            "not a volume size",
        ),
        (
            [{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "20Gi", "encrypted": "true"}}],
            "spec.blockDeviceMappings[0].ebs.encrypted",
            "boolean",
        ),
    ]
    for mappings, path, text in cases:
        errs = errors(EC2NodeClass, ec2nodeclass(blockDeviceMappings=mappings))
        assert any(p == path and text in m for p, m in errs), errs


def test_ec2nodeclass_kubelet() -> None:
    kubelet = {
        "clusterDNS": ["10.100.0.10"],
        "maxPods": 110,
        "podsPerCore": 2,
        "systemReserved": {"cpu": "100m", "memory": "100Mi", "ephemeral-storage": "1Gi"},
        "kubeReserved": {"cpu": "200m"},
        "evictionHard": {"memory.available": "5%", "nodefs.available": "10%"},
        "evictionSoft": {"memory.available": "500Mi"},
        "evictionSoftGracePeriod": {"memory.available": "1m"},
        "evictionMaxPodGracePeriod": 60,
        "imageGCHighThresholdPercent": 85,
        "imageGCLowThresholdPercent": 80,
        "cpuCFSQuota": True,
    }
    nc = validate(EC2NodeClass, ec2nodeclass(kubelet=kubelet))
    assert nc.spec.kubelet.cluster_dns == ["10.100.0.10"] and nc.spec.kubelet.cpu_cfs_quota is True
    assert to_kube_dict(nc)["spec"]["kubelet"]["imageGCHighThresholdPercent"] == 85
    cases = [
        ({"systemReserved": {"gpu": "1"}}, "spec.kubelet.systemReserved", "invalid key 'gpu'"),
        ({"evictionHard": {"memory.available": "lots"}}, "spec.kubelet.evictionHard", "neither a percentage"),
        ({"evictionSoft": {"memory.available": "5%"}}, "spec.kubelet", "no matching evictionSoftGracePeriod"),
        ({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}, "spec.kubelet", "must be greater than"),
        ({"maxPods": -1}, "spec.kubelet.maxPods", "greater than or equal to 0"),
    ]
    for bad, path, text in cases:
        errs = errors(EC2NodeClass, ec2nodeclass(kubelet=bad))
        assert any(p == path and text in m for p, m in errs), errs


def test_ec2nodeclass_status() -> None:
    doc = ec2nodeclass()
    doc["status"] = {
        "subnets": [{"id": "subnet-1", "zone": "us-east-1a", "zoneID": "use1-az1"}],
        "securityGroups": [{"id": "sg-1", "name": "default"}],
        "amis": [
            {
                "id": "ami-1",
                "name": "al2023",
                "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}],
            }
        ],
        "instanceProfile": "demo_123",
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    nc = validate(EC2NodeClass, doc)
    assert nc.status.subnets[0].zone_id == "use1-az1" and nc.status.instance_profile == "demo_123"


# --------------------------------------------------------------------------- KCNodeClass


def test_kcnodeclass_defaults_and_rules() -> None:
    nc = validate(KCNodeClass, kcnodeclass(rootVolume={"sizeGiB": 50}, keyName="my-key"))
    assert nc.spec.root_volume.size_gib == 50 and nc.spec.root_volume.delete_on_termination is True
    assert nc.spec.bootstrap.mode == "Kubeadm" and nc.spec.bootstrap.kubernetes_version == "1.34"
    assert to_kube_dict(nc)["spec"]["rootVolume"] == {"sizeGiB": 50, "deleteOnTermination": True}
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"rootVolume": {"sizeGiB": 20}}, "spec.rootVolume.sizeGiB", "greater than or equal to 30"),
        ({"rootVolume": {"sizeGiB": "50"}}, "spec.rootVolume.sizeGiB", "valid integer"),
        (
            {"bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.34.2"}},
            "spec.bootstrap.kubernetesVersion",
            "MAJOR.MINOR",
        ),
        (
            {"bootstrap": {"mode": "Kubeadm", "kubernetesVersion": 1.3}},
            "spec.bootstrap.kubernetesVersion",
            "valid string",
        ),
        ({"bootstrap": {"mode": "CloudInit", "kubernetesVersion": "1.34"}}, "spec.bootstrap.mode", "'Kubeadm'"),
        ({"bootstrap": None}, "spec.bootstrap", "valid dictionary"),
        ({"subnetSelectorTerms": []}, "spec.subnetSelectorTerms", "at least 1 item"),
        ({"subnetSelectorTerms": [{"tags": {"a": "b"}}]}, "spec.subnetSelectorTerms[0].id", "Field required"),
        ({"keyName": "k"}, "spec.keyName", "not a key pair name"),
        ({"activeKeyID": "k1"}, "spec.activeKeyID", "Extra inputs"),
    ]
    for spec, path, text in cases:
        errs = errors(KCNodeClass, kcnodeclass(**spec))
        assert any(p == path and text in m for p, m in errs), errs


def test_kcnodeclass_has_no_keyring_fields() -> None:
    """The ownership signing keyring (activeKeyID, keys) is provider configuration, not API."""
    aliases = {f.alias for f in KCNodeClassSpec.model_fields.values()}
    assert "activeKeyID" not in aliases and "keys" not in aliases


# --------------------------------------------------------------------------- core kinds


def pod_doc(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "containers": [{"name": "app", "image": "nginx", "resources": {"requests": {"cpu": "250m"}}}]
    }
    base.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": base}


def test_pod_lenient_keeps_unknown_fields() -> None:
    doc = pod_doc(
        securityContext={"runAsUser": 1000},
        dnsPolicy="ClusterFirst",
        tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]}
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}
                ],
            },
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {"matchLabels": {"app": "x"}},
                        "topologyKey": "kubernetes.io/hostname",
                        "matchLabelKeys": ["pod-template-hash"],
                    }
                ]
            },
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}},
                "minDomains": 3,
                "nodeTaintsPolicy": "Honor",
            }
        ],
    )
    doc["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080, "hostIP": "0.0.0.0"}]
    doc["spec"]["containers"][0]["livenessProbe"] = {"httpGet": {"path": "/"}}
    doc["status"] = {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
    }
    pod = validate(Pod, doc)
    assert pod.spec.containers[0].ports[0].host_ip == "0.0.0.0" and pod.spec.containers[0].ports[0].protocol == "TCP"
    req = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert req.node_selector_terms[0].match_expressions[0].values == ["arm64"]
    anti = pod.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert anti.topology_key == "kubernetes.io/hostname" and anti.match_label_keys == ["pod-template-hash"]
    assert pod.spec.topology_spread_constraints[0].min_domains == 3
    assert pod.status.conditions[0].reason == "Unschedulable"
    out = to_kube_dict(pod)
    assert out["spec"]["securityContext"] == {"runAsUser": 1000}  # unknown fields survive
    assert out["spec"]["containers"][0]["livenessProbe"] == {"httpGet": {"path": "/"}}


def test_pod_known_fields_still_checked() -> None:
    doc = pod_doc()
    doc["spec"]["containers"][0]["resources"]["requests"]["memory"] = "2 GB"
    errs = errors(Pod, doc)
    assert errs[0][0] == "spec.containers[0].resources.requests.memory"
    errs = errors(Pod, pod_doc(tolerations=[{"key": "a", "operator": "Equals"}]))
    assert errs[0][0] == "spec.tolerations[0].operator"


def test_node() -> None:
    node = validate(
        Node,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "n1",
                "labels": {"kubernetes.io/arch": "amd64"},
                "managedFields": [{"manager": "kubelet"}],
            },
            "spec": {
                "providerID": "aws:///us-east-1a/i-1",
                "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
            },
            "status": {
                "capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"},
                "allocatable": {"cpu": "1930m"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.34.0"},
            },
        },
    )
    assert node.spec.provider_id == "aws:///us-east-1a/i-1" and node.spec.taints[0].effect == "NoExecute"
    assert isinstance(node.metadata, ObjectMeta) and node.metadata.model_extra == {
        "managedFields": [{"manager": "kubelet"}]
    }


def test_workload_defaults() -> None:
    template = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}
    dep = validate(
        Deployment,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template},
        },
    )
    assert dep.spec.replicas == 1
    sts = validate(
        StatefulSet,
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template, "volumeClaimTemplates": [{"metadata": {"name": "data"}}]},
        },
    )
    assert sts.spec.replicas == 1 and sts.spec.volume_claim_templates[0]["metadata"]["name"] == "data"
    job = validate(
        Job, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
              "spec": {"template": {**template, "spec": {"containers": [{"name": "c", "image": "pause"}], "restartPolicy": "Never"}}}}
    )
    assert job.spec.parallelism == 1 and job.spec.completions is None
    errs = errors(
        Deployment,
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"replicas": "3", "selector": {"matchLabels": {"app": "a"}}, "template": template},
        },
    )
    assert errs == [("spec.replicas", "Input should be a valid integer")]


def test_pdb() -> None:
    def pdb(**spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "p", "namespace": "a"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, **spec},
        }

    assert validate(PodDisruptionBudget, pdb(minAvailable=2)).spec.min_available == 2
    assert validate(PodDisruptionBudget, pdb(maxUnavailable="25%")).spec.max_unavailable == "25%"
    assert errors(PodDisruptionBudget, pdb(minAvailable="two"))[0][0] == "spec.minAvailable"
    errs = errors(PodDisruptionBudget, pdb(minAvailable=1, maxUnavailable=1))
    assert errs[0][0] == "spec" and "cannot both be set" in errs[0][1]


# --------------------------------------------------------------------------- registry


def test_registry_has_every_kind() -> None:
    reg = registry.kind_registry()
    for key in [
        ("karpenter.sh/v1", "NodePool"),
        ("karpenter.sh/v1", "NodeClaim"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("karpenter.kakaocloud.com/v1alpha1", "KCNodeClass"),
        ("v1", "Pod"),
        ("v1", "Node"),
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
        ("batch/v1", "Job"),
        ("policy/v1", "PodDisruptionBudget"),
    ]:
        assert key in reg, key
    assert reg[("karpenter.k8s.aws/v1", "EC2NodeClass")] is EC2NodeClass


def test_registry_skips_a_broken_provider(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        name = "broken"
        value = "karpy_missing.apis:api_kinds"

        def load(self) -> Any:
            raise ImportError("No module named 'karpy_missing'")

    class Good:
        name = "kakaocloud"
        value = "karpy_kakaocloud.apis:api_kinds"

        def load(self) -> Any:
            from karpy_kakaocloud.apis import api_kinds

            return api_kinds

    monkeypatch.setattr(registry, "entry_points", lambda group: [Good(), Broken()])
    monkeypatch.setattr(registry, "_FAILED", {})  # what earlier tests' broken entry points left
    with caplog.at_level(logging.WARNING, logger="karpy_core.apis.registry"):
        reg = registry.kind_registry()
        registry.kind_registry()  # read again: still one line
    assert ("karpenter.kakaocloud.com/v1alpha1", "KCNodeClass") in reg
    assert ("karpenter.sh/v1", "NodePool") in reg
    lines = [r.getMessage() for r in caplog.records if "'broken'" in r.getMessage()]
    assert len(lines) == 1 and "skipped: ImportError: No module named 'karpy_missing'" in lines[0], lines
    assert set(registry.failed_api_entries()) == {"broken"}
