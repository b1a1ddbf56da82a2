"""Scheduling constraints through ``karpy simulate`` (issue: every constraint users rely on)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from karpy_core.cli import app
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
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5.xlarge, m5.2xlarge, m5.4xlarge]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b, us-east-1c]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
""" + EC2NODECLASS


def deployment(name: str, replicas: int, spec_extra: dict, cpu: str = "500m", labels: dict | None = None) -> dict:
    lbl = {"app": name, **(labels or {})}
    spec = {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}], **spec_extra}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": lbl}, "spec": spec}}}


def simulate(tmp_path: Path, *docs: dict | str, args: tuple[str, ...] = ()) -> dict:
    path = tmp_path / "in.yaml"
    texts = [d if isinstance(d, str) else yaml.safe_dump(d) for d in docs]
    path.write_text("\n---\n".join(texts))
    result = CliRunner().invoke(app, ["simulate", str(path), "-o", "json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def node_of(doc: dict) -> dict[str, dict]:
    nodes = {n["name"]: n for n in doc["nodes"]}
    return {p["name"]: nodes[p["node"]] for p in doc["pods"] if p["node"]}


def test_zone_spread_max_skew_1(tmp_path):
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
    doc = simulate(tmp_path, POOL, deployment("web", 7, spread))
    zones = Counter(n["zone"] for n in node_of(doc).values())
    assert sum(zones.values()) == 7 and set(zones) == {"us-east-1a", "us-east-1b", "us-east-1c"}
    assert max(zones.values()) - min(zones.values()) <= 1


def test_hostname_spread_and_anti_affinity_one_pod_per_node(tmp_path):
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "s"}}}]}
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("s", 4, spread), deployment("a", 3, anti))
    placed = node_of(doc)
    s_nodes = [placed[p]["name"] for p in placed if p.startswith("s-")]
    a_nodes = [placed[p]["name"] for p in placed if p.startswith("a-")]
    assert len(s_nodes) == 4 and len(set(s_nodes)) >= 2  # skew 1 over new hostnames: spread out
    assert len(a_nodes) == 3 and len(set(a_nodes)) == 3  # anti-affinity: one per node
    assert doc["summary"]["pods_pending"] == 0


def test_zonal_self_affinity_keeps_pods_together(tmp_path):
    aff = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "db"}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("db", 12, aff, cpu="1"))
    zones = {n["zone"] for n in node_of(doc).values()}
    assert len(zones) == 1 and doc["summary"]["pods_bound"] == 12


def test_affinity_to_other_app_follows_it(tmp_path):
    pinned = {"nodeSelector": {"topology.kubernetes.io/zone": "us-east-1c"}}
    aff = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "cache"}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("cache", 1, pinned, cpu="3"), deployment("api", 3, aff))
    assert {n["zone"] for n in node_of(doc).values()} == {"us-east-1c"}


def test_required_affinity_without_any_match_stays_pending_with_reason(tmp_path):
    aff = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "missing"}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("lonely", 1, aff))
    pod = doc["pods"][0]
    assert pod["node"] is None and "pod affinity on topology.kubernetes.io/zone: no pod matches the term anywhere yet" in pod["reason"]


def test_preferred_anti_affinity_is_relaxed_when_it_cannot_hold(tmp_path):
    pref = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone",
                                            "labelSelector": {"matchLabels": {"app": "p"}}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("p", 5, pref))
    zones = Counter(n["zone"] for n in node_of(doc).values())
    assert doc["summary"]["pods_pending"] == 0
    assert set(zones) == {"us-east-1a", "us-east-1b", "us-east-1c"}  # the first three honoured it


def test_preferences_can_be_ignored(tmp_path):
    pref = {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": {"topologyKey": "topology.kubernetes.io/zone",
                                            "labelSelector": {"matchLabels": {"app": "p"}}}}]}}}
    doc = simulate(tmp_path, POOL, deployment("p", 5, pref), args=("--preference-policy", "Ignore"))
    assert len({n["zone"] for n in node_of(doc).values()}) == 1


def test_preferred_node_affinity_is_tried_first(tmp_path):
    pref = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 50, "preference": {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}}]}}}
    doc = simulate(tmp_path, POOL, deployment("z", 2, pref))
    assert {n["zone"] for n in node_of(doc).values()} == {"us-east-1b"}


def test_schedule_anyway_spread_does_not_block(tmp_path):
    spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                             "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "w"}}}],
              "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"}}
    doc = simulate(tmp_path, POOL, deployment("w", 3, spread))
    assert doc["summary"]["pods_pending"] == 0
    assert {n["zone"] for n in node_of(doc).values()} == {"us-east-1a"}


def test_host_ports_force_separate_nodes_and_daemonset_ports_count(tmp_path):
    ported = {"containers": [{"name": "c", "image": "x", "ports": [{"containerPort": 80, "hostPort": 8080}],
                              "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    doc = simulate(tmp_path, POOL, deployment("hp", 3, ported))
    assert len({n["name"] for n in node_of(doc).values()}) == 3
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
          "spec": {"selector": {"matchLabels": {"app": "agent"}}, "template": {"metadata": {"labels": {"app": "agent"}},
                   "spec": {"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": 9, "hostPort": 8080}]}]}}}}
    blocked = simulate(tmp_path, POOL, ds, deployment("hp", 1, ported))
    pod = next(p for p in blocked["pods"] if p["name"].startswith("hp-"))
    assert pod["node"] is None
    assert pod["reason"] == "NodePool default: host port 8080/TCP is held by a DaemonSet on every node of this NodePool"


@pytest.mark.parametrize("workload,pool_file,check", [
    ("arm64", "multiple-arch.yaml", lambda n: n["labels"]["kubernetes.io/arch"] == "arm64"),
    ("spot", "spot.yaml", lambda n: n["capacity_type"] == "spot"),
    ("gpu-nvidia", "general-purpose.yaml", None),
])
def test_upstream_workloads(tmp_path, examples_dir, workload, pool_file, check):
    text = (examples_dir / "workloads" / f"{workload}.yaml").read_text().replace("replicas: 0", "replicas: 2")
    pool = (examples_dir / "nodepools" / pool_file).read_text().replace("${CLUSTER_NAME}", "demo")
    doc = simulate(tmp_path, pool, text)
    if check is None:
        # general-purpose allows only c/m/r instance categories: no NVIDIA GPU type qualifies
        assert doc["summary"]["pods_pending"] == 2
        assert all("nvidia.com/gpu" in p["reason"] for p in doc["pods"])
        return
    assert doc["summary"]["pods_pending"] == 0
    assert all(check(n) for n in doc["nodes"])


def test_zonal_volume_pins_the_pod_and_wffc_storage_class_limits_zones(tmp_path):
    pv = {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "data-0"},
          "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                   "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1b"]}]}]}}}}
    bound = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-bound"},
             "spec": {"volumeName": "data-0", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "gp3"}, "provisioner": "ebs.csi.aws.com",
          "volumeBindingMode": "WaitForFirstConsumer",
          "allowedTopologies": [{"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["us-east-1c"]}]}]}
    unbound = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data-new"},
               "spec": {"storageClassName": "gp3", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}

    def with_claim(name: str, claim: str) -> dict:
        return deployment(name, 1, {"volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]})

    doc = simulate(tmp_path, POOL, pv, bound, sc, unbound, with_claim("pinned", "data-bound"), with_claim("fresh", "data-new"),
                   with_claim("orphan", "missing"))
    placed = node_of(doc)
    zone = {p.split("-")[0]: n["zone"] for p, n in placed.items()}
    assert zone == {"pinned": "us-east-1b", "fresh": "us-east-1c"}
    orphan = next(p for p in doc["pods"] if p["name"].startswith("orphan-"))
    assert orphan["node"] is None and orphan["reason"] == "PersistentVolumeClaim default/missing not found"


def test_explain_names_the_constraint_and_the_smallest_change(tmp_path, examples_dir):
    pool = (examples_dir / "nodepools/general-purpose.yaml").read_text().replace("${CLUSTER_NAME}", "x")
    tainted = POOL.replace("name: default}", "name: tainted}").replace(
        "      nodeClassRef:", "      taints: [{key: dedicated, value: batch, effect: NoSchedule}]\n      nodeClassRef:")
    path = tmp_path / "in.yaml"
    path.write_text("\n---\n".join([pool, tainted, yaml.safe_dump(deployment("arm", 1, {"nodeSelector": {"kubernetes.io/arch": "arm64"}}))]))
    result = CliRunner().invoke(app, ["simulate", str(path), "--explain", "arm"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "default/arm-" in out and ": pending" in out
    assert "NodePool general-purpose (no weight): incompatible requirements: kubernetes.io/arch In [arm64] conflicts with" in out
    assert "smallest change: the NodePool allows kubernetes.io/arch in [amd64]" in out
    assert "NodePool tainted (no weight): pod does not tolerate taint dedicated=batch:NoSchedule" in out
    assert "smallest change: add the toleration {key: dedicated, operator: Equal, value: batch, effect: NoSchedule}" in out


def test_spread_counts_only_domains_the_pod_can_reach(tmp_path):
    other = POOL.replace("name: default}", "name: other}").replace(
        "values: [us-east-1a, us-east-1b, us-east-1c]", "values: [us-east-1d, us-east-1e, us-east-1f]")
    mine = POOL.replace("name: default}", "name: mine}").replace(
        "    spec:\n      requirements:", "    metadata: {labels: {team: web}}\n    spec:\n      requirements:")
    spread = {"nodeSelector": {"team": "web"},
              "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                             "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
    doc = simulate(tmp_path, other, mine, deployment("web", 6, spread))
    assert doc["summary"]["pods_pending"] == 0
    zones = Counter(n["zone"] for n in node_of(doc).values())
    assert zones == Counter({"us-east-1a": 2, "us-east-1b": 2, "us-east-1c": 2})
