"""The helpers behind the consolidation pass's speed (issue 13): which bound pods a simulation
sees, the GC pause around a pass, and the memoized quantity and duration parsers."""

from __future__ import annotations

import gc

import pytest

from karpy_core.apis.durations import duration_seconds
from karpy_core.controllers.disruption.candidates import Candidate
from karpy_core.controllers.disruption.simulation import SimulationContext
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.gcpause import gc_paused
from karpy_core.utils.quantity import QuantityError, to_internal
from tests.controllers.test_consolidation_pinned import MIXED_TYPES, mixed_cluster


def _bound(name: str, node: str, labels: dict[str, str], **spec: object) -> dict[str, object]:
    return {"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}], **spec},
            "status": {"phase": "Running"}}


def test_a_simulation_sees_the_bound_pods_that_can_change_it_and_only_those() -> None:
    """Host ports reach every run, anti-affinity terms the runs of the pods they select; the
    others only when a spread or pod (anti-)affinity term of a simulated pod selects them (in its
    namespaces); order is kept and pods on removed nodes are left out."""
    snap = mixed_cluster(4)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}]}}
    extra = [
        _bound("ports", "node-0001", {"app": "p"}, containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 80}]}]),
        _bound("anti", "node-0001", {"app": "q"}, affinity=anti),
        _bound("web", "node-0002", {"app": "web"}),
        _bound("web-gone", "node-0003", {"app": "web"}),
        _bound("other", "node-0002", {"app": "db"}),
    ]
    snap = ClusterSnapshot(nodes=snap.node_views, nodeclaims=snap.nodeclaim_views, nodepools=snap.nodepool_views,
                           pods=[*snap.pod_views, *extra], pdbs=list(snap.pdbs))
    ctx = SimulationContext(snap, MIXED_TYPES)
    plain = pod_info({"metadata": {"name": "new", "namespace": "default"}, "spec": {}})
    names = [b.name for b in ctx.relevant_bound([plain], {"node-0003"})]
    assert "ports" in names and "anti" not in names and "web" not in names and "other" not in names
    # an anti-affinity term reaches the runs of the pods it selects (in its namespace), and only those
    selected = pod_info({"metadata": {"name": "new", "namespace": "default", "labels": {"app": "x"}}, "spec": {}})
    assert "anti" in [b.name for b in ctx.relevant_bound([plain, selected], {"node-0003"})]
    assert "anti" not in [b.name for b in ctx.relevant_bound([plain, selected], {"node-0001"})]  # its node goes
    other_ns = pod_info({"metadata": {"name": "new", "namespace": "other", "labels": {"app": "x"}}, "spec": {}})
    assert "anti" not in [b.name for b in ctx.relevant_bound([other_ns], set())]
    spread = pod_info({"metadata": {"name": "new", "namespace": "default", "labels": {"app": "web"}}, "spec": {
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                       "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}})
    names = [b.name for b in ctx.relevant_bound([spread], {"node-0003"})]
    assert "web" in names and "web-gone" not in names and "other" not in names
    everything = [b.name for b in ctx.bound if b.node_name != "node-0003"]
    assert names == [n for n in everything if n in names]  # the cluster's order
    elsewhere = pod_info({"metadata": {"name": "new", "namespace": "other", "labels": {"app": "web"}},
                          "spec": {"topologySpreadConstraints": spread.raw["spec"]["topologySpreadConstraints"]}})
    assert "web" not in [b.name for b in ctx.relevant_bound([elsewhere], set())]  # spread counts its own namespace only


def test_gc_paused_restores_the_collector_as_it_found_it() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_memoized_parsers_answer_as_before() -> None:
    assert to_internal("cpu", "250m") == 250 and to_internal("cpu", "250m") == 250
    assert to_internal("cpu", 1) == 1000 and to_internal("memory", "1Gi") == 2**30
    for _ in range(2):  # errors are raised every time, and True is not the cached 1
        with pytest.raises(QuantityError):
            to_internal("cpu", True)
        with pytest.raises(QuantityError):
            to_internal("cpu", "lots")
    assert duration_seconds("720h") == 2592000.0 and duration_seconds("Never") is None and duration_seconds(None) is None
    for _ in range(2):
        with pytest.raises(ValueError):
            duration_seconds("soon")


Placements = tuple[dict[str, str], list[tuple[str, list[str], list[str]]], dict[str, str]]


def _placements(ctx: SimulationContext, cands: list[Candidate], filtered: bool) -> Placements:
    from karpy_core.controllers.disruption.simulation import claim_capacity

    pods: list[PodInfo] = []
    for c in cands:
        infos = ctx.pod_infos(c)
        assert not isinstance(infos, str), infos  # a reason the candidate's pods cannot move
        pods.extend(infos)
    sched, _ = ctx.scheduler({c.name for c in cands}, claim_capacity(cands), pods if filtered else None)
    res = sched.solve(pods)
    claims = [(c.nodepool, sorted(p.key for p in c.pods), [it.name for it in c.instance_types]) for c in res.new_claims]
    return dict(sorted(res.existing.items())), claims, dict(sorted(res.errors.items()))


@pytest.mark.parametrize("utilization", [(0.15, 0.3, 0.5, 0.7, 0.9), (0.8, 0.9)])
def test_the_filtered_simulation_places_every_pod_where_the_full_one_does(utilization: tuple[float, ...]) -> None:
    """Same pod -> node map, same new claims (pods and types), same errors with only the relevant
    bound pods as with all of them, for single candidates and for prefixes of the consolidation
    order, on the mixed cluster (spread, anti-affinity against other apps, host ports)."""
    from karpy_core.controllers.disruption.candidates import build_candidates
    from karpy_core.controllers.disruption.methods.consolidation import consolidation_order

    snap = mixed_cluster(120, utilization)
    ctx = SimulationContext(snap, MIXED_TYPES)
    cands = sorted((c for c in build_candidates(snap, MIXED_TYPES, 0.0) if not c.blocked and c.pods), key=consolidation_order)
    sets = [[c] for c in cands[:40]] + [cands[:k] for k in (2, 5, 12, 25)]
    moved = 0
    for chosen in sets:
        full = _placements(ctx, chosen, filtered=False)
        assert _placements(ctx, chosen, filtered=True) == full, [c.name for c in chosen]
        moved += len(full[0])
    assert moved > 100  # the comparison covered real placements on existing nodes
