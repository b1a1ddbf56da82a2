"""What a Karpenter user's dashboards and alerts expect of /metrics: the metric names their Grafana
dashboards query, and each metric's type and label names as Karpenter defines them.

The table is derived by reading upstream (kubernetes-sigs/karpenter ``pkg/metrics/metrics.go``,
``pkg/controllers/**/metrics.go``, ``pkg/controllers/metrics/{node,pod,nodepool}/controller.go``,
``pkg/controllers/state/metrics.go``, ``pkg/cloudprovider/metrics/cloudprovider.go``,
``pkg/operator/operator.go``; aws/karpenter-provider-aws ``pkg/controllers/interruption/metrics.go``,
``pkg/controllers/metrics/metrics.go``, ``pkg/providers/instancetype/metrics.go``; controller-runtime's
reconcile metrics). The dashboards are Karpenter's own, kept as test data in ``tests/data/grafana``
(from aws/karpenter-provider-aws ``website/content/en/preview/getting-started/getting-started-with-karpenter``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DASHBOARDS = Path(__file__).parent / "data" / "grafana"

NODE = "NODE"
"""Placeholder for the node label set: the well-known labels in snake case, ``node_name``, ``phase``, ``managed``."""

CORE_NODE_LABELS = frozenset({"nodepool", "zone", "region", "instance_type", "arch", "os", "capacity_type", "windows_build"})
"""Karpenter's ``v1.WellKnownLabels`` as metric label names; a provider adds its own (AWS: ``instance_family``...)."""

EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    # name (as the family is exposed; counters without _total): (type, label names)
    "karpenter_build_info": ("gauge", ("version", "goversion", "goarch", "commit")),
    "karpenter_nodeclaims_created": ("counter", ("reason", "nodepool", "min_values_relaxed")),
    "karpenter_nodeclaims_terminated": ("counter", ("nodepool", "capacity_type", "zone")),
    "karpenter_nodeclaims_disrupted": ("counter", ("reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode")),
    "karpenter_nodeclaims_termination_duration_seconds": ("histogram", ("nodepool",)),
    "karpenter_nodes_created": ("counter", ("nodepool", "zone")),
    "karpenter_nodes_terminated": ("counter", ("nodepool", "zone")),
    "karpenter_nodes_termination_duration_seconds": ("summary", ("nodepool",)),
    "karpenter_nodes_lifetime_duration_seconds": ("histogram", ("nodepool",)),
    "karpenter_nodes_drained": ("counter", ("nodepool",)),
    "karpenter_nodes_allocatable": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_total_pod_requests": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_total_pod_limits": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_total_daemon_requests": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_total_daemon_limits": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_system_overhead": ("gauge", (NODE, "resource_type")),
    "karpenter_nodes_current_lifetime_seconds": ("gauge", (NODE,)),
    "karpenter_cluster_utilization_percent": ("gauge", ("resource_type",)),
    "karpenter_pods_state": ("gauge", ("name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch",
                                       "capacity_type", "instance_type", "phase", "ready", "managed")),
    "karpenter_pods_startup_duration_seconds": ("summary", ()),
    "karpenter_pods_bound_duration_seconds": ("histogram", ()),
    "karpenter_pods_unstarted_time_seconds": ("gauge", ("name", "namespace")),
    "karpenter_pods_unbound_time_seconds": ("gauge", ("name", "namespace")),
    "karpenter_pods_eviction_requests": ("counter", ("code",)),
    "karpenter_pods_drained": ("counter", ("reason",)),
    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds": ("histogram", ("reason", "consolidation_type")),
    "karpenter_voluntary_disruption_eligible_nodes": ("gauge", ("reason",)),
    "karpenter_voluntary_disruption_decisions": ("counter", ("decision", "reason", "consolidation_type")),
    "karpenter_voluntary_disruption_consolidation_timeouts": ("counter", ("consolidation_type",)),
    "karpenter_voluntary_disruption_failed_validations": ("counter", ("consolidation_type",)),
    "karpenter_nodepools_allowed_disruptions": ("gauge", ("nodepool", "reason")),
    "karpenter_nodepools_usage": ("gauge", ("resource_type", "nodepool")),
    "karpenter_nodepools_limit": ("gauge", ("resource_type", "nodepool")),
    "karpenter_cluster_state_synced": ("gauge", ()),
    "karpenter_cluster_state_node_count": ("gauge", ()),
    "karpenter_scheduler_scheduling_duration_seconds": ("histogram", ("controller",)),
    "karpenter_scheduler_queue_depth": ("gauge", ("controller", "scheduling_id")),
    "karpenter_scheduler_unschedulable_pods_count": ("gauge", ("controller",)),
    "karpenter_cloudprovider_duration_seconds": ("histogram", ("controller", "method", "provider")),
    "karpenter_cloudprovider_errors": ("counter", ("controller", "method", "provider", "error")),
    "karpenter_cloudprovider_instance_type_offering_price_estimate": ("gauge", ("instance_type", "capacity_type", "zone")),
    "karpenter_cloudprovider_instance_type_offering_available": ("gauge", ("instance_type", "capacity_type", "zone")),
    "karpenter_cloudprovider_instance_type_cpu_cores": ("gauge", ("instance_type",)),
    "karpenter_cloudprovider_instance_type_memory_bytes": ("gauge", ("instance_type",)),
    "controller_runtime_reconcile": ("counter", ("controller", "result")),
    "controller_runtime_reconcile_errors": ("counter", ("controller",)),
    "controller_runtime_reconcile_time_seconds": ("histogram", ("controller",)),
    "leader_election_master_status": ("gauge", ("name",)),
    # prometheus_client's standard collectors (Go's process and runtime collectors' Python counterparts)
    "process_cpu_seconds": ("counter", ()),
    "process_resident_memory_bytes": ("gauge", ()),
    "process_start_time_seconds": ("gauge", ()),
    "process_open_fds": ("gauge", ()),
    "python_info": ("gauge", ("implementation", "major", "minor", "patchlevel", "version")),
    "python_gc_collections": ("counter", ("generation",)),
}

AWS_EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "karpenter_interruption_received_messages": ("counter", ("message_type",)),
    "karpenter_interruption_deleted_messages": ("counter", ()),
    "karpenter_interruption_message_queue_duration_seconds": ("histogram", ()),
}

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
                    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
                    120, 150, 300, 450, 600)
"""Karpenter's ``metrics.DurationBuckets()``, written out again from upstream (not imported from karpy)."""

BUCKETS: dict[str, tuple[float, ...]] = {
    "karpenter_scheduler_scheduling_duration_seconds": DURATION_BUCKETS,
    "karpenter_voluntary_disruption_decision_evaluation_duration_seconds": DURATION_BUCKETS,
    "karpenter_pods_bound_duration_seconds": DURATION_BUCKETS,
    "karpenter_nodeclaims_termination_duration_seconds": tuple(float(2**i) for i in range(12)),
    "controller_runtime_reconcile_time_seconds": DURATION_BUCKETS[:40],
    "karpenter_nodes_lifetime_duration_seconds": (900, 1800, 2700, 3600, 7200, 14400, 21600, 28800, 36000, 43200, 57600, 72000,
                                                  86400, 172800, 259200, 432000, 864000, 1296000, 1728000, 2160000, 2592000),
}

SUMMARY_QUANTILES = ("0", "0.5", "0.9", "0.99", "1")
"""Karpenter's ``SummaryObjectives()`` quantiles as client_golang labels them (and the dashboards query them)."""

NOT_KARPENTER = re.compile(r"^node_")
"""Metrics the dashboards read from other exporters (node-exporter's ``node_time_seconds``, ``node_boot_time_seconds``)."""

PROMQL_WORDS = frozenset({
    "sum", "by", "count", "rate", "histogram_quantile", "label_replace", "label_values", "max", "min", "avg", "or", "and",
    "unless", "without", "vector", "on", "ignoring", "group_left", "group_right", "offset", "bool", "irate", "increase",
})


def dashboard_queries(path: Path) -> list[str]:
    """Every PromQL expression in a Grafana dashboard: panel targets and templating queries."""
    out: list[str] = []

    def walk(o: object) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                if k in ("expr", "definition") and isinstance(v, str):
                    out.append(v)
                elif k == "query" and isinstance(v, dict) and isinstance(v.get("query"), str):
                    out.append(v["query"])
                else:
                    walk(v)
        elif isinstance(o, list):
            for i in o:
                walk(i)

    walk(json.loads(path.read_text()))
    return out


def metric_names(query: str) -> set[str]:
    """The metric names a PromQL expression selects (identifiers not followed by ``(``, not
    keywords, not label names inside ``{...}`` or ``by (...)``, not ``$variables``), with the
    histogram ``_bucket``/``_count``/``_sum`` suffix kept as written."""
    text = re.sub(r"\{[^}]*\}", " ", query)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", " ", text)  # grouping labels
    text = re.sub(r'"[^"]*"', " ", text)  # strings (label_replace arguments)
    text = re.sub(r"#.*", " ", text)  # comments
    names = set()
    for m in re.finditer(r"(?<![\w$])([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?", text):
        word, call = m.group(1), m.group(2)
        if call or word in PROMQL_WORDS or word.isdigit():
            continue
        names.add(word)
    # label_values(metric, label): the second argument is a label name
    for m in re.finditer(r"label_values\(\s*([a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\s*,\s*(\w+)\s*\)", query):
        names.discard(m.group(2))
    return names


def dashboard_metrics() -> dict[str, set[str]]:
    """Dashboard file name -> the Karpenter/controller-runtime metric names its queries use."""
    out = {}
    for path in sorted(DASHBOARDS.glob("karpenter-*-dashboard.json")):
        names: set[str] = set()
        for q in dashboard_queries(path):
            names |= metric_names(q)
        out[path.name] = {n for n in names if not NOT_KARPENTER.match(n)}
    return out


def parse(text: str) -> dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]:
    """Prometheus text exposition -> family name -> (type, [(sample name, labels, value)])."""
    return {f.name: (f.type, [(s.name, dict(s.labels), s.value) for s in f.samples]) for f in text_string_to_metric_families(text)}


def sample_names(families: dict[str, tuple[str, list[tuple[str, dict[str, str], float]]]]) -> dict[str, int]:
    """Sample name (``x_total``, ``x_bucket``, ``x_count``...) -> how many samples carry it."""
    out: dict[str, int] = {}
    for _, samples in families.values():
        for name, _, _ in samples:
            out[name] = out.get(name, 0) + 1
    return out


def expected_labels(labels: Iterable[str], node_labels: set[str]) -> set[str]:
    """An EXPECTED label tuple with :data:`NODE` expanded to ``node_labels``."""
    out: set[str] = set()
    for label in labels:
        out |= node_labels if label == NODE else {label}
    return out
