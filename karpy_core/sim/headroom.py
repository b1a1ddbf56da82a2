"""The simulator report's CapacityBuffer section: where the headroom sits and what it costs.

At the end of a run the ready buffers' virtual pods are placed once more, by the provisioner's own
scheduler, on the cluster as it stands (no NodeClaim is created). Per node: the virtual pods it
holds, the share of the node they take (the larger of their cpu and memory requests over the
node's allocatable, at most 1) and that share of the node's price; the headroom's cost is the sum
(USD/hour). Virtual pods that fit nowhere are listed as unplaced.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from karpy_core.controllers.provisioning.provisioner import build_scheduler
from karpy_core.scheduling.resources import Resources, add_into
from karpy_core.state.buffers import ANNOTATION_BUFFER_NAME, ANNOTATION_BUFFER_NAMESPACE
from karpy_core.state.cluster import collect_snapshot

__all__ = ["BufferNode", "Headroom", "headroom", "render_headroom"]


@dataclass(frozen=True)
class BufferNode:
    """One node holding headroom: ``fraction`` of it (0..1) for ``pods`` virtual pods, costing
    ``cost_per_hour`` (USD/hour, None when the node's price is unknown)."""

    node: str
    pods: int
    fraction: float
    cost_per_hour: float | None


@dataclass(frozen=True)
class Headroom:
    """The CapacityBuffer headroom at the end of a run."""

    buffers: dict[str, int] = field(default_factory=dict)
    """Buffer (``ns/name``) -> its virtual pods (``status.replicas``)."""
    nodes: list[BufferNode] = field(default_factory=list)
    unplaced: dict[str, str] = field(default_factory=dict)
    """Virtual pod -> why it fits on no node now (a new node would be needed, or none can hold it)."""

    @property
    def cost_per_hour(self) -> float:
        """USD/hour of the node shares the headroom takes."""
        return round(sum(n.cost_per_hour or 0.0 for n in self.nodes), 6)

    def to_dict(self) -> dict[str, Any]:
        return {
            "buffers": dict(self.buffers),
            "nodes": [{"node": n.node, "buffer_pods": n.pods, "fraction": round(n.fraction, 4),
                       "cost_per_hour": None if n.cost_per_hour is None else round(n.cost_per_hour, 6)} for n in self.nodes],
            "unplaced": dict(self.unplaced),
            "cost_per_hour": self.cost_per_hour,
        }


async def headroom(sim: Any, prices: Mapping[str, float | None], allocatable: Mapping[str, Resources]) -> Headroom | None:
    """The headroom of ``sim`` (a :class:`~karpy_core.sim.simulator.Simulator`), or None when its
    CapacityBuffer gate is off. ``prices``/``allocatable``: node name -> USD/hour and allocatable
    (the report's nodes).

    Raises:
        CloudProviderError: the provider failed to list instance types.
    """
    if not sim.feature_gates.CapacityBuffer:
        return None
    snapshot = await collect_snapshot(sim.cluster, buffers=True)
    virtual = list(snapshot.virtual_pod_views)
    buffers: dict[str, int] = {}
    for v in virtual:
        ann = v.raw["metadata"]["annotations"]
        key = f"{ann[ANNOTATION_BUFFER_NAMESPACE]}/{ann[ANNOTATION_BUFFER_NAME]}"
        buffers[key] = buffers.get(key, 0) + 1
    if not virtual:
        return Headroom(buffers)
    scheduler, _ = await build_scheduler(snapshot, sim.provider)
    infos = {v.key: v.info for v in virtual}
    results = scheduler.solve(list(infos.values()))
    per_node: dict[str, Resources] = {}
    counts: dict[str, int] = {}
    for key, node in results.existing.items():
        add_into(per_node.setdefault(node, {}), infos[key].requests)
        counts[node] = counts.get(node, 0) + 1
    nodes = []
    for node in sorted(per_node):
        alloc = allocatable.get(node) or {}
        shares = [per_node[node].get(r, 0) / alloc[r] for r in ("cpu", "memory") if alloc.get(r)]
        frac = min(1.0, max(shares, default=0.0))
        price = prices.get(node)
        nodes.append(BufferNode(node, counts[node], frac, None if price is None else price * frac))
    unplaced = dict(results.errors)
    for plan in results.new_claims:
        for p in plan.pods:
            unplaced[p.key] = "needs a new node (not launched yet)"
    return Headroom(buffers, nodes, dict(sorted(unplaced.items())))


def render_headroom(h: Headroom) -> list[str]:
    """The report's text lines for the headroom."""
    total = sum(h.buffers.values())
    lines = [f"capacity buffers: {len(h.buffers)} buffer(s), {total} virtual pod(s), "
             f"headroom costs {h.cost_per_hour:.4f} USD/hour"]
    for key, count in sorted(h.buffers.items()):
        lines.append(f"  {key}: {count} virtual pod(s)")
    for n in h.nodes:
        cost = f"{n.cost_per_hour:.4f} USD/hour" if n.cost_per_hour is not None else "price unknown"
        lines.append(f"  {n.node}: {n.pods} virtual pod(s), {100 * n.fraction:.0f}% of the node, {cost}")
    for key, why in h.unplaced.items():
        lines.append(f"  {key}: unplaced: {why}")
    return lines
