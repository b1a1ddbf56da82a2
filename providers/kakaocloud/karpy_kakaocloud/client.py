"""An asyncio client for the KakaoCloud OpenAPI calls the provider needs (httpx.AsyncClient).

Shapes follow ``reference/kakaocloud-api.md`` ([SDK] kc-sdk-go v1.3.0): single resources are
wrapped under a singular key (``{"instance": {...}}``), lists under a plural key plus
``pagination{total, offset, limit}``; errors are ``{"error": {"code", "message"}}`` (Keystone's
``{"error": {"code": int, "message", "title"}}`` on IAM).

Behaviour:

* **Token**: ``POST /identity/v3/auth/tokens`` with the application credential; the token comes
  back in ``X-Subject-Token`` and goes out as ``X-Auth-Token``. It is cached, re-issued
  ``token_refresh_margin`` seconds before ``expires_at``, and re-issued once when a call answers
  401 (then the call is repeated once).
* **Retries** (tenacity): 429, 5xx and transport errors, exponential backoff from
  ``backoff_base`` to ``backoff_max`` seconds, ``max_attempts`` in all. Instance creation is sent
  once and never retried here: the provider repeats it (with a new launch nonce) at once only when
  the request never left (``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``: code ``NotSent``)
  and looks the VM up first after a 429, a 5xx, a read timeout or a dropped connection (code
  ``TransportError``), any of which may follow a VM the server made.
* **Errors** map onto :mod:`karpy_core.errors` through :class:`KakaoCloudAPIError` (a
  ``CloudProviderError`` keeping the API's ``code``), with the HTTP ``status`` and ``service``.
  Messages never carry the credential secret, the token or request bodies: the API's own message,
  which may echo the request (an IAM 400 quoting the credential, a 403 quoting ``X-Auth-Token``),
  is scrubbed (:func:`karpy_core.redaction.redact`) before it is cut to 500 characters and kept;
  every token issued is registered with :mod:`karpy_core.redaction`, and its logging filter blanks
  token headers in httpcore's DEBUG logs.

Error tree::

    CloudProviderError (karpy_core.errors)
    └── KakaoCloudAPIError           any non-2xx answer or transport failure; .status, .code, .service
        ├── KakaoCloudAuthError      401/403 (bad credentials, expired token after a re-issue, no permission)
        ├── KakaoCloudNotFoundError  404
        ├── KakaoCloudConflictError  409 (wrong instance state)
        ├── KakaoCloudInvalidError   400/422 (validation)
        └── KakaoCloudRetryableError 429/5xx/transport, after the retries ran out
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, wait_exponential

from karpy_core.errors import CloudProviderError
from karpy_core.redaction import RedactingFilter, redact, register_secret
from karpy_core.utils.timestamps import try_parse_rfc3339
from karpy_kakaocloud.credentials import Credentials
from karpy_kakaocloud.settings import KakaoCloudSettings

__all__ = [
    "KakaoCloudAPIError",
    "KakaoCloudAuthError",
    "KakaoCloudClient",
    "KakaoCloudConflictError",
    "KakaoCloudInvalidError",
    "KakaoCloudNotFoundError",
    "KakaoCloudRetryableError",
]

log = logging.getLogger(__name__)

USER_AGENT = "karpy-kakaocloud/0.1"
NOT_SENT = "NotSent"
"""``code`` of a :class:`KakaoCloudRetryableError` raised before the request left (connect
failure, connect or pool timeout): safe to repeat even for a create."""

# httpcore logs request and response headers at DEBUG (X-Auth-Token, X-Subject-Token): scrub them
# where they are logged, so they are blank even under logging set up by someone else than karpy.
_REDACT = RedactingFilter()
for _name in ("httpcore.http11", "httpcore.http2", "httpcore.connection", "httpx"):
    if not any(isinstance(f, RedactingFilter) for f in logging.getLogger(_name).filters):
        logging.getLogger(_name).addFilter(_REDACT)


class KakaoCloudAPIError(CloudProviderError):
    """A KakaoCloud API call failed.

    Attributes:
        status: HTTP status (0 for a transport failure).
        code: the API's error code (string; Keystone's integer code is stringified).
        service: ``iam``, ``bcs``, ``vpc``, ``network``, ``volume`` or ``kubernetes_engine``.
        api_message: the API's message.
    """

    def __init__(self, message: str, *, status: int, code: str | None, service: str):
        self.status = status
        self.service = service
        self.api_message = redact(message)
        super().__init__(f"KakaoCloud {service} HTTP {status}: {message}", code=code)


class KakaoCloudAuthError(KakaoCloudAPIError):
    """401/403: wrong application credential, a token the API refuses after a re-issue, or a
    missing permission (seed 004 lists the roles the access key needs)."""


class KakaoCloudNotFoundError(KakaoCloudAPIError):
    """404: no such resource (a deleted VM answers this once it is gone)."""


class KakaoCloudConflictError(KakaoCloudAPIError):
    """409: the resource is in a state that forbids the call."""


class KakaoCloudInvalidError(KakaoCloudAPIError):
    """400/422: the request violates the API's rules (e.g. a description over 100 characters)."""


class KakaoCloudRetryableError(KakaoCloudAPIError):
    """429, 5xx or a transport failure: retried with backoff; raised once the attempts run out."""


def _error_class(status: int) -> type[KakaoCloudAPIError]:
    if status in (401, 403):
        return KakaoCloudAuthError
    if status == 404:
        return KakaoCloudNotFoundError
    if status == 409:
        return KakaoCloudConflictError
    if status in (400, 422):
        return KakaoCloudInvalidError
    if status == 429 or status >= 500:
        return KakaoCloudRetryableError
    return KakaoCloudAPIError


def _parse_error(response: httpx.Response, service: str) -> KakaoCloudAPIError:
    code: str | None = None
    message = response.reason_phrase or "error"
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            if err.get("code") is not None:
                code = str(err["code"])
            message = str(err.get("message") or err.get("title") or message)
        elif isinstance(body.get("detail"), list):  # FastAPI HTTPValidationError
            code = "ValidationError"
            message = "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', []))}: {d.get('msg', '')}" for d in body["detail"] if isinstance(d, dict)
            )
    if code is None:
        code = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 429: "TooManyRequests"}.get(
            response.status_code, f"HTTP{response.status_code}"
        )
    # scrubbed before it is cut: half a secret would no longer be recognised
    return _error_class(response.status_code)(redact(message)[:500], status=response.status_code, code=code, service=service)


def _parse_expiry(text: str | None) -> float | None:
    return try_parse_rfc3339(text)


class KakaoCloudClient:
    """The OpenAPI client. Use as ``async with KakaoCloudClient(...) as c`` or call :meth:`aclose`.

    Args:
        credentials: the IAM application credential.
        settings: endpoints, timeouts, retries (defaults: the real hosts).
        clock: seconds since the epoch, compared with the token's ``expires_at``.
        sleep: the backoff sleep (``asyncio.sleep``); tests may pass a no-op.
        transport: an httpx transport (tests); the default is httpx's.
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        settings: KakaoCloudSettings | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self._credentials = credentials
        self.settings = settings or KakaoCloudSettings()
        self._clock = clock
        self._sleep = sleep
        self._http = httpx.AsyncClient(
            timeout=self.settings.request_timeout,
            transport=transport,
            headers={"Accept": "application/json", "User-Agent": USER_AGENT},
            follow_redirects=False,
        )
        self._token: str | None = None
        self._token_expires: float = 0.0
        self._token_lock = asyncio.Lock()
        self.project_id: str | None = credentials.project_id
        self.token_issued = 0
        """How many tokens were issued (for tests and metrics)."""

    def __repr__(self) -> str:
        return f"KakaoCloudClient(region={self._credentials.region!r})"

    async def __aenter__(self) -> KakaoCloudClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def url(self, service: str, path: str) -> str:
        return self.settings.endpoint(service, self._credentials.region) + path

    # ------------------------------------------------------------------ retries
    def _retrying(self, *, server_errors: bool = True, attempts: int | None = None) -> AsyncRetrying:
        def retryable(exc: BaseException) -> bool:
            if not isinstance(exc, KakaoCloudRetryableError):
                return False
            return server_errors or exc.status == 429 or exc.code == NOT_SENT

        s = self.settings
        return AsyncRetrying(
            stop=stop_after_attempt(max(1, s.max_attempts if attempts is None else attempts)),
            wait=wait_exponential(multiplier=s.backoff_base, min=s.backoff_base, max=s.backoff_max),
            retry=retry_if_exception(retryable),
            sleep=self._sleep,
            reraise=True,
        )

    async def _send(self, service: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            return await self._http.request(method, self.url(service, path), **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            # no connection, so no request: the server cannot have acted
            raise KakaoCloudRetryableError(
                f"{method} {path}: {type(exc).__name__}", status=0, code=NOT_SENT, service=service
            ) from None
        except httpx.TransportError as exc:
            # sent (maybe in part): the server may have acted (read timeout, dropped connection)
            raise KakaoCloudRetryableError(
                f"{method} {path}: {type(exc).__name__}", status=0, code="TransportError", service=service
            ) from None

    # ------------------------------------------------------------------ token
    async def _issue_token(self) -> str:
        body = {
            "auth": {
                "identity": {
                    "methods": ["application_credential"],
                    "application_credential": {
                        "id": self._credentials.credential_id,
                        "secret": self._credentials.secret.reveal(),
                    },
                }
            }
        }
        async for attempt in self._retrying():
            with attempt:
                r = await self._send("iam", "POST", "/identity/v3/auth/tokens", json=body,
                                     headers={"Content-Type": "application/json"})
                if r.status_code >= 300:
                    raise _parse_error(r, "iam")
        token: str | None = r.headers.get("X-Subject-Token")
        register_secret(token)
        if not token:
            raise KakaoCloudAuthError("token response has no X-Subject-Token header", status=r.status_code,
                                      code="NoToken", service="iam")
        info: dict[str, Any] = {}
        try:
            info = (r.json() or {}).get("token") or {}
        except ValueError:
            pass
        expires = _parse_expiry(info.get("expires_at")) or self._clock() + 3600.0
        project = (info.get("project") or {}).get("id")
        if project and not self.project_id:
            self.project_id = str(project)
        self._token, self._token_expires = token, expires
        self.token_issued += 1
        log.info("kakaocloud: issued an IAM token", extra={"expires_at": info.get("expires_at")})
        return token

    async def token(self, *, force: bool = False) -> str:
        """A valid token, issuing one when none is cached, it is within the refresh margin of
        expiry, or ``force`` is set.

        Raises:
            KakaoCloudAuthError: the credential was refused.
            KakaoCloudRetryableError: IAM kept failing.
        """
        async with self._token_lock:
            if (
                force
                or self._token is None
                or self._clock() >= self._token_expires - self.settings.token_refresh_margin
            ):
                return await self._issue_token()
            return self._token

    def invalidate_token(self) -> None:
        self._token = None

    # ------------------------------------------------------------------ requests
    async def request(
        self,
        service: str,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        retry_server_errors: bool = True,
        attempts: int | None = None,
    ) -> Any:
        """One authenticated call; returns the decoded JSON body (None when empty). ``attempts``
        overrides ``max_attempts`` (1: no retry); ``retry_server_errors=False`` retries only what
        cannot have acted (429, ``NotSent``).

        Raises:
            KakaoCloudAPIError: a subclass per status (see the module docstring).
        """
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        reauthed = False
        async for attempt in self._retrying(server_errors=retry_server_errors, attempts=attempts):
            with attempt:
                while True:
                    token = await self.token()
                    headers = {"X-Auth-Token": token}
                    if json is not None:
                        headers["Content-Type"] = "application/json"
                    r = await self._send(service, method, path, params=clean, json=json, headers=headers)
                    if r.status_code == 401 and not reauthed:
                        reauthed = True
                        async with self._token_lock:
                            if self._token == token:
                                self._token = None
                        continue
                    break
                if r.status_code >= 300:
                    raise _parse_error(r, service)
        if not r.content:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    async def paginate(self, service: str, path: str, key: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Every item of a paginated list (``limit``/``offset``, until ``total`` is reached)."""
        out: list[dict[str, Any]] = []
        offset = 0
        limit = self.settings.page_size
        while True:
            body = await self.request(service, "GET", path, params={**(params or {}), "limit": limit, "offset": offset}) or {}
            items = body.get(key) or []
            out.extend(items)
            total = (body.get("pagination") or {}).get("total")
            offset += limit
            if not items or total is None or offset >= int(total):
                return out

    # ------------------------------------------------------------------ BCS instances
    async def create_instance(self, instance: dict[str, Any]) -> dict[str, Any]:
        """``POST /api/v1/instances`` with ``{"instance": ...}``; returns ``{id, security_groups, ...}``.

        Sent once: never retried here. The provider repeats a POST that never left (code
        ``NotSent``) with a new launch nonce, and looks the VM up after anything else.

        Raises:
            KakaoCloudRetryableError: 429, 5xx or ``status`` 0 with code ``TransportError`` (the
                server may have acted), or code ``NotSent`` (it did not).
            KakaoCloudAPIError: other refusals (subclass per status).
        """
        body = await self.request("bcs", "POST", "/api/v1/instances", json={"instance": instance}, retry_server_errors=False,
                                  attempts=1)
        return (body or {}).get("instance") or {}

    async def list_instances(self, **filters: Any) -> list[dict[str, Any]]:
        """``GET /api/v1/instances`` (all pages); filters as in reference §2 (``name`` is a substring)."""
        return await self.paginate("bcs", "/api/v1/instances", "instances", filters)

    async def get_instance(self, instance_id: str) -> dict[str, Any]:
        """``GET /api/v1/instances/{id}``. Raises KakaoCloudNotFoundError once it is gone."""
        return ((await self.request("bcs", "GET", f"/api/v1/instances/{instance_id}")) or {}).get("instance") or {}

    async def update_instance_description(self, instance_id: str, description: str) -> dict[str, Any]:
        """``PUT /api/v1/instances/{id}`` with ``{"instance": {"description": ...}}`` (<= 100 characters)."""
        body = await self.request("bcs", "PUT", f"/api/v1/instances/{instance_id}", json={"instance": {"description": description}})
        return (body or {}).get("instance") or {}

    async def delete_instance(self, instance_id: str) -> bool:
        """``DELETE /api/v1/instances/{id}``; False when it was already gone (404)."""
        try:
            await self.request("bcs", "DELETE", f"/api/v1/instances/{instance_id}")
        except KakaoCloudNotFoundError:
            return False
        return True

    # ------------------------------------------------------------------ BCS flavors, key pairs
    async def list_flavors(self, **filters: Any) -> list[dict[str, Any]]:
        return await self.paginate("bcs", "/api/v1/flavors", "flavors", filters)

    async def get_flavor(self, flavor_id: str) -> dict[str, Any]:
        return ((await self.request("bcs", "GET", f"/api/v1/flavors/{flavor_id}")) or {}).get("flavor") or {}

    async def list_keypairs(self, **filters: Any) -> list[dict[str, Any]]:
        return await self.paginate("bcs", "/api/v1/keypairs", "keypairs", filters)

    async def get_keypair(self, name: str) -> dict[str, Any]:
        return ((await self.request("bcs", "GET", f"/api/v1/keypairs/{name}")) or {}).get("keypair") or {}

    # ------------------------------------------------------------------ VPC, Network, Volume
    async def list_subnets(self, **filters: Any) -> list[dict[str, Any]]:
        return await self.paginate("vpc", "/api/v1/subnets", "subnets", filters)

    async def get_subnet(self, subnet_id: str) -> dict[str, Any]:
        return ((await self.request("vpc", "GET", f"/api/v1/subnets/{subnet_id}")) or {}).get("subnet") or {}

    async def list_security_groups(self, **filters: Any) -> list[dict[str, Any]]:
        return await self.paginate("network", "/api/v1/security-groups", "security_groups", filters)

    async def get_security_group(self, sg_id: str) -> dict[str, Any]:
        body = await self.request("network", "GET", f"/api/v1/security-groups/{sg_id}")
        return (body or {}).get("security_group") or {}

    async def list_volume_types(self) -> list[dict[str, Any]]:
        """``GET /api/v1/volumes/types`` (unpaginated) -> ``[{id, name, description}]``."""
        return ((await self.request("volume", "GET", "/api/v1/volumes/types")) or {}).get("volume_types") or []

    # ------------------------------------------------------------------ Kubernetes Engine
    async def list_worker_images(self, **filters: Any) -> list[dict[str, Any]]:
        """KE ``GET /api/v1/images`` (filters ``os_distro``, ``instance_type``, ``is_gpu_type``,
        ``k8s_version``) -> ``[{id, name, architecture, is_gpu_type, instance_type, k8s_version, ...}]``."""
        return ((await self.request("kubernetes_engine", "GET", "/api/v1/images", params=filters)) or {}).get("images") or []

    async def list_versions(self) -> list[dict[str, Any]]:
        """KE ``GET /api/v1/versions`` -> ``[{minor_version, patch_version, next_version, eol, is_deprecated}]``."""
        return ((await self.request("kubernetes_engine", "GET", "/api/v1/versions")) or {}).get("versions") or []

    async def get_cluster(self, name: str) -> dict[str, Any]:
        """KE ``GET /api/v1/clusters/{name}`` -> Cluster (``id``, ``version``, ``control_plane_endpoint``...)."""
        return ((await self.request("kubernetes_engine", "GET", f"/api/v1/clusters/{name}")) or {}).get("cluster") or {}
