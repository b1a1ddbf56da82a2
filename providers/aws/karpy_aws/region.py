"""Which AWS region the controller runs in, found as the AWS SDKs find it.

Order (the Go SDK's, which Karpenter uses, then Karpenter's own IMDS fallback):

1. an explicit region (``--region`` / the ``region`` option);
2. ``AWS_REGION``, then ``AWS_DEFAULT_REGION`` (botocore reads only the second);
3. the shared config file's ``region`` for the profile (``AWS_PROFILE``, ``AWS_CONFIG_FILE``),
   through botocore's own config chain;
4. the instance metadata service, through botocore's ``IMDSRegionProvider`` (IMDSv2 token, then
   ``placement/region``), which honours ``AWS_EC2_METADATA_DISABLED`` and
   ``AWS_EC2_METADATA_SERVICE_ENDPOINT`` (tests point it at a loopback fake or disable it).
"""

from __future__ import annotations

import os

import botocore.session
from botocore.utils import IMDSRegionProvider

from karpy_aws.options import missing_region

__all__ = ["resolve_region"]


def resolve_region(explicit: str = "") -> str:
    """The region to use (see the module docstring for the order), from ``os.environ`` and the
    files and services it names.

    Args:
        explicit: a region given by the user; returned as is when not empty.

    Raises:
        ConfigurationError: no source names a region (the message says how to set one).
    """
    if explicit:
        return explicit
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION"):
        if os.environ.get(name):
            return os.environ[name]
    session = botocore.session.Session()
    region = session.get_config_variable("region")
    if region:
        return str(region)
    region = IMDSRegionProvider(session).provide()
    if region:
        return str(region)
    raise missing_region()
