"""Issue 34 item 5: KakaoCloud ownership fails closed.

Each of the five ways foreign VMs were deleted (or extra VMs made) in the issue's run, against the
fake OpenAPI server: a copied pending record whose NodeClaim cannot be read (500, 429), a record
with a trailing newline, a copy under another VM name, and a create POST answered 429 after the
VM was made. Each keeps the foreign VM (never deleted, reported) or makes exactly one VM.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from kakaocloud_fake_server import CLUSTER_ID
from kakaocloud_fixtures import keyring_json
from karpy_kakaocloud import ownership
from karpy_kakaocloud.credentials import parse_keyring
from karpy_kakaocloud.plugin import UnownedInstanceError
from test_kakaocloud_conformance import NODECLASS
from test_kakaocloud_idempotency import POST, crash_after_post, owned, stored_claim

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.garbagecollection import garbage_collect
from karpy_core.errors import CloudProviderError, KubeAPIError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock


class FlakyNodeClaimReads(InMemoryCluster):
    """The in-memory API server, except that ``GET NodeClaim`` answers :attr:`fail_status` while it is set."""

    fail_status: int | None = None

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind == "NodeClaim" and self.fail_status is not None:
            raise KubeAPIError.from_status("injected", status=self.fail_status,
                                           reason={429: "TooManyRequests"}.get(self.fail_status, "InternalError"))
        return await super().get(kind, name, namespace)


async def flaky_world(make_provider: Any) -> tuple[FlakyNodeClaimReads, Any, CloudProvider]:
    kube = FlakyNodeClaimReads()
    await kube.create("KCNodeClass", NODECLASS)
    plugin = make_provider(kube=kube)
    return kube, plugin, CloudProvider(plugin)


def claim_for_vm(vm: dict[str, Any], name: str) -> NodeClaim:
    """A NodeClaim view pointing at ``vm``, as garbage collection hands it to ``delete``."""
    return NodeClaim.model_validate({
        "metadata": {"name": name},
        "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": "default"}},
        "status": {"providerID": f"kakaocloud:///{vm['availability_zone']}/{vm['id']}"},
    })


def pid(claim: NodeClaim) -> str:
    """The NodeClaim's providerID, which a launched claim has."""
    assert claim.status.provider_id
    return claim.status.provider_id


def deleted(fake: Any) -> set[str]:
    return {c[1].rsplit("/", 1)[1] for c in fake.calls if c[0] == "DELETE"}


@pytest.mark.parametrize("status", [500, 429])
async def test_copied_pending_record_is_kept_when_its_nodeclaim_cannot_be_read(fake, make_provider, status):
    """Before: any error from GET NodeClaim read as "NodeClaim gone", so the copy of a launched
    VM's pending record (made inside the launch window) was listed as karpy's and collected."""
    kube, plugin, provider = await flaky_world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    mine = await crash_after_post(provider, claim, fake)
    record = mine["description"]
    launched = await provider.create(NodeClaim.model_validate(await kube.get("NodeClaim", "default-aaaaa")))
    assert pid(launched).endswith(mine["id"]) and fake.instances[mine["id"]]["description"] != record
    await kube.patch("NodeClaim", "default-aaaaa", {"status": {"providerID": launched.status.provider_id}}, status=True)
    copy = fake.add_instance(name="someone-elses-vm", description=record)  # inside the launch window

    kube.fail_status = status
    assert {c.status.provider_id for c in await provider.list()} == {launched.status.provider_id}
    assert plugin.reported[copy["id"]] == "unverifiable"
    with pytest.raises(CloudProviderError, match="could not be checked") as info:
        await provider.delete(claim_for_vm(copy, "default-aaaaa"))
    assert not isinstance(info.value, UnownedInstanceError)  # not "gone": the delete is retried, the VM kept
    await garbage_collect(kube, provider, VirtualClock(start=time.time() + 120))
    assert fake.instances[copy["id"]]["status"] == "active" and copy["id"] not in deleted(fake)
    assert plugin.unowned_instances.labels(reason="unverifiable", action="garbage-collect")._value.get() >= 1
    # once the NodeClaim can be read the copy is recognised for what it is, and still kept
    kube.fail_status = None
    assert {c.status.provider_id for c in await provider.list()} == {launched.status.provider_id}
    assert plugin.reported[copy["id"]] == "copied-record"
    assert fake.instances[copy["id"]]["status"] == "active" and deleted(fake) == set()


async def test_record_with_a_trailing_newline_does_not_verify(fake, make_provider):
    """Before: the record regex ended in ``$``, so record + "\\n" verified as pending but, as a
    different description, was not counted as a duplicate of the original."""
    ring = parse_keyring(keyring_json())
    record = ownership.describe_pending(ring, CLUSTER_ID, "default-aaaaa", ownership.new_nonce(time.time()))
    assert ownership.verify(record, ring, CLUSTER_ID, "x").ownership is ownership.Ownership.PENDING
    for padded in (record + "\n", record + " ", "\n" + record, record + "\r\n"):
        assert ownership.verify(padded, ring, CLUSTER_ID, "x").ownership is ownership.Ownership.UNSIGNED
    signed = ownership.describe_owned(ring, CLUSTER_ID, "inst-1", "default-aaaaa")
    assert ownership.verify(signed + "\n", ring, CLUSTER_ID, "inst-1").ownership is ownership.Ownership.UNSIGNED

    kube, plugin, provider = await flaky_world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    mine = await crash_after_post(provider, claim, fake)
    copy = fake.add_instance(name=mine["name"], description=mine["description"] + "\n")
    await kube.delete("NodeClaim", "default-aaaaa")  # the NodeClaim is gone: karpy's own pending VM is collected
    listed = {c.status.provider_id for c in await provider.list()}
    assert listed == {f"kakaocloud:///{mine['availability_zone']}/{mine['id']}"}
    assert plugin.reported[copy["id"]] == "unsigned"
    with pytest.raises(UnownedInstanceError, match="unsigned"):
        await provider.delete(claim_for_vm(copy, "default-aaaaa"))
    await garbage_collect(kube, provider, VirtualClock(start=time.time() + 120))
    assert deleted(fake) == {mine["id"]}
    assert fake.instances[copy["id"]]["status"] == "active"


async def test_copy_under_another_vm_name_is_a_duplicate_for_delete_gc_and_adoption(fake, make_provider):
    """Before: ``delete()`` counted a pending record's duplicates among VMs of the same name only,
    ``list_owned`` among all: a copy renamed was deleted by ``delete()``."""
    kube, plugin, provider = await flaky_world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    mine = await crash_after_post(provider, claim, fake)
    copy = fake.add_instance(name="web-frontend-1", description=mine["description"])
    # garbage collection (list): neither is karpy's to collect
    assert await provider.list() == []
    assert plugin.reported[copy["id"]] == plugin.reported[mine["id"]] == "duplicate-record"
    # delete: the same rule, whatever the name
    for vm in (copy, mine):
        with pytest.raises(UnownedInstanceError, match="duplicate-record"):
            await provider.delete(claim_for_vm(vm, "default-aaaaa"))
    # adoption: a retried create adopts neither and launches its own VM (a new nonce)
    launched = await provider.create(NodeClaim.model_validate(await kube.get("NodeClaim", "default-aaaaa")))
    assert not pid(launched).endswith((mine["id"], copy["id"]))
    await kube.delete("NodeClaim", "default-aaaaa")
    await garbage_collect(kube, provider, VirtualClock(start=time.time() + 120))
    assert deleted(fake) == {pid(launched).rsplit("/", 1)[1]}
    assert fake.instances[copy["id"]]["status"] == "active" and fake.instances[mine["id"]]["status"] == "active"


@pytest.mark.parametrize("times", [1, 10])
async def test_create_answered_429_after_the_vm_was_made_makes_one_vm(fake, make_provider, times):
    """Before: a 429 was read as "not acted on" and the POST repeated at once with a new nonce:
    one create made 11 VMs when 10 answers were 429s after the VM was made."""
    kube, _plugin, provider = await flaky_world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    fake.inject(429, method="POST", path=POST, times=times, create_anyway=True)
    launched = await provider.create(claim)
    posts = [c for c in fake.calls if c[0] == "POST" and c[1].endswith("/instances")]
    assert len(posts) == 1
    assert len(fake.instances) == 1 and len(owned(fake)) == 1
    assert pid(launched).endswith(next(iter(fake.instances)))


async def test_create_answered_429_before_acting_posts_again_after_a_lookup(fake, make_provider):
    """A 429 that made nothing: the lookups find no VM, then (only then) the POST is repeated."""
    kube, _plugin, provider = await flaky_world(make_provider)
    claim = await stored_claim(kube, "default-aaaaa")
    fake.inject(429, method="POST", path=POST, times=2)
    await provider.create(claim)
    order = [(m, p.rsplit("/api/v1/", 1)[-1], s) for m, p, s in fake.calls if p.startswith("/bcs/api/v1/instances")]
    posts = [i for i, c in enumerate(order) if c[0] == "POST"]
    assert [order[i][2] for i in posts] == [429, 429, 202]
    for a, b in itertools.pairwise(posts):  # a list between every two POSTs
        assert any(m == "GET" and p == "instances" for m, p, _ in order[a + 1:b])
    assert len(fake.instances) == 1 and len(owned(fake)) == 1
