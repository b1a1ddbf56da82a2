"""The exact packer for small batches (karpy_core.scheduling.exact): the dynamic programme against
brute force, decisions on cases whose optimum is known by hand, and the zone deal's local search."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from karpy_core.scheduling import scheduler as scheduler_module
from karpy_core.scheduling.exact import fill_exact, optimal_bins, solve_class
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.run import SchedulingRun
from karpy_core.scheduling.scheduler import Scheduler, queue_order
from karpy_core.scheduling.template import template_from_nodepool

from .helpers import make_type, nodepool, pod
from .test_sizing import assert_valid, cost, solve, types, zone_pod


def _partitions(items: list[int]):
    """Every set partition of ``items`` (as lists of blocks)."""
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in _partitions(rest):
        yield [[first], *part]
        for i in range(len(part)):
            yield [*part[:i], [first, *part[i]], *part[i + 1:]]


def _brute_force(vecs: np.ndarray, counts: list[int], free: np.ndarray, prices: np.ndarray) -> float:
    pods = [b for b, c in enumerate(counts) for _ in range(c)]
    best = float("inf")
    for part in _partitions(list(range(len(pods)))):
        total = 0.0
        for block in part:
            need = sum(vecs[pods[i]] for i in block)
            fit = [prices[t] for t in range(len(prices)) if (need <= free[t]).all()]
            if not fit:
                total = float("inf")
                break
            total += min(fit)
        best = min(best, total)
    return best


def test_three_one_cpu_pods_take_a_two_and_a_one():
    # by hand: 1 cpu 0.10, 2 cpu 0.15, 4 cpu 0.35; 3 x 1 cpu: 2 + 1 cpu (0.25) beats 3 x 1 (0.30) and 4 cpu (0.35)
    plan = optimal_bins(np.array([[1000]]), np.array([3]), np.array([[1000], [2000], [4000]]), np.array([0.10, 0.15, 0.35]))
    assert plan is not None and plan.cost == pytest.approx(0.25)
    assert plan.bins == (((2,), 1), ((1,), 0))


def test_a_pod_no_type_holds_makes_the_class_infeasible():
    assert optimal_bins(np.array([[5000]]), np.array([1]), np.array([[4000]]), np.array([0.2])) is None


@pytest.mark.parametrize("seed", range(60))
def test_dynamic_programme_matches_brute_force(seed):
    rng = random.Random(seed)
    buckets = rng.randint(1, 3)
    counts = [rng.randint(1, 3) for _ in range(buckets)]
    while sum(counts) > 7:
        counts[rng.randrange(buckets)] = 1
    vecs = np.array([[rng.choice([250, 500, 1000, 1500, 2000]), rng.choice([1, 2, 4, 6])] for _ in range(buckets)])
    kinds = rng.randint(2, 5)
    free = np.array([[rng.choice([1000, 2000, 3000, 4000, 8000]), rng.choice([2, 4, 8, 16])] for _ in range(kinds)])
    prices = np.array([round(rng.uniform(0.02, 0.5), 3) for _ in range(kinds)])
    expected = _brute_force(vecs, counts, free, prices)
    plan = optimal_bins(vecs, np.array(counts), free, prices)
    if expected == float("inf"):
        assert plan is None
        return
    assert plan is not None and plan.cost == pytest.approx(expected, abs=1e-9)
    # the bins hold every pod exactly once, each in a type it fits, priced as claimed
    assert [sum(k[b] for k, _ in plan.bins) for b in range(buckets)] == counts
    for k, t in plan.bins:
        assert (np.array(k) @ vecs <= free[t]).all()
    assert sum(prices[t] for _, t in plan.bins) == pytest.approx(plan.cost)


def test_class_table_answers_every_sub_batch():
    vecs = np.array([[1000, 2], [500, 6], [2000, 1]])
    free = np.array([[2000, 8], [4000, 16], [8000, 32], [2000, 16]])
    prices = np.array([0.08, 0.15, 0.34, 0.11])
    table = solve_class(vecs, np.array([3, 2, 2]), free, prices)
    assert table is not None
    for r in itertools.product(range(4), range(3), range(3)):
        if not any(r):
            continue
        direct = optimal_bins(vecs, np.array(r), free, prices)
        assert direct is not None
        assert table.cost(r) == pytest.approx(direct.cost, abs=1e-6), r
    with pytest.raises(ValueError):
        table.cost((4, 0, 0))


def test_scheduler_plans_match_brute_force_on_small_batches():
    # uneven prices per core, so neither "fill the largest" nor "cheapest per core" is optimal
    catalog = [make_type("small", 2, 4, price=0.11), make_type("medium", 4, 8, price=0.19),
               make_type("large", 8, 16, price=0.41), make_type("highmem", 2, 16, price=0.13)]
    template = template_from_nodepool(nodepool(), catalog)
    rng = random.Random(3)
    for _ in range(15):
        shapes = [(rng.choice(["500m", "1", "1500m", "3"]), rng.choice(["1Gi", "2Gi", "6Gi"])) for _ in range(rng.randint(1, 3))]
        pods = [pod(f"p{i}", *shapes[i % len(shapes)]) for i in range(rng.randint(2, 7))]
        res = Scheduler([template], sizing=True).solve([pod_info(p) for p in pods])
        assert not res.errors
        assert_valid(res)
        table = Scheduler([template], sizing=True).tables[template.name]
        sigs: dict = {}
        for p in pods:
            sigs.setdefault(tuple(sorted(p["spec"]["containers"][0]["resources"]["requests"].items())), []).append(p)
        vecs = np.array([table.vector(pod_info(g[0]).requests) for g in sigs.values()])
        prices = table.cheapest_prices(template.requirements)
        assert cost(res) == pytest.approx(_brute_force(vecs, [len(g) for g in sigs.values()], table.free, prices), abs=1e-9)


def test_equal_price_plans_take_fewer_claims_and_fill_the_larger_first():
    # 5 x 1 cpu on linear prices: medium + small and 3 smalls both cost 0.30; fewer claims win,
    # and the medium takes 4 (the larger claim is filled first, as first fit does)
    res = solve([nodepool()], [pod(f"p{i}", "1", "1Gi") for i in range(5)])
    assert types(res) == ["medium", "small"] and sorted(len(c.pods) for c in res.new_claims) == [1, 4]


def test_host_ports_and_large_classes_are_left_to_the_greedy_packers():
    template = template_from_nodepool(nodepool(), [make_type("small", 2, 8), make_type("large", 8, 32)])
    sched = Scheduler([template], sizing=True)
    with_port = pod("web", "1", "1Gi")
    with_port["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    run = SchedulingRun(sched.inputs, [])
    assert fill_exact(run, [pod_info(with_port)]) is None and not run.claims
    # 15 pods of distinct shapes: 2^15 count vectors, over EXACT_STATES
    many = [pod_info(pod(f"p{i}", f"{100 + i}m", "1Gi")) for i in range(15)]
    assert fill_exact(run, many) is None and not run.claims


def test_zone_deal_puts_both_extra_pods_in_one_zone_when_that_is_cheaper(monkeypatch):
    # x and y: 3 x 1 cpu each, spread over zone-a and zone-b (maxSkew 1), so each zone gets 1 or 2
    # of each. small: 2 cpu 0.10, medium: 4 cpu 0.15. Extras in different zones: 3 cpu per zone,
    # a medium each (0.30). Both extras in one zone: 4 cpu (medium) + 2 cpu (small) = 0.25, by hand
    catalog = [make_type("small", 2, 8, price=0.10), make_type("medium", 4, 16, price=0.15)]
    batch = [zone_pod(f"x{i}", "x", "1") for i in range(3)] + [zone_pod(f"y{i}", "y", "1") for i in range(3)]
    res = solve([nodepool()], batch, catalog=catalog)
    assert cost(res) == 0.25 and types(res) == ["medium", "small"] and not res.errors
    zone_of = {p.name: next(iter(c.requirements.get("topology.kubernetes.io/zone").values)) for c in res.new_claims for p in c.pods}
    for app in ("x", "y"):
        per_zone = [sum(1 for i in range(3) if zone_of[f"{app}{i}"] == z) for z in ("zone-a", "zone-b")]
        assert sorted(per_zone) == [1, 2]  # maxSkew 1 kept for both Deployments
    # the zone-pinned variant: the deal by price level and load puts the extras in different
    # zones (0.30); the local search on exact zone costs moves one (0.25)
    template = template_from_nodepool(nodepool(), catalog)
    sched = Scheduler([template], sizing=True)
    infos = [pod_info(p) for p in batch]
    base = sched._solve_once(infos, queue_order(infos), None)
    zonal = sched._zonal(infos, base[2])
    assert zonal is not None and round(zonal[1], 6) == 0.25
    monkeypatch.setattr(scheduler_module, "_improve_deal", lambda inputs, pods, zones: zones)
    unimproved = sched._zonal(infos, base[2])
    assert unimproved is not None and round(unimproved[1], 6) == 0.30


def test_place_free_joins_a_claim_only_within_the_room_its_price_pays_for():
    # a claim holding 1 cpu is a small (2 cpu, 0.10): a second 1 cpu pod is free, a third would
    # make it a medium (0.15) and is refused; place_planned (first fit) takes it
    catalog = [make_type("small", 2, 8, price=0.10), make_type("medium", 4, 16, price=0.15)]
    sched = Scheduler([template_from_nodepool(nodepool(), catalog)], sizing=True)
    pods = [pod_info(pod(f"p{i}", "1", "1Gi")) for i in range(3)]
    run = SchedulingRun(sched.inputs, pods)

    def place(p, how):
        att = run.attempts(p)[-1]
        return how(p, att, run.verdict(p, att))

    assert place(pods[0], run.place_new)
    assert place(pods[1], run.place_free) and len(run.claims[0].pods) == 2
    assert not place(pods[2], run.place_free) and len(run.claims[0].pods) == 2
    assert run.new_claims_cost(0) == pytest.approx(0.10)
    assert place(pods[2], run.place_planned) and run.new_claims_cost(0) == pytest.approx(0.15)



def test_no_proof_across_nodepools_or_past_a_limit():
    # found by a fresh-user probe: the exact plan was called proved while (a) a NodePool limit sent
    # its claims to the next NodePool at the same price, or (b) a lighter NodePool's claim could
    # take a heavier one's pods; both cost more than Karpenter's sizes. Now neither is proved, and
    # the greedy packers (Karpenter's first fit among them) compete
    family = [{"key": "family", "operator": "In", "values": ["c"]}]
    catalog = [make_type("small", 2, 8, price=0.10, labels={"family": "c"}),
               make_type("large", 8, 32, price=0.25, labels={"family": "m"})]
    pools = [nodepool("heavy", weight=10, limits={"cpu": "2"}, requirements=family), nodepool("light")]
    pods = [pod(f"p{i}", "1", "1Gi") for i in range(8)]
    karpenter = solve(pools, pods, catalog=catalog, sizing=False)
    res = solve(pools, pods, catalog=catalog)
    assert cost(karpenter) == 0.35 and cost(res) == 0.35  # heavy/small (2 pods) + light/large (6), by hand
    catalog = [make_type("small", 2, 8, price=0.10, labels={"family": "c"}),
               make_type("big", 8, 64, price=0.30, labels={"family": "m"})]
    pools = [nodepool("heavy", weight=10, requirements=family), nodepool("light")]
    pods = [pod("mem", "1", "40Gi")] + [pod(f"p{i}", "1", "1Gi") for i in range(4)]
    res = solve(pools, pods, catalog=catalog)
    assert cost(res) == 0.30 and [len(c.pods) for c in res.new_claims] == [5]  # one light/big holds all five
