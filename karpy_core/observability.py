"""Metrics, health endpoints and structured logs.

Metrics use Karpenter's names where Karpenter has the metric (``pkg/metrics/metrics.go``,
``pkg/controllers/provisioning/scheduling/metrics.go``, ``pkg/cloudprovider/metrics``), so existing
Grafana dashboards keep working; karpy-only metrics start with ``karpy_``.

The HTTP server (aiohttp, already a dependency of kubernetes-asyncio) serves ``/healthz``
(liveness: the event loop answers), ``/readyz`` (readiness: informer caches synced) and
``/metrics`` (Prometheus text format).

Logs: :mod:`karpy_core.logs` (Karpenter's JSON shape; :func:`configure_logging` is re-exported
here).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import platform
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, cast

from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.samples import Sample
from prometheus_summary import Summary as _QuantileSummaryBase  # type: ignore[import-untyped]

from karpy_core.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
    metric_label_keys,
)
from karpy_core.scheduling.resources import parse_resource_list
from karpy_core.state.views import Condition, NodeClaimView, NodePoolView, NodeView, ObjectView, PodView
from karpy_core.utils.quantity import QuantityError
from karpy_core.utils.timestamps import try_parse_rfc3339

__all__ = [
    "KARPY_LOGGERS",
    "ClusterStateCollector",
    "DryRunMetrics",
    "HealthServer",
    "Metrics",
    "QuantileSummary",
    "ResettableGauge",
    "SchedulingQueue",
    "configure_logging",
    "parse_debug_loggers",
]


DURATION_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60, 120, 150, 300, 450, 600,
)  # fmt: skip
"""Karpenter's ``metrics.DurationBuckets()`` (``pkg/metrics/constants.go``): controller-runtime's
reconcile buckets plus 120 s - 600 s, in seconds."""
RECONCILE_BUCKETS = DURATION_BUCKETS[: DURATION_BUCKETS.index(60) + 1]
"""controller-runtime's ``controller_runtime_reconcile_time_seconds`` buckets (0.005 s - 60 s)."""
SUMMARY_QUANTILES = (0.0, 0.5, 0.9, 0.99, 1.0)
"""Karpenter's ``metrics.SummaryObjectives()``: these quantiles, each with error 0.01."""
NODE_LIFETIME_BUCKETS = tuple(
    float(m * 60) for m in (15, 30, 45)
) + tuple(float(h * 3600) for h in (1, 2, 4, 6, 8, 10, 12, 16, 20)) + tuple(float(d * 86400) for d in (1, 2, 3, 5, 10, 15, 20, 25, 30))
"""``karpenter_nodes_lifetime_duration_seconds`` buckets (``pkg/controllers/node/termination/metrics.go``):
15 min to 30 days."""
NODECLAIM_TERMINATION_BUCKETS = tuple(float(2**i) for i in range(12))
"""``karpenter_nodeclaims_termination_duration_seconds`` buckets: ``ExponentialBuckets(1, 2, 12)``, 1 s - 2048 s."""

CONSOLIDATION_TYPES = {
    "emptiness": ("empty", "empty"),
    "static-drift": ("drifted", ""),
    "drift": ("drifted", ""),
    "multi-node-consolidation": ("underutilized", "multi"),
    "single-node-consolidation": ("underutilized", "single"),
    "repack-consolidation": ("underutilized", "repack"),
}
"""karpy's disruption method -> (``reason``, ``consolidation_type``) label values, as Karpenter's
methods report them (``Reason()`` lower-cased, ``ConsolidationType()``); ``repack`` is karpy's own
(N -> M consolidation, which Karpenter lacks)."""


def metric_resource_name(name: str) -> str:
    """A resource name as a ``resource_type`` label value: lower case, ``-`` -> ``_``
    (``ephemeral-storage`` -> ``ephemeral_storage``), as Karpenter's ``resourceNameToString``."""
    return name.lower().replace("-", "_")


def metric_label_name(label_key: str) -> str:
    """A node label key as a metric label name: the part after ``/``, snake case
    (``node.kubernetes.io/instance-type`` -> ``instance_type``), as Karpenter's ``getWellKnownLabels``."""
    return label_key.rsplit("/", 1)[-1].lower().replace("-", "_")


def _resource_value(name: str, amount: int) -> float:
    """karpy's internal unit -> the metric's: cores for ``cpu`` (internally millicores), base units otherwise."""
    return amount / 1000 if name == "cpu" else float(amount)


class QuantileSummary(_QuantileSummaryBase):  # type: ignore[misc]  # prometheus-summary ships no annotations
    """A Prometheus summary with quantiles over a sliding 10-minute window (5 age buckets), like
    client_golang's with Karpenter's objectives (:data:`SUMMARY_QUANTILES`, error 0.01). The
    ``quantile`` label is formatted as Go does (``0``, ``0.5``, ``1``), so dashboard queries such as
    ``quantile="0"`` match. Built on the ``prometheus-summary`` package."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *, registry: CollectorRegistry | None = None,
                 _labelvalues: Sequence[str] | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("invariants", tuple((q, 0.01) for q in SUMMARY_QUANTILES))
        super().__init__(name, documentation, labelnames=labelnames, registry=registry, _labelvalues=_labelvalues, **kwargs)

    def _child_samples(self) -> Iterable[Sample]:
        out = []
        for s in super()._child_samples():
            if "quantile" in s.labels:
                s = s._replace(labels={**s.labels, "quantile": f"{float(s.labels['quantile']):g}"})
            out.append(s)
        return out


class ResettableGauge:
    """A gauge whose series are replaced as a whole on each pass (:meth:`replace`), so a label set
    the pass no longer reports disappears instead of keeping its last value."""

    def __init__(self, gauge: Gauge) -> None:
        self.gauge = gauge

    def replace(self, values: Mapping[tuple[str, ...], float], **match: str) -> None:
        """Set every series in ``values`` (label values in the gauge's label order) and remove the
        series not in it. With ``match`` (label name -> value), only series with those label values
        are replaced; others are kept."""
        names = list(self.gauge._labelnames)
        positions = [(names.index(k), v) for k, v in match.items()]
        for key in list(self.gauge._metrics):
            if all(key[i] == v for i, v in positions) and key not in values:
                self.gauge.remove(*key)
        for key, value in values.items():
            self.gauge.labels(*key).set(value)


class SchedulingQueue:
    """``karpenter_scheduler_queue_depth``: the pods the last scheduling pass of each controller
    left unplaced, as a set of pod keys (``namespace/name``). A pod leaves the set when it is bound,
    finishes or is deleted (:meth:`discard`), so the gauge returns to 0 once every pod is bound,
    even when no further pass runs."""

    def __init__(self) -> None:
        self._queues: dict[str, tuple[str, set[str]]] = {}
        self._lock = threading.Lock()

    def set(self, controller: str, scheduling_id: str, pods: Iterable[str]) -> None:
        """Record the pods ``controller``'s pass ``scheduling_id`` could not place (replacing the previous pass)."""
        with self._lock:
            self._queues[controller] = (scheduling_id, set(pods))

    def discard(self, pod_key: str) -> None:
        """A pod was bound, finished or deleted: it no longer waits."""
        with self._lock:
            for _, pods in self._queues.values():
                pods.discard(pod_key)

    def depth(self, controller: str) -> int:
        """How many pods ``controller``'s last pass left waiting (0 when it never ran)."""
        with self._lock:
            entry = self._queues.get(controller)
            return len(entry[1]) if entry else 0

    def samples(self) -> list[tuple[str, str, int]]:
        """(controller, scheduling_id, depth) for each controller that ran a pass."""
        with self._lock:
            return [(c, sid, len(pods)) for c, (sid, pods) in sorted(self._queues.items())]


def _condition(obj: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return cast("Mapping[str, Any]", c)
    return None


def _owner_link(pod: PodView) -> str:
    """The pod's first owner as the self link Karpenter labels ``karpenter_pods_state`` with
    (``/apis/apps/v1/namespaces/default/replicasets/web-6d4cf56db6``)."""
    if not pod.owners:
        return ""
    o = pod.owners[0]
    return f"/apis/{o.api_version}/namespaces/{pod.namespace}/{o.kind.lower()}s/{o.name}"


def _is_true(condition: Condition | None) -> bool:
    return condition is not None and condition.is_true


class StateSource(Protocol):
    """What the scrape-time collector reads: the informer cache (or the in-memory cluster), its
    objects as views parsed once per version (:mod:`karpy_core.state.views`)."""

    def views(self, kind: str) -> Sequence[ObjectView] | None: ...


class ClusterStateCollector:
    """The gauges that describe the cluster as it is now, computed at each scrape from the
    informer cache, so a node or pod that is gone has no series and nothing is left stale:

    - ``karpenter_nodes_{allocatable,total_pod_requests,total_pod_limits,total_daemon_requests,
      total_daemon_limits,system_overhead}`` (node labels + ``resource_type``) and
      ``karpenter_nodes_current_lifetime_seconds`` (``pkg/controllers/metrics/node``);
    - ``karpenter_cluster_utilization_percent``;
    - ``karpenter_pods_state``, ``karpenter_pods_unstarted_time_seconds``,
      ``karpenter_pods_unbound_time_seconds`` (``pkg/controllers/metrics/pod``);
    - ``karpenter_nodepools_usage`` (from the NodePool's ``status.resources``) and
      ``karpenter_nodepools_limit`` (``spec.limits``);
    - ``karpenter_cluster_state_node_count`` and ``karpenter_cluster_state_synced``;
    - ``karpenter_scheduler_queue_depth`` from a :class:`SchedulingQueue`.

    Node label names are Karpenter's well-known labels (plus any a provider registered) in snake
    case, then ``node_name``, ``phase``, ``managed``. CPU is in cores, everything else in base units.

    Args:
        queue: the scheduling queue tracker.
        now: epoch seconds (for ages).

    Attributes:
        source: the informer cache (anything with ``views(kind)``); None until
            :meth:`Metrics.attach_state` sets it (then only the queue depth is reported).
        synced: returns True once the caches are synced.
    """

    def __init__(self, queue: SchedulingQueue, now: Callable[[], float]) -> None:
        self.source: StateSource | None = None
        self._local = threading.local()
        self.synced: Callable[[], bool] = lambda: False
        self.queue = queue
        self.now = now

    def describe(self) -> list[Metric]:
        return []

    @staticmethod
    def node_label_keys() -> list[tuple[str, str]]:
        """(node label key, metric label name) for every well-known label, sorted by metric label."""
        keys = {metric_label_name(k): k for k in sorted(metric_label_keys())}
        return sorted(((k, name) for name, k in keys.items()), key=lambda kv: kv[1])

    def frozen(self, families: list[Metric]) -> _FrozenState:
        """A context in which :meth:`collect` (on this thread) yields ``families`` instead of
        reading the cache: the families are computed on the event loop, the text rendered in a thread."""
        return _FrozenState(self._local, families)

    def collect(self) -> Iterable[Metric]:
        frozen = getattr(self._local, "families", None)
        if frozen is not None:
            yield from frozen
            return
        depth = GaugeMetricFamily("karpenter_scheduler_queue_depth", "The number of pods currently waiting to be scheduled.",
                                  labels=["controller", "scheduling_id"])
        for controller, sid, n in self.queue.samples():
            depth.add_metric([controller, sid], n)
        yield depth
        source = self.source
        if source is None:
            return
        yield from self._collect_state(source)

    def _collect_state(self, source: StateSource) -> Iterable[Metric]:  # noqa: C901
        now = self.now()
        label_keys = self.node_label_keys()
        node_labels = [name for _, name in label_keys] + ["node_name", "phase", "managed"]
        nodes = cast("list[NodeView]", list(source.views("Node") or ()))
        pods = cast("list[PodView]", list(source.views("Pod") or ()))
        claims = cast("list[NodeClaimView]", list(source.views("NodeClaim") or ()))
        pools = cast("list[NodePoolView]", list(source.views("NodePool") or ()))

        families = {
            "allocatable": "Node allocatable are the resources allocatable by nodes.",
            "total_pod_requests": "Node total pod requests are the resources requested by pods bound to nodes, "
                                  "including the DaemonSet pods.",
            "total_pod_limits": "Node total pod limits are the resources specified by pod limits, including the DaemonSet pods.",
            "total_daemon_requests": "Node total daemon requests are the resource requested by DaemonSet pods bound to nodes.",
            "total_daemon_limits": "Node total daemon limits are the resources specified by DaemonSet pod limits.",
            "system_overhead": "Node system daemon overhead are the resources reserved for system overhead, the difference between "
                               "the node's capacity and allocatable values are reported by the status.",
        }
        fam = {k: GaugeMetricFamily(f"karpenter_nodes_{k}", h, labels=[*node_labels, "resource_type"]) for k, h in families.items()}
        lifetime = GaugeMetricFamily("karpenter_nodes_current_lifetime_seconds", "Node age in seconds", labels=node_labels)
        by_node: dict[str, list[PodView]] = {}
        for p in pods:
            if p.bound:
                by_node.setdefault(p.node_name, []).append(p)
        alloc_total: dict[str, int] = {}
        used_total: dict[str, int] = {}
        node_by_name: dict[str, NodeView] = {}
        for n in nodes:
            node_by_name[n.name] = n
            try:
                allocatable = n.allocatable
                capacity = n.capacity
            except QuantityError:
                continue
            base = [n.labels.get(k, "") for k, _ in label_keys]
            base += [n.name, n.phase, "true" if n.nodepool else "false"]
            pod_req: dict[str, int] = {}
            pod_lim: dict[str, int] = {}
            ds_req: dict[str, int] = {}
            ds_lim: dict[str, int] = {}
            for p in by_node.get(n.name, ()):
                try:
                    req, lim = p.requests_and_limits  # parsed once per pod version
                except QuantityError:
                    continue
                daemon = p.daemon
                for target, src in ((pod_req, req), (pod_lim, lim), *(((ds_req, req), (ds_lim, lim)) if daemon else ())):
                    for r, v in src.items():
                        target[r] = target.get(r, 0) + v
            overhead = {r: v - allocatable.get(r, 0) for r, v in capacity.items()}
            for key, values in (("allocatable", allocatable), ("total_pod_requests", pod_req), ("total_pod_limits", pod_lim),
                                ("total_daemon_requests", ds_req), ("total_daemon_limits", ds_lim), ("system_overhead", overhead)):
                for r in sorted(values):
                    fam[key].add_metric([*base, metric_resource_name(r)], _resource_value(r, values[r]))
            created = try_parse_rfc3339(n.created or None)
            if created is not None:
                lifetime.add_metric(base, max(0.0, now - created))
            for r, v in allocatable.items():
                alloc_total[r] = alloc_total.get(r, 0) + v
            for r, v in pod_req.items():
                used_total[r] = used_total.get(r, 0) + v
        yield from fam.values()
        yield lifetime
        util = GaugeMetricFamily("karpenter_cluster_utilization_percent", "Utilization of allocatable resources by pod requests",
                                 labels=["resource_type"])
        for r in sorted(alloc_total):
            if alloc_total[r]:
                util.add_metric([metric_resource_name(r)], 100.0 * used_total.get(r, 0) / alloc_total[r])
        yield util

        pod_labels = ["name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type",
                      "instance_type", "phase", "ready", "managed"]
        state = GaugeMetricFamily(
            "karpenter_pods_state",
            "Pod state is the current state of pods. This metric can be used several ways as it is labeled by the pod name, "
            "namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase, and pod readiness.",
            labels=pod_labels)
        unstarted = GaugeMetricFamily("karpenter_pods_unstarted_time_seconds", "The time from pod creation until the pod is running.",
                                      labels=["name", "namespace"])
        unbound = GaugeMetricFamily("karpenter_pods_unbound_time_seconds", "The time from pod creation until the pod is bound.",
                                    labels=["name", "namespace"])
        for p in pods:
            node = node_by_name.get(p.node_name)
            nl: Mapping[str, str] = node.labels if node is not None else {}
            state.add_metric([
                p.name, p.namespace, _owner_link(p), p.node_name, "true" if p.node_name else "false",
                nl.get(LABEL_NODEPOOL, ""), nl.get(LABEL_ZONE, ""), nl.get(LABEL_ARCH, ""), nl.get(LABEL_CAPACITY_TYPE, ""),
                nl.get(LABEL_INSTANCE_TYPE, ""), p.phase, "true" if _is_true(p.condition("Ready")) else "false",
                "true" if nl.get(LABEL_NODEPOOL) else "false",
            ], 1)
            if p.phase == "Pending":
                created = try_parse_rfc3339(p.created or None)
                if created is not None:
                    unstarted.add_metric([p.name, p.namespace], max(0.0, now - created))
                    if not _is_true(p.condition("PodScheduled")):
                        unbound.add_metric([p.name, p.namespace], max(0.0, now - created))
        yield state
        yield unstarted
        yield unbound

        usage = GaugeMetricFamily("karpenter_nodepools_usage", "The amount of resources that have been provisioned for a nodepool. "
                                  "Labeled by nodepool name and resource type.", labels=["resource_type", "nodepool"])
        limit = GaugeMetricFamily("karpenter_nodepools_limit", "Limits specified on the nodepool that restrict the quantity of "
                                  "resources provisioned. Labeled by nodepool name and resource type.",
                                  labels=["resource_type", "nodepool"])
        for pool in pools:
            for family, quantities in ((usage, pool.usage), (limit, pool.limits)):
                try:
                    values = parse_resource_list(quantities)
                except QuantityError:
                    continue
                for r in sorted(values):
                    family.add_metric([metric_resource_name(r), pool.name], _resource_value(r, values[r]))
        yield usage
        yield limit

        count = GaugeMetricFamily("karpenter_cluster_state_node_count", "Current count of nodes in cluster state")
        # cluster state holds every Node plus every NodeClaim whose Node has not registered yet
        count.add_metric([], len(nodes) + sum(1 for c in claims if c.node_name not in node_by_name))
        yield count
        synced = GaugeMetricFamily("karpenter_cluster_state_synced", "Returns 1 if cluster state is synced and 0 otherwise. Synced "
                                   "checks that nodeclaims and nodes that are stored in the APIServer have the same representation "
                                   "as Karpenter's cluster state")
        synced.add_metric([], 1.0 if self.synced() else 0.0)
        yield synced


class DryRunMetrics:
    """The metrics of ``karpy controller --dry-run`` (karpy-only, all ``karpy_dry_run_``; registered
    by :meth:`Metrics.enable_dry_run` only in a dry run). What the controller would do is counted
    here and never in Karpenter's metrics of acts (``karpenter_nodeclaims_created``,
    ``karpenter_nodeclaims_disrupted``, ``karpenter_voluntary_disruption_decisions``, ...), which a dry
    run leaves at zero; the metrics that describe the cluster and the planning passes keep their
    Karpenter names.

    Args:
        registry: the controller's registry.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.enabled = Gauge("karpy_dry_run_enabled", "1: this controller runs with --dry-run and writes nothing.", registry=r)
        self.enabled.set(1)
        self.writes_withheld = Counter(
            "karpy_dry_run_writes_withheld", "Kubernetes API writes a controller decided and the dry run did not send, by verb "
            "(create, patch, update, delete, bind, evict) and kind.", ["verb", "kind"], registry=r)
        self.launch = ResettableGauge(Gauge(
            "karpy_dry_run_nodeclaims_would_launch", "NodeClaims the last provisioning pass would have created, by NodePool.",
            ["nodepool"], registry=r))
        self.launch_price = ResettableGauge(Gauge(
            "karpy_dry_run_nodeclaims_would_launch_price_usd_per_hour", "USD/hour of the cheapest offering of each NodeClaim the "
            "last provisioning pass would have created, summed by NodePool.", ["nodepool"], registry=r))
        self.disruption_decisions = Counter(
            "karpy_dry_run_disruption_decisions", "Disruption commands that passed validation and would have been executed, by "
            "reason (Empty, Drifted, Underutilized), method and decision (delete, replace).", ["reason", "method", "decision"],
            registry=r)
        self.disruption_nodes = Counter(
            "karpy_dry_run_nodes_would_disrupt", "Nodes of the disruption commands that would have been executed, by reason and "
            "method.", ["reason", "method"], registry=r)
        self.disruption_savings = Counter(
            "karpy_dry_run_disruption_savings_usd_per_hour", "USD/hour the disruption commands that would have been executed "
            "would save, summed, by reason and method.", ["reason", "method"], registry=r)

    def observe_launches(self, claims: Iterable[tuple[str, float]]) -> None:
        """One provisioning pass's would-be NodeClaims as ``(nodepool, cheapest USD/hour)``: the two
        launch gauges are replaced whole (an empty pass clears them)."""
        count: dict[tuple[str, ...], float] = {}
        price: dict[tuple[str, ...], float] = {}
        for pool, usd in claims:
            count[(pool,)] = count.get((pool,), 0) + 1
            price[(pool,)] = price.get((pool,), 0.0) + usd
        self.launch.replace(count)
        self.launch_price.replace(price)


class Metrics:
    """The controller's metrics, in their own registry (one per controller instance), with
    Karpenter's names, types and label names (``pkg/metrics/metrics.go``,
    ``pkg/controllers/**/metrics.go``, ``pkg/controllers/metrics/{node,pod,nodepool}``,
    ``pkg/controllers/state/metrics.go``, ``pkg/cloudprovider/metrics``, the AWS provider's
    ``pkg/controllers/{interruption,metrics}`` and ``pkg/providers/instancetype/metrics.go``),
    controller-runtime's reconcile metrics, and prometheus_client's process, platform and GC
    collectors. karpy-only metrics start with ``karpy_``. Histogram buckets are upstream's.

    Gauges that describe the cluster are computed at scrape time (:class:`ClusterStateCollector`,
    attached with :meth:`attach_state`); gauges a pass computes are replaced whole on each pass
    (:class:`ResettableGauge`), so neither keeps a series for a node, pod or pool that is gone.
    No series carries the ``_created`` companion client_golang does not export (constructing
    :class:`Metrics` turns those off process-wide, ``prometheus_client.disable_created_metrics``).

    Args:
        now: epoch seconds (the controller's clock); the wall clock by default.
        version: the ``version`` label of ``karpenter_build_info`` (karpy's package version by default).
    """

    def __init__(self, *, now: Callable[[], float] | None = None, version: str | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        r = self.registry = CollectorRegistry()
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
        self.now = now or time.time
        self.queue = SchedulingQueue()
        self.state = ClusterStateCollector(self.queue, lambda: self.now())
        r.register(self.state)
        self.dry_run: DryRunMetrics | None = None
        """The dry run's metrics (:meth:`enable_dry_run`); None in a controller that acts."""

        # ---- build info (pkg/operator/operator.go)
        self.build_info = Gauge("karpenter_build_info",
                                "A metric with a constant '1' value labeled by version from which karpenter was built.",
                                ["version", "goversion", "goarch", "commit"], registry=r)
        self.build_info.labels(version or _karpy_version(), f"python{platform.python_version()}", _goarch(),
                               os.environ.get("KARPY_COMMIT", "")).set(1)

        # ---- NodeClaims (pkg/metrics/metrics.go, nodeclaim/lifecycle/metrics.go)
        self.nodeclaims_created = Counter(
            "karpenter_nodeclaims_created", "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was "
            "created, the owning nodepool, and if min values was relaxed for this nodeclaim.",
            ["reason", "nodepool", "min_values_relaxed"], registry=r)
        self.nodeclaims_terminated = Counter(
            "karpenter_nodeclaims_terminated", "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, "
            "capacity type, and zone.", ["nodepool", "capacity_type", "zone"], registry=r)
        self.nodeclaims_disrupted = Counter(
            "karpenter_nodeclaims_disrupted", "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was "
            "disrupted, the owning nodepool, the capacity type, the consolidation policy, and the termination mode.",
            ["reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"], registry=r)
        self.nodeclaims_termination_duration = Histogram(
            "karpenter_nodeclaims_termination_duration_seconds", "Duration of NodeClaim termination in seconds.", ["nodepool"],
            buckets=NODECLAIM_TERMINATION_BUCKETS, registry=r)
        self.nodeclaims_drifted = Counter(
            "karpy_nodeclaims_drifted", "NodeClaims found drifted, by drift type and NodePool (karpy-only; Karpenter before 1.0 had "
            "karpenter_nodeclaims_drifted_total).", ["type", "nodepool"], registry=r)

        # ---- Nodes (pkg/metrics/metrics.go, node/termination/metrics.go)
        self.nodes_created = Counter("karpenter_nodes_created", "Number of nodes created in total by Karpenter. Labeled by owning "
                                     "nodepool and zone.", ["nodepool", "zone"], registry=r)
        self.nodes_terminated = Counter("karpenter_nodes_terminated", "Number of nodes terminated in total by Karpenter. Labeled by "
                                        "owning nodepool and zone.", ["nodepool", "zone"], registry=r)
        self.nodes_termination_duration = QuantileSummary(
            "karpenter_nodes_termination_duration_seconds", "The time taken between a node's deletion request and the removal of its "
            "finalizer", ["nodepool"], registry=r)
        self.nodes_lifetime_duration = Histogram("karpenter_nodes_lifetime_duration_seconds", "The lifetime duration of the nodes since "
                                                 "creation.", ["nodepool"], buckets=NODE_LIFETIME_BUCKETS, registry=r)
        self.nodes_drained = Counter("karpenter_nodes_drained", "The total number of nodes drained by Karpenter", ["nodepool"], registry=r)

        # ---- Pods (node/termination/terminator/metrics.go, metrics/pod)
        self.pods_eviction_requests = Counter("karpenter_pods_eviction_requests", "The total number of pod eviction requests made by "
                                              "Karpenter, labeled by response code", ["code"], registry=r)
        self.pods_drained = Counter("karpenter_pods_drained", "The total number of pods drained during node termination by Karpenter, "
                                    "labeled by reason", ["reason"], registry=r)
        self.pods_startup_duration = QuantileSummary("karpenter_pods_startup_duration_seconds", "The time from pod creation until the pod "
                                                     "is running.", registry=r)
        self.pods_bound_duration = Histogram("karpenter_pods_bound_duration_seconds", "The time from pod creation until the pod is bound.",
                                             buckets=DURATION_BUCKETS, registry=r)
        self._pods_unstarted: set[str] = set()
        self._pods_unbound: set[str] = set()

        # ---- Voluntary disruption (disruption/metrics.go)
        self.disruption_evaluation_duration = Histogram(
            "karpenter_voluntary_disruption_decision_evaluation_duration_seconds", "Duration of the disruption decision evaluation "
            "process in seconds. Labeled by method and consolidation type.", ["reason", "consolidation_type"],
            buckets=DURATION_BUCKETS, registry=r)
        self.disruption_decisions = Counter(
            "karpenter_voluntary_disruption_decisions", "Number of disruption decisions performed. Labeled by disruption decision, "
            "reason, and consolidation type.", ["decision", "reason", "consolidation_type"], registry=r)
        self.disruption_eligible_nodes = ResettableGauge(Gauge(
            "karpenter_voluntary_disruption_eligible_nodes", "Number of nodes eligible for disruption by Karpenter. Labeled by "
            "disruption reason.", ["reason"], registry=r))
        self.consolidation_timeouts = Counter(
            "karpenter_voluntary_disruption_consolidation_timeouts", "Number of times the Consolidation algorithm has reached a "
            "timeout. Labeled by consolidation type.", ["consolidation_type"], registry=r)
        for kind in ("multi", "single"):
            self.consolidation_timeouts.labels(kind)
        self.disruption_undone = Counter(
            "karpenter_voluntary_disruption_undone", "Number of consolidation commands undone: a node was launched for pods the "
            "command moved (karpy's own; the same move is not made again until the workload or the offerings change). Labeled "
            "by disruption reason and consolidation type.", ["reason", "consolidation_type"], registry=r)
        self.disruption_failed_validations = Counter(
            "karpenter_voluntary_disruption_failed_validations", "Number of candidates that were selected for disruption but failed "
            "validation. Labeled by consolidation type.", ["consolidation_type"], registry=r)
        self.nodepools_allowed_disruptions = ResettableGauge(Gauge(
            "karpenter_nodepools_allowed_disruptions", "The number of nodes for a given NodePool that can be concurrently disrupting "
            "at a point in time. Labeled by NodePool. Note that allowed disruptions can change very rapidly, as new nodes may be "
            "created and others may be deleted at any point.", ["nodepool", "reason"], registry=r))

        # ---- Scheduler (provisioning/scheduling/metrics.go); queue depth is in self.state
        self.scheduling_duration = Histogram(
            "karpenter_scheduler_scheduling_duration_seconds", "Duration of scheduling simulations used for deprovisioning and "
            "provisioning in seconds.", ["controller"], buckets=DURATION_BUCKETS, registry=r)
        self.unschedulable_pods = ResettableGauge(Gauge("karpenter_scheduler_unschedulable_pods_count", "The number of unschedulable Pods.",
                                                        ["controller"], registry=r))
        self.pods_unschedulable = Gauge("karpy_pods_unschedulable", "Pending pods the last provisioning pass could not place.",
                                        registry=r)

        # ---- Cloud provider (pkg/cloudprovider/metrics, AWS pkg/controllers/metrics, pkg/providers/instancetype)
        self.cloudprovider_duration = Histogram(
            "karpenter_cloudprovider_duration_seconds", "Duration of cloud provider method calls. Labeled by the controller, method "
            "name and provider.", ["controller", "method", "provider"], registry=r)
        self.cloudprovider_errors = Counter(
            "karpenter_cloudprovider_errors", "Total number of errors returned from CloudProvider calls.",
            ["controller", "method", "provider", "error"], registry=r)
        self.offering_price = ResettableGauge(Gauge(
            "karpenter_cloudprovider_instance_type_offering_price_estimate", "Instance type offering estimated hourly price used when "
            "making informed decisions on node cost calculation, based on instance type, capacity type, and zone.",
            ["instance_type", "capacity_type", "zone"], registry=r))
        self.offering_available = ResettableGauge(Gauge(
            "karpenter_cloudprovider_instance_type_offering_available", "Instance type offering availability, based on instance type, "
            "capacity type, and zone", ["instance_type", "capacity_type", "zone"], registry=r))
        self.instance_type_cpu = ResettableGauge(Gauge("karpenter_cloudprovider_instance_type_cpu_cores", "VCPUs cores for a given "
                                                       "instance type.", ["instance_type"], registry=r))
        self.instance_type_memory = ResettableGauge(Gauge("karpenter_cloudprovider_instance_type_memory_bytes", "Memory, in bytes, for "
                                                          "a given instance type.", ["instance_type"], registry=r))

        # ---- controller-runtime (pkg/internal/controller/metrics)
        self.reconcile_total = Counter("controller_runtime_reconcile", "Total number of reconciliations per controller",
                                       ["controller", "result"], registry=r)
        self.reconcile_errors = Counter("controller_runtime_reconcile_errors", "Total number of reconciliation errors per controller",
                                        ["controller"], registry=r)
        self.reconcile_time = Histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per controller",
                                        ["controller"], buckets=RECONCILE_BUCKETS, registry=r)

        # ---- leader election (client-go tools/leaderelection/metrics.go)
        self.leader_status = Gauge("leader_election_master_status", "Gauge of if the reporting system is master of the relevant lease, "
                                   "0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
                                   ["name"], registry=r)
        self.leader = Gauge("karpy_leader", "1 while this replica holds the leader lease.", registry=r)

    # ---- wiring ---------------------------------------------------------------------------
    def enable_dry_run(self) -> DryRunMetrics:
        """Register the dry run's metrics (:class:`DryRunMetrics`) once; returns them."""
        if self.dry_run is None:
            self.dry_run = DryRunMetrics(self.registry)
        return self.dry_run

    def attach_state(self, source: StateSource, synced: Callable[[], bool]) -> None:
        """Compute the cluster-state gauges from ``source`` (the informer cache) at each scrape."""
        self.state.source = source
        self.state.synced = synced

    def adopt(self, registry: CollectorRegistry) -> None:
        """Serve another registry's metrics (a cloud provider's own, e.g. KakaoCloud's
        ``karpy_kakaocloud_unowned_instances_total``) through this one."""
        self.registry.register(_RegistryProxy(registry))

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    async def render_async(self) -> bytes:
        """:meth:`render` for the HTTP handler: the cluster-state families are computed on the
        event loop (where the informer cache changes), the text is formatted in a worker thread so
        a large cluster's scrape does not stall the controllers."""
        families = list(self.state.collect())

        def render() -> bytes:
            with self.state.frozen(families):
                return generate_latest(self.registry)

        return await asyncio.to_thread(render)

    # ---- helpers the controller calls -------------------------------------------------------
    def observe_reconcile(self, controller: str, seconds: float, error: bool) -> None:
        """One controller pass: ``controller_runtime_reconcile_total{result}``, ``..._errors_total``, ``..._time_seconds``."""
        self.reconcile_total.labels(controller, "error" if error else "success").inc()
        if error:
            self.reconcile_errors.labels(controller).inc()
        self.reconcile_time.labels(controller).observe(seconds)

    def observe_scheduling(self, controller: str, scheduling_id: str, seconds: float, unplaced: Iterable[str]) -> None:
        """One scheduling pass: its duration, the pods it left unplaced (queue depth, unschedulable count)."""
        left = list(unplaced)
        self.scheduling_duration.labels(controller).observe(seconds)
        self.queue.set(controller, scheduling_id, left)
        self.unschedulable_pods.replace({(controller,): float(len(left))}, controller=controller)
        self.pods_unschedulable.set(len(left))

    def observe_pod(self, event_type: str, pod: Mapping[str, Any]) -> None:
        """A pod watch event: records bound and startup durations the first time a pod karpy saw
        pending is bound / turns Ready (``pkg/controllers/metrics/pod``), and takes a bound, finished
        or deleted pod out of the scheduling queue."""
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"
        spec = pod.get("spec") or {}
        phase = (pod.get("status") or {}).get("phase")
        if event_type == "DELETED":
            self._pods_unstarted.discard(key)
            self._pods_unbound.discard(key)
            self.queue.discard(key)
            return
        if spec.get("nodeName") or phase in ("Succeeded", "Failed"):
            self.queue.discard(key)
        created = try_parse_rfc3339(meta.get("creationTimestamp"))
        scheduled, ready = _condition(pod, "PodScheduled"), _condition(pod, "Ready")
        if phase == "Pending":
            self._pods_unstarted.add(key)
            if not scheduled or scheduled.get("status") != "True":
                self._pods_unbound.add(key)
        if key in self._pods_unbound and scheduled and scheduled.get("status") == "True":
            self._pods_unbound.discard(key)
            at = try_parse_rfc3339(scheduled.get("lastTransitionTime"))
            if created is not None and at is not None:
                self.pods_bound_duration.observe(max(0.0, at - created))
        if key in self._pods_unstarted:
            if ready and ready.get("status") == "True":
                self._pods_unstarted.discard(key)
                at = try_parse_rfc3339(ready.get("lastTransitionTime"))
                if created is not None and at is not None:
                    self.pods_startup_duration.observe(max(0.0, at - created))
            elif phase in ("Succeeded", "Failed"):
                self._pods_unstarted.discard(key)

    def observe_node_terminated(self, node: Mapping[str, Any], now: float) -> None:
        """A Node's termination finalizer was removed: ``karpenter_nodes_terminated_total``,
        ``..._termination_duration_seconds`` (from its deletionTimestamp), ``..._lifetime_duration_seconds``
        (from its creationTimestamp), ``karpenter_nodes_drained_total``."""
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        pool = labels.get(LABEL_NODEPOOL, "")
        self.nodes_terminated.labels(pool, labels.get(LABEL_ZONE, "")).inc()
        self.nodes_drained.labels(pool).inc()
        deleted = try_parse_rfc3339(meta.get("deletionTimestamp"))
        if deleted is not None:
            self.nodes_termination_duration.labels(pool).observe(max(0.0, now - deleted))
        created = try_parse_rfc3339(meta.get("creationTimestamp"))
        if created is not None:
            self.nodes_lifetime_duration.labels(pool).observe(max(0.0, now - created))

    def observe_nodeclaim_terminated(self, nodeclaim: Mapping[str, Any], now: float) -> None:
        """A NodeClaim's termination finalizer was removed: ``karpenter_nodeclaims_terminated_total``
        and ``..._termination_duration_seconds``."""
        meta = nodeclaim.get("metadata") or {}
        labels = meta.get("labels") or {}
        pool = labels.get(LABEL_NODEPOOL, "")
        self.nodeclaims_terminated.labels(pool, labels.get(LABEL_CAPACITY_TYPE, ""), labels.get(LABEL_ZONE, "")).inc()
        deleted = try_parse_rfc3339(meta.get("deletionTimestamp"))
        if deleted is not None:
            self.nodeclaims_termination_duration.labels(pool).observe(max(0.0, now - deleted))

    def observe_disrupted(self, reason: str, nodeclaim: Mapping[str, Any] | None, nodepool: Mapping[str, Any] | None = None,
                          *, consolidation: bool = False) -> None:
        """``karpenter_nodeclaims_disrupted_total`` for one NodeClaim: ``reason`` is the snake-case
        reason (``empty``, ``underutilized``, ``drifted``, ``expired``, ``unhealthy``, ``liveness``...);
        the consolidation policy is reported only for consolidation (as upstream); the termination
        mode follows the NodeClaim's ``terminationGracePeriod`` (``graceful`` without one,
        ``forceful`` at 0, ``eventual`` otherwise)."""
        meta = (nodeclaim or {}).get("metadata") or {}
        labels = meta.get("labels") or {}
        policy = ""
        if consolidation and nodepool is not None:
            raw = ((nodepool.get("spec") or {}).get("disruption") or {}).get("consolidationPolicy") or "WhenEmptyOrUnderutilized"
            policy = re.sub(r"(?<!^)(?=[A-Z])", "_", str(raw)).lower()
        grace = ((nodeclaim or {}).get("spec") or {}).get("terminationGracePeriod")
        if grace is None:
            mode = "graceful"
        else:
            mode = "forceful" if _duration_seconds(str(grace)) <= 0 else "eventual"
        self.nodeclaims_disrupted.labels(reason, labels.get(LABEL_NODEPOOL, ""), labels.get(LABEL_CAPACITY_TYPE, ""), policy, mode).inc()

    def observe_disruption_pass(self, method_nodes: Mapping[str, int], seconds: float, last_method: str | None) -> None:
        """One disruption planning pass: ``eligible_nodes`` per reason from the nodes each method
        considered (``method_nodes``: method value -> nodes), and the pass's evaluation duration
        labelled with the method that ended it (``last_method``)."""
        eligible: dict[tuple[str, ...], float] = {}
        for method, n in method_nodes.items():
            reason, _ = CONSOLIDATION_TYPES.get(method, (method, ""))
            eligible[(reason,)] = float(n)  # multi and single share "underutilized": the later one wins, as upstream
        self.disruption_eligible_nodes.replace(eligible)
        if last_method is not None:
            reason, ctype = CONSOLIDATION_TYPES.get(last_method, (last_method, ""))
            self.disruption_evaluation_duration.labels(reason, ctype).observe(seconds)

    def observe_disruption_decision(self, method: str, decision: str) -> None:
        """A disruption command started: ``karpenter_voluntary_disruption_decisions_total``."""
        reason, ctype = CONSOLIDATION_TYPES.get(method, (method, ""))
        self.disruption_decisions.labels(decision, reason, ctype).inc()

    def observe_instance_types(self, instance_types: Iterable[Any]) -> None:
        """Replace the instance-type gauges with one pass's offerings (every NodePool's types):
        price and availability per (type, capacity type, zone), vCPUs and memory per type."""
        price: dict[tuple[str, ...], float] = {}
        available: dict[tuple[str, ...], float] = {}
        cpu: dict[tuple[str, ...], float] = {}
        mem: dict[tuple[str, ...], float] = {}
        for it in instance_types:
            capacity = getattr(it, "capacity", {}) or {}
            if "cpu" in capacity:
                cpu[(it.name,)] = _resource_value("cpu", capacity["cpu"])
            if "memory" in capacity:
                mem[(it.name,)] = float(capacity["memory"])
            for o in getattr(it, "offerings", ()) or ():
                key = (it.name, o.capacity_type, o.zone)
                price[key] = float(o.price)
                available[key] = max(available.get(key, 0.0), 1.0 if o.available else 0.0)
        self.offering_price.replace(price)
        self.offering_available.replace(available)
        self.instance_type_cpu.replace(cpu)
        self.instance_type_memory.replace(mem)


class _FrozenState:
    """Context manager behind :meth:`ClusterStateCollector.frozen`."""

    def __init__(self, local: threading.local, families: list[Metric]) -> None:
        self._local = local
        self._families = families

    def __enter__(self) -> None:
        self._local.families = self._families

    def __exit__(self, *exc: object) -> None:
        self._local.families = None


class _RegistryProxy:
    """Collects another registry's metrics as part of this one."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        return self._registry.collect()


def _duration_seconds(text: str) -> float:
    """A Go duration (``30s``, ``1h30m``, ``0s``) in seconds; unparseable text counts as positive."""
    from karpy_core.apis.durations import parse_duration

    try:
        return parse_duration(text).total_seconds()
    except ValueError:
        return 1.0


def _karpy_version() -> str:
    try:
        return importlib.metadata.version("karpy")
    except importlib.metadata.PackageNotFoundError:
        return "unspecified"


def _goarch() -> str:
    """The machine architecture in Go's spelling (``amd64``, ``arm64``), for ``build_info``'s ``goarch``."""
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


class HealthServer:
    """Serves ``/healthz``, ``/readyz`` and ``/metrics`` on 127.0.0.1 or all interfaces.

    Args:
        metrics: the registry to expose.
        ready: callable returning True when the controller is ready (caches synced), or a
            ``(ready, reason)`` pair whose reason is the 503 answer's body.
        host, port: where to listen (port 0 picks a free port; see :attr:`port` after start).
    """

    def __init__(self, metrics: Metrics, ready: Callable[[], bool | tuple[bool, str]], *, host: str = "0.0.0.0",
                 port: int = 8081):
        self.metrics = metrics
        self.ready = ready
        self.host = host
        self.port = port
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        sockets = getattr(site, "_server", None)
        if sockets is not None and sockets.sockets:
            self.port = sockets.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def _readyz(self, request: web.Request) -> web.Response:
        answer = self.ready()
        ok, why = answer if isinstance(answer, tuple) else (answer, "" if answer else "not ready")
        return web.Response(text="ok") if ok else web.Response(status=503, text=why or "not ready")

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(body=await self.metrics.render_async(), headers={"Content-Type": CONTENT_TYPE_LATEST})


# The logs' configuration lives in karpy_core.logs; these names stay importable from here.
from karpy_core.logs import KARPY_LOGGERS, configure_logging, parse_debug_loggers  # noqa: E402
