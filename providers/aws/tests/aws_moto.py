"""moto in server mode for the AWS provider tests, with seeding and fault injection.

* One ``ThreadedMotoServer`` on 127.0.0.1 per session; ``POST /moto-api/reset`` before each test.
* :func:`seed` creates what a real EKS account has: discovery-tagged subnets (zones a, b, c of the
  default VPC), a discovery-tagged security group, node IAM roles, AMIs with fixed ids (injected
  into moto's backend in-process) and the EKS/Bottlerocket/Windows SSM alias parameters (moto
  refuses PutParameter under ``/aws/``; injected in-process as the test-infra notes describe).
* Fault injection lives here only: a server-side patch of moto's ``Fleets.create_fleet`` returns
  ``Errors[]`` (InsufficientInstanceCapacity for listed (type) overrides, or the spot
  service-linked-role failure for spot requests), controlled through :data:`FAULTS`.
* moto 5.2.5 does not model EC2 capacity reservations (no DescribeCapacityReservations,
  CreateCapacityReservation; CreateFleet ignores a launch template's
  ``CapacityReservationSpecification``). A server-side ``describe_capacity_reservations``
  answers from :data:`FAULTS` ``.reservations`` (raw EC2 ``CapacityReservation`` dicts), honouring
  ``CapacityReservationIds`` and the ``state``, ``owner-id``, ``instance-match-criteria``,
  ``tag:<k>`` and ``tag-key`` filters; ``FAULTS.ice_code`` sets the code injected ICE uses
  (``ReservationCapacityExceeded`` for a full reservation).
* Nor placement groups: a server-side ``describe_placement_groups`` answers from :data:`FAULTS`
  ``.placement_groups`` (raw EC2 ``PlacementGroup`` dicts) by ``GroupNames`` / ``GroupIds``, and
  with EC2's ``InvalidPlacementGroup.Unknown`` for an unknown one.
* DescribeInstanceTypes is cached for the whole session in one shared ``InstanceTypeData``.
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aioboto3
import pytest
from karpy_aws.instancetypes import InstanceTypeData
from karpy_aws.plugin import AWSProvider, create_plugin
from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]  # moto re-exports it without __all__
from moto.core.responses import ActionResult
from moto.server import ThreadedMotoServer

REGION = "ap-northeast-2"
CLUSTER = "eks"
K8S = "1.33"
AMI_SEED_000 = "ami-0123456789abcdef0"
AMIS = {
    "ami-0a1023x86standard": ("amazon-eks-node-al2023-x86_64-standard-1.33-v20251120", "x86_64"),
    "ami-0a1023armstandard": ("amazon-eks-node-al2023-arm64-standard-1.33-v20251120", "arm64"),
    "ami-0a1023x86nvidia00": ("amazon-eks-node-al2023-x86_64-nvidia-1.33-v20251120", "x86_64"),
    "ami-0b0771ex86640000a": ("bottlerocket-aws-k8s-1.33-x86_64-v1.50.0", "x86_64"),
    "ami-0b0771earm640000a": ("bottlerocket-aws-k8s-1.33-aarch64-v1.50.0", "arm64"),
    "ami-0c2019win00000000": ("Windows_Server-2019-English-Core-EKS_Optimized-1.33", "x86_64"),
    "ami-0c2022win00000000": ("Windows_Server-2022-English-Core-EKS_Optimized-1.33", "x86_64"),
    "ami-0a1023x86pinned00": ("amazon-eks-node-al2023-x86_64-standard-1.33-v20240625", "x86_64"),
    AMI_SEED_000: ("amazon-eks-node-1.32-v20251120", "x86_64"),
}
SSM = {
    f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/standard/recommended/image_id": "ami-0a1023x86standard",
    f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/arm64/standard/recommended/image_id": "ami-0a1023armstandard",
    f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/nvidia/recommended/image_id": "ami-0a1023x86nvidia00",
    f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/x86_64/standard/"
    f"amazon-eks-node-al2023-x86_64-standard-{K8S}-v20240625/image_id": "ami-0a1023x86pinned00",
    f"/aws/service/bottlerocket/aws-k8s-{K8S}/x86_64/latest/image_id": "ami-0b0771ex86640000a",
    f"/aws/service/bottlerocket/aws-k8s-{K8S}/arm64/latest/image_id": "ami-0b0771earm640000a",
    f"/aws/service/ami-windows-latest/Windows_Server-2019-English-Core-EKS_Optimized-{K8S}/image_id": "ami-0c2019win00000000",
    f"/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-{K8S}/image_id": "ami-0c2022win00000000",
}


@dataclass
class Faults:
    """What the patched CreateFleet does: ``ice_types`` overrides fail with
    InsufficientInstanceCapacity; ``spot_slr`` makes every spot request fail with the missing
    service-linked role. ``calls`` records each CreateFleet's override instance types."""

    ice_types: set[str] = field(default_factory=set)
    spot_slr: bool = False
    calls: list[dict[str, Any]] = field(default_factory=list)
    ice_code: str = "InsufficientInstanceCapacity"
    reservations: list[dict[str, Any]] = field(default_factory=list)
    placement_groups: list[dict[str, Any]] = field(default_factory=list)

    def reset(self) -> None:
        self.ice_types.clear()
        self.spot_slr = False
        self.calls.clear()
        self.ice_code = "InsufficientInstanceCapacity"
        self.reservations.clear()
        self.placement_groups.clear()


FAULTS = Faults()


def _install_fleet_faults() -> None:  # noqa: C901
    import moto.ec2.responses.fleets as fleets

    if getattr(fleets.Fleets.create_fleet, "_karpy_patched", False):
        return
    original = fleets.Fleets.create_fleet

    def create_fleet(self: Any) -> Any:
        cfgs = self._get_param("LaunchTemplateConfigs", [])
        target = self._get_param("TargetCapacitySpecification", {}) or {}
        lifecycle = target.get("DefaultTargetCapacityType", "on-demand")
        ovs = [(c, o) for c in cfgs for o in c.get("Overrides") or []]
        FAULTS.calls.append({"lifecycle": lifecycle, "types": [o.get("InstanceType") for _, o in ovs]})

        def err(code: str, c: dict[str, Any], o: dict[str, Any]) -> dict[str, Any]:
            return {"ErrorCode": code, "ErrorMessage": "injected by karpy tests", "Lifecycle": lifecycle,
                    "LaunchTemplateAndOverrides": {"LaunchTemplateSpecification": c["LaunchTemplateSpecification"], "Overrides": o}}

        if lifecycle == "spot" and FAULTS.spot_slr:
            return ActionResult({"FleetId": "fleet-slr", "Instances": [], "Errors": [
                err("AuthFailure.ServiceLinkedRoleCreationNotPermitted", *ovs[0])]})
        failing = [(c, o) for c, o in ovs if o.get("InstanceType") in FAULTS.ice_types]
        if failing and len(failing) == len(ovs):
            return ActionResult({"FleetId": "fleet-ice", "Instances": [],
                                 "Errors": [err(FAULTS.ice_code, c, o) for c, o in failing]})
        if failing:
            # moto launches the first override: drop the failing ones, report them as errors.
            keep = {id(o) for c, o in ovs if o.get("InstanceType") not in FAULTS.ice_types}
            for c in cfgs:
                c["Overrides"] = [o for o in c.get("Overrides") or [] if id(o) in keep]
            self._get_param = _with_param(self._get_param, "LaunchTemplateConfigs", [c for c in cfgs if c["Overrides"]])
        return original(self)

    create_fleet._karpy_patched = True  # type: ignore[attr-defined]
    fleets.Fleets.create_fleet = create_fleet  # type: ignore[method-assign]  # patching moto's responder

    def describe_capacity_reservations(self: Any) -> Any:
        ids = self._get_param("CapacityReservationIds") or []
        filters = self._filters_from_querystring()
        out = []
        for r in FAULTS.reservations:
            tags = {t["Key"]: t["Value"] for t in r.get("Tags") or []}
            if ids and r["CapacityReservationId"] not in ids:
                continue
            ok = True
            for name, values in filters.items():
                if name == "state":
                    ok = r.get("State", "active") in values
                elif name == "owner-id":
                    ok = r.get("OwnerId") in values
                elif name == "instance-match-criteria":
                    ok = r.get("InstanceMatchCriteria") in values
                elif name == "tag-key":
                    ok = any(k in tags for k in values)
                elif name.startswith("tag:"):
                    ok = tags.get(name[4:]) in values
                if not ok:
                    break
            if ok:
                out.append(r)
        return ActionResult({"CapacityReservations": out})

    fleets.Fleets.describe_capacity_reservations = describe_capacity_reservations  # type: ignore[attr-defined]  # an action moto lacks

    def describe_placement_groups(self: Any) -> Any:
        from moto.ec2.exceptions import EC2ClientError

        names = self._get_param("GroupNames") or []
        ids = self._get_param("GroupIds") or []
        found = [g for g in FAULTS.placement_groups if (not names or g["GroupName"] in names) and (not ids or g["GroupId"] in ids)]
        missing = [n for n in names if n not in {g["GroupName"] for g in found}] + [i for i in ids if i not in {g["GroupId"] for g in found}]
        if missing:  # EC2's answer for an unknown name or ID
            raise EC2ClientError("InvalidPlacementGroup.Unknown", f"The Placement Group '{missing[0]}' is unknown.")
        return ActionResult({"PlacementGroups": found})

    fleets.Fleets.describe_placement_groups = describe_placement_groups  # type: ignore[attr-defined]  # an action moto lacks


def _with_param(get: Any, name: str, value: Any) -> Any:
    def patched(key: str, *args: Any, **kwargs: Any) -> Any:
        return value if key == name else get(key, *args, **kwargs)
    return patched


@pytest.fixture(scope="session")
def moto_url() -> Iterator[str]:
    _install_fleet_faults()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(scope="session")
def instance_type_data() -> InstanceTypeData:
    return InstanceTypeData()


def session() -> aioboto3.Session:
    return aioboto3.Session(aws_access_key_id="testing", aws_secret_access_key="testing", region_name=REGION)


@dataclass
class Seeded:
    url: str
    subnets: dict[str, str]
    security_group: str
    extra: dict[str, Any] = field(default_factory=dict)


def _inject_amis_and_ssm() -> None:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami
    from moto.ssm.models import Parameter, ssm_backends

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][REGION]
    for ami_id, (name, arch) in AMIS.items():
        backend.amis[ami_id] = Ami(backend, ami_id=ami_id, name=name, architecture=arch, owner_id="602401143452",
                                   owner_alias="amazon", public=True, virtualization_type="hvm", region_name=REGION,
                                   root_device_type="ebs", root_device_name="/dev/xvda")
    ssm = ssm_backends[DEFAULT_ACCOUNT_ID][REGION]
    for name, value in SSM.items():
        # moto's Parameter leaves CloudFormationModel's abstract hooks unimplemented; moto builds it the same way
        ssm._parameters[name].append(Parameter(  # type: ignore[abstract]
            account_id=DEFAULT_ACCOUNT_ID, name=name, value=value, parameter_type="String", description=None,
            allowed_pattern=None, keyid=None, last_modified_date=datetime.now(UTC), version=1, data_type="aws:ec2:image"))


async def seed(url: str, *, discovery: str = CLUSTER, zones: tuple[str, ...] = ("a", "b", "c"),
               cluster_tagged_sgs: int = 0) -> Seeded:
    """Reset moto and create subnets/SG/roles/AMIs/SSM parameters (see the module docstring)."""
    urllib.request.urlopen(urllib.request.Request(f"{url}/moto-api/reset", method="POST"), timeout=10).read()
    FAULTS.reset()
    _inject_amis_and_ssm()
    async with session().client("ec2", endpoint_url=url) as ec2, session().client("iam", endpoint_url=url) as iam:
        subnets = {}
        for s in (await ec2.describe_subnets())["Subnets"]:
            zone = s["AvailabilityZone"]
            if zone[-1] in zones:
                await ec2.create_tags(Resources=[s["SubnetId"]], Tags=[{"Key": "karpenter.sh/discovery", "Value": discovery}])
                subnets[zone] = s["SubnetId"]
        vpc = (await ec2.describe_vpcs())["Vpcs"][0]["VpcId"]
        sg = (await ec2.create_security_group(GroupName="eks-node", Description="nodes", VpcId=vpc))["GroupId"]
        await ec2.create_tags(Resources=[sg], Tags=[{"Key": "karpenter.sh/discovery", "Value": discovery}])
        extra_sgs = []
        for i in range(cluster_tagged_sgs):
            g = (await ec2.create_security_group(GroupName=f"eks-cluster-{i}", Description="c", VpcId=vpc))["GroupId"]
            await ec2.create_tags(Resources=[g], Tags=[{"Key": "karpenter.sh/discovery", "Value": discovery},
                                                       {"Key": f"kubernetes.io/cluster/{CLUSTER}", "Value": "owned"}])
            extra_sgs.append(g)
        for role in (f"KarpenterNodeRole-{CLUSTER}", "KarpenterNodeRole-eks"):
            try:
                await iam.create_role(RoleName=role, AssumeRolePolicyDocument="{}")
            except Exception:  # exists already (same name twice)
                pass
    return Seeded(url, subnets, sg, {"cluster_sgs": extra_sgs})


@pytest.fixture
async def seeded(moto_url: str) -> Seeded:
    return await seed(moto_url)


def make_plugin(url: str, instance_type_data: InstanceTypeData, **options: Any) -> AWSProvider:
    opts: dict[str, Any] = {"region": REGION, "cluster_name": CLUSTER, "endpoint_url": url, "session": session(),
                            "kubernetes_version": K8S, "instance_type_data": instance_type_data,
                            "cluster_endpoint": "https://ABCDEF.gr7.ap-northeast-2.eks.amazonaws.com"}
    opts.update(options)
    return create_plugin(opts)


@pytest.fixture
async def plugin_factory(seeded: Seeded, instance_type_data: InstanceTypeData) -> AsyncIterator[Any]:
    made: list[AWSProvider] = []

    def factory(**options: Any) -> AWSProvider:
        p = make_plugin(seeded.url, instance_type_data, **options)
        made.append(p)
        return p

    yield factory
    for p in made:
        await p.aclose()
