"""The pure parts of a KakaoCloud launch: the VM name and the ``POST /api/v1/instances`` body.

The provider (:mod:`karpy_kakaocloud.create`) picks the offering with the core launch kernel,
gathers what is remote (flavor, worker image, bootstrap token, CA hash) and then builds the body
here; nothing in this module does I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from karpy_kakaocloud import bootstrap

if TYPE_CHECKING:
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_kakaocloud.nodeclass import ResolvedNodeClass

__all__ = ["LaunchPlan", "instance_body", "vm_name"]


def vm_name(tag: str, nodeclaim: str) -> str:
    """``karpy-<tag>-<nodeclaim>`` made to fit BCS's name rule (no ``.``, no ``--``, <= 63 characters)."""
    base = re.sub(r"[^a-zA-Z0-9-]", "-", nodeclaim)
    base = re.sub(r"-{2,}", "-", base).strip("-")
    return f"karpy-{tag}-{base}"[:63].rstrip("-")


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything a VM create needs besides the body's ownership description.

    Attributes:
        vm_name: from :func:`vm_name`.
        zone: the chosen offering's zone.
        flavor: the BCS flavor record of the chosen instance type.
        image: the worker image record.
        subnet_id: the KCNodeClass subnet in ``zone`` (the first by id).
        endpoint: ``host:port`` of the cluster's control plane.
        token: the kubeadm bootstrap token.
        ca_hash: ``sha256:<hex>`` of the cluster CA's public key.
        max_pods: kubelet ``--max-pods``.
    """

    vm_name: str
    zone: str
    flavor: dict[str, Any]
    image: dict[str, Any]
    subnet_id: str
    endpoint: str
    token: bootstrap.BootstrapToken
    ca_hash: str
    max_pods: int


def instance_body(nodeclaim: NodeClaim, nc: ResolvedNodeClass, plan: LaunchPlan) -> dict[str, Any]:
    """The ``POST /api/v1/instances`` body (without ``description``, which carries the launch nonce)."""
    user_data = bootstrap.render_user_data(
        endpoint=plan.endpoint,
        token=plan.token,
        ca_hash=plan.ca_hash,
        zone=plan.zone,
        node_name=nodeclaim.metadata.name or "",
        labels=nodeclaim.metadata.labels,
        taints=[t.model_dump(by_alias=True, exclude_none=True) for t in nodeclaim.spec.taints],
        startup_taints=[t.model_dump(by_alias=True, exclude_none=True) for t in nodeclaim.spec.startup_taints],
        max_pods=plan.max_pods,
    )
    body: dict[str, Any] = {
        "name": plan.vm_name,
        "count": 1,
        "image_id": plan.image["id"],
        "flavor_id": plan.flavor["id"],
        "availability_zone": plan.zone,
        "subnets": [{"id": plan.subnet_id}],
        "volumes": [{"size": nc.root_volume_gib, "source_type": "image", "is_delete_on_termination": nc.delete_on_termination}],
        "security_groups": [{"name": n} for _, n in nc.security_groups],
        "user_data": user_data,
    }
    if nc.key_name:
        body["key_name"] = nc.key_name
    return body
