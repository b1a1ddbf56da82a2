"""The EC2 catalog: Karpenter's AWS capacity/overhead/label rules, offerings and prices.

Expected numbers are worked out by hand from the rules (reference/karpenter-aws-behaviour.md §3):
memory = (MiB [-64 on arm64]) - ceil(that x 0.075); pods = ENIs x (IPv4/ENI - 1) + 2;
kube-reserved cpu = 6% of core 1 + 1% of core 2 + 0.5% of cores 3-4 + 0.25% of the rest,
memory = 11 x pods + 255 MiB, ephemeral 1Gi; eviction memory 100Mi, ephemeral 10% of 20Gi = 2Gi.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from typing import Any

import pytest

from karpy_core.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_REGION,
    LABEL_WINDOWS_BUILD,
    LABEL_ZONE,
    is_well_known,
)
from karpy_core.cloudprovider.catalog import aws
from karpy_core.cloudprovider.catalog.aws import (
    AWS_WELL_KNOWN_LABELS,
    AMIFamily,
    AWSCatalogOptions,
    InstanceTypeSpec,
    build_instance_type,
    build_offerings,
    compute_capacity,
    compute_overhead,
    eni_limited_pods,
    load_aws_catalog,
    memory_capacity,
    parse_instance_type_name,
    pods_capacity,
    spot_price,
)
from karpy_core.cloudprovider.overhead import eviction_threshold, kube_reserved_cpu
from karpy_core.errors import ConfigurationError
from karpy_core.scheduling.requirements import Operator, Requirement, Requirements
from karpy_core.scheduling.resources import format_resource_list

MI = 1024 * 1024
GI = 1024 * MI


def _req(reqs: Requirements, key: str) -> Requirement:
    """The requirement on ``key``, which the test expects to be there."""
    req = reqs.get(key)
    assert req is not None, key
    return req


@pytest.fixture(scope="module")
def catalog() -> dict[str, object]:
    return {it.name: it for it in load_aws_catalog()}


def _raw_entries() -> list[dict]:
    return json.loads(resources.files("karpy_core").joinpath("data", "aws-instance-types.json").read_text())


# ---------------------------------------------------------------------------------------------
# Catalog shape
# ---------------------------------------------------------------------------------------------


def test_packaged_data_files_are_complete() -> None:
    assert len(_raw_entries()) == 1373
    for region in aws.SUPPORTED_REGIONS:
        assert resources.files("karpy_core").joinpath("data", f"aws-offerings-{region}.json").is_file()


def test_catalog_lists_launchable_offered_types_sorted() -> None:
    us = load_aws_catalog()
    ap = load_aws_catalog("ap-northeast-2")
    assert len(us) == 1345
    assert len(ap) == 749
    names = [it.name for it in us]
    assert names == sorted(names)
    assert len(set(names)) == len(names)
    # Mac types (x86_64_mac / arm64_mac) are not launchable by Karpenter.
    assert not any(n.startswith("mac") for n in names)
    assert {_req(it.requirements, LABEL_ARCH).any_value() for it in us} == {"amd64", "arm64"}


def test_catalog_is_memoised_per_region_and_options() -> None:
    assert load_aws_catalog() is load_aws_catalog("us-east-1")
    assert load_aws_catalog("us-east-1", AWSCatalogOptions()) is load_aws_catalog()
    assert load_aws_catalog("ap-northeast-2") is not load_aws_catalog()
    opts = AWSCatalogOptions(max_pods=110, kube_reserved={"cpu": "100m"})
    assert load_aws_catalog(options=opts) is load_aws_catalog(
        options=AWSCatalogOptions(max_pods=110, kube_reserved={"cpu": "100m"})
    )
    assert load_aws_catalog(options=opts) is not load_aws_catalog()


def test_unsupported_region_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="eu-west-1"):
        load_aws_catalog("eu-west-1")


def test_prices_are_us_east_1_list_prices_everywhere(catalog) -> None:
    assert aws.PRICES_ARE_US_EAST_1_LIST_PRICES is True
    ap = {it.name: it for it in load_aws_catalog("ap-northeast-2")}
    od = [o for o in ap["m5.large"].offerings if o.capacity_type == "on-demand"]
    assert od and all(o.price == 0.096 for o in od)


# ---------------------------------------------------------------------------------------------
# Capacity / overhead / allocatable for real types
# ---------------------------------------------------------------------------------------------

# name: (capacity, kube-reserved, allocatable), in Kubernetes notation.
EXPECTED = {
    # 2 vCPU, 8192 MiB, 3 ENIs x 10 IPs: memory 8192 - ceil(614.4) = 7577Mi; pods 3*9+2 = 29;
    # kube cpu 60+10 = 70m; kube mem 11*29+255 = 574Mi; alloc mem 7577-574-100 = 6903Mi.
    "m5.large": (
        {"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi"},
        {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"},
    ),
    # 4 vCPU, 8192 MiB, 4 ENIs x 15: pods 4*14+2 = 58; kube cpu 60+10+10 = 80m;
    # kube mem 11*58+255 = 893Mi; alloc mem 7577-893-100 = 6584Mi.
    "c5.xlarge": (
        {"cpu": "4", "memory": "7577Mi", "pods": "58", "ephemeral-storage": "20Gi"},
        {"cpu": "80m", "memory": "893Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "3920m", "memory": "6584Mi", "pods": "58", "ephemeral-storage": "17Gi"},
    ),
    # arm64: 8192-64 = 8128, minus ceil(609.6) = 610 -> 7518Mi; alloc 7518-574-100 = 6844Mi.
    "m6g.large": (
        {"cpu": "2", "memory": "7518Mi", "pods": "29", "ephemeral-storage": "20Gi"},
        {"cpu": "70m", "memory": "574Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "1930m", "memory": "6844Mi", "pods": "29", "ephemeral-storage": "17Gi"},
    ),
    # 1024 MiB - ceil(76.8) = 947Mi; 2 ENIs x 2 IPs: pods 2*1+2 = 4; kube mem 11*4+255 = 299Mi;
    # alloc 947-299-100 = 548Mi.
    "t3.micro": (
        {"cpu": "2", "memory": "947Mi", "pods": "4", "ephemeral-storage": "20Gi"},
        {"cpu": "70m", "memory": "299Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "1930m", "memory": "548Mi", "pods": "4", "ephemeral-storage": "17Gi"},
    ),
    # 16384 - ceil(1228.8) = 15155Mi; pods 58; alloc 15155-893-100 = 14162Mi; one NVIDIA A10G.
    "g5.xlarge": (
        {"cpu": "4", "memory": "15155Mi", "pods": "58", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1"},
        {"cpu": "80m", "memory": "893Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "3920m", "memory": "14162Mi", "pods": "58", "ephemeral-storage": "17Gi", "nvidia.com/gpu": "1"},
    ),
    # 96 vCPU: kube cpu 60+10+10+ 92000*0.25% = 230 -> 310m; 393216 - ceil(29491.2) = 363724Mi;
    # 15 ENIs x 50: pods 15*49+2 = 737; kube mem 11*737+255 = 8362Mi; alloc 363724-8362-100 = 355262Mi.
    "m5.24xlarge": (
        {"cpu": "96", "memory": "363724Mi", "pods": "737", "ephemeral-storage": "20Gi"},
        {"cpu": "310m", "memory": "8362Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "95690m", "memory": "355262Mi", "pods": "737", "ephemeral-storage": "17Gi"},
    ),
    # AMD GPU; 2 ENIs x 4 IPs: pods 2*3+2 = 8; kube mem 11*8+255 = 343Mi; alloc 15155-343-100 = 14712Mi.
    "g4ad.xlarge": (
        {"cpu": "4", "memory": "15155Mi", "pods": "8", "ephemeral-storage": "20Gi", "amd.com/gpu": "1"},
        {"cpu": "80m", "memory": "343Mi", "ephemeral-storage": "1Gi"},
        {"cpu": "3920m", "memory": "14712Mi", "pods": "8", "ephemeral-storage": "17Gi", "amd.com/gpu": "1"},
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_capacity_overhead_and_allocatable(catalog, name: str) -> None:
    capacity, kube, allocatable = EXPECTED[name]
    it = catalog[name]
    assert format_resource_list(it.capacity) == dict(sorted(capacity.items()))
    assert format_resource_list(it.overhead.kube_reserved) == dict(sorted(kube.items()))
    assert format_resource_list(it.overhead.eviction_threshold) == {"ephemeral-storage": "2Gi", "memory": "100Mi"}
    assert it.overhead.system_reserved == {}
    assert format_resource_list(it.allocatable) == dict(sorted(allocatable.items()))


def test_m5_large_in_internal_units(catalog) -> None:
    it = catalog["m5.large"]
    assert it.capacity["memory"] == 7577 * MI
    assert it.allocatable["cpu"] == 1930
    assert it.allocatable["memory"] == 6903 * MI
    assert it.allocatable["pods"] == 29


def test_multi_card_types_use_the_default_network_card(catalog) -> None:
    # p4d.24xlarge has 4 cards x 15 ENIs; the VPC CNI uses card 0 only: 15*49+2 = 737 (EKS eni-max-pods).
    assert catalog["p4d.24xlarge"].capacity["pods"] == 737
    assert catalog["p4d.24xlarge"].capacity["nvidia.com/gpu"] == 8
    assert catalog["trn1.32xlarge"].capacity["pods"] == 5 * 49 + 2


def test_neuron_devices(catalog) -> None:
    assert catalog["trn1.2xlarge"].capacity["aws.amazon.com/neuron"] == 1
    assert catalog["inf1.xlarge"].capacity["aws.amazon.com/neuron"] == 1
    assert "aws.amazon.com/neuron" not in catalog["m5.large"].capacity


# ---------------------------------------------------------------------------------------------
# The rules as functions
# ---------------------------------------------------------------------------------------------


def test_memory_capacity() -> None:
    assert memory_capacity(8192, "amd64") == 7577 * MI
    assert memory_capacity(8192, "arm64") == (8128 - 610) * MI
    assert memory_capacity(8192, "amd64", 0.0) == 8192 * MI
    assert memory_capacity(8192, "amd64", 0.1) == (8192 - 820) * MI  # ceil(819.2)


@pytest.mark.parametrize(
    ("vcpu", "millicores"),
    [(1, 60), (2, 70), (3, 75), (4, 80), (8, 90), (48, 60 + 10 + 10 + 110), (96, 310)],
)
def test_kube_reserved_cpu(vcpu: int, millicores: int) -> None:
    assert kube_reserved_cpu(vcpu) == millicores


def test_eni_limited_pods() -> None:
    assert eni_limited_pods(3, 10) == 29
    assert eni_limited_pods(3, 10, reserved_enis=1) == 2 * 9 + 2
    assert eni_limited_pods(1, 10, reserved_enis=1) == 0
    assert eni_limited_pods(1, 10, reserved_enis=5) == 0


def test_pods_capacity_by_ami_family_and_kubelet_settings() -> None:
    assert pods_capacity(2, 3, 10) == 29
    assert pods_capacity(2, 3, 10, ami_family=AMIFamily.BOTTLEROCKET) == 29
    assert pods_capacity(2, 3, 10, ami_family=AMIFamily.WINDOWS2022) == 110
    assert pods_capacity(2, 3, 10, max_pods=50) == 50
    assert pods_capacity(2, 3, 10, pods_per_core=4) == 8
    assert pods_capacity(2, 3, 10, pods_per_core=40) == 29
    assert pods_capacity(2, 3, 10, pods_per_core=4, ami_family=AMIFamily.BOTTLEROCKET) == 29


def _spec(**kw) -> InstanceTypeSpec:
    base: dict[str, Any] = dict(name="m5.large", vcpu=2, memory_mib=8192, architecture="amd64", max_enis=3, ipv4_per_eni=10)
    base.update(kw)
    return InstanceTypeSpec(**base)


def test_kube_reserved_memory_uses_eni_pods_on_al2023_but_pods_on_bottlerocket() -> None:
    spec = _spec()
    al2023 = compute_overhead(spec, AWSCatalogOptions(max_pods=110))
    assert al2023.kube_reserved["memory"] == (11 * 29 + 255) * MI
    bottlerocket = compute_overhead(spec, AWSCatalogOptions(max_pods=110, ami_family=AMIFamily.BOTTLEROCKET))
    assert bottlerocket.kube_reserved["memory"] == (11 * 110 + 255) * MI
    windows = compute_overhead(spec, AWSCatalogOptions(ami_family=AMIFamily.WINDOWS2022))
    assert windows.kube_reserved["memory"] == (11 * 110 + 255) * MI


def test_kubelet_overrides() -> None:
    opts = AWSCatalogOptions(
        kube_reserved={"cpu": "200m"},
        system_reserved={"memory": "100Mi", "cpu": "100m"},
        eviction_hard={"memory.available": "5%", "nodefs.available": "100%"},
    )
    overhead = compute_overhead(_spec(), opts)
    assert overhead.kube_reserved == {"cpu": 200, "memory": 574 * MI, "ephemeral-storage": GI}
    assert overhead.system_reserved == {"memory": 100 * MI, "cpu": 100}
    # 5% of 7577Mi: ceil(7945060352 / 100 * 5) = ceil(397253017.6); 100% disables the threshold.
    assert overhead.eviction_threshold == {"memory": 397253018, "ephemeral-storage": 0}
    assert eviction_threshold(7577 * MI, 20 * GI, {"memory.available": "200Mi"})["memory"] == 200 * MI


def test_options_validation() -> None:
    with pytest.raises(ConfigurationError, match="amiFamily"):
        AWSCatalogOptions(ami_family="Ubuntu")
    with pytest.raises(ConfigurationError):
        AWSCatalogOptions(kube_reserved={"memory": "lots"})
    with pytest.raises(ConfigurationError):
        AWSCatalogOptions(max_pods=-1)
    assert hash(AWSCatalogOptions(kube_reserved={"a": "1"})) == hash(AWSCatalogOptions(kube_reserved={"a": "1"}))


def test_raid0_uses_instance_store_for_ephemeral_storage() -> None:
    spec = _spec(name="g5.xlarge", local_storage_gb=250, local_nvme=True)
    opts = AWSCatalogOptions(instance_store_policy="RAID0")
    cap = compute_capacity(spec, opts)
    assert cap["ephemeral-storage"] == 250 * 10**9
    assert compute_overhead(spec, opts, cap).eviction_threshold["ephemeral-storage"] == 25 * 10**9
    assert compute_capacity(spec, AWSCatalogOptions(ephemeral_storage="100Gi"))["ephemeral-storage"] == 100 * GI


# ---------------------------------------------------------------------------------------------
# Labels / requirements
# ---------------------------------------------------------------------------------------------


def test_labels_of_a_general_purpose_type(catalog) -> None:
    labels = catalog["m5.large"].requirements.labels()
    assert labels == {
        "karpenter.k8s.aws/instance-category": "m",
        "karpenter.k8s.aws/instance-capability-flex": "false",
        "karpenter.k8s.aws/instance-cpu": "2",
        "karpenter.k8s.aws/instance-cpu-manufacturer": "intel",
        "karpenter.k8s.aws/instance-family": "m5",
        "karpenter.k8s.aws/instance-generation": "5",
        "karpenter.k8s.aws/instance-hypervisor": "nitro",
        "karpenter.k8s.aws/instance-memory": "8192",
        "karpenter.k8s.aws/instance-size": "large",
        # Karpenter's bandwidth table and DescribeInstanceTypes (aws-instance-type-details.json)
        "karpenter.k8s.aws/instance-network-bandwidth": "750",
        "karpenter.k8s.aws/instance-ebs-bandwidth": "4750",
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz": "3100",
        "karpenter.k8s.aws/instance-encryption-in-transit-supported": "false",
        LABEL_ARCH: "amd64",
        LABEL_OS: "linux",
        LABEL_INSTANCE_TYPE: "m5.large",
        LABEL_REGION: "us-east-1",
    }


def test_a_network_bandwidth_requirement_is_enforced(catalog) -> None:
    """Issue 29: ``instance-network-bandwidth Gt 1000`` launched a t4g.small (128 Mbps): the label
    was not known, so the requirement constrained nothing. Now types without a known bandwidth are
    out, as in Karpenter (the label is DoesNotExist for them)."""
    from karpy_core.scheduling.requirements import Requirements

    wanted = Requirements.from_selector_terms([{"key": "karpenter.k8s.aws/instance-network-bandwidth", "operator": "Gt", "values": ["1000"]}])
    fits = {name for name, it in catalog.items() if it.requirements.conflict(wanted) is None}
    assert "t4g.small" not in fits and "m5.large" not in fits and "m5.2xlarge" in fits  # 128, 750, 2500 Mbps
    assert all(int(catalog[n].requirements.labels()["karpenter.k8s.aws/instance-network-bandwidth"]) > 1000 for n in fits)
    encrypted = {n for n, it in catalog.items() if it.requirements.labels().get("karpenter.k8s.aws/instance-encryption-in-transit-supported") == "true"}
    assert "m6i.large" in encrypted and "m5.large" not in encrypted


def test_labels_that_do_not_apply_are_does_not_exist(catalog) -> None:
    reqs = catalog["m5.large"].requirements
    for key in (
        "karpenter.k8s.aws/instance-gpu-name",
        "karpenter.k8s.aws/instance-gpu-manufacturer",
        "karpenter.k8s.aws/instance-gpu-count",
        "karpenter.k8s.aws/instance-gpu-memory",
        "karpenter.k8s.aws/instance-local-nvme",
        "karpenter.k8s.aws/instance-accelerator-name",
        "karpenter.k8s.aws/instance-accelerator-manufacturer",
        "karpenter.k8s.aws/instance-accelerator-count",
        LABEL_WINDOWS_BUILD,
    ):
        assert reqs.get(key).operator() == Operator.DOES_NOT_EXIST, key
    # Every AWS label is defined on every type.
    for it in catalog.values():
        assert set(it.requirements.keys()) >= AWS_WELL_KNOWN_LABELS, it.name


def test_gpu_and_local_nvme_labels(catalog) -> None:
    labels = catalog["g5.xlarge"].requirements.labels()
    assert labels["karpenter.k8s.aws/instance-gpu-name"] == "a10g"
    assert labels["karpenter.k8s.aws/instance-gpu-manufacturer"] == "nvidia"
    assert labels["karpenter.k8s.aws/instance-gpu-count"] == "1"
    assert labels["karpenter.k8s.aws/instance-gpu-memory"] == "22888"
    assert labels["karpenter.k8s.aws/instance-local-nvme"] == "250"
    # Per-GPU memory: p4d.24xlarge has 8 x 40960 MiB.
    assert catalog["p4d.24xlarge"].requirements.labels()["karpenter.k8s.aws/instance-gpu-memory"] == "40960"
    assert catalog["g4ad.xlarge"].requirements.labels()["karpenter.k8s.aws/instance-gpu-name"] == "radeon-pro-v520"
    # Xen i3 is NVMe; d2 (HDD) is not.
    assert catalog["i3.large"].requirements.labels()["karpenter.k8s.aws/instance-local-nvme"] == "475"
    assert catalog["d2.xlarge"].requirements.get("karpenter.k8s.aws/instance-local-nvme").is_empty()


def test_bare_metal_hypervisor_is_empty(catalog) -> None:
    assert catalog["m5.metal"].requirements.labels()["karpenter.k8s.aws/instance-hypervisor"] == ""
    assert catalog["t2.small"].requirements.labels()["karpenter.k8s.aws/instance-hypervisor"] == "xen"


def test_zone_and_capacity_type_requirements_come_from_offerings(catalog) -> None:
    reqs = catalog["m5.large"].requirements
    assert reqs.get(LABEL_ZONE).values == frozenset({o.zone for o in catalog["m5.large"].offerings})
    assert reqs.get(LABEL_CAPACITY_TYPE).values == frozenset({"on-demand", "spot"})
    assert catalog["m6g.large"].requirements.get(LABEL_ARCH).values == frozenset({"arm64"})


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("m5.large", {"category": "m", "generation": "5", "family": "m5", "size": "large"}),
        ("m7i-flex.large", {"category": "m", "generation": "7", "family": "m7i-flex", "size": "large"}),
        ("u-6tb1.metal", {"category": "u", "generation": "1", "family": "u-6tb1", "size": "metal"}),
        ("x8aedz.metal-12xl", {"category": "x", "generation": "8", "family": "x8aedz", "size": "metal-12xl"}),
        ("mac-m4.metal", {"family": "mac-m4", "size": "metal"}),
    ],
)
def test_parse_instance_type_name(name: str, expected: dict[str, str]) -> None:
    assert parse_instance_type_name(name) == expected


def test_aws_labels_are_registered_well_known() -> None:
    load_aws_catalog()
    assert all(is_well_known(label) for label in AWS_WELL_KNOWN_LABELS)


def test_windows_ami_family() -> None:
    opts = AWSCatalogOptions(ami_family=AMIFamily.WINDOWS2022)
    amd = build_instance_type(_spec(), [], "us-east-1", opts)
    assert amd.requirements.labels()[LABEL_OS] == "windows"
    assert amd.requirements.labels()[LABEL_WINDOWS_BUILD] == "10.0.20348"
    assert amd.capacity["pods"] == 110
    arm = build_instance_type(_spec(name="m6g.large", architecture="arm64"), [], "us-east-1", opts)
    assert _req(arm.requirements, LABEL_OS).is_empty()


# ---------------------------------------------------------------------------------------------
# Offerings and prices
# ---------------------------------------------------------------------------------------------


def test_offerings_per_region() -> None:
    us = {it.name: it for it in load_aws_catalog()}
    ap = {it.name: it for it in load_aws_catalog("ap-northeast-2")}
    t2 = ap["t2.small"]
    assert "ap-northeast-2a" in {o.zone for o in t2.offerings}
    assert {o.zone for o in t2.offerings} == {"ap-northeast-2a", "ap-northeast-2c"}
    assert t2.requirements.labels()[LABEL_REGION] == "ap-northeast-2"
    assert {o.zone for o in us["m5.large"].offerings} == {f"us-east-1{z}" for z in "abcdf"}
    # Each zone gets an on-demand and (spot in usage classes) a spot offering, zone-sorted.
    assert [(o.zone, o.capacity_type) for o in us["m5.large"].offerings[:2]] == [
        ("us-east-1a", "on-demand"),
        ("us-east-1a", "spot"),
    ]
    # Types offered nowhere in the region are left out.
    assert "x8aedz.large" not in us


def test_offerings_follow_usage_classes(catalog) -> None:
    raw = {e["name"]: e for e in _raw_entries()}
    od_only = [n for n, e in raw.items() if e["usage_classes"] == ["on-demand"] and n in catalog]
    assert od_only
    for name in od_only:
        assert {o.capacity_type for o in catalog[name].offerings} == {"on-demand"}
    # capacity-block is ignored.
    assert {o.capacity_type for o in catalog["p4d.24xlarge"].offerings} == {"on-demand", "spot"}


def test_spot_price_rule_is_deterministic_and_below_on_demand(catalog) -> None:
    it = catalog["m5.large"]
    spots = {o.zone: o.price for o in it.offerings if o.capacity_type == "spot"}
    for zone, price in spots.items():
        h = int.from_bytes(hashlib.sha256(f"m5.large/{zone}".encode()).digest()[:8], "big") / 2**64
        assert price == round(0.096 * (0.30 + 0.15 * h), 6)
        assert price == spot_price(0.096, "m5.large", zone)
        assert 0.096 * 0.30 <= price < 0.096 * 0.45 < 0.096
    assert len(set(spots.values())) > 1  # zones differ
    for t in catalog.values():
        od = {o.zone: o.price for o in t.offerings if o.capacity_type == "on-demand"}
        for o in t.offerings:
            if o.capacity_type == "spot" and o.available:
                assert 0 < o.price < od[o.zone], t.name


def test_null_price_makes_offerings_unavailable() -> None:
    ap = {it.name: it for it in load_aws_catalog("ap-northeast-2")}
    it = ap["x8aedz.large"]  # no published price in the data
    assert it.offerings
    assert not it.available_offerings()
    assert all(o.price == 0.0 for o in it.offerings)
    offs = build_offerings("x", ["z1", "z2"], ["on-demand", "spot"], None)
    assert [(o.zone, o.capacity_type, o.available) for o in offs] == [
        ("z1", "on-demand", False),
        ("z1", "spot", False),
        ("z2", "on-demand", False),
        ("z2", "spot", False),
    ]


def test_every_offered_priced_type_has_available_offerings(catalog) -> None:
    raw = {e["name"]: e for e in _raw_entries()}
    for name, it in catalog.items():
        priced = raw[name]["on_demand_usd_per_hour_us_east_1"] is not None
        assert bool(it.available_offerings()) == priced, name


def test_flex_cpu_manufacturer_and_accelerator_labels(catalog) -> None:
    """types.go: ``-flex`` families, the processor's manufacturer, Inferentia/Trainium devices."""
    flex = catalog["c7i-flex.large"].requirements.labels()
    assert flex["karpenter.k8s.aws/instance-capability-flex"] == "true"
    assert flex["karpenter.k8s.aws/instance-cpu-manufacturer"] == "intel"
    assert catalog["m6g.large"].requirements.labels()["karpenter.k8s.aws/instance-cpu-manufacturer"] == "aws"
    assert catalog["m5a.large"].requirements.labels()["karpenter.k8s.aws/instance-cpu-manufacturer"] == "amd"
    assert catalog["g5.xlarge"].requirements.labels()["karpenter.k8s.aws/instance-cpu-manufacturer"] == "amd"
    inf = catalog["inf2.24xlarge"].requirements.labels()
    assert (inf["karpenter.k8s.aws/instance-accelerator-name"], inf["karpenter.k8s.aws/instance-accelerator-manufacturer"],
            inf["karpenter.k8s.aws/instance-accelerator-count"]) == ("inferentia2", "aws", "6")
    trn = catalog["trn1.32xlarge"].requirements.labels()
    assert trn["karpenter.k8s.aws/instance-accelerator-name"] == "trainium" and trn["karpenter.k8s.aws/instance-accelerator-count"] == "16"
    assert catalog["m5.large"].requirements.get("karpenter.k8s.aws/instance-accelerator-name").operator() == "DoesNotExist"


def test_underivable_labels_are_not_registered(catalog) -> None:
    """Labels the data cannot give stay unregistered (a requirement on them is a custom label, as documented)."""
    from karpy_core.cloudprovider.catalog.aws import UNDERIVABLE_AWS_LABELS

    assert not UNDERIVABLE_AWS_LABELS & AWS_WELL_KNOWN_LABELS
    assert len(AWS_WELL_KNOWN_LABELS | UNDERIVABLE_AWS_LABELS) == 23
    for key in UNDERIVABLE_AWS_LABELS:
        assert key not in catalog["m5.large"].requirements.by_key
