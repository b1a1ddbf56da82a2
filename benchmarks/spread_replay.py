"""How many zone-spread pods of a plan kube-scheduler would refuse where karpy put them.

Solves Karpenter's diverse mix (``scheduling_karpenter.diverse``: a fifth of the pods carry a
hard zone spread whose selector also matches pods without it) on Karpenter's 400 fake types, the
AWS catalog and the KWOK catalog, first fit and under the predicted size cap (what
``Scheduler.solve`` plans for such a batch), and checks every zone-spread pod two ways.
A claim whose zone is still open when the plan is made is put in the zone the launch kernel
``cheapest_launchable`` picks for it (named ``<nodepool>-<n>``), as it would launch:

* ``replay``: in the order karpy placed the pods, a zone-spread pod is refused when the matching
  pods placed before it, each in its claim's zone, leave its zone above ``maxSkew`` over the least
  loaded (kube-scheduler's PodTopologySpread check, if it bound the pods in that order);
* ``final``: with every other pod bound, its zone is above ``maxSkew`` over the least loaded: the
  pods kube-scheduler refuses there for good, whatever the order (the others it binds on retry).

``--open-nowhere`` counts open claims nowhere instead (this benchmark's earlier reading, under
which first fit refused 0-5 pods: its ~990 open claims, launched, skew the zones as much as the
capped plan's). The placement order is read by wrapping ``Topology.record`` (measurement
only; nothing is timed).

Run: ``.venv/bin/python benchmarks/spread_replay.py [N] [--catalog fake aws kwok] [--open-nowhere]``
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import cost
from scheduling_karpenter import CATALOG, NODEPOOL, diverse

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_ZONE
from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog
from karpy_core.scheduling import run as run_mod
from karpy_core.scheduling import scheduler as sched
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.scheduling.template import template_from_nodepool
from karpy_core.scheduling.topology import Topology
from karpy_core.utils.selectors import selector_matches

ORDER: list[tuple[PodInfo | None, str, dict[str, str], str | None]] = []
"""(pod when placed by the run with its constraints, else None; namespace; labels; claim hostname)."""
_current: list[PodInfo | None] = [None]


def _install() -> None:
    record, run_record = Topology.record, run_mod.SchedulingRun.record

    def topo_record(self: Topology, namespace: str, labels: Any, where: Any, anti_terms: Any = ()) -> None:
        ORDER.append((_current[0], namespace, dict(labels), where.labels.get(LABEL_HOSTNAME)))
        _current[0] = None
        record(self, namespace, labels, where, anti_terms)

    def sched_record(self: Any, pod: PodInfo, att: Any, labels: Any, taints: Any) -> None:
        _current[0] = pod
        run_record(self, pod, att, labels, taints)

    Topology.record = topo_record  # type: ignore[method-assign]
    run_mod.SchedulingRun.record = sched_record  # type: ignore[method-assign]


def zones_of(new_claims: Any, open_nowhere: bool) -> dict[str, str]:
    """Claim hostname -> zone: its settled zone, else (unless ``open_nowhere``) the zone
    ``cheapest_launchable`` launches it in."""
    from karpy_core.cloudprovider.launch import LaunchConstraints, cheapest_launchable

    out = {}
    for i, claim in enumerate(new_claims):
        req = claim.requirements.get(LABEL_ZONE)
        if req is not None and not req.complement and len(req.values) == 1:
            out[claim.hostname] = next(iter(req.values))
        elif not open_nowhere:
            constraints = LaunchConstraints(f"{claim.nodepool}-{i:05d}", claim.requirements, claim.requests)
            out[claim.hostname] = cheapest_launchable(claim.instance_types, constraints).offering.zone
    return out


def _skewed(pod: PodInfo, zone: str, placed: list[tuple[str, dict[str, str], str]], zones: set[str]) -> int:
    """Hard zone spreads of ``pod`` its ``zone`` breaks among ``placed`` (namespace, labels, zone), ``pod`` excluded."""
    out = 0
    for c in pod.spread:
        if c.key != LABEL_ZONE or not c.hard:
            continue
        sel = json.loads(c.selector)
        counts = dict.fromkeys(zones, 0)
        for ns2, l2, z2 in placed:
            if z2 in counts and ns2 == pod.namespace and selector_matches(sel, l2):
                counts[z2] += 1
        me = 1 if selector_matches(sel, pod.labels) else 0
        out += counts[zone] + me - min(counts.values()) > c.max_skew
    return out


def refused(new_claims: Any, zones: set[str], open_nowhere: bool = False) -> tuple[int, int, int]:
    """(zone-spread pods refused replaying :data:`ORDER`, refused with every other pod bound, checked)."""
    zone_of = zones_of(new_claims, open_nowhere)
    seen: list[tuple[str, dict[str, str], str]] = []
    bad = checked = 0
    spread: list[tuple[int, PodInfo, str]] = []
    for pod, ns, labels, host in ORDER:
        z = zone_of.get(host or "")
        if pod is not None and z is not None and any(c.key == LABEL_ZONE and c.hard for c in pod.spread):
            checked += 1
            bad += _skewed(pod, z, seen, zones) > 0
            spread.append((len(seen), pod, z))
        if z is not None:
            seen.append((ns, labels, z))
    totals: dict[str, dict[str, int]] = {}
    final = 0
    for _, pod, z in spread:
        broken = False
        for c in pod.spread:
            if c.key != LABEL_ZONE or not c.hard:
                continue
            sel = json.loads(c.selector)
            key = pod.namespace + "/" + c.selector
            if key not in totals:
                totals[key] = dict.fromkeys(zones, 0)
                for ns2, l2, z2 in seen:
                    if z2 in totals[key] and ns2 == pod.namespace and selector_matches(sel, l2):
                        totals[key][z2] += 1
            me = 1 if selector_matches(sel, pod.labels) else 0
            others = dict(totals[key])
            others[z] -= me  # every other pod bound, then this one
            broken |= others[z] + me - min(others.values()) > c.max_skew
        final += broken
    return bad, final, checked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=5000)
    ap.add_argument("--catalog", nargs="+", default=["fake", "aws", "kwok"], choices=["fake", "aws", "kwok"])
    ap.add_argument("--open-nowhere", action="store_true", help="count claims whose zone is open nowhere")
    a = ap.parse_args()
    _install()
    print(f"{'catalog':8} {'pods':>6} {'plan':>10} {'USD/h':>10} {'replay':>7} {'final':>6} {'checked':>8}")
    for cat in a.catalog:
        if cat == "fake":
            its, pool = load_kwok_catalog(CATALOG), NODEPOOL
        else:
            its = load_aws_catalog() if cat == "aws" else load_kwok_catalog(cost.KWOK)
            pool = cost.nodepool(cat)
        pods = [pod_info(p) for p in diverse(a.n)]
        queue = sched.queue_order(pods)
        constrained = [p for p in queue if not sched._plain(p)]
        s = sched.Scheduler([template_from_nodepool(pool, its)], sizing=True)
        caps = sched.size_caps(s.inputs.tables.values(), constrained)
        spread_pod = next(p for p in constrained if any(c.key == LABEL_ZONE for c in p.spread))
        for cap in (None, sched.predicted_cap(s.inputs.tables.values(), pods, caps)):
            ORDER.clear()
            results, usd, run = s._solve_once(pods, queue, cap, caps)
            zones = run.pod_domains(spread_pod, {LABEL_ZONE}).get(LABEL_ZONE, set())
            bad, final, checked = refused(results.new_claims, zones, a.open_nowhere)
            label = "first fit" if cap is None else f"cap {cap}"
            print(f"{cat:8} {a.n:>6} {label:>10} {usd:>10.2f} {bad:>7} {final:>6} {checked:>8}", flush=True)


if __name__ == "__main__":
    main()
