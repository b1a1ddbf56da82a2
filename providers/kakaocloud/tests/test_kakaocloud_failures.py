"""Wrong credentials, expired tokens, 429 storms and 5xx on create: a clear condition or a retry,
and never a leaked VM."""

from __future__ import annotations

import pytest
from kakaocloud_fake_server import CLUSTER_ID
from kakaocloud_fixtures import keyring_json
from karpy_kakaocloud import ownership
from karpy_kakaocloud.credentials import Credentials, Secret, parse_keyring
from test_kakaocloud_conformance import NODECLASS
from test_kakaocloud_ownership import REF

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import CreateError, NodeClassNotReadyError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing.conformance import nodeclaim_for, nodepool_for


async def world(make_provider, **kw):
    kube = InMemoryCluster()
    await kube.create("KCNodeClass", NODECLASS)
    plugin = make_provider(kube=kube, **kw)
    return kube, plugin, CloudProvider(plugin)


def owned(fake) -> list[dict]:
    ring = parse_keyring(keyring_json())
    return [i for i in fake.instances.values() if ownership.verify(i["description"], ring, CLUSTER_ID, i["id"]).owned]


async def test_wrong_credentials_give_clear_conditions(fake, make_provider):
    kube, _plugin, provider = await world(make_provider, cluster_uid=CLUSTER_ID,
                                         credentials=Credentials(fake.credential_id, Secret("nope-nope")))
    assert await provider.get_instance_types(nodepool_for(REF)) == []
    conds = {c["type"]: c for c in kube.peek("KCNodeClass", "default")["status"]["conditions"]}
    assert conds["Ready"]["status"] == "False" and conds["Ready"]["reason"] == "AuthenticationFailed"
    assert conds["SubnetsReady"]["status"] == "Unknown"
    with pytest.raises(NodeClassNotReadyError) as info:
        await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert info.value.code == "AuthenticationFailed"
    assert fake.instances == {}


async def test_wrong_credentials_without_cluster_uid(fake, make_provider):
    _, _, provider = await world(make_provider, credentials=Credentials(fake.credential_id, Secret("nope")))
    with pytest.raises(CreateError) as info:
        await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert info.value.condition_reason == "AuthenticationFailed" and info.value.code == "401"


async def test_expired_token_mid_launch(fake, make_provider):
    _, _plugin, provider = await world(make_provider)
    await provider.get_instance_types(nodepool_for(REF))
    fake.expire_tokens()
    launched = await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert launched.status.provider_id and fake.tokens_issued == 2
    assert len(owned(fake)) == 1


async def test_429_storm_on_create_launches_once(fake, make_provider):
    _, _, provider = await world(make_provider)
    fake.inject(429, path=r"/bcs/api/v1/instances", times=4)
    launched = await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert launched.status.provider_id
    assert len(fake.instances) == 1 and len(owned(fake)) == 1


async def test_5xx_after_the_vm_was_created_adopts_it(fake, make_provider):
    _, _, provider = await world(make_provider)
    fake.inject(500, method="POST", path=r"/bcs/api/v1/instances$", create_anyway=True)
    launched = await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert len(fake.instances) == 1 and len(owned(fake)) == 1
    assert launched.status.provider_id.endswith(next(iter(fake.instances)))


async def test_5xx_on_create_retried_then_clear_error(fake, make_provider):
    _, _, provider = await world(make_provider)
    fake.inject(503, method="POST", path=r"/bcs/api/v1/instances$", times=2)
    assert (await provider.create(nodeclaim_for("default-aaaaa", REF))).status.provider_id
    fake.inject(500, method="POST", path=r"/bcs/api/v1/instances$", times=100, code="InternalServerError")
    with pytest.raises(CreateError) as info:
        await provider.create(nodeclaim_for("default-bbbbb", REF))
    assert info.value.condition_reason == "APIUnavailable" and info.value.code == "InternalServerError"
    assert len(fake.instances) == 1


async def test_retried_create_is_idempotent(fake, make_provider):
    _, _, provider = await world(make_provider)
    a = await provider.create(nodeclaim_for("default-aaaaa", REF))
    b = await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert a.status.provider_id == b.status.provider_id and len(fake.instances) == 1


async def test_signing_failure_discards_the_vm(fake, make_provider):
    _, _, provider = await world(make_provider)
    fake.inject(500, method="PUT", path=r"/bcs/api/v1/instances/", times=100)
    with pytest.raises(CreateError) as info:
        await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert info.value.condition_reason == "OwnershipRecordFailed"
    assert all(i["status"] == "deleting" for i in fake.instances.values())


async def test_build_error_discards_the_vm(fake, make_provider):
    _, _, provider = await world(make_provider)
    fake.fail_builds = 1
    with pytest.raises(CreateError) as info:
        await provider.create(nodeclaim_for("default-aaaaa", REF))
    assert info.value.condition_reason == "InstanceFailed"
    assert all(i["status"] == "deleting" for i in fake.instances.values())


async def test_nodepool_name_too_long(fake, make_provider):
    _, _, provider = await world(make_provider)
    long_name = "p" * 39
    assert await provider.get_instance_types(nodepool_for(REF, name=long_name)) == []
    with pytest.raises(CreateError) as info:
        await provider.create(nodeclaim_for(f"{long_name}-aaaaa", REF, nodepool=long_name))
    assert info.value.condition_reason == "NodePoolNameTooLong"
    assert await provider.get_instance_types(nodepool_for(REF, name="p" * 38))


async def test_no_offering_fits_is_insufficient_capacity(fake, make_provider):
    from karpy_core.errors import InsufficientCapacityError

    _, _, provider = await world(make_provider)
    with pytest.raises(InsufficientCapacityError):
        await provider.create(nodeclaim_for("default-aaaaa", REF, requests={"cpu": "500", "memory": "1Gi"}))
    assert fake.instances == {}
