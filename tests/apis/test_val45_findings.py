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


# ----------------------------------------------------------------- booleans and numbers in string maps

CONFIG_MAP = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: default}
data:
  enabled: y
  port: 8080
  name: web
"""


def test_a_configmap_value_read_as_a_boolean_or_number_is_refused() -> None:
    """go-yaml v2 (kubectl) reads a plain ``y`` as true and ``8080`` as a number; kube-apiserver
    refuses both (``ConfigMap.data`` is ``map[string]string``); karpy accepted the ConfigMap."""
    found = problems(CONFIG_MAP)
    assert [line.split(": ")[1] for line in found] == ["data.enabled", "data.port"], found
    assert "must be a string; got true (quote it in YAML so it stays text)" in found[0], found
    load(CONFIG_MAP.replace("enabled: y", "enabled: 'y'").replace("port: 8080", "port: '8080'"))  # quoted: accepted


@pytest.mark.parametrize(("obj", "path"), [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "binaryData": {"a": True}}, "binaryData.a"),
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": True}}, "stringData.a"),
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"a": 1.5}}, "data.a"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"selector": {"a": True}, "ports": [{"port": 1}]}},
     "spec.selector.a"),
    ({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
        {"name": "c", "image": "x", "args": ["a", False], "command": [1]}]}}, "spec.containers[0].args[1]"),
])
def test_other_built_in_string_maps_and_lists_refuse_a_boolean_or_number(obj: dict[str, Any], path: str) -> None:
    found = problems(obj)
    assert any(line.split(": ")[1] == path and "must be a string" in line for line in found), found


def test_a_mistyped_value_the_model_refuses_is_reported_once() -> None:
    """Labels, annotations and nodeSelector were refused by the models already: one line each."""
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": True}, "annotations": {"b": 1}},
           "spec": {"nodeSelector": {"c": True}, "containers": [{"name": "c", "image": "x"}]}}
    found = problems(obj)
    assert [line.split(": ")[1] for line in found] == ["metadata.labels.a", "metadata.annotations.b", "spec.nodeSelector.c"], found


# ----------------------------------------------------------------- a null limit is dropped, with a note

NULL_LIMIT = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: np}
spec:
  limits: {cpu: null, memory: 100Gi}
  weight:
  template:
    spec:
      taints:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}
"""


def test_a_null_limit_is_dropped_as_the_api_server_drops_it_with_a_note() -> None:
    """kube-apiserver stores ``limits: {cpu: null}`` as no cpu limit (pruned, not refused); karpy
    did the same silently. Now one warning names the dropped map value; the null struct fields
    (``weight:``, ``taints:``: unset, as written) get none."""
    loaded = load(NULL_LIMIT)
    (nodepool,) = loaded.nodepools
    assert set(nodepool.spec.limits) == {"memory"} and nodepool.spec.weight is None
    notes = [w for w in loaded.warnings if "null dropped" in w]
    assert notes == ["in.yaml doc 1 NodePool/np: spec.limits.cpu: null dropped, as kube-apiserver drops a null in a field "
                     "that is not nullable (read as not set)"], loaded.warnings
    quiet = load(NULL_LIMIT.replace("cpu: null, ", ""))
    assert not [w for w in quiet.warnings if "null dropped" in w], quiet.warnings


# ----------------------------------------------------------------- pods refused after defaulting


def _deployment(pod_resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"resources": pod_resources, "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}}


def test_a_workload_whose_pods_the_api_server_refuses_after_defaulting_is_reported() -> None:
    """kube-apiserver stores the Deployment (its template is not defaulted) and refuses each pod:
    the pod-level cpu request defaults to the containers' 100m, above the 50m limit. karpy loaded
    it and simulated its pods; now validate and simulate report it, as a missing PriorityClass."""
    from karpy_core.kube.admission import pod_level_resources_problems

    loaded = load(yaml.dump(_deployment({"limits": {"cpu": "50m"}})))
    (line,) = pod_level_resources_problems(loaded)
    assert line.startswith("in.yaml doc 1 Deployment/default/web: spec.template.spec.resources.requests: Invalid value: "
                           '"100m": must be less than or equal to cpu limit of 50m'), line
    assert "refuses the pods of this Deployment" in line, line
    assert pod_level_resources_problems(load(yaml.dump(_deployment({"limits": {"cpu": "1"}})))) == []


def test_the_simulator_creates_none_of_the_refused_pods() -> None:
    """The in-memory cluster refuses the pod create as kube-apiserver does (422, its words); the
    workload simulator records the refusal (``FailedCreate``) and creates no pod to schedule."""
    from karpy_core.errors import KubeAPIError
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.workloads import WorkloadSimulator

    cluster = InMemoryCluster()
    cluster.create_sync("Deployment", _deployment({"limits": {"cpu": "50m"}}))
    workloads = WorkloadSimulator(cluster)
    workloads.reconcile()
    assert cluster.objects("Pod") == []
    (why,) = workloads.failed_creates.values()
    assert "is invalid: spec.resources.requests: Invalid value: \"100m\": must be less than or equal to cpu limit of 50m" in why
    cluster.create_sync("Deployment", _deployment({"limits": {"cpu": "1"}}) | {"metadata": {"name": "ok", "namespace": "default"}})
    workloads.reconcile()
    assert len(cluster.objects("Pod")) == 3
    with pytest.raises(KubeAPIError) as refused:
        cluster.create_sync("Pod", {"metadata": {"name": "p"}, "spec": {"resources": {"limits": {"memory": "32Mi"}}, "containers": [
            {"name": "c", "image": "x", "resources": {"requests": {"memory": "64Mi"}}}]}})
    assert refused.value.status == 422 and 'Pod "p" is invalid: spec.resources.requests: Invalid value: "64Mi"' in str(refused.value)


def test_validate_refuses_the_workload(tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from karpy_core.cli import app

    path = tmp_path / "d.yaml"
    path.write_text(yaml.dump(_deployment({"limits": {"cpu": "50m"}})))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "must be less than or equal to cpu limit of 50m" in result.output
