"""Objects of a small Karpenter-managed cluster, as the API server holds them, for the
``karpy simulate --from-cluster`` tests: the unit tests seed an in-memory cluster with them,
the integration tests create them on the real kube-apiserver (kwok plays the kubelets).

A :class:`LiveCluster` is one NodePool (with its KWOKNodeClass), nodes with their NodeClaims
(``Launched``/``Registered``/``Initialized``, the labels Karpenter stamps) and pods bound to the
nodes. Instance types, zones and prices are the ``simulated`` provider's EC2 catalog
(us-east-1), so every node is priced.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INITIALIZED_AT = "2026-01-01T00:00:00Z"
"""When the NodeClaims were launched and initialized (long before any test's ``now``)."""

TERMINATION_FINALIZER = "karpenter.sh/termination"
"""Karpenter puts it on every NodeClaim and on the Node it registers: a deleted node is drained first."""

INSTANCE_TYPE = "m5.xlarge"
"""4 vCPU, 16 GiB, on-demand us-east-1 list price (the only type the NodePool allows, so
consolidation can delete a node but never replace one with a cheaper type)."""


@dataclass
class LiveCluster:
    """Manifests of one NodePool ``name`` and its nodes; see the module docstring."""

    name: str
    budgets: list[dict[str, Any]] | None = None
    nodes: list[tuple[str, str]] = field(default_factory=list)
    """(node name, zone)."""
    pods: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)
    owned: int = 0
    """Pods owned by the ReplicaSet :meth:`replicaset` (``add_pod(owned=True)``)."""

    def add_node(self, suffix: str, zone: str = "us-east-1a") -> str:
        node = f"{self.name}-{suffix}"
        self.nodes.append((node, zone))
        return node

    def add_pod(self, suffix: str, node: str, *, cpu: str = "500m", labels: dict[str, str] | None = None,
                annotations: dict[str, str] | None = None, spread: str | None = None, owned: bool = False) -> str:
        """A pod bound to ``node``; ``spread``: a hard zone topology spread (maxSkew 1) over pods
        labelled ``spread=<spread>``; ``owned``: controlled by the ReplicaSet :meth:`replicaset`
        (500m pods only), so an evicted one comes back, as in a real cluster."""
        name = f"{self.name}-{suffix}"
        spec: dict[str, Any] = {
            "nodeName": node, "terminationGracePeriodSeconds": 0,
            # Only this cluster's NodePool: a NodePool another test left on the shared dev cluster
            # must not offer these pods a cheaper replacement.
            "nodeSelector": {"karpenter.sh/nodepool": self.name},
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}, self.toleration()],
            "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                            "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}],
        }
        pod_labels = {"app": name, **(labels or {})}
        meta_extra: dict[str, Any] = {}
        if owned:
            self.owned += 1
            pod_labels["rs"] = self.name
            meta_extra["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{self.name}-rs",
                                              "uid": "", "controller": True, "blockOwnerDeletion": True}]
        if spread:
            pod_labels["spread"] = spread
            spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                  "whenUnsatisfiable": "DoNotSchedule",
                                                  "labelSelector": {"matchLabels": {"spread": spread}}}]
        self.pods.append({"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "labels": pod_labels,
                                       "annotations": dict(annotations or {}), **meta_extra},
                          "spec": spec})
        return name

    def add_pdb(self, pod: str, spec: dict[str, Any]) -> None:
        self.pdbs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                          "metadata": {"name": pod, "namespace": "default"},
                          "spec": {"selector": {"matchLabels": {"app": pod}}, **spec}})

    def replicaset(self, replicas: int | None = None) -> dict[str, Any]:
        """The ReplicaSet owning the ``owned`` pods (``replicas`` default: their count); its
        template is a 500m pod that may run on any node of the NodePool."""
        template = {"metadata": {"labels": {"rs": self.name}},
                    "spec": {"terminationGracePeriodSeconds": 0,
                             "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}, self.toleration()],
                             "nodeSelector": {"karpenter.sh/nodepool": self.name},
                             "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                             "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}}}]}}
        return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": f"{self.name}-rs", "namespace": "default"},
                "spec": {"replicas": self.owned if replicas is None else replicas,
                         "selector": {"matchLabels": {"rs": self.name}}, "template": template}}

    def nodeclass(self) -> dict[str, Any]:
        """Karpenter's CRD defaults its status to Ready (the API server fills it in; given here for
        the in-memory cluster)."""
        return {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": self.name},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                                           "lastTransitionTime": INITIALIZED_AT}]}}

    def taint(self) -> dict[str, str]:
        """Every node of this cluster carries it and only its pods tolerate it: other tests' pods on
        the shared dev cluster (pending or unbound) never land on these nodes, in kube-scheduler or
        in the dry run's provisioning pass, so each test's verdicts depend on its own objects only."""
        return {"key": "karpy.test/live", "value": self.name, "effect": "NoSchedule"}

    def toleration(self) -> dict[str, str]:
        """The toleration of :meth:`taint`."""
        return {"key": "karpy.test/live", "operator": "Equal", "value": self.name, "effect": "NoSchedule"}

    def nodepool(self) -> dict[str, Any]:
        disruption: dict[str, Any] = {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "0s"}
        if self.budgets is not None:
            disruption["budgets"] = self.budgets
        return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": self.name},
                "spec": {"template": {"spec": {
                    "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]},
                                     {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}],
                    "taints": [self.taint()],
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": self.name}}},
                    "disruption": disruption}}

    def labels(self, node: str, zone: str) -> dict[str, str]:
        return {"kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "karpenter.sh/nodepool": self.name, "karpenter.sh/initialized": "true", "karpenter.sh/registered": "true",
                "node.kubernetes.io/instance-type": INSTANCE_TYPE, "topology.kubernetes.io/zone": zone,
                "karpenter.sh/capacity-type": "on-demand"}

    def node(self, node: str, zone: str) -> dict[str, Any]:
        resources = {"cpu": "4", "memory": "16Gi", "pods": "58"}
        return {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": node, "annotations": {"kwok.x-k8s.io/node": "fake"}, "labels": self.labels(node, zone),
                             "finalizers": [TERMINATION_FINALIZER]},
                "spec": {"providerID": f"kwok://{node}", "taints": [self.taint()]},
                "status": {"capacity": resources, "allocatable": resources, "conditions": [{"type": "Ready", "status": "True"}]}}

    def nodeclaim(self, node: str, zone: str) -> dict[str, Any]:
        """The NodeClaim (``status`` included: create it, then write the status subresource)."""
        cond = [{"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": INITIALIZED_AT}
                for t in ("Launched", "Registered", "Initialized", "Ready")]
        return {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": node, "labels": {k: v for k, v in self.labels(node, zone).items() if k != "kubernetes.io/hostname"},
                             "finalizers": [TERMINATION_FINALIZER]},
                "spec": {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [INSTANCE_TYPE]}],
                         "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": self.name}},
                "status": {"providerID": f"kwok://{node}", "nodeName": node, "imageID": "kwok",
                           "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                           "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "58"}, "conditions": cond}}

    def objects(self) -> list[dict[str, Any]]:
        """Every object, in creation order (NodeClaims with their status)."""
        out = [self.nodeclass(), self.nodepool()]
        for node, zone in self.nodes:
            out += [self.nodeclaim(node, zone), self.node(node, zone)]
        return out + ([self.replicaset()] if self.owned else []) + self.pdbs + self.pods
