"""HTTP transport to the Kubernetes API server: kubeconfig / in-cluster credentials over aiohttp.

The controller only speaks raw REST (JSON in, JSON out), so it does not need
``kubernetes_asyncio.client``, whose package import loads every generated API and model class
(about 55 MiB of the controller's resident memory, more than all of karpy). This module reads the
credentials itself for the cases a controller meets: the in-cluster service account (token file
re-read every minute, as client-go does for bound tokens), and kubeconfig users with a static
``token``/``tokenFile``, client certificates (files or inline data), or basic auth. A kubeconfig
user with an ``exec`` plugin or an ``auth-provider`` is handed to kubernetes-asyncio's loader
(imported only then), whose token (refreshed by its hooks) is sent the same way.

Errors: :func:`load_kubeconfig` raises ``OSError``/``yaml.YAMLError``/:class:`KubeconfigError`
(``ValueError``) for unusable files; requests raise ``aiohttp.ClientError``/``TimeoutError``
when the server cannot be reached.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import ssl
import tempfile
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
from aiolimiter import AsyncLimiter

from karpy_core.errors import KubeAPIError, KubeconfigError

__all__ = ["KubeconfigError", "Transport", "TokenSource", "load_incluster", "load_kubeconfig"]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_REREAD_SECONDS = 60.0
"""Seconds between two reads of a token file (projected service-account tokens rotate)."""
CONNECTION_LIMIT = 100
"""Concurrent connections to the API server (kubernetes-asyncio's default pool size)."""
READ_BUFSIZE = 2**21
"""aiohttp read buffer, bytes: one watch event line can be as large as an etcd object (1.5 MiB)."""


@dataclass(slots=True)
class TokenSource:
    """Where the ``Authorization`` header comes from; :meth:`header` gives its current value.

    Exactly one of: a fixed ``header`` value (``Bearer x`` / ``Basic y``), a ``token_file``
    re-read every :data:`TOKEN_REREAD_SECONDS`, or ``refresh`` (an async callable returning the
    header, for kubernetes-asyncio's exec/auth-provider loaders). All empty: no header.
    """

    fixed: str | None = None
    token_file: str | None = None
    refresh: Callable[[], Awaitable[str | None]] | None = None
    _cached: str | None = field(default=None, repr=False)
    _read_at: float = field(default=-1e18, repr=False)

    async def header(self) -> str | None:
        """The ``Authorization`` header value, or None to send none.

        Raises:
            OSError: the token file cannot be read.
        """
        if self.fixed is not None:
            return self.fixed
        if self.token_file is not None:
            now = time.monotonic()
            if now - self._read_at >= TOKEN_REREAD_SECONDS:
                token = await asyncio.to_thread(_read_text, self.token_file)
                self._cached = f"Bearer {token.strip()}"
                self._read_at = now
            return self._cached
        if self.refresh is not None:
            return await self.refresh()
        return None


@dataclass(frozen=True, slots=True)
class Access:
    """How to reach one API server: ``server`` URL, TLS settings and credentials.

    ``ca_file``/``cert_file``/``key_file`` are paths; ``ca_data`` is PEM text (inline
    ``certificate-authority-data``); ``cert_data``/``key_data`` are PEM bytes.
    """

    server: str
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None
    auth: TokenSource = field(default_factory=TokenSource)

    def ca_pem(self) -> str | None:
        """The PEM of the CA this access verifies the server with: ``ca_data``, else the text of
        ``ca_file``; None when neither is set or the file cannot be read (blocking: a file read)."""
        if self.ca_data:
            return self.ca_data
        if self.ca_file:
            try:
                return Path(self.ca_file).read_text()
            except OSError:
                return None
        return None

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for this server (``False`` for plain ``http://``).

        Raises:
            ssl.SSLError, OSError: unreadable certificates or keys.
        """
        if not self.server.startswith("https"):
            return False
        ctx = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, keyfile=self.key_file)
        elif self.cert_data:
            _load_chain_from_memory(ctx, self.cert_data, self.key_data)
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx


def _load_chain_from_memory(ctx: ssl.SSLContext, cert: bytes, key: bytes | None) -> None:
    """``load_cert_chain`` reads files only: write the PEM data to a private temporary file,
    load it and remove it at once."""
    fd, path = tempfile.mkstemp(prefix="karpy-client-", suffix=".pem")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(cert.rstrip(b"\n") + b"\n")
            if key:
                fh.write(key)
        ctx.load_cert_chain(path)
    finally:
        os.unlink(path)


class Transport:
    """One aiohttp session to the API server of ``access``; created at the first request.

    Args:
        access: server, TLS and credentials.
    """

    def __init__(self, access: Access, *, qps: float | None = None, burst: int | None = None):
        self.access = access
        self.write_guard: Callable[[], bool] | None = None
        """Asked right before a write (POST, PUT, PATCH, DELETE) other than of a Lease is sent:
        False refuses it (:meth:`request` raises). The operator sets it to the leader elector's
        :meth:`~karpy_core.kube.leader.LeaderElector.holds_lease`, so a leader frozen past its
        lease sends nothing it had queued (a fence as close to the wire as the client gets)."""
        self.read_only = False
        """True (``karpy controller --dry-run``): every request but ``GET`` is refused before it is
        sent (:meth:`request` raises), Leases included: the last fence of a dry run
        (:mod:`karpy_core.kube.dryrun`)."""
        self._session: aiohttp.ClientSession | None = None
        self._ssl: ssl.SSLContext | bool | None = None
        self.limiter: AsyncLimiter | None = None
        if qps is not None:
            self.rate_limit(qps, burst if burst is not None else max(1, int(qps)))

    def rate_limit(self, qps: float, burst: int) -> None:
        """Limit requests to ``qps`` per second with bursts of ``burst`` (client-go's token bucket,
        Karpenter ``KUBE_CLIENT_QPS``/``KUBE_CLIENT_BURST``): an aiolimiter leaky bucket of
        ``burst`` slots draining at ``qps`` per second. Every request waits for a slot before it
        is sent, watches included (each (re)connection is one request).

        Raises:
            ValueError: ``qps`` or ``burst`` not positive.
        """
        if qps <= 0 or burst <= 0:
            raise ValueError(f"rate limit needs positive qps and burst, got qps={qps} burst={burst}")
        self.limiter = AsyncLimiter(burst, burst / qps)

    @property
    def server(self) -> str:
        """The server URL (``https://host:port``)."""
        return self.access.server

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._ssl = self.access.ssl_context()
            connector = aiohttp.TCPConnector(limit=CONNECTION_LIMIT, ssl=self._ssl)
            fence = aiohttp.TraceConfig()
            fence.on_connection_create_end.append(_fence_at_the_wire)
            fence.on_connection_reuseconn.append(_fence_at_the_wire)
            self._session = aiohttp.ClientSession(connector=connector, trust_env=True, read_bufsize=READ_BUFSIZE,
                                                  trace_configs=[fence])
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> aiohttp.ClientResponse:
        """Send one request to ``server + path``; the caller reads and releases the response.

        ``body`` is JSON-encoded when given; ``timeout`` is the total seconds for the request
        (None: no limit). Query values are sent as strings (``True`` as ``true``).

        Raises:
            aiohttp.ClientError, OSError, TimeoutError: the server cannot be reached or did not answer.
            KubeAPIError: a write refused by :attr:`write_guard` (503, reason ``NotLeader``), or
                any request but GET while :attr:`read_only` (403, reason ``DryRun``).
        """
        if self.read_only and method != "GET":
            raise KubeAPIError.from_status(f"{method} {path} not sent: dry run, this client only reads", status=403,
                                           reason="DryRun")
        if self.limiter is not None:
            await self.limiter.acquire()
        session = self._get_session()
        hdrs = dict(headers or {})
        auth = await self.access.auth.header()
        if auth:
            hdrs["Authorization"] = auth
        params = [(k, _query_value(v)) for k, v in (query or ()) if v is not None]
        guard = self.write_guard
        fenced = _Fence(guard, method, path) if guard is not None and method != "GET" and "/leases" not in path else None
        if fenced is not None:
            fenced.check()
        return await session.request(
            method,
            self.access.server.rstrip("/") + path,
            params=params,
            headers=hdrs,
            data=json.dumps(body).encode() if body is not None else None,
            timeout=aiohttp.ClientTimeout(total=timeout),
            proxy=self.access.proxy,
            server_hostname=self.access.tls_server_name,
            trace_request_ctx=fenced,
        )

    async def close(self) -> None:
        """Close the session (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None


@dataclass(frozen=True)
class _Fence:
    """A write's leader fence: :attr:`Transport.write_guard` asked once the request has its
    rate-limit slot and credential, and again once its connection is in hand, right before aiohttp
    writes it (:func:`_fence_at_the_wire`)."""

    guard: Callable[[], bool]
    method: str
    path: str

    def check(self) -> None:
        """Raises:
            KubeAPIError: 503 ``NotLeader`` when the guard says this replica no longer leads."""
        if not self.guard():
            raise KubeAPIError.from_status(f"{self.method} {self.path} not sent: this replica no longer holds the leader lease",
                                           status=503, reason="NotLeader")


async def _fence_at_the_wire(session: aiohttp.ClientSession, ctx: Any, params: Any) -> None:
    """aiohttp's ``on_connection_create_end``/``on_connection_reuseconn`` trace: the last point
    before a request is written. A leader frozen (SIGSTOP, a long GC pause) after the first check
    but while its write waited for a rate-limit slot, a credential or a connection would otherwise
    send it on waking, past its lease: in a CI run a stopped leader's queued NodeClaim create went
    out 40 s later, after the new leader had launched for the same pods (an extra, empty node)."""
    fenced = getattr(ctx, "trace_request_ctx", None)
    if isinstance(fenced, _Fence):
        fenced.check()


def _query_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def load_incluster(sa_dir: str = SERVICE_ACCOUNT_DIR) -> Access:
    """The in-cluster service account: ``$KUBERNETES_SERVICE_HOST``/``_PORT``, its CA and token file.

    Raises:
        KubeconfigError: the environment or the service-account files are missing.
    """
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise KubeconfigError("Service host/port is not set.")
    token = os.path.join(sa_dir, "token")
    ca = os.path.join(sa_dir, "ca.crt")
    if not os.path.isfile(token):
        raise KubeconfigError("Service token file does not exist.")
    if not os.path.isfile(ca):
        raise KubeconfigError("Service certification file does not exist.")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return Access(server=f"https://{host}:{port}", ca_file=ca, auth=TokenSource(token_file=token))


def _named(entries: Any, name: str, what: str, key: str) -> dict[str, Any]:
    for entry in entries or ():
        if isinstance(entry, dict) and entry.get("name") == name:
            return entry.get(key) or {}
    raise KubeconfigError(f"Invalid kube-config file. Expected object with name {name} in {what} list")


def _read_text(path: str) -> str:
    """The text of ``path`` (run in a thread: file reads block the event loop)."""
    with open(path) as fh:
        return fh.read()


def _read_kubeconfig(path: str) -> tuple[Any, str]:
    """The kubeconfig at ``path`` parsed, and its directory (relative references resolve there).

    Raises:
        OSError: unreadable. yaml.YAMLError: not YAML, or a value JSON cannot carry (client-go
            reads kubeconfigs through sigs.k8s.io/yaml too: :mod:`karpy_core.utils.kubeyaml`).
    """
    from karpy_core.utils.kubeyaml import safe_load

    with open(path) as fh:
        return safe_load(fh.read()), os.path.dirname(os.path.abspath(path))


def _path(value: str, base: str) -> str:
    return value if os.path.isabs(value) else os.path.join(base, value)


async def load_kubeconfig(path: str, context: str | None = None) -> Access:
    """Read the kubeconfig at ``path`` for ``context`` (default: its ``current-context``).

    Relative file references are resolved against the kubeconfig's directory. A user with an
    ``exec`` plugin or an ``auth-provider`` is loaded through kubernetes-asyncio.

    Raises:
        OSError: unreadable files. yaml.YAMLError: not YAML.
        KubeconfigError: no such context/cluster/user, or no server.
    """
    doc, base = await asyncio.to_thread(_read_kubeconfig, path)
    if not isinstance(doc, dict):
        raise KubeconfigError("Invalid kube-config file. No configuration found.")
    ctx_name = context or doc.get("current-context")
    if not ctx_name:
        raise KubeconfigError("Invalid kube-config file. No current-context and no context given.")
    ctx = _named(doc.get("contexts"), ctx_name, "contexts", "context")
    cluster = _named(doc.get("clusters"), ctx.get("cluster", ""), "clusters", "cluster")
    user = _named(doc.get("users"), ctx["user"], "users", "user") if ctx.get("user") else {}
    if user.get("exec") or user.get("auth-provider"):
        access = await _load_with_kubernetes_asyncio(path, ctx_name)
        if isinstance(cluster.get("server"), str) and not has_scheme(cluster["server"]):
            # kubernetes-asyncio takes the server as written and reads the CA only for https://
            tls = _default_tls(cluster, user)
            ca_file = _path(cluster["certificate-authority"], base) if cluster.get("certificate-authority") else None
            ca_data = base64.b64decode(cluster["certificate-authority-data"]).decode() \
                if cluster.get("certificate-authority-data") else None
            access = replace(access, server=_server_url(cluster["server"], tls, ctx.get("cluster", "")),
                                         ca_file=access.ca_file or ca_file, ca_data=access.ca_data or ca_data)
        return access
    _check_types(cluster, _CLUSTER_STRINGS, f"clusters[{ctx.get('cluster', '')}].cluster")
    _check_types(user, _USER_STRINGS, f"users[{ctx.get('user', '')}].user")
    if not isinstance(cluster.get("insecure-skip-tls-verify", False), bool):
        raise KubeconfigError(f"Invalid kube-config file. clusters[{ctx.get('cluster', '')}].cluster.insecure-skip-tls-verify "
                              f"must be a boolean; got {type(cluster['insecure-skip-tls-verify']).__name__}")
    server = cluster.get("server")
    if not server:
        raise KubeconfigError("Invalid kube-config file. No server in the cluster entry.")
    server = _server_url(server, _default_tls(cluster, user), ctx.get("cluster", ""))
    auth = TokenSource()
    if user.get("token"):
        auth = TokenSource(fixed=f"Bearer {user['token']}")
    elif user.get("tokenFile"):
        auth = TokenSource(token_file=_path(user["tokenFile"], base))
    elif user.get("username") and user.get("password"):
        basic = base64.b64encode(f"{user['username']}:{user['password']}".encode()).decode()
        auth = TokenSource(fixed=f"Basic {basic}")
    return Access(
        server=server,
        ca_file=_path(cluster["certificate-authority"], base) if cluster.get("certificate-authority") else None,
        ca_data=base64.b64decode(cluster["certificate-authority-data"]).decode()
        if cluster.get("certificate-authority-data") else None,
        cert_file=_path(user["client-certificate"], base) if user.get("client-certificate") else None,
        key_file=_path(user["client-key"], base) if user.get("client-key") else None,
        cert_data=base64.b64decode(user["client-certificate-data"]) if user.get("client-certificate-data") else None,
        key_data=base64.b64decode(user["client-key-data"]) if user.get("client-key-data") else None,
        verify=not cluster.get("insecure-skip-tls-verify", False),
        tls_server_name=cluster.get("tls-server-name") or None,
        proxy=cluster.get("proxy-url") or None,
        auth=auth,
    )


def has_scheme(server: str) -> bool:
    """True when ``server`` is a URL with a scheme and a host (``https://10.0.0.1:6443``)."""
    parts = urllib.parse.urlsplit(server)
    return bool(parts.scheme and parts.netloc)


def _default_tls(cluster: dict[str, Any], user: dict[str, Any]) -> bool:
    """Whether a server written without a scheme is reached over TLS: when the kubeconfig gives a
    CA, a client certificate or ``insecure-skip-tls-verify`` (client-go ``rest/url_utils.go``
    ``defaultServerUrlFor``: ``hasCA || hasCert || config.Insecure``), else plain HTTP."""
    has_ca = bool(cluster.get("certificate-authority") or cluster.get("certificate-authority-data"))
    has_cert = bool(user.get("client-certificate") or user.get("client-certificate-data"))
    return has_ca or has_cert or cluster.get("insecure-skip-tls-verify") is True


def _server_url(server: str, tls: bool, cluster_name: str) -> str:
    """The cluster entry's ``server`` as a URL, as client-go reads it (``rest.DefaultServerURL``):
    a URL with a scheme and a host as written; a host or ``host:port`` (``127.0.0.1:6443``) gets
    ``https://`` when ``tls`` (:func:`_default_tls`), else ``http://``; a scheme-less value with a
    path (``127.0.0.1:6443/k8s``) is refused.

    Raises:
        KubeconfigError: naming the field (``clusters[NAME].cluster.server``) and the value; the
            caller adds the kubeconfig's path (``cannot use FILE: ...``).
    """
    if has_scheme(server):
        return server
    url = ("https://" if tls else "http://") + server
    parts = urllib.parse.urlsplit(url)
    if not parts.netloc or parts.path not in ("", "/"):
        raise KubeconfigError(f"Invalid kube-config file. clusters[{cluster_name}].cluster.server {server!r} "
                              "must be a URL (https://host:port) or a host:port pair")
    return url


_CLUSTER_STRINGS = ("server", "certificate-authority", "certificate-authority-data", "tls-server-name", "proxy-url")
"""The cluster entry's fields karpy reads, strings in client-go's ``Cluster`` type."""
_USER_STRINGS = ("token", "tokenFile", "username", "password", "client-certificate", "client-key",
                 "client-certificate-data", "client-key-data")
"""The user entry's fields karpy reads, strings in client-go's ``AuthInfo`` type."""


def _check_types(entry: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    """Refuse a field of ``keys`` in ``entry`` that is set but not a string, as client-go's
    decoding of a kubeconfig does (``cannot unmarshal number into ... of type string``); the
    base64 ``*-data`` fields must decode.

    Raises:
        KubeconfigError: naming the field (``where``.key) and the type found.
    """
    for key in keys:
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise KubeconfigError(f"Invalid kube-config file. {where}.{key} must be a string; got {type(value).__name__}")
        if key.endswith("-data"):
            try:
                base64.b64decode(value)
            except (binascii.Error, ValueError) as exc:
                raise KubeconfigError(f"Invalid kube-config file. {where}.{key} is not base64: {exc}") from None


async def _load_with_kubernetes_asyncio(path: str, context: str) -> Access:
    """exec plugins and auth-providers: kubernetes-asyncio runs and refreshes them."""
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    cfg = k8s_client.Configuration()
    try:
        await k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    except k8s_config.ConfigException as exc:
        raise KubeconfigError(str(exc)) from exc

    async def refresh() -> str | None:
        return await cfg.get_api_key_with_prefix("BearerToken")

    if not cfg.host:
        raise KubeconfigError(f"kubeconfig {path}: context {context!r} names no cluster server")
    return Access(
        server=cfg.host,
        ca_file=cfg.ssl_ca_cert,
        cert_file=cfg.cert_file,
        key_file=cfg.key_file,
        verify=bool(cfg.verify_ssl),
        tls_server_name=cfg.tls_server_name,
        proxy=cfg.proxy,
        auth=TokenSource(refresh=refresh),
    )
