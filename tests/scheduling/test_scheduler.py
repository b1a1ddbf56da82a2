"""Decisions of the provisioning scheduler on small synthetic catalogs."""

from __future__ import annotations

from typing import Any

from karpy_core.scheduling.infeasible import InfeasibleKind
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.scheduler import ExistingNode, Scheduler
from karpy_core.scheduling.taints import Taint
from karpy_core.scheduling.template import template_from_nodepool

from .helpers import GI, make_type, nodepool, pod


def _zone_req(reqs: Requirements) -> Requirement:
    r = reqs.get("topology.kubernetes.io/zone")
    assert r is not None
    return r


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


def test_an_impossible_nodepool_requirement_is_named_in_the_reason():
    # a pod asking nothing of its own learns which NodePool requirement no type meets, and what the types have
    sparc = {"key": "kubernetes.io/arch", "operator": "In", "values": ["sparc"]}
    res = solve([nodepool(requirements=[sparc])], [pod("p", "1", "1Gi")])
    assert res.reasons["default/p"].pool("default").kinds == (InfeasibleKind.NO_MATCHING_TYPE,)
    assert "kubernetes.io/arch In [sparc]" in res.errors["default/p"]
    # each requirement met by some type, but none meets both: all of them are listed
    gpu_arm = [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]},
               {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["gpu"]}]
    res = solve([nodepool(requirements=gpu_arm)], [pod("p", "1", "1Gi")])
    assert res.reasons["default/p"].pool("default").kinds == (InfeasibleKind.NO_MATCHING_TYPE,)
    assert "kubernetes.io/arch In [arm64]" in res.errors["default/p"] and "node.kubernetes.io/instance-type In [gpu]" in res.errors["default/p"]


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
    registered: dict[str, Any] = {"metadata": {"name": "reg-agent"},
                  "spec": {"nodeSelector": {"karpenter.sh/registered": "true"},
                           "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}}]}}
    initialized: dict[str, Any] = {"metadata": {"name": "init-agent"},
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


def test_topology_counts_a_pod_where_its_claim_settles_later_and_restore_forgets_it():
    from karpy_core.scheduling.topology import Placement, Topology, parse_spread

    zones = {"topology.kubernetes.io/zone": {"a", "b"}}
    spread = parse_spread([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                            "labelSelector": {"matchLabels": {"app": "web"}}}], {"app": "side"})
    topo = Topology(zones)
    open_claim = Placement({"kubernetes.io/hostname": "c0"})
    topo.record("default", {"app": "web"}, open_claim)
    verdict = topo.prepare(namespace="default", labels={"app": "side"}, spread=spread, affinity=[])
    assert verdict.rules["topology.kubernetes.io/zone"].allowed == {"a", "b"}  # the web pod counts nowhere yet
    mark = topo.checkpoint()
    settled = Placement({"kubernetes.io/hostname": "c0", "topology.kubernetes.io/zone": "a"})
    topo.settle("default", {"app": "web"}, settled, frozenset({"topology.kubernetes.io/zone"}))
    # counted once in zone a (count 1, min 0: a side pod, which its selector does not match, may still
    # go to a; a web pod only to b), and not a second time on its hostname
    web = topo.prepare(namespace="default", labels={"app": "web"}, spread=spread, affinity=[])
    assert web.rules["topology.kubernetes.io/zone"].allowed == {"b"}
    assert topo._group("kubernetes.io/hostname", spread[0].selector, ("default",)) == {"c0": 1}
    topo.restore(mark)
    web = topo.prepare(namespace="default", labels={"app": "web"}, spread=spread, affinity=[])
    assert web.rules["topology.kubernetes.io/zone"].allowed == {"a", "b"}


def _anti(name: str, ns: str, term: dict, labels: dict | None = None) -> dict:
    p = pod(name, "1", "1Gi", ns=ns)
    p["metadata"]["labels"] = labels or {"app": "web"}
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", **term}]}}
    return p


def _claims(pods: list[dict]) -> list[list[str]]:
    sched = Scheduler([template_from_nodepool(nodepool(), [make_type("m", 4, 16)])])
    return sorted(sorted(p.key for p in c.pods) for c in sched.solve([pod_info(p) for p in pods]).new_claims)


def test_anti_affinity_namespaces_as_kube_scheduler_reads_them():
    web = {"labelSelector": {"matchLabels": {"app": "web"}}}
    # no namespaces, no namespaceSelector: the pod's own namespace only, so a/w and b/w may share a node
    assert _claims([_anti("w", "a", web), _anti("w", "b", web)]) == [["a/w", "b/w"]]
    # namespaceSelector {}: every namespace
    every = {**web, "namespaceSelector": {}}
    assert _claims([_anti("w", "a", every), _anti("w", "b", every)]) == [["a/w"], ["b/w"]]
    # a non-empty namespaceSelector cannot be evaluated without Namespace objects: read as every namespace
    picked = {**web, "namespaceSelector": {"matchLabels": {"team": "x"}}}
    assert _claims([_anti("w", "a", picked), _anti("w", "b", picked)]) == [["a/w"], ["b/w"]]
    # listed namespaces
    listed = {**web, "namespaces": ["a", "b"]}
    assert _claims([_anti("w", "a", listed), _anti("w", "b", listed)]) == [["a/w"], ["b/w"]]


def test_a_term_without_label_selector_matches_no_pod_and_label_keys_narrow_it():
    # no labelSelector: matches nothing (kube-scheduler's LabelSelectorAsSelector(nil)), so no exclusion
    assert _claims([_anti(f"w{i}", "a", {}) for i in range(3)]) == [["a/w0", "a/w1", "a/w2"]]
    # matchLabelKeys: only pods of the same pod-template-hash keep apart
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}
    pods = [_anti(f"w{i}", "a", term, {"app": "web", "pod-template-hash": h}) for i, h in enumerate(("1", "1", "2"))]
    assert _claims(pods) == [["a/w0", "a/w2"], ["a/w1"]]
    # mismatchLabelKeys: only pods of other tenants keep apart
    term = {"labelSelector": {"matchLabels": {"app": "web"}}, "mismatchLabelKeys": ["tenant"]}
    pods = [_anti(f"w{i}", "a", term, {"app": "web", "tenant": t}) for i, t in enumerate(("x", "x", "y"))]
    assert _claims(pods) == [["a/w0", "a/w1"], ["a/w2"]]


def test_a_spread_without_label_selector_never_restricts():
    pods = []
    for i in range(4):
        p = pod(f"s{i}", "1", "1Gi")
        p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                   "whenUnsatisfiable": "DoNotSchedule"}]
        pods.append(p)
    assert len(_claims(pods)) == 1


ZONES3 = ("zone-a", "zone-b", "zone-c")


def _open_claim_plan(pods: list[dict]) -> list[tuple[str | None, list[str]]]:
    # one type that holds the whole batch, offered in 3 zones: first fit would put every pod on one claim
    sched = Scheduler([template_from_nodepool(nodepool(), [make_type("m", 8, 32, zones=ZONES3)])])
    res = sched.solve([pod_info(p) for p in pods])
    assert not res.errors
    out = []
    for c in res.new_claims:
        z = c.requirements.get("topology.kubernetes.io/zone")
        one = next(iter(z.values)) if z is not None and not z.complement and len(z.values) == 1 else None
        out.append((one, sorted(p.name for p in c.pods)))
    return sorted(out, key=lambda t: t[1])


def _zone_anti(name: str, cpu: str, app: str, against: str, zone: str | None = None) -> dict:
    # a pod labelled app=<app> with a required zone anti-affinity against app=<against>, pinned to <zone>
    p = pod(name, cpu, "1Gi")
    p["metadata"]["labels"] = {"app": app}
    if zone is not None:
        p["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": zone}
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": against}}}]}}
    return p


def test_a_plain_look_alike_that_a_zone_anti_affinity_selects_is_checked_on_its_own():
    # d and zb have one signature (1 cpu, pinned to zone-a) and differ only in labels. a's zone
    # anti-affinity keeps app=side out of zone-a, so kube-scheduler would refuse zb anywhere: it must
    # stay pending, not ride along when the packers add d's look-alikes to d's zone-a claim (the
    # cost-sized packer put them on one claim before look-alikes were keyed by their labels too)
    zones = ("zone-a", "zone-b", "zone-c")
    a = _zone_anti("a", "1500m", "db", "side", zone="zone-a")
    d = pod("d", "1", "1Gi")
    d["metadata"]["labels"] = {"app": "other"}
    zb = pod("zb", "1", "1Gi")
    zb["metadata"]["labels"] = {"app": "side"}
    for p in (d, zb):
        p["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
    for sizing in (False, True):
        sched = Scheduler([template_from_nodepool(nodepool(), [make_type("s", 2, 8, zones=zones), make_type("m", 4, 16, zones=zones)])], sizing=sizing)
        res = sched.solve([pod_info(p) for p in (a, d, zb)])
        placed = {p.name for c in res.new_claims for p in c.pods}
        assert placed == {"a", "d"} and set(res.errors) == {"default/zb"}, (sizing, placed, res.errors)


def _web(i: int) -> dict:
    # a hostname spread of maxSkew 3 makes the pods constrained (placed before the rest) but lets 3 share a
    # node, whose zone they leave open
    p = pod(f"web-{i}", "1", "1Gi")
    p["metadata"]["labels"] = {"app": "web"}
    p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 3, "topologyKey": "kubernetes.io/hostname",
                                               "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]
    return p


def test_a_plain_pod_does_not_settle_a_claim_in_a_zone_a_placed_anti_affinity_keeps_its_pods_out_of():
    # web (2 cpu, a hostname spread: constrained, its claim's zone left open) is placed first; a
    # (1 cpu, zone-a) keeps app=web out of zone-a, so it opens a claim of its own there. p is plain and
    # pinned to zone-a: joining web's claim would settle it in zone-a with web in it, which
    # kube-scheduler would refuse web for. p goes to a's claim instead
    zones = ("zone-a", "zone-b", "zone-c")
    web = _web(0)
    web["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    a = _zone_anti("a", "1", "db", "web", zone="zone-a")
    p = pod("p", "500m", "1Gi")
    p["metadata"]["labels"] = {"app": "x"}
    p["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
    for sizing in (False, True):
        sched = Scheduler([template_from_nodepool(nodepool(), [make_type("m", 4, 16, zones=zones)])], sizing=sizing)
        res = sched.solve([pod_info(x) for x in (web, a, p)])
        together = {q.name: {o.name for o in c.pods} for c in res.new_claims for q in c.pods}
        zone = {q.name: c.requirements.get("topology.kubernetes.io/zone") for c in res.new_claims for q in c.pods}
        assert not res.errors and together["p"] == {"a", "p"}, (sizing, together)
        assert zone["web-0"] is None or "zone-a" not in zone["web-0"].values, (sizing, zone["web-0"])


def test_a_zone_spread_pod_does_not_settle_a_claim_whose_pods_would_break_it():
    # side's zone spread (maxSkew 1) selects web. The 3 web pods share one claim with its zone open.
    # Joining it would pin them all in side's zone: 3 there, 0 elsewhere, and kube-scheduler would then
    # refuse side on that node (3 + 0 - 0 > 1). So side (smaller: placed after web) opens a claim of its own.
    side = pod("side", "500m", "1Gi")
    side["metadata"]["labels"] = {"app": "side"}
    side["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]
    plan = _open_claim_plan([_web(i) for i in range(3)] + [side])
    assert [names for _, names in plan] == [["side"], ["web-0", "web-1", "web-2"]]
    # with maxSkew 3 the claim may settle with side on it
    side["spec"]["topologySpreadConstraints"][0]["maxSkew"] = 3
    plan = _open_claim_plan([_web(i) for i in range(3)] + [side])
    assert [names for _, names in plan] == [["side", "web-0", "web-1", "web-2"]] and plan[0][0] is not None


def test_zone_anti_affinity_keeps_off_an_open_claim_holding_a_pod_it_selects():
    # db keeps away from web per zone; the web pods' claim has no zone yet, so db may not join it (it
    # would settle db and web in one zone), though one claim would hold them all. db is smaller, so
    # placed after web (a pod placed first would settle its claim's zone itself)
    db = _zone_anti("db", "500m", "db", "web")
    plan = _open_claim_plan([_web(i) for i in range(3)] + [db])
    assert [names for _, names in plan] == [["db"], ["web-0", "web-1", "web-2"]]


def test_a_claim_holding_a_pod_that_a_zone_anti_affinity_selects_settles_outside_its_zone():
    # web-0 (1 cpu, placed first) sits on a claim with its zone open. db (800m, pinned to zone-a by
    # its node selector) keeps web out of its zone, so it opens its own claim. side (500m, placed
    # last) then settles web-0's claim by its own zone spread; every zone has a count of 0 and zone-a
    # comes first by name, but web-0 may not be in zone-a (the inverse rule for the claim's pods)
    db = _zone_anti("db", "800m", "db", "web", zone="zone-a")
    side = pod("side", "500m", "1Gi")
    side["metadata"]["labels"] = {"app": "side"}
    side["spec"]["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "side"}}}]
    plan = _open_claim_plan([db, _web(0), side])
    assert plan == [("zone-a", ["db"]), ("zone-b", ["side", "web-0"])]


def test_a_not_in_leaving_one_zone_settles_the_claim_there():
    # web-0 (1 cpu, placed first) sits on a claim with its zone open; the type is offered in zone-a
    # and zone-b only. db (800m, pinned to zone-a) keeps web out of its zone: web-0's claim gets
    # NotIn zone-a, which leaves zone-b alone, so the claim is settled there and web-0 counts in
    # zone-b. z (500m, pinned to zone-b, also keeping away from web) would share zone-b with web-0
    # wherever it went there, so kube-scheduler would refuse it: it stays pending
    db = _zone_anti("db", "800m", "db", "web", zone="zone-a")
    z = _zone_anti("z", "500m", "z", "web", zone="zone-b")
    sched = Scheduler([template_from_nodepool(nodepool(), [make_type("m", 8, 32)])])
    res = sched.solve([pod_info(p) for p in (db, _web(0), z)])
    zones = {}
    for c in res.new_claims:
        req = c.requirements.get("topology.kubernetes.io/zone")
        for p in c.pods:
            zones[p.name] = None if req is None or req.complement else sorted(req.values)
    assert zones == {"db": ["zone-a"], "web-0": ["zone-b"]} and set(res.errors) == {"default/z"}


def _side_over_web() -> dict:
    # side (900m): a hard zone spread of maxSkew 1 over app=web
    side = pod("side", "900m", "1Gi")
    side["metadata"]["labels"] = {"app": "side"}
    side["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]
    return side


def test_a_pod_does_not_settle_a_claim_whose_pods_would_break_a_spread_placed_before():
    # side (900m) carries a zone spread over web (maxSkew 1) and is placed after the 3 web pods, whose
    # claim keeps its zone open: side may not join it (3 in one zone) and settles zone-a alone, counting
    # no web pod anywhere. other (600m, a zone spread of its own) may then not settle web's claim
    # either: in whatever zone, side's choice would have seen 3 web pods there (3 - 0 > 1). It joins
    # side's claim. Once planned, web's claim is pinned to a zone other than side's
    # (SchedulingRun.settle_open_zones): 3 web pods in zone-b leave side's zone-a at 0 - 0 <= 1
    side = _side_over_web()
    other = pod("other", "600m", "1Gi")
    other["metadata"]["labels"] = {"app": "other"}
    other["spec"]["topologySpreadConstraints"] = [{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone",
                                                   "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "other"}}}]
    plan = _open_claim_plan([_web(i) for i in range(3)] + [side, other])
    assert plan == [("zone-a", ["other", "side"]), ("zone-b", ["web-0", "web-1", "web-2"])]
    # without side in the batch, other settles web's claim: no placed pod chose by counts that missed web
    plan = _open_claim_plan([_web(i) for i in range(3)] + [other])
    assert plan == [("zone-a", ["other", "web-0", "web-1", "web-2"])]


def test_an_open_claim_takes_a_dearer_zone_only_where_the_cheaper_breaks_a_spread():
    # as above, side settles zone-a alone and web's 3 pods share a claim with its zone open. The
    # cheap type is offered only in zone-a, a dearer one only in zone-b: in zone-a web would lift
    # side's zone to 3 - 0 > 1, so web's claim takes zone-b and the dearer type (0.50, not 0.40)
    catalog = [make_type("cheap", 8, 32, price=0.40, zones=("zone-a",)), make_type("dear", 8, 32, price=0.50, zones=("zone-b",))]

    def plan(pods):
        res = Scheduler([template_from_nodepool(nodepool(), catalog)]).solve([pod_info(p) for p in pods])
        assert not res.errors
        out = []
        for c in res.new_claims:
            z = c.requirements.get("topology.kubernetes.io/zone")
            one = next(iter(z.values)) if z is not None and not z.complement and len(z.values) == 1 else None
            out.append((one, c.instance_types[0].name, sorted(p.name for p in c.pods)))
        return sorted(out, key=lambda t: t[2])

    assert plan([_web(i) for i in range(3)] + [_side_over_web()]) == [
        ("zone-a", "cheap", ["side"]), ("zone-b", "dear", ["web-0", "web-1", "web-2"])]
    # with no spread placed, nothing is pinned: web's claim stays open and launches on the cheap type
    assert plan([_web(i) for i in range(3)]) == [(None, "cheap", ["web-0", "web-1", "web-2"])]


def test_a_plain_pod_whose_node_selector_would_settle_a_claim_breaking_a_placed_spread_goes_elsewhere():
    # as above, side settles zone-a alone. p is plain (no verdict of its own) and pinned to zone-a: on
    # web's claim it would put 3 web pods in side's zone (3 - 0 > 1), so it joins side's claim instead
    # (web's claim then settles outside zone-a, as above)
    side = _side_over_web()
    p = pod("p", "600m", "1Gi")
    p["metadata"]["labels"] = {"app": "other"}
    p["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
    plan = _open_claim_plan([_web(i) for i in range(3)] + [side, p])
    assert plan == [("zone-a", ["p", "side"]), ("zone-b", ["web-0", "web-1", "web-2"])]
    # without side, p settles web's claim: nothing placed counted web
    plan = _open_claim_plan([_web(i) for i in range(3)] + [p])
    assert plan == [("zone-a", ["p", "web-0", "web-1", "web-2"])]


def test_plain_pods_packed_into_new_claims_keep_out_of_a_zone_anti_affinity():
    # a (1.5 cpu, zone-a) keeps app=side pods out of its zone and fills its 2-cpu claim. d (zone-a)
    # and zb (app=side) are plain: both go to the packers, which seed a claim with d and then add
    # pods of other signatures to it. zb must not join d's zone-a claim (kube-scheduler would refuse
    # it there); Karpenter's sizes put them together before the packers asked the verdict
    zones = ("zone-a", "zone-b", "zone-c")
    a = _zone_anti("a", "1500m", "db", "side", zone="zone-a")
    d = pod("d", "1", "1Gi")
    d["metadata"]["labels"] = {"app": "other"}
    d["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "zone-a"}
    zb = pod("zb", "1", "1Gi")
    zb["metadata"]["labels"] = {"app": "side"}
    for sizing in (False, True):
        sched = Scheduler([template_from_nodepool(nodepool(), [make_type("s", 2, 8, zones=zones)])], sizing=sizing)
        res = sched.solve([pod_info(p) for p in (a, d, zb)])
        zone_of = {p.name: next(iter(_zone_req(c.requirements).values))
                   for c in res.new_claims for p in c.pods}
        assert not res.errors and zone_of["a"] == zone_of["d"] == "zone-a" and zone_of["zb"] != "zone-a", (sizing, zone_of)

