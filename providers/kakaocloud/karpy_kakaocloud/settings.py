"""Settings of the KakaoCloud provider: endpoints, retries, polling. Every delay is configurable so
tests run in milliseconds; the defaults follow the reference (``reference/kakaocloud-api.md``)."""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlparse

from karpy_core.errors import ConfigurationError

__all__ = ["DEFAULT_ENDPOINTS", "ENV_ENDPOINTS", "SERVICES", "KakaoCloudSettings", "endpoints_from_env"]

SERVICES = ("iam", "bcs", "vpc", "network", "image", "volume", "kubernetes_engine")

DEFAULT_ENDPOINTS: dict[str, str] = {
    "iam": "https://iam.kakaocloud.com",
    "bcs": "https://bcs.{region}.kakaocloud.com",
    "vpc": "https://vpc.{region}.kakaocloud.com",
    "network": "https://network.{region}.kakaocloud.com",
    "image": "https://image.{region}.kakaocloud.com",
    "volume": "https://volume.{region}.kakaocloud.com",
    "kubernetes_engine": "https://kubernetes-engine.{region}.kakaocloud.com",
}
"""Base URLs per service (reference §0, [SDK] defaults); ``{region}`` is filled in. Paths
(``/identity/v3/...``, ``/api/v1/...``) are appended to these."""

ENV_ENDPOINTS = "KAKAOCLOUD_ENDPOINTS"
"""Environment variable with service URL overrides for a local emulator, ``service=url,...``
(e.g. ``iam=http://127.0.0.1:8080/iam,bcs=http://127.0.0.1:8080/bcs``); read when the options
give no ``endpoints``."""


def endpoints_from_env(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Service URL overrides from :data:`ENV_ENDPOINTS` (empty when unset).

    Only loopback URLs (``localhost``, 127.0.0.0/8, ::1) are accepted: the override exists for
    emulators, and a typo must not send the application credential to a stranger (the AWS
    provider's ``endpoint_url`` has the same rule).

    Raises:
        ConfigurationError: an item without ``=``, an unknown service, or a non-loopback URL.
    """
    text = (os.environ if env is None else env).get(ENV_ENDPOINTS, "")
    out: dict[str, str] = {}
    for item in (i.strip() for i in text.split(",")):
        if not item:
            continue
        service, sep, url = item.partition("=")
        service, url = service.strip(), url.strip()
        if not sep or service not in SERVICES:
            raise ConfigurationError(f"{ENV_ENDPOINTS}: {item!r} is not SERVICE=URL with SERVICE one of {', '.join(SERVICES)}")
        host = urlparse(url).hostname or ""
        loopback = host == "localhost"
        if not loopback:
            with contextlib.suppress(ValueError):
                loopback = ipaddress.ip_address(host).is_loopback
        if not loopback or urlparse(url).scheme not in ("http", "https"):
            raise ConfigurationError(f"{ENV_ENDPOINTS}: {service} must be an http(s) URL on a loopback address (a local emulator), "
                                     f"got host {host!r}")
        out[service] = url
    return out


@dataclass
class KakaoCloudSettings:
    """Tunables of the OpenAPI client and the provider.

    Attributes:
        endpoints: service -> base URL overrides (keys from :data:`SERVICES`); unset services use
            :data:`DEFAULT_ENDPOINTS`.
        request_timeout: seconds per HTTP request (connect + read). Default 30.
        max_attempts: attempts per call for 429/5xx/transport errors (tenacity). Default 8.
        backoff_base: first retry delay, seconds, doubled per attempt. Default 1.0 (TF retries 429 every 1 s).
        backoff_max: longest retry delay, seconds. Default 30.
        page_size: ``limit`` for paginated lists (TF uses 1000). Default 1000.
        token_refresh_margin: re-issue the IAM token this many seconds before ``expires_at``
            (TF: 5 minutes). Default 300.
        build_poll_interval: seconds between GETs while a new VM is building (TF: 3). Default 3.
        build_timeout: seconds to wait for ``active``/``error`` after create. Default 600.
        delete_poll_interval: seconds between GETs while a VM is deleting (TF: 2). Default 2.
        delete_timeout: seconds one ``delete`` call waits for 404 before returning (karpy calls
            delete again later). Default 300.
        not_found_tolerance: consecutive 404s tolerated right after create (eventual
            consistency; TF tolerates 10). Default 10.
        nodeclass_ttl: seconds a resolved KCNodeClass (and its status) is reused. Default 60.
        catalog_ttl: seconds flavors are cached. Default 300.
        bootstrap_token_ttl: seconds a kubeadm bootstrap token lives. Default 3600.
        create_lookups: after a create POST whose outcome is unknown (429, 5xx, read timeout,
            dropped connection), how many times the VM is looked up by name and launch nonce (with backoff)
            before the POST counts as not acted on. Default 3.
        clock_skew: seconds a VM's ``created_at`` may precede its NodeClaim's
            ``creationTimestamp`` and still be adopted (``created_at`` has 1 s resolution; the
            API server and KakaoCloud clocks differ). Default 5.
    """

    endpoints: dict[str, str] = field(default_factory=dict)
    request_timeout: float = 30.0
    max_attempts: int = 8
    backoff_base: float = 1.0
    backoff_max: float = 30.0
    page_size: int = 1000
    token_refresh_margin: float = 300.0
    build_poll_interval: float = 3.0
    build_timeout: float = 600.0
    delete_poll_interval: float = 2.0
    delete_timeout: float = 300.0
    not_found_tolerance: int = 10
    nodeclass_ttl: float = 60.0
    catalog_ttl: float = 300.0
    bootstrap_token_ttl: float = 3600.0
    create_lookups: int = 3
    clock_skew: float = 5.0

    def endpoint(self, service: str, region: str) -> str:
        """Base URL of ``service`` without a trailing slash."""
        url = self.endpoints.get(service) or DEFAULT_ENDPOINTS[service]
        return url.format(region=region).rstrip("/")
