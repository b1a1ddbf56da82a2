"""Fixtures for the KakaoCloud provider: the fake OpenAPI on 127.0.0.1 and providers wired to it
with millisecond delays (``conftest.py`` here hands the fixtures to pytest; the root tests import
the helpers, e.g. ``tests/faultinjection.py``)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from kakaocloud_fake_server import FakeKakaoCloud
from karpy_kakaocloud.credentials import Credentials, Secret, parse_keyring
from karpy_kakaocloud.plugin import KakaoCloudProvider, create_plugin

DATA = Path(__file__).resolve().parent / "data"
SEEDS = Path(__file__).resolve().parents[3] / "tests" / "data" / "seeds"
"""The seed manifests the root tests share (``tests/data/seeds``)."""
CA_PEM = (DATA / "ca.crt").read_text()
CA_HASH = "sha256:5845568dc05a04a60a521960b448985d32beaa383a85732dc1ce45dbcfaf53f6"
KEY1 = bytes(range(32))
KEY2 = bytes(range(100, 132))
FAST = {
    "backoff_base": 0.0005, "backoff_max": 0.002, "build_poll_interval": 0.0, "delete_poll_interval": 0.0,
    "page_size": 3, "max_attempts": 6, "build_timeout": 5.0, "delete_timeout": 5.0, "request_timeout": 5.0,
}


def keyring_json(active: str = "k1", keys: dict[str, bytes] | None = None) -> str:
    keys = keys if keys is not None else {"k1": KEY1}
    return json.dumps({"activeKeyID": active, "keys": [{"id": k, "key": base64.b64encode(v).decode()} for k, v in keys.items()]})


@pytest.fixture
async def fake() -> AsyncIterator[FakeKakaoCloud]:
    server = FakeKakaoCloud()
    await server.start()
    yield server
    await server.close()


@pytest.fixture
async def make_provider(fake: FakeKakaoCloud) -> AsyncIterator[Callable[..., KakaoCloudProvider]]:
    made: list[KakaoCloudProvider] = []

    def build(*, with_credentials: bool = True, with_keyring: bool = True, **overrides: Any) -> KakaoCloudProvider:
        options: dict[str, Any] = {
            "cluster_name": "demo", "endpoints": fake.endpoints(), "cluster_ca_pem": CA_PEM, **FAST,
        }
        if with_credentials:
            options["credentials"] = Credentials(fake.credential_id, Secret(fake.credential_secret))
        if with_keyring:
            options["keyring"] = parse_keyring(keyring_json())
        options.update(overrides)
        p = create_plugin(options)
        made.append(p)
        return p

    yield build
    for p in made:
        await p.aclose()


def secret_obj(namespace: str, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": name, "namespace": namespace},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }
