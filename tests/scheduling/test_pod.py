from __future__ import annotations

from karpy_core.scheduling.pod import effective_requests, pod_info

GI = 2**30
MI = 2**20


def c(name: str, requests: dict | None = None, limits: dict | None = None, restart: str | None = None) -> dict:
    out: dict = {"name": name, "resources": {}}
    if requests:
        out["resources"]["requests"] = requests
    if limits:
        out["resources"]["limits"] = limits
    if restart:
        out["restartPolicy"] = restart
    return out


def test_requests_default_from_limits_when_only_limits_set():
    spec = {"containers": [c("a", limits={"cpu": "2", "memory": "1Gi"}), c("b", requests={"cpu": "250m"}, limits={"cpu": "1", "memory": "512Mi"})]}
    assert effective_requests(spec) == {"cpu": 2250, "memory": GI + 512 * MI, "pods": 1}


def test_init_containers_peak_and_sidecars_run_alongside():
    spec = {
        "initContainers": [
            c("setup", requests={"cpu": "3", "memory": "100Mi"}),
            c("proxy", requests={"cpu": "500m", "memory": "64Mi"}, restart="Always"),
            c("migrate", requests={"cpu": "2", "memory": "2Gi"}),
        ],
        "containers": [c("app", requests={"cpu": "1", "memory": "1Gi"})],
        "overhead": {"cpu": "100m", "memory": "10Mi"},
    }
    # regular = app + proxy = 1.5 cpu, 1088Mi; init peaks: setup 3 cpu; migrate+proxy 2.5 cpu, 2112Mi
    assert effective_requests(spec) == {"cpu": 3000 + 100, "memory": 2112 * MI + 10 * MI, "pods": 1}


def test_extended_resources_and_ephemeral_storage():
    spec = {"containers": [c("a", requests={"nvidia.com/gpu": "1", "ephemeral-storage": "10Gi"}, limits={"nvidia.com/gpu": "1"})]}
    assert effective_requests(spec) == {"nvidia.com/gpu": 1, "ephemeral-storage": 10 * GI, "pods": 1}


def test_node_affinity_terms_are_alternatives_with_node_selector_in_each():
    p = pod_info({
        "metadata": {"name": "p"},
        "spec": {
            "containers": [],
            "nodeSelector": {"team": "a"},
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]}]},
                {"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}]},
            ]}}},
        },
    })
    assert [t.describe() for t in p.requirement_terms] == [
        "kubernetes.io/arch In [arm64], team In [a]",
        "kubernetes.io/arch In [amd64], team In [a]",
    ]
    assert p.unsupported == ""


def test_match_fields_is_unsupported():
    p = pod_info({"metadata": {"name": "p"}, "spec": {"containers": [], "affinity": {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]}}}}})
    assert "matchFields" in p.unsupported


# ---- pod-level resources (spec.resources, PodLevelResources; issue 35, trial 5) -------------------------
def test_pod_level_requests_win_for_the_resources_they_name():
    """k8s.io/component-helpers/resource PodRequests: the pod-level cpu request replaces the
    containers' 100m; memory, not named at pod level, stays the containers'."""
    spec = {"resources": {"requests": {"cpu": "6"}, "limits": {"cpu": "6"}},
            "containers": [c("a", requests={"cpu": "100m", "memory": "256Mi"})]}
    assert effective_requests(spec) == {"cpu": 6000, "memory": 256 * MI, "pods": 1}


def test_a_pod_level_limit_alone_is_the_request_of_a_resource_no_container_requests():
    """defaultPodRequests: memory, requested by no container, defaults to the pod-level limit (the
    API server stored requests {cpu: 100m, memory: 1Gi} for this pod on v1.36.3); cpu, which a
    container requests, defaults to the containers' sum (the pod-level limit does not count)."""
    spec = {"resources": {"limits": {"cpu": "2", "memory": "1Gi"}}, "containers": [c("a", requests={"cpu": "100m"})]}
    assert effective_requests(spec) == {"cpu": 100, "memory": GI, "pods": 1}


def test_pod_level_requests_replace_the_init_peak_and_overhead_is_added_after():
    spec = {"resources": {"requests": {"cpu": "4"}},
            "initContainers": [c("setup", requests={"cpu": "3"})],
            "containers": [c("app", requests={"cpu": "1", "nvidia.com/gpu": "1"}, limits={"nvidia.com/gpu": "1"})],
            "overhead": {"cpu": "250m"}}
    assert effective_requests(spec) == {"cpu": 4250, "nvidia.com/gpu": 1, "pods": 1}


def test_unsupported_pod_level_resources_are_ignored_and_limits_follow_pod_level_too():
    from karpy_core.state.views import pod_limits

    spec = {"resources": {"requests": {"ephemeral-storage": "1Gi"}, "limits": {"memory": "2Gi"}},
            "containers": [c("a", requests={"cpu": "1", "ephemeral-storage": "5Gi"}, limits={"memory": "1Gi"})]}
    # memory: a container's limit defaults its request (1Gi), so the pod-level limit does not
    assert effective_requests(spec) == {"cpu": 1000, "memory": GI, "ephemeral-storage": 5 * GI, "pods": 1}
    assert pod_limits(spec)["memory"] == 2 * GI


def test_pods_with_different_pod_level_requests_do_not_share_a_memoized_parse():
    a = {"metadata": {"name": "a", "namespace": "default"},
         "spec": {"containers": [c("x", requests={"cpu": "100m"})], "resources": {"requests": {"cpu": "2"}}}}
    b = {"metadata": {"name": "b", "namespace": "default"},
         "spec": {"containers": [c("x", requests={"cpu": "100m"})], "resources": {"requests": {"cpu": "3"}}}}
    plain = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [c("x", requests={"cpu": "100m"})]}}
    assert [pod_info(p).requests["cpu"] for p in (a, b, plain)] == [2000, 3000, 100]
