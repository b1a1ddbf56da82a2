"""The built-in ``simulated`` provider, exercised through the pluggy contract."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_REGION, LABEL_ZONE
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.catalog.aws import load_aws_catalog
from karpy_core.cloudprovider.launch import zone_start
from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.cloudprovider.simulated import SUPPORTED_NODE_CLASSES, SimulatedProvider, create_plugin
from karpy_core.errors import ConfigurationError, CreateError, InsufficientCapacityError, NodeClaimNotFoundError
from karpy_core.scheduling.requirements import Requirements

FAKE400_FILE = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "karpenter-fake-400.json"


class FakeClock:
    def __init__(self) -> None:
        self.t = 1_000.0

    def __call__(self) -> float:
        return self.t


def claim(name: str | None, requirements: list[dict], requests: dict[str, str] | None = None) -> NodeClaim:
    meta: dict = {"labels": {"karpenter.sh/nodepool": "default"}}
    if name:
        meta["name"] = name
    return NodeClaim.model_validate(
        {
            "metadata": meta,
            "spec": {
                "requirements": requirements,
                "resources": {"requests": requests or {}},
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
            },
        }
    )


def pid(nodeclaim: NodeClaim) -> str:
    """The provider ID of a launched NodeClaim."""
    assert nodeclaim.status.provider_id is not None
    return nodeclaim.status.provider_id


def req(key: str, operator: str, *values: str) -> dict:
    out: dict = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


TYPES_OD = [
    req(LABEL_INSTANCE_TYPE, "In", "m5.large", "c5.xlarge", "m6g.large"),
    req(LABEL_CAPACITY_TYPE, "In", "on-demand"),
]


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def plugin(clock: FakeClock) -> SimulatedProvider:
    return create_plugin({"clock": clock})


@pytest.fixture
def cloud(plugin: SimulatedProvider) -> CloudProvider:
    return CloudProvider(plugin)


def brute_force_cheapest(types, reqs_dicts, requests=None, claim_name="c"):
    """Independent reference: over every offering the cheapest (price, type name); among that
    type's equal-price zones (in name order) the one at crc32(claim name) mod zones; then
    capacity type. Returns (price, name, zone, capacity type)."""
    from karpy_core.scheduling.resources import fits, parse_resource_list

    reqs = Requirements.from_selector_terms(reqs_dicts)
    needs = parse_resource_list(requests or {})
    offers = []
    for it in types:
        if reqs.conflict(it.requirements) is not None or not fits(needs, it.allocatable):
            continue
        offers += [(o.price, it.name, o.zone, o.capacity_type) for o in it.offerings if o.available and o.compatible(reqs)]
    if not offers:
        return None
    price, name = min(offers)[:2]
    tied = [o for o in offers if o[:2] == (price, name)]
    zones = sorted({o[2] for o in tied})
    zone = zones[zone_start(claim_name) % len(zones)]
    return min(o for o in tied if o[2] == zone)


# ---------------------------------------------------------------------------------------------
# Contract basics
# ---------------------------------------------------------------------------------------------


async def test_identity_and_static_hooks(cloud: CloudProvider) -> None:
    assert cloud.name == "simulated"
    assert cloud.supported_node_classes() == SUPPORTED_NODE_CLASSES
    assert cloud.supported_node_classes()[0] == ("karpenter.k8s.aws", "EC2NodeClass")
    assert [(p.condition_type, p.condition_status, p.toleration_seconds) for p in cloud.repair_policies()] == [
        ("Ready", "False", 600), ("Ready", "Unknown", 600)]
    assert await cloud.is_drifted(claim("a", [])) == ""


async def test_instance_types_are_the_cached_catalog(cloud: CloudProvider, plugin: SimulatedProvider) -> None:
    types = await cloud.get_instance_types(None)  # type: ignore[arg-type]
    assert len(types) == 1345
    raw1 = await plugin.karpy_get_instance_types(None)  # type: ignore[arg-type]
    raw2 = await plugin.karpy_get_instance_types(None)  # type: ignore[arg-type]
    assert raw1 is raw2
    assert [t.name for t in raw1] == [t.name for t in load_aws_catalog()]


async def test_load_provider_through_the_entry_point() -> None:
    cloud = load_provider("simulated", {"region": "ap-northeast-2"})
    assert cloud.name == "simulated"
    types = await cloud.get_instance_types(None)  # type: ignore[arg-type]
    assert len(types) == 749
    out = await cloud.create(claim("ap", [req(LABEL_INSTANCE_TYPE, "In", "t2.small")]))
    assert out.metadata.labels[LABEL_REGION] == "ap-northeast-2"
    assert out.metadata.labels[LABEL_ZONE] in {"ap-northeast-2a", "ap-northeast-2c"}
    assert pid(out).startswith("simulated:///ap-northeast-2")


def test_options_are_validated() -> None:
    with pytest.raises(ConfigurationError, match="unknown option"):
        create_plugin({"regoin": "us-east-1"})
    with pytest.raises(ConfigurationError, match="eu-west-1"):
        create_plugin({"region": "eu-west-1"})
    with pytest.raises(ConfigurationError, match="amiFamily"):
        create_plugin({"ami_family": "Ubuntu"})
    with pytest.raises(ConfigurationError, match="clock"):
        create_plugin({"clock": 42})


async def test_node_classes_option_narrows_the_nodeclass_kinds() -> None:
    """With node_classes=[EC2NodeClass] the simulated cloud reads and marks only EC2NodeClasses, as
    the AWS chart's RBAC allows (it grants no KCNodeClass access)."""
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.kube.permissions import RecordingKubeClient

    rec = RecordingKubeClient(InMemoryCluster())
    await rec.create("EC2NodeClass", {"metadata": {"name": "a"}, "spec": {}})
    await rec.create("KCNodeClass", {"metadata": {"name": "k"}, "spec": {}})
    rec.requests.clear()
    cloud = load_provider("simulated", {"kube": rec, "node_classes": ["EC2NodeClass"]})
    assert cloud.supported_node_classes() == [("karpenter.k8s.aws", "EC2NodeClass")]
    assert isinstance(cloud.plugin, SimulatedProvider)
    assert await cloud.plugin.reconcile_nodeclasses() == 1
    assert {r.resource for r in rec.requests} == {"ec2nodeclasses", "ec2nodeclasses/status"}
    assert load_provider("simulated", {}).supported_node_classes() == SUPPORTED_NODE_CLASSES  # default: all
    with pytest.raises(ConfigurationError, match="node_classes"):
        create_plugin({"node_classes": ["NodeClassOfNoOne"]})
    with pytest.raises(ConfigurationError, match="node_classes"):
        create_plugin({"node_classes": []})


async def test_kwoknodeclass_status_is_left_to_its_crd_default() -> None:
    """Karpenter's KWOK provider writes no KWOKNodeClass status (its CRD default makes it Ready), so
    the simulated cloud does not either: a Ready=False someone wrote stands, while an EC2NodeClass
    next to it is marked Ready."""
    from karpy_core.kube.memory import InMemoryCluster

    cluster = InMemoryCluster()
    await cluster.create("EC2NodeClass", {"metadata": {"name": "a"}, "spec": {}})
    await cluster.create("KWOKNodeClass", {"metadata": {"name": "default"}})
    down = {"type": "Ready", "status": "False", "reason": "Maintenance", "message": "set by hand",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}
    await cluster.patch("KWOKNodeClass", "default", {"status": {"conditions": [down]}}, status=True)
    cloud = load_provider("simulated", {"kube": cluster})
    assert ("karpenter.kwok.sh", "KWOKNodeClass") in cloud.supported_node_classes()
    assert isinstance(cloud.plugin, SimulatedProvider)
    assert await cloud.plugin.reconcile_nodeclasses() == 1  # the EC2NodeClass only
    assert (await cluster.get("KWOKNodeClass", "default"))["status"]["conditions"] == [down]
    assert (await cluster.get("EC2NodeClass", "a"))["status"]["conditions"][0]["status"] == "True"


def test_catalog_options_pass_through() -> None:
    plugin = create_plugin({"max_pods": 110, "ami_family": "Bottlerocket"})
    m5 = next(t for t in plugin.instance_types if t.name == "m5.large")
    assert m5.capacity["pods"] == 110


# ---------------------------------------------------------------------------------------------
# Create / get / list / delete
# ---------------------------------------------------------------------------------------------


async def test_create_picks_the_cheapest_compatible_offering(cloud: CloudProvider) -> None:
    out = await cloud.create(claim("a", TYPES_OD, {"cpu": "1", "memory": "1Gi"}))
    # On-demand: m6g.large $0.077 < m5.large $0.096 < c5.xlarge $0.17; equal prices in every
    # zone, so the claim's name picks the zone (crc32 rotation over the zones in name order).
    labels = out.metadata.labels
    m6g = next(t for t in await cloud.get_instance_types(None) if t.name == "m6g.large")  # type: ignore[arg-type]
    zones = sorted({o.zone for o in m6g.offerings if o.capacity_type == "on-demand" and o.available})
    zone = zones[zone_start("a") % len(zones)]
    assert labels[LABEL_INSTANCE_TYPE] == "m6g.large"
    assert labels[LABEL_ZONE] == zone
    assert labels[LABEL_CAPACITY_TYPE] == "on-demand"
    assert labels[LABEL_REGION] == "us-east-1"
    assert labels["kubernetes.io/arch"] == "arm64"
    assert labels["karpenter.k8s.aws/instance-family"] == "m6g"
    assert labels["karpenter.sh/nodepool"] == "default"  # the claim's own labels are kept
    assert "karpenter.k8s.aws/instance-gpu-name" not in labels
    assert out.status.provider_id == f"simulated:///{zone}/i-00000001"
    assert out.status.capacity == {"cpu": "2", "ephemeral-storage": "20Gi", "memory": "7518Mi", "pods": "29"}
    assert out.status.allocatable == {"cpu": "1930m", "ephemeral-storage": "17Gi", "memory": "6844Mi", "pods": "29"}


async def test_create_matches_a_brute_force_reference(cloud: CloudProvider, plugin: SimulatedProvider) -> None:
    cases = [
        ([], {"cpu": "1", "memory": "2Gi"}),
        ([req("kubernetes.io/arch", "In", "amd64"), req(LABEL_CAPACITY_TYPE, "In", "on-demand")], {"cpu": "3"}),
        ([req("karpenter.k8s.aws/instance-family", "In", "m5", "c5"), req(LABEL_ZONE, "In", "us-east-1c")], {}),
        ([req("karpenter.k8s.aws/instance-generation", "Gt", "6")], {"memory": "30Gi"}),
        ([], {"nvidia.com/gpu": "1"}),
    ]
    for i, (reqs, requests) in enumerate(cases):
        expected = brute_force_cheapest(plugin.instance_types, reqs, requests, f"c{i}")
        out = await cloud.create(claim(f"c{i}", reqs, requests))
        labels = out.metadata.labels
        assert (labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], labels[LABEL_CAPACITY_TYPE]) == expected[1:], i


async def test_gpu_request_gets_a_gpu_node(cloud: CloudProvider) -> None:
    out = await cloud.create(
        claim("gpu", [req("karpenter.k8s.aws/instance-gpu-manufacturer", "In", "nvidia")], {"nvidia.com/gpu": "1"})
    )
    assert int(out.status.capacity["nvidia.com/gpu"]) >= 1
    assert out.metadata.labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia"


async def test_get_list_delete_round_trip(cloud: CloudProvider) -> None:
    a = await cloud.create(claim("a", TYPES_OD))
    b = await cloud.create(claim("b", TYPES_OD))
    assert b.status.provider_id == f"simulated:///{b.metadata.labels[LABEL_ZONE]}/i-00000002"
    got = await cloud.get(pid(a))
    assert got == a
    assert got is not a
    listed = await cloud.list()
    assert [n.status.provider_id for n in listed] == sorted([pid(a), pid(b)])  # by provider ID

    await cloud.delete(a)
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.get(pid(a))
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.delete(a)  # idempotent contract: the second delete reports "gone"
    assert [n.metadata.name for n in await cloud.list()] == ["b"]
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.delete(claim("never-launched", []))
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.get("aws:///us-east-1a/i-0123")


async def test_returned_claims_are_copies(cloud: CloudProvider) -> None:
    out = await cloud.create(claim("a", TYPES_OD))
    out.metadata.labels["mutated"] = "yes"
    again = await cloud.get(pid(out))
    assert "mutated" not in again.metadata.labels


async def test_create_is_idempotent_by_claim_name(cloud: CloudProvider) -> None:
    first = await cloud.create(claim("same", TYPES_OD))
    second = await cloud.create(claim("same", TYPES_OD))
    assert first.status.provider_id == second.status.provider_id
    assert len(await cloud.list()) == 1
    await cloud.delete(first)
    third = await cloud.create(claim("same", TYPES_OD))
    assert third.status.provider_id != first.status.provider_id


async def test_insufficient_capacity(cloud: CloudProvider) -> None:
    with pytest.raises(InsufficientCapacityError, match="impossible"):
        await cloud.create(claim("impossible", [req("kubernetes.io/arch", "In", "s390x")]))
    with pytest.raises(InsufficientCapacityError):
        await cloud.create(claim("huge", [], {"cpu": "100000"}))
    with pytest.raises(InsufficientCapacityError):
        await cloud.create(claim("gpu-label", [req("karpenter.k8s.aws/instance-gpu-name", "In", "no-such-gpu")]))
    with pytest.raises(InsufficientCapacityError):  # a type offered nowhere available (null price)
        await load_provider("simulated", {"region": "ap-northeast-2"}).create(
            claim("x", [req(LABEL_INSTANCE_TYPE, "In", "x8aedz.large")])
        )
    assert await cloud.list() == []


async def test_unparseable_requests_are_a_create_error(cloud: CloudProvider) -> None:
    nc = claim("bad", [])
    nc.spec.resources.requests = {"cpu": "lots"}
    with pytest.raises(CreateError):
        await cloud.create(nc)


# ---------------------------------------------------------------------------------------------
# Unavailable offerings (simulated ICE)
# ---------------------------------------------------------------------------------------------


def rotated(name: str, zones: set[str]) -> str:
    """The zone the launch tie-break gives claim ``name`` among equal-price ``zones``."""
    ordered = sorted(zones)
    return ordered[zone_start(name) % len(ordered)]


def od_zones(plugin: SimulatedProvider, type_name: str) -> set[str]:
    return {o.zone for o in next(t for t in plugin.instance_types if t.name == type_name).offerings if o.capacity_type == "on-demand"}


async def test_mark_unavailable_moves_to_the_next_offering(cloud: CloudProvider, plugin: SimulatedProvider) -> None:
    zones = od_zones(plugin, "m6g.large")
    first = await cloud.create(claim("a", TYPES_OD))
    zone_a = rotated("a", zones)
    assert (first.metadata.labels[LABEL_INSTANCE_TYPE], first.metadata.labels[LABEL_ZONE]) == ("m6g.large", zone_a)
    plugin.mark_unavailable("m6g.large", zone_a, "on-demand")
    second = await cloud.create(claim("b", TYPES_OD))
    assert (second.metadata.labels[LABEL_INSTANCE_TYPE], second.metadata.labels[LABEL_ZONE]) == (
        "m6g.large", rotated("b", zones - {zone_a}))
    m6g_zones = {o.zone for o in next(t for t in plugin.instance_types if t.name == "m6g.large").offerings}
    for zone in m6g_zones:
        plugin.mark_unavailable("m6g.large", zone, "on-demand")
    third = await cloud.create(claim("c", TYPES_OD))
    assert third.metadata.labels[LABEL_INSTANCE_TYPE] == "m5.large"
    # The shared catalog is untouched; the provider's list reports the change.
    shared = next(t for t in load_aws_catalog() if t.name == "m6g.large")
    assert all(o.available for o in shared.offerings)
    mine = next(t for t in await cloud.get_instance_types(None) if t.name == "m6g.large")  # type: ignore[arg-type]
    assert not any(o.available and o.capacity_type == "on-demand" for o in mine.offerings)
    assert any(o.available and o.capacity_type == "spot" for o in mine.offerings)

    plugin.mark_available("m6g.large")
    fourth = await cloud.create(claim("d", TYPES_OD))
    assert fourth.metadata.labels[LABEL_INSTANCE_TYPE] == "m6g.large"


async def test_mark_unavailable_with_ttl_expires_on_the_clock(
    cloud: CloudProvider, plugin: SimulatedProvider, clock: FakeClock
) -> None:
    zones = od_zones(plugin, "m6g.large")
    zone_a = rotated("a", zones)
    plugin.mark_unavailable("m6g.large", zone_a, "on-demand", ttl_seconds=180)
    out = await cloud.create(claim("a", TYPES_OD))
    assert out.metadata.labels[LABEL_ZONE] == rotated("a", zones - {zone_a})
    clock.t += 181
    out = await cloud.create(claim("a2", TYPES_OD))
    assert out.metadata.labels[LABEL_ZONE] == rotated("a2", zones)  # the offering is back


def test_mark_unavailable_rejects_unknown_offerings(plugin: SimulatedProvider) -> None:
    with pytest.raises(ValueError, match="no instance type"):
        plugin.mark_unavailable("z9.huge", "us-east-1a", "on-demand")
    with pytest.raises(ValueError, match="no spot offering"):
        plugin.mark_unavailable("m5.large", "us-east-1e", "spot")


# ---------------------------------------------------------------------------------------------
# KWOK-format catalogs
# ---------------------------------------------------------------------------------------------


async def test_kwok_catalog_file() -> None:
    cloud = load_provider("simulated", {"instance_types_file": str(FAKE400_FILE)})
    types = await cloud.get_instance_types(None)  # type: ignore[arg-type]
    assert len(types) == 400
    out = await cloud.create(claim("k", [], {"cpu": "1500m"}))
    # Every offering of a type has the same price; fake-it-1 (2 vCPU) is the cheapest that fits;
    # ties: the zone the claim's name rotates to, then "on-demand" < "spot" in it.
    fake1 = next(t for t in types if t.name == "fake-it-1")
    zone = rotated("k", {o.zone for o in fake1.offerings if o.available})
    assert out.metadata.labels[LABEL_INSTANCE_TYPE] == "fake-it-1"
    assert out.metadata.labels[LABEL_ZONE] == zone
    assert out.metadata.labels[LABEL_CAPACITY_TYPE] == min(o.capacity_type for o in fake1.offerings if o.zone == zone)
    assert LABEL_REGION not in out.metadata.labels
    assert out.status.allocatable == {"cpu": "1900m", "memory": "4086Mi", "pods": "20"}
    assert out.status.provider_id == f"simulated:///{zone}/i-00000001"


def test_pricing_note_says_where_prices_come_from() -> None:
    note = create_plugin({"region": "ap-northeast-2"}).pricing_note
    assert "us-east-1" in note and "ap-northeast-2" in note and "spot" in note


async def test_adopt_records_an_existing_instance_under_its_own_provider_id(cloud: CloudProvider, plugin: SimulatedProvider) -> None:
    """``--from-cluster`` hands the simulated cloud the live cluster's NodeClaims: get, list and
    delete then treat them as instances it launched; a second claim with the same provider ID,
    or one without any, is not recorded; create for an adopted claim's name launches nothing."""
    live = claim("live-1", [])
    live.status.provider_id = "kwok://live-1"
    assert plugin.adopt(live)
    twin = claim("live-2", [])
    twin.status.provider_id = "kwok://live-1"
    assert not plugin.adopt(twin)
    assert not plugin.adopt(claim("unlaunched", []))
    assert (await cloud.get("kwok://live-1")).metadata.name == "live-1"
    assert [c.status.provider_id for c in await cloud.list()] == ["kwok://live-1"]
    again = await cloud.create(claim("live-1", []))
    assert again.status.provider_id == "kwok://live-1"
    assert await cloud.list() and len(await cloud.list()) == 1
    await cloud.delete(live)
    assert await cloud.list() == []
    with pytest.raises(NodeClaimNotFoundError):
        await cloud.get("kwok://live-1")
