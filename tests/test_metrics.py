"""The controller's metrics: Karpenter's names/types/labels, nothing left stale, counters that count."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import WatchEvent
from karpy_core.observability import Metrics
from karpy_core.operator import Operator
from karpy_core.utils.clock import VirtualClock, iso

from .metrics_expectations import (
    BUCKETS,
    CORE_NODE_LABELS,
    EXPECTED,
    SUMMARY_QUANTILES,
    dashboard_metrics,
    expected_labels,
    metric_names,
    parse,
)

T0 = 1_790_000_000.0
POOL = "default"


def node(name: str, *, pool: str = POOL, cpu: str = "4", memory: str = "16Gi", zone: str = "test-zone-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "creationTimestamp": iso(T0 - 600), "labels": {
            "karpenter.sh/nodepool": pool, "topology.kubernetes.io/zone": zone, "kubernetes.io/arch": "amd64",
            "karpenter.sh/capacity-type": "on-demand", "node.kubernetes.io/instance-type": "m5.xlarge"}},
        "spec": {"providerID": f"simulated://{name}"},
        "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                   "allocatable": {"cpu": "3920m", "memory": "15Gi", "pods": "110"}},
    }


def pod(name: str, node_name: str = "", *, cpu: str = "500m", daemon: bool = False, ready: bool = False) -> dict[str, Any]:
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet" if daemon else "ReplicaSet", "name": "owner", "uid": "u", "controller": True}
    conds = [{"type": "PodScheduled", "status": "True" if node_name else "False", "lastTransitionTime": iso(T0 - 30)}]
    if ready:
        conds.append({"type": "Ready", "status": "True", "lastTransitionTime": iso(T0 - 20)})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "creationTimestamp": iso(T0 - 60),
                     "ownerReferences": [owner]},
        "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "i", "resources": {
            "requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}}]},
        "status": {"phase": "Running" if ready else "Pending", "conditions": conds},
    }


Families = dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]


def samples(m: Metrics | Families, family: str) -> list[tuple[dict[str, str], float]]:
    """Samples of ``family`` (counters: without ``_total``; ``x_count``/``x_sum`` select those samples of
    histogram or summary ``x``), as (labels, value), from a fresh scrape of ``m`` or parsed families."""
    fams = parse(m.render().decode()) if isinstance(m, Metrics) else m
    for suffix in ("_count", "_sum"):
        base = family.removesuffix(suffix)
        if base != family and base in fams:
            return [(labels, v) for s, labels, v in fams[base][1] if s == family]
    return [(labels, v) for s, labels, v in fams.get(family, ("", []))[1] if not s.endswith("_created")]


def value(m: Metrics | Families, family: str, **labels: str) -> float | None:
    """The sum of ``family``'s samples whose labels include ``labels``; None when there is none."""
    found = [v for ls, v in samples(m, family) if all(ls.get(k) == x for k, x in labels.items())]
    return sum(found) if found else None


# ---- the dashboards' PromQL -----------------------------------------------------------------------

def test_dashboard_metric_extraction_finds_every_selector():
    assert metric_names('sum by (nodepool)(karpenter_nodes_allocatable{nodepool!="N/A",resource_type="cpu"})') == {
        "karpenter_nodes_allocatable"}
    assert metric_names('histogram_quantile(0.9, rate(controller_runtime_reconcile_time_seconds_bucket{controller="$c"}[10m]))') == {
        "controller_runtime_reconcile_time_seconds_bucket"}
    assert metric_names("label_values(karpenter_nodes_allocatable, zone)") == {"karpenter_nodes_allocatable"}
    assert metric_names('(count(a_b{x="1"}) or vector(0)) / count(c_d) # comment mentions e_f') == {"a_b", "c_d"}
    found = dashboard_metrics()
    assert found["karpenter-capacity-dashboard.json"] >= {"karpenter_nodes_allocatable", "karpenter_pods_state",
                                                          "karpenter_voluntary_disruption_decisions_total"}
    assert found["karpenter-performance-dashboard.json"] >= {"karpenter_pods_startup_duration_seconds",
                                                             "controller_runtime_reconcile_total"}


def test_every_family_has_karpenters_type_labels_and_buckets():
    clock = VirtualClock(T0)
    cluster = InMemoryCluster(clock)
    cluster.create_sync("Node", node("n1"))
    cluster.create_sync("Pod", pod("p1", "n1", ready=True))
    m = Metrics(now=clock.now)
    m.attach_state(cluster, lambda: True)
    fams = parse(m.render().decode())
    node_labels = {name for _, name in m.state.node_label_keys()} | {"node_name", "phase", "managed"}
    assert node_labels >= CORE_NODE_LABELS
    for name, (type_, labels) in EXPECTED.items():
        assert name in fams, f"{name} is not exposed"
        assert fams[name][0] == type_, f"{name}: {fams[name][0]}, Karpenter has {type_}"
        for sample, got, _ in fams[name][1]:
            got_names = set(got) - {"le", "quantile"}
            assert got_names == expected_labels(labels, node_labels), f"{sample}: labels {sorted(got_names)}"
    # summaries carry Go's quantile labels, which the performance dashboard selects
    m.nodes_termination_duration.labels(POOL).observe(3.0)
    quantiles = {ls["quantile"] for ls, _ in samples(m, "karpenter_nodes_termination_duration_seconds") if "quantile" in ls}
    assert quantiles == set(SUMMARY_QUANTILES)
    # histogram buckets as upstream
    m.scheduling_duration.labels("provisioner").observe(0.01)
    m.disruption_evaluation_duration.labels("empty", "empty").observe(0.01)
    m.pods_bound_duration.observe(1)
    m.nodeclaims_termination_duration.labels(POOL).observe(1)
    m.reconcile_time.labels("x").observe(0.1)
    m.nodes_lifetime_duration.labels(POOL).observe(1)
    fams = parse(m.render().decode())
    for name, buckets in BUCKETS.items():
        les = sorted(float(ls["le"]) for s, ls, _ in fams[name][1] if s.endswith("_bucket") and ls["le"] != "+Inf")
        assert les == sorted(float(b) for b in buckets), name
    companions = [n for n in fams if n.endswith("_created") and n.removesuffix("_created") in fams]
    assert not companions, "client_golang exports no _created series"


def test_node_metrics_carry_karpenters_aws_labels():
    """Issue 29: Karpenter's node gauges have a label per AWS well-known label
    (``pkg/apis/v1/labels.go``); the bandwidth, clock speed, encryption-in-transit, tenancy,
    Nitro Enclaves, placement group, zone ID and interruptible-reservation ones were missing."""
    from karpy_core.cloudprovider.catalog.aws import register_aws_labels

    register_aws_labels()
    clock = VirtualClock(T0)
    cluster = InMemoryCluster(clock)
    n1 = node("n1")
    n1["metadata"]["labels"]["karpenter.k8s.aws/instance-network-bandwidth"] = "750"
    n1["metadata"]["labels"]["topology.k8s.aws/zone-id"] = "use1-az1"
    cluster.create_sync("Node", n1)
    m = Metrics(now=clock.now)
    m.attach_state(cluster, lambda: True)
    names = {name for _, name in m.state.node_label_keys()}
    assert names >= {"instance_network_bandwidth", "instance_ebs_bandwidth", "instance_cpu_sustained_clock_speed_mhz",
                     "instance_encryption_in_transit_supported", "instance_tenancy", "nitro_sandbox", "placement_group_id",
                     "placement_group_partition", "capacity_reservation_interruptible", "zone_id"}
    fams = parse(m.render().decode())
    rows = [ls for _, ls, _ in fams["karpenter_nodes_allocatable"][1] if ls.get("node_name") == "n1"]
    assert rows
    for ls in rows:  # each resource type's sample: the node's label, or "" where the node has none
        assert ls["instance_network_bandwidth"] == "750" and ls["zone_id"] == "use1-az1" and ls["instance_tenancy"] == ""


# ---- gauges never stale ---------------------------------------------------------------------------

def test_node_and_pod_gauges_follow_the_cluster_and_vanish_with_their_objects():
    clock = VirtualClock(T0)
    cluster = InMemoryCluster(clock)
    cluster.create_sync("Node", node("n1"))
    cluster.create_sync("Node", node("n2"))
    cluster.create_sync("Pod", pod("web", "n1", cpu="500m", ready=True))
    cluster.create_sync("Pod", pod("ds", "n1", cpu="100m", daemon=True, ready=True))
    m = Metrics(now=clock.now)
    m.attach_state(cluster, lambda: True)
    assert value(m, "karpenter_nodes_allocatable", node_name="n1", resource_type="cpu") == pytest.approx(3.92)
    assert value(m, "karpenter_nodes_allocatable", node_name="n1", resource_type="memory") == 15 * 2**30
    assert value(m, "karpenter_nodes_system_overhead", node_name="n1", resource_type="cpu") == pytest.approx(0.08)
    assert value(m, "karpenter_nodes_total_pod_requests", node_name="n1", resource_type="cpu") == pytest.approx(0.6)
    assert value(m, "karpenter_nodes_total_pod_requests", node_name="n1", resource_type="pods") == 2
    assert value(m, "karpenter_nodes_total_pod_limits", node_name="n1", resource_type="cpu") == pytest.approx(2.0)
    assert value(m, "karpenter_nodes_total_daemon_requests", node_name="n1", resource_type="cpu") == pytest.approx(0.1)
    assert value(m, "karpenter_nodes_current_lifetime_seconds", node_name="n1") == pytest.approx(600)
    assert value(m, "karpenter_pods_state", name="web", node="n1", nodepool=POOL, zone="test-zone-a", ready="true") == 1
    assert value(m, "karpenter_cluster_state_node_count") == 2

    cluster.delete_sync("Pod", "web", "default")
    assert value(m, "karpenter_nodes_total_pod_requests", node_name="n1", resource_type="cpu") == pytest.approx(0.1)
    assert value(m, "karpenter_pods_state", name="web") is None
    cluster.delete_sync("Pod", "ds", "default")
    assert value(m, "karpenter_nodes_total_daemon_requests", node_name="n1") is None
    cluster.delete_sync("Node", "n1")
    for fam in ("karpenter_nodes_allocatable", "karpenter_nodes_total_pod_requests", "karpenter_nodes_system_overhead",
                "karpenter_nodes_current_lifetime_seconds"):
        assert value(m, fam, node_name="n1") is None, fam
    assert value(m, "karpenter_nodes_allocatable", node_name="n2", resource_type="cpu") == pytest.approx(3.92)
    assert value(m, "karpenter_cluster_state_node_count") == 1


def test_nodepool_usage_and_limit_come_from_the_nodepool_and_go_with_it():
    cluster = InMemoryCluster()
    cluster.create_sync("NodePool", {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": POOL},
                                     "spec": {"limits": {"cpu": "100", "memory": "400Gi"}, "template": {"spec": {
                                         "requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                                                              "name": "default"}}}},
                                     "status": {"resources": {"cpu": "8", "memory": "32Gi", "nodes": "2"}}})
    m = Metrics()
    m.attach_state(cluster, lambda: True)
    assert value(m, "karpenter_nodepools_usage", nodepool=POOL, resource_type="cpu") == 8
    assert value(m, "karpenter_nodepools_usage", nodepool=POOL, resource_type="nodes") == 2
    assert value(m, "karpenter_nodepools_limit", nodepool=POOL, resource_type="memory") == 400 * 2**30
    cluster.delete_sync("NodePool", POOL)
    assert value(m, "karpenter_nodepools_usage", nodepool=POOL) is None
    assert value(m, "karpenter_nodepools_limit", nodepool=POOL) is None


def test_per_pass_gauges_are_replaced_whole():
    m = Metrics()
    m.observe_disruption_pass({"emptiness": 3, "drift": 1}, 0.2, "drift")
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="empty") == 3
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="drifted") == 1
    m.observe_disruption_pass({"emptiness": 0}, 0.1, "emptiness")
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="empty") == 0
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="drifted") is None
    m.nodepools_allowed_disruptions.replace({("a", "Empty"): 1, ("b", "Empty"): 2})
    m.nodepools_allowed_disruptions.replace({("b", "Empty"): 1})
    assert value(m, "karpenter_nodepools_allowed_disruptions", nodepool="a") is None
    assert value(m, "karpenter_nodepools_allowed_disruptions", nodepool="b") == 1


def test_instance_type_gauges_are_one_table_replaced_whole():
    m = Metrics()

    class It:
        def __init__(self, name: str, cpu: int, offerings: list[Any]) -> None:
            self.name, self.capacity, self.offerings = name, {"cpu": cpu, "memory": 2**30}, offerings

    class Off:
        def __init__(self, zone: str, ct: str, price: float, available: bool) -> None:
            self.zone, self.capacity_type, self.price, self.available = zone, ct, price, available

    m.observe_instance_types([It("a.large", 2000, [Off("z1", "spot", 0.05, True), Off("z2", "spot", 0.06, False)]),
                              It("b.large", 4000, [Off("z1", "on-demand", 0.2, True)])])
    text = m.render().decode()
    assert text.count("# TYPE karpenter_cloudprovider_instance_type_offering_price_estimate gauge") == 1
    parsed = parse(text)
    assert value(parsed, "karpenter_cloudprovider_instance_type_offering_price_estimate",
                 instance_type="a.large", capacity_type="spot", zone="z2") == pytest.approx(0.06)
    assert value(parsed, "karpenter_cloudprovider_instance_type_offering_available", instance_type="a.large", zone="z2") == 0
    assert value(parsed, "karpenter_cloudprovider_instance_type_cpu_cores", instance_type="b.large") == 4
    assert value(parsed, "karpenter_cloudprovider_instance_type_memory_bytes", instance_type="b.large") == 2**30
    m.observe_instance_types([It("b.large", 4000, [Off("z1", "on-demand", 0.25, True)])])
    parsed = parse(m.render().decode())
    assert value(parsed, "karpenter_cloudprovider_instance_type_offering_price_estimate", instance_type="a.large") is None
    assert value(parsed, "karpenter_cloudprovider_instance_type_cpu_cores", instance_type="a.large") is None
    assert value(parsed, "karpenter_cloudprovider_instance_type_offering_price_estimate",
                 instance_type="b.large", zone="z1") == pytest.approx(0.25)
    # no prometheus child object per series: the table is the only store
    assert not any(type(c).__name__ == "Gauge" and "instance_type" in getattr(c, "_labelnames", ())
                   for c in m.registry._collector_to_names)


def test_queue_depth_returns_to_zero_once_the_pods_are_bound():
    clock = VirtualClock(T0)
    op = Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock)
    m = op.metrics
    m.observe_scheduling("provisioner", "pass-1", 0.05, ["default/a", "default/b"])
    assert value(m, "karpenter_scheduler_queue_depth", controller="provisioner", scheduling_id="pass-1") == 2
    assert value(m, "karpenter_scheduler_unschedulable_pods_count", controller="provisioner") == 2
    # kube-scheduler binds one pod, the other is deleted: no further provisioning pass runs
    op._on_change("Pod", WatchEvent("MODIFIED", pod("a", "n1")))
    assert value(m, "karpenter_scheduler_queue_depth", controller="provisioner") == 1
    op._on_change("Pod", WatchEvent("DELETED", pod("b")))
    assert value(m, "karpenter_scheduler_queue_depth", controller="provisioner") == 0
    # a later pass that places everything reports 0 under its own id; the old id is gone
    m.observe_scheduling("provisioner", "pass-2", 0.05, [])
    assert [ls["scheduling_id"] for ls, _ in samples(m, "karpenter_scheduler_queue_depth")] == ["pass-2"]
    assert value(m, "karpenter_scheduler_unschedulable_pods_count", controller="provisioner") == 0


def test_pod_bound_and_startup_durations_are_observed_once():
    m = Metrics()
    m.observe_pod("ADDED", pod("p"))
    m.observe_pod("MODIFIED", pod("p", "n1"))  # bound 30 s after creation
    m.observe_pod("MODIFIED", pod("p", "n1", ready=True))  # Ready 40 s after creation
    m.observe_pod("MODIFIED", pod("p", "n1", ready=True))
    assert value(m, "karpenter_pods_bound_duration_seconds_count") == 1
    assert value(m, "karpenter_pods_bound_duration_seconds_sum") == pytest.approx(30)
    assert value(m, "karpenter_pods_startup_duration_seconds_count") == 1
    assert value(m, "karpenter_pods_startup_duration_seconds_sum") == pytest.approx(40)


# ---- counters from the controller's passes --------------------------------------------------------

async def test_node_termination_counts_nodes_terminated_total():
    clock = VirtualClock(T0)
    cluster = InMemoryCluster(clock)
    n = node("n1")
    n["metadata"]["finalizers"] = ["karpenter.sh/termination"]
    # Ready: its kubelet runs, so it is drained (a NotReady Node whose instance the provider does not
    # have, as simulated://n1 is not, is let go without a drain: test_termination_instance_gone.py)
    n["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    cluster.create_sync("Node", n)
    cluster.create_sync("Pod", pod("web", "n1", ready=True))
    op = Operator(kube=cluster, provider=load_provider("simulated", {}), clock=clock)
    await op.kube.start()
    try:
        await cluster.delete("Node", "n1")  # the finalizer holds it: deletionTimestamp set
        for _ in range(20):
            await asyncio.sleep(0)
        clock.advance(5)
        m = op.metrics
        for _ in range(5):  # evict the pod, then (once it is gone) remove the finalizer
            await op.termination.reconcile()
            for _ in range(20):
                await asyncio.sleep(0)
            if cluster.peek("Node", "n1") is None:
                break
        assert value(m, "karpenter_pods_eviction_requests", code="200") == 1
        assert value(m, "karpenter_pods_drained", reason="Forceful Termination") == 1  # no NodeClaim with a DisruptionReason
        assert value(m, "karpenter_nodes_terminated", nodepool=POOL, zone="test-zone-a") == 1
        assert value(m, "karpenter_nodes_drained", nodepool=POOL) == 1
        assert value(m, "karpenter_nodes_termination_duration_seconds_count", nodepool=POOL) == 1
        assert value(m, "karpenter_nodes_termination_duration_seconds_sum", nodepool=POOL) == pytest.approx(5)
        assert value(m, "karpenter_nodes_lifetime_duration_seconds_count", nodepool=POOL) == 1
        assert cluster.peek("Node", "n1") is None
    finally:
        await op.kube.stop()


def test_disrupted_total_carries_policy_and_termination_mode():
    m = Metrics()
    claim = {"metadata": {"labels": {"karpenter.sh/nodepool": POOL, "karpenter.sh/capacity-type": "spot"}}, "spec": {}}
    pool = {"spec": {"disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized"}}}
    m.observe_disrupted("underutilized", claim, pool, consolidation=True)
    m.observe_disrupted("drifted", {**claim, "spec": {"terminationGracePeriod": "1h"}}, pool)
    m.observe_disrupted("expired", {**claim, "spec": {"terminationGracePeriod": "0s"}})
    got = {(ls["reason"], ls["consolidation_policy"], ls["termination_mode"], ls["capacity_type"])
           for ls, v in samples(m, "karpenter_nodeclaims_disrupted") if v == 1}
    assert got == {("underutilized", "when_empty_or_underutilized", "graceful", "spot"), ("drifted", "", "eventual", "spot"),
                   ("expired", "", "forceful", "spot")}


async def test_a_planning_pass_sets_eligible_nodes_budgets_offerings_and_timeouts(caplog):
    from karpy_core.apis.base import to_kube_dict
    from karpy_core.controllers.disruption.controller import PlanningPass
    from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, NodeDecision, Verdict
    from karpy_core.state.cluster import ClusterSnapshot
    from karpy_core.testing import nodepool_for

    provider = load_provider("simulated", {})
    op = Operator(kube=InMemoryCluster(), provider=provider)
    model = nodepool_for({"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"})
    pool = to_kube_dict(model)
    pool["metadata"]["name"] = POOL
    types = await provider.get_instance_types(model)
    caplog.set_level("INFO", logger="karpy.disruption")
    lines = [NodeDecision("n1", DisruptionMethod.EMPTINESS, Verdict.KEEP, DecisionKind.NO_ROOM, "has pods"),
             NodeDecision("n1", DisruptionMethod.SINGLE_NODE_CONSOLIDATION, Verdict.KEEP, DecisionKind.SIMULATION_LIMIT, "limit"),
             NodeDecision("n2", DisruptionMethod.SINGLE_NODE_CONSOLIDATION, Verdict.KEEP, DecisionKind.NO_ROOM, "no room")]
    assert op.disruption.metrics is not None
    op.disruption.metrics.observe_planning(PlanningPass(ClusterSnapshot(nodes=[node("n1"), node("n2")], nodepools=[pool]), {POOL: types}, lines,
                                      0.25, None, T0))
    m = parse(op.metrics.render().decode())  # ~1 MB: every offering of the simulated catalog, parsed once
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="empty") == 1
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="drifted") == 0
    assert value(m, "karpenter_voluntary_disruption_eligible_nodes", reason="underutilized") == 2  # single-node, the last method
    assert value(m, "karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count",
                 reason="underutilized", consolidation_type="single") == 1
    assert value(m, "karpenter_voluntary_disruption_consolidation_timeouts", consolidation_type="single") == 1
    assert value(m, "karpenter_voluntary_disruption_consolidation_timeouts", consolidation_type="multi") == 0
    skipped = [r for r in caplog.records if r.getMessage() == "disruption pass skipped candidates"]  # which, and why: never silent
    assert len(skipped) == 1 and skipped[0].method == "single-node-consolidation" and skipped[0].count == 1
    assert skipped[0].nodes == "n1" and "simulation-limit" in skipped[0].reason
    assert {ls["reason"] for ls, _ in samples(m, "karpenter_nodepools_allowed_disruptions")} == {"Empty", "Drifted", "Underutilized"}
    it = types[0]
    offering = it.offerings[0]
    assert value(m, "karpenter_cloudprovider_instance_type_offering_price_estimate", instance_type=it.name,
                 capacity_type=offering.capacity_type, zone=offering.zone) == pytest.approx(offering.price)
    assert value(m, "karpenter_cloudprovider_instance_type_cpu_cores", instance_type=it.name) == it.capacity["cpu"] / 1000


async def test_metrics_endpoint_serves_the_state_gauges_rendered_off_the_loop():
    import aiohttp

    from karpy_core.observability import HealthServer

    cluster = InMemoryCluster()
    cluster.create_sync("Node", node("n1"))
    m = Metrics()
    m.attach_state(cluster, lambda: True)
    server = HealthServer(m, lambda: True, host="127.0.0.1", port=0)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
            text = await resp.text()
    finally:
        await server.stop()
    fams = parse(text)
    assert {ls["node_name"] for _, ls, _ in fams["karpenter_nodes_allocatable"][1]} == {"n1"}
    assert set(fams) == set(parse(m.render().decode()))
