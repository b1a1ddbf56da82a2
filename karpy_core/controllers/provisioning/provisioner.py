"""The provisioner: pending pods -> scheduling decision -> NodeClaim objects.

One :meth:`Provisioner.reconcile` pass (Karpenter ``pkg/controllers/provisioning/provisioner.go``
``Schedule``): snapshot nodes and NodeClaims before pods; keep the provisionable pods; build one
template per Ready NodePool with the provider's instance types; solve; create one NodeClaim per
planned node (``generateName: <nodepool>-``, owner reference to the NodePool, template labels,
taints, startup taints, the NodePool hash). Launching is the NodeClaim lifecycle controller's job.
Every node and in-flight NodeClaim the pass places pending pods on, and every NodeClaim it
creates, is nominated (:mod:`karpy_core.state.nominations`) so disruption leaves it alone while
kube-scheduler binds the pods. Each pod placed on a NodeClaim still in flight, or on one the pass
creates, is nominated to it, and the next pass puts it back there while the claim is in flight
(``Scheduler(nominated=...)``): no pass re-packs what an earlier one planned, and no pod gets
a second NodeClaim while its planned one launches.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.base import ObjectMeta, OwnerReference, to_kube_dict
from karpy_core.apis.hashing import HASH_VERSION
from karpy_core.apis.labels import (
    ANNOTATION_MIN_VALUES_RELAXED,
    ANNOTATION_NODEPOOL_HASH,
    ANNOTATION_NODEPOOL_HASH_VERSION,
    ANNOTATION_NOMINATED_PODS,
    LABEL_NODEPOOL,
    nodeclass_label_key,
)
from karpy_core.apis.nodeclaim import NodeClaim, NodeClaimSpec, ResourceRequests
from karpy_core.apis.nodepool import NodePool, NodeSelectorRequirementWithMinValues
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.cloudprovider.types import InstanceType
from karpy_core.controllers.capacitybuffer import BufferPlacement, owner_of, provisioning_conditions
from karpy_core.errors import KubeAPIError, NotFoundError
from karpy_core.kube.port import KubeClient
from karpy_core.logs import fields
from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.resources import format_resource_list
from karpy_core.scheduling.scheduler import PlannedNodeClaim, Scheduler, SchedulingResults
from karpy_core.scheduling.template import NodePoolTemplate, template_from_nodepool
from karpy_core.scheduling.volumes import apply_volume_requirements, volume_terms
from karpy_core.state.cluster import (
    ClusterSnapshot,
    bound_pods_and_requests,
    collect_snapshot,
    daemonset_pod_infos,
    existing_nodes,
    nodepool_usage,
    ready_nodepools,
)
from karpy_core.state.nominations import Nominations, in_flight_targets, recorded_targets
from karpy_core.state.synced import ClusterSync
from karpy_core.state.views import NodePoolView, PodView
from karpy_core.utils.clock import Clock, RealClock
from karpy_core.utils.fields import field_of
from karpy_core.utils.quantity import QuantityError

__all__ = ["Provisioner", "ProvisioningResult", "nodeclaim_from_plan", "planned_nodeclaim", "build_scheduler", "pretty_list",
           "REMAINDER_PASSES", "grows_at_same_rate", "remainder_claims"]

log = logging.getLogger(__name__)


@dataclass
class ProvisioningResult:
    """What one pass decided and did."""

    results: SchedulingResults | None = None
    scheduler: Scheduler | None = None
    """The scheduler of this pass (its explain methods describe the decision)."""
    created: list[dict[str, Any]] = field(default_factory=list)
    """NodeClaim objects created, in plan order."""
    pending: int = 0
    pods: dict[str, PodInfo] = field(default_factory=dict)
    """The pending pods of this pass, by ``namespace/name``."""
    no_instance_types: list[dict[str, Any]] = field(default_factory=list)
    """Ready NodePools whose requirements leave no instance type with an available offering
    (Karpenter's ``NoCompatibleInstanceTypes`` event)."""
    synced: bool = True
    """False: the pass did nothing because the cluster state was not synced
    (:class:`~karpy_core.state.synced.ClusterSync`); the controller tries again shortly."""
    would_launch: list[tuple[PlannedNodeClaim, dict[str, Any]]] = field(default_factory=list)
    """Dry run (:attr:`Provisioner.dry_run`): each NodeClaim the pass would have created (its plan
    and the object, named ``<generateName>dry-run``), in plan order; ``created`` stays empty."""
    deferred: list[str] = field(default_factory=list)
    """Pods (``ns/name``) whose planned NodeClaims :func:`remainder_claims` left for the next
    batch (only in a pass run while pods keep arriving); they stay pending, not nominated."""
    buffers: dict[str, BufferPlacement] = field(default_factory=dict)
    """CapacityBuffer key (``ns/name``) -> where its virtual pods went. Virtual pods are taken out
    of ``results.existing``/``errors``/``reasons`` and ``pods`` (they are not pending pods) but
    stay in the planned claims' ``pods`` (the room launched for them)."""


def has_compatible_instance_type(template: NodePoolTemplate) -> bool:
    """True when some instance type of ``template`` satisfies its requirements and has an
    available offering they allow (Karpenter ``scheduling/scheduler.go`` ``filterInstanceTypesByRequirements``)."""
    return any(it.requirements.intersects(template.requirements) and it.compatible_offerings(template.requirements)
               for it in template.instance_types)


async def build_scheduler(
    snapshot: ClusterSnapshot,
    provider: CloudProvider,
    instance_types: dict[str, list[InstanceType]] | None = None,
    *,
    preference_policy: str = "Respect",
    min_values_policy: str = "Strict",
    sizing: bool = True,
    nominated: Mapping[str, str] | None = None,
) -> tuple[Scheduler, list[NodePoolTemplate]]:
    """Build a :class:`Scheduler` for ``snapshot``: Ready NodePools (:func:`ready_nodepools`, weight
    order) with their instance types, existing nodes and in-flight NodeClaims, DaemonSets, and
    NodePool usage; new NodeClaims sized by cost (``sizing``; False: Karpenter's sizes, the
    largest type fills first). ``instance_types`` (NodePool name -> types), when given, is used
    and filled in. ``nominated``: pod key -> existing node name, the pods put back on the nodes
    or in-flight NodeClaims an earlier pass planned them on (see :class:`Scheduler`).

    Raises:
        CloudProviderError: the provider failed to list instance types.
        ValueError: a NodePool, node or pod in the snapshot cannot be parsed.
    """
    templates: list[NodePoolTemplate] = []
    ready, unready = ready_nodepools(snapshot)
    for pool in ready:
        name = pool.name
        if instance_types is not None and name in instance_types:
            types = instance_types[name]
        else:
            types = await provider.get_instance_types(pool.model)
            if instance_types is not None:
                instance_types[name] = types
        templates.append(template_from_nodepool(pool.raw, types))
    startup = {t.name: t.startup_taints for t in templates}
    bound, requested = bound_pods_and_requests(snapshot)
    scheduler = Scheduler(
        templates,
        existing_nodes(snapshot, startup, requested),
        daemonset_pod_infos(snapshot.daemonsets),
        nodepool_usage(snapshot),
        bound_pods=bound,
        preference_policy=preference_policy,
        min_values_policy=min_values_policy,
        unready=unready,
        unserved=snapshot.unserved_nodepools,
        sizing=sizing,
        nominated=nominated,
    )
    return scheduler, templates


def planned_nodeclaim(plan: PlannedNodeClaim, nodepool: NodePoolView | None = None) -> NodeClaim:
    """The typed ``karpenter.sh/v1`` NodeClaim for a planned node (to be created), built from its
    NodePool's validated template as Karpenter's ``NodeClaimTemplate.ToNodeClaim`` does
    (``pkg/controllers/provisioning/scheduling/nodeclaimtemplate.go``): ``generateName``
    ``<nodepool>-``; the template's labels plus ``karpenter.sh/nodepool`` and the NodeClass label;
    its annotations plus the NodePool hash and hash version (and karpy's min-values-relaxed and
    nominated-pods annotations); an owner reference to the NodePool (``blockOwnerDeletion``); the
    template's spec (taints, startup taints, ``expireAfter``, ``terminationGracePeriod``,
    ``nodeClassRef``) with the plan's requirements and requests (quantities).

    Args:
        plan: the planned node.
        nodepool: the view of the plan's NodePool (its template, hash and uid are copied onto the
            claim); without it, the view of the NodePool dict the plan's template was built from.

    Raises:
        pydantic.ValidationError: the NodePool does not validate (a ``ValueError``; the snapshot's
            NodePools always do: an invalid one plans nothing).
    """
    pool = nodepool if nodepool is not None else NodePoolView.of(plan.template.raw)
    model = pool.model
    template = model.spec.template
    labels = {**template.metadata.labels, LABEL_NODEPOOL: plan.nodepool}
    ref = template.spec.node_class_ref
    labels[nodeclass_label_key(ref.group, ref.kind)] = ref.name
    annotations = {**template.metadata.annotations,
                   ANNOTATION_NODEPOOL_HASH: pool.hash, ANNOTATION_NODEPOOL_HASH_VERSION: HASH_VERSION}
    if plan.min_values_relaxed:
        annotations[ANNOTATION_MIN_VALUES_RELAXED] = "true"
    if plan.pods:  # the pod nominations, for a successor (state/nominations.py recorded_targets)
        annotations[ANNOTATION_NOMINATED_PODS] = ",".join(sorted({p.key for p in plan.pods}))
    owner = OwnerReference(api_version=NodePool.API_VERSION, kind=NodePool.KIND, name=plan.nodepool,
                           uid=model.metadata.uid or "", block_owner_deletion=True)
    return NodeClaim(
        metadata=ObjectMeta(generate_name=f"{plan.nodepool}-", labels=labels, annotations=annotations, owner_references=[owner]),
        spec=NodeClaimSpec(
            requirements=[_requirement(r) for r in plan.spec_requirements()],
            resources=ResourceRequests(requests=format_resource_list(plan.requests)),
            node_class_ref=ref.model_copy(),
            taints=[t.model_copy() for t in template.spec.taints],
            startup_taints=[t.model_copy() for t in template.spec.startup_taints],
            expire_after=template.spec.expire_after,
            termination_grace_period=template.spec.termination_grace_period,
        ),
    )


def _requirement(selector: Mapping[str, Any]) -> NodeSelectorRequirementWithMinValues:
    """One of :meth:`PlannedNodeClaim.spec_requirements`' node-selector dicts as the typed
    requirement, not validated again (``model_construct``): its key and values come from the
    NodePool model and the catalog, and checking each of ~600 instance-type values per claim
    cost ~4 ms; the API server's CRD schema checks them on create."""
    fields_ = {"key": selector["key"], "operator": selector["operator"]}
    if "values" in selector:
        fields_["values"] = list(selector["values"])
    if selector.get("minValues") is not None:
        fields_["min_values"] = selector["minValues"]
    return NodeSelectorRequirementWithMinValues.model_construct(**fields_)


def nodeclaim_from_plan(plan: PlannedNodeClaim, nodepool: NodePoolView | None = None) -> dict[str, Any]:
    """:func:`planned_nodeclaim` serialised for the API (:func:`~karpy_core.apis.base.to_kube_dict`:
    camelCase, ``None`` and empty lists omitted as Go's ``omitempty``), the one place the typed
    NodeClaim becomes a dict.

    Raises:
        pydantic.ValidationError: as :func:`planned_nodeclaim`.
    """
    obj = to_kube_dict(planned_nodeclaim(plan, nodepool))
    obj.pop("status", None)  # created without one: the status is a subresource its controllers write
    for owner in obj["metadata"]["ownerReferences"]:
        if not owner["uid"]:  # a NodePool not read from an API server (a test's dict) has none
            del owner["uid"]
    return obj


class Provisioner:
    """Turns pending pods into NodeClaims.

    Args:
        kube: the cluster.
        provider: the active cloud provider (for instance types).
        nominations: where to record the nodes chosen for pending pods (shared with the
            disruption controller); a private one when not given.
        clock: time source for the nominations (real by default).
        sync: the synced-before-acting gate (:class:`~karpy_core.state.synced.ClusterSync`); by
            default one over ``kube`` (always open for a client that is never behind).
    """

    name = "provisioner"

    def __init__(
        self, *, kube: KubeClient, provider: CloudProvider, preference_policy: str = "Respect", min_values_policy: str = "Strict",
        nominations: Nominations | None = None, clock: Clock | None = None, capacity_buffers: bool = False,
        sync: ClusterSync | None = None,
    ):
        self.kube = kube
        self.sync = sync if sync is not None else ClusterSync(kube)
        self.provider = provider
        self.preference_policy = preference_policy
        self.min_values_policy = min_values_policy
        self.nominations = nominations if nominations is not None else Nominations()
        self.clock = clock or RealClock()
        self.capacity_buffers = capacity_buffers
        self.sizing = True
        """Size new NodeClaims by cost (:mod:`karpy_core.scheduling.sizing`); False plans as
        Karpenter does (for side-by-side comparisons in tests and benchmarks)."""
        """The ``CapacityBuffer`` gate: schedule the ready buffers' virtual pods with the pending ones."""
        self.last: ProvisioningResult = ProvisioningResult()
        self.dry_run = False
        """``karpy controller --dry-run``: decide as usual, create nothing. Each NodeClaim the pass
        would create is logged (``dry run: would launch nodeclaim``, at info level when the set of
        would-be claims changed since the last pass, else debug) and returned in
        :attr:`ProvisioningResult.would_launch`; nothing is nominated to it, so the next pass
        plans the same pending pods afresh on the same live state."""
        self._would: tuple[str, ...] = ()
        self._deferred: dict[str, int] = {}
        """Pods the last pass left for the next batch (:func:`remainder_claims`) -> passes in a row
        that left them over (at most :data:`REMAINDER_PASSES`)."""

    async def reconcile(self, *, streaming: bool = False) -> ProvisioningResult:
        """One pass. Returns the decision and the NodeClaims created (empty when nothing is pending).

        ``streaming``: the batch closed while pods were still arriving (its window was cut at the
        batch's maximum, :attr:`Batcher.cut`); then the plan's small remainder NodeClaims are not
        created and their pods wait for the next batch (:func:`remainder_claims`).

        Nothing is decided on a view that is not synced (``synced=False`` in the result, the reason
        logged): Karpenter ``provisioner.go`` ``Schedule`` waits on ``cluster.Synced`` too. The
        gate is checked again before each create, so a pass that lost its lease meanwhile stops."""
        if not self.sync.ready(self.name):
            self.last = ProvisioningResult(synced=False)
            return self.last
        snapshot = await collect_snapshot(self.kube, managed=self.provider.managed_node_classes(), buffers=self.capacity_buffers,
                                          provider_name=self.provider.name)
        pending = snapshot.pending_pod_views()
        result = ProvisioningResult(pending=len(pending))
        virtual = list(snapshot.virtual_pod_views)
        waiting = {p.key for p in [*pending, *virtual]}
        planned = self.nominations.pod_targets(waiting)
        if not pending and not virtual:
            self.last = result
            return result
        in_flight = in_flight_targets(snapshot)
        recorded = {pod: claim for pod, claim in recorded_targets(snapshot, waiting).items() if pod not in planned}
        if recorded:  # planned by a predecessor (a restart, a failover): kept where they were planned
            self.nominations.nominate_pods(recorded)
            planned.update(recorded)
        claim_node = {claim: node for node, claim in in_flight.items()}
        nominated = {pod: claim_node[claim] for pod, claim in planned.items() if claim in claim_node}
        pending = [*pending, *virtual]
        pods: list[PodInfo] = []
        bad: dict[str, str] = {}
        for p in pending:
            try:
                info = p.info
                terms, why = volume_terms(p.raw, snapshot.pvcs, snapshot.pvs, snapshot.storage_classes)
                if terms or why:  # the view's PodInfo is shared: narrow a copy
                    info = copy.copy(info)
                pods.append(apply_volume_requirements(info, terms, why))
            except (QuantityError, ValueError) as exc:
                bad[p.key] = f"invalid pod: {exc}"
        scheduler, templates = await build_scheduler(
            snapshot, self.provider, preference_policy=self.preference_policy, min_values_policy=self.min_values_policy,
            sizing=self.sizing, nominated=nominated,
        )
        result.no_instance_types = [t.raw for t in templates if not has_compatible_instance_type(t)]
        started = time.perf_counter()
        results = scheduler.solve(pods)
        real = {p.key for p in pods} - {v.key for v in virtual}
        expired = frozenset(p for p, n in self._deferred.items() if n >= REMAINDER_PASSES)
        held = remainder_claims(results.new_claims, real, expired, frozenset(self._deferred).difference(expired)) \
            if streaming else set()
        if held:
            result.deferred = sorted(p.key for i in held for p in results.new_claims[i].pods)
            results.new_claims = [c for i, c in enumerate(results.new_claims) if i not in held]
            log.info("deferred remainder nodeclaim(s) to the next batch", extra={"nodeclaims": len(held), "pods": len(result.deferred)})
        self._deferred = {p: self._deferred.get(p, 0) + 1 for p in result.deferred}
        _log_decision(results, pods, time.perf_counter() - started, in_flight)
        results.errors.update(bad)
        result.results = results
        result.scheduler = scheduler
        result.pods = {p.key: p for p in pods}
        if virtual:
            result.buffers = _split_virtual(results, result.pods, {v.key: v for v in virtual})
            await self._patch_buffer_conditions(result.buffers)
        self.nominations.nominate(sorted(set(results.existing.values())), self.clock.now())
        self.nominations.nominate_pods({pod: in_flight[node] for pod, node in results.existing.items() if node in in_flight})
        if self.dry_run:
            self._log_would_launch(result, [(plan, nodeclaim_from_plan(plan, snapshot.nodepool(plan.nodepool)))
                                            for plan in results.new_claims])
            self.last = result
            return result
        for plan in results.new_claims:
            if not self.sync.ready(self.name):
                result.synced = False
                break
            created = await self.kube.create("NodeClaim", nodeclaim_from_plan(plan, snapshot.nodepool(plan.nodepool)))
            log.info("created nodeclaim", extra=fields(  # Karpenter's line and keys (provisioning/provisioner.go)
                nodeclaim=created, nodepool=plan.nodepool, requests=field_of(created, "spec", "resources", "requests"),
                **{"instance-types": pretty_list([it.name for it in plan.instance_types])}))
            result.created.append(created)
            self.nominations.nominate([created["metadata"]["name"]], self.clock.now())
            self.nominations.nominate_pods({p.key: created["metadata"]["name"] for p in plan.pods})
        self.last = result
        return result

    def _log_would_launch(self, result: ProvisioningResult, claims: list[tuple[PlannedNodeClaim, dict[str, Any]]]) -> None:
        """Dry run: record and log the NodeClaims this pass would create (see :attr:`dry_run`)."""
        signature = tuple(sorted(f"{plan.nodepool}:{','.join(it.name for it in plan.instance_types[:5])}:"
                                 f"{','.join(sorted(p.key for p in plan.pods))}" for plan, _ in claims))
        level = logging.INFO if signature != self._would else logging.DEBUG
        self._would = signature
        for plan, obj in claims:
            obj["metadata"]["name"] = f"{obj['metadata']['generateName']}dry-run"
            result.would_launch.append((plan, obj))
            pods = sorted(p.key for p in plan.pods if p.key in result.pods)
            more: dict[str, Any] = {"instance-types": pretty_list([it.name for it in plan.instance_types]),
                                    "price": round(plan.cheapest_offering_price(), 6), "pods": pretty_list(pods),
                                    "pod-count": len(pods), "dryRun": True}
            log.log(level, "dry run: would launch nodeclaim", extra=fields(  # the fields of "created nodeclaim"
                nodepool=plan.nodepool, requests=obj["spec"]["resources"]["requests"], **more))

    async def _patch_buffer_conditions(self, placements: dict[str, BufferPlacement]) -> None:
        """Each CapacityBuffer's ``Provisioning`` condition from this pass (where it changes)."""
        try:
            buffers = await self.kube.list("CapacityBuffer")
        except KubeAPIError:
            return
        by_key = {f"{(b['metadata'].get('namespace') or 'default')}/{b['metadata']['name']}": b for b in buffers}
        for key, conds in provisioning_conditions(buffers, placements, self.clock.now()).items():
            meta = by_key[key]["metadata"]
            try:
                await self.kube.patch("CapacityBuffer", meta["name"], {"status": {"conditions": conds}}, meta.get("namespace"),
                                      status=True)
            except NotFoundError:
                pass


REMAINDER_PASSES = 3
"""Streaming passes in a row that may leave the same pod over (:func:`remainder_claims`); the next
one plans it: a pod waits at most this many batch windows more than it would have. Three: a
5,000-pod stream's start on a busy control plane made three small batches (39, 68 and 156 pods)
before one of 480 filled a ``c-256x``; with two, the first pods were planned exactly at the
third (a ``c-128x`` and a ``c-32x``, two NodeClaims more than full-size ones)."""


def remainder_claims(claims: Sequence[PlannedNodeClaim], real: set[str], deferred: frozenset[str] = frozenset(),
                     again: frozenset[str] = frozenset()) -> set[int]:
    """Which of a pass's planned NodeClaims (indices into ``claims``) to leave for the next batch
    when the batch closed while pods were still arriving: per NodePool, its *remainder*, the claims
    that are not full-size - smaller (cheapest instance type's vCPUs) than the NodePool's largest
    claim of the pass, or with a larger instance type among their options that holds more of their
    pods per USD (:func:`grows_at_same_rate`: a ``c-48x`` with 47 pods where a ``c-256x`` holds 255
    at the same price per cpu; only claims whose pods share nodes freely: no topology spread, pod
    (anti-)affinity or host port) - the remainder an exact fit of the batch ends in (issue 36: 255 +
    255 + 31 + 3 + 1 pods, the last three on a 32-, a 4- and a 2-cpu node, full, so the next
    batch's pods cannot join them and open their own remainder; and a stream's first batches,
    47, 63 and 127 pods on a ``c-48x``, a ``c-64x`` and a ``c-128x``, each full) - provided they
    hold fewer pods than the NodePool's fullest full-size claim (less than one such node's worth: a
    larger remainder gets its nodes now; a pass with no full-size claim, a stream's start, leaves
    its whole remainder over), only pods of ``real`` (no CapacityBuffer virtual pod) and no pod of
    ``deferred`` (pods left over :data:`REMAINDER_PASSES` times already). Their pods join the next
    batch, planned with it, so each stream of pods ends in one remainder instead of one per batch,
    and starts on full-size claims; what it costs is their wait for the next batches (at most
    :data:`REMAINDER_PASSES` windows of the batch's maximum, 10 s by default).

    A pod of ``deferred`` planned on a remainder claim is first swapped with an interchangeable
    pod (equal :meth:`~karpy_core.scheduling.pod.PodInfo.signature`: same requests, node
    requirements, tolerations, ports and topology) planned on one of the NodePool's full-size
    claims that was neither deferred nor ``again`` before; then, while such partners are left, the
    pods of ``again`` (left over before, fewer than :data:`REMAINDER_PASSES` times) too: the pods
    earlier batches left over go on the full claims first, and the remainder holds new pods where
    it can. Without the swap, every second batch of a stream of one shape planned its remainder
    exactly (5,000 inflate pods arriving through kube-scheduler at ~50 a second: 29 NodeClaims, 13
    of them 2- to 192-cpu, where Karpenter made 21; ``benchmarks/controller_apiserver.py --catalog
    kwok --pods 5000``). ``claims``' ``pods`` lists are changed in place by the swaps (a pod's
    placement moves to a claim that held an equal pod, so every claim's requests stay the same).

    Karpenter keeps room instead: it fills the largest type while it fits and launches the
    cheapest type holding the rest (a 48-cpu node for the 35 pods, 10 cpus more), and the next
    batch fills the in-flight node (``computed unready node(s) will fit pod(s)``). Deferring keeps
    the exact fit's price and needs no bet on what arrives next. Karpy also fills in-flight room
    (:func:`~karpy_core.state.cluster.existing_nodes`: a launched NodeClaim counts with its
    ``status.allocatable``), but an exact fit leaves none.

    Returns the indices, per NodePool all or none of its remainder."""
    largest: dict[str, int] = {}
    sizes: list[int] = []
    for c in claims:
        cpu = c.instance_types[0].capacity.get("cpu", 0) if c.instance_types else 0
        sizes.append(cpu)
        largest[c.nodepool] = max(largest.get(c.nodepool, 0), cpu)
    full = [sizes[i] == largest[c.nodepool] and not (_packs_freely(c) and grows_at_same_rate(c)) for i, c in enumerate(claims)]
    fullest: dict[str, int] = {}
    for i, c in enumerate(claims):
        if full[i]:
            fullest[c.nodepool] = max(fullest.get(c.nodepool, 0), len(c.pods))
    out: set[int] = set()
    for pool in largest:
        rest = [i for i, c in enumerate(claims) if c.nodepool == pool and not full[i]]
        if rest and all(p.key in real for i in rest for p in claims[i].pods) \
                and (pool not in fullest or sum(len(claims[i].pods) for i in rest) < fullest[pool]) \
                and _swap_deferred_out(claims, rest, [i for i, c in enumerate(claims) if c.nodepool == pool and full[i]],
                                       real, deferred, again):
            out.update(rest)
    return out


def _packs_freely(claim: PlannedNodeClaim) -> bool:
    """No pod of ``claim`` limits how many of its kind share a node (no topology spread, pod
    (anti-)affinity or host port): a larger node would hold more of them. A claim of hostname-spread
    pods is as full as it gets, whatever its size."""
    return not any(p.has_topology or p.host_ports for p in claim.pods)


def grows_at_same_rate(claim: PlannedNodeClaim) -> bool:
    """Whether a larger instance type among ``claim``'s options (more vCPUs than its cheapest,
    ``instance_types[0]``) holds at least as many copies of the claim's requests per USD/hour
    (copies: the fewest over the requested resources of allocatable / request; price: the cheapest
    offering the claim's requirements allow). Such a claim is not full-size: the pods it was sized
    for would fit, with later ones, on fewer nodes at no higher rate (Karpenter's KWOK catalog
    prices every size of a family at the same rate per cpu). False without options or requests."""
    if not claim.instance_types:
        return False
    wanted = {k: v for k, v in claim.requests.items() if v > 0}
    if not wanted:
        return False

    def per_usd(it: InstanceType) -> float:
        offering = it.cheapest(claim.requirements)
        if offering is None or offering.price <= 0:
            return 0.0
        alloc = it.allocatable
        return min(alloc.get(k, 0) / v for k, v in wanted.items()) / offering.price

    base = claim.instance_types[0]
    rate = per_usd(base)
    cpu = base.capacity.get("cpu", 0)
    return rate > 0 and any(it.capacity.get("cpu", 0) > cpu and per_usd(it) >= rate * (1 - 1e-9)
                            for it in claim.instance_types[1:])


def _swap_deferred_out(claims: Sequence[PlannedNodeClaim], rest: list[int], kept: list[int], real: set[str],
                       deferred: frozenset[str], again: frozenset[str] = frozenset()) -> bool:
    """Swap every pod of ``deferred`` on the claims ``rest`` with an interchangeable pod (equal
    signature, of ``real``, neither of ``deferred`` nor of ``again``) on the claims ``kept``, then
    as many pods of ``again`` as partners are left; returns False, and swaps nothing, when some
    pod of ``deferred`` has no such partner (see :func:`remainder_claims`)."""
    stuck = [(i, j) for i in rest for j, p in enumerate(claims[i].pods) if p.key in deferred]
    older = [(i, j) for i in rest for j, p in enumerate(claims[i].pods) if p.key in again and p.key not in deferred]
    if not stuck and not older:
        return True
    partners: dict[tuple[object, ...], list[tuple[int, int]]] = {}
    for i in kept:
        for j, p in enumerate(claims[i].pods):
            if p.key in real and p.key not in deferred and p.key not in again:
                partners.setdefault(p.signature(), []).append((i, j))
    swaps = []
    for i, j in stuck:
        free = partners.get(claims[i].pods[j].signature())
        if not free:
            return False
        swaps.append(((i, j), free.pop()))
    for i, j in older:
        free = partners.get(claims[i].pods[j].signature())
        if free:
            swaps.append(((i, j), free.pop()))
    for (i, j), (k, m) in swaps:
        claims[i].pods[j], claims[k].pods[m] = claims[k].pods[m], claims[i].pods[j]
    return True


def pretty_list(items: Sequence[str], most: int = 5) -> str:
    """The first ``most`` items, comma separated, then `` and N other(s)`` (Karpenter's
    ``pretty.Slice`` and ``instanceTypeList``, the form its log lines use)."""
    head = ", ".join(items[:most])
    return head + (f" and {len(items) - most} other(s)" if len(items) > most else "")


def _log_decision(results: SchedulingResults, pods: Sequence[PodInfo], seconds: float, unready: Mapping[str, str]) -> None:
    """Karpenter's two lines for a batch that needs new NodeClaims: ``found provisionable pod(s)``
    (``Pods``: the first five, ``duration``: the solve, as Go prints a duration) and ``computed new
    nodeclaim(s) to fit pod(s)`` (``nodeclaims``, ``pods`` on them); then, when pods go to nodes
    still launching (``unready``: their names), ``computed unready node(s) will fit pod(s)``
    (``nodes``, ``pods``) (``provisioning/provisioner.go``, ``scheduling/scheduler.go``). Virtual
    CapacityBuffer pods are counted as Karpenter counts them."""
    on_new = sum(len(c.pods) for c in results.new_claims)
    if not on_new:
        return
    log.info("found provisionable pod(s)", extra={"Pods": pretty_list([p.key for p in pods]), "duration": f"{seconds * 1000:.3f}ms"})
    log.info("computed new nodeclaim(s) to fit pod(s)", extra={"nodeclaims": len(results.new_claims), "pods": on_new})
    waiting = [node for node in results.existing.values() if node in unready]
    if waiting:
        log.info("computed unready node(s) will fit pod(s)", extra={"nodes": len(set(waiting)), "pods": len(waiting)})


def _split_virtual(results: SchedulingResults, pods: dict[str, PodInfo], virtual: dict[str, PodView]) -> dict[str, BufferPlacement]:
    """Take the virtual pods out of ``results`` and ``pods`` (in place); returns where each
    buffer's went."""
    out: dict[str, BufferPlacement] = {}
    for key, view in virtual.items():
        place = out.setdefault(owner_of(view.annotations), BufferPlacement())
        pods.pop(key, None)
        if key in results.existing:
            place.existing[key] = results.existing.pop(key)
        elif key in results.errors:
            place.failed[key] = results.errors.pop(key)
            results.reasons.pop(key, None)
    for i, plan in enumerate(results.new_claims):
        for p in plan.pods:
            if p.key in virtual:
                out[owner_of(virtual[p.key].annotations)].new[p.key] = i
    return out
