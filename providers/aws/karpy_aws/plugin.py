"""Entry point of the AWS cloud-provider plugin (``karpy.cloudprovider`` group, name ``aws``).

Importing this module needs the ``aws`` extra (aioboto3); without it the import fails with a
message naming the extra to install.
"""

from __future__ import annotations

from typing import Any

try:
    import aioboto3  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a venv without the extra
    raise ImportError(
        "karpy's AWS cloud provider needs the 'aws' extra (aioboto3): pip install 'karpy[aws]'"
    ) from exc

from karpy_core.errors import ConfigurationError

__all__ = ["create_plugin"]


def create_plugin(options: dict[str, Any]) -> object:
    """Build the AWS provider plugin.

    Raises:
        ConfigurationError: always in this release: the EC2 launch path (EC2NodeClass
            resolution, CreateFleet, pricing, interruption) is not part of it yet; use
            ``--cloud-provider simulated`` meanwhile.
    """
    raise ConfigurationError(
        "the AWS cloud provider's launch path is not in this release yet; EC2NodeClass manifests load and "
        "simulate with the 'simulated' provider"
    )
