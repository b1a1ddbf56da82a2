"""Entry point of the AWS cloud-provider plugin (``karpy.cloudprovider`` group, name ``aws``).

:func:`create_plugin` builds an :class:`AWSProvider` whose hooks implement
:mod:`karpy_core.cloudprovider.hookspecs` against EC2 (Karpenter ``pkg/cloudprovider/cloudprovider.go``):

* ``karpy_get_instance_types(nodepool)``: the NodePool's EC2NodeClass is read (kube client, or the
  ``nodeclasses`` option), resolved (:mod:`karpy_aws.nodeclass`), and turned into instance types
  (:mod:`karpy_aws.instancetypes`) restricted to types some resolved AMI can run. A NodeClass that
  is missing or not Ready yields ``[]`` (nothing can launch; the reason is in its conditions).
* ``karpy_create``: cheapest compatible offerings -> one CreateFleet (:mod:`karpy_aws.launch`);
  providerID ``aws:///<zone>/<instance-id>``. Instances are tagged ``karpenter.sh/nodeclaim``;
  create first looks for a pending/running instance with the claim's tag and adopts it, so a
  controller killed between CreateFleet and the status write never launches a second instance.
* ``karpy_get``/``karpy_list``/``karpy_delete``: DescribeInstances/TerminateInstances, only on
  instances tagged for this cluster; ``list`` uses distinct filter names (moto keeps only the last
  of repeated names): ``tag-key=karpenter.sh/nodepool``,
  ``tag:karpenter.k8s.aws/ec2nodeclass=*``, ``tag:eks:eks-cluster-name=<cluster>``.
* ``karpy_is_drifted``: static NodeClass hash, AMI, security groups, subnet (:mod:`karpy_aws.drift`).

The class here only wires the parts together and implements the hooks; each job lives in its own
module: options (:mod:`karpy_aws.options`), EC2NodeClass access (:mod:`karpy_aws.nodeclasses`),
create (:mod:`karpy_aws.create`, on the core launch kernel), the instance inventory
(:mod:`karpy_aws.instances`), drift (:mod:`karpy_aws.drift`) and the background loops
(:mod:`karpy_aws.nodeclass`, :mod:`karpy_aws.tagging`, :mod:`karpy_aws.interruption`).

Importing this module needs the ``aws`` extra (aioboto3).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

try:
    import aioboto3  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        "karpy's AWS cloud provider needs the 'aws' extra (aioboto3): pip install 'karpy[aws]'"
    ) from exc

from karpy_aws.apis import GROUP, EC2NodeClass
from karpy_aws.cache import UnavailableOfferings
from karpy_aws.capacitytype import CapacityTypeSync
from karpy_aws.clients import AWSClients
from karpy_aws.create import create_instance
from karpy_aws.drift import drift_reason
from karpy_aws.errors import call
from karpy_aws.events import EventRecorder
from karpy_aws.instances import PROVIDER_ID_SCHEME, InstanceInventory, parse_provider_id
from karpy_aws.instancetypes import InstanceTypeData, InstanceTypeProvider
from karpy_aws.interruption import InterruptionHandler, InterruptionMetrics
from karpy_aws.launch import Launcher
from karpy_aws.nodeclass import EC2NodeClassController, NodeClassResolver
from karpy_aws.nodeclasses import NodeClassSource
from karpy_aws.options import AWSOptions
from karpy_aws.pricing import PricingProvider
from karpy_aws.region import resolve_region
from karpy_aws.tagging import InstanceTagging
from karpy_core.apis.labels import LABEL_RESERVATION_ID
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy, ready_repair_policies
from karpy_core.errors import CloudProviderError, ConfigurationError, NodeClassNotReadyError
from karpy_core.featuregates import FeatureGates
from karpy_core.utils.clock import now_function
from karpy_core.utils.loops import every

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.contract import FullCloudProviderPlugin
    from karpy_core.kube.port import KubeClient

__all__ = ["AWSOptions", "AWSProvider", "PROVIDER_ID_SCHEME", "SUPPORTED_NODE_CLASSES", "create_plugin", "parse_provider_id"]

log = logging.getLogger("karpy.aws")

SUPPORTED_NODE_CLASSES: list[tuple[str, str]] = [(GROUP, "EC2NodeClass")]


class AWSProvider:
    """The AWS plugin. Build it with :func:`create_plugin`; close it with :meth:`aclose`.

    Attributes:
        events: an :class:`~karpy_aws.events.EventRecorder` of warnings for humans.
        unavailable: the unavailable-offerings cache (ICE, spot role).
        resolver: the EC2NodeClass resolver.
        nodeclass_source: EC2NodeClass access (:class:`~karpy_aws.nodeclasses.NodeClassSource`).
        inventory: owned instances (:class:`~karpy_aws.instances.InstanceInventory`).
        kube: the KubeClient used to read EC2NodeClasses (assignable, e.g. to a simulator's cluster).
    """

    def __init__(self, *, region: str, cluster_name: str, cluster_endpoint: str, endpoint_url: str | None = None,
                 interruption_queue: str | None = None, vm_memory_overhead_percent: float = 0.075,
                 kube: KubeClient | None = None, nodeclasses: Mapping[str, EC2NodeClass] | None = None, clock: Any = None,
                 session: Any = None, kubernetes_version: str = "1.33", cluster_cidr: str = "10.100.0.0/16",
                 ca_bundle: str = "", instance_type_data: InstanceTypeData | None = None, dry_run: bool = True,
                 security_group_drift: bool = True, use_pricing_api: bool = True, reserved_enis: int = 0):
        self.region = region
        self.cluster_name = cluster_name
        self.cluster_endpoint = cluster_endpoint
        self.interruption_queue = interruption_queue
        self._prepare_lock = asyncio.Lock()
        self.nodeclasses: dict[str, EC2NodeClass] = dict(nodeclasses or {})
        self.now = now_function(clock, "aws provider")
        self.security_group_drift = security_group_drift
        self.clients = AWSClients(region=region, endpoint_url=endpoint_url, session=session)
        self.events = EventRecorder(kube=kube, now=self.now)
        self.unavailable = UnavailableOfferings(self.now)
        self.metrics_registry = CollectorRegistry()
        """The provider's own metrics (interruption), served by the controller with its registry."""
        self.interruption_metrics = InterruptionMetrics(self.metrics_registry)
        self.pricing = PricingProvider(clients=self.clients, region=region, now=self.now, use_pricing_api=use_pricing_api)
        self.instance_types = InstanceTypeProvider(clients=self.clients, region=region, pricing=self.pricing,
                                                   unavailable=self.unavailable, now=self.now, data=instance_type_data,
                                                   vm_memory_overhead_percent=vm_memory_overhead_percent,
                                                   reserved_enis=reserved_enis)
        self.resolver = NodeClassResolver(clients=self.clients, cluster_name=cluster_name, region=region,
                                          kubernetes_version=kubernetes_version, now=self.now, events=self.events,
                                          dry_run=dry_run)
        self.nodeclass_source = NodeClassSource(kube=kube, nodeclasses=self.nodeclasses, resolver=self.resolver,
                                                instance_types=self.instance_types)
        self.inventory = InstanceInventory(clients=self.clients, cluster_name=cluster_name, region=region,
                                           instance_types=self.instance_types)
        self.capacity_reservations = self.resolver.capacity_reservations
        """Capacity reservations' available counts, shared by status resolution, offerings and launches."""
        self.instance_types.capacity_reservations = self.capacity_reservations
        self.launcher = Launcher(clients=self.clients, cluster_name=cluster_name, cluster_endpoint=cluster_endpoint,
                                 ca_bundle=ca_bundle, cluster_cidr=cluster_cidr, unavailable=self.unavailable,
                                 events=self.events, now=self.now, capacity_reservations=self.capacity_reservations)
        self._feature_gates = FeatureGates()
        self._served_on: list[CollectorRegistry] = []
        """The registries the plugin's metrics are registered on (``karpy_prepare``)."""

    @property
    def feature_gates(self) -> FeatureGates:
        """Karpenter's ``FEATURE_GATES`` (the CloudProvider facade sets them): with
        ``ReservedCapacity=false`` no capacity reservation is listed, offered or launched into."""
        return self._feature_gates

    @feature_gates.setter
    def feature_gates(self, gates: FeatureGates) -> None:
        self._feature_gates = gates
        self.resolver.reserved_capacity = self.instance_types.reserved_capacity = gates.ReservedCapacity
        self.resolver.invalidate()

    async def discover_cluster_endpoint(self) -> None:
        """Find what the settings left unset, before the controller starts (``karpy_start``, which
        ``karpy controller`` awaits once; :meth:`karpy_create` too, so a plugin used without the CLI launches the same way):
        with ``cluster_endpoint`` (``CLUSTER_ENDPOINT``) empty, EKS ``DescribeCluster`` on
        ``cluster_name`` gives the endpoint, and the CA bundle when ``ca_bundle``
        (``CLUSTER_CA_BUNDLE``) is empty too (Karpenter ``operator.go`` does the same at start).

        Raises:
            ConfigurationError: DescribeCluster failed or named no endpoint (the message says to
                set CLUSTER_ENDPOINT).
        """
        if self.cluster_endpoint:
            return
        async with self._prepare_lock:
            if self.cluster_endpoint:
                return
            eks = await self.clients.get("eks")
            try:
                answer = await call(eks.describe_cluster, "DescribeCluster", subject=f"cluster {self.cluster_name}",
                                    name=self.cluster_name)
            except CloudProviderError as exc:
                raise ConfigurationError(f"aws provider: CLUSTER_ENDPOINT is not set and discovering it failed ({exc}); "
                                         "set CLUSTER_ENDPOINT (--cluster-endpoint)") from exc
            cluster = answer.get("cluster") or {}
            endpoint = str(cluster.get("endpoint") or "")
            if not endpoint:
                raise ConfigurationError(f"aws provider: EKS DescribeCluster {self.cluster_name} named no endpoint; "
                                         "set CLUSTER_ENDPOINT (--cluster-endpoint)")
            if not self.launcher.ca_bundle:
                self.launcher.ca_bundle = str((cluster.get("certificateAuthority") or {}).get("data") or "")
            self.cluster_endpoint = self.launcher.cluster_endpoint = endpoint
            log.info("discovered the cluster endpoint with EKS DescribeCluster",
                     extra={"cluster": self.cluster_name, "endpoint": endpoint})

    @property
    def kube(self) -> KubeClient | None:
        """The KubeClient EC2NodeClasses are read from (None: the static ``nodeclasses`` only)."""
        return self.nodeclass_source.kube

    @kube.setter
    def kube(self, kube: KubeClient | None) -> None:
        self.nodeclass_source.kube = kube

    async def aclose(self) -> None:
        """Close the AWS clients."""
        await self.clients.close()

    @property
    def pricing_note(self) -> str:
        return self.pricing.describe()

    def nodeclass_controller(self) -> EC2NodeClassController:
        """A reconcile loop writing EC2NodeClass status through the kube client.

        Raises:
            ConfigurationError: the plugin has no kube client.
        """
        if self.kube is None:
            raise ConfigurationError("aws provider: the EC2NodeClass controller needs the 'kube' option")
        return EC2NodeClassController(kube=self.kube, resolver=self.resolver, events=self.events)

    def capacity_type_sync(self) -> CapacityTypeSync:
        """The reserved -> on-demand relabelling loop (:mod:`karpy_aws.capacitytype`).

        Raises:
            ConfigurationError: the plugin has no kube client.
        """
        if self.kube is None:
            raise ConfigurationError("aws provider: the capacity-type controller needs the 'kube' option")
        return CapacityTypeSync(kube=self.kube, resolver=self.resolver, nodeclass=self.get_nodeclass)

    def interruption_handler(self) -> InterruptionHandler:
        """The SQS interruption handler for ``interruption_queue``.

        Raises:
            ConfigurationError: no ``interruption_queue`` or no kube client.
        """
        if not self.interruption_queue or self.kube is None:
            raise ConfigurationError("aws provider: interruption handling needs the 'interruption_queue' and 'kube' options")
        return InterruptionHandler(clients=self.clients, queue=self.interruption_queue, kube=self.kube,
                                   unavailable=self.unavailable, events=self.events, metrics=self.interruption_metrics,
                                   now=self.now)

    # ------------------------------------------------------------------ NodeClass access
    async def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass ``name`` (unresolved), or None (see :meth:`NodeClassSource.get`)."""
        return await self.nodeclass_source.get(name)

    async def resolved_nodeclass(self, name: str) -> EC2NodeClass:
        """The EC2NodeClass ``name`` with a fresh status (see :meth:`NodeClassSource.resolved`).

        Raises:
            NodeClassNotReadyError: missing, or not Ready.
        """
        return await self.nodeclass_source.resolved(name)

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def karpy_name(self) -> str:
        return "aws"

    @hookimpl
    def karpy_prepare(self, context: ProviderContext) -> None:
        """Take karpy's context: its kube client when the ``kube`` option named none (EC2NodeClass
        reads, events), the feature gates (:attr:`feature_gates`), and the controller's registry,
        on which the interruption metrics are served (once per registry)."""
        if self.kube is None and context.kube is not None:
            self.kube = self.events.kube = context.kube
        self.feature_gates = context.feature_gates
        registry = context.registry
        if registry is not None and all(r is not registry for r in self._served_on):
            for collector in self.interruption_metrics.collectors():
                registry.register(collector)
            self._served_on.append(registry)

    @hookimpl
    async def karpy_start(self) -> None:
        """:meth:`discover_cluster_endpoint`."""
        await self.discover_cluster_endpoint()

    @hookimpl
    async def karpy_close(self) -> None:
        """:meth:`aclose`."""
        await self.aclose()

    @hookimpl
    def karpy_pricing_note(self) -> str:
        """:attr:`pricing_note`."""
        return self.pricing_note

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        return list(SUPPORTED_NODE_CLASSES)

    @hookimpl
    def karpy_controllers(self) -> list[ControllerLoop]:
        """Background loops while leading: EC2NodeClass status (every 60 s), instance tagging after
        registration (:mod:`karpy_aws.tagging`, every 5 s), with ``ReservedCapacity`` the
        reserved -> on-demand relabelling of NodeClaims whose reservation ended
        (:mod:`karpy_aws.capacitytype`, every 60 s) and, when an ``interruption_queue`` is
        configured, the SQS interruption poller (20 s long polls).
        Garbage collection of leaked instances is core's (it runs for every provider)."""
        if self.kube is None:
            return []

        async def nodeclasses() -> None:
            ctl = self.nodeclass_controller()
            await every(60.0, "aws.nodeclass", ctl.reconcile)

        async def tagging() -> None:
            ctl = InstanceTagging(self)
            await every(5.0, "aws.nodeclaim.tagging", ctl.reconcile)

        loops: list[ControllerLoop] = [("aws.nodeclass", nodeclasses), ("aws.nodeclaim.tagging", tagging)]
        if self.feature_gates.ReservedCapacity:
            sync = self.capacity_type_sync()

            async def capacity_type() -> None:
                await every(60.0, sync.name, sync.reconcile)

            loops.append((sync.name, capacity_type))
        if self.interruption_queue:
            handler = self.interruption_handler()

            async def interruption() -> None:
                await every(0.0, "aws.interruption", handler.poll_once)

            loops.append(("aws.interruption", interruption))
        return loops

    @hookimpl
    def karpy_repair_policies(self) -> list[RepairPolicy]:
        """Karpenter AWS: a node whose Ready condition is False or Unknown for 30 min is repaired."""
        return ready_repair_policies(1800)

    @hookimpl
    async def karpy_get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """Every instance type the NodePool's EC2NodeClass can run (some AMI matches), including
        types with no available offering; ``[]`` when the NodeClass is missing or not Ready."""
        name = nodepool.spec.template.spec.node_class_ref.name
        try:
            nc = await self.resolved_nodeclass(name)
        except NodeClassNotReadyError:
            return []
        types, _ = await self.nodeclass_source.types_for(nc)
        return types

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance for ``nodeclaim`` (see :mod:`karpy_aws.create`).

        Raises:
            NodeClassNotReadyError: the EC2NodeClass is missing or not Ready.
            InsufficientCapacityError: nothing compatible is available, or every override failed.
            CreateError: bad requirements, or AWS refused the launch (reason = AWS code).
        """
        await self.discover_cluster_endpoint()
        return await create_instance(nodeclaim, nodeclasses=self.nodeclass_source, inventory=self.inventory,
                                     launcher=self.launcher)

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """The instance behind ``provider_id`` as a NodeClaim.

        Raises:
            NodeClaimNotFoundError: unknown, malformed, or terminated/terminating instance.
        """
        return await self.inventory.to_nodeclaim(await self.inventory.describe_live(provider_id))

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        """Every live (pending/running/stopping/stopped) instance tagged for this cluster by karpy."""
        return await self.inventory.list_owned()

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate the instance; ``NodeClaimNotFoundError`` once it is gone or terminating.

        Raises:
            NodeClaimNotFoundError: the instance does not exist, is shutting down or terminated.
            CloudProviderError: the instance is not tagged for this cluster (never touched).
        """
        await self.inventory.terminate(nodeclaim)
        reservation = nodeclaim.metadata.labels.get(LABEL_RESERVATION_ID)
        if reservation:
            self.capacity_reservations.mark_terminated(reservation)

    async def _describe_provider_id(self, provider_id: str) -> dict[str, Any]:
        _, instance_id = parse_provider_id(provider_id)
        return await self.inventory.describe(instance_id)

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """A drift reason (:mod:`karpy_aws.drift`) or ``""``; ``""`` too when the EC2NodeClass is
        missing or not Ready."""
        try:
            nc = await self.resolved_nodeclass(nodeclaim.spec.node_class_ref.name)
        except NodeClassNotReadyError:
            return ""
        return await drift_reason(nodeclaim, nc, self._describe_provider_id, security_group_drift=self.security_group_drift)


if TYPE_CHECKING:
    _conforms: type[FullCloudProviderPlugin] = AWSProvider  # mypy checks every hook's signature


def create_plugin(options: Mapping[str, Any] | None = None) -> AWSProvider:
    """Entry-point factory (``karpy.cloudprovider`` group, name ``aws``).

    Options: the fields of :class:`~karpy_aws.options.AWSOptions` - region (default: the SDK's,
    :func:`karpy_aws.region.resolve_region`), cluster_name (required), cluster_endpoint (default:
    EKS DescribeCluster, see :meth:`AWSProvider.discover_cluster_endpoint`),
    endpoint_url (loopback emulator only), interruption_queue, vm_memory_overhead_percent, reserved_enis, kube,
    nodeclasses (``{name: EC2NodeClass}`` when there is no kube client), clock, session,
    kubernetes_version, cluster_cidr, ca_bundle, instance_type_data, dry_run,
    security_group_drift, use_pricing_api.

    Raises:
        ConfigurationError: unknown option, no region found, missing cluster_name, non-loopback endpoint_url.
    """
    opts = AWSOptions.parse(options)
    if not opts.cluster_name:
        opts.check_required()
    opts = opts.model_copy(update={"region": resolve_region(opts.region)})
    opts.check_required()
    kwargs = opts.fields_dict()
    nodeclasses = kwargs.pop("nodeclasses", None) or {}
    parsed = {k: v if isinstance(v, EC2NodeClass) else EC2NodeClass.model_validate(v) for k, v in dict(nodeclasses).items()}
    kwargs["cluster_endpoint"] = opts.cluster_endpoint or ""
    return AWSProvider(nodeclasses=parsed, **kwargs)
