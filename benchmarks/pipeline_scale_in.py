"""Issue 36's scale-in in virtual time: ``karpy simulate`` runs the real disruption controller on
``benchmarks/scale_apiserver.py``'s workload (20 NodePools over Karpenter's kwok catalog, about
1,000 Deployment pods), scales every Deployment to 30% (``workload().kept``) and reports how the
scale-in settles.

Printed (virtual seconds from the scale-in step): ``settle`` (the last disruption command's last
node deleted or the last eviction, whichever is later), the disruption ``commands`` executed and
``invalidated``, the pods ``evicted`` after the scale-in, the ``undone`` consolidations (a node
launched for pods a command moved), the nodes and USD/hour before and after. With
``--pipeline-depth A,B`` the same scenario runs once per depth (the disruption controller's
``pipeline_depth``, ``KARPY_DISRUPTION_PIPELINE_DEPTH``) and a last line gives the settle-time
ratio to the first (1: one command at a time, as before side-by-side validation).

``--kube-scoring first`` has the simulated kube-scheduler place by kube-scheduler's default scores
instead of first fit by name (as the real control plane does); ``--no-scored-replays`` takes
:func:`~karpy_core.scheduling.kubescheduler.moved_pods_fit`'s scoring replays out (before issue
36's spread fix); ``--no-arrival-replays`` takes its replays of the moved pods arriving smallest
first out (:data:`~karpy_core.scheduling.kubescheduler.ARRIVAL_REPLAYS`, before undone36's fix).

Run: ``.venv/bin/python benchmarks/pipeline_scale_in.py [--pods 1000] [--keep 0.3] [--pipeline-depth 1,3]
[--kube-scoring first] [--no-scored-replays] [--no-arrival-replays]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_apiserver import CATALOG, workload

SCALE_AT = 3600.0
"""Virtual seconds of the scale-in step (the scale-up settles well before)."""


def scenario(dirpath: Path, pods: int, keep: float, until: float) -> Path:
    """Write the workload's manifests (Deployments at their full size) and a Scenario that applies
    them at 0 s and scales each Deployment to its kept size at :data:`SCALE_AT`; returns its path."""
    w = workload(pods, keep)
    objs: list[dict[str, Any]] = []
    for o in w.objects:
        if o["kind"] == "Deployment":
            o = json.loads(json.dumps(o))
            o["spec"]["replicas"] = w.full[o["metadata"]["name"]]
        objs.append(o)
    (dirpath / "workload.yaml").write_text(yaml.safe_dump_all(objs, sort_keys=False))
    steps: list[dict[str, Any]] = [{"at": "0s", "apply": "workload.yaml"}]
    for name in sorted(w.kept):
        steps.append({"at": f"{int(SCALE_AT)}s", "scale": {"deployment": name, "replicas": w.kept[name]}})
    doc = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "pipeline-scale-in"},
           "until": f"{int(until)}s", "steps": steps}
    path = dirpath / "scenario.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def summarize(out: dict[str, Any]) -> dict[str, Any]:
    """The numbers printed for one run, from ``karpy simulate -o json``'s ``events`` and ``cost_over_time``."""
    evs = [e for e in out["events"] if e["t"] >= SCALE_AT]
    kinds: dict[str, int] = {}
    for e in evs:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + 1
    ends = [e["t"] for e in evs if e["kind"] in ("disrupt", "delete", "evict", "terminate", "node-finalized")]
    settle = (max(ends) - SCALE_AT) if ends else 0.0
    cost = out["cost_over_time"]
    before = [c for c in cost if c["t"] < SCALE_AT][-1]
    after = cost[-1]
    undone = sum(v if isinstance(v, int) else sum(v.values()) if isinstance(v, dict) else 0
                 for v in (out["day"].get("undone") or {}).values())
    return {"settle_s": round(settle, 1), "commands": kinds.get("disrupt", 0), "invalidated": kinds.get("disrupt-invalidated", 0),
            "evicted": kinds.get("evict", 0), "undone": undone,
            "nodes": f"{before['nodes']}->{after['nodes']}",
            "usd_per_hour": f"{before['cost_per_hour']:.4f}->{after['cost_per_hour']:.4f}"}


async def run(path: Path, depth: int | None, kube_scoring: str | None = None, scored_replays: bool = True,
              arrival_replays: bool = True) -> dict[str, Any]:
    """``karpy simulate PATH --instance-types <kwok catalog>`` in this process, the disruption
    controller's ``pipeline_depth`` set to ``depth`` (None: its default), the kube-scheduler
    stand-in placing by ``kube_scoring`` (None: first fit; ``first``/``last``: kube-scheduler's
    scores, :class:`~karpy_core.sim.kubelet.KubeSchedulerSimulator`), and without
    :func:`~karpy_core.scheduling.kubescheduler.moved_pods_fit`'s scoring replays when
    ``scored_replays`` is False (the A/B of issue 36's fix), and without its replays of the pods
    arriving smallest first when ``arrival_replays`` is False (undone36's A/B); the report as a dict."""
    import karpy_core.sim.simulator as simulator
    from karpy_core.cli import _run_scenario_file
    from karpy_core.scheduling import kubescheduler

    base = simulator.Simulator

    class Sim(base):  # type: ignore[misc,valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            if depth is not None:
                self.disruption.settings.pipeline_depth = depth
            self.kube_scheduler.scoring = kube_scoring

    simulator.Simulator = Sim  # type: ignore[misc]
    replays, arrivals = kubescheduler.SCORED_REPLAYS, kubescheduler.ARRIVAL_REPLAYS
    if not scored_replays:
        kubescheduler.SCORED_REPLAYS = ()
    if not arrival_replays:
        kubescheduler.ARRIVAL_REPLAYS = ()
    try:
        report = await _run_scenario_file(str(path), variables=None, region=None, instance_types=str(CATALOG),
                                          preference_policy="Respect", until=None, max_pods=100_000)
    finally:
        simulator.Simulator = base  # type: ignore[misc]
        kubescheduler.SCORED_REPLAYS, kubescheduler.ARRIVAL_REPLAYS = replays, arrivals
    out: dict[str, Any] = report.to_dict()
    return out


def main() -> None:
    """Parse the arguments, run the scenario once per depth, print one line each and the ratios."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--keep", type=float, default=0.3)
    ap.add_argument("--until", type=float, default=SCALE_AT + 3600.0, help="virtual seconds to simulate")
    ap.add_argument("--pipeline-depth", default="1,3", help="comma-separated depths to compare (the first is the base)")
    ap.add_argument("--kube-scoring", choices=["first", "last"], default=None,
                    help="the simulated kube-scheduler places by kube-scheduler's default scores, ties to the first/last node "
                         "(default: first fit by node name)")
    ap.add_argument("--no-scored-replays", action="store_true",
                    help="consolidation does not replay kube-scheduler's scoring for the pods it moves "
                         "(the behaviour before issue 36's fix)")
    ap.add_argument("--no-arrival-replays", action="store_true",
                    help="consolidation does not replay the moved pods arriving smallest first (before undone36's fix)")
    args = ap.parse_args()
    depths = [int(d) for d in args.pipeline_depth.split(",") if d.strip()]
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = scenario(Path(tmp), args.pods, args.keep, args.until)
        for depth in depths:
            t0 = time.perf_counter()
            row = summarize(asyncio.run(run(path, depth, args.kube_scoring, not args.no_scored_replays,
                                           not args.no_arrival_replays)))
            row["wall_s"] = round(time.perf_counter() - t0, 1)
            results.append({"depth": depth, **row})
            print(" ".join(f"{k}={v}" for k, v in results[-1].items()), flush=True)
    if len(results) > 1 and results[0]["settle_s"]:
        base = results[0]["settle_s"]
        print(f"settle ratio to depth={results[0]['depth']}: "
              + ", ".join(f"depth={r['depth']}: {r['settle_s'] / base:.2f}x" for r in results))


if __name__ == "__main__":
    main()
