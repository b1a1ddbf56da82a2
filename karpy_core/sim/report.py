"""What a simulation did, for people (text) and programs (JSON).

JSON document shape (``karpy simulate -o json``)::

    {
      "provider": {"name", "region", "pricing"},
      "nodes": [{"name", "nodepool", "instance_type", "zone", "capacity_type",
                 "price_per_hour", "labels", "taints", "allocatable": {"cpu","memory","pods"},
                 "requested": {"cpu","memory"}, "pods": ["ns/name", ...]}],
      "pods": [{"namespace", "name", "node", "reason"}],
      "events": [{"t", "kind", "nodeclaim", "node", "reason", "details"}],
      "summary": {"nodes", "nodes_launched", "pods_bound", "pods_pending", "cost_per_hour"},
      "cost_over_time": [{"t", "nodes", "cost_per_hour"}]     # scenarios only (karpy simulate SCENARIO)
    }

Event kinds include provisioning and lifecycle (``nodeclaim-create``, ``launch``, ``register``,
``initialize``, ``terminate``), drain (``drain``, ``evict``, ``evict-blocked``, ``drain-wait``,
``force-delete``, ``node-finalized``), disruption (``disrupt-decided``, ``disrupt``,
``replacement-create``, ``delete``, ``disrupt-invalidated``, ``disrupt-failed``, ``untaint``),
``expire`` and ``scenario`` (a scenario step); ``t`` is seconds since the start.

Quantities are in Kubernetes notation, prices in USD/hour; ``price_per_hour`` is null for nodes
karpy did not launch (given as input). Pods owned by DaemonSets are listed under their node but
not in ``pods[]``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.resources import Resources, add_into, parse_resource_list
from karpy_core.sim.simulator import Simulator
from karpy_core.state.views import NodePoolView
from karpy_core.utils.quantity import format_quantity

__all__ = ["SimulationReport", "NodeReport", "PodReport", "build_report", "render_text", "write_timeline_png"]

HOURS_PER_MONTH = 730
"""Hours in an average month (8760 / 12), for the monthly estimate."""


@dataclass
class NodeReport:
    name: str
    nodepool: str | None
    instance_type: str
    zone: str
    capacity_type: str
    price_per_hour: float | None
    labels: dict[str, str]
    taints: list[dict[str, str]]
    allocatable: Resources
    requested: Resources
    pods: list[str] = field(default_factory=list)
    daemon_pods: list[str] = field(default_factory=list)

    def utilisation(self, resource: str) -> float:
        alloc = self.allocatable.get(resource, 0)
        return self.requested.get(resource, 0) / alloc if alloc else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "nodepool": self.nodepool,
            "instance_type": self.instance_type,
            "zone": self.zone,
            "capacity_type": self.capacity_type,
            "price_per_hour": self.price_per_hour,
            "labels": dict(sorted(self.labels.items())),
            "taints": self.taints,
            "allocatable": {r: format_quantity(r, self.allocatable.get(r, 0)) for r in ("cpu", "memory", "pods")},
            "requested": {r: format_quantity(r, self.requested.get(r, 0)) for r in ("cpu", "memory")},
            "pods": sorted(self.pods + self.daemon_pods),
        }


@dataclass
class PodReport:
    namespace: str
    name: str
    node: str | None
    reason: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name, "node": self.node, "reason": self.reason}


@dataclass
class SimulationReport:
    provider: dict[str, Any]
    nodes: list[NodeReport]
    pods: list[PodReport]
    events: list[dict[str, Any]]
    ignored: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    explanations: dict[str, list[str]] = field(default_factory=dict)
    cost_over_time: list[dict[str, Any]] | None = None
    """``[{t, nodes, cost_per_hour}]`` for scenario runs, None otherwise."""
    decisions: dict[str, list[str]] = field(default_factory=dict)
    """Node name -> the disruption decision log lines (``--explain-node``)."""
    decision_records: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Node name -> the same log as typed records (time, method, verdict, kind, reason, details;
    ``--explain-node -o json``)."""
    overlays: dict[str, list[str]] = field(default_factory=dict)
    """Node name -> what NodeOverlays changed on its instance type and offering (``--explain``;
    gate ``NodeOverlay``), e.g. ``price of m5.large on-demand us-east-1a 0.096 -> 0.0096 USD/h by
    NodeOverlay discount (weight 10)``."""

    @property
    def cost_per_hour(self) -> float:
        return round(sum(n.price_per_hour or 0.0 for n in self.nodes), 6)

    def summary(self) -> dict[str, Any]:
        return {
            "nodes": len(self.nodes),
            "nodes_launched": sum(1 for n in self.nodes if n.nodepool),
            "pods_bound": sum(1 for p in self.pods if p.node),
            "pods_pending": sum(1 for p in self.pods if not p.node),
            "cost_per_hour": self.cost_per_hour,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "nodes": [n.to_dict() for n in self.nodes],
            "pods": [p.to_dict() for p in self.pods],
            "events": self.events,
            "warnings": self.warnings,
            "ignored": self.ignored,
            "summary": self.summary(),
            **({"cost_over_time": self.cost_over_time} if self.cost_over_time is not None else {}),
            **({"overlays": self.overlays} if self.overlays else {}),
        }


def _price(types: dict[str, InstanceType], labels: dict[str, str]) -> float | None:
    it = types.get(labels.get(LABEL_INSTANCE_TYPE, ""))
    if it is None:
        return None
    for o in it.offerings:
        if o.zone == labels.get(LABEL_ZONE) and o.capacity_type == labels.get(LABEL_CAPACITY_TYPE):
            return o.price
    return None


def _overlay_warnings(sim: Simulator) -> list[str]:
    """NodeOverlays present with the gate off; overlays in conflict or failing validation (gate on)."""
    objs = sim.cluster.objects("NodeOverlay")
    store = getattr(sim.provider, "overlays", None)
    if getattr(sim, "overlays", None) is None or store is None:
        return [f"{len(objs)} NodeOverlay(s) not applied: the NodeOverlay feature gate is off (--feature-gates NodeOverlay=true)"] \
            if objs else []
    weights = {o["metadata"]["name"]: int((o.get("spec") or {}).get("weight") or 0) for o in objs}
    return [f"NodeOverlay {n} not applied: conflict with another overlay of weight {weights.get(n, 0)}" for n in sorted(store.conflicts)] \
        + [f"NodeOverlay {n} not applied: {why}" for n, why in sorted(store.invalid.items())]


async def build_report(sim: Simulator, *, provider_info: dict[str, Any] | None = None) -> SimulationReport:
    """Summarise the simulator's cluster: nodes with prices and pods, every pod's placement or the
    reason it is pending."""
    types: dict[str, InstanceType] = {}
    pool_types: dict[str, dict[str, InstanceType]] = {}
    for np_view in sim.cluster.views("NodePool") or ():
        assert isinstance(np_view, NodePoolView)
        for it in await sim.provider.get_instance_types(np_view.model):  # overlaid with NodeOverlay on
            types.setdefault(it.name, it)
            pool_types.setdefault(np_view.name, {})[it.name] = it
    pods = sim.cluster.objects("Pod")
    nodes: list[NodeReport] = []
    by_name: dict[str, NodeReport] = {}
    for n in sim.cluster.objects("Node"):
        labels = dict(n["metadata"].get("labels") or {})
        pool = labels.get(LABEL_NODEPOOL)
        rep = NodeReport(
            name=n["metadata"]["name"],
            nodepool=pool,
            instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
            zone=labels.get(LABEL_ZONE, ""),
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            price_per_hour=_price(pool_types.get(pool, types), labels) if pool else None,
            labels=labels,
            taints=[dict(t) for t in (n.get("spec") or {}).get("taints") or []],
            allocatable=parse_resource_list((n.get("status") or {}).get("allocatable")),
            requested={},
        )
        nodes.append(rep)
        by_name[rep.name] = rep
    pod_reports: list[PodReport] = []
    for p in pods:
        meta = p["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        node = (p.get("spec") or {}).get("nodeName")
        is_ds = any(r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or ())
        if node in by_name:
            with contextlib.suppress(ValueError):
                add_into(by_name[node].requested, pod_info(p).requests)
            (by_name[node].daemon_pods if is_ds else by_name[node].pods).append(key)
        if is_ds:
            continue
        reason = None
        if not node:
            reason = sim.pending_reasons.get(key) or "pending: no decision recorded (is a NodePool defined?)"
        pod_reports.append(PodReport(meta.get("namespace", "default"), meta["name"], node or None, reason))
    overlays: dict[str, list[str]] = {}
    store = getattr(sim.provider, "overlays", None)
    for rep in nodes:
        if store is not None and rep.nodepool:
            lines = [c.text() for c in store.changes_by_name(rep.nodepool, rep.instance_type)
                     if c.kind == "capacity" or (c.zone, c.capacity_type) == (rep.zone, rep.capacity_type)]
            if lines:
                overlays[rep.name] = lines
    return SimulationReport(
        provider=provider_info or {"name": sim.provider.name},
        nodes=nodes,
        pods=pod_reports,
        events=[e.to_dict() for e in sim.events],
        explanations=dict(sim.explanations),
        cost_over_time=list(sim.cost_over_time) if sim.disruption_enabled else None,
        decisions={n: sim.disruption.explain(n) for n in sorted(sim.disruption.decisions)},
        decision_records={n: sim.disruption.records(n) for n in sorted(sim.disruption.decisions)},
        warnings=[f"{owner}: pods not created: {why}" for owner, why in sorted(sim.workloads.failed_creates.items())]
        + _overlay_warnings(sim),
        overlays=overlays,
    )


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def render_text(report: SimulationReport, *, max_pods_per_node: int = 6) -> str:
    """A human-readable report: nodes with price, utilisation and pods; totals; pending pods with
    their reasons."""
    lines: list[str] = []
    prov = report.provider
    head = f"karpy simulate: cloud provider {prov.get('name')}"
    if prov.get("region"):
        head += f", region {prov['region']}"
    lines.append(head)
    if prov.get("pricing"):
        lines.append(f"prices: {prov['pricing']}")
    for w in report.warnings:
        lines.append(f"warning: {w}")
    if report.ignored:
        kinds = ", ".join(sorted({i.split("/")[0] for i in report.ignored}))
        lines.append(f"ignored (not simulated): {len(report.ignored)} objects ({kinds})")
    lines.append("")
    wn = max([28, *(len(n.name) for n in report.nodes)])
    wp = max([18, *(len(n.nodepool or "(not managed)") for n in report.nodes)])
    wt = max([15, *(len(n.instance_type) for n in report.nodes)])
    wz = max([17, *(len(n.zone) for n in report.nodes)])
    header = (
        f"{'NODE':<{wn}} {'NODEPOOL':<{wp}} {'INSTANCE TYPE':<{wt}} {'ZONE':<{wz}} {'CAPACITY':<10} "
        f"{'USD/HOUR':>9} {'PODS':>5} {'CPU':>5} {'MEMORY':>7}"
    )
    lines.append(header)
    for n in report.nodes:
        price = f"{n.price_per_hour:.4f}" if n.price_per_hour is not None else "-"
        lines.append(
            f"{n.name:<{wn}} {n.nodepool or '(not managed)':<{wp}} {n.instance_type:<{wt}} {n.zone:<{wz}} {n.capacity_type:<10} "
            f"{price:>9} {len(n.pods):>5} {_pct(n.utilisation('cpu')):>5} {_pct(n.utilisation('memory')):>7}"
        )
        shown = sorted(n.pods)[:max_pods_per_node]
        more = len(n.pods) - len(shown)
        if shown:
            lines.append("    pods: " + ", ".join(shown) + (f", +{more} more" if more > 0 else ""))
    s = report.summary()
    lines.append("")
    lines.append(
        f"total: {s['nodes']} nodes ({s['nodes_launched']} launched by karpy), {s['cost_per_hour']:.4f} USD/hour "
        f"(~{s['cost_per_hour'] * HOURS_PER_MONTH:.2f} USD/month at {HOURS_PER_MONTH} h)"
    )
    lines.append(f"pods: {s['pods_bound']} bound, {s['pods_pending']} pending")
    pending = [p for p in report.pods if not p.node]
    if pending:
        lines.append("")
        lines.append("pending pods:")
        for p in pending:
            lines.append(f"  {p.namespace}/{p.name}: {p.reason}")
    return "\n".join(lines)


PLOT_EXTRA = "pip install 'karpy[sim]'"
"""How to get the timeline plot: matplotlib comes with the ``sim`` extra only (the controller image
does not carry it); in a checkout, ``.venv/bin/pip install -e '.[sim]'``."""


class TimelineUnavailableError(RuntimeError):
    """The timeline cannot be drawn because matplotlib (the ``sim`` extra) is not installed; the
    message says how to install it. The simulation itself is unaffected."""


def write_timeline_png(report: SimulationReport, path: str) -> str:
    """Draw nodes and USD/hour over time (step plots, hours on the x axis) into an image at
    ``path`` (format from its extension, PNG without one; written at exactly ``path``); returns
    ``path``. Needs matplotlib (the ``sim`` extra; imported here only, with the non-interactive Agg
    backend).

    Raises:
        TimelineUnavailableError: matplotlib is not installed.
        ValueError: the report has no ``cost_over_time`` (not a scenario run).
        OSError: the image cannot be written.
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise TimelineUnavailableError(f"matplotlib is not installed; {PLOT_EXTRA} to draw it") from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = report.cost_over_time
    if not series:
        raise ValueError("no cost_over_time series: run a scenario (karpy simulate SCENARIO --until ...)")
    end = max(series[-1]["t"], max((e["t"] for e in report.events), default=0.0),
              float(report.provider.get("until_seconds") or 0.0))
    ts = [s["t"] / 3600 for s in series] + [end / 3600]
    nodes = [s["nodes"] for s in series] + [series[-1]["nodes"]]
    cost = [s["cost_per_hour"] for s in series] + [series[-1]["cost_per_hour"]]
    fig, ax1 = plt.subplots(figsize=(10, 4))
    ax1.step(ts, nodes, where="post", color="tab:blue", label="nodes")
    ax1.set_xlabel("simulated time (hours)")
    ax1.set_ylabel("nodes", color="tab:blue")
    ax2 = ax1.twinx()
    ax2.step(ts, cost, where="post", color="tab:red", label="USD/hour")
    ax2.set_ylabel("USD/hour", color="tab:red")
    for e in report.events:
        if e["kind"] == "disrupt":
            ax1.axvline(e["t"] / 3600, color="grey", alpha=0.3, linewidth=0.8)
    ax1.set_title("karpy simulate: nodes and cost over time (grey: disruption commands)")
    fig.tight_layout()
    from pathlib import Path

    fig.savefig(path, dpi=100, format=Path(path).suffix.lower().lstrip(".") or "png")
    plt.close(fig)
    return path
