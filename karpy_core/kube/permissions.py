"""Every Kubernetes permission the controller uses: one list, the source of the chart's RBAC.

:data:`PERMISSIONS` names each (API group, resource[/subresource], verb) the controller's code
calls, where (cluster-wide, the release namespace, ``kube-system``), for which cloud, by which
component and why. The Helm chart's ClusterRole and Roles (``charts/karpy/templates``) must grant
exactly these and nothing else; ``tests/charts/test_helm.py`` compares the rendered rules with
:func:`rules_for` in both directions, and the RBAC end-to-end test
(``tests/integration/test_rbac_e2e.py``) runs the operator under the rendered RBAC on a real API
server through a :class:`RecordingKubeClient` and checks every request it made against this list.

Verbs are the RBAC authorizer's (Kubernetes ``staging/src/k8s.io/apiserver/pkg/endpoints/request``
``requestinfo.go``): GET of one object is ``get``, of a collection ``list``, with ``watch=true``
``watch``; POST ``create``; PATCH ``patch``; PUT ``update``; DELETE ``delete``. A subresource is
``resource/subresource`` (``pods/eviction``, ``nodeclaims/status``).

Two permissions are checked by admission rather than by a request of their own
(``plugin/pkg/admission/gc`` in Kubernetes, the ``OwnerReferencesPermissionEnforcement`` plugin):
setting ``blockOwnerDeletion`` on an owner reference needs ``update`` on the owner's
``<resource>/finalizers``, and changing an object's ``ownerReferences`` needs ``delete`` on the
object. :class:`RecordingKubeClient` records both as the requests that imply them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KINDS, KubeClient, KubeObject, Pod, WatchEvent

_T = TypeVar("_T")

__all__ = [
    "CLOUDS",
    "PERMISSIONS",
    "READ_VERBS",
    "read_rules_for",
    "Permission",
    "RecordedRequest",
    "RecordingKubeClient",
    "Rule",
    "SCOPE_CLUSTER",
    "SCOPE_KUBE_SYSTEM",
    "SCOPE_RELEASE",
    "permitted",
    "rules_for",
    "unique",
]

SCOPE_CLUSTER = "cluster"
"""Granted by the ClusterRole: every namespace, and cluster-scoped resources."""
SCOPE_RELEASE = "release"
"""Granted by the Role in the controller's own namespace (the Helm release namespace)."""
SCOPE_KUBE_SYSTEM = "kube-system"
"""Granted by a Role in ``kube-system``."""

CLOUDS = ("aws", "kakaocloud")
"""The clouds the chart installs for (its ``cloud`` value)."""

NAMED_SECRETS = ("credentials.secretName", "sigKey.secretName")
"""Chart values naming the only Secrets the KakaoCloud controller may read (``resourceNames``)."""

_ALL = frozenset(CLOUDS)
_AWS = frozenset({"aws"})
_KAKAO = frozenset({"kakaocloud"})


@dataclass(frozen=True)
class Permission:
    """One grant: ``verbs`` on ``group``/``resource`` (plural, ``/subresource`` when one) in
    ``scope`` (:data:`SCOPE_CLUSTER`, :data:`SCOPE_RELEASE` or :data:`SCOPE_KUBE_SYSTEM`) for the
    ``clouds`` listed. ``resource_names`` lists chart values whose values restrict the grant to
    those object names (empty: any name). ``who`` names the calling components, ``why`` the need."""

    group: str
    resource: str
    verbs: tuple[str, ...]
    who: str
    why: str
    scope: str = SCOPE_CLUSTER
    clouds: frozenset[str] = _ALL
    resource_names: tuple[str, ...] = ()


PERMISSIONS: tuple[Permission, ...] = (
    # ---- karpy's own API ------------------------------------------------------------------
    Permission("karpenter.sh", "nodepools", ("get", "list", "watch"),
               "informer cache; provisioner, disruption, drift, nodepool.status; metrics (a NodeClaim's NodePool, "
               "read through the cache)",
               "NodePools are the templates every decision starts from"),
    Permission("karpenter.sh", "nodepools/status", ("patch",), "nodepool.status",
               "resources, node count and the ValidationSucceeded/NodeClassReady/NodeRegistrationHealthy/Ready "
               "conditions of each NodePool"),
    Permission("karpenter.sh", "nodepools/finalizers", ("update",), "provisioner, static capacity, disruption (replacements)",
               "a NodeClaim's owner reference to its NodePool sets blockOwnerDeletion (Karpenter does too); "
               "OwnerReferencesPermissionEnforcement admits that only with update on the owner's finalizers"),
    Permission("karpenter.sh", "nodeclaims", ("get", "list", "watch", "create", "patch", "delete"),
               "provisioner, static capacity, nodeclaim.lifecycle, disruption, expiration, node.health, node.termination, "
               "garbage collection, AWS interruption and tagging",
               "karpy creates a NodeClaim per launch, adds and removes its termination finalizer and annotations, "
               "and deletes it to disrupt, expire, repair or garbage-collect the node"),
    Permission("karpenter.sh", "nodeclaims/status", ("patch",), "nodeclaim.lifecycle, drift, disruption, node.termination",
               "Launched/Registered/Initialized/Ready/Drifted/DisruptionReason/Consolidatable/Drained/InstanceTerminating/"
               "ConsistentStateFound conditions, providerID, lastPodEventTime"),
    Permission("karpenter.sh", "nodeoverlays", ("list", "watch"), "informer cache (NodeOverlay gate); nodeoverlay controller",
               "NodeOverlays change the prices and capacities of the instance types the scheduler and consolidation see"),
    Permission("karpenter.sh", "nodeoverlays/status", ("patch",), "nodeoverlay controller (NodeOverlay gate)",
               "the ValidationSucceeded (RuntimeValidation, Conflict) and Ready conditions of each NodeOverlay"),
    Permission("karpenter.k8s.aws", "ec2nodeclasses", ("get", "list", "watch"), "informer cache; EC2NodeClass controller, drift",
               "the launch settings of each NodeClaim and the NodeClass drift hash", clouds=_AWS),
    Permission("karpenter.k8s.aws", "ec2nodeclasses", ("patch",), "EC2NodeClass controller",
               "the karpenter.k8s.aws/termination finalizer: added to each, removed once its instance profile and "
               "launch templates are cleaned up", clouds=_AWS),
    Permission("karpenter.k8s.aws", "ec2nodeclasses/status", ("patch",), "EC2NodeClass controller",
               "resolved subnets, security groups, AMIs, instance profile and the Ready condition", clouds=_AWS),
    Permission("karpenter.kakaocloud.com", "kcnodeclasses", ("get", "list", "watch"), "informer cache; KCNodeClass resolver, drift",
               "the launch settings of each NodeClaim and the NodeClass drift hash", clouds=_KAKAO),
    Permission("karpenter.kakaocloud.com", "kcnodeclasses/status", ("patch",), "KCNodeClass resolver",
               "resolved subnets, image, flavors and the Ready condition", clouds=_KAKAO),
    # ---- core -----------------------------------------------------------------------------
    Permission("", "nodes", ("get", "list", "watch", "patch", "delete"),
               "informer cache; nodeclaim.lifecycle, node.termination, disruption, garbage collection",
               "registration (labels, taints, the termination finalizer, the owner reference to the NodeClaim: "
               "changing ownerReferences needs delete under OwnerReferencesPermissionEnforcement), the disrupted "
               "taint, and deleting the Node of a terminated NodeClaim"),
    Permission("", "pods", ("list", "watch"), "informer cache; provisioner, disruption, node.termination",
               "pending pods drive provisioning; bound pods are what disruption moves and termination drains"),
    Permission("", "pods", ("delete",), "node.termination",
               "past a NodeClaim's terminationGracePeriod deadline (and at once for node repair) pods are deleted, "
               "PDBs and do-not-disrupt notwithstanding, as Karpenter's terminator does"),
    Permission("", "pods/eviction", ("create",), "node.termination",
               "draining goes through the Eviction API, which enforces PodDisruptionBudgets"),
    Permission("", "events", ("create",), "event recorder, AWS provider",
               "decisions explained as Events on pods, NodeClaims, Nodes and NodePools"),
    Permission("", "persistentvolumeclaims", ("list",), "provisioner, disruption (snapshot)",
               "volume topology and zone constraints of pods with claims"),
    Permission("", "persistentvolumes", ("list",), "provisioner, disruption (snapshot)",
               "node affinity of bound volumes"),
    Permission("storage.k8s.io", "storageclasses", ("list",), "provisioner, disruption (snapshot)",
               "allowed topologies and binding mode of unbound claims"),
    Permission("storage.k8s.io", "volumeattachments", ("list",), "node.termination",
               "a drained Node is let go once its volumes are detached (or its terminationGracePeriod is over), "
               "so stateful pods can attach them elsewhere"),
    Permission("apps", "daemonsets", ("list", "watch"), "informer cache; provisioner, disruption",
               "DaemonSet overhead on every new node"),
    Permission("policy", "poddisruptionbudgets", ("list", "watch"), "informer cache; disruption",
               "a PDB allowing no disruption keeps its pods' node from voluntary disruption"),
    Permission("autoscaling.x-k8s.io", "capacitybuffers", ("list", "watch"),
               "informer cache (CapacityBuffer gate); capacitybuffer, provisioner, disruption",
               "a CapacityBuffer's headroom is provisioned as pending pods and kept by consolidation"),
    Permission("autoscaling.x-k8s.io", "capacitybuffers/status", ("patch",), "capacitybuffer, provisioner",
               "replicas, podTemplateRef and the ReadyForProvisioning/Provisioning conditions of each buffer"),
    Permission("", "podtemplates", ("list", "watch"), "informer cache (CapacityBuffer gate); capacitybuffer",
               "the pod shape a CapacityBuffer's podTemplateRef names"),
    Permission("apps", "deployments", ("list",), "capacitybuffer, provisioner, disruption",
               "the pod shape and replicas of a CapacityBuffer's scalableRef"),
    Permission("apps", "replicasets", ("list",), "capacitybuffer, provisioner, disruption",
               "the pod shape and replicas of a CapacityBuffer's scalableRef"),
    Permission("apps", "statefulsets", ("list",), "capacitybuffer, provisioner, disruption",
               "the pod shape and replicas of a CapacityBuffer's scalableRef"),
    # ---- the release namespace ------------------------------------------------------------
    Permission("coordination.k8s.io", "leases", ("get", "create", "update"), "leader election",
               "one active replica: the leader Lease is read, created once and renewed with PUT",
               scope=SCOPE_RELEASE),
    Permission("", "secrets", ("get",), "KakaoCloud credentials and keyring",
               "the IAM access key and the instance-ownership keyring, only the two Secrets the chart names",
               scope=SCOPE_RELEASE, clouds=_KAKAO, resource_names=NAMED_SECRETS),
    Permission("", "secrets", ("create",), "KakaoCloud bootstrap",
               "a kubeadm bootstrap-token Secret per node; create only (the token cleaner removes expired ones)",
               scope=SCOPE_KUBE_SYSTEM, clouds=_KAKAO),
)


@dataclass(frozen=True, order=True)
class Rule:
    """One (scope, group, resource, verb, resource names) grant, flattened from :data:`PERMISSIONS`
    or from a rendered Role/ClusterRole. ``resource_names`` holds actual names (sorted)."""

    scope: str
    group: str
    resource: str
    verb: str
    resource_names: tuple[str, ...] = ()


def rules_for(cloud: str, values: dict[str, Any] | None = None) -> set[Rule]:
    """Every grant the chart must render for ``cloud`` (``aws`` or ``kakaocloud``).

    ``values`` supplies the chart values named in ``resource_names`` (dotted paths, e.g.
    ``{"credentials": {"secretName": "kc"}}``).

    Raises:
        ValueError: unknown cloud, or a value named in ``resource_names`` is missing.
    """
    if cloud not in CLOUDS:
        raise ValueError(f"cloud must be one of {', '.join(CLOUDS)}, not {cloud!r}")
    out: set[Rule] = set()
    for p in PERMISSIONS:
        if cloud not in p.clouds:
            continue
        names = tuple(sorted(_value(values or {}, path) for path in p.resource_names))
        for verb in p.verbs:
            out.add(Rule(p.scope, p.group, p.resource, verb, names))
    return out


READ_VERBS = ("get", "list", "watch")
"""The verbs that change nothing; a dry-run controller's role holds no other."""


def read_rules_for(cloud: str, values: dict[str, Any] | None = None) -> set[Rule]:
    """The grants the chart renders with ``dryRun: true`` (``karpy controller --dry-run``): the
    :data:`READ_VERBS` grants of :func:`rules_for`, without the leader Lease (a dry run has no
    leader election). Raises as :func:`rules_for`."""
    return {r for r in rules_for(cloud, values) if r.verb in READ_VERBS and r.resource != "leases"}


def _value(values: dict[str, Any], path: str) -> str:
    node: Any = values
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"chart value {path} is needed for a resourceNames grant")
        node = node[part]
    return str(node)


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the RBAC authorizer sees it: ``verb`` on ``group``/``resource`` (with
    ``/subresource``), ``namespace`` ("" for cluster-scoped or all namespaces) and ``name`` (""
    for collections); ``status`` is the HTTP status of the answer (0 when the call raised
    something other than :class:`KubeAPIError`); ``implied`` marks an admission check
    (OwnerReferencesPermissionEnforcement) rather than a request of its own."""

    verb: str
    group: str
    resource: str
    namespace: str = ""
    name: str = ""
    status: int = 200
    implied: bool = False


def permitted(req: RecordedRequest, cloud: str, release_namespace: str, values: dict[str, Any] | None = None) -> bool:
    """True when the chart's RBAC for ``cloud`` (installed in ``release_namespace``) allows ``req``,
    judged on :data:`PERMISSIONS` with the RBAC authorizer's matching: a ClusterRole grant covers
    every namespace; a Role grant only its namespace; resource names restrict by name, so a named
    grant never covers a collection request.

    Raises:
        ValueError: as :func:`rules_for`.
    """
    for rule in rules_for(cloud, values):
        if (rule.group, rule.resource, rule.verb) != (req.group, req.resource, req.verb):
            continue
        if rule.scope == SCOPE_RELEASE and req.namespace != release_namespace:
            continue
        if rule.scope == SCOPE_KUBE_SYSTEM and req.namespace != "kube-system":
            continue
        if rule.resource_names and req.name not in rule.resource_names:
            continue
        return True
    return False


@dataclass
class RecordingKubeClient:
    """A :class:`~karpy_core.kube.port.KubeClient` that forwards every call to ``inner`` and
    records it as the request(s) the API server authorizes (see :class:`RecordedRequest`).

    The mapping follows :class:`karpy_core.kube.client.AsyncKubeClient`: ``watch`` lists first
    and then watches; ``replace`` is a PUT (``update``); ``patch(status=True)`` and ``bind``/
    ``evict`` address the ``status``, ``binding`` and ``eviction`` subresources. A
    :class:`KubeAPIError` is recorded with its status (403 is what RBAC denies) and re-raised.

    Args:
        inner: the client that does the work.
        on_request: called with each :class:`RecordedRequest` as it completes (default: append
            to :attr:`requests`).
    """

    inner: KubeClient
    on_request: Callable[[RecordedRequest], None] | None = None
    requests: list[RecordedRequest] = field(default_factory=list)

    def _record(self, req: RecordedRequest) -> None:
        if self.on_request is not None:
            self.on_request(req)
        else:
            self.requests.append(req)

    def denied(self) -> list[RecordedRequest]:
        """The recorded requests the API server answered 403 Forbidden."""
        return [r for r in self.requests if r.status == 403]

    @staticmethod
    def _target(kind: str, namespace: str | None, *, collection: bool = False) -> tuple[str, str, str]:
        info = KINDS.get(kind)
        if info is None:
            return "", kind, ""
        if not info.namespaced:
            ns = ""
        elif collection:
            ns = namespace or ""  # a list without a namespace is across all namespaces
        else:
            ns = namespace or "default"
        return info.group, info.plural, ns

    async def _call(self, reqs: list[RecordedRequest], call: Awaitable[_T]) -> _T:
        try:
            out = await call
        except KubeAPIError as exc:
            for r in reqs:
                self._record(_with_status(r, exc.status))
            raise
        except Exception:
            for r in reqs:
                self._record(_with_status(r, 0))
            raise
        for r in reqs:
            self._record(r)
        return out

    def _owner_checks(self, kind: str, obj: dict[str, Any], name: str, ns: str) -> list[RecordedRequest]:
        """Admission checks of OwnerReferencesPermissionEnforcement for a write of ``obj``."""
        refs = (obj.get("metadata") or {}).get("ownerReferences")
        if refs is None:
            return []
        group, plural, _ = self._target(kind, ns)
        out = [RecordedRequest("delete", group, plural, ns, name, implied=True)] if name else []
        for ref in refs:
            if ref.get("blockOwnerDeletion") and ref.get("kind") in KINDS:
                owner = KINDS[ref["kind"]]
                owner_ns = ns if owner.namespaced else ""
                out.append(RecordedRequest("update", owner.group, f"{owner.plural}/finalizers", owner_ns, ref.get("name", ""),
                                           implied=True))
        return out

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        group, plural, ns = self._target(kind, namespace, collection=True)
        return await self._call([RecordedRequest("list", group, plural, ns)], self.inner.list(kind, namespace, label_selector))

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        group, plural, ns = self._target(kind, namespace)
        return await self._call([RecordedRequest("get", group, plural, ns, name)], self.inner.get(kind, name, namespace))

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        group, plural, ns = self._target(kind, (obj.get("metadata") or {}).get("namespace"))
        reqs = [RecordedRequest("create", group, plural, ns), *self._owner_checks(kind, obj, "", ns)]
        return await self._call(reqs, self.inner.create(kind, obj))

    async def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        group, plural, ns = self._target(kind, namespace)
        reqs = [RecordedRequest("patch", group, f"{plural}/status" if status else plural, ns, name)]
        if not status:
            reqs += self._owner_checks(kind, patch, name, ns)
        return await self._call(reqs, self.inner.patch(kind, name, patch, namespace, status=status))

    async def replace(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        group, plural, ns = self._target(kind, meta.get("namespace"))
        reqs = [RecordedRequest("update", group, plural, ns, meta.get("name", ""))]
        return await self._call(reqs, self.inner.replace(kind, obj))

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        group, plural, ns = self._target(kind, namespace)
        await self._call([RecordedRequest("delete", group, plural, ns, name)], self.inner.delete(kind, name, namespace, uid=uid))

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        meta = pod.get("metadata") or {}
        req = RecordedRequest("create", "", "pods/binding", meta.get("namespace") or "default", meta.get("name", ""))
        await self._call([req], self.inner.bind(pod, node_name))

    async def evict(self, pod: Pod | KubeObject) -> None:
        meta = pod.get("metadata") or {}
        req = RecordedRequest("create", "", "pods/eviction", meta.get("namespace") or "default", meta.get("name", ""))
        await self._call([req], self.inner.evict(pod))

    async def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        """The inner watch; records its initial ``list`` once the first event (or error) arrives
        and the ``watch`` once the initial list is done (SYNCED)."""
        group, plural, _ = self._target(kind, None, collection=True)
        listed = watching = False
        try:
            async for ev in self.inner.watch(kind):
                if not listed:
                    listed = True
                    self._record(RecordedRequest("list", group, plural))
                if ev.type == "SYNCED" and not watching:
                    watching = True
                    self._record(RecordedRequest("watch", group, plural))
                yield ev
        except KubeAPIError as exc:
            self._record(RecordedRequest("watch" if listed else "list", group, plural, status=exc.status))
            raise


def _with_status(req: RecordedRequest, status: int) -> RecordedRequest:
    return RecordedRequest(req.verb, req.group, req.resource, req.namespace, req.name, status, req.implied)


def unique(requests: Iterable[RecordedRequest]) -> list[tuple[str, str, str, str]]:
    """Distinct ``(verb, group, resource, namespace)`` of ``requests``, sorted (for reports)."""
    return sorted({(r.verb, r.group, r.resource, r.namespace) for r in requests})
