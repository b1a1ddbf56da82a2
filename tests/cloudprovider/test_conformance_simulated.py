"""The simulated provider passes the provider conformance kit."""

from __future__ import annotations

from karpy_core.cloudprovider.provider import CloudProvider, load_provider
from karpy_core.testing import ProviderConformance


class TestSimulatedConformance(ProviderConformance):
    async def make_provider(self) -> CloudProvider:
        return load_provider("simulated", {"region": "us-east-1"})

    def unknown_provider_id(self, provider: CloudProvider) -> str:
        return "simulated:///us-east-1a/i-ffffffff"
