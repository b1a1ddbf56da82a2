"""Dry run (``karpy controller --dry-run``): a KubeClient that reads and never writes.

Two layers keep a dry-run controller from changing the cluster:

* :class:`DryRunKubeClient` wraps the API client every controller, the provider and the event
  recorder are given. Reads (``list``, ``get``, ``watch``) go through; every write (``create``,
  ``patch``, ``replace``, ``delete``, ``bind``, ``evict``) is *withheld*: logged as
  ``dry run: write withheld`` (verb, kind, namespace, name; at most once per
  :data:`RELOG_SECONDS` for the same write), counted (:attr:`DryRunKubeClient.withheld`, the
  ``karpy_dry_run_writes_withheld_total`` metric) and answered as if it had been made, so a
  controller's pass goes on to its next decision instead of failing: ``create`` returns the object
  with a name (``<generateName>dry-run``), ``patch``/``replace`` the object as the API server holds
  it, unchanged (a missing one raises :class:`~karpy_core.errors.NotFoundError`, as the API
  server would), ``delete``/``bind``/``evict`` nothing. The informer cache in front of it is told
  not to write these answers through (:attr:`~karpy_core.kube.cache.CachedKubeClient.write_through`),
  so no controller ever reads its own withheld writes back: each pass decides on the live state
  alone, and the same live state gives the same decisions (idempotent per pass; nothing waits
  for a NodeClaim it "created").
* The HTTP transport under it refuses every request but ``GET``
  (:attr:`karpy_core.kube.transport.Transport.read_only`), so a write that would get past the
  wrapper (a provider holding the raw client, a bug) fails before anything is sent.

Neither sends a Lease write: a dry-run controller runs without leader election.
"""

from __future__ import annotations

import builtins
import copy
import hashlib
import json
import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

from karpy_core.kube.port import KubeClient, KubeObject, Pod, WatchEvent
from karpy_core.utils.clock import Clock, RealClock

__all__ = ["DryRunKubeClient", "RELOG_SECONDS", "WRITE_VERBS"]

log = logging.getLogger("karpy.dryrun")

RELOG_SECONDS = 300.0
"""Seconds during which the same withheld write (verb, kind, object, body) is logged at debug
level only: a dry-run controller decides the same write on every pass while the cluster stays the same."""
WRITE_VERBS = ("create", "patch", "update", "delete", "bind", "evict")
"""The verbs a dry-run client withholds (``update`` is :meth:`DryRunKubeClient.replace`, a PUT)."""


class DryRunKubeClient:
    """A :class:`~karpy_core.kube.port.KubeClient` that reads through ``inner`` and withholds
    every write (see the module docstring).

    Args:
        inner: the real client (reads only are sent through it).
        clock: time source for the log de-duplication (real by default).
        on_withheld: called with ``(verb, kind)`` for every withheld write (the metric).

    Attributes:
        withheld: ``(verb, kind)`` -> number of writes withheld so far.
    """

    def __init__(self, inner: KubeClient, *, clock: Clock | None = None,
                 on_withheld: Callable[[str, str], None] | None = None):
        self.inner = inner
        self.clock = clock or RealClock()
        self.on_withheld = on_withheld
        self.withheld: Counter[tuple[str, str]] = Counter()
        self._logged: dict[str, float] = {}

    # ---- reads ---------------------------------------------------------------------------------
    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> builtins.list[KubeObject]:
        """Sent through: every object of ``kind``."""
        return await self.inner.list(kind, namespace, label_selector)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> KubeObject:
        """Sent through: one object (NotFoundError when absent)."""
        return await self.inner.get(kind, name, namespace)

    def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        """Sent through: the watch stream of ``kind``."""
        return self.inner.watch(kind)

    # ---- writes, withheld ----------------------------------------------------------------------
    def _withhold(self, verb: str, kind: str, name: str, namespace: str | None, body: Any = None, **extra: Any) -> None:
        self.withheld[(verb, kind)] += 1
        if self.on_withheld is not None:
            self.on_withheld(verb, kind)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()[:12] if body is not None else ""
        key = f"{verb}/{kind}/{namespace or ''}/{name}/{digest}"
        now = self.clock.now()
        level = logging.INFO
        last = self._logged.get(key)
        if last is not None and now - last < RELOG_SECONDS:
            level = logging.DEBUG
        else:
            self._logged[key] = now
            if len(self._logged) > 10_000:
                self._logged = {k: t for k, t in self._logged.items() if now - t < RELOG_SECONDS}
        if log.isEnabledFor(level):
            ref = {"name": name, **({"namespace": namespace} if namespace else {})}
            log.log(level, "dry run: write withheld", extra={"verb": verb, "kind": kind, kind: ref, "dryRun": True,
                                                             **{k: v for k, v in extra.items() if v is not None}})

    async def create(self, kind: str, obj: KubeObject) -> KubeObject:
        """Withheld; returns ``obj`` with a name (``metadata.generateName`` + ``dry-run`` when it has none)."""
        out = copy.deepcopy(obj)
        meta = out.setdefault("metadata", {})
        if not meta.get("name"):
            meta["name"] = f"{meta.get('generateName') or kind.lower() + '-'}dry-run"
        self._withhold("create", kind, meta["name"], meta.get("namespace"), obj)
        return out

    async def patch(self, kind: str, name: str, patch: KubeObject, namespace: str | None = None, *,
                    status: bool = False) -> KubeObject:
        """Withheld; returns the object as the API server holds it (NotFoundError when absent)."""
        self._withhold("patch", kind, name, namespace, patch, subresource="status" if status else None)
        return await self.inner.get(kind, name, namespace)

    async def replace(self, kind: str, obj: KubeObject) -> KubeObject:
        """Withheld (verb ``update``); returns the object as the API server holds it."""
        meta = obj.get("metadata") or {}
        self._withhold("update", kind, str(meta.get("name") or ""), meta.get("namespace"), obj)
        return await self.inner.get(kind, str(meta.get("name") or ""), meta.get("namespace"))

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        """Withheld."""
        self._withhold("delete", kind, name, namespace)

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        """Withheld."""
        meta = pod["metadata"]
        self._withhold("bind", "Pod", str(meta.get("name") or ""), meta.get("namespace"), node=node_name)

    async def evict(self, pod: Pod | KubeObject) -> None:
        """Withheld (the Eviction subresource)."""
        meta = pod["metadata"]
        self._withhold("evict", "Pod", str(meta.get("name") or ""), meta.get("namespace"))
