"""Pydantic v2 building blocks shared by every API model karpy reads or writes.

Two bases, one choice each model makes about unknown fields:

* :class:`KubeModel` — ``extra="forbid"``. Used for karpy's own kinds (NodePool, NodeClaim,
  EC2NodeClass, KCNodeClass): an unknown field is a user mistake, exactly as the CRD schemas of
  Karpenter make the API server reject it.
* :class:`LenientModel` — ``extra="allow"``. Used for core Kubernetes kinds (Pod, Node,
  Deployment, ...) where karpy models only what the scheduler reads; real objects carry hundreds of
  other fields, which are kept (and dumped back) but never interpreted. The manifest loader still
  refuses a field kube-apiserver's schema of the kind does not declare (strict decoding, as
  ``kubectl apply`` asks by default): :mod:`karpy_core.apis.fieldschema`.

Both map Python ``snake_case`` attributes to the Kubernetes ``camelCase`` wire names
(``alias_generator=to_camel``); fields whose wire name is not plain camelCase (``providerID``,
``kmsKeyID``, ``hostIP``...) carry an explicit alias. Python code may construct models by either
name; the manifest loader validates by alias only (``by_name=False``), so a YAML key spelt
``expire_after`` is an unknown field, as it is for the API server.

Scalars follow Kubernetes JSON decoding rather than pydantic's lax coercion: :data:`Int`,
:data:`Bool` and :data:`Str` are strict, so ``weight: "10"`` or ``encrypted: "true"`` are errors.

:class:`KubeObject` is the base of every top-level kind: ``apiVersion``/``kind`` checked against
the class attributes ``API_VERSION``/``KIND``, ``metadata``, and a private :class:`Source`
remembering where the loader found it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, Strict, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from karpy_core.apis.names import annotations_problems, labels_problems
from karpy_core.utils.quantity import QuantityError, parse_quantity

__all__ = [
    "Int",
    "Int32",
    "Int64",
    "INT32_MAX",
    "INT64_MAX",
    "Time",
    "Bool",
    "Str",
    "Quantity",
    "ResourceList",
    "QUANTITY_PATTERN",
    "CRDQuantity",
    "CRDResourceList",
    "MAX_QUANTITY",
    "NonNegativeQuantity",
    "ComputeResourceList",
    "KubeModel",
    "LenientModel",
    "OwnerReference",
    "ObjectMeta",
    "Condition",
    "Source",
    "KubeObject",
    "LenientObject",
    "to_kube_dict",
]

INT32_MAX = 2**31 - 1
"""Largest ``int32`` (OpenAPI ``format: int32``)."""
INT64_MAX = 2**63 - 1
"""Largest ``int64`` (OpenAPI ``format: int64``)."""


def _int_range(bits: int) -> Any:
    """An after-validator refusing integers outside Go's ``int<bits>``, as kube-apiserver's JSON
    decoder does (``json: cannot unmarshal number 9999999999 into Go struct field ... of type
    int32``); the JSON Schema (and so the CRDs karpy writes) is left unchanged."""
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1

    def check(value: int) -> int:
        if not low <= value <= high:
            raise ValueError(f"{value} does not fit in an int{bits} (the field's OpenAPI format: {low} .. {high})")
        return value

    return AfterValidator(check)


Int64 = Annotated[int, Strict(), _int_range(64)]
"""An ``int64`` field (``terminationGracePeriodSeconds``, ``generation``, ``tolerationSeconds``...):
strict, and within -2^63 .. 2^63-1."""
Int32 = Annotated[int, Strict(), _int_range(32)]
"""An ``int32`` field (``priority``, ``replicas``, ``maxSkew``, ``weight``...): strict, and within
-2^31 .. 2^31-1."""
Int = Int64
"""An integer; strings and floats are rejected, as Kubernetes' JSON decoder rejects them, and so
are numbers beyond ``int64`` (no Kubernetes integer field is wider). Use :data:`Int32` for
``int32`` fields."""

_RFC3339 = re.compile(r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?(Z|[+-][0-9]{2}:[0-9]{2})$")

_FRACTION_PAST_MICROSECONDS = re.compile(r"\.([0-9]{6})[0-9]+")


def _check_time(value: Any) -> Any:
    """``metav1.Time`` as its ``UnmarshalJSON`` reads it: null, or a string in Go's
    ``time.RFC3339`` layout (``2026-01-01T00:00:00Z``, fractional seconds and a ``+hh:mm``
    offset allowed). A date alone (``2026-01-01``), a number (``12345``) or any other text is
    refused; a :class:`~datetime.datetime` built in Python is kept.

    Raises:
        ValueError: anything else, naming the expected form.
    """
    if value is None:
        return None
    if isinstance(value, datetime):  # built in Python (YAML and JSON give strings)
        return value
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        shown = repr(value) if isinstance(value, str) else f"the {type(value).__name__} {value!r}"
        raise ValueError(f"must be an RFC 3339 timestamp string such as '2026-01-01T00:00:00Z'; got {shown}")
    value = _FRACTION_PAST_MICROSECONDS.sub(r".\1", value)  # Python reads 6 fractional digits, Go 9
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ValueError(f"must be an RFC 3339 timestamp; got {value!r} ({exc})") from None


Time = Annotated[datetime, BeforeValidator(_check_time)]
"""``metav1.Time``: an RFC 3339 timestamp string on the wire (``creationTimestamp``,
``lastTransitionTime``...), a :class:`~datetime.datetime` in Python."""
Bool = Annotated[bool, Strict()]
"""``true``/``false`` only; ``"true"`` or ``1`` are rejected."""
Str = Annotated[str, Strict()]
"""A string; numbers and booleans are rejected (quote them in YAML)."""


MAX_QUANTITY = 2**63 - 1
"""Largest magnitude a Kubernetes quantity holds, in base units: "no quantity may represent a number
greater than 2^63-1 in magnitude" (``k8s.io/apimachinery/pkg/api/resource/quantity.go``)."""


def _check_quantity(value: Any) -> str:
    """Validate a Kubernetes quantity given as a YAML int/float/string; keep it as its string form.

    Raises:
        ValueError: not a quantity, or larger in magnitude than :data:`MAX_QUANTITY` base units.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"must be a quantity such as '500m', '2' or '4Gi'; got {value!r}")
    try:
        amount = parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    if not amount.is_finite() or abs(amount) > MAX_QUANTITY:
        raise ValueError(f"{value!r} is larger than a Kubernetes quantity can hold (2^63-1 in base units)")
    return str(value)


def _check_non_negative(value: str) -> str:
    if parse_quantity(value) < 0:
        raise ValueError(f"must not be negative; got {value!r}")
    return value


QUANTITY_PATTERN = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE])?$"
"""The pattern karpy's CRDs give quantity fields (``x-kubernetes-int-or-string``): what both the
API server's pattern check and the controller's ``ParseQuantity`` accept (no whitespace, a digit
required, an integer exponent)."""
_CRD_QUANTITY = re.compile(QUANTITY_PATTERN)


def _check_crd_quantity(value: Any) -> Any:
    """The CRD layer in front of :func:`_check_quantity` for karpy's own kinds (NodePool,
    NodeClaim, NodeOverlay, CapacityBuffer, NodeClasses): an integer, or a string matching
    :data:`QUANTITY_PATTERN` as a whole (Go's regexp: no final newline). A YAML float (``0.5``) is
    refused, as the CRD's ``anyOf: [integer, string]`` refuses it.

    Raises:
        ValueError: a float, or a string the pattern refuses (``" 1"``, ``"-"``, ``"1e1.5"``).
    """
    if isinstance(value, float):
        raise ValueError(f"must be an integer or a string; got the number {value!r} (quote it: {str(value)!r})")
    if isinstance(value, str) and _CRD_QUANTITY.fullmatch(value) is None:
        try:
            parse_quantity(value)
        except QuantityError as exc:
            raise ValueError(str(exc)) from None
        raise ValueError(f"{value!r} is not a Kubernetes quantity (expected e.g. '500m', '2', '4Gi'; no spaces)")
    return value


Quantity = Annotated[str, BeforeValidator(_check_quantity)]
"""A Kubernetes resource quantity (``"250m"``, ``2``, ``"4Gi"``), validated with
:func:`karpy_core.utils.quantity.parse_quantity` and stored as its string form (``2`` -> ``"2"``).
Convert to integers with :func:`karpy_core.utils.quantity.to_internal` at the point of use. A
``null`` quantity in a built-in kind (``requests: {cpu: null}``) reaches the model as ``"0"``, as
kube-apiserver stores it: the loader's schema walk reads it so
(:func:`karpy_core.apis.fieldschema.walk_fields`); karpy's CRDs refuse it."""

ResourceList = dict[str, Quantity]
"""``core/v1 ResourceList``: resource name -> quantity (``{"cpu": "2", "memory": "4Gi"}``)."""

CRDQuantity = Annotated[str, BeforeValidator(_check_quantity), BeforeValidator(_check_crd_quantity)]
"""A :data:`Quantity` in a CRD (karpy's and Karpenter's kinds): also :func:`_check_crd_quantity`
(run first), as the API server checks the CRD's pattern before the controller parses it."""

CRDResourceList = dict[str, CRDQuantity]
"""A :data:`ResourceList` in a CRD (``NodePool.spec.limits``, ``NodeClaim.spec.resources``...)."""

NonNegativeQuantity = Annotated[str, BeforeValidator(_check_quantity), AfterValidator(_check_non_negative)]
"""A :data:`Quantity` that must be >= 0, as the API server requires of container requests and
limits, pod overhead and node capacity (``ValidateNonnegativeQuantity`` in
``k8s.io/kubernetes/pkg/apis/core/validation/validation.go``)."""

ComputeResourceList = dict[str, NonNegativeQuantity]
"""A :data:`ResourceList` of non-negative quantities (container resources, overhead, node capacity)."""


class FieldPathError(ValueError):
    """A rule's problem with a field below the object it validates: the message starts with that
    field's path from the object (``template.metadata.labels: Invalid value: ...``), which the
    manifest loader joins with the object's own path (``spec.template.metadata.labels: ...``, as
    kube-apiserver writes it) instead of ``spec: template.metadata.labels: ...``."""


class KubeModel(BaseModel):
    """Base for karpy's own API types: camelCase wire names, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        validate_default=False,
        use_attribute_docstrings=True,
    )


class LenientModel(KubeModel):
    """Base for the parts of core Kubernetes kinds karpy reads: unknown fields are kept (the loader
    checks their names against kube-apiserver's schema: :func:`karpy_core.apis.fieldschema.unknown_fields`)."""

    model_config = ConfigDict(extra="allow")


class OwnerReference(LenientModel):
    """``metav1.OwnerReference``: the controller (ReplicaSet, Job, NodePool...) owning an object."""

    api_version: Str = Field(alias="apiVersion")
    kind: Str
    name: Str
    uid: Str = ""
    controller: Bool | None = None
    block_owner_deletion: Bool | None = None


class ObjectMeta(LenientModel):
    """``metav1.ObjectMeta``. Lenient: ``managedFields``, ``selfLink`` and future fields are kept.

    Timestamps are timezone-aware :class:`~datetime.datetime` values (RFC 3339 on the wire).
    """

    name: Str | None = None
    generate_name: Str | None = None
    namespace: Str | None = None
    labels: dict[Str, Str] = Field(default_factory=dict)
    annotations: dict[Str, Str] = Field(default_factory=dict)
    uid: Str | None = None
    resource_version: Str | None = None
    generation: Int | None = None
    creation_timestamp: Time | None = None
    deletion_timestamp: Time | None = None
    deletion_grace_period_seconds: Int | None = None
    finalizers: list[Str] = Field(default_factory=list)
    owner_references: list[OwnerReference] = Field(default_factory=list)

    @field_validator("labels", "annotations")
    @classmethod
    def _check_labels_and_annotations(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        """Label keys qualified names and values label values; annotation keys qualified names,
        256 KiB in all (:func:`karpy_core.apis.names.labels_problems`, ``annotations_problems``)."""
        problems = labels_problems(value) if info.field_name == "labels" else annotations_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value


class Condition(KubeModel):
    """``metav1.Condition`` as used in karpenter.sh/v1 status (``Ready``, ``Launched``...).

    ``status`` is the string ``"True"``, ``"False"`` or ``"Unknown"``.
    """

    type: Str
    """What the condition is about, in CamelCase (e.g. Ready, Launched, NodeClassReady)."""
    status: Literal["True", "False", "Unknown"]
    """Whether the condition holds: True, False or Unknown."""
    reason: Str | None = None
    """A CamelCase word for why the condition has its status, for programs to match on."""
    message: Str | None = None
    """Why the condition has its status, in words for people; may be empty."""
    last_transition_time: Time | None = None
    """When the status last changed (RFC 3339)."""
    observed_generation: Int | None = None
    """The object's metadata.generation the condition was computed for; lower than the current
    generation means the condition may be out of date."""


@dataclass(frozen=True, slots=True)
class Source:
    """Where a loaded object came from: ``file`` as given to the loader, 1-based document ``index``,
    the document's first ``line`` (1-based, 0 when unknown) and, for an item of a ``v1 List``
    document, its 1-based ``item`` number."""

    file: str
    index: int
    line: int = 0
    item: int | None = None

    def __str__(self) -> str:
        item = f" item {self.item}" if self.item is not None else ""
        return f"{self.file} doc {self.index}{item}"


class KubeObject(KubeModel):
    """A top-level kind: ``apiVersion``, ``kind``, ``metadata``.

    Subclasses set the class attributes ``API_VERSION`` (``"karpenter.sh/v1"``) and ``KIND``
    (``"NodePool"``). ``apiVersion``/``kind`` may be omitted when constructing in Python (they then
    default to the class values) but, when given, must match: a mismatch raises a validation error.
    ``NODE_CLASS`` is True for provider NodeClass kinds (EC2NodeClass, KCNodeClass...).
    """

    API_VERSION: ClassVar[str] = ""
    KIND: ClassVar[str] = ""
    NODE_CLASS: ClassVar[bool] = False
    NAMESPACED: ClassVar[bool] = False

    api_version: Str | None = Field(default=None, alias="apiVersion")
    kind: Str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)

    _source: Source | None = PrivateAttr(default=None)

    @field_validator("api_version")
    @classmethod
    def _check_api_version(cls, value: str | None) -> str:
        if value is not None and cls.API_VERSION and value != cls.API_VERSION:
            raise ValueError(f"must be {cls.API_VERSION!r} for {cls.KIND}; got {value!r}")
        return cls.API_VERSION if value is None else value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str | None) -> str:
        if value is not None and cls.KIND and value != cls.KIND:
            raise ValueError(f"must be {cls.KIND!r}; got {value!r}")
        return cls.KIND if value is None else value

    def model_post_init(self, context: Any, /) -> None:
        # Defaults are not validated, so fill apiVersion/kind from the class when omitted.
        if self.api_version is None:
            self.api_version = self.API_VERSION
        if self.kind is None:
            self.kind = self.KIND

    @classmethod
    def group(cls) -> str:
        """The API group (``"karpenter.sh"``; ``""`` for core/v1)."""
        return cls.API_VERSION.rsplit("/", 1)[0] if "/" in cls.API_VERSION else ""

    @property
    def name(self) -> str:
        """``metadata.name`` (``""`` when unset)."""
        return self.metadata.name or ""

    @property
    def namespace(self) -> str | None:
        """``metadata.namespace`` or None."""
        return self.metadata.namespace

    @property
    def source(self) -> Source | None:
        """Where the loader read this object (None when built in code)."""
        return self._source

    def with_source(self, source: Source | None) -> KubeObject:
        """Record where this object was read; returns ``self``."""
        self._source = source
        return self

    def __eq__(self, other: object) -> bool:
        """Equal when type, fields and extra fields are equal; where it was read (``source``) is ignored."""
        if not isinstance(other, BaseModel):
            return NotImplemented
        return (
            type(self) is type(other)
            and self.__dict__ == other.__dict__
            and self.__pydantic_extra__ == other.__pydantic_extra__
        )

    __hash__ = None  # type: ignore[assignment]  # mutable models are not hashable

    def ref(self) -> str:
        """``Kind/name`` or ``Kind/namespace/name``, for messages."""
        if self.NAMESPACED and self.metadata.namespace:
            return f"{self.KIND}/{self.metadata.namespace}/{self.name}"
        return f"{self.KIND}/{self.name}"


class LenientObject(KubeObject):
    """A top-level core Kubernetes kind: unknown fields are kept, not checked."""

    model_config = ConfigDict(extra="allow")


def _prune_empty(model: BaseModel, data: dict[str, Any]) -> None:
    """Drop optional fields whose value is an empty list/dict (Go's ``omitempty``), recursively."""
    for name, info in type(model).model_fields.items():
        key = info.alias or name
        if key not in data:
            continue
        value = getattr(model, name)
        if isinstance(value, (list, dict)) and not value and not info.is_required():
            del data[key]
        elif isinstance(value, BaseModel) and isinstance(data[key], dict):
            _prune_empty(value, data[key])
        elif isinstance(value, list) and isinstance(data[key], list):
            for item, dumped in zip(value, data[key], strict=False):
                if isinstance(item, BaseModel) and isinstance(dumped, dict):
                    _prune_empty(item, dumped)


def to_kube_dict(model: BaseModel) -> dict[str, Any]:
    """Dump a model as a Kubernetes JSON-compatible dict: camelCase keys, ``None`` and empty
    optional lists/maps omitted (like Go's ``omitempty``), datetimes as RFC 3339 strings, defaults
    (``expireAfter: 720h``...) included, unknown (lenient) fields included as read."""
    data = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    _prune_empty(model, data)
    return data
