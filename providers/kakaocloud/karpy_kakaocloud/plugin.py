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

The hooks here are the thin layer; each job lives in its own module: create
(:mod:`karpy_kakaocloud.create`, :func:`~karpy_kakaocloud.create.create_vm`), the owned VMs
(:mod:`karpy_kakaocloud.instances`, :class:`~karpy_kakaocloud.instances.InstanceInventory`),
ownership records (:mod:`karpy_kakaocloud.ownership`) and VMs karpy cannot prove it owns
(:mod:`karpy_kakaocloud.unowned`), drift (:mod:`karpy_kakaocloud.drift`), KCNodeClass resolution
(:mod:`karpy_kakaocloud.nodeclass`) and its cache with the flavors' (:mod:`karpy_kakaocloud.catalog`).
None of them imports this module: they take the frozen :class:`~karpy_kakaocloud.deps.KakaoCloudDeps`
(client, keyring, cluster identity, settings, kube client, clock, sleep, max pods, cluster CA) that
:meth:`KakaoCloudProvider.deps` builds.

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
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry

from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.options import missing_setting
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy, ready_repair_policies
from karpy_core.errors import CloudProviderError, ConfigurationError, KubeAPIError, NodeClassNotReadyError, NotFoundError
from karpy_core.logs import fields
from karpy_kakaocloud import ownership
from karpy_kakaocloud.apis import MAX_NODEPOOL_NAME
from karpy_kakaocloud.catalog import Catalog
from karpy_kakaocloud.client import KakaoCloudClient
from karpy_kakaocloud.create import ca_hash, create_vm
from karpy_kakaocloud.credentials import (
    DEFAULT_KEYRING_FILE,
    DEFAULT_REGION,
    ENV_CREDENTIAL_ID,
    ENV_CREDENTIAL_SECRET,
    ENV_KEYRING_FILE,
    ENV_PROJECT_ID,
    ENV_REGION,
    Credentials,
    Keyring,
    credentials_from_env,
    credentials_from_mapping,
    credentials_from_secret,
    keyring_from_file,
    keyring_from_secret,
    keyring_from_secret_data,
    secret_data,
)
from karpy_kakaocloud.deps import DEFAULT_CA_FILE, ClusterCA, KakaoCloudDeps, require_kube
from karpy_kakaocloud.drift import drift_reason
from karpy_kakaocloud.instances import InstanceInventory
from karpy_kakaocloud.nodeclass import SUPPORTED_NODE_CLASSES, ResolvedNodeClass
from karpy_kakaocloud.options import KakaoCloudOptions
from karpy_kakaocloud.pricing import PriceTable
from karpy_kakaocloud.settings import KakaoCloudSettings, endpoints_from_env
from karpy_kakaocloud.unowned import UnownedInstanceError, UnownedReporter

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.contract import CloseHook, CloudProviderPlugin, PrepareHook
    from karpy_core.kube.port import KubeClient

    class _Contract(CloudProviderPlugin, PrepareHook, CloseHook, Protocol):
        """The hooks this plugin implements (mypy checks their signatures)."""

__all__ = ["DEFAULT_CA_FILE", "MAX_NODEPOOL_NAME", "SUPPORTED_NODE_CLASSES", "KakaoCloudProvider", "UnownedInstanceError",
           "create_plugin"]

log = logging.getLogger("karpy.kakaocloud")

_SIMULATION_NOTE = (". karpy simulate --cloud-provider kakaocloud runs the plugin for real: it calls the KakaoCloud API and "
                    "launches real VMs; to simulate KCNodeClass NodePools without a cloud, leave out --cloud-provider (the "
                    "simulated provider serves KCNodeClass; README, \"Simulate your own manifests\")")
"""Ends the message naming what a simulation with the real plugin misses (:meth:`KakaoCloudProvider.karpy_prepare`)."""


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
        self.cluster_name = cluster_name
        """The Kubernetes Engine cluster; ``""`` when nothing gave it: refused by :meth:`karpy_prepare`
        (in a simulation with every other missing source, in one message) and by :meth:`ensure`."""
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
        self.cluster_ca_pem = cluster_ca_pem
        self.cluster_ca_file = cluster_ca_file
        self._cluster_uid = cluster_uid
        self.sleep = sleep
        self.clock = clock
        self._transport = transport
        self._client: KakaoCloudClient | None = None
        self._init_lock = asyncio.Lock()
        self.kube_client_ca_pem: str | None = None
        """The CA karpy's kube client trusts (:attr:`ProviderContext.cluster_ca_pem
        <karpy_core.cloudprovider.context.ProviderContext.cluster_ca_pem>`, ``karpy_prepare``): the
        cluster CA when neither option gives one and the service account's ``ca.crt`` is absent."""
        self.catalog = Catalog(self.prices)
        self.metrics_registry = CollectorRegistry()
        self.unowned = UnownedReporter(self.metrics_registry)
        self.unowned_instances = self.unowned.counter
        """``karpy_kakaocloud_unowned_instances_total{reason, action}``."""
        self.reported = self.unowned.reported
        """instance id -> reason, for every VM reported as not owned (latest reason)."""
        self.inventory = InstanceInventory(self.deps, self.unowned)
        self._simulation = False
        """Prepared by ``karpy simulate`` (:attr:`ProviderContext.simulation
        <karpy_core.cloudprovider.context.ProviderContext.simulation>`): see :meth:`_check_simulation_sources`."""
        self._served_on: list[CollectorRegistry] = []
        """The registries :attr:`unowned_instances` is registered on (``karpy_prepare``)."""

    def __repr__(self) -> str:
        return f"KakaoCloudProvider(cluster_name={self.cluster_name!r})"

    # ------------------------------------------------------------------ wiring
    def bind_kube(self, kube: KubeClient) -> None:
        """Give the provider its KubeClient (the simulator builds its cluster after the provider)."""
        self.kube = kube

    @property
    def client(self) -> KakaoCloudClient:
        """The API client (after :meth:`ensure`).

        Raises:
            ConfigurationError: not initialised yet.
        """
        if self._client is None:
            raise ConfigurationError("kakaocloud provider: not initialised yet (call a hook first)")
        return self._client

    @property
    def keyring(self) -> Keyring:
        """The ownership keyring (after :meth:`ensure`).

        Raises:
            ConfigurationError: not loaded yet.
        """
        if self._keyring is None:
            raise ConfigurationError("kakaocloud provider: the keyring is not loaded yet")
        return self._keyring

    def need_kube(self, what: str) -> KubeClient:
        """The KubeClient (:func:`~karpy_kakaocloud.deps.require_kube`)."""
        return require_kube(self.kube, what)

    async def ensure(self) -> None:
        """Load credentials, keyring and cluster identity once (retried on the next call after a failure)."""
        if self._client is not None and self._keyring is not None and self._cluster_uid:
            return
        if not self.cluster_name:
            raise ConfigurationError(self._missing_cluster_name())
        async with self._init_lock:
            if self._simulation:  # the line karpy_prepare gives when the NodePools are there before it
                problems = self._load_simulation_sources()
                if problems:
                    raise ConfigurationError("; ".join(problems) + _SIMULATION_NOTE)
                await self._check_simulation_sources()  # a kube client without peek: its Secrets
            if self._keyring is None:
                path = self._keyring_file or os.environ.get(ENV_KEYRING_FILE)
                if path or (self.kube is None and await asyncio.to_thread(Path(DEFAULT_KEYRING_FILE).exists)):
                    self._keyring = await asyncio.to_thread(keyring_from_file, path or DEFAULT_KEYRING_FILE)
                else:
                    self._keyring = await keyring_from_secret(
                        self.need_kube("reading the keyring Secret"), namespace=self.namespace, name=self._keyring_secret
                    )
            if self._client is None:
                creds = self._credentials or credentials_from_env()
                if creds is None:
                    creds = await credentials_from_secret(
                        self.need_kube("reading the credentials Secret"), namespace=self.namespace, name=self._credentials_secret
                    )
                self._client = KakaoCloudClient(creds, settings=self.settings, clock=self.clock, sleep=self.sleep,
                                                transport=self._transport)
            if not self._cluster_uid:
                cluster = await self._client.get_cluster(self.cluster_name)
                if not cluster.get("id"):
                    raise CloudProviderError(f"Kubernetes Engine cluster {self.cluster_name!r} has no id", code="ClusterNotFound")
                self._cluster_uid = str(cluster["id"])

    async def _check_simulation_sources(self) -> None:
        """In ``karpy simulate`` (``karpy_prepare`` with ``simulation=True``): refuse, in one message,
        to go on when the keyring or the credentials would be read from a Secret the simulation's
        in-memory cluster does not hold. The plugin runs for real there (it calls the KakaoCloud API
        and launches real VMs, signed with the keyring), so both must come from the options or the
        environment; the Secrets are the controller's sources (the chart mounts them). Without this,
        the run stopped on ``cannot read Secret karpenter-kakaocloud/karpenter-sigkey: 404 NotFound``,
        naming no way to give it. Neither is ever written.

        Raises:
            ConfigurationError: naming each missing source, its option and environment variables,
                and the way to simulate KCNodeClass NodePools without a cloud.
        """
        kube = self.kube
        missing: list[str] = []
        if not self._keyring_given() and kube is not None and not await _has_secret(kube, self.namespace, self._keyring_secret):
            missing.append(self._missing_keyring())
        if not self._credentials_given() and kube is not None \
                and not await _has_secret(kube, self.namespace, self._credentials_secret):
            missing.append(self._missing_credentials())
        if missing:
            raise ConfigurationError("; ".join(missing) + _SIMULATION_NOTE)

    def _serves_a_stored_nodepool(self) -> bool:
        """Whether the kube client holds a NodePool whose NodeClass is a KCNodeClass (read with the
        in-memory cluster's synchronous ``snapshot``, where the CLI stores the manifests' NodePools
        before preparing the plugin; False for a client without it)."""
        snapshot = getattr(self.kube, "snapshot", None)
        if not callable(snapshot):
            return False
        for pool in snapshot("NodePool") or ():
            ref = ((((pool.get("spec") or {}).get("template") or {}).get("spec") or {}).get("nodeClassRef") or {})
            if (ref.get("group"), ref.get("kind")) == SUPPORTED_NODE_CLASSES[0]:
                return True
        return False

    def _load_simulation_sources(self) -> list[str]:
        """In a simulation, load the keyring and the credentials now, from what ``karpy simulate``
        can give (the options, the environment, a Secret among the manifests, which the CLI stores
        in the in-memory cluster before preparing): the problems, one per source that is missing or
        unreadable (a ``keyring_file`` that does not exist, a Secret without its keys). Called by
        :meth:`karpy_prepare`, so ``karpy validate --cloud-provider kakaocloud`` refuses what
        ``karpy simulate`` would, in the same words, and neither reaches the first API call with a
        source missing; and by :meth:`ensure` (a Scenario's NodePools come after the plugin is
        prepared). A kube client without a synchronous ``peek`` (not the in-memory cluster)
        leaves the Secrets to :meth:`_check_simulation_sources` at the first call."""
        peek = getattr(self.kube, "peek", None)
        problems: list[str] = []
        if self._keyring is None:
            path = self._keyring_file or os.environ.get(ENV_KEYRING_FILE)
            given = "option keyring_file" if self._keyring_file else ENV_KEYRING_FILE
            try:
                if path:
                    self._keyring = keyring_from_file(path)
                elif callable(peek):
                    secret = peek("Secret", self._keyring_secret, self.namespace)
                    if secret is None:
                        problems.append(self._missing_keyring())
                    else:
                        data = secret_data(secret, self.namespace, self._keyring_secret)
                        self._keyring = keyring_from_secret_data(data, namespace=self.namespace, name=self._keyring_secret)
            except ConfigurationError as exc:
                problems.append(f"kakaocloud provider: {given + ': ' if path else ''}{exc}")
        if self._credentials is None and self._client is None:
            try:
                self._credentials = credentials_from_env()
                if self._credentials is None and callable(peek):
                    secret = peek("Secret", self._credentials_secret, self.namespace)
                    if secret is None:
                        problems.append(self._missing_credentials())
                    else:
                        data = secret_data(secret, self.namespace, self._credentials_secret)
                        self._credentials = credentials_from_mapping(
                            data, where=f"Secret {self.namespace}/{self._credentials_secret}")
            except ConfigurationError as exc:
                problems.append(f"kakaocloud provider: {exc}")
        return problems

    def _keyring_given(self) -> bool:
        """The keyring comes from an option or ``KAKAOCLOUD_KEYRING_FILE`` (not from a Secret)."""
        return self._keyring is not None or bool(self._keyring_file or os.environ.get(ENV_KEYRING_FILE))

    def _credentials_given(self) -> bool:
        """The application credential comes from an option or the environment (not from a Secret).

        Raises:
            ConfigurationError: ``KAKAOCLOUD_APPLICATION_CREDENTIAL_ID`` is set without its secret."""
        return self._credentials is not None or self._client is not None or credentials_from_env() is not None

    def _missing_cluster_name(self) -> str:
        return str(missing_setting("kakaocloud", "the cluster name (the Kubernetes Engine cluster)", "cluster_name",
                                   simulate="--provider-option cluster_name=NAME", controller="--cluster-name or CLUSTER_NAME"))

    def _missing_keyring(self) -> str:
        return str(missing_setting(
            "kakaocloud", "the ownership-signing keyring (a keyring.json)", "keyring_file",
            simulate="--provider-option keyring_file=PATH",
            controller=f"the Secret {self.namespace}/{self._keyring_secret} the chart mounts (sigKey.secretName), "
                       f"or {ENV_KEYRING_FILE}=PATH"))

    def _missing_credentials(self) -> str:
        return str(missing_setting(
            "kakaocloud", "the application credential", "credentials",
            simulate=f"{ENV_CREDENTIAL_ID} and {ENV_CREDENTIAL_SECRET} in the environment, never on the command line "
                     f"({ENV_REGION}, default {DEFAULT_REGION}, and {ENV_PROJECT_ID} optional)",
            controller=f"the Secret {self.namespace}/{self._credentials_secret} (chart credentials.secretName)"))

    @property
    def cluster_identity(self) -> str:
        """The identity signed into ownership records (``""`` before :meth:`ensure`)."""
        return self._cluster_uid or ""

    @property
    def cluster_tag(self) -> str:
        """The 6-hex-digit tag of :attr:`cluster_identity` in VM names and records."""
        return ownership.cluster_tag(self.cluster_identity)

    async def aclose(self) -> None:
        """Close the API client."""
        if self._client is not None:
            await self._client.aclose()

    @property
    def cluster_ca(self) -> ClusterCA:
        """Where the cluster CA comes from: the options, then the kube client's (see :class:`ClusterCA`)."""
        return ClusterCA(pem=self.cluster_ca_pem, file=self.cluster_ca_file, kube_client_pem=self.kube_client_ca_pem)

    async def _ca_hash(self) -> str:
        """The kubeadm discovery hash of the cluster CA (:func:`karpy_kakaocloud.create.ca_hash`)."""
        return await ca_hash(self.cluster_ca)

    async def deps(self) -> KakaoCloudDeps:
        """:meth:`ensure`, then what the jobs use of the plugin, with the KubeClient it holds now.

        Raises:
            As :meth:`ensure` (credentials, keyring or cluster identity could not be loaded).
        """
        await self.ensure()
        return self._loaded_deps()

    def _loaded_deps(self) -> KakaoCloudDeps:
        """The deps from what is loaded so far.

        Raises:
            ConfigurationError: the client or keyring is not loaded yet."""
        return KakaoCloudDeps(client=self.client, keyring=self.keyring, cluster_identity=self.cluster_identity,
                              cluster_name=self.cluster_name, settings=self.settings, kube=self.kube, clock=self.clock,
                              sleep=self.sleep, max_pods=self.max_pods, cluster_ca=self.cluster_ca)

    # ------------------------------------------------------------------ node classes
    async def nodeclass(self, name: str) -> ResolvedNodeClass:
        """:meth:`Catalog.nodeclass <karpy_kakaocloud.catalog.Catalog.nodeclass>` (after :meth:`ensure`).

        Raises:
            NodeClassNotReadyError: the KCNodeClass does not exist.
            ConfigurationError: no KubeClient, or not initialised yet.
        """
        return await self.catalog.nodeclass(self._loaded_deps(), name)

    async def reconcile_nodeclass(self, name: str) -> ResolvedNodeClass:
        """Resolve ``name`` now (ignoring the cache), write its status and return it."""
        deps = await self.deps()
        self.catalog.forget(name)
        return await self.catalog.nodeclass(deps, name)

    # ------------------------------------------------------------------ hooks: identity
    @hookimpl
    def karpy_name(self) -> str:
        return "kakaocloud"

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        """Take karpy's context: its kube client when the ``kube`` option named none
        (:meth:`bind_kube`), the CA that client trusts (the cluster CA's last fallback,
        :attr:`cluster_ca`), and the controller's registry, on which
        ``karpy_kakaocloud_unowned_instances_total`` is served (once per registry)."""
        if self.kube is None and context.kube is not None:
            self.bind_kube(context.kube)
        if context.cluster_ca_pem is not None:
            self.kube_client_ca_pem = context.cluster_ca_pem
        self._simulation = self._simulation or context.simulation
        # before any API call; a simulation (simulate, and validate, which prepares as simulate does)
        # whose cluster holds a KCNodeClass NodePool names every other missing or unreadable source
        # with it, in one line (a run with none never calls the plugin: it needs no source)
        missing = [] if self.cluster_name else [self._missing_cluster_name()]
        sources = self._load_simulation_sources() if self._simulation and self._serves_a_stored_nodepool() else []
        if missing or sources:
            raise ConfigurationError("; ".join(missing + sources) + (_SIMULATION_NOTE if sources else ""))
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
            # karpy asks only for NodePools whose kind the plugin serves (Karpenter's IsManaged; the
            # simulator's report and cost samples too): this is another caller's mistake
            log.warning(f"NodePool/{name}: no instance types, launches nothing: its nodeClassRef {ref.kind} ({ref.group}) "
                        "is not a KCNodeClass (karpenter.kakaocloud.com)",
                        extra=fields(nodepool=name, nodeClassRef={"group": ref.group, "kind": ref.kind}))
            return []
        deps = await self.deps()
        try:
            nc = await self.catalog.nodeclass(deps, ref.name)
        except NodeClassNotReadyError as exc:
            log.warning("NodeClass not ready", extra=fields(nodepool=name, error=exc))
            return []
        if not nc.ready:
            log.warning("KCNodeClass is not Ready",
                        extra=fields(nodepool=name, KCNodeClass={"name": ref.name}, reason=nc.not_ready_message()))
            return []
        return await self.catalog.instance_types_for(deps, nc)

    # ------------------------------------------------------------------ hooks: create, get, list, delete, drift
    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one VM for ``nodeclaim``: :func:`karpy_kakaocloud.create.create_vm` (the docstring of
        :meth:`~karpy_kakaocloud.create.VMLauncher.create` lists the errors raised and their condition reasons)."""
        return await create_vm(nodeclaim, load=self.deps, catalog=self.catalog, unowned=self.unowned)

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """The NodeClaim view of an owned VM (:meth:`InstanceInventory.get <karpy_kakaocloud.instances.InstanceInventory.get>`).

        Raises:
            NodeClaimNotFoundError: no such VM; ``UnownedInstanceError`` when it is not provably ours.
        """
        return await self.inventory.get(provider_id)

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        """Every VM whose ownership record verifies for this cluster (KE VMs skipped via
        ``is_k8se``). VMs that look like karpy's but do not verify are reported, never returned."""
        return await self.inventory.list_owned()

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Delete the NodeClaim's VM after verifying ownership, wait for 404, then raise
        ``NodeClaimNotFoundError`` (karpy's "done"). Returns None when the wait times out (karpy
        calls again).

        Raises:
            NodeClaimNotFoundError: the VM is gone (or ``UnownedInstanceError``: not ours, left alone).
        """
        await self.inventory.delete(nodeclaim)

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``ImageDrift`` when the VM's image is no longer one of the KCNodeClass's worker images,
        ``SubnetDrift`` when its zone has no KCNodeClass subnet; ``""`` otherwise or when unknown
        (:func:`~karpy_kakaocloud.drift.drift_reason`)."""
        try:
            deps = await self.deps()
            nc = await self.catalog.nodeclass(deps, nodeclaim.spec.node_class_ref.name)
        except (CloudProviderError, KubeAPIError):
            return ""
        return drift_reason(nodeclaim, nc)


async def _has_secret(kube: KubeClient, namespace: str, name: str) -> bool:
    """Whether the Secret ``namespace/name`` exists (read, never written); an API error other than
    404 counts as present, so the read itself reports it."""
    try:
        await kube.get("Secret", name, namespace)
    except NotFoundError:
        return False
    except KubeAPIError:
        return True
    return True


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
