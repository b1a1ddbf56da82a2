"""The KCNodeClass CustomResourceDefinition's rules: what :mod:`karpy_kakaocloud.apis`'s pydantic
validators check that its JSON Schema does not say, as OpenAPI patterns.

:func:`karpy_kakaocloud.apis.api_kinds` (entry point ``karpy.apis: kakaocloud``) returns
``KCNodeClass`` as a :class:`~karpy_core.apis.crdspec.CRDSpec` whose overlays are
:func:`kcnodeclass_overlays`; :mod:`karpy_core.apis.crds` renders it into
``crds/karpenter.kakaocloud.com_kcnodeclasses.yaml`` without importing this package.
"""

from __future__ import annotations

from karpy_core.apis.crdspec import Overlay
from karpy_kakaocloud.apivalues import KEY_NAME

__all__ = ["kcnodeclass_overlays"]


def kcnodeclass_overlays() -> dict[str, Overlay]:
    """Model class name -> :class:`~karpy_core.apis.crdspec.Overlay` for the KCNodeClass CRD: the
    key-pair name (4..250 characters, :data:`~karpy_kakaocloud.apivalues.KEY_NAME`, the model's pattern) and the
    ``MAJOR.MINOR`` Kubernetes version, as patterns."""
    return {
        "KCNodeClassSpec": Overlay(properties={"keyName": {"minLength": 4, "maxLength": 250, "pattern": KEY_NAME.pattern}}),
        "Bootstrap": Overlay(properties={"kubernetesVersion": {"pattern": r"^[0-9]+\.[0-9]+$"}}),
    }
