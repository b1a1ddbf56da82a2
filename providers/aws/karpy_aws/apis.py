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
``volumeSize`` or ``snapshotID``; in a capacity-reservation term ``tags``, ``id`` or
``instanceMatchCriteria`` (``id`` alone, ``cr-...``; ``ownerID`` 12 digits). ``metadataOptions`` gets the upstream defaults
(``httpEndpoint: enabled``, ``httpProtocolIPv6: disabled``, ``httpPutResponseHopLimit: 1``,
``httpTokens: required``), field by field.

``networkInterfaces`` (a primary interface, no (card, device) pair twice, one ``efa-only`` per
card, at most 150), ``placementGroupSelector`` (``name`` or ``id``), ``connectionTracking`` (at
least one timeout, upstream's ranges) and ``cpuOptions`` are typed as upstream's CRD has them;
the first three and ``ipPrefixCount`` go into the launch template (:mod:`karpy_aws.launch`).
``cpuOptions.nestedVirtualization`` is validated but not sent: the bundled EC2 API model
(botocore) has no such launch-template field yet.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from karpy_aws.apivalues import ALIAS_FAMILIES, EVICTION_SIGNALS, RESERVED_KEYS, RESTRICTED_TAG_KEYS
from karpy_core.apis.base import Bool, Condition, CRDQuantity, Int, Int32, KubeModel, KubeObject, Str
from karpy_core.apis.crdspec import AGE_COLUMN, READY_COLUMN, CRDSpec, Overlay, printer_column
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
    "CapacityReservation",
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
_PERCENT = re.compile(r"^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$", re.ASCII)  # Go: \d is ASCII


def _check_selector_tags(tags: dict[str, str]) -> dict[str, str]:
    for key, value in tags.items():
        if not key or not value:
            raise ValueError("empty tag keys or values aren't supported (use '*' to match any value)")
    return tags


SelectorTags = Annotated[dict[Str, Str], Field(max_length=20), AfterValidator(_check_selector_tags)]


def _pattern(regex: str, what: str) -> Any:
    # Go's regexp (the CRD's pattern): $ is the end of the text, not before a final newline
    compiled = re.compile(regex[:-1] + r"\Z" if regex.endswith("$") else regex)

    def check(value: str) -> str:
        if not compiled.search(value):
            raise ValueError(f"{value!r} is not {what}")
        return value

    return AfterValidator(check)


class SubnetSelectorTerm(KubeModel):
    """One ORed subnet selector: all ``tags`` must match (``"*"`` = any value), or an ``id``."""

    tags: SelectorTags | None = None
    """Tags a subnet must carry, all of them; a value of * matches any value of the key."""
    id: Annotated[Str, _pattern(r"subnet-[0-9a-z]+", "a subnet id (subnet-...)")] | None = None
    """The ID of one subnet (subnet-...)."""

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
    """Tags a security group must carry, all of them; a value of * matches any value of the key."""
    id: Annotated[Str, _pattern(r"sg-[0-9a-z]+", "a security group id (sg-...)")] | None = None
    """The ID of one security group (sg-...)."""
    name: Str | None = None
    """The name of the security group (its GroupName)."""

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
    """A family@version shorthand for the AMIs AWS publishes for EKS, e.g. al2023@latest or bottlerocket@v1.20.0;
    it also sets the AMI family. Cannot be combined with other terms or fields."""
    tags: SelectorTags | None = None
    """Tags an AMI must carry, all of them; a value of * matches any value of the key."""
    id: Annotated[Str, _pattern(r"ami-[0-9a-z]+", "an AMI id (ami-...)")] | None = None
    """The ID of one AMI (ami-...)."""
    name: Str | None = None
    """The AMI's name; wildcards as EC2's name filter allows."""
    owner: Str | None = None
    """The AWS account ID or alias (self, amazon) owning the AMI; by default self and amazon when a name is given."""
    ssm_parameter: Str | None = None
    """An SSM parameter (name or ARN) whose value is the AMI ID to use."""

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


class CapacityReservationSelectorTerm(KubeModel):
    """One ORed capacity-reservation selector: ``tags`` (optionally with the owning account
    ``ownerID``), ``instanceMatchCriteria``, or an ``id`` alone (karpenter-provider-aws
    ``CapacityReservationSelectorTerm``). Only active reservations are selected."""

    tags: SelectorTags | None = None
    """Tags a capacity reservation must carry, all of them; a value of * matches any value of the key."""
    id: Annotated[Str, _pattern(r"^cr-[0-9a-z]+$", "a capacity reservation id (cr-...)")] | None = None
    """The ID of one capacity reservation (cr-...)."""
    owner_id: Annotated[Str, _pattern(r"^[0-9]{12}$", "a 12-digit AWS account id")] | None = Field(default=None, alias="ownerID")
    """The AWS account that owns the reservation (12 digits); combined with tags."""
    instance_match_criteria: Literal["open", "targeted"] | None = Field(default=None, alias="instanceMatchCriteria")
    """Only reservations that accept this kind of launch: open or targeted."""

    @model_validator(mode="after")
    def _one(self) -> CapacityReservationSelectorTerm:
        if self.tags is None and self.id is None and self.instance_match_criteria is None:
            raise ValueError("expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']")
        if self.id is not None and (self.tags is not None or self.owner_id is not None or self.instance_match_criteria is not None):
            raise ValueError("'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation "
                             "selector term")
        return self


def _check_reserved(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in RESERVED_KEYS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(RESERVED_KEYS)}")
        if parse_quantity(value) < 0:
            raise ValueError(f"{key}: cannot be a negative resource quantity; got {value!r}")
    return values


def _check_eviction(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in EVICTION_SIGNALS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(EVICTION_SIGNALS)}")
        if not isinstance(value, str):
            raise ValueError(f"{key}: must be a string such as '10%' or '100Mi'; got {value!r}")
        if not _PERCENT.fullmatch(value):
            try:
                parse_quantity(value)
            except ValueError:
                raise ValueError(f"{key}: {value!r} is neither a percentage (0%..100%) nor a quantity") from None
    return values


def _check_grace_periods(values: dict[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if key not in EVICTION_SIGNALS:
            raise ValueError(f"invalid key {key!r}: valid keys are {list(EVICTION_SIGNALS)}")
        parse_duration(value)
    return values


class KubeletConfiguration(KubeModel):
    """``spec.kubelet``: the typed kubelet settings of Karpenter's AWS provider (v1.9 shape).

    ``systemReserved``/``kubeReserved`` take ``cpu``, ``memory``, ``ephemeral-storage``, ``pid``
    quantities; ``evictionHard``/``evictionSoft`` map eviction signals to a percentage or quantity;
    every ``evictionSoft`` signal needs an ``evictionSoftGracePeriod`` (a Go duration) and back.
    """

    cluster_dns: list[Str] | None = Field(default=None, alias="clusterDNS")
    """IP addresses of the cluster DNS servers the kubelet gives pods (overrides the AMI's default)."""
    max_pods: Int32 | None = Field(default=None, ge=0)
    """The most pods the kubelet runs on the node; overrides the count derived from the instance type's network interfaces."""
    pods_per_core: Int32 | None = Field(default=None, ge=0)
    """The most pods per vCPU; the node's pod limit is the lower of this times its vCPUs and maxPods."""
    system_reserved: Annotated[dict[Str, CRDQuantity], AfterValidator(_check_reserved)] | None = None
    """Resources (cpu, memory, ephemeral-storage, pid) held back for the operating system's daemons, taken off the node's allocatable."""
    kube_reserved: Annotated[dict[Str, CRDQuantity], AfterValidator(_check_reserved)] | None = None
    """Resources (cpu, memory, ephemeral-storage, pid) held back for Kubernetes' own daemons, taken off the
    node's allocatable; default computed from the instance size."""
    eviction_hard: Annotated[dict[Str, Str], AfterValidator(_check_eviction)] | None = None
    """Signals and thresholds (e.g. memory.available: 5%) at which the kubelet evicts pods at once."""
    eviction_soft: Annotated[dict[Str, Str], AfterValidator(_check_eviction)] | None = None
    """Signals and thresholds at which the kubelet evicts pods once the signal has stayed past its grace period."""
    eviction_soft_grace_period: Annotated[dict[Str, Str], AfterValidator(_check_grace_periods)] | None = None
    """How long each soft eviction signal must hold before pods are evicted, per signal (a duration)."""
    eviction_max_pod_grace_period: Int32 | None = None
    """The longest termination grace period, in seconds, the kubelet grants pods it evicts for a soft threshold."""
    image_gc_high_threshold_percent: Int | None = Field(default=None, ge=0, le=100, alias="imageGCHighThresholdPercent")
    """Disk usage percentage from which image garbage collection always runs; above imageGCLowThresholdPercent."""
    image_gc_low_threshold_percent: Int | None = Field(default=None, ge=0, le=100, alias="imageGCLowThresholdPercent")
    """Disk usage percentage image garbage collection brings usage down to, and below which it never runs."""
    cpu_cfs_quota: Bool | None = Field(default=None, alias="cpuCFSQuota")
    """Whether CPU limits of containers are enforced with CFS quota."""

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
    """Whether the volume is deleted when the instance terminates."""
    encrypted: Bool | None = None
    """Whether the volume is encrypted."""
    iops: Int | None = None
    """Provisioned I/O operations per second, for io1, io2 and gp3 volumes."""
    kms_key_id: Str | None = Field(default=None, alias="kmsKeyID")
    """The KMS key (ARN or ID) encrypting the volume."""
    snapshot_id: Str | None = Field(default=None, alias="snapshotID")
    """The EBS snapshot the volume is created from."""
    throughput: Int | None = None
    """Throughput in MiB/s, for gp3 volumes."""
    volume_initialization_rate: Int | None = Field(default=None, ge=100, le=300)
    """The rate, in MiB/s (100 to 300), at which a volume created from a snapshot is filled in."""
    volume_size: Annotated[CRDQuantity, AfterValidator(_check_volume_size)] | None = None
    """The volume's size, as a quantity (e.g. 20Gi, 100G); bounds depend on the volume type."""
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None
    """The EBS volume type: standard, io1, io2, gp2, sc1, st1 or gp3."""

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.snapshot_id is None and self.volume_size is None:
            raise ValueError("snapshotID or volumeSize must be defined")
        return self


class BlockDeviceMapping(KubeModel):
    """One ``blockDeviceMappings`` entry: ``deviceName`` (``/dev/xvda``), its ``ebs`` volume, and
    ``rootVolume`` (at most one mapping may set it; it then backs the node's ephemeral storage)."""

    device_name: Str | None = None
    """The device name the volume is exposed as, e.g. /dev/xvda."""
    ebs: BlockDevice | None = None
    """The EBS volume to attach at that device."""
    root_volume: Bool = False
    """Whether this is the root volume, whose size counts as the node's ephemeral storage; at most one mapping may set it."""


class MetadataOptions(KubeModel):
    """Instance metadata service (IMDS) options, each field defaulted as upstream:
    ``httpEndpoint: enabled``, ``httpProtocolIPv6: disabled``, ``httpPutResponseHopLimit: 1``
    (1..64; pods using IMDSv2 from a pod network usually need 2), ``httpTokens: required``."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    """Whether the instance metadata service answers at all (enabled or disabled)."""
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(default="disabled", alias="httpProtocolIPv6")
    """Whether the instance metadata service also answers on its IPv6 address."""
    http_put_response_hop_limit: Int = Field(default=1, ge=1, le=64)
    """How many network hops a metadata token response may travel (1 to 64); 1 keeps it from pods on a pod network, 2 lets them reach it."""
    http_tokens: Literal["required", "optional"] = "required"
    """required: only session-token (IMDSv2) requests are answered; optional: IMDSv1 requests are answered too."""


class NetworkInterface(KubeModel):
    """One ``networkInterfaces`` entry: the network card and device index of an interface and
    whether it is a regular (``interface``) or an EFA-only (``efa-only``) one."""

    network_card_index: Int = Field(ge=0)
    """The network card the interface is attached to (0 is the primary card)."""
    device_index: Int = Field(ge=0)
    """The interface's device index on its card (0 with card 0: the primary interface)."""
    interface_type: Literal["interface", "efa-only"]
    """interface: a regular ENA interface (EFA too where the type supports it); efa-only: an EFA device with no IP traffic."""


class PlacementGroupSelector(KubeModel):
    """The placement group instances launch into, by ``name`` or by ``id`` (``pg-...``): exactly one."""

    name: Str | None = Field(default=None, min_length=1)
    """The placement group's name."""
    id: Str | None = Field(default=None, pattern=r"^pg-[0-9a-z]+$")
    """The placement group's ID, pg-..."""

    @model_validator(mode="after")
    def _one(self) -> PlacementGroupSelector:
        if self.name is None and self.id is None:
            raise ValueError("expected at least one, got none, ['name', 'id']")
        if self.name is not None and self.id is not None:
            raise ValueError("'name' and 'id' are mutually exclusive")
        return self


class ConnectionTracking(KubeModel):
    """Idle timeouts (seconds) of the instances' network interfaces' connection tracking; at
    least one must be set (EC2 ``ConnectionTrackingSpecificationRequest``)."""

    tcp_established_timeout: Int | None = Field(default=None, ge=60, le=432000)
    """Seconds an idle established TCP connection is tracked (60 to 432000)."""
    udp_stream_timeout: Int | None = Field(default=None, ge=60, le=180)
    """Seconds an idle UDP stream (traffic seen both ways more than once) is tracked (60 to 180)."""
    udp_timeout: Int | None = Field(default=None, ge=30, le=60)
    """Seconds other idle UDP flows are tracked (30 to 60)."""

    @model_validator(mode="after")
    def _any(self) -> ConnectionTracking:
        if self.tcp_established_timeout is None and self.udp_stream_timeout is None and self.udp_timeout is None:
            raise ValueError("at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set")
        return self


class CPUOptions(KubeModel):
    """CPU options of the instances."""

    nested_virtualization: Literal["enabled", "disabled"] | None = None
    """Whether the instances may run nested virtual machines (enabled or disabled)."""


def _check_network_interfaces(items: list[NetworkInterface]) -> list[NetworkInterface]:
    """Karpenter's two rules: a primary interface (card 0, device 0, ``interface``) when any is
    given; no (card, device) pair twice and at most one ``efa-only`` interface per card."""
    if items and not any(i.network_card_index == 0 and i.device_index == 0 and i.interface_type == "interface" for i in items):
        raise ValueError("networkInterfaces must include a primary interface with interfaceType='interface'")
    pairs = [(i.network_card_index, i.device_index) for i in items]
    efa = [i.network_card_index for i in items if i.interface_type == "efa-only"]
    if len(set(pairs)) != len(pairs) or len(set(efa)) != len(efa):
        raise ValueError("networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, "
                         "and can have at most one efa device per network card")
    return items


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
    """How the subnets nodes launch into are found: a subnet matching any term is used. 1 to 30 terms."""
    security_group_selector_terms: list[SecurityGroupSelectorTerm] = Field(min_length=1, max_length=30)
    """How the security groups attached to nodes are found: every group matching any term is attached. 1 to 30 terms."""
    capacity_reservation_selector_terms: list[CapacityReservationSelectorTerm] | None = Field(default=None, max_length=30)
    """How the on-demand capacity reservations nodes may launch into are found; reserved capacity is used before other offerings."""
    associate_public_ip_address: Bool | None = Field(default=None, alias="associatePublicIPAddress")
    """Whether nodes get a public IPv4 address; unset: the subnet's own setting decides."""
    ami_selector_terms: list[AMISelectorTerm] = Field(min_length=1, max_length=30)
    """How the machine images nodes boot are found: AMIs matching any term are candidates, the newest compatible
    one is used per architecture. 1 to 30 terms."""
    ami_family: (
        Literal["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"] | None
    ) = None
    """The bootstrap format of the AMIs (AL2, AL2023, Bottlerocket, Windows2019/2022/2025, or Custom to pass
    userData as is); implied by an alias term."""
    user_data: Str | None = None
    """Extra user data merged with (or, for Custom, used instead of) the bootstrap script karpy generates for the AMI family."""
    role: Str | None = Field(default=None, min_length=1)
    """The IAM role nodes run as; an instance profile for it is created and managed for this NodeClass. Set this or instanceProfile."""
    instance_profile: Str | None = Field(default=None, min_length=1)
    """An existing IAM instance profile nodes run with, instead of a managed one from role."""
    tags: Annotated[dict[Str, Str], AfterValidator(_check_tags)] = Field(default_factory=dict)
    """Tags put on the instances, volumes, network interfaces and launch templates made for nodes; keys in the
    kubernetes.io, karpenter.sh and karpenter.k8s.aws domains are reserved."""
    kubelet: KubeletConfiguration | None = None
    """Settings passed to the kubelet of every node."""
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    """The volumes attached to each instance; unset: the AMI family's default root volume."""
    instance_store_policy: Literal["RAID0"] | None = None
    """What to do with the instance-store disks of types that have them: RAID0 stripes them into one volume used
    for the kubelet's and containers' storage."""
    detailed_monitoring: Bool | None = None
    """Whether EC2 detailed (one-minute) CloudWatch monitoring is on for the instances."""
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    """How the instances' metadata service (IMDS) answers."""
    context: Str | None = None
    """The EC2 Fleet context (a reserved-capacity context ID) launches are made with."""
    ip_prefix_count: Int | None = None
    """How many IPv4 prefixes to assign to the primary network interface (prefix delegation)."""
    network_interfaces: Annotated[list[NetworkInterface], AfterValidator(_check_network_interfaces)] | None = Field(
        default=None, max_length=150)
    """The network interfaces each instance gets (network card and device indexes, interface type such as efa-only)."""
    placement_group_selector: PlacementGroupSelector | None = None
    """The placement group (by name or ID) instances launch into."""
    connection_tracking: ConnectionTracking | None = None
    """Timeouts of the network interfaces' connection tracking (established TCP, UDP streams, other UDP)."""
    cpu_options: CPUOptions | None = None
    """CPU options of the instances, such as nested virtualization."""

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
    """The subnet's ID."""
    zone: Str
    """The availability zone of the subnet."""
    zone_id: Str | None = Field(default=None, alias="zoneID")
    """The availability zone ID of the subnet (the account-independent name, e.g. use1-az1)."""


class SecurityGroup(KubeModel):
    """A resolved security group in status (ordered by id)."""

    id: Str
    """The security group's ID."""
    name: Str | None = None
    """The security group's name."""


class AMIRequirement(KubeModel):
    """A node-selector requirement an AMI applies to (e.g. ``kubernetes.io/arch In [arm64]``)."""

    key: Str
    """A node label the AMI is limited to (e.g. kubernetes.io/arch)."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]
    """How the label's value is matched (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte)."""
    values: list[Str] | None = None
    """The values compared with the label."""


class AMI(KubeModel):
    """A resolved AMI in status, with the requirements (arch, GPU...) it serves."""

    id: Str
    """The AMI's ID."""
    name: Str | None = None
    """The AMI's name."""
    deprecated: Bool | None = None
    """Whether the AMI is deprecated; deprecated AMIs are only used when no other matches."""
    requirements: list[AMIRequirement] = Field(default_factory=list)
    """The nodes this AMI is for (architecture, GPU or not, ...), as label requirements."""


class CapacityReservation(KubeModel):
    """A resolved capacity reservation in status (ordered by id; karpenter-provider-aws
    ``CapacityReservation``)."""

    availability_zone: Str = Field(alias="availabilityZone")
    """The availability zone the reservation is in."""
    end_time: Str | None = Field(default=None, alias="endTime")
    """When the reservation expires (RFC 3339); none for an open-ended reservation."""
    id: Annotated[Str, _pattern(r"^cr-[0-9a-z]+$", "a capacity reservation id (cr-...)")]
    """The reservation's ID (cr-...)."""
    instance_match_criteria: Literal["open", "targeted"] = Field(alias="instanceMatchCriteria")
    """Which launches it accepts: open or targeted."""
    instance_type: Str = Field(alias="instanceType")
    """The instance type it reserves."""
    owner_id: Annotated[Str, _pattern(r"^[0-9]{12}$", "a 12-digit AWS account id")] = Field(alias="ownerID")
    """The AWS account that owns it."""
    reservation_type: Literal["default", "capacity-block"] = Field(default="default", alias="reservationType")
    """default (an on-demand capacity reservation) or capacity-block."""
    interruptible: Bool = False
    """Whether the reservation is interruptible."""
    state: Literal["active", "expiring"] = "active"
    """active, or expiring (a capacity block within its reclamation window: no new launches)."""


class EC2NodeClassStatus(KubeModel):
    """``EC2NodeClass.status``: resolved subnets, security groups, AMIs, instance profile, and
    conditions (``SubnetsReady``, ``SecurityGroupsReady``, ``AMIsReady``, ``InstanceProfileReady``,
    ``ValidationSucceeded``, ``PlacementGroupReady``, ``CapacityReservationsReady``, ``Ready``)."""

    subnets: list[Subnet] = Field(default_factory=list)
    """The subnets the selector terms resolved to, with their zones."""
    security_groups: list[SecurityGroup] = Field(default_factory=list)
    """The security groups the selector terms resolved to."""
    amis: list[AMI] = Field(default_factory=list)
    """The AMIs the selector terms resolved to, each with the nodes it applies to."""
    capacity_reservations: list[CapacityReservation] = Field(default_factory=list)
    """The capacity reservations the selector terms resolved to (ReservedCapacity feature gate)."""
    instance_profile: Str | None = None
    """The instance profile nodes launch with (the managed one for role, or instanceProfile)."""
    conditions: list[Condition] = Field(default_factory=list)
    """The NodeClass's state: SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady,
    ValidationSucceeded and Ready; only a Ready NodeClass launches nodes."""


class EC2NodeClass(KubeObject):
    """karpenter.k8s.aws/v1 ``EC2NodeClass`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = API_VERSION
    KIND: ClassVar[str] = "EC2NodeClass"
    NODE_CLASS: ClassVar[bool] = True

    spec: EC2NodeClassSpec
    status: EC2NodeClassStatus = Field(default_factory=EC2NodeClassStatus)


def _crd_overlays() -> dict[str, Overlay]:
    from karpy_aws.crd import ec2nodeclass_overlays  # only when a CRD is generated

    return ec2nodeclass_overlays()


def api_kinds() -> list[type[KubeObject] | CRDSpec]:
    """Entry point ``karpy.apis: aws``: the kinds this provider defines, with their CRDs
    (``karpy_core.apis.crds`` renders them; the CEL rules are in :mod:`karpy_aws.crd`)."""
    return [
        CRDSpec(
            EC2NodeClass,
            "ec2nodeclasses",
            short_names=("ec2nc", "ec2ncs"),
            columns=(READY_COLUMN, AGE_COLUMN, printer_column("Role", ".spec.role", priority=1)),
            overlays=_crd_overlays,
        )
    ]
