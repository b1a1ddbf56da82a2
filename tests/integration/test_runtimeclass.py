"""The in-memory cluster admits pods by RuntimeClass exactly as the real kube-apiserver does: the
same pods are created on both, and the stored overhead, node selector and tolerations, or the
status and message of the refusal, must be equal."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from karpy_core.errors import KubeAPIError
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.memory import InMemoryCluster

pytestmark = pytest.mark.devcluster


def runtime_classes(suffix: str) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": f"kata-{suffix}"}, "handler": "kata",
         "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
         "scheduling": {"nodeSelector": {"runtime": "kata"},
                        "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"},
                                        {"key": "other", "operator": "Equal", "value": "v", "effect": "NoSchedule"}]}},
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": f"runc-{suffix}"}, "handler": "runc"},
    ]


def cases(suffix: str) -> dict[str, dict[str, Any]]:
    kata, runc = f"kata-{suffix}", f"runc-{suffix}"
    return {
        "kata": {"runtimeClassName": kata, "nodeSelector": {"zone": "a"},
                 "tolerations": [{"key": "other", "operator": "Exists"}, {"key": "x", "operator": "Equal", "value": "1"}]},
        "kata-same-overhead": {"runtimeClassName": kata, "overhead": {"cpu": "250m", "memory": "160Mi"}},
        "kata-same-selector": {"runtimeClassName": kata, "nodeSelector": {"runtime": "kata"}},
        "runc": {"runtimeClassName": runc},
        "missing": {"runtimeClassName": f"gvisor-{suffix}"},
        "kata-other-overhead": {"runtimeClassName": kata, "overhead": {"cpu": "1"}},
        "overhead-no-class": {"overhead": {"cpu": "1"}},
        "runc-overhead": {"runtimeClassName": runc, "overhead": {"cpu": "1"}},
        "kata-conflict": {"runtimeClassName": kata, "nodeSelector": {"runtime": "runc"}},
    }


def pod(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m"}}}], **spec}}


DEFAULT_TOLERATION_KEYS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")


async def outcome(kube: Any, obj: dict[str, Any]) -> tuple[str, Any]:
    """``("created", overhead/nodeSelector/tolerations)`` or ``("refused", (status, reason, message))``.
    The real server's DefaultTolerationSeconds plugin also adds 300 s NoExecute tolerations for
    not-ready/unreachable nodes; the in-memory cluster does not model that plugin, so those two
    are left out of the comparison."""
    try:
        created = await kube.create("Pod", obj)
    except KubeAPIError as exc:
        return "refused", (exc.status, exc.reason, str(exc))
    spec = created["spec"]
    out = {k: spec.get(k) for k in ("overhead", "nodeSelector", "tolerations")}
    out["tolerations"] = [t for t in out["tolerations"] or []
                          if not (t.get("key") in DEFAULT_TOLERATION_KEYS and t.get("effect") == "NoExecute"
                                  and t.get("tolerationSeconds") == 300)] or None
    return "created", out


@pytest.mark.timeout(180)
async def test_memory_cluster_admits_pods_like_kube_apiserver(devcluster) -> None:
    suffix = "t" + uuid.uuid4().hex[:5]
    real = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    memory = InMemoryCluster()
    try:
        for rc in runtime_classes(suffix):
            await real.create("RuntimeClass", rc)
            await memory.create("RuntimeClass", rc)
        results = {}
        for name, spec in cases(suffix).items():
            obj = pod(f"rc-{suffix}-{name}", spec)
            results[name] = (await outcome(real, obj), await outcome(memory, obj))
        for name, (want, got) in results.items():
            assert got == want, name
        assert results["kata"][0][0] == "created" and results["missing"][0][0] == "refused"
        assert results["kata"][0][1]["overhead"] == {"cpu": "250m", "memory": "160Mi"}
    finally:
        for name in cases(suffix):
            try:
                await real.delete("Pod", f"rc-{suffix}-{name}", "default")
            except KubeAPIError:
                pass
        for rc in runtime_classes(suffix):
            await real.delete("RuntimeClass", rc["metadata"]["name"])
        await real.close()
