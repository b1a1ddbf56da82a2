"""Small topology batches: the cost and solve time of the variant search against one plan
(issue 27, item 5: "bring every size within 1.2x of the pre-sizing speed").

A batch with at most ``CAPPED_TOPOLOGY_PODS`` pods carrying topology rules is planned once per
size cap, by marginal cost (twice) and pinned by zone, and the cheapest plan wins
(``Scheduler.solve``); a larger one gets one plan under the predicted size cap
(``Scheduler._solve_large``). For each workload this prints both, side by side, in one process:

* ``variants``: USD/hour and solve seconds of ``Scheduler.solve`` as it is;
* ``one plan``: the same batch forced onto the one-plan path (``CAPPED_TOPOLOGY_PODS = 0``);
* ``one plan+hs``: that path with hostname topology spreads also counted by
  ``anti_affinity_nodes`` (largest group / maxSkew nodes), a change measured here and not made.

Workloads: Karpenter's diverse mix at 200, 500 and 620 pods on its 400 fake types
(``scheduling_karpenter.py``) and ``cost.py``'s topology workloads on the AWS and KWOK catalogs.
Each solve is timed alone (best of ``--reps``), without tracing.

Run: ``.venv/bin/python benchmarks/topology_paths.py [--reps 2]``
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import cost  # noqa: E402
from scheduling_karpenter import CATALOG, NODEPOOL, diverse  # noqa: E402

from karpy_core.apis.labels import LABEL_HOSTNAME  # noqa: E402
from karpy_core.scheduling import scheduler as S  # noqa: E402
from karpy_core.scheduling.pod import PodInfo, pod_info  # noqa: E402
from karpy_core.scheduling.template import NodePoolTemplate, template_from_nodepool, type_tables  # noqa: E402
from karpy_core.utils.selectors import selector_matches  # noqa: E402


def with_hostname_spreads(base: Callable[[Sequence[PodInfo]], int]) -> Callable[[Sequence[PodInfo]], int]:
    """``anti_affinity_nodes`` that also counts, per hard hostname spread (selector, maxSkew), the
    pods it selects divided by maxSkew (rounded up)."""
    def nodes(pods: Sequence[PodInfo]) -> int:
        groups: dict[tuple[str, str, int], int] = {}
        for p in pods:
            for c in p.spread:
                if c.hard and c.key == LABEL_HOSTNAME and selector_matches(S._selector(c.selector), p.labels):
                    k = (p.namespace, c.selector, c.max_skew)
                    groups[k] = groups.get(k, 0) + 1
        spread = max((-(-n // k[2]) for k, n in groups.items()), default=0)
        return max(base(pods), spread)
    return nodes


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
    cap, nodes = S.CAPPED_TOPOLOGY_PODS, S.anti_affinity_nodes
    print(f"{'workload':<30} {'pods':>5} | {'variants $/h':>12} {'s':>6} | {'one plan $/h':>12} {'s':>6} {'x$':>6} | "
          f"{'+hs $/h':>9} {'s':>6} {'x$':>6}")
    for name, template, pods, dss in cases():
        row: list[Any] = []
        for mode in ("variants", "one", "one+hs"):
            S.CAPPED_TOPOLOGY_PODS = cap if mode == "variants" else 0
            S.anti_affinity_nodes = with_hostname_spreads(nodes) if mode == "one+hs" else nodes
            row.append(timed(template, pods, dss, args.reps))
        S.CAPPED_TOPOLOGY_PODS, S.anti_affinity_nodes = cap, nodes
        (v, vs), (o, os_), (h, hs) = row
        print(f"{name:<30} {len(pods):>5} | {v:>12.4f} {vs:>6.3f} | {o:>12.4f} {os_:>6.3f} {o / v:>6.3f} | "
              f"{h:>9.4f} {hs:>6.3f} {h / v:>6.3f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
