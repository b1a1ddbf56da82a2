"""The first consolidation pass's cheaper per-pod work (issue 36, ``benchmarks/consolidation_pass.py``
topology shape) decides exactly as the plain computation: the pod view's per-version
reschedulable / eviction-cost / eviction-key values, and the simulation context's selector
matching once per (namespace, labels) group."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from karpy_core.controllers.disruption.simulation import SimulationContext
from karpy_core.state.cluster import ClusterSnapshot
from karpy_core.state.views import PodView
from karpy_core.utils.clock import iso
from karpy_core.utils.pdb import pod_ready
from karpy_core.utils.selectors import selector_matches

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import consolidation_pass as bench

NOW = 1767225600.0 + 86400


def _pod(name: str, **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", **meta}, "spec": {"nodeName": "n-1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}


def _variants() -> list[dict[str, Any]]:
    """Pods covering each input of reschedulable, eviction cost and the eviction key."""
    pods = [
        _pod("plain", labels={"app": "a", "tier": "x"}),
        _pod("mirror", annotations={"kubernetes.io/config.mirror": "abc"}),
        _pod("mirror-null", annotations={"kubernetes.io/config.mirror": None}),
        _pod("ds", ownerReferences=[{"kind": "DaemonSet", "name": "d"}]),
        _pod("node-owned", ownerReferences=["not a dict", {"kind": "Node", "name": "n"}]),
        _pod("rs", ownerReferences=[{"kind": "ReplicaSet", "name": "r"}], labels={"b": "1", "a": "2"}),
        _pod("deleting", deletionTimestamp=iso(NOW)),
        _pod("cost", annotations={"controller.kubernetes.io/pod-deletion-cost": "1000000000"}),
        _pod("cost-null", annotations={"controller.kubernetes.io/pod-deletion-cost": None}),
        _pod("cost-bad", annotations={"controller.kubernetes.io/pod-deletion-cost": "lots"}),
        _pod("cost-huge", annotations={"controller.kubernetes.io/pod-deletion-cost": "-1e30"}),
        _pod("other-annotation", annotations={"x": "y"}),
    ]
    done = _pod("done")
    done["status"]["phase"] = "Succeeded"
    failed = _pod("failed")
    failed["status"]["phase"] = "Failed"
    unready = _pod("unready", labels={"app": "a"})
    unready["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    prio = _pod("prio")
    prio["spec"]["priority"] = 2_000_000_000
    both = _pod("both", annotations={"controller.kubernetes.io/pod-deletion-cost": "-5"})
    both["spec"]["priority"] = -100
    nons = _pod("no-namespace")
    del nons["metadata"]["namespace"]
    return [*pods, done, failed, unready, prio, both, nons]


def _plain_cost(pod: dict[str, Any]) -> float:
    """Karpenter's EvictionCost, as the view computed it from its parsed annotations."""
    text = (pod["metadata"].get("annotations") or {}).get("controller.kubernetes.io/pod-deletion-cost")
    priority = int(pod["spec"].get("priority") or 0)
    if text is None and not priority:
        return 1.0
    cost = 1.0
    if text is not None:
        try:
            cost += float(text) / 2**27
        except ValueError:
            pass
    return max(-10.0, min(10.0, cost + priority / 2**25))


@pytest.mark.parametrize("annotations_first", [False, True])
def test_first_use_values_are_the_plain_ones(annotations_first: bool) -> None:
    """Read from the version's dict (annotations not parsed yet) or from the parsed annotations,
    each value is what the plain rule gives."""
    for raw in _variants():
        v = PodView.of(raw)
        if annotations_first:
            _ = v.annotations
        meta = raw["metadata"]
        owners = [o for o in meta.get("ownerReferences") or () if isinstance(o, dict)]
        plain_resched = not (bool(meta.get("deletionTimestamp")) or raw["status"]["phase"] in ("Succeeded", "Failed")
                             or any(o.get("kind") in ("DaemonSet", "Node") for o in owners)) \
            and "kubernetes.io/config.mirror" not in (meta.get("annotations") or {})
        assert v.reschedulable is plain_resched, raw["metadata"]["name"]
        assert v.eviction_cost == _plain_cost(raw), raw["metadata"]["name"]
        labels = meta.get("labels") or {}
        assert v.eviction_key == ((meta.get("namespace") or "default", tuple(sorted(labels.items()))), pod_ready(raw))
    names = {raw["metadata"]["name"]: PodView.of(raw) for raw in _variants()}
    assert [n for n, v in names.items() if not v.reschedulable] == ["mirror", "mirror-null", "ds", "node-owned", "deleting",
                                                                      "done", "failed"]
    assert names["cost-huge"].eviction_cost == -10.0 and names["prio"].eviction_cost == 10.0
    assert names["unready"].eviction_key[1] is False and names["plain"].eviction_key[1] is True


def _plain_selected(ctx: SimulationContext, selector: str, namespaces: tuple[str, ...] | None) -> list[int]:
    """The bound pods a selector picks, pod by pod (what ``_selected_by`` computed before it grouped them)."""
    try:
        parsed = json.loads(selector)
        return [i for i, b in enumerate(ctx.bound)
                if (namespaces is None or b.namespace in namespaces) and selector_matches(parsed, b.labels)]
    except ValueError:
        return list(range(len(ctx.bound)))


def test_selector_matching_per_label_group_is_the_per_pod_scan() -> None:
    """On the benchmark's topology shape plus pods of other namespaces and label sets, every
    selector (labels, expressions, every namespace or some, one that cannot be evaluated) picks
    the same bound pods in the same order as a scan of every pod."""
    snap, types = bench.build_topology(150, seed=9)
    extra = []
    for i, (ns, labels) in enumerate([("other", {"app": "d00001"}), ("ns01", {"app": "d00001", "x": "1"}),
                                      ("ns01", {"x": "1"}), ("ns02", {})]):
        p = _pod(f"extra-{i}", labels=labels)
        p["metadata"]["namespace"] = ns
        p["spec"]["nodeName"] = snap.node_views[i].name
        extra.append(p)
    snap = ClusterSnapshot(nodes=snap.node_views, nodeclaims=snap.nodeclaim_views, nodepools=snap.nodepool_views,
                           pods=[*snap.pod_views, *extra], daemonsets=list(snap.daemonsets), pdbs=list(snap.pdbs))
    ctx = SimulationContext(snap, types)
    selectors = [
        json.dumps({"matchLabels": {"app": "d00001"}}),
        json.dumps({"matchLabels": {"x": "1"}}),
        json.dumps({"matchExpressions": [{"key": "app", "operator": "Exists"}]}),
        json.dumps({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["d00001"]}]}),
        json.dumps({}),
        json.dumps({"matchExpressions": [{"key": "app", "operator": "Bogus"}]}),  # cannot be evaluated: every pod
        "not json",
    ]
    hits = 0
    for sel in selectors:
        for namespaces in (None, ("ns01",), ("ns01", "other"), ("nowhere",)):
            got = ctx._selected_by(sel, namespaces)
            assert got == _plain_selected(ctx, sel, namespaces), (sel, namespaces)
            assert got == sorted(set(got))
            hits += bool(got)
    assert hits > 10
    every = list(range(len(ctx.bound)))
    assert ctx._selected_by(selectors[-2], None) == every and ctx._selected_by(selectors[-1], ("nowhere",)) == every
    assert ctx._selected_by(selectors[-2], ("nowhere",)) == []  # no pod to evaluate it on: no error, none selected
