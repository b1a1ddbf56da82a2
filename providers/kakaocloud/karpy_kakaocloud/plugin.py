"""Entry point of the KakaoCloud cloud-provider plugin (``karpy.cloudprovider`` group, name
``kakaocloud``).

Importing this module needs the ``kakaocloud`` extra (httpx); without it the import fails with a
message naming the extra to install.
"""

from __future__ import annotations

from typing import Any

try:
    import httpx  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        "karpy's KakaoCloud cloud provider needs the 'kakaocloud' extra (httpx): pip install 'karpy[kakaocloud]'"
    ) from exc

from karpy_core.errors import ConfigurationError

__all__ = ["create_plugin"]


def create_plugin(options: dict[str, Any]) -> object:
    """Build the KakaoCloud provider plugin.

    Raises:
        ConfigurationError: always in this release: the OpenAPI client and VM launch path are not
            part of it yet; use ``--cloud-provider simulated`` meanwhile.
    """
    raise ConfigurationError(
        "the KakaoCloud cloud provider's launch path is not in this release yet; KCNodeClass manifests load and "
        "simulate with the 'simulated' provider"
    )
