"""Parity with the real kube-apiserver v1.36.3 for what the third fresh-user trial found (issue 35):
a Deployment's ``strategy``, user and group IDs in ``securityContext`` (pod and container, every
workload kind), resources with field and cross-field problems (the server answers with all of
them), and Priority admission (a missing PriorityClass is refused; a class sets ``priority`` and
``preemptionPolicy``). Trial 4 added fields the schema does not declare (strict decoding), enums
(``preemptionPolicy``, seccomp and AppArmor profiles, ``fsGroupChangePolicy``...), sysctl names,
``capabilities``, ``minReadySeconds``, a container's ``image`` and RuntimeClass admission. Trial 5
added explicit nulls (and what the server stores for them), a container's ``restartPolicy`` and
``restartPolicyRules``, more pod-template values, a boolean label value, undeclared fields in
ignored kinds, and a bad name reported with bad label keys. Each
manifest is POSTed with ``dryRun=All`` and ``fieldValidation=Strict`` (``kubectl apply``'s default)
and the loader's answer compared."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import load_text, priority_class_problems
from karpy_core.errors import KubeAPIError, ManifestError
from karpy_core.kube.admission import admit_priority, pod_level_resources_problems, runtime_class_problems
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.utils.kubeyaml import KubeYAMLDumper

pytestmark = pytest.mark.devcluster

POD_SPEC: dict[str, Any] = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}


def workload(kind: str, *, pod: dict[str, Any] | None = None, container: dict[str, Any] | None = None,
             spec: dict[str, Any] | None = None) -> dict[str, Any]:
    pod_spec = copy.deepcopy(POD_SPEC)
    pod_spec["containers"][0].update(container or {})
    pod_spec.update(pod or {})
    meta = {"name": "w", "namespace": "default"}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
    if kind == "Job":
        pod_spec["restartPolicy"] = "Never"
        body: dict[str, Any] = {"template": {"spec": pod_spec}}
    else:
        body = {"selector": {"matchLabels": {"app": "w"}}, "template": {"metadata": {"labels": {"app": "w"}}, "spec": pod_spec}}
    if kind == "StatefulSet":
        body["serviceName"] = "w"
    return {"apiVersion": "batch/v1" if kind == "Job" else "apps/v1", "kind": kind, "metadata": meta, "spec": {**body, **(spec or {})}}


KINDS = ("Pod", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job")

CASES: dict[str, tuple[dict[str, Any], bool]] = {
    "strategy-sideways": (workload("Deployment", spec={"strategy": {"type": "Sideways"}}), False),
    "strategy-recreate": (workload("Deployment", spec={"strategy": {"type": "Recreate"}}), True),
    "strategy-recreate-rolling": (workload("Deployment", spec={"strategy": {"type": "Recreate", "rollingUpdate": {}}}), False),
    "max-surge-string": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": "200"}}}), False),
    "max-surge-int-200": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": 200}}}), True),
    "max-surge-200-percent": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": "200%"}}}), True),
    "max-surge-negative": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": -1}}}), False),
    "max-unavailable-string": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxUnavailable": "1"}}}), False),
    "max-unavailable-150-percent": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxUnavailable": "150%"}}}), False),
    "both-zero": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0}}}), False),
    "both-zero-percent": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": "0%", "maxUnavailable": 0}}}), False),
    "surge-zero-only": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxSurge": 0}}}), True),
    "unavailable-zero-only": (workload("Deployment", spec={"strategy": {"rollingUpdate": {"maxUnavailable": 0}}}), True),
    "supplemental-group-negative": (workload("Pod", pod={"securityContext": {"supplementalGroups": [-1]}}), False),
    "ids-at-bounds": (workload("Pod", pod={"securityContext": {"runAsUser": 0, "fsGroup": 2**31 - 1}},
                               container={"securityContext": {"runAsGroup": 2**31 - 1}}), True),
    "negative-limit-and-request-above-limit": (workload("Pod", container={"resources": {
        "limits": {"cpu": "-1", "memory": "1Gi"}, "requests": {"memory": "2Gi"}}}), False),
}
for _name, _kind, _strategy, _accepted in (
        ("sideways", "DaemonSet", {"type": "Sideways"}, False), ("ondelete", "DaemonSet", {"type": "OnDelete"}, True),
        ("ondelete-rolling", "DaemonSet", {"type": "OnDelete", "rollingUpdate": {}}, True),
        ("unavailable-0", "DaemonSet", {"rollingUpdate": {"maxUnavailable": 0}}, False),
        ("surge-only", "DaemonSet", {"rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}, True),
        ("both-set", "DaemonSet", {"rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}}, False),
        ("surge-200-percent", "DaemonSet", {"rollingUpdate": {"maxSurge": "200%"}}, False),
        ("unavailable-string", "DaemonSet", {"rollingUpdate": {"maxUnavailable": "5"}}, False),
        ("sideways", "StatefulSet", {"type": "Sideways"}, False),
        ("ondelete-rolling", "StatefulSet", {"type": "OnDelete", "rollingUpdate": {}}, False),
        ("partition-negative", "StatefulSet", {"rollingUpdate": {"partition": -1}}, False),
        ("unavailable-string", "StatefulSet", {"rollingUpdate": {"maxUnavailable": "5"}}, True)):
    CASES[f"{_kind}-update-strategy-{_name}"] = (workload(_kind, spec={"updateStrategy": _strategy}), _accepted)
for _kind in KINDS:
    for _where in ("pod", "container"):
        for _field, _value in (("runAsUser", -5), ("runAsUser", "1000"), ("runAsGroup", 2**31), ("runAsGroup", "3000")):
            CASES[f"{_kind}-{_where}-{_field}-{_value}"] = (workload(_kind, **{_where: {"securityContext": {_field: _value}}}), False)
    CASES[f"{_kind}-pod-fsGroup--1"] = (workload(_kind, pod={"securityContext": {"fsGroup": -1}}), False)


# Trial 4 (issue 35): fields kube-apiserver's strict decoding refuses (kubectl's default
# --validate=strict), enums and values its validation refuses, and what its admission refuses.
def _at(obj: dict[str, Any], *path: str | int) -> dict[str, Any]:
    for key in path:
        obj = obj[key]  # type: ignore[index]
    return obj


def _with(obj: dict[str, Any], path: tuple[str | int, ...], **fields: Any) -> dict[str, Any]:
    _at(obj, *path).update(fields)
    return obj


PC = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "val43-pc"}, "value": 10}
PDB = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "default"},
       "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "w"}}}}
TEMPLATE = ("spec", "template", "spec")
CASES.update({
    "unknown-pod-field": (workload("Deployment", pod={"bogusPodField": 1}), False),
    "unknown-null-field": (workload("Pod", pod={"bogusNull": None}), False),
    "unknown-container-field": (workload("Deployment", container={"imagePullPolicyy": "Always"}), False),
    "unknown-selector-field": (_with(workload("Deployment"), ("spec", "selector"), matchLabelz={"a": "b"}), False),
    "unknown-top-level-field": (workload("Deployment") | {"bogusTop": 1}, False),
    "unknown-metadata-field": (_with(workload("Deployment"), ("metadata",), bogusMeta=1), False),
    "unknown-status-field": (workload("Deployment") | {"status": {"bogusStatus": 1}}, False),
    "known-status-field": (workload("Deployment") | {"status": {"replicas": 3}}, True),
    "unknown-field-in-second-container": (_with(workload("Pod"), ("spec",), containers=[
        {"name": "a", "image": "x"}, {"name": "b", "image": "x", "bogus": 1}]), False),
    "unknown-env-field": (workload("Pod", container={"env": [{"name": "A", "valueFromm": {}}]}), False),
    "unknown-volume-source-field": (workload("Pod", pod={"volumes": [{"name": "v", "emptyDir": {"bogus": 1}}]}), False),
    "managed-fields-are-free-form": (_with(workload("Deployment"), ("metadata",), managedFields=[
        {"manager": "m", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:anything": {}}}}]), True),
    "maps-take-any-key": (workload("Pod", pod={"nodeSelector": {"anything": "x"}}, container={"resources": {
        "requests": {"cpu": "1", "example.com/dongle": "1"}, "limits": {"example.com/dongle": "1"}}}), True),
    "pdb-unknown-field": (_with(copy.deepcopy(PDB), ("spec",), selectr={}), False),
    "pdb-known-fields": (copy.deepcopy(PDB), True),
    "priorityclass-unknown-field": (PC | {"bogus": 1}, False),
    "priorityclass-preemption-sometimes": (PC | {"preemptionPolicy": "Sometimes"}, False),
    "priorityclass-preemption-never": (PC | {"preemptionPolicy": "Never"}, True),
    "preemption-sometimes": (workload("Deployment", pod={"preemptionPolicy": "Sometimes"}), False),
    "pod-preemption-never-without-class": (workload("Pod", pod={"preemptionPolicy": "Never"}), False),
    "pod-preemption-default-without-class": (workload("Pod", pod={"preemptionPolicy": "PreemptLowerPriority"}), True),
    "fs-group-change-policy-sometimes": (workload("Deployment", pod={"securityContext": {"fsGroupChangePolicy": "Sometimes"}}), False),
    "fs-group-change-policy-on-root-mismatch": (workload("Pod", pod={"securityContext": {"fsGroupChangePolicy": "OnRootMismatch"}}), True),
    "seccomp-weird": (workload("Deployment", pod={"securityContext": {"seccompProfile": {"type": "Weird"}}}), False),
    "container-seccomp-weird": (workload("Pod", container={"securityContext": {"seccompProfile": {"type": "Weird"}}}), False),
    "seccomp-runtime-default": (workload("Pod", pod={"securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}), True),
    "seccomp-no-type": (workload("Pod", pod={"securityContext": {"seccompProfile": {}}}), False),
    "seccomp-localhost-without-profile": (workload("Pod", pod={"securityContext": {"seccompProfile": {"type": "Localhost"}}}), False),
    "seccomp-localhost-empty-profile": (workload("Pod", pod={"securityContext": {"seccompProfile": {
        "type": "Localhost", "localhostProfile": ""}}}), True),
    "seccomp-profile-without-localhost": (workload("Pod", pod={"securityContext": {"seccompProfile": {
        "type": "RuntimeDefault", "localhostProfile": "p.json"}}}), False),
    "apparmor-weird": (workload("Pod", container={"securityContext": {"appArmorProfile": {"type": "Weird"}}}), False),
    "apparmor-localhost-empty-profile": (workload("Pod", pod={"securityContext": {"appArmorProfile": {
        "type": "Localhost", "localhostProfile": ""}}}), False),
    "apparmor-localhost-profile": (workload("Pod", pod={"securityContext": {"appArmorProfile": {
        "type": "Localhost", "localhostProfile": "k8s-x"}}}), True),
    "capabilities-add-number": (workload("Deployment", container={"securityContext": {"capabilities": {"add": 5}}}), False),
    "capabilities-add-list-of-number": (workload("Pod", container={"securityContext": {"capabilities": {"add": [5]}}}), False),
    "capabilities-drop-string": (workload("Pod", container={"securityContext": {"capabilities": {"drop": "ALL"}}}), False),
    "capabilities-lists": (workload("Pod", container={"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}}),
                           True),
    "min-ready-seconds-zero": (workload("Deployment", spec={"minReadySeconds": 0}), True),
    "no-image": (_with(workload("Pod"), ("spec", "containers", 0), image=None), False),
    "empty-image": (workload("Pod", container={"image": ""}), False),
    "image-with-space": (workload("Pod", container={"image": " pause"}), False),
    "init-container-without-image": (workload("Deployment", pod={"initContainers": [{"name": "i"}]}), False),
    "image-pull-policy-sometimes": (workload("Pod", container={"imagePullPolicy": "Sometimes"}), False),
    "dns-policy-weird": (workload("Pod", pod={"dnsPolicy": "Weird"}), False),
    "pod-overhead-without-runtime-class": (workload("Pod", pod={"overhead": {"cpu": "1"}}), False),
    "pod-runtime-class-missing": (workload("Pod", pod={"runtimeClassName": "val43-missing"}), False),
})
for _kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job"):
    _obj = workload(_kind)
    del _at(_obj, *TEMPLATE)["containers"][0]["image"]
    CASES[f"{_kind}-no-image"] = (_obj, False)
    if _kind != "Job":
        CASES[f"{_kind}-min-ready-seconds-negative"] = (workload(_kind, spec={"minReadySeconds": -3}), False)
for _name, _sysctls, _accepted in (
        ("bad-name", [{"name": "bad name!", "value": "1"}], False), ("upper-case", [{"name": "Net.core.x", "value": "1"}], False),
        ("too-long", [{"name": "a" * 254, "value": "1"}], False), ("empty-name", [{"name": "", "value": "1"}], False),
        ("no-name", [{"value": "1"}], False), ("duplicate", [{"name": "kernel.shm_rmid_forced", "value": "1"}] * 2, False),
        ("dotted", [{"name": "net.core.somaxconn", "value": "1024"}], True),
        ("slashed", [{"name": "net/ipv4/ip_local_port_range", "value": "1024 65535"}], True)):
    CASES[f"sysctls-{_name}"] = (workload("Deployment", pod={"securityContext": {"sysctls": _sysctls}}), _accepted)


# Trial 5 (issue 35): explicit nulls (Helm output), a container's restartPolicy with
# restartPolicyRules, pod-template values, a label value kubectl sends as a boolean (YAML ``y``),
# undeclared fields in ignored kinds.
_RULES = [{"action": "Restart", "exitCodes": {"operator": "In", "values": [42]}}]
HELM_NULLS = _with(_with(workload("Deployment", container={"env": [{"name": "A", "value": None}], "resources": None, "ports": None},
                                  pod={"nodeSelector": None, "tolerations": None, "affinity": None, "initContainers": None}),
                         ("metadata",), labels=None, annotations=None), ("spec",), replicas=None, strategy=None)
NETWORK_POLICY = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": {"name": "n", "namespace": "default"},
                  "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
CLUSTER_ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "val44-r"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}
HPA = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h", "namespace": "default"},
       "spec": {"maxReplicas": 3, "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "w"}}}
CASES.update({
    "null-struct-fields": (HELM_NULLS, True),
    "null-label-and-annotation-values": (_with(workload("Pod"), ("metadata",), labels={"team": None}, annotations={"note": None}), True),
    "null-quantity-and-node-selector-value": (workload("Pod", pod={"nodeSelector": {"disk": None}},
                                                       container={"resources": {"requests": {"cpu": None}}}), True),
    "null-args-item": (workload("Pod", container={"args": ["a", None]}), True),
    "null-toleration-item": (workload("Pod", pod={"tolerations": [None]}), False),
    "null-container-item": (_with(workload("Pod"), ("spec",), containers=[{"name": "c", "image": "x"}, None]), False),
    "null-env-item": (workload("Pod", container={"env": [None]}), False),
    "null-metadata": (workload("Pod") | {"metadata": None}, False),
    "null-spec": (workload("Deployment") | {"spec": None}, False),
    "null-overhead": (workload("Pod", pod={"overhead": None}), True),
    "container-restart-never-with-rules": (workload("Pod", container={"restartPolicy": "Never", "restartPolicyRules": _RULES}), True),
    "container-restart-never": (workload("Deployment", container={"restartPolicy": "Never"}), True),
    "container-restart-bad": (workload("Pod", container={"restartPolicy": "Bad"}), False),
    "container-rules-without-policy": (workload("Pod", container={"restartPolicyRules": _RULES}), False),
    "container-rules-bad-action": (workload("Pod", container={"restartPolicy": "Never", "restartPolicyRules": [
        {"action": "Explode", "exitCodes": {"operator": "In", "values": [1]}}]}), False),
    "init-container-restart-on-failure": (workload("Pod", pod={"initContainers": [{"name": "i", "image": "x",
                                                                                   "restartPolicy": "OnFailure"}]}), True),
    "termination-message-policy-bad": (workload("Deployment", container={"terminationMessagePolicy": "Bad"}), False),
    "env-empty-name": (workload("Pod", container={"env": [{"name": "", "value": "a"}]}), False),
    "os-plan9": (workload("Deployment", pod={"os": {"name": "plan9"}}), False),
    "os-linux": (workload("Pod", pod={"os": {"name": "linux"}}), True),
    "progress-deadline-equals-min-ready": (workload("Deployment", spec={"progressDeadlineSeconds": 10, "minReadySeconds": 10}), False),
    "progress-deadline-default-below-min-ready": (workload("Deployment", spec={"minReadySeconds": 700}), False),
    "progress-deadline-negative": (workload("Deployment", spec={"progressDeadlineSeconds": -1}), False),
    "progress-deadline-above-min-ready": (workload("Deployment", spec={"progressDeadlineSeconds": 11, "minReadySeconds": 10}), True),
    "selinux-change-policy-mount-option": (workload("Deployment", pod={"securityContext": {"seLinuxChangePolicy": "MountOption"}}),
                                           False),
    "selinux-change-policy-recursive": (workload("Pod", pod={"securityContext": {"seLinuxChangePolicy": "Recursive"}}), True),
    "ephemeral-containers-on-pod-create": (workload("Pod", pod={"ephemeralContainers": [{"name": "d", "image": "busybox"}]}), False),
    "ephemeral-containers-in-template": (workload("Deployment", pod={"ephemeralContainers": [{"name": "d", "image": "busybox"}]}),
                                         False),
    "ephemeral-containers-empty": (workload("Pod", pod={"ephemeralContainers": []}), True),
    "toleration-without-key-or-exists": (workload("Pod", pod={"tolerations": [{"effect": "NoSchedule"}]}), False),
    "label-value-boolean": (_with(workload("Pod"), ("metadata",), labels={"a": True}), False),  # kubectl's request for `a: y`
    "networkpolicy-unknown-field": (_with(copy.deepcopy(NETWORK_POLICY), ("spec",), ingres=[]), False),
    "networkpolicy-known-fields": (copy.deepcopy(NETWORK_POLICY), True),
    "clusterrole-unknown-field": (CLUSTER_ROLE | {"rule": []}, False),
    "clusterrole-known-fields": (copy.deepcopy(CLUSTER_ROLE), True),
    "hpa-unknown-field": (_with(copy.deepcopy(HPA), ("spec",), minReplica=1), False),
    "hpa-known-fields": (copy.deepcopy(HPA), True),
})
# val45: a boolean or number (YAML's plain ``y``, ``true``, ``1``) in a built-in string map or list,
# which the server's decoder refuses (HTTP 400)
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "default"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"},
           "spec": {"ports": [{"port": 80}]}}
CASES.update({
    "configmap-data-boolean": (CONFIG_MAP | {"data": {"enabled": True}}, False),
    "configmap-data-number": (CONFIG_MAP | {"data": {"port": 8080}}, False),
    "configmap-binary-data-boolean": (CONFIG_MAP | {"binaryData": {"a": False}}, False),
    "configmap-data-strings": (CONFIG_MAP | {"data": {"enabled": "y", "port": "8080"}}, True),
    "secret-string-data-boolean": (SECRET | {"stringData": {"debug": True}}, False),
    "secret-data-boolean": (SECRET | {"data": {"debug": True}}, False),
    "secret-string-data-strings": (SECRET | {"stringData": {"debug": "y"}}, True),
    "service-selector-boolean": (_with(copy.deepcopy(SERVICE), ("spec",), selector={"canary": True}), False),
    "service-selector-strings": (_with(copy.deepcopy(SERVICE), ("spec",), selector={"canary": "y"}), True),
    "container-args-boolean": (workload("Deployment", container={"args": ["--x", True]}), False),
    "container-command-number": (workload("Pod", container={"command": [1]}), False),
    "annotation-value-number": (_with(workload("Deployment"), ("metadata",), annotations={"a": 1}), False),
})
for _kind in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"):
    CASES[f"{_kind}-template-restart-on-failure"] = (workload(_kind, pod={"restartPolicy": "OnFailure"}), False)


def _plural(kind: str) -> str:
    return {"PriorityClass": "priorityclasses", "Ingress": "ingresses", "NetworkPolicy": "networkpolicies",
            "IngressClass": "ingressclasses"}.get(kind, kind.lower() + "s")


_CLUSTER_SCOPED = ("PriorityClass", "RuntimeClass", "Node", "StorageClass", "Namespace", "ClusterRole", "ClusterRoleBinding",
                   "IngressClass")


def _collection(obj: dict[str, Any]) -> str:
    """The path to POST ``obj`` to, from its apiVersion and kind (namespace ``default`` when its
    metadata names none)."""
    group_version, kind = obj["apiVersion"], obj["kind"]
    base = f"/api/{group_version}" if "/" not in group_version else f"/apis/{group_version}"
    namespace = "" if kind in _CLUSTER_SCOPED else f"/namespaces/{(obj.get('metadata') or {}).get('namespace') or 'default'}"
    return f"{base}{namespace}/{_plural(kind)}"


async def dry_run(kube: AsyncKubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server would store it (``dryRun=All``, ``fieldValidation=Strict`` as
    ``kubectl apply`` asks by default), or KubeAPIError."""
    answer = await kube._request("POST", _collection(obj), query=[("dryRun", "All"), ("fieldValidation", "Strict")], body=obj)
    assert isinstance(answer, dict)
    return answer


def loader_problems(obj: dict[str, Any]) -> list[str]:
    try:
        loaded = load_text(yaml.dump(obj, Dumper=KubeYAMLDumper), "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return priority_class_problems(loaded) + runtime_class_problems(loaded) + pod_level_resources_problems(loaded)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree(kube, case):
    obj, accepted = CASES[case]
    try:
        await dry_run(kube, obj)
        server_accepts = True
    except KubeAPIError as exc:
        assert exc.status in (400, 403, 422), exc  # decoding, admission, validation
        server_accepts = False
    assert server_accepts is accepted, case
    assert (not loader_problems(obj)) is accepted, (case, loader_problems(obj))


async def test_resource_problems_are_all_reported_as_the_api_server_does(kube):
    obj = CASES["negative-limit-and-request-above-limit"][0]
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, obj)
    assert "limits[cpu]" in str(server.value) and "must be less than or equal to memory limit of 1Gi" in str(server.value)
    (line,) = loader_problems(obj)
    assert "limits.cpu: must not be negative" in line and "must be less than or equal to memory limit of '1Gi'" in line, line


async def test_a_quantity_the_decoder_refuses_hides_the_rest_on_the_server_too(kube):
    obj = workload("Pod", container={"resources": {"limits": {"cpu": "1x", "memory": "1Gi"}, "requests": {"memory": "2Gi"}}})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, obj)
    assert server.value.status == 400 and "memory limit" not in str(server.value), server.value
    (line,) = loader_problems(obj)
    assert "limits.cpu" in line and "memory limit" not in line, line


async def test_priority_admission_matches_the_api_server(kube):
    pod = workload("Pod", pod={"priorityClassName": "val41-missing"})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, pod)
    assert server.value.status == 403 and "no PriorityClass with name val41-missing was found" in str(server.value)
    with pytest.raises(KubeAPIError) as memory:
        admit_priority(pod, {})
    assert memory.value.status == 403 and str(memory.value).endswith("no PriorityClass with name val41-missing was found")
    (line,) = loader_problems(pod)
    assert "spec.priorityClassName: no PriorityClass with name val41-missing was found" in line, line

    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "val41-high"}, "value": 1000,
          "preemptionPolicy": "Never"}
    await kube.create("PriorityClass", pc)
    try:
        classes = {"val41-high": pc}
        for spec in ({"priorityClassName": "val41-high"}, {}, {"priorityClassName": "system-node-critical"},
                     {"priorityClassName": "system-cluster-critical"}):
            stored = (await dry_run(kube, workload("Pod", pod=spec)))["spec"]
            admitted = admit_priority(workload("Pod", pod=spec), classes)["spec"]
            assert (admitted["priority"], admitted["preemptionPolicy"]) == (stored["priority"], stored["preemptionPolicy"]), spec
        wrong = workload("Pod", pod={"priorityClassName": "val41-high", "priority": 5})
        with pytest.raises(KubeAPIError) as server:
            await dry_run(kube, wrong)
        with pytest.raises(KubeAPIError) as memory:
            admit_priority(wrong, classes)
        assert str(memory.value).partition("forbidden: ")[2] in str(server.value), (memory.value, server.value)
    finally:
        await kube.delete("PriorityClass", "val41-high")


async def test_unknown_fields_are_named_as_the_api_server_names_them(kube):
    obj = workload("Deployment", pod={"bogusA": 1}, container={"imagePullPolicyy": "Always"})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, obj)
    assert server.value.status == 400 and "strict decoding error" in str(server.value), server.value
    problems = loader_problems(obj)
    assert len(problems) == 2, problems
    for path in ("spec.template.spec.bogusA", "spec.template.spec.containers[0].imagePullPolicyy"):
        assert f'unknown field "{path}"' in str(server.value)
        assert any(f'{path}: unknown field "{path}"' in line for line in problems), (path, problems)
    assert "did you mean 'imagePullPolicy'?" in " ".join(problems)


async def test_enum_problems_are_worded_as_the_api_server_words_them(kube):
    obj = workload("Deployment", pod={"preemptionPolicy": "Sometimes", "securityContext": {
        "seccompProfile": {"type": "Weird"}, "fsGroupChangePolicy": "Sometimes"}}, spec={"minReadySeconds": -3})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, obj)
    problems = "\n".join(loader_problems(obj))
    for expected in ('spec.template.spec.preemptionPolicy: Unsupported value: "Sometimes": supported values: '
                     '"PreemptLowerPriority", "Never"',
                     'spec.template.spec.securityContext.seccompProfile.type: Unsupported value: "Weird": supported values: '
                     '"Localhost", "RuntimeDefault", "Unconfined"',
                     'spec.template.spec.securityContext.fsGroupChangePolicy: Unsupported value: "Sometimes": supported values: '
                     '"Always", "OnRootMismatch"',
                     "spec.minReadySeconds: Invalid value: -3: must be greater than or equal to 0"):
        assert expected in str(server.value), (expected, server.value)
        assert expected in problems, (expected, problems)


async def test_a_workload_with_overhead_and_no_runtime_class_is_stored_but_its_pods_are_refused(kube):
    """kube-apiserver accepts the Deployment (admission looks at pods only) and refuses every pod
    of its template; karpy reports the workload, as it reports a missing PriorityClass."""
    deployment = workload("Deployment", pod={"overhead": {"cpu": "1"}})
    await dry_run(kube, deployment)
    pod = workload("Pod", pod={"overhead": {"cpu": "1"}})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, pod)
    assert server.value.status == 403
    why = "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    assert why in str(server.value)
    (line,) = loader_problems(deployment)
    assert f"spec.template.spec: {why}" in line and "the pods of this Deployment" in line, line




async def test_every_shipped_built_in_object_passes_strict_decoding(kube):
    """Each built-in object of examples/ and the embedded default scenario is accepted by the API
    server with ``fieldValidation=Strict``, as the loader accepts it (a published example that the
    server refused was fixed: Karpenter's ``allowPrivilegedEscalation`` typo)."""
    from importlib import resources
    from pathlib import Path

    from karpy_core.apis.fieldschema import has_schema

    repo = Path(__file__).resolve().parents[2]
    texts = [p.read_text() for p in sorted((repo / "examples").rglob("*.yaml"))]
    texts.append(resources.files("karpy_core.data").joinpath("default-scenario.yaml").read_text())
    sent = 0
    for text in texts:
        for doc in yaml.safe_load_all(text.replace("${CLUSTER_NAME}", "demo")):
            if not isinstance(doc, dict) or not has_schema(str(doc.get("apiVersion")), str(doc.get("kind"))):
                continue
            await dry_run(kube, doc)
            sent += 1
    assert sent > 30, sent


async def test_nulls_are_stored_as_the_loader_reads_them(kube):
    """What kube-apiserver stores for explicit nulls equals what fieldschema's walk hands the models:
    a null struct field unset (``replicas`` then defaulted to 1), a null map value or list item
    its type's zero."""
    from karpy_core.apis.fieldschema import walk_fields

    stored = await dry_run(kube, HELM_NULLS)
    walked = walk_fields("apps/v1", "Deployment", HELM_NULLS).data
    assert "labels" not in walked["metadata"] and "labels" not in stored["metadata"]
    assert "replicas" not in walked["spec"] and stored["spec"]["replicas"] == 1
    for key in ("nodeSelector", "tolerations", "affinity", "initContainers"):
        assert key not in walked["spec"]["template"]["spec"] and key not in stored["spec"]["template"]["spec"], key
    assert stored["spec"]["template"]["spec"]["containers"][0]["env"] == walked["spec"]["template"]["spec"]["containers"][0]["env"]
    pod = workload("Pod", pod={"nodeSelector": {"disk": None}}, container={"args": ["a", None], "resources": {"requests": {
        "cpu": None, "memory": "1Gi"}}})
    pod["metadata"].update(labels={"team": None}, annotations={"note": None})
    stored = await dry_run(kube, pod)
    walked = walk_fields("v1", "Pod", pod).data
    assert stored["metadata"]["labels"] == walked["metadata"]["labels"] == {"team": ""}
    assert stored["metadata"]["annotations"] == walked["metadata"]["annotations"] == {"note": ""}
    assert stored["spec"]["nodeSelector"] == walked["spec"]["nodeSelector"] == {"disk": ""}
    for key in ("args", "resources"):
        assert stored["spec"]["containers"][0][key] == walked["spec"]["containers"][0][key], key


async def test_a_bad_name_and_bad_label_keys_are_reported_together_as_the_api_server_does(kube):
    obj = _with(workload("Pod"), ("metadata",), name="Bad_Name", labels={"-x": "y"})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, obj)
    assert server.value.status == 422 and "metadata.name" in str(server.value) and "metadata.labels" in str(server.value)
    problems = loader_problems(obj)
    assert [line.split(": ")[1] for line in problems] == ["metadata.name", "metadata.labels"], problems


async def test_a_boolean_in_a_string_map_is_refused_at_the_path_the_api_server_names(kube):
    """kube-apiserver's decoder answers ``json: cannot unmarshal bool into Go struct field
    ConfigMap.data of type string`` (HTTP 400, the first such value only); karpy names each value
    (``data.enabled``) with the fix, quoting."""
    for obj, server_field, mine in ((CASES["configmap-data-boolean"][0], "ConfigMap.data of type string", "data.enabled"),
                                    (CASES["secret-string-data-boolean"][0], "Secret.stringData of type string", "stringData.debug"),
                                    (CASES["service-selector-boolean"][0], "ServiceSpec.spec.selector of type string",
                                     "spec.selector.canary")):
        with pytest.raises(KubeAPIError) as server:
            await dry_run(kube, obj)
        assert server.value.status == 400 and "cannot unmarshal bool into Go struct field " + server_field in str(server.value), \
            server.value
        (line,) = loader_problems(obj)
        assert f"{mine}: must be a string; got true (quote it in YAML so it stays text)" in line, line
