"""The node index (karpy_core/scheduling/nodeindex.py) narrows which existing nodes a pod is tried
on; it must never change where a pod goes. Each test solves the same pods over the same nodes with
the index (built by the run, or shared as a consolidation pass shares it) and without it (below
:data:`INDEXED_NODES`, patched), and compares every placement."""

from __future__ import annotations

import random
from typing import Any

import pytest

from karpy_core.scheduling import run as run_module
from karpy_core.scheduling.nodeindex import NodeIndex
from karpy_core.scheduling.nodes import ExistingNode
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.scheduler import Scheduler, SchedulingResults
from karpy_core.scheduling.taints import Taint, Toleration
from karpy_core.scheduling.template import template_from_nodepool

from .helpers import GI, make_type, nodepool, pod

CATALOG = [make_type("small", 2, 4), make_type("medium", 4, 8), make_type("large", 8, 32)]
ZONES = ("zone-a", "zone-b", "zone-c")


def nodes(rng: random.Random, n: int) -> list[ExistingNode]:
    """``n`` nodes with random zones, a ``team`` label on some, a taint on some, random free room
    (some full, some with an extended resource)."""
    out = []
    for i in range(n):
        cpu = rng.choice((2000, 4000, 8000))
        labels = {"kubernetes.io/hostname": f"n{i:03}", "topology.kubernetes.io/zone": rng.choice(ZONES),
                  "kubernetes.io/arch": "amd64"}
        if rng.random() < 0.3:
            labels["team"] = rng.choice(("a", "b"))
        taints = (Taint("dedicated", "gpu", "NoSchedule"),) if rng.random() < 0.2 else ()
        alloc = {"cpu": cpu, "memory": cpu // 1000 * 2 * GI, "pods": 20}
        if rng.random() < 0.1:
            alloc["example.com/dongle"] = 2
        used = rng.choice((0.0, 0.5, 0.9, 1.0))
        requested = {"cpu": int(cpu * used), "memory": int(alloc["memory"] * used), "pods": int(20 * used)}
        out.append(ExistingNode(f"n{i:03}", labels, taints, alloc, requested, initialized=rng.random() < 0.9))
    return out


def pods(rng: random.Random, n: int) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        kw: dict[str, Any] = {}
        r = rng.random()
        if r < 0.2:
            kw["node_selector"] = {"team": rng.choice(("a", "b"))}
        elif r < 0.3:
            kw["node_selector"] = {"topology.kubernetes.io/zone": rng.choice(ZONES)}
        if rng.random() < 0.2:
            kw["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
        if rng.random() < 0.05:
            kw["extra"] = {"example.com/dongle": "1"}
        out.append(pod(f"p{i:03}", rng.choice(("250m", "500m", "1", "2")), rng.choice(("256Mi", "1Gi", "3Gi")), **kw))
    return out


def solve(existing: list[ExistingNode], raw: list[dict[str, Any]], index: NodeIndex | None = None) -> SchedulingResults:
    templates = [template_from_nodepool(nodepool(), CATALOG)]
    return Scheduler(templates, existing, node_index=index).solve([pod_info(p) for p in raw])


@pytest.mark.parametrize("seed", range(6))
def test_the_index_changes_no_placement(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    existing, raw = nodes(rng, 120), pods(rng, 150)
    with_index = solve(existing, raw)
    shared = solve(existing, raw, NodeIndex(list(reversed(existing))))  # any row order; the same objects
    monkeypatch.setattr(run_module, "INDEXED_NODES", 10**9)
    without = solve(existing, raw)
    assert without.existing, "the nodes took no pod: the test would prove nothing"
    assert with_index.existing == without.existing == shared.existing
    assert [sorted(p.name for p in c.pods) for c in with_index.new_claims] == \
        [sorted(p.name for p in c.pods) for c in without.new_claims]
    assert with_index.errors.keys() == without.errors.keys()


def test_a_shared_index_missing_a_node_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run whose nodes are not all in the shared index (another object of the same name) falls
    back to its own, and still places as without any index."""
    rng = random.Random(7)
    existing, raw = nodes(rng, 60), pods(rng, 80)
    stale = NodeIndex([*existing[:-1], ExistingNode(existing[-1].name, {}, (), {"cpu": 10**6})])
    assert stale.rows(existing) is None
    got = solve(existing, raw, stale)
    monkeypatch.setattr(run_module, "INDEXED_NODES", 10**9)
    assert got.existing == solve(existing, raw).existing


def test_admitted_and_free_rows() -> None:
    a = ExistingNode("a", {"team": "x"}, (), {"cpu": 4000, "memory": 8 * GI}, {"cpu": 3000})
    b = ExistingNode("b", {"team": "y"}, (Taint("k", "v", "NoSchedule"),), {"cpu": 2000})
    c = ExistingNode("c", {}, (Taint("k", "v", "NoSchedule"),), {"cpu": 2000}, initialized=False,
                     startup_taints=(Taint("k", "v", "NoSchedule"),))
    index = NodeIndex([a, b, c])
    assert index.free[:, index.columns["cpu"]].tolist() == [1000, 2000, 2000]
    assert index.free[:, index.columns["memory"]].tolist() == [8 * GI, 0, 0]
    anything = [Requirements()]
    # b's taint is not tolerated; c's is a startup taint of a node not initialized yet (ignored)
    assert index.admitted((), anything).tolist() == [True, False, True]
    assert index.admitted((Toleration("k", "Exists"),), anything).tolist() == [True, True, True]
    team_x = [Requirements.from_labels({"team": "x"})]
    assert index.admitted((Toleration("k", "Exists"),), team_x).tolist() == [True, False, False]
    assert index.matching(team_x).tolist() == [True, False, False]
    assert index.vector({"cpu": 500}) is not None and index.vector({"example.com/dongle": 1}) is None
    assert index.charge({"cpu": 500, "example.com/dongle": 1}).tolist() == [500, 0]
    assert index.label_values("team").tolist() == ["x", "y", None]
    rows = index.rows([c, a])
    assert rows is not None and rows.tolist() == [2, 0]
