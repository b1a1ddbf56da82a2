"""The ``KubeClient`` port over HTTP, for real clusters.

Every call goes to the resource's REST path (:class:`~karpy_core.kube.transport.Transport`, one
aiohttp session) with raw JSON in and out, so core kinds and custom resources are handled the
same way and objects stay plain dicts (the shape the in-memory adapter and every controller use).
kubernetes-asyncio's generated client is not imported (it costs ~55 MiB of resident memory);
credentials come from :mod:`karpy_core.kube.transport`. Patches are JSON merge-patches
(``application/merge-patch+json``).

Watches use ``?watch=true&allowWatchBookmarks=true`` from the list's ``resourceVersion``, follow
bookmarks, reconnect after the server-side timeout, and relist (emitting a synthetic ADDED for each
object, DELETED for objects gone meanwhile) when the server answers 410 Gone.

Writes: every ``create``, ``patch`` and ``replace`` body passes
:func:`karpy_core.redaction.redact_stored` first (status fields and Event text scrubbed of
credentials), as in the in-memory adapter.

Errors: non-2xx answers raise :class:`karpy_core.errors.KubeAPIError` with the status code and the
Status object's reason and message.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import logging
import ssl
from collections.abc import AsyncIterator
from typing import Any

from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KINDS, KindInfo, KubeObject, Pod, WatchEvent
from karpy_core.kube.transport import Transport
from karpy_core.redaction import redact_stored

__all__ = ["AsyncKubeClient", "MERGE_PATCH", "kubernetes_api_client"]

log = logging.getLogger(__name__)

MERGE_PATCH = "application/merge-patch+json"
REQUEST_TIMEOUT = 60.0
"""Seconds for one ordinary request."""
WATCH_TIMEOUT = 300
"""Server-side watch timeout (``timeoutSeconds``); the watch reconnects afterwards."""
RELIST_BACKOFF = 0.8
RELIST_BACKOFF_MAX = 30.0
"""Seconds before a relist that follows another 410 Gone with no event in between: 0.8 s doubling
up to 30 s (client-go's reflector backoff, ``NewExponentialBackoffManager(800ms, 30s, ...)``); the
first relist after a working watch is immediate. Without it a server (or proxy) answering every
watch with 410 had each informer relisting in a tight loop, ~80 LISTs a second for nine kinds."""


class AsyncKubeClient:
    """Implements :class:`karpy_core.kube.port.KubeClient` against a real API server.

    Args:
        transport: the HTTP transport to the API server (owned: :meth:`close` closes it).
        field_manager: ``fieldManager`` sent on writes.
    """

    def __init__(self, transport: Transport, *, field_manager: str = "karpy"):
        self.transport = transport
        self.field_manager = field_manager

    @classmethod
    async def from_config(cls, kubeconfig: str | None = None, context: str | None = None, *,
                          qps: float | None = None, burst: int | None = None) -> AsyncKubeClient:
        """Connect using a kubeconfig file (``kubeconfig``, else ``$KUBECONFIG``, else
        ``~/.kube/config``), or the in-cluster service account when none of them is given or
        exists and ``$KUBERNETES_SERVICE_HOST`` is set (inside a pod). Nothing is sent yet; see
        :meth:`probe`. ``qps``/``burst``: a client-side rate limit on every request
        (:meth:`~karpy_core.kube.transport.Transport.rate_limit`; None: none).

        Raises:
            ConfigurationError: the kubeconfig given (argument or ``$KUBECONFIG``) does not exist
                or cannot be read, or there is no kubeconfig and karpy is not in a pod.
        """
        import yaml

        from karpy_core.kube.transport import load_incluster, load_kubeconfig

        path = _config_path(kubeconfig)
        try:
            access = await load_kubeconfig(path, context) if path else load_incluster()
        except (yaml.YAMLError, *_CONFIG_ERRORS) as exc:
            raise _config_error(path, exc) from exc
        return cls(Transport(access, qps=qps, burst=burst))

    async def probe(self, timeout: float = 10.0) -> str:
        """``GET /version`` once: the server's ``gitVersion``. Called by the CLI before anything
        else, as controller-runtime's manager does at start, so an unreachable server is one line.

        Raises:
            KubeUnreachableError: no answer within ``timeout`` seconds (refused, TLS, DNS...).
            KubeAPIError: the server answered with an error status (e.g. 401 Unauthorized).
        """
        import aiohttp

        from karpy_core.errors import KubeUnreachableError

        host = self.transport.server or "?"
        try:
            payload = await asyncio.wait_for(self._request("GET", "/version", timeout=timeout), timeout + 1.0)
        except aiohttp.ClientConnectorCertificateError as exc:
            raise KubeUnreachableError(
                f"the Kubernetes API server at {host} answered, but its TLS certificate is not trusted "
                f"({_certificate_reason(exc)}); check the kubeconfig's certificate-authority(-data) "
                "for this cluster"
            ) from exc
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            if isinstance(exc, aiohttp.ClientSSLError) or isinstance(exc.__cause__, ssl.SSLError):
                reason = _certificate_reason(exc)
                plain = " (the server seems to speak plain HTTP, not HTTPS)" if "wrong version number" in reason.lower() else ""
                raise KubeUnreachableError(
                    f"the Kubernetes API server at {host} answered, but the TLS handshake failed: {reason}{plain}"
                ) from exc
            detail = str(exc) or type(exc).__name__
            raise KubeUnreachableError(f"cannot reach the Kubernetes API server at {host}: {detail}") from exc
        return str((payload or {}).get("gitVersion", "")) if isinstance(payload, dict) else ""

    async def cluster_ca_pem(self) -> str | None:
        """The CA (PEM) this client verifies the API server with (kubeconfig
        ``certificate-authority(-data)``, the service account's ``ca.crt`` in a pod), or None
        (none configured, or its file unreadable): what karpy hands a plugin as
        :attr:`ProviderContext.cluster_ca_pem <karpy_core.cloudprovider.context.ProviderContext.cluster_ca_pem>`."""
        return await asyncio.to_thread(self.transport.access.ca_pem)

    async def close(self) -> None:
        """Close the HTTP session."""
        await self.transport.close()

    async def __aenter__(self) -> AsyncKubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- plumbing ---------------------------------------------------------------------------
    @staticmethod
    def _info(kind: str) -> KindInfo:
        info = KINDS.get(kind)
        if info is None:
            raise KubeAPIError.from_status(f"kind {kind} is not known to karpy", status=404, reason="NotFound")
        return info

    def _path(self, kind: str, name: str | None = None, namespace: str | None = None, sub: str | None = None) -> str:
        info = self._info(kind)
        base = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
        if info.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        path = f"{base}/{info.plural}"
        if name is not None:
            path += f"/{name}"
        if sub:
            path += f"/{sub}"
        return path

    async def _request(
        self,
        method: str,
        path: str,
        *,
        query: list[tuple[str, Any]] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: float | None = REQUEST_TIMEOUT,
    ) -> Any:
        resp = await self.transport.request(
            method, path, query=query, headers={"Content-Type": content_type, "Accept": "application/json"},
            body=body, timeout=timeout,
        )
        try:
            data = await resp.read()
        finally:
            resp.release()
        status = resp.status
        try:
            payload = json.loads(data) if data else None
        except ValueError:
            if 200 <= status <= 299:
                raise KubeAPIError.from_status(f"unreadable response to {method} {path}: {data[:200]!r}", status=status) from None
            # Not a Kubernetes Status (a proxy's HTML page, say): name the request, keep a short preview.
            preview = " ".join(data.decode(errors="replace").split())[:200]
            payload = {"message": f"{method} {path}: the server answered with a body that is not a Kubernetes Status: {preview!r}",
                       "reason": "NotFound" if status == 404 else ""}
        if not 200 <= status <= 299:
            reason = (payload or {}).get("reason", "") if isinstance(payload, dict) else ""
            message = (payload or {}).get("message", data.decode(errors="replace")) if isinstance(payload, dict) else str(data)
            causes = ((payload.get("details") or {}).get("causes") or []) if isinstance(payload, dict) else []
            raise KubeAPIError.from_status(message, status=status, reason=reason,
                               causes=tuple(str(c.get("message", "")) for c in causes if isinstance(c, dict)))
        return payload

    # ---- KubeClient -------------------------------------------------------------------------
    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[dict[str, Any]]:
        items, _ = await self.list_with_version(kind, namespace, label_selector)
        return items

    async def list_with_version(
        self, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[builtins.list[dict[str, Any]], str]:
        """Objects of ``kind`` (sorted by namespace, name) and the list's ``resourceVersion``."""
        info = self._info(kind)
        query: list[tuple[str, Any]] = [("limit", 500)]
        if label_selector:
            query.append(("labelSelector", label_selector))
        items: list[dict[str, Any]] = []
        rv = ""
        cont = None
        while True:
            q = [*query, ("continue", cont)] if cont else query
            page = await self._request("GET", self._path(kind, namespace=namespace), query=q)
            for item in page.get("items") or ():
                item.setdefault("apiVersion", info.api_version)
                item.setdefault("kind", kind)
                items.append(item)
            rv = (page.get("metadata") or {}).get("resourceVersion", rv)
            cont = (page.get("metadata") or {}).get("continue")
            if not cont:
                break
        items.sort(key=lambda o: ((o["metadata"].get("namespace") or ""), o["metadata"]["name"]))
        return items, rv

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = await self._request("GET", self._path(kind, name, self._ns(kind, namespace)))
        return out

    def _ns(self, kind: str, namespace: str | None) -> str | None:
        return (namespace or "default") if self._info(kind).namespaced else None

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        info = self._info(kind)
        body = dict(redact_stored(kind, obj))
        body.setdefault("apiVersion", info.api_version)
        body.setdefault("kind", kind)
        ns = self._ns(kind, (obj.get("metadata") or {}).get("namespace"))
        query = [("fieldManager", self.field_manager)]
        out: dict[str, Any] = await self._request("POST", self._path(kind, namespace=ns), query=query, body=body)
        return out

    async def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        path = self._path(kind, name, self._ns(kind, namespace), "status" if status else None)
        query = [("fieldManager", self.field_manager)]
        out: dict[str, Any] = await self._request("PATCH", path, query=query, body=redact_stored(kind, patch),
                                                  content_type=MERGE_PATCH)
        return out

    async def replace(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        meta = obj.get("metadata") or {}
        path = self._path(kind, meta.get("name"), self._ns(kind, meta.get("namespace")))
        out: dict[str, Any] = await self._request("PUT", path, query=[("fieldManager", self.field_manager)],
                                                  body=redact_stored(kind, obj))
        return out

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        await self._request("DELETE", self._path(kind, name, self._ns(kind, namespace)), body=body)

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "default")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
        }
        await self._request("POST", self._path("Pod", meta["name"], meta.get("namespace", "default"), "binding"), body=body)

    async def evict(self, pod: Pod | KubeObject) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "default")},
            "deleteOptions": {"preconditions": {"uid": meta.get("uid")}} if meta.get("uid") else {},
        }
        await self._request("POST", self._path("Pod", meta["name"], meta.get("namespace", "default"), "eviction"), body=body)

    async def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        """ADDED for every current object, then live events; survives timeouts and 410 Gone."""
        known: dict[tuple[str, str], dict[str, Any]] = {}
        items, rv = await self.list_with_version(kind)
        for item in items:
            known[_key(item)] = item
            yield WatchEvent("ADDED", item)
        yield WatchEvent("SYNCED", {"metadata": {"resourceVersion": rv}})
        info = self._info(kind)
        gone_in_a_row = 0
        while True:
            try:
                async for etype, obj in self._watch_once(kind, rv):
                    if etype != "ERROR":
                        gone_in_a_row = 0  # the watch delivers again
                    if etype == "BOOKMARK":
                        rv = obj["metadata"].get("resourceVersion", rv)
                        continue
                    if etype == "ERROR":
                        if obj.get("code") == 410:
                            raise _Gone()
                        raise KubeAPIError.from_status(
                            obj.get("message", "watch error"), status=int(obj.get("code") or 500), reason=obj.get("reason", "")
                        )
                    obj.setdefault("apiVersion", info.api_version)
                    obj.setdefault("kind", kind)
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if etype == "DELETED":
                        known.pop(_key(obj), None)
                    else:
                        known[_key(obj)] = obj
                    yield WatchEvent(etype, obj)
            except _Gone:
                gone_in_a_row += 1
                if gone_in_a_row > 1:
                    delay = min(RELIST_BACKOFF_MAX, RELIST_BACKOFF * 2 ** (gone_in_a_row - 2))
                    log.info("watch expired again before any event; backing off", extra={"kind": kind, "seconds": delay})
                    await asyncio.sleep(delay)
                log.info("watch expired (410 Gone); relisting", extra={"kind": kind})
                items, rv = await self.list_with_version(kind)
                current = {_key(i): i for i in items}
                for k in sorted(set(known) - set(current)):
                    yield WatchEvent("DELETED", known[k])
                for k, item in current.items():
                    yield WatchEvent("ADDED" if k not in known else "MODIFIED", item)
                known = current
            except (TimeoutError, ConnectionError) as exc:
                log.info("watch interrupted; reconnecting", extra={"kind": kind, "error": exc})
                await asyncio.sleep(1.0)

    async def _watch_once(self, kind: str, rv: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", WATCH_TIMEOUT),
            ("resourceVersion", rv),
        ]
        resp = await self.transport.request(
            "GET", self._path(kind), query=query, headers={"Accept": "application/json"}, timeout=WATCH_TIMEOUT + 30
        )
        try:
            if resp.status == 410:
                raise _Gone()
            if resp.status != 200:
                raise KubeAPIError.from_status((await resp.read()).decode(errors="replace"), status=resp.status)
            async for line in resp.content:
                line = line.strip()
                if not line:
                    continue
                event = json.loads(line)
                yield event.get("type", ""), event.get("object") or {}
        finally:
            resp.release()


def _certificate_reason(exc: BaseException) -> str:
    """The short reason of a TLS failure (``self-signed certificate``, ``certificate has expired``,
    ``Hostname mismatch...``): OpenSSL's ``verify_message``/``reason`` when there is one, else the
    exception's text."""
    inner: BaseException | None = getattr(exc, "certificate_error", None) or exc.__cause__ or exc
    for candidate in (inner, exc):
        message = getattr(candidate, "verify_message", None) or getattr(candidate, "reason", None)
        if message:
            return str(message).replace("_", " ").lower() if str(message).isupper() else str(message)
    return str(inner or exc) or type(exc).__name__


def _config_path(kubeconfig: str | None) -> str | None:
    """The kubeconfig file to use: ``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``
    when it exists; None for the in-cluster service account.

    Raises:
        ConfigurationError: a given file does not exist or is not a regular file, or there is no kubeconfig outside a pod.
    """
    import os

    from karpy_core.errors import ConfigurationError

    given = kubeconfig or os.environ.get("KUBECONFIG")
    what = "--kubeconfig" if kubeconfig else "$KUBECONFIG"
    path = str(given or os.path.expanduser("~/.kube/config"))
    if given and os.path.isdir(path):
        raise ConfigurationError(f"{what} {path}: is a directory, not a kubeconfig file")
    if given and os.path.exists(path) and not os.path.isfile(path):  # /dev/null, a FIFO, a socket
        raise ConfigurationError(f"{what} {path}: not a regular file, not a kubeconfig file")
    if given and not os.path.isfile(path):
        raise ConfigurationError(f"{what} {path}: no such file")
    if os.path.isfile(path):
        return path
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return None
    raise ConfigurationError(
        f"no kubeconfig: give --kubeconfig FILE or set $KUBECONFIG ({path} does not exist), "
        "or run inside a pod (in-cluster service account)"
    )


_CONFIG_ERRORS = (OSError, ValueError, TypeError, KeyError, AttributeError)
"""What reading a kubeconfig can raise, besides ``yaml.YAMLError`` (caught next to these)."""


def _config_error(path: str | None, exc: BaseException) -> Exception:
    """The :class:`~karpy_core.errors.ConfigurationError` (one line, exit 2) for a kubeconfig at
    ``path`` (None: the in-cluster configuration) that cannot be used because of ``exc``. A file
    that is not YAML is named with the line and column of the problem
    (:func:`~karpy_core.utils.kubeyaml.describe_yaml_error`), never as PyYAML's ``<unicode string>``."""
    import yaml

    from karpy_core.errors import ConfigurationError
    from karpy_core.utils.kubeyaml import describe_yaml_error

    where = path or "in-cluster configuration"
    if isinstance(exc, yaml.YAMLError):
        text = None
        if path is not None and isinstance(exc, yaml.reader.ReaderError):  # its position, as a line and column
            from pathlib import Path

            try:
                text = Path(path).read_text(errors="replace")
            except OSError:
                pass
        return ConfigurationError(f"cannot use {where}: not valid kubeconfig YAML: "
                                  f"{' '.join(describe_yaml_error(exc, text).split())}")
    return ConfigurationError(f"cannot use {where}: {' '.join(str(exc).split())}")


async def kubernetes_api_client(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A kubernetes-asyncio ``ApiClient`` for the same cluster :meth:`AsyncKubeClient.from_config`
    would reach (for :func:`karpy_core.apis.crds.install`, which uses the generated CRD API).
    Imports kubernetes-asyncio's generated client (~55 MiB): only ``karpy install-crds`` calls it.

    Raises:
        ConfigurationError: as :meth:`AsyncKubeClient.from_config`.
    """
    import yaml
    from kubernetes_asyncio import client as k8s_client
    from kubernetes_asyncio import config as k8s_config

    path = _config_path(kubeconfig)
    try:
        if path:
            cfg = k8s_client.Configuration()
            await k8s_config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
            return await _api_client_with_default_scheme(cfg, path, context)
        cfg = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        return k8s_client.ApiClient(cfg)
    except (k8s_config.ConfigException, yaml.YAMLError, *_CONFIG_ERRORS) as exc:
        raise _config_error(path, exc) from exc


async def _api_client_with_default_scheme(cfg: Any, path: str, context: str | None) -> Any:
    """A kubernetes-asyncio ``ApiClient`` for ``cfg`` (loaded from the kubeconfig at ``path``). A
    server written without a scheme (``127.0.0.1:6443``) is taken as kubernetes-asyncio wrote it,
    and its TLS files were read only for ``https://``: use the URL and the files karpy's own
    loader gives it (client-go's default scheme, :func:`~karpy_core.kube.transport.load_kubeconfig`),
    as every other command reaches that server.

    Raises:
        KubeconfigError: the server cannot be read as a URL.
    """
    import os
    import tempfile

    from kubernetes_asyncio import client as k8s_client

    from karpy_core.kube.transport import has_scheme, load_kubeconfig

    if has_scheme(cfg.host or ""):
        return k8s_client.ApiClient(cfg)
    access = await load_kubeconfig(path, context)
    cfg.host = access.server.rstrip("/")
    written: list[str] = []
    try:
        if access.server.startswith("https"):
            def file_of(name: str | None, data: str | bytes | None) -> str | None:
                if name or not data:
                    return name
                fd, temp = tempfile.mkstemp(prefix="karpy-kubeconfig-", suffix=".pem")
                written.append(temp)
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data.encode() if isinstance(data, str) else data)
                return temp

            cfg.ssl_ca_cert = cfg.ssl_ca_cert or file_of(access.ca_file, access.ca_data)
            cfg.cert_file = cfg.cert_file or file_of(access.cert_file, access.cert_data)
            cfg.key_file = cfg.key_file or file_of(access.key_file, access.key_data)
        return k8s_client.ApiClient(cfg)  # reads the files now (its TLS context)
    finally:
        for temp in written:
            os.unlink(temp)


class _Gone(Exception):
    """The watch's resourceVersion is too old (HTTP 410)."""


def _key(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")
