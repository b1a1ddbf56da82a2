"""Cost benchmark: karpy's plan against Karpenter-style FFD and the exact optimum (issue 13).

For each workload (5 to 5,000 pods) and catalog (karpy's AWS catalog with the default scenario's
general-purpose NodePool; Karpenter's KWOK catalog, ``examples/catalogs/kwok-instance-types.json``, with an on-demand
amd64/linux NodePool) it prints:

* karpy: USD/hour (cheapest offering per new NodeClaim), nodes, solve seconds (only
  ``Scheduler.solve`` is timed, no tracing), and zone spread of the new claims (zones used, max/min
  claims per zone, by the zone the launch kernel ``cheapest_launchable`` picks for each claim,
  named ``<nodepool>-<n>``: equal-price zones rotate by claim name);
* FFD: :func:`costref.ffd_plan` (Karpenter's first-fit decreasing, cheapest type per claim);
* ref: the MILP optimum (``opt``; for zone-spread-only workloads the exact optimum by zone,
  :func:`costref.zone_split`), the MILP's best plan with its dual bound when the time limit hit
  (``milp<=``, ratios then against the bound), or the LP bound (``LP``) for workloads with topology
  constraints or too big for the bin MILP. See :mod:`costref` for the formulations; every
  reference sees karpy's own type table (allocatable minus DaemonSet overhead, max-pods) and pod
  requests and selectors.

End to end (workloads of at most ``--e2e-pods`` pods, default 1,000): the same manifests run
through ``karpy simulate``'s simulator with disruption on, until no pod and no disruption is
pending (:func:`end_to_end`): ``e2e $/h`` is what was launched (before the first disruption),
``settled`` what runs at the end, ``claims`` the NodeClaims created in all, ``disr`` the nodes
disrupted, ``e2e/ref`` settled against the reference. The first-batch columns time and price
one ``Scheduler.solve``; these see every later pass, kube-scheduler's binding and consolidation.

``--overlay FILE`` (repeatable) applies the NodeOverlays in FILE to the catalog first (as the
``NodeOverlay`` gate does): every plan and reference is then priced, and sized, by the overlaid types.

Run: ``.venv/bin/python benchmarks/cost.py [--only NAME...] [--catalog aws kwok] [--time-limit 15] [--overlay FILE]``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from importlib import resources
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import costref  # noqa: E402
from scheduling_karpenter import diverse  # noqa: E402

from karpy_core.utils.kubeyaml import safe_load_all  # noqa: E402

KWOK = ROOT / "examples/catalogs/kwok-instance-types.json"
SEEDS = ROOT / "tests/data/seeds"
CPUS = ["100m", "250m", "500m", "1", "1500m", "2", "3500m"]
MEMS = ["128Mi", "256Mi", "512Mi", "1Gi", "2Gi", "4Gi", "6Gi"]
KWOK_NODEPOOL = {
    "metadata": {"name": "kwok"},
    "spec": {"template": {"spec": {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}],
        "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}}}},
}
DAEMONSETS = [("kube-proxy", "100m", "64Mi"), ("aws-node", "25m", "128Mi"), ("node-exporter", "100m", "180Mi"),
              ("fluent-bit", "200m", "256Mi")]


def _pod(name: str, labels: dict[str, str], spec: dict[str, Any], owner: str, kind: str = "ReplicaSet") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": dict(labels), "creationTimestamp": "2026-01-01T00:00:00Z",
                         "ownerReferences": [{"kind": kind, "name": owner, "controller": True}]}, "spec": spec}


def expand(docs: list[dict[str, Any]], replicas: dict[str, int] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:  # noqa: E501
    """(pods, DaemonSet pods (one per DaemonSet), NodePools) from manifests: ``spec.replicas`` copies
    of each Deployment/StatefulSet/ReplicaSet template (``replicas`` overrides by name)."""
    pods: list[dict[str, Any]] = []
    ds: list[dict[str, Any]] = []
    pools: list[dict[str, Any]] = []
    for d in docs:
        if not d:
            continue
        kind, name = d.get("kind"), d["metadata"]["name"]
        if kind == "NodePool":
            pools.append(d)
        elif kind in ("Deployment", "StatefulSet", "ReplicaSet", "DaemonSet"):
            tmpl = d["spec"]["template"]
            labels = (tmpl.get("metadata") or {}).get("labels") or {}
            if kind == "DaemonSet":
                ds.append(_pod(name, labels, tmpl["spec"], name, "DaemonSet"))
                continue
            n = (replicas or {}).get(name, d["spec"].get("replicas", 1))
            pods.extend(_pod(f"{name}-{i}", labels, tmpl["spec"], name) for i in range(n))
    return pods, ds, pools


def _deploy(name: str, cpu: str, mem: str, n: int, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": mem}}}], **(extra or {})}
    return {"kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": n, "template": {"metadata": {"labels": {"app": name}}, "spec": spec}}}  # noqa: E501


def _daemonsets() -> list[dict[str, Any]]:
    return [{"kind": "DaemonSet", "metadata": {"name": n}, "spec": {"template": {"metadata": {"labels": {"app": n}}, "spec": {
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "c", "resources": {"requests": {"cpu": c, "memory": m}}}]}}}} for n, c, m in DAEMONSETS]


def mix(shapes: int, total: int, seed: int, *, extra: Any = None) -> list[dict[str, Any]]:
    """``shapes`` Deployments with drawn cpu/memory splitting ``total`` replicas (seeded)."""
    rng = random.Random(seed)
    weights = [rng.randint(1, 10) for _ in range(shapes)]
    counts = [max(1, total * w // sum(weights)) for w in weights]
    counts[0] += total - sum(counts)
    return [_deploy(f"mix{i}", rng.choice(CPUS), rng.choice(MEMS), counts[i], extra(i) if extra else None) for i in range(shapes)]


def _yaml(path: Path | str) -> list[dict[str, Any]]:
    return [d for d in safe_load_all(Path(path).read_text()) if d]


def _default_docs() -> list[dict[str, Any]]:
    return [d for d in safe_load_all(resources.files("karpy_core.data").joinpath("default-scenario.yaml").read_text()) if d]


def _spread(key: str) -> Any:
    return lambda i: {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                                      "labelSelector": {"matchLabels": {"app": f"mix{i}"}}}]}


def workloads(catalog: str) -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]]:
    """(name, manifests, extra NodePool labels ..., topology note) for every workload."""
    zone = "us-east-1a" if catalog == "aws" else "test-zone-a"
    family = ("karpenter.k8s.aws/instance-category", "r") if catalog == "aws" else ("karpenter.kwok.sh/instance-family", "m")
    sel = {0: {"nodeSelector": {"topology.kubernetes.io/zone": zone}}, 1: {"nodeSelector": {family[0]: family[1]}}}
    out: list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]] = [
        ("default", [d for d in _default_docs() if d.get("kind") != "NodePool"], [], None),
        ("boutique", _yaml(ROOT / "examples/workloads/online-boutique.yaml"), [], None),
        ("seed004", _yaml(SEEDS / "004-karpenter-demo.yaml"), [], None),
    ]
    for n in (5, 50, 500, 5000):
        docs = _yaml(ROOT / "examples/workloads/inflate.yaml")
        docs[0]["spec"]["replicas"] = n
        out.append((f"inflate-{n}", docs, [], None))
    out += [
        ("mix3-30", mix(3, 30, 1), [], None),
        ("mix6-120", mix(6, 120, 2), [], None),
        ("mix6-120+ds", mix(6, 120, 2) + _daemonsets(), [], None),
        ("mix12-1000", mix(12, 1000, 3), [], None),
        ("mix12-1000+ds", mix(12, 1000, 3) + _daemonsets(), [], None),
        ("mix8-5000+ds", mix(8, 5000, 4) + _daemonsets(), [], None),
        ("mix6-60-selectors", mix(6, 60, 5, extra=lambda i: sel.get(i)), [], None),
        ("mix6-60-zspread", mix(6, 60, 6, extra=_spread("topology.kubernetes.io/zone")), [], "spread"),
        ("mix6-300-hspread+ds", mix(6, 300, 7, extra=_spread("kubernetes.io/hostname")) + _daemonsets(), [], "spread"),
        ("diverse-500", [], diverse(500), "spread+affinity"),
        ("diverse-5000", [], diverse(5000), "spread+affinity"),
        # without the zone-spread fifth: the large batches planned under a predicted size cap
        ("diverse-nozone-5000", [], [p for p in diverse(5000) if not p["metadata"]["name"].startswith("zspread")], "spread+affinity"),
    ]
    return out + new_workloads(catalog)


def _with_requirements(pool: dict[str, Any], name: str, changes: dict[str, list[str]], *, weight: int | None = None,
                       limits: dict[str, str] | None = None) -> dict[str, Any]:
    """A copy of ``pool`` named ``name`` whose requirements on the keys of ``changes`` are ``In``
    those values (added where missing), with ``weight`` and ``limits`` when given."""
    tspec = pool["spec"]["template"]["spec"]
    reqs = [r for r in tspec["requirements"] if r["key"] not in changes]
    reqs += [{"key": k, "operator": "In", "values": v} for k, v in changes.items()]
    spec: dict[str, Any] = {**pool["spec"], "template": {**pool["spec"]["template"], "spec": {**tspec, "requirements": reqs}}}
    if weight is not None:
        spec["weight"] = weight
    if limits is not None:
        spec["limits"] = limits
    return {"kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def _statefulset(name: str, n: int, cpu: str, mem: str, extra: dict[str, Any]) -> dict[str, Any]:
    d = _deploy(name, cpu, mem, n, extra)
    return {**d, "kind": "StatefulSet", "spec": {**d["spec"], "serviceName": name}}


def new_workloads(catalog: str) -> list[tuple[str, list[dict[str, Any]], list[dict[str, Any]], str | None]]:
    """Workloads unlike the first ones (issue 27): memory-heavy, odd cpu/memory ratios, two
    NodePools with weights and limits (the same types in both; a limited general-purpose
    NodePool preferred over a compute one: NodePool limits are in the MILP), spot only, big DaemonSets, arm64 and amd64 selectors, a
    StatefulSet with zone spread and host ports, 450 mixed pods. A workload's own NodePools (in
    its manifests) replace the catalog's."""
    base = nodepool(catalog)
    ct = "karpenter.sh/capacity-type"
    # a general/memory family NodePool preferred up to 24 cores, a compute family one after it
    fam_key = "karpenter.k8s.aws/instance-category" if catalog == "aws" else "karpenter.kwok.sh/instance-family"
    general, compute = (["m", "r"], ["c"]) if catalog == "aws" else (["m", "s"], ["c"])
    arch = "kubernetes.io/arch"
    rng = random.Random(11)
    memheavy = [_deploy(f"mem{i}", rng.choice(["250m", "500m", "1"]), rng.choice(["3Gi", "6Gi", "12Gi", "20Gi"]), n)
                for i, n in enumerate([14, 10, 8, 6])]
    odd = [_deploy(f"odd{i}", c, m, n) for i, (c, m, n) in enumerate(
        [("700m", "5Gi", 16), ("1300m", "900Mi", 14), ("2700m", "3300Mi", 10), ("300m", "7Gi", 12), ("1900m", "11Gi", 8),
         ("450m", "450Mi", 12)])]
    big_ds = [{"kind": "DaemonSet", "metadata": {"name": n}, "spec": {"template": {"metadata": {"labels": {"app": n}}, "spec": {
        "tolerations": [{"operator": "Exists"}], "containers": [{"name": "c", "resources": {"requests": {"cpu": c, "memory": m}}}]}}}}
        for n, c, m in (("log-agent", "500m", "1Gi"), ("security-agent", "1", "2Gi"))]
    both = _with_requirements(base, "multiarch", {arch: ["amd64", "arm64"]})
    archs = [_deploy(f"arch{i}", c, m, n, {"nodeSelector": {arch: a}} if a else None) for i, (a, c, m, n) in enumerate(
        [("arm64", "1", "2Gi", 20), ("amd64", "500m", "1Gi", 20), ("arm64", "2", "4Gi", 8), (None, "250m", "512Mi", 16)])]
    zone_key = "topology.kubernetes.io/zone"
    sts = _statefulset("kafka", 12, "2", "8Gi", {
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": zone_key, "whenUnsatisfiable": "DoNotSchedule",
                                       "labelSelector": {"matchLabels": {"app": "kafka"}}}],
        "containers": [{"name": "c", "ports": [{"containerPort": 9092, "hostPort": 9092}],
                        "resources": {"requests": {"cpu": "2", "memory": "8Gi"}}}]})
    return [
        ("memheavy-38", memheavy, [], None),
        ("oddratio-72", odd, [], None),
        ("2pools-limits", [_with_requirements(base, "preferred", {}, weight=50, limits={"cpu": "24"}),
                           _with_requirements(base, "fallback", {}, weight=10), *mix(6, 120, 8)], [], None),
        ("limit-general-first", [_with_requirements(base, "general", {fam_key: general}, weight=50, limits={"cpu": "24"}),
                                 _with_requirements(base, "compute", {fam_key: compute}, weight=10), *mix(6, 120, 2)], [], None),
        ("spot-only", [_with_requirements(base, "spot", {ct: ["spot"]}), *mix(6, 120, 9)], [], None),
        ("bigds-120", [*mix(6, 120, 10), *big_ds], [], None),
        ("arch-64", [both, *archs], [], None),
        ("sts-zspread-hostport", [sts, *mix(4, 60, 12)], [], "spread+ports"),
        ("mix10-450", mix(10, 450, 13), [], None),
    ]


def nodepool(catalog: str) -> dict[str, Any]:
    """The default scenario's general-purpose NodePool (AWS) or :data:`KWOK_NODEPOOL`."""
    if catalog == "kwok":
        return KWOK_NODEPOOL
    return next(d for d in _default_docs() if d.get("kind") == "NodePool")


def run(catalog: str, name: str, docs: list[dict[str, Any]], raw_pods: list[dict[str, Any]], topo: str | None,
        instance_types: list[Any], time_limit: float, milp_pods: int, overlays: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    from karpy_core.cloudprovider.launch import LaunchConstraints, cheapest_launchable
    from karpy_core.cloudprovider.overlay import PoolTypes, compile_overlays
    from karpy_core.errors import InsufficientCapacityError
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.scheduler import Scheduler
    from karpy_core.scheduling.template import template_from_nodepool, type_tables

    pods_raw, ds_raw, own_pools = expand(docs)
    pods_raw += raw_pods
    pool = own_pools[0] if own_pools else nodepool(catalog)
    if name == "seed004":  # the demo selects workload-type=karpenter, which seed 004's NodePool sets as a template label
        pool = {**pool, "spec": {**pool["spec"], "template": {**pool["spec"]["template"], "metadata": {"labels": {"workload-type": "karpenter"}}}}}  # noqa: E501
    if overlays:
        labels = ((pool["spec"]["template"].get("metadata") or {}).get("labels")) or {}
        store = compile_overlays(overlays, [PoolTypes(pool["metadata"]["name"], labels, instance_types)])
        if store.invalid or store.conflicts:
            print(f"      overlays not applied: invalid {store.invalid}, in conflict {store.conflicts}")
        instance_types = store.apply_all(pool["metadata"]["name"], instance_types)
    template = template_from_nodepool(pool, instance_types)
    templates = [template, *(template_from_nodepool(p, instance_types) for p in own_pools[1:])]
    pods = [pod_info(p) for p in pods_raw]
    dss = [pod_info(p) for p in ds_raw]
    tables = type_tables(templates, dss)
    scheduler = Scheduler(templates, daemonsets=dss, tables=tables, sizing=True)  # as the provisioner runs it
    t0 = time.perf_counter()
    results = scheduler.solve(pods)
    solve_s = time.perf_counter() - t0
    claims = results.new_claims
    karpy_cost = sum(c.cheapest_offering_price() for c in claims)
    zones: dict[str, int] = {z: 0 for z in sorted({z for z, _ in tables[template.name].offering_columns})}
    for i, c in enumerate(claims):
        # the zone the launch kernel picks (equal-price zones rotated by the claim's name)
        try:
            o = cheapest_launchable(c.instance_types, LaunchConstraints(f"{c.nodepool}-{i:05d}", c.requirements, c.requests)).offering
        except InsufficientCapacityError:
            continue
        zones[o.zone] = zones.get(o.zone, 0) + 1
    used = [v for v in zones.values() if v]
    # several NodePools: their kinds pooled, each shape on the NodePools its weights allow
    # (optimum.build_problem; limits are modelled in the MILP)
    limited = any(t.limits for t in templates)
    problem = costref.build_problem([tables[t.name] for t in templates], pods, limits=limited)
    ffd = costref.ffd_plan(problem)
    ref_kind, ref, bound, milp_s, note = "LP", None, None, 0.0, ""
    model = problem.topology
    split = costref.zone_split(problem, time_limit=max(60.0, 6 * time_limit)) if len(pods) <= milp_pods else None
    if split is not None and split.optimal:
        # zone spread only: the exact optimum by zone (optimum.zone_split), where the bin MILP over
        # every zone's kinds does not close within its time limit
        ref_kind, ref, bound, milp_s = "opt", split.value, split.value, split.seconds
        note = "zone split: " + " ".join(f"{v}x{k}" for k, v in split.plan.items())
    elif not model.relaxed and len(pods) <= milp_pods:
        # karpy's plan is feasible for the MILP's model (which keeps the topology rules it lists)
        # when nothing is pending: a tighter upper bound means fewer bins, so HiGHS proves the
        # optimum sooner. FFD ignores topology: with rules modelled its plan is no upper bound.
        fallback = costref.upper_bound_alone(problem) if model.constrained else ffd.cost
        ub = min(fallback, karpy_cost) if not results.errors else fallback
        if limited:  # FFD ignores the limits: only karpy's plan is one within them
            ub = karpy_cost if not results.errors else fallback * 2
        m = costref.solve_milp(problem, ub * (1 + 1e-6), time_limit=time_limit)
        if m is not None:
            milp_s = m.seconds
            if m.optimal and m.value is not None:
                ref_kind, ref, bound, note = "opt", m.value, m.value, " ".join(f"{v}x{k}" for k, v in m.plan.items())
            else:
                # the time limit hit: the best plan known (MILP incumbent or FFD) and the best bound
                ref_kind, bound = "milp<=", max(m.bound, costref.lp_bound(problem))
                best = ffd.cost if not model.constrained else fallback
                ref = min(m.value if m.value is not None else best, best)  # the best plan not karpy's
                note = f"time limit; bound {bound:.4f}, gap {100 * (ref / bound - 1):.1f}%"
    if ref_kind == "LP":
        t1 = time.perf_counter()
        bound = costref.lp_bound(problem)
        if len(pods) <= milp_pods:
            cover = costref.cover_bound(problem, time_limit=time_limit)
            bound = max(bound, cover[0]) if cover else bound
        milp_s = time.perf_counter() - t1
        note = (f"not modelled: {', '.join(model.relaxed)}" if model.relaxed else "too big for the bin MILP")
    karpy_types: dict[str, int] = {}
    for c in claims:
        if c.instance_types:
            karpy_types[c.instance_types[0].name] = karpy_types.get(c.instance_types[0].name, 0) + 1
    return {
        "catalog": catalog, "workload": name, "pods": len(pods), "pending": len(results.errors), "ds": len(dss),
        "karpy": karpy_cost, "karpy_nodes": len(claims), "solve_s": solve_s, "zones": len(used),
        "zmax": max(used) if used else 0, "zmin": min(zones.values()) if zones else 0,
        "ffd": ffd.cost, "ffd_nodes": len(ffd.nodes), "ref_kind": ref_kind, "ref": ref, "bound": bound,
        "ref_s": milp_s, "note": note, "karpy_types": karpy_types,
    }


def e2e_objects(catalog: str, name: str, docs: list[dict[str, Any]], raw_pods: list[dict[str, Any]],
                pool: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The objects ``karpy simulate`` is given for a workload: the catalog's NodePool (or ``pool``;
    the KWOK one names the default EC2NodeClass, which the simulated provider accepts for any
    catalog), the default EC2NodeClass, the workload manifests (apiVersion and selector filled
    in) and the raw pods as one Deployment per distinct (labels, spec), labelled
    ``karpy-bench-group`` (selectors of the pods' own rules match their labels as before)."""
    own = [d for d in docs if d and d.get("kind") == "NodePool"]
    base = pool or (own[0] if own else nodepool(catalog))
    if name == "seed004":
        base = {**base, "spec": {**base["spec"], "template": {**base["spec"]["template"], "metadata": {"labels": {"workload-type": "karpenter"}}}}}  # noqa: E501
    def kwok_ref(p: dict[str, Any]) -> dict[str, Any]:
        if catalog != "kwok":
            return p
        tspec = {**p["spec"]["template"]["spec"], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}}
        return {**p, "spec": {**p["spec"], "template": {**p["spec"]["template"], "spec": tspec}}}

    objs: list[dict[str, Any]] = [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
                                   **{k: v for k, v in kwok_ref(p).items() if k != "kind"}} for p in [base, *own[1:]]]
    objs += [d for d in _default_docs() if d.get("kind") == "EC2NodeClass"]
    versions = {"Deployment": "apps/v1", "StatefulSet": "apps/v1", "ReplicaSet": "apps/v1", "DaemonSet": "apps/v1"}
    for d in docs:
        if not d or d.get("kind") not in versions:
            continue
        d = {**d, "apiVersion": d.get("apiVersion") or versions[d["kind"]], "spec": dict(d["spec"])}
        if d["kind"] != "NodePool":
            d["spec"].setdefault("selector", {"matchLabels": dict((d["spec"]["template"].get("metadata") or {}).get("labels") or {})})
        objs.append(d)
    # raw pods (Karpenter's diverse mix) as Deployments of their distinct (labels, spec): an
    # evicted bare pod would be gone for good, and the settled cost would price fewer pods
    groups: dict[str, tuple[dict[str, Any], int]] = {}
    for p in raw_pods:
        shape = {"labels": (p.get("metadata") or {}).get("labels") or {}, "spec": p.get("spec") or {}}
        key = json.dumps(shape, sort_keys=True)
        groups[key] = (shape, groups[key][1] + 1 if key in groups else 1)
    for i, (shape, n) in enumerate(groups.values()):
        labels = {**shape["labels"], "karpy-bench-group": str(i)}
        objs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": f"raw{i}", "namespace": "default"},
                     "spec": {"replicas": n, "selector": {"matchLabels": {"karpy-bench-group": str(i)}},
                              "template": {"metadata": {"labels": labels}, "spec": shape["spec"]}}})
    return objs


def end_to_end(catalog: str, objs: list[dict[str, Any]], max_hours: float = 6.0) -> dict[str, Any]:
    """Run ``objs`` through the simulator as ``karpy simulate`` does, with disruption on, until no
    pod is pending and no disruption is pending (or ``max_hours`` of simulated time). Returns
    ``launched`` (USD/hour once provisioning settled, before the first disruption), ``settled``
    (USD/hour at the end), ``claims`` (NodeClaims created in all), ``launched_nodes``,
    ``settled_nodes``, ``disrupted`` (nodes disrupted), ``pending`` (pods pending at the end),
    ``lost`` (bare pods that an eviction removed for good: no controller recreates them, so
    ``settled`` prices fewer pods) and ``seconds`` (wall time of the run)."""
    import asyncio

    from karpy_core.cli import _load_sim_provider
    from karpy_core.sim.simulator import Simulator

    provider, clock, cluster, _ = _load_sim_provider("simulated", None, str(KWOK) if catalog == "kwok" else None, None)
    sim = Simulator(provider, clock=clock, cluster=cluster, disruption=True)
    sim.apply(objs)
    t0 = time.perf_counter()
    asyncio.run(sim.run(max_seconds=max_hours * 3600))
    seconds = time.perf_counter() - t0
    kinds = [e.kind for e in sim.events]
    first_disrupt = next((e.t for e in sim.events if e.kind == "disrupt"), None)
    samples = sim.cost_over_time
    before = [s for s in samples if first_disrupt is None or s["t"] < first_disrupt] or samples[:1]
    launched = max(before, key=lambda s: s["cost_per_hour"]) if before else {"cost_per_hour": 0.0, "nodes": 0}
    settled = samples[-1] if samples else {"cost_per_hour": 0.0, "nodes": 0}
    pods = [p for p in cluster.objects("Pod")
            if not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or ())]
    pending = sum(1 for p in pods if not (p.get("spec") or {}).get("nodeName"))
    expected = sum(int(o["spec"].get("replicas", 1)) for o in objs if o.get("kind") in ("Deployment", "StatefulSet", "ReplicaSet"))
    expected += sum(1 for o in objs if o.get("kind") == "Pod")
    return {"launched": launched["cost_per_hour"], "launched_nodes": launched["nodes"], "settled": settled["cost_per_hour"],
            "settled_nodes": settled["nodes"], "claims": kinds.count("nodeclaim-create"), "disrupted": kinds.count("disrupt"),
            "pending": pending, "lost": max(0, expected - len(pods)), "seconds": seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--catalog", nargs="+", default=["aws", "kwok"], choices=["aws", "kwok"])
    parser.add_argument("--only", nargs="*", help="workload names")
    parser.add_argument("--time-limit", type=float, default=15.0, help="HiGHS seconds per MILP")
    parser.add_argument("--milp-pods", type=int, default=1000, help="larger workloads get the LP bound")
    parser.add_argument("--show-types", action="store_true", help="print karpy's and the optimum's node types")
    parser.add_argument("--overlay", action="append", default=[], metavar="FILE",
                        help="NodeOverlay manifests applied to the catalog (prices and capacities), repeatable")
    parser.add_argument("--e2e-pods", type=int, default=1000,
                        help="run workloads of at most this many pods end to end in the simulator (0: none)")
    args = parser.parse_args()
    overlays = [d for f in args.overlay for d in _yaml(f) if d and d.get("kind") == "NodeOverlay"]
    from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
    from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog

    print(f"{'catalog':<5} {'workload':<20} {'pods':>5} {'ds':>2} | {'karpy $/h':>9} {'nodes':>5} {'solve s':>7} "
          f"{'zones':>5} {'max/min':>7} | {'FFD $/h':>9} {'nodes':>5} | {'ref':<6} {'$/h':>9} {'s':>5} | "
          f"{'karpy/ref':>9} {'FFD/ref':>8} | {'e2e $/h':>9} {'settled':>9} {'claims':>6} {'disr':>4} {'e2e/ref':>7}  note")
    rows = []
    for catalog in args.catalog:
        its = load_aws_catalog() if catalog == "aws" else load_kwok_catalog(KWOK)
        for name, docs, raw, topo in workloads(catalog):
            if args.only and name not in args.only:
                continue
            r = run(catalog, name, docs, raw, topo, its, args.time_limit, args.milp_pods, overlays)
            rows.append(r)
            b = r["bound"] if r["ref_kind"] != "opt" else r["ref"]
            ref_shown = r["ref"] if r["ref"] is not None else r["bound"]
            kr = r["karpy"] / b if b else float("nan")
            fr = r["ffd"] / b if b else float("nan")
            if r["pods"] <= args.e2e_pods and not overlays:
                e = r["e2e"] = end_to_end(catalog, e2e_objects(catalog, name, docs, raw))
                e2e = (f"{e['launched']:>9.4f} {e['settled']:>9.4f} {e['claims']:>6} {e['disrupted']:>4} "
                       f"{(e['settled'] / b if b and not e['lost'] else float('nan')):>7.3f}"
                       + (f" e2e-pending={e['pending']}" if e["pending"] else "") + (f" e2e-lost={e['lost']}" if e["lost"] else ""))
            else:
                e2e = f"{'-':>9} {'-':>9} {'-':>6} {'-':>4} {'-':>7}"
            print(f"{catalog:<5} {name:<20} {r['pods']:>5} {r['ds']:>2} | {r['karpy']:>9.4f} {r['karpy_nodes']:>5} {r['solve_s']:>7.3f} "
                  f"{r['zones']:>5} {str(r['zmax']) + '/' + str(r['zmin']):>7} | {r['ffd']:>9.4f} {r['ffd_nodes']:>5} | "
                  f"{r['ref_kind']:<6} {ref_shown:>9.4f} {r['ref_s']:>5.1f} | {kr:>9.3f} {fr:>8.3f} | {e2e}  {r['note']}"
                  + (f" pending={r['pending']}" if r["pending"] else ""))
            if args.show_types:
                print(f"      karpy: {' '.join(f'{v}x{k}' for k, v in sorted(r['karpy_types'].items()))}")
            sys.stdout.flush()
    exact = [r for r in rows if r["ref_kind"] == "opt"]
    worst = max(rows, key=lambda r: r["karpy"] / r["bound"] if r["bound"] else 0.0)
    def _geo(vals: list[float]) -> float:
        import math
        return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")
    kr_all = [r["karpy"] / r["bound"] for r in rows if r["bound"]]
    fr_all = [r["ffd"] / r["bound"] for r in rows if r["bound"]]
    print(f"summary: {len(rows)} runs, {len(exact)} with a proved optimum; karpy/ref geomean {_geo(kr_all):.3f} "
          f"(worst {worst['catalog']}/{worst['workload']} {worst['karpy'] / worst['bound']:.3f}), FFD/ref geomean {_geo(fr_all):.3f}; "
          f"karpy cheaper than FFD in {sum(r['karpy'] < r['ffd'] - 1e-9 for r in rows)}, equal in "
          f"{sum(abs(r['karpy'] - r['ffd']) <= 1e-9 for r in rows)}, dearer in {sum(r['karpy'] > r['ffd'] + 1e-9 for r in rows)}")
    ran = [r for r in rows if "e2e" in r]
    if ran:
        over = [r for r in ran if r["e2e"]["launched"] > r["karpy"] * (1 + 1e-6)]
        print(f"end to end: {len(ran)} runs; launched = first-batch plan in {len(ran) - len(over)}"
              + (f", more in {', '.join(r['catalog'] + '/' + r['workload'] for r in over)}" if over else "")
              + f"; settled/ref geomean {_geo([r['e2e']['settled'] / r['bound'] for r in ran if r['bound'] and not r['e2e']['lost']]):.3f}"
              + " (runs that lost bare pods to evictions left out)")


if __name__ == "__main__":
    main()
