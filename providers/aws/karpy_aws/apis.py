"""karpenter.k8s.aws/v1 ``EC2NodeClass``: how karpy launches EC2 instances for a NodePool.

Source: aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go``, ``ec2nodeclass_status.go``
and the generated CRD (v1.14), summarised in karpy's ``reference/karpenter-aws-behaviour.md`` §1.
Strict: unknown fields are rejected, as the CRD makes the API server reject them.

Rules checked (each error names the field): selector terms 1..30 per list; in a subnet term
``tags`` or ``id`` (``id`` alone); in a security-group term ``tags``, ``id`` or ``name`` (``id``
and ``name`` alone); in an AMI term at least one of alias/tags/id/name/owner/ssmParameter, ``id``
without alias/tags/name/owner, ``alias`` alone and the only term, ``family@version`` with a known
family and Windows only ``@latest``; ``amiFamily`` required without an alias, and with one equal to
the alias family or ``Custom``; exactly one of ``role``/``instanceProfile``; restricted tag keys;
kubelet reserved/eviction keys; at most one ``rootVolume`` block device; ``ebs`` needs
``volumeSize`` or ``snapshotID``. ``metadataOptions`` gets the upstream defaults
(``httpEndpoint: enabled``, ``httpProtocolIPv6: disabled``, ``httpPutResponseHopLimit: 1``,
``httpTokens: required``), field by field.

Accepted but not interpreted by karpy (newer upstream fields): ``ipPrefixCount``,
``networkInterfaces``, ``capacityReservationSelectorTerms``, ``placementGroupSelector``,
``connectionTracking``, ``cpuOptions``.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from karpy_core.apis.base import Bool, Condition, Int, KubeModel, KubeObject, LenientModel, Quantity, Str
from karpy_core.apis.durations import parse_duration
from karpy_core.utils.quantity import parse_quantity

__all__ = [
    "API_VERSION",
    "GROUP",
    "AMI_FAMILIES",
    "ALIAS_FAMILIES",
    "RESTRICTED_TAG_KEYS",
    "SubnetSelectorTerm",
    "SecurityGroupSelectorTerm",
    "AMISelectorTerm",
    "CapacityReservationSelectorTerm",
    "KubeletConfiguration",
    "BlockDevice",
    "BlockDeviceMapping",
    "MetadataOptions",
    "EC2NodeClassSpec",
    "Subnet",
    "SecurityGroup",
    "AMIRequirement",
    "AMI",
    "EC2NodeClassStatus",
    "EC2NodeClass",
    "api_kinds",
]

GROUP = "karpenter.k8s.aws"
API_VERSION = f"{GROUP}/v1"

AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025")
ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
"""Alias family (``al2023`` in ``al2023@latest``) -> the ``amiFamily`` it implies."""

RESTRICTED_TAG_KEYS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
"""Tag keys Karpenter sets itself; ``kubernetes.io/cluster*`` prefixes are restricted too."""

_RESERVED_KEYS = ("cpu", "memory", "ephemeral-storage", "pid")
_EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
_PERCENT = re.compile(r"^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$")


def _check_selector_tags(tags: dict[str, str]) -> dict[str, str]:
    for key, value in tags.items():
        if not key or not value:
            raise ValueError("empty tag keys or values aren't supported (use '*' to match any value)")
    return tags


SelectorTags = Annotated[dict[Str, Str], Field(max_length=20), AfterValidator(_check_selector_tags)]


def _pattern(regex: str, what: str) -> Any:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.search(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return AfterValidator(check)


class SubnetSelectorTerm(KubeModel):
    """One ORed subnet selector: all ``tags`` must match (``"*"`` = any value), or an ``id``."""

    tags: SelectorTags | None = None
    id: Annotated[Str, _pattern(r"subnet-[0-9a-z]+", "a subnet id (subnet-...)")] | None = None

    @model_validator(mode="after")
    def _one(self) -> SubnetSelectorTerm:
        if self.tags is None and self.id is None:
            raise ValueError("expected at least one, got none, ['tags', 'id']")
        if self.id is not None and self.tags is not None:
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"
            )
        return self


class SecurityGroupSelectorTerm(KubeModel):
    """One ORed security-group selector: ``tags``, an ``id``, or a group ``name`` (GroupName)."""

    tags: SelectorTags | None = None
    id: Annotated[Str, _pattern(r"sg-[0-9a-z]+", "a security group id (sg-...)")] | None = None
    name: Str | None = None

    @model_validator(mode="after")
    def _one(self) -> SecurityGroupSelectorTerm:
        if self.tags is None and self.id is None and self.name is None:
            raise ValueError("expected at least one, got none, ['tags', 'id', 'name']")
        if self.id is not None and (self.tags is not None or self.name is not None):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields "
                "in a security group selector term"
            )
        if self.name is not None and self.tags is not None:
            raise ValueError(
                "'name' is mutually exclusive, cannot be set with a combination of other fields "
                "in a security group selector term"
            )
        return self


def _check_alias(value: str) -> str:
    if len(value) > 30 or not re.fullmatch(r"[a-zA-Z0-9]+@.+", value):
        raise ValueError(f"{value!r} is improperly formatted, must match the format 'family@version'")
    family, _, version = value.partition("@")
    if family not in ALIAS_FAMILIES:
        raise ValueError(f"family {family!r} is not supported, must be one of: {', '.join(ALIAS_FAMILIES)}")
    if family.startswith("windows") and version != "latest":
        raise ValueError(f"windows families may only specify version 'latest'; got {value!r}")
    return value


class AMISelectorTerm(KubeModel):
    """One ORed AMI selector: an ``alias`` (``family@version``, alone), an ``id``, or any of
    ``tags``/``name``/``owner``/``ssmParameter`` (ANDed)."""

    alias: Annotated[Str, AfterValidator(_check_alias)] | None = None
    tags: SelectorTags | None = None
    id: Annotated[Str, _pattern(r"ami-[0-9a-z]+", "an AMI id (ami-...)")] | None = None
    name: Str | None = None
    owner: Str | None = None
    ssm_parameter: Str | None = None

    @model_validator(mode="after")
    def _one(self) -> AMISelectorTerm:
        others = {"tags": self.tags, "name": self.name, "owner": self.owner}
        if all(v is None for v in (self.alias, self.id, self.ssm_parameter, *others.values())):
            raise ValueError("expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']")
        if self.id is not None and (self.alias is not None or any(v is not None for v in others.values())):
            raise ValueError(
                "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
            )
        if self.alias is not None and (self.id is not None or any(v is not None for v in others.values())):
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"
            )
        return self


class CapacityReservationSelectorTerm(LenientModel):
    """Capacity reservations to use (``tags``, ``id`` or ``ownerID``); accepted, not interpreted."""

    tags: dict[Str, Str] | None = None
    id: Str | None = None
    owner_id: Str | None = Field(default=None, alias="ownerID")


def _check_reserved(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in _RESERVED_KEYS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(_RESERVED_KEYS)}")
        if parse_quantity(value) < 0:
            raise ValueError(f"{key}: cannot be a negative resource quantity; got {value!r}")
    return values


def _check_eviction(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in _EVICTION_SIGNALS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(_EVICTION_SIGNALS)}")
        if not isinstance(value, str):
            raise ValueError(f"{key}: must be a string such as '10%' or '100Mi'; got {value!r}")
        if not _PERCENT.match(value):
            try:
                parse_quantity(value)
            except ValueError:
                raise ValueError(f"{key}: {value!r} is neither a percentage (0%..100%) nor a quantity") from None
    return values


def _check_grace_periods(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in _EVICTION_SIGNALS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(_EVICTION_SIGNALS)}")
        parse_duration(value)
    return values


class KubeletConfiguration(KubeModel):
    """``spec.kubelet``: the typed kubelet settings of Karpenter's AWS provider (v1.9 shape).

    ``systemReserved``/``kubeReserved`` take ``cpu``, ``memory``, ``ephemeral-storage``, ``pid``
    quantities; ``evictionHard``/``evictionSoft`` map eviction signals to a percentage or quantity;
    every ``evictionSoft`` signal needs an ``evictionSoftGracePeriod`` (a Go duration) and back.
    """

    cluster_dns: list[Str] | None = Field(default=None, alias="clusterDNS")
    max_pods: Int | None = Field(default=None, ge=0)
    pods_per_core: Int | None = Field(default=None, ge=0)
    system_reserved: Annotated[dict[Str, Quantity], AfterValidator(_check_reserved)] | None = None
    kube_reserved: Annotated[dict[Str, Quantity], AfterValidator(_check_reserved)] | None = None
    eviction_hard: Annotated[dict[Str, Str], AfterValidator(_check_eviction)] | None = None
    eviction_soft: Annotated[dict[Str, Str], AfterValidator(_check_eviction)] | None = None
    eviction_soft_grace_period: Annotated[dict[Str, Str], AfterValidator(_check_grace_periods)] | None = None
    eviction_max_pod_grace_period: Int | None = None
    image_gc_high_threshold_percent: Int | None = Field(default=None, ge=0, le=100, alias="imageGCHighThresholdPercent")
    image_gc_low_threshold_percent: Int | None = Field(default=None, ge=0, le=100, alias="imageGCLowThresholdPercent")
    cpu_cfs_quota: Bool | None = Field(default=None, alias="cpuCFSQuota")

    @model_validator(mode="after")
    def _cross(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise ValueError("imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent")
        soft = set(self.eviction_soft or {})
        grace = set(self.eviction_soft_grace_period or {})
        if soft - grace:
            raise ValueError(f"evictionSoft key(s) {sorted(soft - grace)} have no matching evictionSoftGracePeriod")
        if grace - soft:
            raise ValueError(f"evictionSoftGracePeriod key(s) {sorted(grace - soft)} have no matching evictionSoft")
        return self


def _check_volume_size(value: str) -> str:
    match = re.fullmatch(r"([1-9][0-9]*)(Gi|G|Ti|T)", value)
    if not match or parse_quantity(value) > 64 * 10**12:
        raise ValueError(
            f"{value!r} is not a volume size: a whole number of Gi, G, Ti or T, at most 64T (e.g. '100Gi')"
        )
    return value


class BlockDevice(KubeModel):
    """``ebs`` of a block device mapping: an EBS volume. Needs ``volumeSize`` or ``snapshotID``.

    ``volumeSize`` is a quantity in G/Gi/T/Ti (``100Gi``); ``iops`` and ``throughput`` (MiB/s) apply
    to io1/io2/gp3; ``volumeInitializationRate`` (MiB/s, 100..300) only with a snapshot.
    """

    delete_on_termination: Bool | None = None
    encrypted: Bool | None = None
    iops: Int | None = None
    kms_key_id: Str | None = Field(default=None, alias="kmsKeyID")
    snapshot_id: Str | None = Field(default=None, alias="snapshotID")
    throughput: Int | None = None
    volume_initialization_rate: Int | None = Field(default=None, ge=100, le=300)
    volume_size: Annotated[Quantity, AfterValidator(_check_volume_size)] | None = None
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        return self


class BlockDeviceMapping(KubeModel):
    """One ``blockDeviceMappings`` entry: ``deviceName`` (``/dev/xvda``), its ``ebs`` volume, and
    ``rootVolume`` (at most one mapping may set it; it then backs the node's ephemeral storage)."""

    device_name: Str | None = None
    ebs: BlockDevice | None = None
    root_volume: Bool = False


class MetadataOptions(KubeModel):
    """Instance metadata service (IMDS) options, each field defaulted as upstream:
    ``httpEndpoint: enabled``, ``httpProtocolIPv6: disabled``, ``httpPutResponseHopLimit: 1``
    (1..64; pods using IMDSv2 from a pod network usually need 2), ``httpTokens: required``."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(default="disabled", alias="httpProtocolIPv6")
    http_put_response_hop_limit: Int = Field(default=1, ge=1, le=64)
    http_tokens: Literal["required", "optional"] = "required"


def _check_tags(tags: dict[str, str]) -> dict[str, str]:
    for key in tags:
        if key == "":
            raise ValueError("empty tag keys aren't supported")
        if key in RESTRICTED_TAG_KEYS or key.startswith("kubernetes.io/cluster"):
            raise ValueError(f"tag contains a restricted tag {key!r}: Karpenter sets it itself")
    return tags


class EC2NodeClassSpec(KubeModel):
    """``EC2NodeClass.spec``. Selector terms are ORed; fields within a term are ANDed."""

    subnet_selector_terms: list[SubnetSelectorTerm] = Field(min_length=1, max_length=30)
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(min_length=1, max_length=30)
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = None
    associate_public_ip_address: Bool | None = Field(default=None, alias="associatePublicIPAddress")
    ami_selector_terms: list[AMISelectorTerm] = Field(min_length=1, max_length=30)
    ami_family: (
        Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"] | None
    ) = None
    user_data: Str | None = None
    role: Str | None = Field(default=None, min_length=1)
    instance_profile: Str | None = Field(default=None, min_length=1)
    tags: Annotated[dict[Str, Str], AfterValidator(_check_tags)] = Field(default_factory=dict)
    kubelet: KubeletConfiguration | None = None
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    instance_store_policy: Literal["RAID0"] | None = None
    detailed_monitoring: Bool | None = None
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    context: Str | None = None
    ip_prefix_count: Int | None = None
    network_interfaces: list[dict[str, Any]] | None = None
    placement_group_selector: dict[str, Any] | None = None
    connection_tracking: dict[str, Any] | None = None
    cpu_options: dict[str, Any] | None = None

    @field_validator("ami_selector_terms")
    @classmethod
    def _alias_alone(cls, terms: list[AMISelectorTerm]) -> list[AMISelectorTerm]:
        if any(t.alias is not None for t in terms) and len(terms) != 1:
            raise ValueError(
                "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"
            )
        return terms

    @field_validator("block_device_mappings")
    @classmethod
    def _one_root(cls, mappings: list[BlockDeviceMapping] | None) -> list[BlockDeviceMapping] | None:
        if mappings and sum(1 for m in mappings if m.root_volume) > 1:
            raise ValueError("must have only one blockDeviceMappings with rootVolume")
        return mappings

    @model_validator(mode="after")
    def _cross(self) -> EC2NodeClassSpec:
        if (self.role is None) == (self.instance_profile is None):
            raise ValueError("must specify exactly one of ['role', 'instanceProfile']")
        alias = self.alias()
        if alias is None:
            if self.ami_family is None:
                raise ValueError("must specify amiFamily if amiSelectorTerms does not contain an alias")
        elif self.ami_family is not None:
            implied = ALIAS_FAMILIES[alias.split("@", 1)[0]]
            if self.ami_family not in (implied, "Custom"):
                raise ValueError(
                    f"if set, amiFamily must be {implied!r} or 'Custom' when using an alias {alias!r}; "
                    f"got {self.ami_family!r}"
                )
        return self

    def alias(self) -> str | None:
        """The AMI alias (``al2023@latest``) when the selector uses one, else None."""
        for term in self.ami_selector_terms:
            if term.alias is not None:
                return term.alias
        return None

    def resolved_ami_family(self) -> str:
        """``amiFamily``, or the family implied by the alias (``al2023@latest`` -> ``AL2023``)."""
        if self.ami_family is not None:
            return self.ami_family
        alias = self.alias()
        assert alias is not None  # guaranteed by validation
        return ALIAS_FAMILIES[alias.split("@", 1)[0]]


class Subnet(KubeModel):
    """A resolved subnet in status (most free IPs first, then id)."""

    id: Str
    zone: Str
    zone_id: Str | None = Field(default=None, alias="zoneID")


class SecurityGroup(KubeModel):
    """A resolved security group in status (ordered by id)."""

    id: Str
    name: Str | None = None


class AMIRequirement(KubeModel):
    """A node-selector requirement an AMI applies to (e.g. ``kubernetes.io/arch In [arm64]``)."""

    key: Str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    values: list[Str] | None = None


class AMI(KubeModel):
    """A resolved AMI in status, with the requirements (arch, GPU...) it serves."""

    id: Str
    name: Str | None = None
    deprecated: Bool | None = None
    requirements: list[AMIRequirement] = Field(default_factory=list)


class EC2NodeClassStatus(KubeModel):
    """``EC2NodeClass.status``: resolved subnets, security groups, AMIs, instance profile, and
    conditions (``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``, ``InstanceProfileReady``,
    ``ValidationSucceeded``, ``PlacementGroupReady``, ``CapacityReservationsReady``, ``Ready``)."""

    subnets: list[Subnet] = Field(default_factory=list)
    security_groups: list[SecurityGroup] = Field(default_factory=list)
    amis: list[AMI] = Field(default_factory=list)
    capacity_reservations: list[dict[str, Any]] = Field(default_factory=list)
    instance_profile: Str | None = None
    conditions: list[Condition] = Field(default_factory=list)


class EC2NodeClass(KubeObject):
    """karpenter.k8s.aws/v1 ``EC2NodeClass`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "EC2NodeClass"
    NODE_CLASS: ClassVar[bool] = True

    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)


def api_kinds() -> list[type[KubeObject]]:
    """Entry point ``karpy.apis: aws``: the kinds this provider defines."""
    return [EC2NodeClass]
