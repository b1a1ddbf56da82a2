"""PodDisruptionBudget arithmetic (karpy_core.utils.pdb) and the in-memory Eviction API.

Each test names the Kubernetes rule it follows: ``pkg/controller/disruption/disruption.go``
(``getExpectedPodCount``, ``getExpectedScale``, ``countHealthyPods``, ``buildDisruptedPodMap``,
``updatePdbStatus``) and ``pkg/registry/core/pod/storage/eviction.go`` (``Create``,
``checkAndDecrement``, ``canIgnorePDB``).
"""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.errors import KubeAPIError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.clock import VirtualClock, iso
from karpy_core.utils.pdb import (
    EVICTION_DENIED_MESSAGE,
    MULTIPLE_PDBS_MESSAGE,
    compute_status,
    disruptions_allowed,
    eviction_verdict,
)

NOW = 1767225600.0
SEL = {"matchLabels": {"app": "web"}}


def pod(name: str, ready: bool = True, owner: str | None = "web-rs", phase: str = "Running", **meta: Any) -> dict[str, Any]:
    refs = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "controller": True}] if owner else []
    conds = [{"type": "Ready", "status": "True" if ready else "False"}]
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}, "ownerReferences": refs, **meta},
            "spec": {"nodeName": "n1"}, "status": {"phase": phase, "conditions": conds}}


def pdb(name: str = "web", selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "generation": 1},
            "spec": {"selector": SEL if selector is None else selector, **spec}}


def workloads(replicas: int) -> dict[tuple[str, str, str], dict[str, Any]]:
    """A Deployment ``web`` with ``replicas`` owning ReplicaSet ``web-rs`` (whose own replicas
    field is deliberately stale, to show the Deployment's scale wins)."""
    return {
        ("Deployment", "default", "web"): {"kind": "Deployment", "metadata": {"name": "web", "uid": "d1"}, "spec": {"replicas": replicas}},
        ("ReplicaSet", "default", "web-rs"): {"kind": "ReplicaSet", "metadata": {
            "name": "web-rs", "uid": "rs1", "ownerReferences": [{"kind": "Deployment", "name": "web", "uid": "d1", "controller": True}]},
            "spec": {"replicas": 99}},
    }


def lookup_in(objs: dict[tuple[str, str, str], dict[str, Any]]):
    return lambda kind, ns, name: objs.get((kind, ns, name))


def test_max_unavailable_counts_against_the_controllers_scale_not_the_pods_left():
    # disruption.go getExpectedScale: expectedPods = the Deployment's spec.replicas (found through
    # the pod's ReplicaSet), so an evicted pod still counts as expected until it is replaced.
    lookup = lookup_in(workloads(4))
    pods = [pod(f"p{i}") for i in range(4)]
    st = compute_status(pdb(maxUnavailable=1), pods, lookup, NOW)
    assert (st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed) == (4, 3, 4, 1)
    st = compute_status(pdb(maxUnavailable=1), pods[1:], lookup, NOW)  # one evicted, not yet replaced
    assert (st.expected_pods, st.desired_healthy, st.current_healthy, st.disruptions_allowed) == (4, 3, 3, 0)


def test_percentages_round_up_against_the_scale():
    # intstr.GetScaledValueFromIntOrPercent(..., roundUp=true) for both fields.
    lookup = lookup_in(workloads(10))
    pods = [pod(f"p{i}") for i in range(10)]
    st = compute_status(pdb(maxUnavailable="25%"), pods, lookup, NOW)
    assert (st.desired_healthy, st.disruptions_allowed) == (7, 3)  # ceil(2.5) = 3 may be unavailable
    st = compute_status(pdb(minAvailable="50%"), pods[:9], lookup, NOW)
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed) == (10, 5, 4)
    st = compute_status(pdb(minAvailable="50%"), pods[:5], lookup, NOW)
    assert st.disruptions_allowed == 0  # 5 healthy of 10 expected: none may go


def test_integer_min_available_works_for_bare_pods_and_max_unavailable_does_not():
    # getExpectedPodCount: integer minAvailable uses len(pods); maxUnavailable needs controllers,
    # unmanaged pods are skipped, and expectedPods 0 allows nothing (updatePdbStatus).
    bare = [pod(f"p{i}", owner=None) for i in range(3)]
    st = compute_status(pdb(minAvailable=2), bare, None, NOW)
    assert (st.expected_pods, st.desired_healthy, st.disruptions_allowed) == (3, 2, 1)
    st = compute_status(pdb(maxUnavailable=1), bare, None, NOW)
    assert (st.expected_pods, st.disruptions_allowed) == (0, 0)


def test_a_pod_whose_controller_is_missing_fails_safe():
    # getExpectedScale: "found no controllers for pod"; sync -> failSafe: disruptionsAllowed = 0.
    st = compute_status(pdb(maxUnavailable=1), [pod("p0"), pod("p1")], lookup_in({}), NOW)
    assert st.disruptions_allowed == 0 and st.error == 'found no controllers for pod "p0"'
    status = st.to_status(1)
    assert status["conditions"][0]["reason"] == "SyncFailed"
    assert status["observedGeneration"] == 0  # failSafe leaves observedGeneration as it was


def test_only_ready_pods_not_deleting_and_not_recently_disrupted_are_healthy():
    # countHealthyPods: Ready=True, no deletionTimestamp, not in disruptedPods younger than 2 min;
    # buildDisruptedPodMap drops entries older than DeletionTimeout (2 min) and deleting pods.
    lookup = lookup_in(workloads(5))
    pods = [pod("p0"), pod("p1", ready=False), pod("p2", deletionTimestamp=iso(NOW)), pod("p3"), pod("p4")]
    budget = pdb(maxUnavailable=2)
    budget["status"] = {"disruptedPods": {"p3": iso(NOW - 60), "p4": iso(NOW - 121), "gone": iso(NOW - 1), "p2": iso(NOW - 1)}}
    st = compute_status(budget, pods, lookup, NOW)
    assert st.current_healthy == 2  # p0 and p4 (its entry timed out)
    assert st.disrupted_pods == {"p3": iso(NOW - 60)} and st.recheck_at == NOW - 60 + 120
    assert st.disruptions_allowed == 0  # desired 3
    assert compute_status(budget, pods, lookup, NOW + 61).current_healthy == 3  # p3's entry expired too


def test_eviction_verdicts_follow_the_api_server():
    # eviction.go Create: canIgnorePDB (Pending/terminal/deleting), >1 PDB -> 500, unhealthy pod
    # policy, then checkAndDecrement (stale status -> 429, 0 allowed -> 429, else decrement).
    healthy = {"observedGeneration": 1, "disruptionsAllowed": 1, "currentHealthy": 4, "desiredHealthy": 3}
    spent = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 3, "desiredHealthy": 3}
    short = {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 3}

    def with_status(status: dict[str, Any], **spec: Any) -> dict[str, Any]:
        return {**pdb(maxUnavailable=1, **spec), "status": status}

    assert eviction_verdict(pod("p", phase="Pending"), [with_status(spent)]).action == "delete"
    assert eviction_verdict(pod("p", phase="Succeeded"), [with_status(spent)]).action == "delete"
    assert eviction_verdict(pod("p"), [with_status(healthy)]) .action == "decrement"
    v = eviction_verdict(pod("p"), [with_status(spent)])
    assert (v.action, v.status, v.reason, v.message) == ("deny", 429, "TooManyRequests", EVICTION_DENIED_MESSAGE)
    assert v.cause == "The disruption budget web needs 3 healthy pods and has 3 currently"
    stale = with_status(healthy)
    stale["metadata"]["generation"] = 2
    v = eviction_verdict(pod("p"), [stale])
    assert (v.status, v.cause) == (429, "The disruption budget web is still being processed by the server.")
    v = eviction_verdict(pod("p"), [with_status(healthy), {**with_status(healthy), "metadata": {"name": "b", "namespace": "default"}}])
    assert (v.status, v.reason, v.message) == (500, "", MULTIPLE_PDBS_MESSAGE)  # as kube-apiserver: no reason
    # an unready pod: IfHealthyBudget (default) lets it go uncharged while currentHealthy >= desiredHealthy > 0
    assert eviction_verdict(pod("p", ready=False), [with_status(spent)]).action == "delete"
    assert eviction_verdict(pod("p", ready=False), [with_status(short)]).action == "deny"
    assert eviction_verdict(pod("p", ready=False), [with_status(short, unhealthyPodEvictionPolicy="IfHealthyBudget")]).action == "deny"
    assert eviction_verdict(pod("p", ready=False), [with_status(short, unhealthyPodEvictionPolicy="AlwaysAllow")]).action == "delete"
    # the Eviction API ignores a PDB with an empty selector (it "should match nothing")
    assert eviction_verdict(pod("p"), [{**with_status(spent), "spec": {"selector": {}, "maxUnavailable": 1}}]).action == "delete"


def deployment_cluster(replicas: int, clock: VirtualClock, **pdb_spec: Any) -> InMemoryCluster:
    c = InMemoryCluster(clock)
    dep = c.create_sync("Deployment", {"metadata": {"name": "web", "namespace": "default"}, "spec": {"replicas": replicas}})
    c.create_sync("ReplicaSet", {"metadata": {"name": "web-rs", "namespace": "default", "ownerReferences": [
        {"kind": "Deployment", "name": "web", "uid": dep["metadata"]["uid"], "controller": True}]}, "spec": {"replicas": replicas}})
    for i in range(replicas):
        c.create_sync("Pod", pod(f"p{i}"))
    c.create_sync("PodDisruptionBudget", pdb(**pdb_spec))
    return c


async def test_in_memory_eviction_api_charges_the_budget_until_replacements_are_ready():
    clock = VirtualClock(NOW)
    c = deployment_cluster(4, clock, maxUnavailable=1)
    status = (await c.get("PodDisruptionBudget", "web", "default"))["status"]
    assert {k: status[k] for k in ("expectedPods", "desiredHealthy", "currentHealthy", "disruptionsAllowed", "observedGeneration")} == \
        {"expectedPods": 4, "desiredHealthy": 3, "currentHealthy": 4, "disruptionsAllowed": 1, "observedGeneration": 1}
    await c.evict(await c.get("Pod", "p0", "default"))
    for name in ("p1", "p2", "p3"):
        with pytest.raises(KubeAPIError) as exc:
            await c.evict(await c.get("Pod", name, "default"))
        assert (exc.value.status, exc.value.reason) == (429, "TooManyRequests")
        assert str(exc.value) == f"429 TooManyRequests: {EVICTION_DENIED_MESSAGE}"
        assert exc.value.causes == ("The disruption budget web needs 3 healthy pods and has 3 currently",)
    assert c.evictions == ["default/p0"]
    replacement = c.create_sync("Pod", pod("p4", ready=False))  # the ReplicaSet's replacement, starting
    with pytest.raises(KubeAPIError):
        await c.evict(await c.get("Pod", "p1", "default"))
    c.patch_sync("Pod", replacement["metadata"]["name"], {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}, "default")
    await c.evict(await c.get("Pod", "p1", "default"))
    assert c.evictions == ["default/p0", "default/p1"]


async def test_an_evicted_pod_that_lingers_while_deleting_is_not_healthy():
    # countHealthyPods: a pod with a deletionTimestamp is not healthy (and buildDisruptedPodMap
    # drops its disruptedPods entry); the 2-minute timeout is covered by compute_status above.
    clock = VirtualClock(NOW)
    c = deployment_cluster(2, clock, minAvailable=1)
    p0 = pod("p0")
    p0["metadata"]["name"] = "slow"
    p0["metadata"]["finalizers"] = ["example.com/hold"]  # deletion waits: the pod lingers, deleting
    c.create_sync("Pod", p0)
    c.delete_sync("Pod", "p1", "default")
    st = (await c.get("PodDisruptionBudget", "web", "default"))["status"]
    assert (st["currentHealthy"], st["disruptionsAllowed"]) == (2, 1)  # p0 and slow
    await c.evict(await c.get("Pod", "slow", "default"))
    st = (await c.get("PodDisruptionBudget", "web", "default"))["status"]
    assert (st["currentHealthy"], st["disruptionsAllowed"]) == (1, 0)  # slow is deleting
    with pytest.raises(KubeAPIError):
        await c.evict(await c.get("Pod", "p0", "default"))


async def test_in_memory_eviction_api_refuses_a_pod_under_two_pdbs_with_500():
    c = deployment_cluster(3, VirtualClock(NOW), minAvailable=1)
    c.create_sync("PodDisruptionBudget", pdb("other", minAvailable=0))
    with pytest.raises(KubeAPIError) as exc:
        await c.evict(await c.get("Pod", "p0", "default"))
    assert (exc.value.status, str(exc.value)) == (500, f"500: {MULTIPLE_PDBS_MESSAGE}")


def test_disruptions_allowed_helper_matches_compute_status():
    pods = [pod(f"p{i}", owner=None) for i in range(5)]
    assert disruptions_allowed(pdb(minAvailable=3), pods, now=NOW) == 2


async def test_eviction_uid_precondition_refuses_a_pod_replaced_under_the_same_name():
    # karpy's Eviction requests carry deleteOptions.preconditions.uid; kube-apiserver answers 409.
    c = InMemoryCluster(VirtualClock(NOW))
    stale = c.create_sync("Pod", pod("web-0", owner=None))
    c.delete_sync("Pod", "web-0", "default")
    c.create_sync("Pod", pod("web-0", owner=None))  # a StatefulSet pod comes back under its name
    with pytest.raises(KubeAPIError) as exc:
        await c.evict(stale)
    assert (exc.value.status, exc.value.reason) == (409, "Conflict") and c.evictions == []
