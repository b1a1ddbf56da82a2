"""Simulated kubelets, DaemonSet controller and kube-scheduler for the in-memory cluster.

These stand in for the parts of a real cluster karpy does not own:

* :class:`KubeletSimulator` - an instance launched by the cloud boots after ``boot_seconds`` and
  registers a Node (named after the NodeClaim, ``spec.providerID`` set, tainted
  ``karpenter.sh/unregistered:NoExecute`` and with its startup taints, Ready). Startup taints are
  removed ``startup_taint_seconds`` after registration, as a CNI agent would. Nodes whose
  instance is gone are deleted.
* DaemonSet pods are created on every node whose taints they tolerate and whose labels their
  node affinity matches (the DaemonSet controller adds the standard ``not-ready``,
  ``unreachable`` and ``unschedulable`` tolerations).
* :class:`KubeSchedulerSimulator` - binds pending pods to nodes that fit them
  (:func:`~karpy_core.scheduling.kubescheduler.kube_schedule`, which the disruption planner
  replays for the pods a consolidation moves: first fit over
  nodes by name, honouring taints, node affinity and free resources; a Node whose ``Ready``
  condition is not ``True`` carries the node lifecycle controller's ``not-ready``/``unreachable``
  taint, :attr:`~karpy_core.state.views.NodeView.scheduling_taints`, as the provisioner sees it; a pod's
  ``status.nominatedNodeName`` first, with the room of the pods nominated to a node held for
  them, as kube-scheduler does) and marks the rest ``PodScheduled=False/Unschedulable``, which
  is what karpy's provisioner watches for; a pod with ``spec.schedulingGates`` left is not tried
  (kube-scheduler's ``SchedulingGates`` PreEnqueue plugin) and keeps its ``SchedulingGated``
  reason. Given ``planned`` (the simulator passes the
  provisioner's pod nominations), a pod without a ``nominatedNodeName`` tries the node of the
  NodeClaim it was planned on first, the same way: that stands in for kube-scheduler's scoring
  (``NodeResourcesFit`` ``LeastAllocated``, ``NodeResourcesBalancedAllocation``), which first fit
  by name does not model. On the real control plane, without any nomination written, pods of six
  drawn shapes ran on as many NodeClaims as were planned for them (5 for 120 pods, 12 for 1,000:
  ``benchmarks/controller_apiserver.py --catalog kwok --mix 6``); first fit by name needed 10 for
  the 5 planned of ``benchmarks/cost.py``'s mix6-120 (issue 36). With ``scoring`` (first fit
  stays the default), the other pods go to the node kube-scheduler's default scores rank highest
  instead of the first by name (:mod:`~karpy_core.scheduling.scoring`); that placement moves
  zone-spread pods as the real control plane did, where consolidations were undone
  (``benchmarks/pipeline_scale_in.py --kube-scoring first``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from karpy_core.apis.labels import LABEL_HOSTNAME, TAINT_UNREGISTERED
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.scheduling.claim import HostPort, ports_conflict
from karpy_core.scheduling.resources import Resources, add_into, exceeding, subtract
from karpy_core.scheduling.taints import Toleration, untolerated
from karpy_core.sim.progress import NO_PROGRESS, Progress, count_pods
from karpy_core.state.cluster import condition, daemonset_pod_infos
from karpy_core.state.views import NodeClaimView, NodeView, PodView
from karpy_core.utils.clock import Clock
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = ["KubeletSimulator", "KubeSchedulerSimulator", "DAEMONSET_TOLERATIONS", "pinned_node", "insufficient_message"]

DAEMONSET_TOLERATIONS = (
    Toleration("node.kubernetes.io/not-ready", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unreachable", "Exists", "", "NoExecute"),
    Toleration("node.kubernetes.io/unschedulable", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/disk-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/memory-pressure", "Exists", "", "NoSchedule"),
    Toleration("node.kubernetes.io/pid-pressure", "Exists", "", "NoSchedule"),
)
"""Tolerations the DaemonSet controller adds to every DaemonSet pod (Kubernetes
``pkg/controller/daemon/util``)."""


def _ts(text: str | None) -> float:
    return parse_rfc3339(text) or 0.0


class KubeletSimulator:
    """Registers Nodes for launched NodeClaims and runs DaemonSet pods on them.

    Args:
        cluster: the in-memory cluster.
        clock: simulation clock.
        boot_seconds: seconds from launch to Node registration (default 30).
        startup_taint_seconds: seconds from registration until startup taints are removed (default 10).
    """

    def __init__(self, cluster: InMemoryCluster, clock: Clock, *, boot_seconds: float = 30.0, startup_taint_seconds: float = 10.0):
        self.cluster = cluster
        self.clock = clock
        self.boot_seconds = boot_seconds
        self.startup_taint_seconds = startup_taint_seconds

    def next_due(self) -> float | None:
        """The earliest future time at which this simulator has something to do, or None."""
        now = self.clock.now()
        due: list[float] = []
        nodes = {(n.get("spec") or {}).get("providerID"): n for n in self.cluster.snapshot("Node")}
        for nc in self.cluster.snapshot("NodeClaim"):
            pid = (nc.get("status") or {}).get("providerID")
            if pid and pid not in nodes:
                launched = _ts((condition(nc, "Launched") or {}).get("lastTransitionTime"))
                due.append(launched + self.boot_seconds)
        for n in nodes.values():
            if n["metadata"].get("annotations", {}).get("karpy.sh/startup-taints-pending") == "true":
                due.append(_ts(n["metadata"].get("creationTimestamp")) + self.startup_taint_seconds)
        future = [d for d in due if d > now]
        return min(future) if future else None

    def reconcile(self) -> int:
        """Boot due instances, clear due startup taints, place DaemonSet pods. Returns changes."""
        now = self.clock.now()
        changes = 0
        nodes = self.cluster.snapshot("Node")
        by_pid = {(n.get("spec") or {}).get("providerID"): n for n in nodes}
        for nc in self.cluster.snapshot("NodeClaim"):
            status = nc.get("status") or {}
            pid = status.get("providerID")
            if not pid or pid in by_pid or nc["metadata"].get("deletionTimestamp"):
                continue
            launched = _ts((condition(nc, "Launched") or {}).get("lastTransitionTime"))
            if now < launched + self.boot_seconds:
                continue
            spec = nc.get("spec") or {}
            name = nc["metadata"]["name"]
            labels = dict(nc["metadata"].get("labels") or {})
            labels[LABEL_HOSTNAME] = name
            taints = [{"key": TAINT_UNREGISTERED, "effect": "NoExecute"}, *[dict(t) for t in spec.get("startupTaints") or []]]
            annotations = {"karpy.sh/startup-taints-pending": "true"} if spec.get("startupTaints") else {}
            self.cluster.create_sync(
                "Node",
                {
                    "metadata": {"name": name, "labels": labels, "annotations": annotations},
                    "spec": {"providerID": pid, "taints": taints},
                    "status": {
                        "capacity": dict(status.get("capacity") or {}),
                        "allocatable": dict(status.get("allocatable") or {}),
                        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    },
                },
            )
            changes += 1
        for n in self.cluster.snapshot("Node"):
            ann = n["metadata"].get("annotations") or {}
            if ann.get("karpy.sh/startup-taints-pending") != "true":
                continue
            if now < _ts(n["metadata"].get("creationTimestamp")) + self.startup_taint_seconds:
                continue
            claim = self._claim_for(n)
            startup = {(t.get("key"), t.get("effect")) for t in ((claim or {}).get("spec") or {}).get("startupTaints") or []}
            taints = [t for t in (n.get("spec") or {}).get("taints") or [] if (t.get("key"), t.get("effect")) not in startup]
            self.cluster.patch_sync(
                "Node", n["metadata"]["name"],
                {"metadata": {"annotations": {"karpy.sh/startup-taints-pending": None}}, "spec": {"taints": taints}},
            )
            changes += 1
        changes += self._daemonsets()
        return changes

    def _claim_for(self, node: dict[str, Any]) -> dict[str, Any] | None:
        pid = (node.get("spec") or {}).get("providerID")
        for nc in self.cluster.snapshot("NodeClaim"):
            if (nc.get("status") or {}).get("providerID") == pid:
                return nc
        return None

    def _daemonsets(self) -> int:
        """The DaemonSet controller and kube-scheduler for DaemonSet pods: one pod per DaemonSet on
        every registered node it tolerates and selects, pinned to that node by node affinity
        (``matchFields`` ``metadata.name``, as the DaemonSet controller pins it) and bound when the
        node has room for its requests (kube-scheduler's ``NodeResourcesFit`` filter: allocatable
        minus the requests of the pods bound there); otherwise left ``Pending`` with
        ``PodScheduled=False/Unschedulable`` (:func:`insufficient_message`)
        and bound once room frees up. Returns the pods created or bound."""
        daemonsets = self.cluster.snapshot("DaemonSet")
        if not daemonsets:
            return 0
        infos = daemonset_pod_infos(daemonsets)
        have: set[tuple[str | None, str]] = set()
        waiting: dict[tuple[str, str], PodView] = {}  # (node, DaemonSet) -> its pod pending there
        requested: dict[str, Resources] = {}
        ports: dict[str, set[HostPort]] = {}  # node -> host ports its bound pods hold (NodePorts filter)
        for p in self.cluster.views("Pod") or ():
            if not isinstance(p, PodView):
                continue
            if p.bound and (parsed := p.try_info()) is not None:  # an unparsable pod is left out, as everywhere else
                add_into(requested.setdefault(p.node_name, {}), parsed.requests)
                if parsed.host_ports:
                    ports.setdefault(p.node_name, set()).update(parsed.host_ports)
            for ref in p.raw["metadata"].get("ownerReferences") or ():
                if ref.get("kind") != "DaemonSet":
                    continue
                pinned = None if p.node_name else pinned_node(p.raw)
                if pinned is not None and not p.deleting:
                    waiting[(pinned, ref.get("name"))] = p
                have.add((p.node_name or pinned, ref.get("name")))
        node_views = [n for n in self.cluster.views("Node") or () if isinstance(n, NodeView)]
        changes = 0
        for node in node_views:
            if node.deleting:
                continue
            node_name = node.name
            labels = node.labels
            taints = node.taints
            if any(t.key == TAINT_UNREGISTERED for t in taints):
                continue
            used = requested.setdefault(node_name, {})
            held = ports.setdefault(node_name, set())
            for ds, info in zip(daemonsets, infos, strict=True):
                short = exceeding(info.requests, subtract(node.allocatable, used))
                # kube-scheduler's NodePorts filter runs on DaemonSet pods too: a host port a pod bound
                # there holds keeps it Pending (trial 23: both bound, each holding 9100/TCP)
                clash = ports_conflict(held, info.host_ports) if info.host_ports else None
                pending = waiting.get((node_name, ds["metadata"]["name"]))
                if pending is not None:  # kube-scheduler tries it again: bound once the node has room
                    if not short and clash is None:
                        self.cluster.patch_sync("Pod", pending.name, {"spec": {"nodeName": node_name}, "status": {
                            "phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                               {"type": "Ready", "status": "True"}]}}, pending.namespace)
                        add_into(used, info.requests)
                        held.update(info.host_ports)
                        changes += 1
                    continue
                if (node_name, ds["metadata"]["name"]) in have:
                    continue
                if untolerated(taints, info.tolerations + DAEMONSET_TOLERATIONS) is not None:
                    continue
                if all(t.matches_labels(labels) for t in info.requirement_terms):
                    continue
                tmpl = (ds.get("spec") or {}).get("template") or {}
                spec = {**(tmpl.get("spec") or {}), "affinity": _pinned_affinity(tmpl.get("spec") or {}, node_name)}
                if short or clash is not None:  # NodeResourcesFit or NodePorts: the one node it may go to refuses it
                    status: dict[str, Any] = {"phase": "Pending", "conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": insufficient_message(short, len(node_views)) if short else ports_message(len(node_views))}]}
                else:
                    spec["nodeName"] = node_name
                    status = {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"},
                                                                 {"type": "Ready", "status": "True"}]}
                    add_into(used, info.requests)
                    held.update(info.host_ports)
                self.cluster.create_sync(
                    "Pod",
                    {
                        "metadata": {
                            "generateName": f"{ds['metadata']['name']}-",
                            "namespace": ds["metadata"].get("namespace", "default"),
                            "labels": dict((tmpl.get("metadata") or {}).get("labels") or {}),
                            "ownerReferences": [
                                {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["metadata"]["name"], "controller": True}
                            ],
                        },
                        "spec": spec,
                        "status": status,
                    },
                )
                changes += 1
        return changes


def _pinned_affinity(spec: Mapping[str, Any], node_name: str) -> dict[str, Any]:
    """``spec.affinity`` of a DaemonSet pod for ``node_name``: the template's, with the required
    node affinity replaced by one term matching the node's name (Kubernetes
    ``pkg/controller/daemon/util`` ``ReplaceDaemonSetPodNodeNameNodeAffinity``)."""
    affinity = dict(spec.get("affinity") or {})
    node_affinity = dict(affinity.get("nodeAffinity") or {})
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
    affinity["nodeAffinity"] = node_affinity
    return affinity


def pinned_node(pod: Mapping[str, Any]) -> str | None:
    """The node a DaemonSet pod is pinned to: the one name its required node affinity's
    ``matchFields`` ``metadata.name`` term allows (see :func:`_pinned_affinity`), or None."""
    required = ((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    for term in required.get("nodeSelectorTerms") or ():
        for field in term.get("matchFields") or ():
            values = field.get("values") or []
            if field.get("key") == "metadata.name" and field.get("operator") == "In" and len(values) == 1:
                return str(values[0])
    return None


def insufficient_message(short: list[str], nodes: int) -> str:
    """kube-scheduler's ``PodScheduled`` message for a pod pinned to one of ``nodes`` nodes that
    lacks room for the resources ``short`` (sorted names): ``0/2 nodes are available: 1
    Insufficient cpu, 1 Insufficient memory, 1 node(s) didn't satisfy plugin(s) [NodeAffinity].``
    (the other nodes left out by ``NodeAffinity``'s PreFilter; kube-scheduler 1.36 goes on with
    its preemption attempt, which karpy does not model:
    tests/integration/test_trial17a_apiserver.py)."""
    return _pinned_message(["1 Too many pods" if r == "pods" else f"1 Insufficient {r}" for r in short], nodes)


def ports_message(nodes: int) -> str:
    """kube-scheduler's ``PodScheduled`` message for a DaemonSet pod pinned to one of ``nodes``
    nodes whose pods hold one of its host ports (the NodePorts filter), in the form of
    :func:`insufficient_message`: ``0/2 nodes are available: 1 node(s) didn't have free ports for
    the requested pod ports, 1 node(s) didn't satisfy plugin(s) [NodeAffinity].``"""
    return _pinned_message(["1 node(s) didn't have free ports for the requested pod ports"], nodes)


def _pinned_message(parts: list[str], nodes: int) -> str:
    """``0/N nodes are available: PARTS, N-1 node(s) didn't satisfy plugin(s) [NodeAffinity].``:
    the one node a pinned pod may go to refused it for ``parts``, the others by its node affinity."""
    if nodes > 1:
        parts = [*parts, f"{nodes - 1} node(s) didn't satisfy plugin(s) [NodeAffinity]"]
    return f"0/{nodes} nodes are available: {', '.join(parts)}."


def _created(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("creationTimestamp", ""))


def _gated(pod: PodView) -> bool:
    """The pod has ``spec.schedulingGates`` left: kube-scheduler's ``SchedulingGates`` PreEnqueue
    plugin keeps it out of the scheduling queue (it is neither bound nor marked Unschedulable; the
    API server gave it ``PodScheduled=False/SchedulingGated``: :func:`karpy_core.kube.admission.scheduling_gated`)."""
    return bool((pod.raw.get("spec") or {}).get("schedulingGates"))


def _to_schedule(pod: PodView) -> bool:
    """A pod this stand-in tries to bind: no node, not deleting, not gated, and not a DaemonSet's
    (those are pinned to their one node and tried there by :class:`KubeletSimulator`)."""
    return not pod.node_name and not pod.deleting and not _gated(pod) and not pod.daemon


class KubeSchedulerSimulator:
    """Binds pending pods to nodes; marks the rest Unschedulable (see module docstring)."""

    def __init__(self, cluster: InMemoryCluster, planned: Callable[[], Mapping[str, str]] | None = None,
                 progress: Progress = NO_PROGRESS, *, scoring: str | None = None):
        """Args:
            cluster: the in-memory cluster whose pending pods it binds.
            planned: returns pod key (``namespace/name``) -> the name of the NodeClaim a
                provisioning pass planned the pod on (the provisioner's pod nominations); such
                a pod tries that NodeClaim's Node first (see the module docstring). None: first
                fit only.
            progress: told of a cycle with pending pods (``kube-scheduler: N pending pods``, no
                total) and of its binds (``kube-scheduler: binding pods``, counted to the pods it
                binds, brought to that total at the end), then of its reading the bound pods
                back (``reading N pods bound``, no total).
            scoring: None (the default): first fit by node name. ``"first"``/``"last"``: a pod
                goes to the node kube-scheduler's default scores rank highest
                (:mod:`~karpy_core.scheduling.scoring`: ``LeastAllocated``,
                ``BalancedAllocation``, ``PodTopologySpread``), ties to the first/last by name.

        Raises:
            ValueError: ``scoring`` is none of those."""
        if scoring not in (None, "first", "last"):
            raise ValueError(f"scoring: {scoring!r} is not None, 'first' or 'last'")
        self.cluster = cluster
        self.planned = planned
        self.progress = progress
        self.scoring = scoring

    async def reconcile(self) -> int:
        """One scheduling cycle over every pending pod, with the same placement rules karpy's
        scheduler applies to existing nodes (taints, node affinity, resources, host ports,
        topology spread and pod affinity), honouring every taint as kube-scheduler does."""
        from karpy_core.scheduling.kubescheduler import kube_schedule
        from karpy_core.scheduling.nodes import ExistingNode
        from karpy_core.state.cluster import ClusterSnapshot, bound_pod_infos

        nodes = [
            n for n in self.cluster.views("Node") or ()
            if isinstance(n, NodeView) and not n.deleting and not n.unschedulable
        ]
        pods = [p for p in self.cluster.views("Pod") or () if isinstance(p, PodView)]
        if not nodes:  # nothing to bind to: every pending pod stays pending, as kube_schedule leaves them
            pending_raw = {p.key: p.raw for p in pods if _to_schedule(p)}
            if pending_raw:
                self.progress.phase(f"kube-scheduler: {count_pods(len(pending_raw))} pending")
            return self._mark_unschedulable(pending_raw, sorted(pending_raw), 0)
        snapshot = ClusterSnapshot(nodes=nodes, pods=pods)
        bound = bound_pod_infos(snapshot)
        requested: dict[str, dict[str, int]] = {}
        for bp in bound:
            acc = requested.setdefault(bp.node_name, {})
            for r, v in bp.requests.items():
                acc[r] = acc.get(r, 0) + v
        existing = [
            ExistingNode(
                name=n.name,
                labels=dict(n.labels),
                taints=n.scheduling_taints,  # a Node not Ready: tainted not-ready/unreachable
                allocatable=dict(n.allocatable),
                requested=requested.get(n.name, {}),
                initialized=True,
            )
            for n in nodes
        ]
        pending = [p for p in pods if _to_schedule(p)]
        if pending:
            self.progress.phase(f"kube-scheduler: {count_pods(len(pending))} pending")
        from karpy_core.scheduling.volumes import apply_volume_requirements, volume_terms

        pvcs, pvs, scs = (self.cluster.snapshot(k) for k in ("PersistentVolumeClaim", "PersistentVolume", "StorageClass"))
        # each pod's PodInfo is parsed once per version and shared: narrow a copy by its volumes
        infos = []
        for view in pending:
            terms, reason = volume_terms(view.raw, pvcs, pvs, scs)
            # shared per pod version: narrowed on a copy, and only when its volumes say something
            infos.append(apply_volume_requirements(copy.copy(view.info), terms, reason) if terms or reason else view.info)
        by_key = {i.key: p.raw for i, p in zip(infos, pending, strict=True)}
        # kube-scheduler tries a pod's status.nominatedNodeName first and holds the room of the
        # pods nominated to a node against other pods (KEP-1923; the scheduling queue's nominator)
        nominated = {i.key: str((p.raw.get("status") or {}).get("nominatedNodeName") or "")
                     for i, p in zip(infos, pending, strict=True)}
        if self.planned is not None:  # kube-scheduler's scoring, as the plan stands in for it
            claims = self.planned()
            node_of = {c.name: c.node_name for c in self.cluster.views("NodeClaim") or ()
                       if isinstance(c, NodeClaimView) and c.node_name} if claims else {}
            for key in nominated:
                if not nominated[key] and claims.get(key) in node_of:
                    nominated[key] = node_of[claims[key]]
        # the placement the disruption planner replays (scheduling/kubescheduler.py)
        results = kube_schedule(existing, bound, infos, {k: v for k, v in nominated.items() if v}, scoring=self.scoring)
        changes = 0
        binds = len(results.existing)
        if binds:
            self.progress.phase("kube-scheduler: binding pods", total=binds)
        for key, node_name in sorted(results.existing.items()):
            await self.cluster.bind(by_key[key], node_name)
            changes += 1
            if changes % 500 == 0 or changes == binds:
                self.progress.update(changes)
        changes += self._mark_unschedulable(by_key, sorted(results.errors), len(nodes))
        if binds:
            # every bound pod is a new version: its view is made again at the next read (7 s wall
            # at 100,000 pods on a loaded machine). Read them here, under a phase of their own, not under a
            # filled "binding pods" bar; the next reader gets the same views, already made.
            self.progress.phase(f"reading {count_pods(binds)} bound")
            self.cluster.views("Pod")
        return changes

    def _mark_unschedulable(self, pods: dict[str, dict[str, Any]], keys: list[str], nodes: int) -> int:
        """Set ``PodScheduled=False/Unschedulable`` (``0/<nodes> nodes are available``) on the pods
        ``keys`` of ``pods`` (``namespace/name`` -> Pod dict) that lack it; returns how many changed."""
        changes = 0
        # one list for every pod patched here, stored as it is (given): stored objects are never changed
        conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": f"0/{nodes} nodes are available"}]
        for key in keys:
            p = pods[key]
            cond = condition(p, "PodScheduled")
            if cond is None or cond.get("reason") != "Unschedulable":
                self.cluster.patch_stored("Pod", p["metadata"]["name"], {"status": {"conditions": conditions}},
                                          p["metadata"].get("namespace"), given=True)
                changes += 1
        return changes
