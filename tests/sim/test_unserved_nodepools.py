"""A NodePool whose NodeClass kind the cloud provider does not serve is left out (Karpenter's
``IsManaged``), and ``karpy validate``, each pending pod's reason and ``--explain`` say which and why
(issue 35, item 6)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import collect_snapshot
from karpy_core.utils.clock import VirtualClock
from tests.cli import invoke_cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
POOL = str(EXAMPLES / "nodepools/general-purpose.yaml")
INFLATE = str(EXAMPLES / "workloads/inflate.yaml")
ONLY_KC = ["--cloud-provider", "simulated", "--provider-option", "node_classes=KCNodeClass"]  # the simulated cloud serving KCNodeClass alone


def test_simulate_names_the_left_out_nodepool_in_warnings_and_pod_reasons() -> None:
    result = invoke_cli("simulate", POOL, INFLATE, *ONLY_KC, "--set", "CLUSTER_NAME=demo", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    left_out = [w for w in doc["warnings"] if "left out" in w]
    assert len(left_out) == 1 and "NodePool/general-purpose" in left_out[0] and "EC2NodeClass" in left_out[0]
    assert "--cloud-provider aws serves it" in left_out[0]
    (pending,) = [p for p in doc["pods"] if not p.get("node")]
    assert "NodePool general-purpose: left out" in pending["reason"]
    assert "not served by cloud provider simulated" in pending["reason"]
    assert "none defined" not in pending["reason"]


def test_explain_names_the_left_out_nodepool() -> None:
    result = invoke_cli("simulate", POOL, INFLATE, *ONLY_KC, "--set", "CLUSTER_NAME=demo", "--explain", "default/inflate")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "default/inflate: workload inflate, 1 pod"
    assert lines[1].endswith(": pending")
    assert any(line.strip().startswith("NodePool general-purpose: left out: its NodeClass kind EC2NodeClass") for line in lines)


def test_validate_names_the_nodepool_the_provider_leaves_out() -> None:
    result = invoke_cli("validate", POOL, *ONLY_KC, "--set", "CLUSTER_NAME=demo")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("valid (1 warning below)")
    assert "NodePool/general-purpose: left out, launches nothing" in result.stdout
    served = invoke_cli("validate", POOL, "--cloud-provider", "simulated", "--set", "CLUSTER_NAME=demo")  # it serves EC2NodeClass
    assert served.exit_code == 0 and "left out" not in served.stdout
    unchecked = invoke_cli("validate", POOL, "--set", "CLUSTER_NAME=demo")  # no provider named: no such check
    assert unchecked.exit_code == 0 and unchecked.stdout.startswith("valid: ")
    orphan = invoke_cli("validate", POOL, "--provider-option", "node_classes=KCNodeClass")
    assert orphan.exit_code == 2
    assert orphan.stderr.strip() == "error: --provider-option needs --cloud-provider (the provider the options are for)"


def test_validate_refuses_an_unknown_provider_in_one_line() -> None:
    result = invoke_cli("validate", POOL, "--cloud-provider", "acme")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == ["error: --cloud-provider 'acme' is not installed; installed: "
                                                  + result.stderr.split("installed: ")[-1].strip()]


async def test_snapshot_keeps_why_each_unserved_nodepool_was_left_out() -> None:
    cluster = InMemoryCluster(VirtualClock())
    for name, kind, group in (("aws", "EC2NodeClass", "karpenter.k8s.aws"), ("kc", "KCNodeClass", "karpenter.kakaocloud.com")):
        await cluster.create("NodePool", {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                                          "spec": {"template": {"spec": {"requirements": [],
                                                                         "nodeClassRef": {"group": group, "kind": kind, "name": "d"}}}}})
    snapshot = await collect_snapshot(cluster, managed={("karpenter.kakaocloud.com", "KCNodeClass")}, provider_name="kc-cloud")
    assert [p.name for p in snapshot.nodepool_views] == ["kc"]
    assert set(snapshot.unserved_nodepools) == {"aws"}
    assert "EC2NodeClass (karpenter.k8s.aws) is not served by cloud provider kc-cloud" in snapshot.unserved_nodepools["aws"]


def test_the_kakaocloud_plugin_is_not_asked_about_a_nodepool_it_does_not_serve() -> None:
    """``--cloud-provider kakaocloud`` on an EC2NodeClass NodePool (fresh-user trial, issue 35): the
    one warning about it is the report's ``NodePool/NAME: left out, launches nothing: ...`` line
    among the other warnings; the plugin's unstructured ``nodeClassRef is not a KCNodeClass`` line
    no longer comes first on stderr, because neither the report nor the cost samples ask the plugin
    for the instance types of a NodePool it does not manage (Karpenter's IsManaged), and the plugin
    (which would need its keyring and the KakaoCloud API for a pool it serves) is called for nothing."""
    pytest.importorskip("karpy_kakaocloud")
    result = invoke_cli("simulate", POOL, INFLATE, "--cloud-provider", "kakaocloud", "--provider-option", "cluster_name=demo",
                        "--set", "CLUSTER_NAME=demo")
    assert result.exit_code == 0, result.output
    assert "KCNodeClass" not in result.stderr and "nodeClassRef" not in result.stderr, result.stderr
    warnings = [line for line in result.stdout.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1
    assert warnings[0].endswith("NodePool/general-purpose: left out, launches nothing: its NodeClass kind EC2NodeClass "
                                "(karpenter.k8s.aws) is not served by cloud provider kakaocloud, which serves KCNodeClass "
                                "(karpenter.kakaocloud.com); --cloud-provider aws or simulated serves it")
    assert "no nodes" in result.stdout and "pods: 0 bound, 1 pending" in result.stdout
