"""aioboto3 clients for the plugin, opened lazily and closed together.

Credentials come from the default botocore chain (environment, shared config, IMDS/IRSA); karpy
never stores or logs them. Before every request is signed, the values the signer is about to use
(access key id, secret key, session token; refreshed role credentials included) are registered
with :mod:`karpy_core.redaction`, so no log line, botocore's DEBUG output included, shows them.

``endpoint_url`` exists for tests against moto's server mode and is refused unless it points at a
loopback address, so a typo cannot send real credentials to a stranger.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from typing import Any
from urllib.parse import urlparse

import aioboto3
from botocore.config import Config

from karpy_core.errors import ConfigurationError
from karpy_core.redaction import register_secret

__all__ = ["AWSClients", "check_endpoint_url", "pricing_region"]

_SERVICES = ("ec2", "ssm", "iam", "sqs", "pricing", "eks")


def check_endpoint_url(url: str | None) -> str | None:
    """Accept None or an ``http(s)://`` URL whose host is ``localhost`` or a loopback IP.

    Raises:
        ConfigurationError: any other host.
    """
    if not url:
        return None
    host = urlparse(url).hostname or ""
    ok = host == "localhost"
    if not ok:
        with contextlib.suppress(ValueError):
            ok = ipaddress.ip_address(host).is_loopback
    if not ok:
        raise ConfigurationError(f"aws provider: endpoint_url must be a loopback address (a local emulator), got host {host!r}")
    return url


def pricing_region(region: str) -> str:
    """The Pricing API endpoint region for ``region`` (Karpenter ``pricing.NewAPI``): ap-* ->
    ap-south-1, eu-* -> eu-central-1, cn-* -> cn-northwest-1, else us-east-1."""
    if region.startswith("ap-"):
        return "ap-south-1"
    if region.startswith("eu-"):
        return "eu-central-1"
    if region.startswith("cn-"):
        return "cn-northwest-1"
    return "us-east-1"


class AWSClients:
    """One aioboto3 session and its clients (``ec2``, ``ssm``, ``iam``, ``sqs``, ``pricing``, ``eks``).

    Args:
        region: the cluster's region.
        endpoint_url: loopback emulator URL (moto), or None for AWS.
        session: an ``aioboto3.Session`` to use instead of a default-chain one (tests may pass one
            with static dummy keys).

    Clients are created on first use in the running event loop; call :meth:`close` to release
    them (the plugin's ``aclose``).
    """

    def __init__(self, *, region: str, endpoint_url: str | None = None, session: aioboto3.Session | None = None):
        self.region = region
        self.endpoint_url = check_endpoint_url(endpoint_url)
        self._session = session or aioboto3.Session(region_name=region)
        self._stack: contextlib.AsyncExitStack | None = None
        self._clients: dict[str, Any] = {}
        self._lock = asyncio.Lock()
        self._config = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=10, read_timeout=60)

    async def get(self, service: str) -> Any:
        """The client for ``service`` (one of ``ec2 ssm iam sqs pricing eks``)."""
        if service not in _SERVICES:
            raise ValueError(f"unknown service {service!r}")
        client = self._clients.get(service)
        if client is not None:
            return client
        async with self._lock:
            if service not in self._clients:
                if self._stack is None:
                    self._stack = contextlib.AsyncExitStack()
                region = pricing_region(self.region) if service == "pricing" else self.region
                kwargs: dict[str, Any] = {"region_name": region, "config": self._config}
                if self.endpoint_url:
                    kwargs["endpoint_url"] = self.endpoint_url
                new_client = await self._stack.enter_async_context(self._session.client(service, **kwargs))
                await self._register_credentials()
                new_client.meta.events.register("before-sign", self._register_credentials)
                self._clients[service] = new_client
        return self._clients[service]

    async def _register_credentials(self, **_: Any) -> None:
        """Register the session's current credentials as secrets (botocore ``before-sign`` hook:
        runs before botocore logs the canonical request and the signed headers)."""
        credentials = await self._session.get_credentials()
        if credentials is None:
            return
        frozen = await credentials.get_frozen_credentials()
        for value in (frozen.access_key, frozen.secret_key, frozen.token):
            register_secret(value)

    async def ec2(self) -> Any:
        return await self.get("ec2")

    async def close(self) -> None:
        """Close every opened client."""
        stack, self._stack = self._stack, None
        self._clients.clear()
        if stack is not None:
            await stack.aclose()
