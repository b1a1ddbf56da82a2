"""Whether a KakaoCloud VM drifted from its KCNodeClass (the ``karpy_is_drifted`` hook)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpy_core.apis.labels import LABEL_ZONE

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_kakaocloud.nodeclass import ResolvedNodeClass

__all__ = ["IMAGE_DRIFT", "SUBNET_DRIFT", "drift_reason"]

IMAGE_DRIFT = "ImageDrift"
SUBNET_DRIFT = "SubnetDrift"


def drift_reason(nodeclaim: NodeClaim, nodeclass: ResolvedNodeClass) -> str:
    """``ImageDrift`` when the VM's image (``status.imageID``) is no longer one of the KCNodeClass's
    worker images, ``SubnetDrift`` when its zone has no KCNodeClass subnet; ``""`` otherwise, when
    the NodeClass is not Ready, or when the NodeClaim records neither."""
    if not nodeclass.ready:
        return ""
    image = nodeclaim.status.image_id
    zone = nodeclaim.metadata.labels.get(LABEL_ZONE)
    if image and nodeclass.images and image not in {i.get("id") for i in nodeclass.images}:
        return IMAGE_DRIFT
    if zone and zone not in nodeclass.zones:
        return SUBNET_DRIFT
    return ""
