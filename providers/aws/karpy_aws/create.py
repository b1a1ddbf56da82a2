"""``karpy_create`` for AWS: from a NodeClaim to one launched (or adopted) EC2 instance.

1. The EC2NodeClass must be resolved and Ready; the NodeClaim's requirements parse (launch
   kernel :func:`~karpy_core.cloudprovider.launch.launch_constraints`).
2. An instance already tagged for the NodeClaim (a controller restarted mid-launch) is adopted,
   never launched twice.
3. The launchable instance types, cheapest first by the kernel's one tie-break
   (:func:`~karpy_core.cloudprovider.launch.require_launchable`), go to one CreateFleet
   (:mod:`karpy_aws.launch`) with the capacity type :func:`capacity_type_for` picks (reserved,
   then spot, then on-demand), the zones of the NodeClass's subnets the claim allows and, for a
   claim the scheduler pinned to reservations, their IDs.
4. The result is stamped by :func:`~karpy_core.cloudprovider.launch.stamp_launched` with the AWS
   extras: the zone-ID label, the capacity-reservation ID and type labels of a reserved launch,
   the NodeClass hash annotations and the instance profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from karpy_aws.instances import PROVIDER_ID_SCHEME
from karpy_aws.instancetypes import LABEL_ZONE_ID
from karpy_aws.launch import Launched, LaunchRequest
from karpy_aws.nodeclass import (
    INSTANCE_PROFILE_ANNOTATION,
    NODECLASS_HASH_ANNOTATION,
    NODECLASS_HASH_VERSION,
    NODECLASS_HASH_VERSION_ANNOTATION,
    nodeclass_hash,
)
from karpy_core.apis.labels import (
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LABEL_CAPACITY_TYPE,
    LABEL_RESERVATION_ID,
    LABEL_RESERVATION_TYPE,
    LABEL_ZONE,
    RESERVATION_TYPE_DEFAULT,
)
from karpy_core.cloudprovider.launch import ProviderID, launch_constraints, require_launchable, stamp_launched

if TYPE_CHECKING:
    from karpy_aws.apis import AMI, EC2NodeClass
    from karpy_aws.instances import InstanceInventory
    from karpy_aws.launch import Launcher
    from karpy_aws.nodeclasses import NodeClassSource
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.cloudprovider.types import InstanceType
    from karpy_core.scheduling.requirements import Requirements

__all__ = ["capacity_type_for", "create_instance", "launched_claim"]


def capacity_type_for(candidates: Sequence[InstanceType], reqs: Requirements) -> str:
    """``reserved`` when the claim allows it and any candidate has an available compatible
    reserved offering, else ``spot`` likewise, else ``on-demand`` (Karpenter
    ``getCapacityType``: reserved, then spot, then on-demand)."""
    ct_req = reqs.get(LABEL_CAPACITY_TYPE)
    offered = {o.capacity_type for it in candidates for o in it.compatible_offerings(reqs)}
    for ct in (CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT):
        if (ct_req is None or ct_req.has(ct)) and ct in offered:
            return ct
    return CAPACITY_TYPE_ON_DEMAND


def launched_claim(nodeclaim: NodeClaim, nc: EC2NodeClass, it: InstanceType, launched: Launched, amis: dict[str, AMI]) -> NodeClaim:
    """``nodeclaim`` with the launched instance's labels, annotations, provider ID, image and capacity."""
    extra_labels: dict[str, str] = {}
    if launched.reservation_id:
        extra_labels[LABEL_RESERVATION_ID] = launched.reservation_id
        extra_labels[LABEL_RESERVATION_TYPE] = launched.reservation_type or RESERVATION_TYPE_DEFAULT
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


async def create_instance(nodeclaim: NodeClaim, *, nodeclasses: NodeClassSource, inventory: InstanceInventory,
                          launcher: Launcher) -> NodeClaim:
    """Launch (or adopt) one instance for ``nodeclaim`` (see the module docstring).

    Raises:
        NodeClassNotReadyError: the EC2NodeClass is missing or not Ready.
        InvalidRequirementsError: the requirements or requests do not parse.
        InsufficientCapacityError: nothing compatible is available, or every override failed.
        CreateError: AWS refused the launch (reason = AWS code).
    """
    claim = nodeclaim.metadata.name or "<unnamed>"
    nc = await nodeclasses.resolved(nodeclaim.spec.node_class_ref.name)
    constraints = launch_constraints(nodeclaim)
    reqs = constraints.requirements
    types, amis = await nodeclasses.types_for(nc)
    earlier = await inventory.find_launched(claim, {it.name for it in types})
    if earlier is not None:  # a controller restarted mid-launch: adopt the instance, never launch a second
        return launched_claim(nodeclaim, nc, next(t for t in types if t.name == earlier.instance_type), earlier, amis)
    candidates = [choice.instance_type for choice in require_launchable(types, constraints)]
    zone_req = reqs.get(LABEL_ZONE)
    zones = None
    if zone_req is not None:
        zones = frozenset(s.zone for s in nc.status.subnets if zone_req.has(s.zone))
    rid_req = reqs.get(LABEL_RESERVATION_ID)
    reservation_ids = frozenset(rid_req.values) if rid_req is not None and not rid_req.complement else None
    launched = await launcher.launch(LaunchRequest(nodeclaim=nodeclaim, nodeclass=nc, instance_types=candidates,
                                                   capacity_type=capacity_type_for(candidates, reqs), zones=zones, amis=amis,
                                                   reservation_ids=reservation_ids))
    it = next(t for t in candidates if t.name == launched.instance_type)
    return launched_claim(nodeclaim, nc, it, launched, amis)
