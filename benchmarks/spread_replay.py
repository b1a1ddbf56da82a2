"""How many zone-spread pods of a plan kube-scheduler would refuse where karpy put them.

Solves Karpenter's diverse mix (``scheduling_karpenter.diverse``: a fifth of the pods carry a
hard zone spread whose selector also matches pods without it) on Karpenter's 400 fake types, the
AWS catalog and the KWOK catalog, first fit and under the predicted size cap, and replays each plan
in the order karpy placed the pods: a zone-spread pod is counted as refused when the matching pods
placed before it, each in its NodeClaim's final zone, leave its zone above ``maxSkew`` over the
least loaded (the check kube-scheduler's PodTopologySpread makes when it binds the pod, if it
binds in that order). Claims whose zone stays open count nowhere. The placement order is read by
wrapping ``Topology.record`` (measurement only; nothing is timed).

Run: ``.venv/bin/python benchmarks/spread_replay.py [N] [--catalog fake aws kwok]``
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


def refused(new_claims: Any, zones: set[str]) -> tuple[int, int]:
    """(zone-spread pods refused, zone-spread pods checked) replaying :data:`ORDER`."""
    zone_of = {}
    for claim in new_claims:
        req = claim.requirements.get(LABEL_ZONE)
        if req is not None and not req.complement and len(req.values) == 1:
            zone_of[claim.hostname] = next(iter(req.values))
    seen: list[tuple[str, dict[str, str], str]] = []
    bad = checked = 0
    for pod, ns, labels, host in ORDER:
        z = zone_of.get(host or "")
        if pod is not None and z is not None:
            for c in pod.spread:
                if c.key != LABEL_ZONE or not c.hard:
                    continue
                sel = json.loads(c.selector)
                counts = dict.fromkeys(zones, 0)
                for ns2, l2, z2 in seen:
                    if z2 in counts and ns2 == ns and selector_matches(sel, l2):
                        counts[z2] += 1
                me = 1 if selector_matches(sel, labels) else 0
                checked += 1
                bad += counts[z] + me - min(counts.values()) > c.max_skew
        if z is not None:
            seen.append((ns, labels, z))
    return bad, checked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", nargs="?", type=int, default=5000)
    ap.add_argument("--catalog", nargs="+", default=["fake", "aws", "kwok"], choices=["fake", "aws", "kwok"])
    a = ap.parse_args()
    _install()
    print(f"{'catalog':8} {'pods':>6} {'plan':>10} {'USD/h':>10} {'refused':>8} {'checked':>8}")
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
            bad, checked = refused(results.new_claims, zones)
            label = "first fit" if cap is None else f"cap {cap}"
            print(f"{cat:8} {a.n:>6} {label:>10} {usd:>10.2f} {bad:>8} {checked:>8}", flush=True)


if __name__ == "__main__":
    main()
