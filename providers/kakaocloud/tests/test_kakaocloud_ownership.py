"""Ownership records: VMs karpy cannot prove it owns survive list (GC) and delete and are
reported; key rotation keeps old VMs manageable."""

from __future__ import annotations

import pytest
from kakaocloud_fake_server import CLUSTER_ID
from kakaocloud_fixtures import KEY1, KEY2, keyring_json
from karpy_kakaocloud import ownership
from karpy_kakaocloud.credentials import parse_keyring
from karpy_kakaocloud.plugin import UnownedInstanceError
from test_kakaocloud_conformance import NODECLASS

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import NodeClaimNotFoundError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.operator import Operator
from karpy_core.testing.conformance import nodeclaim_for

REF = {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": "default"}


def test_record_fits_and_verifies():
    ring = parse_keyring(keyring_json("abcdefg", {"abcdefg": KEY1}))
    name = "n" * 38 + "-abcde"
    d = ownership.describe_owned(ring, CLUSTER_ID, "inst-1", name)
    assert len(d) == 99 and ownership.DESCRIPTION_PATTERN.match(d)
    assert ownership.verify(d, ring, CLUSTER_ID, "inst-1").owned
    assert ownership.verify(d, ring, CLUSTER_ID, "inst-2").ownership is ownership.Ownership.TAMPERED
    assert ownership.verify(d, ring, "other-cluster", "inst-1").ownership is ownership.Ownership.FOREIGN_CLUSTER
    pending = ownership.describe_pending(ring, CLUSTER_ID, name, "AbCd-_01")
    assert len(pending) == 100 and ownership.DESCRIPTION_PATTERN.match(pending)
    verdict = ownership.verify(pending, ring, CLUSTER_ID, "x")
    assert verdict.ownership is ownership.Ownership.PENDING and verdict.nonce == "AbCd-_01"
    # the nonce is under the MAC: changing it breaks the record
    forged = pending.replace(":pAbCd-_01", ":pAbCd-_02")
    assert ownership.verify(forged, ring, CLUSTER_ID, "x").ownership is ownership.Ownership.TAMPERED
    with pytest.raises(ValueError, match="38 characters"):
        ownership.describe_owned(ring, CLUSTER_ID, "i", name + "x")


async def launched_world(make_provider, keyring: str | None = None):
    kube = InMemoryCluster()
    await kube.create("KCNodeClass", NODECLASS)
    plugin = make_provider(kube=kube, **({"keyring": parse_keyring(keyring)} if keyring else {}))
    return kube, plugin, CloudProvider(plugin)


async def test_unowned_vms_survive_gc_and_delete_and_are_reported(fake, make_provider):
    kube, plugin, provider = await launched_world(make_provider)
    mine = await provider.create(nodeclaim_for("default-aaaaa", REF))
    inst = fake.instances[mine.status.provider_id.rsplit("/", 1)[1]]
    ring = parse_keyring(keyring_json())
    other_ring = parse_keyring(keyring_json("old", {"old": KEY2}))
    tag = ownership.cluster_tag(CLUSTER_ID)
    cases = {
        "unsigned": fake.add_instance(name=f"karpy-{tag}-default-bbbbb", description=""),
        "tampered": fake.add_instance(name=f"karpy-{tag}-default-ccccc",
                                      description=inst["description"].replace("default-aaaaa", "default-ccccc")),
        "foreign-cluster": fake.add_instance(name="karpy-ffffff-default-ddddd",
                                             description=ownership.describe_owned(ring, "another-cluster", "?", "default-ddddd")),
        "unknown-key": fake.add_instance(name=f"karpy-{tag}-default-eeeee", description="?"),
        "k8se": fake.add_instance(name="demo-pool-1", is_k8se=True),
    }
    uk = cases["unknown-key"]
    uk["description"] = ownership.describe_owned(other_ring, CLUSTER_ID, uk["id"], "default-eeeee")
    # a copied (replayed) record: valid for another instance id
    cases["replayed"] = fake.add_instance(name=f"karpy-{tag}-default-aaaaa", description=inst["description"])
    plain = fake.add_instance(name="someone-elses-vm", description="web server")

    listed = await provider.list()
    assert [c.status.provider_id for c in listed] == [mine.status.provider_id]
    for reason, vm in cases.items():
        claim = nodeclaim_for(f"default-{reason[:5]}", REF)
        claim.status.provider_id = f"kakaocloud:///kr-central-2-a/{vm['id']}"
        with pytest.raises(UnownedInstanceError) as info:
            await provider.delete(claim)
        assert isinstance(info.value, NodeClaimNotFoundError)
        with pytest.raises(UnownedInstanceError):
            await provider.get(claim.status.provider_id)
        assert vm["id"] in fake.instances and fake.instances[vm["id"]]["status"] == "active", reason
    expected = {"unsigned": "unsigned", "tampered": "tampered", "foreign-cluster": "foreign-cluster",
                "unknown-key": "unknown-key", "k8se": "k8se", "replayed": "tampered"}
    for case, reason in expected.items():
        assert plugin.reported[cases[case]["id"]] == reason
    assert plain["id"] not in plugin.reported
    deletes = [p for m, p, _ in fake.calls if m == "DELETE"]
    assert deletes == []
    assert plugin.unowned_instances.labels(reason="unsigned", action="delete")._value.get() == 1
    assert plugin.unowned_instances.labels(reason="unsigned", action="garbage-collect")._value.get() == 1
    # the counter is served on the controller's /metrics (the plugin's registry is adopted)
    operator = Operator(kube=InMemoryCluster(), provider=provider)
    served = operator.metrics.render().decode()
    assert 'karpy_kakaocloud_unowned_instances_total{action="delete",reason="unsigned"} 1.0' in served
    events = kube.objects("Event")
    assert {e["reason"] for e in events} == {"UnownedInstance"}
    assert any(cases["tampered"]["id"] in e["message"] for e in events)
    # a NodeClaim pointing at a VM signed for *another* NodeClaim is refused too
    wrong = nodeclaim_for("default-zzzzz", REF)
    wrong.status.provider_id = mine.status.provider_id
    with pytest.raises(UnownedInstanceError, match="other-nodeclaim"):
        await provider.delete(wrong)
    # and the real owner deletes it
    with pytest.raises(NodeClaimNotFoundError, match="terminated"):
        await provider.delete(mine)
    assert set(fake.instances) == {vm["id"] for vm in cases.values()} | {plain["id"]}


async def test_key_rotation_keeps_old_vms_manageable(fake, make_provider):
    _kube, _plugin, provider = await launched_world(make_provider)
    old = await provider.create(nodeclaim_for("default-old01", REF))
    # rotate: add k2 and make it active; k1 stays for the old VMs
    rotated = keyring_json("k2", {"k1": KEY1, "k2": KEY2})
    _, _plugin2, provider2 = await launched_world(make_provider, rotated)
    new = await provider2.create(nodeclaim_for("default-new01", REF))
    new_inst = fake.instances[new.status.provider_id.rsplit("/", 1)[1]]
    assert new_inst["description"].split(":")[2] == "k2"
    assert {c.status.provider_id for c in await provider2.list()} == {old.status.provider_id, new.status.provider_id}
    assert (await provider2.get(old.status.provider_id)).metadata.name == "default-old01"
    with pytest.raises(NodeClaimNotFoundError, match="terminated"):
        await provider2.delete(old)
    # the un-rotated controller cannot verify k2's VM and leaves it alone
    with pytest.raises(UnownedInstanceError, match="unknown-key"):
        await provider.delete(new)
    assert new_inst["id"] in fake.instances
    # dropping k1 after its VMs are gone is safe; new VMs still verify
    _, _, provider3 = await launched_world(make_provider, keyring_json("k2", {"k2": KEY2}))
    assert [c.status.provider_id for c in await provider3.list()] == [new.status.provider_id]
