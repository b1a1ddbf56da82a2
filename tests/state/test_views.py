"""Views parsed once per object version, the immutable snapshot, NodePool readiness in one
place, bound pods parsed once (a malformed one skipped with a log), and the RFC 3339 parser."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest

from karpy_core.apis.nodepool import Budget
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import ClusterSnapshot, bound_pod_infos, collect_snapshot, existing_nodes, ready_nodepools
from karpy_core.state.views import NodePoolReadiness, NodePoolView, PodView, ViewCache
from karpy_core.utils.timestamps import parse_rfc3339, try_parse_rfc3339
from tests.scheduling.helpers import nodepool


def _node(name: str, cpu: str = "4") -> dict:
    return {"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true"}},
            "spec": {"providerID": f"fake:///{name}"},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}


def _pod(name: str, node: str = "", cpu: str = "500m") -> dict:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Running"}}


def test_malformed_bound_pod_is_skipped_with_a_log_by_both_readers(caplog: pytest.LogCaptureFixture) -> None:
    snap = ClusterSnapshot(nodes=[_node("n1")], pods=[_pod("good", "n1"), _pod("bad", "n1", cpu="lots")])
    with caplog.at_level(logging.WARNING):
        bound = bound_pod_infos(snap)
        nodes = existing_nodes(snap)  # used to raise QuantityError on the malformed pod
    assert [p.name for p in bound] == ["good"]
    assert nodes[0].requested["cpu"] == 500
    assert any(getattr(r, "Pod", None) == {"name": "bad", "namespace": "default"} for r in caplog.records)
    # parsed once: the second reader reuses the first one's result and does not log again
    assert sum(getattr(r, "Pod", None) == {"name": "bad", "namespace": "default"} for r in caplog.records) == 1


def test_snapshot_is_immutable_and_indexed() -> None:
    snap = ClusterSnapshot(nodes=[_node("n1"), _node("n2")], pods=[_pod("a", "n1"), _pod("b", "n2"), _pod("c")],
                           nodepools=[nodepool()])
    with pytest.raises(AttributeError):
        snap.node_views = ()
    assert snap.node("n2") is snap.node_views[1]
    assert snap.node_by_provider_id("fake:///n1") is snap.node_views[0]
    assert [p.name for p in snap.pods_on("n1")] == ["a"]
    default = snap.nodepool("default")
    assert default is not None and default.ready
    assert [p.name for p in snap.pod_views] == ["a", "b", "c"]
    assert not hasattr(snap, "pods") and not hasattr(snap, "nodepools")  # views only: no dict accessors


def test_ready_nodepools_one_rule() -> None:
    fresh = nodepool("fresh")
    ready = nodepool("ready")
    ready["status"] = {"conditions": [{"type": "Ready", "status": "True"}]}
    broken = nodepool("broken")
    broken["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeClassNotReady", "message": "no subnets"}]}
    gone = nodepool("gone")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    snap = ClusterSnapshot(nodepools=[fresh, ready, broken, gone])
    pools, unready = ready_nodepools(snap)
    assert [p.name for p in pools] == ["fresh", "ready"]
    assert unready == {"broken": "no subnets"}
    gone_view = snap.nodepool("gone")
    assert gone_view is not None and gone_view.readiness is NodePoolReadiness.DELETING


def test_nodepool_view_budgets_and_model_cached() -> None:
    pool = nodepool()
    pool["metadata"].update(uid="u1", resourceVersion="7")
    pool["spec"]["disruption"] = {"budgets": [{"nodes": "20%", "reasons": ["Drifted"], "schedule": "@daily", "duration": "1h"}]}
    cache = ViewCache()
    view = cache.nodepool(pool)
    assert cache.nodepool(dict(pool)) is view  # same uid and resourceVersion: the same view
    assert view.budgets[0].nodes == "20%" and view.budgets[0].reasons == ["Drifted"]
    assert isinstance(view.budgets[0], Budget)  # one Budget type: the API model's
    assert view.model is view.model  # validated once
    assert NodePoolView.of(nodepool()).budgets[0].nodes == "10%"  # the default budget
    cache.sweep()
    cache.sweep()
    assert len(cache) == 0


async def test_in_memory_cluster_builds_a_view_once_per_version() -> None:
    cluster = InMemoryCluster()
    await cluster.create("Pod", _pod("a"))
    first = (await collect_snapshot(cluster)).pod_views[0]
    again = (await collect_snapshot(cluster)).pod_views[0]
    assert again is first and isinstance(first, PodView)
    await cluster.patch("Pod", "a", {"metadata": {"labels": {"app": "api"}}}, "default")
    changed = (await collect_snapshot(cluster)).pod_views[0]
    assert changed is not first and changed.raw["metadata"]["labels"] == {"app": "api"}
    assert first.raw["metadata"]["labels"] == {"app": "web"}  # a view never changes


async def test_informer_cache_builds_views_per_watch_event() -> None:
    cluster = InMemoryCluster()
    await cluster.create("Node", _node("n1"))
    cache = CachedKubeClient(cluster, ["Node", "Pod", "NodeClaim", "NodePool"])
    await cache.start()
    try:
        views = cache.views("Node")
        assert views is not None and [v.name for v in views] == ["n1"]
        snap = await collect_snapshot(cache)
        assert snap.node_views[0] is views[0]
        assert cache.views("DaemonSet") is None
        await cache.delete("Node", "n1")
        for _ in range(50):
            if not cache.views("Node"):
                break
            await asyncio.sleep(0.01)
        assert cache.views("Node") == []
    finally:
        await cache.stop()


def test_rfc3339() -> None:
    assert parse_rfc3339("2026-01-01T00:00:00Z") == 1767225600.0
    assert parse_rfc3339("2026-01-01T09:00:00.5+09:00") == 1767225600.5
    assert parse_rfc3339("2026-01-01T00:00:00") == 1767225600.0  # no offset: UTC
    assert parse_rfc3339(datetime(2026, 1, 1, tzinfo=UTC)) == 1767225600.0
    assert parse_rfc3339(None) is None and parse_rfc3339("") is None
    with pytest.raises(ValueError):
        parse_rfc3339("yesterday")
    assert try_parse_rfc3339("yesterday") is None


def test_nodepool_view_is_built_from_the_model_defaults_included() -> None:
    pool = nodepool(weight=30)
    pool["spec"]["disruption"] = {"consolidationPolicy": "WhenEmpty"}
    view = NodePoolView.of(pool)
    assert view.valid and view.weight == 30 and view.consolidation_policy == "WhenEmpty"
    assert view.consolidate_after == "0s" and [b.nodes for b in view.budgets] == ["10%"]  # the model's defaults
    assert view.node_class_ref == ("karpenter.k8s.aws", "EC2NodeClass")
    assert view.model.spec.weight == 30  # the model the view was built from, not a second parse


def test_a_status_the_model_does_not_know_keeps_the_nodepool_valid() -> None:
    """The status is what controllers wrote: a newer Karpenter's CRD may carry status fields (and
    condition fields) karpy's model lacks; the NodePool stays valid and its usage is read."""
    pool = nodepool(weight=5)
    pool["status"] = {"resources": {"cpu": "3", "nodes": "2"}, "someNewerField": {"x": 1},
                      "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                      "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1, "newKey": "y"}]}
    view = NodePoolView.of(pool)
    assert view.valid and view.error == "" and view.readiness is NodePoolReadiness.READY
    assert dict(view.usage) == {"cpu": "3", "nodes": "2"} and view.weight == 5
    assert view.model.spec.weight == 5


@pytest.mark.parametrize("bad", [
    {"weight": 0},  # the CRD's minimum is 1: used to be read as weight 0
    {"weight": "heavy"},
    {"disruption": {"budgets": [{"nodes": "lots"}]}},  # used to fail later, in the budget arithmetic
    {"disruption": {"budgets": [{"nodes": "1", "schedule": "@daily"}]}},  # schedule without duration
])
def test_an_invalid_nodepool_is_left_out_with_a_logged_error(bad: dict, caplog: pytest.LogCaptureFixture) -> None:
    """Karpenter's CRD validation keeps such NodePools out of the cluster; one that is there anyway
    (an older CRD, validation off) is left out of every decision with an error logged once per
    version, never decided on with half-parsed values (weight 0, a budget that raises later)."""
    good = nodepool("good")
    broken = nodepool("broken")
    broken["metadata"].update(uid="u2", resourceVersion="3")
    broken["spec"].update(bad)
    view = NodePoolView.of(broken)
    assert not view.valid and view.readiness is NodePoolReadiness.INVALID and "spec" in view.error
    cache = ViewCache()
    with caplog.at_level(logging.ERROR):
        snap = ClusterSnapshot(nodepools=[good, broken], views=cache)
        again = ClusterSnapshot(nodepools=[good, broken], views=cache)
    assert [p.name for p in snap.nodepool_views] == ["good"] and snap.nodepool("broken") is None
    assert [p.name for p in again.invalid_nodepools] == ["broken"]
    assert ready_nodepools(snap) == ([snap.nodepool("good")], {})
    logged = [r for r in caplog.records if getattr(r, "NodePool", None) == {"name": "broken"}]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR  # once per version


async def test_an_invalid_nodepool_is_not_provisioned_for_and_its_status_says_why() -> None:
    from karpy_core.controllers.nodepool_status import NodePoolStatus
    from karpy_core.state.cluster import condition
    from karpy_core.utils.clock import VirtualClock

    cluster = InMemoryCluster()
    broken = nodepool("broken")
    broken["spec"]["weight"] = 0
    cluster.create_sync("NodePool", broken)
    assert await NodePoolStatus(kube=cluster, clock=VirtualClock(0.0), unreported_is_ready=True).reconcile() == 1
    got = await cluster.get("NodePool", "broken")
    valid = condition(got, "ValidationSucceeded")
    assert valid is not None and valid["status"] == "False" and valid["reason"] == "NodePoolValidationFailed"
    assert "spec.weight" in valid["message"]
    ready_cond = condition(got, "Ready")
    assert ready_cond is not None and ready_cond["status"] == "False"
    snap = await collect_snapshot(cluster)
    assert snap.nodepool_views == () and [p.name for p in snap.invalid_nodepools] == ["broken"]
