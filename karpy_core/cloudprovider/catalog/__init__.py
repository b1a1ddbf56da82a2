"""Instance-type catalogs: turn static data into :class:`~karpy_core.cloudprovider.types.InstanceType`.

* :mod:`karpy_core.cloudprovider.catalog.aws` - the EC2 catalog shipped in ``karpy_core/data``
  (1,373 entries, us-east-1 and ap-northeast-2 offerings) and the capacity/overhead/label rules of
  Karpenter's AWS provider, written as plain functions the ``aws`` provider reuses.
* :mod:`karpy_core.cloudprovider.catalog.kwok` - Karpenter's KWOK catalog format
  (``instance_types.json``), used for the KWOK catalog and the 400-type scheduling benchmark.

Both loaders memoise their results; the lists and the InstanceTypes in them are shared and must be
treated as read-only (copy an InstanceType before changing its offerings).
"""

from __future__ import annotations

from karpy_core.cloudprovider.catalog.aws import (
    AWSCatalogOptions,
    InstanceTypeSpec,
    load_aws_catalog,
)
from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog, parse_kwok_catalog

__all__ = [
    "AWSCatalogOptions",
    "InstanceTypeSpec",
    "load_aws_catalog",
    "load_kwok_catalog",
    "parse_kwok_catalog",
]
