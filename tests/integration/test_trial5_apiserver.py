"""Parity with the real kube-apiserver v1.36.3 for what the fifth fresh-user trial found (issue 35):
pod-level ``spec.resources`` (PodLevelResources, on by default since 1.34: what is refused, and
the requests the API server's defaulting stores, which karpy's scheduler counts) and
``spec.schedulingGates`` (the ``PodScheduled=False/SchedulingGated`` condition a gated pod is
created with; a gated pod may not name a node). Each manifest is POSTed with ``dryRun=All`` and
``fieldValidation=Strict`` (the harness of test_trial3_apiserver.py) and the loader's answer compared."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy_core.errors import KubeAPIError
from karpy_core.scheduling.pod import effective_requests
from karpy_core.scheduling.resources import parse_resource_list
from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import dry_run, loader_problems, workload

pytestmark = pytest.mark.devcluster

INIT = [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}}]
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "requests-above-containers": (workload("Pod", pod={"resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "6"}}}), True, ""),
    "limit-alone-memory": (workload("Pod", pod={"resources": {"limits": {"memory": "1Gi"}}}), True, ""),
    "requests-below-containers": (workload("Pod", pod={"resources": {"requests": {"cpu": "50m"}}}), False,
                                  'resources.requests[cpu]: Invalid value: "50m": must be greater than or equal to '
                                  "aggregate container requests of 100m"),
    "requests-below-init-peak": (workload("Pod", pod={"resources": {"requests": {"cpu": "500m"}}, "initContainers": INIT}), False,
                                 "must be greater than or equal to aggregate container requests of 1"),
    "limit-below-containers-requests": (workload("Pod", pod={"resources": {"limits": {"cpu": "50m"}}}), False,
                                        'resources.requests: Invalid value: "100m": must be less than or equal to cpu limit of 50m'),
    "deployment-requests-below-containers": (workload("Deployment", pod={"resources": {"requests": {"cpu": "50m"}}}), False,
                                             "must be greater than or equal to aggregate container requests of 100m"),
    "request-above-limit": (workload("Pod", pod={"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}), False,
                            'resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
    "container-limit-above-pod-limit": (workload("Pod", pod={"resources": {"limits": {"cpu": "1"}}},
                                                 container={"resources": {"limits": {"cpu": "2"}}}), False,
                                        'resources.containers[0][cpu].limits: Invalid value: "2": must be less than or equal to pod limits of 1'),
    "ephemeral-storage": (workload("Pod", pod={"resources": {"requests": {"ephemeral-storage": "1Gi"}}}), False,
                          'Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"'),
    "extended-resource": (workload("Pod", pod={"resources": {"requests": {"nvidia.com/gpu": "1"}}}), False,
                          'Unsupported value: "nvidia.com/gpu": supported values: "cpu", "hugepages-", "memory"'),
    "claims": (workload("Pod", pod={"resources": {"claims": [{"name": "x"}]}}), False,
               "resources.claims: Forbidden: claims may not be set for Resources at pod-level"),
    "windows": (workload("Pod", pod={"os": {"name": "windows"}, "resources": {"requests": {"cpu": "1"}}}), False,
                "resources: Forbidden: may not be set for a windows pod"),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_pod_level_resources(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case], statuses=(422,))


@pytest.mark.parametrize("pod", [
    {"resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "6"}}},
    {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
    {"resources": {"requests": {"memory": "512Mi"}}, "initContainers": INIT},
])
async def test_the_scheduler_counts_the_requests_the_api_server_stores(kube, pod):
    """karpy's effective request of the pod as written equals kube-scheduler's over the pod the API
    server stores (``PodRequests``: the stored pod-level requests, defaulted, win for cpu and
    memory; the containers' aggregate for the rest)."""
    stored = (await dry_run(kube, workload("Pod", pod=pod)))["spec"]
    counted = effective_requests(workload("Pod", pod=pod)["spec"])
    for name, amount in parse_resource_list(stored["resources"]["requests"]).items():
        assert counted[name] == amount, (name, counted, stored["resources"])


async def test_a_gated_pod_is_stored_as_the_in_memory_cluster_stores_it(kube):
    """kube-apiserver gives a pod created with ``schedulingGates`` ``PodScheduled=False`` reason
    ``SchedulingGated`` (what kube-scheduler and Karpenter then leave alone); the in-memory cluster
    stores the same condition. A gated Pod naming a node is refused by both the server and the loader."""
    from karpy_core.kube.admission import scheduling_gated

    gated = workload("Pod", pod={"schedulingGates": [{"name": "example.com/gate"}]})
    stored = (await dry_run(kube, gated))["status"]["conditions"]
    mine = scheduling_gated(gated)["status"]["conditions"]
    keys = ("type", "status", "reason", "message")
    assert [{k: c[k] for k in keys} for c in stored] == [{k: c[k] for k in keys} for c in mine]
    named = workload("Pod", pod={"schedulingGates": [{"name": "example.com/gate"}], "nodeName": "ghost"})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, named)
    why = "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared"
    assert why in str(server.value)
    assert any(why in line for line in loader_problems(named)), loader_problems(named)


async def test_a_null_limit_is_dropped_by_the_api_server_as_by_the_loader(kube):
    """val45: with karpy's NodePool CRD (Karpenter's schema), kube-apiserver stores ``limits: {cpu:
    null}`` as no cpu limit (a null in a field that is not nullable is pruned, not refused); the
    loader reads the same and warns that the null was dropped, as a user would not expect it."""
    from karpy_core.apis.loader import load_text
    nodepool = {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "val45-null-limit"},
                "spec": {"limits": {"cpu": None, "memory": "1Gi"}, "weight": None, "template": {
                    "metadata": {"labels": {"team": None, "tier": "web"}},
                    "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "d"}}}}}
    stored = await kube._request("POST", "/apis/karpenter.sh/v1/nodepools", query=[("dryRun", "All"), ("fieldValidation", "Strict")],
                                 body=nodepool)
    assert stored["spec"]["limits"] == {"memory": "1Gi"} and "weight" not in stored["spec"], stored["spec"]
    assert stored["spec"]["template"]["metadata"]["labels"] == {"tier": "web"}, stored["spec"]["template"]
    loaded = load_text(yaml.dump(nodepool), "in.yaml")
    (mine,) = loaded.nodepools
    assert {k: str(v) for k, v in mine.spec.limits.items()} == stored["spec"]["limits"] and mine.spec.weight is None
    assert mine.spec.template.metadata.labels == stored["spec"]["template"]["metadata"]["labels"]
    (note,) = [w for w in loaded.warnings if "null dropped" in w]
    assert "spec.limits.cpu, spec.template.metadata.labels.team: null dropped" in note, note


async def test_a_workload_whose_pods_are_invalid_after_defaulting_is_stored_but_its_pods_are_refused(kube):
    """val45: a Deployment with a pod-level cpu limit below its containers' requests is stored (a
    template is not defaulted), but every pod its ReplicaSet creates is refused (422: the pod-level
    request defaults to the containers' 100m, above the 50m limit). The loader reports the
    workload, the in-memory cluster refuses the pod with the server's words, so the simulator
    creates and schedules none (``WorkloadSimulator.failed_creates``)."""
    from karpy_core.kube.memory import InMemoryCluster

    deployment = workload("Deployment", pod={"resources": {"limits": {"cpu": "50m"}}})
    await dry_run(kube, deployment)
    pod = workload("Pod", pod={"resources": {"limits": {"cpu": "50m"}}})
    with pytest.raises(KubeAPIError) as server:
        await dry_run(kube, pod)
    assert server.value.status == 422
    why = 'spec.resources.requests: Invalid value: "100m": must be less than or equal to cpu limit of 50m'
    assert why in str(server.value), server.value
    (line,) = loader_problems(deployment)
    assert f"Deployment/default/w: {why.replace('spec.', 'spec.template.spec.', 1)}" in line, line
    assert "the pods of this Deployment" in line, line
    with pytest.raises(KubeAPIError) as memory:
        InMemoryCluster().create_sync("Pod", pod)
    assert memory.value.status == 422 and str(memory.value) == str(server.value), (memory.value, server.value)
