"""How KakaoCloud API failures during ``karpy_create`` become karpy's errors (one place).

:func:`create_failure` maps, for the ``Launched`` condition:

* an authentication failure -> ``CreateError`` ``AuthenticationFailed`` (any phase);
* during the create POST: an invalid request -> ``CreateError`` ``InvalidRequest``; an error whose
  code names capacity or quota -> ``InsufficientCapacityError``; anything else ->
  ``CreateError`` ``CreateFailed``;
* in any other phase (setup, lookups, waiting for the VM) -> ``CreateError`` ``APIUnavailable``.

The cloud's error code is kept in ``code``.
"""

from __future__ import annotations

from enum import Enum

from karpy_core.errors import CloudProviderError, CreateError, InsufficientCapacityError
from karpy_kakaocloud.client import KakaoCloudAPIError, KakaoCloudAuthError, KakaoCloudInvalidError

__all__ = ["CreatePhase", "create_failure"]


class CreatePhase(Enum):
    """Where in ``karpy_create`` an API call failed."""

    SETUP = "setup"
    """Credentials, cluster identity, NodeClass, flavors, lookups of earlier attempts, waiting."""
    POST = "post"
    """The ``POST /api/v1/instances`` itself."""


def create_failure(exc: KakaoCloudAPIError, phase: CreatePhase = CreatePhase.SETUP) -> CloudProviderError:
    """The error ``karpy_create`` raises for ``exc`` (see the module docstring); raise it ``from None``
    so the request (and any secret in it) stays out of the traceback."""
    if isinstance(exc, KakaoCloudAuthError):
        return CreateError(str(exc), condition_reason="AuthenticationFailed", code=exc.code)
    if phase is CreatePhase.POST:
        if isinstance(exc, KakaoCloudInvalidError):
            return CreateError(str(exc), condition_reason="InvalidRequest", code=exc.code)
        if any(w in (exc.code or "").lower() for w in ("capacity", "quota")):
            return InsufficientCapacityError(str(exc), code=exc.code)
        return CreateError(str(exc), condition_reason="CreateFailed", code=exc.code)
    return CreateError(str(exc), condition_reason="APIUnavailable", code=exc.code)
