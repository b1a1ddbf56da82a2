"""Parity with the real kube-apiserver v1.36.3 for what the third fresh-user trial found (issue 35):
a Deployment's ``strategy``, user and group IDs in ``securityContext`` (pod and container, every
workload kind), resources with field and cross-field problems (the server answers with all of
them), and Priority admission (a missing PriorityClass is refused; a class sets ``priority`` and
``preemptionPolicy``). Each manifest is POSTed with ``dryRun=All`` and the loader's answer compared."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import load_text, priority_class_problems
from karpy_core.errors import KubeAPIError, ManifestError
from karpy_core.kube.admission import admit_priority
from karpy_core.kube.client import AsyncKubeClient

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


@pytest.fixture
async def kube(devcluster):
    client = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    yield client
    await client.close()


async def dry_run(kube: AsyncKubeClient, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as the API server would store it (``dryRun=All``), or KubeAPIError."""
    answer = await kube._request("POST", kube._path(obj["kind"], namespace=obj["metadata"].get("namespace")),
                                 query=[("dryRun", "All")], body=obj)
    assert isinstance(answer, dict)
    return answer


def loader_problems(obj: dict[str, Any]) -> list[str]:
    try:
        loaded = load_text(yaml.safe_dump(obj), "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return priority_class_problems(loaded)


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree(kube, case):
    obj, accepted = CASES[case]
    try:
        await dry_run(kube, obj)
        server_accepts = True
    except KubeAPIError as exc:
        assert exc.status in (400, 422), exc
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
