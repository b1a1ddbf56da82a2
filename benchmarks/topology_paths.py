"""Topology batches: the cost and solve time of the variant search against one plan
(issue 27, item 5: "bring every size within 1.2x of the pre-sizing speed").

A batch with at most ``SEARCHED_TOPOLOGY_PODS`` pods carrying topology rules is planned once per
size cap, by marginal cost (twice) and pinned by zone, and the cheapest plan wins
(``Scheduler.solve``); a larger one gets one plan under the predicted size cap
(``Scheduler._solve_large``). For each workload this prints, in one process:

* ``search``: USD/hour and solve seconds with every batch searched (``SEARCHED_TOPOLOGY_PODS``
  raised past the batch);
* ``one plan``: every batch on the one-plan path (``SEARCHED_TOPOLOGY_PODS = 0``), and its cost
  as a ratio of the search's;
* ``shipped``: which of the two the shipped threshold picks.

Workloads: Karpenter's diverse mix at 200, 500 and 620 pods on its 400 fake types
(``scheduling_karpenter.py``) and ``cost.py``'s topology workloads on the AWS and KWOK catalogs.
Each solve is timed alone (best of ``--reps``, a fresh scheduler each), without tracing.

Run: ``.venv/bin/python benchmarks/topology_paths.py [--reps 2]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cost  # noqa: E402
from scheduling_karpenter import CATALOG, NODEPOOL, diverse  # noqa: E402

from karpy_core.scheduling import scheduler as S  # noqa: E402
from karpy_core.scheduling.pod import PodInfo, pod_info  # noqa: E402
from karpy_core.scheduling.template import NodePoolTemplate, template_from_nodepool, type_tables  # noqa: E402


def cases() -> list[tuple[str, NodePoolTemplate, list[PodInfo], list[PodInfo]]]:
    """(name, NodePool template, pods, DaemonSet pods)."""
    from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
    from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog

    out: list[tuple[str, NodePoolTemplate, list[PodInfo], list[PodInfo]]] = []
    fake = load_kwok_catalog(CATALOG)
    for n in (200, 500, 620):
        out.append((f"fake400/diverse-{n}", template_from_nodepool(NODEPOOL, fake), [pod_info(p) for p in diverse(n)], []))
    for catalog in ("aws", "kwok"):
        its = load_aws_catalog() if catalog == "aws" else load_kwok_catalog(cost.KWOK)
        for name, docs, raw, topo in cost.workloads(catalog):
            if not topo or name in ("diverse-5000", "diverse-nozone-5000"):
                continue
            pods_raw, ds_raw, own = cost.expand(docs)
            pods_raw += raw
            template = template_from_nodepool(own[0] if own else cost.nodepool(catalog), its)
            out.append((f"{catalog}/{name}", template, [pod_info(p) for p in pods_raw], [pod_info(p) for p in ds_raw]))
    return out


def timed(template: NodePoolTemplate, pods: list[PodInfo], dss: list[PodInfo], reps: int) -> tuple[float, float]:
    """(USD/hour, best solve seconds) of a fresh sized scheduler per repetition."""
    best, usd = float("inf"), 0.0
    for _ in range(reps):
        sched = S.Scheduler([template], daemonsets=dss, tables=type_tables([template], dss), sizing=True)
        t0 = time.perf_counter()
        res = sched.solve(pods)
        best = min(best, time.perf_counter() - t0)
        usd = sum(c.cheapest_offering_price() for c in res.new_claims)
    return usd, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    shipped = S.SEARCHED_TOPOLOGY_PODS
    print(f"threshold: SEARCHED_TOPOLOGY_PODS = {shipped}")
    print(f"{'workload':<30} {'pods':>5} {'topo':>5} | {'search $/h':>10} {'s':>6} | {'one plan $/h':>12} {'s':>6} {'x$':>6} | shipped")
    for name, template, pods, dss in cases():
        row: list[Any] = []
        for limit in (10**9, 0):
            S.SEARCHED_TOPOLOGY_PODS = limit
            row.append(timed(template, pods, dss, args.reps))
        S.SEARCHED_TOPOLOGY_PODS = shipped
        (v, vs), (o, os_) = row
        topo = sum(not S._plain(p) for p in pods)
        print(f"{name:<30} {len(pods):>5} {topo:>5} | {v:>10.4f} {vs:>6.3f} | {o:>12.4f} {os_:>6.3f} {o / v:>6.3f} | "
              f"{'search' if topo <= shipped else 'one plan'}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
