"""The informer cache keeps pods and nodes small: what no karpy code reads is dropped, a pod's
repeated strings are shared, and every field a decision reads is kept as the API server sent it."""

from __future__ import annotations

import copy
import sys
from typing import Any

from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.scheduling.pod import pod_info
from karpy_core.state.views import PodView


def _pod(name: str) -> dict[str, Any]:
    """A pod as kube-apiserver and kwok return it once Running (service-account volume, defaults, statuses)."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": {"app": "inflate"},
                     "annotations": {"karpenter.sh/do-not-disrupt": "true"},
                     "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "inflate-7d", "uid": "rs",
                                          "controller": True}],
                     "managedFields": [{"manager": "kube-scheduler", "operation": "Update", "fieldsV1": {"f:status": {}}}]},
        "spec": {
            "volumes": [
                {"name": "kube-api-access-x1", "projected": {"sources": [{"serviceAccountToken": {"expirationSeconds": 3607,
                                                                                                  "path": "token"}}],
                                                             "defaultMode": 420}},
                {"name": "data", "persistentVolumeClaim": {"claimName": f"data-{name}"}},
            ],
            "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
                            "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "SECRET_NAME", "value": "x"}], "command": ["/pause"],
                            "volumeMounts": [{"name": "kube-api-access-x1", "mountPath": "/var/run/secrets"}],
                            "livenessProbe": {"httpGet": {"path": "/", "port": 80}},
                            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
            "initContainers": [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "100m"}}, "args": ["sleep"]}],
            "nodeSelector": {"karpy-e2e": "bench"},
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
            "nodeName": "n1", "priority": 0, "schedulerName": "default-scheduler",
        },
        "status": {
            "phase": "Running",
            "conditions": [{"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": "2026-12-06T08:26:39Z"}],
            "hostIP": "127.0.0.1", "hostIPs": [{"ip": "127.0.0.1"}], "podIP": "10.244.0.4", "podIPs": [{"ip": "10.244.0.4"}],
            "startTime": "2026-12-06T08:26:39Z", "qosClass": "Burstable",
            "containerStatuses": [{"name": "app", "state": {"running": {"startedAt": "2026-12-06T08:26:39Z"}}, "ready": True,
                                   "restartCount": 0, "image": "registry.k8s.io/pause:3.9", "imageID": ""}],
        },
    }


async def test_cached_pods_lose_only_what_no_decision_reads_and_share_their_strings() -> None:
    cluster = InMemoryCluster()
    for name in ("a", "b"):
        await cluster.create("Pod", _pod(name))
    await cluster.create("Node", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                  "status": {"images": [{"names": ["registry.k8s.io/pause:3.9"], "sizeBytes": 1}],
                                             "allocatable": {"cpu": "4"}}})
    cache = CachedKubeClient(cluster, ["Pod", "Node"])
    await cache.start()
    try:
        got = await cache.get("Pod", "a", "default")
        full = _pod("a")
        # what decisions read is there as sent
        assert got["metadata"]["labels"] == full["metadata"]["labels"]
        assert got["metadata"]["annotations"] == full["metadata"]["annotations"]
        assert got["metadata"]["ownerReferences"] == full["metadata"]["ownerReferences"]
        for key in ("nodeSelector", "tolerations", "nodeName", "priority", "schedulerName"):
            assert got["spec"][key] == full["spec"][key], key
        assert got["spec"]["containers"] == [{"name": "app", "image": "registry.k8s.io/pause:3.9",
                                              "resources": full["spec"]["containers"][0]["resources"],
                                              "ports": full["spec"]["containers"][0]["ports"]}]
        assert got["spec"]["initContainers"] == [{"name": "sidecar", "image": "busybox", "restartPolicy": "Always",
                                                  "resources": {"requests": {"cpu": "100m"}}}]
        assert got["spec"]["volumes"] == [{"name": "kube-api-access-x1", "projected": {}}, full["spec"]["volumes"][1]]
        assert got["status"] == {"phase": "Running", "conditions": full["status"]["conditions"], "startTime": "2026-12-06T08:26:39Z"}
        assert "managedFields" not in got["metadata"]
        # the scheduler's reading of the cached pod is the full pod's
        view = next(v for v in cache.views("Pod") or () if isinstance(v, PodView) and v.name == "a")
        info, ref = view.info, pod_info(full)
        assert (info.requests, info.host_ports, info.tolerations, info.priority, info.owner_name, info.unsupported) == (
            ref.requests, ref.host_ports, ref.tolerations, ref.priority, ref.owner_name, ref.unsupported)
        assert ref.host_ports and info.requests["cpu"] == 1100  # the sidecar's request counts
        # nodes lose status.images only
        node = await cache.get("Node", "n1")
        assert "images" not in node["status"] and node["status"]["allocatable"] == {"cpu": "4"}
        # two pods share their keys and short values
        stored = cache._store["Pod"]
        a, b = stored[("default", "a")], stored[("default", "b")]
        key_a = next(k for k in a["status"]["conditions"][0] if k == "lastTransitionTime")
        key_b = next(k for k in b["status"]["conditions"][0] if k == "lastTransitionTime")
        assert key_a is key_b
        assert a["metadata"]["labels"]["app"] is b["metadata"]["labels"]["app"]
        assert a["status"]["phase"] is sys.intern("Running")
        # reads are copies: a caller changing one does not change the cache
        got["metadata"]["labels"]["app"] = "changed"
        assert (await cache.get("Pod", "a", "default"))["metadata"]["labels"]["app"] == "inflate"
    finally:
        await cache.stop()


async def test_own_writes_are_compacted_too() -> None:
    cluster = InMemoryCluster()
    cache = CachedKubeClient(cluster, ["Pod"])
    await cache.start()
    try:
        sent = _pod("c")
        out = await cache.create("Pod", copy.deepcopy(sent))
        assert "containerStatuses" in out["status"]  # the caller gets the server's answer whole
        cached = await cache.get("Pod", "c", "default")
        assert "containerStatuses" not in cached["status"] and "env" not in cached["spec"]["containers"][0]
    finally:
        await cache.stop()
