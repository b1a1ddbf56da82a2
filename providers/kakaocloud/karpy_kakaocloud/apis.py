"""karpenter.kakaocloud.com/v1alpha1 ``KCNodeClass``: how karpy launches KakaoCloud BCS VMs.

Shape from the KakaoCloud Karpenter provider install guide (karpy seed 004) and the OpenAPI limits
in karpy's ``reference/kakaocloud-api.md``. Strict: unknown fields are rejected.

* ``subnetSelectorTerms[{id}]`` (1..30) — worker subnets; the subnet's AZ decides the instance's.
* ``securityGroupSelectorTerms[{id}]`` (1..30) — security groups (BCS create takes names; the
  provider resolves ids to names).
* ``keyName`` — optional SSH key pair, 4..250 characters (BCS ``key_name`` rule).
* ``rootVolume{sizeGiB >= 30, deleteOnTermination = true}`` — optional; the provider picks the
  size when omitted.
* ``bootstrap{mode: Kubeadm, kubernetesVersion: "MAJOR.MINOR"}`` — the version must be the
  control plane's minor or one below, without the patch number (checked by the provider, which
  sets ``KubernetesVersionReady``).
* ``tags`` — optional extra key/values recorded on the instance.

Status conditions: ``KubernetesVersionReady``, ``ImagesReady``, ``SubnetsReady``,
``SecurityGroupsReady``, ``KeyPairReady``, rolled up into ``Ready``. The ownership signing keyring
(``activeKeyID``...) is provider configuration, not part of this kind.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field

from karpy_core.apis.base import Bool, Condition, Int, KubeModel, KubeObject, Str
from karpy_core.apis.crdspec import AGE_COLUMN, READY_COLUMN, CRDSpec, Overlay
from karpy_kakaocloud.apivalues import KEY_NAME

__all__ = [
    "MAX_NODEPOOL_NAME",
    "API_VERSION",
    "GROUP",
    "CONDITION_TYPES",
    "SubnetSelectorTerm",
    "SecurityGroupSelectorTerm",
    "RootVolume",
    "Bootstrap",
    "KCNodeClassSpec",
    "ResolvedSubnet",
    "ResolvedSecurityGroup",
    "ResolvedImage",
    "KCNodeClassStatus",
    "KCNodeClass",
    "api_kinds",
]

GROUP = "karpenter.kakaocloud.com"
API_VERSION = f"{GROUP}/v1alpha1"
MAX_NODEPOOL_NAME = 38
"""Longest name of a NodePool using a KCNodeClass. Seed 004 (KakaoCloud's Karpenter guide):
"NodePool 이름은 38자 이내" - VM names carry the cluster identifier and the NodeClaim name, and
the signed ownership record in the 100-character instance description holds a NodeClaim name of
at most 44 characters (38 + ``-`` + 5 random characters; see ``karpy_kakaocloud.ownership``)."""

CONDITION_TYPES = (
    "KubernetesVersionReady",
    "ImagesReady",
    "SubnetsReady",
    "SecurityGroupsReady",
    "KeyPairReady",
    "Ready",
)



def _check_key_name(value: str) -> str:
    if not 4 <= len(value) <= 250 or not KEY_NAME.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a key pair name (4..250 characters: letters, digits, '-', '_', "
            "starting and ending with a letter or digit)"
        )
    return value


def _check_version(value: str) -> str:
    if not re.fullmatch(r"[0-9]+\.[0-9]+", value):
        raise ValueError(f"must be a Kubernetes minor version 'MAJOR.MINOR' such as '1.34' (no patch); got {value!r}")
    return value


class SubnetSelectorTerm(KubeModel):
    """A worker subnet, by ``id``."""

    id: Str = Field(min_length=1)
    """The ID of a KakaoCloud VPC subnet nodes may launch into."""


class SecurityGroupSelectorTerm(KubeModel):
    """A security group, by ``id``."""

    id: Str = Field(min_length=1)
    """The ID of a KakaoCloud security group attached to every node."""


class RootVolume(KubeModel):
    """The boot volume: ``sizeGiB`` (GiB, at least 30) and ``deleteOnTermination`` (default true;
    false leaves the volume, and its bill, behind after the instance is deleted)."""

    size_gib: Int = Field(alias="sizeGiB", ge=30)
    """Size of the boot volume in GiB (at least 30)."""
    delete_on_termination: Bool = True
    """Whether the boot volume is deleted with the VM (default true); false keeps it, and its
    cost, after the node is gone."""


class Bootstrap(KubeModel):
    """How a new VM joins the cluster: ``mode`` (only ``Kubeadm``) and ``kubernetesVersion``
    (``"MAJOR.MINOR"``, a string: quote it in YAML)."""

    mode: Literal["Kubeadm"] = "Kubeadm"
    """How the VM joins the cluster; only Kubeadm (a kubeadm join with a bootstrap token)."""
    kubernetes_version: Annotated[Str, AfterValidator(_check_version)]
    """The cluster's Kubernetes minor version, "MAJOR.MINOR" (a string, e.g. "1.34"); worker
    images of this version are selected."""


class KCNodeClassSpec(KubeModel):
    """``KCNodeClass.spec``."""

    subnet_selector_terms: list[SubnetSelectorTerm] = Field(min_length=1, max_length=30)
    """The subnets nodes launch into (1 to 30); each subnet's availability zone becomes a zone nodes may be in."""
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(min_length=1, max_length=30)
    """The security groups attached to every node (1 to 30)."""
    key_name: Annotated[Str, AfterValidator(_check_key_name)] | None = None
    """The name of a KakaoCloud key pair allowed to log in to the nodes over SSH; unset: none."""
    root_volume: RootVolume | None = None
    """The nodes' boot volume; unset: the image's default size, deleted with the VM."""
    bootstrap: Bootstrap
    """How new nodes join the cluster."""
    tags: dict[Str, Str] | None = None
    """Tags (metadata) put on the VMs, besides the ones karpy sets to recognise its own."""


class ResolvedSubnet(KubeModel):
    """A subnet the provider resolved, with its availability zone."""

    id: Str
    """The subnet's ID."""
    zone: Str | None = None
    """The availability zone of the subnet."""


class ResolvedSecurityGroup(KubeModel):
    """A security group the provider resolved, with its name (BCS create uses names)."""

    id: Str
    """The security group's ID."""
    name: Str | None = None
    """The security group's name."""


class ResolvedImage(KubeModel):
    """A Kubernetes Engine worker image matching the version (one per architecture / GPU kind)."""

    id: Str
    """The image's ID."""
    name: Str | None = None
    """The image's name."""
    architecture: Str | None = None
    """The CPU architecture the image is built for (Kubernetes name, e.g. amd64)."""
    is_gpu_type: Bool | None = None
    """Whether the image is the GPU variant (with drivers), used for GPU flavors."""


class KCNodeClassStatus(KubeModel):
    """``KCNodeClass.status``: resolved subnets, security groups, images, the Kubernetes version
    in use, and conditions (see :data:`CONDITION_TYPES`)."""

    subnets: list[ResolvedSubnet] = Field(default_factory=list)
    """The subnets found for the selector terms, with their zones."""
    security_groups: list[ResolvedSecurityGroup] = Field(default_factory=list)
    """The security groups found for the selector terms."""
    images: list[ResolvedImage] = Field(default_factory=list)
    """The worker images found for the Kubernetes version, one per architecture and GPU kind."""
    kubernetes_version: Str | None = None
    """The Kubernetes version the images were resolved for."""
    conditions: list[Condition] = Field(default_factory=list)
    """The NodeClass's state (the resolution steps and Ready); only a Ready NodeClass launches nodes."""


class KCNodeClass(KubeObject):
    """karpenter.kakaocloud.com/v1alpha1 ``KCNodeClass`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "KCNodeClass"
    NODE_CLASS: ClassVar[bool] = True
    MAX_NODEPOOL_NAME: ClassVar[int] = MAX_NODEPOOL_NAME
    """NodePools naming this kind are refused by the loader past this many characters."""

    spec: KCNodeClassSpec
    status: KCNodeClassStatus = Field(default_factory=KCNodeClassStatus)


def _crd_overlays() -> dict[str, Overlay]:
    from karpy_kakaocloud.crd import kcnodeclass_overlays  # only when a CRD is generated

    return kcnodeclass_overlays()


def api_kinds() -> list[type[KubeObject] | CRDSpec]:
    """Entry point ``karpy.apis: kakaocloud``: the kinds this provider defines, with their CRDs
    (``karpy_core.apis.crds`` renders them; the rules are in :mod:`karpy_kakaocloud.crd`)."""
    return [CRDSpec(KCNodeClass, "kcnodeclasses", short_names=("kcnc",), columns=(READY_COLUMN, AGE_COLUMN), overlays=_crd_overlays)]
