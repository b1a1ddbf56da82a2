"""``karpy simulate --from-cluster``: a read-only dry run on a live cluster (issue 37).

Pipeline:

1. :func:`read_cluster` lists (``list`` only: no get, watch or write) the kinds of
   :data:`READ_KINDS` and every installed NodeClass kind through a
   :class:`~karpy_core.kube.port.KubeClient` (the controller's kubernetes-asyncio adapter on a
   real cluster). A kind whose CRD is not installed (404) is skipped and named.
2. :func:`translate` turns the objects into the simulator's starting state: Nodes and NodeClaims
   stay as they are (existing capacity, with their instance types, zones and capacity types from
   their labels), pods stay bound where they are, status included; server-side bookkeeping
   (``managedFields``) is dropped. ReplicaSets lose their owner reference to a Deployment, so the
   simulated ReplicaSet controller keeps exactly the live pods and recreates an evicted one (the
   simulator's Deployment controller would roll every pod to its own template hash). Finished
   Jobs are left out (their pods are done).
3. :func:`dry_run` seeds an in-memory cluster on a virtual clock started at the live ``now``,
   records every live NodeClaim's instance in the ``simulated`` provider
   (:meth:`~karpy_core.cloudprovider.simulated.SimulatedProvider.adopt`: the offline catalog,
   no cloud credentials), applies the files given on top, and then:

   * plans one disruption pass at ``now`` with the controller's pure planner
     (:func:`~karpy_core.controllers.disruption.planner.plan_disruption`): what karpy would
     decide this instant;
   * runs the simulator's controllers without disruption until nothing changes: the pending
     pods and the NodeClaims karpy would create for them;
   * runs them with disruption for ``horizon`` seconds of simulated time (``--until``, default
     :data:`DEFAULT_HORIZON`): the consolidation round;
   * plans one more pass at the round's end, whose decision log gives each node that stayed its
     blocker (:func:`blocker_of`) and the smallest change that would free it.

Prices are the provider's offline catalog's (``simulated``: the EC2 list prices, or a
KWOK-format catalog via ``--instance-types``); a node whose type, zone or capacity type the
catalog lacks is named in :attr:`LiveReport.unpriced`, never guessed (its cost counts as 0).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from karpy_core.apis.core import SYSTEM_PRIORITY_VALUES
from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.cloudprovider.simulated import SimulatedProvider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.disruption.budgets import budget_limit, next_budget_change
from karpy_core.controllers.disruption.controller import DisruptionEventKind
from karpy_core.controllers.disruption.decisions import (
    DecisionKind,
    DecisionStage,
    DisruptionReason,
    NodeDecision,
    Verdict,
)
from karpy_core.controllers.disruption.planner import DisruptionPlan, plan_disruption
from karpy_core.errors import KubeAPIError, NotFoundError
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.admission import PREEMPT_LOWER_PRIORITY
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.kube.port import KINDS, KubeClient, serve_plugin_node_classes
from karpy_core.sim.report import SimulationReport, build_report
from karpy_core.sim.simulator import Simulator
from karpy_core.state.cluster import ClusterSnapshot, collect_snapshot
from karpy_core.state.views import NodePoolView
from karpy_core.utils.clock import VirtualClock

__all__ = [
    "READ_KINDS",
    "DEFAULT_HORIZON",
    "Blocker",
    "LiveRead",
    "NodeVerdict",
    "LiveReport",
    "read_cluster",
    "translate",
    "blocker_of",
    "dry_run",
    "render_live_text",
]

READ_KINDS: tuple[str, ...] = (
    "RuntimeClass", "PriorityClass", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "NodePool", "NodeOverlay", "NodeClaim", "Node",
    "DaemonSet", "PodDisruptionBudget", "ReplicaSet", "StatefulSet", "Job", "PodTemplate", "CapacityBuffer", "Pod",
)
"""What ``--from-cluster`` lists (besides the NodeClass kinds), in the order the in-memory cluster
is seeded: RuntimeClasses and PriorityClasses before the pods admission reads them for, NodePools before their
NodeClaims. ReplicaSets, StatefulSets and Jobs are read so that an evicted pod comes back, as
its controller recreates it in the cluster."""

OPTIONAL_KINDS: frozenset[str] = frozenset({"PriorityClass"})
"""Kinds a 403 does not stop the read for: a ClusterRole made from an older docs/dry-run.md
lacks ``priorityclasses``; the classes are then rebuilt from the live pods, which carry what
Priority admission set (:func:`priority_classes_of_pods`)."""

NODE_CLASS_KINDS: tuple[str, ...] = ("EC2NodeClass", "KCNodeClass", "KWOKNodeClass")
"""The in-tree NodeClass kinds; plugin kinds served by :func:`serve_plugin_node_classes` are added."""

DEFAULT_HORIZON = 600.0
"""Seconds of simulated time the consolidation round runs from the live ``now`` (``--until``):
a decided command's 15 s validation delay, its replacements' boot and the drain fit in it many
times over."""

PROVISION_SECONDS = 3600.0
"""Most simulated seconds the provisioning-only run may take (it normally settles in a minute)."""

REFERENCE_SECONDS = 2.0
"""HiGHS time limit for the optimum the report compares with (the 5 s report budget)."""


class Blocker(StrEnum):
    """Why consolidation keeps a node, grouped for users (issue 37); :func:`blocker_of` maps the
    planner's :class:`~karpy_core.controllers.disruption.decisions.DecisionKind` onto it."""

    PDB = "pdb"
    DO_NOT_DISRUPT = "do-not-disrupt"
    BUDGET = "budget"
    TOPOLOGY = "topology"
    NOMINATED = "nominated"
    CONSOLIDATE_AFTER = "consolidate-after"
    SAVINGS_THRESHOLD = "savings-threshold"
    NO_CHEAPER_FIT = "no-cheaper-fit"
    PENDING_PODS = "pending-pods"
    POLICY = "policy"
    """``consolidationPolicy: WhenEmpty`` on a non-empty node, or ``consolidateAfter: Never``."""
    PRICE_UNKNOWN = "price-unknown"
    NOT_CANDIDATE = "not-candidate"
    """Not managed, not initialized, deleting, already disrupting, static NodePool..."""
    OTHER = "other"


_BLOCKER_OF_KIND: dict[DecisionKind, Blocker] = {
    DecisionKind.PDB_BLOCKS: Blocker.PDB,
    DecisionKind.DO_NOT_DISRUPT: Blocker.DO_NOT_DISRUPT,
    DecisionKind.BUDGET_EXHAUSTED: Blocker.BUDGET,
    DecisionKind.NOMINATED: Blocker.NOMINATED,
    DecisionKind.NOT_CONSOLIDATABLE_YET: Blocker.CONSOLIDATE_AFTER,
    DecisionKind.CONSOLIDATE_AFTER_NEVER: Blocker.POLICY,
    DecisionKind.POLICY_WHEN_EMPTY: Blocker.POLICY,
    DecisionKind.BELOW_MIN_SAVINGS: Blocker.SAVINGS_THRESHOLD,
    DecisionKind.NOT_CHEAPER: Blocker.NO_CHEAPER_FIT,
    DecisionKind.NO_ROOM: Blocker.NO_CHEAPER_FIT,
    DecisionKind.SPOT_TO_SPOT: Blocker.NO_CHEAPER_FIT,
    DecisionKind.SPOT_TO_SPOT_OPTIONS: Blocker.NO_CHEAPER_FIT,
    DecisionKind.TOO_MANY_REPLACEMENTS: Blocker.NO_CHEAPER_FIT,
    DecisionKind.KUBE_SCHEDULER_MISFIT: Blocker.NO_CHEAPER_FIT,
    DecisionKind.UNDONE_BEFORE: Blocker.NO_CHEAPER_FIT,
    DecisionKind.PENDING_PODS: Blocker.PENDING_PODS,
    DecisionKind.PRICE_UNKNOWN: Blocker.PRICE_UNKNOWN,
}
"""Every other kind (eligibility: not initialized, deleting, static NodePool...) is
:attr:`Blocker.NOT_CANDIDATE` at the candidate stage, :attr:`Blocker.OTHER` elsewhere."""

_PRIORITY: tuple[Blocker, ...] = (
    Blocker.NOT_CANDIDATE, Blocker.NOMINATED, Blocker.DO_NOT_DISRUPT, Blocker.PDB, Blocker.PRICE_UNKNOWN, Blocker.POLICY,
    Blocker.CONSOLIDATE_AFTER, Blocker.BUDGET, Blocker.PENDING_PODS, Blocker.TOPOLOGY, Blocker.SAVINGS_THRESHOLD,
    Blocker.NO_CHEAPER_FIT, Blocker.OTHER,
)
"""Which blocker decides when a node has several lines: eligibility first (nothing else is
tried), then the node's own conditions, then what the simulations found."""

_TOPOLOGY_WORDS = ("topology spread", "maxskew", "anti-affinity", "pod affinity", "topology")
"""A ``pod-unschedulable`` line is a topology blocker when the scheduler's reason names a
topology rule (the line keeps the scheduler's words, not its typed kinds)."""


def blocker_of(decision: NodeDecision) -> Blocker:
    """The :class:`Blocker` behind one ``keep`` line of the planner's decision log.

    ``pod-unschedulable`` (a moved pod would not schedule) is :attr:`Blocker.TOPOLOGY` when the
    scheduler's reason names a topology spread, pod affinity or anti-affinity rule, else
    :attr:`Blocker.NO_CHEAPER_FIT`; ``below-min-savings`` whose replacement costs at least as much
    as the node (no saving at all, whatever the threshold) is :attr:`Blocker.NO_CHEAPER_FIT`."""
    if decision.kind is DecisionKind.BELOW_MIN_SAVINGS:
        price, repl = decision.details.price, decision.details.replacement_price
        if price is not None and repl is not None and repl >= price:
            return Blocker.NO_CHEAPER_FIT
    if decision.kind is DecisionKind.POD_UNSCHEDULABLE:
        text = decision.reason.lower()
        return Blocker.TOPOLOGY if any(w in text for w in _TOPOLOGY_WORDS) else Blocker.NO_CHEAPER_FIT
    found = _BLOCKER_OF_KIND.get(decision.kind)
    if found is not None:
        return found
    return Blocker.NOT_CANDIDATE if decision.method is DecisionStage.CANDIDATE else Blocker.OTHER


@dataclass(frozen=True)
class LiveRead:
    """What :func:`read_cluster` listed.

    Attributes:
        objects: kind -> the objects as the API server returned them.
        missing: kinds the server does not serve (CRD not installed), sorted.
        seconds: wall time of the reads.
        forbidden: optional kinds the user may not list.
    """

    objects: dict[str, list[dict[str, Any]]]
    missing: list[str]
    seconds: float
    forbidden: list[str] = field(default_factory=list)
    """Kinds of :data:`OPTIONAL_KINDS` the user may not list (403), sorted."""

    def count(self) -> dict[str, int]:
        """kind -> number of objects read (kinds with none left out)."""
        return {k: len(v) for k, v in sorted(self.objects.items()) if v}


def node_class_kinds() -> tuple[str, ...]:
    """The in-tree NodeClass kinds plus every plugin NodeClass kind (served once per process)."""
    return (*NODE_CLASS_KINDS, *(k for k in serve_plugin_node_classes() if k not in NODE_CLASS_KINDS))


async def read_cluster(kube: KubeClient, kinds: Sequence[str] | None = None) -> LiveRead:
    """List every kind of ``kinds`` (default :data:`READ_KINDS` and :func:`node_class_kinds`)
    concurrently; only ``list`` is called. A kind the server answers 404 for (its CRD is not
    installed) is in :attr:`LiveRead.missing`.

    Raises:
        KubeAPIError: a list failed otherwise (403 Forbidden: the user may not list the kind).
    """
    wanted = list(kinds) if kinds is not None else [*READ_KINDS, *node_class_kinds()]
    t0 = time.perf_counter()

    forbidden: list[str] = []

    async def one(kind: str) -> list[dict[str, Any]] | None:
        try:
            return await kube.list(kind)
        except NotFoundError:
            return None
        except KubeAPIError as e:
            if e.status == 403 and kind in OPTIONAL_KINDS:
                forbidden.append(kind)
                return None
            raise

    got = await asyncio.gather(*(one(k) for k in wanted))
    objects = {k: v for k, v in zip(wanted, got, strict=True) if v is not None}
    missing = sorted(k for k, v in zip(wanted, got, strict=True) if v is None and k not in forbidden)
    return LiveRead(objects, missing, time.perf_counter() - t0, sorted(forbidden))


_DROPPED_META = ("managedFields", "selfLink")


def _finished_job(job: Mapping[str, Any]) -> bool:
    status = job.get("status") or {}
    return bool(status.get("completionTime")) or any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in status.get("conditions") or ())


def priority_classes_of_pods(pods: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """PriorityClass objects rebuilt from admitted pods (when the classes could not be listed):
    one per ``spec.priorityClassName`` other than the system classes, with the ``value``
    (``spec.priority``, 0 when unset) and ``preemptionPolicy`` Priority admission gave its first pod."""
    seen: dict[str, dict[str, Any]] = {}
    for pod in pods:
        spec = pod.get("spec") or {}
        name = spec.get("priorityClassName")
        if not name or name in SYSTEM_PRIORITY_VALUES or name in seen:
            continue
        seen[name] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                      "value": int(spec.get("priority") or 0),
                      "preemptionPolicy": spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY}
    return [seen[k] for k in sorted(seen)]


def translate(read: LiveRead) -> list[dict[str, Any]]:
    """The live objects as the simulator's starting state, in :data:`READ_KINDS` order (NodeClass
    kinds before NodePools); see the module docstring for what changes. Each object carries
    ``kind`` and ``apiVersion`` (a list's items may lack them). Pure: ``read`` is not modified."""
    order = [*READ_KINDS[:4], *node_class_kinds(), *READ_KINDS[4:]]
    out: list[dict[str, Any]] = []
    objects = read.objects
    if "PriorityClass" not in objects:
        objects = {**objects, "PriorityClass": priority_classes_of_pods(objects.get("Pod", ()))}
    for kind in order:
        for obj in objects.get(kind, ()):
            if kind == "Job" and _finished_job(obj):
                continue
            meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _DROPPED_META}
            if kind == "ReplicaSet":
                owners = [r for r in meta.get("ownerReferences") or () if r.get("kind") != "Deployment"]
                meta = {k: v for k, v in meta.items() if k != "ownerReferences"}
                if owners:
                    meta["ownerReferences"] = owners
                if not ((obj.get("spec") or {}).get("replicas") or 0):
                    continue  # an old revision: keeps no pods
            info = KINDS.get(kind)
            item = {**obj, "metadata": meta, "kind": kind}
            if info is not None:
                item["apiVersion"] = obj.get("apiVersion") or info.api_version
            out.append(item)
    return out


@dataclass
class NodeVerdict:
    """What consolidation does with one node.

    Attributes:
        node: Node name; ``nodeclaim``, ``nodepool``, ``instance_type``, ``zone``,
            ``capacity_type`` from its labels and NodeClaim ("" when none).
        price: USD/hour from the catalog, None when unknown.
        action: ``delete``, ``replace`` or ``keep``.
        replacement: the replacement's instance type(s) (``replace`` only).
        method: the disruption method that decided (``delete``/``replace``), or the stage/method
            of the deciding ``keep`` line.
        at: seconds after the live ``now`` the command was carried out (its nodes tainted, replacements
            created; for a command decided at the round's end, the round's length); None for ``keep``.
        blocker: for ``keep``, why (:class:`Blocker`); None otherwise.
        kind: the planner's :class:`DecisionKind` behind it.
        reason: the planner's words.
        fix: the smallest change that would free the node ("" when none is known).
        now: the verdict of the pass at the live ``now`` alone (``delete``, ``replace``, ``keep``).
    """

    node: str
    nodeclaim: str
    nodepool: str
    instance_type: str
    zone: str
    capacity_type: str
    price: float | None
    action: str
    replacement: list[str] = field(default_factory=list)
    method: str = ""
    at: float | None = None
    blocker: Blocker | None = None
    kind: DecisionKind | None = None
    reason: str = ""
    fix: str = ""
    now: str = "keep"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (enums as their values)."""
        return {"node": self.node, "nodeclaim": self.nodeclaim, "nodepool": self.nodepool, "instanceType": self.instance_type,
                "zone": self.zone, "capacityType": self.capacity_type, "pricePerHour": self.price, "action": self.action,
                "replacement": list(self.replacement), "method": self.method, "at": self.at,
                "blocker": self.blocker.value if self.blocker else None, "kind": self.kind.value if self.kind else None,
                "reason": self.reason, "fix": self.fix, "now": self.now}


@dataclass
class LiveReport:
    """The dry run's result (:func:`dry_run`).

    Attributes:
        now: the live time the run starts at, epoch seconds.
        horizon: simulated seconds of the consolidation round.
        read: object counts read per kind; ``missing``: kinds not served.
        read_seconds: wall time of the reads; ``seconds``: of the whole dry run.
        verdicts: per managed node, name order.
        unmanaged: Nodes without a ``karpenter.sh/nodepool`` label (kept as they are).
        pending: ``ns/name`` -> why, for the pods still pending after provisioning.
        created: NodeClaims karpy would create for pending pods: ``{name, nodepool,
            instanceType, zone, capacityType, pricePerHour, pods}``.
        cost_now, cost_provisioned, cost_after: USD/hour of the managed nodes live, after
            provisioning and after the round.
        optimum: the optimum (or lower bound) for the pods on managed nodes after the round,
            USD/hour, None when not computed; ``optimum_status`` says which.
        unpriced: nodes the catalog has no price for, with why.
        now_plan: the command the pass at ``now`` decides (``plan.describe()``), "" for none.
        budgets: per NodePool ``{nodepool, nodes, allowed: {Empty, Drifted, Underutilized},
            nextChange}``: allowed disruptions now (None: unlimited).
        decisions: node -> the decision lines (round log, then the final pass).
        disruptions: the round's disruption events.
        simulation: the simulator's report after the round.
        placed: its report after provisioning, before the round: where each pod is, or why it is
            pending, on the live state (``--explain`` reads it).
        warnings: what the reader should know (kinds skipped, objects refused).
    """

    now: float
    horizon: float
    read: dict[str, int]
    missing: list[str]
    read_seconds: float
    verdicts: list[NodeVerdict]
    unmanaged: list[str]
    pending: dict[str, str]
    created: list[dict[str, Any]]
    cost_now: float
    cost_provisioned: float
    cost_after: float
    optimum: float | None
    optimum_status: str
    unpriced: list[str]
    now_plan: str
    budgets: list[dict[str, Any]]
    decisions: dict[str, list[str]]
    disruptions: list[dict[str, Any]]
    simulation: SimulationReport
    placed: SimulationReport
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def verdict(self, node: str) -> NodeVerdict | None:
        """The verdict for ``node``, or None."""
        return next((v for v in self.verdicts if v.node == node), None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``-o json``)."""
        return {
            "now": _iso(self.now), "horizonSeconds": self.horizon, "read": dict(self.read), "missingKinds": list(self.missing),
            "readSeconds": round(self.read_seconds, 3), "seconds": round(self.seconds, 3),
            "pending": dict(self.pending), "nodeClaimsToCreate": list(self.created),
            "nodes": [v.to_dict() for v in self.verdicts], "unmanagedNodes": list(self.unmanaged),
            "cost": {"now": round(self.cost_now, 6), "afterProvisioning": round(self.cost_provisioned, 6),
                     "afterConsolidation": round(self.cost_after, 6),
                     "optimum": None if self.optimum is None else round(self.optimum, 6), "optimumStatus": self.optimum_status},
            "unpriced": list(self.unpriced), "planNow": self.now_plan, "budgets": list(self.budgets),
            "disruptions": list(self.disruptions), "warnings": list(self.warnings),
        }


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _offering_price(types: Sequence[InstanceType], labels: Mapping[str, str]) -> float | None:
    it_name = labels.get(LABEL_INSTANCE_TYPE, "")
    for it in types:
        if it.name != it_name:
            continue
        for o in it.offerings:
            if o.zone == labels.get(LABEL_ZONE, "") and o.capacity_type == labels.get(LABEL_CAPACITY_TYPE, ""):
                return o.price
    return None


def _unpriced_why(types: Sequence[InstanceType], labels: Mapping[str, str]) -> str:
    it_name = labels.get(LABEL_INSTANCE_TYPE, "")
    if not it_name:
        return f"no {LABEL_INSTANCE_TYPE} label"
    if not any(it.name == it_name for it in types):
        return f"instance type {it_name} is not in the catalog"
    return (f"instance type {it_name} has no {labels.get(LABEL_CAPACITY_TYPE, '?')} offering in zone "
            f"{labels.get(LABEL_ZONE, '?')} in the catalog")


async def _types_by_pool(provider: CloudProvider, cluster: InMemoryCluster) -> dict[str, list[InstanceType]]:
    out: dict[str, list[InstanceType]] = {}
    for view in cluster.views("NodePool") or ():
        if isinstance(view, NodePoolView) and view.valid:
            out[view.name] = await provider.get_instance_types(view.model)
    return out


def _cost(cluster: InMemoryCluster, types: Mapping[str, list[InstanceType]]) -> tuple[float, list[str]]:
    """USD/hour of the Nodes labelled with a NodePool, and the unpriced ones (named, why)."""
    total = 0.0
    unpriced = []
    for node in cluster.snapshot("Node"):
        labels = node["metadata"].get("labels") or {}
        pool = labels.get(LABEL_NODEPOOL)
        if not pool:
            continue
        pool_types = types.get(pool, [])
        price = _offering_price(pool_types, labels)
        if price is None:
            why = _unpriced_why(pool_types, labels) if pool in types else f"NodePool {pool} is not in the cluster"
            unpriced.append(f"{node['metadata']['name']}: {why}")
        else:
            total += price
    return total, unpriced


def _seed(sim: Simulator, provider: CloudProvider, objects: Sequence[dict[str, Any]]) -> list[str]:
    """Create ``objects`` in the simulator's cluster as they are (status kept); record each
    NodeClaim's instance with the simulated cloud. Returns a warning per object refused."""
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.errors import KubeAPIError

    warnings = []
    plugin = provider.plugin
    for obj in objects:
        kind = obj["kind"]
        ref = f"{kind} {(obj['metadata'].get('namespace') + '/') if obj['metadata'].get('namespace') else ''}{obj['metadata'].get('name')}"
        try:
            sim.cluster.create_sync(kind, obj)
        except KubeAPIError as exc:
            warnings.append(f"{ref}: not simulated: {exc}")
            continue
        if kind == "NodeClaim" and isinstance(plugin, SimulatedProvider):
            try:
                plugin.adopt(NodeClaim.model_validate(obj))
            except ValueError as exc:
                warnings.append(f"{ref}: its instance is not known to the simulated cloud: {str(exc).splitlines()[0]}")
    return warnings


def _apply_files(sim: Simulator, paths: Sequence[str], variables: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Apply manifest files over the live state (an object of the same kind and name replaces the
    live one). Returns (warnings, ignored refs)."""
    from karpy_core.apis.base import to_kube_dict
    from karpy_core.apis.loader import load_documents
    from karpy_core.sim.simulator import is_simulated

    loaded = load_documents(list(paths), dict(variables))
    served = [o for o in loaded.other if is_simulated(o.api_version, o.kind)]
    objs = [to_kube_dict(o) for o in [*loaded.objects(), *served]]
    for obj in objs:
        meta = obj.get("metadata") or {}
        kind = obj.get("kind", "")
        if kind in KINDS and meta.get("name") and sim.cluster.exists(kind, meta["name"], meta.get("namespace")):
            sim.cluster.delete_sync(kind, meta["name"], meta.get("namespace"))
    ignored = sim.apply(objs)
    ignored += [o.ref() for o in loaded.other if not is_simulated(o.api_version, o.kind)]
    return list(loaded.warnings) + list(loaded.skipped), ignored


def _budgets(snapshot: ClusterSnapshot, now: float) -> list[dict[str, Any]]:
    out = []
    for pool in snapshot.nodepool_views:
        total = sum(1 for n in snapshot.node_views if n.nodepool == pool.name)
        allowed = {r.value: budget_limit(pool.budgets, r.value, now, total=total) for r in DisruptionReason}
        change = next_budget_change(pool.budgets, now)
        out.append({"nodepool": pool.name, "nodes": total, "allowed": allowed, "nextChange": _iso(change) if change else None})
    return out


def _fix(blocker: Blocker, d: NodeDecision, snapshot: ClusterSnapshot, now: float, nodepool: str) -> str:
    """The smallest change that would free a node kept by ``d`` (see docs/dry-run.md)."""
    pool = snapshot.nodepool(nodepool)
    if blocker is Blocker.PDB:
        return "raise that PodDisruptionBudget's maxUnavailable (or lower its minAvailable) by 1, or add a healthy replica"
    if blocker is Blocker.DO_NOT_DISRUPT:
        return "remove that karpenter.sh/do-not-disrupt annotation (or let the pod finish)"
    if blocker is Blocker.BUDGET:
        change = next_budget_change(pool.budgets, now) if pool is not None else None
        when = f"wait for the budget window to change at {_iso(change)}, or " if change else ""
        return f"{when}raise the NodePool {nodepool} budget's nodes for {d.details.budget or 'Underutilized'}"
    if blocker is Blocker.CONSOLIDATE_AFTER:
        return f"wait ({d.reason}), or lower the NodePool {nodepool}'s spec.disruption.consolidateAfter"
    if blocker is Blocker.NOMINATED:
        until = f" until {d.details.until}" if d.details.until else ""
        return f"wait: the node is nominated for pending pods{until}"
    if blocker is Blocker.SAVINGS_THRESHOLD:
        if d.details.price and d.details.replacement_price is not None:
            saving = 1 - d.details.replacement_price / d.details.price
            return (f"lower karpy.sh/consolidation-min-savings on NodePool {nodepool} (or KARPY's "
                    f"--consolidation-min-savings) to at most {max(saving, 0.0):.2f}")
        return f"lower karpy.sh/consolidation-min-savings on NodePool {nodepool}"
    if blocker is Blocker.TOPOLOGY:
        return "raise the constraint's maxSkew, allow more domains, or make it preferred (ScheduleAnyway)"
    if blocker is Blocker.PENDING_PODS:
        return "let the pending pods be placed first (consolidation waits for provisioning)"
    if blocker is Blocker.POLICY:
        return f"set NodePool {nodepool}'s consolidationPolicy: WhenEmptyOrUnderutilized and a finite consolidateAfter"
    if blocker is Blocker.PRICE_UNKNOWN:
        return "give a catalog that prices the node's instance type, zone and capacity type (--instance-types)"
    if blocker is Blocker.NO_CHEAPER_FIT:
        return "none: its pods need this capacity (remove or shrink a pod, or allow cheaper instance types)"
    return ""


def _without_topology(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A pending copy of a pod without its topology spread constraints and pod (anti-)affinity."""
    spec = {k: v for k, v in (raw.get("spec") or {}).items() if k not in ("nodeName", "topologySpreadConstraints")}
    affinity = {k: v for k, v in (spec.get("affinity") or {}).items() if k not in ("podAffinity", "podAntiAffinity")}
    if affinity:
        spec["affinity"] = affinity
    else:
        spec.pop("affinity", None)
    return {**raw, "spec": spec}


def topology_probe(snapshot: ClusterSnapshot, types: dict[str, list[InstanceType]], node: str, now: float) -> str | None:
    """When deleting ``node`` fails only because of topology rules, the pod (``ns/name``) whose
    rule it is; else None.

    The planner's simulation may open a replacement for a pod whose topology spread or pod
    affinity forbids the nodes that stay; that replacement is then "not cheaper" and the line
    says so, hiding the rule. Here the node's pods are scheduled twice over the nodes that stay
    (with the NodePools, as the planner does): as they are, and without their topology spread
    constraints and pod (anti-)affinity. When the first needs a new node or leaves a pod pending
    and the second places every pod on the nodes that stay, the rule is what keeps the node."""
    from karpy_core.controllers.disruption.candidates import build_candidates
    from karpy_core.controllers.disruption.simulation import SimulationContext, claim_capacity
    from karpy_core.scheduling.pod import pod_info

    cand = next((c for c in build_candidates(snapshot, types, now) if c.name == node), None)
    if cand is None or not cand.pods:
        return None
    ctx = SimulationContext(snapshot, types)
    infos = ctx.pod_infos(cand)
    if isinstance(infos, str):
        return None
    sched, _ = ctx.scheduler({node}, claim_capacity([cand]), infos)
    real = sched.solve(infos)
    if not real.new_claims and not real.errors:
        return None
    try:
        bare = [pod_info(_without_topology(p.raw)) for p in cand.pods]
    except ValueError:
        return None
    sched, _ = ctx.scheduler({node}, claim_capacity([cand]), bare)
    free = sched.solve(bare)
    if free.new_claims or free.errors:
        return None
    moved = {k for c in real.new_claims for k in (p.key for p in c.pods)} | set(real.errors)
    ruled = [p.key for p in cand.pods if p.key in moved and _without_topology(p.raw)["spec"] != {
        k: v for k, v in (p.raw.get("spec") or {}).items() if k != "nodeName"}]
    return sorted(ruled)[0] if ruled else sorted(moved)[0]


def _deciding(lines: Sequence[NodeDecision]) -> NodeDecision | None:
    """The ``keep`` line that decides for one node (lowest :data:`_PRIORITY` index)."""
    keeps = [d for d in lines if d.verdict is Verdict.KEEP]
    if not keeps:
        return None
    return min(keeps, key=lambda d: _PRIORITY.index(blocker_of(d)))


async def _plan(provider: CloudProvider, cluster: InMemoryCluster, now: float, gates: FeatureGates,
                min_savings: float | None) -> tuple[ClusterSnapshot, dict[str, list[InstanceType]], DisruptionPlan | None,
                                                    list[NodeDecision]]:
    snapshot = await collect_snapshot(cluster, managed=provider.managed_node_classes())
    types = await _types_by_pool(provider, cluster)
    lines: list[NodeDecision] = []
    extra = {} if min_savings is None else {"min_savings": min_savings}
    plan = plan_disruption(snapshot, types, now, log=lines, feature_gates=gates, **extra)  # type: ignore[arg-type]
    return snapshot, types, plan, lines


def _round_commands(sim: Simulator) -> dict[str, tuple[str, str, float, list[str]]]:
    """node -> (action, method, t, replacement NodeClaims) for each node a command of the round disrupted."""
    out: dict[str, tuple[str, str, float, list[str]]] = {}
    repl: dict[str, list[str]] = {}
    for e in sim.events:
        if e.kind == DisruptionEventKind.REPLACEMENT_CREATE.value:
            for n in e.details.get("for") or ():
                repl.setdefault(n, []).append(e.nodeclaim)
    for e in sim.events:
        if e.kind != DisruptionEventKind.DISRUPT.value:
            continue
        for n in e.node.split(","):
            if n and n not in out:
                out[n] = (str(e.details.get("decision", "")), str(e.details.get("method", "")), e.t, repl.get(n, []))
    return out


def _instance_type_of(cluster: InMemoryCluster, claim: str) -> str:
    obj = cluster.peek("NodeClaim", claim)
    return str(((obj or {}).get("metadata") or {}).get("labels", {}).get(LABEL_INSTANCE_TYPE, "")) if obj else ""


@dataclass
class _RoundEnd:
    """The state at the round's end, from which each live node's verdict is read."""

    snapshot: ClusterSnapshot
    types: dict[str, list[InstanceType]]
    plan: DisruptionPlan | None
    lines: list[NodeDecision]
    commands: dict[str, tuple[str, str, float, list[str]]]
    cluster: InMemoryCluster
    start: float
    now: float

    def verdicts(self, read: LiveRead, live_types: Mapping[str, list[InstanceType]],
                 now_action: Mapping[str, str]) -> tuple[list[NodeVerdict], list[str]]:
        """(verdicts of the live managed nodes in name order, unmanaged live node names)."""
        claims: dict[str, str] = {}
        for c in read.objects.get("NodeClaim", []):
            status = c.get("status") or {}
            for key in (status.get("nodeName"), status.get("providerID")):
                if key:
                    claims.setdefault(key, c["metadata"]["name"])
        by_node: dict[str, list[NodeDecision]] = {}
        for d in self.lines:
            by_node.setdefault(d.node, []).append(d)
        out: list[NodeVerdict] = []
        unmanaged: list[str] = []
        for node in read.objects.get("Node", []):
            labels = node["metadata"].get("labels") or {}
            name = node["metadata"]["name"]
            pool = labels.get(LABEL_NODEPOOL, "")
            if not pool:
                unmanaged.append(name)
                continue
            v = NodeVerdict(node=name, nodeclaim=claims.get(name) or claims.get((node.get("spec") or {}).get("providerID") or "", ""),
                            nodepool=pool, instance_type=labels.get(LABEL_INSTANCE_TYPE, ""), zone=labels.get(LABEL_ZONE, ""),
                            capacity_type=labels.get(LABEL_CAPACITY_TYPE, ""), price=_offering_price(live_types.get(pool, []), labels),
                            action="keep", now=now_action.get(name, "keep"))
            self._decide(v, by_node.get(name, []))
            out.append(v)
        return sorted(out, key=lambda v: v.node), sorted(unmanaged)

    def _decide(self, v: NodeVerdict, lines: list[NodeDecision]) -> None:
        """Fill ``v``: the round's command for the node, else the end pass's command, else the
        deciding ``keep`` line (with the topology probe behind a "no cheaper fit")."""
        if v.node in self.commands:
            action, method, t, repl = self.commands[v.node]
            v.action, v.method, v.at = action, method, round(t, 3)
            v.kind = DecisionKind(action) if action in (DecisionKind.DELETE.value, DecisionKind.REPLACE.value) else None
            v.replacement = sorted({_instance_type_of(self.cluster, r) or r for r in repl})
            return
        if self.plan is not None and any(c.name == v.node for c in self.plan.candidates):
            p = self.plan
            v.action, v.method, v.at, v.kind = p.decision.value, p.method.value, round(self.now - self.start, 3), p.decision
            v.replacement = sorted({r.instance_types[0].name for r in p.replacements if r.instance_types})
            v.reason = f"decided at the round's end: {p.describe()}"
            return
        line = _deciding(lines)
        if line is None:
            v.blocker = Blocker.OTHER
            v.reason = "no decision at the round's end" + ("" if self.cluster.exists("Node", v.node) else " (the node is gone)")
            return
        v.blocker, v.kind, v.reason, v.method = blocker_of(line), line.kind, line.reason, line.method.value
        v.fix = _fix(v.blocker, line, self.snapshot, self.now, v.nodepool)
        ruled = topology_probe(self.snapshot, self.types, v.node, self.now) if v.blocker is Blocker.NO_CHEAPER_FIT else None
        if ruled is not None:
            v.blocker = Blocker.TOPOLOGY
            v.reason = f"its pods fit on the nodes that stay but pod {ruled}'s topology spread or pod affinity forbids it; {line.reason}"
            v.fix = (f"pod {ruled}: raise its topology spread's maxSkew, use whenUnsatisfiable: ScheduleAnyway, "
                     "or make its pod (anti-)affinity preferred")


async def dry_run(
    kube: KubeClient,
    paths: Sequence[str] = (),
    *,
    now: float | None = None,
    horizon: float = DEFAULT_HORIZON,
    region: str | None = None,
    instance_types: str | None = None,
    feature_gates: FeatureGates | None = None,
    variables: Mapping[str, str] | None = None,
    min_savings: float | None = None,
    reference_seconds: float | None = REFERENCE_SECONDS,
) -> LiveReport:
    """Read the cluster behind ``kube`` (list only) and report what karpy would do there.

    Args:
        kube: a KubeClient on the live cluster (only ``list`` is called on it).
        paths: manifest files applied on top of the live state (``simulate --from-cluster FILES``).
        now: the live time (default: the wall clock), epoch seconds.
        horizon: simulated seconds the consolidation round runs (``--until``).
        region: the simulated catalog's region (default us-east-1).
        instance_types: a KWOK-format catalog instead of the EC2 one (Karpenter's KWOK types).
        feature_gates: ``FEATURE_GATES`` for the simulated controller.
        variables: ``${VAR}`` values for ``paths``.
        min_savings: the repack's minimum savings fraction (default the controller's).
        reference_seconds: HiGHS time limit for the optimum (None: not computed).

    Raises:
        KubeAPIError: a list failed (other than a kind not served).
        ManifestError: a file given is invalid.
        ConfigurationError: the catalog options are bad.
    """
    t0 = time.perf_counter()
    read = await read_cluster(kube)
    start = time.time() if now is None else now
    gates = feature_gates or FeatureGates()
    serve_plugin_node_classes()
    clock = VirtualClock(start)
    cluster = InMemoryCluster(clock)
    options: dict[str, Any] = {"region": region or "us-east-1", "kube": cluster}
    if instance_types:
        options["instance_types_file"] = instance_types
    provider = load_provider("simulated", options)
    sim = Simulator(provider, clock=clock, cluster=cluster, feature_gates=gates)
    warnings = _seed(sim, provider, translate(read))
    if read.missing:
        warnings.append(f"not served by the API server (CRD not installed), skipped: {', '.join(read.missing)}")
    ignored: list[str] = []
    if paths:
        more, ignored = _apply_files(sim, paths, variables or {})
        warnings += more
    if ignored:
        warnings.append(f"ignored (kind not modelled): {', '.join(sorted(ignored))}")
    await sim.refresh_status()
    # the pass at the live instant
    snap0, types0, plan0, lines0 = await _plan(provider, cluster, start, gates, min_savings)
    cost_now, unpriced = _cost(cluster, types0)
    now_action = {c.name: plan0.decision.value for c in plan0.candidates} if plan0 is not None else {}
    budgets = _budgets(snap0, start)
    live_claims = {n["metadata"]["name"] for n in cluster.snapshot("NodeClaim")}
    # provisioning only, until nothing changes
    await sim.run(max_seconds=PROVISION_SECONDS)
    types_p = await _types_by_pool(provider, cluster)
    cost_provisioned, _ = _cost(cluster, types_p)
    placed = await build_report(sim, reference_time_limit=None)  # where each pod is before the round (--explain)
    node_of = {(n.get("spec") or {}).get("providerID"): n["metadata"]["name"] for n in cluster.snapshot("Node")}
    pods_of = {n.name: sorted(n.pods) for n in placed.nodes}
    created = []
    for nc in cluster.snapshot("NodeClaim"):
        if nc["metadata"]["name"] in live_claims:
            continue
        labels = nc["metadata"].get("labels") or {}
        node_name = node_of.get((nc.get("status") or {}).get("providerID"))
        created.append({"name": nc["metadata"]["name"], "nodepool": labels.get(LABEL_NODEPOOL, ""),
                        "instanceType": labels.get(LABEL_INSTANCE_TYPE, ""), "zone": labels.get(LABEL_ZONE, ""),
                        "capacityType": labels.get(LABEL_CAPACITY_TYPE, ""),
                        "pricePerHour": _offering_price(types_p.get(labels.get(LABEL_NODEPOOL, ""), []), labels),
                        "pods": pods_of.get(node_name or "", [])})
    # the consolidation round
    sim.enable_disruption()
    end = start + max(horizon, 0.0)
    if end > clock.now():
        await sim.run_until(end)
    snap1, types1, plan1, lines1 = await _plan(provider, cluster, clock.now(), gates, min_savings)
    cost_after, _ = _cost(cluster, types1)
    end_state = _RoundEnd(snap1, types1, plan1, lines1, _round_commands(sim), cluster, start, clock.now())
    verdicts, unmanaged = end_state.verdicts(read, types0, now_action)
    verdicts.sort(key=lambda v: v.node)
    decisions: dict[str, list[str]] = {}
    for d in lines0:
        decisions.setdefault(d.node, []).append(f"{_iso(start)} (live) {d.text()}")
    for n in sorted(sim.disruption.decisions):
        decisions.setdefault(n, []).extend(sim.disruption.explain(n))
    for d in lines1:
        decisions.setdefault(d.node, []).append(f"{_iso(clock.now())} (end of round) {d.text()}")
    sim.disruption_enabled = False  # the report's optimum is computed for plain runs only
    report = await build_report(sim, provider_info={"name": provider.name, "region": region or "us-east-1",
                                                    "pricing": provider.pricing_note(), "inputs": "the live cluster"},
                                reference_time_limit=reference_seconds)
    ref = report.reference
    optimum = ref.value if ref is not None else None
    pending = {f"{p.namespace}/{p.name}": p.reason or "" for p in report.pods if not p.node}
    disruptions = [e.to_dict() for e in sim.events if isinstance(e.kind, DisruptionEventKind)]
    return LiveReport(
        now=start, horizon=horizon, read=read.count(), missing=read.missing, read_seconds=read.seconds, verdicts=verdicts,
        unmanaged=sorted(unmanaged), pending=pending, created=created, cost_now=cost_now, cost_provisioned=cost_provisioned,
        cost_after=cost_after, optimum=optimum,
        optimum_status=(ref.status + (f": {ref.note}" if ref.note else "")) if ref is not None else "not computed",
        unpriced=unpriced, now_plan=plan0.describe() if plan0 is not None else "", budgets=budgets, decisions=decisions,
        disruptions=disruptions, simulation=report, placed=placed, warnings=warnings + report.warnings,
        seconds=time.perf_counter() - t0,
    )


def _money(x: float | None) -> str:
    return "unknown" if x is None else f"{x:.4f}"


def render_live_text(r: LiveReport) -> str:
    """The text report: what was read, pending pods and NodeClaims to create, per-node verdicts
    with blockers and fixes, costs, budgets."""
    lines = [f"karpy dry run on the live cluster at {_iso(r.now)} (read in {r.read_seconds:.2f} s, "
             f"round of {r.horizon:g} s simulated; report in {r.seconds:.2f} s)"]
    lines.append("read: " + (", ".join(f"{n} {k}" for k, n in r.read.items()) or "nothing"))
    lines.append("")
    lines.append(f"pending pods: {len(r.pending)} after provisioning")
    for key, why in sorted(r.pending.items())[:20]:
        lines.append(f"  {key}: {why}")
    lines.append(f"NodeClaims karpy would create: {len(r.created)}")
    for c in r.created:
        lines.append(f"  {c['name']}: {c['instanceType']} {c['zone']} {c['capacityType']} NodePool {c['nodepool']} "
                     f"{_money(c['pricePerHour'])} USD/h for {len(c['pods'])} pod(s)")
    lines.append("")
    lines.append(f"consolidation, per node ({len(r.verdicts)} managed; {len(r.unmanaged)} not managed by a NodePool)")
    lines.append(f"  the pass at the live instant decides: {r.now_plan or 'nothing'}")
    for v in r.verdicts:
        head = f"  {v.node} ({v.instance_type} {v.zone} {v.capacity_type} {_money(v.price)} USD/h, NodePool {v.nodepool}): "
        if v.action == "keep":
            lines.append(head + f"keep: {v.blocker.value if v.blocker else '?'}: {v.reason}")
            if v.fix:
                lines.append(f"      to free it: {v.fix}")
        else:
            what = f"replace with {', '.join(v.replacement) or '?'}" if v.action == "replace" else "delete"
            lines.append(head + f"{what} ({v.method}, disrupted at +{v.at or 0:.0f}s)")
    lines.append("")
    lines.append(f"cost, USD/hour: now {r.cost_now:.4f}; after provisioning {r.cost_provisioned:.4f}; "
                 f"after the consolidation round {r.cost_after:.4f}; optimum {_money(r.optimum)} ({r.optimum_status})")
    for u in r.unpriced:
        lines.append(f"  no price (counted as 0): {u}")
    lines.append("")
    lines.append("disruption budgets now (allowed nodes; unlimited when no budget applies)")
    for b in r.budgets:
        allowed = ", ".join(f"{k} {'unlimited' if n is None else n}" for k, n in b["allowed"].items())
        lines.append(f"  NodePool {b['nodepool']} ({b['nodes']} nodes): {allowed}"
                     + (f"; next change {b['nextChange']}" if b["nextChange"] else ""))
    for w in r.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines)
