"""Translate botocore errors into karpy's error tree, in one place.

Every AWS call of the plugin runs inside :func:`aws_errors`, which maps a ``botocore``
``ClientError`` (or a transport error) to the most specific :mod:`karpy_core.errors` class,
**keeps the AWS error code** in ``code=`` and chains the original exception::

    InvalidInstanceID.NotFound, InvalidInstanceID.Malformed  -> NodeClaimNotFoundError
    ICE_CODES (InsufficientInstanceCapacity, ...)             -> InsufficientCapacityError
    any other code during a launch (``launch=True``)          -> CreateError (reason = the code)
    anything else                                             -> CloudProviderError

Throttling codes (:data:`THROTTLE_CODES`) are retried with exponential backoff by
:func:`call` before they are mapped. Messages never contain request parameters or credentials:
only the operation name, the AWS code and AWS's own message.

Sources: Karpenter ``pkg/errors/errors.go`` (unfulfillable-capacity codes, not-found codes),
reference ``karpenter-aws-behaviour.md`` section 2.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from karpy_core.errors import (
    CloudProviderError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)

__all__ = [
    "ICE_CODES",
    "NOT_FOUND_CODES",
    "THROTTLE_CODES",
    "SPOT_SLR_CODE",
    "SPOT_SLR_FIX",
    "error_code",
    "is_throttle",
    "aws_errors",
    "call",
]

log = logging.getLogger("karpy.aws")

ICE_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "Unsupported",
        "InsufficientFreeAddressesInSubnet",
        "MaxFleetCountExceeded",
        "ReservationCapacityExceeded",
    }
)
"""CreateFleet error codes Karpenter treats as "this offering cannot be launched now": each marks
its (capacity type, instance type, zone) unavailable for 3 minutes."""

NOT_FOUND_CODES = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
"""Codes meaning the instance does not exist: NodeClaimNotFoundError."""

THROTTLE_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException", "RequestThrottled",
     "SlowDown", "EC2ThrottledException"}
)
"""Codes retried with backoff by :func:`call`."""

SPOT_SLR_CODE = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"
SPOT_SLR_FIX = "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com"
"""The missing spot service-linked role and the one command that fixes it (seed 002)."""


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a ``ClientError`` (``"InvalidInstanceID.NotFound"``), else None."""
    if isinstance(exc, ClientError):
        return str((exc.response.get("Error") or {}).get("Code") or "") or None
    return None


def _message(exc: ClientError) -> str:
    return str((exc.response.get("Error") or {}).get("Message") or "")


def is_throttle(exc: BaseException) -> bool:
    """True for a ``ClientError`` whose code is in :data:`THROTTLE_CODES`."""
    return error_code(exc) in THROTTLE_CODES


@contextlib.contextmanager
def aws_errors(operation: str, *, launch: bool = False, subject: str = "") -> Iterator[None]:
    """Map botocore errors raised inside the block to karpy errors (see the module docstring).

    Args:
        operation: the EC2/SSM/IAM/SQS operation name, used in the message (``"CreateFleet"``).
        launch: the block is part of ``karpy_create``; unknown codes become ``CreateError`` with
            the AWS code as ``condition_reason``.
        subject: what the call was about (``"NodeClaim default-abc"``), prefixed to the message.

    Raises:
        NodeClaimNotFoundError, InsufficientCapacityError, CreateError, CloudProviderError.
    """
    prefix = f"{subject}: " if subject else ""
    try:
        yield
    except ClientError as exc:
        code = error_code(exc) or "Unknown"
        text = f"{prefix}{operation} failed: {_message(exc)}"
        if code in NOT_FOUND_CODES:
            raise NodeClaimNotFoundError(text, code=code) from exc
        if code in ICE_CODES:
            raise InsufficientCapacityError(text, code=code) from exc
        if launch:
            raise CreateError(text, condition_reason=code.replace(".", ""), condition_message=text, code=code) from exc
        raise CloudProviderError(text, code=code) from exc
    except BotoCoreError as exc:
        # Transport/credential errors: the class name is safe to show, the message may hold a URL.
        text = f"{prefix}{operation} failed: {type(exc).__name__}: {exc}"
        if launch:
            raise CreateError(text, condition_reason="LaunchFailed", code=type(exc).__name__) from exc
        raise CloudProviderError(text, code=type(exc).__name__) from exc


async def call(
    fn: Callable[..., Awaitable[Any]],
    operation: str,
    *,
    attempts: int = 5,
    launch: bool = False,
    subject: str = "",
    **kwargs: Any,
) -> Any:
    """``await fn(**kwargs)``, retrying throttling errors (exponential backoff 0.2 s .. 5 s, at
    most ``attempts`` tries, tenacity), mapping the final error with :func:`aws_errors`.

    Returns: the parsed AWS response (a dict).
    """
    with aws_errors(operation, launch=launch, subject=subject):
        async for attempt in AsyncRetrying(
            retry=retry_if_exception(is_throttle),
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=0.2, max=5),
            reraise=True,
        ):
            with attempt:
                return await fn(**kwargs)
    raise AssertionError("unreachable")  # pragma: no cover
