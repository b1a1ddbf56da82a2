"""The in-memory cluster never changes a stored object: each write stores a new version sharing
what it left unchanged, so views and snapshots hand out stored objects without copying, and a
pod's scheduling parse carries over a status or nodeName change."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from karpy_core.kube.memory import InMemoryCluster, merge_patch
from karpy_core.state.nominations import Nominations
from karpy_core.state.views import PodView
from karpy_core.utils.clone import clone


def _pod(name: str, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": spec if spec is not None else {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending"}}


def _node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def test_writes_store_new_versions_and_leave_earlier_ones_as_they_were() -> None:
    cluster = InMemoryCluster()
    cluster.create_sync("Pod", _pod("a"))
    cluster.create_sync("Node", _node("n1"))
    before = cluster.snapshot("Pod")[0]
    frozen = copy.deepcopy(before)
    cluster.patch_sync("Pod", "a", {"metadata": {"labels": {"tier": "x"}}, "status": {"phase": "Running"}})
    asyncio.run(cluster.bind(cluster.snapshot("Pod")[0], "n1"))
    cluster.patch_sync("Pod", "a", {"metadata": {"finalizers": ["f"]}})
    cluster.delete_sync("Pod", "a")  # a finalizer: marked deleting, a new version again
    assert before == frozen  # the first version is untouched by every write after it
    now = cluster.snapshot("Pod")[0]
    assert now["spec"]["nodeName"] == "n1" and now["metadata"]["deletionTimestamp"]
    assert now["spec"]["containers"] is before["spec"]["containers"]  # unchanged parts are shared


def test_snapshot_and_views_share_stored_objects_while_objects_and_get_copy() -> None:
    cluster = InMemoryCluster()
    cluster.create_sync("Pod", _pod("a"))
    stored = cluster.snapshot("Pod")[0]
    view = cluster.views("Pod")[0]  # type: ignore[index]
    assert isinstance(view, PodView) and view.raw is stored
    copied = cluster.objects("Pod")[0]
    assert copied == stored and copied is not stored and copied["spec"] is not stored["spec"]
    got = asyncio.run(cluster.get("Pod", "a"))
    got["spec"]["containers"].append({"name": "mutated"})
    assert len(cluster.snapshot("Pod")[0]["spec"]["containers"]) == 1


def test_given_pods_share_their_spec_and_others_are_copied_in() -> None:
    cluster = InMemoryCluster()
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    a = cluster.create_stored("Pod", _pod("a", spec), given=True)
    b = cluster.create_stored("Pod", _pod("b", spec), given=True)
    assert a["spec"] is spec and b["spec"] is spec
    c = cluster.create_stored("Pod", _pod("c", spec))
    assert c["spec"] == spec and c["spec"] is not spec


def test_a_pods_parse_is_kept_across_status_and_binding_but_not_a_spec_change() -> None:
    cluster = InMemoryCluster()
    cluster.create_sync("Pod", _pod("a"))
    cluster.create_sync("Node", _node("n1"))
    first = cluster.views("Pod")[0]  # type: ignore[index]
    assert isinstance(first, PodView)
    info = first.info
    cluster.patch_stored("Pod", "a", {"status": {"nominatedNodeName": "n1"}}, "default", status=True)
    asyncio.run(cluster.bind(cluster.snapshot("Pod")[0], "n1"))
    bound = cluster.views("Pod")[0]  # type: ignore[index]
    assert isinstance(bound, PodView) and bound is not first
    assert bound._info is not info and bound._info.requests is info.requests  # carried over, not parsed again
    assert bound.info.node_name == "n1" and bound.info.raw is bound.raw
    cluster.patch_sync("Pod", "a", {"metadata": {"labels": {"app": "other"}}})
    relabelled = cluster.views("Pod")[0]  # type: ignore[index]
    assert isinstance(relabelled, PodView)
    assert relabelled.info.labels == {"app": "other"}  # metadata it reads changed: parsed afresh


def test_merge_patch_copies_the_patch_unless_told_not_to() -> None:
    target = {"a": {"b": 1}, "keep": {"x": 1}}
    patch = {"a": {"c": [1, 2]}}
    out = merge_patch(target, patch)
    assert out == {"a": {"b": 1, "c": [1, 2]}, "keep": {"x": 1}} and target == {"a": {"b": 1}, "keep": {"x": 1}}
    assert out["keep"] is target["keep"] and out["a"]["c"] is not patch["a"]["c"]
    assert merge_patch(target, patch, copy=False)["a"]["c"] is patch["a"]["c"]


def test_clone_is_a_deep_copy() -> None:
    obj = {"a": [{"b": "c"}, 1, 2.5, None, True], "t": (1, 2)}
    out = clone(obj)
    assert out == obj and out["a"] is not obj["a"] and out["a"][0] is not obj["a"][0]
    assert clone("text") == "text"

    class Local:  # pickle cannot find a local class; copy.deepcopy copies it
        pass

    thing = {"x": Local()}
    assert clone(thing)["x"] is not thing["x"]  # copy.deepcopy's answer


def test_pods_of_groups_once_and_follows_changes() -> None:
    n = Nominations()
    n.nominate_pods({"default/a": "nc1", "default/c": "nc1", "default/b": "nc2"})
    assert n.pods_of("nc1") == ["default/a", "default/c"] and n.pods_of("nc2") == ["default/b"] and n.pods_of("nc3") == []
    n.nominate_pods({"default/a": "nc2"})
    assert n.pods_of("nc1") == ["default/c"] and n.pods_of("nc2") == ["default/a", "default/b"]
    n.pod_targets({"default/b"})
    assert n.pods_of("nc2") == ["default/b"] and n.pods_of("nc1") == []
