"""Cluster state: a consistent, immutable snapshot of the objects decisions are made on, and the
conversions from it into the scheduler's value types.

A :class:`ClusterSnapshot` is read once per decision (nodes *before* pods, as Karpenter does so a
pod bound meanwhile is never double counted) and is then only read, never written. It holds
:mod:`views <karpy_core.state.views>` of nodes, NodeClaims, NodePools and pods (parsed once per
object version by the informer cache or the in-memory cluster) with lookup indices, plus the API
dicts of the kinds that have no view (DaemonSets, PDBs, volumes).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_NODEPOOL, TAINT_UNREGISTERED
from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KubeClient
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.scheduling.resources import Resources, add_into
from karpy_core.scheduling.scheduler import ExistingNode
from karpy_core.scheduling.taints import Taint
from karpy_core.state.buffers import buffer_ready, virtual_pods_of
from karpy_core.state.views import (
    CapacityBufferView,
    NodeClaimView,
    NodePoolView,
    NodeView,
    ObjectView,
    PodTemplateOwnerView,
    PodView,
    ViewCache,
    build_view,
    is_provisionable,
)

__all__ = [
    "ClusterSnapshot",
    "ViewSource",
    "collect_snapshot",
    "is_provisionable",
    "condition",
    "is_true",
    "daemonset_pod_infos",
    "existing_nodes",
    "nodepool_usage",
    "bound_pod_infos",
    "bound_pods_and_requests",
    "ready_nodepools",
]

log = logging.getLogger(__name__)

Raw = dict[str, Any]
_V = TypeVar("_V", NodeView, PodView, NodeClaimView, NodePoolView)


def condition(obj: Mapping[str, Any], type_: str) -> dict[str, Any] | None:
    """The status condition dict of ``type_`` in an API object dict, or None."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c  # type: ignore[no-any-return]
    return None


def is_true(obj: Mapping[str, Any], type_: str) -> bool:
    """The status condition ``type_`` of an API object dict is ``"True"``."""
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


@runtime_checkable
class ViewSource(Protocol):
    """A client that keeps views of the objects it serves (the informer cache, the in-memory
    cluster): ``views(kind)`` is every object of ``kind`` as views sorted by namespace and name,
    or None when it does not keep ``kind`` (then the snapshot lists and parses it)."""

    def views(self, kind: str) -> Sequence[ObjectView] | None: ...


def _views(items: Iterable[Raw | _V], kind: str, cls: type[_V], cache: ViewCache | None) -> tuple[_V, ...]:
    out: list[_V] = []
    for item in items:
        if isinstance(item, cls):
            out.append(item)
        else:
            view = cache.view(kind, item) if cache is not None else build_view(kind, item)  # type: ignore[arg-type]
            assert isinstance(view, cls)
            out.append(view)
    return tuple(out)


def _index(views: Iterable[_V], key: str) -> Mapping[str, _V]:
    out: dict[str, _V] = {}
    for v in views:
        k = getattr(v, key)
        if k:
            out.setdefault(k, v)
    return MappingProxyType(out)


class ClusterSnapshot:
    """Views of the cluster's objects, sorted by (namespace and) name, as read at one moment.

    Immutable: attributes cannot be set, and the views and dicts it holds must only be read.

    Args:
        nodes, nodeclaims, nodepools, pods: API dicts or views (dicts are turned into views,
            through ``views`` when given so each version is parsed once).
        daemonsets, pdbs, pvcs, pvs, storage_classes: API dicts.
        views: a cache to build views through (optional).
        virtual_pods: CapacityBuffer headroom as pending pod dicts (:mod:`karpy_core.state.buffers`):
            scheduled as if pending, never in ``pods`` (empty unless the CapacityBuffer gate is on).
        unserved: NodePools already left out because the cloud provider does not serve their
            NodeClass kind (:func:`collect_snapshot`): name -> why, for explanations only.

    NodePools that do not validate (:attr:`NodePoolView.error`, what the CRD's validation
    would have refused) are left out with a logged error, once per version: the deciding code
    never sees a half-parsed NodePool, and their nodes count as those of a missing NodePool.

    Attributes:
        node_views, nodeclaim_views, nodepool_views, pod_views: the views, in order (valid
            NodePools only).
        invalid_nodepools: the NodePools left out because they do not validate.
        daemonsets, pdbs, pvcs, pvs, storage_classes: API dicts.
        virtual_pod_views: the CapacityBuffer virtual pods, as views.
        unserved_nodepools: NodePool name -> why the provider does not serve it (not in
            ``nodepool_views``; read by explanations, never by decisions).
    """

    __slots__ = (
        "_claims_by_name",
        "_claims_by_pid",
        "_claims_by_pool",
        "_nodes_by_name",
        "_nodes_by_pid",
        "_pods_by_node",
        "_pools_by_name",
        "daemonsets",
        "invalid_nodepools",
        "node_views",
        "nodeclaim_views",
        "nodepool_views",
        "pdbs",
        "pod_views",
        "pvcs",
        "pvs",
        "storage_classes",
        "unserved_nodepools",
        "virtual_pod_views",
    )  # fmt: skip

    node_views: tuple[NodeView, ...]
    nodeclaim_views: tuple[NodeClaimView, ...]
    nodepool_views: tuple[NodePoolView, ...]
    pod_views: tuple[PodView, ...]
    invalid_nodepools: tuple[NodePoolView, ...]
    daemonsets: tuple[Raw, ...]
    pdbs: tuple[Raw, ...]
    pvcs: tuple[Raw, ...]
    pvs: tuple[Raw, ...]
    storage_classes: tuple[Raw, ...]
    virtual_pod_views: tuple[PodView, ...]
    unserved_nodepools: Mapping[str, str]
    _nodes_by_name: Mapping[str, NodeView]
    _nodes_by_pid: Mapping[str, NodeView]
    _claims_by_name: Mapping[str, NodeClaimView]
    _claims_by_pid: Mapping[str, NodeClaimView]
    _claims_by_pool: Mapping[str, tuple[NodeClaimView, ...]]
    _pools_by_name: Mapping[str, NodePoolView]
    _pods_by_node: Mapping[str, tuple[PodView, ...]]

    def __init__(
        self,
        nodes: Iterable[Raw | NodeView] = (),
        nodeclaims: Iterable[Raw | NodeClaimView] = (),
        nodepools: Iterable[Raw | NodePoolView] = (),
        pods: Iterable[Raw | PodView] = (),
        daemonsets: Iterable[Raw] = (),
        pdbs: Iterable[Raw] = (),
        pvcs: Iterable[Raw] = (),
        pvs: Iterable[Raw] = (),
        storage_classes: Iterable[Raw] = (),
        *,
        views: ViewCache | None = None,
        virtual_pods: Iterable[Raw] = (),
        unserved: Mapping[str, str] | None = None,
    ) -> None:
        set_ = object.__setattr__
        node_views = _views(nodes, "Node", NodeView, views)
        claim_views = _views(nodeclaims, "NodeClaim", NodeClaimView, views)
        all_pools = _views(nodepools, "NodePool", NodePoolView, views)
        pool_views = tuple(v for v in all_pools if v.valid)
        invalid = tuple(v for v in all_pools if not v.valid)
        for bad in invalid:
            bad.log_invalid()
        pod_views = _views(pods, "Pod", PodView, views)
        set_(self, "node_views", node_views)
        set_(self, "nodeclaim_views", claim_views)
        set_(self, "nodepool_views", pool_views)
        set_(self, "pod_views", pod_views)
        set_(self, "invalid_nodepools", invalid)
        set_(self, "daemonsets", tuple(daemonsets))
        set_(self, "pdbs", tuple(pdbs))
        set_(self, "pvcs", tuple(pvcs))
        set_(self, "pvs", tuple(pvs))
        set_(self, "storage_classes", tuple(storage_classes))
        set_(self, "virtual_pod_views", tuple(PodView.of(p) for p in virtual_pods))
        set_(self, "unserved_nodepools", MappingProxyType(dict(unserved or {})))
        set_(self, "_nodes_by_name", _index(node_views, "name"))
        set_(self, "_nodes_by_pid", _index(node_views, "provider_id"))
        set_(self, "_claims_by_name", _index(claim_views, "name"))
        set_(self, "_claims_by_pid", _index(claim_views, "provider_id"))
        set_(self, "_pools_by_name", _index(pool_views, "name"))
        by_pool: dict[str, list[NodeClaimView]] = {}
        for c in claim_views:
            if c.nodepool:
                by_pool.setdefault(c.nodepool, []).append(c)
        set_(self, "_claims_by_pool", MappingProxyType({k: tuple(v) for k, v in by_pool.items()}))
        by_node: dict[str, list[PodView]] = {}
        for p in pod_views:
            if p.node_name:
                by_node.setdefault(p.node_name, []).append(p)
        set_(self, "_pods_by_node", MappingProxyType({k: tuple(v) for k, v in by_node.items()}))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ClusterSnapshot is immutable (cannot set {name})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ClusterSnapshot is immutable (cannot delete {name})")

    def __repr__(self) -> str:
        return (f"ClusterSnapshot(nodes={len(self.node_views)}, nodeclaims={len(self.nodeclaim_views)}, "
                f"nodepools={len(self.nodepool_views)}, pods={len(self.pod_views)})")

    # ---- lookups ----------------------------------------------------------------------------
    def node(self, name: str) -> NodeView | None:
        """The Node named ``name``, or None."""
        return self._nodes_by_name.get(name)

    def node_by_provider_id(self, provider_id: str) -> NodeView | None:
        """The Node with ``spec.providerID == provider_id``, or None."""
        return self._nodes_by_pid.get(provider_id) if provider_id else None

    def nodeclaim(self, name: str) -> NodeClaimView | None:
        """The NodeClaim named ``name``, or None."""
        return self._claims_by_name.get(name)

    def nodeclaim_by_provider_id(self, provider_id: str) -> NodeClaimView | None:
        """The NodeClaim with ``status.providerID == provider_id``, or None."""
        return self._claims_by_pid.get(provider_id) if provider_id else None

    def nodeclaims_of(self, nodepool: str) -> tuple[NodeClaimView, ...]:
        """The NodeClaims labelled with NodePool ``nodepool`` (deleting ones included)."""
        return self._claims_by_pool.get(nodepool, ())

    def nodepool(self, name: str) -> NodePoolView | None:
        """The NodePool named ``name``, or None."""
        return self._pools_by_name.get(name)

    def pods_on(self, node_name: str) -> tuple[PodView, ...]:
        """The pods whose ``spec.nodeName`` is ``node_name`` (finished and deleting ones included)."""
        return self._pods_by_node.get(node_name, ())

    def pending_pod_views(self) -> list[PodView]:
        """The provisionable pods (:func:`~karpy_core.state.views.is_provisionable`)."""
        return [p for p in self.pod_views if p.provisionable]


def is_managed(nodepool: NodePoolView, managed: Collection[tuple[str, str]] | None) -> bool:
    """Whether karpy's loaded provider manages ``nodepool``: its ``nodeClassRef`` ``(group, kind)``
    is one the provider supports (``managed``, from ``supported_node_classes``; None: every
    NodePool). Karpenter's ``nodepoolutils.IsManaged``: other NodePools are ignored by
    provisioning, disruption and NodePool status alike (another controller's, for another cloud)."""
    if managed is None:
        return True
    group, kind = nodepool.node_class_ref
    if not group:  # a hand-written dict without the group (the API requires one): match the kind
        return any(k == kind for _, k in managed)
    return (group, kind) in managed


def unserved_reason(ref: tuple[str, str], managed: Collection[tuple[str, str]], provider: str = "") -> str:
    """Why a NodePool whose ``nodeClassRef`` is ``ref`` (``(group, kind)``) is left out: its
    NodeClass kind is not among ``managed`` (the provider's supported ``(group, kind)`` pairs),
    e.g. ``its NodeClass kind EC2NodeClass (karpenter.k8s.aws) is not served by cloud provider
    acme, which serves AcmeNodeClass (acme.example.com)``. ``provider``: its name, when known."""
    group, kind = ref
    served = ", ".join(f"{k} ({g})" for g, k in sorted(managed, key=lambda gk: (gk[1], gk[0]))) or "none"
    who = f"cloud provider {provider}" if provider else "the cloud provider"
    return f"its NodeClass kind {kind} ({group or 'no group'}) is not served by {who}, which serves {served}"


async def collect_snapshot(kube: KubeClient, views: ViewCache | None = None,
                           managed: Collection[tuple[str, str]] | None = None, *, buffers: bool = False,
                           provider_name: str = "") -> ClusterSnapshot:
    """Read the objects decisions need, nodes and NodeClaims first.

    ``managed`` (the provider's ``(group, kind)`` NodeClass kinds) leaves out the NodePools whose
    NodeClass the provider does not support (:func:`is_managed`); their NodeClaims stay, and
    without their NodePool they are neither candidates nor counted in any managed NodePool.
    Why each was left out (:func:`unserved_reason`, naming ``provider_name``) is kept in
    :attr:`ClusterSnapshot.unserved_nodepools` for explanations.

    Nodes, NodeClaims, NodePools and pods come as views from ``kube`` when it keeps them (a
    :class:`ViewSource`: the informer cache, the in-memory cluster); otherwise they are listed
    and parsed (through ``views`` when given). Volumes that are not permitted or not served are
    left empty. With ``buffers`` (the CapacityBuffer gate), the ready CapacityBuffers' virtual
    pods are built (:func:`karpy_core.state.buffers.virtual_pods_of`); none when the kind is not
    served or not permitted.

    Raises:
        KubeAPIError: a list failed (other than of the volume kinds).
    """
    source = kube if isinstance(kube, ViewSource) else None

    async def read(kind: str) -> Sequence[Raw | ObjectView]:
        if source is not None:
            found = source.views(kind)
            if found is not None:
                return found
        return await kube.list(kind)

    nodes = await read("Node")
    nodeclaims = await read("NodeClaim")
    nodepools = await read("NodePool")
    unserved: dict[str, str] = {}
    if managed is not None:
        pools = _views(cast("Sequence[Raw | NodePoolView]", nodepools), "NodePool", NodePoolView, views)
        nodepools = [p for p in pools if not p.valid or is_managed(p, managed)]
        unserved = {p.name: unserved_reason(p.node_class_ref, managed, provider_name)
                    for p in pools if p.valid and not is_managed(p, managed)}
    pods = await read("Pod")
    daemonsets = await kube.list("DaemonSet")
    pdbs = await kube.list("PodDisruptionBudget")
    volumes: dict[str, list[Raw]] = {}
    for kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
        try:
            volumes[kind] = await kube.list(kind)
        except KubeAPIError:  # not permitted or not served: no volume topology
            volumes[kind] = []
    virtual = await buffer_pods(kube) if buffers else []
    return ClusterSnapshot(
        nodes,  # type: ignore[arg-type]
        nodeclaims,  # type: ignore[arg-type]
        nodepools,  # type: ignore[arg-type]
        pods,  # type: ignore[arg-type]
        daemonsets,
        pdbs,
        volumes["PersistentVolumeClaim"],
        volumes["PersistentVolume"],
        volumes["StorageClass"],
        views=views,
        virtual_pods=virtual,
        unserved=unserved,
    )


def with_virtual_pods(snapshot: ClusterSnapshot, virtual_pods: Iterable[Raw]) -> ClusterSnapshot:
    """``snapshot`` with ``virtual_pods`` (CapacityBuffer headroom) in place of its own; the views
    are shared, nothing is parsed again."""
    return ClusterSnapshot(snapshot.node_views, snapshot.nodeclaim_views, snapshot.nodepool_views, snapshot.pod_views,
                           snapshot.daemonsets, snapshot.pdbs, snapshot.pvcs, snapshot.pvs, snapshot.storage_classes,
                           virtual_pods=virtual_pods, unserved=snapshot.unserved_nodepools)


async def read_pod_template_owners(kube: KubeClient, kind: str) -> list[PodTemplateOwnerView]:
    """Every ``kind`` object (PodTemplate, Deployment, ReplicaSet, StatefulSet) as a
    :class:`~karpy_core.state.views.PodTemplateOwnerView`.

    Raises:
        KubeAPIError: the list failed.
    """
    return [PodTemplateOwnerView.of(o, kind) for o in await kube.list(kind)]


async def buffer_pods(kube: KubeClient) -> list[Raw]:
    """The virtual pods of the ready CapacityBuffers; PodTemplates and the workload kinds the
    buffers name are listed only when needed."""
    try:
        found = [b for b in map(CapacityBufferView.of, await kube.list("CapacityBuffer")) if buffer_ready(b)]
        if not found:
            return []
        templates = await read_pod_template_owners(kube, "PodTemplate") if any(b.pod_template_ref for b in found) else []
        kinds = {b.scalable_ref[0] for b in found if b.scalable_ref is not None}
        workloads: dict[str, list[PodTemplateOwnerView]] = {}
        for kind in ("Deployment", "ReplicaSet", "StatefulSet"):  # SCALABLE_KINDS, spelled out for the RBAC check
            workloads[kind] = await read_pod_template_owners(kube, kind) if kind in kinds else []
    except KubeAPIError:  # the CRD not installed, or not permitted: no headroom
        return []
    return virtual_pods_of(found, templates, workloads)


def ready_nodepools(snapshot: ClusterSnapshot) -> tuple[list[NodePoolView], dict[str, str]]:
    """Which NodePools may launch nodes: the one place this is decided.

    A NodePool is Ready when its ``Ready`` condition is ``True`` or it has no conditions at all
    (the simulator, a freshly applied pool: it would be once its NodeClass resolves); an explicit
    ``Ready`` that is not ``True`` excludes it, and so does a deletion timestamp. Static pools
    (``spec.replicas``) never launch for pending pods, whatever the StaticCapacity gate (Karpenter
    ``provisioner.go`` ``NewScheduler`` filters them): the static capacity controller
    (:mod:`karpy_core.controllers.static`) keeps their node count.

    Returns:
        (the Ready dynamic NodePools in snapshot order, NodePool name -> why it is not Ready for
        the dynamic ones excluded by their condition; deleting and static pools are in neither).
    """
    ready: list[NodePoolView] = []
    unready: dict[str, str] = {}
    for pool in snapshot.nodepool_views:
        if pool.static:
            continue
        if pool.ready:
            ready.append(pool)
        elif not pool.deleting:
            unready[pool.name] = pool.unready_reason
    return ready, unready


def daemonset_pod_infos(daemonsets: Iterable[Mapping[str, Any]]) -> list[PodInfo]:
    """One :class:`PodInfo` per DaemonSet, from its pod template (owner kind ``DaemonSet``).

    Raises:
        ValueError: a template cannot be parsed (a malformed quantity or selector).
    """
    out = []
    for ds in daemonsets:
        meta = ds.get("metadata") or {}
        tmpl = (ds.get("spec") or {}).get("template") or {}
        pod = {
            "metadata": {
                "name": meta.get("name", ""),
                "namespace": meta.get("namespace", "default"),
                "labels": (tmpl.get("metadata") or {}).get("labels") or {},
                "ownerReferences": [{"kind": "DaemonSet", "name": meta.get("name", ""), "controller": True}],
            },
            "spec": tmpl.get("spec") or {},
        }
        out.append(pod_info(pod))
    return out


def bound_pod_infos(snapshot: ClusterSnapshot) -> list[PodInfo]:
    """Pods bound to a node, not finished and not deleting (for topology counts and host ports),
    each parsed once per version; a pod that cannot be parsed is left out with a log."""
    out = []
    for p in snapshot.pod_views:
        if p.bound and not p.deleting:
            info = p.try_info()
            if info is not None:
                out.append(info)
    return out


def bound_pods_and_requests(snapshot: ClusterSnapshot) -> tuple[list[PodInfo], dict[str, Resources]]:
    """(:func:`bound_pod_infos`, node name -> summed requests as :func:`existing_nodes` counts
    them) in one walk over the pods: a pass that needs both parses and visits each pod once (at
    5,000 nodes and 72,000 pods the second walk was a tenth of a consolidation pass)."""
    bound: list[PodInfo] = []
    by_node: dict[str, Resources] = {}
    for p in snapshot.pod_views:
        if not p.bound:
            continue
        info = p.try_info()
        if info is None:
            continue
        total = by_node.get(p.node_name)
        if total is None:
            total = by_node[p.node_name] = {}
        for name, amount in info.requests.items():  # add_into, inlined: once per bound pod
            total[name] = total.get(name, 0) + amount
        if not p.deleting:
            bound.append(info)
    return bound, by_node


def _node_requested(snapshot: ClusterSnapshot) -> dict[str, Resources]:
    """Node name -> summed requests of the pods bound to it and not finished (deleting ones
    included: they still hold their resources); a pod that cannot be parsed is left out with a
    log, as :func:`bound_pod_infos` does."""
    by_node: dict[str, Resources] = {}
    for p in snapshot.pod_views:
        if not p.bound:
            continue
        info = p.try_info()
        if info is not None:
            add_into(by_node.setdefault(p.node_name, {}), info.requests)
    return by_node


def existing_nodes(snapshot: ClusterSnapshot, startup_taints: Mapping[str, Sequence[Taint]] | None = None,
                   requested: Mapping[str, Resources] | None = None) -> list[ExistingNode]:
    """Nodes plus in-flight NodeClaims (no Node yet) as :class:`ExistingNode` values.

    A NodeClaim not launched yet counts with ``spec.resources.requests`` as its allocatable, so the
    pods it was made for are nominated to it instead of causing a second launch.
    ``startup_taints`` maps NodePool name -> its startup taints (ignored while uninitialized).
    ``requested``: node name -> summed requests of its pods, when the caller has them
    (:func:`bound_pods_and_requests`); else they are summed here. Resources are in internal units
    (millicores, bytes, counts).

    Raises:
        karpy_core.utils.quantity.QuantityError: a node's or claim's quantity is malformed.
    """
    requested = _node_requested(snapshot) if requested is None else requested
    startup_taints = startup_taints or {}
    out: list[ExistingNode] = []
    live_pids: set[str] = set()
    for n in snapshot.node_views:
        if n.deleting:
            continue
        if n.provider_id:
            live_pids.add(n.provider_id)
        if n.unschedulable:
            continue
        out.append(
            ExistingNode(
                name=n.name,
                labels=dict(n.labels),
                taints=n.scheduling_taints,  # not Ready: the node lifecycle controller's taint
                allocatable=dict(n.allocatable),
                requested=requested.get(n.name, {}),
                nodepool=n.nodepool,
                initialized=n.initialized,
                startup_taints=tuple(startup_taints.get(n.nodepool or "", ())),
            )
        )
    for nc in snapshot.nodeclaim_views:
        if nc.deleting or (nc.provider_id and nc.provider_id in live_pids):
            continue
        labels = dict(nc.labels)
        for r in nc.requirements:
            values: Sequence[Any] = r.get("values") or ()
            if r.get("operator") == "In" and len(values) == 1:
                labels.setdefault(r["key"], values[0])
        labels.setdefault(LABEL_HOSTNAME, nc.name)
        taints = nc.taints + nc.startup_taints
        out.append(
            ExistingNode(
                name=nc.name,
                labels=labels,
                taints=tuple(t for t in taints if t.key != TAINT_UNREGISTERED),
                allocatable=dict(nc.allocatable),
                requested={},
                nodepool=labels.get(LABEL_NODEPOOL),
                initialized=False,
                startup_taints=nc.startup_taints,
            )
        )
    return out


def nodepool_usage(snapshot: ClusterSnapshot) -> dict[str, Resources]:
    """Per NodePool: summed capacity of its live NodeClaims (requests for un-launched ones) and a
    ``nodes`` count, which ``limits`` are checked against.

    A deleting NodeClaim (``deletionTimestamp`` set, its node draining) is not counted, as in
    Karpenter: ``pkg/controllers/state/cluster.go`` ``updateNodePoolResources`` gives a
    ``MarkedForDeletion`` node no resources, and the provisioner schedules against
    ``nodes.Active()`` only, so a NodePool at its limit may launch while a node drains.

    Raises:
        karpy_core.utils.quantity.QuantityError: a claim's quantity is malformed.
    """
    usage: dict[str, Resources] = {}
    for nc in snapshot.nodeclaim_views:
        if nc.deleting or not nc.nodepool:
            continue
        u = usage.setdefault(nc.nodepool, {})
        add_into(u, nc.capacity)
        u["nodes"] = u.get("nodes", 0) + 1
    return usage
