"""Launching one instance for a NodeClaim: launch templates and an ``instant`` CreateFleet.

Steps (Karpenter ``pkg/providers/instance/instance.go``, ``pkg/providers/launchtemplate``,
``pkg/batcher/createfleet.go``; reference section 2):

1. The caller passes compatible instance types ordered by price (at most :data:`MAX_TYPES`) and the
   capacity type (spot when allowed and any spot offering is available, else on-demand).
2. One subnet per zone: the first of the NodeClass's status subnets in that zone (most free IPs).
3. One launch template per AMI, named ``karpenter.k8s.aws/<hash of its data>``: ImageId, base64
   user data, IamInstanceProfile, Monitoring, MetadataOptions (+ ``InstanceMetadataTags:
   disabled``), BlockDeviceMappings (GiB, rounded up), ``NetworkInterfaces`` (the NodeClass's
   ``networkInterfaces``, else one primary interface; each with the security groups, the primary
   with ``ipPrefixCount`` and ``connectionTracking``) and ``Placement`` (``placementGroupSelector``).
   Found by DescribeLaunchTemplates (cached 60 s), else created.
4. ``CreateFleet(Type=instant, TotalTargetCapacity=1)`` with one override per instance type x
   zonal subnet (cheapest first), ``price-capacity-optimized`` for spot, ``lowest-price`` for
   on-demand, and identical tags on the instance, its volumes and the fleet.
   **Reserved** (a capacity reservation, ``ReservedCapacity`` gate): one override per reserved
   offering the claim allows (its reservation IDs; one reservation per type and zone, the one
   with most instances left), each through a launch template per (AMI, reservation) whose
   ``CapacityReservationSpecification`` targets that reservation
   (``capacity-reservations-only``; a capacity block also sets ``InstanceMarketOptions``
   ``capacity-block``); the fleet's target capacity type is ``on-demand`` (``capacity-block``
   for a block), ``lowest-price``. A launch takes one of the reservation's instances
   (:meth:`~karpy_aws.capacityreservation.CapacityReservations.mark_launched`).
5. Fleet ``Errors[]``: ICE-like codes mark (capacity type, type, zone) unavailable for 3 min (for a
   reserved launch, ``ReservationCapacityExceeded`` or ICE marks the reservation full instead); the
   missing spot service-linked role marks **all spot** unavailable and records an event naming
   the fix. No instance -> :class:`InsufficientCapacityError` (only ICE-like errors) or
   :class:`CreateError` (reason = the AWS code). A missing launch template is re-created once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from karpy_aws.cache import TTLCache
from karpy_aws.errors import ICE_CODES, SPOT_SLR_CODE, SPOT_SLR_FIX, call
from karpy_aws.instancetypes import volume_size_gib
from karpy_aws.userdata import BootstrapOptions, encode, render_user_data
from karpy_core.apis.labels import CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, LABEL_NODEPOOL, RESERVATION_TYPE_CAPACITY_BLOCK
from karpy_core.errors import CreateError, InsufficientCapacityError

if TYPE_CHECKING:
    from collections.abc import Callable

    from karpy_aws.apis import AMI, EC2NodeClass, NetworkInterface
    from karpy_aws.cache import UnavailableOfferings
    from karpy_aws.capacityreservation import CapacityReservations
    from karpy_aws.clients import AWSClients
    from karpy_aws.events import EventRecorder
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.cloudprovider.types import InstanceType, Offering

__all__ = ["MAX_TYPES", "TAG_NODECLASS", "TAG_CLUSTER_NAME", "TAG_NODECLAIM", "LaunchRequest", "Launched", "Launcher",
           "launch_tags", "default_block_devices"]

log = logging.getLogger("karpy.aws")

MAX_TYPES = 60
TAG_NODECLASS = "karpenter.k8s.aws/ec2nodeclass"
TAG_CLUSTER_NAME = "eks:eks-cluster-name"
TAG_NODECLAIM = "karpenter.sh/nodeclaim"


def launch_tags(cluster_name: str, nodepool: str, nodeclass: EC2NodeClass) -> dict[str, str]:
    """Tags on every launched instance/volume/fleet: the NodeClass tags plus
    ``kubernetes.io/cluster/<c>=owned``, ``karpenter.sh/nodepool``, ``eks:eks-cluster-name`` and
    ``karpenter.k8s.aws/ec2nodeclass`` (Karpenter ``utils.GetTags``; karpy's win on conflict)."""
    return {
        **nodeclass.spec.tags,
        f"kubernetes.io/cluster/{cluster_name}": "owned",
        LABEL_NODEPOOL: nodepool,
        TAG_CLUSTER_NAME: cluster_name,
        TAG_NODECLASS: nodeclass.metadata.name or "",
    }


def _tag_list(tags: dict[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in sorted(tags.items())]


def default_block_devices(family: str) -> list[dict[str, Any]]:
    """Karpenter's default volumes when the NodeClass sets none: 20Gi encrypted gp3 root
    (``/dev/xvda``); Bottlerocket a 4Gi OS + 20Gi data volume; Windows 50Gi ``/dev/sda1``;
    Custom none."""
    def ebs(size: int) -> dict[str, Any]:
        return {"VolumeSize": size, "VolumeType": "gp3", "Encrypted": True, "DeleteOnTermination": True}
    if family in ("AL2", "AL2023"):
        return [{"DeviceName": "/dev/xvda", "Ebs": ebs(20)}]
    if family == "Bottlerocket":
        return [{"DeviceName": "/dev/xvda", "Ebs": ebs(4)}, {"DeviceName": "/dev/xvdb", "Ebs": ebs(20)}]
    if family.startswith("Windows"):
        return [{"DeviceName": "/dev/sda1", "Ebs": ebs(50)}]
    return []


def _network_interfaces(nodeclass: EC2NodeClass) -> list[dict[str, Any]]:
    """``LaunchTemplateData.NetworkInterfaces``: the NodeClass's ``networkInterfaces`` (card and
    device index, ``interface`` or ``efa-only``), else the one primary interface; every interface
    carries the security groups; the primary one (card 0, device 0) also the public IP choice,
    ``ipPrefixCount`` (``Ipv4PrefixCount``) and ``connectionTracking`` (seconds), as Karpenter's
    launch template provider sets them."""
    spec = nodeclass.spec
    groups = [g.id for g in nodeclass.status.security_groups]
    wanted: list[NetworkInterface | None] = list(spec.network_interfaces or []) or [None]
    out: list[dict[str, Any]] = []
    for ni in wanted:
        nic: dict[str, Any] = {"DeviceIndex": 0 if ni is None else ni.device_index, "Groups": groups}
        if ni is not None:
            nic["NetworkCardIndex"] = ni.network_card_index
            nic["InterfaceType"] = ni.interface_type
        if ni is None or (ni.network_card_index == 0 and ni.device_index == 0):
            if spec.associate_public_ip_address is not None:
                nic["AssociatePublicIpAddress"] = spec.associate_public_ip_address
            if spec.ip_prefix_count is not None:
                nic["Ipv4PrefixCount"] = spec.ip_prefix_count
            ct = spec.connection_tracking
            if ct is not None:
                nic["ConnectionTrackingSpecification"] = {k: v for k, v in (
                    ("TcpEstablishedTimeout", ct.tcp_established_timeout), ("UdpStreamTimeout", ct.udp_stream_timeout),
                    ("UdpTimeout", ct.udp_timeout)) if v is not None}
        out.append(nic)
    return out


def _block_devices(nodeclass: EC2NodeClass) -> list[dict[str, Any]]:
    mappings = nodeclass.spec.block_device_mappings
    if not mappings:
        return default_block_devices(nodeclass.spec.resolved_ami_family())
    out = []
    for m in mappings:
        entry: dict[str, Any] = {"DeviceName": m.device_name}
        if m.ebs is not None:
            e = m.ebs
            ebs: dict[str, Any] = {}
            for key, value in (("DeleteOnTermination", e.delete_on_termination), ("Encrypted", e.encrypted), ("Iops", e.iops),
                               ("KmsKeyId", e.kms_key_id), ("SnapshotId", e.snapshot_id), ("Throughput", e.throughput),
                               ("VolumeType", e.volume_type), ("VolumeInitializationRate", e.volume_initialization_rate)):
                if value is not None:
                    ebs[key] = value
            if e.volume_size:
                ebs["VolumeSize"] = volume_size_gib(e.volume_size)
            entry["Ebs"] = ebs
        out.append(entry)
    return out


@dataclass
class LaunchRequest:
    """Everything needed to launch one instance.

    Attributes:
        nodeclaim: the NodeClaim (labels, taints feed user data; its NodePool label tags it).
        nodeclass: the resolved, Ready EC2NodeClass.
        instance_types: compatible types, cheapest first (truncated to :data:`MAX_TYPES`).
        capacity_type: ``reserved``, ``spot`` or ``on-demand``.
        zones: allowed zones (None = any).
        amis: type name -> the AMI to use for it.
        reservation_ids: for ``reserved``, the capacity reservations the claim may use (None = any).
    """

    nodeclaim: NodeClaim
    nodeclass: EC2NodeClass
    instance_types: Sequence[InstanceType]
    capacity_type: str
    zones: frozenset[str] | None
    amis: dict[str, AMI]
    reservation_ids: frozenset[str] | None = None


@dataclass
class Launched:
    """A launched instance: id, type, zone, subnet, AMI, capacity type and, for ``reserved``, the
    capacity reservation (id and ``default``/``capacity-block``)."""

    instance_id: str
    instance_type: str
    zone: str
    subnet_id: str
    image_id: str
    capacity_type: str
    fleet_id: str
    reservation_id: str | None = None
    reservation_type: str | None = None


class Launcher:
    """Creates launch templates and fleets.

    Args:
        clients: AWS clients.
        cluster_name, cluster_endpoint, ca_bundle, cluster_cidr: bootstrap settings.
        unavailable: the ICE cache to mark.
        events: where the spot service-linked-role event goes.
        now: clock.
    """

    def __init__(self, *, clients: AWSClients, cluster_name: str, cluster_endpoint: str, ca_bundle: str, cluster_cidr: str,
                 unavailable: UnavailableOfferings, events: EventRecorder, now: Callable[[], float],
                 capacity_reservations: CapacityReservations | None = None):
        self.clients = clients
        self.cluster_name = cluster_name
        self.cluster_endpoint = cluster_endpoint
        self.ca_bundle = ca_bundle
        self.cluster_cidr = cluster_cidr
        self.unavailable = unavailable
        self.events = events
        self.capacity_reservations = capacity_reservations
        self._templates: TTLCache[str] = TTLCache(now, 60.0)
        self.fleet_requests: list[dict[str, Any]] = []
        """The last CreateFleet requests (at most 20), for inspection in tests and debugging."""

    # ------------------------------------------------------------------ launch templates
    def template_data(self, nodeclass: EC2NodeClass, nodeclaim: NodeClaim, ami: AMI,
                      reservation: Offering | None = None) -> dict[str, Any]:
        """``LaunchTemplateData`` for one AMI and, for a reserved launch, the reserved offering whose
        reservation it targets (see the module docstring)."""
        spec = nodeclass.spec
        family = spec.resolved_ami_family()
        taints = tuple(
            f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
            for t in [*nodeclaim.spec.taints, *nodeclaim.spec.startup_taints]
        )
        kubelet = spec.kubelet
        boot = BootstrapOptions(
            cluster_name=self.cluster_name,
            cluster_endpoint=self.cluster_endpoint,
            ca_bundle=self.ca_bundle,
            cluster_cidr=self.cluster_cidr,
            labels=tuple(sorted((k, v) for k, v in nodeclaim.metadata.labels.items())),
            taints=taints,
            max_pods=kubelet.max_pods if kubelet else None,
            cluster_dns=tuple(kubelet.cluster_dns or ()) if kubelet else (),
            instance_store_raid0=spec.instance_store_policy == "RAID0",
        )
        user_data = render_user_data(family, boot, spec.user_data)
        mo = spec.metadata_options
        nics = _network_interfaces(nodeclass)
        data: dict[str, Any] = {
            "ImageId": ami.id,
            "UserData": encode(user_data),
            "Monitoring": {"Enabled": bool(spec.detailed_monitoring)},
            "MetadataOptions": {
                "HttpEndpoint": mo.http_endpoint,
                "HttpProtocolIpv6": mo.http_protocol_ipv6,
                "HttpPutResponseHopLimit": mo.http_put_response_hop_limit,
                "HttpTokens": mo.http_tokens,
                "InstanceMetadataTags": "disabled",
            },
            "NetworkInterfaces": nics,
            "TagSpecifications": [{"ResourceType": "network-interface", "Tags": _tag_list(launch_tags(
                self.cluster_name, nodeclaim.metadata.labels.get(LABEL_NODEPOOL, ""), nodeclass))}],
        }
        if nodeclass.status.instance_profile:
            data["IamInstanceProfile"] = {"Name": nodeclass.status.instance_profile}
        pg = spec.placement_group_selector
        if pg is not None:  # Karpenter: the launch template's Placement names the group
            data["Placement"] = {"GroupId": pg.id} if pg.id else {"GroupName": pg.name}
        bdm = _block_devices(nodeclass)
        if bdm:
            data["BlockDeviceMappings"] = bdm
        if reservation is not None and reservation.reservation_id:
            data["CapacityReservationSpecification"] = {
                "CapacityReservationPreference": "capacity-reservations-only",
                "CapacityReservationTarget": {"CapacityReservationId": reservation.reservation_id},
            }
            if reservation.reservation_type == RESERVATION_TYPE_CAPACITY_BLOCK:
                data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
        return data

    async def ensure_template(self, nodeclass: EC2NodeClass, nodeclaim: NodeClaim, ami: AMI,
                              reservation: Offering | None = None) -> str:
        """The name of a launch template with this data, created when missing."""
        data = self.template_data(nodeclass, nodeclaim, ami, reservation)
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:20]
        name = f"karpenter.k8s.aws/{digest}"
        if self._templates.get(name):
            return name
        ec2 = await self.clients.ec2()
        try:
            await call(ec2.describe_launch_templates, "DescribeLaunchTemplates", launch=True, LaunchTemplateNames=[name])
        except CreateError as exc:
            if exc.code not in ("InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateName.NotFound"):
                raise
            tags = {f"kubernetes.io/cluster/{self.cluster_name}": "owned", TAG_CLUSTER_NAME: self.cluster_name,
                    TAG_NODECLASS: nodeclass.metadata.name or ""}
            await call(ec2.create_launch_template, "CreateLaunchTemplate", launch=True, LaunchTemplateName=name,
                       LaunchTemplateData=data,
                       TagSpecifications=[{"ResourceType": "launch-template", "Tags": _tag_list(tags)}])
        self._templates.set(name, name)
        return name

    # ------------------------------------------------------------------ fleet
    async def launch(self, req: LaunchRequest) -> Launched:
        """Launch one instance (see the module docstring).

        Raises:
            InsufficientCapacityError: no override could be fulfilled (offerings marked).
            CreateError: AWS refused the launch for another reason (reason = AWS code).
        """
        name = req.nodeclaim.metadata.name or "<unnamed>"
        subnets_by_zone: dict[str, Any] = {}
        for s in req.nodeclass.status.subnets:
            if (req.zones is None or s.zone in req.zones) and s.zone not in subnets_by_zone:
                subnets_by_zone[s.zone] = s
        overrides: list[tuple[float, str, dict[str, Any]]] = []  # (price, template, override)
        templates: dict[tuple[str, str], str] = {}
        reserved: dict[tuple[str, str], Offering] = {}  # (type, zone) -> the reserved offering launched into
        for it in list(req.instance_types)[:MAX_TYPES]:
            ami = req.amis.get(it.name)
            if ami is None:
                continue
            for o in self._offerings_for(it, req):
                if o.zone not in subnets_by_zone:
                    continue
                key = (ami.id, o.reservation_id or "")
                if key not in templates:
                    templates[key] = await self.ensure_template(req.nodeclass, req.nodeclaim, ami, o if o.reserved else None)
                if o.reserved:
                    reserved[(it.name, o.zone)] = o
                subnet = subnets_by_zone[o.zone]
                overrides.append((o.price, templates[key], {"InstanceType": it.name, "SubnetId": subnet.id,
                                                            "AvailabilityZone": o.zone, "ImageId": ami.id}))
        if not overrides:
            raise InsufficientCapacityError(f"NodeClaim {name}: no available {req.capacity_type} offering in the NodeClass's "
                                            f"subnets for the compatible instance types")
        overrides.sort(key=lambda x: (x[0], x[2]["InstanceType"], x[2]["AvailabilityZone"]))
        configs: dict[str, list[dict[str, Any]]] = {}
        for _, template, ov in overrides:
            configs.setdefault(template, []).append(ov)
        nodepool = req.nodeclaim.metadata.labels.get(LABEL_NODEPOOL, "")
        # the NodeClaim's name too, so a restarted controller finds this instance instead of launching another
        tags = _tag_list({**launch_tags(self.cluster_name, nodepool, req.nodeclass), TAG_NODECLAIM: name})
        target = req.capacity_type
        if target == CAPACITY_TYPE_RESERVED:
            blocks = any(o.reservation_type == RESERVATION_TYPE_CAPACITY_BLOCK for o in reserved.values())
            target = "capacity-block" if blocks else "on-demand"
        request: dict[str, Any] = {
            "Type": "instant",
            "TargetCapacitySpecification": {"DefaultTargetCapacityType": target, "TotalTargetCapacity": 1},
            "LaunchTemplateConfigs": [
                {"LaunchTemplateSpecification": {"LaunchTemplateName": t, "Version": "$Latest"}, "Overrides": ovs}
                for t, ovs in configs.items()
            ],
            "TagSpecifications": [{"ResourceType": r, "Tags": tags} for r in ("instance", "volume", "fleet")],
        }
        if req.capacity_type == CAPACITY_TYPE_SPOT:
            request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
        else:
            request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
        self.fleet_requests.append(request)
        del self.fleet_requests[:-20]
        ec2 = await self.clients.ec2()
        subject = f"NodeClaim {name}"
        try:
            resp = await call(ec2.create_fleet, "CreateFleet", launch=True, subject=subject, **request)
        except CreateError as exc:
            if exc.code and exc.code.startswith("InvalidLaunchTemplate"):
                self._templates.clear()
                raise CreateError(str(exc), condition_reason="LaunchTemplateNotFound", code=exc.code) from exc
            raise
        for inst in resp.get("Instances") or []:
            ids = inst.get("InstanceIds") or []
            if ids:
                ov = (inst.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
                lifecycle = inst.get("Lifecycle") or req.capacity_type
                itype = inst.get("InstanceType") or ov.get("InstanceType", "")
                zone = ov.get("AvailabilityZone", "")
                into = reserved.get((itype, zone))
                if into is not None and into.reservation_id:
                    if self.capacity_reservations is not None:
                        self.capacity_reservations.mark_launched(into.reservation_id)
                    return Launched(instance_id=ids[0], instance_type=itype, zone=zone, subnet_id=ov.get("SubnetId", ""),
                                    image_id=ov.get("ImageId") or "", capacity_type=CAPACITY_TYPE_RESERVED,
                                    fleet_id=str(resp.get("FleetId") or ""), reservation_id=into.reservation_id,
                                    reservation_type=into.reservation_type)
                return Launched(instance_id=ids[0], instance_type=itype,
                                zone=zone, subnet_id=ov.get("SubnetId", ""),
                                image_id=ov.get("ImageId") or "", capacity_type="spot" if lifecycle == "spot" else "on-demand",
                                fleet_id=str(resp.get("FleetId") or ""))
        await self._handle_errors(resp.get("Errors") or [], req, reserved)
        codes = sorted({e.get("ErrorCode", "") for e in resp.get("Errors") or []})
        messages = "; ".join(sorted({f"{e.get('ErrorCode')}: {e.get('ErrorMessage', '')}" for e in resp.get("Errors") or []}))
        if codes and all(c in ICE_CODES or c == SPOT_SLR_CODE for c in codes):
            raise InsufficientCapacityError(f"{subject}: CreateFleet launched nothing ({messages})", code=codes[0])
        code = codes[0] if codes else "UnfulfillableCapacity"
        raise CreateError(f"{subject}: CreateFleet launched nothing ({messages or 'no error given'})",
                          condition_reason=code.replace(".", ""), code=code)

    def _offerings_for(self, it: InstanceType, req: LaunchRequest) -> list[Offering]:
        """``it``'s available offerings of the request's capacity type, cheapest first; for
        ``reserved`` only the allowed reservations, one per zone (most instances left, then id)."""
        offers = [o for o in it.offerings if o.capacity_type == req.capacity_type and o.available]
        if req.capacity_type == CAPACITY_TYPE_RESERVED:
            offers = [o for o in offers if o.reservation_id and (req.reservation_ids is None or o.reservation_id in req.reservation_ids)]
            best: dict[str, Offering] = {}
            for o in sorted(offers, key=lambda o: (-o.reservation_capacity, o.reservation_id or "")):
                best.setdefault(o.zone, o)
            offers = list(best.values())
        return sorted(offers, key=lambda o: (o.price, o.zone))

    async def _handle_errors(self, errors: list[dict[str, Any]], req: LaunchRequest,
                             reserved: dict[tuple[str, str], Offering] | None = None) -> None:
        slr = False
        for err in errors:
            code = err.get("ErrorCode", "")
            ov = (err.get("LaunchTemplateAndOverrides") or {}).get("Overrides") or {}
            lifecycle = err.get("Lifecycle") or req.capacity_type
            ct = "spot" if lifecycle == "spot" else "on-demand"
            into = (reserved or {}).get((ov.get("InstanceType", ""), ov.get("AvailabilityZone", "")))
            if into is not None and into.reservation_id and code in ICE_CODES:
                log.info("marking capacity reservation unavailable",
                         extra={"reason": code, "instance-type": ov.get("InstanceType"), "zone": ov.get("AvailabilityZone"),
                                "capacity-reservation-id": into.reservation_id})
                if self.capacity_reservations is not None:
                    self.capacity_reservations.mark_unavailable(into.reservation_id)
                continue
            if code == SPOT_SLR_CODE:
                slr = True
            elif code in ICE_CODES and ov.get("InstanceType") and ov.get("AvailabilityZone"):
                self.unavailable.mark(ct, ov["InstanceType"], ov["AvailabilityZone"], reason=code)
        if slr:
            self.unavailable.mark_capacity_type(CAPACITY_TYPE_SPOT)
            await self.events.record(
                "Warning", "SpotServiceLinkedRoleMissing", f"NodeClaim/{req.nodeclaim.metadata.name}",
                f"spot instances cannot launch: the EC2 Spot service-linked role does not exist and the controller may not "
                f"create it ({SPOT_SLR_CODE}). Run once per account: {SPOT_SLR_FIX}. Spot offerings are unavailable for "
                f"{int(self.unavailable.ttl)}s; on-demand is used meanwhile", code=SPOT_SLR_CODE)


