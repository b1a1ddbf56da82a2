"""Capacity reservations on AWS against moto: EC2NodeClass ``status.capacityReservations`` from
the selector terms, reserved offerings, launches targeting the reservation, a full reservation
(ReservationCapacityExceeded) and the ``ReservedCapacity`` gate.

moto 5.2.5 has no EC2 capacity reservations: ``conftest`` answers DescribeCapacityReservations
from ``FAULTS.reservations`` inside the moto server; everything else (launch templates,
CreateFleet, instances) is moto's own."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from aws_moto import FAULTS
from karpy_aws.apis import EC2NodeClass
from karpy_aws.nodeclass import COND_CAPACITY_RESERVATIONS, COND_READY, condition
from pydantic import ValidationError
from test_aws_e2e import REF, launch_template_data

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import InsufficientCapacityError
from karpy_core.featuregates import FeatureGates
from karpy_core.sim.simulator import Simulator
from karpy_core.testing import nodeclaim_for, nodepool_for
from tests.sim.manifests import RESERVED_NODEPOOL

OWNER = "123456789012"


def _cond(nodeclass, type_: str):
    """The NodeClass's ``type_`` condition, which the test expects to be there."""
    found = condition(nodeclass, type_)
    assert found is not None, f"no {type_} condition"
    return found


def reservation(rid: str, itype: str = "m5.large", zone: str = "ap-northeast-2a", *, available: int = 2,
                tags: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"CapacityReservationId": rid, "OwnerId": OWNER, "InstanceType": itype, "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": zone, "Tenancy": "default", "TotalInstanceCount": available,
            "AvailableInstanceCount": available, "InstanceMatchCriteria": "targeted", "State": "active",
            "ReservationType": "default", "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()], **extra}


def nodeclass(terms: list[dict[str, Any]]) -> EC2NodeClass:
    return EC2NodeClass.model_validate({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default", "uid": "uid-default"},
        "spec": {"role": "KarpenterNodeRole-eks", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "eks"}}],
                 "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "eks"}}],
                 "capacityReservationSelectorTerms": terms}})


ML = [{"tags": {"team": "ml"}}]


def test_selector_terms_are_validated_with_the_field_named():
    with pytest.raises(ValidationError, match="'id' is mutually exclusive"):
        nodeclass([{"id": "cr-0abc", "tags": {"a": "b"}}])
    with pytest.raises(ValidationError, match="expected at least one"):
        nodeclass([{"ownerID": OWNER}])
    with pytest.raises(ValidationError, match="capacity reservation id"):
        nodeclass([{"id": "reservation-1"}])
    with pytest.raises(ValidationError, match="12-digit"):
        nodeclass([{"tags": {"a": "b"}, "ownerID": "12"}])
    assert nodeclass([{"tags": {"a": "*"}, "ownerID": OWNER}, {"id": "cr-0abc"}, {"instanceMatchCriteria": "open"}])


async def test_status_lists_the_selected_active_reservations(plugin_factory):
    soon = datetime.fromtimestamp(time.time() + 600, UTC)
    FAULTS.reservations[:] = [
        reservation("cr-0aaa", tags={"team": "ml"}),
        reservation("cr-0bbb", tags={"team": "web"}),
        reservation("cr-0ccc", tags={"team": "ml"}, State="cancelled"),
        reservation("cr-0ddd", "m5.xlarge", ReservationType="capacity-block", EndDate=soon),
    ]
    plugin = plugin_factory()
    res = await plugin.resolver.resolve(nodeclass([*ML, {"id": "cr-0ddd"}]))
    status = res.nodeclass.status
    assert [r.id for r in status.capacity_reservations] == ["cr-0aaa", "cr-0ddd"]
    first, block = status.capacity_reservations
    assert (first.instance_type, first.availability_zone, first.owner_id, first.reservation_type, first.state) == (
        "m5.large", "ap-northeast-2a", OWNER, "default", "active")
    assert block.reservation_type == "capacity-block" and block.state == "expiring" and block.end_time
    assert _cond(res.nodeclass, COND_CAPACITY_RESERVATIONS).status == "True"
    assert res.ready
    dumped = status.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert dumped["capacityReservations"][0]["ownerID"] == OWNER
    # offerings: reserved m5.large in 2a with 2 left; the expiring block is offered but unavailable
    types = {t.name: t for t in await plugin.instance_types.list(res.nodeclass)}
    (r,) = [o for o in types["m5.large"].offerings if o.reserved]
    assert (r.zone, r.reservation_id, r.reservation_capacity, r.available) == ("ap-northeast-2a", "cr-0aaa", 2, True)
    on_demand = next(o for o in types["m5.large"].offerings if o.capacity_type == "on-demand")
    assert r.price == pytest.approx(on_demand.price / 1e7)
    (b,) = [o for o in types["m5.xlarge"].offerings if o.reserved]
    assert not b.available


async def test_pinned_claim_launches_into_the_reservation(plugin_factory, seeded):
    FAULTS.reservations[:] = [reservation("cr-0aaa", tags={"team": "ml"})]
    plugin = plugin_factory(nodeclasses={"default": nodeclass(ML)})
    reqs = [{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved"]},
            {"key": LABEL_RESERVATION_ID, "operator": "In", "values": ["cr-0aaa"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]
    launched = await plugin.karpy_create(nodeclaim_for("r1", REF, reqs))
    labels = launched.metadata.labels
    assert labels[LABEL_CAPACITY_TYPE] == "reserved"
    assert labels[LABEL_RESERVATION_ID] == "cr-0aaa" and labels[LABEL_RESERVATION_TYPE] == "default"
    assert launched.metadata.labels["topology.kubernetes.io/zone"] == "ap-northeast-2a"
    request = plugin.launcher.fleet_requests[-1]
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    template = request["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    data = await launch_template_data(seeded.url, template)
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == "cr-0aaa"
    assert plugin.capacity_reservations.available("cr-0aaa") == 1
    await plugin.karpy_delete(launched)
    assert plugin.capacity_reservations.available("cr-0aaa") == 2


async def test_full_reservation_is_marked_and_the_next_claim_falls_back(plugin_factory, seeded):
    FAULTS.reservations[:] = [reservation("cr-0aaa", tags={"team": "ml"})]
    plugin = plugin_factory(nodeclasses={"default": nodeclass(ML)})
    pinned = [{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved"]},
              {"key": LABEL_RESERVATION_ID, "operator": "In", "values": ["cr-0aaa"]},
              {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]
    FAULTS.ice_types = {"m5.large"}
    FAULTS.ice_code = "ReservationCapacityExceeded"
    with pytest.raises(InsufficientCapacityError) as err:
        await plugin.karpy_create(nodeclaim_for("r1", REF, pinned))
    assert err.value.code == "ReservationCapacityExceeded"
    assert plugin.capacity_reservations.available("cr-0aaa") == 0
    assert not plugin.unavailable.is_unavailable("on-demand", "m5.large", "ap-northeast-2a")  # on-demand untouched
    FAULTS.ice_types = set()
    types = {t.name: t for t in await plugin.karpy_get_instance_types(nodepool_for(REF))}
    assert not any(o.available for o in types["m5.large"].offerings if o.reserved)
    either = [{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved", "on-demand"]}, pinned[2]]
    launched = await plugin.karpy_create(nodeclaim_for("r2", REF, either))
    assert launched.metadata.labels[LABEL_CAPACITY_TYPE] == "on-demand"
    assert LABEL_RESERVATION_ID not in launched.metadata.labels


POOL = RESERVED_NODEPOOL


def _web(replicas: int) -> dict[str, Any]:
    spec = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1500m", "memory": "128Mi"}}}]}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": spec}}}


async def _simulate(plugin: Any, gates: FeatureGates | None = None) -> Simulator:
    sim = Simulator(CloudProvider(plugin), feature_gates=gates)
    plugin.kube = sim.cluster
    plugin.events.kube = sim.cluster
    nc = nodeclass(ML).model_dump(by_alias=True, exclude_none=True, mode="json")
    sim.apply([nc, yaml.safe_load(POOL), _web(3)])
    await sim.run(max_seconds=600)
    return sim


async def test_simulated_cluster_on_moto_uses_the_reservation_then_on_demand(plugin_factory):
    FAULTS.reservations[:] = [reservation("cr-0aaa", tags={"team": "ml"}, available=2)]
    plugin = plugin_factory()
    sim = await _simulate(plugin)
    claims = sim.cluster.objects("NodeClaim")
    cts = sorted(c["metadata"]["labels"][LABEL_CAPACITY_TYPE] for c in claims)
    assert cts == ["on-demand", "reserved", "reserved"]
    assert all(c["metadata"]["labels"][LABEL_RESERVATION_ID] == "cr-0aaa" for c in claims
               if c["metadata"]["labels"][LABEL_CAPACITY_TYPE] == "reserved")
    assert plugin.capacity_reservations.available("cr-0aaa") == 0
    names = [c["metadata"]["name"] for c in claims if c["metadata"]["labels"][LABEL_CAPACITY_TYPE] == "reserved"]
    sync = plugin.capacity_type_sync()
    assert await sync.reconcile() == []  # the reservation is still active
    # the reservation expires: EC2 no longer lists it as active; its instances run on as on-demand
    FAULTS.reservations[0]["State"] = "expired"
    plugin.resolver.invalidate()
    assert sorted(await sync.reconcile()) == sorted(names)
    for name in names:
        nc = await sim.cluster.get("NodeClaim", name)
        labels = nc["metadata"]["labels"]
        assert labels[LABEL_CAPACITY_TYPE] == "on-demand" and LABEL_RESERVATION_ID not in labels
        node = await sim.cluster.get("Node", nc["status"]["nodeName"])
        assert node["metadata"]["labels"][LABEL_CAPACITY_TYPE] == "on-demand"
        assert LABEL_RESERVATION_TYPE not in node["metadata"]["labels"]
    assert await sync.reconcile() == []


async def test_gate_off_lists_and_launches_no_reservation(plugin_factory):
    FAULTS.reservations[:] = [reservation("cr-0aaa", tags={"team": "ml"}, available=2)]
    plugin = plugin_factory()
    sim = await _simulate(plugin, FeatureGates(ReservedCapacity=False))
    claims = sim.cluster.objects("NodeClaim")
    assert sorted(c["metadata"]["labels"][LABEL_CAPACITY_TYPE] for c in claims) == ["on-demand"] * 3
    res = await plugin.resolver.resolve(nodeclass(ML))
    assert res.nodeclass.status.capacity_reservations == []
    assert condition(res.nodeclass, COND_CAPACITY_RESERVATIONS) is None
    assert _cond(res.nodeclass, COND_READY).status == "True"
