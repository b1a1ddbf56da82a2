"""Which model class reads which ``(apiVersion, kind)``.

Kinds come from the ``karpy.apis`` entry-point group: each entry point is a callable returning a
list whose items are :class:`~karpy_core.apis.base.KubeObject` subclasses, or
:class:`~karpy_core.apis.crdspec.CRDSpec` objects for the kinds whose CustomResourceDefinition the
entry point's distribution owns (the spec's ``model`` is the kind; :mod:`karpy_core.apis.crds`
renders it). ``core`` -> :func:`core_kinds` (karpy's own distribution); the cloud plugins'
distributions add theirs (``karpy-aws``: ``aws`` -> ``karpy_aws.apis:api_kinds``,
``karpy-kakaocloud``: ``kakaocloud`` -> ``karpy_kakaocloud.apis:api_kinds``).
A provider whose module fails to import (a missing dependency, a bug) is skipped with a warning so the
other kinds still load. The core kinds are always present, even when karpy is not installed as a
distribution (entry points then missing).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import TypeAlias

from karpy_core.apis.base import KubeObject
from karpy_core.apis.crdspec import CRDSpec
from karpy_core.errors import reraise_interrupt

__all__ = ["ENTRY_POINT_GROUP", "ApiKind", "api_entries", "core_kinds", "failed_api_entries", "kind_registry", "plugin_crd_specs"]

ApiKind: TypeAlias = type[KubeObject] | CRDSpec
"""One item of a ``karpy.apis`` entry point's list: a kind, or a kind with its CRD."""

ENTRY_POINT_GROUP = "karpy.apis"

log = logging.getLogger(__name__)


def core_kinds() -> list[type[KubeObject]]:
    """The kinds karpy core models: karpenter.sh/v1 NodePool and NodeClaim, core/v1 Pod and Node,
    apps/v1 Deployment/ReplicaSet/StatefulSet/DaemonSet, batch/v1 Job, policy/v1 PodDisruptionBudget,
    node.k8s.io/v1 RuntimeClass, autoscaling.x-k8s.io/v1beta1 CapacityBuffer and v1 PodTemplate, karpenter.sh/v1alpha1
    NodeOverlay, and karpenter.kwok.sh/v1alpha1 KWOKNodeClass (the NodeClass of Karpenter's KWOK provider, which
    karpy's built-in simulated provider serves)."""
    from karpy_core.apis.capacitybuffer import CapacityBuffer, PodTemplate
    from karpy_core.apis.core import Node, Pod
    from karpy_core.apis.kwoknodeclass import KWOKNodeClass
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
            RuntimeClass, CapacityBuffer, PodTemplate, NodeOverlay, KWOKNodeClass]


def _model(item: object) -> type[KubeObject]:
    cls = item.model if isinstance(item, CRDSpec) else item
    if not (isinstance(cls, type) and issubclass(cls, KubeObject) and cls.API_VERSION and cls.KIND):
        raise TypeError(f"{cls!r} is not a KubeObject subclass with API_VERSION and KIND")
    return cls


def _checked(kinds: object) -> list[ApiKind]:
    if not isinstance(kinds, (list, tuple)):
        raise TypeError(f"returned {type(kinds).__name__}, expected a list of model classes")
    for item in kinds:
        _model(item)
    return list(kinds)


def _add(registry: dict[tuple[str, str], type[KubeObject]], source: str, kinds: Sequence[ApiKind]) -> None:
    for item in kinds:
        cls = _model(item)
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


def api_entries() -> list[tuple[str, list[ApiKind]]]:
    """``(entry-point name, its items)`` for every ``karpy.apis`` entry point, in name order
    (deterministic). One that fails to import, raises, or returns something else than a list of
    kinds/:class:`~karpy_core.apis.crdspec.CRDSpec` is skipped with one log warning per process
    (no Python ``RuntimeWarning``: its source lines read as a crash) and listed by
    :func:`failed_api_entries`."""
    out: list[tuple[str, list[ApiKind]]] = []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        try:
            out.append((ep.name, _checked(ep.load()())))
        except Exception as exc:  # a broken provider must not stop the others
            reraise_interrupt(exc)
            message = f"karpy.apis entry point {ep.name!r} ({ep.value}) skipped: {type(exc).__name__}: {exc}"
            if _FAILED.get(ep.name) != message:  # one line per process, however often the registry is read
                log.warning(message)
            _FAILED[ep.name] = message
    return out


_FAILED: dict[str, str] = {}


def failed_api_entries() -> dict[str, str]:
    """``entry-point name -> one-line message`` for every ``karpy.apis`` entry point that failed
    (import, call or result) in this process so far (:func:`api_entries` logs each once): the
    kinds it would have registered are unknown, so callers say so where a kind is missing."""
    return dict(_FAILED)


def kind_registry() -> dict[tuple[str, str], type[KubeObject]]:
    """Map ``(apiVersion, kind)`` -> model class over every ``karpy.apis`` entry point.

    Entry points are loaded in name order (:func:`api_entries`); a kind already registered by an
    earlier one (another class for the same apiVersion and kind) is kept, with a
    :class:`RuntimeWarning`.
    """
    registry: dict[tuple[str, str], type[KubeObject]] = {}
    _add(registry, "core", core_kinds())
    for name, kinds in api_entries():
        _add(registry, name, kinds)
    return registry


def plugin_crd_specs() -> list[CRDSpec]:
    """The :class:`~karpy_core.apis.crdspec.CRDSpec` items of every ``karpy.apis`` entry point, in
    entry-point name order (karpy's own plugins: EC2NodeClass, then KCNodeClass). A kind offered
    twice (same apiVersion and kind) keeps its first spec."""
    seen: set[tuple[str, str]] = set()
    out: list[CRDSpec] = []
    for _, items in api_entries():
        for item in items:
            if isinstance(item, CRDSpec) and (item.model.API_VERSION, item.model.KIND) not in seen:
                seen.add((item.model.API_VERSION, item.model.KIND))
                out.append(item)
    return out
