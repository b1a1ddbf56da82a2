"""``karpy simulate`` takes the controller's decision-changing settings under their names
(issue 27): MIN_VALUES_POLICY, BATCH_IDLE/MAX_DURATION, VM_MEMORY_OVERHEAD_PERCENT, RESERVED_ENIS,
FEATURE_GATES, PREFERENCE_POLICY, parsed and refused by the controller's settings model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from karpy_core.errors import ConfigurationError
from karpy_core.settings import SIMULATE_SETTINGS, simulation_settings
from tests.cli import invoke_cli
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool

MIN_VALUES = {"requirements": [
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge"]},
    {"key": "karpenter.k8s.aws/instance-family", "operator": "Exists", "minValues": 3}]}
"""Two m5 types: instance-family minValues 3 can never hold (one family)."""


def _manifests(tmp_path: Path, tspec: dict | None = None) -> str:
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump_all([NODECLASS, nodepool(tspec=tspec), deployment(replicas=2)]))
    return str(path)


def _run(*args: str) -> dict:
    result = invoke_cli("simulate", *args, "-o", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_min_values_policy_best_effort_launches_what_strict_leaves_pending(tmp_path: Path) -> None:
    path = _manifests(tmp_path, MIN_VALUES)
    strict = _run(path)
    assert strict["summary"]["pods_pending"] == 2 and strict["summary"]["nodes"] == 0
    relaxed = _run(path, "--min-values-policy", "BestEffort")
    assert relaxed["summary"]["pods_pending"] == 0 and relaxed["summary"]["nodes"] >= 1


def test_vm_memory_overhead_and_reserved_enis_change_the_nodes(tmp_path: Path) -> None:
    path = _manifests(tmp_path, {"requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                                                   "values": ["m5.large"]}]})
    base = _run(path)["nodes"][0]["allocatable"]
    more = _run(path, "--vm-memory-overhead-percent", "0.2", "--reserved-enis", "1")["nodes"][0]["allocatable"]
    assert more["memory"] != base["memory"]
    assert int(more["pods"]) < int(base["pods"])  # m5.large: 3 ENIs x 10 IPs; one reserved -> (2 x 9) + 2 = 20 < 29


def test_batch_idle_duration_delays_the_first_launch(tmp_path: Path) -> None:
    path = _manifests(tmp_path)
    first = [e["t"] for e in _run(path)["events"] if e["kind"] == "nodeclaim-create"]
    later = [e["t"] for e in _run(path, "--batch-idle-duration", "5s")["events"] if e["kind"] == "nodeclaim-create"]
    assert first and later and later[0] == first[0] + 4.0


def test_bad_values_are_refused_with_the_controllers_names(tmp_path: Path) -> None:
    path = _manifests(tmp_path)
    for args, words in ((["--min-values-policy", "Sloppy"], "MIN_VALUES_POLICY (--min-values-policy)"),
                        (["--batch-max-duration", "ten"], "BATCH_MAX_DURATION (--batch-max-duration)"),
                        (["--preference-policy", "Maybe"], "PREFERENCE_POLICY (--preference-policy)"),
                        (["--reserved-enis", "-1"], "RESERVED_ENIS (--reserved-enis)")):
        result = invoke_cli("simulate", path, *args)
        assert result.exit_code == 2 and words in result.output, (args, result.output)
    with pytest.raises(ConfigurationError, match="does not take"):
        simulation_settings({"cluster_name": "x"})
    assert set(SIMULATE_SETTINGS) >= {"min_values_policy", "batch_idle_duration", "batch_max_duration",
                                      "vm_memory_overhead_percent", "reserved_enis", "feature_gates", "preference_policy"}


def test_batch_max_duration_caps_the_idle_wait(tmp_path: Path) -> None:
    path = _manifests(tmp_path)
    first = [e["t"] for e in _run(path)["events"] if e["kind"] == "nodeclaim-create"]
    capped = [e["t"] for e in _run(path, "--batch-idle-duration", "1m", "--batch-max-duration", "10s")["events"]
              if e["kind"] == "nodeclaim-create"]
    assert capped[0] == first[0] + 9.0  # 10 s, not 60: the batch closes at its maximum


ZONE_MIN_VALUES = {"requirements": [
    {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b", "us-east-1c"], "minValues": 2},
    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}


def test_zone_min_values_count_the_zones_a_pod_leaves(tmp_path: Path) -> None:
    """minValues 2 on three zones launches (the types hold every zone); a pod pinned to one zone
    leaves 1: Strict keeps it pending, naming the count; BestEffort launches a valid NodeClaim
    (its minValues lowered to the 1 zone it lists, annotated relaxed). It used to create a
    NodeClaim the CRD refuses, retried forever."""
    free = yaml.safe_load_all((Path(_manifests(tmp_path, ZONE_MIN_VALUES))).read_text())
    docs = list(free)
    assert _run(str(tmp_path / "m.yaml"))["summary"]["pods_pending"] == 0
    docs[2]["spec"]["template"]["spec"]["nodeSelector"] = {"topology.kubernetes.io/zone": "us-east-1a"}
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump_all(docs))
    strict = _run(str(pinned))
    assert strict["summary"]["pods_pending"] == 2 and not [e for e in strict["events"] if e["kind"] == "reconcile-failed"]
    reasons = [p.get("reason", "") for p in strict["pods"]]
    assert all("minValues 2 on topology.kubernetes.io/zone (only 1 distinct value left)" in r for r in reasons), reasons
    relaxed = _run(str(pinned), "--min-values-policy", "BestEffort")
    assert relaxed["summary"]["pods_pending"] == 0 and not [e for e in relaxed["events"] if e["kind"] == "reconcile-failed"]
