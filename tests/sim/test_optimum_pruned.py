"""``Problem.pruned`` keeps exactly the kinds the plain dominance rule keeps.

The rule (the module docstring of ``karpy_core.sim.optimum``): kind ``b`` dominates ``a`` when it
costs no more, has at least ``a``'s free capacity, admits every shape ``a`` admits, stands in for it
under the NodePool limits and, with zones counted, is in its zone; ``a`` goes when a dominating ``b``
is strictly better or an exact equal of lower index, or when it admits no shape. ``pruned`` compares
the shape columns only for kinds that pass the cheap tests first; this checks it against the rule
written out over every pair, on random problems full of ties.
"""

from __future__ import annotations

import numpy as np
import pytest

from karpy_core.sim.optimum import PoolLimits, Problem, TopologyModel


def _kept_by_the_rule(p: Problem) -> list[int]:
    n = len(p.prices)
    stand_in = p.limits.dominance() if p.limits is not None else None
    kept = []
    for a in range(n):
        if not p.compat[:, a].any():
            continue
        dropped = False
        for b in range(n):
            if b == a:
                continue
            dominates = (p.prices[b] <= p.prices[a] and bool((p.free[b] >= p.free[a]).all())
                         and bool((p.compat[:, b] >= p.compat[:, a]).all()))
            if stand_in is not None:
                dominates = dominates and bool(stand_in[a, b])
            if p.topology.zoned:
                dominates = dominates and p.zones[b] == p.zones[a]
            equal = (p.prices[b] == p.prices[a] and bool((p.free[b] == p.free[a]).all())
                     and bool((p.compat[:, b] == p.compat[:, a]).all()))
            if dominates and (not equal or b < a):
                dropped = True
                break
        if not dropped:
            kept.append(a)
    return kept


def _random_problem(rng: np.random.Generator, *, zoned: bool, limited: bool) -> Problem:
    kinds = int(rng.integers(1, 60))
    shapes = int(rng.integers(1, 7))
    resources = ["cpu", "memory", "pods"]
    free = rng.integers(1, 4, size=(kinds, len(resources))).astype(np.int64) * 1000
    prices = rng.integers(1, 5, size=kinds).astype(np.float64) / 4  # few distinct prices: many ties
    compat = rng.random((shapes, kinds)) < 0.7
    zones = [str(z) for z in rng.choice(["a", "b"], size=kinds)]
    topology = TopologyModel(zone_caps=(((0,), 1),)) if zoned else TopologyModel()
    limits = None
    if limited:
        pools = [str(x) for x in rng.choice(["p", "q", "r"], size=kinds)]
        limits = PoolLimits(pools, ["cpu"], free[:, :1].copy(), {"p": {"cpu": 5000}})
    return Problem(resources, rng.integers(1, 500, size=(shapes, len(resources))).astype(np.int64),
                   rng.integers(1, 5, size=shapes).astype(np.int64), [f"k{i}" for i in range(kinds)],
                   [f"t{i}" for i in range(kinds)], prices, free, compat, list(range(shapes)), 0, zones,
                   topology, limits)


@pytest.mark.parametrize("seed", range(40))
def test_pruned_keeps_what_the_pairwise_rule_keeps(seed: int) -> None:
    rng = np.random.default_rng(seed)
    problem = _random_problem(rng, zoned=seed % 2 == 1, limited=seed % 4 >= 2)
    expected = _kept_by_the_rule(problem)
    pruned = problem.pruned()
    assert pruned.names == [problem.names[i] for i in expected]
    assert pruned.compat.shape == (problem.compat.shape[0], len(expected))
    assert (pruned.prices == problem.prices[expected]).all()
    assert pruned.zones == [problem.zones[i] for i in expected]


def test_pruned_is_computed_once_and_is_its_own_pruned() -> None:
    problem = _random_problem(np.random.default_rng(7), zoned=False, limited=False)
    first = problem.pruned()
    assert problem.pruned() is first
    assert first.pruned() is first
    assert first.names == [problem.names[i] for i in _kept_by_the_rule(problem)]
