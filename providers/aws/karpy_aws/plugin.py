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
* ``karpy_is_drifted``: static NodeClass hash, AMI, security groups, subnet (see :meth:`AWSProvider.karpy_is_drifted`).

Importing this module needs the ``aws`` extra (aioboto3).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

try:
    import aioboto3  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        "karpy's AWS cloud provider needs the 'aws' extra (aioboto3): pip install 'karpy[aws]'"
    ) from exc

from pydantic import ValidationError

from karpy_aws.apis import AMI, GROUP, EC2NodeClass
from karpy_aws.cache import UnavailableOfferings
from karpy_aws.clients import AWSClients
from karpy_aws.errors import call
from karpy_aws.events import EventRecorder
from karpy_aws.instancetypes import LABEL_ZONE_ID, InstanceTypeData, InstanceTypeProvider
from karpy_aws.interruption import InterruptionHandler
from karpy_aws.launch import TAG_CLUSTER_NAME, TAG_NODECLAIM, TAG_NODECLASS, Launched, Launcher, LaunchRequest
from karpy_aws.nodeclass import (
    INSTANCE_PROFILE_ANNOTATION,
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    EC2NodeClassController,
    NodeClassResolver,
    nodeclass_hash,
)
from karpy_aws.pricing import PricingProvider
from karpy_aws.tagging import InstanceTagging
from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from karpy_core.cloudprovider import hookimpl
from karpy_core.cloudprovider.catalog.aws import AWSCatalogOptions, build_instance_type
from karpy_core.cloudprovider.hookspecs import ControllerLoop
from karpy_core.cloudprovider.launch import ProviderID, launch_constraints, require_launchable, stamp_launched
from karpy_core.cloudprovider.types import InstanceType, RepairPolicy, ready_repair_policies
from karpy_core.errors import (
    CloudProviderError,
    ConfigurationError,
    KubeAPIError,
    NodeClaimNotFoundError,
    NodeClassNotReadyError,
)
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import format_resource_list
from karpy_core.utils.clock import now_function
from karpy_core.utils.loops import every

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.kube.port import KubeClient

__all__ = ["AWSProvider", "create_plugin", "parse_provider_id", "OPTION_NAMES", "SUPPORTED_NODE_CLASSES"]

SUPPORTED_NODE_CLASSES: list[tuple[str, str]] = [(GROUP, "EC2NodeClass")]
PROVIDER_ID_SCHEME = "aws"
_LIVE_STATES = ["pending", "running", "stopping", "stopped"]

OPTION_NAMES = frozenset({
    "region", "cluster_name", "cluster_endpoint", "endpoint_url", "interruption_queue", "vm_memory_overhead_percent",
    "kube", "nodeclasses", "clock", "session", "kubernetes_version", "cluster_cidr", "ca_bundle", "instance_type_data",
    "dry_run", "security_group_drift", "use_pricing_api",
})


def parse_provider_id(provider_id: str) -> tuple[str, str]:
    """``aws:///us-east-1a/i-0abc`` -> ``("us-east-1a", "i-0abc")``.

    Raises:
        NodeClaimNotFoundError: not an AWS provider ID (so delete/get end cleanly).
    """
    pid = ProviderID.parse(provider_id, PROVIDER_ID_SCHEME)
    if pid is None or not pid.instance_id.startswith("i-"):
        raise NodeClaimNotFoundError(f"{provider_id!r} is not an AWS provider ID (aws:///<zone>/<instance-id>)",
                                     code="InvalidInstanceID.Malformed")
    return pid.zone, pid.instance_id


def _tags(instance: Mapping[str, Any]) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in instance.get("Tags") or []}


class AWSProvider:
    """The AWS plugin. Build it with :func:`create_plugin`; close it with :meth:`aclose`.

    Attributes:
        events: an :class:`~karpy_aws.events.EventRecorder` of warnings for humans.
        unavailable: the unavailable-offerings cache (ICE, spot role).
        resolver: the EC2NodeClass resolver.
        kube: the KubeClient used to read EC2NodeClasses (assignable, e.g. to a simulator's cluster).
    """

    def __init__(self, *, region: str, cluster_name: str, cluster_endpoint: str, endpoint_url: str | None = None,
                 interruption_queue: str | None = None, vm_memory_overhead_percent: float = 0.075,
                 kube: KubeClient | None = None, nodeclasses: Mapping[str, EC2NodeClass] | None = None, clock: Any = None,
                 session: Any = None, kubernetes_version: str = "1.33", cluster_cidr: str = "10.100.0.0/16",
                 ca_bundle: str = "", instance_type_data: InstanceTypeData | None = None, dry_run: bool = True,
                 security_group_drift: bool = True, use_pricing_api: bool = True):
        self.region = region
        self.cluster_name = cluster_name
        self.cluster_endpoint = cluster_endpoint
        self.interruption_queue = interruption_queue
        self.kube = kube
        self.nodeclasses: dict[str, EC2NodeClass] = dict(nodeclasses or {})
        self.now = now_function(clock, "aws provider")
        self.security_group_drift = security_group_drift
        self.clients = AWSClients(region=region, endpoint_url=endpoint_url, session=session)
        self.events = EventRecorder(kube=kube, now=self.now)
        self.unavailable = UnavailableOfferings(self.now)
        self.pricing = PricingProvider(clients=self.clients, region=region, now=self.now, use_pricing_api=use_pricing_api)
        self.instance_types = InstanceTypeProvider(clients=self.clients, region=region, pricing=self.pricing,
                                                   unavailable=self.unavailable, now=self.now, data=instance_type_data,
                                                   vm_memory_overhead_percent=vm_memory_overhead_percent)
        self.resolver = NodeClassResolver(clients=self.clients, cluster_name=cluster_name, region=region,
                                          kubernetes_version=kubernetes_version, now=self.now, events=self.events,
                                          dry_run=dry_run)
        self.launcher = Launcher(clients=self.clients, cluster_name=cluster_name, cluster_endpoint=cluster_endpoint,
                                 ca_bundle=ca_bundle, cluster_cidr=cluster_cidr, unavailable=self.unavailable,
                                 events=self.events, now=self.now)

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
        return EC2NodeClassController(kube=self.kube, resolver=self.resolver)

    def interruption_handler(self) -> InterruptionHandler:
        """The SQS interruption handler for ``interruption_queue``.

        Raises:
            ConfigurationError: no ``interruption_queue`` or no kube client.
        """
        if not self.interruption_queue or self.kube is None:
            raise ConfigurationError("aws provider: interruption handling needs the 'interruption_queue' and 'kube' options")
        return InterruptionHandler(clients=self.clients, queue=self.interruption_queue, kube=self.kube,
                                   unavailable=self.unavailable, events=self.events)

    # ------------------------------------------------------------------ NodeClass access
    async def get_nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass ``name`` (unresolved), or None when it does not exist."""
        if self.kube is not None:
            try:
                obj = await self.kube.get("EC2NodeClass", name)
            except KubeAPIError as exc:
                if exc.status == 404:
                    return self.nodeclasses.get(name)
                raise
            try:
                return EC2NodeClass.model_validate(obj)
            except ValidationError as exc:
                raise NodeClassNotReadyError(f"EC2NodeClass {name} is invalid: {exc}") from exc
        return self.nodeclasses.get(name)

    async def resolved_nodeclass(self, name: str) -> EC2NodeClass:
        """The EC2NodeClass ``name`` with a fresh (cached 60 s) status.

        Raises:
            NodeClassNotReadyError: missing, or not Ready (the message carries the failing condition).
        """
        nc = await self.get_nodeclass(name)
        if nc is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name} not found")
        res = await self.resolver.resolve(nc)
        if not res.ready:
            ready = next((c for c in res.nodeclass.status.conditions if c.type == "Ready"), None)
            why = f"{ready.reason}: {ready.message}" if ready else "not resolved"
            raise NodeClassNotReadyError(f"EC2NodeClass {name} is not Ready ({why})", code=ready.reason if ready else None)
        return res.nodeclass

    def _ami_for(self, it: InstanceType, amis: list[AMI]) -> AMI | None:
        for ami in amis:
            reqs = Requirements.of(*(Requirement.new(r.key, r.operator, r.values or ()) for r in ami.requirements))
            if it.requirements.intersects(reqs):
                return ami
        return None

    async def _types_for(self, nc: EC2NodeClass) -> tuple[list[InstanceType], dict[str, AMI]]:
        types = await self.instance_types.list(nc)
        amis: dict[str, AMI] = {}
        out = []
        for it in types:
            ami = self._ami_for(it, nc.status.amis)
            if ami is not None:
                amis[it.name] = ami
                out.append(it)
        return out, amis

    # ------------------------------------------------------------------ hooks
    @hookimpl
    def karpy_name(self) -> str:
        return "aws"

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        return list(SUPPORTED_NODE_CLASSES)

    @hookimpl
    def karpy_controllers(self) -> list[ControllerLoop]:
        """Background loops while leading: EC2NodeClass status (every 60 s), instance tagging after
        registration (:mod:`karpy_aws.tagging`, every 5 s) and, when an ``interruption_queue`` is
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
        types, _ = await self._types_for(nc)
        return types

    @hookimpl
    async def karpy_create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """Launch one instance for ``nodeclaim`` (see :mod:`karpy_aws.launch`).

        Raises:
            NodeClassNotReadyError: the EC2NodeClass is missing or not Ready.
            InsufficientCapacityError: nothing compatible is available, or every override failed.
            CreateError: bad requirements, or AWS refused the launch (reason = AWS code).
        """
        claim = nodeclaim.metadata.name or "<unnamed>"
        nc = await self.resolved_nodeclass(nodeclaim.spec.node_class_ref.name)
        constraints = launch_constraints(nodeclaim)
        reqs = constraints.requirements
        types, amis = await self._types_for(nc)
        earlier = await self._launched_for(claim, {it.name for it in types})
        if earlier is not None:  # a controller restarted mid-launch: adopt the instance, never launch a second
            return self._launched_claim(nodeclaim, nc, next(t for t in types if t.name == earlier.instance_type), earlier, amis)
        candidates = [choice.instance_type for choice in require_launchable(types, constraints)]
        ct_req = reqs.get(LABEL_CAPACITY_TYPE)
        spot_ok = (ct_req is None or ct_req.has(CAPACITY_TYPE_SPOT)) and any(
            o.capacity_type == CAPACITY_TYPE_SPOT for it in candidates for o in it.compatible_offerings(reqs))
        capacity_type = CAPACITY_TYPE_SPOT if spot_ok else CAPACITY_TYPE_ON_DEMAND
        zone_req = reqs.get(LABEL_ZONE)
        zones = None
        if zone_req is not None:
            zones = frozenset(s.zone for s in nc.status.subnets if zone_req.has(s.zone))
        launched = await self.launcher.launch(LaunchRequest(nodeclaim=nodeclaim, nodeclass=nc, instance_types=candidates,
                                                            capacity_type=capacity_type, zones=zones, amis=amis))
        it = next(t for t in candidates if t.name == launched.instance_type)
        return self._launched_claim(nodeclaim, nc, it, launched, amis)

    async def _launched_for(self, claim: str, known_types: set[str]) -> Launched | None:
        """The pending/running instance already tagged ``karpenter.sh/nodeclaim=<claim>`` for this
        cluster (one DescribeInstances), or None; instances of a type no longer offered are ignored."""
        ec2 = await self.clients.ec2()
        resp = await call(ec2.describe_instances, "DescribeInstances", subject=f"NodeClaim {claim}", Filters=[
            {"Name": f"tag:{TAG_NODECLAIM}", "Values": [claim]},
            {"Name": f"tag:{TAG_CLUSTER_NAME}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ])
        for r in resp.get("Reservations") or []:
            for inst in r.get("Instances") or []:
                if inst.get("InstanceType") not in known_types or not self._owned(inst):
                    continue
                return Launched(instance_id=inst["InstanceId"], instance_type=inst["InstanceType"],
                                zone=(inst.get("Placement") or {}).get("AvailabilityZone", ""), subnet_id=inst.get("SubnetId", ""),
                                image_id=inst.get("ImageId", ""),
                                capacity_type=CAPACITY_TYPE_SPOT if inst.get("InstanceLifecycle") == "spot" else CAPACITY_TYPE_ON_DEMAND,
                                fleet_id="")
        return None

    def _launched_claim(self, nodeclaim: NodeClaim, nc: EC2NodeClass, it: InstanceType, launched: Launched,
                        amis: dict[str, AMI]) -> NodeClaim:
        """``nodeclaim`` with the launched instance's labels, annotations, provider ID, image and capacity."""
        extra_labels: dict[str, str] = {}
        zone_id = next((s.zone_id for s in nc.status.subnets if s.id == launched.subnet_id and s.zone_id), None)
        if zone_id:
            extra_labels[LABEL_ZONE_ID] = zone_id
        annotations = {NODECLASS_HASH_ANNOTATION: nodeclass_hash(nc), NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION}
        if nc.status.instance_profile:
            annotations[INSTANCE_PROFILE_ANNOTATION] = nc.status.instance_profile
        return stamp_launched(
            nodeclaim, it, zone=launched.zone, capacity_type=launched.capacity_type,
            provider_id=ProviderID(PROVIDER_ID_SCHEME, launched.zone, launched.instance_id),
            image_id=launched.image_id or (amis[it.name].id if it.name in amis else None),
            labels=extra_labels, annotations=annotations,
        )

    async def _describe(self, instance_id: str) -> dict[str, Any]:
        ec2 = await self.clients.ec2()
        resp = await call(ec2.describe_instances, "DescribeInstances", subject=f"instance {instance_id}",
                          InstanceIds=[instance_id])
        for r in resp.get("Reservations") or []:
            for inst in r.get("Instances") or []:
                return inst
        raise NodeClaimNotFoundError(f"instance {instance_id} not found", code="InvalidInstanceID.NotFound")

    def _owned(self, inst: Mapping[str, Any]) -> bool:
        tags = _tags(inst)
        return (tags.get(f"kubernetes.io/cluster/{self.cluster_name}") == "owned" or tags.get(TAG_CLUSTER_NAME) == self.cluster_name) \
            and LABEL_NODEPOOL in tags

    async def _to_nodeclaim(self, inst: Mapping[str, Any]) -> NodeClaim:
        from karpy_core.apis.nodeclaim import NodeClaim

        tags = _tags(inst)
        zone = (inst.get("Placement") or {}).get("AvailabilityZone", "")
        itype = inst.get("InstanceType", "")
        spot = inst.get("SpotInstanceRequestId") is not None or inst.get("InstanceLifecycle") == "spot"
        labels = {LABEL_INSTANCE_TYPE: itype, LABEL_ZONE: zone,
                  LABEL_CAPACITY_TYPE: CAPACITY_TYPE_SPOT if spot else CAPACITY_TYPE_ON_DEMAND}
        capacity: dict[str, str] = {}
        spec = await self.instance_types.spec(itype)
        if spec is not None:
            it = build_instance_type(spec, [], self.region, AWSCatalogOptions())
            labels = {**it.requirements.labels(), **labels}
            capacity = format_resource_list({k: v for k, v in it.capacity.items() if v})
        if LABEL_NODEPOOL in tags:
            labels[LABEL_NODEPOOL] = tags[LABEL_NODEPOOL]
        launch = inst.get("LaunchTime")
        created = launch if isinstance(launch, datetime) else datetime.now(UTC)
        return NodeClaim.model_validate({
            "metadata": {"name": tags.get(TAG_NODECLAIM) or inst["InstanceId"], "labels": labels,
                         "creationTimestamp": created.astimezone(UTC).isoformat()},
            "spec": {"requirements": [], "nodeClassRef": {"group": GROUP, "kind": "EC2NodeClass",
                                                          "name": tags.get(TAG_NODECLASS) or "unknown"}},
            "status": {"providerID": str(ProviderID(PROVIDER_ID_SCHEME, zone, inst["InstanceId"])), "imageID": inst.get("ImageId"),
                       "capacity": capacity},
        })

    @hookimpl
    async def karpy_get(self, provider_id: str) -> NodeClaim:
        """The instance behind ``provider_id`` as a NodeClaim.

        Raises:
            NodeClaimNotFoundError: unknown, malformed, or terminated/terminating instance.
        """
        _, instance_id = parse_provider_id(provider_id)
        inst = await self._describe(instance_id)
        if (inst.get("State") or {}).get("Name") in ("shutting-down", "terminated"):
            raise NodeClaimNotFoundError(f"instance {instance_id} is {(inst.get('State') or {}).get('Name')}",
                                         code="InvalidInstanceID.NotFound")
        return await self._to_nodeclaim(inst)

    @hookimpl
    async def karpy_list(self) -> list[NodeClaim]:
        """Every live (pending/running/stopping/stopped) instance tagged for this cluster by karpy."""
        ec2 = await self.clients.ec2()
        filters = [
            {"Name": "tag-key", "Values": [LABEL_NODEPOOL]},
            {"Name": f"tag:{TAG_NODECLASS}", "Values": ["*"]},
            {"Name": f"tag:{TAG_CLUSTER_NAME}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": _LIVE_STATES},
        ]
        out = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"Filters": filters, "MaxResults": 1000}
            if token:
                kwargs["NextToken"] = token
            resp = await call(ec2.describe_instances, "DescribeInstances", **kwargs)
            for r in resp.get("Reservations") or []:
                for inst in r.get("Instances") or []:
                    if self._owned(inst) and (inst.get("State") or {}).get("Name") in _LIVE_STATES:
                        out.append(await self._to_nodeclaim(inst))
            token = resp.get("NextToken")
            if not token:
                break
        return sorted(out, key=lambda nc: nc.status.provider_id or "")

    @hookimpl
    async def karpy_delete(self, nodeclaim: NodeClaim) -> None:
        """Terminate the instance; ``NodeClaimNotFoundError`` once it is gone or terminating.

        Raises:
            NodeClaimNotFoundError: the instance does not exist, is shutting down or terminated.
            CloudProviderError: the instance is not tagged for this cluster (never touched).
        """
        _, instance_id = parse_provider_id(nodeclaim.status.provider_id or "")
        inst = await self._describe(instance_id)
        state = (inst.get("State") or {}).get("Name")
        if state in ("shutting-down", "terminated"):
            raise NodeClaimNotFoundError(f"instance {instance_id} is {state}", code="InvalidInstanceID.NotFound")
        if not self._owned(inst):
            raise CloudProviderError(f"refusing to terminate {instance_id}: it is not tagged as launched by karpy for "
                                     f"cluster {self.cluster_name}", code="NotOwned")
        ec2 = await self.clients.ec2()
        await call(ec2.terminate_instances, "TerminateInstances", subject=f"NodeClaim {nodeclaim.metadata.name}",
                   InstanceIds=[instance_id])

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``NodeClassDrift`` (hash annotation differs, same hash version), ``AMIDrift``
        (``status.imageID`` not among the NodeClass's AMIs), ``SecurityGroupDrift`` (instance SG ids
        differ from status; skipped when the instance reports none, as moto's CreateFleet leaves
        them, or with ``security_group_drift=False``), ``SubnetDrift``; ``""`` otherwise."""
        try:
            nc = await self.resolved_nodeclass(nodeclaim.spec.node_class_ref.name)
        except NodeClassNotReadyError:
            return ""
        ann = nodeclaim.metadata.annotations
        if ann.get(NODECLASS_HASH_VERSION_ANNOTATION) == NODECLASS_HASH_VERSION and \
                ann.get(NODECLASS_HASH_ANNOTATION) not in (None, nodeclass_hash(nc)):
            return "NodeClassDrift"
        if nodeclaim.status.image_id and nodeclaim.status.image_id not in {a.id for a in nc.status.amis}:
            return "AMIDrift"
        if not nodeclaim.status.provider_id:
            return ""
        _, instance_id = parse_provider_id(nodeclaim.status.provider_id)
        inst = await self._describe(instance_id)
        sgs = {g["GroupId"] for g in inst.get("SecurityGroups") or []}
        if self.security_group_drift and sgs and sgs != {g.id for g in nc.status.security_groups}:
            return "SecurityGroupDrift"
        subnet = inst.get("SubnetId")
        if subnet and subnet not in {s.id for s in nc.status.subnets}:
            return "SubnetDrift"
        return ""


def create_plugin(options: Mapping[str, Any] | None = None) -> AWSProvider:
    """Entry-point factory (``karpy.cloudprovider`` group, name ``aws``).

    Options:
        region (required), cluster_name (required), cluster_endpoint (API server URL for user data,
        default ``https://<cluster>.invalid``), endpoint_url (loopback emulator only),
        interruption_queue (SQS queue name), vm_memory_overhead_percent (0.075),
        kube (KubeClient to read EC2NodeClasses and write Events), nodeclasses (``{name: EC2NodeClass}``
        when there is no kube client), clock (callable or object with ``now()``), session (an
        ``aioboto3.Session``; default: the botocore credential chain), kubernetes_version (``"1.33"``,
        for AMI aliases), cluster_cidr, ca_bundle, instance_type_data (a shared
        :class:`~karpy_aws.instancetypes.InstanceTypeData`), dry_run (validate with
        RunInstances DryRun, True), security_group_drift (True), use_pricing_api (True).

    Raises:
        ConfigurationError: unknown option, missing region/cluster_name, non-loopback endpoint_url.
    """
    opts = dict(options or {})
    unknown = sorted(set(opts) - OPTION_NAMES)
    if unknown:
        raise ConfigurationError(f"aws provider: unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(OPTION_NAMES))}")
    for required in ("region", "cluster_name"):
        if not opts.get(required):
            raise ConfigurationError(f"aws provider: option {required!r} is required")
    nodeclasses = opts.pop("nodeclasses", None) or {}
    parsed = {k: v if isinstance(v, EC2NodeClass) else EC2NodeClass.model_validate(v) for k, v in dict(nodeclasses).items()}
    opts.setdefault("cluster_endpoint", f"https://{opts['cluster_name']}.invalid")
    return AWSProvider(nodeclasses=parsed, **opts)
