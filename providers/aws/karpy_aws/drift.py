"""Why an AWS instance no longer matches its EC2NodeClass (``karpy_is_drifted``).

In order: ``NodeClassDrift`` (the static-hash annotation differs, same hash version),
``AMIDrift`` (``status.imageID`` not among the NodeClass's AMIs), ``SecurityGroupDrift``
(instance SG ids differ from status; skipped when the instance reports none, as moto's
CreateFleet leaves them, or when disabled), ``SubnetDrift``; ``""`` otherwise.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from karpy_aws.nodeclass import NODECLASS_HASH_ANNOTATION, NODECLASS_HASH_VERSION, NODECLASS_HASH_VERSION_ANNOTATION, nodeclass_hash

if TYPE_CHECKING:
    from karpy_aws.apis import EC2NodeClass
    from karpy_core.apis.nodeclaim import NodeClaim

__all__ = ["drift_reason"]


async def drift_reason(nodeclaim: NodeClaim, nc: EC2NodeClass, describe: Callable[[str], Awaitable[Mapping[str, Any]]], *,
                       security_group_drift: bool = True) -> str:
    """The drift reason of ``nodeclaim`` against the resolved ``nc``, or ``""``.

    Args:
        describe: reads the instance behind a provider ID (called only when the cheap checks pass).
        security_group_drift: whether security groups are compared.

    Raises:
        NodeClaimNotFoundError / CloudProviderError: from ``describe``.
    """
    ann = nodeclaim.metadata.annotations
    if ann.get(NODECLASS_HASH_VERSION_ANNOTATION) == NODECLASS_HASH_VERSION and \
            ann.get(NODECLASS_HASH_ANNOTATION) not in (None, nodeclass_hash(nc)):
        return "NodeClassDrift"
    if nodeclaim.status.image_id and nodeclaim.status.image_id not in {a.id for a in nc.status.amis}:
        return "AMIDrift"
    if not nodeclaim.status.provider_id:
        return ""
    inst = await describe(nodeclaim.status.provider_id)
    sgs = {g["GroupId"] for g in inst.get("SecurityGroups") or []}
    if security_group_drift and sgs and sgs != {g.id for g in nc.status.security_groups}:
        return "SecurityGroupDrift"
    subnet = inst.get("SubnetId")
    if subnet and subnet not in {s.id for s in nc.status.subnets}:
        return "SubnetDrift"
    return ""
