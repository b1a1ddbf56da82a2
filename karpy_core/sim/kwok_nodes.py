"""A node backend for the ``simulated`` provider: each instance is a real Node played by kwok.

With this backend the simulated cloud "boots" an instance by creating a Node object in the real
cluster, annotated ``kwok.x-k8s.io/node: fake`` so kwok (sigs.k8s.io/kwok) acts as its kubelet:
it reports the Node Ready and runs the pods the real kube-scheduler binds to it. This is how the
whole loop (Deployment -> kube-scheduler marks pods Unschedulable -> karpy launches -> Node Ready
-> kube-scheduler binds -> pods Running) runs without a cloud, as Karpenter's KWOK provider does.

The Node is named after the NodeClaim and carries the launch result in the annotation
``karpy.sh/simulated-instance`` (JSON: labels, providerID, capacity, allocatable), so the
inventory survives controller restarts: ``find`` answers "was this NodeClaim already launched?"
from the cluster itself. Nodes start tainted ``karpenter.sh/unregistered:NoExecute`` plus the
NodeClaim's startup taints, as a real node's kubelet registers them.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from karpy_core.apis.labels import LABEL_HOSTNAME, TAINT_UNREGISTERED
from karpy_core.errors import ConflictError, NotFoundError
from karpy_core.kube.port import KubeClient

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim

__all__ = ["KwokNodeBackend", "KWOK_ANNOTATION", "INSTANCE_ANNOTATION"]

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
INSTANCE_ANNOTATION = "karpy.sh/simulated-instance"
_DEFAULT_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


class KwokNodeBackend:
    """Creates and deletes kwok-managed Nodes for simulated instances.

    Args:
        kube: client for the cluster kwok watches.
    """

    def __init__(self, kube: KubeClient):
        self.kube = kube

    @staticmethod
    def _claim_from_node(node: dict[str, Any]) -> NodeClaim | None:
        from karpy_core.apis.nodeclaim import NodeClaim

        raw = (node["metadata"].get("annotations") or {}).get(INSTANCE_ANNOTATION)
        if not raw:
            return None
        data = json.loads(raw)
        return NodeClaim.model_validate(
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodeClaim",
                "metadata": {"name": node["metadata"]["name"], "labels": data.get("labels") or {}},
                "spec": {"requirements": [], "nodeClassRef": data.get("nodeClassRef") or _DEFAULT_REF},
                "status": {
                    "providerID": data.get("providerID"),
                    "capacity": data.get("capacity") or {},
                    "allocatable": data.get("allocatable") or {},
                },
            }
        )

    async def find(self, nodeclaim_name: str) -> NodeClaim | None:
        try:
            node = await self.kube.get("Node", nodeclaim_name)
        except NotFoundError:
            return None
        return self._claim_from_node(node)

    async def register(self, launched: NodeClaim) -> None:
        dumped = launched.model_dump(by_alias=True, exclude_none=True, mode="json")
        name = dumped["metadata"]["name"]
        status = dumped.get("status") or {}
        spec = dumped.get("spec") or {}
        labels = dict(dumped["metadata"].get("labels") or {})
        labels[LABEL_HOSTNAME] = name
        labels.setdefault("kubernetes.io/os", "linux")
        instance = {
            "labels": dumped["metadata"].get("labels") or {},
            "providerID": status.get("providerID"),
            "capacity": status.get("capacity") or {},
            "allocatable": status.get("allocatable") or {},
            "nodeClassRef": spec.get("nodeClassRef"),
        }
        taints = [{"key": TAINT_UNREGISTERED, "effect": "NoExecute"}, *(spec.get("startupTaints") or [])]
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {KWOK_ANNOTATION: "fake", INSTANCE_ANNOTATION: json.dumps(instance, sort_keys=True)},
            },
            "spec": {"providerID": status.get("providerID"), "taints": taints},
            "status": {
                "capacity": status.get("capacity") or {},
                "allocatable": status.get("allocatable") or {},
                "nodeInfo": {"architecture": labels.get("kubernetes.io/arch", "amd64"), "operatingSystem": "linux",
                             "kubeletVersion": "kwok", "kubeProxyVersion": "kwok", "containerRuntimeVersion": "kwok",
                             "kernelVersion": "kwok", "osImage": "kwok", "bootID": "", "machineID": "", "systemUUID": ""},
            },
        }
        try:
            await self.kube.create("Node", node)
        except ConflictError:
            pass

    async def deregister(self, provider_id: str) -> bool:
        for node in await self.kube.list("Node"):
            if (node.get("spec") or {}).get("providerID") == provider_id:
                if not node["metadata"].get("deletionTimestamp"):
                    try:
                        await self.kube.delete("Node", node["metadata"]["name"])
                    except NotFoundError:
                        return False
                return True
        return False

    async def list(self) -> list[NodeClaim]:
        out = []
        for node in await self.kube.list("Node"):
            claim = self._claim_from_node(node)
            if claim is not None:
                out.append(claim)
        return out
