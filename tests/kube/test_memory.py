"""API semantics of the in-memory cluster that controllers rely on."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import cast

import pytest

from karpy_core.errors import KubeAPIError, TooManyRequestsError
from karpy_core.kube.memory import InMemoryCluster, merge_patch
from karpy_core.kube.port import WatchEvent


def pod(name: str, labels: dict[str, str], phase: str = "Running") -> dict:
    ready = [{"type": "Ready", "status": "True"}] if phase == "Running" else []
    return {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": {"nodeName": "n1"},
            "status": {"phase": phase, "conditions": ready}}


async def test_generate_name_uid_and_resource_versions():
    c = InMemoryCluster()
    a = await c.create("NodeClaim", {"metadata": {"generateName": "default-"}, "spec": {}})
    b = await c.create("NodeClaim", {"metadata": {"generateName": "default-"}, "spec": {}})
    assert a["metadata"]["name"].startswith("default-") and a["metadata"]["name"] != b["metadata"]["name"]
    assert a["metadata"]["uid"] != b["metadata"]["uid"]
    assert int(b["metadata"]["resourceVersion"]) > int(a["metadata"]["resourceVersion"])
    with pytest.raises(KubeAPIError) as exc:
        await c.create("NodeClaim", {"metadata": {"name": a["metadata"]["name"]}})
    assert exc.value.status == 409


async def test_finalizers_hold_deletion_until_removed():
    c = InMemoryCluster()
    await c.create("Node", {"metadata": {"name": "n1", "finalizers": ["karpenter.sh/termination"]}})
    await c.delete("Node", "n1")
    held = await c.get("Node", "n1")
    assert held["metadata"]["deletionTimestamp"]
    await c.patch("Node", "n1", {"metadata": {"finalizers": []}})
    with pytest.raises(KubeAPIError) as exc:
        await c.get("Node", "n1")
    assert exc.value.status == 404


async def test_replace_checks_resource_version():
    c = InMemoryCluster()
    lease = await c.create("Lease", {"metadata": {"name": "l", "namespace": "karpy"}, "spec": {"holderIdentity": "a"}})
    updated = await c.replace("Lease", {**lease, "spec": {"holderIdentity": "b"}})
    assert updated["spec"]["holderIdentity"] == "b"
    with pytest.raises(KubeAPIError) as exc:
        await c.replace("Lease", {**lease, "spec": {"holderIdentity": "c"}})  # stale resourceVersion
    assert exc.value.status == 409


async def test_status_subresource_is_separate_for_custom_kinds():
    c = InMemoryCluster()
    await c.create("NodePool", {"metadata": {"name": "p"}, "spec": {"weight": 1}})
    await c.patch("NodePool", "p", {"status": {"nodes": 3}, "spec": {"weight": 2}})
    obj = await c.get("NodePool", "p")
    assert obj["spec"]["weight"] == 2 and "status" not in obj
    await c.patch("NodePool", "p", {"status": {"nodes": 3}}, status=True)
    assert (await c.get("NodePool", "p"))["status"] == {"nodes": 3}


async def test_eviction_respects_pdb():
    c = InMemoryCluster()
    for i in range(3):
        await c.create("Pod", pod(f"web-{i}", {"app": "web"}))
    await c.create("PodDisruptionBudget", {"metadata": {"name": "web", "namespace": "default"},
                                           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}})
    await c.evict(await c.get("Pod", "web-0", "default"))
    with pytest.raises(KubeAPIError) as exc:
        await c.evict(await c.get("Pod", "web-1", "default"))
    assert exc.value.status == 429 and "disruption budget" in str(exc.value)
    assert isinstance(exc.value, TooManyRequestsError)
    assert exc.value.causes == ("The disruption budget web needs 2 healthy pods and has 2 currently",)
    assert c.evictions == ["default/web-0"]


def test_merge_patch_rfc7386():
    assert merge_patch({"a": {"b": 1, "c": 2}, "d": [1]}, {"a": {"b": None, "e": 3}, "d": [2]}) == {"a": {"c": 2, "e": 3}, "d": [2]}


async def test_watch_lists_then_syncs_then_streams():
    c = InMemoryCluster()
    await c.create("Node", {"metadata": {"name": "n1"}})
    # watch is an async generator annotated AsyncIterator (no aclose in its type)
    stream = cast(AsyncGenerator[WatchEvent, None], c.watch("Node"))
    first = await anext(stream)
    synced = await anext(stream)
    await c.create("Node", {"metadata": {"name": "n2"}})
    live = await anext(stream)
    assert (first.type, first.object["metadata"]["name"]) == ("ADDED", "n1")
    assert synced.type == "SYNCED"
    assert (live.type, live.object["metadata"]["name"]) == ("ADDED", "n2")
    await stream.aclose()
