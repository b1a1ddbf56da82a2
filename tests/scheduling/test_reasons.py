"""Typed reasons, the explainer agreeing with the search, immutable inputs, constructor inputs."""

from __future__ import annotations

import copy

import pytest

from karpy_core.scheduling.claim import ClaimState
from karpy_core.scheduling.explain import pool_verdict, suggest
from karpy_core.scheduling.feasibility import Fit
from karpy_core.scheduling.infeasible import Infeasible, InfeasibleKind, PoolVerdict
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.policies import MinValuesPolicy, PreferencePolicy
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.scheduler import ExistingNode, Scheduler
from karpy_core.scheduling.template import template_from_nodepool, type_tables

from .helpers import GI, make_type, nodepool, pod
from .test_scheduler import CATALOG, solve

K = InfeasibleKind


def test_each_failed_check_is_reported_by_its_kind():
    """Each reason a pod stays pending is asserted by its :class:`InfeasibleKind`, not its wording
    (the text users see, NodePool status and ``karpy simulate``, is the detail of the same value);
    where the detail carries data (a type, a taint, a requirement, a limit) that data is named."""

    def only(res, key: str, pool: str = "default") -> str:
        verdict = res.reasons[key].pool(pool)
        assert res.errors[key] == res.reasons[key].message
        return verdict.message

    huge = solve([nodepool()], [pod("huge", "64", "1Gi")])
    assert huge.reasons["default/huge"].pool("default").kinds == (K.NO_ROOM,)
    assert "cpu 64" in only(huge, "default/huge") and " large" in only(huge, "default/huge")  # the largest type by cpu
    tainted = solve([nodepool("gpu-pool", weight=50, taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])],
                    [pod("a")])
    assert tainted.reasons["default/a"].pool("gpu-pool").kinds == (K.UNTOLERATED_TAINT,)
    assert "dedicated=gpu:NoSchedule" in only(tainted, "default/a", "gpu-pool")
    amd = nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}])
    arch = solve([amd], [pod("a", node_selector={"kubernetes.io/arch": "arm64"})])
    assert arch.reasons["default/a"].pool("default").kinds == (K.INCOMPATIBLE_REQUIREMENTS,)
    assert "kubernetes.io/arch In [arm64]" in only(arch, "default/a")
    labelled = solve([nodepool(labels={"workload-type": "karpenter"})], [pod("b", node_selector={"workload-type": "other"})])
    assert labelled.reasons["default/b"].pool("default").kinds == (K.INCOMPATIBLE_REQUIREMENTS,)
    assert "workload-type In [karpenter]" in only(labelled, "default/b")
    small = nodepool(requirements=[{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["small"]}], limits={"cpu": "5"})
    limited = solve([small], [pod(f"p{i}", "1500m", "1Gi") for i in range(4)])
    assert sorted(limited.errors) == ["default/p2", "default/p3"]
    assert limited.reasons["default/p2"].pool("default").kinds == (K.LIMIT_EXCEEDED,)
    assert "limits.cpu=5" in only(limited, "default/p2")
    used = solve([nodepool(limits={"cpu": "8"})], [pod("a", "1")], usage={"default": {"cpu": 7000}})
    assert used.reasons["default/a"].pool("default").kinds == (K.LIMIT_EXCEEDED,)
    zone = solve([nodepool()], [pod("a", node_selector={"topology.kubernetes.io/zone": "zone-c"})])
    assert zone.reasons["default/a"].pool("default").kinds == (K.NO_MATCHING_TYPE,)
    assert "topology.kubernetes.io/zone In [zone-c]" in only(zone, "default/a")
    catalog = [make_type(f"{fam}.large", 2, 4, labels={"family": fam}) for fam in ("a", "b", "c")] + [
        make_type("d.8xlarge", 32, 64, labels={"family": "d"})]
    mv = nodepool(requirements=[{"key": "family", "operator": "Exists", "minValues": 3}], labels={})
    res = Scheduler([template_from_nodepool(mv, catalog)]).solve([pod_info(pod("big", "8", "8Gi"))])
    assert res.reasons["default/big"].pool("default").kinds == (K.MIN_VALUES,)
    assert "family" in only(res, "default/big")
    # a key the types hold several values of (the zones of their offerings) counts them all, as
    # Karpenter's SatisfiesMinValues: two zones meet minValues 2 (it read 0 distinct values)
    zoned = [make_type(n, 4, 8, zones=("zone-a", "zone-b")) for n in ("m1", "m2")]
    two = nodepool(requirements=[{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-a", "zone-b"],
                                  "minValues": 2}])
    assert not Scheduler([template_from_nodepool(two, zoned)]).solve([pod_info(pod("a", "1"))]).errors
    three = nodepool(requirements=[{"key": "topology.kubernetes.io/zone", "operator": "Exists", "minValues": 3}])
    res = Scheduler([template_from_nodepool(three, zoned)]).solve([pod_info(pod("a", "1"))])
    assert res.reasons["default/a"].pool("default").kinds == (K.MIN_VALUES,)
    none = Scheduler([]).solve([pod_info(pod("a"))])
    assert none.reasons["default/a"].kinds == {K.NO_NODEPOOL} and none.reasons["default/a"].pools == ()
    assert none.errors["default/a"] == none.reasons["default/a"].message != ""


def test_every_error_has_a_typed_reason_with_the_same_text():
    res = solve([nodepool(limits={"nodes": "1"})], [pod("a", "3"), pod("b", "3"), pod("c", "3"), pod("g", extra={"nvidia.com/gpu": "9"})])
    assert set(res.errors) == set(res.reasons) and res.errors
    for key, reason in res.reasons.items():
        assert res.errors[key] == reason.message
    assert res.reasons["default/c"].kinds == {K.NODE_LIMIT}


def test_unready_nodepools_are_typed():
    templates = [template_from_nodepool(nodepool(), CATALOG)]
    res = Scheduler(templates, unready={"later": "NodeClass not found"}).solve([pod_info(pod("huge", "64"))])
    reason = res.reasons["default/huge"]
    assert reason.pool("later").kinds == (K.NODEPOOL_NOT_READY,)
    assert [p.nodepool for p in reason.pools] == ["default", "later"]  # Ready ones first
    assert "NodeClass not found" in reason.pool("later").message


@pytest.mark.parametrize(
    ("pool", "spec"),
    [
        (nodepool(taints=[{"key": "x", "value": "y", "effect": "NoSchedule"}]), pod("p")),
        (nodepool(limits={"nodes": "0"}), pod("p")),
        (nodepool(), pod("p", extra={"example.com/fpga": "1"})),
        (nodepool(requirements=[{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]),
         pod("p", node_selector={"kubernetes.io/arch": "arm64"})),
        (nodepool(), pod("p", node_selector={"topology.kubernetes.io/zone": "zone-c"})),
        (nodepool(), pod("p", "64")),
        (nodepool(limits={"cpu": "1"}), pod("p", "1")),
    ],
)
def test_explainer_and_search_run_the_same_check(pool, spec):
    """The quiet check the search runs and the explained check agree on the kind."""
    template = template_from_nodepool(pool, CATALOG)
    sched = Scheduler([template])
    info = pod_info(spec)
    res = sched.solve([info])
    explained = res.reasons[info.key].pool(template.name)
    run = SchedulingRun(sched.inputs, [info])
    att = run.attempts(info)[-1]
    quiet = run.check(ClaimState.fresh(sched.tables[template.name], 0), info, att, run.verdict(info, att))
    assert not isinstance(quiet, Fit)
    assert [r.kind for r in quiet] == [explained.kinds[-1]]
    assert all(r.detail == "" for r in quiet) and all(r.detail for r in explained.reasons)
    assert pool_verdict(run, template, info) == explained


def test_suggestions_follow_the_kind_not_the_text():
    template = template_from_nodepool(nodepool(), CATALOG)
    run = SchedulingRun(Scheduler([template]).inputs)
    info = pod_info(pod("p"))

    def fix(*kinds: InfeasibleKind) -> str:
        return suggest(run, template, info, PoolVerdict("default", tuple(Infeasible(k, "topology spread anti-affinity limits.nodes") for k in kinds)))

    assert fix(K.NO_ROOM).startswith("lower the pod's requests")
    assert fix(K.NODE_LIMIT) == "raise the NodePool's limits.nodes"
    assert fix(K.MIN_VALUES).startswith("lower minValues")
    assert fix(K.POD_AFFINITY).startswith("start the pods the affinity term selects first")
    assert fix(K.TAKEN_BY_PLAN) == fix(K.NO_OFFERING) == fix(K.HOST_PORT) == ""
    assert fix(K.NO_OFFERING, K.TOPOLOGY_SPREAD).startswith("allow more zones/domains")  # first kind with a fix


def _node(name: str, used_cpu: int) -> ExistingNode:
    return ExistingNode(name, {"kubernetes.io/arch": "amd64", "topology.kubernetes.io/zone": "zone-a"}, (),
                        {"cpu": 4000, "memory": 8 * GI, "pods": 10}, {"cpu": used_cpu, "memory": GI, "pods": 1},
                        nodepool="default", host_ports={("0.0.0.0", 9100, "TCP")})


def test_solve_never_modifies_its_inputs():
    nodes = [_node("n1", 1000), _node("n2", 3500)]
    before = copy.deepcopy([(n.requested, n.host_ports, n.labels, n.allocatable) for n in nodes])
    usage = {"default": {"cpu": 1000, "nodes": 1}}
    usage_before = copy.deepcopy(usage)
    bound_spec = pod("bound", node_name="n1")
    bound_spec["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    bound = [pod_info(bound_spec)]
    templates = [template_from_nodepool(nodepool(limits={"cpu": "100"}), CATALOG)]
    ported = pod("ported", "500m")
    ported["spec"]["containers"][0]["ports"] = [{"containerPort": 81, "hostPort": 8081}]
    pods = [pod_info(p) for p in [ported, pod("a", "2"), pod("b", "2"), pod("c", "6")]]
    sched = Scheduler(templates, nodes, (), usage, bound_pods=bound)
    first = sched.solve(pods)
    assert first.existing and first.new_claims  # the run did place pods on the nodes and on new claims
    assert [(n.requested, n.host_ports, n.labels, n.allocatable) for n in nodes] == before
    assert usage == usage_before
    second = sched.solve(pods)  # every solve starts from the inputs afresh
    shape = lambda r: (r.existing, [(c.nodepool, [p.name for p in c.pods]) for c in r.new_claims], r.errors)  # noqa: E731
    assert shape(second) == shape(first)
    # the explanation sees the run's state (n1 filled up), the node does not
    lines = sched.explain_detail(pod_info(pod("z", "3")))
    assert "node n1: not enough free cpu" in lines and nodes[0].requested == before[0][0]


def test_everything_goes_through_the_constructor():
    templates = [template_from_nodepool(nodepool(), CATALOG)]
    tables = type_tables(templates, ())
    sched = Scheduler(templates, tables=tables, preference_policy="Ignore", min_values_policy="BestEffort")
    assert sched.tables["default"] is tables["default"]
    assert sched.inputs.preference_policy is PreferencePolicy.IGNORE
    assert sched.inputs.min_values_policy is MinValuesPolicy.BEST_EFFORT
    other = [template_from_nodepool(nodepool(), CATALOG)]  # same name, another template: rebuilt
    assert Scheduler(other, tables=tables).tables["default"] is not tables["default"]
    with pytest.raises(ValueError):
        Scheduler(templates, preference_policy="Sometimes")


def test_nodepools_the_provider_does_not_serve_are_typed_and_named():
    """A NodePool left out because the cloud provider does not serve its NodeClass kind is named
    in each pending pod's reason (not "no NodePool is available")."""
    res = Scheduler([], unserved={"gp": "its NodeClass kind EC2NodeClass is not served"}).solve([pod_info(pod("a"))])
    reason = res.reasons["default/a"]
    assert reason.kinds == {K.NODEPOOL_NOT_SERVED}
    assert [p.nodepool for p in reason.pools] == ["gp"]
    assert "EC2NodeClass is not served" in reason.pool("gp").message


def test_a_nodepool_whose_types_have_no_offering_says_so():
    """Trial 16: a plugin whose NodeClass left every type without an offering got the pending reason
    ``no instance type matches the NodePool requirement karpenter.sh/capacity-type In [on-demand]``:
    the cause is the offerings, which the reason now names."""
    on_demand = nodepool(requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}])
    bare = [make_type(n, 4, 8, zones=()) for n in ("g1", "g2")]  # no zone: no offering
    assert all(not t.offerings for t in bare)
    res = Scheduler([template_from_nodepool(on_demand, bare)]).solve([pod_info(pod("a"))])
    assert res.reasons["default/a"].pool("default").kinds == (K.NO_OFFERING,)
    # trial 19: not "no instance type matches the NodePool requirements: none of ...", which blamed requirements
    assert res.errors["default/a"] == ("NodePool default: none of its 2 instance types has an offering (a zone and "
                                       "capacity type to launch in)")
    # with offerings, the requirement no type meets is still the one named
    spot = [make_type("s", 4, 8, capacity_types=("spot",))]
    res = Scheduler([template_from_nodepool(on_demand, spot)]).solve([pod_info(pod("a"))])
    assert "karpenter.sh/capacity-type In [on-demand] (instance types have spot)" in res.errors["default/a"]
