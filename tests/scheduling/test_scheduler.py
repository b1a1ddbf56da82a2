"""Decisions of the provisioning scheduler on small synthetic catalogs."""

from __future__ import annotations

from karpy_core.scheduling.infeasible import InfeasibleKind
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.scheduler import ExistingNode, Scheduler
from karpy_core.scheduling.taints import Taint
from karpy_core.scheduling.template import template_from_nodepool

from .helpers import GI, make_type, nodepool, pod

CATALOG = [
    make_type("small", 2, 4),
    make_type("medium", 4, 8),
    make_type("large", 8, 16),
    make_type("arm", 4, 8, arch="arm64", price=0.1),
    make_type("gpu", 8, 32, extra={"nvidia.com/gpu": 1}, price=1.0),
]


def solve(pools, pods, *, nodes=(), daemonsets=(), usage=None, catalog=CATALOG):
    templates = [template_from_nodepool(p, catalog) for p in pools]
    return Scheduler(templates, list(nodes), [pod_info(d) for d in daemonsets], usage).solve([pod_info(p) for p in pods])


def chosen_type(claim) -> str:
    return claim.instance_types[0].name


def test_packs_pods_and_cheapest_type_first():
    res = solve([nodepool()], [pod(f"p{i}", "1", "1Gi") for i in range(3)])
    assert len(res.new_claims) == 1
    claim = res.new_claims[0]
    assert len(claim.pods) == 3
    # 3 cpu does not fit 'small' (2 cpu); cheapest remaining is medium (0.20) then arm (0.10 but arch any) -
    # arm is cheaper and the NodePool has no arch requirement
    assert [t.name for t in claim.instance_types] == ["arm", "medium", "large", "gpu"]
    assert claim.requests == {"cpu": 3000, "memory": 3 * GI, "pods": 3}


def test_nodepool_requirements_filter_types():
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    res = solve([pool], [pod("p", "3", "1Gi")])
    assert [t.name for t in res.new_claims[0].instance_types] == ["medium", "large", "gpu"]
    reqs = {r["key"]: r for r in res.new_claims[0].spec_requirements()}
    assert reqs["node.kubernetes.io/instance-type"]["values"] == ["gpu", "large", "medium"]
    assert reqs["karpenter.sh/nodepool"]["values"] == ["default"]


def test_pod_too_big_reports_resources():
    res = solve([nodepool()], [pod("huge", "64", "1Gi")])
    assert not res.new_claims
    assert res.reasons["default/huge"].pool("default").kinds == (InfeasibleKind.NO_ROOM,)
    assert res.errors["default/huge"] == res.reasons["default/huge"].message


def test_extended_resource_selects_gpu_type_only():
    res = solve([nodepool()], [pod("g", "1", "1Gi", extra={"nvidia.com/gpu": "1"})])
    assert [t.name for t in res.new_claims[0].instance_types] == ["gpu"]


def test_taints_must_be_tolerated_and_weights_order_pools():
    tainted = nodepool("gpu-pool", weight=50, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    plain = nodepool("plain", weight=10)
    res = solve([plain, tainted], [pod("a"), pod("b", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}])])
    by_pool = {c.nodepool: [p.name for p in c.pods] for c in res.new_claims}
    # a cannot use gpu-pool; b then fits the claim already planned for a (planned claims come first)
    assert by_pool == {"plain": ["a", "b"]}
    tolerant = solve([plain, tainted], [pod("b", tolerations=[{"key": "dedicated", "operator": "Exists"}])])
    assert [c.nodepool for c in tolerant.new_claims] == ["gpu-pool"]
    only_tainted = solve([tainted], [pod("a")])
    assert only_tainted.reasons["default/a"].pool("gpu-pool").kinds == (InfeasibleKind.UNTOLERATED_TAINT,)


def test_heavier_weight_wins_when_both_fit():
    res = solve([nodepool("light", weight=1), nodepool("heavy", weight=100)], [pod("a")])
    assert [c.nodepool for c in res.new_claims] == ["heavy"]


def test_node_selector_incompatible_with_pool():
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    res = solve([pool], [pod("a", node_selector={"kubernetes.io/arch": "arm64"})])
    assert res.reasons["default/a"].pool("default").kinds == (InfeasibleKind.INCOMPATIBLE_REQUIREMENTS,)


def test_custom_label_on_template_satisfies_selector():
    pool = nodepool(labels={"workload-type": "karpenter"})
    res = solve([pool], [pod("a", node_selector={"workload-type": "karpenter"}), pod("b", node_selector={"workload-type": "other"})])
    assert [p.name for p in res.new_claims[0].pods] == ["a"]
    assert res.reasons["default/b"].kinds == {InfeasibleKind.INCOMPATIBLE_REQUIREMENTS}


def test_required_affinity_or_terms_try_next_term():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["s390x"]}]},
        {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
    ]}}}
    res = solve([nodepool()], [pod("a", affinity=aff)])
    assert [t.name for t in res.new_claims[0].instance_types] == ["arm"]


def test_existing_node_used_before_new_claims():
    node = ExistingNode("n1", {"kubernetes.io/arch": "amd64"}, (), {"cpu": 4000, "memory": 8 * GI, "pods": 10}, {"cpu": 1000, "memory": GI, "pods": 1})
    res = solve([nodepool()], [pod("a", "2"), pod("b", "2")], nodes=[node])
    assert res.existing == {"default/a": "n1"}
    assert [p.name for p in res.new_claims[0].pods] == ["b"]


def test_existing_node_taint_blocks():
    node = ExistingNode("n1", {}, (Taint("x", "", "NoSchedule"),), {"cpu": 4000, "memory": 8 * GI, "pods": 10})
    res = solve([nodepool()], [pod("a")], nodes=[node])
    assert res.existing == {}
    assert len(res.new_claims) == 1


def test_daemonset_overhead_counts_per_template():
    ds = {"metadata": {"name": "agent", "ownerReferences": [{"kind": "DaemonSet", "name": "agent"}]},
          "spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    # 2 cpu pods: without overhead 'small' (2 cpu) fits; with 1 cpu DaemonSet it does not.
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    without = solve([pool], [pod("a", "2", "1Gi")])
    assert chosen_type(without.new_claims[0]) == "small"
    with_ds = solve([pool], [pod("a", "2", "1Gi")], daemonsets=[ds])
    assert chosen_type(with_ds.new_claims[0]) == "medium"
    assert with_ds.new_claims[0].requests == {"cpu": 3000, "memory": 2 * GI, "pods": 2}


def test_daemonset_selecting_other_arch_adds_no_overhead():
    ds = {"metadata": {"name": "arm-agent"},
          "spec": {"nodeSelector": {"kubernetes.io/arch": "arm64"},
                   "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    res = solve([pool], [pod("a", "2", "1Gi")], daemonsets=[ds])
    assert chosen_type(res.new_claims[0]) == "small"


def test_daemonset_selecting_karpenter_lifecycle_labels_counts_as_overhead():
    """Karpenter's NodeClaimTemplate assumes karpenter.sh/registered and karpenter.sh/initialized
    are "true" on its nodes (pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go), so a
    DaemonSet selecting them lands on the new node and must be in its overhead."""
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    registered = {"metadata": {"name": "reg-agent"},
                  "spec": {"nodeSelector": {"karpenter.sh/registered": "true"},
                           "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    initialized = {"metadata": {"name": "init-agent"},
                   "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                       "nodeSelectorTerms": [{"matchExpressions": [
                           {"key": "karpenter.sh/initialized", "operator": "In", "values": ["true"]}]}]}}},
                            "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    for ds in (registered, initialized):
        res = solve([pool], [pod("a", "2", "1Gi")], daemonsets=[ds])
        assert chosen_type(res.new_claims[0]) == "medium", ds["metadata"]["name"]
        assert res.new_claims[0].requests["cpu"] == 3000
    both = solve([pool], [pod("a", "1", "1Gi")], daemonsets=[registered, initialized])
    assert chosen_type(both.new_claims[0]) == "medium"
    assert both.new_claims[0].requests["cpu"] == 3000
    # a DaemonSet that only runs on nodes *not yet* initialised never lands on a ready node
    not_init = {"metadata": {"name": "bootstrap"},
                "spec": {"nodeSelector": {"karpenter.sh/initialized": "false"},
                         "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    res = solve([pool], [pod("a", "2", "1Gi")], daemonsets=[not_init])
    assert chosen_type(res.new_claims[0]) == "small"


def test_limits_stop_growth_and_name_the_limit():
    pool = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                                  {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}],
                    limits={"cpu": "5"})
    res = solve([pool], [pod(f"p{i}", "1500m", "1Gi") for i in range(4)])
    # each small node (2 cpu) holds one 1.5 cpu pod; the limit admits two nodes (4 cpu), not three
    assert len(res.new_claims) == 2
    assert sorted(res.errors) == ["default/p2", "default/p3"]
    assert res.reasons["default/p2"].pool("default").kinds == (InfeasibleKind.LIMIT_EXCEEDED,)


def test_limits_count_existing_usage_and_nodes_limit():
    pool = nodepool(limits={"nodes": "1"})
    res = solve([pool], [pod("a", "3"), pod("b", "3")])
    assert len(res.new_claims) == 1 and len(res.new_claims[0].pods) == 2
    res2 = solve([nodepool(limits={"cpu": "8"})], [pod("a", "1")], usage={"default": {"cpu": 7000}})
    assert res2.new_claims == [] and res2.reasons["default/a"].kinds == {InfeasibleKind.LIMIT_EXCEEDED}


def test_offerings_zone_requirement():
    res = solve([nodepool()], [pod("a", node_selector={"topology.kubernetes.io/zone": "zone-c"})])
    assert res.reasons["default/a"].pool("default").kinds == (InfeasibleKind.NO_MATCHING_TYPE,)


def test_decisions_are_deterministic():
    pods = [pod(f"p{i}", f"{(i % 4) + 1}", f"{(i % 3) + 1}Gi") for i in range(40)]
    a = solve([nodepool()], pods)
    b = solve([nodepool()], list(reversed(pods)))
    shape = lambda r: [(c.nodepool, c.instance_types[0].name, sorted(p.name for p in c.pods)) for c in r.new_claims]  # noqa: E731
    assert shape(a) == shape(b)


def test_min_values_strict_rejects_and_best_effort_relaxes_and_marks():
    catalog = [make_type(f"{fam}.large", 2, 4, labels={"family": fam}) for fam in ("a", "b", "c")] + [
        make_type("d.8xlarge", 32, 64, labels={"family": "d"})]
    pool = nodepool(requirements=[{"key": "family", "operator": "Exists", "minValues": 3}],
                    labels={})
    # family is a custom label carried by the types; the template must define it to allow pods
    templates = [template_from_nodepool(pool, catalog)]
    small = [pod_info(pod(f"s{i}", "1", "1Gi")) for i in range(1)]
    strict = Scheduler(templates).solve(small)
    assert len(strict.new_claims) == 1 and len({t.name for t in strict.new_claims[0].instance_types}) == 4
    big = [pod_info(pod("big", "8", "8Gi"))]  # only d.8xlarge fits: one family left < minValues 3
    res = Scheduler([template_from_nodepool(pool, catalog)]).solve(big)
    assert res.new_claims == [] and res.reasons["default/big"].kinds == {InfeasibleKind.MIN_VALUES}
    relaxed = Scheduler([template_from_nodepool(pool, catalog)], min_values_policy="BestEffort").solve(big)
    assert [t.name for t in relaxed.new_claims[0].instance_types] == ["d.8xlarge"]
    assert relaxed.new_claims[0].min_values_relaxed
