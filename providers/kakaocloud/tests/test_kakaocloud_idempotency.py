"""Issue 10 section 2: one VM per NodeClaim whatever the network does, every owned VM garbage
collected, and a copied pending record neither adopted nor deleted."""

from __future__ import annotations

import asyncio
import contextlib
import time

from kakaocloud_fake_server import CLUSTER_ID, _iso
from kakaocloud_fixtures import keyring_json
from karpy_kakaocloud import ownership
from karpy_kakaocloud.credentials import parse_keyring
from test_kakaocloud_conformance import NODECLASS
from test_kakaocloud_ownership import REF

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.garbagecollection import garbage_collect
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing.conformance import nodeclaim_for
from karpy_core.utils.clock import VirtualClock

POST = r"/bcs/api/v1/instances$"


async def world(make_provider, **kw):
    kube = InMemoryCluster()
    await kube.create("KCNodeClass", NODECLASS)
    plugin = make_provider(kube=kube, **kw)
    return kube, plugin, CloudProvider(plugin)


async def stored_claim(kube: InMemoryCluster, name: str) -> NodeClaim:
    await kube.create("NodeClaim", nodeclaim_for(name, REF).model_dump(by_alias=True, exclude_none=True, mode="json"))
    return NodeClaim.model_validate(await kube.get("NodeClaim", name))


async def crash_after_post(provider: CloudProvider, claim: NodeClaim, fake) -> dict:
    """The controller's task is cancelled after the server made the VM, before karpy signed it."""
    before = set(fake.instances)
    fake.inject(202, method="POST", path=POST, delay=5.0)
    task = asyncio.ensure_future(provider.create(claim))
    for _ in range(500):
        if set(fake.instances) - before:
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    (new,) = set(fake.instances) - before
    return fake.instances[new]


def owned(fake) -> list[dict]:
    ring = parse_keyring(keyring_json())
    return [i for i in fake.instances.values() if ownership.verify(i["description"], ring, CLUSTER_ID, i["id"]).owned]


async def test_create_whose_answer_times_out_launches_one_vm(fake, make_provider):
    """Before: the client re-POSTed after each read timeout, so two timeouts left 3 VMs, 2 of them
    pending forever."""
    kube, _plugin, provider = await world(make_provider, request_timeout=0.2)
    claim = await stored_claim(kube, "default-aaaaa")
    fake.inject(202, method="POST", path=POST, times=2, delay=0.5)
    launched = await provider.create(claim)
    posts = [c for c in fake.calls if c[0] == "POST" and c[1].endswith("/instances")]
    assert len(posts) == 1
    assert len(fake.instances) == 1 and len(owned(fake)) == 1
    assert launched.status.provider_id.endswith(next(iter(fake.instances)))
    # the nonce of that one POST is on the NodeClaim
    stored = await kube.get("NodeClaim", "default-aaaaa")
    assert stored["metadata"]["annotations"][ownership.NONCE_ANNOTATION] == launched.metadata.annotations[ownership.NONCE_ANNOTATION]


async def test_restarted_create_adopts_the_vm_of_a_cancelled_one(fake, make_provider):
    kube, _plugin, provider = await world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    vm = await crash_after_post(provider, claim, fake)
    assert ownership.verify(vm["description"], parse_keyring(keyring_json()), CLUSTER_ID, vm["id"]).ownership \
        is ownership.Ownership.PENDING
    _, _, fresh = await world(make_provider)
    fresh.plugin.bind_kube(kube)
    launched = await fresh.create(NodeClaim.model_validate(await kube.get("NodeClaim", "default-aaaaa")))
    assert launched.status.provider_id.endswith(vm["id"]) and len(fake.instances) == 1 and len(owned(fake)) == 1


async def test_gc_collects_owned_and_pending_vms_whose_nodeclaim_is_gone(fake, make_provider):
    """Before: list gave no creation time (GC skipped every VM) and never listed pending VMs."""
    kube, _plugin, provider = await world(make_provider)
    signed = await provider.create(nodeclaim_for("default-aaaaa", REF))
    claim = await stored_claim(kube, "default-bbbbb")
    pending = await crash_after_post(provider, claim, fake)
    await kube.delete("NodeClaim", "default-bbbbb")  # no providerID: the claim simply goes
    _, _, fresh = await world(make_provider)
    fresh.plugin.bind_kube(kube)
    listed = {c.status.provider_id: c for c in await fresh.list()}
    assert set(listed) == {signed.status.provider_id, f"kakaocloud:///{pending['availability_zone']}/{pending['id']}"}
    assert all(c.metadata.creation_timestamp is not None for c in listed.values())
    skipped: dict[str, str] = {}
    assert await garbage_collect(kube, fresh, VirtualClock(start=time.time()), skipped=skipped) == []
    assert set(skipped.values()) == {"too-young"}  # the same 30 s grace period as AWS
    done = await garbage_collect(kube, fresh, VirtualClock(start=time.time() + 31))
    assert sorted(done) == sorted(listed)
    assert fake.instances == {}  # both deleted (the fake answers 404 once a deletion is done)
    assert sorted(c[1].rsplit("/", 1)[1] for c in fake.calls if c[0] == "DELETE") == sorted(
        p.rsplit("/", 1)[1] for p in listed)


async def test_copied_pending_record_is_neither_adopted_nor_deleted(fake, make_provider):
    """Before: any VM named like karpy's with a pending record for the NodeClaim was adopted
    (the first by id), signed and later deleted, copies included."""
    kube, plugin, provider = await world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    mine = await crash_after_post(provider, claim, fake)
    record = mine["description"]
    # an older VM of someone else's, renamed like karpy's and given the copied record
    old = fake.add_instance(id="00000000-0000-0000-0000-000000000000", name=mine["name"], description=record,
                            created_at=_iso(time.time() - 3600))
    _, fresh_plugin, fresh = await world(make_provider)
    fresh_plugin.bind_kube(kube)
    launched = await fresh.create(NodeClaim.model_validate(await kube.get("NodeClaim", "default-aaaaa")))
    assert launched.status.provider_id.endswith(mine["id"])
    assert fresh_plugin.reported[old["id"]] == "outside-launch-window"
    await kube.patch("NodeClaim", "default-aaaaa", {"status": {"providerID": launched.status.provider_id}}, status=True)
    # a fresh copy made after karpy's POST: its nonce is the claim's, but that POST made `mine`
    fresh_copy = fake.add_instance(name=mine["name"], description=record)
    listed = {c.status.provider_id for c in await fresh.list()}
    assert listed == {launched.status.provider_id}
    assert fresh_plugin.reported[fresh_copy["id"]] == "duplicate-record"  # the record sits on two VMs
    # alone, the copy still names the nonce whose POST made `mine`
    hidden = fake.instances.pop(old["id"])
    assert {c.status.provider_id for c in await fresh.list()} == {launched.status.provider_id}
    assert fresh_plugin.reported[fresh_copy["id"]] == "copied-record"
    fake.instances[old["id"]] = hidden
    # the NodeClaim goes: its VM is deleted, the copies stay, also through garbage collection
    with contextlib.suppress(Exception):
        await fresh.delete(launched)
    await kube.delete("NodeClaim", "default-aaaaa")
    await garbage_collect(kube, fresh, VirtualClock(start=time.time() + 120))
    assert fake.instances[old["id"]]["status"] == "active" and fake.instances[fresh_copy["id"]]["status"] == "active"
    assert fake.instances[old["id"]]["description"] == record
    deleted = {c[1].rsplit("/", 1)[1] for c in fake.calls if c[0] == "DELETE"}
    assert deleted == {mine["id"]}
    assert plugin is not fresh_plugin
