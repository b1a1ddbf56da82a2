"""The disruption controller's metrics and log lines (Karpenter's ``disruption`` metrics):
what each planning pass considered, how long it took, the budgets' allowances, the offering
gauges, and per command decided, executed, dropped or abandoned."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_NODEPOOL, min_values_relaxed
from karpy_core.controllers.disruption.budgets import allowed_disruptions
from karpy_core.controllers.disruption.candidates import disrupting_counts
from karpy_core.controllers.disruption.decisions import DecisionKind, DisruptionMethod, DisruptionReason
from karpy_core.controllers.disruption.methods import DEFAULT_ORDER
from karpy_core.controllers.disruption.planner import pass_coverage
from karpy_core.errors import ignore_kube_error
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.observability import CONSOLIDATION_TYPES, Metrics

if TYPE_CHECKING:
    from karpy_core.controllers.disruption.command import DisruptionEvent, PlanningPass

__all__ = ["DisruptionMetrics"]

log = logging.getLogger("karpy.disruption")


class DisruptionMetrics:
    """Publishes the disruption controller's metrics to ``metrics``, reading NodeClaims and
    NodePools for their labels through ``kube``."""

    def __init__(self, metrics: Metrics, kube: KubeClient):
        self.metrics = metrics
        self.kube = kube
        self._offerings_seen: tuple[tuple[str, int], ...] = ()
        """The instance-type lists the offering gauges were last built from (NodePool name, list id)."""

    def observe_planning(self, p: PlanningPass) -> None:
        """Metrics of one planning pass: eligible nodes per method, evaluation time, allowed
        disruptions per NodePool and reason, and the instance-type offering gauges."""
        considered: dict[str, set[str]] = {}
        for line in p.lines:
            considered.setdefault(str(line.method), set()).add(line.node)
        # the methods run in order until one decides a command (each reports its count, 0 included, as upstream);
        # karpy's repack, after Karpenter's four, does not overwrite single-node's eligible count
        methods = [m.value for m in DEFAULT_ORDER if m is not DisruptionMethod.REPACK_CONSOLIDATION]
        if p.plan is not None and p.plan.method.value in methods:
            methods = methods[: methods.index(p.plan.method.value) + 1]
        last = p.plan.method.value if p.plan is not None else methods[-1]
        self.metrics.observe_disruption_pass({m: len(considered.get(m, ())) for m in methods}, p.seconds, last)
        if any(line.kind == DecisionKind.SIMULATION_LIMIT and line.method is DisruptionMethod.SINGLE_NODE_CONSOLIDATION
               for line in p.lines):  # karpy's stand-in for the 3-minute timeout
            self.metrics.consolidation_timeouts.labels(consolidation_type="single").inc()
        coverage = pass_coverage(p.lines)
        for method, kinds in sorted(coverage.skipped.items()):  # never silent: which candidates went unexamined, and why
            names = coverage.skipped_nodes[method]
            log.info("disruption pass skipped candidates", extra=fields(
                method=method, reason=", ".join(f"{k}: {n}" for k, n in sorted(kinds.items())),
                count=len(names), nodes=", ".join(names[:10]) + (f" (+{len(names) - 10} more)" if len(names) > 10 else "")))
        total, _ = disrupting_counts(p.snapshot)
        allowed: dict[tuple[str, ...], float] = {}
        for pool in p.snapshot.nodepool_views:
            name = pool.name
            for reason in DisruptionReason:
                try:  # the budget's allowance before the nodes already disrupting, as upstream's gauge
                    n = allowed_disruptions(pool.budgets, reason, p.now, total=total.get(name, 0), disrupting=0)
                except ValueError:
                    continue
                allowed[(name, reason.value)] = float(max(n, 0))
        self.metrics.nodepools_allowed_disruptions.replace(allowed)
        fingerprint = tuple(sorted((name, id(types)) for name, types in p.instance_types.items()))
        if fingerprint != self._offerings_seen:  # the provider's lists are cached per NodePool version: rebuild when they change
            self._offerings_seen = fingerprint
            seen: dict[str, Any] = {}
            for types in p.instance_types.values():
                for it in types:
                    seen.setdefault(it.name, it)
            self.metrics.observe_instance_types(seen.values())

    async def observe_events(self, events: list[DisruptionEvent]) -> None:
        """Per command decided/executed/dropped a log line; ``karpenter_disruption_decisions_total``,
        ``..._failed_validations_total``, ``karpenter_nodeclaims_disrupted_total`` (reason
        ``empty``, ``drifted``, ``underutilized``) per deleted NodeClaim and
        ``karpenter_nodeclaims_created_total`` per replacement; ``karpenter_voluntary_disruption_undone_total``
        (``reason``, ``consolidation_type``) per command found undone."""
        from karpy_core.controllers.disruption.command import DisruptionEventKind as K

        m = self.metrics
        for ev in events:
            if ev.kind in (K.DECIDED, K.DISRUPT, K.INVALIDATED):
                log.info(f"disruption {ev.kind.value.removeprefix('disrupt').lstrip('-') or 'started'}", extra=fields(
                    node=ev.node, nodeclaim=ev.nodeclaim or None, method=ev.details.get("method") or None,
                    reason=ev.details.get("summary") or ev.reason))
            if ev.kind is K.DISRUPT:
                m.observe_disruption_decision(ev.details.get("method", ""), ev.details.get("decision", ""))
            elif ev.kind is K.UNDONE:
                reason, ctype = CONSOLIDATION_TYPES.get(ev.details.get("method", ""), (ev.reason.lower(), ""))
                m.disruption_undone.labels(reason=reason, consolidation_type=ctype).inc()
            elif ev.kind is K.INVALIDATED:
                m.disruption_failed_validations.labels(
                    consolidation_type=CONSOLIDATION_TYPES.get(ev.details.get("method", ""), ("", ""))[1]).inc()
            if ev.kind is K.DELETE:
                claim = await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim))
                pool_name = ((claim or {}).get("metadata", {}).get("labels") or {}).get(LABEL_NODEPOOL, "")
                pool = await ignore_kube_error(self.kube.get("NodePool", pool_name)) if pool_name else None
                m.observe_disrupted(ev.reason.lower(), claim, pool, consolidation=ev.details.get("method", "") != "drift")
            elif ev.kind is K.REPLACEMENT_CREATE:
                claim = await ignore_kube_error(self.kube.get("NodeClaim", ev.nodeclaim))
                m.nodeclaims_created.labels(reason=ev.reason.lower(), nodepool=ev.details.get("nodepool", ""),
                                            min_values_relaxed=min_values_relaxed(claim)).inc()
            elif ev.kind is K.FAILED:
                log.warning("disruption abandoned", extra=fields(node=ev.node, nodeclaim=ev.nodeclaim or None, reason=ev.reason))
