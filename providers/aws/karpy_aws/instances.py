"""EC2 instances karpy launched: provider IDs, ownership, reads, the GC listing and termination.

* Provider IDs are ``aws:///<zone>/<instance-id>`` (:func:`parse_provider_id`).
* An instance is **owned** when it carries ``kubernetes.io/cluster/<cluster>=owned`` or
  ``eks:eks-cluster-name=<cluster>`` *and* a ``karpenter.sh/nodepool`` tag; nothing else is ever
  returned by :meth:`InstanceInventory.list_owned` or terminated.
* ``list_owned`` uses distinct filter names (moto keeps only the last of repeated names):
  ``tag-key=karpenter.sh/nodepool``, ``tag:karpenter.k8s.aws/ec2nodeclass=*``,
  ``tag:eks:eks-cluster-name=<cluster>`` and the live states.
* :meth:`InstanceInventory.find_launched` finds the pending/running instance already tagged
  ``karpenter.sh/nodeclaim=<claim>``, so a restarted controller adopts it instead of launching a
  second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from karpy_aws.apis import GROUP
from karpy_aws.errors import call
from karpy_aws.launch import TAG_CLUSTER_NAME, TAG_NODECLAIM, TAG_NODECLASS, Launched
from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_NODEPOOL,
    LABEL_ZONE,
)
from karpy_core.cloudprovider.catalog.aws import AWSCatalogOptions, build_instance_type
from karpy_core.cloudprovider.launch import ProviderID
from karpy_core.errors import CloudProviderError, NodeClaimNotFoundError
from karpy_core.scheduling.resources import format_resource_list

if TYPE_CHECKING:
    from karpy_aws.clients import AWSClients
    from karpy_aws.instancetypes import InstanceTypeProvider
    from karpy_core.apis.nodeclaim import NodeClaim

__all__ = ["PROVIDER_ID_SCHEME", "LIVE_STATES", "InstanceInventory", "instance_tags", "parse_provider_id"]

PROVIDER_ID_SCHEME = "aws"
LIVE_STATES = ["pending", "running", "stopping", "stopped"]
_GONE_STATES = ("shutting-down", "terminated")


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


def instance_tags(instance: Mapping[str, Any]) -> dict[str, str]:
    """An EC2 instance's tags as a dict."""
    return {t["Key"]: t.get("Value", "") for t in instance.get("Tags") or []}


def _state(instance: Mapping[str, Any]) -> str | None:
    return (instance.get("State") or {}).get("Name")


def _capacity_type(instance: Mapping[str, Any]) -> str:
    spot = instance.get("SpotInstanceRequestId") is not None or instance.get("InstanceLifecycle") == "spot"
    return CAPACITY_TYPE_SPOT if spot else CAPACITY_TYPE_ON_DEMAND


class InstanceInventory:
    """Reads and terminates the instances karpy launched for one cluster (see the module docstring).

    Args:
        clients: AWS clients.
        cluster_name: the cluster whose instances are ours.
        region: for instance-type labels.
        instance_types: where instance-type specs (labels, capacity) come from.
    """

    def __init__(self, *, clients: AWSClients, cluster_name: str, region: str, instance_types: InstanceTypeProvider):
        self.clients = clients
        self.cluster_name = cluster_name
        self.region = region
        self.instance_types = instance_types

    def owned(self, instance: Mapping[str, Any]) -> bool:
        """Whether ``instance`` is tagged as launched by karpy for this cluster."""
        tags = instance_tags(instance)
        return (tags.get(f"kubernetes.io/cluster/{self.cluster_name}") == "owned" or tags.get(TAG_CLUSTER_NAME) == self.cluster_name) \
            and LABEL_NODEPOOL in tags

    async def describe(self, instance_id: str) -> dict[str, Any]:
        """The DescribeInstances record of ``instance_id``.

        Raises:
            NodeClaimNotFoundError: no such instance.
            CloudProviderError: the call failed.
        """
        ec2 = await self.clients.ec2()
        resp = await call(ec2.describe_instances, "DescribeInstances", subject=f"instance {instance_id}",
                          InstanceIds=[instance_id])
        for r in resp.get("Reservations") or []:
            for inst in r.get("Instances") or []:
                return dict(inst)
        raise NodeClaimNotFoundError(f"instance {instance_id} not found", code="InvalidInstanceID.NotFound")

    async def describe_live(self, provider_id: str) -> dict[str, Any]:
        """The record behind ``provider_id`` unless it is shutting down or terminated.

        Raises:
            NodeClaimNotFoundError: malformed ID, unknown, shutting-down or terminated instance.
        """
        _, instance_id = parse_provider_id(provider_id)
        inst = await self.describe(instance_id)
        state = _state(inst)
        if state in _GONE_STATES:
            raise NodeClaimNotFoundError(f"instance {instance_id} is {state}", code="InvalidInstanceID.NotFound")
        return inst

    async def find_launched(self, claim: str, known_types: set[str]) -> Launched | None:
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
                if inst.get("InstanceType") not in known_types or not self.owned(inst):
                    continue
                return Launched(instance_id=inst["InstanceId"], instance_type=inst["InstanceType"],
                                zone=(inst.get("Placement") or {}).get("AvailabilityZone", ""), subnet_id=inst.get("SubnetId", ""),
                                image_id=inst.get("ImageId", ""),
                                capacity_type=CAPACITY_TYPE_SPOT if inst.get("InstanceLifecycle") == "spot" else CAPACITY_TYPE_ON_DEMAND,
                                fleet_id="")
        return None

    async def to_nodeclaim(self, instance: Mapping[str, Any]) -> NodeClaim:
        """A NodeClaim describing ``instance`` (labels of its type, capacity, tags' NodeClaim,
        NodePool and EC2NodeClass names, launch time as creation time)."""
        from karpy_core.apis.nodeclaim import NodeClaim

        tags = instance_tags(instance)
        zone = (instance.get("Placement") or {}).get("AvailabilityZone", "")
        itype = instance.get("InstanceType", "")
        labels = {LABEL_INSTANCE_TYPE: itype, LABEL_ZONE: zone, LABEL_CAPACITY_TYPE: _capacity_type(instance)}
        capacity: dict[str, str] = {}
        spec = await self.instance_types.spec(itype)
        if spec is not None:
            it = build_instance_type(spec, [], self.region, AWSCatalogOptions())
            labels = {**it.requirements.labels(), **labels}
            capacity = format_resource_list({k: v for k, v in it.capacity.items() if v})
        if LABEL_NODEPOOL in tags:
            labels[LABEL_NODEPOOL] = tags[LABEL_NODEPOOL]
        launch = instance.get("LaunchTime")
        created = launch if isinstance(launch, datetime) else datetime.now(UTC)
        return NodeClaim.model_validate({
            "metadata": {"name": tags.get(TAG_NODECLAIM) or instance["InstanceId"], "labels": labels,
                         "creationTimestamp": created.astimezone(UTC).isoformat()},
            "spec": {"requirements": [], "nodeClassRef": {"group": GROUP, "kind": "EC2NodeClass",
                                                          "name": tags.get(TAG_NODECLASS) or "unknown"}},
            "status": {"providerID": str(ProviderID(PROVIDER_ID_SCHEME, zone, instance["InstanceId"])),
                       "imageID": instance.get("ImageId"), "capacity": capacity},
        })

    async def list_owned(self) -> list[NodeClaim]:
        """Every live (pending/running/stopping/stopped) owned instance, as NodeClaims sorted by provider ID."""
        ec2 = await self.clients.ec2()
        filters = [
            {"Name": "tag-key", "Values": [LABEL_NODEPOOL]},
            {"Name": f"tag:{TAG_NODECLASS}", "Values": ["*"]},
            {"Name": f"tag:{TAG_CLUSTER_NAME}", "Values": [self.cluster_name]},
            {"Name": "instance-state-name", "Values": LIVE_STATES},
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
                    if self.owned(inst) and _state(inst) in LIVE_STATES:
                        out.append(await self.to_nodeclaim(inst))
            token = resp.get("NextToken")
            if not token:
                break
        return sorted(out, key=lambda nc: nc.status.provider_id or "")

    async def terminate(self, nodeclaim: NodeClaim) -> None:
        """Terminate the NodeClaim's instance if it is owned.

        Raises:
            NodeClaimNotFoundError: the instance does not exist, is shutting down or terminated.
            CloudProviderError: the instance is not tagged for this cluster (never touched), or
                TerminateInstances failed.
        """
        _, instance_id = parse_provider_id(nodeclaim.status.provider_id or "")
        inst = await self.describe(instance_id)
        state = _state(inst)
        if state in _GONE_STATES:
            raise NodeClaimNotFoundError(f"instance {instance_id} is {state}", code="InvalidInstanceID.NotFound")
        if not self.owned(inst):
            raise CloudProviderError(f"refusing to terminate {instance_id}: it is not tagged as launched by karpy for "
                                     f"cluster {self.cluster_name}", code="NotOwned")
        ec2 = await self.clients.ec2()
        await call(ec2.terminate_instances, "TerminateInstances", subject=f"NodeClaim {nodeclaim.metadata.name}",
                   InstanceIds=[instance_id])
