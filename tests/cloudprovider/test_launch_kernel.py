"""The launch kernel (karpy_core.cloudprovider.launch) and the provider options base, as pure functions."""

from __future__ import annotations

import random

import pytest

from karpy_core.apis.labels import LABEL_ARCH, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.launch import (
    INVALID_REQUIREMENTS,
    InvalidRequirementsError,
    ProviderID,
    cheapest_launchable,
    launch_constraints,
    rank_launchable,
    require_launchable,
    stamp_launched,
    zone_start,
)
from karpy_core.cloudprovider.options import ProviderOptions
from karpy_core.cloudprovider.types import InstanceType, Offering
from karpy_core.errors import ConfigurationError, InsufficientCapacityError
from karpy_core.scheduling.requirements import Requirement, Requirements


def itype(name: str, offerings: list[Offering], *, cpu: int = 2000, arch: str = "amd64") -> InstanceType:
    reqs = Requirements.of(Requirement.new(LABEL_INSTANCE_TYPE, "In", [name]), Requirement.new(LABEL_ARCH, "In", [arch]))
    return InstanceType(name, reqs, offerings, {"cpu": cpu, "memory": 4 << 30, "pods": 110})


def claim(requirements: list[dict], requests: dict[str, str] | None = None, name: str = "c1") -> NodeClaim:
    return NodeClaim.model_validate({
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "p"}},
        "spec": {"requirements": requirements, "resources": {"requests": requests or {"cpu": "500m"}},
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}},
    })


@pytest.mark.parametrize("name", ["c1", "c2", "default-bcdfg"])
def test_one_tie_break_price_name_zone_capacity_type(name: str) -> None:
    types = [
        itype("b.large", [Offering("z2", "spot", 0.1), Offering("z1", "spot", 0.1)]),
        itype("a.large", [Offering("z2", "on-demand", 0.1), Offering("z2", "spot", 0.1)]),
        itype("c.large", [Offering("z1", "on-demand", 0.05, available=False), Offering("z1", "spot", 0.2)]),
    ]
    c = launch_constraints(claim([], name=name))
    # b.large's two equal-price zones: the claim's name picks where the rotation starts
    b_zone = ["z1", "z2"][zone_start(name) % 2]
    for _ in range(5):
        random.shuffle(types)
        ranked = rank_launchable(types, c)
        assert [(ch.instance_type.name, ch.offering.zone, ch.offering.capacity_type) for ch in ranked] == [
            ("a.large", "z2", "on-demand"), ("b.large", b_zone, "spot"), ("c.large", "z1", "spot")]
        assert cheapest_launchable(types, c) == ranked[0]


def test_equal_price_zones_spread_over_claims_deterministically() -> None:
    """Six single-pod claims of one NodePool (names as the API server's generateName makes them)
    do not all land in the first zone by name; the same name always gets the same zone."""
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    types = [itype("m.large", [Offering(z, "on-demand", 0.096) for z in zones])]
    names = [f"default-{s}" for s in ("x7k2p", "q9dmt", "bz4rn", "t5wfh", "c8lvs", "n2gjd")]
    picked = [cheapest_launchable(types, launch_constraints(claim([], name=n))).offering.zone for n in names]
    assert picked == [zones[zone_start(n) % 3] for n in names]
    assert len(set(picked)) >= 2
    # over many names the rotation is close to even
    counts = {z: 0 for z in zones}
    for i in range(3000):
        counts[cheapest_launchable(types, launch_constraints(claim([], name=f"default-{i:05d}"))).offering.zone] += 1
    assert all(900 <= v <= 1100 for v in counts.values()), counts
    # a cheaper zone still wins over the rotation
    types = [itype("m.large", [Offering("us-east-1a", "on-demand", 0.096), Offering("us-east-1b", "on-demand", 0.095)])]
    assert {cheapest_launchable(types, launch_constraints(claim([], name=n))).offering.zone for n in names} == {"us-east-1b"}


def test_requirements_and_requests_filter() -> None:
    types = [itype("small", [Offering("z1", "spot", 0.01)], cpu=500), itype("arm", [Offering("z1", "spot", 0.02)], arch="arm64"),
             itype("big", [Offering("z1", "on-demand", 0.5)], cpu=8000)]
    c = launch_constraints(claim([{"key": LABEL_ARCH, "operator": "In", "values": ["amd64"]}], {"cpu": "1"}))
    assert [ch.instance_type.name for ch in rank_launchable(types, c)] == ["big"]
    c = launch_constraints(claim([{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}], {"cpu": "1"}))
    assert cheapest_launchable(types, c).instance_type.name == "arm"
    c = launch_constraints(claim([{"key": LABEL_ZONE, "operator": "In", "values": ["z9"]}]))
    with pytest.raises(InsufficientCapacityError, match="no flavor with an available offering"):
        cheapest_launchable(types, c, what="flavor")
    with pytest.raises(InsufficientCapacityError):
        require_launchable(types, c)


def test_invalid_requirements_is_a_typed_create_error() -> None:
    bad = claim([])
    bad.spec.resources.requests = {"cpu": "lots"}
    with pytest.raises(InvalidRequirementsError) as info:
        launch_constraints(bad)
    assert info.value.condition_reason == INVALID_REQUIREMENTS
    assert info.value.condition_message == str(info.value).removeprefix("NodeClaim c1: ")


def test_stamp_launched_copies_and_labels() -> None:
    it = itype("m.large", [Offering("z1", "spot", 0.1)])
    original = claim([])
    out = stamp_launched(original, it, zone="z1", capacity_type="spot", provider_id=ProviderID("aws", "z1", "i-1"),
                         image_id="ami-1", labels={"extra": "x"}, annotations={"a": "b"})
    assert out.metadata.labels[LABEL_INSTANCE_TYPE] == "m.large" and out.metadata.labels[LABEL_ARCH] == "amd64"
    assert out.metadata.labels[LABEL_ZONE] == "z1" and out.metadata.labels[LABEL_CAPACITY_TYPE] == "spot"
    assert out.metadata.labels["extra"] == "x" and out.metadata.annotations["a"] == "b"
    assert out.status.provider_id == "aws:///z1/i-1" and out.status.image_id == "ami-1"
    assert out.status.capacity["cpu"] == "2" and out.status.allocatable
    assert original.status.provider_id is None and LABEL_ZONE not in original.metadata.labels


def test_provider_id_round_trip() -> None:
    for text in ("aws:///us-east-1a/i-0abc", "kakaocloud:///kr-central-2-a/0a1b-2c", "simulated:///us-east-1a/i-00000001"):
        pid = ProviderID.parse(text)
        assert pid is not None and str(pid) == text
    assert ProviderID.parse("aws:///us-east-1a/i-0abc", "kakaocloud") is None
    assert ProviderID.parse("aws://us-east-1a/i-0abc") is None
    assert ProviderID.parse(None) is None


def test_options_name_the_unknown_option_and_withhold_values() -> None:
    class Opts(ProviderOptions):
        provider = "demo"
        region: str = ""
        count: int = 1

    assert Opts.parse({"region": "r"}).region == "r"
    with pytest.raises(ConfigurationError, match=r"demo provider: unknown option\(s\) regoin; valid: count, region"):
        Opts.parse({"regoin": "r"})
    with pytest.raises(ConfigurationError, match="count") as info:
        Opts.parse({"count": "s3cr3t"})
    assert "s3cr3t" not in str(info.value)
