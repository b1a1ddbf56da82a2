"""KCNodeClass resolution and status conditions; instance types and prices."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from karpy_kakaocloud.instancetypes import LABEL_INSTANCE_GPU_COUNT, LABEL_INSTANCE_GPU_NAME, instance_types_from_flavors
from karpy_kakaocloud.plugin import create_plugin
from karpy_kakaocloud.pricing import DEFAULT_RULE, PriceTable, load_price_table
from test_kakaocloud_conformance import NODECLASS

from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.errors import ConfigurationError
from karpy_core.kube.memory import InMemoryCluster


async def resolve_with(make_provider, **spec_changes):
    kube = InMemoryCluster()
    nc: dict[str, Any] = copy.deepcopy(NODECLASS)
    nc["spec"].update(spec_changes)
    await kube.create("KCNodeClass", nc)
    plugin = make_provider(kube=kube)
    resolved = await plugin.reconcile_nodeclass("default")
    stored = kube.peek("KCNodeClass", "default")
    assert stored is not None
    conds = {c["type"]: (c["status"], c["reason"]) for c in stored["status"]["conditions"]}
    return resolved, conds


async def test_ready(make_provider):
    resolved, conds = await resolve_with(make_provider)
    assert all(s == "True" for s, _ in conds.values()) and resolved.zones == ["kr-central-2-a", "kr-central-2-b"]
    assert resolved.image_for("amd64", gpu=False)["id"] == "img-134-x86_64-cpu"
    assert resolved.image_for("arm64", gpu=False)["id"] == "img-134-aarch64-cpu"


@pytest.mark.parametrize(
    ("changes", "cond", "reason"),
    [
        ({"bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.33"}}, "KubernetesVersionReady", "VersionSkew"),
        ({"bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.36"}}, "KubernetesVersionReady", "VersionNotOffered"),
        ({"subnetSelectorTerms": [{"id": "subnet-zz"}]}, "SubnetsReady", "SubnetNotFound"),
        ({"subnetSelectorTerms": [{"id": "subnet-x"}]}, "SubnetsReady", "SubnetNotInClusterVPC"),
        ({"securityGroupSelectorTerms": [{"id": "sg-nope"}]}, "SecurityGroupsReady", "SecurityGroupNotFound"),
        ({"keyName": "missing-key"}, "KeyPairReady", "KeyPairNotFound"),
    ],
)
async def test_not_ready(make_provider, changes, cond, reason):
    resolved, conds = await resolve_with(make_provider, **changes)
    assert conds[cond] == ("False", reason)
    assert conds["Ready"] == ("False", "NotReady") and not resolved.ready


async def test_no_worker_image(make_provider, fake):
    fake.ke_images = [i for i in fake.ke_images if not i["id"].startswith("img-134")]
    _, conds = await resolve_with(make_provider)
    assert conds["ImagesReady"] == ("False", "NoWorkerImage")


async def test_instance_types_from_flavors(fake):
    types = instance_types_from_flavors(list(fake.flavors.values()), zones=["kr-central-2-a"], prices=PriceTable())
    names = [t.name for t in types]
    assert "bm.i3" not in names and names == sorted(names)
    gpu = next(t for t in types if t.name == "p2a.xlarge")
    gpu_name = gpu.requirements.get(LABEL_INSTANCE_GPU_NAME)
    assert gpu.capacity["nvidia.com/gpu"] == 1 and gpu_name is not None and gpu_name.has("a100")
    cpu = next(t for t in types if t.name == "m2a.large")
    gpu_count = cpu.requirements.get(LABEL_INSTANCE_GPU_COUNT)
    assert gpu_count is not None and gpu_count.is_empty()
    assert cpu.requirements.labels()["kubernetes.io/arch"] == "amd64"
    assert next(t for t in types if t.name == "m2g.large").requirements.labels()["kubernetes.io/arch"] == "arm64"
    assert [o.capacity_type for o in cpu.offerings] == ["on-demand"]
    assert cpu.offerings[0].price == DEFAULT_RULE.price(2, 8192)
    assert 0 < cpu.allocatable["cpu"] < cpu.capacity["cpu"]


def test_price_tables(tmp_path):
    csv = tmp_path / "p.csv"
    csv.write_text("flavor,price\nm2a.large,0.11\n")
    t = load_price_table(csv)
    assert t.price("m2a.large", 2, 8192) == 0.11 and t.price("c2a.large", 2, 4096) == DEFAULT_RULE.price(2, 4096)
    y = tmp_path / "p.yaml"
    y.write_text("rule: {vcpu: 0.05, memory_gib: 0.01}\nprices: {c2a.large: 0.2}\n")
    t = load_price_table(y)
    assert t.price("c2a.large", 2, 4096) == 0.2 and t.price("x", 2, 2048) == pytest.approx(0.12)
    assert "KakaoCloud's API publishes no prices" in t.note()
    bad = tmp_path / "bad.csv"
    bad.write_text("flavor,price\nm2a.large,-1\n")
    with pytest.raises(ConfigurationError, match="line 2"):
        load_price_table(bad)
    bad.write_text("flavor,price\nm2a.large,1e308\n")  # sums of such prices overflow to inf
    with pytest.raises(ConfigurationError, match="up to 1,000,000"):
        load_price_table(bad)
    with pytest.raises(ConfigurationError, match="'price' column"):
        (tmp_path / "c.csv").write_text("name,cost\n")
        load_price_table(tmp_path / "c.csv")
    p = create_plugin({"cluster_name": "demo", "price_table_file": str(csv)})
    assert p.prices.prices == {"m2a.large": 0.11}


def test_plugin_options():
    with pytest.raises(ConfigurationError, match="unknown option"):
        create_plugin({"cluster_name": "demo", "regoin": "x"})
    with pytest.raises(ConfigurationError, match="cluster_name"):  # refused when prepared, before any API call
        create_plugin({}).karpy_prepare(ProviderContext())
    p = create_plugin({"cluster_name": "demo", "delete_poll_interval": 0.5, "endpoints": {"bcs": "http://127.0.0.1:1"}})
    assert p.settings.delete_poll_interval == 0.5
    assert p.settings.endpoint("bcs", "kr-central-2") == "http://127.0.0.1:1"
    assert p.settings.endpoint("vpc", "kr-central-2") == "https://vpc.kr-central-2.kakaocloud.com"


def test_entry_point_loads():
    from karpy_core.cloudprovider.provider import load_provider

    provider = load_provider("kakaocloud", {"cluster_name": "demo"})
    assert provider.name == "kakaocloud"
    assert provider.supported_node_classes() == [("karpenter.kakaocloud.com", "KCNodeClass")]
    assert provider.repair_policies()
