"""Pinned disruption decisions on generated clusters, so that speed work on the planner, the
simulation and the scheduler cannot change what a pass decides.

The expected commands and decision-log tallies below were produced by the planner before the
consolidation-pass speed work of issue 13 (main at 215c6d4; the cases without the repack decide
the same at 63752d2, where that work started) and are compared exactly: which
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
  replaces 35 nodes by one (the binary search's prefix of 27, grown by 8 later candidates that can
  go with it, ``MultiNodeConsolidation.extend``, issue 36; the prefix was 28 until issue 34: with node-0202 in the prefix, kube-scheduler
  placing the moved pods with the replacement first by name fills it with larger pods and leaves
  the host-port, anti-affine ``default/p-0157-0`` without a node, so the 28-node command would be
  undone by a launch); at 80-97% utilization single-node consolidation walks 40-50
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
    "bench-repack": (lambda: bench.build(300), bench.TYPES, bench.NOW, {"methods": ["repack-consolidation"]}),
    "mixed-repack": (lambda: mixed_cluster(240), MIXED_TYPES, NOW, {"methods": ["repack-consolidation"]}),
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
 "mixed-multi": {'plan': {'method': 'multi-node-consolidation',
                           'decision': 'replace',
                           'candidates': ['node-0189',
                                          'node-0153',
                                          'node-0081',
                                          'node-0009',
                                          'node-0229',
                                          'node-0193',
                                          'node-0157',
                                          'node-0049',
                                          'node-0233',
                                          'node-0198',
                                          'node-0197',
                                          'node-0162',
                                          'node-0161',
                                          'node-0126',
                                          'node-0089',
                                          'node-0054',
                                          'node-0053',
                                          'node-0018',
                                          'node-0017',
                                          'node-0237',
                                          'node-0225',
                                          'node-0201',
                                          'node-0129',
                                          'node-0093',
                                          'node-0045',
                                          'node-0021',
                                          'node-0238',
                                          'node-0097',
                                          'node-0094',
                                          'node-0061',
                                          'node-0058',
                                          'node-0173',
                                          'node-0137',
                                          'node-0141',
                                          'node-0099'],
                           'replacements': [(['m.xlarge', 'm.2xlarge', 'm.4xlarge'],
                                             [('karpenter.sh/capacity-type', False, ['on-demand', 'spot']),
                                              ('karpenter.sh/nodepool', False, ['default']),
                                              ('node.kubernetes.io/instance-type', False, ['m.2xlarge', 'm.4xlarge', 'm.xlarge']),
                                              ('topology.kubernetes.io/zone', False, ['zone-a', 'zone-b'])])],
                           'price': 23.24,
                           'replacement_price': 0.08},
                  'log': {'candidate/keep/do-not-disrupt': 19,
                          'candidate/keep/pdb-blocks': 18,
                          'multi-node-consolidation/disrupt/replace': 35,
                          'multi-node-consolidation/keep/not-consolidatable-yet': 11},
                  'lines': ['node-0019 not-consolidatable-yet',
                            'node-0038 not-consolidatable-yet',
                            'node-0057 not-consolidatable-yet',
                            'node-0076 not-consolidatable-yet',
                            'node-0095 not-consolidatable-yet',
                            'node-0114 not-consolidatable-yet',
                            'node-0133 not-consolidatable-yet',
                            'node-0152 not-consolidatable-yet',
                            'node-0171 not-consolidatable-yet',
                            'node-0190 not-consolidatable-yet',
                            'node-0228 not-consolidatable-yet',
                            'node-0189 replace',
                            'node-0153 replace',
                            'node-0081 replace',
                            'node-0009 replace',
                            'node-0229 replace',
                            'node-0193 replace',
                            'node-0157 replace',
                            'node-0049 replace',
                            'node-0233 replace',
                            'node-0198 replace',
                            'node-0197 replace',
                            'node-0162 replace',
                            'node-0161 replace',
                            'node-0126 replace',
                            'node-0089 replace',
                            'node-0054 replace',
                            'node-0053 replace',
                            'node-0018 replace',
                            'node-0017 replace',
                            'node-0237 replace',
                            'node-0225 replace',
                            'node-0201 replace',
                            'node-0129 replace',
                            'node-0093 replace',
                            'node-0045 replace',
                            'node-0021 replace',
                            'node-0238 replace',
                            'node-0097 replace',
                            'node-0094 replace',
                            'node-0061 replace',
                            'node-0058 replace',
                            'node-0173 replace',
                            'node-0137 replace',
                            'node-0141 replace',
                            'node-0099 replace']},
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
                              "node-0217 delete"]},
 "bench-repack": {"plan": {"method": "repack-consolidation",
                           "decision": "delete",
                           "candidates": ["node-00003", "node-00007", "node-00011", "node-00015", "node-00019", "node-00023",
                                          "node-00027"],
                           "replacements": [],
                           "price": 5.6,
                           "replacement_price": 0},
                  "log": {"repack-consolidation/disrupt/delete": 7, "repack-consolidation/keep/simulation-limit": 292},
                  "lines": ["node-00035 simulation-limit", "node-00039 simulation-limit", "node-00043 simulation-limit",
                            "node-00047 simulation-limit", "node-00051 simulation-limit", "node-00055 simulation-limit",
                            "node-00059 simulation-limit", "node-00063 simulation-limit", "node-00067 simulation-limit",
                            "node-00071 simulation-limit", "node-00075 simulation-limit", "node-00079 simulation-limit",
                            "node-00083 simulation-limit", "node-00087 simulation-limit", "node-00091 simulation-limit",
                            "node-00095 simulation-limit", "node-00099 simulation-limit", "node-00103 simulation-limit",
                            "node-00107 simulation-limit", "node-00111 simulation-limit", "node-00115 simulation-limit",
                            "node-00119 simulation-limit", "node-00123 simulation-limit", "node-00127 simulation-limit",
                            "node-00131 simulation-limit", "node-00135 simulation-limit", "node-00139 simulation-limit",
                            "node-00143 simulation-limit", "node-00147 simulation-limit", "node-00151 simulation-limit",
                            "node-00155 simulation-limit", "node-00159 simulation-limit", "node-00163 simulation-limit",
                            "node-00167 simulation-limit", "node-00171 simulation-limit", "node-00175 simulation-limit",
                            "node-00179 simulation-limit", "node-00183 simulation-limit", "node-00187 simulation-limit",
                            "node-00191 simulation-limit", "node-00195 simulation-limit", "node-00199 simulation-limit",
                            "node-00203 simulation-limit", "node-00207 simulation-limit", "node-00211 simulation-limit",
                            "node-00215 simulation-limit", "node-00219 simulation-limit", "node-00223 simulation-limit",
                            "node-00227 simulation-limit", "node-00231 simulation-limit", "node-00235 simulation-limit",
                            "node-00239 simulation-limit", "node-00243 simulation-limit", "node-00247 simulation-limit",
                            "node-00251 simulation-limit", "node-00255 simulation-limit", "node-00259 simulation-limit",
                            "node-00263 simulation-limit", "node-00267 simulation-limit", "node-00271 simulation-limit",
                            "node-00275 simulation-limit", "node-00279 simulation-limit", "node-00283 simulation-limit",
                            "node-00287 simulation-limit", "node-00291 simulation-limit", "node-00295 simulation-limit",
                            "node-00299 simulation-limit", "node-00002 simulation-limit", "node-00006 simulation-limit",
                            "node-00010 simulation-limit", "node-00014 simulation-limit", "node-00018 simulation-limit",
                            "node-00022 simulation-limit", "node-00026 simulation-limit", "node-00030 simulation-limit",
                            "node-00034 simulation-limit", "node-00038 simulation-limit", "node-00042 simulation-limit",
                            "node-00046 simulation-limit", "node-00050 simulation-limit", "node-00054 simulation-limit",
                            "node-00058 simulation-limit", "node-00062 simulation-limit", "node-00066 simulation-limit",
                            "node-00070 simulation-limit", "node-00074 simulation-limit", "node-00078 simulation-limit",
                            "node-00082 simulation-limit", "node-00086 simulation-limit", "node-00090 simulation-limit",
                            "node-00094 simulation-limit", "node-00098 simulation-limit", "node-00102 simulation-limit",
                            "node-00106 simulation-limit", "node-00110 simulation-limit", "node-00114 simulation-limit",
                            "node-00118 simulation-limit", "node-00122 simulation-limit", "node-00126 simulation-limit",
                            "node-00130 simulation-limit", "node-00134 simulation-limit", "node-00138 simulation-limit",
                            "node-00142 simulation-limit", "node-00146 simulation-limit", "node-00150 simulation-limit",
                            "node-00154 simulation-limit", "node-00158 simulation-limit", "node-00162 simulation-limit",
                            "node-00166 simulation-limit", "node-00170 simulation-limit", "node-00174 simulation-limit",
                            "node-00178 simulation-limit", "node-00182 simulation-limit", "node-00186 simulation-limit",
                            "node-00190 simulation-limit", "node-00194 simulation-limit", "node-00198 simulation-limit",
                            "node-00202 simulation-limit", "node-00206 simulation-limit", "node-00210 simulation-limit",
                            "node-00214 simulation-limit", "node-00218 simulation-limit", "node-00222 simulation-limit",
                            "node-00226 simulation-limit", "node-00230 simulation-limit", "node-00234 simulation-limit",
                            "node-00238 simulation-limit", "node-00242 simulation-limit", "node-00246 simulation-limit",
                            "node-00250 simulation-limit", "node-00254 simulation-limit", "node-00258 simulation-limit",
                            "node-00262 simulation-limit", "node-00266 simulation-limit", "node-00270 simulation-limit",
                            "node-00274 simulation-limit", "node-00278 simulation-limit", "node-00282 simulation-limit",
                            "node-00286 simulation-limit", "node-00290 simulation-limit", "node-00294 simulation-limit",
                            "node-00298 simulation-limit", "node-00001 simulation-limit", "node-00005 simulation-limit",
                            "node-00009 simulation-limit", "node-00013 simulation-limit", "node-00017 simulation-limit",
                            "node-00021 simulation-limit", "node-00025 simulation-limit", "node-00029 simulation-limit",
                            "node-00033 simulation-limit", "node-00037 simulation-limit", "node-00041 simulation-limit",
                            "node-00045 simulation-limit", "node-00049 simulation-limit", "node-00053 simulation-limit",
                            "node-00057 simulation-limit", "node-00061 simulation-limit", "node-00065 simulation-limit",
                            "node-00069 simulation-limit", "node-00073 simulation-limit", "node-00077 simulation-limit",
                            "node-00081 simulation-limit", "node-00085 simulation-limit", "node-00089 simulation-limit",
                            "node-00093 simulation-limit", "node-00097 simulation-limit", "node-00101 simulation-limit",
                            "node-00105 simulation-limit", "node-00109 simulation-limit", "node-00113 simulation-limit",
                            "node-00117 simulation-limit", "node-00121 simulation-limit", "node-00125 simulation-limit",
                            "node-00129 simulation-limit", "node-00133 simulation-limit", "node-00137 simulation-limit",
                            "node-00141 simulation-limit", "node-00145 simulation-limit", "node-00149 simulation-limit",
                            "node-00153 simulation-limit", "node-00157 simulation-limit", "node-00161 simulation-limit",
                            "node-00165 simulation-limit", "node-00169 simulation-limit", "node-00173 simulation-limit",
                            "node-00177 simulation-limit", "node-00181 simulation-limit", "node-00185 simulation-limit",
                            "node-00189 simulation-limit", "node-00193 simulation-limit", "node-00197 simulation-limit",
                            "node-00201 simulation-limit", "node-00205 simulation-limit", "node-00209 simulation-limit",
                            "node-00213 simulation-limit", "node-00217 simulation-limit", "node-00221 simulation-limit",
                            "node-00225 simulation-limit", "node-00229 simulation-limit", "node-00233 simulation-limit",
                            "node-00237 simulation-limit", "node-00241 simulation-limit", "node-00245 simulation-limit",
                            "node-00249 simulation-limit", "node-00253 simulation-limit", "node-00257 simulation-limit",
                            "node-00261 simulation-limit", "node-00265 simulation-limit", "node-00269 simulation-limit",
                            "node-00273 simulation-limit", "node-00277 simulation-limit", "node-00281 simulation-limit",
                            "node-00285 simulation-limit", "node-00289 simulation-limit", "node-00293 simulation-limit",
                            "node-00297 simulation-limit", "node-00000 simulation-limit", "node-00004 simulation-limit",
                            "node-00008 simulation-limit", "node-00012 simulation-limit", "node-00016 simulation-limit",
                            "node-00020 simulation-limit", "node-00024 simulation-limit", "node-00028 simulation-limit",
                            "node-00032 simulation-limit", "node-00036 simulation-limit", "node-00040 simulation-limit",
                            "node-00044 simulation-limit", "node-00048 simulation-limit", "node-00052 simulation-limit",
                            "node-00056 simulation-limit", "node-00060 simulation-limit", "node-00064 simulation-limit",
                            "node-00068 simulation-limit", "node-00072 simulation-limit", "node-00076 simulation-limit",
                            "node-00080 simulation-limit", "node-00084 simulation-limit", "node-00088 simulation-limit",
                            "node-00092 simulation-limit", "node-00096 simulation-limit", "node-00100 simulation-limit",
                            "node-00104 simulation-limit", "node-00108 simulation-limit", "node-00112 simulation-limit",
                            "node-00116 simulation-limit", "node-00120 simulation-limit", "node-00124 simulation-limit",
                            "node-00128 simulation-limit", "node-00132 simulation-limit", "node-00136 simulation-limit",
                            "node-00140 simulation-limit", "node-00144 simulation-limit", "node-00148 simulation-limit",
                            "node-00152 simulation-limit", "node-00156 simulation-limit", "node-00160 simulation-limit",
                            "node-00164 simulation-limit", "node-00168 simulation-limit", "node-00172 simulation-limit",
                            "node-00176 simulation-limit", "node-00180 simulation-limit", "node-00184 simulation-limit",
                            "node-00188 simulation-limit", "node-00192 simulation-limit", "node-00196 simulation-limit",
                            "node-00200 simulation-limit", "node-00204 simulation-limit", "node-00208 simulation-limit",
                            "node-00212 simulation-limit", "node-00216 simulation-limit", "node-00220 simulation-limit",
                            "node-00224 simulation-limit", "node-00228 simulation-limit", "node-00232 simulation-limit",
                            "node-00236 simulation-limit", "node-00240 simulation-limit", "node-00244 simulation-limit",
                            "node-00248 simulation-limit", "node-00252 simulation-limit", "node-00256 simulation-limit",
                            "node-00260 simulation-limit", "node-00264 simulation-limit", "node-00268 simulation-limit",
                            "node-00272 simulation-limit", "node-00276 simulation-limit", "node-00280 simulation-limit",
                            "node-00284 simulation-limit", "node-00288 simulation-limit", "node-00292 simulation-limit",
                            "node-00296 simulation-limit", "node-00003 delete", "node-00007 delete", "node-00011 delete",
                            "node-00015 delete", "node-00019 delete", "node-00023 delete", "node-00027 delete"]},
 "mixed-repack": {"plan": {"method": "repack-consolidation",
                           "decision": "delete",
                           "candidates": ["node-0189", "node-0153", "node-0081", "node-0009", "node-0229", "node-0193",
                                          "node-0157", "node-0049", "node-0233", "node-0198"],
                           "replacements": [],
                           "price": 7.6,
                           "replacement_price": 0},
                  "log": {"candidate/keep/do-not-disrupt": 19,
                          "candidate/keep/pdb-blocks": 18,
                          "repack-consolidation/disrupt/delete": 10,
                          "repack-consolidation/keep/not-consolidatable-yet": 11,
                          "repack-consolidation/keep/simulation-limit": 177},
                  "lines": ["node-0019 not-consolidatable-yet", "node-0038 not-consolidatable-yet",
                            "node-0057 not-consolidatable-yet", "node-0076 not-consolidatable-yet",
                            "node-0095 not-consolidatable-yet", "node-0114 not-consolidatable-yet",
                            "node-0133 not-consolidatable-yet", "node-0152 not-consolidatable-yet",
                            "node-0171 not-consolidatable-yet", "node-0190 not-consolidatable-yet",
                            "node-0228 not-consolidatable-yet", "node-0054 simulation-limit", "node-0053 simulation-limit",
                            "node-0018 simulation-limit", "node-0017 simulation-limit", "node-0237 simulation-limit",
                            "node-0225 simulation-limit", "node-0201 simulation-limit", "node-0129 simulation-limit",
                            "node-0093 simulation-limit", "node-0045 simulation-limit", "node-0021 simulation-limit",
                            "node-0238 simulation-limit", "node-0202 simulation-limit", "node-0166 simulation-limit",
                            "node-0097 simulation-limit", "node-0094 simulation-limit", "node-0061 simulation-limit",
                            "node-0058 simulation-limit", "node-0173 simulation-limit", "node-0137 simulation-limit",
                            "node-0101 simulation-limit", "node-0029 simulation-limit", "node-0085 simulation-limit",
                            "node-0213 simulation-limit", "node-0207 simulation-limit", "node-0206 simulation-limit",
                            "node-0177 simulation-limit", "node-0141 simulation-limit", "node-0134 simulation-limit",
                            "node-0099 simulation-limit", "node-0098 simulation-limit", "node-0069 simulation-limit",
                            "node-0063 simulation-limit", "node-0062 simulation-limit", "node-0027 simulation-limit",
                            "node-0217 simulation-limit", "node-0181 simulation-limit", "node-0109 simulation-limit",
                            "node-0073 simulation-limit", "node-0037 simulation-limit", "node-0001 simulation-limit",
                            "node-0174 simulation-limit", "node-0149 simulation-limit", "node-0138 simulation-limit",
                            "node-0125 simulation-limit", "node-0113 simulation-limit", "node-0102 simulation-limit",
                            "node-0090 simulation-limit", "node-0041 simulation-limit", "node-0214 simulation-limit",
                            "node-0211 simulation-limit", "node-0178 simulation-limit", "node-0142 simulation-limit",
                            "node-0139 simulation-limit", "node-0106 simulation-limit", "node-0103 simulation-limit",
                            "node-0067 simulation-limit", "node-0034 simulation-limit", "node-0031 simulation-limit",
                            "node-0218 simulation-limit", "node-0146 simulation-limit", "node-0074 simulation-limit",
                            "node-0002 simulation-limit", "node-0205 simulation-limit", "node-0025 simulation-limit",
                            "node-0222 simulation-limit", "node-0216 simulation-limit", "node-0186 simulation-limit",
                            "node-0179 simulation-limit", "node-0144 simulation-limit", "node-0108 simulation-limit",
                            "node-0107 simulation-limit", "node-0072 simulation-limit", "node-0071 simulation-limit",
                            "node-0042 simulation-limit", "node-0036 simulation-limit", "node-0006 simulation-limit",
                            "node-0226 simulation-limit", "node-0118 simulation-limit", "node-0082 simulation-limit",
                            "node-0046 simulation-limit", "node-0219 simulation-limit", "node-0194 simulation-limit",
                            "node-0183 simulation-limit", "node-0170 simulation-limit", "node-0158 simulation-limit",
                            "node-0147 simulation-limit", "node-0135 simulation-limit", "node-0122 simulation-limit",
                            "node-0111 simulation-limit", "node-0105 simulation-limit", "node-0086 simulation-limit",
                            "node-0014 simulation-limit", "node-0003 simulation-limit", "node-0145 simulation-limit",
                            "node-0223 simulation-limit", "node-0184 simulation-limit", "node-0151 simulation-limit",
                            "node-0148 simulation-limit", "node-0112 simulation-limit", "node-0079 simulation-limit",
                            "node-0043 simulation-limit", "node-0007 simulation-limit", "node-0004 simulation-limit",
                            "node-0210 simulation-limit", "node-0185 simulation-limit", "node-0030 simulation-limit",
                            "node-0005 simulation-limit", "node-0227 simulation-limit", "node-0191 simulation-limit",
                            "node-0119 simulation-limit", "node-0083 simulation-limit", "node-0047 simulation-limit",
                            "node-0175 simulation-limit", "node-0070 simulation-limit", "node-0224 simulation-limit",
                            "node-0188 simulation-limit", "node-0159 simulation-limit", "node-0123 simulation-limit",
                            "node-0116 simulation-limit", "node-0087 simulation-limit", "node-0051 simulation-limit",
                            "node-0008 simulation-limit", "node-0199 simulation-limit", "node-0163 simulation-limit",
                            "node-0127 simulation-limit", "node-0239 simulation-limit", "node-0215 simulation-limit",
                            "node-0203 simulation-limit", "node-0192 simulation-limit", "node-0180 simulation-limit",
                            "node-0167 simulation-limit", "node-0150 simulation-limit", "node-0131 simulation-limit",
                            "node-0084 simulation-limit", "node-0059 simulation-limit", "node-0048 simulation-limit",
                            "node-0035 simulation-limit", "node-0023 simulation-limit", "node-0012 simulation-limit",
                            "node-0010 simulation-limit", "node-0232 simulation-limit", "node-0196 simulation-limit",
                            "node-0124 simulation-limit", "node-0016 simulation-limit", "node-0230 simulation-limit",
                            "node-0075 simulation-limit", "node-0050 simulation-limit", "node-0236 simulation-limit",
                            "node-0164 simulation-limit", "node-0128 simulation-limit", "node-0092 simulation-limit",
                            "node-0056 simulation-limit", "node-0115 simulation-limit", "node-0040 simulation-limit",
                            "node-0204 simulation-limit", "node-0168 simulation-limit", "node-0096 simulation-limit",
                            "node-0024 simulation-limit", "node-0155 simulation-limit", "node-0172 simulation-limit",
                            "node-0136 simulation-limit", "node-0064 simulation-limit", "node-0028 simulation-limit",
                            "node-0212 simulation-limit", "node-0080 simulation-limit", "node-0068 simulation-limit",
                            "node-0032 simulation-limit", "node-0015 simulation-limit", "node-0235 simulation-limit",
                            "node-0120 simulation-limit", "node-0160 simulation-limit", "node-0200 simulation-limit",
                            "node-0020 simulation-limit", "node-0060 simulation-limit", "node-0100 simulation-limit",
                            "node-0140 simulation-limit", "node-0189 delete", "node-0153 delete", "node-0081 delete",
                            "node-0009 delete", "node-0229 delete", "node-0193 delete", "node-0157 delete",
                            "node-0049 delete", "node-0233 delete", "node-0198 delete"]}}
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
