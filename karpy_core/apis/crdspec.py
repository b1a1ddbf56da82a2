"""What a kind's CustomResourceDefinition needs beyond its pydantic model: :class:`CRDSpec`
(names, printer columns, served versions) and :class:`Overlay` (the patterns and CEL rules the
JSON Schema cannot carry).

A ``karpy.apis`` entry point (:mod:`karpy_core.apis.registry`) returns its kinds either as bare
:class:`~karpy_core.apis.base.KubeObject` classes or wrapped in a :class:`CRDSpec`; the wrapped
ones get a CRD from :mod:`karpy_core.apis.crds` (``crds/*.yaml``, ``karpy install-crds``). That is
how a cloud plugin delivers its NodeClass's CRD and CEL rules without core importing it: the AWS
plugin's ``karpy_aws.apis:api_kinds`` returns the ``EC2NodeClass`` spec, whose overlays live in
``karpy_aws.crd``. The CEL/pattern helpers to write overlays with are in :mod:`karpy_core.apis.crds`
(:func:`~karpy_core.apis.crds.cel_rule`, :func:`~karpy_core.apis.crds.cel_string`,
:func:`~karpy_core.apis.crds.cel_list`, :data:`~karpy_core.apis.crds.QUANTITY_PATTERN`...).

This module imports nothing heavy, so ``api_kinds()`` can build its specs at every registry load;
an overlay function is only called when a CRD is generated.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from karpy_core.apis.base import KubeObject

__all__ = ["AGE_COLUMN", "CRDSpec", "Overlay", "READY_COLUMN", "printer_column"]


@dataclass(frozen=True)
class Overlay:
    """What the JSON Schema of one model class lacks.

    ``properties`` maps a wire (camelCase) field name to a schema fragment deep-merged into the
    converted field (``x-kubernetes-validations`` lists are appended); ``replace`` swaps a
    field's schema wholesale; ``rules`` are CEL rules on the object itself."""

    properties: dict[str, dict[str, Any]] = field(default_factory=dict)
    replace: dict[str, dict[str, Any]] = field(default_factory=dict)
    rules: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class CRDSpec:
    """Everything about one CRD that is not in the model: names, columns, extra rules.

    ``overlays`` is called (no arguments) when the CRD is generated and returns model class name
    (as in the JSON Schema's ``$defs``, e.g. ``"EC2NodeClassSpec"``) -> :class:`Overlay`; an
    overlay naming a class or field the model lacks makes generation fail
    (:class:`~karpy_core.apis.crds.CRDGenerationError`)."""

    model: type[KubeObject]
    plural: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ("karpenter",)
    columns: tuple[dict[str, Any], ...] = ()
    overlays: Callable[[], dict[str, Overlay]] = dict
    scale: tuple[str, str] | None = None
    """``(specReplicasPath, statusReplicasPath)`` of a ``scale`` subresource (``kubectl scale``)."""
    also_served: tuple[str, ...] = ()
    """Older versions served with the same schema (conversion ``None``: the API server only
    rewrites ``apiVersion``), the stored version being :attr:`version`."""

    @property
    def group(self) -> str:
        """The model's API group (``karpenter.k8s.aws``)."""
        return self.model.group()

    @property
    def version(self) -> str:
        """The stored version (``v1``), from the model's ``API_VERSION``."""
        return self.model.API_VERSION.rsplit("/", 1)[1]

    @property
    def filename(self) -> str:
        """``<group>_<plural>.yaml``, the naming of Karpenter's ``pkg/apis/crds``."""
        return f"{self.group}_{self.plural}.yaml"


def printer_column(name: str, json_path: str, kind: str = "string", priority: int = 0) -> dict[str, Any]:
    """One ``additionalPrinterColumns`` entry (``kubectl get``): ``kind`` is the OpenAPI type
    (``string``, ``integer``, ``date``); a ``priority`` above 0 shows only with ``-o wide``."""
    out: dict[str, Any] = {"name": name, "jsonPath": json_path, "type": kind}
    if priority:
        out["priority"] = priority
    return out


READY_COLUMN = printer_column("Ready", '.status.conditions[?(@.type=="Ready")].status')
"""The ``Ready`` condition's status, as every Karpenter CRD shows it."""
AGE_COLUMN = printer_column("Age", ".metadata.creationTimestamp", "date")
"""The object's age."""
