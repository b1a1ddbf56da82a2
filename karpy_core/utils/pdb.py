"""PodDisruptionBudget arithmetic, counted the way Kubernetes counts it.

One module serves every place karpy reasons about a PDB:

* the in-memory cluster plays kube-controller-manager's disruption controller with
  :func:`compute_status` (``status.expectedPods/desiredHealthy/currentHealthy/disruptionsAllowed/
  disruptedPods``) and kube-apiserver's Eviction API with :func:`eviction_verdict`;
* the disruption planner asks :func:`eviction_verdict` whether a candidate's pods could be evicted
  now, from the status the real or in-memory disruption controller wrote (or from
  :func:`compute_status` when a PDB has no current status, e.g. in a bare snapshot);
* the node drain goes through the Eviction API, so its 429s come from the same verdict.

Rules (Kubernetes ``pkg/controller/disruption/disruption.go`` and
``pkg/registry/core/pod/storage/eviction.go``):

* ``expectedPods``: with ``maxUnavailable`` (int or percent) or a percentage ``minAvailable``, the
  sum of the scale of every controller owning a selected pod (a Deployment through its ReplicaSet,
  a ReplicaSet, a StatefulSet, a ReplicationController, anything with ``spec.replicas``); with an
  integer ``minAvailable``, the number of selected pods (bare pods allowed). A selected pod with no
  controller found is an error: the controller then fails safe (``disruptionsAllowed = 0``).
  Pods with no controller reference are skipped ("unmanaged pods").
* ``desiredHealthy``: ``minAvailable`` (percent of expectedPods rounded up), or
  ``expectedPods - maxUnavailable`` (percent rounded up), floored at 0.
* ``currentHealthy``: selected pods that are not being deleted, not in ``disruptedPods`` (an
  eviction the API server granted less than :data:`DELETION_TIMEOUT_SECONDS` ago) and Ready
  (condition ``Ready=True``).
* ``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, and 0 when ``expectedPods`` is 0.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from karpy_core.utils.selectors import selector_matches
from karpy_core.utils.timestamps import parse_rfc3339

__all__ = [
    "DELETION_TIMEOUT_SECONDS",
    "MAX_DISRUPTED_POD_SIZE",
    "EVICTION_DENIED_MESSAGE",
    "MULTIPLE_PDBS_MESSAGE",
    "PDBStatus",
    "EvictionVerdict",
    "ScaleLookup",
    "pod_ready",
    "pdb_selects_for_eviction",
    "pdb_selects",
    "controller_scale",
    "compute_status",
    "status_is_current",
    "effective_status",
    "eviction_verdict",
    "disruptions_allowed",
    "charge",
]

DELETION_TIMEOUT_SECONDS = 120.0
"""How long an entry of ``status.disruptedPods`` holds a pod out of ``currentHealthy`` while the
pod is not deleted (Kubernetes ``disruption.DeletionTimeout``, 2 minutes)."""
MAX_DISRUPTED_POD_SIZE = 2000
"""Evictions are refused while ``status.disruptedPods`` holds more entries (``eviction.go``)."""
EVICTION_DENIED_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
"""kube-apiserver's 429 message (``eviction.go``)."""
MULTIPLE_PDBS_MESSAGE = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
"""kube-apiserver's 500 message when several PDBs select the pod (``eviction.go``)."""

ScaleLookup = Callable[[str, str, str], "dict[str, Any] | None"]
"""``(kind, namespace, name) -> object or None``: how :func:`controller_scale` finds controllers."""


def _ts(text: Any) -> float | None:
    return parse_rfc3339(text)


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_ready(pod: dict[str, Any]) -> bool:
    """True when the pod has condition ``Ready=True`` (Kubernetes ``podutil.IsPodReady``)."""
    for c in (pod.get("status") or {}).get("conditions") or ():  # a loop, not any(...): once per pod of a first pass
        if c.get("type") == "Ready" and c.get("status") == "True":
            return True
    return False


def _ns(obj: dict[str, Any]) -> str:
    return obj["metadata"].get("namespace") or "default"


def pdb_selects(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """The disruption controller's pod selection (``getPodsForPdb``): same namespace and the
    selector matches (policy/v1: an empty selector matches every pod, a missing one none)."""
    if _ns(pdb) != _ns(pod):
        return False
    try:
        return selector_matches((pdb.get("spec") or {}).get("selector"), pod["metadata"].get("labels") or {})
    except ValueError:
        return False


def pdb_selects_for_eviction(pdb: dict[str, Any], pod: dict[str, Any]) -> bool:
    """The Eviction API's PDB lookup (``getPodDisruptionBudgets``): like :func:`pdb_selects` but a
    missing or empty selector matches nothing, and an invalid one matches nothing."""
    sel = (pdb.get("spec") or {}).get("selector")
    if not sel or not (sel.get("matchLabels") or sel.get("matchExpressions")):
        return False
    return pdb_selects(pdb, pod)


def _controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in obj["metadata"].get("ownerReferences") or () if r.get("controller")), None)


def _uid_matches(ref: dict[str, Any], obj: dict[str, Any]) -> bool:
    uid = ref.get("uid")
    return not uid or uid == obj["metadata"].get("uid")


def controller_scale(ref: dict[str, Any], namespace: str, lookup: ScaleLookup) -> tuple[str, int] | None:
    """``(controller uid or kind/name, replicas)`` of the controller ``ref`` names, or None.

    The finders of ``disruption.go``, in order: a ReplicaSet owned by a Deployment gives the
    Deployment's ``spec.replicas`` (``getPodDeployment``), else the ReplicaSet's own
    (``getPodReplicaSet``); a StatefulSet or ReplicationController its ``spec.replicas``; any other
    kind with ``spec.replicas`` stands for the scale subresource. ``replicas`` missing counts 1
    (the API default). A reference whose ``uid`` differs from the object's is not its controller.
    """
    kind, name = ref.get("kind", ""), ref.get("name", "")
    obj = lookup(kind, namespace, name)
    if obj is None or not _uid_matches(ref, obj):
        return None
    if kind == "ReplicaSet":
        owner = _controller_ref(obj)
        if owner is not None and owner.get("kind") == "Deployment":
            dep = lookup("Deployment", namespace, owner.get("name", ""))
            if dep is None or not _uid_matches(owner, dep):
                return None
            obj = dep
    spec = obj.get("spec") or {}
    if "replicas" not in spec and kind not in ("ReplicaSet", "StatefulSet", "ReplicationController", "Deployment"):
        return None  # no scale subresource (a Job, a DaemonSet)
    replicas = spec.get("replicas")
    key = obj["metadata"].get("uid") or f"{obj.get('kind', kind)}/{namespace}/{obj['metadata'].get('name')}"
    return key, 1 if replicas is None else int(replicas)


def _scaled(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)``.

    Raises:
        ValueError: a string that is not a percentage.
    """
    if isinstance(value, str):
        if not value.endswith("%"):
            raise ValueError(f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}")
        return -(-int(value[:-1]) * total // 100)
    return int(value)


@dataclass(frozen=True)
class PDBStatus:
    """A PDB's status as the disruption controller computes it (counts of pods).

    ``disrupted_pods`` maps pod name -> RFC 3339 time of the granted eviction; ``error`` is the
    reason the controller failed safe (``disruptionsAllowed`` forced to 0), or "";
    ``recheck_at`` is when an entry of ``disrupted_pods`` times out (epoch seconds), or None.
    """

    expected_pods: int
    desired_healthy: int
    current_healthy: int
    disruptions_allowed: int
    disrupted_pods: dict[str, str] = field(default_factory=dict)
    error: str = ""
    recheck_at: float | None = None
    failed_generation: int = 0
    """With ``error``: the ``observedGeneration`` the PDB had, which ``failSafe`` keeps."""

    def to_status(self, generation: int) -> dict[str, Any]:
        """The ``status`` object of a policy/v1 PodDisruptionBudget with ``observedGeneration``
        ``generation`` (the previous one when the sync failed, as ``failSafe`` leaves it)."""
        allowed = self.disruptions_allowed > 0
        if self.error:
            generation = self.failed_generation
            cond: dict[str, Any] = {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed", "message": self.error}
        else:
            cond = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
                    "reason": "SufficientPods" if allowed else "InsufficientPods", "message": ""}
        cond["observedGeneration"] = generation
        return {
            "observedGeneration": generation,
            "disruptedPods": dict(self.disrupted_pods) or None,
            "disruptionsAllowed": self.disruptions_allowed,
            "currentHealthy": self.current_healthy,
            "desiredHealthy": self.desired_healthy,
            "expectedPods": self.expected_pods,
            "conditions": [cond],
        }


def compute_status(pdb: dict[str, Any], pods: Iterable[dict[str, Any]], lookup: ScaleLookup | None, now: float) -> PDBStatus:
    """The disruption controller's ``trySync`` for one PDB (see the module docstring for the rules).

    Args:
        pdb: the PodDisruptionBudget (its ``status.disruptedPods`` is read).
        pods: pods of the cluster (any namespace; selection happens here).
        lookup: finds controllers for ``expectedPods``; None finds none (a snapshot without
            workloads), so only integer ``minAvailable`` PDBs get a non-zero allowance then.
        now: epoch seconds.

    Returns:
        the status; on a sync error (no controller for a pod, a bad percentage) the fail-safe one:
        the previous counts with ``disruptions_allowed`` 0 and ``error`` set.
    """
    spec = pdb.get("spec") or {}
    selected = [p for p in pods if pdb_selects(pdb, p)]
    expected = desired = 0
    try:
        if spec.get("maxUnavailable") is not None or isinstance(spec.get("minAvailable"), str):
            expected = _expected_scale(selected, lookup)
            if spec.get("maxUnavailable") is not None:
                desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
            else:
                desired = _scaled(spec["minAvailable"], expected)
        elif spec.get("minAvailable") is not None:
            desired = int(spec["minAvailable"])
            expected = len(selected)
    except ValueError as exc:
        old = pdb.get("status") or {}
        return PDBStatus(int(old.get("expectedPods") or 0), int(old.get("desiredHealthy") or 0),
                         int(old.get("currentHealthy") or 0), 0, dict(old.get("disruptedPods") or {}), error=str(exc),
                         failed_generation=int(old.get("observedGeneration") or 0))
    previous = (pdb.get("status") or {}).get("disruptedPods") or {}
    disrupted: dict[str, str] = {}
    recheck: float | None = None
    for p in selected:
        name = p["metadata"]["name"]
        if p["metadata"].get("deletionTimestamp") or name not in previous:
            continue
        at = _ts(previous[name]) or now
        if at + DELETION_TIMEOUT_SECONDS < now:
            continue  # "pod was expected to be deleted but it wasn't"
        disrupted[name] = previous[name]
        recheck = at + DELETION_TIMEOUT_SECONDS if recheck is None else min(recheck, at + DELETION_TIMEOUT_SECONDS)
    healthy = 0
    for p in selected:
        if p["metadata"].get("deletionTimestamp"):
            continue
        since = _ts(disrupted.get(p["metadata"]["name"]))
        if since is not None and since + DELETION_TIMEOUT_SECONDS > now:
            continue
        if pod_ready(p):
            healthy += 1
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return PDBStatus(expected, desired, healthy, allowed, disrupted, recheck_at=recheck)


def _expected_scale(pods: list[dict[str, Any]], lookup: ScaleLookup | None) -> int:
    """``getExpectedScale``: the sum of the distinct controllers' scale.

    Raises:
        ValueError: ``found no controllers for pod "<name>"``.
    """
    scales: dict[str, int] = {}
    for p in pods:
        ref = _controller_ref(p)
        if ref is None:
            continue  # unmanaged pod: Kubernetes logs and skips it
        found = controller_scale(ref, _ns(p), lookup) if lookup is not None else None
        if found is None:
            raise ValueError(f'found no controllers for pod "{p["metadata"]["name"]}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def status_is_current(pdb: dict[str, Any]) -> bool:
    """True when a disruption controller has written ``status`` for the PDB's current spec
    (``status.observedGeneration >= metadata.generation``)."""
    status = pdb.get("status") or {}
    if "observedGeneration" not in status or "disruptionsAllowed" not in status:
        return False
    return int(status["observedGeneration"]) >= int(pdb["metadata"].get("generation") or 1)


def effective_status(pdb: dict[str, Any], pods: Iterable[dict[str, Any]], lookup: ScaleLookup | None, now: float) -> dict[str, Any]:
    """The PDB's ``status`` when current (:func:`status_is_current`), else :func:`compute_status`'s
    (as ``to_status``): what a reader of a snapshot should trust."""
    if status_is_current(pdb):
        return dict(pdb["status"])
    gen = int(pdb["metadata"].get("generation") or 1)
    return compute_status(pdb, pods, lookup, now).to_status(gen)


@dataclass(frozen=True)
class EvictionVerdict:
    """What kube-apiserver's Eviction API does with a pod.

    ``action``: ``delete`` (no PDB check needed, or an unhealthy pod the policy lets go: the PDB is
    not charged), ``decrement`` (allowed: charge the PDB, i.e. ``disruptionsAllowed - 1`` and the
    pod in ``disruptedPods``, then delete) or ``deny``. For ``deny``: ``status`` (429, 403 or 500),
    ``reason`` (``TooManyRequests``, ``Forbidden``, "" with 500), ``message`` and ``cause``
    as kube-apiserver words them; ``pdb`` names the PDB involved, if one.
    """

    action: str
    pdb: str = ""
    status: int = 0
    reason: str = ""
    message: str = ""
    cause: str = ""


def eviction_verdict(
    pod: dict[str, Any], pdbs: Iterable[dict[str, Any]], status_of: Callable[[dict[str, Any]], dict[str, Any]] | None = None
) -> EvictionVerdict:
    """kube-apiserver's decision for ``POST pods/<pod>/eviction`` (``eviction.go`` ``Create``).

    1. A pod Pending, Succeeded, Failed or already being deleted is deleted without a PDB check.
    2. PDBs of the pod's namespace whose non-empty selector matches it: more than one is a 500,
       none lets the pod go.
    3. A pod not Ready goes without charging the PDB when ``unhealthyPodEvictionPolicy`` is
       ``AlwaysAllow``, or (``IfHealthyBudget``, the default) when ``currentHealthy >=
       desiredHealthy > 0``.
    4. ``checkAndDecrement``: a status older than the spec (``observedGeneration < generation``)
       is a 429; ``disruptionsAllowed < 0`` a 403; more than :data:`MAX_DISRUPTED_POD_SIZE`
       ``disruptedPods`` a 403; ``disruptionsAllowed == 0`` a 429; otherwise ``decrement``.

    Args:
        pod: the pod as stored.
        pdbs: candidate PDBs (any namespace).
        status_of: the status to judge a PDB by (default its own ``status``).
    """
    status_of = status_of or (lambda pdb: pdb.get("status") or {})
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
        return EvictionVerdict("delete")
    matching = [b for b in pdbs if pdb_selects_for_eviction(b, pod)]
    if len(matching) > 1:
        # a Status with code 500 and no reason (kube-apiserver returns it as the response object)
        return EvictionVerdict("deny", matching[0]["metadata"]["name"], 500, "", MULTIPLE_PDBS_MESSAGE)
    if not matching:
        return EvictionVerdict("delete")
    pdb = matching[0]
    name = pdb["metadata"]["name"]
    status = status_of(pdb)
    current, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
    if not pod_ready(pod):
        if (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") == "AlwaysAllow":
            return EvictionVerdict("delete", name)
        if current >= desired and desired > 0:
            return EvictionVerdict("delete", name)
    if int(status.get("observedGeneration") or 0) < int(pdb["metadata"].get("generation") or 1):
        return EvictionVerdict("deny", name, 429, "TooManyRequests", EVICTION_DENIED_MESSAGE,
                               f"The disruption budget {name} is still being processed by the server.")
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        return EvictionVerdict("deny", name, 403, "Forbidden",
                               f'poddisruptionbudgets.policy "{name}" is forbidden: pdb disruptions allowed is negative')
    if len(status.get("disruptedPods") or {}) > MAX_DISRUPTED_POD_SIZE:
        return EvictionVerdict("deny", name, 403, "Forbidden",
                               f'poddisruptionbudgets.policy "{name}" is forbidden: DisruptedPods map too big - '
                               "too many evictions not confirmed by PDB controller")
    if allowed == 0:
        return EvictionVerdict("deny", name, 429, "TooManyRequests", EVICTION_DENIED_MESSAGE,
                               f"The disruption budget {name} needs {desired} healthy pods and has {current} currently")
    return EvictionVerdict("decrement", name)


def disruptions_allowed(pdb: dict[str, Any], pods: Iterable[dict[str, Any]], lookup: ScaleLookup | None = None,
                        *, now: float) -> int:
    """``status.disruptionsAllowed`` as the disruption controller would write it at ``now``
    (epoch seconds; see :func:`compute_status`)."""
    return compute_status(pdb, pods, lookup, now).disruptions_allowed


def charge(status: dict[str, Any], pod_name: str, now: float) -> dict[str, Any]:
    """The status the Eviction API writes after granting an eviction (``checkAndDecrement``):
    ``disruptionsAllowed - 1`` and ``disruptedPods[pod_name] = now``."""
    out = dict(status)
    out["disruptionsAllowed"] = int(status.get("disruptionsAllowed") or 0) - 1
    out["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: _iso(now)}
    if out["disruptionsAllowed"] == 0:
        gen = status.get("observedGeneration")
        out["conditions"] = [{"type": "DisruptionAllowed", "status": "False", "reason": "InsufficientPods", "message": "",
                              "observedGeneration": gen}]
    return out
