"""karpy's error tree. Every error karpy raises on purpose derives from :class:`KarpyError`::

    KarpyError
    ├── ManifestError              a user's YAML is wrong; names file, document, kind/name, field
    ├── ConfigurationError         bad CLI options, settings or missing plugins/extras
    ├── CloudProviderError         a cloud call failed; keeps the cloud's error ``code``
    │   ├── NodeClaimNotFoundError     the instance behind a NodeClaim is gone
    │   ├── InsufficientCapacityError  no offering could be launched (ICE and friends)
    │   ├── NodeClassNotReadyError     the NodeClass is not Ready; nothing was launched
    │   └── CreateError                launch failed; carries a condition reason and message
    ├── KubeAPIError               the Kubernetes API refused a call (status code, reason)
    └── KubeUnreachableError       the Kubernetes API server could not be reached at all

The cloud-provider classes mirror Karpenter's ``pkg/cloudprovider/types.go`` errors and the
reactions the NodeClaim lifecycle controller has to each.
"""

from __future__ import annotations

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
    "KubeUnreachableError",
]


class KarpyError(Exception):
    """Root of every error karpy raises deliberately."""


class ManifestError(KarpyError):
    """A manifest is malformed or violates the API's rules.

    Attributes:
        problems: one line per problem, each naming ``file``, document index, ``kind/name`` and
            the field path, e.g. ``nodepool.yaml doc 1 NodePool/default: spec.limits.cpu: ...``.
    """

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class ConfigurationError(KarpyError):
    """Invalid settings, CLI options, or a plugin/extra that is missing."""


class CloudProviderError(KarpyError):
    """A cloud API call failed.

    Attributes:
        code: the cloud's own error code (e.g. ``InsufficientInstanceCapacity``), or None.
    """

    def __init__(self, message: str, *, code: str | None = None):
        self.code = code
        super().__init__(f"{code}: {message}" if code else message)


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
        self.condition_message = condition_message or message
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
        self.causes = tuple(causes)
        super().__init__(f"{status} {reason}: {message}" if reason else f"{status}: {message}")


class KubeUnreachableError(KarpyError):
    """No answer from the Kubernetes API server (connection refused, timeout, TLS or DNS failure):
    a runtime failure, not a mistake in the input (``karpy`` exits 1 on it, 2 on bad input)."""
