"""The ``KubeClient`` port: the only way controllers touch Kubernetes.

Objects are plain dicts in the API's JSON shape (camelCase). Kinds are named by their ``kind``
(``"Pod"``, ``"Node"``, ``"NodeClaim"``...); :data:`KINDS` says which API group/version and
resource path each maps to and whether it is namespaced. Two adapters implement the port: the
in-memory cluster (:mod:`karpy_core.kube.memory`, simulator and unit tests) and the
kubernetes-asyncio adapter (real clusters).

Errors: every adapter raises :class:`karpy_core.errors.KubeAPIError` with the HTTP status the
real API server would give (404 not found, 409 conflict/exists, 422 invalid, 429 eviction
blocked by a PodDisruptionBudget).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["KindInfo", "KINDS", "KubeClient", "WatchEvent"]


@dataclass(frozen=True)
class KindInfo:
    """Where a kind lives in the API: ``group`` ("" for core), ``version``, ``plural``, ``namespaced``."""

    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


KINDS: dict[str, KindInfo] = {
    "Pod": KindInfo("", "v1", "pods", True),
    "Node": KindInfo("", "v1", "nodes", False),
    "Namespace": KindInfo("", "v1", "namespaces", False),
    "Secret": KindInfo("", "v1", "secrets", True),
    "Event": KindInfo("", "v1", "events", True),
    "PersistentVolume": KindInfo("", "v1", "persistentvolumes", False),
    "PersistentVolumeClaim": KindInfo("", "v1", "persistentvolumeclaims", True),
    "Deployment": KindInfo("apps", "v1", "deployments", True),
    "ReplicaSet": KindInfo("apps", "v1", "replicasets", True),
    "StatefulSet": KindInfo("apps", "v1", "statefulsets", True),
    "DaemonSet": KindInfo("apps", "v1", "daemonsets", True),
    "Job": KindInfo("batch", "v1", "jobs", True),
    "PodDisruptionBudget": KindInfo("policy", "v1", "poddisruptionbudgets", True),
    "StorageClass": KindInfo("storage.k8s.io", "v1", "storageclasses", False),
    "VolumeAttachment": KindInfo("storage.k8s.io", "v1", "volumeattachments", False),
    "Lease": KindInfo("coordination.k8s.io", "v1", "leases", True),
    "RuntimeClass": KindInfo("node.k8s.io", "v1", "runtimeclasses", False),
    "NodePool": KindInfo("karpenter.sh", "v1", "nodepools", False),
    "NodeClaim": KindInfo("karpenter.sh", "v1", "nodeclaims", False),
    "EC2NodeClass": KindInfo("karpenter.k8s.aws", "v1", "ec2nodeclasses", False),
    "KCNodeClass": KindInfo("karpenter.kakaocloud.com", "v1alpha1", "kcnodeclasses", False),
}


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED or DELETED with ``object`` the object after
    it, or SYNCED (empty object) once, after the ADDED events of the initial list."""

    type: str
    object: dict[str, Any]


class KubeClient(Protocol):
    """List/watch/create/patch/delete plus the pod subresources karpy uses. All methods are async."""

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        """Every object of ``kind`` (in ``namespace`` when given)."""
        ...

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        """One object. Raises KubeAPIError(404) when absent."""
        ...

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create; honours ``metadata.generateName``. Raises KubeAPIError(409) when it exists."""
        ...

    async def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        """JSON merge-patch (RFC 7386) of the object, or of its status subresource."""
        ...

    async def replace(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; ``metadata.resourceVersion`` is a precondition (409 on mismatch)."""
        ...

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        """Delete (sets ``deletionTimestamp`` while finalizers remain). ``uid`` is a precondition."""
        ...

    async def bind(self, pod: dict[str, Any], node_name: str) -> None:
        """Bind a pending pod to a node (``pods/binding``)."""
        ...

    async def evict(self, pod: dict[str, Any]) -> None:
        """Evict through the Eviction API. Raises KubeAPIError(429) when a PDB forbids it."""
        ...

    def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        """Events for ``kind``: ADDED for every existing object, one SYNCED, then live events."""
        ...
