"""The OpenAPI client against the fake: tokens, retries, errors, pagination."""

from __future__ import annotations

from typing import Any

import pytest
from kakaocloud_fixtures import FAST
from karpy_kakaocloud.client import (
    KakaoCloudAuthError,
    KakaoCloudClient,
    KakaoCloudInvalidError,
    KakaoCloudNotFoundError,
    KakaoCloudRetryableError,
)
from karpy_kakaocloud.credentials import Credentials, Secret
from karpy_kakaocloud.settings import KakaoCloudSettings

from karpy_core.errors import CloudProviderError


@pytest.fixture
async def client(fake):
    fields: dict[str, Any] = {k: v for k, v in FAST.items() if k in KakaoCloudSettings.__dataclass_fields__}
    c = KakaoCloudClient(Credentials(fake.credential_id, Secret(fake.credential_secret)),
                         settings=KakaoCloudSettings(endpoints=fake.endpoints(), **fields))
    yield c
    await c.aclose()


async def test_token_is_cached_and_sent(client, fake):
    await client.list_versions()
    await client.get_cluster("demo")
    assert fake.tokens_issued == 1
    assert client.project_id == "proj-1"


async def test_token_refreshed_before_expiry(client, fake):
    fake.token_ttl = 100.0  # inside the 300 s refresh margin: every call re-issues
    await client.list_versions()
    await client.list_versions()
    assert fake.tokens_issued == 2


async def test_expired_token_reissued_once_on_401(client, fake):
    await client.list_versions()
    fake.expire_tokens()
    assert await client.get_cluster("demo")
    assert fake.tokens_issued == 2


async def test_persistent_401_is_an_auth_error(client, fake):
    fake.inject(401, path="/ke/api/v1/versions", times=5)
    with pytest.raises(KakaoCloudAuthError) as info:
        await client.list_versions()
    assert info.value.status == 401 and info.value.code == "Unauthorized"
    assert fake.tokens_issued == 2  # re-issued exactly once


async def test_wrong_credentials(fake):
    c = KakaoCloudClient(Credentials(fake.credential_id, Secret("wrong-secret-xyz")),
                         settings=KakaoCloudSettings(endpoints=fake.endpoints(), backoff_base=0.0005))
    try:
        with pytest.raises(KakaoCloudAuthError) as info:
            await c.list_versions()
    finally:
        await c.aclose()
    err = info.value
    assert isinstance(err, CloudProviderError) and err.code == "401"
    assert info.value.service == "iam"  # a KakaoCloudAPIError attribute
    assert "wrong-secret-xyz" not in str(err) and "wrong-secret-xyz" not in repr(err)


async def test_429_storm_and_5xx_are_retried(client, fake):
    fake.inject(429, path="/bcs/api/v1/flavors", times=3)
    fake.inject(503, path="/bcs/api/v1/flavors", times=2)
    flavors = await client.list_flavors()
    assert len(flavors) == 9
    statuses = [s for m, p, s in fake.calls if p == "/bcs/api/v1/flavors"]
    assert statuses[:5] == [429, 429, 429, 503, 503]


async def test_retries_run_out(client, fake):
    fake.inject(500, path="/ke/api/v1/versions", times=100, code="InternalError")
    with pytest.raises(KakaoCloudRetryableError) as info:
        await client.list_versions()
    assert info.value.status == 500 and info.value.code == "InternalError"
    assert len([1 for _, p, _ in fake.calls if p == "/ke/api/v1/versions"]) == FAST["max_attempts"]


async def test_create_not_retried_on_5xx_but_on_429(client, fake):
    fake.inject(500, method="POST", path="/bcs/api/v1/instances$")
    with pytest.raises(KakaoCloudRetryableError):
        await client.create_instance({"name": "x"})
    assert len([1 for m, p, _ in fake.calls if m == "POST" and p.endswith("/instances")]) == 1


async def test_error_envelope_keeps_code_and_message(client, fake):
    with pytest.raises(KakaoCloudNotFoundError) as info:
        await client.get_instance("nope")
    assert info.value.code == "NotFound" and "nope" in info.value.api_message
    with pytest.raises(KakaoCloudInvalidError) as info2:
        await client.create_instance({"name": "a"})
    assert info2.value.status == 400 and "invalid name" in info2.value.api_message


async def test_pagination_collects_every_page(client, fake):
    for i in range(7):
        fake.add_instance(name=f"vm-{i:02d}")
    items = await client.list_instances()
    assert len(items) == 7
    pages = [p for m, p, s in fake.calls if p == "/bcs/api/v1/instances"]
    assert len(pages) == 3  # page_size 3


async def test_other_services(client, fake):
    assert [s["id"] for s in await client.list_subnets()] == ["subnet-a", "subnet-b", "subnet-x"]
    assert (await client.get_security_group("sg-worker"))["name"] == "kke-worker-sg"
    assert [g["id"] for g in await client.list_security_groups()] == ["sg-worker", "sg-extra"]
    assert (await client.get_keypair("karpy-key"))["name"] == "karpy-key"
    assert [k["name"] for k in await client.list_keypairs()] == ["karpy-key"]
    assert (await client.list_volume_types())[0]["id"] == "vt-ssd"
    assert {i["k8s_version"] for i in await client.list_worker_images(k8s_version="1.34")} == {"1.34.1"}
    flavor = (await client.list_flavors())[0]
    assert (await client.get_flavor(flavor["id"]))["name"] == flavor["name"]
    inst = fake.add_instance(name="plain-vm")
    await client.update_instance_description(inst["id"], "hello")
    assert fake.instances[inst["id"]]["description"] == "hello"
    assert await client.delete_instance(inst["id"]) is True
    assert repr(client) == "KakaoCloudClient(region='kr-central-2')"
