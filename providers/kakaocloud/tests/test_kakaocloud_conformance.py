"""karpy's provider conformance kit run against the KakaoCloud provider and the fake OpenAPI."""

from __future__ import annotations

from kakaocloud_fake_server import FakeKakaoCloud
from kakaocloud_fixtures import CA_PEM, FAST, keyring_json
from karpy_kakaocloud.credentials import Credentials, Secret, parse_keyring
from karpy_kakaocloud.plugin import create_plugin

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.testing.conformance import ProviderConformance

NODECLASS = {
    "apiVersion": "karpenter.kakaocloud.com/v1alpha1", "kind": "KCNodeClass", "metadata": {"name": "default"},
    "spec": {"subnetSelectorTerms": [{"id": "subnet-a"}, {"id": "subnet-b"}], "securityGroupSelectorTerms": [{"id": "sg-worker"}],
             "keyName": "karpy-key", "rootVolume": {"sizeGiB": 30, "deleteOnTermination": True},
             "bootstrap": {"mode": "Kubeadm", "kubernetesVersion": "1.34"}},
}


class TestKakaoCloudConformance(ProviderConformance):
    async def make_provider(self) -> CloudProvider:
        self.fake = FakeKakaoCloud()
        await self.fake.start()
        kube = InMemoryCluster()
        await kube.create("KCNodeClass", NODECLASS)
        plugin = create_plugin({
            "cluster_name": "demo", "kube": kube, "endpoints": self.fake.endpoints(), "cluster_ca_pem": CA_PEM,
            "credentials": Credentials(self.fake.credential_id, Secret(self.fake.credential_secret)),
            "keyring": parse_keyring(keyring_json()), **FAST,
        })
        return CloudProvider(plugin)

    async def close_provider(self, provider: CloudProvider) -> None:
        await provider.close()
        await self.fake.close()

    def node_class_ref(self) -> dict[str, str]:
        return {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": "default"}
