"""Consolidation decisions with topology rules at small scale (issue 36): a zone spread or a
hostname anti-affinity that blocks a deletion, a PDB that blocks one, and the speed work behind
``benchmarks/consolidation_pass.py``'s topology shapes (the PDB index, the anti-affinity holders a
simulation sees) deciding exactly as the plain computation does."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.controllers.disruption.candidates import PDBIndex, build_candidates, pdb_blocker, pdb_status
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, NodeDecision
from karpy_core.controllers.disruption.planner import pass_coverage, plan_disruption
from karpy_core.controllers.disruption.simulation import SimulationContext, evaluate
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import iso
from tests.scheduling.helpers import make_type, nodepool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import consolidation_pass as bench

NOW = 1767225600.0 + 86400
ZONES = ("zone-a", "zone-b", "zone-c")
TYPES = {"default": [make_type("c.2x", 2, 4, zones=ZONES)]}
"""One type: a replacement is never cheaper than the node it replaces, so a pass can only delete."""


def _pool() -> dict[str, Any]:
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "0s", "budgets": [{"nodes": "100%"}]}
    return pool


def _node(name: str, zone: str, pool: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": "c.2x",
              "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": "on-demand", "kubernetes.io/hostname": name,
              "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}
    node = {"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {"providerID": f"p://{name}"},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "110"}, "conditions": [{"type": "Ready", "status": "True"}]}}
    claim = {"metadata": {"name": name, "labels": dict(labels), "creationTimestamp": iso(NOW - 7200),
                          "annotations": {"karpenter.sh/nodepool-hash": nodepool_hash(pool), "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
             "spec": {}, "status": {"providerID": f"p://{name}", "capacity": {"cpu": "2"},
                                    "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": iso(NOW - 3600)}]}}
    return node, claim


def _pod(name: str, node: str, app: str, cpu: str = "500m", *, spread: bool = False, anti: bool = False,
         ns: str = "default") -> dict[str, Any]:
    sel = {"matchLabels": {"app": app}}
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    if spread:
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
    if anti:
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": sel}]}}
    return {"metadata": {"name": name, "namespace": ns, "labels": {"app": app},
                         "ownerReferences": [{"kind": "ReplicaSet", "name": f"{app}-rs", "controller": True}]},
            "spec": spec, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _cluster(nodes: list[tuple[str, str]], pods: list[dict[str, Any]], pdbs: list[dict[str, Any]] | None = None) -> ClusterSnapshot:
    pool = _pool()
    pairs = [_node(n, z, pool) for n, z in nodes]
    return ClusterSnapshot(nodes=[p[0] for p in pairs], nodeclaims=[p[1] for p in pairs], nodepools=[pool], pods=pods, pdbs=pdbs or [])


def _verdict(snap: ClusterSnapshot, node: str) -> tuple[bool, DecisionKind | None]:
    ctx = SimulationContext(snap, TYPES)
    cand = next(c for c in build_candidates(snap, TYPES, NOW) if c.name == node)
    ev = evaluate(ctx, [cand], consolidation=True)
    return ev.ok, ev.problem.kind if ev.problem is not None else None


def test_a_zone_spread_blocks_a_deletion_the_same_pods_without_it_allow() -> None:
    """web runs one pod per zone; a-1 (zone-a) could go, its pod fitting on b-2 (zone-b), but
    with a zone spread (maxSkew 1) that would make zone-b 2 and zone-a 0: the pod needs a new
    node in zone-a, which is not cheaper than a-1 (one instance type)."""
    nodes = [("a-1", "zone-a"), ("b-1", "zone-b"), ("b-2", "zone-b"), ("c-1", "zone-c")]

    def pods(spread: bool) -> list[dict[str, Any]]:
        return [_pod("web-a", "a-1", "web", spread=spread), _pod("web-b", "b-1", "web", spread=spread),
                _pod("web-c", "c-1", "web", spread=spread), _pod("db", "b-2", "db", "1")]

    assert _verdict(_cluster(nodes, pods(spread=False)), "a-1") == (True, None)
    assert _verdict(_cluster(nodes, pods(spread=True)), "a-1") == (False, DecisionKind.NOT_CHEAPER)
    log: list[NodeDecision] = []
    plan = plan_disruption(_cluster(nodes, pods(spread=True)), TYPES, NOW, log=log)
    assert plan is None or "a-1" not in [c.name for c in plan.candidates]
    assert any(d.node == "a-1" and d.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION and d.kind is DecisionKind.NOT_CHEAPER
               for d in log)


def test_a_hostname_anti_affinity_blocks_a_deletion_the_same_pods_without_it_allow() -> None:
    """api runs on n-1 and n-2; n-2 has room for n-1's pod, but not under a hostname
    anti-affinity against api: n-1 stays (a new node is not cheaper)."""
    nodes = [("n-1", "zone-a"), ("n-2", "zone-a")]

    def pods(anti: bool) -> list[dict[str, Any]]:
        return [_pod("api-1", "n-1", "api", anti=anti), _pod("api-2", "n-2", "api", anti=anti), _pod("db", "n-2", "db", "1")]

    assert _verdict(_cluster(nodes, pods(anti=False)), "n-1") == (True, None)
    assert _verdict(_cluster(nodes, pods(anti=True)), "n-1") == (False, DecisionKind.NOT_CHEAPER)


def test_a_bound_pods_anti_affinity_blocks_a_deletion_of_the_pods_it_selects() -> None:
    """The inverse rule: guard on n-2 has an anti-affinity term against app=web; n-1's web pod
    (no rule of its own) cannot move next to it, while a pod it does not select can."""
    nodes = [("n-1", "zone-a"), ("n-2", "zone-a")]
    guard = _pod("guard", "n-2", "guard", "1")
    guard["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}]}}
    assert _verdict(_cluster(nodes, [_pod("web-1", "n-1", "web"), guard]), "n-1") == (False, DecisionKind.NOT_CHEAPER)
    assert _verdict(_cluster(nodes, [_pod("db-1", "n-1", "db"), guard]), "n-1") == (True, None)


def _pdb(name: str, app: str, allowed: int, ns: str = "default") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "generation": 1},
            "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {"app": app}}},
            "status": {"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 2, "desiredHealthy": 2 - allowed,
                       "expectedPods": 2}}


def test_a_pdb_blocks_a_deletion_and_one_of_another_namespace_does_not() -> None:
    nodes = [("n-1", "zone-a"), ("n-2", "zone-a")]
    pods = [_pod("web-1", "n-1", "web"), _pod("web-2", "n-2", "web")]
    log: list[NodeDecision] = []
    plan = plan_disruption(_cluster(nodes, pods, [_pdb("web", "web", 0)]), TYPES, NOW, log=log)
    assert plan is None
    assert {d.node for d in log if d.kind is DecisionKind.PDB_BLOCKS} == {"n-1", "n-2"}
    plan = plan_disruption(_cluster(nodes, pods, [_pdb("web", "web", 0, ns="other"), _pdb("web", "web", 1)]), TYPES, NOW)
    assert plan is not None and len(plan.candidates) == 1 and not plan.replacements


def test_the_pdb_index_judges_every_pod_as_the_plain_scan_does() -> None:
    """On the benchmark's topology shape (PDBs in 20 namespaces, every 25th allowing nothing, pods
    two PDBs select added), the index finds the same blocker for every node as the scan of every
    PDB did (the pairs list, judged pod by pod against all of them)."""
    snap, _ = bench.build_topology(120, seed=5)
    extra = dict(next(iter(snap.pdbs)))
    extra = {**extra, "metadata": {**extra["metadata"], "name": "twin"}}  # a second PDB over one Deployment: 500
    pdbs = [*snap.pdbs, extra]
    snap = ClusterSnapshot(nodes=snap.node_views, nodeclaims=snap.nodeclaim_views, nodepools=snap.nodepool_views,
                           pods=snap.pod_views, daemonsets=list(snap.daemonsets), pdbs=pdbs)
    pairs = [(pdb, pdb_status(pdb, snap.pod_views, NOW)) for pdb in pdbs]
    index = PDBIndex.build(snap, NOW)
    blocked = 0
    for n in snap.node_views:
        pods = [p for p in snap.pods_on(n.name) if p.reschedulable]
        plain = _scan_blocker(pods, pairs)
        assert pdb_blocker(pods, index) == plain
        blocked += plain is not None
    assert blocked >= 5  # the shape has blocking PDBs and the twin


def test_the_pdb_index_verdict_per_deployment_is_each_pods_own_verdict() -> None:
    """The index judges once per (namespace, labels, Ready): pods of one Deployment that differ in
    readiness, phase or deletion each still get the Eviction API's verdict for themselves (an
    unready pod goes when the budget is healthy, a Pending or deleting one without a PDB check)."""
    healthy = _pdb("web", "web", 0)
    healthy["status"].update({"currentHealthy": 3, "desiredHealthy": 2})  # an unready pod may go (IfHealthyBudget)
    unhealthy = _pdb("api", "api", 0)
    unhealthy["status"].update({"currentHealthy": 1, "desiredHealthy": 2})  # an unready pod is refused too
    always = _pdb("db", "db", 0)
    always["spec"]["unhealthyPodEvictionPolicy"] = "AlwaysAllow"  # an unready pod goes whatever the budget
    pdbs = [healthy, unhealthy, always]
    pods = []
    for app in ("web", "api", "db", "cache"):
        ready, unready, pending, deleting = (_pod(f"{app}-{i}", "n-1", app) for i in range(4))
        unready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        pending["status"]["phase"] = "Pending"
        deleting["metadata"]["deletionTimestamp"] = iso(NOW - 10)
        pods += [ready, unready, pending, deleting, _pod(f"{app}-4", "n-1", app)]
    snap = _cluster([("n-1", "zone-a")], pods, pdbs)
    index = PDBIndex.build(snap, NOW)
    from karpy_core.utils.pdb import eviction_verdict

    verdicts = {}
    for p in snap.pod_views:
        own = eviction_verdict(p.raw, pdbs, index.status_of)
        assert index.verdict(p) == own, p.key
        verdicts[p.name] = own.action
    assert verdicts == {**{f"web-{i}": a for i, a in enumerate(["deny", "delete", "delete", "delete", "deny"])},
                        **{f"api-{i}": a for i, a in enumerate(["deny", "deny", "delete", "delete", "deny"])},
                        **{f"db-{i}": a for i, a in enumerate(["deny", "delete", "delete", "delete", "deny"])},
                        **{f"cache-{i}": "delete" for i in range(5)}}


def _scan_blocker(pods: list[Any], pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> tuple[str, str, str] | None:
    """The blocker as found before the index: every pod against every PDB."""
    from karpy_core.utils.pdb import eviction_verdict

    statuses = {(b["metadata"].get("namespace") or "default", b["metadata"]["name"]): st for b, st in pairs}
    for pod in pods:
        v = eviction_verdict(pod.raw, [b for b, _ in pairs],
                             lambda b: statuses[(b["metadata"].get("namespace") or "default", b["metadata"]["name"])])
        if v.action == "deny":
            if v.status == 500:
                return pod.key, v.pdb, "more than one PodDisruptionBudget selects it"
            allowed = int(statuses[(pod.namespace, v.pdb)].get("disruptionsAllowed") or 0)
            return pod.key, v.pdb, f"PodDisruptionBudget {v.pdb} allows {max(0, allowed)} disruptions"
    return None


@pytest.mark.parametrize("seed", [3, 8])
def test_simulations_that_see_only_the_selecting_anti_affinity_holders_decide_as_with_every_bound_pod(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every candidate of a small topology shape (zone spreads, hostname anti-affinity, node
    selectors, 20 NodePools) and a prefix of them together: the same verdict, kind and
    replacement whether a simulation sees the bound pods :meth:`SimulationContext.relevant_bound`
    picks or every bound pod."""
    snap, types = bench.build_topology(90, underutilized=0.1, drifted=0.0, seed=seed)
    cands = [c for c in build_candidates(snap, types, NOW) if not c.blocked and not c.empty][:40]
    assert len(cands) >= 20

    def run() -> list[tuple[Any, ...]]:
        ctx = SimulationContext(snap, types)
        out = []
        for group in [[c] for c in cands] + [cands[:2], cands[:5], cands[:12]]:
            ev = evaluate(ctx, group, consolidation=True)
            out.append((ev.ok, ev.problem.kind if ev.problem else None,
                        [sorted(it.name for it in r.instance_types) for r in ev.replacements]))
        return out

    fast = run()
    monkeypatch.setattr(SimulationContext, "relevant_bound",
                        lambda self, pods, removed: [b for b in self.bound if b.node_name not in removed])
    assert run() == fast
    assert any(ok for ok, _, _ in fast) and not all(ok for ok, _, _ in fast)


def test_requirements_admits_answers_as_matches_labels() -> None:
    reqs = [Requirements.of(Requirement.new("kubernetes.io/arch", "In", ["arm64"])),
            Requirements.of(Requirement.new("zone", "NotIn", ["a"]), Requirement.new("gpu", "DoesNotExist")),
            Requirements.of(Requirement.new("cpu", "Gt", ["4"]), Requirement.new("team", "Exists")), Requirements()]
    labels = [{}, {"kubernetes.io/arch": "arm64"}, {"zone": "a"}, {"zone": "b", "gpu": "1"}, {"cpu": "8", "team": "x"},
              {"cpu": "2", "team": ""}, {"zone": "b"}]
    for r in reqs:
        for lab in labels:
            assert r.admits(lab) == (r.matches_labels(lab) is None), (r.describe(), lab)


def test_a_pass_on_the_topology_shape_reports_what_each_method_skipped() -> None:
    """Karpenter's methods examine every candidate (no timeout): nothing skipped; the repack's
    budget of scheduler runs leaves candidates unexamined, and the coverage names them."""
    snap, types = bench.build_topology(150, underutilized=0.0, drifted=0.0, seed=2)
    log: list[NodeDecision] = []
    plan_disruption(snap, types, NOW, log=log, methods=[DisruptionMethod.SINGLE_NODE_CONSOLIDATION])
    cov = pass_coverage(log)
    assert cov.complete and cov.examined.get("single-node-consolidation", 0) > 0
    log = []
    plan_disruption(snap, types, NOW, log=log, methods=[DisruptionMethod.REPACK_CONSOLIDATION])
    cov = pass_coverage(log)
    skipped = cov.skipped_nodes.get("repack-consolidation", ())
    assert not cov.complete and skipped and cov.skipped["repack-consolidation"] == {"simulation-limit": len(skipped)}
    assert set(skipped) == {d.node for d in log if d.kind is DecisionKind.SIMULATION_LIMIT}
