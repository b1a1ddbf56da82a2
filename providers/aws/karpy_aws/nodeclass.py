"""EC2NodeClass resolution: selector terms -> status (subnets, security groups, AMIs, instance
profile) and the conditions that roll up into ``Ready``.

Used by the plugin before every launch / instance-type listing (through a 60 s cache per NodeClass
spec) and by :class:`EC2NodeClassController`, the reconcile loop that writes the status back.

Reconcile order (Karpenter ``pkg/controllers/nodeclass/controller.go``): AMIs -> subnets ->
security groups -> instance profile -> validation. Conditions and the reasons a user sees:

============================ ======================================================================
condition                    False reasons (message says what was searched and what to fix)
============================ ======================================================================
``AMIsReady``                ``AMINotFound`` (which terms/ids/SSM parameters were tried),
                             ``UnsupportedAlias`` (AL2 alias on Kubernetes >= 1.33)
``SubnetsReady``             ``SubnetsNotFound`` (lists every tag filter / id searched)
``SecurityGroupsReady``      ``SecurityGroupsNotFound``
``InstanceProfileReady``     ``RoleNotFound``, ``InstanceProfileIsARN``, ``InstanceProfileNotFound``,
                             ``InstanceProfileCreationFailed``
``ValidationSucceeded``      ``TagValidationFailed``, ``RunInstancesAuthCheckFailed``,
                             ``DependenciesNotReady``
``CapacityReservationsReady`` ``CapacityReservationsNotFound`` (DescribeCapacityReservations
                             failed; the message names the AWS code). Set, and part of
                             ``Ready``, only with ``ReservedCapacity`` on and
                             ``capacityReservationSelectorTerms`` given; True with an empty
                             ``status.capacityReservations`` when nothing matches (as upstream)
``Ready``                    the first failing condition's reason and message
============================ ======================================================================

A **warning** condition ``SecurityGroupsClusterTagConflict`` (not part of ``Ready``) is True when
more than one selected security group carries ``kubernetes.io/cluster/<cluster>``: the AWS Load
Balancer Controller then fails with "Multiple tagged security groups" (seed 003's trap; Karpenter
issues #8257, #1039). An event names the groups.

AWS calls: DescribeSubnets, DescribeSecurityGroups, DescribeImages, ssm:GetParameter,
iam:GetInstanceProfile/CreateInstanceProfile/TagInstanceProfile/AddRoleToInstanceProfile/
RemoveRoleFromInstanceProfile/GetRole, RunInstances(DryRun), DescribeCapacityReservations
(:mod:`karpy_aws.capacityreservation`). Filters use distinct names per call
(``tag:<k>`` with ``*`` for any value, never two ``tag-key`` filters): moto keeps only the last
filter of a repeated name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from karpy_aws.apis import (
    AMI,
    RESTRICTED_TAG_KEYS,
    AMIRequirement,
    CapacityReservation,
    EC2NodeClass,
    EC2NodeClassStatus,
    SecurityGroup,
    Subnet,
)
from karpy_aws.cache import TTLCache
from karpy_aws.capacityreservation import CapacityReservations
from karpy_aws.errors import call, error_code
from karpy_core.apis.base import Condition
from karpy_core.apis.labels import LABEL_ARCH
from karpy_core.cloudprovider.catalog.aws import LABEL_INSTANCE_GPU_COUNT, LABEL_INSTANCE_GPU_MANUFACTURER
from karpy_core.errors import CloudProviderError, ConflictError, KubeAPIError, NotFoundError, ignore_not_found

if TYPE_CHECKING:
    from karpy_aws.clients import AWSClients
    from karpy_aws.events import EventRecorder
    from karpy_core.kube.port import KubeClient

__all__ = [
    "CONDITION_TYPES",
    "COND_READY",
    "COND_SUBNETS",
    "COND_SECURITY_GROUPS",
    "COND_AMIS",
    "COND_INSTANCE_PROFILE",
    "COND_VALIDATION",
    "COND_SG_CLUSTER_TAG",
    "COND_CAPACITY_RESERVATIONS",
    "COND_PLACEMENT_GROUP",
    "NODECLASS_FINALIZER",
    "NODECLASS_HASH_ANNOTATION",
    "NODECLASS_HASH_VERSION_ANNOTATION",
    "NODECLASS_HASH_VERSION",
    "INSTANCE_PROFILE_ANNOTATION",
    "nodeclass_hash",
    "alias_parameters",
    "is_ready",
    "condition",
    "NodeClassResolver",
    "EC2NodeClassController",
]

log = logging.getLogger("karpy.aws")

COND_READY = "Ready"
COND_SUBNETS = "SubnetsReady"
COND_SECURITY_GROUPS = "SecurityGroupsReady"
COND_AMIS = "AMIsReady"
COND_INSTANCE_PROFILE = "InstanceProfileReady"
COND_VALIDATION = "ValidationSucceeded"
COND_SG_CLUSTER_TAG = "SecurityGroupsClusterTagConflict"
COND_CAPACITY_RESERVATIONS = "CapacityReservationsReady"
COND_PLACEMENT_GROUP = "PlacementGroupReady"
CONDITION_TYPES = (COND_AMIS, COND_SUBNETS, COND_SECURITY_GROUPS, COND_INSTANCE_PROFILE, COND_VALIDATION)
"""The conditions that roll up into ``Ready``, in reconcile order."""

NODECLASS_FINALIZER = "karpenter.k8s.aws/termination"
"""The finalizer every EC2NodeClass gets (Karpenter ``v1.TerminationFinalizer``): its instance
profile and launch templates are cleaned up before it goes (:meth:`EC2NodeClassController._finalize`)."""
NODECLASS_HASH_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash"
NODECLASS_HASH_VERSION_ANNOTATION = "karpenter.k8s.aws/ec2nodeclass-hash-version"
INSTANCE_PROFILE_ANNOTATION = "karpenter.k8s.aws/instance-profile-name"
NODECLASS_HASH_VERSION = "karpy-v1"
"""karpy's static-drift hash is SHA-256 of canonical JSON, not Karpenter's hashstructure value, so
it is versioned apart from Karpenter's ``v6``: hashes are compared only when versions are equal."""

_HASH_IGNORED = ("subnetSelectorTerms", "securityGroupSelectorTerms", "amiSelectorTerms", "amiFamily", "kubelet",
                 "ipPrefixCount", "capacityReservationSelectorTerms")
_AWS_ARCH = {"x86_64": "amd64", "arm64": "arm64"}
_CACHE_TTL = 60.0
_VALIDATION_TTL = 30 * 60.0
_AL2_MAX_MINOR = 32  # AL2 EKS AMIs end with Kubernetes 1.32: alias al2 on >= 1.33 is UnsupportedAlias


def nodeclass_hash(nodeclass: EC2NodeClass) -> str:
    """16 hex characters of SHA-256 over the spec that causes static drift: everything except the
    selector terms, ``amiFamily``, ``kubelet``, ``ipPrefixCount`` (Karpenter ``hash:"ignore"``),
    plus the resolved AMI family. Changing userData, tags, role/instanceProfile, block devices,
    metadataOptions, detailedMonitoring, associatePublicIPAddress or instanceStorePolicy changes it."""
    spec = nodeclass.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    for key in _HASH_IGNORED:
        spec.pop(key, None)
    spec["_resolvedAMIFamily"] = nodeclass.spec.resolved_ami_family()
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def condition(nodeclass: EC2NodeClass, type_: str) -> Condition | None:
    return next((c for c in nodeclass.status.conditions if c.type == type_), None)


def is_ready(nodeclass: EC2NodeClass) -> bool:
    c = condition(nodeclass, COND_READY)
    return c is not None and c.status == "True"


def alias_parameters(alias: str, kubernetes_version: str) -> list[tuple[str, str, str]]:
    """SSM parameter names an AMI alias resolves through, as ``(name, kube arch, variant)``
    (reference section 1, Karpenter ``al2023.go``/``al2.go``/``bottlerocket.go``/``windows.go``).

    ``al2023@latest`` -> ``/aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/<arch>/<variant>/recommended/image_id``
    for arch x86_64/arm64 and variant standard/nvidia; a pinned version replaces ``recommended`` with
    ``amazon-eks-node-al2023-<arch>-<variant>-<k8s>-<version>``.
    """
    family, _, version = alias.partition("@")
    k8s = kubernetes_version
    out: list[tuple[str, str, str]] = []
    if family == "al2023":
        for arch in ("x86_64", "arm64"):
            for variant in ("standard", "nvidia"):
                leaf = "recommended" if version == "latest" else f"amazon-eks-node-al2023-{arch}-{variant}-{k8s}-{version}"
                out.append((f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{variant}/{leaf}/image_id",
                            _AWS_ARCH[arch], variant))
    elif family == "al2":
        for suffix, arch, variant in (("", "amd64", "standard"), ("-arm64", "arm64", "standard"), ("-gpu", "amd64", "nvidia")):
            leaf = "recommended" if version == "latest" else f"amazon-eks{suffix}-node-{k8s}-{version}"
            out.append((f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{leaf}/image_id", arch, variant))
    elif family == "bottlerocket":
        ver = "latest" if version == "latest" else version.removeprefix("v")
        for flavour, variant in (("", "standard"), ("-nvidia", "nvidia")):
            for arch in ("x86_64", "arm64"):
                out.append((f"/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{ver}/image_id", _AWS_ARCH[arch], variant))
    elif family.startswith("windows"):
        year = family.removeprefix("windows")
        out.append((f"/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id",
                    "amd64", "standard"))
    return out


def _variant_requirements(arch: str, variant: str) -> list[AMIRequirement]:
    reqs = [AMIRequirement(key=LABEL_ARCH, operator="In", values=[arch])]
    if variant == "nvidia":
        reqs.append(AMIRequirement(key=LABEL_INSTANCE_GPU_MANUFACTURER, operator="In", values=["nvidia"]))
    else:
        reqs.append(AMIRequirement(key=LABEL_INSTANCE_GPU_COUNT, operator="DoesNotExist"))
    return reqs


def _tag_filters(tags: dict[str, str]) -> list[dict[str, Any]]:
    """One filter per tag, ``tag:<key>`` with ``*`` for "any value": distinct names (moto gap)."""
    return [{"Name": f"tag:{k}", "Values": [v]} for k, v in sorted(tags.items())]


def _describe_filters(filters: Sequence[dict[str, Any]]) -> str:
    return " AND ".join(f"{f['Name']}={','.join(f['Values'])}" for f in filters)


@dataclass
class _Step:
    status: str
    reason: str
    message: str


@dataclass
class Resolution:
    """What one resolution produced: the NodeClass with its new status, and whether it is Ready."""

    nodeclass: EC2NodeClass
    ready: bool
    warnings: list[str] = field(default_factory=list)


class NodeClassResolver:
    """Resolves an :class:`EC2NodeClass` against AWS.

    Args:
        clients: the plugin's :class:`~karpy_aws.clients.AWSClients`.
        cluster_name: the EKS cluster name (tags, instance-profile path).
        region: AWS region.
        kubernetes_version: ``"1.33"``; picks the SSM alias paths.
        now: seconds since the epoch (the plugin's clock).
        events: where warnings go.
        dry_run: validate launch permissions with ``RunInstances(DryRun=True)`` (cached 30 min).
    """

    def __init__(
        self,
        *,
        clients: AWSClients,
        cluster_name: str,
        region: str,
        kubernetes_version: str,
        now: Callable[[], float],
        events: EventRecorder,
        dry_run: bool = True,
    ):
        self.clients = clients
        self.cluster_name = cluster_name
        self.region = region
        self.kubernetes_version = kubernetes_version
        self._now = now
        self.events = events
        self.dry_run = dry_run
        self._cache: TTLCache[Resolution] = TTLCache(now, _CACHE_TTL)
        self._validated: TTLCache[_Step] = TTLCache(now, _VALIDATION_TTL)
        self._warned: set[tuple[str, tuple[str, ...]]] = set()
        self.capacity_reservations = CapacityReservations(clients=clients, now=now)
        """The reservations' available counts (the instance types' reserved offerings read them)."""
        self.reserved_capacity = True
        """The ``ReservedCapacity`` feature gate (the plugin sets it): off, no reservation is listed."""

    def _key(self, nc: EC2NodeClass) -> tuple[str, str, str]:
        spec = json.dumps(nc.spec.model_dump(by_alias=True, exclude_none=True, mode="json"), sort_keys=True)
        return (nc.metadata.name or "", nc.metadata.uid or "", hashlib.sha256(spec.encode()).hexdigest())

    def invalidate(self) -> None:
        """Forget cached resolutions (after an ICE on a subnet, or in tests)."""
        self._cache.clear()

    async def resolve(self, nodeclass: EC2NodeClass, *, use_cache: bool = True) -> Resolution:
        """Resolve every selector and return the NodeClass with a fresh status (a copy; the input
        is not modified). AWS errors become False conditions, never exceptions, except for
        programming errors."""
        key = self._key(nodeclass)
        if use_cache:
            hit = self._cache.get(key)
            if hit is not None:
                return hit
        nc = nodeclass.model_copy(deep=True)
        status = EC2NodeClassStatus(conditions=list(nc.status.conditions))
        steps: dict[str, _Step] = {}
        warnings: list[str] = []

        steps[COND_AMIS], status.amis = await self._amis(nc)
        steps[COND_SUBNETS], status.subnets = await self._subnets(nc)
        steps[COND_SECURITY_GROUPS], status.security_groups, sg_warning = await self._security_groups(nc)
        steps[COND_INSTANCE_PROFILE], status.instance_profile = await self._instance_profile(nc)
        steps[COND_VALIDATION] = await self._validate(nc, status, steps)
        steps[COND_PLACEMENT_GROUP] = await self._placement_group(nc)
        rollup: tuple[str, ...] = (*CONDITION_TYPES, COND_PLACEMENT_GROUP)
        if self.reserved_capacity:  # as Karpenter: part of Ready while the gate is on, True without selector terms
            if nc.spec.capacity_reservation_selector_terms:
                steps[COND_CAPACITY_RESERVATIONS], status.capacity_reservations = await self._capacity_reservations(nc)
            else:
                steps[COND_CAPACITY_RESERVATIONS] = _Step("True", COND_CAPACITY_RESERVATIONS, "")
            rollup = (*rollup, COND_CAPACITY_RESERVATIONS)

        now = datetime.fromtimestamp(self._now(), UTC)
        generation = nc.metadata.generation if hasattr(nc.metadata, "generation") else None
        conds = {c.type: c for c in status.conditions}

        def put(type_: str, step: _Step) -> None:
            prev = conds.get(type_)
            ltt = prev.last_transition_time if prev is not None and prev.status == step.status else now
            conds[type_] = Condition(type=type_, status=step.status, reason=step.reason, message=step.message,
                                     last_transition_time=ltt, observed_generation=generation)

        if COND_CAPACITY_RESERVATIONS not in rollup:
            conds.pop(COND_CAPACITY_RESERVATIONS, None)
        for t in rollup:
            put(t, steps[t])
        failing = next((t for t in rollup if steps[t].status != "True"), None)
        if failing is None:
            put(COND_READY, _Step("True", "Ready", ""))
        else:
            put(COND_READY, _Step("False", steps[failing].reason, f"{failing}=False: {steps[failing].message}"))
        if sg_warning is not None:
            put(COND_SG_CLUSTER_TAG, sg_warning)
            warnings.append(sg_warning.message)
        else:
            conds.pop(COND_SG_CLUSTER_TAG, None)
        status.conditions = [conds[t] for t in sorted(conds)]
        nc.status = status
        result = Resolution(nc, failing is None, warnings)
        return self._cache.set(key, result)

    # ------------------------------------------------------------------ capacity reservations
    async def _capacity_reservations(self, nc: EC2NodeClass) -> tuple[_Step, list[CapacityReservation]]:
        try:
            found = await self.capacity_reservations.list(nc.spec.capacity_reservation_selector_terms or [])
        except CloudProviderError as exc:
            return _Step("False", "CapacityReservationsNotFound",
                         f"DescribeCapacityReservations failed ({exc.code}): {exc}; the controller's role needs "
                         f"ec2:DescribeCapacityReservations"), []
        return _Step("True", "CapacityReservationsReady", ""), found

    # ------------------------------------------------------------------ placement group
    async def _placement_group(self, nc: EC2NodeClass) -> _Step:
        """``PlacementGroupReady`` (Karpenter ``nodeclass/placementgroup.go``): True without a
        ``placementGroupSelector``; else True when DescribePlacementGroups finds the group by
        name or ID, ``PlacementGroupNotFound`` when it does not, ``PlacementGroupResolutionFailed``
        on another error."""
        sel = nc.spec.placement_group_selector
        if sel is None:
            return _Step("True", COND_PLACEMENT_GROUP, "")
        ec2 = await self.clients.ec2()
        query = {"GroupIds": [sel.id]} if sel.id else {"GroupNames": [sel.name]}
        try:
            resp = await call(ec2.describe_placement_groups, "DescribePlacementGroups", **query)
        except CloudProviderError as exc:
            if exc.code in ("InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound", "InvalidPlacementGroupId.Malformed"):
                return _Step("False", "PlacementGroupNotFound", f"Placement group {sel.id or sel.name!r} not found")
            return _Step("False", "PlacementGroupResolutionFailed", f"Failed to resolve placement group ({exc.code}): {exc}")
        if not [g for g in resp.get("PlacementGroups") or [] if g.get("State") in (None, "available")]:
            return _Step("False", "PlacementGroupNotFound", f"Placement group {sel.id or sel.name!r} not found")
        return _Step("True", COND_PLACEMENT_GROUP, "")

    # ------------------------------------------------------------------ subnets
    async def _subnets(self, nc: EC2NodeClass) -> tuple[_Step, list[Subnet]]:
        ec2 = await self.clients.ec2()
        queries: list[list[dict[str, Any]]] = []
        ids = [t.id for t in nc.spec.subnet_selector_terms if t.id]
        if ids:
            queries.append([{"Name": "subnet-id", "Values": sorted(ids)}])
        queries.extend(_tag_filters(t.tags) for t in nc.spec.subnet_selector_terms if t.tags)
        found: dict[str, dict[str, Any]] = {}
        try:
            for filters in queries:
                resp = await call(ec2.describe_subnets, "DescribeSubnets", Filters=filters, MaxResults=500)
                for s in resp.get("Subnets", []):
                    found[s["SubnetId"]] = s
        except CloudProviderError as exc:
            return _Step("False", "SubnetsNotFound", f"DescribeSubnets failed ({exc.code}): {exc}"), []
        if not found:
            searched = "; ".join(_describe_filters(q) for q in queries)
            return _Step("False", "SubnetsNotFound",
                         f"no subnet matches subnetSelectorTerms (searched: {searched}); tag your node subnets, e.g. "
                         f"karpenter.sh/discovery=<cluster>, or fix the selector (tags inside one term are ANDed, "
                         f"terms are ORed)"), []
        ordered = sorted(found.values(), key=lambda s: (-int(s.get("AvailableIpAddressCount", 0)), s["SubnetId"]))
        subnets = [Subnet(id=s["SubnetId"], zone=s["AvailabilityZone"], zone_id=s.get("AvailabilityZoneId")) for s in ordered]
        return _Step("True", "SubnetsReady", ""), subnets

    # ------------------------------------------------------------------ security groups
    async def _security_groups(self, nc: EC2NodeClass) -> tuple[_Step, list[SecurityGroup], _Step | None]:
        ec2 = await self.clients.ec2()
        queries: list[list[dict[str, Any]]] = []
        ids = [t.id for t in nc.spec.security_group_selector_terms if t.id]
        names = [t.name for t in nc.spec.security_group_selector_terms if t.name]
        if ids:
            queries.append([{"Name": "group-id", "Values": sorted(ids)}])
        if names:
            queries.append([{"Name": "group-name", "Values": sorted(names)}])
        queries.extend(_tag_filters(t.tags) for t in nc.spec.security_group_selector_terms if t.tags)
        found: dict[str, dict[str, Any]] = {}
        try:
            for filters in queries:
                resp = await call(ec2.describe_security_groups, "DescribeSecurityGroups", Filters=filters, MaxResults=500)
                for g in resp.get("SecurityGroups", []):
                    found[g["GroupId"]] = g
        except CloudProviderError as exc:
            return _Step("False", "SecurityGroupsNotFound", f"DescribeSecurityGroups failed ({exc.code}): {exc}"), [], None
        if not found:
            searched = "; ".join(_describe_filters(q) for q in queries)
            return (_Step("False", "SecurityGroupsNotFound",
                          f"no security group matches securityGroupSelectorTerms (searched: {searched})"), [], None)
        groups = [SecurityGroup(id=g["GroupId"], name=g.get("GroupName")) for g in sorted(found.values(), key=lambda g: g["GroupId"])]
        cluster_key = f"kubernetes.io/cluster/{self.cluster_name}"
        tagged = sorted(g["GroupId"] for g in found.values() if any(t.get("Key") == cluster_key for t in g.get("Tags") or []))
        warning = None
        if len(tagged) > 1:
            message = (f"{len(tagged)} selected security groups carry the tag {cluster_key}: {', '.join(tagged)}; "
                       f"the AWS Load Balancer Controller needs exactly one such group per node and fails with "
                       f"'Multiple tagged security groups'. Remove the tag from all but one, or narrow "
                       f"securityGroupSelectorTerms (e.g. select by aws:eks:cluster-name or by id)")
            warning = _Step("True", "MultipleClusterTaggedSecurityGroups", message)
            marker = (nc.metadata.name or "", tuple(tagged))
            if marker not in self._warned:
                self._warned.add(marker)
                await self.events.record("Warning", "MultipleClusterTaggedSecurityGroups", f"EC2NodeClass/{nc.metadata.name}",
                                         message, security_groups=tagged)
        return _Step("True", "SecurityGroupsReady", ""), groups, warning

    # ------------------------------------------------------------------ AMIs
    async def _amis(self, nc: EC2NodeClass) -> tuple[_Step, list[AMI]]:
        alias = nc.spec.alias()
        tried: list[str] = []
        images: list[tuple[dict[str, Any], list[AMIRequirement]]] = []
        try:
            if alias is not None:
                family = alias.partition("@")[0]
                major, _, minor = self.kubernetes_version.partition(".")
                if family == "al2" and (int(major), int(minor or 0)) > (1, _AL2_MAX_MINOR):
                    return _Step("False", "UnsupportedAlias",
                                 f"alias {alias!r}: Amazon Linux 2 AMIs are not published for Kubernetes "
                                 f"{self.kubernetes_version}; use al2023@latest"), []
                by_id: dict[str, list[AMIRequirement]] = {}
                for name, arch, variant in alias_parameters(alias, self.kubernetes_version):
                    tried.append(name)
                    value = await self._ssm(name)
                    if value and value.startswith("ami-") and value not in by_id:
                        by_id[value] = _variant_requirements(arch, variant)
                if by_id:
                    described = await self._describe_images(ImageIds_filter=sorted(by_id))
                    for img in described:
                        images.append((img, by_id[img["ImageId"]]))
                    missing = sorted(set(by_id) - {i["ImageId"] for i in described})
                    if missing:
                        tried.append(f"DescribeImages did not return {', '.join(missing)}")
            else:
                terms = nc.spec.ami_selector_terms
                ids = sorted(t.id for t in terms if t.id)
                raw: list[dict[str, Any]] = []
                if ids:
                    tried.append(f"image-id={','.join(ids)}")
                    raw.extend(await self._describe_images(ImageIds_filter=ids))
                for t in terms:
                    if t.id:
                        continue
                    if t.ssm_parameter:
                        tried.append(f"ssmParameter {t.ssm_parameter}")
                        value = await self._ssm(t.ssm_parameter)
                        if value and value.startswith("ami-"):
                            raw.extend(await self._describe_images(ImageIds_filter=[value]))
                        continue
                    filters = _tag_filters(t.tags) if t.tags else []
                    if t.name:
                        filters.append({"Name": "name", "Values": [t.name]})
                    owners = [t.owner] if t.owner else (["self", "amazon"] if t.name else [])
                    tried.append(_describe_filters(filters) + (f" owners={','.join(owners)}" if owners else ""))
                    raw.extend(await self._describe_images(filters=filters, owners=owners))
                for img in raw:
                    arch = _AWS_ARCH.get(str(img.get("Architecture", "x86_64")), "amd64")
                    images.append((img, [AMIRequirement(key=LABEL_ARCH, operator="In", values=[arch])]))
        except CloudProviderError as exc:
            return _Step("False", "AMINotFound", f"AMI discovery failed ({exc.code}): {exc}"), []
        amis = _newest_per_requirements(images)
        if not amis:
            what = f"alias {alias!r}" if alias else "amiSelectorTerms"
            return _Step("False", "AMINotFound",
                         f"failed to discover any AMIs for {what} (tried: {'; '.join(tried) or 'nothing'})"), []
        return _Step("True", "AMIsReady", ""), amis

    async def _ssm(self, name: str) -> str | None:
        ssm = await self.clients.get("ssm")
        try:
            resp = await call(ssm.get_parameter, "GetParameter", Name=name)
        except CloudProviderError as exc:
            if exc.code in ("ParameterNotFound", "ParameterVersionNotFound"):
                return None
            raise
        return str((resp.get("Parameter") or {}).get("Value") or "") or None

    async def _describe_images(self, *, ImageIds_filter: Sequence[str] = (), filters: Sequence[dict[str, Any]] = (),
                               owners: Sequence[str] = ()) -> list[dict[str, Any]]:
        ec2 = await self.clients.ec2()
        kwargs: dict[str, Any] = {"Filters": list(filters)}
        if ImageIds_filter:
            kwargs["Filters"].append({"Name": "image-id", "Values": list(ImageIds_filter)})
        if owners:
            kwargs["Owners"] = list(owners)
        resp = await call(ec2.describe_images, "DescribeImages", **kwargs)
        return [i for i in resp.get("Images", []) if i.get("State", "available") == "available"]

    # ------------------------------------------------------------------ instance profile
    def instance_profile_name(self, nc: EC2NodeClass) -> str:
        """``<cluster>_<digits>``: a stable name per (region, NodeClass name), at most 128 chars
        (Karpenter ``GetProfileName``)."""
        return self._profile_name(nc.metadata.name or "")

    def _profile_name(self, nodeclass: str) -> str:
        digest = int(hashlib.sha256(f"{self.region}{nodeclass}".encode()).hexdigest()[:15], 16)
        return f"{self.cluster_name}_{digest}"[:128]

    async def delete_instance_profile(self, nodeclass: str, uid: str | None) -> bool:
        """Delete the instance profile karpy made for EC2NodeClass ``nodeclass`` (its roles
        removed first); True when one was deleted. Only a profile whose tags name this cluster
        (``kubernetes.io/cluster/<cluster>: owned``) and this NodeClass
        (``karpenter.k8s.aws/ec2nodeclass``) is touched: a profile of the same name karpy cannot
        prove it made is left alone.

        Raises:
            CloudProviderError: an IAM call failed (other than the profile being gone).
        """
        iam = await self.clients.get("iam")
        name = self._profile_name(nodeclass)
        try:
            profile = (await call(iam.get_instance_profile, "GetInstanceProfile", InstanceProfileName=name))["InstanceProfile"]
        except CloudProviderError as exc:
            if exc.code == "NoSuchEntity":
                return False
            raise
        tags = {t["Key"]: t["Value"] for t in profile.get("Tags") or []}
        if tags.get(f"kubernetes.io/cluster/{self.cluster_name}") != "owned" or tags.get("karpenter.k8s.aws/ec2nodeclass") != nodeclass:
            log.warning("instance profile not deleted: its tags do not show karpy made it for this NodeClass",
                        extra={"EC2NodeClass": {"name": nodeclass}, "instance-profile": name})
            return False
        for role in profile.get("Roles") or []:
            await call(iam.remove_role_from_instance_profile, "RemoveRoleFromInstanceProfile", InstanceProfileName=name,
                       RoleName=role["RoleName"])
        try:
            await call(iam.delete_instance_profile, "DeleteInstanceProfile", InstanceProfileName=name)
        except CloudProviderError as exc:
            if exc.code != "NoSuchEntity":
                raise
        self.invalidate()
        return True

    async def delete_launch_templates(self, nodeclass: str) -> list[str]:
        """Delete the launch templates tagged with this cluster (``eks:eks-cluster-name``) and
        EC2NodeClass ``nodeclass`` (``karpenter.k8s.aws/ec2nodeclass``), the tags karpy creates
        them with; returns their names.

        Raises:
            CloudProviderError: an EC2 call failed (other than a template being gone).
        """
        ec2 = await self.clients.ec2()
        resp = await call(ec2.describe_launch_templates, "DescribeLaunchTemplates", Filters=[
            {"Name": "tag:eks:eks-cluster-name", "Values": [self.cluster_name]},
            {"Name": "tag:karpenter.k8s.aws/ec2nodeclass", "Values": [nodeclass]}])
        deleted = []
        for lt in resp.get("LaunchTemplates") or []:
            try:
                await call(ec2.delete_launch_template, "DeleteLaunchTemplate", LaunchTemplateId=lt["LaunchTemplateId"])
            except CloudProviderError as exc:
                if "NotFound" not in (exc.code or ""):
                    raise
            deleted.append(lt["LaunchTemplateName"])
        return deleted

    async def _instance_profile(self, nc: EC2NodeClass) -> tuple[_Step, str | None]:
        if nc.spec.instance_profile is not None:
            name = nc.spec.instance_profile
            if name.startswith("arn:"):
                return _Step("False", "InstanceProfileIsARN",
                             f"instanceProfile must be the profile's name, not its ARN: use {name.rsplit('/', 1)[-1]!r}"), None
            return _Step("True", "InstanceProfileReady", ""), name
        role = (nc.spec.role or "").rsplit("/", 1)[-1]
        iam = await self.clients.get("iam")
        name = self.instance_profile_name(nc)
        uid = nc.metadata.uid or nc.metadata.name
        path = f"/karpenter/{self.region}/{self.cluster_name}/{uid}/"
        try:
            try:
                await call(iam.get_role, "GetRole", RoleName=role)
            except CloudProviderError as exc:
                if exc.code == "NoSuchEntity":
                    return _Step("False", "RoleNotFound",
                                 f"IAM role {role!r} (spec.role) does not exist; create it with the node policies "
                                 f"(AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy, AmazonEC2ContainerRegistryReadOnly, "
                                 f"AmazonSSMManagedInstanceCore) or fix the name"), None
                raise
            try:
                resp = await call(iam.get_instance_profile, "GetInstanceProfile", InstanceProfileName=name)
                profile = resp["InstanceProfile"]
            except CloudProviderError as exc:
                if exc.code != "NoSuchEntity":
                    raise
                tags = {**nc.spec.tags, f"kubernetes.io/cluster/{self.cluster_name}": "owned",
                        "eks:eks-cluster-name": self.cluster_name, "karpenter.k8s.aws/ec2nodeclass": nc.metadata.name or "",
                        "topology.kubernetes.io/region": self.region}
                resp = await call(iam.create_instance_profile, "CreateInstanceProfile", InstanceProfileName=name, Path=path,
                                  Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())])
                profile = resp["InstanceProfile"]
            attached = [r["RoleName"] for r in profile.get("Roles") or []]
            if attached != [role]:
                for old in attached:
                    await call(iam.remove_role_from_instance_profile, "RemoveRoleFromInstanceProfile",
                               InstanceProfileName=name, RoleName=old)
                await call(iam.add_role_to_instance_profile, "AddRoleToInstanceProfile", InstanceProfileName=name, RoleName=role)
        except CloudProviderError as exc:
            return _Step("False", "InstanceProfileCreationFailed", f"instance profile {name} for role {role!r}: {exc}"), None
        return _Step("True", "InstanceProfileReady", ""), name

    # ------------------------------------------------------------------ validation
    async def _validate(self, nc: EC2NodeClass, status: EC2NodeClassStatus, steps: dict[str, _Step]) -> _Step:
        bad = sorted(k for k in nc.spec.tags if k in RESTRICTED_TAG_KEYS or k.startswith("kubernetes.io/cluster"))
        if bad:
            return _Step("False", "TagValidationFailed",
                         f"spec.tags may not set {', '.join(bad)}: karpy sets these tags itself")
        not_ready = [t for t in (COND_AMIS, COND_SUBNETS, COND_SECURITY_GROUPS, COND_INSTANCE_PROFILE) if steps[t].status != "True"]
        if not_ready:
            return _Step("False", "DependenciesNotReady", f"waiting for {', '.join(not_ready)}")
        if not self.dry_run:
            return _Step("True", "ValidationSucceeded", "")
        key = (nc.metadata.name, status.amis[0].id, status.subnets[0].id)
        hit = self._validated.get(key)
        if hit is not None:
            return hit
        ec2 = await self.clients.ec2()
        try:
            await ec2.run_instances(DryRun=True, ImageId=status.amis[0].id, InstanceType="t3.micro", MinCount=1, MaxCount=1,
                                    SubnetId=status.subnets[0].id, SecurityGroupIds=[g.id for g in status.security_groups])
            step = _Step("True", "ValidationSucceeded", "")
        except Exception as exc:  # botocore ClientError; DryRunOperation is the success answer
            code = error_code(exc)
            if code == "DryRunOperation":
                step = _Step("True", "ValidationSucceeded", "")
            elif code in ("UnauthorizedOperation", "AuthFailure"):
                step = _Step("False", "RunInstancesAuthCheckFailed",
                             f"the controller's IAM policy does not allow ec2:RunInstances for this NodeClass ({code}); "
                             f"check ec2:RunInstances/CreateFleet/CreateLaunchTemplate and iam:PassRole")
            else:
                log.info("RunInstances dry run answered; ignored", extra={"EC2NodeClass": {"name": nc.metadata.name}, "code": code})
                step = _Step("True", "ValidationSucceeded", "")
        return self._validated.set(key, step)


def _newest_per_requirements(images: list[tuple[dict[str, Any], list[AMIRequirement]]]) -> list[AMI]:
    """Keep, per distinct requirement set, the newest available image (then by name); output
    sorted by requirement set then id. Deprecated images lose to non-deprecated ones."""
    best: dict[str, tuple[tuple[Any, ...], dict[str, Any], list[AMIRequirement]]] = {}
    for img, reqs in images:
        rkey = json.dumps([r.model_dump(mode="json") for r in reqs], sort_keys=True)
        deprecated = bool(img.get("DeprecationTime")) and str(img["DeprecationTime"]) < datetime.now(UTC).isoformat()
        rank = (not deprecated, str(img.get("CreationDate") or ""), str(img.get("Name") or ""), img["ImageId"])
        if rkey not in best or rank > best[rkey][0]:
            best[rkey] = (rank, img, reqs)
    out = []
    for rkey in sorted(best):
        rank, img, reqs = best[rkey]
        out.append(AMI(id=img["ImageId"], name=img.get("Name"), deprecated=not rank[0] or None, requirements=reqs))
    return out


class EC2NodeClassController:
    """Reconcile loop: resolve every EC2NodeClass in the cluster and write its status.

    Args:
        kube: the cluster.
        resolver: the plugin's :class:`NodeClassResolver`.

    A NodeClass whose stored object does not validate (e.g. a restricted tag that slipped past
    the CRD) gets ``ValidationSucceeded=False`` / ``Ready=False`` with the validation message.
    """

    name = "ec2nodeclass"

    def __init__(self, *, kube: KubeClient, resolver: NodeClassResolver, events: EventRecorder | None = None):
        self.kube = kube
        self.resolver = resolver
        self.events = events

    async def reconcile(self) -> dict[str, bool]:
        """One pass; returns ``{name: ready}`` for the NodeClasses not being deleted. Each one gets
        the ``karpenter.k8s.aws/termination`` finalizer; one being deleted is finalized
        (:meth:`_finalize`)."""
        out: dict[str, bool] = {}
        claims: list[dict[str, Any]] | None = None  # listed once per pass, when first needed
        for obj in await self.kube.list("EC2NodeClass"):
            name = obj["metadata"]["name"]
            if claims is None:
                claims = await self.kube.list("NodeClaim")
            mine = [c for c in claims if ((c.get("spec") or {}).get("nodeClassRef") or {}).get("kind") == "EC2NodeClass"
                    and ((c.get("spec") or {}).get("nodeClassRef") or {}).get("name") == name]
            if obj["metadata"].get("deletionTimestamp"):
                await self._finalize(obj, mine)
                continue
            finalizers = list(obj["metadata"].get("finalizers") or [])
            if NODECLASS_FINALIZER not in finalizers:
                await self._set_finalizers(obj, [*finalizers, NODECLASS_FINALIZER])
            try:
                nc = EC2NodeClass.model_validate(obj)
            except ValidationError as exc:
                reason = "TagValidationFailed" if "restricted tag" in str(exc) else "InvalidSpec"
                message = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                conds = [{"type": t, "status": "False", "reason": reason, "message": message} for t in (COND_VALIDATION, COND_READY)]
                await self._patch(name, {"conditions": conds})
                out[name] = False
                continue
            res = await self.resolver.resolve(nc)
            await self._patch(name, res.nodeclass.status.model_dump(by_alias=True, exclude_none=True, mode="json"))
            await self._restamp(mine, nodeclass_hash(nc))
            out[name] = res.ready
        return out

    async def _set_finalizers(self, obj: dict[str, Any], finalizers: list[str]) -> None:
        """Patch ``metadata.finalizers`` with the ``resourceVersion`` read (a merge patch replaces
        the list: a conflict means another writer changed it, and the next pass retries)."""
        meta = obj["metadata"]
        with contextlib.suppress(NotFoundError, ConflictError):
            await self.kube.patch("EC2NodeClass", meta["name"], {"metadata": {
                "finalizers": finalizers, "resourceVersion": meta.get("resourceVersion")}})

    async def _finalize(self, obj: dict[str, Any], claims: list[dict[str, Any]]) -> None:
        """An EC2NodeClass being deleted (Karpenter ``nodeclass/controller.go`` ``finalize``): while
        NodeClaims still use it, a ``WaitingOnNodeClaimTermination`` event names them and nothing
        else happens; then the instance profile karpy made for its ``role`` is deleted (only one
        whose tags show it is this cluster's and this NodeClass's), so are the launch templates
        tagged with this cluster and NodeClass, and the finalizer comes off. ``claims``: the
        NodeClaims that reference it."""
        meta = obj["metadata"]
        name = meta["name"]
        if NODECLASS_FINALIZER not in (meta.get("finalizers") or []):
            return
        users = sorted(c["metadata"]["name"] for c in claims)
        if users:
            if self.events is not None:
                shown = ", ".join(users[:5]) + (f" and {len(users) - 5} other(s)" if len(users) > 5 else "")
                await self.events.record("Normal", "WaitingOnNodeClaimTermination", f"EC2NodeClass/{name}",
                                         f"Waiting on NodeClaim termination for {shown}")
            return
        if not (obj.get("spec") or {}).get("instanceProfile"):
            await self.resolver.delete_instance_profile(name, meta.get("uid"))
        await self.resolver.delete_launch_templates(name)
        await self._set_finalizers(obj, [f for f in meta.get("finalizers") or [] if f != NODECLASS_FINALIZER])

    async def _restamp(self, claims: list[dict[str, Any]], current: str) -> None:
        """Re-stamp ``claims`` (those of one EC2NodeClass) that carry another hash version (those
        Karpenter launched, after the switch to karpy): the version becomes
        :data:`NODECLASS_HASH_VERSION` and, unless the claim is already drifted, the hash becomes
        ``current``, so a later NodeClass change is drift again. Karpenter's ``nodeclass/hash``
        controller does the same when its hash version changes. Claims without a hash are left
        alone."""
        for claim in claims:
            meta = claim["metadata"]
            ann = meta.get("annotations") or {}
            if (meta.get("deletionTimestamp") or NODECLASS_HASH_ANNOTATION not in ann
                    or ann.get(NODECLASS_HASH_VERSION_ANNOTATION) == NODECLASS_HASH_VERSION):
                continue
            patch = {NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION}
            if not any(c.get("type") == "Drifted" for c in (claim.get("status") or {}).get("conditions") or []):
                patch[NODECLASS_HASH_ANNOTATION] = current
            await ignore_not_found(self.kube.patch("NodeClaim", meta["name"], {"metadata": {"annotations": patch}}))

    async def _patch(self, name: str, status: dict[str, Any]) -> None:
        try:
            await self.kube.patch("EC2NodeClass", name, {"status": status}, status=True)
        except KubeAPIError as exc:  # deleted meanwhile
            log.info("EC2NodeClass status not written", extra={"EC2NodeClass": {"name": name}, "error": exc})
