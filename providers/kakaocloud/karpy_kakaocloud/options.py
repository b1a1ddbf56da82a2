"""The KakaoCloud provider's options (``create_plugin(options)``), one pydantic model."""

from __future__ import annotations

import os
from dataclasses import fields
from typing import Any, ClassVar

from karpy_core.cloudprovider.options import ProviderOptions
from karpy_kakaocloud.pricing import PriceTable, load_price_table
from karpy_kakaocloud.settings import KakaoCloudSettings

__all__ = ["KakaoCloudOptions"]


class KakaoCloudOptions(ProviderOptions):
    """Options of the ``kakaocloud`` provider; every :class:`KakaoCloudSettings` field is
    accepted too (applied over ``settings``).

    Attributes:
        cluster_name: the Kubernetes Engine cluster (default: env ``CLUSTER_NAME``).
        cluster_uid: overrides the identity signed into ownership records.
        kube: a KubeClient (else call ``bind_kube``).
        credentials / keyring / keyring_file / namespace / credentials_secret / keyring_secret:
            where credentials and the signing keyring come from.
        settings: a :class:`KakaoCloudSettings` (default one).
        price_table / price_table_file: a :class:`PriceTable` or a CSV/YAML file.
        cluster_ca_pem / cluster_ca_file: the cluster CA.
        max_pods: pods per node.
        sleep / clock / transport: test seams (``asyncio.sleep``, ``time.time``, an httpx transport).
        region / project_id: accepted for the chart's values and ignored (credentials carry them).
    """

    provider: ClassVar[str] = "kakaocloud"
    passthrough: ClassVar[frozenset[str]] = frozenset(f.name for f in fields(KakaoCloudSettings))
    objects: ClassVar[frozenset[str]] = frozenset({"kube", "settings", "price_table", "sleep", "clock", "transport"})

    cluster_name: str | None = None
    kube: Any = None
    credentials: Any = None
    keyring: Any = None
    keyring_file: str | None = None
    namespace: str = "karpenter-kakaocloud"
    credentials_secret: str = "kakaocloud-credentials"
    keyring_secret: str = "karpenter-sigkey"
    settings: Any = None
    price_table: Any = None
    price_table_file: str | None = None
    cluster_ca_pem: str | None = None
    cluster_ca_file: str | None = None
    cluster_uid: str | None = None
    max_pods: int = 110
    sleep: Any = None
    clock: Any = None
    transport: Any = None
    region: Any = None
    project_id: Any = None

    def resolved_cluster_name(self) -> str:
        """``cluster_name``, else env ``CLUSTER_NAME``, else ``""``."""
        return self.cluster_name or os.environ.get("CLUSTER_NAME", "")

    def resolved_settings(self) -> KakaoCloudSettings:
        """``settings`` (or the defaults) with the individually given settings fields applied."""
        base: KakaoCloudSettings = self.settings or KakaoCloudSettings()
        overrides = self.extra()
        if not overrides:
            return base
        for name, value in overrides.items():
            setattr(base, name, value)
        return base

    def resolved_price_table(self) -> PriceTable | None:
        """``price_table_file`` loaded when given, else ``price_table`` (None: the default rule).

        Raises:
            ConfigurationError: the file cannot be read or parsed.
        """
        if self.price_table_file:
            return load_price_table(self.price_table_file)
        table: PriceTable | None = self.price_table
        return table


