"""Cluster state: a consistent snapshot of the objects decisions are made on, and the
conversions from Kubernetes dicts into the scheduler's value types.

A :class:`ClusterSnapshot` is read once per decision (nodes *before* pods, as Karpenter does so a
pod bound meanwhile is never double counted) and is then only read, never written.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.labels import LABEL_HOSTNAME, LABEL_NODEPOOL, TAINT_UNREGISTERED
from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KubeClient
from karpy_core.scheduling.pod import PodInfo, pod_info
from karpy_core.scheduling.resources import Resources, add_into, parse_resource_list
from karpy_core.scheduling.scheduler import ExistingNode
from karpy_core.scheduling.taints import parse_taints

__all__ = [
    "ClusterSnapshot",
    "collect_snapshot",
    "is_provisionable",
    "condition",
    "is_true",
    "daemonset_pod_infos",
    "existing_nodes",
    "nodepool_usage",
    "bound_pod_infos",
]


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    """The status condition of ``type_``, or None."""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return c
    return None


def is_true(obj: dict[str, Any], type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c.get("status") == "True"


def is_provisionable(pod: dict[str, Any]) -> bool:
    """Karpenter's rule: ``PodScheduled=False`` with reason ``Unschedulable``, no ``nodeName``, not
    terminating or finished, not owned by a DaemonSet or a Node (``pkg/utils/pod``)."""
    meta = pod.get("metadata") or {}
    if (pod.get("spec") or {}).get("nodeName") or meta.get("deletionTimestamp"):
        return False
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return False
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") in ("DaemonSet", "Node"):
            return False
    c = condition(pod, "PodScheduled")
    return c is not None and c.get("status") == "False" and c.get("reason") == "Unschedulable"


@dataclass
class ClusterSnapshot:
    """Plain lists of API dicts, sorted by name, as read at one moment."""

    nodes: list[dict[str, Any]] = field(default_factory=list)
    nodeclaims: list[dict[str, Any]] = field(default_factory=list)
    nodepools: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    daemonsets: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    pvcs: list[dict[str, Any]] = field(default_factory=list)
    pvs: list[dict[str, Any]] = field(default_factory=list)
    storage_classes: list[dict[str, Any]] = field(default_factory=list)

    def pending_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods if is_provisionable(p)]


async def collect_snapshot(kube: KubeClient) -> ClusterSnapshot:
    """Read the objects decisions need, nodes and NodeClaims first."""
    nodes = await kube.list("Node")
    nodeclaims = await kube.list("NodeClaim")
    nodepools = await kube.list("NodePool")
    pods = await kube.list("Pod")
    daemonsets = await kube.list("DaemonSet")
    pdbs = await kube.list("PodDisruptionBudget")
    volumes: dict[str, list[dict[str, Any]]] = {}
    for kind in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"):
        try:
            volumes[kind] = await kube.list(kind)
        except KubeAPIError:  # not permitted or not served: no volume topology
            volumes[kind] = []
    return ClusterSnapshot(nodes, nodeclaims, nodepools, pods, daemonsets, pdbs,
                           volumes["PersistentVolumeClaim"], volumes["PersistentVolume"], volumes["StorageClass"])


def daemonset_pod_infos(daemonsets: Iterable[dict[str, Any]]) -> list[PodInfo]:
    """One :class:`PodInfo` per DaemonSet, from its pod template (owner kind ``DaemonSet``)."""
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
    """Pods bound to a node and not finished (for topology counts and host ports)."""
    out = []
    for p in snapshot.pods:
        if (p.get("spec") or {}).get("nodeName") and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            if p["metadata"].get("deletionTimestamp"):
                continue
            try:
                out.append(pod_info(p))
            except ValueError:
                continue
    return out


def _node_requested(pods: Iterable[dict[str, Any]]) -> dict[str, Resources]:
    by_node: dict[str, Resources] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        add_into(by_node.setdefault(node, {}), pod_info(p).requests)
    return by_node


def existing_nodes(snapshot: ClusterSnapshot, startup_taints: dict[str, tuple[Any, ...]] | None = None) -> list[ExistingNode]:
    """Nodes plus in-flight NodeClaims (no Node yet) as :class:`ExistingNode` values.

    A NodeClaim not launched yet counts with ``spec.resources.requests`` as its allocatable, so the
    pods it was made for are nominated to it instead of causing a second launch.
    ``startup_taints`` maps NodePool name -> its startup taints (ignored while uninitialized).
    """
    requested = _node_requested(snapshot.pods)
    startup_taints = startup_taints or {}
    out: list[ExistingNode] = []
    node_by_pid: dict[str, dict[str, Any]] = {}
    for n in snapshot.nodes:
        if n["metadata"].get("deletionTimestamp"):
            continue
        pid = (n.get("spec") or {}).get("providerID")
        if pid:
            node_by_pid[pid] = n
        labels = dict(n["metadata"].get("labels") or {})
        pool = labels.get(LABEL_NODEPOOL)
        initialized = labels.get("karpenter.sh/initialized") == "true" or pool is None
        taints = parse_taints((n.get("spec") or {}).get("taints"))
        if (n.get("spec") or {}).get("unschedulable"):
            continue
        out.append(
            ExistingNode(
                name=n["metadata"]["name"],
                labels=labels,
                taints=taints,
                allocatable=parse_resource_list((n.get("status") or {}).get("allocatable")),
                requested=requested.get(n["metadata"]["name"], {}),
                nodepool=pool,
                initialized=initialized,
                startup_taints=tuple(startup_taints.get(pool or "", ())),
            )
        )
    for nc in snapshot.nodeclaims:
        meta = nc["metadata"]
        status = nc.get("status") or {}
        if meta.get("deletionTimestamp") or status.get("providerID") in node_by_pid:
            continue
        spec = nc.get("spec") or {}
        labels = dict(meta.get("labels") or {})
        for r in spec.get("requirements") or ():
            if r.get("operator") == "In" and len(r.get("values") or ()) == 1:
                labels.setdefault(r["key"], r["values"][0])
        labels.setdefault(LABEL_HOSTNAME, meta["name"])
        alloc = status.get("allocatable") or (spec.get("resources") or {}).get("requests") or {}
        pool = labels.get(LABEL_NODEPOOL)
        taints = parse_taints(spec.get("taints")) + parse_taints(spec.get("startupTaints"))
        out.append(
            ExistingNode(
                name=meta["name"],
                labels=labels,
                taints=tuple(t for t in taints if t.key != TAINT_UNREGISTERED),
                allocatable=parse_resource_list(alloc),
                requested={},
                nodepool=pool,
                initialized=False,
                startup_taints=parse_taints(spec.get("startupTaints")),
            )
        )
    return out


def nodepool_usage(snapshot: ClusterSnapshot) -> dict[str, Resources]:
    """Per NodePool: summed capacity of its live NodeClaims (requests for un-launched ones) and a
    ``nodes`` count, which ``limits`` are checked against.

    A deleting NodeClaim (``deletionTimestamp`` set, its node draining) is not counted, as in
    Karpenter: ``pkg/controllers/state/cluster.go`` ``updateNodePoolResources`` gives a
    ``MarkedForDeletion`` node no resources, and the provisioner schedules against
    ``nodes.Active()`` only, so a NodePool at its limit may launch while a node drains."""
    usage: dict[str, Resources] = {}
    for nc in snapshot.nodeclaims:
        meta = nc["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        pool = (meta.get("labels") or {}).get(LABEL_NODEPOOL)
        if not pool:
            continue
        status = nc.get("status") or {}
        cap = status.get("capacity") or ((nc.get("spec") or {}).get("resources") or {}).get("requests") or {}
        u = usage.setdefault(pool, {})
        add_into(u, parse_resource_list(cap))
        u["nodes"] = u.get("nodes", 0) + 1
    return usage
