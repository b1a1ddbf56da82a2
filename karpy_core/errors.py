"""karpy's error tree. Every error karpy raises on purpose derives from :class:`KarpyError`::

    KarpyError
    ├── ManifestError              a user's YAML is wrong; names file, document, kind/name, field
    ├── ConfigurationError         bad CLI options, settings or missing plugins/extras
    │   └── KubeconfigError            a kubeconfig or in-cluster config that cannot be used
    ├── QuantityError              a string that is not a Kubernetes quantity (also a ValueError)
    ├── CloudProviderError         a cloud call failed; keeps the cloud's error ``code``
    │   ├── NodeClaimNotFoundError     the instance behind a NodeClaim is gone
    │   ├── InsufficientCapacityError  no offering could be launched (ICE and friends)
    │   ├── NodeClassNotReadyError     the NodeClass is not Ready; nothing was launched
    │   └── CreateError                launch failed; carries a condition reason and message
    ├── KubeAPIError               the Kubernetes API refused a call (status code, reason)
    │   ├── NotFoundError              404: the object (or its kind) does not exist
    │   ├── ConflictError              409: a stale resourceVersion, or the object already exists
    │   ├── TooManyRequestsError       429: throttled, or an eviction a PodDisruptionBudget refuses
    │   └── InternalServerError        500: the server failed (also: an eviction several PDBs select)
    └── KubeUnreachableError       the Kubernetes API server could not be reached at all

Raise Kubernetes API errors with :meth:`KubeAPIError.from_status`, which picks the subclass by
status code, so ``except NotFoundError`` (or :func:`ignore_not_found`) is the one way to treat
"already gone" as success, as controller-runtime's ``client.IgnoreNotFound`` does.

Every message is scrubbed of credentials when the error is made (:class:`KarpyError`).

The cloud-provider classes mirror Karpenter's ``pkg/cloudprovider/types.go`` errors and the
reactions the NodeClaim lifecycle controller has to each.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from karpy_core.redaction import redact

__all__ = [
    "KarpyError",
    "ManifestError",
    "ConfigurationError",
    "CloudProviderError",
    "NodeClaimNotFoundError",
    "InsufficientCapacityError",
    "NodeClassNotReadyError",
    "CreateError",
    "KubeAPIError",
    "NotFoundError",
    "ConflictError",
    "TooManyRequestsError",
    "InternalServerError",
    "ignore_not_found",
    "ignore_kube_error",
    "KubeUnreachableError",
    "KubeconfigError",
    "PluginHookError",
    "QuantityError",
    "reraise_interrupt",
]

T = TypeVar("T")


def reraise_interrupt(exc: BaseException) -> None:
    """Raise ``KeyboardInterrupt`` when ``exc`` came from one (in its ``__cause__``/``__context__``
    chain): Ctrl-C while a plugin module is imported can surface wrapped (pydantic's
    ``SchemaError`` around the interrupt raised mid-import), and a loader that skips a broken
    plugin with a warning then swallowed the interrupt (trial 21: exit 0 and a traceback). Call it
    first in an ``except Exception`` that carries on."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        seen.add(id(cur))
        cur = cur.__cause__ or cur.__context__


class KarpyError(Exception):
    """Root of every error karpy raises deliberately.

    Every text argument is scrubbed of credentials when the error is made
    (:func:`karpy_core.redaction.redact`): an error's text travels into logs, Events and the
    NodeClaim's ``Launched`` condition, and a cloud's error body may echo the request (a token
    header, the application-credential secret, AWS signed headers). Scrubbing here means no
    raiser, and no reader of ``str(exc)``, can forget it.
    """

    def __init__(self, *args: Any):
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


class ManifestError(KarpyError):
    """A manifest is malformed or violates the API's rules.

    Attributes:
        problems: one line per problem, each naming ``file``, document index, ``kind/name`` and
            the field path, e.g. ``nodepool.yaml doc 1 NodePool/default: spec.limits.cpu: ...``.
        warnings: the non-fatal findings on the same input (one line each), empty when none.
    """

    def __init__(self, problems: list[str] | str, *, warnings: list[str] | None = None):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        self.warnings = list(warnings or [])
        """What the same input warned about (a ``...`` that ended a document, "not read"),
        printed with the problems: a problem may make sense only beside its warning."""
        super().__init__("\n".join(self.problems))


class ConfigurationError(KarpyError):
    """Invalid settings, CLI options, or a plugin/extra that is missing."""


class KubeconfigError(ConfigurationError, ValueError):
    """A kubeconfig file or in-cluster configuration that cannot be used: no such context,
    cluster or user, no server, or the service-account files missing (raised by
    :mod:`karpy_core.kube.transport`). Also a ``ValueError``, as it was before it joined this tree."""


class QuantityError(KarpyError, ValueError):
    """A string that is not a Kubernetes quantity (e.g. ``"1.5 Gi"`` or ``"lots"``), raised by
    :func:`karpy_core.utils.quantity.parse_quantity`. Also a ``ValueError``, so callers that
    validate numbers and quantities together catch both with one clause."""


class CloudProviderError(KarpyError):
    """A cloud API call failed.

    Attributes:
        code: the cloud's own error code (e.g. ``InsufficientInstanceCapacity``), or None.
    """

    def __init__(self, message: str, *, code: str | None = None):
        self.code = code
        super().__init__(f"{code}: {message}" if code else message)


class PluginHookError(CloudProviderError):
    """A cloud provider plugin's hook raised an exception that is not one of karpy's errors (a
    plain ``RuntimeError``, a ``KeyError`` from its own code...). karpy treats it as any other
    :class:`CloudProviderError`: transient during a run (logged, reported and retried), a
    run-time failure (exit 1) at the command line. The message is one line naming the plugin,
    the hook and the exception, e.g. ``cloud provider plugin 'minicloud': karpy_create raised
    RuntimeError: API down``.

    Attributes:
        plugin: the plugin's name (its ``karpy_name``; before that is known, its entry point's
            name when it was loaded from one, else ``module.Class``).
        hook: the hook's name (``karpy_create``...).
        returned: for a hook that answered a value of the wrong type (:meth:`wrong_result`), what
            it returned and what was expected, in words; ``""`` when the hook raised.
        origin: where the plugin comes from, shown after its name when known (``karpy_name``
            failing: the entry point's distribution, ``karpy-tinycloud 0.1.0``); else ``""``.
    """

    def __init__(self, plugin: str, hook: str, exc: BaseException | None, *, returned: str = "", origin: str = ""):
        self.plugin = plugin
        self.hook = hook
        self.returned = returned if exc is None else ""
        self.origin = origin
        what = f"returned {returned}" if exc is None else f"raised {type(exc).__name__}: {exc}"
        super().__init__(f"cloud provider plugin {plugin!r}{f' ({origin})' if origin else ''}: {hook} {what}")

    @classmethod
    def wrong_result(cls, plugin: str, hook: str, value: object, expected: str) -> PluginHookError:
        """The hook returned ``value``, not what its hookspec promises (``expected``, in words):
        ``cloud provider plugin 'p': karpy_create returned str 'x', expected a NodeClaim``."""
        shown = repr(value)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return cls(plugin, hook, None, returned=f"{type(value).__name__} {shown}, expected {expected}")


class NodeClaimNotFoundError(CloudProviderError):
    """The instance for a NodeClaim does not exist (any more). ``delete`` is done once this is raised."""


class InsufficientCapacityError(CloudProviderError):
    """None of the requested offerings could be launched; the NodeClaim is deleted and its pods
    provisioned again, with the failed offerings marked unavailable."""


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClaim's NodeClass is not Ready; the NodeClaim is deleted without a launch."""


class CreateError(CloudProviderError):
    """Launch failed in a way worth retrying.

    Attributes:
        condition_reason: set as the ``Launched`` condition's reason.
        condition_message: set as its message.
    """

    def __init__(self, message: str, *, condition_reason: str, condition_message: str | None = None, code: str | None = None):
        self.condition_reason = condition_reason
        self.condition_message = redact(condition_message or message)
        super().__init__(message, code=code)


class KubeAPIError(KarpyError):
    """The Kubernetes API answered with an error.

    Attributes:
        status: HTTP status (404, 409, 422, 429, ...).
        reason: the Status object's ``reason`` (``NotFound``, ``Conflict``, ``TooManyRequests``...).
        causes: the messages of the Status object's ``details.causes`` (e.g. which
            PodDisruptionBudget refused an eviction), possibly empty.
    """

    def __init__(self, message: str, *, status: int, reason: str = "", causes: tuple[str, ...] = ()):
        self.status = status
        self.reason = reason
        self.causes = tuple(redact(c) for c in causes)
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")

    @classmethod
    def from_status(cls, message: str, *, status: int, reason: str = "", causes: tuple[str, ...] = ()) -> KubeAPIError:
        """The error for an API answer: :class:`NotFoundError` for 404, :class:`ConflictError`
        for 409, :class:`TooManyRequestsError` for 429, :class:`InternalServerError` for 500, else
        a plain :class:`KubeAPIError`. ``reason`` defaults to the Status reason kube-apiserver
        gives 404 and 409 (``NotFound``, ``Conflict``); for 429 and 500 it stays as given (the
        Eviction API's 500 for several PDBs carries none)."""
        typed = _BY_STATUS.get(status)
        if typed is None:
            return KubeAPIError(message, status=status, reason=reason, causes=causes)
        cls_, default_reason = typed
        return cls_(message, status=status, reason=reason or default_reason, causes=causes)


class NotFoundError(KubeAPIError):
    """404: the object, or its kind (a CRD not installed), does not exist."""


class ConflictError(KubeAPIError):
    """409: the write used a stale ``resourceVersion`` (reason ``Conflict``) or the object
    already exists (reason ``AlreadyExists``)."""


class TooManyRequestsError(KubeAPIError):
    """429 Too Many Requests (reason ``TooManyRequests``): the API server throttled the call, or
    the Eviction API refused an eviction because a PodDisruptionBudget allows no disruption now
    (k8s ``pkg/registry/core/pod/storage/eviction.go``); retry after a backoff."""


class InternalServerError(KubeAPIError):
    """500 Internal Server Error (reason ``InternalError``, or none): the server failed. The Eviction API
    answers an eviction of a pod that more than one PodDisruptionBudget selects with it
    ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not
    support", k8s ``eviction.go``)."""


_BY_STATUS: dict[int, tuple[type[KubeAPIError], str]] = {
    404: (NotFoundError, "NotFound"),
    409: (ConflictError, "Conflict"),
    429: (TooManyRequestsError, ""),
    500: (InternalServerError, ""),
}


async def ignore_not_found(call: Awaitable[T]) -> T | None:
    """Await ``call``; None when it raised :class:`NotFoundError` (the object is already gone),
    its result otherwise. Every other error propagates (controller-runtime ``client.IgnoreNotFound``)."""
    try:
        return await call
    except NotFoundError:
        return None


class KubeUnreachableError(KarpyError):
    """No answer from the Kubernetes API server (connection refused, timeout, TLS or DNS failure):
    a runtime failure, not a mistake in the input (``karpy`` exits 1 on it, 2 on bad input)."""


async def ignore_kube_error(call: Awaitable[T]) -> T | None:
    """Await ``call``; None when the API answered with any error, 404 or not. Only for reads whose
    result is optional, e.g. a NodeClaim read for a metric's or an event's labels: a missing label
    beats a failed pass. Everything else uses :func:`ignore_not_found`."""
    try:
        return await call
    except KubeAPIError:
        return None
