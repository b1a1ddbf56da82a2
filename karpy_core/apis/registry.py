"""Which model class reads which ``(apiVersion, kind)``.

Kinds come from the ``karpy.apis`` entry-point group: each entry point is a callable returning a
list of :class:`~karpy_core.apis.base.KubeObject` subclasses (``core`` -> :func:`core_kinds`,
``aws`` -> ``karpy_aws.apis:api_kinds``, ``kakaocloud`` -> ``karpy_kakaocloud.apis:api_kinds``).
A provider whose module fails to import (a missing extra, a bug) is skipped with a warning so the
other kinds still load. The core kinds are always present, even when karpy is not installed as a
distribution (entry points then missing).
"""

from __future__ import annotations

import logging
import warnings
from importlib.metadata import entry_points

from karpy_core.apis.base import KubeObject

__all__ = ["ENTRY_POINT_GROUP", "core_kinds", "kind_registry"]

ENTRY_POINT_GROUP = "karpy.apis"

log = logging.getLogger(__name__)


def core_kinds() -> list[type[KubeObject]]:
    """The kinds karpy core models: karpenter.sh/v1 NodePool and NodeClaim, core/v1 Pod and Node,
    apps/v1 Deployment/ReplicaSet/StatefulSet/DaemonSet, batch/v1 Job, policy/v1 PodDisruptionBudget,
    node.k8s.io/v1 RuntimeClass, autoscaling.x-k8s.io/v1beta1 CapacityBuffer and v1 PodTemplate, karpenter.sh/v1alpha1
    NodeOverlay."""
    from karpy_core.apis.capacitybuffer import CapacityBuffer, PodTemplate
    from karpy_core.apis.core import Node, Pod
    from karpy_core.apis.node import RuntimeClass
    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodeoverlay import NodeOverlay
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.apis.workloads import (
        DaemonSet,
        Deployment,
        Job,
        PodDisruptionBudget,
        ReplicaSet,
        StatefulSet,
    )

    return [NodePool, NodeClaim, Pod, Node, Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, PodDisruptionBudget,
            RuntimeClass, CapacityBuffer, PodTemplate, NodeOverlay]


def _add(registry: dict[tuple[str, str], type[KubeObject]], source: str, kinds: object) -> None:
    if not isinstance(kinds, (list, tuple)):
        raise TypeError(f"returned {type(kinds).__name__}, expected a list of model classes")
    for cls in kinds:
        if not (isinstance(cls, type) and issubclass(cls, KubeObject) and cls.API_VERSION and cls.KIND):
            raise TypeError(f"{cls!r} is not a KubeObject subclass with API_VERSION and KIND")
        key = (cls.API_VERSION, cls.KIND)
        if key in registry and registry[key] is not cls:
            warnings.warn(
                f"karpy.apis entry point {source!r}: {key[0]} {key[1]} is already provided by "
                f"{registry[key].__module__}; keeping that one",
                RuntimeWarning,
                stacklevel=3,
            )
            continue
        registry[key] = cls


def kind_registry() -> dict[tuple[str, str], type[KubeObject]]:
    """Map ``(apiVersion, kind)`` -> model class over every ``karpy.apis`` entry point.

    Entry points are loaded in name order (deterministic). One that fails to import or returns
    something else than a list of kind classes is skipped with a :class:`RuntimeWarning`.
    """
    registry: dict[tuple[str, str], type[KubeObject]] = {}
    _add(registry, "core", core_kinds())
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            _add(registry, ep.name, ep.load()())
        except Exception as exc:  # a broken provider must not stop the others
            message = f"karpy.apis entry point {ep.name!r} ({ep.value}) skipped: {type(exc).__name__}: {exc}"
            log.warning(message)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
    return registry
