"""Issue 35, trial 4: what kube-apiserver v1.36.3 refuses in built-in kinds, refused by the loader too.

Fields the kind's schema does not declare (strict decoding, :mod:`karpy_core.apis.fieldschema`),
enum-like values, sysctl names, ``capabilities`` lists, ``minReadySeconds``, a container's
``image``, and what Priority and RuntimeClass admission refuse. The answers of the real API server
to the same manifests are compared in ``tests/integration/test_trial3_apiserver.py``.
"""

from __future__ import annotations

import copy
import gzip
import json
from importlib import resources
from typing import Any

import pytest
import yaml

from karpy_core.apis.fieldschema import SCHEMA_FILE, has_schema, unknown_fields
from karpy_core.apis.loader import load_text, priority_class_problems
from karpy_core.errors import ManifestError
from karpy_core.kube.admission import runtime_class_problems

POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def deployment(pod: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
               spec: dict[str, Any] | None = None) -> dict[str, Any]:
    template = copy.deepcopy(POD["spec"])
    template["containers"][0].update(container or {})
    template.update(pod or {})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}},
                                                                             "spec": template}, **(spec or {})}}


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(POD)
    out["spec"]["containers"][0].update(container or {})
    out["spec"].update(spec or {})
    return out


def problems(*objects: dict[str, Any]) -> list[str]:
    """Every problem ``karpy validate`` reports for ``objects`` (loader, then admission)."""
    try:
        loaded = load_text("---\n".join(yaml.safe_dump(o) for o in objects), "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return priority_class_problems(loaded) + runtime_class_problems(loaded)


# --------------------------------------------------------------------------- unknown fields


def test_the_schema_file_covers_the_kinds_karpy_reads() -> None:
    raw = json.loads(gzip.decompress(resources.files("karpy_core.data").joinpath(SCHEMA_FILE).read_bytes()))
    assert raw["source"].startswith("kube-apiserver v1.36.3")
    for api_version, kind in (("v1", "Pod"), ("v1", "Node"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                              ("apps/v1", "DaemonSet"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"),
                              ("policy/v1", "PodDisruptionBudget"), ("scheduling.k8s.io/v1", "PriorityClass"),
                              ("node.k8s.io/v1", "RuntimeClass"), ("v1", "PodTemplate")):
        assert has_schema(api_version, kind), (api_version, kind)
    assert not has_schema("karpenter.sh/v1", "NodePool")  # karpy's own kinds: strict models
    for name in raw["kinds"].values():
        assert raw["schemas"][name]["properties"].keys() >= {"apiVersion", "kind", "metadata"}


@pytest.mark.parametrize(("where", "obj", "path"), [
    ("pod spec", deployment(pod={"bogusPodField": 1}), "spec.template.spec.bogusPodField"),
    ("container", deployment(container={"imagePullPolicyy": "Always"}), "spec.template.spec.containers[0].imagePullPolicyy"),
    ("selector", deployment(spec={"selector": {"matchLabels": {"app": "d"}, "matchLabelz": {}}}), "spec.selector.matchLabelz"),
    ("top level", {**POD, "bogusTop": 1}, "bogusTop"),
    ("metadata", {**POD, "metadata": {"name": "p", "bogusMeta": 1}}, "metadata.bogusMeta"),
    ("status", {**POD, "status": {"phase": "Pending", "bogusStatus": 1}}, "status.bogusStatus"),
    ("null value", pod({"bogusNull": None}), "spec.bogusNull"),
    ("second list item", pod({"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x", "bogus": 1}]}),
     "spec.containers[1].bogus"),
    ("env", pod(container={"env": [{"name": "A", "valueFromm": {}}]}), "spec.containers[0].env[0].valueFromm"),
    ("volume source", pod({"volumes": [{"name": "v", "emptyDir": {"bogus": 1}}]}), "spec.volumes[0].emptyDir.bogus"),
    ("security context", pod({"securityContext": {"bogusField": 1}}), "spec.securityContext.bogusField"),
])
def test_an_undeclared_field_is_named_by_its_path(where: str, obj: dict[str, Any], path: str) -> None:
    assert [found for found, _ in unknown_fields(obj["apiVersion"], obj["kind"], obj)] == [path], where
    (line,) = problems(obj)
    namespace = obj["metadata"].get("namespace")  # named as KubeObject.ref names it: Kind/namespace/name when set
    kind_and_name = f"{obj['kind']}/{namespace + '/' if namespace else ''}{obj['metadata']['name']}"
    assert line.startswith(f"in.yaml doc 1 {kind_and_name}: {path}: unknown field \"{path}\""), line


@pytest.mark.parametrize(("where", "obj"), [
    ("status", {**POD, "status": {"phase": "Running", "podIP": "10.0.0.1", "conditions": [{"type": "Ready", "status": "True"}]}}),
    ("maps", pod({"nodeSelector": {"any-key": "x"}}, {"resources": {"requests": {"cpu": "1", "example.com/x": "1"},
                                                                    "limits": {"example.com/x": "1"}}})),
    ("managedFields is free-form", {**POD, "metadata": {"name": "p", "managedFields": [
        {"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:anything": {}}}}]}}),
    ("labels and annotations", {**POD, "metadata": {"name": "p", "labels": {"a": "b"}, "annotations": {"c": "d"}}}),
    ("int-or-string and quantities", deployment(spec={"strategy": {"rollingUpdate": {"maxSurge": "25%"}}})),
])
def test_declared_fields_maps_and_free_form_fields_pass(where: str, obj: dict[str, Any]) -> None:
    assert unknown_fields(obj["apiVersion"], obj["kind"], obj) == [], where
    assert problems(obj) == [], where


def test_every_unknown_field_of_a_document_is_reported_with_a_close_name() -> None:
    lines = problems(deployment(pod={"bogusA": 1}, container={"imagePullPolicyy": "Always"},
                                spec={"selector": {"matchLabels": {"app": "d"}, "matchLabelz": {}}}))
    assert len(lines) == 3, lines
    assert sum("did you mean 'imagePullPolicy'?" in line for line in lines) == 1
    assert sum("did you mean 'matchLabels'?" in line for line in lines) == 1


def test_unknown_fields_are_reported_with_the_other_problems_of_the_document() -> None:
    lines = problems(deployment(pod={"bogus": 1, "securityContext": {"fsGroup": "x"}}))
    assert len(lines) == 2 and any("spec.template.spec.bogus: unknown field" in line for line in lines), lines
    assert any("securityContext.fsGroup: must be an integer" in line for line in lines), lines


def test_passthrough_built_in_kinds_are_checked_too() -> None:
    priority_class = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}, "value": 1,
                      "descripton": "typo"}
    (line,) = problems(priority_class)
    assert 'descripton: unknown field "descripton"' in line and "did you mean 'description'?" in line, line
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80, "targetPortt": 8080}]}}
    (line,) = problems(service)
    assert 'spec.ports[0].targetPortt: unknown field "spec.ports[0].targetPortt"' in line, line


def test_custom_kinds_are_not_walked() -> None:
    custom = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "anything": {"goes": 1}}
    assert unknown_fields("example.com/v1", "Widget", custom) == []
    assert problems(custom) == []


# --------------------------------------------------------------------------- values the API server refuses


@pytest.mark.parametrize(("obj", "expected"), [
    (deployment(pod={"preemptionPolicy": "Sometimes"}),
     'spec.template.spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"'),
    (pod({"securityContext": {"seccompProfile": {"type": "Weird"}}}),
     'spec.securityContext.seccompProfile.type: Unsupported value: "Weird": supported values: "Localhost", "RuntimeDefault", '
     '"Unconfined"'),
    (pod(container={"securityContext": {"seccompProfile": {"type": "Weird"}}}),
     'spec.containers[0].securityContext.seccompProfile.type: Unsupported value: "Weird"'),
    (pod({"securityContext": {"seccompProfile": {"type": "Localhost"}}}),
     "localhostProfile: Required value: must be set when seccomp type is Localhost"),
    (pod({"securityContext": {"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}}}),
     "spec.securityContext.seccompProfile.localhostProfile: Invalid value: 'p.json': can only be set when seccomp type is Localhost"),
    (pod({"securityContext": {"appArmorProfile": {"type": "Localhost", "localhostProfile": ""}}}),
     "localhostProfile: Required value: must be set when AppArmor type is Localhost"),
    (deployment(pod={"securityContext": {"fsGroupChangePolicy": "Sometimes"}}),
     'spec.template.spec.securityContext.fsGroupChangePolicy: Unsupported value: "Sometimes": supported values: "Always", '
     '"OnRootMismatch"'),
    (pod({"securityContext": {"sysctls": [{"name": "bad name!", "value": "1"}]}}),
     "spec.securityContext.sysctls[0].name: Invalid value: 'bad name!': must have at most 253 characters and match regex"),
    (pod({"securityContext": {"sysctls": [{"name": "", "value": "1"}]}}), "spec.securityContext.sysctls[0].name: Required value"),
    (pod({"securityContext": {"sysctls": [{"name": "kernel.sem", "value": "1"}, {"name": "kernel.sem", "value": "2"}]}}),
     "[1].name: Duplicate value: 'kernel.sem'"),
    (deployment(container={"securityContext": {"capabilities": {"add": 5}}}),
     "spec.template.spec.containers[0].securityContext.capabilities.add: must be a list"),
    (pod(container={"securityContext": {"capabilities": {"drop": "ALL"}}}),
     "spec.containers[0].securityContext.capabilities.drop: must be a list"),
    (deployment(spec={"minReadySeconds": -3}), "spec.minReadySeconds: Invalid value: -3: must be greater than or equal to 0"),
    (pod(container={"image": None}), "spec.containers[0].image: Required value"),
    (deployment(container={"image": ""}), "spec.template.spec.containers[0].image: Required value"),
    (deployment(pod={"initContainers": [{"name": "i"}]}), "spec.template.spec.initContainers[0].image: Required value"),
    (pod(container={"image": "pause "}), "spec.containers[0].image: Invalid value: 'pause ': must not have leading or trailing "
                                         "whitespace"),
    (pod(container={"imagePullPolicy": "Sometimes"}), 'spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes"'),
    (pod({"dnsPolicy": "Weird"}), 'spec.dnsPolicy: Unsupported value: "Weird"'),
])
def test_a_value_the_api_server_refuses_is_refused_in_its_words(obj: dict[str, Any], expected: str) -> None:
    (line,) = problems(obj)
    assert expected in line, line


@pytest.mark.parametrize("obj", [
    pod({"preemptionPolicy": "PreemptLowerPriority", "securityContext": {
        "seccompProfile": {"type": "Localhost", "localhostProfile": ""}, "fsGroupChangePolicy": "OnRootMismatch",
        "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}, {"name": "net/ipv4/ip_local_port_range", "value": "1 2"}],
        "appArmorProfile": {"type": "RuntimeDefault"}}, "dnsPolicy": "ClusterFirst"},
        {"imagePullPolicy": "IfNotPresent", "securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]},
                                                                 "seccompProfile": {"type": "Unconfined"}}}),
    deployment(spec={"minReadySeconds": 0}),
])
def test_the_values_the_api_server_accepts_load(obj: dict[str, Any]) -> None:
    assert problems(obj) == []


def test_priority_class_preemption_policy_is_an_enum_and_a_pod_may_not_contradict_its_class() -> None:
    klass = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "pc"}, "value": 5}
    (line,) = problems({**klass, "preemptionPolicy": "Sometimes"})
    assert 'PriorityClass/pc: preemptionPolicy: Unsupported value: "Sometimes"' in line, line
    (line,) = problems(pod({"preemptionPolicy": "Never"}))
    assert ("spec.preemptionPolicy: the string value of PreemptionPolicy (Never) must not be provided in pod spec; priority "
            "admission controller computed PreemptLowerPriority") in line, line
    never = {**klass, "preemptionPolicy": "Never"}
    assert problems(never, pod({"priorityClassName": "pc", "preemptionPolicy": "Never"})) == []
    (line,) = problems(never, deployment(pod={"priorityClassName": "pc", "preemptionPolicy": "PreemptLowerPriority"}))
    assert "spec.template.spec.preemptionPolicy" in line and "the pods of this Deployment" in line, line
    default = {**never, "metadata": {"name": "default"}, "globalDefault": True}
    assert problems(default, pod({"preemptionPolicy": "Never"})) == []  # a pod naming no class gets the default's


def test_runtime_class_admission_refuses_pods_and_workloads_as_the_api_server_would() -> None:
    (line,) = problems(pod({"overhead": {"cpu": "1"}}))
    assert ("Pod/default/p: spec: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead "
            "(kube-apiserver's RuntimeClass admission refuses the pod)") in line, line
    (line,) = problems(deployment(pod={"runtimeClassName": "gvisor"}))
    assert 'spec.template.spec: pod rejected: RuntimeClass "gvisor" not found' in line and "the pods of this Deployment" in line
    runtime_class = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"}, "handler": "runsc",
                     "overhead": {"podFixed": {"cpu": "250m"}}}
    assert problems(runtime_class, deployment(pod={"runtimeClassName": "gvisor"})) == []
    assert problems(runtime_class, pod({"runtimeClassName": "gvisor", "overhead": {"cpu": "250m"}})) == []
    (line,) = problems(runtime_class, pod({"runtimeClassName": "gvisor", "overhead": {"cpu": "1"}}))
    assert "Pod's Overhead doesn't match RuntimeClass's defined Overhead" in line, line
