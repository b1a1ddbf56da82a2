"""KakaoCloud drift (karpy_kakaocloud.drift.drift_reason), on its own: image, then subnet zone."""

from __future__ import annotations

import pytest
from karpy_kakaocloud.drift import IMAGE_DRIFT, SUBNET_DRIFT, drift_reason
from karpy_kakaocloud.nodeclass import Condition, ResolvedNodeClass

from karpy_core.apis.nodeclaim import NodeClaim

REF = {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": "default"}


def nodeclass(ready: bool = True) -> ResolvedNodeClass:
    return ResolvedNodeClass(name="default", conditions={"Ready": Condition("Ready", "True" if ready else "False", "Ready")},
                             subnets=[("subnet-a", "kr-central-2-a")], images=[{"id": "img-new"}])


def launched(image: str | None, zone: str | None) -> NodeClaim:
    return NodeClaim.model_validate({"metadata": {"name": "c", "labels": {"topology.kubernetes.io/zone": zone} if zone else {}},
                                     "spec": {"requirements": [], "nodeClassRef": REF}, "status": {"imageID": image} if image else {}})


@pytest.mark.parametrize(("image", "zone", "reason"), [
    ("img-new", "kr-central-2-a", ""),
    ("img-old", "kr-central-2-a", IMAGE_DRIFT),
    ("img-new", "kr-central-2-b", SUBNET_DRIFT),
    ("img-old", "kr-central-2-b", IMAGE_DRIFT),  # the image is checked first
    (None, None, ""),  # nothing recorded: not drifted
])
def test_drift_reason(image: str | None, zone: str | None, reason: str) -> None:
    assert drift_reason(launched(image, zone), nodeclass()) == reason


def test_a_nodeclass_that_is_not_ready_drifts_nothing() -> None:
    assert drift_reason(launched("img-old", "kr-central-2-b"), nodeclass(ready=False)) == ""
