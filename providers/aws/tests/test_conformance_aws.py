"""The AWS provider, against moto, passes the provider conformance kit."""

from __future__ import annotations

from typing import Any

import pytest
from aws_moto import make_plugin, seed
from karpy_aws.apis import EC2NodeClass

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.testing import ProviderConformance

NODECLASS = EC2NodeClass.model_validate({
    "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default", "uid": "uid-default"},
    "spec": {"role": "KarpenterNodeRole-eks", "amiSelectorTerms": [{"alias": "al2023@latest"}],
             "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "eks"}}],
             "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "eks"}}]},
})


class TestAWSConformance(ProviderConformance):
    @pytest.fixture(autouse=True)
    def _moto(self, moto_url: str, instance_type_data: Any) -> None:
        self.url = moto_url
        self.data = instance_type_data

    async def make_provider(self) -> CloudProvider:
        await seed(self.url)
        return CloudProvider(make_plugin(self.url, self.data, nodeclasses={"default": NODECLASS}))

    def nodeclaim_requirements(self) -> list[dict[str, Any]]:
        return [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "t3"]}]

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return "aws:///ap-northeast-2a/i-0123456789abcdef0"
