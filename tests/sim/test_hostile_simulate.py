"""``karpy validate`` and ``karpy simulate`` on hostile input: a one-line error and exit 2, or a
normal report, never a traceback (issue 10, section 4). Each test failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli import invoke_cli

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      requirements: []
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {{name: default}}
spec:
  role: r
  subnetSelectorTerms: [{{tags: {{a: b}}}}]
  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]
  amiSelectorTerms: [{{alias: al2023@latest}}]
"""


def deployment(name: str = "web", replicas: int = 1, containers: list[dict] | None = None) -> str:
    containers = [{"image": "pause", **c} for c in containers or [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]]
    return f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: {json.dumps(containers)}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


invoke = invoke_cli


def test_negative_cpu_is_refused_by_validate_and_simulate(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(replicas=50, containers=[{"name": "c", "resources": {"requests": {"cpu": "-1"}}}]))
    for command in ("validate", "simulate"):
        result = invoke(command, np_file, app_file)
        assert result.exit_code == 2, result.output
        assert "spec.template.spec.containers[0].resources.requests.cpu: must not be negative; got '-1'" in result.stderr


def test_containers_summing_beyond_int64_leave_the_pod_pending(tmp_path):
    # each request fits a Kubernetes quantity (2^63-1 cores), their sum in millicores does not fit int64
    huge = {"requests": {"cpu": "9223372036854775807"}}
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(containers=[{"name": "a", "resources": huge}, {"name": "b", "resources": huge}]))
    result = invoke("simulate", np_file, app_file, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["summary"]["pods_pending"] == 1 and doc["summary"]["nodes_launched"] == 0
    assert "no instance type has room" in doc["pods"][0]["reason"]


def test_nodepool_named_dash_x_fails_fast_with_one_message(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name='"-x"'))
    app_file = write(tmp_path, "app.yaml", deployment())
    for command in ("validate", "simulate"):
        result = invoke(command, np_file, app_file)
        assert result.exit_code == 2, result.output
        assert result.stderr.count("\n") == 2, result.stderr  # the header and one problem
        assert "NodePool/-x: metadata.name: must be a lowercase RFC 1123 subdomain" in result.stderr


def test_foreign_apiversion_nodepool_is_ignored_by_validate_and_simulate_alike(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np").replace("karpenter.sh/v1", "example.com/v1", 1))
    app_file = write(tmp_path, "app.yaml", deployment())
    result = invoke("validate", np_file, app_file)
    assert result.exit_code == 0, result.output
    assert f"ignored (kind not modelled in this apiVersion): example.com/v1 NodePool/np ({np_file} doc 1)" in result.stdout
    assert "karpy models NodePool in karpenter.sh/v1, not example.com/v1: ignored" in result.stdout  # said (trial 17)
    result = invoke("simulate", np_file, app_file, "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ignored"] == ["NodePool/np"]
    assert doc["summary"]["nodes_launched"] == 0 and doc["summary"]["pods_pending"] == 1


def test_validate_says_which_unmodelled_objects_simulate_stores(tmp_path):
    pvc = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data}\nspec: {}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n"
    path = write(tmp_path, "objs.yaml", pvc)
    result = invoke("validate", path)
    assert result.exit_code == 0, result.output
    assert f"stored as read by simulate: v1 PersistentVolumeClaim/data ({path} doc 1)" in result.stdout
    assert f"ignored (kind not modelled): v1 ConfigMap/cfg ({path} doc 2)" in result.stdout


def test_deep_nesting_in_an_unmodelled_pod_field_is_refused_by_both(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    depth = 300  # validate accepted it; simulate's serialiser raised "Maximum serialization depth exceeded"
    pod = f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec:\n  containers: [{{name: c}}]\n  junk: {'[' * depth}{']' * depth}\n"
    pod_file = write(tmp_path, "pod.yaml", pod)
    for command in ("validate", "simulate"):
        result = invoke(command, np_file, pod_file)
        assert result.exit_code == 2, result.output
        assert "document refused: while composing a document, nested more than 100 levels deep" in result.stderr


def test_replicas_beyond_the_pod_cap_fail_before_simulating(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(replicas=2**31 - 1))  # int32: valid for the API server
    result = invoke("simulate", np_file, app_file)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines()[1] == (
        f"  - {app_file} doc 1 Deployment/web: spec.replicas: 2,147,483,647 pods; the simulation would hold "
        "2,147,483,647 pods, more than its cap of 100,000 (karpy simulate --max-pods)"
    )


def test_max_pods_flag_moves_the_cap(tmp_path):
    np_file = write(tmp_path, "np.yaml", NODEPOOL.format(name="np"))
    app_file = write(tmp_path, "app.yaml", deployment(replicas=30) + "---\n" + deployment(name="db", replicas=5))
    result = invoke("simulate", np_file, app_file, "--max-pods", "34")
    assert result.exit_code == 2 and "the simulation would hold 35 pods, more than its cap of 34" in result.stderr
    result = invoke("simulate", np_file, app_file, "--max-pods", "35", "-o", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["pods_bound"] == 35
    result = invoke("simulate", np_file, app_file, "--max-pods", "0")
    assert result.exit_code == 2 and result.stderr == "error: --max-pods must be at least 1, not 0\n"


def test_max_pods_default_is_the_documented_constant():
    import inspect

    from karpy_core.cli import simulate
    from karpy_core.sim.workloads import DEFAULT_MAX_PODS

    assert inspect.signature(simulate).parameters["max_pods"].default == DEFAULT_MAX_PODS


def test_scenario_scaling_beyond_the_cap_stops_with_the_workload_named(tmp_path):
    import yaml

    manifests = [yaml.safe_load(d) for d in (NODEPOOL.format(name="np") + "---\n" + deployment(replicas=2)).split("---\n")]
    doc = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "until": "2h",
           "steps": [{"at": "0s", "apply": manifests}, {"at": "1h", "scale": {"deployment": "web", "replicas": 2**31 - 1}}]}
    path = write(tmp_path, "scenario.yaml", yaml.safe_dump(doc))
    result = invoke("simulate", path, "--max-pods", "1000", "-o", "json")
    assert result.exit_code == 2, result.output
    assert ("Deployment/default/web: spec.replicas: 2,147,483,647 pods; the simulation would hold 2,147,483,647 pods, "
            "more than its cap of 1,000 (karpy simulate --max-pods)") in result.stderr


def test_scenario_scale_beyond_int32_is_refused_before_running(tmp_path):
    import yaml

    manifests = [yaml.safe_load(d) for d in (NODEPOOL.format(name="np") + "---\n" + deployment(replicas=2)).split("---\n")]
    doc = {"apiVersion": "karpy.sh/v1alpha1", "kind": "Scenario", "metadata": {"name": "t"}, "until": "2h",
           "steps": [{"at": "0s", "apply": manifests}, {"at": "1h", "scale": {"deployment": "web", "replicas": 2**31}}]}
    path = write(tmp_path, "scenario.yaml", yaml.safe_dump(doc))
    for command in ("validate", "simulate"):
        result = invoke(command, path)
        assert result.exit_code == 2, result.output
        assert f"{path}: steps[1].scale: replicas must be at most 2147483647 (an int32, as in Kubernetes), got 2147483648" in result.stderr


def test_scenario_alias_bomb_is_refused(tmp_path):
    bomb = 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
        f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))
    path = write(tmp_path, "scenario.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nsteps: []\n" + bomb)
    result = invoke("validate", path)
    assert result.exit_code == 2, result.output
    assert "excessive aliasing" in result.stderr


def test_pod_cap_counts_a_deployment_once_not_again_through_its_replicaset():
    """A Deployment's pods are counted once: its ReplicaSet (which the simulator keeps, as a real
    cluster does) asks for the same pods, not more."""
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.workloads import WorkloadSimulator

    cluster = InMemoryCluster()
    cluster.create_sync("Deployment", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 8, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    workloads = WorkloadSimulator(cluster, max_pods=10)
    workloads.reconcile()
    assert len(cluster.objects("ReplicaSet")) == 1 and len(cluster.objects("Pod")) == 8
    workloads.reconcile()  # the second pass sees the ReplicaSet too
    assert len(cluster.objects("Pod")) == 8
