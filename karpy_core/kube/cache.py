"""Informer caches: watch each kind once, serve reads from memory, wake controllers on change.

:class:`CachedKubeClient` wraps any :class:`~karpy_core.kube.port.KubeClient`. For the kinds it
watches, ``list``/``get`` are answered from the cache (kept current by one watch stream per kind);
writes go to the API server and their results are written into the cache at once, so a
controller reads its own writes. Listeners registered with :meth:`CachedKubeClient.on_change` are
called for every change, which is how controllers learn there is work (watch -> state -> decide).
Every event of a kind that has a view (:data:`karpy_core.state.views.VIEW_KINDS`) also builds that
object's view once; :meth:`CachedKubeClient.views` serves them to the snapshot.

Cached objects lose ``metadata.managedFields`` (server-side-apply bookkeeping no controller
reads, often the largest part of a pod), as controller-runtime's default cache transform does.
Reads hand out copies (callers may modify what they get); the copies are made with pickle,
about four times faster than ``copy.deepcopy`` for JSON-shaped objects.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import pickle
from collections.abc import Callable, Iterable
from typing import Any

from karpy_core.errors import KubeAPIError, NotFoundError
from karpy_core.kube.port import KINDS, KubeClient, KubeObject, Pod, WatchEvent
from karpy_core.state.views import VIEW_KINDS, ObjectView, build_view

__all__ = ["SYNC_KINDS", "CachedKubeClient"]

log = logging.getLogger(__name__)

Listener = Callable[[str, WatchEvent], None]

SYNC_KINDS = ("Node", "NodeClaim", "NodePool", "Pod")
"""The kinds provisioning and disruption decide on: :meth:`CachedKubeClient.state_synced` holds
only while every one of them (that the cache watches) is listed and watched. Karpenter's
``Synced`` checks NodeClaims and Nodes; NodePools and pods are the rest of every decision."""


def _key(obj: dict[str, Any], kind: str) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    ns = (meta.get("namespace") or "default") if KINDS[kind].namespaced else ""
    return (ns, meta.get("name") or "")


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop the fields the cache never serves (``metadata.managedFields``), in place."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


def _copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a cached (JSON-shaped) object."""
    try:
        copied: dict[str, Any] = pickle.loads(pickle.dumps(obj, pickle.HIGHEST_PROTOCOL))
        return copied
    except Exception:  # something pickle cannot take (never from the API server)
        return copy.deepcopy(obj)


class CachedKubeClient:
    """A read-through cache over ``kube`` for ``kinds``.

    Args:
        kube: the underlying client.
        kinds: kinds to watch and cache (reads of other kinds go to ``kube``).
    """

    def __init__(self, kube: KubeClient, kinds: Iterable[str]):
        self.kube = kube
        self.kinds = list(dict.fromkeys(kinds))
        self._store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in self.kinds}
        self._synced: dict[str, asyncio.Event] = {}
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._missing: set[str] = set()
        self._listed: set[str] = set()
        """Kinds whose initial list arrived (or that the server does not serve)."""
        self._failing: dict[str, str] = {}
        """Kinds whose watch failed and has not listed again since, with the error."""
        self._live: set[str] = set()
        """Kinds whose watch has listed since it last (re)started and not failed since."""
        self._served: set[str] = set()
        """Kinds the API server has listed at least once (a later 404 is a restart, not a missing CRD)."""
        self._views: dict[str, dict[tuple[str, str], ObjectView]] = {k: {} for k in self.kinds if k in VIEW_KINDS}
        self.write_through = True
        """Put the answers of writes into the cache at once (a controller reads its own writes).
        False for a dry run (:class:`~karpy_core.kube.dryrun.DryRunKubeClient`): its answers are
        writes that were never made, and the cache holds only what the API server sends."""

    def on_change(self, listener: Listener) -> None:
        """Call ``listener(kind, event)`` for every cached change (from watches and own writes)."""
        self._listeners.append(listener)

    async def start(self) -> None:
        """Start one watch task per kind and wait until every cache has its initial list."""
        for kind in self.kinds:
            self._synced[kind] = asyncio.Event()
            self._tasks.append(asyncio.create_task(self._run(kind), name=f"watch:{kind}"))
        await asyncio.gather(*(e.wait() for e in self._synced.values()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()

    def synced(self) -> bool:
        """Every kind has been through its first list attempt (successful or not)."""
        return bool(self._synced) and all(e.is_set() for e in self._synced.values())

    def health(self) -> tuple[bool, str]:
        """Readiness of the caches: ``(True, "ok")`` once every kind has listed and while no
        watch is failing; else ``(False, reason)`` naming the kinds not yet listed or the failing
        watches and their last error (``/readyz`` shows it). A kind the API server does not serve
        (its CRD is missing, 404) counts as listed and empty."""
        if not self._synced:
            return False, "informer caches not started"
        waiting = [k for k in self.kinds if k not in self._listed and k not in self._failing]
        if waiting:
            return False, f"informer caches not synced: {', '.join(waiting)}"
        if self._failing:
            detail = "; ".join(f"{k}: {why}" for k, why in sorted(self._failing.items()))
            return False, f"watches failing: {detail}"
        return True, "ok"

    def _failed(self, kind: str, exc: BaseException) -> None:
        self._failing[kind] = f"{type(exc).__name__}: {exc}"[:300]
        self._synced[kind].set()  # start() returns; health() stays False until a list succeeds

    def state_synced(self) -> tuple[bool, str]:
        """Whether the objects decisions are made on are synced: ``(True, "")``, or ``(False,
        reason)``. Synced means every kind of :data:`SYNC_KINDS` this cache watches has listed
        since its watch last (re)started and its watch has not failed since, so the cache holds
        every object the API server listed plus whatever this process wrote or the watch
        delivered after that list. Karpenter's ``pkg/controllers/state/cluster.go`` ``Synced``
        (every NodeClaim and Node the API server lists is in cluster state); the provisioner and
        the disruption controller do nothing until it holds
        (:class:`karpy_core.state.synced.ClusterSync`). A kind whose CRD is not served never is."""
        waiting = []
        for kind in SYNC_KINDS:
            if kind not in self._store or kind in self._live:
                continue
            if kind in self._missing:
                waiting.append(f"{kind} (not served by the API server)")
            elif kind in self._failing:
                waiting.append(f"{kind} (watch failing: {self._failing[kind]})")
            elif kind in self._listed:
                waiting.append(f"{kind} (relisting after a watch restart)")
            else:
                waiting.append(f"{kind} (not listed yet)")
        if waiting:
            return False, "informer caches not synced: " + "; ".join(waiting)
        return True, ""

    async def _run(self, kind: str) -> None:
        while True:
            self._live.discard(kind)  # (re)starting: unsynced until the new list is in
            try:
                seen: set[tuple[str, str]] | None = set()
                async for ev in self.kube.watch(kind):
                    if ev.type == "SYNCED":
                        if seen is not None:
                            self._forget_unlisted(kind, seen, _rv(ev.object))
                        seen = None
                        self._listed.add(kind)
                        self._served.add(kind)
                        self._failing.pop(kind, None)
                        self._live.add(kind)
                        self._synced[kind].set()
                        continue
                    self._missing.discard(kind)
                    if seen is not None:
                        seen.add(_key(ev.object, kind))
                    self._apply(kind, ev)
            except asyncio.CancelledError:
                raise
            except NotFoundError as exc:
                self._live.discard(kind)
                if kind in self._served:
                    # served before: a restarting API server answers 404 for a CRD's kind until it has
                    # loaded the CRD again. Not "the CRD is gone": keep what is cached, stay unsynced.
                    self._failed(kind, exc)
                    log.warning("watch failed; restarting in 1s", extra={"kind": kind, "error": str(exc)})
                    await asyncio.sleep(1.0)
                    continue
                # The kind is not served (its CRD is not installed): nothing to cache; look again later.
                self._listed.add(kind)
                self._failing.pop(kind, None)
                self._synced[kind].set()
                if kind not in self._missing:
                    log.info("kind not served by the API server (CRD not installed?); checking again every 30s",
                             extra={"kind": kind})
                    self._missing.add(kind)
                await asyncio.sleep(30.0)
            except KubeAPIError as exc:
                self._live.discard(kind)
                self._failed(kind, exc)
                log.warning("watch failed; restarting in 1s", extra={"kind": kind, "error": str(exc)})
                await asyncio.sleep(1.0)
            except Exception as exc:  # keep watching whatever happens
                self._live.discard(kind)
                self._failed(kind, exc)
                log.warning("watch failed; restarting in 1s", extra={"kind": kind, "error": f"{type(exc).__name__}: {exc}"})
                await asyncio.sleep(1.0)

    def _forget_unlisted(self, kind: str, seen: set[tuple[str, str]], list_rv: int) -> None:
        """After a (re)list at ``list_rv``: drop the cached objects the list does not hold, except
        those written after it (a ``resourceVersion`` above the list's): an object this process
        created while the list was on its way, or one a just-restarted API server's list does not
        hold yet. The watch resumes from the list's version, so it delivers their later changes
        and deletion; until then they stay, as Karpenter's cluster state keeps a NodeClaim the
        provisioner created until a watch says it is gone. With no list version (a source that
        sends none) every unlisted object is dropped."""
        store = self._store[kind]
        for key in [k for k in store if k not in seen]:
            obj = store[key]
            if list_rv > 0 and _rv(obj) > list_rv:
                log.info("relist does not hold an object written after it; kept until the watch reports it",
                         extra={"kind": kind, "object": key[1], "resource-version": _rv(obj), "list-resource-version": list_rv})
                continue
            self._apply(kind, WatchEvent("DELETED", obj))

    def _apply(self, kind: str, ev: WatchEvent) -> None:
        key = _key(ev.object, kind)
        store = self._store[kind]
        views = self._views.get(kind)
        if ev.type == "DELETED":
            store.pop(key, None)
            if views is not None:
                views.pop(key, None)
        else:
            old = store.get(key)
            if old is not None and _rv(old) > _rv(ev.object) > 0:
                return  # an older event than what an own write already stored
            store[key] = _strip(ev.object)
            if views is not None:
                views[key] = build_view(kind, store[key])
        for listener in self._listeners:
            try:
                listener(kind, ev)
            except Exception:
                log.exception("change listener failed", extra={"kind": kind})

    def views(self, kind: str) -> list[ObjectView] | None:
        """Every cached ``kind`` object as its view (built once per watch event), sorted by
        namespace and name; None when ``kind`` has no view or is not cached. The views and their
        ``raw`` dicts are shared with the cache: read them, never modify them."""
        if kind in self._missing:
            return []
        views = self._views.get(kind)
        if views is None:
            return None
        return [views[key] for key in sorted(views)]

    # ---- KubeClient -------------------------------------------------------------------------
    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        if kind in self._missing:
            return []
        if kind not in self._store or label_selector:
            return await self.kube.list(kind, namespace, label_selector)
        store = self._store[kind]
        out = []
        for key in sorted(store):
            if namespace is not None and KINDS[kind].namespaced and key[0] != namespace:
                continue
            out.append(_copy(store[key]))
        return out

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind not in self._store:
            return await self.kube.get(kind, name, namespace)
        ns = (namespace or "default") if KINDS[kind].namespaced else ""
        obj = self._store[kind].get((ns, name))
        if obj is None:
            raise KubeAPIError.from_status(f'{kind} "{name}" not found', status=404, reason="NotFound")
        return _copy(obj)

    def _write_through(self, kind: str, obj: dict[str, Any] | None, type_: str = "MODIFIED") -> None:
        if obj is not None and kind in self._store and self.write_through:
            self._apply(kind, WatchEvent(type_, _copy(obj)))

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        out = await self.kube.create(kind, obj)
        self._write_through(kind, out, "ADDED")
        return out

    async def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        out = await self.kube.patch(kind, name, patch, namespace, status=status)
        meta = (out or {}).get("metadata") or {}
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._write_through(kind, out, "DELETED")
        else:
            self._write_through(kind, out)
        return out

    async def replace(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        out = await self.kube.replace(kind, obj)
        self._write_through(kind, out)
        return out

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        await self.kube.delete(kind, name, namespace, uid=uid)

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        await self.kube.bind(pod, node_name)

    async def evict(self, pod: Pod | KubeObject) -> None:
        await self.kube.evict(pod)

    def watch(self, kind: str):  # type: ignore[no-untyped-def,unused-ignore]
        return self.kube.watch(kind)


def _rv(obj: dict[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except ValueError:
        return 0
