"""The KakaoCloud cloud provider (``karpy.cloudprovider`` entry point ``kakaocloud``).

Launches BCS virtual machines that join a Kubernetes Engine cluster with kubeadm, following the
KakaoCloud Karpenter provider guide (karpy seed 004) and ``reference/kakaocloud-api.md``:

* **Instance types** - BCS flavors (:mod:`karpy_kakaocloud.instancetypes`), on-demand only, zones
  from the KCNodeClass's subnets, prices from a table (:mod:`karpy_kakaocloud.pricing`).
* **Create** - resolves the KCNodeClass (:mod:`karpy_kakaocloud.nodeclass`), picks the cheapest
  available offering the NodeClaim allows, creates a bootstrap token through the KubeClient port,
  ``POST /api/v1/instances`` with the worker image, flavor, subnet of the zone, security group
  *names*, key pair, root volume and base64 user data (:mod:`karpy_kakaocloud.bootstrap`), then
  signs the VM (:mod:`karpy_kakaocloud.ownership`) and waits for ``active``. VM names are
  ``karpy-<cluster tag>-<NodeClaim name>`` (<= 57 characters).
* **Idempotent create** - before each POST a fresh launch nonce is written on the NodeClaim
  (annotation ``karpenter.kakaocloud.com/launch-nonce``) and signed into the pending record, and a
  POST is never repeated while it may have acted: after a 5xx, a read timeout or a dropped
  connection the VM is looked up by name and nonce (``create_lookups`` times); a retried create
  (restart, cancelled task) looks it up the same way first. Only a VM whose pending record carries
  the NodeClaim's current nonce, or whose signed record names the NodeClaim, created no earlier than
  the NodeClaim (``clock_skew``), is adopted; a record found on two VMs (a copy) is adopted by
  neither and both are reported.
* **Provider IDs** - ``kakaocloud:///<zone>/<instance id>``.
* **Ownership** - ``get``/``list``/``delete`` act only on VMs whose description verifies under a
  keyring key for this cluster and NodeClaim. ``list`` also returns VMs left with a unique pending
  record (a crash between create and signing, or a POST whose answer was lost) with their real
  ``created_at`` as creation time, so core garbage collection terminates them after its grace
  period like any other leaked VM. Any other VM that looks like karpy's (unsigned with a
  karpy name, tampered, another cluster's, an unknown key) and any Kubernetes Engine VM
  (``is_k8se``) is never deleted: it is reported with a Warning event (through the KubeClient
  port), a log line and the counter :attr:`KakaoCloudProvider.unowned_instances`
  (``karpy_kakaocloud_unowned_instances_total{reason, action}``), and ``delete``/``get`` answer
  :class:`UnownedInstanceError` (a ``NodeClaimNotFoundError``: karpy's instance is gone as far as
  karpy can tell, so the NodeClaim finalizes and the foreign VM stays).
* **Delete** - ``DELETE /api/v1/instances/{id}`` then GET every ``delete_poll_interval`` until 404,
  then ``NodeClaimNotFoundError`` (karpy's signal that termination is complete).

Credentials, keyring and cluster CA come from options, the environment (the Helm chart's) or
Secrets read through the KubeClient port; see :func:`create_plugin`. Secrets never appear in logs,
events, reprs or exception messages.
"""

from __future__ import annotations

try:
    import httpx  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        "karpy's KakaoCloud cloud provider needs the 'kakaocloud' extra (httpx): pip install 'karpy[kakaocloud]'"
    ) from exc

import asyncio
import logging
import os
import time
from collections import Counter as Tally
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, Counter

from karpy_core.apis.labels import CAPACITY_TYPE_ON_DEMAND, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.launch import LaunchChoice, cheapest_launchable, launch_constraints, stamp_launched
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy, ready_repair_policies
from karpy_core.errors import (
    CloudProviderError,
    ConfigurationError,
    CreateError,
    KubeAPIError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy_core.logs import fields
from karpy_kakaocloud import bootstrap, ownership
from karpy_kakaocloud.apis import GROUP, MAX_NODEPOOL_NAME
from karpy_kakaocloud.client import (
    NOT_SENT,
    KakaoCloudAPIError,
    KakaoCloudClient,
    KakaoCloudNotFoundError,
    KakaoCloudRetryableError,
)
from karpy_kakaocloud.credentials import (
    DEFAULT_KEYRING_FILE,
    ENV_KEYRING_FILE,
    Credentials,
    Keyring,
    credentials_from_env,
    credentials_from_secret,
    keyring_from_file,
    keyring_from_secret,
)
from karpy_kakaocloud.errors import CreatePhase, create_failure
from karpy_kakaocloud.instancetypes import arch_of, flavor_gpus, instance_types_from_flavors
from karpy_kakaocloud.launch import LaunchPlan, instance_body, vm_name
from karpy_kakaocloud.nodeclass import ResolvedNodeClass, resolve, write_status
from karpy_kakaocloud.options import KakaoCloudOptions
from karpy_kakaocloud.ownership import NONCE_ANNOTATION, Ownership, Verdict
from karpy_kakaocloud.pricing import PriceTable
from karpy_kakaocloud.settings import KakaoCloudSettings, endpoints_from_env

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.contract import CloseHook, CloudProviderPlugin, PrepareHook
    from karpy_core.kube.port import KubeClient

    class _Contract(CloudProviderPlugin, PrepareHook, CloseHook, Protocol):
        """The hooks this plugin implements (mypy checks their signatures)."""

__all__ = ["MAX_NODEPOOL_NAME", "KakaoCloudProvider", "UnownedInstanceError", "create_plugin"]

log = logging.getLogger("karpy.kakaocloud")

DEFAULT_CA_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
SUPPORTED_NODE_CLASSES: list[tuple[str, str]] = [(GROUP, "KCNodeClass")]


class UnownedInstanceError(NodeClaimNotFoundError):
    """The instance behind a NodeClaim exists but karpy cannot prove it owns it (``code`` names why:
    ``unsigned``, ``tampered``, ``foreign-cluster``, ``unknown-key``, ``k8se``, ``pending``,
    ``other-nodeclaim``, ``duplicate-record``, ``copied-record``, ``predates-nodeclaim``,
    ``outside-launch-window``). It is left alone and reported."""


def _created_at(instance: Mapping[str, Any]) -> float | None:
    """The VM's ``created_at`` (ISO-8601 UTC, reference §2) as seconds since the epoch, or None."""
    text = instance.get("created_at")
    if not isinstance(text, str) or not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return ts.timestamp()


class KakaoCloudProvider:
    """The plugin object; build it with :func:`create_plugin`. See the module docstring.

    Args:
        cluster_name: Kubernetes Engine cluster name (the chart's ``clusterName``).
        kube: the KubeClient (KCNodeClass, Secrets, Events, bootstrap tokens). May be given later
            with :meth:`bind_kube`.
        credentials / keyring: given directly, else read from the environment/files, else from
            the Secrets ``credentials_secret`` / ``keyring_secret`` in ``namespace``.
        settings: endpoints and delays.
        price_table: USD/hour table (default: the linear rule).
        cluster_ca_pem: the cluster CA (PEM); default read from ``cluster_ca_file``.
        cluster_uid: the cluster identity signed into ownership records; default the KE cluster ``id``.
        max_pods: pods per node (kubelet ``--max-pods``).
        sleep: how to wait between polls (``asyncio.sleep``).
        clock: seconds since the epoch (``time.time``).
    """

    def __init__(
        self,
        *,
        cluster_name: str,
        kube: KubeClient | None = None,
        credentials: Credentials | None = None,
        keyring: Keyring | None = None,
        keyring_file: str | None = None,
        namespace: str = "karpenter-kakaocloud",
        credentials_secret: str = "kakaocloud-credentials",
        keyring_secret: str = "karpenter-sigkey",
        settings: KakaoCloudSettings | None = None,
        price_table: PriceTable | None = None,
        cluster_ca_pem: str | None = None,
        cluster_ca_file: str = DEFAULT_CA_FILE,
        cluster_uid: str | None = None,
        max_pods: int = 110,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
        transport: Any = None,
    ):
        if not cluster_name:
            raise ConfigurationError("kakaocloud provider: option cluster_name (the Kubernetes Engine cluster) is required")
        self.cluster_name = cluster_name
        self.kube = kube
        self.namespace = namespace
        self.settings = settings or KakaoCloudSettings()
        self.prices = price_table or PriceTable()
        self.max_pods = max_pods
        self._credentials = credentials
        self._keyring = keyring
        self._keyring_file = keyring_file
        self._credentials_secret = credentials_secret
        self._keyring_secret = keyring_secret
        self._ca_pem = cluster_ca_pem
        self._ca_file = cluster_ca_file
        self._cluster_uid = cluster_uid
        self._sleep = sleep
        self._clock = clock
        self._transport = transport
        self._client: KakaoCloudClient | None = None
        self._init_lock = asyncio.Lock()
        self._nodeclasses: dict[str, tuple[float, ResolvedNodeClass]] = {}
        self._flavors: tuple[float, list[dict[str, Any]]] | None = None
        self._reported: set[tuple[str, str]] = set()
        self._recorder: Any = None
        self.metrics_registry = CollectorRegistry()
        self.unowned_instances = Counter(
            "karpy_kakaocloud_unowned_instances_total",
            "KakaoCloud VMs karpy refused to manage because their ownership record did not verify, by reason and action.",
            ["reason", "action"],
            registry=self.metrics_registry,
        )
        self.reported: dict[str, str] = {}
        """instance id -> reason, for every VM reported as not owned (latest reason)."""
        self._served_on: list[CollectorRegistry] = []
        """The registries :attr:`unowned_instances` is registered on (``karpy_prepare``)."""

    def __repr__(self) -> str:
        return f"KakaoCloudProvider(cluster_name={self.cluster_name!r})"

    # ------------------------------------------------------------------ wiring
    def bind_kube(self, kube: KubeClient) -> None:
        """Give the provider its KubeClient (the simulator builds its cluster after the provider)."""
        self.kube = kube
        self._recorder = None

    @property
    def client(self) -> KakaoCloudClient:
        if self._client is None:
            raise ConfigurationError("kakaocloud provider: not initialised yet (call a hook first)")
        return self._client

    @property
    def keyring(self) -> Keyring:
        if self._keyring is None:
            raise ConfigurationError("kakaocloud provider: the keyring is not loaded yet")
        return self._keyring

    def _need_kube(self, what: str) -> KubeClient:
        if self.kube is None:
            raise ConfigurationError(f"kakaocloud provider: {what} needs a KubeClient (option kube, or bind_kube())")
        return self.kube

    async def _ensure(self) -> None:
        """Load credentials, keyring and cluster identity once (retried on the next call after a failure)."""
        if self._client is not None and self._keyring is not None and self._cluster_uid:
            return
        async with self._init_lock:
            if self._keyring is None:
                path = self._keyring_file or os.environ.get(ENV_KEYRING_FILE)
                if path or (self.kube is None and Path(DEFAULT_KEYRING_FILE).exists()):
                    self._keyring = keyring_from_file(path or DEFAULT_KEYRING_FILE)
                else:
                    self._keyring = await keyring_from_secret(
                        self._need_kube("reading the keyring Secret"), namespace=self.namespace, name=self._keyring_secret
                    )
            if self._client is None:
                creds = self._credentials or credentials_from_env()
                if creds is None:
                    creds = await credentials_from_secret(
                        self._need_kube("reading the credentials Secret"), namespace=self.namespace, name=self._credentials_secret
                    )
                self._client = KakaoCloudClient(creds, settings=self.settings, clock=self._clock, sleep=self._sleep,
                                                transport=self._transport)
            if not self._cluster_uid:
                cluster = await self._client.get_cluster(self.cluster_name)
                if not cluster.get("id"):
                    raise CloudProviderError(f"Kubernetes Engine cluster {self.cluster_name!r} has no id", code="ClusterNotFound")
                self._cluster_uid = str(cluster["id"])

    @property
    def cluster_identity(self) -> str:
        return self._cluster_uid or ""

    @property
    def cluster_tag(self) -> str:
        return ownership.cluster_tag(self.cluster_identity)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    # ------------------------------------------------------------------ reporting
    async def _report(self, instance: dict[str, Any], reason: str, action: str, nodeclaim: str | None = None) -> None:
        iid = str(instance.get("id") or "")
        self.unowned_instances.labels(reason=reason, action=action).inc()
        self.reported[iid] = reason
        if (iid, reason) in self._reported:
            return
        self._reported.add((iid, reason))
        message = (
            f"KakaoCloud VM {iid} ({instance.get('name') or 'unnamed'}) is not provably owned by this cluster "
            f"({reason}); karpy will not {action} it"
        )
        log.warning(message, extra={"instance_id": iid, "reason": reason, "action": action})
        if self.kube is not None:
            from karpy_core.kube.events import EventRecorder
            from karpy_core.utils.clock import RealClock

            if self._recorder is None:
                self._recorder = EventRecorder(self.kube, RealClock())
            obj = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": nodeclaim or instance.get("name") or iid}}
            try:
                await self._recorder.publish(obj, "Warning", "UnownedInstance", message)
            except Exception as exc:  # events are best effort
                log.debug("could not publish event: %s", type(exc).__name__)

    def _classify(self, instance: dict[str, Any]) -> Verdict:
        return ownership.verify(instance.get("description"), self.keyring, self.cluster_identity, str(instance.get("id") or ""))

    def _looks_like_ours(self, instance: dict[str, Any]) -> bool:
        return str(instance.get("name") or "").startswith("karpy-") or str(instance.get("description") or "").startswith("karpy1:")

    # ------------------------------------------------------------------ node classes
    async def _nodeclass(self, name: str) -> ResolvedNodeClass:
        """Resolve (cached ``nodeclass_ttl`` seconds, keyed by name and generation) and write status."""
        kube = self._need_kube("reading KCNodeClass objects")
        try:
            obj = await kube.get("KCNodeClass", name)
        except KubeAPIError as exc:
            if exc.status == 404:
                raise NodeClassNotReadyError(f"KCNodeClass {name} does not exist", code="NodeClassNotFound") from None
            raise
        key = f"{name}/{obj['metadata'].get('generation', 1)}"
        cached = self._nodeclasses.get(key)
        now = self._clock()
        if cached and now - cached[0] < self.settings.nodeclass_ttl:
            return cached[1]
        resolved = await resolve(self.client, obj, self.cluster_name)
        self._nodeclasses = {k: v for k, v in self._nodeclasses.items() if not k.startswith(name + "/")}
        self._nodeclasses[key] = (now, resolved)
        try:
            await write_status(kube, resolved, obj, now)
        except KubeAPIError as exc:
            log.warning("could not write KCNodeClass status", extra={"KCNodeClass": {"name": name}, "error": exc})
        return resolved

    async def reconcile_nodeclass(self, name: str) -> ResolvedNodeClass:
        """Resolve ``name`` now (ignoring the cache), write its status and return it."""
        await self._ensure()
        self._nodeclasses = {k: v for k, v in self._nodeclasses.items() if not k.startswith(name + "/")}
        return await self._nodeclass(name)

    async def _all_flavors(self) -> list[dict[str, Any]]:
        now = self._clock()
        if self._flavors is None or now - self._flavors[0] >= self.settings.catalog_ttl:
            self._flavors = (now, await self.client.list_flavors())
        return self._flavors[1]

    async def _instance_types(self, nc: ResolvedNodeClass) -> list[InstanceType]:
        flavors = await self._all_flavors()
        return instance_types_from_flavors(
            flavors, zones=nc.zones, prices=self.prices, root_volume_gib=nc.root_volume_gib, max_pods=self.max_pods
        )

    # ------------------------------------------------------------------ NodeClaim views
    def _launched_claim(
        self, nodeclaim: NodeClaim, it: InstanceType, zone: str, instance_id: str, image_id: str | None
    ) -> NodeClaim:
        return stamp_launched(nodeclaim, it, zone=zone, capacity_type=CAPACITY_TYPE_ON_DEMAND,
                              provider_id=bootstrap.provider_id(zone, instance_id), image_id=image_id)

    async def _claim_from_instance(self, instance: dict[str, Any], verdict: Verdict) -> NodeClaim:
        from karpy_core.apis.nodeclaim import NodeClaim

        zone = str(instance.get("availability_zone") or "")
        flavor = instance.get("flavor") or {}
        spec: dict[str, Any] = {"requirements": [], "nodeClassRef": {"group": GROUP, "kind": "KCNodeClass", "name": "unknown"}}
        meta: dict[str, Any] = {"name": verdict.nodeclaim, "labels": {}}
        created = _created_at(instance)
        if created is not None:
            meta["creationTimestamp"] = datetime.fromtimestamp(created, UTC).isoformat()
        if self.kube is not None and verdict.nodeclaim:
            try:
                existing = await self.kube.get("NodeClaim", verdict.nodeclaim)
                spec = existing.get("spec") or spec
                meta["labels"] = dict((existing.get("metadata") or {}).get("labels") or {})
            except KubeAPIError:
                pass
        labels = meta["labels"]
        labels.update({LABEL_ZONE: zone, LABEL_CAPACITY_TYPE: "on-demand"})
        if flavor.get("name"):
            labels[LABEL_INSTANCE_TYPE] = str(flavor["name"])
            labels["kubernetes.io/arch"] = arch_of(flavor)
        status: dict[str, Any] = {"providerID": bootstrap.provider_id(zone, str(instance["id"]))}
        if flavor.get("vcpus") and flavor.get("memory_mb"):
            cap = {"cpu": str(int(flavor["vcpus"])), "memory": f"{int(flavor['memory_mb'])}Mi", "pods": str(self.max_pods)}
            if flavor_gpus(flavor):
                cap["nvidia.com/gpu"] = str(flavor_gpus(flavor))
            status["capacity"] = cap
        if (instance.get("image") or {}).get("id"):
            status["imageID"] = instance["image"]["id"]
        return NodeClaim.model_validate({"metadata": meta, "spec": spec, "status": status})

    # ------------------------------------------------------------------ hooks: identity
    @hookimpl
    def karpy_name(self) -> str:
        return "kakaocloud"

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        """Take karpy's context: its kube client when the ``kube`` option named none
        (:meth:`bind_kube`), and the controller's registry, on which
        ``karpy_kakaocloud_unowned_instances_total`` is served (once per registry)."""
        if self.kube is None and context.kube is not None:
            self.bind_kube(context.kube)
        registry = context.registry
        if registry is not None and all(r is not registry for r in self._served_on):
            registry.register(self.unowned_instances)
            self._served_on.append(registry)

    @hookimpl
    async def karpy_close(self) -> None:
        """:meth:`aclose`."""
        await self.aclose()

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        return list(SUPPORTED_NODE_CLASSES)

    @hookimpl
    def karpy_repair_policies(self) -> list[RepairPolicy]:
        """Karpenter's defaults: a Node ``Ready=False`` or ``Unknown`` for 30 minutes is repaired."""
        return ready_repair_policies(1800.0)

    # ------------------------------------------------------------------ hooks: instance types
    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Every non-bare-metal flavor as an instance type, for the NodePool's KCNodeClass.

        Returns ``[]`` (logged) when the NodePool name is longer than 38 characters, its NodeClass
        is not a KCNodeClass, or the KCNodeClass is not Ready (see its status conditions).
        """
        name = nodepool.metadata.name or ""
        if len(name) > MAX_NODEPOOL_NAME:
            log.warning(f"NodePool name is {len(name)} characters; KakaoCloud NodePools allow at most {MAX_NODEPOOL_NAME}",
                        extra=fields(nodepool=name))
            return []
        ref = nodepool.spec.template.spec.node_class_ref
        if (ref.group, ref.kind) != SUPPORTED_NODE_CLASSES[0]:
            log.warning("nodeClassRef is not a KCNodeClass",
                        extra=fields(nodepool=name, nodeClassRef={"group": ref.group, "kind": ref.kind}))
            return []
        await self._ensure()
        try:
            nc = await self._nodeclass(ref.name)
        except NodeClassNotReadyError as exc:
            log.warning("NodeClass not ready", extra=fields(nodepool=name, error=exc))
            return []
        if not nc.ready:
            log.warning("KCNodeClass is not Ready",
                        extra=fields(nodepool=name, KCNodeClass={"name": ref.name}, reason=nc.not_ready_message()))
            return []
        return await self._instance_types(nc)

    # ------------------------------------------------------------------ hooks: create
    def _choose(self, nodeclaim: NodeClaim, types: list[InstanceType]) -> LaunchChoice:
        return cheapest_launchable(types, launch_constraints(nodeclaim), what="KakaoCloud flavor")

    async def _find_by_name(self, vm_name: str) -> list[dict[str, Any]]:
        return [i for i in await self.client.list_instances(name=vm_name) if i.get("name") == vm_name and not i.get("is_k8se")]

    async def _adopt(
        self, vm_name: str, claim_name: str, nonce: str | None, claim_created: float | None
    ) -> tuple[dict[str, Any], bool] | None:
        """An earlier attempt's VM for this NodeClaim: (instance, already signed) or None.

        Adopted: a VM signed for ``claim_name`` (the earliest if several), else the one VM whose
        pending record carries ``nonce`` (the NodeClaim's current launch nonce) and that was
        created within the nonce's launch window (:meth:`_in_launch_window`). Either must have
        been created no earlier than ``claim_created - clock_skew`` (seconds since the epoch; None
        skips the check). Records that fail these rules are reported (``predates-nodeclaim``;
        ``duplicate-record`` when one pending record sits on several VMs) and never adopted;
        pending records of other nonces (earlier POSTs) are left to garbage collection."""
        signed: list[tuple[float, str, dict[str, Any]]] = []
        pending: list[dict[str, Any]] = []
        for inst in sorted(await self._find_by_name(vm_name), key=lambda i: str(i.get("id"))):
            if str(inst.get("status") or "").lower() == "deleting":
                continue
            v = self._classify(inst)
            if v.nodeclaim != claim_name or v.ownership not in (Ownership.OWNED, Ownership.PENDING):
                continue
            if v.ownership is Ownership.PENDING and (nonce is None or v.nonce != nonce):
                continue
            if v.ownership is Ownership.PENDING and not self._in_launch_window(inst, v):
                await self._report(inst, "outside-launch-window", "adopt", claim_name)
                continue
            created = _created_at(inst)
            if claim_created is not None and (created is None or created < claim_created - self.settings.clock_skew):
                await self._report(inst, "predates-nodeclaim", "adopt", claim_name)
                continue
            if v.ownership is Ownership.OWNED:
                signed.append((created or 0.0, str(inst.get("id")), inst))
            else:
                pending.append(inst)
        if signed:
            return min(signed, key=lambda t: (t[0], t[1]))[2], True
        if len(pending) == 1:
            return pending[0], False
        for inst in pending:
            await self._report(inst, "duplicate-record", "adopt", claim_name)
        return None

    def _in_launch_window(self, inst: Mapping[str, Any], v: Verdict) -> bool:
        """Whether a pending VM's ``created_at`` lies in ``[t - clock_skew, t + request_timeout +
        clock_skew]``, ``t`` the POST time its nonce carries: the only time karpy's POST can have
        made it. An older VM renamed and given a copied record falls before the window."""
        t = ownership.nonce_time(v.nonce or "")
        created = _created_at(inst)
        if t is None or created is None:
            return False
        skew = self.settings.clock_skew
        return t - skew <= created <= t + self.settings.request_timeout + skew

    async def _record_nonce(self, nodeclaim: NodeClaim, nonce: str) -> None:
        """Write the launch nonce on the stored NodeClaim before a POST (merge patch).

        A NodeClaim that is not stored (404: the conformance kit calls create directly) keeps the
        nonce only in this call and in the returned NodeClaim.

        Raises:
            CreateError: ``NonceNotRecorded`` when the API server refuses the patch (no POST then).
        """
        nodeclaim.metadata.annotations = {**nodeclaim.metadata.annotations, NONCE_ANNOTATION: nonce}
        if self.kube is None:
            return
        try:
            await self.kube.patch("NodeClaim", nodeclaim.metadata.name or "", {"metadata": {"annotations": {NONCE_ANNOTATION: nonce}}})
        except KubeAPIError as exc:
            if exc.status == 404:
                return
            raise CreateError(f"NodeClaim {nodeclaim.metadata.name}: cannot record the launch nonce: {exc.status} {exc.reason}",
                              condition_reason="NonceNotRecorded") from None

    async def _sign(self, instance_id: str, claim_name: str) -> None:
        desc = ownership.describe_owned(self.keyring, self.cluster_identity, instance_id, claim_name)
        await self.client.update_instance_description(instance_id, desc)

    async def _discard(self, instance_id: str) -> None:
        """Delete a VM this very call created (no ownership proof needed: we hold its id)."""
        try:
            await self.client.delete_instance(instance_id)
        except KakaoCloudAPIError as exc:
            log.error("could not delete the VM after a failed launch; it stays and is reported unsigned by list",
                      extra={"instance": instance_id, "error": exc})

    async def _wait_active(self, instance_id: str) -> dict[str, Any]:
        deadline = self._clock() + self.settings.build_timeout
        misses = 0
        while True:
            try:
                inst = await self.client.get_instance(instance_id)
                misses = 0
            except KakaoCloudNotFoundError:
                misses += 1
                if misses > self.settings.not_found_tolerance:
                    raise CreateError(f"VM {instance_id} disappeared after create", condition_reason="InstanceVanished") from None
                inst = {}
            status = str(inst.get("status") or inst.get("vm_state") or "").lower()
            if status == "active":
                return inst
            if status == "error":
                raise CreateError(f"VM {instance_id} went to status error", condition_reason="InstanceFailed", code="error")
            if self._clock() >= deadline:
                raise CreateError(f"VM {instance_id} not active after {self.settings.build_timeout:.0f}s (status {status or 'unknown'})",
                                  condition_reason="InstanceNotActive")
            await self._sleep(self.settings.build_poll_interval)

    async def _ca_hash(self) -> str:
        """The kubeadm ``--discovery-token-ca-cert-hash`` of the cluster CA: ``cluster_ca_pem``,
        else ``cluster_ca_file`` (the service account's ``ca.crt`` in a pod), else, when that
        default file is absent, the CA the controller's own kube client trusts (Karpenter's
        ``CLUSTER_CA_BUNDLE`` default: "taken from the controller's TLS configuration").

        Raises:
            CreateError: ``ClusterCAUnavailable``, no CA from any of these.
        """
        pem = self._ca_pem
        if pem is None:
            try:
                pem = Path(self._ca_file).read_text()
            except OSError as exc:
                pem = self._kube_client_ca() if self._ca_file == DEFAULT_CA_FILE else None
                if pem is None:
                    raise CreateError(f"cannot read the cluster CA {self._ca_file}: {exc.strerror}",
                                      condition_reason="ClusterCAUnavailable") from None
        return bootstrap.ca_cert_hash(pem)

    def _kube_client_ca(self) -> str | None:
        """PEM of the CA the KubeClient verifies the API server with (kubeconfig
        ``certificate-authority(-data)``), or None (in-memory client, no CA configured)."""
        access = getattr(getattr(self.kube, "transport", None), "access", None)
        if access is None:
            return None
        if getattr(access, "ca_data", None):
            return str(access.ca_data)
        ca_file = getattr(access, "ca_file", None)
        if ca_file:
            try:
                return Path(ca_file).read_text()
            except OSError:
                return None
        return None

    async def _admit(self, nodeclaim: NodeClaim) -> ResolvedNodeClass:
        """The checks before any launch: name lengths, credentials, a Ready KCNodeClass.

        Raises:
            CreateError: ``NodePoolNameTooLong``, or an API failure (:func:`create_failure`).
            NodeClassNotReadyError: not a KCNodeClass, or not Ready (``code`` = Ready reason).
        """
        claim = nodeclaim.metadata.name or ""
        pool = nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")
        if len(pool) > MAX_NODEPOOL_NAME:
            raise CreateError(f"NodePool {pool}: name longer than {MAX_NODEPOOL_NAME} characters",
                              condition_reason="NodePoolNameTooLong")
        try:
            await self._ensure()
        except KakaoCloudAPIError as exc:
            raise create_failure(exc) from None
        if not claim or len(claim) > ownership.max_nodeclaim_name(self.keyring.active_key_id):
            raise CreateError(f"NodeClaim {claim!r}: name must be 1..{ownership.max_nodeclaim_name(self.keyring.active_key_id)} characters",
                              condition_reason="NodePoolNameTooLong")
        ref = nodeclaim.spec.node_class_ref
        if (ref.group, ref.kind) != SUPPORTED_NODE_CLASSES[0]:
            raise NodeClassNotReadyError(f"NodeClaim {claim}: nodeClassRef {ref.group}/{ref.kind} is not a KCNodeClass")
        nc = await self._nodeclass(ref.name)
        if not nc.ready:
            raise NodeClassNotReadyError(f"KCNodeClass {ref.name} is not Ready: {nc.not_ready_message()}",
                                         code=nc.conditions["Ready"].reason)
        return nc

    async def _plan(self, nodeclaim: NodeClaim, nc: ResolvedNodeClass, choice: LaunchChoice, name: str) -> LaunchPlan:
        """Gather what the VM body needs: flavor, worker image, subnet, endpoint, CA hash and a
        fresh bootstrap token (created last, so a failed check leaves no token behind).

        Raises:
            CreateError: ``NoWorkerImage``, ``NoAPIEndpoint``, ``ClusterCAUnavailable``, ``BootstrapTokenFailed``.
        """
        it, offering = choice.instance_type, choice.offering
        flavor = next(f for f in await self._all_flavors() if f.get("name") == it.name)
        image = nc.image_for(arch_of(flavor), gpu=flavor_gpus(flavor) > 0)
        if image is None:
            raise CreateError(f"no Kubernetes Engine {nc.kubernetes_version} worker image for {it.name}",
                              condition_reason="NoWorkerImage")
        subnet = sorted(sid for sid, z in nc.subnets if z == offering.zone)[0]
        kube = self._need_kube("creating bootstrap tokens")
        endpoint = nc.cluster.get("control_plane_endpoint") or {}
        if not endpoint.get("host"):
            raise CreateError(f"cluster {self.cluster_name} reports no control_plane_endpoint", condition_reason="NoAPIEndpoint")
        ca_hash = await self._ca_hash()
        try:
            token = await bootstrap.create_bootstrap_token(
                kube, now=self._clock(), ttl=self.settings.bootstrap_token_ttl, description=f"karpy NodeClaim {nodeclaim.metadata.name}"
            )
        except KubeAPIError as exc:
            raise CreateError(f"cannot create a bootstrap token Secret: {exc.status} {exc.reason}",
                              condition_reason="BootstrapTokenFailed") from None
        return LaunchPlan(vm_name=name, zone=offering.zone, flavor=flavor, image=image, subnet_id=subnet,
                          endpoint=f"{endpoint['host']}:{endpoint.get('port') or 6443}", token=token, ca_hash=ca_hash,
                          max_pods=self.max_pods)

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one VM for ``nodeclaim`` (see the module docstring): admit, adopt an earlier
        attempt's VM if there is one, else pick the cheapest offering (core launch kernel), plan,
        POST once per nonce, sign and wait for ``active``.

        Raises:
            NodeClassNotReadyError: the KCNodeClass is missing or not Ready (``code`` = Ready reason).
            InsufficientCapacityError: no flavor/offering fits, or the API reports a capacity/quota error.
            CreateError: reasons ``NodePoolNameTooLong``, ``AuthenticationFailed``, ``InvalidRequest``,
                ``APIUnavailable``, ``OwnershipRecordFailed``, ``InstanceFailed``, ``InstanceNotActive``,
                ``NonceNotRecorded`` (the launch nonce could not be written on the NodeClaim; nothing POSTed)...
        """
        claim = nodeclaim.metadata.name or ""
        nc = await self._admit(nodeclaim)
        created = nodeclaim.metadata.creation_timestamp
        claim_created = created.timestamp() if created is not None else None
        try:
            types = await self._instance_types(nc)
            name = vm_name(self.cluster_tag, claim)
            adopted = await self._adopt(name, claim, nodeclaim.metadata.annotations.get(NONCE_ANNOTATION), claim_created)
        except KakaoCloudAPIError as exc:
            raise create_failure(exc) from None
        by_name = {it.name: it for it in types}
        if adopted is not None:
            inst, signed = adopted
            return await self._finish(nodeclaim, inst, signed, by_name, created_now=False)
        plan = await self._plan(nodeclaim, nc, self._choose(nodeclaim, types), name)
        inst = await self._post_create(nodeclaim, instance_body(nodeclaim, nc, plan), name, claim_created)
        return await self._finish(nodeclaim, inst, False, by_name, created_now=True, image_id=plan.image["id"])

    async def _post_create(
        self, nodeclaim: NodeClaim, body: dict[str, Any], vm_name: str, claim_created: float | None
    ) -> dict[str, Any]:
        """POST once per launch nonce; never again while that POST may have acted.

        Before each POST a fresh nonce goes on the NodeClaim and into the pending record. A POST
        refused before acting (429, ``NotSent``) is repeated with a new nonce after a backoff. After an
        answer that leaves the outcome open (5xx, read timeout, dropped connection) the VM is
        looked up by name and nonce up to ``create_lookups`` times; found, it is adopted. Only
        when every lookup answered and none found it is the POST repeated (new nonce): a VM of the
        earlier POST that shows up later carries a stale nonce, is never adopted and is garbage
        collected. A lookup that fails ends the call (``APIUnavailable``); the next reconcile
        looks the nonce up again before any POST.

        Raises:
            CreateError / InsufficientCapacityError: as :meth:`karpy_create`.
        """
        claim = nodeclaim.metadata.name or ""
        last: KakaoCloudAPIError | None = None
        for attempt in range(max(1, self.settings.max_attempts)):
            nonce = ownership.new_nonce(self._clock())
            await self._record_nonce(nodeclaim, nonce)
            body["description"] = ownership.describe_pending(self.keyring, self.cluster_identity, claim, nonce)
            try:
                return await self.client.create_instance(body)
            except KakaoCloudRetryableError as exc:
                last = exc
                if exc.status == 429 or exc.code == NOT_SENT:  # refused before acting: POST again, new nonce
                    await self._sleep(min(self.settings.backoff_max, self.settings.backoff_base * 2**attempt))
                    continue
                log.warning("kakaocloud: create of %s failed (%s %s), looking it up before anything else",
                            vm_name, exc.status, exc.code)
            except KakaoCloudAPIError as exc:
                raise create_failure(exc, CreatePhase.POST) from None
            for look in range(max(1, self.settings.create_lookups)):
                try:
                    adopted = await self._adopt(vm_name, claim, nonce, claim_created)
                except KakaoCloudAPIError as exc:
                    raise CreateError(f"create of {vm_name} failed ({last}) and the lookup failed too ({exc}); "
                                      f"retried later", condition_reason="APIUnavailable", code=last.code) from None
                if adopted is not None:
                    return adopted[0]
                await self._sleep(min(self.settings.backoff_max, self.settings.backoff_base * 2 ** (attempt + look)))
        assert last is not None
        raise CreateError(str(last), condition_reason="APIUnavailable", code=last.code)

    async def _finish(
        self, nodeclaim: NodeClaim, inst: dict[str, Any], signed: bool, types: Mapping[str, InstanceType], *,
        created_now: bool, image_id: str | None = None,
    ) -> NodeClaim:
        claim = nodeclaim.metadata.name or ""
        iid = str(inst["id"])
        if not signed:
            try:
                await self._sign(iid, claim)
            except KakaoCloudAPIError as exc:
                await self._discard(iid)
                raise CreateError(f"VM {iid}: could not write its ownership record: {exc}",
                                  condition_reason="OwnershipRecordFailed", code=exc.code) from None
        try:
            active = await self._wait_active(iid)
        except CreateError as exc:
            if exc.condition_reason in ("InstanceFailed",):
                await self._discard(iid)
            raise
        except KakaoCloudAPIError as exc:
            raise create_failure(exc) from None
        flavor_name = (active.get("flavor") or {}).get("name") or ""
        it = types.get(flavor_name)
        zone = str(active.get("availability_zone") or "")
        if it is None:
            raise CreateError(f"VM {iid} has flavor {flavor_name!r}, which the KCNodeClass does not offer",
                              condition_reason="UnknownFlavor")
        log.info("launched VM", extra=fields(nodeclaim=claim, instance=iid, **{"instance-type": it.name, "zone": zone}))
        return self._launched_claim(nodeclaim, it, zone, iid, image_id or (active.get("image") or {}).get("id"))

    # ------------------------------------------------------------------ hooks: get / list / delete
    async def _owned_instance(self, provider_id: str, action: str, claim_name: str | None) -> tuple[dict[str, Any], Verdict]:
        parsed = bootstrap.parse_provider_id(provider_id)
        if parsed is None:
            raise NodeClaimNotFoundError(f"{provider_id!r} is not a KakaoCloud provider ID")
        await self._ensure()
        try:
            inst = await self.client.get_instance(parsed[1])
        except KakaoCloudNotFoundError:
            raise NodeClaimNotFoundError(f"KakaoCloud VM {parsed[1]} does not exist") from None
        if inst.get("is_k8se"):
            await self._report(inst, "k8se", action, claim_name)
            raise UnownedInstanceError(f"VM {parsed[1]} belongs to a Kubernetes Engine node pool", code="k8se")
        v = self._classify(inst)
        reason = None if v.owned else v.ownership.value
        if v.ownership is Ownership.PENDING and action == "delete":
            # a VM left before signing (garbage collection): karpy's when its record is unique
            same = [i for i in await self.client.list_instances(name=str(inst.get("name") or ""))
                    if not i.get("is_k8se") and i.get("description") == inst.get("description")]
            reason = await self._pending_problem(inst, v, {str(inst.get("description")): max(1, len(same))})
        if reason is None and claim_name is not None and v.nodeclaim != claim_name:
            reason = "other-nodeclaim"
        if reason is not None:
            await self._report(inst, reason, action, claim_name or v.nodeclaim)
            raise UnownedInstanceError(f"VM {parsed[1]} is not provably owned by this cluster ({reason}); left alone", code=reason)
        return inst, v

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim view of an owned VM.

        Raises:
            NodeClaimNotFoundError: no such VM; ``UnownedInstanceError`` when it is not provably ours.
        """
        inst, v = await self._owned_instance(provider_id, "get", None)
        return await self._claim_from_instance(inst, v)

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        """Every VM whose ownership record verifies for this cluster (KE VMs skipped via
        ``is_k8se``). VMs that look like karpy's but do not verify are reported, never returned."""
        await self._ensure()
        out = []
        instances = sorted(await self.client.list_instances(), key=lambda i: str(i.get("id")))
        records = Tally(str(i.get("description")) for i in instances if not i.get("is_k8se"))
        for inst in instances:
            if inst.get("is_k8se"):
                continue
            v = self._classify(inst)
            if v.ownership is Ownership.PENDING:
                reason = await self._pending_problem(inst, v, records)
                if reason is not None:
                    await self._report(inst, reason, "garbage-collect", v.nodeclaim)
                    continue
            if v.ownership in (Ownership.OWNED, Ownership.PENDING):
                if str(inst.get("status") or "").lower() != "deleting":
                    out.append(await self._claim_from_instance(inst, v))
            elif self._looks_like_ours(inst):
                await self._report(inst, v.ownership.value, "garbage-collect", v.nodeclaim)
        return out

    async def _pending_problem(self, inst: dict[str, Any], v: Verdict, records: Mapping[str, int]) -> str | None:
        """Why a VM with a verifying pending record is not karpy's to terminate, or None.

        ``duplicate-record``: the same record sits on another live VM (one of them is a copy and
        karpy cannot tell which). ``outside-launch-window``: created outside the window of the
        nonce's POST time (:meth:`_in_launch_window`). ``copied-record``: the NodeClaim it names launched another VM
        from the POST of this very nonce (karpy POSTs once per nonce, so this one is a copy).
        """
        if records.get(str(inst.get("description")), 0) > 1:
            return "duplicate-record"
        if not self._in_launch_window(inst, v):
            return "outside-launch-window"
        if self.kube is not None and v.nodeclaim:
            try:
                claim = await self.kube.get("NodeClaim", v.nodeclaim)
            except KubeAPIError:
                return None
            annotations = (claim.get("metadata") or {}).get("annotations") or {}
            pid = (claim.get("status") or {}).get("providerID") or ""
            if annotations.get(NONCE_ANNOTATION) == v.nonce and pid and not pid.endswith("/" + str(inst.get("id"))):
                return "copied-record"
        return None

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the NodeClaim's VM after verifying ownership, wait for 404, then raise
        ``NodeClaimNotFoundError`` (karpy's "done"). Returns None when the wait times out (karpy
        calls again).

        Raises:
            NodeClaimNotFoundError: the VM is gone (or ``UnownedInstanceError``: not ours, left alone).
        """
        pid = nodeclaim.status.provider_id
        claim = nodeclaim.metadata.name or ""
        if not pid:
            raise NodeClaimNotFoundError(f"NodeClaim {claim}: no providerID")
        inst, _ = await self._owned_instance(pid, "delete", claim)
        iid = str(inst["id"])
        if str(inst.get("status") or "").lower() != "deleting" and not await self.client.delete_instance(iid):
            raise NodeClaimNotFoundError(f"KakaoCloud VM {iid} is gone")
        log.info("deleting VM", extra=fields(nodeclaim=claim, instance=iid))
        deadline = self._clock() + self.settings.delete_timeout
        while self._clock() < deadline:
            await self._sleep(self.settings.delete_poll_interval)
            try:
                await self.client.get_instance(iid)
            except KakaoCloudNotFoundError:
                raise NodeClaimNotFoundError(f"KakaoCloud VM {iid} terminated") from None
        return None

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``ImageDrift`` when the VM's image is no longer one of the KCNodeClass's worker images,
        ``SubnetDrift`` when its zone has no KCNodeClass subnet; ``""`` otherwise or when unknown."""
        image = nodeclaim.status.image_id
        zone = nodeclaim.metadata.labels.get(LABEL_ZONE)
        try:
            await self._ensure()
            nc = await self._nodeclass(nodeclaim.spec.node_class_ref.name)
        except (CloudProviderError, KubeAPIError):
            return ""
        if not nc.ready:
            return ""
        if image and nc.images and image not in {i.get("id") for i in nc.images}:
            return "ImageDrift"
        if zone and zone not in nc.zones:
            return "SubnetDrift"
        return ""


if TYPE_CHECKING:
    _conforms: type[_Contract] = KakaoCloudProvider


# --------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------

def create_plugin(options: Mapping[str, Any] | None = None) -> KakaoCloudProvider:
    """Entry-point factory (``karpy.cloudprovider`` group, name ``kakaocloud``).

    Options (all optional except ``cluster_name``, which defaults to env ``CLUSTER_NAME``):

    * ``cluster_name`` - the Kubernetes Engine cluster; ``cluster_uid`` overrides the identity
      signed into ownership records (default: the KE cluster ``id``).
    * ``kube`` - a KubeClient (else call ``bind_kube``).
    * ``credentials`` (:class:`Credentials`) - else env ``KAKAOCLOUD_APPLICATION_CREDENTIAL_ID``/
      ``_SECRET``/``KAKAOCLOUD_REGION``/``KAKAOCLOUD_PROJECT_ID``, else the Secret
      ``credentials_secret`` (``kakaocloud-credentials``) in ``namespace`` (``karpenter-kakaocloud``).
    * ``keyring`` (:class:`Keyring`) - else ``keyring_file`` / env ``KAKAOCLOUD_KEYRING_FILE`` /
      ``/etc/karpy/keyring/keyring.json``, else the Secret ``keyring_secret`` (``karpenter-sigkey``).
    * ``price_table`` (:class:`PriceTable`) or ``price_table_file`` (CSV/YAML).
    * ``cluster_ca_pem`` or ``cluster_ca_file`` (the service account ``ca.crt``).
    * ``settings`` (:class:`KakaoCloudSettings`) or any of its fields (``endpoints``,
      ``backoff_base``, ``delete_poll_interval``...). Without ``endpoints``, env
      ``KAKAOCLOUD_ENDPOINTS`` (loopback emulators only, :func:`~karpy_kakaocloud.settings.endpoints_from_env`).
    * ``max_pods``, ``sleep``, ``clock``, ``transport`` (httpx transport, tests).

    Raises:
        ConfigurationError: unknown option, no cluster name, unreadable price table, a bad ``KAKAOCLOUD_ENDPOINTS``.
    """
    opts = KakaoCloudOptions.parse(options)
    kwargs: dict[str, Any] = {}
    for name in ("kube", "credentials", "keyring", "keyring_file", "namespace", "credentials_secret", "keyring_secret",
                 "cluster_ca_pem", "cluster_ca_file", "cluster_uid", "max_pods", "sleep", "clock", "transport"):
        if name in opts.model_fields_set and getattr(opts, name) is not None:
            kwargs[name] = getattr(opts, name)
    settings = opts.resolved_settings()
    if not settings.endpoints:
        settings.endpoints = endpoints_from_env()
    return KakaoCloudProvider(cluster_name=opts.resolved_cluster_name(), settings=settings,
                              price_table=opts.resolved_price_table(), **kwargs)
