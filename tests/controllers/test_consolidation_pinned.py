"""Pinned disruption decisions on generated clusters, so that speed work on the planner, the
simulation and the scheduler cannot change what a pass decides.

The expected commands and decision-log tallies below were produced by the planner before the
consolidation-pass speed work of issue 13 (commit 63752d2) and are compared exactly: which
method, which nodes in which order, which replacement instance types, the prices, and how many
``keep`` lines of each kind the pass wrote.

Two clusters:

* ``bench``: :func:`benchmarks.consolidation_pass.build` at 300 nodes (one zone, on-demand, 70%
  cpu used, no constraints): multi-node consolidation deletes a prefix of 30 nodes, single-node
  consolidation deletes the first candidate.
* ``mixed``: :func:`mixed_cluster` at 240 nodes: two zones, spot and on-demand, utilization
  from 15% to 90%, zone spread (``DoNotSchedule`` and ``ScheduleAnyway``), required hostname
  anti-affinity (against the pod's own app, and against another app whose pods have no term),
  a zone node selector, a host port, a PDB that allows nothing, do-not-disrupt
  pods, nodes not consolidatable yet and drifted nodes: every path of the simulation that
  depends on pods already bound. Drift wins the default order; multi-node consolidation alone
  replaces 28 nodes by one; at 80-97% utilization single-node consolidation walks 40-50
  candidates (not cheaper, too many replacements) before it finds one.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from karpy_core.apis.hashing import nodepool_hash
from karpy_core.controllers.disruption.decisions import NodeDecision
from karpy_core.controllers.disruption.plan import DisruptionPlan
from karpy_core.controllers.disruption.planner import plan_disruption
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.utils.clock import iso
from tests.scheduling.helpers import make_type, nodepool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import consolidation_pass as bench

NOW = 1767225600.0 + 86400
SHAPES = [("m.large", 2), ("m.xlarge", 4), ("m.2xlarge", 8), ("m.4xlarge", 16)]
ZONES = ("zone-a", "zone-b")
MIXED_TYPES = {"default": [make_type(n, c, 4 * c, zones=ZONES, capacity_types=("on-demand", "spot")) for n, c in SHAPES]}
UTILIZATION = (0.15, 0.3, 0.5, 0.7, 0.9)
"""Fraction of a node's cpu its pods request, by node index modulo 5."""


def _pod(i: int, j: int, node: str, cpu_m: int, app: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"p-{i:04d}-{j}", "namespace": "default", "labels": {"app": app},
                            "creationTimestamp": iso(NOW - 7200 + i),
                            "ownerReferences": [{"kind": "ReplicaSet", "name": f"rs-{app}", "controller": True}]}
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {
        "cpu": f"{cpu_m}m", "memory": f"{cpu_m * 2}Mi"}}}]}
    sel = {"matchLabels": {"app": app}}
    if app == "a0":
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": sel}]
    elif app == "a1":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": sel}]}}
    elif app == "a2":
        spec["topologySpreadConstraints"] = [{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": sel}]
    elif app == "a3" and i % 3 == 0:
        spec["nodeSelector"] = {"topology.kubernetes.io/zone": ZONES[i % 2]}
    elif app == "a4" and i % 2 == 0:  # keeps a5 pods (which have no term of their own) off its node
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a5"}}}]}}
    if (i % 17 == 0 or i % 7 == 3) and j == 0:
        spec["containers"][0]["ports"] = [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}]
    if i % 13 == 0 and j == 1:
        meta["annotations"] = {"karpenter.sh/do-not-disrupt": "true"}
    if i % 11 == 0 and j == 2:
        meta["labels"]["guard"] = "yes"
    return {"metadata": meta, "spec": spec, "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def mixed_cluster(n_nodes: int, utilization: tuple[float, ...] = UTILIZATION) -> ClusterSnapshot:
    """``n_nodes`` nodes of four shapes over two zones (every fifth spot), 2-10 pods each of six
    apps with the constraints listed in the module docstring, deterministic in the node index;
    node ``i``'s pods request ``utilization[i % len(utilization)]`` of its cpu."""
    pool = nodepool()
    pool["spec"]["disruption"] = {"consolidateAfter": "30m", "budgets": [{"nodes": "20%"}]}
    h = nodepool_hash(pool)
    nodes, claims, pods = [], [], []
    for i in range(n_nodes):
        itype, cpu = SHAPES[(i * 3) % len(SHAPES)]
        zone, ct = ZONES[i % 2], "spot" if i % 5 == 0 else "on-demand"
        name = f"node-{i:04d}"
        labels = {"karpenter.sh/nodepool": "default", "karpenter.sh/initialized": "true", "node.kubernetes.io/instance-type": itype,
                  "topology.kubernetes.io/zone": zone, "karpenter.sh/capacity-type": ct, "kubernetes.io/hostname": name,
                  "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"}
        nodes.append({"metadata": {"name": name, "labels": labels, "resourceVersion": "1"}, "spec": {"providerID": f"p://{name}"},
                      "status": {"allocatable": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi", "pods": "110"},
                                 "conditions": [{"type": "Ready", "status": "True"}]}})
        status: dict[str, Any] = {"providerID": f"p://{name}", "capacity": {"cpu": str(cpu), "memory": f"{4 * cpu}Gi"},
                                  "conditions": [{"type": "Initialized", "status": "True", "lastTransitionTime": iso(NOW - 3600)}]}
        if i % 19 == 0:
            status["lastPodEventTime"] = iso(NOW - 600)  # not consolidatable for 20 more minutes
        claim_hash = "stale" if i % 23 == 7 else h
        claims.append({"metadata": {"name": name, "labels": labels, "creationTimestamp": iso(NOW - 7200 - 60 * i),
                                    "annotations": {"karpenter.sh/nodepool-hash": claim_hash,
                                                    "karpenter.sh/nodepool-hash-version": "karpy-v1"}},
                       "spec": {"expireAfter": "720h"}, "status": status})
        count = 2 + (i * 7) % 9
        per_pod = int(cpu * 1000 * utilization[i % len(utilization)]) // count
        for j in range(count):
            pods.append(_pod(i, j, name, per_pod, f"a{(i + j) % 6}"))
    guarded = sum(1 for p in pods if p["metadata"]["labels"].get("guard"))
    pdb = {"metadata": {"name": "guard", "namespace": "default", "generation": 1},
           "spec": {"minAvailable": guarded, "selector": {"matchLabels": {"guard": "yes"}}}}
    return ClusterSnapshot(nodes=nodes, nodeclaims=claims, nodepools=[pool], pods=pods, pdbs=[pdb])


def summary(plan: DisruptionPlan | None, log: list[NodeDecision]) -> dict[str, Any]:
    """The command and the log's tally, as plain values: method, decision, candidate names in
    order, per replacement its instance types (in order) and requirement keys, prices (USD/hour,
    6 decimals), and ``(method, verdict, kind) -> count`` over the decision log."""
    tally = Counter(f"{d.method}/{d.verdict}/{d.kind}" for d in log)
    if plan is None:
        return {"plan": None, "log": dict(sorted(tally.items()))}
    return {
        "plan": {
            "method": str(plan.method),
            "decision": str(plan.decision),
            "candidates": [c.name for c in plan.candidates],
            "replacements": [([it.name for it in r.instance_types],
                              sorted((x.key, x.complement, sorted(x.values)) for x in r.requirements)) for r in plan.replacements],
            "price": round(plan.price, 6),
            "replacement_price": round(plan.replacement_price, 6),
        },
        "log": dict(sorted(tally.items())),
    }



def method_lines(log: list[NodeDecision]) -> list[str]:
    """``node kind`` of every line a method (not the candidate stage) wrote, in log order."""
    return [f"{d.node} {d.kind}" for d in log if d.method != "candidate"]


CASES: dict[str, tuple[Any, dict[str, list[Any]], float, dict[str, Any]]] = {
    "bench-default": (lambda: bench.build(300), bench.TYPES, bench.NOW, {}),
    "bench-single": (lambda: bench.build(300), bench.TYPES, bench.NOW, {"methods": ["single-node-consolidation"]}),
    "mixed-default": (lambda: mixed_cluster(240), MIXED_TYPES, NOW, {}),
    "mixed-multi": (lambda: mixed_cluster(240), MIXED_TYPES, NOW, {"methods": ["multi-node-consolidation"]}),
    "tight-single": (lambda: mixed_cluster(240, (0.8, 0.9)), MIXED_TYPES, NOW, {"methods": ["single-node-consolidation"]}),
    "tighter-single": (lambda: mixed_cluster(240, (0.6, 0.9, 0.95, 0.97)), MIXED_TYPES, NOW,
                       {"methods": ["single-node-consolidation"]}),
}
"""Case -> (snapshot builder, instance types, now, :func:`plan_disruption` keyword arguments)."""

EXPECTED: dict[str, dict[str, Any]] = {"bench-default": {"plan": {"method": "multi-node-consolidation",
                            "decision": "delete",
                            "candidates": ["node-00003", "node-00007", "node-00011", "node-00015", "node-00019",
                                           "node-00023", "node-00027", "node-00031", "node-00035", "node-00039",
                                           "node-00043", "node-00047", "node-00051", "node-00055", "node-00059",
                                           "node-00063", "node-00067", "node-00071", "node-00075", "node-00079",
                                           "node-00083", "node-00087", "node-00091", "node-00095", "node-00099",
                                           "node-00103", "node-00107", "node-00111", "node-00115", "node-00119"],
                            "replacements": [],
                            "price": 24.0,
                            "replacement_price": 0.0},
                   "log": {"multi-node-consolidation/disrupt/delete": 30},
                   "lines": ["node-00003 delete", "node-00007 delete", "node-00011 delete", "node-00015 delete",
                             "node-00019 delete", "node-00023 delete", "node-00027 delete", "node-00031 delete",
                             "node-00035 delete", "node-00039 delete", "node-00043 delete", "node-00047 delete",
                             "node-00051 delete", "node-00055 delete", "node-00059 delete", "node-00063 delete",
                             "node-00067 delete", "node-00071 delete", "node-00075 delete", "node-00079 delete",
                             "node-00083 delete", "node-00087 delete", "node-00091 delete", "node-00095 delete",
                             "node-00099 delete", "node-00103 delete", "node-00107 delete", "node-00111 delete",
                             "node-00115 delete", "node-00119 delete"]},
 "bench-single": {"plan": {"method": "single-node-consolidation",
                           "decision": "delete",
                           "candidates": ["node-00003"],
                           "replacements": [],
                           "price": 0.8,
                           "replacement_price": 0.0},
                  "log": {"single-node-consolidation/disrupt/delete": 1},
                  "lines": ["node-00003 delete"]},
 "mixed-default": {"plan": {"method": "drift",
                            "decision": "delete",
                            "candidates": ["node-0237"],
                            "replacements": [],
                            "price": 0.8,
                            "replacement_price": 0},
                   "log": {"candidate/keep/do-not-disrupt": 19, "candidate/keep/pdb-blocks": 18, "drift/disrupt/delete": 1},
                   "lines": ["node-0237 delete"]},
 "mixed-multi": {"plan": {"method": "multi-node-consolidation",
                          "decision": "replace",
                          "candidates": ["node-0189", "node-0153", "node-0081", "node-0009", "node-0229", "node-0193",
                                         "node-0157", "node-0049", "node-0233", "node-0198", "node-0197", "node-0162",
                                         "node-0161", "node-0126", "node-0089", "node-0054", "node-0053", "node-0018",
                                         "node-0017", "node-0237", "node-0225", "node-0201", "node-0129", "node-0093",
                                         "node-0045", "node-0021", "node-0238", "node-0202"],
                          "replacements": [(["m.xlarge", "m.2xlarge", "m.4xlarge"],
                                            [("karpenter.sh/capacity-type", False, ["on-demand", "spot"]),
                                             ("karpenter.sh/nodepool", False, ["default"]),
                                             ("node.kubernetes.io/instance-type", False,
                                              ["m.2xlarge", "m.4xlarge", "m.xlarge"]),
                                             ("topology.kubernetes.io/zone", False, ["zone-a", "zone-b"])])],
                          "price": 18.64,
                          "replacement_price": 0.08},
                 "log": {"candidate/keep/do-not-disrupt": 19,
                         "candidate/keep/pdb-blocks": 18,
                         "multi-node-consolidation/disrupt/replace": 28,
                         "multi-node-consolidation/keep/not-consolidatable-yet": 11},
                 "lines": ["node-0019 not-consolidatable-yet", "node-0038 not-consolidatable-yet",
                           "node-0057 not-consolidatable-yet", "node-0076 not-consolidatable-yet",
                           "node-0095 not-consolidatable-yet", "node-0114 not-consolidatable-yet",
                           "node-0133 not-consolidatable-yet", "node-0152 not-consolidatable-yet",
                           "node-0171 not-consolidatable-yet", "node-0190 not-consolidatable-yet",
                           "node-0228 not-consolidatable-yet", "node-0189 replace", "node-0153 replace", "node-0081 replace",
                           "node-0009 replace", "node-0229 replace", "node-0193 replace", "node-0157 replace",
                           "node-0049 replace", "node-0233 replace", "node-0198 replace", "node-0197 replace",
                           "node-0162 replace", "node-0161 replace", "node-0126 replace", "node-0089 replace",
                           "node-0054 replace", "node-0053 replace", "node-0018 replace", "node-0017 replace",
                           "node-0237 replace", "node-0225 replace", "node-0201 replace", "node-0129 replace",
                           "node-0093 replace", "node-0045 replace", "node-0021 replace", "node-0238 replace",
                           "node-0202 replace"]},
 "tight-single": {"plan": {"method": "single-node-consolidation",
                           "decision": "delete",
                           "candidates": ["node-0206"],
                           "replacements": [],
                           "price": 0.4,
                           "replacement_price": 0.0},
                  "log": {"candidate/keep/do-not-disrupt": 19,
                          "candidate/keep/pdb-blocks": 18,
                          "single-node-consolidation/disrupt/delete": 1,
                          "single-node-consolidation/keep/not-cheaper": 33,
                          "single-node-consolidation/keep/not-consolidatable-yet": 11,
                          "single-node-consolidation/keep/too-many-replacements": 7},
                  "lines": ["node-0019 not-consolidatable-yet", "node-0038 not-consolidatable-yet",
                            "node-0057 not-consolidatable-yet", "node-0076 not-consolidatable-yet",
                            "node-0095 not-consolidatable-yet", "node-0114 not-consolidatable-yet",
                            "node-0133 not-consolidatable-yet", "node-0152 not-consolidatable-yet",
                            "node-0171 not-consolidatable-yet", "node-0190 not-consolidatable-yet",
                            "node-0228 not-consolidatable-yet", "node-0189 not-cheaper", "node-0153 not-cheaper",
                            "node-0081 not-cheaper", "node-0009 not-cheaper", "node-0229 not-cheaper",
                            "node-0193 not-cheaper", "node-0157 not-cheaper", "node-0049 not-cheaper",
                            "node-0233 not-cheaper", "node-0198 not-cheaper", "node-0197 not-cheaper",
                            "node-0162 not-cheaper", "node-0161 not-cheaper", "node-0126 not-cheaper",
                            "node-0089 not-cheaper", "node-0054 not-cheaper", "node-0053 not-cheaper",
                            "node-0018 not-cheaper", "node-0017 not-cheaper", "node-0237 not-cheaper",
                            "node-0225 not-cheaper", "node-0201 not-cheaper", "node-0129 not-cheaper",
                            "node-0093 not-cheaper", "node-0045 not-cheaper", "node-0021 not-cheaper",
                            "node-0238 too-many-replacements", "node-0202 too-many-replacements",
                            "node-0166 too-many-replacements", "node-0097 too-many-replacements",
                            "node-0094 too-many-replacements", "node-0061 too-many-replacements",
                            "node-0058 too-many-replacements", "node-0173 not-cheaper", "node-0137 not-cheaper",
                            "node-0101 not-cheaper", "node-0029 not-cheaper", "node-0085 not-cheaper",
                            "node-0213 not-cheaper", "node-0207 not-cheaper", "node-0206 delete"]},
 "tighter-single": {"plan": {"method": "single-node-consolidation",
                             "decision": "delete",
                             "candidates": ["node-0217"],
                             "replacements": [],
                             "price": 0.8,
                             "replacement_price": 0.0},
                    "log": {"candidate/keep/do-not-disrupt": 19,
                            "candidate/keep/pdb-blocks": 18,
                            "single-node-consolidation/disrupt/delete": 1,
                            "single-node-consolidation/keep/not-cheaper": 39,
                            "single-node-consolidation/keep/not-consolidatable-yet": 11,
                            "single-node-consolidation/keep/too-many-replacements": 11},
                    "lines": ["node-0019 not-consolidatable-yet", "node-0038 not-consolidatable-yet",
                              "node-0057 not-consolidatable-yet", "node-0076 not-consolidatable-yet",
                              "node-0095 not-consolidatable-yet", "node-0114 not-consolidatable-yet",
                              "node-0133 not-consolidatable-yet", "node-0152 not-consolidatable-yet",
                              "node-0171 not-consolidatable-yet", "node-0190 not-consolidatable-yet",
                              "node-0228 not-consolidatable-yet", "node-0189 not-cheaper", "node-0153 not-cheaper",
                              "node-0081 not-cheaper", "node-0009 not-cheaper", "node-0229 not-cheaper",
                              "node-0193 not-cheaper", "node-0157 not-cheaper", "node-0049 not-cheaper",
                              "node-0233 not-cheaper", "node-0198 not-cheaper", "node-0197 not-cheaper",
                              "node-0162 not-cheaper", "node-0161 not-cheaper", "node-0126 not-cheaper",
                              "node-0089 not-cheaper", "node-0054 not-cheaper", "node-0053 not-cheaper",
                              "node-0018 not-cheaper", "node-0017 not-cheaper", "node-0237 not-cheaper",
                              "node-0225 not-cheaper", "node-0201 not-cheaper", "node-0129 not-cheaper",
                              "node-0093 not-cheaper", "node-0045 not-cheaper", "node-0021 not-cheaper",
                              "node-0238 too-many-replacements", "node-0202 too-many-replacements",
                              "node-0166 too-many-replacements", "node-0097 too-many-replacements",
                              "node-0094 too-many-replacements", "node-0061 too-many-replacements",
                              "node-0058 too-many-replacements", "node-0173 not-cheaper", "node-0137 not-cheaper",
                              "node-0101 not-cheaper", "node-0029 not-cheaper", "node-0085 not-cheaper",
                              "node-0213 not-cheaper", "node-0207 not-cheaper", "node-0206 too-many-replacements",
                              "node-0177 not-cheaper", "node-0141 not-cheaper", "node-0134 too-many-replacements",
                              "node-0099 not-cheaper", "node-0098 too-many-replacements", "node-0069 not-cheaper",
                              "node-0063 not-cheaper", "node-0062 too-many-replacements", "node-0027 not-cheaper",
                              "node-0217 delete"]}}
"""What the planner decided on each case before the speed work (see the module docstring)."""


@pytest.mark.parametrize("case", sorted(CASES))
def test_pass_decides_exactly_as_pinned(case: str) -> None:
    """Same command (method, nodes in order, replacement types and requirements, prices) and the
    same decision log (every method line in order, and the tally of all lines) as pinned."""
    build, types, now, kwargs = CASES[case]
    log: list[NodeDecision] = []
    plan = plan_disruption(build(), types, now, log=log, **kwargs)
    got = summary(plan, log)
    got["lines"] = method_lines(log)
    want = EXPECTED[case]
    assert got["plan"] == want["plan"]
    assert got["log"] == want["log"]
    assert got["lines"] == want["lines"]
