"""CapacityBuffer rules: chunk counts (replicas, percentage, limits), virtual pods, status conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from karpy_core.controllers.capacitybuffer import BufferPlacement, CapacityBufferStatus, provisioning_conditions
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.buffers import (
    ANNOTATION_FAKE_POD,
    compute_replicas,
    is_virtual_pod,
    limit_replicas,
    percentage_replicas,
    resolve_buffer,
    virtual_pods,
)
from karpy_core.state.views import CapacityBufferView, PodTemplateOwnerView, PodView, is_provisionable
from karpy_core.utils.clock import VirtualClock
from tests.cli import invoke_cli
from tests.fakes import must_peek


def spec(cpu: str = "1", memory: str = "1Gi", **extra: Any) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu, "memory": memory}}}], **extra}


def template(name: str = "chunk", **kw: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": name, "namespace": "default", "generation": 2},
            "template": {"metadata": {"labels": {"app": "headroom"}}, "spec": spec(**kw)}}


def buffer(name: str = "b", **s: Any) -> dict[str, Any]:
    return {"apiVersion": "autoscaling.x-k8s.io/v1beta1", "kind": "CapacityBuffer",
            "metadata": {"name": name, "namespace": "default", "uid": "u1", "generation": 1}, "spec": s}


def view(**s: Any) -> CapacityBufferView:
    return CapacityBufferView.of(buffer(**s))


def owners(*objs: dict[str, Any]) -> list[PodTemplateOwnerView]:
    return [PodTemplateOwnerView.of(o, str(o["kind"])) for o in objs]


def deployment(replicas: int) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec(cpu="500m")}}}


def test_percentage_rounds_up_with_a_floor_of_one() -> None:
    assert percentage_replicas(10, 20) == 2
    assert percentage_replicas(11, 20) == 3  # 2.2 -> 3
    assert percentage_replicas(3, 1) == 1  # 0.03 -> at least 1
    assert percentage_replicas(0, 50) == 0


def test_limits_floor_the_smallest_resource() -> None:
    # 20 cpu / 2 = 10, 40Gi / 4Gi = 10, 30Gi / 4Gi = 7.5 -> 7
    assert limit_replicas({"cpu": "20", "memory": "30Gi"}, spec(cpu="2", memory="4Gi")) == 7
    assert limit_replicas({"nvidia.com/gpu": "4"}, spec()) is None  # nothing requested is limited


def test_replicas_percentage_and_limits_combine_as_upstream() -> None:
    pod = spec(cpu="1")
    assert compute_replicas(view(replicas=3), pod, None) == 3
    assert compute_replicas(view(replicas=2, percentage=50), pod, 10) == 5  # max(2, 5)
    assert compute_replicas(view(replicas=8, limits={"cpu": "5"}), pod, None) == 5  # capped
    assert compute_replicas(view(limits={"cpu": "4500m"}), pod, None) == 4  # limits alone
    assert compute_replicas(view(percentage=20), pod, 0) == 0


def test_resolve_names_the_missing_reference() -> None:
    missing = resolve_buffer(view(podTemplateRef={"name": "nope"}, replicas=1), [], {"Deployment": []})
    assert (missing.ready, missing.reason) == (False, "PodTemplateNotFound")
    workload = resolve_buffer(view(scalableRef={"kind": "Deployment", "name": "web"}, percentage=30), [],
                              {"Deployment": owners(deployment(10)), "ReplicaSet": [], "StatefulSet": []})
    assert (workload.ready, workload.replicas, workload.reason) == (True, 3, "Resolved")
    found = resolve_buffer(view(podTemplateRef={"name": "chunk"}, replicas=2), owners(template()), {})
    assert (found.ready, found.replicas, found.pod_template, found.pod_template_generation) == (True, 2, "chunk", 2)
    gone = resolve_buffer(view(scalableRef={"kind": "Deployment", "name": "other"}, replicas=1), [], {"Deployment": []})
    assert gone.reason == "ScalableRefNotFound"
    odd = resolve_buffer(view(scalableRef={"kind": "Job", "name": "x"}, replicas=1), [], {"Deployment": []})
    assert odd.reason == "ResolutionFailed"


def test_virtual_pods_are_pending_placeholders_without_volumes_or_node() -> None:
    t = template()["template"]
    t["spec"]["nodeName"] = "n1"
    t["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "x"}}, {"name": "cfg", "configMap": {"name": "c"}}]
    t["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/d"}, {"name": "cfg", "mountPath": "/c"}]
    pods = virtual_pods(view(), t, 2)
    assert [p["metadata"]["name"] for p in pods] == ["capacity-buffer-b-1", "capacity-buffer-b-2"]
    p = pods[0]
    assert is_virtual_pod(PodView.of(p)) and p["metadata"]["annotations"][ANNOTATION_FAKE_POD] == "true"
    assert is_provisionable(p) and "nodeName" not in p["spec"] and p["spec"]["priority"] == -(2**31)
    assert [v["name"] for v in p["spec"]["volumes"]] == ["cfg"]
    assert [m["name"] for m in p["spec"]["containers"][0]["volumeMounts"]] == ["cfg"]
    assert p["metadata"]["labels"] == {"app": "headroom"}


async def test_status_controller_writes_replicas_and_ready_condition() -> None:
    cluster = InMemoryCluster(VirtualClock())
    cluster.create_sync("PodTemplate", template())
    cluster.create_sync("CapacityBuffer", buffer(podTemplateRef={"name": "chunk"}, replicas=3))
    cluster.create_sync("CapacityBuffer", buffer("lost", podTemplateRef={"name": "nope"}, replicas=3))
    assert await CapacityBufferStatus(kube=cluster).reconcile() == 1
    ok = must_peek(cluster, "CapacityBuffer", "b", "default")["status"]
    assert ok["replicas"] == 3 and ok["podTemplateRef"] == {"name": "chunk"} and ok["podTemplateGeneration"] == 1
    assert ok["provisioningStrategy"] == "buffer.x-k8s.io/active-capacity"
    (cond,) = ok["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("ReadyForProvisioning", "True", "Resolved")
    lost = must_peek(cluster, "CapacityBuffer", "lost", "default")["status"]
    assert "replicas" not in lost
    assert [(c["status"], c["reason"]) for c in lost["conditions"]] == [("False", "PodTemplateNotFound")]


def test_provisioning_condition_from_the_pass() -> None:
    ready = {**buffer(), "status": {"replicas": 2, "conditions": [{"type": "ReadyForProvisioning", "status": "True"}]}}
    fits = provisioning_conditions([ready], {"default/b": BufferPlacement(existing={"a": "n1", "b": "n2"})}, 0.0)
    prov = next(c for c in fits["default/b"] if c["type"] == "Provisioning")
    assert (prov["status"], prov["reason"], prov["message"]) == ("True", "FitsExistingCapacity", "All 2 virtual pods fit on existing capacity")
    new = provisioning_conditions([ready], {"default/b": BufferPlacement(existing={"a": "n1"}, new={"b": 0})}, 0.0)
    prov = next(c for c in new["default/b"] if c["type"] == "Provisioning")
    assert (prov["status"], prov["reason"], prov["message"]) == ("False", "RequiresNewCapacity",
                                                                 "1/2 virtual pods required new capacity, 0 failed")
    unready = provisioning_conditions([buffer()], {}, 0.0)
    assert [(c["type"], c["reason"]) for c in unready["default/b"]] == [("Provisioning", "NotReadyForProvisioning")]


EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "capacitybuffer" / "examples.yaml"


def test_validate_accepts_upstreams_example_shapes() -> None:
    result = invoke_cli("validate", str(EXAMPLES))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == "valid: 4 CapacityBuffer, 1 Deployment, 2 PodTemplate"


def test_validate_names_the_field_of_every_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: both, namespace: x}\n"
        "spec: {podTemplateRef: {name: t}, scalableRef: {kind: Deployment, name: web}, replicas: 1}\n---\n"
        "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: bare, namespace: x}\n"
        "spec: {podTemplateRef: {name: t}}\n---\n"
        "apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {name: typo, namespace: x}\n"
        "spec: {scalableRef: {kind: Deployment, name: web}, replica: 3, percentage: -1, limits: {cpu: lots}}\n---\n"
        "apiVersion: autoscaling.x-k8s.io/v1alpha1\nkind: CapacityBuffer\nmetadata: {name: old, namespace: x}\n"
        "spec: {scalableRef: {kind: Deployment, name: web}, replicas: 1}\n")
    result = invoke_cli("validate", str(bad))
    assert result.exit_code == 2
    err = result.stderr
    assert "CapacityBuffer/x/both: spec: You must define either PodTemplateRef or ScalableRef, but not both" in err
    assert "CapacityBuffer/x/bare: spec: If podTemplateRef is set, replicas or limits must also be set" in err
    assert "CapacityBuffer/x/typo: spec.percentage: must be >= 0" in err
    assert "CapacityBuffer/x/typo: spec.limits.cpu: 'lots' is not a Kubernetes quantity" in err
    assert 'CapacityBuffer/x/typo: spec.replica: unknown field "replica"' in err
    assert "CapacityBuffer/x/old" not in err  # v1alpha1 (Karpenter's docs) is read as v1beta1
