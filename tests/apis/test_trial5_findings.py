"""Issue 35, trial 5: where the loader disagreed with kube-apiserver v1.36.3, now agreeing.

Explicit nulls (read in :func:`karpy_core.apis.fieldschema.walk_fields`), a container's
``restartPolicy`` with ``restartPolicyRules``, pod-template values the server refuses, YAML
booleans as go-yaml v2 reads them (``y``/``n``), strict field checks of more ignored kinds, and
a bad name reported together with bad label keys. The real API server's answers to the same
manifests are compared in ``tests/integration/test_trial3_apiserver.py`` (trial 5 cases).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from karpy_core.apis.fieldschema import walk_fields
from karpy_core.apis.loader import LoadedManifests, load_text
from karpy_core.errors import ManifestError
from karpy_core.utils.kubeyaml import KubeYAMLDumper, safe_load

POD: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                       "spec": {"containers": [{"name": "c", "image": "pause"}]}}


def pod(spec: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    out = copy.deepcopy(POD)
    out["spec"]["containers"][0].update(container or {})
    out["spec"].update(spec or {})
    out["metadata"].update(metadata or {})
    return out


def deployment(template: dict[str, Any] | None = None, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    pod_spec = copy.deepcopy(POD["spec"])
    pod_spec.update(template or {})
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
            "spec": {"selector": {"matchLabels": {"app": "d"}},
                     "template": {"metadata": {"labels": {"app": "d"}}, "spec": pod_spec}, **(spec or {})}}


def load(text: str) -> LoadedManifests:
    return load_text(text, "in.yaml")


def dump(obj: dict[str, Any]) -> str:
    """YAML the loader reads back as ``obj`` (``"y"`` quoted: a go-yaml boolean when plain)."""
    return yaml.dump(obj, Dumper=KubeYAMLDumper)


def problems(obj: dict[str, Any] | str) -> list[str]:
    try:
        load(obj if isinstance(obj, str) else dump(obj))
    except ManifestError as exc:
        return list(exc.problems)
    return []


# --------------------------------------------------------------------------- explicit nulls

HELM_NULLS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  labels:
  annotations:
spec:
  replicas:
  strategy:
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      nodeSelector:
      tolerations:
      affinity:
      initContainers:
      containers:
      - name: c
        image: x
        env:
        - {name: A, value: }
        resources:
        ports:
"""


def test_null_struct_fields_are_unset_as_the_api_server_reads_them() -> None:
    """Helm output with empty values: kube-apiserver creates the Deployment (replicas defaulted to
    1, every null field unset); karpy refused seven of its fields."""
    (dep,) = load(HELM_NULLS).deployments
    assert dep.spec.replicas == 1 and dep.metadata.labels == {} and dep.metadata.annotations == {}
    spec = dep.spec.template.spec
    assert spec.node_selector == {} and spec.tolerations == [] and spec.init_containers == [] and spec.affinity is None
    assert spec.containers[0].ports == [] and spec.containers[0].resources.requests == {}


@pytest.mark.parametrize(("obj", "read"), [
    (pod(metadata={"labels": {"team": None}, "annotations": {"note": None}}),
     lambda p: (p.metadata.labels, p.metadata.annotations) == ({"team": ""}, {"note": ""})),
    (pod({"nodeSelector": {"disk": None}}), lambda p: p.spec.node_selector == {"disk": ""}),
    (pod(container={"resources": {"requests": {"cpu": None, "memory": "1Gi"}, "limits": {"cpu": None}}}),
     lambda p: (p.spec.containers[0].resources.requests, p.spec.containers[0].resources.limits)
     == ({"cpu": "0", "memory": "1Gi"}, {"cpu": "0"})),
    (pod({"overhead": None}), lambda p: p.spec.overhead == {}),
])
def test_a_null_map_value_is_its_types_zero(obj: dict[str, Any], read: Any) -> None:
    """kube-apiserver stores ``labels: {team: null}`` as ``team: ""`` and ``requests: {cpu: null}``
    as ``cpu: "0"`` (dryRun create, read back)."""
    (loaded,) = load(dump(obj)).pods
    assert read(loaded)


def test_a_null_list_item_is_its_types_zero() -> None:
    data = pod(container={"args": ["a", None]}, spec={"tolerations": [None]})
    walked = walk_fields("v1", "Pod", data)
    assert walked.data["spec"]["containers"][0]["args"] == ["a", ""]
    assert walked.data["spec"]["tolerations"] == [{}]
    # a toleration {} has an empty key without operator Exists: the API server refuses it so
    (line,) = problems(data)
    assert 'spec.tolerations[0]: operator: Invalid value: "": operator must be Exists when `key` is empty' in line, line


@pytest.mark.parametrize(("obj", "expected"), [
    (pod({"containers": [{"name": "c", "image": "x"}, None]}), ["spec.containers[1].name: required field is missing",
                                                                 "spec.containers[1].image: Required value"]),
    (pod(container={"env": [None]}), ["spec.containers[0].env[0].name: required field is missing"]),
    (pod(container={"env": [{"name": "", "value": "a"}]}), ["spec.containers[0].env[0].name: Required value"]),
    ({**pod(), "metadata": None}, ["metadata.name: required field is missing"]),
    ({**pod(), "spec": None}, ["spec: required field is missing"]),
    (deployment(spec={"selector": None}), ["spec.selector: required field is missing"]),
])
def test_nulls_the_api_server_reads_as_empty_and_then_refuses(obj: dict[str, Any], expected: list[str]) -> None:
    found = problems(obj)
    assert len(found) == len(expected), found
    for line, want in zip(found, expected, strict=True):
        assert want in line, (want, line)


def test_the_walk_copies_only_what_it_changes_and_never_the_input() -> None:
    clean = pod(metadata={"labels": {"a": "b"}})
    assert walk_fields("v1", "Pod", clean).data is clean  # no null: the same object, no copy
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p, labels: &shared {team: null}, annotations: *shared}
spec:
  containers: [{name: c, image: x}]
"""
    data = safe_load(text)
    before = copy.deepcopy(data)
    walked = walk_fields("v1", "Pod", data)
    assert data == before  # the parsed document (and the alias it shares) untouched
    assert walked.data["metadata"]["labels"] == {"team": ""} == walked.data["metadata"]["annotations"]
    assert walked.data["spec"] is data["spec"]  # unchanged branches are shared, not copied


def test_an_undeclared_null_field_is_still_reported() -> None:
    walked = walk_fields("v1", "Pod", pod({"bogusNull": None}))
    assert [path for path, _ in walked.unknown] == ["spec.bogusNull"]


def test_custom_kinds_keep_their_nulls() -> None:
    custom = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "labels": None}}
    assert walk_fields("example.com/v1", "Widget", custom).data is custom


# --------------------------------------------------------------------------- container restart policy


@pytest.mark.parametrize(("container", "expected"), [
    ({"restartPolicy": "Never", "restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]},
     None),
    ({"restartPolicy": "Never"}, None),
    ({"restartPolicy": "OnFailure"}, None),
    ({"restartPolicy": "Always"}, None),
    ({"restartPolicy": "Bad"}, 'spec.containers[0].restartPolicy: Unsupported value: "Bad": supported values: '
                               '"Always", "Never", "OnFailure"'),
    ({"restartPolicyRules": [{"action": "Restart", "exitCodes": {"operator": "In", "values": [1]}}]},
     "spec.containers[0]: restartPolicy: Required value: must specify restartPolicy when restart rules are used"),
    ({"restartPolicy": "Never", "restartPolicyRules": [{"action": "Explode"}]},
     'spec.containers[0].restartPolicyRules[0].action: Unsupported value: "Explode": supported values: '
     '"Restart", "RestartAllContainers"'),
])
def test_container_restart_policy_as_the_api_server_checks_it(container: dict[str, Any], expected: str | None) -> None:
    found = problems(pod(container=container))
    if expected is None:
        assert found == []
    else:
        (line,) = found
        assert expected in line, line


def test_a_restart_never_init_container_is_not_a_sidecar() -> None:
    """Now that ``Never``/``OnFailure`` load on an init container, only ``Always`` adds its requests to the pod's."""
    from karpy_core.scheduling.pod import effective_requests

    init = {"name": "i", "image": "x", "resources": {"requests": {"cpu": "2"}}}
    for policy, cpu in (("Never", 2000), ("OnFailure", 2000), ("Always", 2100)):
        obj = pod({"initContainers": [{**init, "restartPolicy": policy}]}, {"resources": {"requests": {"cpu": "100m"}}})
        (loaded,) = load(dump(obj)).pods
        assert effective_requests(loaded.model_dump(by_alias=True, exclude_none=True)["spec"])["cpu"] == cpu, policy


# --------------------------------------------------------------------------- values refused by the API server


@pytest.mark.parametrize(("obj", "expected"), [
    (deployment({"restartPolicy": "Never"}),
     'spec: template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"'),
    (deployment({"containers": [{"name": "c", "image": "x", "terminationMessagePolicy": "Bad"}]}),
     'spec.template.spec.containers[0].terminationMessagePolicy: Unsupported value: "Bad": supported values: '
     '"File", "FallbackToLogsOnError"'),
    (deployment({"os": {"name": "plan9"}}), 'spec.template.spec.os: Unsupported value: "plan9": supported values: "linux", "windows"'),
    (deployment(spec={"progressDeadlineSeconds": 10, "minReadySeconds": 10}),
     "spec: progressDeadlineSeconds: Invalid value: 10: must be greater than minReadySeconds"),
    (deployment(spec={"minReadySeconds": 700}),
     "spec: progressDeadlineSeconds: Invalid value: 600: must be greater than minReadySeconds"),
    (deployment({"securityContext": {"seLinuxChangePolicy": "MountOption"}}),
     'spec.template.spec.securityContext.seLinuxChangePolicy: Unsupported value: "MountOption": supported values: "Recursive"'),
    (deployment({"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}),
     "spec.template: spec.ephemeralContainers: Forbidden: ephemeral containers not allowed in pod template"),
    (pod({"ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}),
     "Pod/default/p: spec.ephemeralContainers: Forbidden: cannot be set on create"),
    (pod({"tolerations": [{"effect": "NoSchedule"}]}),
     'spec.tolerations[0]: operator: Invalid value: "": operator must be Exists when `key` is empty'),
])
def test_values_the_api_server_refuses(obj: dict[str, Any], expected: str) -> None:
    (line,) = problems(obj)
    assert expected in line, line


def test_both_progress_deadline_problems_are_reported_together() -> None:
    (line,) = problems(deployment(spec={"progressDeadlineSeconds": -1}))
    assert "-1: must be greater than or equal to 0" in line and "-1: must be greater than minReadySeconds" in line, line


@pytest.mark.parametrize("kind", ["ReplicaSet", "StatefulSet", "DaemonSet"])
def test_apps_workload_pods_restart_always(kind: str) -> None:
    obj = deployment({"restartPolicy": "OnFailure"}) | {"kind": kind}
    (line,) = problems(obj)
    assert 'template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: "Always"' in line, line
    assert problems(deployment({"restartPolicy": "Always"}) | {"kind": kind}) == []


@pytest.mark.parametrize("obj", [
    deployment({"securityContext": {"seLinuxChangePolicy": "Recursive"}, "os": {"name": "linux"}}),
    deployment(spec={"progressDeadlineSeconds": 11, "minReadySeconds": 10}),
    pod({"ephemeralContainers": []}),
    pod({"tolerations": [{"operator": "Exists"}]}),
])
def test_values_the_api_server_accepts(obj: dict[str, Any]) -> None:
    assert problems(obj) == []


# --------------------------------------------------------------------------- YAML booleans

GO_YAML_V2_BOOLEANS = {**dict.fromkeys(["y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"], True),
                       **dict.fromkeys(["n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"], False)}
"""go-yaml v2's ``resolve.go`` boolean table (``sigs.k8s.io/yaml``, which kubectl parses with)."""


@pytest.mark.parametrize("scalar", sorted(GO_YAML_V2_BOOLEANS))
def test_yaml_booleans_are_go_yaml_v2s(scalar: str) -> None:
    assert safe_load(f"a: {scalar}") == {"a": GO_YAML_V2_BOOLEANS[scalar]}
    assert safe_load(f"{scalar}: 1") == {"true" if GO_YAML_V2_BOOLEANS[scalar] else "false": 1}  # keys as JSON strings
    assert safe_load(f"a: '{scalar}'") == {"a": scalar}


def test_strings_that_read_as_other_types_are_quoted_when_karpy_writes_yaml() -> None:
    """Scenario steps and patched objects go back to text for the loader (``karpy_core/sim/scenario.py``):
    a label value ``"y"`` must come back a string, not go-yaml's boolean."""
    values = {f"k{i}": text for i, text in enumerate([*GO_YAML_V2_BOOLEANS, "1e1", "08", "~", "null", "", "plain"])}
    assert safe_load(dump(values)) == values


@pytest.mark.parametrize("scalar", ["yEs", "oN", "nO", "yy", "nn", "Ye", "t", "f", "TrUe"])
def test_other_spellings_stay_strings(scalar: str) -> None:
    assert safe_load(f"a: {scalar}") == {"a": scalar}


@pytest.mark.parametrize("scalar", ["y", "n", "yes", "on", "Off", "NO"])
def test_an_unquoted_boolean_label_value_is_refused_as_kubectl_apply_sends_it(scalar: str) -> None:
    text = f"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {{a: {scalar}}}\nspec:\n  containers: [{{name: c, image: x}}]\n"
    (line,) = problems(text)
    assert "metadata.labels.a: must be a string; got " in line and "(quote it in YAML so it stays text)" in line, line
    assert problems(text.replace(f"a: {scalar}", f"a: '{scalar}'")) == []


# --------------------------------------------------------------------------- more kinds, all problems at once


@pytest.mark.parametrize(("obj", "path"), [
    ({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n"},
      "spec": {"podSelector": {}, "ingres": []}}, "spec.ingres"),
    ({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "i"},
      "spec": {"rules": [{"host": "a.example", "htp": {}}]}}, "spec.rules[0].htp"),
    ({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
      "spec": {"maxReplicas": 3, "minReplica": 1, "scaleTargetRef": {"kind": "Deployment", "name": "d"}}}, "spec.minReplica"),
    ({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"},
      "rules": [{"apiGroups": [""], "resource": ["pods"], "verbs": ["get"]}]}, "rules[0].resource"),
])
def test_ignored_kinds_are_checked_for_undeclared_fields(obj: dict[str, Any], path: str) -> None:
    (line,) = problems(obj)
    assert f'{path}: unknown field "{path}"' in line, line


def test_a_bad_name_and_a_bad_label_key_are_reported_together() -> None:
    """kube-apiserver lists ``metadata.name`` then ``metadata.labels`` in one answer; karpy hid the name."""
    found = problems(pod(metadata={"name": "Bad_Name", "labels": {"-x": "y"}, "annotations": {"bad key": "z"}}))
    assert [line.split(": ")[1] for line in found] == ["metadata.name", "metadata.labels", "metadata.annotations"], found


def test_a_metadata_decoding_error_still_hides_the_name() -> None:
    """A value of the wrong type stops the API server's decoder: nothing else is reported."""
    found = problems(pod(metadata={"name": "Bad_Name", "labels": 3}))
    assert [line.split(": ")[1] for line in found] == ["metadata.labels"], found


def test_a_custom_resources_nulls_are_read_as_the_api_server_reads_them() -> None:
    """kube-apiserver v1.36.3 with karpy's NodePool CRD (dryRun=All): null fields and null map
    values of the spec are dropped (``limits:``, ``taints:``, ``annotations: {a: null}``), metadata
    is ``ObjectMeta`` (a null label value is ``""``), and a null list item is refused."""
    text = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: np
  labels: {team: null}
  annotations:
spec:
  limits:
  template:
    metadata:
      labels:
      annotations: {a: null}
    spec:
      taints:
      requirements: []
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: d}
"""
    (nodepool,) = load(text).nodepools
    assert nodepool.metadata.labels == {"team": ""} and nodepool.spec.limits == {}
    assert nodepool.spec.template.metadata.annotations == {} and nodepool.spec.template.spec.taints == []
    (line,) = problems(text.replace("requirements: []", "requirements: [null]"))
    assert "spec.template.spec.requirements[0]: must be a mapping; got null" in line, line
    data = safe_load(text)
    assert walk_fields("karpenter.sh/v1", "NodePool", data, custom_resource=True).data["spec"]["template"]["metadata"] == {
        "annotations": {}}
    assert data["spec"]["limits"] is None  # the input is not changed
