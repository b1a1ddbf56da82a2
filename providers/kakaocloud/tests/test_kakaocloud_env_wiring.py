"""What the chart-run controller needs from its environment on KakaoCloud: emulator endpoints
from ``KAKAOCLOUD_ENDPOINTS`` (loopback only) and the cluster CA from the kube client's TLS
configuration when the service-account ``ca.crt`` is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from kakaocloud_fixtures import CA_HASH, CA_PEM
from karpy_kakaocloud.plugin import DEFAULT_CA_FILE, KakaoCloudProvider, create_plugin
from karpy_kakaocloud.settings import ENV_ENDPOINTS, endpoints_from_env

from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.errors import ConfigurationError, CreateError
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.transport import Access, Transport


def test_endpoints_from_env() -> None:
    env = {ENV_ENDPOINTS: "iam=http://127.0.0.1:8080/iam, bcs=http://localhost:8080/bcs,kubernetes_engine=http://[::1]:9/ke"}
    assert endpoints_from_env(env) == {"iam": "http://127.0.0.1:8080/iam", "bcs": "http://localhost:8080/bcs",
                                       "kubernetes_engine": "http://[::1]:9/ke"}
    assert endpoints_from_env({}) == {}


@pytest.mark.parametrize(("text", "message"), [
    ("iam=https://iam.kakaocloud.com", "loopback"),
    ("iam=http://10.0.0.1/iam", "loopback"),
    ("compute=http://127.0.0.1/x", "SERVICE=URL"),
    ("http://127.0.0.1/iam", "SERVICE=URL"),
    ("iam=ftp://127.0.0.1/iam", "http(s) URL"),
])
def test_endpoints_from_env_refuses_anything_but_loopback(text: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=ENV_ENDPOINTS) as err:
        endpoints_from_env({ENV_ENDPOINTS: text})
    assert message in str(err.value)


def test_create_plugin_reads_the_endpoints_when_options_give_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ENDPOINTS, "bcs=http://127.0.0.1:1/bcs")
    assert create_plugin({"cluster_name": "demo"}).settings.endpoint("bcs", "kr-central-2") == "http://127.0.0.1:1/bcs"
    given = create_plugin({"cluster_name": "demo", "endpoints": {"bcs": "http://127.0.0.1:2/bcs"}})
    assert given.settings.endpoint("bcs", "kr-central-2") == "http://127.0.0.1:2/bcs"
    monkeypatch.setenv(ENV_ENDPOINTS, "bcs=https://bcs.example.com")
    with pytest.raises(ConfigurationError):
        create_plugin({"cluster_name": "demo"})


async def test_cluster_ca_falls_back_to_the_kube_clients(tmp_path: Path) -> None:
    """The CA karpy's kube client trusts reaches the plugin through ProviderContext.cluster_ca_pem
    (AsyncKubeClient.cluster_ca_pem: inline data or the kubeconfig's file)."""
    assert not os.path.exists(DEFAULT_CA_FILE)  # as on this test machine, outside a pod
    ca = tmp_path / "ca.crt"
    ca.write_text(CA_PEM)
    for access in (Access(server="https://127.0.0.1:6443", ca_data=CA_PEM), Access(server="https://127.0.0.1:6443", ca_file=str(ca))):
        pem = await AsyncKubeClient(Transport(access)).cluster_ca_pem()
        assert pem == CA_PEM
        plugin = create_plugin({"cluster_name": "demo"})
        plugin.karpy_prepare(ProviderContext(cluster_ca_pem=pem))
        assert await plugin._ca_hash() == CA_HASH
    assert await AsyncKubeClient(Transport(Access(server="https://127.0.0.1:6443", ca_file=str(tmp_path / "gone")))).cluster_ca_pem() is None
    # An explicitly configured file that is missing stays an error (no silent fallback).
    plugin = create_plugin({"cluster_name": "demo", "cluster_ca_file": str(tmp_path / "nope")})
    plugin.karpy_prepare(ProviderContext(cluster_ca_pem=CA_PEM))
    with pytest.raises(CreateError, match="cannot read the cluster CA"):
        await plugin._ca_hash()
    # No kube client CA either: the same error.
    plugin = create_plugin({"cluster_name": "demo"})
    plugin.karpy_prepare(ProviderContext())
    with pytest.raises(CreateError, match="cannot read the cluster CA"):
        await plugin._ca_hash()


async def test_the_operator_hands_the_kube_clients_ca_to_the_plugin() -> None:
    """The controller's path: the CLI reads AsyncKubeClient.cluster_ca_pem and gives it to Operator,
    which prepares the provider with it in ProviderContext.cluster_ca_pem."""
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.operator import Operator

    cloud = load_provider("kakaocloud", {"cluster_name": "demo"})
    Operator(kube=InMemoryCluster(), provider=cloud, cluster_ca_pem=CA_PEM)
    assert isinstance(cloud.plugin, KakaoCloudProvider)
    assert await cloud.plugin._ca_hash() == CA_HASH
    without = load_provider("kakaocloud", {"cluster_name": "demo"})
    Operator(kube=InMemoryCluster(), provider=without)
    assert isinstance(without.plugin, KakaoCloudProvider)
    with pytest.raises(CreateError, match="cannot read the cluster CA"):
        await without.plugin._ca_hash()
