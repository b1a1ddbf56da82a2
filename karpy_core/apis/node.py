"""node.k8s.io/v1 ``RuntimeClass``: the pod overhead and scheduling constraints of a container
runtime.

Unlike most kinds, a RuntimeClass has no ``spec``: ``handler``, ``overhead`` and ``scheduling`` sit
at the top level. The API server's RuntimeClass admission plugin copies ``overhead.podFixed`` into
``spec.overhead`` of every pod naming the class in ``spec.runtimeClassName``, and merges
``scheduling.nodeSelector``/``tolerations`` into the pod (see :mod:`karpy_core.kube.admission`).
Source: ``k8s.io/api/node/v1/types.go``.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from karpy_core.apis.base import ComputeResourceList, LenientModel, LenientObject, Str
from karpy_core.apis.core import Toleration

__all__ = ["Overhead", "Scheduling", "RuntimeClass"]


class Overhead(LenientModel):
    """``node/v1 Overhead``: ``podFixed`` is added to every pod's requests (quantities, each >= 0:
    kube-apiserver refuses a negative one, ``ValidateNonnegativeQuantity`` in
    ``pkg/apis/node/validation``)."""

    pod_fixed: ComputeResourceList = Field(default_factory=dict)


class Scheduling(LenientModel):
    """``node/v1 Scheduling``: a node selector and tolerations merged into every pod of the class."""

    node_selector: dict[Str, Str] = Field(default_factory=dict)
    tolerations: list[Toleration] = Field(default_factory=list)


class RuntimeClass(LenientObject):
    """node.k8s.io/v1 ``RuntimeClass`` (cluster-scoped)."""

    API_VERSION: ClassVar[str] = "node.k8s.io/v1"
    KIND: ClassVar[str] = "RuntimeClass"
    NAMESPACED: ClassVar[bool] = False

    handler: Str
    overhead: Overhead | None = None
    scheduling: Scheduling | None = None
