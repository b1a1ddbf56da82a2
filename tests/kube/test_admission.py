"""RuntimeClass admission in the in-memory cluster, as kube-apiserver's RuntimeClass plugin does
it (plugin/pkg/admission/runtimeclass/admission.go); tests/integration/test_runtimeclass.py
checks the same cases against the real API server."""

from __future__ import annotations

import pytest

from karpy_core.errors import KubeAPIError
from karpy_core.kube.admission import merge_tolerations
from karpy_core.kube.memory import InMemoryCluster

KATA = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "kata"}, "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "160Mi"}},
        "scheduling": {"nodeSelector": {"runtime": "kata"},
                       "tolerations": [{"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]}}
PLAIN = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "runc"}, "handler": "runc"}


def pod(name: str, **spec) -> dict:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}], **spec}}


@pytest.fixture
def cluster() -> InMemoryCluster:
    c = InMemoryCluster()
    c.create_sync("RuntimeClass", KATA)
    c.create_sync("RuntimeClass", PLAIN)
    return c


def test_runtimeclass_sets_overhead_selector_and_tolerations(cluster):
    created = cluster.create_sync("Pod", pod("a", runtimeClassName="kata", nodeSelector={"zone": "a"},
                                             tolerations=[{"key": "other", "operator": "Exists"}]))
    spec = created["spec"]
    assert spec["overhead"] == {"cpu": "250m", "memory": "160Mi"}
    assert spec["nodeSelector"] == {"zone": "a", "runtime": "kata"}
    assert spec["tolerations"] == [{"key": "other", "operator": "Exists"},
                                   {"key": "kata", "operator": "Exists", "effect": "NoSchedule"}]
    assert cluster.peek("Pod", "a")["spec"]["overhead"] == {"cpu": "250m", "memory": "160Mi"}


def test_runtimeclass_without_overhead_or_scheduling_changes_nothing(cluster):
    spec = cluster.create_sync("Pod", pod("b", runtimeClassName="runc"))["spec"]
    assert "overhead" not in spec and "nodeSelector" not in spec and "tolerations" not in spec


def test_same_overhead_written_differently_is_accepted(cluster):
    spec = cluster.create_sync("Pod", pod("c", runtimeClassName="kata", overhead={"cpu": "0.25", "memory": "160Mi"}))["spec"]
    assert spec["overhead"] == {"cpu": "250m", "memory": "160Mi"}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"runtimeClassName": "gvisor"}, 'pods "x" is forbidden: pod rejected: RuntimeClass "gvisor" not found'),
        ({"runtimeClassName": "kata", "overhead": {"cpu": "1"}},
         "pods \"x\" is forbidden: pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"),
        ({"overhead": {"cpu": "1"}},
         'pods "x" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead'),
        ({"runtimeClassName": "runc", "overhead": {"cpu": "1"}},
         'pods "x" is forbidden: pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead'),
        ({"runtimeClassName": "kata", "nodeSelector": {"runtime": "runc"}},
         'pods "x" is forbidden: conflict: runtimeClass.scheduling.nodeSelector[runtime] = kata; '
         "pod.spec.nodeSelector[runtime] = runc"),
    ],
)
def test_rejections_are_403_with_the_api_servers_message(cluster, spec, message):
    with pytest.raises(KubeAPIError) as err:
        cluster.create_sync("Pod", pod("x", **spec))
    assert err.value.status == 403 and err.value.reason == "Forbidden"
    assert str(err.value) == f"403 Forbidden: {message}"
    assert cluster.peek("Pod", "x") is None


def test_merge_tolerations_keeps_only_supersets():
    exists_all = {"operator": "Exists"}
    keyed = {"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"}
    key_exists = {"key": "k", "operator": "Exists"}
    assert merge_tolerations([keyed], [key_exists]) == [key_exists]
    assert merge_tolerations([key_exists], [keyed]) == [key_exists]
    assert merge_tolerations([keyed, key_exists], [exists_all]) == [exists_all]
    assert merge_tolerations([keyed], [dict(keyed)]) == [keyed]
    short = {"key": "n", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
    long = {"key": "n", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    assert merge_tolerations([short], [long]) == [long]


# --- Priority admission (plugin/pkg/admission/priority/admission.go); tests/integration/test_trial3_apiserver.py
# compares the same answers with the real API server's ------------------------------------------------------

HIGH = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000,
        "preemptionPolicy": "Never"}
LOW_DEFAULT = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "low"}, "value": -10,
               "globalDefault": True}


@pytest.mark.parametrize(("spec", "expected"), [
    ({"priorityClassName": "high"}, (1000, "Never", "high")),
    ({"priorityClassName": "system-node-critical"}, (2_000_001_000, "PreemptLowerPriority", "system-node-critical")),
    ({"priorityClassName": "system-cluster-critical"}, (2_000_000_000, "PreemptLowerPriority", "system-cluster-critical")),
    ({"priorityClassName": "high", "priority": 1000, "preemptionPolicy": "Never"}, (1000, "Never", "high")),
])
def test_a_priority_class_sets_priority_and_preemption_policy(cluster, spec, expected):
    cluster.create_sync("PriorityClass", HIGH)
    created = cluster.create_sync("Pod", pod("p", **spec))["spec"]
    assert (created["priority"], created["preemptionPolicy"], created["priorityClassName"]) == expected


def test_a_pod_naming_no_class_gets_the_global_default(cluster):
    assert "priority" not in cluster.create_sync("Pod", pod("before"))["spec"]  # no default class: 0, left unset
    cluster.create_sync("PriorityClass", LOW_DEFAULT)
    spec = cluster.create_sync("Pod", pod("after"))["spec"]
    assert (spec["priority"], spec["preemptionPolicy"], spec["priorityClassName"]) == (-10, "PreemptLowerPriority", "low")


@pytest.mark.parametrize(("spec", "message"), [
    ({"priorityClassName": "nope"}, 'pods "x" is forbidden: no PriorityClass with name nope was found'),
    ({"priorityClassName": "high", "priority": 5},
     'pods "x" is forbidden: the integer value of priority (5) must not be provided in pod spec; priority admission '
     "controller computed 1000 from the given PriorityClass name"),
    ({"priority": 7}, 'pods "x" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority '
                      "admission controller computed 0 from the given PriorityClass name"),
    ({"priorityClassName": "high", "preemptionPolicy": "PreemptLowerPriority"},
     'pods "x" is forbidden: the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; '
     "priority admission controller computed Never from the given PriorityClass name"),
])
def test_priority_rejections_are_403_with_the_api_servers_message(cluster, spec, message):
    cluster.create_sync("PriorityClass", HIGH)
    with pytest.raises(KubeAPIError) as err:
        cluster.create_sync("Pod", pod("x", **spec))
    assert err.value.status == 403 and str(err.value) == f"403 Forbidden: {message}"
    assert cluster.peek("Pod", "x") is None


# ---- scheduling gates (issue 35, trial 5) ----------------------------------------------------------
def test_a_gated_pod_is_stored_with_the_scheduling_gated_condition(cluster):
    """kube-apiserver's PrepareForCreate (applySchedulingGatedCondition); the same condition the
    real server stored: tests/integration/test_trial5_apiserver.py."""
    created = cluster.create_sync("Pod", pod("g", schedulingGates=[{"name": "example.com/gate"}]))
    (cond,) = created["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "SchedulingGated")
    assert created["status"]["phase"] == "Pending"
    assert "conditions" not in (cluster.create_sync("Pod", pod("free")).get("status") or {})


def test_a_gated_pod_keeps_a_pod_scheduled_condition_it_has():
    from karpy_core.kube.admission import scheduling_gated

    given = {**pod("g", schedulingGates=[{"name": "x"}]), "status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}}
    assert scheduling_gated(given) is given
