"""Commands validated side by side (``pipeline_depth``): a command planned behind a waiting one
never takes its candidates nor places pods on them, counts against the same budgets, is dropped
with it, and nothing is executed once the replica may no longer act; with depth 1 the controller
decides as before."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption import Disruption
from karpy_core.controllers.disruption.controller import BEHIND_METHODS
from karpy_core.controllers.disruption.decisions import DecisionKind
from karpy_core.controllers.disruption.pipeline import assume_executed, overlapping
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.controllers.disruption.simulation import SimulationContext
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.synced import ClusterSync
from karpy_core.utils.clock import VirtualClock, iso
from tests.controllers.test_disruption import NOW, TYPES, node_and_claim, pod
from tests.scheduling.helpers import nodepool

POOLS = ("p0", "p1", "p2")
ALL_TYPES = {p: TYPES["default"] for p in POOLS}


def _pool(name: str, budget: str = "100%", after: str = "10s") -> dict[str, Any]:
    pool = nodepool(name)
    pool["spec"]["disruption"] = {"consolidateAfter": after, "budgets": [{"nodes": budget}]}
    return pool


def _node(name: str, pool: dict[str, Any], *, initialized_ago: float = 3600.0, cpu: int = 8,
          itype: str = "large") -> tuple[dict[str, Any], dict[str, Any]]:
    node, claim = node_and_claim(name, itype, cpu, pool=pool)
    for obj in (node, claim):
        obj["metadata"]["labels"]["karpenter.sh/nodepool"] = pool["metadata"]["name"]
    claim["status"]["conditions"] = [{"type": "Initialized", "status": "True", "lastTransitionTime": iso(NOW - initialized_ago)}]
    return node, claim


def _cluster(layout: list[tuple[str, str, float]], *, budget: str = "100%") -> tuple[VirtualClock, InMemoryCluster]:
    """Nodes ``(name, pool, initialized seconds ago)``, each large (8 cpu) with one pod: 500m on
    the first (held to its pool by a node selector), 1500m on the others (more than the first
    one's replacement asks for)."""
    clock = VirtualClock(NOW)
    cluster = InMemoryCluster(clock)
    pools = {p: _pool(p, budget) for p in sorted({p for _, p, _ in layout})}
    for pool in pools.values():
        cluster.create_sync("NodePool", pool)
    for i, (name, p, ago) in enumerate(layout):
        node, claim = _node(name, pools[p], initialized_ago=ago)
        cluster.create_sync("Node", node)
        cluster.create_sync("NodeClaim", claim)
        p_obj = pod(f"pod-{name}", name, cpu="1500m" if i else "500m")
        if not i:  # held to its pool: it cannot simply move to the others' nodes
            p_obj["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": p}
        cluster.create_sync("Pod", p_obj)
    return clock, cluster


def _controller(cluster: InMemoryCluster, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch, *, depth: int = 3,
                sync: ClusterSync | None = None) -> Disruption:
    d = Disruption(kube=cluster, provider=load_provider("simulated", {}), clock=clock, sync=sync)
    d.settings.pipeline_depth = depth

    async def types(snapshot: ClusterSnapshot) -> dict[str, list[InstanceType]]:
        return {p.name: ALL_TYPES[p.name] for p in snapshot.nodepool_views}

    monkeypatch.setattr(d, "instance_types", types)
    return d


def _tainted(cluster: InMemoryCluster) -> list[str]:
    return sorted(n["metadata"]["name"] for n in cluster.objects("Node")
                  if any(t.get("key") == "karpenter.sh/disrupted" for t in (n.get("spec") or {}).get("taints") or []))


def _replacements(cluster: InMemoryCluster) -> int:
    return sum(1 for c in cluster.objects("NodeClaim") if c["metadata"]["name"] not in {n["metadata"]["name"] for n in cluster.objects("Node")})


# --- the assumed view (pure) ------------------------------------------------------------------

def _snapshot(budget: str = "100%") -> ClusterSnapshot:
    pool = _pool("p0", budget, after="0s")
    pairs = [_node(n, pool) for n in ("a", "b", "c")]
    pairs.append(_node("s", pool, cpu=2, itype="small"))
    pods = [pod("big-a", "a", cpu="1500m"), pod("big-b", "b", cpu="6"), pod("big-c", "c", cpu="6"), pod("tiny-s", "s", cpu="100m")]
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool], pods=pods)


def _two_pools() -> ClusterSnapshot:
    """Node a (pool p0, its 500m pod held to p0 by a node selector), consolidatable now; node c
    (pool p1, an unconstrained 1500m pod: more than a's in-flight replacement asks for, so a
    simulation never lands it there), consolidatable 5 s from now (``consolidateAfter: 10s``)."""
    pools = [_pool("p0"), _pool("p1")]
    a, ca = _node("a", pools[0])
    c, cc = _node("c", pools[1], initialized_ago=5.0)
    held = pod("pod-a", "a")
    held["spec"]["nodeSelector"] = {"karpenter.sh/nodepool": "p0"}
    for claim in (ca, cc):  # the Consolidatable condition the controller keeps
        claim["status"]["conditions"].append({"type": "Consolidatable", "status": "True", "lastTransitionTime": iso(NOW)})
    cc["status"]["conditions"][-1]["lastTransitionTime"] = iso(NOW + 5)
    return ClusterSnapshot(nodes=[a, c], nodeclaims=[ca, cc], nodepools=pools, pods=[held, pod("pod-c", "c", cpu="1500m")])


def test_a_command_planned_behind_never_takes_the_first_ones_nodes_nor_puts_pods_on_them():
    snap = _two_pools()
    first = plan_disruption(snap, ALL_TYPES, NOW)
    assert first is not None and [c.name for c in first.candidates] == ["a"] and first.decision == "replace"
    view = assume_executed(snap, ALL_TYPES, first)
    assert view is not None
    # a is tainted in the view, its replacement an in-flight NodeClaim, its pod on its way there
    assert {n.name: n.disrupted for n in view.snapshot.node_views} == {"a": True, "c": False}
    assert len(view.snapshot.nodeclaim_views) == 3 and view.pods == frozenset({"default/pod-a"})
    assert "default/pod-a" not in {p.key for p in view.snapshot.pod_views}
    assert view.held == frozenset({"a"})
    later = NOW + 6
    behind = plan_disruption(view.snapshot, ALL_TYPES, later, exclude=view.held, methods=BEHIND_METHODS)
    assert behind is not None and [c.name for c in behind.candidates] == ["c"] and behind.decision == "replace"
    assert overlapping(behind, [view]) is None
    # on the true cluster c's pod would simply move to a (room for it there): the view keeps it off
    alone = plan_disruption(snap, ALL_TYPES, later, exclude=frozenset({"a"}))
    assert alone is not None and alone.decision == "delete"
    ctx = SimulationContext(view.snapshot, ALL_TYPES)
    infos = ctx.pod_infos(behind.candidates[0])
    assert not isinstance(infos, str)
    sched, _ = ctx.scheduler({"c"}, {}, infos)
    assert "a" not in sched.solve(infos).existing.values()
    # the first command itself overlaps its own view: it is never planned twice
    assert overlapping(first, [view]) is not None


def test_budgets_count_the_commands_waiting_before():
    """A NodePool whose budget allows one node: the node the first command disrupts uses it, so
    nothing of that pool is planned behind it."""
    snap = _snapshot(budget="1")
    types = {"p0": TYPES["default"]}
    first = plan_disruption(snap, types, NOW)
    assert first is not None and len(first.candidates) == 1
    view = assume_executed(snap, types, first)
    assert view is not None
    assert plan_disruption(view.snapshot, types, NOW, exclude=view.held, methods=BEHIND_METHODS) is None
    # with no command before it, the same pool would disrupt another node
    second = plan_disruption(snap, types, NOW, exclude=frozenset(c.name for c in first.candidates))
    assert second is not None


# --- the controller ---------------------------------------------------------------------------

async def test_a_second_command_waits_beside_the_first_and_both_are_executed(monkeypatch: pytest.MonkeyPatch):
    """Node a (pool p0) is consolidatable at once, node c (pool p1) 5 s later: c's command is
    planned while a's waits, validated at its own due time on the true cluster (a's command
    executed by then) and executed; each is replaced by a small node."""
    clock, cluster = _cluster([("a", "p0", 3600.0), ("c", "p1", 5.0)])
    d = _controller(cluster, clock, monkeypatch)
    events = await d.reconcile()
    assert [e.kind.value for e in events] == ["disrupt-decided"] and events[0].node == "a"
    assert [w.command.nodes for w in d.pipeline] == [["a"]]
    clock.advance(6)
    events = await d.reconcile()
    assert [(e.kind.value, e.node) for e in events] == [("disrupt-decided", "c")]
    assert [w.command.nodes for w in d.pipeline] == [["a"], ["c"]]
    assert d.pending is not None and d.pending.nodes == ["a"]
    first_view = d.pipeline[0].view
    assert first_view is not None and "a" in first_view.held
    assert d.next_due() == NOW + 15
    clock.advance(10)  # NOW+16: a's command is due, c's not yet
    kinds = [e.kind.value for e in await d.reconcile()]
    assert "disrupt" in kinds and _tainted(cluster) == ["a"] and _replacements(cluster) == 1
    assert [w.command.nodes for w in d.pipeline] == [["c"]]
    clock.advance(6)  # NOW+22: c's command is due
    kinds = [e.kind.value for e in await d.reconcile()]
    assert "disrupt" in kinds, kinds
    assert _tainted(cluster) == ["a", "c"] and _replacements(cluster) == 2
    assert not d.pipeline


async def test_a_dropped_command_drops_the_ones_planned_behind_it(monkeypatch: pytest.MonkeyPatch):
    clock, cluster = _cluster([("a", "p0", 3600.0), ("c", "p1", 5.0)])
    d = _controller(cluster, clock, monkeypatch)
    await d.reconcile()
    clock.advance(6)
    await d.reconcile()
    assert [w.command.nodes for w in d.pipeline] == [["a"], ["c"]]
    # a gains a pod no small node holds: its replacement no longer fits, the command is invalid
    cluster.create_sync("Pod", pod("huge", "a", cpu="6"))
    clock.advance(10)
    events = await d.reconcile()
    dropped = {e.node: e.decision for e in events if e.kind.value == "disrupt-invalidated"}
    assert set(dropped) == {"a", "c"}, events
    assert dropped["c"] is DecisionKind.EARLIER_COMMAND_DROPPED
    assert "disrupt" not in [e.kind.value for e in events]
    assert _tainted(cluster) == [] and _replacements(cluster) == 0
    assert any(line.endswith("which was not executed") for line in d.explain("c"))


async def test_nothing_is_executed_once_the_replica_may_no_longer_act(monkeypatch: pytest.MonkeyPatch):
    """The lease lost: while it is, no pass decides or executes; and a pass that loses it between
    validating the first command and executing it executes neither that command nor the one
    behind it (dropped with it)."""
    clock, cluster = _cluster([("a", "p0", 3600.0), ("c", "p1", 5.0)])
    leading = [True]
    d = _controller(cluster, clock, monkeypatch, sync=ClusterSync(cluster, leading=lambda: leading[0]))
    await d.reconcile()
    clock.advance(6)
    await d.reconcile()
    assert len(d.pipeline) == 2
    leading[0] = False
    clock.advance(20)  # both due
    assert await d.reconcile() == []
    assert _tainted(cluster) == [] and _replacements(cluster) == 0 and len(d.pipeline) == 2
    # the lease is held at the pass's start and when the first command is validated, lost when
    # it would be executed
    calls = [0]

    def flaky() -> bool:
        calls[0] += 1
        return calls[0] <= 2

    d.sync.leading = flaky
    events = await d.reconcile()
    kinds = [e.kind.value for e in events]
    assert "disrupt" not in kinds and _tainted(cluster) == [] and _replacements(cluster) == 0
    assert [e.decision for e in events if e.kind.value == "disrupt-invalidated"] == [DecisionKind.EARLIER_COMMAND_DROPPED]
    # what waits now was planned again in this pass, on the true cluster (not executed)
    assert d.pipeline and all(w.command.decided_at == clock.now() for w in d.pipeline)


async def test_depth_one_decides_as_one_command_at_a_time(monkeypatch: pytest.MonkeyPatch):
    """With ``pipeline_depth`` 1 nothing is planned behind a waiting command: c's command is
    decided only once a's was executed (Karpenter's one at a time); the commands are the same."""
    runs: dict[int, list[tuple[float, str, str | None]]] = {}
    for depth in (1, 3):
        clock, cluster = _cluster([("a", "p0", 3600.0), ("c", "p1", 5.0)])
        d = _controller(cluster, clock, monkeypatch, depth=depth)
        seen: list[tuple[float, str, str | None]] = []
        for _ in range(8):
            seen += [(clock.now() - NOW, e.kind.value, e.node) for e in await d.reconcile()
                     if e.kind.value in ("disrupt-decided", "disrupt")]
            clock.advance(6)
        runs[depth] = seen
        assert _tainted(cluster) == ["a", "c"]
    assert [k for k in runs[1] if k[1] == "disrupt-decided"] == [(0.0, "disrupt-decided", "a"), (18.0, "disrupt-decided", "c")]
    assert [k for k in runs[3] if k[1] == "disrupt-decided"] == [(0.0, "disrupt-decided", "a"), (6.0, "disrupt-decided", "c")]
    assert [k[2] for k in runs[1] if k[1] == "disrupt"] == [k[2] for k in runs[3] if k[1] == "disrupt"] == ["a", "c"]
    last = {d: max(t for t, kind, _ in runs[d] if kind == "disrupt") for d in runs}
    assert last[3] < last[1]


def test_the_view_is_none_when_a_delete_would_need_a_new_node():
    snap = _snapshot()
    types = {"p0": TYPES["default"]}
    plan = plan_disruption(snap, types, NOW)
    assert plan is not None
    # the same candidates as a delete on a cluster where their pods fit nowhere else
    crowded = ClusterSnapshot(nodes=[n.raw for n in snap.node_views], nodeclaims=[c.raw for c in snap.nodeclaim_views],
                              nodepools=snap.nodepool_views,
                              pods=[*(p.raw for p in snap.pod_views),
                                    *(copy.deepcopy(pod(f"fill-{n.name}", n.name, cpu="7")) for n in snap.node_views
                                      if n.name not in {c.name for c in plan.candidates})])
    from dataclasses import replace

    as_delete = replace(plan, replacements=[])
    assert assume_executed(crowded, types, as_delete) is None


async def test_a_dry_run_reports_one_command_at_a_time(monkeypatch: pytest.MonkeyPatch):
    """A dry run executes nothing, so nothing is planned behind what it would do: one waiting
    command, reported once validated, as with depth 1."""
    clock, cluster = _cluster([("a", "p0", 3600.0), ("c", "p1", 5.0)])  # c's command would wait behind a's
    d = _controller(cluster, clock, monkeypatch)
    d.dry_run = True
    for _ in range(3):
        await d.reconcile()
        assert len(d.pipeline) <= 1
        clock.advance(6)
    assert _tainted(cluster) == [] and _replacements(cluster) == 0
