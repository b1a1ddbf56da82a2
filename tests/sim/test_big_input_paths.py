"""The shortcuts big simulations take (issue 35 item 3) give what the long way gives."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from karpy_core.kube.memory import InMemoryCluster
from karpy_core.scheduling.kubescheduler import kube_schedule
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.state.views import PodView
from karpy_core.utils.clock import VirtualClock


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "memory": "256M"}}}], **spec}}


def test_podinfo_copy_keeps_every_field_and_shares_nothing_it_changes() -> None:
    info = pod_info(_pod("a", tolerations=[{"key": "k", "operator": "Exists"}]))
    info.signature()
    held = copy.copy(info)
    assert held is not info
    for f in dataclasses.fields(PodInfo):
        assert getattr(held, f.name) is getattr(info, f.name), f.name
    held.node_name = "n1"
    assert info.node_name == "" and held.node_name == "n1"


def test_views_follow_creates_patches_and_deletes_and_keep_unchanged_views() -> None:
    cluster = InMemoryCluster(VirtualClock())
    for name in ("a", "b", "c"):
        cluster.create_sync("Pod", _pod(name))
    first = {v.name: v for v in cluster.views("Pod") or []}
    cluster.patch_sync("Pod", "b", {"status": {"phase": "Pending"}})
    cluster.delete_sync("Pod", "c")
    cluster.create_sync("Pod", _pod("d"))
    views = [v for v in cluster.views("Pod") or [] if isinstance(v, PodView)]
    stored = cluster.snapshot("Pod")
    assert [v.name for v in views] == [p["metadata"]["name"] for p in stored] == ["a", "b", "d"]
    assert [v.resource_version for v in views] == [p["metadata"]["resourceVersion"] for p in stored]
    assert views[0] is first["a"]  # unchanged: the same view
    assert views[1] is not first["b"] and views[1].phase == "Pending"
    assert cluster.views("Pod") == views  # nothing written: the same list again


def test_kube_schedule_without_nodes_leaves_every_pod_pending() -> None:
    """The simulated kube-scheduler skips the solve when no node is Ready: every pending pod
    stays pending then, as the solve itself leaves them (matchFields, spread, nominated ones too)."""
    pods = [pod_info(_pod("plain")),
            pod_info(_pod("fields", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]}]}}})),
            pod_info(_pod("spread", topologySpreadConstraints=[{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "x"}}}]))]
    results = kube_schedule([], [], pods, {"default/plain": "gone"})
    assert sorted(results.errors) == ["default/fields", "default/plain", "default/spread"]
    assert not results.existing and not results.new_claims
