"""End-to-end check of the local control plane: real scheduler, kwok "kubelet".

Uses only the standard library (urllib + ssl) against the API server.
"""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.devcluster


def _wait_for(what: str, fn: Callable[[], Any], timeout: float = 90.0, interval: float = 0.5) -> Any:
    """Poll ``fn`` until it returns something truthy; fail with the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout}s waiting for {what}; last value: {last!r}")


def _condition(obj: dict[str, Any], cond_type: str) -> str | None:
    for cond in obj.get("status", {}).get("conditions") or []:
        if cond.get("type") == cond_type:
            return cond.get("status")
    return None


def test_version_and_kubeconfig(devcluster) -> None:
    info = devcluster.api("GET", "/version")
    assert info["gitVersion"] == "v1.36.3"
    assert (info["major"], info["minor"]) == ("1", "36")

    config = json.loads(devcluster.kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"] == devcluster.server
    assert config["users"][0]["user"]["token"] == devcluster.token
    assert devcluster.server.startswith("https://127.0.0.1:")

    # Plain urllib with the CA file: TLS verification against our CA works,
    # and the API refuses requests without the token.
    ctx = ssl.create_default_context(cafile=str(devcluster.ca_file))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(devcluster.server + "/api/v1/nodes", context=ctx, timeout=10)
    assert err.value.code in (401, 403)
    req = urllib.request.Request(devcluster.server + "/api/v1/namespaces", headers={"Authorization": f"Bearer {devcluster.token}"})
    with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
        names = {ns["metadata"]["name"] for ns in json.loads(resp.read())["items"]}
    assert {"default", "kube-system", "kube-node-lease"} <= names


def test_scheduler_binds_pod_to_kwok_node(devcluster) -> None:
    api = devcluster.api
    suffix = uuid.uuid4().hex[:8]
    node_name = f"kwok-node-{suffix}"
    pod_name = f"sleeper-{suffix}"
    resources = {"cpu": "4", "memory": "8Gi", "pods": "110"}

    api(
        "POST",
        "/api/v1/nodes",
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node_name,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {
                    "kubernetes.io/hostname": node_name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
            },
            "status": {"capacity": resources, "allocatable": resources},
        },
    )
    try:
        # kwok marks the node Ready ...
        node = _wait_for(
            "kwok to mark the node Ready",
            lambda: (n := api("GET", f"/api/v1/nodes/{node_name}")) and _condition(n, "Ready") == "True" and n,
        )
        assert node["status"]["capacity"]["cpu"] == "4"
        assert node["status"]["capacity"]["memory"] == "8Gi"
        assert node["status"]["allocatable"]["pods"] == "110"
        assert node["status"]["phase"] == "Running"
        assert "kwok" in node["status"]["nodeInfo"]["kubeletVersion"]
        # ... keeps a heartbeat lease for it ...
        lease = _wait_for(
            "the node lease",
            lambda: _get_or_none(api, f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{node_name}"),
        )
        assert lease["spec"]["leaseDurationSeconds"] == 40
        assert lease["spec"]["holderIdentity"]  # kwok's own identity
        assert lease["spec"]["renewTime"]
        # ... and the controller manager lifts the not-ready taint that the
        # API server put on the new node.
        _wait_for(
            "the node.kubernetes.io/not-ready taint to be removed",
            lambda: (
                not any(
                    t["key"].startswith("node.kubernetes.io/not-ready")
                    for t in api("GET", f"/api/v1/nodes/{node_name}")["spec"].get("taints") or []
                )
            ),
        )

        # A pod NOT pre-bound: only the nodeSelector points at the node.
        created = api(
            "POST",
            "/api/v1/namespaces/default/pods",
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": pod_name, "labels": {"app": "sleeper"}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node_name},
                    "containers": [
                        {
                            "name": "main",
                            "image": "registry.invalid/sleeper:1",  # never pulled: kwok fakes the container
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        )
        # As stored by the API server: unbound (the scheduler may already
        # have bound it by the time we could GET it).
        assert created["spec"].get("nodeName") in (None, "")
        assert created["status"]["phase"] == "Pending"

        pod = _wait_for(
            "the pod to be scheduled and Running",
            lambda: (p := api("GET", f"/api/v1/namespaces/default/pods/{pod_name}")) and p["status"].get("phase") == "Running" and p,
        )
        assert pod["spec"]["nodeName"] == node_name
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert _condition(pod, "PodScheduled") == "True"
        assert _condition(pod, "Ready") == "True"
        assert pod["status"]["podIP"].startswith("10.244.")
        assert pod["status"]["containerStatuses"][0]["ready"] is True
        # The service account admission got its "default" SA from the controller manager.
        assert pod["spec"]["serviceAccountName"] == "default"

        # The binding was made by the real kube-scheduler.
        events = _wait_for(
            "a Scheduled event",
            lambda: [
                e
                for e in api(
                    "GET",
                    f"/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3D{pod_name}",
                )["items"]
                if e["reason"] == "Scheduled"
            ],
        )
        event = events[0]
        assert (event.get("reportingComponent") or event["source"].get("component")) == "default-scheduler"
        assert node_name in event["message"]
    finally:
        _delete(api, f"/api/v1/namespaces/default/pods/{pod_name}")
        _delete(api, f"/api/v1/nodes/{node_name}")

    _wait_for("the pod to go away", lambda: _get_or_none(api, f"/api/v1/namespaces/default/pods/{pod_name}") is None)


def _get_or_none(api, path: str) -> Any:
    try:
        return api("GET", path)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise


def _delete(api, path: str) -> None:
    try:
        api("DELETE", path, {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
