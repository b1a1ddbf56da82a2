"""An in-memory Kubernetes API: the simulator's cluster and the core unit tests' fake.

It keeps the API semantics controllers depend on: ``resourceVersion`` bumps, ``generateName``,
``uid`` and ``creationTimestamp``, finalizers (delete sets ``deletionTimestamp``; the object goes
once its finalizers are gone), JSON merge-patch, the status subresource, bindings, and the
Eviction API with kube-apiserver's PodDisruptionBudget checks. It also plays kube-controller-manager's
disruption controller: every PDB's ``status`` (``expectedPods``, ``desiredHealthy``,
``currentHealthy``, ``disruptionsAllowed``, ``disruptedPods``, ``observedGeneration``) is kept up
to date from the pods and their controllers (:mod:`karpy_core.utils.pdb`), as if that controller
reacted instantly. Pods are admitted by
Priority and RuntimeClass (:mod:`karpy_core.kube.admission`: ``priority`` and ``preemptionPolicy``
set from ``spec.priorityClassName``; overhead, node selector and tolerations set from
``spec.runtimeClassName``; 403 on a missing class or a conflict).
Objects are deep-copied in and out, so callers never share state with the store. Inside, a
stored object is never changed: every write stores a new dict (sharing the unchanged parts of the
old one), so views and :meth:`InMemoryCluster.snapshot` hand out stored objects without copying
them (their readers must not modify them either).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from karpy_core.errors import KubeAPIError
from karpy_core.kube.admission import (
    admit_pod,
    admit_priority,
    needs_priority_admission,
    scheduling_gated,
    validate_pod_level_resources,
)
from karpy_core.kube.port import KINDS, KubeObject, Pod, WatchEvent
from karpy_core.redaction import redact_stored
from karpy_core.state.views import VIEW_KINDS, ObjectView, PodView, build_view
from karpy_core.utils.clock import Clock, RealClock, iso
from karpy_core.utils.clone import clone
from karpy_core.utils.pdb import charge, compute_status, eviction_verdict

__all__ = ["InMemoryCluster", "merge_patch"]


def merge_patch(target: Any, patch: Any, *, copy: bool = True) -> Any:
    """RFC 7386 JSON merge-patch: dicts merge recursively, ``None`` deletes, anything else replaces.
    The result is a new dict sharing what the patch leaves unchanged with ``target`` (neither
    input is changed); the values taken from ``patch`` are copies, or ``patch``'s own with
    ``copy=False`` (a patch nobody changes afterwards)."""
    if not isinstance(patch, dict):
        return clone(patch) if copy else patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v, copy=copy)
    return out


IMMORTAL_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
"""Namespaces kube-apiserver's NamespaceLifecycle admission never lets be deleted (``Forbidden:
this namespace may not be deleted``)."""


def renaming_patch_problem(patch: Any, name: str, namespace: str) -> str:
    """kube-apiserver's refusal (``checkName``, 400 BadRequest) of a merge patch of the object
    ``name`` (in ``namespace``; ``""`` for a cluster-scoped kind) that sets another
    ``metadata.name`` (null included) or another ``metadata.namespace``; ``""`` when it does not.
    The in-memory cluster stored the renamed object under its old key, a second copy of a
    workload to its controllers (trial 22)."""
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    if not isinstance(meta, dict):
        return ""
    if "name" in meta and not meta["name"]:  # the name removed (null) or emptied
        return f"the name of the object ({name} based on URL) was undeterminable: name must be provided"
    if "name" in meta and meta["name"] != name:
        return f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
    if namespace and meta.get("namespace") and meta["namespace"] != namespace:
        return "the namespace of the provided object does not match the namespace sent on the request"
    return ""


class InMemoryCluster:
    """Implements :class:`karpy_core.kube.port.KubeClient` in memory.

    Args:
        clock: source of ``creationTimestamp``/``deletionTimestamp`` (default wall time).
    """

    def __init__(self, clock: Clock | None = None):
        self.clock = clock or RealClock()
        self._store: dict[str, dict[tuple[str, str], dict[str, Any]]] = {k: {} for k in KINDS}
        self._rv = 0
        self._uid = 0
        self._names: dict[str, int] = {}
        self._watchers: dict[str, list[asyncio.Queue[WatchEvent]]] = {}
        self.evictions: list[str] = []
        """``ns/name`` of every pod evicted, in order (for reports and tests)."""
        self._pdb_dirty = True
        self._pdb_recheck: float | None = None
        self._pdb_syncing = False
        self._views: dict[str, dict[tuple[str, str], ObjectView]] = {}
        """kind -> key -> the view of the object's current version (kinds :meth:`views` was asked for)."""
        self._view_list: dict[str, list[ObjectView]] = {}
        """kind -> its views in key order, kept until an object of the kind is written."""
        self._stale: dict[str, set[tuple[str, str]]] = {}
        """kind -> keys written (created, changed, removed) since :meth:`views` last caught up."""
        self._sorted: dict[str, list[tuple[str, str]]] = {}
        """kind -> its store's keys in order, kept until an object of the kind is added or removed."""

    @property
    def revision(self) -> int:
        """The latest resourceVersion handed out: it changes whenever any object changes."""
        return self._rv

    # ---- helpers ----------------------------------------------------------------------------
    def _key(self, kind: str, name: str, namespace: str | None) -> tuple[str, str]:
        info = KINDS.get(kind)
        if info is None:
            raise KubeAPIError.from_status(f"kind {kind} is not served", status=404, reason="NotFound")
        return ((namespace or "default") if info.namespaced else "", name)

    def _bump(self, obj: dict[str, Any]) -> None:
        """Give ``obj`` (a new dict, not yet stored) the next resourceVersion, in a metadata dict of
        its own: the old version's metadata may be shared with it and is never changed."""
        self._rv += 1
        obj["metadata"] = {**(obj.get("metadata") or {}), "resourceVersion": str(self._rv)}

    def _keys(self, kind: str) -> list[tuple[str, str]]:
        """The keys of ``kind``'s store, sorted (namespace, name); cached until one is added or removed."""
        keys = self._sorted.get(kind)
        if keys is None:
            keys = self._sorted[kind] = sorted(self._store[kind])
        return keys

    def _put(self, kind: str, key: tuple[str, str], obj: dict[str, Any]) -> None:
        store = self._store[kind]
        if key not in store:
            self._sorted.pop(kind, None)
        store[key] = obj
        self._touch(kind, key)

    def _drop(self, kind: str, key: tuple[str, str]) -> None:
        del self._store[kind][key]
        self._sorted.pop(kind, None)
        self._touch(kind, key)

    def _touch(self, kind: str, key: tuple[str, str]) -> None:
        """Note that ``kind``'s object ``key`` was written, for :meth:`views` (only kinds it has
        been asked for are tracked)."""
        stale = self._stale.get(kind)
        if stale is not None:
            stale.add(key)
            self._view_list.pop(kind, None)

    def _notify(self, kind: str, type_: str, obj: dict[str, Any]) -> None:
        for q in self._watchers.get(kind, []):
            q.put_nowait(WatchEvent(type_, clone(obj)))
        if kind in _PDB_INPUTS and not self._pdb_syncing:
            self._pdb_dirty = True
            if self._watchers.get("PodDisruptionBudget"):
                self.sync_disruption_budgets()

    # ---- the disruption controller ------------------------------------------------------------
    def _lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if kind not in self._store:
            return None
        return self._store[kind].get(self._key(kind, name, namespace))

    def sync_disruption_budgets(self) -> None:
        """Recompute every PodDisruptionBudget's status as kube-controller-manager's disruption
        controller does (:func:`karpy_core.utils.pdb.compute_status`), writing only what changed.
        Runs by itself before PDBs are read or a pod evicted, after pods, PDBs or workloads
        changed or when a ``disruptedPods`` entry times out."""
        now = self.clock.now()
        if not self._pdb_dirty and (self._pdb_recheck is None or now < self._pdb_recheck):
            return
        self._pdb_syncing = True
        try:
            pods = list(self._store["Pod"].values())
            recheck: float | None = None
            for key in sorted(self._store["PodDisruptionBudget"]):
                pdb = self._store["PodDisruptionBudget"][key]
                computed = compute_status(pdb, pods, self._lookup, now)
                if computed.recheck_at is not None:
                    recheck = computed.recheck_at if recheck is None else min(recheck, computed.recheck_at)
                status = computed.to_status(int(pdb["metadata"].get("generation") or 1))
                status = {k: v for k, v in status.items() if v is not None}
                if pdb.get("status") != status:
                    pdb = {**pdb, "status": status}
                    self._bump(pdb)
                    self._put("PodDisruptionBudget", key, pdb)
                    self._notify("PodDisruptionBudget", "MODIFIED", pdb)
            self._pdb_recheck = recheck
            self._pdb_dirty = False
        finally:
            self._pdb_syncing = False

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Synchronous snapshot of every ``kind`` object, sorted by namespace then name (copies)."""
        if kind == "PodDisruptionBudget":
            self.sync_disruption_budgets()
        store = self._store[kind]
        return [clone(store[k]) for k in self._keys(kind)]

    def snapshot(self, kind: str) -> list[dict[str, Any]]:
        """Every ``kind`` object as stored, sorted by namespace then name, without copying: for
        readers in this process (the simulator, its report) that never modify what they get.
        :meth:`objects` gives copies."""
        if kind == "PodDisruptionBudget":
            self.sync_disruption_budgets()
        store = self._store[kind]
        return [store[k] for k in self._keys(kind)]

    def exists(self, kind: str, name: str, namespace: str | None = None) -> bool:
        """True when the object is stored (no copy made)."""
        return self._key(kind, name, namespace) in self._store[kind]

    def views(self, kind: str) -> list[ObjectView] | None:
        """Every ``kind`` object as its view, sorted by namespace then name; None for a kind
        without views. A view is built once per object version (from a private copy) and reused
        until the object changes: read views and their ``raw`` dicts, never modify them."""
        if kind not in VIEW_KINDS:
            return None
        listed = self._view_list.get(kind)
        if listed is None:
            store = self._store[kind]
            cache = self._views.get(kind)
            stale = self._stale.get(kind)
            if cache is None or stale is None:  # the first call for this kind: every object is new
                cache = self._views[kind] = {}
                stale = self._stale[kind] = set(store)
            # only the objects written since the last call are looked at (100,000 pods, one bound)
            for key in stale:
                obj = store.get(key)
                if obj is None:
                    cache.pop(key, None)
                    continue
                view = cache.get(key)
                if view is None or view.resource_version != str(obj["metadata"].get("resourceVersion") or ""):
                    older = view
                    view = build_view(kind, obj)  # stored objects are never changed (see the module's docstring)
                    if isinstance(older, PodView) and isinstance(view, PodView):
                        view.adopt_info(older)  # a status or nodeName change: the scheduling parse is kept
                    cache[key] = view
            stale.clear()
            listed = self._view_list[kind] = [cache[key] for key in self._keys(kind)]
        return list(listed)

    def peek(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        """Synchronous read of one object (a copy), or None."""
        if kind == "PodDisruptionBudget":
            self.sync_disruption_budgets()
        obj = self._store[kind].get(self._key(kind, name, namespace))
        return clone(obj) if obj is not None else None

    # ---- KubeClient -------------------------------------------------------------------------
    async def list(self, kind: str, namespace: str | None = None, label_selector: str | None = None) -> list[dict[str, Any]]:
        out = []
        for obj in self.objects(kind):
            meta = obj.get("metadata") or {}
            if namespace is not None and KINDS[kind].namespaced and meta.get("namespace") != namespace:
                continue
            if label_selector and not _label_selector_string_matches(label_selector, meta.get("labels") or {}):
                continue
            out.append(obj)
        return out

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
        if kind == "PodDisruptionBudget":
            self.sync_disruption_budgets()
        obj = self._store[kind].get(self._key(kind, name, namespace))
        if obj is None:
            raise KubeAPIError.from_status(f'{kind} "{name}" not found', status=404, reason="NotFound")
        return clone(obj)

    def create_sync(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Synchronous :meth:`create` (the simulator seeds manifests with it)."""
        return clone(self.create_stored(kind, obj))

    def create_stored(self, kind: str, obj: dict[str, Any], *, given: bool = False) -> dict[str, Any]:
        """:meth:`create_sync` returning the stored object itself, not a copy: for readers in this
        process (the simulator) that never modify it. ``obj`` is copied in, unless ``given``: the
        caller hands it over and never changes it or its parts again, which may then be shared
        with other stored objects (the pods of one workload share their template's spec). A Pod
        that RuntimeClass admission changes is copied either way."""
        info = KINDS.get(kind)
        if info is None:
            raise KubeAPIError.from_status(f"kind {kind} is not served", status=404, reason="NotFound")
        if kind == "Pod":
            validate_pod_level_resources(obj)  # validation, after defaulting (a template is not defaulted)
            priority_classes = {k[1]: v for k, v in self._store["PriorityClass"].items()}
            if needs_priority_admission(obj, priority_classes):  # Priority admits before RuntimeClass, as in kube-apiserver
                obj = admit_priority(obj, priority_classes)  # a new spec; metadata copied below
            spec = obj.get("spec") or {}
            if given and not spec.get("runtimeClassName") and spec.get("overhead") is None:
                obj = {**obj, "metadata": dict(obj.get("metadata") or {})}  # admission has nothing to do (admit_pod)
            else:
                classes = {k[1]: v for k, v in self._store["RuntimeClass"].items()}
                obj = admit_pod(obj, classes)  # a deep copy, admitted
        elif given:
            obj = {**obj, "metadata": dict(obj.get("metadata") or {})}
        else:
            obj = clone(obj)
        if kind == "Pod" and (obj.get("spec") or {}).get("schedulingGates"):
            obj = scheduling_gated(obj)
        meta = obj.setdefault("metadata", {})
        obj.setdefault("apiVersion", info.api_version)
        obj.setdefault("kind", kind)
        if not meta.get("name"):
            prefix = meta.get("generateName")
            if not prefix:
                raise KubeAPIError.from_status("name or generateName is required", status=422, reason="Invalid")
            while True:
                self._names[prefix] = self._names.get(prefix, 0) + 1
                candidate = f"{prefix}{_suffix(self._names[prefix])}"
                if self._key(kind, candidate, meta.get("namespace")) not in self._store[kind]:
                    meta["name"] = candidate
                    break
        if info.namespaced:
            meta.setdefault("namespace", "default")
        else:
            meta.pop("namespace", None)
        key = self._key(kind, meta["name"], meta.get("namespace"))
        if key in self._store[kind]:
            raise KubeAPIError.from_status(f'{kind} "{meta["name"]}" already exists', status=409, reason="AlreadyExists")
        self._uid += 1
        meta.setdefault("uid", f"00000000-0000-4000-8000-{self._uid:012d}")
        meta.setdefault("creationTimestamp", iso(self.clock.now()))
        meta["generation"] = 1
        self._bump(obj)
        self._put(kind, key, obj)
        self._notify(kind, "ADDED", obj)
        return obj

    async def create(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        return self.create_sync(kind, redact_stored(kind, obj))

    def patch_sync(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        """Synchronous :meth:`patch`."""
        return clone(self.patch_stored(kind, name, patch, namespace, status=status))

    def patch_stored(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False,
        given: bool = False,
    ) -> dict[str, Any]:
        """:meth:`patch_sync` returning the stored object itself, not a copy: for readers in this
        process (the simulator) that never modify it. ``given``: the caller hands ``patch`` over and
        never changes it or its parts again; its values are then stored as they are, not copied
        (and may be shared by several objects: the simulated kube-scheduler's one condition list
        for every pod it marks Unschedulable in a cycle)."""
        key = self._key(kind, name, namespace)
        obj = self._store[kind].get(key)
        if obj is None:
            raise KubeAPIError.from_status(f'{kind} "{name}" not found', status=404, reason="NotFound")
        renamed = renaming_patch_problem(patch, name, key[0])
        if renamed:
            raise KubeAPIError.from_status(renamed, status=400, reason="BadRequest")
        if status:
            patch = {"status": patch.get("status", {})}
        elif "status" in patch and kind in ("NodePool", "NodeClaim", "NodeOverlay", "EC2NodeClass", "KCNodeClass", "CapacityBuffer"):
            patch = {k: v for k, v in patch.items() if k != "status"}
        return self._patched(kind, key, obj, patch, given=given)

    def _patched(self, kind: str, key: tuple[str, str], obj: dict[str, Any], patch: dict[str, Any], *,
                 given: bool = False) -> dict[str, Any]:
        """Store ``obj`` merge-patched with ``patch`` (a new dict sharing the unchanged parts;
        ``obj`` is untouched) and return it, not a copy. ``given``: ``patch``'s values are stored
        as they are (the caller never changes them)."""
        new: dict[str, Any] = merge_patch(obj, patch, copy=not given)
        self._bump(new)
        if new.get("spec") != obj.get("spec"):
            new["metadata"]["generation"] = int(obj["metadata"].get("generation", 1)) + 1
        meta = new["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._drop(kind, key)
            self._notify(kind, "DELETED", new)
            return new
        self._put(kind, key, new)
        self._notify(kind, "MODIFIED", new)
        return new

    async def patch(
        self, kind: str, name: str, patch: dict[str, Any], namespace: str | None = None, *, status: bool = False
    ) -> dict[str, Any]:
        return self.patch_sync(kind, name, redact_stored(kind, patch), namespace, status=status)

    async def replace(self, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
        obj = redact_stored(kind, obj)
        meta = obj.get("metadata") or {}
        key = self._key(kind, meta.get("name", ""), meta.get("namespace"))
        current = self._store[kind].get(key)
        if current is None:
            raise KubeAPIError.from_status(f'{kind} "{meta.get("name")}" not found', status=404, reason="NotFound")
        rv = meta.get("resourceVersion")
        if rv and rv != current["metadata"].get("resourceVersion"):
            raise KubeAPIError.from_status(
                f"Operation cannot be fulfilled on {kind} {meta.get('name')}: the object has been modified", status=409, reason="Conflict"
            )
        new = clone(obj)
        for field_name in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if field_name in current["metadata"]:
                new["metadata"][field_name] = current["metadata"][field_name]
        if new.get("spec") != current.get("spec"):
            new["metadata"]["generation"] = int(current["metadata"].get("generation", 1)) + 1
        self._bump(new)
        self._put(kind, key, new)
        self._notify(kind, "MODIFIED", new)
        return clone(new)

    def delete_sync(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        """Synchronous :meth:`delete`."""
        if kind == "Namespace" and name in IMMORTAL_NAMESPACES:
            raise KubeAPIError.from_status(f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                                           status=403, reason="Forbidden")
        key = self._key(kind, name, namespace)
        obj = self._store[kind].get(key)
        if obj is None:
            raise KubeAPIError.from_status(f'{kind} "{name}" not found', status=404, reason="NotFound")
        meta = obj["metadata"]
        if uid is not None and meta.get("uid") != uid:
            raise KubeAPIError.from_status(f"precondition failed: uid {uid} != {meta.get('uid')}", status=409, reason="Conflict")
        if meta.get("finalizers"):
            if not meta.get("deletionTimestamp"):
                obj = {**obj, "metadata": {**meta, "deletionTimestamp": iso(self.clock.now())}}
                self._bump(obj)
                self._put(kind, key, obj)
                self._notify(kind, "MODIFIED", obj)
            return
        self._drop(kind, key)
        obj = dict(obj)
        self._bump(obj)
        self._notify(kind, "DELETED", obj)

    async def delete(self, kind: str, name: str, namespace: str | None = None, *, uid: str | None = None) -> None:
        self.delete_sync(kind, name, namespace, uid=uid)

    async def bind(self, pod: Pod | KubeObject, node_name: str) -> None:
        meta = pod["metadata"]
        key = self._key("Pod", meta["name"], meta.get("namespace"))
        current = self._store["Pod"].get(key)
        if current is None:
            raise KubeAPIError.from_status(f'Pod "{meta["name"]}" not found', status=404, reason="NotFound")
        if current["spec"].get("nodeName"):
            raise KubeAPIError.from_status(f"pod {meta['name']} is already bound", status=409, reason="Conflict")
        if not self.exists("Node", node_name):
            raise KubeAPIError.from_status(f'node "{node_name}" not found', status=404, reason="NotFound")
        self._patched("Pod", key, current, {"spec": {"nodeName": node_name}, "status": {"phase": "Running", "conditions": _BOUND}},
                      given=True)

    async def evict(self, pod: Pod | KubeObject) -> None:
        """``POST pods/<name>/eviction`` as kube-apiserver answers it
        (:func:`karpy_core.utils.pdb.eviction_verdict`): 429 ``TooManyRequests`` past the budget
        or while a PDB's status is stale, 500 when several PDBs select the pod, 403 on a negative
        allowance; an allowed eviction of a healthy pod charges its PDB (``disruptionsAllowed``
        - 1, the pod recorded in ``disruptedPods``) before the pod is deleted. ``metadata.uid``
        of ``pod``, when set, is a precondition (409)."""
        meta = pod["metadata"]
        ns = meta.get("namespace") or "default"
        current = await self.get("Pod", meta["name"], ns)
        if meta.get("uid") and meta["uid"] != current["metadata"].get("uid"):
            raise KubeAPIError.from_status(
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: {current['metadata'].get('uid')}",
                status=409, reason="Conflict",
            )
        self.sync_disruption_budgets()
        pdbs = [b for (bns, _), b in sorted(self._store["PodDisruptionBudget"].items()) if bns == ns]
        verdict = eviction_verdict(current, pdbs)
        if verdict.action == "deny":
            raise KubeAPIError.from_status(verdict.message, status=verdict.status, reason=verdict.reason,
                               causes=(verdict.cause,) if verdict.cause else ())
        if verdict.action == "decrement":
            pdb = self._store["PodDisruptionBudget"][(ns, verdict.pdb)]
            pdb = {**pdb, "status": charge(pdb.get("status") or {}, meta["name"], self.clock.now())}
            self._bump(pdb)
            self._put("PodDisruptionBudget", (ns, verdict.pdb), pdb)
            self._notify("PodDisruptionBudget", "MODIFIED", pdb)
        self.evictions.append(f"{ns}/{meta['name']}")
        self.delete_sync("Pod", meta["name"], ns)

    async def watch(self, kind: str) -> AsyncIterator[WatchEvent]:
        queue: asyncio.Queue[WatchEvent] = asyncio.Queue()
        for obj in self.objects(kind):
            queue.put_nowait(WatchEvent("ADDED", obj))
        queue.put_nowait(WatchEvent("SYNCED", {}))
        self._watchers.setdefault(kind, []).append(queue)
        try:
            while True:
                yield await queue.get()
        finally:
            self._watchers[kind].remove(queue)


_BOUND: list[dict[str, str]] = [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}]
"""A bound pod's conditions (the kubelet runs it at once), shared by every bound pod's stored
version: stored objects are never changed."""

_PDB_INPUTS = frozenset({"Pod", "PodDisruptionBudget", "ReplicaSet", "Deployment", "StatefulSet"})
"""Kinds whose changes the disruption controller recomputes PDB status for."""


def _suffix(n: int) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    out = ""
    n = n * 7919 + 12345
    for _ in range(5):
        out += alphabet[n % len(alphabet)]
        n //= len(alphabet)
    return out


def _label_selector_string_matches(selector: str, labels: dict[str, str]) -> bool:
    for part in selector.split(","):
        part = part.strip()
        if not part:
            continue
        if "!=" in part:
            k, v = part.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in part:
            k, v = part.split("=", 1)
            if labels.get(k.strip()) != v.strip().lstrip("="):
                return False
        elif part.startswith("!"):
            if part[1:] in labels:
                return False
        elif part not in labels:
            return False
    return True
