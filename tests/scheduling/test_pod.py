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
