"""Simulated workload controllers: Deployments, ReplicaSets, StatefulSets and Jobs become Pods.

Only what placement needs is modelled: each controller keeps ``replicas`` (``parallelism`` for a
Job) pods of its template, named as Kubernetes names them (``<deployment>-<template hash>-<5
chars>``, ``<statefulset>-<ordinal>``, ``<job>-<5 chars>``; a generated name's base is cut to 58
characters, :func:`generated_name`), owned by the controlling object. A Deployment whose
ReplicaSet name would pass 253 characters creates no pods (the API server refuses the ReplicaSet).
A Deployment owns a ReplicaSet object ``<deployment>-<template hash>`` (``spec.replicas`` kept equal
to the Deployment's) that owns its pods, as in a real cluster, so the disruption controller finds
the Deployment's scale through it. Scaling down deletes the newest pods first. Rolling updates
are not modelled: a changed template replaces all pods (and the ReplicaSet).
A pod the API refuses (Priority admission: a missing PriorityClass; RuntimeClass admission: a
missing class, a conflicting node selector; validation after defaulting: a pod-level limit below
the containers' requests) is not created; the workload keeps trying on every pass
and :attr:`WorkloadSimulator.failed_creates` says why, as the controllers' ``FailedCreate`` events
do (:attr:`WorkloadSimulator.late_creates` once a later pass created them).
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

from karpy_core.apis.names import name_problems
from karpy_core.errors import KubeAPIError, ManifestError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.progress import NO_PROGRESS, Progress, shorten

__all__ = ["DEFAULT_MAX_PODS", "MAX_GENERATED_NAME_BASE", "WorkloadSimulator", "counted_pods", "generated_name", "pod_cap_message",
           "pod_cap_problem", "template_hash", "wanted_pods"]

DEFAULT_MAX_PODS = 100_000
"""Most pods one simulation may hold at once (``karpy simulate --max-pods``). Karpenter's own
scheduling benchmark tops out at 10,000 pods and the largest Kubernetes clusters tested upstream
hold 150,000; a simulation needs about 8 KB of memory and 0.6 ms of CPU per pod, so 100,000
pods take about a minute of CPU and 0.9 GiB (``benchmarks/simulate_big.py``), while
``replicas: 2147483647`` would never finish."""


def _count(spec: dict[str, Any], key: str) -> int:
    """``spec[key]`` as a whole number (replicas, parallelism), 1 when absent or null."""
    value = spec.get(key)
    return 1 if value is None else int(value)


def wanted_pods(obj: dict[str, Any]) -> tuple[int, str]:
    """How many pods a workload object keeps running, and the field that says so.

    Deployment/ReplicaSet/StatefulSet: ``spec.replicas`` (default 1); Job: ``min(parallelism,
    completions)`` (parallelism defaults to 1), none while ``spec.suspend`` is true; a Pod: 1; anything else (DaemonSets: one pod per
    node, bounded by the nodes) 0. Returns ``(count, field path)``.
    """
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return 1, "metadata.name"
    if kind == "Job":
        if spec.get("suspend") is True:  # the Job controller creates no pods while suspended (trial 21)
            return 0, "spec.suspend"
        want = _count(spec, "parallelism")
        if spec.get("completions") is not None:
            return min(want, int(spec["completions"])), "spec.parallelism"
        return want, "spec.parallelism"
    if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
        return _count(spec, "replicas"), "spec.replicas"
    return 0, ""


def pod_cap_problem(objects: list[dict[str, Any]], cap: int, *, bare_pods: int = 0, sources: list[str] | None = None,
                    command: str = "simulate") -> str | None:
    """The problem (naming the workload and field that ask for the most pods) when ``objects``
    (manifests as dicts, any kinds) plus ``bare_pods`` would make the simulation hold more than
    ``cap`` pods, else None. Pods without owner references count one each; ReplicaSets a Deployment
    controls count with their Deployment (:func:`wanted_pods`). Shared by ``karpy validate`` and
    the simulator, so both refuse the same input. ``sources`` (one per object, e.g. ``file doc
    2``) prefix the workload's name when given; ``command`` is the karpy command whose
    ``--max-pods`` raises the cap (``simulate`` or ``validate``)."""
    wanted: list[tuple[tuple[int, str], dict[str, Any], str]] = []
    for i, obj in enumerate(objects):
        n = counted_pods(obj)
        if n[0]:
            wanted.append((n, obj, f"{sources[i]} " if sources is not None else ""))
    total = bare_pods + sum(n for (n, _), _, _ in wanted)
    if total <= cap or not wanted:
        return None
    (count, path), obj, where = max(wanted, key=lambda w: w[0][0])
    return where + pod_cap_message(obj, count, path, total, cap, command)


def counted_pods(obj: dict[str, Any]) -> tuple[int, str]:
    """:func:`wanted_pods` of ``obj`` as the pod cap counts it: ``(0, "")`` for a Pod with owner
    references (its owner counts it) and a ReplicaSet a Deployment controls (counted with its
    Deployment)."""
    if obj.get("kind") == "Pod" and (obj.get("metadata") or {}).get("ownerReferences"):
        return 0, ""
    if obj.get("kind") == "ReplicaSet" and _deployment_owned(obj):
        return 0, ""
    return wanted_pods(obj)


def pod_cap_message(obj: dict[str, Any], count: int, path: str, total: int, cap: int, command: str) -> str:
    """The pod-cap refusal naming workload ``obj`` (a manifest as a dict) that asks for ``count``
    pods by field ``path``, when the simulation would hold ``total`` pods over ``cap``; ``command``
    is the karpy command whose ``--max-pods`` raises the cap."""
    meta = obj["metadata"]
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""  # as KubeObject.ref names it, in validate and simulate
    return (f"{obj['kind']}/{ns}{meta['name']}: {path}: {count:,} pod{'' if count == 1 else 's'}; the simulation "
            f"would hold {total:,} pods, more than its cap of {cap:,} (karpy {command} --max-pods)")


def _deployment_owned(obj: dict[str, Any]) -> bool:
    """True for a ReplicaSet whose controller is a Deployment."""
    return any(r.get("controller") and r.get("kind") == "Deployment" for r in obj["metadata"].get("ownerReferences") or ())


def template_hash(template: dict[str, Any]) -> str:
    """A 10-character stable hash of a pod template (stands in for ``pod-template-hash``)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).hexdigest()
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(digest[:16], 16)
    out = ""
    for _ in range(10):
        out += alphabet[n % len(alphabet)]
        n //= len(alphabet)
    return out


def _suffix(seed: str) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = int(hashlib.sha256(seed.encode()).hexdigest()[:12], 16)
    out = ""
    for _ in range(5):
        out += alphabet[n % len(alphabet)]
        n //= len(alphabet)
    return out


MAX_GENERATED_NAME_BASE = 58
"""Longest ``generateName`` prefix kept: apiserver's ``names.SimpleNameGenerator``
(``k8s.io/apiserver/pkg/storage/names/generate.go``) cuts the base to 63 - 5 characters before
appending 5 random ones, so a generated name is at most 63 characters."""


def generated_name(base: str, suffix: str) -> str:
    """The name the API server generates from ``generateName`` ``base`` and the 5-character
    ``suffix`` (``SimpleNameGenerator.GenerateName``: ``base[:58] + suffix``). The ReplicaSet and
    Job controllers create their pods with ``generateName: <owner>-``."""
    return base[:MAX_GENERATED_NAME_BASE] + suffix


def _replicaset_name_problem(name: str) -> str | None:
    """kube-apiserver's refusal of a ReplicaSet named ``name`` (a Deployment's ``<name>-<template
    hash>``: past 253 characters when the Deployment's name is past 242), as the API's error text;
    None when it may be created."""
    problems = name_problems(name, "subdomain")
    if not problems:
        return None
    detail = "; ".join(p.split(" (got ")[0] for p in problems)
    return f'422 Invalid: ReplicaSet.apps "{name}" is invalid: metadata.name: Invalid value: "{name}": {detail}'


class WorkloadSimulator:
    """Keeps each workload's pods in line with its spec, one :meth:`reconcile` at a time."""

    def __init__(self, cluster: InMemoryCluster, *, max_pods: int = DEFAULT_MAX_PODS, progress: Progress = NO_PROGRESS):
        self.cluster = cluster
        self.progress = progress
        """Told the pods created, when a pass creates many (``creating pods``)."""
        self.max_pods = max_pods
        """Most pods the cluster may hold; creating more raises :class:`ManifestError`."""
        self._next: dict[tuple[str, str], int] = {}
        """(namespace, owner) -> the next pod-name index: a replacement pod never reuses the name of
        an evicted one (StatefulSet pods keep their ordinal names, as in Kubernetes)."""
        self.failed_creates: dict[str, str] = {}
        """``Kind/namespace/name`` of a workload -> the API's message for its last refused pod (while refused)."""
        self.late_creates: dict[str, str] = {}
        """As :attr:`failed_creates`, for a workload whose pods were refused and then created (a
        PriorityClass or RuntimeClass applied later): the message of the last refusal."""
        self._owners_by_base: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}
        self._owned_rs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        """(namespace, Deployment name) -> the ReplicaSets it controls, listed once per pass (one
        listing per Deployment copied every ReplicaSet: quadratic in the Deployments)."""
        self._idle_at: int | None = None
        """The cluster's revision after a pass that changed nothing (a pass depends only on the
        cluster and :attr:`_next`, which only a change moves): the next pass at that revision is skipped."""

    def reconcile(self) -> int:
        """Create and delete pods as the workloads ask; returns the number of changes.

        Raises:
            ManifestError: the workloads ask for more than :attr:`max_pods` pods in all (named
                by the workload and field that asks for the most); nothing is created then.
        """
        if self._idle_at == self.cluster.revision:
            return 0  # nothing written since a pass that left everything as the workloads ask (the same input, the same pass)
        changes = 0
        pods = self.cluster.snapshot("Pod")
        # ReplicaSets a Deployment controls are kept by (and counted as) that Deployment
        listed = {kind: self.cluster.snapshot(kind) for kind in ("Deployment", "ReplicaSet", "StatefulSet", "Job")}
        workloads = {kind: [o for o in objs if not _deployment_owned(o)] for kind, objs in listed.items()}
        self._owned_rs = {}
        for rs in listed["ReplicaSet"]:
            for ref in rs["metadata"].get("ownerReferences") or ():
                if ref.get("kind") == "Deployment" and ref.get("controller"):
                    self._owned_rs.setdefault((rs["metadata"].get("namespace", "default"), ref.get("name", "")), []).append(rs)
        self._check_cap(len([p for p in pods if not p["metadata"].get("ownerReferences")]), workloads)
        by_owner: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for p in pods:
            for ref in p["metadata"].get("ownerReferences") or ():
                by_owner.setdefault((p["metadata"]["namespace"], ref.get("kind", ""), ref.get("name", "")), []).append(p)
        # owner (namespace, kind, name without its last "-segment") -> owners: a Deployment's
        # ReplicaSets are "<deployment>-<template hash>", found without scanning every owner
        self._owners_by_base = {}
        for key in by_owner:
            self._owners_by_base.setdefault((key[0], key[1], key[2].rpartition("-")[0]), []).append(key)
        for d in workloads["Deployment"]:
            if not self._replicaset_refused(d):
                changes += self._sync(d, "ReplicaSet", by_owner, stateful=False)
        for rs in workloads["ReplicaSet"]:
            changes += self._sync(rs, "ReplicaSet", by_owner, stateful=False, own_name=rs["metadata"]["name"])
        for s in workloads["StatefulSet"]:
            changes += self._sync(s, "StatefulSet", by_owner, stateful=True)
        for j in workloads["Job"]:
            changes += self._sync(j, "Job", by_owner, stateful=False)
        self._idle_at = self.cluster.revision if not changes else None
        if changes >= 1000:  # as many as a "creating pods" phase is shown for
            # kube-scheduler's cycle reads every pod next, remaking the views of those written
            # (100,000 new pods: 4 s wall on a loaded machine): done here, under a phase of its
            # own, not under the filled "creating pods" bar; that read then finds them made.
            self.progress.phase("reading the pods written")
            self.cluster.views("Pod")
        return changes

    def _check_cap(self, bare_pods: int, workloads: dict[str, list[dict[str, Any]]]) -> None:
        problem = pod_cap_problem([o for objs in workloads.values() for o in objs], self.max_pods, bare_pods=bare_pods)
        if problem:
            raise ManifestError([problem])

    def _sync(
        self,
        obj: dict[str, Any],
        owner_kind: str,
        by_owner: dict[tuple[str, str, str], list[dict[str, Any]]],
        *,
        stateful: bool,
        own_name: str | None = None,
    ) -> int:
        meta = obj["metadata"]
        spec = obj.get("spec") or {}
        ns = meta.get("namespace", "default")
        template = copy.deepcopy(spec.get("template") or {})
        want = wanted_pods(obj)[0]  # a suspended Job: none
        thash = template_hash(template)
        if obj["kind"] == "Deployment":
            owner_name = f"{meta['name']}-{thash}"
        else:
            owner_name = own_name or meta["name"]
        # pods of this workload with an old template (different owner name for Deployments)
        prefix_owner = [
            (key, by_owner[key]) for key in self._owners_by_base.get((ns, owner_kind, meta["name"]), ())
            if key[2] != owner_name and len(key[2]) == len(owner_name)
        ] if obj["kind"] == "Deployment" else []
        changes = 0
        for _, stale in prefix_owner:
            for p in stale:
                self.cluster.delete_sync("Pod", p["metadata"]["name"], ns)
                changes += 1
        owner_uid = ""
        if obj["kind"] == "Deployment":
            rs, rs_changes = self._replicaset(obj, owner_name, thash, want)
            owner_uid = rs["metadata"]["uid"]
            changes += rs_changes
        else:
            owner_uid = meta.get("uid", "")
        current = [p for p in by_owner.get((ns, owner_kind, owner_name), []) if not p["metadata"].get("deletionTimestamp")]
        current.sort(key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
        if len(current) > want:
            for p in current[want:][::-1]:
                self.cluster.delete_sync("Pod", p["metadata"]["name"], ns)
                changes += 1
            return changes
        names = {p["metadata"]["name"] for p in current}
        i = 0 if stateful else self._next.get((ns, owner_name), 0)
        missing = want - len(current)
        if missing >= 1000:
            self.progress.phase(f"creating pods: {shorten(ns + '/' + meta['name'], 20)}", total=missing)
        while len(current) < want:
            self._count_created(missing, want - len(current))
            if stateful:
                name = f"{meta['name']}-{i}"
            else:
                name = generated_name(f"{owner_name}-", _suffix(f"{ns}/{owner_name}/{i}"))
            i += 1
            if name in names or self.cluster.exists("Pod", name, ns):
                continue
            tmeta = template.get("metadata") or {}
            labels = dict(tmeta.get("labels") or {})
            if obj["kind"] == "Deployment":
                labels["pod-template-hash"] = thash
            pod_spec = template.get("spec") or {}
            if stateful and spec.get("volumeClaimTemplates"):
                pod_spec = self._claim_volumes(obj, name, pod_spec)
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "annotations": dict(tmeta.get("annotations") or {}),
                    "ownerReferences": [
                        {"apiVersion": "apps/v1" if owner_kind != "Job" else "batch/v1", "kind": owner_kind,
                         "name": owner_name, "controller": True, **({"uid": owner_uid} if owner_uid else {})}
                    ],
                },
                "spec": pod_spec,
                "status": {"phase": "Pending"},
            }
            try:
                # handed over: every pod of this pass shares the template's spec (this pass's copy)
                created = self.cluster.create_stored("Pod", pod, given=True)
            except KubeAPIError as exc:
                if exc.status not in (403, 422):
                    raise
                self.failed_creates[f"{obj['kind']}/{ns}/{meta['name']}"] = str(exc)
                break
            if self.failed_creates:  # refused before, created now: say so, not "not created"
                key = f"{obj['kind']}/{ns}/{meta['name']}"
                if key in self.failed_creates:
                    self.late_creates[key] = self.failed_creates.pop(key)
            current.append(created)
            names.add(name)
            changes += 1
        self._count_created(missing, want - len(current), end=True)
        if not stateful:
            self._next[(ns, owner_name)] = i
        return changes

    def _claim_volumes(self, sts: dict[str, Any], pod_name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
        """``pod_spec`` with a volume per ``volumeClaimTemplates`` entry naming the claim
        ``<template>-<pod>``, created from the template when it does not exist yet, as the
        StatefulSet controller does (``updateStorage``, ``createPersistentVolumeClaims``): the pod's
        volume topology (a WaitForFirstConsumer StorageClass's ``allowedTopologies``) then applies
        to it (trial 21: a StatefulSet's pods ignored it). A template volume replaces a pod volume
        of the same name. Returns a new spec; ``pod_spec`` is not changed."""
        meta = sts["metadata"]
        ns = meta.get("namespace", "default")
        selector = ((sts.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        claims: dict[str, dict[str, Any]] = {}
        for tmpl in (sts.get("spec") or {}).get("volumeClaimTemplates") or ():
            tname = str((tmpl.get("metadata") or {}).get("name") or "")
            if not tname:
                continue
            claim = f"{tname}-{pod_name}"
            claims[tname] = {"name": tname, "persistentVolumeClaim": {"claimName": claim}}
            if not self.cluster.exists("PersistentVolumeClaim", claim, ns):
                self.cluster.create_sync("PersistentVolumeClaim", {
                    "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                    "metadata": {"name": claim, "namespace": ns, "labels": dict(selector)},
                    "spec": copy.deepcopy(tmpl.get("spec") or {}), "status": {"phase": "Pending"}})
        if not claims:
            return pod_spec
        volumes = [v for v in pod_spec.get("volumes") or () if v.get("name") not in claims]
        return {**pod_spec, "volumes": [*volumes, *claims.values()]}

    def _count_created(self, missing: int, left: int, *, end: bool = False) -> None:
        """Tell :attr:`progress` the pods created so far of a workload's ``missing`` (counted when
        1,000 or more): every 1,000 while ``left`` remain, and at the ``end`` of its creating
        (then all of them, filling the bar, unless some were refused)."""
        if missing >= 1000 and (end or left % 1000 == 0):
            self.progress.update(missing - left)

    def _replicaset_refused(self, dep: dict[str, Any]) -> bool:
        """True when the API server would refuse the Deployment's ReplicaSet
        (:func:`_replicaset_name_problem`): the deployment controller's create fails, so no pod
        exists (its ReplicaFailure condition carries the server's message, recorded in
        :attr:`failed_creates`)."""
        meta = dep["metadata"]
        name = f"{meta['name']}-{template_hash((dep.get('spec') or {}).get('template') or {})}"
        refused = _replicaset_name_problem(name)
        if refused:
            self.failed_creates[f"Deployment/{meta.get('namespace', 'default')}/{meta['name']}"] = refused
        return refused is not None

    def _replicaset(self, dep: dict[str, Any], name: str, thash: str, replicas: int) -> tuple[dict[str, Any], int]:
        """The Deployment's current ReplicaSet ``name`` (created, or its ``spec.replicas`` set to
        ``replicas``); ReplicaSets of its older templates are deleted. Returns it and the number
        of changes made."""
        meta = dep["metadata"]
        ns = meta.get("namespace", "default")
        changes = 0
        for rs in self._owned_rs.get((ns, meta["name"]), ()):
            if rs["metadata"]["name"] != name:
                self.cluster.delete_sync("ReplicaSet", rs["metadata"]["name"], ns)
                changes += 1
        current = self.cluster.peek("ReplicaSet", name, ns)
        if current is None:
            spec = dep.get("spec") or {}
            template = copy.deepcopy(spec.get("template") or {})
            tmeta = template.setdefault("metadata", {})
            tmeta["labels"] = {**(tmeta.get("labels") or {}), "pod-template-hash": thash}
            selector = copy.deepcopy(spec.get("selector") or {})
            selector["matchLabels"] = {**(selector.get("matchLabels") or {}), "pod-template-hash": thash}
            current = self.cluster.create_sync("ReplicaSet", {
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": ns, "labels": dict(tmeta["labels"]),
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": meta["name"],
                                                  "controller": True, **({"uid": meta["uid"]} if meta.get("uid") else {})}]},
                "spec": {"replicas": replicas, "selector": selector, "template": template},
            })
            changes += 1
        elif (current.get("spec") or {}).get("replicas") != replicas:
            current = self.cluster.patch_sync("ReplicaSet", name, {"spec": {"replicas": replicas}}, ns)
            changes += 1
        return current, changes
