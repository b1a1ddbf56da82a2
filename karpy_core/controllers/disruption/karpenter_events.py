"""Karpenter's disruption events from karpy's decision log.

The planner records why each node is kept (:class:`~karpy_core.controllers.disruption.decisions.NodeDecision`);
Karpenter publishes, at the same points, ``DisruptionBlocked`` (a node that cannot be a candidate:
``pkg/controllers/disruption/types.go`` ``NewCandidate``, ``state/statenode.go``
``ValidateNodeDisruptable``/``ValidatePodsDisruptable``), ``Unconsolidatable`` (a candidate
consolidation passes over: ``consolidation.go``, ``emptiness.go``) and a NodePool's
``DisruptionBlocked`` when its budget for a reason is 0 (``helpers.go``). :func:`karpenter_message`
turns one decision into that event's reason and message (Karpenter's wording); :func:`decision_events`
builds the events for a pass. Pure: reads the snapshot's dicts, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from karpy_core.controllers import events as ev
from karpy_core.controllers.disruption.decisions import DecisionKind, DecisionStage, NodeDecision, Verdict
from karpy_core.controllers.disruption.spot_to_spot import MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT
from karpy_core.kube.events import Event
from karpy_core.state.views import NodeClaimView, NodePoolView, NodeView

__all__ = ["karpenter_message", "decision_events", "sentence"]

_DND = '"karpenter.sh/do-not-disrupt"'


def sentence(text: str) -> str:
    """``text`` with its first letter upper-cased (Karpenter ``pretty.Sentence``)."""
    return text[:1].upper() + text[1:]


def _count(text: str) -> str:
    m = re.search(r"(\d+) new nodes", text)
    return m.group(1) if m else "more than 1"


def _options(text: str) -> str:
    m = re.search(r"only (\d+) cheaper", text)
    return m.group(1) if m else "fewer"


def karpenter_message(d: NodeDecision, *, nodepool: str, instance_type: str) -> tuple[str, str] | None:
    """``(event reason, message)`` Karpenter publishes for the decision ``d`` about a node of
    ``nodepool`` with ``instance_type``, or None when it publishes none (a method choosing the
    node, a consolidateAfter still running, pending pods, ...)."""
    if d.verdict is not Verdict.KEEP:
        return None
    k = d.kind
    if d.method is DecisionStage.CANDIDATE:
        blocked = {
            DecisionKind.NODEPOOL_NOT_FOUND: f"NodePool not found (NodePool={nodepool})",
            DecisionKind.NOT_INITIALIZED: "Node isn't initialized",
            DecisionKind.NODE_DELETING: "Node is deleting or marked for deletion",
            DecisionKind.NODECLAIM_DELETING: "Node is deleting or marked for deletion",
            DecisionKind.NOMINATED: "Node is nominated for a pending pod",
        }
        if k in blocked:
            return ev.DISRUPTION_BLOCKED, blocked[k]
        if k is DecisionKind.DO_NOT_DISRUPT:
            m = re.match(r"pod (\S+) has", d.reason)
            if m:
                return ev.DISRUPTION_BLOCKED, f"Pod has {_DND} annotation (Pod={m.group(1)})"
            return ev.DISRUPTION_BLOCKED, f"Disruption is blocked through the {_DND} annotation"
        if k is DecisionKind.PDB_BLOCKS:
            m = re.search(r"PodDisruptionBudget (\S+) allows", d.reason)
            pod = re.match(r"pod ([^/\s]+)/", d.reason)
            ns = pod.group(1) if pod else "default"
            if m:
                return ev.DISRUPTION_BLOCKED, f"Pdb prevents pod evictions (PodDisruptionBudget=[{ns}/{m.group(1)}])"
            return ev.DISRUPTION_BLOCKED, "Eviction does not support multiple PDBs"
        return None
    simple = {
        DecisionKind.POLICY_WHEN_EMPTY: f'NodePool "{nodepool}" has consolidation policy WhenEmpty, but node is not empty',
        DecisionKind.CONSOLIDATE_AFTER_NEVER: f'NodePool "{nodepool}" has consolidation disabled',
        DecisionKind.PRICE_UNKNOWN: f'Instance Type "{instance_type}" not found',
        DecisionKind.NOT_CHEAPER: "Can't replace with a cheaper node",
        DecisionKind.NO_ROOM: "Can't replace with a cheaper node",
        DecisionKind.SPOT_TO_SPOT: "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node",
        DecisionKind.TOO_MANY_REPLACEMENTS: f"Can't remove without creating {_count(d.reason)} candidates",
        DecisionKind.SPOT_TO_SPOT_OPTIONS: f"SpotToSpotConsolidation requires {MIN_INSTANCE_TYPES_FOR_SPOT_TO_SPOT} cheaper "
                                           f"instance type options than the current candidate to consolidate, got {_options(d.reason)}",
    }
    if k in simple:
        return ev.UNCONSOLIDATABLE, simple[k]
    if k in (DecisionKind.POD_UNSCHEDULABLE, DecisionKind.POD_NOT_SIMULATABLE, DecisionKind.TARGET_NOT_INITIALIZED):
        return ev.UNCONSOLIDATABLE, sentence(d.reason)
    return None


def decision_events(lines: Iterable[NodeDecision], nodes: Mapping[str, NodeView],
                    claims_by_node: Mapping[str, NodeClaimView], nodepools: Mapping[str, NodePoolView]) -> list[Event]:
    """The events of one pass's decision ``lines``: per node (with its NodeClaim: Karpenter only
    publishes for nodes it manages) the first Karpenter event of its lines, and a NodePool's
    ``DisruptionBlocked`` for each reason its budget stopped. ``nodes`` and ``nodepools`` are
    by name, ``claims_by_node`` by node name."""
    out: list[Event] = []
    seen: set[str] = set()
    pools_blocked: set[tuple[str, str]] = set()
    for d in lines:
        node = nodes.get(d.node)
        if node is None:
            continue
        labels = node.labels
        pool = node.nodepool or ""
        if d.kind is DecisionKind.BUDGET_EXHAUSTED and d.details.budget is not None and pool in nodepools:
            if (pool, d.details.budget.value) not in pools_blocked:
                pools_blocked.add((pool, d.details.budget.value))
                out.append(ev.nodepool_blocked(nodepools[pool].raw, d.details.budget.value))
            continue
        claim = claims_by_node.get(d.node)
        if claim is None or d.node in seen:
            continue
        found = karpenter_message(d, nodepool=pool, instance_type=str(labels.get("node.kubernetes.io/instance-type", "")))
        if found is None:
            continue
        seen.add(d.node)
        reason, message = found
        out.extend(ev.blocked(node.raw, claim.raw, message) if reason == ev.DISRUPTION_BLOCKED
                   else ev.unconsolidatable(node.raw, claim.raw, message))
    return out
