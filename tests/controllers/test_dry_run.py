"""``karpy controller --dry-run`` on the in-memory cluster: the controllers decide as usual, report
what they would do, and nothing reaches the cluster (every write goes through
:class:`~karpy_core.kube.dryrun.DryRunKubeClient`, which withholds it)."""

from __future__ import annotations

import copy
import json
import logging

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.disruption import Disruption
from karpy_core.controllers.disruption.controller import DisruptionEventKind
from karpy_core.controllers.disruption.expiration import Expiration
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.errors import CreateError, KubeAPIError
from karpy_core.kube.cache import CachedKubeClient
from karpy_core.kube.dryrun import DryRunKubeClient
from karpy_core.kube.events import EventRecorder
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.testing.conformance import nodeclaim_for
from karpy_core.utils.clock import VirtualClock, iso
from tests.controllers.test_disruption import NOW, node_and_claim, pod
from tests.scheduling.helpers import nodepool


def _state(cluster: InMemoryCluster) -> str:
    """Everything the cluster holds, as one comparable string."""
    return json.dumps({kind: sorted(cluster.objects(kind), key=lambda o: json.dumps(o, sort_keys=True))
                       for kind in ("Node", "NodeClaim", "NodePool", "Pod", "Event")}, sort_keys=True, default=str)


def _pending(name: str, cpu: str = "1") -> dict[str, object]:
    p = pod(name, None, cpu=cpu)
    p["spec"].pop("nodeName")
    p["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    return p


async def test_every_write_is_withheld_and_counted():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, claim = node_and_claim("a")
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("p1", "a"))
    before = _state(cluster)
    seen: list[tuple[str, str]] = []
    dry = DryRunKubeClient(cluster, clock=clock, on_withheld=lambda verb, kind: seen.append((verb, kind)))
    created = await dry.create("NodeClaim", {"metadata": {"generateName": "default-"}, "spec": {}})
    assert created["metadata"]["name"] == "default-dry-run"
    patched = await dry.patch("Node", "a", {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}})
    assert "taints" not in patched["spec"]  # the object as the API server holds it
    await dry.patch("NodeClaim", "a", {"status": {"conditions": []}}, status=True)
    await dry.replace("Node", copy.deepcopy(node))
    await dry.delete("NodeClaim", "a")
    await dry.evict(pod("p1", "a"))
    await dry.bind(pod("p1", "a"), "a")
    with pytest.raises(KubeAPIError):
        await dry.patch("Node", "missing", {"metadata": {"labels": {"x": "y"}}})  # as the API server answers
    assert _state(cluster) == before
    assert seen == [("create", "NodeClaim"), ("patch", "Node"), ("patch", "NodeClaim"), ("update", "Node"), ("delete", "NodeClaim"),
                    ("evict", "Pod"), ("bind", "Pod"), ("patch", "Node")]
    assert dry.withheld[("patch", "Node")] == 2
    assert [o["metadata"]["name"] for o in await dry.list("Node")] == ["a"]  # reads go through


async def test_withheld_write_is_logged_once_per_window(caplog: pytest.LogCaptureFixture):
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, _ = node_and_claim("a")
    cluster.create_sync("Node", node)
    dry = DryRunKubeClient(cluster, clock=clock)
    with caplog.at_level(logging.DEBUG, logger="karpy.dryrun"):
        for _ in range(3):
            await dry.delete("Node", "a")
        clock.advance(301)
        await dry.delete("Node", "a")
    levels = [r.levelno for r in caplog.records if r.getMessage() == "dry run: write withheld"]
    assert levels == [logging.INFO, logging.DEBUG, logging.DEBUG, logging.INFO]
    first = next(r for r in caplog.records if r.getMessage() == "dry run: write withheld")
    assert first.__dict__["verb"] == "delete" and first.__dict__["Node"] == {"name": "a"} and first.__dict__["dryRun"] is True


async def test_the_cache_never_holds_a_withheld_write():
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, _ = node_and_claim("a")
    cluster.create_sync("Node", node)
    cache = CachedKubeClient(DryRunKubeClient(cluster, clock=clock), ["Node", "NodeClaim"])
    cache.write_through = False
    await cache.start()
    try:
        await cache.create("NodeClaim", {"metadata": {"generateName": "default-"}, "spec": {}})
        await cache.patch("Node", "a", {"metadata": {"labels": {"dry": "run"}}})
        assert await cache.list("NodeClaim") == []
        assert "dry" not in (await cache.get("Node", "a"))["metadata"]["labels"]
    finally:
        await cache.stop()


async def test_transport_refuses_every_request_but_get():
    from karpy_core.kube.transport import Access, Transport

    transport = Transport(Access(server="http://127.0.0.1:9"))  # nothing listens: a GET would fail to connect
    transport.read_only = True
    try:
        for method in ("POST", "PUT", "PATCH", "DELETE"):
            with pytest.raises(KubeAPIError) as err:
                await transport.request(method, "/apis/coordination.k8s.io/v1/namespaces/default/leases/x")
            assert err.value.status == 403 and err.value.reason == "DryRun"
    finally:
        await transport.close()


async def test_provider_create_and_delete_never_reach_the_plugin():
    provider = load_provider("simulated", {})
    provider.dry_run = True
    claim = nodeclaim_for("default-abc", {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
    with pytest.raises(CreateError) as err:
        await provider.create(claim)
    assert err.value.condition_reason == "DryRun"
    await provider.delete(claim)
    assert await provider.list() == []  # nothing was launched


async def test_provisioner_reports_the_launch_and_creates_nothing_pass_after_pass(caplog: pytest.LogCaptureFixture):
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    cluster.create_sync("NodePool", nodepool())
    for i in range(3):
        cluster.create_sync("Pod", _pending(f"web-{i}"))
    before = _state(cluster)
    prov = Provisioner(kube=DryRunKubeClient(cluster, clock=clock), provider=load_provider("simulated", {}), clock=clock)
    prov.dry_run = True
    with caplog.at_level(logging.DEBUG, logger="karpy_core.controllers.provisioning.provisioner"):
        first = await prov.reconcile()
        second = await prov.reconcile()
    assert not first.created and not second.created
    assert first.would_launch and len(first.would_launch) == len(second.would_launch)
    pods = sorted(p.key for plan, _ in first.would_launch for p in plan.pods)
    assert pods == ["default/web-0", "default/web-1", "default/web-2"]
    # the same live state, the same decision: nothing was nominated to a claim that does not exist
    assert [obj["spec"] for _, obj in first.would_launch] == [obj["spec"] for _, obj in second.would_launch]
    assert second.results is not None and not second.results.existing
    lines = [r for r in caplog.records if r.getMessage() == "dry run: would launch nodeclaim"]
    assert [r.levelno for r in lines] == [logging.INFO] * len(first.would_launch) + [logging.DEBUG] * len(second.would_launch)
    assert lines[0].__dict__["NodePool"] == {"name": "default"} and lines[0].__dict__["pod-count"] >= 1
    assert _state(cluster) == before


async def test_disruption_reports_the_command_once_and_executes_nothing(caplog: pytest.LogCaptureFixture):
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    cluster.create_sync("NodePool", pool)
    for name in ("a", "b"):
        node, claim = node_and_claim(name, pool=pool)
        cluster.create_sync("Node", node)
        cluster.create_sync("NodeClaim", claim)
    cluster.create_sync("Pod", pod("p1", "a"))
    before = _state(cluster)
    dry = DryRunKubeClient(cluster, clock=clock)
    metrics = Metrics(now=clock.now)
    m = metrics.enable_dry_run()
    rec = EventRecorder(dry, clock)
    rec.dry_run = True
    d = Disruption(kube=dry, provider=load_provider("simulated", {}), clock=clock, events=rec, metrics=metrics)
    d.dry_run = True
    kinds: list[DisruptionEventKind] = []
    with caplog.at_level(logging.INFO), caplog.at_level(logging.INFO, logger="karpy_core.kube.events"):
        for _ in range(6):
            kinds += [e.kind for e in await d.reconcile()]
            clock.advance(16)
    assert kinds.count(DisruptionEventKind.DECIDED) == 1 and kinds.count(DisruptionEventKind.WOULD_DISRUPT) == 1
    assert DisruptionEventKind.DISRUPT not in kinds and DisruptionEventKind.DELETE not in kinds
    assert not d.queued and d.pending is None
    would = [r for r in caplog.records if r.getMessage() == "dry run: would disrupt node(s)"]
    assert len(would) == 1 and would[0].__dict__["disrupted-nodes"][0]["Node"] == {"name": "b"}
    assert would[0].__dict__["decision"] == "delete" and would[0].__dict__["dryRun"] is True
    # the DisruptionTerminating events are logged in the event format, not created
    evs = [r.__dict__["Event"] for r in caplog.records if r.getMessage() == "event"]
    assert sorted(e["message"] for e in evs if e["reason"] == "DisruptionTerminating") == \
        ["Disrupting Node: Empty", "Disrupting NodeClaim: Empty"]
    assert _state(cluster) == before and not cluster.objects("Event")
    registry = metrics.registry
    assert registry.get_sample_value("karpy_dry_run_disruption_decisions_total",
                                     {"reason": "Empty", "method": "emptiness", "decision": "delete"}) == 1
    assert registry.get_sample_value("karpy_dry_run_nodes_would_disrupt_total", {"reason": "Empty", "method": "emptiness"}) == 1
    # Karpenter's counters of acts stay at zero: nothing was disrupted
    assert not registry.get_sample_value("karpenter_voluntary_disruption_decisions_total",
                                         {"decision": "delete", "reason": "empty", "consolidation_type": ""})
    assert m.enabled._value.get() == 1
    # a change to the cluster (the pod leaves a) is a new state: the next command is reported again
    cluster.delete_sync("Pod", "p1", "default")
    for _ in range(3):
        kinds += [e.kind for e in await d.reconcile()]
        clock.advance(16)
    assert kinds.count(DisruptionEventKind.WOULD_DISRUPT) == 2


async def test_expiration_reports_and_deletes_nothing(caplog: pytest.LogCaptureFixture):
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    _, claim = node_and_claim("a")
    claim["spec"]["expireAfter"] = "1h"
    claim["metadata"]["creationTimestamp"] = iso(NOW - 7200)
    cluster.create_sync("NodeClaim", claim)
    exp = Expiration(kube=DryRunKubeClient(cluster, clock=clock), clock=clock)
    exp.dry_run = True
    with caplog.at_level(logging.INFO, logger="karpy.expiration"):
        events = await exp.reconcile()
    assert [e.nodeclaim for e in events] == ["a"]
    assert [r.getMessage() for r in caplog.records] == ["dry run: would expire nodeclaim"]
    assert not cluster.objects("NodeClaim")[0]["metadata"].get("deletionTimestamp")


async def test_drift_judges_a_karpenter_claim_as_restamped_not_as_drifted(caplog: pytest.LogCaptureFixture):
    """A NodeClaim Karpenter launched carries Karpenter's hash: the acting controller re-stamps it
    and sees no drift; the dry run withholds the re-stamp and must not call it drifted either."""
    from karpy_core.apis.labels import ANNOTATION_NODEPOOL_HASH, ANNOTATION_NODEPOOL_HASH_VERSION
    from karpy_core.controllers.nodeclaim.drift import NodeClaimDrift

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pool = nodepool()
    cluster.create_sync("NodePool", pool)
    node, claim = node_and_claim("a", pool=pool)
    claim["metadata"]["annotations"] = {ANNOTATION_NODEPOOL_HASH: "1234567890", ANNOTATION_NODEPOOL_HASH_VERSION: "v3"}
    claim["status"]["conditions"].append({"type": "Launched", "status": "True"})
    claim["spec"].update({"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}})
    cluster.create_sync("Node", node)
    cluster.create_sync("NodeClaim", claim)
    before = _state(cluster)
    drift = NodeClaimDrift(kube=DryRunKubeClient(cluster, clock=clock), provider=load_provider("simulated", {}), clock=clock)
    drift.dry_run = True
    with caplog.at_level(logging.INFO, logger="karpy_core.controllers.nodeclaim.drift"):
        assert await drift.reconcile() == []
        assert await drift.reconcile() == []
    assert "dry run: would re-stamp nodepool hash" in [r.getMessage() for r in caplog.records]
    assert _state(cluster) == before


async def test_operator_dry_run_wires_every_fence_and_a_drain_evicts_nothing():
    """``ControllerSettings(dry_run=True)``: no leader election, the provider's create/delete
    fenced, no NodeClaim lifecycle, the dry-run metrics; a Node being deleted is drained on paper
    only (the eviction is withheld and counted, the pod stays, Karpenter's drain counters stay 0)."""
    import asyncio

    from karpy_core.operator import ControllerSettings, Operator

    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    node, _ = node_and_claim("a")
    node["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    cluster.create_sync("Node", node)
    cluster.create_sync("Pod", pod("web", "a"))
    op = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock, settings=ControllerSettings(dry_run=True))
    assert op.dry_run is not None and op.provider.dry_run and op.events.dry_run and not op.settings.leader.enabled
    assert op.lifecycle not in op.controllers.schedule()
    assert op.controllers.provisioner.dry_run and op.controllers.disruption.dry_run and op.termination.dry_run
    await op.kube.start()
    try:
        await cluster.delete("Node", "a")  # the finalizer holds it: deletionTimestamp set
        for _ in range(20):
            await asyncio.sleep(0)
        for _ in range(3):
            await op.termination.reconcile()
            clock.advance(5)
        registry = op.metrics.registry
        assert registry.get_sample_value("karpy_dry_run_writes_withheld_total", {"verb": "evict", "kind": "Pod"})
        assert not registry.get_sample_value("karpenter_pods_eviction_requests_total", {"code": "200"})
        assert cluster.peek("Pod", "web", "default") is not None
        held = cluster.peek("Node", "a")
        assert held is not None and "karpenter.sh/termination" in held["metadata"]["finalizers"]
    finally:
        await op.kube.stop()
