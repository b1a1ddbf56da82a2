"""Credentials and keyring: sources, validation, and secrets kept out of logs, reprs, errors."""

from __future__ import annotations

import base64
import json
import logging

import pytest
from kakaocloud_fixtures import KEY1, KEY2, keyring_json, secret_obj
from karpy_kakaocloud.credentials import (
    credentials_from_env,
    credentials_from_secret,
    keyring_from_file,
    keyring_from_secret,
    parse_keyring,
)

from karpy_core.errors import ConfigurationError, CreateError
from karpy_core.kube.memory import InMemoryCluster


def b64(n: int, fill: int = 7) -> str:
    return base64.b64encode(bytes([fill]) * n).decode()


@pytest.mark.parametrize(
    ("doc", "fragment"),
    [
        ({"activeKeyID": "toolong8", "keys": [{"id": "toolong8", "key": b64(32)}]}, "activeKeyID must be 1..7 characters"),
        ({"activeKeyID": "k9", "keys": [{"id": "k1", "key": b64(32)}]}, "is not one of the key ids"),
        ({"activeKeyID": "k1", "keys": [{"id": "k1", "key": b64(31)}]}, "exactly 32 bytes, got 31"),
        ({"activeKeyID": "k1", "keys": [{"id": "k1", "key": b64(33)}]}, "exactly 32 bytes, got 33"),
        ({"activeKeyID": "k1", "keys": [{"id": "k1", "key": b64(32)}, {"id": "k1", "key": b64(32, 9)}]}, "repeated"),
        ({"activeKeyID": "k1", "keys": [{"id": "k1", "key": "not base64!!"}]}, "not valid base64"),
        ({"activeKeyID": "k1", "keys": []}, "non-empty list"),
        ({"keys": [{"id": "k1", "key": b64(32)}]}, "activeKeyID must be"),
        ({"activeKeyID": "k1", "keys": [{"id": "k 1", "key": b64(32)}]}, "keys[0].id"),
    ],
)
def test_keyring_rejected(doc, fragment):
    with pytest.raises(ConfigurationError) as info:
        parse_keyring(json.dumps(doc), where="keyring.json")
    assert fragment in str(info.value)
    for k in doc.get("keys", []):
        assert k["key"] not in str(info.value)


@pytest.mark.parametrize("where", ["entry", "active", "both"])
def test_keyring_with_id_and_key_swapped_names_the_field_never_the_key(where, tmp_path):
    """Issue 34: a keyring file with key id and key swapped printed the key in the error."""
    key = base64.b64encode(KEY2).decode()
    entry = {"id": key, "key": "k1"} if where in ("entry", "both") else {"id": "k1", "key": key}
    doc = {"activeKeyID": key if where in ("active", "both") else "k1", "keys": [entry]}
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ConfigurationError) as info:
        keyring_from_file(path)
    text = str(info.value)
    assert ("keys[0].id" if where == "entry" else "activeKeyID") in text and str(path) in text
    for form in (key, key.rstrip("="), KEY2.hex(), base64.urlsafe_b64encode(KEY2).decode()):
        assert form not in text
    # nor any 8-character piece of it (a prefix quoted in a shortened message)
    assert not any(key[i:i + 8] in text for i in range(len(key) - 8))


def test_keyring_not_json():
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        parse_keyring("{nope")


def test_keyring_ok_and_repr_hides_keys(tmp_path):
    path = tmp_path / "keyring.json"
    path.write_text(keyring_json("k2", {"k1": KEY1, "k2": KEY2}))
    ring = keyring_from_file(path)
    k1 = ring.get("k1")
    assert ring.active.id == "k2" and k1 is not None and k1.key == KEY1
    assert KEY1.hex() not in repr(ring) and base64.b64encode(KEY1).decode() not in repr(ring.keys)
    with pytest.raises(ConfigurationError, match="cannot read"):
        keyring_from_file(tmp_path / "missing.json")


async def test_secrets_through_the_kube_port():
    kube = InMemoryCluster()
    await kube.create("Secret", secret_obj("ns", "kakaocloud-credentials", {
        "applicationCredentialId": "id-1234567", "applicationCredentialSecret": "very-secret", "region": "kr-central-2"}))
    await kube.create("Secret", secret_obj("ns", "karpenter-sigkey", {"keyring.json": keyring_json()}))
    creds = await credentials_from_secret(kube, namespace="ns")
    assert creds.credential_id == "id-1234567" and creds.secret.reveal() == "very-secret"
    assert "very-secret" not in repr(creds) and "very-secret" not in str(creds.secret)
    ring = await keyring_from_secret(kube, namespace="ns")
    assert ring.active_key_id == "k1"
    with pytest.raises(ConfigurationError, match="cannot read Secret ns/absent"):
        await credentials_from_secret(kube, namespace="ns", name="absent")
    await kube.create("Secret", secret_obj("ns", "bad-creds", {"applicationCredentialId": "x"}))
    with pytest.raises(ConfigurationError, match="applicationCredentialSecret"):
        await credentials_from_secret(kube, namespace="ns", name="bad-creds")
    await kube.create("Secret", secret_obj("ns", "wrong-key", {"keyring": keyring_json()}))
    with pytest.raises(ConfigurationError, match=r"must be named keyring\.json"):
        await keyring_from_secret(kube, namespace="ns", name="wrong-key")
    # read only: nothing was written besides what the test created
    assert len(kube.objects("Secret")) == 4


def test_credentials_from_env():
    env = {"KAKAOCLOUD_APPLICATION_CREDENTIAL_ID": "abc", "KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET": "shh",
           "KAKAOCLOUD_REGION": "kr-central-2", "KAKAOCLOUD_PROJECT_ID": "p1"}
    creds = credentials_from_env(env)
    assert creds is not None and creds.project_id == "p1" and creds.secret.reveal() == "shh"
    assert credentials_from_env({}) is None
    with pytest.raises(ConfigurationError):
        credentials_from_env({"KAKAOCLOUD_APPLICATION_CREDENTIAL_ID": "abc"})


async def test_secrets_never_logged_or_shown(fake, make_provider, caplog):
    """A full launch, a failed auth and an ownership refusal at DEBUG: no secret string anywhere."""
    from test_kakaocloud_seed004 import seed_objects

    from karpy_core.cloudprovider.provider import CloudProvider
    from karpy_core.sim.simulator import Simulator

    caplog.set_level(logging.DEBUG)
    plugin = make_provider()
    sim = Simulator(CloudProvider(plugin))
    plugin.bind_kube(sim.cluster)
    sim.apply(seed_objects())
    await sim.run(max_seconds=3600)
    assert fake.instances
    tokens = list(fake.tokens)
    boot_secrets = [s["stringData"]["token-secret"] for s in sim.cluster.objects("Secret")
                    if s.get("type") == "bootstrap.kubernetes.io/token"]
    assert boot_secrets
    fake.add_instance(name="karpy-abcdef-intruder", description="karpy1:000000:k1:x:" + "A" * 32)
    await sim.provider.list()

    bad = make_provider(credentials=None, with_credentials=False)
    from karpy_kakaocloud.credentials import Credentials, Secret

    bad._credentials = Credentials(fake.credential_id, Secret("WRONG-secret-value-42"))
    bad.bind_kube(sim.cluster)
    with pytest.raises(CreateError) as info:
        from karpy_core.apis.nodeclaim import NodeClaim

        await bad.karpy_create(NodeClaim.model_validate(sim.cluster.objects("NodeClaim")[0]))

    haystack = "\n".join(
        [caplog.text, repr(plugin), repr(plugin.client), repr(bad), str(info.value), repr(info.value),
         repr(plugin.keyring), str(sim.cluster.objects("Event"))]
    )
    for secret in [fake.credential_secret, "WRONG-secret-value-42", base64.b64encode(KEY1).decode(), KEY1.hex(), *tokens, *boot_secrets]:
        assert secret not in haystack
    assert info.value.condition_reason == "AuthenticationFailed"
