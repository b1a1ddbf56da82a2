"""What a simulation did, for people (text) and programs (JSON).

JSON document shape (``karpy simulate -o json``)::

    {
      "provider": {"name", "region", "pricing"},
      "nodes": [{"name", "nodepool", "instance_type", "zone", "capacity_type",
                 "price_per_hour", "labels", "taints", "allocatable": {"cpu","memory","pods"},
                 "requested": {"cpu","memory"}, "pods": ["ns/name", ...]}],
      "pods": [{"namespace", "name", "node", "reason"}],
      "events": [{"t", "kind", "nodeclaim", "node", "reason", "details"}],  # null where none applies
      "summary": {"nodes", "nodes_launched", "pods_bound", "pods_pending", "cost_per_hour"},  # launched: launched_nodes()
      "workloads": [{"kind", "namespace", "name", "pods"}],   # what was simulated (DaemonSets aside; bare pods: one
                                                               # {kind: Pod, name: ""} entry per namespace)
      "daemonsets": [{"namespace", "name", "requests": {RESOURCE: quantity}, "pods"}],  # overhead on each node they run on
      "reference": {"status", "cost_per_hour", "plan", "pods", "unplaceable", "note", "gap"},  # plain runs only (see below)
      "cost_over_time": [{"t", "nodes", "cost_per_hour"}],    # scenarios only (karpy simulate SCENARIO)
      "timeline": [{"t", "pending_pods", "nodepools": {NAME: {"nodes", "cost_per_hour",
                    "cost_by_capacity_type": {TYPE: usd_per_hour}, "cpu_requested", "cpu_allocatable",
                    "memory_requested_mib", "memory_allocatable_mib"}}}],  # scenarios only
      "day": {"seconds", "total_usd", "start_cost_per_hour", "end_cost_per_hour", "peak_cost_per_hour",
              "consolidation_savings_usd", "consolidation_savings_per_hour", "consolidation_incomplete",
              "disruptions": {REASON: {"commands", "nodes"}}, "undone": {REASON: count},
              "peak_pending_pods", "peak_pending_t"}
                                                              # scenarios only (:class:`DaySummary`)
    }

``reference`` (plain ``karpy simulate``): the cheapest set of nodes that could hold the pods karpy
placed on the nodes it launched, over the same NodePools, instance types, offerings and DaemonSet
overhead (:func:`karpy_core.sim.optimum.reference`, HiGHS within
:data:`~karpy_core.sim.optimum.REFERENCE_TIME_LIMIT` seconds): ``status`` ``optimum``, ``lower
bound`` (no plan is cheaper; the optimum is not proved or a constraint is not modelled) or
``unavailable`` (no solver installed, or nothing launched); ``gap`` = karpy's USD/hour / reference - 1.

Event kinds include provisioning and lifecycle (``nodeclaim-create``, ``launch``, ``register``,
``initialize``, ``terminate``), drain (``drain``, ``evict``, ``evict-blocked``, ``drain-wait``,
``force-delete``, ``node-finalized``), disruption (``disrupt-decided``, ``disrupt``,
``replacement-create``, ``delete``, ``disrupt-invalidated``, ``disrupt-failed``, ``untaint``),
``expire``, static capacity (``nodeclaim-create`` with reason ``static: replicas``,
``nodeclaim-delete``, ``static-limit``) and ``scenario`` (a scenario step); ``t`` is seconds since
the start.

Quantities are in Kubernetes notation, prices in USD/hour; ``price_per_hour`` is null for nodes
karpy did not launch (given as input, labelled with a NodePool or not: :func:`launched_nodes`). Pods
owned by DaemonSets are listed under their node but not in ``pods[]``.
"""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.scheduling.claim import HostPort, ports_conflict
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.resources import Resources, add_into, exceeding, parse_resource_list, subtract
from karpy_core.scheduling.taints import untolerated
from karpy_core.scheduling.template import template_from_nodepool, type_tables
from karpy_core.sim.headroom import Headroom, headroom, render_headroom
from karpy_core.sim.kubelet import pinned_node
from karpy_core.sim.optimum import REFERENCE_TIME_LIMIT, Reference, reference
from karpy_core.sim.progress import duration_text
from karpy_core.sim.simulator import SimEvent, Simulator
from karpy_core.state.cluster import daemonset_pod_infos, is_managed
from karpy_core.state.views import NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY, NodePoolView, NodeView, PodView
from karpy_core.utils.quantity import format_quantity

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["SimulationReport", "NodeReport", "PodReport", "DaySummary", "build_report", "day_summary", "render_text",
           "timeline_figure", "write_timeline_png"]

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
    launched: bool = False
    """Launched by karpy in this run (:func:`launched_nodes`); a Node given as input is existing
    capacity, labelled with a NodePool or not: no price, not counted as launched."""

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
    workload: str = field(default="", compare=False)
    """Name of the pod's top owner (a ReplicaSet's Deployment, a StatefulSet, a Job, ...); ``""`` for a
    pod without an owner. Used by ``--explain NAME``; not part of the JSON report."""

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
    timeline: list[dict[str, Any]] | None = None
    """Per-NodePool series of scenario runs (:attr:`Simulator.timeline`), None otherwise."""
    workloads: list[dict[str, Any]] = field(default_factory=list)
    """``[{kind, namespace, name, pods}]``: the workloads simulated and their pods (DaemonSets aside)."""
    empty_workloads: list[dict[str, Any]] = field(default_factory=list)
    """``[{kind, namespace, name, field}]``: the workloads that ask for no pods (``spec.replicas: 0``,
    a Job's ``spec.parallelism: 0``), which :attr:`workloads` cannot list; ``--explain`` names them
    (not in :meth:`to_dict`)."""
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    """``[{namespace, name, requests, pods}]``: each DaemonSet, what one of its pods requests (the
    overhead it adds to every node it selects and tolerates, counted by the scheduler) and how many
    of its pods run at the end."""
    reference: Reference | None = None
    """Plain runs: the optimum or a lower bound for the pods on launched nodes (module docstring)."""
    start: float | None = None
    """When the simulated clock started, seconds since the epoch (times in ``events`` are relative
    to it); the timeline's x axis shows ``start + t`` in UTC."""
    headroom: Headroom | None = None
    """CapacityBuffer headroom (CapacityBuffer gate on): where it sits, its cost (``capacity_buffers`` in JSON)."""

    @property
    def cost_per_hour(self) -> float:
        return round(sum(n.price_per_hour or 0.0 for n in self.nodes), 6)

    def summary(self) -> dict[str, Any]:
        return {
            "nodes": len(self.nodes),
            "nodes_launched": sum(1 for n in self.nodes if n.launched),
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
            "workloads": self.workloads,
            "daemonsets": self.daemonsets,
            **({"reference": {**self.reference.to_dict(), "gap": _round(self.reference.gap(self.cost_per_hour))}}
               if self.reference is not None else {}),
            **({"cost_over_time": self.cost_over_time} if self.cost_over_time is not None else {}),
            **({"overlays": self.overlays} if self.overlays else {}),
            **({"timeline": self.timeline} if self.timeline is not None else {}),
            **({"day": day_summary(self).to_dict()} if self.cost_over_time else {}),
            **({"capacity_buffers": self.headroom.to_dict()} if self.headroom is not None else {}),
        }


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else round(x, digits)


CONSOLIDATION_REASONS = ("Empty", "Underutilized")
"""Disruption reasons that are consolidation (Karpenter ``v1.DisruptionReasonEmpty`` and
``DisruptionReasonUnderutilized``); ``Drifted`` replacements and expiry are not savings."""


@dataclass(frozen=True)
class DaySummary:
    """The summary of a scenario run (the end of its text report, ``day`` in JSON).

    Attributes:
        seconds: simulated time covered, seconds (the scenario's ``until`` or ``--until``).
        total_usd: USD spent: the integral of ``cost_over_time`` (a step function: each sample's
            USD/hour holds until the next sample, the last until ``seconds``) over the run, / 3600.
        start_cost_per_hour: USD/hour once the first steps were provisioned: the last sample
            before the next scenario step or the first disruption command, whichever comes first
            (before ``seconds`` if neither happens).
        end_cost_per_hour: USD/hour of the last sample (what runs at the end).
        peak_cost_per_hour: highest USD/hour sampled.
        consolidation_savings_per_hour: the sum over consolidation commands (``disrupt`` events
            with reason ``Empty`` or ``Underutilized``) that completed (every candidate's instance
            terminated: its NodeClaim's ``terminate`` event) of their ``savings_per_hour``
            (candidates' price - replacements' price, USD/hour, as decided).
        consolidation_savings_usd: the sum over the same commands of ``savings_per_hour`` x the
            hours from the termination of their candidates' instances (the last one) to the end
            of the run: what keeping the consolidated nodes (instead of their replacements) until
            the end would have cost more. It counts each command against the cluster it found,
            so a node consolidated twice counts twice. Commands later found undone are left out
            of both (their saving went to the node launched for their pods), and so are commands
            abandoned (``disrupt-failed``: a replacement did not launch; the candidates stay) and
            commands whose instances the cloud never deleted (:attr:`consolidation_incomplete`).
        disruptions: reason -> ``{"commands", "nodes"}``: ``disrupt`` commands by their
            Karpenter reason (``Empty``, ``Underutilized``, ``Drifted``) and the nodes they took,
            plus ``Expired`` for NodeClaims the expiration controller deleted (one command each).
        undone: reason -> consolidation commands undone (``disrupt-undone`` events: a node was
            launched for the pods they moved, :mod:`~karpy_core.controllers.disruption.undone`).
        peak_pending_pods: most pods pending at once (``timeline``'s ``pending_pods``).
        peak_pending_t: the first time that peak was reached, seconds.
        consolidation_commands: the consolidation commands counted in the savings (completed,
            not undone, not abandoned).
        consolidation_incomplete: consolidation commands (not undone, not abandoned) whose candidates' instances
            were not all terminated by the end of the run (the cloud provider's delete kept
            failing, or the run ended first): they save nothing (JSON ``consolidation_incomplete``).
    """

    seconds: float
    total_usd: float
    start_cost_per_hour: float
    end_cost_per_hour: float
    peak_cost_per_hour: float
    consolidation_savings_per_hour: float
    consolidation_savings_usd: float
    disruptions: dict[str, dict[str, int]]
    peak_pending_pods: int
    peak_pending_t: float
    undone: dict[str, int] = field(default_factory=dict)
    consolidation_commands: int = 0
    consolidation_incomplete: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds, "total_usd": round(self.total_usd, 6),
            "start_cost_per_hour": self.start_cost_per_hour, "end_cost_per_hour": self.end_cost_per_hour,
            "peak_cost_per_hour": self.peak_cost_per_hour,
            "consolidation_savings_per_hour": round(self.consolidation_savings_per_hour, 6),
            "consolidation_savings_usd": round(self.consolidation_savings_usd, 6),
            "consolidation_incomplete": self.consolidation_incomplete,
            "disruptions": self.disruptions, "undone": self.undone, "peak_pending_pods": self.peak_pending_pods,
            "peak_pending_t": self.peak_pending_t,
        }


def _end_seconds(report: SimulationReport) -> float:
    """The end of the simulated span: ``until_seconds``, or the last sample or event."""
    series = report.cost_over_time or []
    return max(float(report.provider.get("until_seconds") or 0.0), series[-1]["t"] if series else 0.0,
               max((e["t"] for e in report.events), default=0.0))


def day_summary(report: SimulationReport) -> DaySummary:
    """The :class:`DaySummary` of a scenario report (its ``cost_over_time``, ``events``, ``timeline``).

    Raises:
        ValueError: the report has no ``cost_over_time`` (not a scenario run).
    """
    series = report.cost_over_time
    if not series:
        raise ValueError("no cost_over_time series: not a scenario run")
    end = _end_seconds(report)
    total = 0.0
    for cur, nxt in zip(series, [*series[1:], {"t": end}], strict=True):
        total += cur["cost_per_hour"] * max(0.0, min(nxt["t"], end) - cur["t"]) / 3600
    steps = sorted({e["t"] for e in report.events if e["kind"] == "scenario"})
    disrupts = [e for e in report.events if e["kind"] == "disrupt"]
    marks = [t for t in steps if steps and t > steps[0]] + [e["t"] for e in disrupts]
    settle = min(marks, default=end)
    before = [s for s in series if s["t"] < settle] or series[:1]
    disruptions: dict[str, dict[str, int]] = {}
    undone: dict[str, int] = {}
    undone_nodes: set[str] = set()
    for e in report.events:
        if e["kind"] == "disrupt-undone":
            undone[e["reason"]] = undone.get(e["reason"], 0) + 1
            undone_nodes.add(e.get("node") or "")
    saved_h = saved_usd = 0.0
    counted = incomplete = 0
    gone = _instances_gone(report.events)
    running: dict[str, int] = {}
    abandoned: set[int] = set()  # commands given up (disrupt-failed: a replacement failed): nothing saved, nothing owed
    for i, e in enumerate(report.events):
        if e["kind"] == "disrupt":
            running[e.get("node") or ""] = i
        elif e["kind"] == "disrupt-failed" and (e.get("node") or "") in running:
            abandoned.add(running.pop(e.get("node") or ""))
    for i, e in enumerate(report.events):
        if e["kind"] != "disrupt":
            continue
        d = disruptions.setdefault(e["reason"], {"commands": 0, "nodes": 0})
        d["commands"] += 1
        d["nodes"] += len([n for n in (e.get("node") or "").split(",") if n])
        if e["reason"] in CONSOLIDATION_REASONS and (e.get("node") or "") not in undone_nodes and i not in abandoned:
            since = gone(e)
            if since is None:  # its instances were never terminated: the cloud still bills them
                incomplete += 1
                continue
            per_h = float((e.get("details") or {}).get("savings_per_hour") or 0.0)
            counted += 1
            saved_h += per_h
            saved_usd += per_h * max(0.0, end - since) / 3600
    for e in report.events:
        if e["kind"] == "expire":
            d = disruptions.setdefault("Expired", {"commands": 0, "nodes": 0})
            d["commands"] += 1
            d["nodes"] += 1
    peak, peak_t = 0, 0.0
    for sample in report.timeline or ():
        if sample["pending_pods"] > peak:
            peak, peak_t = sample["pending_pods"], sample["t"]
    return DaySummary(
        seconds=end, total_usd=total, start_cost_per_hour=before[-1]["cost_per_hour"],
        end_cost_per_hour=series[-1]["cost_per_hour"], peak_cost_per_hour=max(s["cost_per_hour"] for s in series),
        consolidation_savings_per_hour=saved_h, consolidation_savings_usd=saved_usd,
        disruptions=dict(sorted(disruptions.items())), peak_pending_pods=peak, peak_pending_t=peak_t,
        undone=dict(sorted(undone.items())), consolidation_commands=counted, consolidation_incomplete=incomplete,
    )


def _instances_gone(events: Sequence[dict[str, Any]]) -> Any:
    """A function of a ``disrupt`` event (JSON form): the time (seconds since the start) by which
    every candidate's instance was terminated (the latest of their NodeClaims' ``terminate``
    events, the lifecycle's "instance terminated"), or None when one of them never was.

    The command names its candidates as a comma list of nodes (``node``) and, where known, of
    NodeClaims (``nodeclaim``, :func:`event_dicts`); a node is mapped to its NodeClaim by the
    events that name both (``register``, ``delete``...). A candidate with no NodeClaim known
    counts as gone at the command's time (nothing to wait for)."""
    claim_of: dict[str, str] = {}
    terminated: dict[str, float] = {}
    for e in events:
        node, claim = e.get("node") or "", e.get("nodeclaim") or ""
        if node and claim and "," not in node and "," not in claim:
            claim_of.setdefault(node, claim)
        if e["kind"] == "terminate" and claim:
            terminated.setdefault(claim, e["t"])

    def gone(e: dict[str, Any]) -> float | None:
        nodes = [n for n in (e.get("node") or "").split(",") if n]
        claims = [c for c in (e.get("nodeclaim") or "").split(",") if c]
        if len(claims) != len(nodes):
            claims = [claim_of.get(n, "") for n in nodes]
        latest = e["t"]
        for claim in claims:
            if not claim:
                continue
            t = terminated.get(claim)
            if t is None:
                return None
            latest = max(latest, t)
        return float(latest)

    return gone


def _price(types: dict[str, InstanceType], labels: dict[str, str]) -> float | None:
    it = types.get(labels.get(LABEL_INSTANCE_TYPE, ""))
    if it is None:
        return None
    for o in it.offerings:
        if o.zone == labels.get(LABEL_ZONE) and o.capacity_type == labels.get(LABEL_CAPACITY_TYPE):
            return o.price
    return None


def _launched_price(sim: Simulator, types: dict[str, InstanceType], labels: dict[str, str]) -> float | None:
    """A launched node's price (USD/hour): its offering among the NodePool's instance types now,
    else the price the cost series last knew (:meth:`Simulator.last_price`: the types are gone
    once a step deleted the NodeClass, the node is still billed)."""
    price = _price(types, labels)
    return price if price is not None else sim.last_price(labels)


def _overlay_warnings(sim: Simulator) -> list[str]:
    """NodeOverlays present with the gate off; overlays in conflict or failing validation (gate on)."""
    objs = sim.cluster.snapshot("NodeOverlay")
    store = getattr(sim.provider, "overlays", None)
    if getattr(sim, "overlays", None) is None or store is None:
        return [f"{len(objs)} NodeOverlay(s) not applied: the NodeOverlay feature gate is off (--feature-gates NodeOverlay=true)"] \
            if objs else []
    weights = {o["metadata"]["name"]: int((o.get("spec") or {}).get("weight") or 0) for o in objs}
    return [f"NodeOverlay {n} not applied: conflict with another overlay of weight {weights.get(n, 0)}" for n in sorted(store.conflicts)] \
        + [f"NodeOverlay {n} not applied: {why}" for n, why in sorted(store.invalid.items())]


def _buffer_warnings(sim: Simulator) -> list[str]:
    """CapacityBuffers present with the gate off; with it on, buffers whose PodTemplate is missing."""
    objs = sim.cluster.snapshot("CapacityBuffer")
    if not objs:
        return []
    if not sim.feature_gates.CapacityBuffer:
        return [f"{len(objs)} CapacityBuffer(s) not provisioned: the CapacityBuffer feature gate is off "
                "(--feature-gates CapacityBuffer=true)"]
    templates = {(t["metadata"].get("namespace", "default"), t["metadata"]["name"]) for t in sim.cluster.snapshot("PodTemplate")}
    out = []
    for b in objs:
        ref = ((b.get("spec") or {}).get("podTemplateRef") or {}).get("name")
        ns = b["metadata"].get("namespace", "default")
        if ref and (ns, ref) not in templates:
            out.append(f"CapacityBuffer {ns}/{b['metadata']['name']}: podTemplateRef names PodTemplate {ns}/{ref}, "
                       "which is not among the manifests: no headroom")
    return out


def _replicaset_owners(sim: Simulator) -> dict[tuple[str, str], str]:
    """``{(namespace, ReplicaSet name): Deployment name}`` for the ReplicaSets a Deployment owns."""
    rs_owner: dict[tuple[str, str], str] = {}
    for rs in sim.cluster.snapshot("ReplicaSet"):
        meta = rs["metadata"]
        dep = next((r.get("name", "") for r in meta.get("ownerReferences") or () if r.get("kind") == "Deployment"), None)
        if dep:
            rs_owner[(meta.get("namespace", "default"), meta["name"])] = dep
    return rs_owner


def _top_owner(meta: dict[str, Any], rs_owner: dict[tuple[str, str], str]) -> tuple[str, str]:
    """(kind, name) of a pod's top controller owner from its ``metadata``: a ReplicaSet of a
    Deployment counts as the Deployment; ``("Pod", "")`` for a pod without an owner."""
    ns = meta.get("namespace", "default")
    ref = next((r for r in meta.get("ownerReferences") or () if r.get("controller", True)), None)
    kind, name = (ref.get("kind", ""), ref.get("name", "")) if ref else ("Pod", "")
    if kind == "ReplicaSet" and (ns, name) in rs_owner:
        kind, name = "Deployment", rs_owner[(ns, name)]
    return kind, name


def _workloads(sim: Simulator) -> list[dict[str, Any]]:
    """``[{kind, namespace, name, pods}]``: the pods (DaemonSets' aside, finished ones included)
    by their top owner (a Deployment's ReplicaSet counts as the Deployment); pods without an
    owner as one ``{kind: "Pod", name: ""}`` entry per namespace. Sorted by kind, namespace, name."""
    rs_owner = _replicaset_owners(sim)
    counts: dict[tuple[str, str, str], int] = {}
    for p in sim.cluster.snapshot("Pod"):
        meta = p["metadata"]
        ns = meta.get("namespace", "default")
        kind, name = _top_owner(meta, rs_owner)
        if kind == "DaemonSet":
            continue
        counts[(kind, ns, name)] = counts.get((kind, ns, name), 0) + 1
    return [{"kind": k, "namespace": ns, "name": n, "pods": c} for (k, ns, n), c in sorted(counts.items())]


def _empty_workloads(sim: Simulator) -> list[dict[str, Any]]:
    """``[{kind, namespace, name, field}]``: each Deployment, StatefulSet, Job and ReplicaSet (one a
    Deployment does not own) whose spec asks for no pods, and the field that says so
    (:func:`~karpy_core.sim.workloads.wanted_pods`). Sorted by kind, namespace, name."""
    from karpy_core.sim.workloads import wanted_pods

    found = []
    for kind in ("Deployment", "Job", "ReplicaSet", "StatefulSet"):
        for obj in sim.cluster.snapshot(kind):
            meta = obj.get("metadata") or {}
            if kind == "ReplicaSet" and meta.get("ownerReferences"):
                continue
            want, path = wanted_pods({**obj, "kind": kind})
            if want == 0:
                found.append({"kind": kind, "namespace": meta.get("namespace", "default"), "name": meta.get("name", ""),
                              "field": "spec.suspend true" if path == "spec.suspend" else f"{path} 0"})
    return sorted(found, key=lambda w: (w["kind"], w["namespace"], w["name"]))


def _launch_failure(sim: Simulator, claim: str) -> str:
    """``REASON: MESSAGE`` of the NodeClaim ``claim``'s ``Launched=Unknown`` condition set by a
    failed create (the cloud's or the plugin's error), or ``""`` (no such claim, launched, or not tried)."""
    for nc in sim.cluster.snapshot("NodeClaim"):
        if nc["metadata"]["name"] != claim:
            continue
        for c in (nc.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Launched" and c.get("status") == "Unknown" and c.get("reason"):
                return f"{c['reason']}: {c.get('message') or ''}".rstrip(": ")
    return ""


POD_GC_QUARANTINE_SECONDS = 40
"""How long kube-controller-manager's pod garbage collector waits for a missing Node before it
marks the pods bound to it Failed and deletes them (Kubernetes ``pkg/controller/podgc``
``quarantineTime``)."""


def missing_node_reason(node: str) -> str:
    """Why a pod bound to ``node``, a Node that does not exist, is not running (one line): no
    kubelet runs it, so it stays ``Pending``; kube-scheduler and Karpenter leave a pod with a
    ``nodeName`` alone (Karpenter ``pkg/utils/pod`` ``IsProvisionable``: no ``nodeName``); in a
    real cluster kube-controller-manager's pod garbage collector deletes it
    :data:`POD_GC_QUARANTINE_SECONDS` after it finds the Node missing (``gcOrphaned``), which the
    simulator does not model."""
    return (f"pending: bound to Node {node}, which does not exist: no kubelet runs it and Karpenter does not provision for a pod "
            f"with a nodeName (the pod garbage collector deletes it {POD_GC_QUARANTINE_SECONDS} s after the Node is found missing)")


def daemon_pod_reason(view: PodView, nodes: Mapping[str, NodeReport]) -> str:
    """Why a DaemonSet's pod is pending (one line): the DaemonSet controller pins it to one node
    (``matchFields`` ``metadata.name``) and that node has no room for its requests, so
    kube-scheduler's ``NodeResourcesFit`` filter leaves it ``Pending``; Karpenter does not provision
    for DaemonSet pods (``IsProvisionable``). Names the node and each resource short: requested,
    the node's allocatable and what the pods bound there request (``nodes``: the report's nodes,
    their ``requested`` summed). A pod its node's NodePorts filter refused (another pod holds one
    of its host ports: the simulated kube-scheduler's condition says so) is told that instead."""
    node = pinned_node(view.raw)
    rep = nodes.get(node) if node else None
    if rep is None:
        return f"pending: DaemonSet pod pinned to Node {node or '(none)'}, which does not exist"
    short = exceeding(view.info.requests, subtract(rep.allocatable, rep.requested))
    conditions = (view.raw.get("status") or {}).get("conditions") or ()
    scheduled: dict[str, Any] = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
    if not short and "didn't have free ports" in str(scheduled.get("message") or ""):
        ports = ", ".join(f"{port}/{proto}" for _, port, proto in sorted(view.info.host_ports, key=lambda h: (h[1], h[2], h[0])))
        return (f"pending: DaemonSet pod for Node {node}, where a pod bound first holds its host port {ports} "
                "(kube-scheduler's NodePorts filter); kube-scheduler leaves it Pending and Karpenter does not provision "
                "for DaemonSet pods")
    what = ", ".join(f"Insufficient {r} (requests {format_quantity(r, view.info.requests.get(r, 0))}, "
                     f"{format_quantity(r, rep.allocatable.get(r, 0))} allocatable, "
                     f"{format_quantity(r, rep.requested.get(r, 0))} requested by its pods)" for r in short)
    return (f"pending: DaemonSet pod for Node {node}, which has no room for it: {what or 'room taken when it was tried'}; "
            "kube-scheduler leaves it Pending and Karpenter does not provision for DaemonSet pods")


def gated_reason(view: PodView) -> str:
    """Why a pod with ``spec.schedulingGates`` left is pending (one line), or ``""`` for any other
    pod: kube-scheduler does not try it and Karpenter does not provision for it (its
    ``PodScheduled`` reason is ``SchedulingGated``, not ``Unschedulable``) until every gate is removed."""
    gates = (view.raw.get("spec") or {}).get("schedulingGates")
    if not gates:
        return ""
    names = ", ".join(str(g.get("name")) for g in gates if isinstance(g, dict))
    return (f"pending: scheduling gated ({names}): kube-scheduler does not schedule it and Karpenter does not provision "
            "for it until its spec.schedulingGates are removed")


def not_ready_note(view: PodView, not_ready: Sequence[NodeView], memo: dict[Any, str] | None = None) -> str:
    """``"; Node NAME is not Ready ..."`` for a pending pod the provisioner gave a reason for,
    naming the Nodes (at most 3) whose not-Ready taint (:attr:`NodeView.scheduling_taints`) it
    does not tolerate, or ``""``: its reason is about NodePools, and without this a Node given
    with its ``Ready`` condition not ``True`` went unnamed (trial 18: "no NodePool is available",
    with the Node only in ``--explain``). ``memo``: answers by the pod's tolerations (pods of a
    workload share them), so a report with many pending pods checks each Node once per workload."""
    if not not_ready:
        return ""
    tolerations = view.info.tolerations
    key = tuple(tolerations)
    if memo is not None and key in memo:
        return memo[key]
    names: list[str] = []
    keys: list[str] = []
    for node in not_ready:
        taint = untolerated(node.scheduling_taints, tolerations)
        if taint is not None and taint.key in (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY):
            names.append(node.name)
            if f"{taint.key}:{taint.effect}" not in keys:
                keys.append(f"{taint.key}:{taint.effect}")
    note = ""
    if names:
        shown = ", ".join(names[:3]) + (f" (+{len(names) - 3:,} more)" if len(names) > 3 else "")
        subject = f"Node {shown} is" if len(names) == 1 else f"Nodes {shown} are"
        note = (f"; {subject} not Ready (no Ready condition True), so tainted {' or '.join(keys)}, which the pod does "
                "not tolerate")
    if memo is not None:
        memo[key] = note
    return note


def _held_host_ports(pods: Sequence[Any]) -> dict[str, set[HostPort]]:
    """Node name -> the host ports its bound pods hold (the pods that declare any)."""
    held: dict[str, set[HostPort]] = {}
    for view in pods:
        if isinstance(view, PodView) and view.bound and (info := view.try_info()) is not None and info.host_ports:
            held.setdefault(view.node_name, set()).update(info.host_ports)
    return held


def host_port_note(view: PodView, held: Mapping[str, set[HostPort]]) -> str:
    """``"; Node NAME has host port 9100/TCP in use"`` for a pending pod whose host ports pods bound
    on existing Nodes hold (at most 3 named), or ``""``: its reason is about NodePools, and the
    Node that turned it away went unnamed (trial 24: "no NodePool is available", the port only in
    ``--explain``). ``held``: :func:`_held_host_ports`."""
    ports = view.info.host_ports if held else frozenset()
    if not ports:
        return ""
    clashes = [(name, clash) for name, used in sorted(held.items()) if (clash := ports_conflict(used, ports)) is not None]
    if not clashes:
        return ""
    shown = ", ".join(name for name, _ in clashes[:3]) + (f" (+{len(clashes) - 3:,} more)" if len(clashes) > 3 else "")
    _, port, proto = clashes[0][1]
    return f"; {'Node' if len(clashes) == 1 else 'Nodes'} {shown} {'has' if len(clashes) == 1 else 'have'} host port {port}/{proto} in use"


def _unrecorded_reason(sim: Simulator, key: str, not_ready: frozenset[str]) -> str:
    """Why the pending pod ``key`` has no reason from the last provisioning pass: the pass placed
    it (on a NodeClaim still launching, or on a node that has not taken it yet: ``not_ready``
    names the cluster's Nodes whose ``Ready`` condition is not ``True``) or never saw it (the run
    ended first), or there is no NodePool at all."""
    claim = sim.nominations.target_of(key)
    if claim:
        failed = _launch_failure(sim, claim)
        if failed:
            return f"pending: planned on NodeClaim {claim}, whose launch failed: {failed}"
        return f"pending: planned on NodeClaim {claim}, which had not taken it when the run ended"
    waiting = sim.placed_existing.get(key)
    if waiting in not_ready:
        return (f"pending: waiting for Node {waiting} to become Ready: karpy (as Karpenter) counts it as capacity on its way "
                "and launches nothing for this pod, and kube-scheduler places no pod on it until its Ready condition is True")
    if not sim.cluster.snapshot("NodePool"):
        return "pending: no NodePool is defined"
    return "pending: no provisioning pass placed or refused it before the run ended"


def _daemonsets(sim: Simulator) -> list[dict[str, Any]]:
    """``[{namespace, name, requests, pods, pending}]`` per DaemonSet (namespace, name order): one
    pod's requests (Kubernetes quantities, init containers and overhead included, as the scheduler
    counts them), the DaemonSet's pods running at the end of the run (bound to a node) and those
    left Pending (pinned to a node that has no room for them: listed among the pending pods, so
    counted here too; trial 18 read ``x0`` next to a pending pod of the DaemonSet)."""
    running: dict[tuple[str, str], int] = {}
    pending: dict[tuple[str, str], int] = {}
    for p in sim.cluster.snapshot("Pod"):  # read only: no copies of every pod
        meta = p["metadata"]
        counts = running if (p.get("spec") or {}).get("nodeName") else pending
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") == "DaemonSet":
                key = (meta.get("namespace", "default"), ref.get("name", ""))
                counts[key] = counts.get(key, 0) + 1
    out = []
    for ds in sim.cluster.snapshot("DaemonSet"):
        meta = ds.get("metadata") or {}
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        try:
            (info,) = daemonset_pod_infos([ds])
            requests = {r: format_quantity(r, v) for r, v in sorted(info.requests.items()) if v and r != "pods"}
        except ValueError:  # refused earlier by the loader; never fail the report on it
            requests = {}
        out.append({"namespace": ns, "name": name, "requests": requests, "pods": running.get((ns, name), 0),
                    "pending": pending.get((ns, name), 0)})
    return sorted(out, key=lambda d: (d["namespace"], d["name"]))


def launched_nodes(sim: Simulator) -> set[str]:
    """The names of the Nodes karpy launched in this run: labelled ``karpenter.sh/nodepool``, not
    given as input (:attr:`Simulator.given`), and not the Node of a NodeClaim given as input
    (matched by ``status.nodeName`` or provider ID). A Node given as input existed before the run,
    whatever its labels say; ``--from-cluster`` seeds the live objects without :meth:`Simulator.apply`,
    so its live Nodes count by their label as before."""
    given_nodes = sim.given["Node"]
    given_claims = [nc for nc in sim.cluster.snapshot("NodeClaim") if nc["metadata"]["name"] in sim.given["NodeClaim"]]
    claimed = {str(v) for nc in given_claims for v in ((nc.get("status") or {}).get("nodeName"),
                                                       (nc.get("status") or {}).get("providerID")) if v}
    out = set()
    for n in sim.cluster.snapshot("Node"):
        name = n["metadata"]["name"]
        if not (n["metadata"].get("labels") or {}).get(LABEL_NODEPOOL) or name in given_nodes:
            continue
        if name in claimed or (n.get("spec") or {}).get("providerID") in claimed:
            continue
        out.add(name)
    return out


async def _reference(sim: Simulator, types_by_pool: dict[str, list[InstanceType]], cost: float,
                     time_limit: float) -> Reference:
    """The optimum or lower bound for the pods bound to nodes karpy launched (:func:`launched_nodes`),
    over every Ready NodePool of the cluster the provider manages (``types_by_pool``'s) with its instance types and DaemonSets
    (:func:`karpy_core.sim.optimum.reference`); ``cost`` (karpy's USD/hour) is the MILP's upper bound.
    A plan costing 0 (free offerings) is the optimum without solving: no price is negative."""
    launched = launched_nodes(sim)
    pods: list[PodInfo] = []
    for view in sim.cluster.views("Pod") or ():
        assert isinstance(view, PodView)
        if view.node_name not in launched or view.terminal or view.deleting:
            continue
        if any(r.get("kind") == "DaemonSet" for r in view.raw["metadata"].get("ownerReferences") or ()):
            continue
        info = view.try_info()
        if info is not None:
            pods.append(info)
    if not pods:
        return Reference("unavailable", note="no pods on launched nodes")
    if cost <= 0:  # free offerings (prices are never negative: karpy_core.cloudprovider.calls.check_instance_types)
        return Reference("optimum", 0.0, pods=len(pods), note="free offerings: no plan costs less than 0")
    # only NodePools that may launch: one that is not Ready (its NodeClass missing, a template
    # that does not validate) launches nothing, so no plan can use it (trial 16: a NodePool whose
    # NodeClass was not given made the "optimum" 0.0068 against karpy's 0.0765 USD/hour)
    pools = [v for v in sim.cluster.views("NodePool") or ()
             if isinstance(v, NodePoolView) and v.name in types_by_pool and v.ready]
    try:
        templates = [template_from_nodepool(v.raw, types_by_pool[v.name]) for v in pools]
        tables = type_tables(templates, daemonset_pod_infos(sim.cluster.snapshot("DaemonSet")))
    except ValueError as exc:
        return Reference("unavailable", note=f"cannot build the reference: {exc}")
    return reference(list(tables.values()), pods, upper_bound=cost, time_limit=time_limit)


def event_dicts(events: Sequence[SimEvent]) -> list[dict[str, Any]]:
    """The JSON form of ``events`` (:meth:`SimEvent.to_dict`), with the NodeClaim of each node
    named where the event itself names only the node (evictions, drains, disruption decisions:
    the node's NodeClaim is known from its register event; nodes of a multi-node command joined
    by commas, as the node field is). ``nodeclaim`` and ``node`` are null where the event has
    none (scenario steps; a launch before its node exists; a Node karpy did not create)."""
    claim_of = {e.node: e.nodeclaim for e in events if e.node and e.nodeclaim and "," not in e.node}
    out = []
    for e in events:
        d = e.to_dict()
        nodes = [n for n in e.node.split(",") if n]
        if not e.nodeclaim and nodes and all(n in claim_of for n in nodes):
            d["nodeclaim"] = ",".join(claim_of[n] for n in nodes)
        for k in ("nodeclaim", "node"):
            d[k] = d[k] or None
        out.append(d)
    return out


async def build_report(sim: Simulator, *, provider_info: dict[str, Any] | None = None,
                       reference_time_limit: float | None = REFERENCE_TIME_LIMIT) -> SimulationReport:
    """Summarise the simulator's cluster: nodes with prices and pods, every pod's placement or the
    reason it is pending, the workloads simulated; for scenario runs the cost and capacity series;
    for plain runs (no disruption) the optimum or lower bound of the launched nodes' cost, HiGHS
    given ``reference_time_limit`` seconds (None: not computed)."""
    types: dict[str, InstanceType] = {}
    types_by_pool: dict[str, list[InstanceType]] = {}
    pool_types: dict[str, dict[str, InstanceType]] = {}
    managed = sim.provider.managed_node_classes()
    for np_view in sim.cluster.views("NodePool") or ():
        assert isinstance(np_view, NodePoolView)
        if not is_managed(np_view, managed):  # left out, as the controller leaves it out (a warning in the report says so):
            continue                          # the provider is not asked for the types of a NodeClass it does not serve
        types_by_pool[np_view.name] = await sim.provider.get_instance_types(np_view.model)  # overlaid with NodeOverlay on
        for it in types_by_pool[np_view.name]:
            types.setdefault(it.name, it)
            pool_types.setdefault(np_view.name, {})[it.name] = it
    sim.report_progress.phase("building the report")
    pods = sim.cluster.views("Pod") or []
    nodes: list[NodeReport] = []
    by_name: dict[str, NodeReport] = {}
    launched = launched_nodes(sim)
    for n in sim.cluster.snapshot("Node"):
        labels = dict(n["metadata"].get("labels") or {})
        pool = labels.get(LABEL_NODEPOOL)
        mine = n["metadata"]["name"] in launched
        rep = NodeReport(
            name=n["metadata"]["name"],
            nodepool=pool,
            instance_type=labels.get(LABEL_INSTANCE_TYPE, ""),
            zone=labels.get(LABEL_ZONE, ""),
            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""),
            price_per_hour=_launched_price(sim, pool_types.get(pool, types), labels) if pool and mine else None,
            labels=labels,
            taints=[dict(t) for t in (n.get("spec") or {}).get("taints") or []],
            allocatable=parse_resource_list((n.get("status") or {}).get("allocatable")),
            requested={},
            launched=mine,
        )
        nodes.append(rep)
        by_name[rep.name] = rep
    pod_reports: list[PodReport] = []
    waiting_ds: list[tuple[int, PodView]] = []  # index in pod_reports, DaemonSet pod left pending
    # the Nodes a pending pod may wait for, read once (not once per pending pod)
    not_ready_views = [v for v in sim.cluster.views("Node") or () if isinstance(v, NodeView) and not v.ready]
    not_ready = frozenset(v.name for v in not_ready_views)
    not_ready_memo: dict[Any, str] = {}
    held = _held_host_ports(pods)
    rs_owner = _replicaset_owners(sim)
    for view in pods:
        assert isinstance(view, PodView)
        meta = view.raw["metadata"]
        key = f"{meta.get('namespace', 'default')}/{meta['name']}"
        node = (view.raw.get("spec") or {}).get("nodeName")
        is_ds = any(r.get("kind") == "DaemonSet" for r in meta.get("ownerReferences") or ())
        if node in by_name:
            with contextlib.suppress(ValueError):
                add_into(by_name[node].requested, view.info.requests)  # parsed once per pod version
            (by_name[node].daemon_pods if is_ds else by_name[node].pods).append(key)
        if is_ds and node:
            continue
        reason = None
        if is_ds:  # pinned to its node, which had no room: kube-scheduler left it Pending
            waiting_ds.append((len(pod_reports), view))
        elif node and node not in by_name:
            reason, node = missing_node_reason(node), None
        elif not node:
            reason = gated_reason(view)
            if not reason and key in sim.pending_reasons:
                reason = (sim.pending_reasons[key] + not_ready_note(view, not_ready_views, not_ready_memo)
                          + host_port_note(view, held))
            reason = reason or _unrecorded_reason(sim, key, not_ready)
        workload = _top_owner(meta, rs_owner)[1]
        pod_reports.append(PodReport(meta.get("namespace", "default"), meta["name"], node or None, reason, workload))
    for i, view in waiting_ds:  # reasons once every node's requests are summed
        pod_reports[i].reason = daemon_pod_reason(view, by_name)
    overlays: dict[str, list[str]] = {}
    store = getattr(sim.provider, "overlays", None)
    for rep in nodes:
        if store is not None and rep.nodepool:
            lines = [c.text() for c in store.changes_by_name(rep.nodepool, rep.instance_type)
                     if c.kind == "capacity" or (c.zone, c.capacity_type) == (rep.zone, rep.capacity_type)]
            if lines:
                overlays[rep.name] = lines
    room = await headroom(sim, {n.name: n.price_per_hour for n in nodes}, {n.name: n.allocatable for n in nodes})
    report = SimulationReport(
        headroom=room,
        provider=provider_info or {"name": sim.provider.name},
        nodes=nodes,
        pods=pod_reports,
        events=event_dicts(sim.events),
        explanations=dict(sim.explanations),
        cost_over_time=list(sim.cost_over_time) if sim.disruption_enabled else None,
        decisions={n: sim.disruption.explain(n) for n in sorted(sim.disruption.decisions)},
        decision_records={n: sim.disruption.records(n) for n in sorted(sim.disruption.decisions)},
        warnings=[f"{owner}: pods not created: {why}" for owner, why in sorted(sim.workloads.failed_creates.items())]
        + [f"{owner}: pods refused for a while, then created: {why}" for owner, why in sorted(sim.workloads.late_creates.items())]
        + _overlay_warnings(sim) + _buffer_warnings(sim),
        timeline=list(sim.timeline) if sim.disruption_enabled else None,
        workloads=_workloads(sim),
        empty_workloads=_empty_workloads(sim),
        daemonsets=_daemonsets(sim),
        overlays=overlays,
        start=sim.start,
    )
    if not sim.disruption_enabled and reference_time_limit is not None and (report.cost_per_hour > 0 or launched_nodes(sim)):
        sim.report_progress.phase(f"cheapest plan to compare (HiGHS, {reference_time_limit:g} s solving)")
        report.reference = await _reference(sim, types_by_pool, report.cost_per_hour, reference_time_limit)
    return report


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _simulated_lines(report: SimulationReport, *, max_items: int = 14) -> list[str]:
    """What was simulated: inputs, pods, workloads (largest first) and NodePools."""
    wl = report.workloads
    pods = sum(w["pods"] for w in wl)
    pools = sorted({n.nodepool for n in report.nodes if n.nodepool and n.launched})
    inputs = report.provider.get("inputs")
    head = f"simulated: {_plural(pods, 'pod')} from {_plural(len(wl), 'workload')}"
    if inputs:
        head += f" ({inputs})"
    if pools:
        head += f", launched by NodePool{'s' if len(pools) > 1 else ''} {', '.join(pools)}"
    kinds: dict[str, list[dict[str, Any]]] = {}
    for w in wl:
        kinds.setdefault(w["kind"], []).append(w)
    parts = []
    for kind, items in sorted(kinds.items(), key=lambda kv: -sum(w["pods"] for w in kv[1])):
        items = sorted(items, key=lambda w: (-w["pods"], w["name"]))
        shown = ", ".join(f"{w['name'] or '(bare)'} x{w['pods']:,}" for w in items[:max_items])
        more = f", +{len(items) - max_items} more" if len(items) > max_items else ""
        parts.append(f"{_plural(len(items), kind)}: {shown}{more}")
    if report.daemonsets:  # not workloads of their own: the overhead every node they run on carries
        shown = ", ".join(f"{d['name']} ({', '.join(f'{r} {q}' for r, q in d['requests'].items()) or 'no requests'}) x{d['pods']:,}"
                          + (f" ({d['pending']:,} pending)" if d.get("pending") else "") for d in report.daemonsets[:max_items])
        more = f", +{len(report.daemonsets) - max_items} more" if len(report.daemonsets) > max_items else ""
        parts.append(f"{_plural(len(report.daemonsets), 'DaemonSet')} (overhead on every node they run on): {shown}{more}")
    body = [line for part in parts for line in textwrap.wrap(part, 110, initial_indent="  ", subsequent_indent="    ")]
    return [head, *body]


def _reference_line(report: SimulationReport) -> str | None:
    """``optimum: ...`` / ``lower bound: ...`` / ``optimum: not computed: ...`` next to the total."""
    ref = report.reference
    if ref is None:
        return None
    if ref.value is None:
        return f"optimum: not computed: {ref.note}"
    cost = report.cost_per_hour
    gap = ref.gap(cost) or 0.0
    what = ", ".join(f"{n:,} x {t}" for t, n in ref.plan.items()) if ref.plan else ref.note
    left = f" ({ref.unplaceable:,} pods fit no instance type, left out)" if ref.unplaceable else ""
    head = f"{ref.status}: {ref.value:,.4f} USD/hour for the {_plural(ref.pods, 'pod')} on launched nodes"
    if what:
        head += f" ({what})"
    if abs(gap) < 1e-6:
        verdict = "karpy's plan is optimal" if ref.status == "optimum" else "karpy's plan meets the bound: optimal"
    elif ref.status == "optimum":
        verdict = f"karpy's plan costs {100 * gap:.1f}% more ({cost - ref.value:+,.4f} USD/hour)"
    else:
        # the cheapest plan costs somewhere between the bound and karpy's: what karpy's plan may
        # overpay is at most its distance to the bound (a percentage above 100% read as "within")
        verdict = (f"karpy's plan costs at most {cost - ref.value:,.4f} USD/hour more than the cheapest possible "
                   f"({cost / ref.value:.2f}x the lower bound)")
    return f"{head}{left}: {verdict}"


def _end_cost_note(report: SimulationReport, end_cost: float) -> list[str]:
    """A line reconciling the run's end USD/hour (every launched instance, the cloud bills it from
    launch) with the node table's total (registered Nodes), when they differ; else none."""
    table = report.cost_per_hour
    if abs(end_cost - table) < 5e-5:
        return []
    series = report.cost_over_time or []
    launched = series[-1]["nodes"] if series else 0
    in_table = sum(1 for n in report.nodes if n.launched)
    return [f"                  (the node table's total is {table:.4f}: {launched} instance(s) running at the end, "
            f"{in_table} of them registered as Nodes; the others are billed but not in the table)"]


def _day_lines(report: SimulationReport) -> list[str]:
    """The summary of a scenario run (:class:`DaySummary`), as text."""
    d = day_summary(report)
    dis = "; ".join(f"{reason}: {_plural(v['commands'], 'command')}, {_plural(v['nodes'], 'node')}"
                    for reason, v in d.disruptions.items()) or "none"
    undone = "; ".join(f"{reason}: {_plural(n, 'command')}" for reason, n in d.undone.items()) or "none"
    incomplete = [f"                  {_plural(d.consolidation_incomplete, 'consolidation command')} did not complete: "
                  "the cloud did not delete their instances by the end (nothing saved)"] if d.consolidation_incomplete else []
    return [
        f"summary of the run ({duration_text(d.seconds)} simulated):",
        f"  spent:          {d.total_usd:.4f} USD (USD/hour integrated over the run)",
        f"  USD/hour:       {d.start_cost_per_hour:.4f} after the first steps were provisioned -> {d.end_cost_per_hour:.4f} at end "
        f"(peak {d.peak_cost_per_hour:.4f})",
        *_end_cost_note(report, d.end_cost_per_hour),
        f"  consolidation:  saved {d.consolidation_savings_usd:.4f} USD ({d.consolidation_savings_per_hour:.4f} USD/hour "
        f"removed by {_plural(d.consolidation_commands, 'command')}, each counted from its instances' termination to the end)",
        *incomplete,
        f"  disruptions:    {dis}",
        f"  undone:         {undone} (a node launched for the pods a consolidation moved)",
        f"  pending pods:   peak {d.peak_pending_pods:,}" + (f" at {duration_text(d.peak_pending_t)}" if d.peak_pending_pods else ""),
    ]


def render_text(report: SimulationReport, *, max_pods_per_node: int = 6) -> str:
    """A human-readable report: what was simulated; nodes with price, utilisation and pods (a ``no
    nodes`` line instead of an empty table); totals
    (plain runs: with the optimum or lower bound and the gap); pending pods with their reasons;
    scenario runs end with the :class:`DaySummary`."""
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
        count = len(report.ignored)
        lines.append(f"ignored (not simulated): {count} object{'' if count == 1 else 's'} ({kinds})")
    if report.provider.get("scenario"):
        lines.append(f"scenario {report.provider['scenario']}: {duration_text(_end_seconds(report))} simulated")
    else:
        lines.extend(_simulated_lines(report))
    lines.append("")
    if not report.nodes:  # no table to head: say so in words
        lines.append("no nodes (none given, none launched)" if not report.provider.get("scenario") else
                     "no nodes at the end of the run")
    wn = max([28, *(len(n.name) for n in report.nodes)])
    wp = max([18, *(len(n.nodepool or "(not managed)") for n in report.nodes)])
    wt = max([15, *(len(n.instance_type) for n in report.nodes)])
    wz = max([17, *(len(n.zone) for n in report.nodes)])
    prices = [f"{n.price_per_hour:,.4f}" if n.price_per_hour is not None else "-" for n in report.nodes]
    wc = max([10, *(len(n.capacity_type) for n in report.nodes)])
    wu = max([9, *(len(p) for p in prices)])  # a plugin's price can have any number of digits (trial 16: 50,000,000)
    header = (
        f"{'NODE':<{wn}} {'NODEPOOL':<{wp}} {'INSTANCE TYPE':<{wt}} {'ZONE':<{wz}} {'CAPACITY':<{wc}} "
        f"{'USD/HOUR':>{wu}} {'PODS':>5} {'CPU':>5} {'MEMORY':>7}"
    )
    if report.nodes:
        lines.append(header)
    for n, price in zip(report.nodes, prices, strict=True):
        lines.append(
            f"{n.name:<{wn}} {n.nodepool or '(not managed)':<{wp}} {n.instance_type:<{wt}} {n.zone:<{wz}} {n.capacity_type:<{wc}} "
            f"{price:>{wu}} {len(n.pods):>5} {_pct(n.utilisation('cpu')):>5} {_pct(n.utilisation('memory')):>7}"
        )
        shown = sorted(n.pods)[:max_pods_per_node]
        more = len(n.pods) - len(shown)
        if shown:
            lines.append("    pods: " + ", ".join(shown) + (f", +{more} more" if more > 0 else ""))
    s = report.summary()
    lines.append("")
    noun = "node" if s["nodes"] == 1 else "nodes"
    lines.append(
        f"total: {s['nodes']:,} {noun} ({s['nodes_launched']:,} launched by karpy), {s['cost_per_hour']:,.4f} USD/hour "
        f"(~{s['cost_per_hour'] * HOURS_PER_MONTH:,.2f} USD/month at {HOURS_PER_MONTH} h)"
    )
    ref = _reference_line(report)
    if ref:
        lines.append(ref)
    lines.append(f"pods: {s['pods_bound']:,} bound, {s['pods_pending']:,} pending")
    pending = [p for p in report.pods if not p.node]
    if pending:
        lines.append("")
        lines.append("pending pods:")
        for p in pending:
            lines.append(f"  {p.namespace}/{p.name}: {p.reason}")
    if report.cost_over_time:
        lines.append("")
        lines.extend(_day_lines(report))
    if report.headroom is not None:
        lines += ["", *render_headroom(report.headroom)]
    return "\n".join(lines)


PLOT_EXTRA = "pip install 'karpy[sim]'"
"""How to get the timeline plot: matplotlib comes with the ``sim`` extra only (the controller image
does not carry it); in a checkout, ``.venv/bin/pip install -e '.[sim]'``."""


class TimelineUnavailableError(RuntimeError):
    """The timeline cannot be drawn because matplotlib (the ``sim`` extra) is not installed; the
    message says how to install it. The simulation itself is unaffected."""


REASON_COLORS = {"Empty": "tab:green", "Underutilized": "tab:orange", "Drifted": "tab:purple", "Expired": "tab:brown"}
"""Colour of each disruption reason's marks on the timeline (others: grey)."""
NODES_COLOR = "crimson"
"""The timeline's node-count line, with its right-hand axis' ticks, label and spine (no stack or
reason colour)."""
STACK_COLORS = ("tab:blue", "tab:cyan", "tab:olive", "tab:pink", "#1f3b73", "#7fb3d5", "#8c8c3c", "#c9a0dc")
"""Colours of the USD/hour stacks (NodePool / capacity type), cycled: none is a disruption
reason's (:data:`REASON_COLORS`) or grey, so a marker never reads as a bar."""


def _disruption_marks(report: SimulationReport) -> dict[str, list[float]]:
    """Reason -> the times (seconds since the start) of its disruption commands (``disrupt``
    events; ``expire`` as Expired)."""
    marks: dict[str, list[float]] = {}
    for e in report.events:
        if e["kind"] == "disrupt":
            marks.setdefault(e["reason"] or "unknown", []).append(e["t"])
        elif e["kind"] == "expire":
            marks.setdefault("Expired", []).append(e["t"])
    return dict(sorted(marks.items()))


def timeline_figure(report: SimulationReport) -> Figure:
    """The timeline as a matplotlib figure (Agg backend): four panels over simulated time, the x
    axis in UTC (``report.start`` + t: budget windows are UTC crons; hours since the start when the
    start is unknown),

    1. USD/hour stacked per NodePool and capacity type (left axis), with the node count as a line
       on its own right-hand axis (integer ticks, in :data:`NODES_COLOR` with its ticks and label,
       its top at 1.5 x the peak + 1 so the line stands clear of the cost areas);
    2. cpu requested vs allocatable (cores, all NodePools);
    3. memory requested vs allocatable (GiB);
    4. pending pods (integer ticks);

    each with the disruption commands as vertical lines coloured by reason
    (:data:`REASON_COLORS`). Every panel has a legend. The caller closes the figure.

    Raises:
        TimelineUnavailableError: matplotlib is not installed.
        ValueError: the report has no ``timeline`` (not a scenario run).
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise TimelineUnavailableError(f"matplotlib is not installed; {PLOT_EXTRA} to draw it") from exc

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator

    series = report.timeline
    if not series:
        raise ValueError("no timeline series: run a scenario (karpy simulate SCENARIO --until ...)")
    end = _end_seconds(report)
    start = report.start

    def x(t: float) -> Any:  # a UTC datetime (matplotlib's date axis), else hours
        return datetime.fromtimestamp(start + t, UTC) if start is not None else t / 3600

    ts = [x(s["t"]) for s in series] + [x(end)]

    def col(f: Any) -> list[float]:
        vals = [float(f(s)) for s in series]
        return vals + vals[-1:]

    def pools(s: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = s["nodepools"]
        return out

    stacks = sorted({(p, ct) for s in series for p, v in pools(s).items() for ct in v["cost_by_capacity_type"]})
    fig, axes = plt.subplots(4, 1, figsize=(11, 10), sharex=True, gridspec_kw={"height_ratios": [3, 2, 2, 1.4]})
    ax_cost, ax_cpu, ax_mem, ax_pend = axes
    if stacks:
        ys = [col(lambda s, p=p, ct=ct: pools(s).get(p, {}).get("cost_by_capacity_type", {}).get(ct, 0.0)) for p, ct in stacks]
        ax_cost.stackplot(ts, *ys, step="post", labels=[f"{p} / {ct}" for p, ct in stacks], alpha=0.75,
                          colors=[STACK_COLORS[i % len(STACK_COLORS)] for i in range(len(stacks))])
    ax_cost.set_ylabel("USD/hour (areas, left axis)")
    # the node count has its own right-hand axis, in its own colour, with headroom above its peak
    # so its line does not sit on the top of the cost areas as if it were read on the USD axis
    ax_nodes = ax_cost.twinx()
    counts = col(lambda s: sum(v["nodes"] for v in pools(s).values()))
    ax_nodes.step(ts, counts, where="post", color=NODES_COLOR, linewidth=1.6, label="nodes (line, right axis)")
    ax_nodes.set_ylabel("nodes (line, right axis)", color=NODES_COLOR)
    ax_nodes.tick_params(axis="y", colors=NODES_COLOR)
    ax_nodes.spines["right"].set_color(NODES_COLOR)
    ax_nodes.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_nodes.set_ylim(0, max(counts) * 1.5 + 1)
    h1, l1 = ax_cost.get_legend_handles_labels()
    h2, l2 = ax_nodes.get_legend_handles_labels()
    marks = _disruption_marks(report)
    for ax in axes:
        for reason, times in marks.items():
            for t in times:
                ax.axvline(x(t), color=REASON_COLORS.get(reason, "grey"), alpha=0.6, linewidth=1.0, linestyle="--")
    h3 = [Line2D([0], [0], color=REASON_COLORS.get(r, "grey"), linestyle="--", label=f"disruption: {r} ({len(v)})")
          for r, v in marks.items()]
    ax_cost.legend(h1 + h2 + h3, l1 + l2 + [str(h.get_label()) for h in h3], loc="upper right", fontsize=8)
    ax_cost.set_title(f"karpy simulate {report.provider.get('scenario') or ''}: cost, capacity and pending pods")
    for ax, key, scale, unit in ((ax_cpu, "cpu", 1.0, "cpu (cores)"), (ax_mem, "memory", 1 / 1024, "memory (GiB)")):
        suffix = "_mib" if key == "memory" else ""
        ax.step(ts, col(lambda s, k=f"{key}_allocatable{suffix}", f=scale: f * sum(v[k] for v in pools(s).values())),
                where="post", color="tab:blue", label="allocatable")
        req = col(lambda s, k=f"{key}_requested{suffix}", f=scale: f * sum(v[k] for v in pools(s).values()))
        ax.fill_between(ts, req, step="post", color="tab:red", alpha=0.35, label="requested")
        ax.set_ylabel(unit)
        ax.set_ylim(bottom=0)
        ax.legend(loc="upper right", fontsize=8)
    ax_pend.step(ts, col(lambda s: s["pending_pods"]), where="post", color="tab:red", label="pending pods")
    ax_pend.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_pend.set_ylim(bottom=0)
    ax_pend.set_ylabel("pods")
    ax_pend.legend(loc="upper right", fontsize=8)
    if start is not None:
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()  # type: ignore[no-untyped-call]
        ax_pend.xaxis.set_major_locator(locator)
        ax_pend.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
        ax_pend.set_xlabel("simulated time (UTC)")
    else:
        ax_pend.set_xlabel("simulated time (hours since the start)")
    fig.tight_layout()
    return fig


def write_timeline_png(report: SimulationReport, path: str) -> str:
    """Draw :func:`timeline_figure` into an image at ``path`` (format from its extension, PNG
    without one; written at exactly ``path``); returns ``path``. Needs matplotlib (the ``sim``
    extra; imported only here and in :func:`timeline_figure`, with the non-interactive Agg backend).

    Raises:
        TimelineUnavailableError: matplotlib is not installed.
        ValueError: the report has no ``timeline`` (not a scenario run).
        OSError: the image cannot be written.
    """
    fig = timeline_figure(report)
    import matplotlib.pyplot as plt

    try:
        fig.savefig(path, dpi=100, format=Path(path).suffix.lower().lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path
