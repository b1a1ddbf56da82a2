"""Simulations with DaemonSets, existing nodes and bound pods given as manifests."""

from __future__ import annotations

import pytest

from karpy_core.cli import run_simulation
from karpy_core.errors import ManifestError
from tests.sim.manifests import EC2NODECLASS

POOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge, m5.2xlarge]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
""" + EC2NODECLASS

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: a, image: x, resources: {requests: {cpu: 500m, memory: 512Mi}}}]
"""


def deployment(name: str, replicas: int, cpu: str, memory: str) -> str:
    return f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}", memory: {memory}}}}}}}]
"""


def write(tmp_path, **docs: str) -> list[str]:
    paths = []
    for name, text in docs.items():
        p = tmp_path / f"{name}.yaml"
        p.write_text(text)
        paths.append(str(p))
    return paths


async def test_daemonset_overhead_changes_the_instance_type(tmp_path):
    # one pod of 1500m: m5.large (1930m allocatable) fits it alone, but not with the 500m agent
    without = await run_simulation(write(tmp_path, pool=POOL, app=deployment("app", 1, "1500m", "1Gi")))
    assert [n.instance_type for n in without.nodes] == ["m5.large"]
    with_ds = await run_simulation(write(tmp_path, pool=POOL, ds=DAEMONSET, app=deployment("app", 1, "1500m", "1Gi")))
    assert [n.instance_type for n in with_ds.nodes] == ["m5.xlarge"]
    node = with_ds.nodes[0]
    assert len(node.daemon_pods) == 1 and node.daemon_pods[0].startswith("kube-system/agent-")
    assert node.requested["cpu"] == 2000  # 1500m app + 500m agent


async def test_existing_node_and_bound_pods_are_used_first(tmp_path):
    node = """
apiVersion: v1
kind: Node
metadata: {name: static-1, labels: {kubernetes.io/arch: amd64, kubernetes.io/hostname: static-1}}
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
"""
    bound = """
apiVersion: v1
kind: Pod
metadata: {name: already-there}
spec:
  nodeName: static-1
  containers: [{name: c, image: x, resources: {requests: {cpu: "3", memory: 1Gi}}}]
"""
    report = await run_simulation(write(tmp_path, pool=POOL, node=node, bound=bound, app=deployment("app", 2, "1", "1Gi")))
    by_node = {n.name: sorted(n.pods) for n in report.nodes}
    assert "default/already-there" in by_node["static-1"]
    assert len(by_node["static-1"]) == 2  # 3 cpu used + one 1-cpu app pod
    launched = [n for n in report.nodes if n.nodepool]
    assert len(launched) == 1 and len(launched[0].pods) == 1
    assert report.summary()["pods_pending"] == 0
    static = next(n for n in report.nodes if n.name == "static-1")
    assert static.price_per_hour is None


async def test_sidecar_and_limit_only_pods_size_nodes(tmp_path):
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: sidecar}
spec:
  initContainers:
    - {name: proxy, image: x, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 256Mi}}}
  containers:
    - {name: app, image: x, resources: {limits: {cpu: "1", memory: 1Gi}}}
"""
    report = await run_simulation(write(tmp_path, pool=POOL, pod=pod))
    node = report.nodes[0]
    # 1 (limit-only app) + 0.5 (sidecar) = 1500m: fits m5.large's 1930m
    assert node.instance_type == "m5.large"
    assert node.requested["cpu"] == 1500 and node.requested["memory"] == (1024 + 256) * 2**20


RUNTIMECLASS = """
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: kata}
handler: kata
overhead: {podFixed: {cpu: 250m, memory: 160Mi}}
scheduling:
  tolerations: [{key: kata, operator: Exists, effect: NoSchedule}]
"""


def with_runtime_class(doc: str, name: str) -> str:
    return doc.replace("    spec:\n      containers:", f"    spec:\n      runtimeClassName: {name}\n      containers:")


async def test_runtimeclass_overhead_is_admitted_into_workload_pods(tmp_path):
    # 1700m fits m5.large (1930m) alone; with the RuntimeClass's 250m pod overhead it does not
    app = deployment("app", 1, "1700m", "1Gi")
    plain = await run_simulation(write(tmp_path, pool=POOL, app=app))
    assert [n.instance_type for n in plain.nodes] == ["m5.large"]
    report = await run_simulation(write(tmp_path, pool=POOL, rc=RUNTIMECLASS, app=with_runtime_class(app, "kata")))
    assert not report.ignored
    assert [n.instance_type for n in report.nodes] == ["m5.xlarge"]
    assert report.nodes[0].requested["cpu"] == 1950
    assert report.nodes[0].requested["memory"] == (1024 + 160) * 2**20
    assert report.summary()["pods_pending"] == 0


async def test_pods_of_a_missing_runtimeclass_are_refused_before_simulating(tmp_path):
    """kube-apiserver's RuntimeClass admission would create none of these pods (as for a missing
    PriorityClass below: the input is refused, naming the workload)."""
    with pytest.raises(ManifestError) as err:
        await run_simulation(write(tmp_path, pool=POOL, app=with_runtime_class(deployment("app", 2, "1", "1Gi"), "gvisor")))
    (line,) = err.value.problems
    assert line.endswith('app.yaml doc 1 Deployment/app: spec.template.spec: pod rejected: RuntimeClass "gvisor" not found '
                         "(kube-apiserver's RuntimeClass admission refuses the pods of this Deployment)"), line


PRIORITYCLASS = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"


def with_priority_class(doc: str, name: str) -> str:
    return doc.replace("    spec:\n      containers:", f"    spec:\n      priorityClassName: {name}\n      containers:")


async def test_a_priority_class_among_the_manifests_is_stored_and_its_pods_scheduled(tmp_path):
    report = await run_simulation(write(tmp_path, pool=POOL, pc=PRIORITYCLASS,
                                        app=with_priority_class(deployment("app", 2, "1", "1Gi"), "high")))
    assert not report.ignored and not report.warnings, (report.ignored, report.warnings)
    assert report.summary()["pods_pending"] == 0 and len(report.pods) == 2


async def test_pods_of_a_missing_priority_class_are_refused_before_simulating(tmp_path):
    """kube-apiserver's Priority admission would create none of these pods."""
    with pytest.raises(ManifestError) as err:
        await run_simulation(write(tmp_path, pool=POOL, app=with_priority_class(deployment("app", 2, "1", "1Gi"), "nope")))
    (problem,) = err.value.problems
    assert "Deployment/app: spec.template.spec.priorityClassName: no PriorityClass with name nope was found" in problem


async def test_pods_refused_until_their_priority_class_is_applied_are_not_called_never_created(tmp_path):
    """A Scenario applying the PriorityClass 10 minutes after the Deployment: the pods are refused
    (Priority admission, as the API server), then created; the report says so, not "not created"."""
    pool, app = write(tmp_path, pool=POOL, app=with_priority_class(deployment("app", 2, "1", "1Gi"), "high"))
    pc = write(tmp_path, pc=PRIORITYCLASS)[0]
    scenario = tmp_path / "scn.yaml"
    scenario.write_text(f"""apiVersion: karpy.sh/v1alpha1
kind: Scenario
metadata: {{name: late-class}}
until: 20m
steps:
  - {{at: 0s, apply: {pool}}}
  - {{at: 0s, apply: {app}}}
  - {{at: 10m, apply: {pc}}}
""")
    report = await run_simulation([str(scenario)])
    assert report.summary()["pods_pending"] == 0 and len(report.pods) == 2
    (warning,) = [w for w in report.warnings if "PriorityClass" in w]
    assert warning.startswith("Deployment/default/app: pods refused for a while, then created: 403 Forbidden: ") and \
        warning.endswith("is forbidden: no PriorityClass with name high was found"), warning


# ---- issue 35, trial 5: pod-level resources, scheduling gates ---------------------------------------
async def test_pod_level_requests_size_the_node(tmp_path):
    """A pod whose pod-level cpu request (3) is above its container's (100m) gets a node for 3 cpu."""
    pod = """
apiVersion: v1
kind: Pod
metadata: {name: podlevel}
spec:
  resources: {requests: {cpu: "3"}, limits: {cpu: "3"}}
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m, memory: 1Gi}}}]
"""
    report = await run_simulation(write(tmp_path, pool=POOL, pod=pod))
    (node,) = report.nodes
    assert node.instance_type == "m5.xlarge"  # 3 cpu does not fit m5.large's 1930m
    assert node.requested["cpu"] == 3000 and node.requested["memory"] == 2**30


async def test_a_gated_pod_stays_pending_and_the_report_says_why(tmp_path):
    pods = """
apiVersion: v1
kind: Pod
metadata: {name: gated}
spec:
  schedulingGates: [{name: example.com/wait}]
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: free}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    report = await run_simulation(write(tmp_path, pool=POOL, pods=pods))
    by_name = {p.name: p for p in report.pods}
    assert by_name["free"].node and by_name["gated"].node is None
    assert len(report.nodes) == 1 and report.nodes[0].pods == ["default/free"]  # nothing launched for the gated pod
    assert by_name["gated"].reason is not None and "scheduling gated (example.com/wait)" in by_name["gated"].reason


async def test_the_simulated_kube_scheduler_skips_a_gated_pod_until_its_gates_are_removed():
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.sim.kubelet import KubeSchedulerSimulator
    from karpy_core.state.views import PodView
    from karpy_core.utils.clock import VirtualClock

    cluster = InMemoryCluster(VirtualClock())
    cluster.create_sync("Node", {"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}, "spec": {},
                                 "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                            "conditions": [{"type": "Ready", "status": "True"}]}})
    cluster.create_sync("Pod", {"metadata": {"name": "g", "namespace": "default"},
                                "spec": {"schedulingGates": [{"name": "x"}],
                                         "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
                                "status": {"phase": "Pending"}})
    assert await KubeSchedulerSimulator(cluster).reconcile() == 0
    (stored,) = cluster.objects("Pod")
    assert not stored["spec"].get("nodeName")
    assert [c["reason"] for c in stored["status"]["conditions"]] == ["SchedulingGated"]
    assert not PodView.of(stored).provisionable  # Karpenter provisions for Unschedulable pods only
    await cluster.patch("Pod", "g", {"spec": {"schedulingGates": None}}, "default")
    assert await KubeSchedulerSimulator(cluster).reconcile() == 1
    assert cluster.objects("Pod")[0]["spec"]["nodeName"] == "n1"


# ---- issue 35, trial 5: a Node given as input is existing capacity, whatever its labels ---------------
EXISTING_POOL_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: old-1
  labels: {karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: m5.large, topology.kubernetes.io/zone: us-east-1a,
           karpenter.sh/capacity-type: on-demand, kubernetes.io/arch: amd64, kubernetes.io/os: linux}
spec: {providerID: "aws:///us-east-1a/i-0123456789abcdef0"}
status:
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
  conditions: [{type: Ready, status: "True"}]
---
apiVersion: v1
kind: Pod
metadata: {name: there}
spec:
  nodeName: old-1
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""


async def test_an_input_node_labelled_with_a_nodepool_is_existing_not_launched(tmp_path):
    """Before: old-1 (m5.large, 0.096 USD/hour) counted as launched by karpy, in the total and in
    the optimum's pods. Now it is existing capacity, as an unlabelled input Node is."""
    report = await run_simulation(write(tmp_path, pool=POOL, node=EXISTING_POOL_NODE, app=deployment("app", 1, "1500m", "1Gi")))
    old = next(n for n in report.nodes if n.name == "old-1")
    (new,) = [n for n in report.nodes if n.name != "old-1"]
    assert not old.launched and old.price_per_hour is None and old.nodepool == "default"
    assert new.launched and new.price_per_hour is not None
    assert report.summary()["nodes_launched"] == 1
    assert report.cost_per_hour == pytest.approx(new.price_per_hour)
    assert report.reference is not None and report.reference.pods == 1  # only the pod on the launched node


async def test_the_node_of_an_input_nodeclaim_is_not_launched_by_karpy():
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.sim.report import launched_nodes
    from karpy_core.sim.simulator import Simulator

    sim = Simulator(load_provider("simulated", {}))
    claim = {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
             "metadata": {"name": "default-abcde", "labels": {"karpenter.sh/nodepool": "default"}},
             "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
             "status": {"providerID": "aws:///us-east-1a/i-1", "nodeName": "ip-1"}}
    sim.apply([claim])
    for name, provider_id in (("ip-1", "aws:///us-east-1a/i-1"), ("later", "aws:///us-east-1a/i-2")):  # as if registered in the run
        sim.cluster.create_sync("Node", {"metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}},
                                         "spec": {"providerID": provider_id}})
    assert launched_nodes(sim) == {"later"}


# ---- issue 35, trial 5: a pod bound to a Node that does not exist -------------------------------------
async def test_a_pod_bound_to_a_missing_node_is_reported_pending_not_bound(tmp_path):
    """No kubelet runs it (Pending), Karpenter does not provision for it (it has a nodeName), and
    nothing is launched for it; the report says why instead of counting it bound."""
    ghost = """
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  nodeName: ghost
  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""
    report = await run_simulation(write(tmp_path, pool=POOL, ghost=ghost))
    (pod,) = report.pods
    assert pod.node is None and pod.reason is not None and "bound to Node ghost, which does not exist" in pod.reason
    assert report.summary()["pods_bound"] == 0 and report.summary()["pods_pending"] == 1
    assert report.nodes == []


def test_a_bound_pod_runs_only_when_its_node_is_among_the_inputs():
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.sim.simulator import Simulator

    sim = Simulator(load_provider("simulated", {}))

    def bound(name: str, node: str) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
                "spec": {"nodeName": node, "containers": [{"name": "c", "image": "x"}]}}

    # the pod before its Node in the same apply: the Node is still among the inputs
    sim.apply([bound("a", "n1"), {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}, bound("b", "ghost")])
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in sim.cluster.objects("Pod")}
    assert phases == {"a": "Running", "b": "Pending"}
