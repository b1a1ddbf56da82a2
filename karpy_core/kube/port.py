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

import functools
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Protocol, TypedDict

__all__ = [
    "KindInfo",
    "KINDS",
    "KubeClient",
    "KubeObject",
    "WatchEvent",
    "serve_kind",
    "serve_plugin_node_classes",
    "ObjectMeta",
    "OwnerReference",
    "ConditionDict",
    "TaintDict",
    "Pod",
    "PodSpec",
    "PodStatus",
    "Node",
    "NodeSpec",
    "NodeStatus",
    "NodeClaim",
    "NodeClaimSpec",
    "NodeClaimStatus",
    "NodePool",
    "NodePoolSpec",
    "NodePoolStatus",
]

# ---- wire types ----------------------------------------------------------------------------
# The JSON shapes the port hands out, as TypedDicts with every key optional (``total=False``):
# what a reader may find, with the types the API server gives. They document and type the edge
# parsers (:mod:`karpy_core.state.views` builds each view from one of these) without forcing
# casts on the code that passes objects through: the port's list/get/create/patch still speak
# :data:`KubeObject`, the dict every adapter stores. Only the fields karpy reads are declared;
# a TypedDict is structural, so the other fields are there at run time all the same.

KubeObject = dict[str, Any]
"""Any API object as the port stores and returns it (JSON shape, camelCase keys)."""


class OwnerReference(TypedDict, total=False):
    """``metav1.OwnerReference``."""

    apiVersion: str
    kind: str
    name: str
    uid: str
    controller: bool


class ObjectMeta(TypedDict, total=False):
    """``metav1.ObjectMeta`` (timestamps are RFC 3339 text)."""

    name: str
    generateName: str
    namespace: str
    uid: str
    resourceVersion: str
    generation: int
    creationTimestamp: str
    deletionTimestamp: str
    labels: dict[str, str]
    annotations: dict[str, str]
    finalizers: list[str]
    ownerReferences: list[OwnerReference]


class ConditionDict(TypedDict, total=False):
    """One ``status.conditions`` entry (``status`` is ``"True"``, ``"False"`` or ``"Unknown"``)."""

    type: str
    status: str
    reason: str
    message: str
    lastTransitionTime: str
    observedGeneration: int


class TaintDict(TypedDict, total=False):
    """``core/v1 Taint``."""

    key: str
    value: str
    effect: str
    timeAdded: str


class PodSpec(TypedDict, total=False):
    """``core/v1 PodSpec``: the fields karpy's parsers read (containers and the scheduling
    constraints stay API dicts: :func:`karpy_core.scheduling.pod.pod_info` parses them)."""

    nodeName: str
    nodeSelector: dict[str, str]
    priority: int
    priorityClassName: str
    schedulerName: str
    terminationGracePeriodSeconds: int
    containers: list[dict[str, Any]]
    initContainers: list[dict[str, Any]]
    overhead: dict[str, str]
    tolerations: list[dict[str, Any]]
    affinity: dict[str, Any]
    topologySpreadConstraints: list[dict[str, Any]]
    volumes: list[dict[str, Any]]


class PodStatus(TypedDict, total=False):
    """``core/v1 PodStatus``."""

    phase: str
    conditions: list[ConditionDict]
    nominatedNodeName: str


class Pod(TypedDict, total=False):
    """``core/v1 Pod``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: PodSpec
    status: PodStatus


class NodeSpec(TypedDict, total=False):
    """``core/v1 NodeSpec``."""

    providerID: str
    unschedulable: bool
    taints: list[TaintDict]


class NodeStatus(TypedDict, total=False):
    """``core/v1 NodeStatus`` (quantities are text)."""

    phase: str
    capacity: dict[str, str]
    allocatable: dict[str, str]
    conditions: list[ConditionDict]


class Node(TypedDict, total=False):
    """``core/v1 Node``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeSpec
    status: NodeStatus


class NodeClaimSpec(TypedDict, total=False):
    """``karpenter.sh/v1 NodeClaimSpec``."""

    requirements: list[dict[str, Any]]
    resources: dict[str, dict[str, str]]
    taints: list[TaintDict]
    startupTaints: list[TaintDict]
    nodeClassRef: dict[str, str]
    expireAfter: str
    terminationGracePeriod: str


class NodeClaimStatus(TypedDict, total=False):
    """``karpenter.sh/v1 NodeClaimStatus``."""

    providerID: str
    nodeName: str
    imageID: str
    capacity: dict[str, str]
    allocatable: dict[str, str]
    conditions: list[ConditionDict]
    lastPodEventTime: str


class NodeClaim(TypedDict, total=False):
    """``karpenter.sh/v1 NodeClaim``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodeClaimSpec
    status: NodeClaimStatus


class NodePoolSpec(TypedDict, total=False):
    """``karpenter.sh/v1 NodePoolSpec`` (the template and disruption stay API dicts: the
    pydantic :class:`karpy_core.apis.nodepool.NodePool` validates them)."""

    template: dict[str, Any]
    disruption: dict[str, Any]
    limits: dict[str, str]
    weight: int
    replicas: int


class NodePoolStatus(TypedDict, total=False):
    """``karpenter.sh/v1 NodePoolStatus``."""

    resources: dict[str, str]
    nodes: int
    conditions: list[ConditionDict]
    nodeClassObservedGeneration: int


class NodePool(TypedDict, total=False):
    """``karpenter.sh/v1 NodePool``."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: NodePoolSpec
    status: NodePoolStatus


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
    "PriorityClass": KindInfo("scheduling.k8s.io", "v1", "priorityclasses", False),
    "PodTemplate": KindInfo("", "v1", "podtemplates", True),
    "CapacityBuffer": KindInfo("autoscaling.x-k8s.io", "v1beta1", "capacitybuffers", True),
    "NodePool": KindInfo("karpenter.sh", "v1", "nodepools", False),
    "NodeClaim": KindInfo("karpenter.sh", "v1", "nodeclaims", False),
    "NodeOverlay": KindInfo("karpenter.sh", "v1alpha1", "nodeoverlays", False),
    "EC2NodeClass": KindInfo("karpenter.k8s.aws", "v1", "ec2nodeclasses", False),
    "KCNodeClass": KindInfo("karpenter.kakaocloud.com", "v1alpha1", "kcnodeclasses", False),
    # Karpenter's KWOK provider's NodeClass, served by the built-in simulated provider (karpy_core.apis.kwoknodeclass)
    "KWOKNodeClass": KindInfo("karpenter.kwok.sh", "v1alpha1", "kwoknodeclasses", False),
}


def serve_kind(kind: str, info: KindInfo) -> bool:
    """Add a provider's kind (a third-party NodeClass registered through the ``karpy.apis`` entry
    points) to :data:`KINDS`, so the in-memory cluster stores it; call before creating the
    cluster. Returns False when ``kind`` is already served at that group/version (nothing changes).

    Raises:
        ValueError: ``kind`` is already served at another group/version (two kinds of one name).
    """
    known = KINDS.get(kind)
    if known is not None:
        if known.api_version != info.api_version:
            raise ValueError(f"kind {kind} is served as {known.api_version}; cannot serve it as {info.api_version} too")
        return False
    KINDS[kind] = info
    return True


@functools.cache
def serve_plugin_node_classes() -> tuple[str, ...]:
    """Serve every NodeClass kind a ``karpy.apis`` entry point registers (``NODE_CLASS = True``)
    that :data:`KINDS` lacks, e.g. a third-party provider's ``TinyNodeClass``, at the
    group/version of its ``API_VERSION``; the resource name is the model's ``PLURAL`` class
    attribute, else the lower-case kind + ``s``. Then the in-memory cluster stores its manifests
    (``karpy simulate``), both KubeClient adapters read and watch it (the provider reads its
    NodeClasses; in a real cluster its CRD must be installed and the controller's RBAC must grant
    it), and a NodePool naming a missing one is not Ready. Call it before creating a cluster
    client; it runs once per process (entry points do not change) and returns the kinds added.
    """
    from karpy_core.apis.registry import kind_registry

    added = []
    for (api_version, kind), cls in sorted(kind_registry().items()):
        if not cls.NODE_CLASS or kind in KINDS:
            continue
        group, _, version = api_version.rpartition("/")
        plural = str(getattr(cls, "PLURAL", "") or f"{kind.lower()}s")
        if serve_kind(kind, KindInfo(group, version, plural, cls.NAMESPACED)):
            added.append(kind)
    return tuple(added)


@dataclass(frozen=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED or DELETED with ``object`` the object after
    it, or SYNCED once, after the ADDED events of the initial list (its object is empty, or holds
    only ``metadata.resourceVersion``: the list's, which the informer cache compares with the
    objects it already holds, see :meth:`karpy_core.kube.cache.CachedKubeClient.state_synced`)."""

    type: str
    object: KubeObject


class KubeClient(Protocol):
    """List/watch/create/patch/delete plus the pod subresources karpy uses. All methods are async.

    Objects are :data:`KubeObject` dicts; ``bind`` and ``evict`` take a :class:`Pod` (a view's
    ``raw`` dict or a typed one). The wire TypedDicts above say what each kind holds."""

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[KubeObject]:
        """Every object of ``kind`` (in ``namespace`` when given)."""
        ...

    async def get(self, kind: str, name: str, namespace: str | None = None) -> KubeObject:
        """One object. Raises KubeAPIError(404) when absent."""
        ...

    async def create(self, kind: str, obj: KubeObject) -> KubeObject:
        """Create; honours ``metadata.generateName``. Raises KubeAPIError(409) when it exists."""
        ...

    async def patch(
        self, kind: str, name: str, patch: KubeObject, namespace: str | None = None, *, status: bool = False
    ) -> KubeObject:
        """JSON merge-patch (RFC 7386) of the object, or of its status subresource."""
        ...

    async def replace(self, kind: str, obj: KubeObject) -> KubeObject:
        """PUT the whole object; ``metadata.resourceVersion`` is a precondition (409 on mismatch)."""
        ...

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        """Delete (sets ``deletionTimestamp`` while finalizers remain). ``uid`` is a precondition."""
        ...

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        """Bind a pending pod to a node (``pods/binding``)."""
        ...

    async def evict(self, pod: Pod | KubeObject) -> None:
        """Evict through the Eviction API. Raises KubeAPIError(429) when a PDB forbids it."""
        ...

    def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        """Events for ``kind``: ADDED for every existing object, one SYNCED, then live events."""
        ...
