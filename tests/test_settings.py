"""The settings model (karpy_core.settings): Karpenter's names, env/flag precedence, feature gates,
refused and accepted settings, and the ``karpy controller`` command line over it."""

from __future__ import annotations

from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app
from karpy_core.errors import ConfigurationError
from karpy_core.settings import FeatureGates, KarpySettings, load_settings, parse_feature_gates, setting_names

# Karpenter's env names and flags (karpenter pkg/operator/options/options.go and
# karpenter-provider-aws pkg/operator/options/options.go), each with its default there.
KARPENTER = {
    "KARPENTER_SERVICE": ("--karpenter-service", ""),
    "METRICS_PORT": ("--metrics-port", 8080),
    "HEALTH_PROBE_PORT": ("--health-probe-port", 8081),
    "KUBE_CLIENT_QPS": ("--kube-client-qps", 200),
    "KUBE_CLIENT_BURST": ("--kube-client-burst", 300),
    "ENABLE_PROFILING": ("--enable-profiling", False),
    "DISABLE_CONTROLLER_WARMUP": ("--disable-controller-warmup", True),
    "DISABLE_LEADER_ELECTION": ("--disable-leader-election", False),
    "DISABLE_CLUSTER_STATE_OBSERVABILITY": ("--disable-cluster-state-observability", False),
    "LEADER_ELECTION_NAME": ("--leader-election-name", None),  # karpy's own default (a different Lease)
    "LEADER_ELECTION_NAMESPACE": ("--leader-election-namespace", ""),
    "MEMORY_LIMIT": ("--memory-limit", -1),
    "CPU_REQUESTS": ("--cpu-requests", 1000),
    "LOG_LEVEL": ("--log-level", "info"),
    "LOG_OUTPUT_PATHS": ("--log-output-paths", "stdout"),
    "LOG_ERROR_OUTPUT_PATHS": ("--log-error-output-paths", "stderr"),
    "BATCH_MAX_DURATION": ("--batch-max-duration", 10.0),
    "BATCH_IDLE_DURATION": ("--batch-idle-duration", 1.0),
    "PREFERENCE_POLICY": ("--preference-policy", "Respect"),
    "MIN_VALUES_POLICY": ("--min-values-policy", "Strict"),
    "IGNORE_DRA_REQUESTS": ("--ignore-dra-requests", True),
    "FEATURE_GATES": ("--feature-gates", None),
    "SCHEDULER_CONFIG": ("--scheduler-config", ""),
    "CLUSTER_CA_BUNDLE": ("--cluster-ca-bundle", ""),
    "CLUSTER_NAME": ("--cluster-name", ""),
    "CLUSTER_ENDPOINT": ("--cluster-endpoint", ""),
    "ISOLATED_VPC": ("--isolated-vpc", False),
    "EKS_CONTROL_PLANE": ("--eks-control-plane", False),
    "VM_MEMORY_OVERHEAD_PERCENT": ("--vm-memory-overhead-percent", 0.075),
    "INTERRUPTION_QUEUE": ("--interruption-queue", ""),
    "RESERVED_ENIS": ("--reserved-enis", 0),
    "DISABLE_DRY_RUN": ("--disable-dry-run", False),
    "ENABLE_ZONAL_SHIFT": ("--enable-zonal-shift", False),
    "AMI_REFRESH_INTERVAL": ("--ami-refresh-interval", 60.0),
    "SUBNET_REFRESH_INTERVAL": ("--subnet-refresh-interval", 60.0),
    "AWS_FEATURE_GATES": ("--aws-feature-gates", None),
}


def test_every_karpenter_option_has_its_env_flag_and_default() -> None:
    table = {env: (flag, default) for _, env, flag, default, _, _ in setting_names()}
    for env, (flag, default) in KARPENTER.items():
        assert env in table, env
        assert table[env][0] == flag, env
        if default is not None:
            assert table[env][1] == default, env


def test_every_setting_is_a_controller_flag() -> None:
    result = CliRunner().invoke(app, ["controller", "--help"], env={"COLUMNS": "400", "NO_COLOR": "1", "TERM": "dumb"})
    assert result.exit_code == 0
    for _, env, flag, _, _, _ in setting_names():
        first = flag.split("/")[0]
        assert first in result.output, flag
        assert env in result.output, env


def test_env_is_read_and_a_flag_wins() -> None:
    env = {"CLUSTER_NAME": "from-env", "BATCH_MAX_DURATION": "20s", "BATCH_IDLE_DURATION": "500ms", "METRICS_PORT": "9090"}
    s = load_settings({}, env)
    assert (s.cluster_name, s.batch_max_duration, s.batch_idle_duration, s.metrics_port) == ("from-env", 20.0, 0.5, 9090)
    s = load_settings({"cluster_name": "from-flag", "metrics_port": 9100, "batch_max_duration": "1m"}, env)
    assert (s.cluster_name, s.metrics_port, s.batch_max_duration) == ("from-flag", 9100, 60.0)
    assert load_settings({}, {}).cluster_name == ""  # the default


def test_process_environment_is_the_default_source(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERRUPTION_QUEUE", "karpy-q")
    monkeypatch.setenv("KARPY_LEASE_NAME", "old-name")  # karpy's earlier variable still works
    s = load_settings({})
    assert s.interruption_queue == "karpy-q"
    assert s.leader_election_name == "old-name"


@pytest.mark.parametrize(("env", "names"), [
    ({"METRICS_PORT": "eighty"}, "METRICS_PORT (--metrics-port)"),
    ({"BATCH_IDLE_DURATION": "soon"}, "BATCH_IDLE_DURATION (--batch-idle-duration)"),
    ({"PREFERENCE_POLICY": "Sometimes"}, "PREFERENCE_POLICY (--preference-policy)"),
    ({"ENABLE_PROFILING": "true"}, "ENABLE_PROFILING=true (--enable-profiling): not supported"),
    ({"SCHEDULER_CONFIG": "podTopologySpread: {}"}, "SCHEDULER_CONFIG="),
    ({"ENABLE_ZONAL_SHIFT": "true"}, "ENABLE_ZONAL_SHIFT=true"),
    ({"IGNORE_DRA_REQUESTS": "false"}, "IGNORE_DRA_REQUESTS=false"),
    ({"AMI_REFRESH_INTERVAL": "5m"}, "AMI_REFRESH_INTERVAL=300.0"),
    ({"AWS_FEATURE_GATES": "NodeClassCEL=true"}, "AWS_FEATURE_GATES (--aws-feature-gates): NodeClassCEL=true is not supported"),
    ({"AWS_FEATURE_GATES": "Nope=false"}, "unknown feature gate 'Nope'"),
    ({"FEATURE_GATES": "NodeRepiar=true"}, "unknown feature gate 'NodeRepiar'"),
    ({"FEATURE_GATES": "NodeRepair"}, "'NodeRepair' is not Name=true|false"),
    ({"FEATURE_GATES": "NodeRepair=maybe"}, "'maybe' is not true or false"),
    ({"FEATURE_GATES": "NodeRepair=true", "NODE_REPAIR": "false"}, "NODE_REPAIR=false (--node-repair/--no-node-repair) contradicts"),
])
def test_bad_or_unsupported_settings_are_errors_naming_them(env: dict[str, str], names: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        load_settings({}, env)
    assert names in str(info.value)
    assert "\n" not in str(info.value)


def test_unknown_setting_name_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown setting.*cluster_nmae"):
        load_settings({"cluster_nmae": "x"}, {})


def test_feature_gate_parsing() -> None:
    gates, named = parse_feature_gates("")
    assert gates == FeatureGates() and gates.NodeRepair and gates.ReservedCapacity and not gates.SpotToSpotConsolidation
    assert named == frozenset()
    gates, named = parse_feature_gates(" NodeRepair=false , ReservedCapacity=False,SpotToSpotConsolidation=false ")
    assert (gates.NodeRepair, gates.ReservedCapacity) == (False, False)
    assert named == {"NodeRepair", "ReservedCapacity", "SpotToSpotConsolidation"}
    # Karpenter's own default string parses (it names every gate, all unimplemented ones false)
    gates, _ = parse_feature_gates("NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,"
                                   "NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false")
    assert gates == FeatureGates(NodeRepair=False)


def test_node_repair_and_the_gate_agree() -> None:
    assert load_settings({}, {}).gates().NodeRepair is True  # karpy's default (Karpenter: false)
    assert load_settings({}, {"NODE_REPAIR": "false"}).gates().NodeRepair is False
    assert load_settings({"node_repair": False}, {}).controller_settings().node_repair is False
    assert load_settings({}, {"FEATURE_GATES": "NodeRepair=false"}).controller_settings().node_repair is False
    assert load_settings({}, {"FEATURE_GATES": "NodeRepair=false", "NODE_REPAIR": "false"}).gates().NodeRepair is False


def test_controller_settings_and_provider_options() -> None:
    env = {"CLUSTER_NAME": "c1", "DISABLE_LEADER_ELECTION": "true", "LEADER_ELECTION_NAMESPACE": "kube-system",
           "KUBE_CLIENT_QPS": "50", "KUBE_CLIENT_BURST": "60", "HEALTH_PROBE_PORT": "9000", "METRICS_PORT": "9001",
           "MIN_VALUES_POLICY": "BestEffort", "INTERRUPTION_QUEUE": "q", "RESERVED_ENIS": "1", "ISOLATED_VPC": "true",
           "VM_MEMORY_OVERHEAD_PERCENT": "0.1", "CLUSTER_ENDPOINT": "https://api.example", "CLUSTER_CA_BUNDLE": "Y2E=",
           "DISABLE_DRY_RUN": "true", "KARPY_CLOUD_PROVIDER": "aws"}
    s = load_settings({}, env)
    cs = s.controller_settings()
    assert (cs.cluster_name, cs.leader.enabled, cs.leader.namespace, cs.kube_client_qps, cs.kube_client_burst) == \
        ("c1", False, "kube-system", 50.0, 60)
    assert (cs.health_port, cs.metrics_port, cs.min_values_policy) == (9000, 9001, "BestEffort")
    assert s.provider_options() == {"cluster_name": "c1", "vm_memory_overhead_percent": 0.1, "reserved_enis": 1,
                                    "use_pricing_api": False, "dry_run": False, "cluster_endpoint": "https://api.example",
                                    "ca_bundle": "Y2E=", "interruption_queue": "q"}


def test_catalog_settings_reach_the_simulated_provider_too() -> None:
    from karpy_core.cloudprovider.provider import load_provider

    opts = load_settings({"cloud_provider": "simulated"}, {"VM_MEMORY_OVERHEAD_PERCENT": "0.2", "RESERVED_ENIS": "1"}).provider_options()
    assert opts == {"vm_memory_overhead_percent": 0.2, "reserved_enis": 1}

    async def memory_of(options: dict[str, Any]) -> tuple[int, int]:
        from karpy_core.apis.nodepool import NodePool

        provider = load_provider("simulated", options)
        pool = NodePool.model_validate({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "p"},
                                        "spec": {"template": {"spec": {"nodeClassRef": {
                                            "group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}, "requirements": []}}}})
        m5 = next(it for it in await provider.get_instance_types(pool) if it.name == "m5.large")
        return int(m5.capacity["memory"]), int(m5.capacity["pods"])

    import asyncio

    default_mem, default_pods = asyncio.run(memory_of({}))
    mem, pods = asyncio.run(memory_of(opts))
    assert mem < default_mem  # 20% of the memory kept back instead of 7.5%
    assert pods < default_pods  # one ENI fewer in the max-pods formula


def test_aws_only_settings_with_another_provider_are_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"INTERRUPTION_QUEUE \(--interruption-queue\) is read by the aws provider only"):
        load_settings({"cloud_provider": "simulated"}, {"INTERRUPTION_QUEUE": "q"}).provider_options()
    assert load_settings({"cloud_provider": "simulated", "region": "ap-northeast-2"}, {}).provider_options() == \
        {"region": "ap-northeast-2"}


def test_accepted_settings_are_reported() -> None:
    s = load_settings({}, {"MEMORY_LIMIT": "1073741824", "KARPENTER_SERVICE": "karpenter"})
    lines = s.accepted_without_effect()
    assert any(line.startswith("MEMORY_LIMIT=1073741824 (--memory-limit): accepted with no effect") for line in lines)
    assert any(line.startswith("KARPENTER_SERVICE=karpenter") for line in lines)
    assert load_settings({}, {}).accepted_without_effect() == []


def test_model_fields_all_have_env_and_flag() -> None:
    for name, info in KarpySettings.model_fields.items():
        extra = info.json_schema_extra
        assert isinstance(extra, dict) and extra["env"] and str(extra["flag"]).startswith("--"), name


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["--feature-gates", "Bogus=true"], {}, "error: FEATURE_GATES (--feature-gates): unknown feature gate 'Bogus'"),
    ([], {"ENABLE_PROFILING": "true"}, "error: ENABLE_PROFILING=true (--enable-profiling): not supported"),
    (["--metrics-port", "70000"], {}, "error: METRICS_PORT (--metrics-port): 70000 is not a port"),
    (["--leader-elect", "--disable-leader-election"], {}, "error: --leader-elect/--no-leader-elect contradicts"),
    (["--interruption-queue", "q"], {}, "error: INTERRUPTION_QUEUE (--interruption-queue) is read by the aws provider only"),
])
def test_controller_refuses_in_one_line_with_exit_2(argv: list[str], env: dict[str, str], message: str) -> None:
    result = CliRunner().invoke(app, ["controller", "--cloud-provider", "simulated", *argv], env=env)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(message), result.output


def test_controller_requires_a_cloud_provider() -> None:
    result = CliRunner().invoke(app, ["controller"], env={"KARPY_CLOUD_PROVIDER": ""})
    assert result.exit_code == 2
    assert "--cloud-provider (KARPY_CLOUD_PROVIDER) is required" in result.output


def test_karpenter_style_bool_flags_are_rewritten() -> None:
    from karpy_core.cli import karpenter_bool_flags

    argv = ["controller", "--disable-leader-election=true", "--isolated-vpc=false", "--cluster-name=x", "--kwok"]
    assert karpenter_bool_flags(argv) == ["controller", "--disable-leader-election", "--no-isolated-vpc", "--cluster-name=x",
                                          "--kwok"]
    assert karpenter_bool_flags(["simulate", "--isolated-vpc=true"]) == ["simulate", "--isolated-vpc=true"]


@pytest.mark.parametrize(("argv", "message"), [
    (["controller", "--cloud-provider", "simulated", "--no-such-flag"], "error: No such option: --no-such-flag"),
    (["controller", "--cloud-provider", "simulated", "--enable-profiling=true"],
     "error: ENABLE_PROFILING=true (--enable-profiling): not supported"),
    (["controller", "--cloud-provider", "simulated", "--metrics-port", "x"], "error: METRICS_PORT (--metrics-port): 'x' is not a whole number"),
])
def test_the_console_script_refuses_in_one_line(argv: list[str], message: str) -> None:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", "from karpy_core.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), proc.stderr


def test_readme_settings_table_lists_every_setting(repo_dir: Any) -> None:
    text = (repo_dir / "README.md").read_text()
    section = text.split("### Controller settings", 1)[1].split("\n### ", 1)[0]
    rows = {line.split("|")[2].strip().strip("`"): line for line in section.splitlines() if line.startswith("| ") and "`" in line}
    for _, env, flag, _, _, _ in setting_names():
        assert env in rows, env
        assert f"`{flag.split('/')[0]}`" in rows[env], flag


def test_gates_reach_the_controller_settings_and_simulator_inputs() -> None:
    from karpy_core.featuregates import gates_from

    assert load_settings({}, {"FEATURE_GATES": "ReservedCapacity=false"}).controller_settings().feature_gates == \
        FeatureGates(ReservedCapacity=False)
    # a scenario's mapping form, then --feature-gates over it: only the names given change
    scenario = gates_from({"NodeRepair": False})
    assert gates_from("ReservedCapacity=false", scenario) == FeatureGates(NodeRepair=False, ReservedCapacity=False)
    assert gates_from(None, scenario) is scenario
    with pytest.raises(ConfigurationError, match=r"featureGates.NodeRepair: 'yes' is not true or false"):
        gates_from({"NodeRepair": "yes"})
    with pytest.raises(ConfigurationError, match="unknown feature gate 'NodeRepai'"):
        gates_from("NodeRepai=true")


def test_consolidation_min_savings_env_flag_range_and_the_disruption_controller() -> None:
    from karpy_core.cloudprovider.provider import load_provider
    from karpy_core.kube.memory import InMemoryCluster
    from karpy_core.operator import Operator

    assert load_settings({}, {}).consolidation_min_savings == 0.1
    s = load_settings({}, {"KARPY_CONSOLIDATION_MIN_SAVINGS": "0.25"})
    assert s.consolidation_min_savings == 0.25
    assert load_settings({"consolidation_min_savings": 0.05}, {"KARPY_CONSOLIDATION_MIN_SAVINGS": "0.25"}).consolidation_min_savings == 0.05
    for bad in ("1", "1.5", "-0.1"):
        with pytest.raises(ConfigurationError, match=r"KARPY_CONSOLIDATION_MIN_SAVINGS \(--consolidation-min-savings\)"):
            load_settings({}, {"KARPY_CONSOLIDATION_MIN_SAVINGS": bad})
    op = Operator(kube=InMemoryCluster(), provider=load_provider("simulated", {}), settings=s.controller_settings())
    assert op.disruption.settings.min_savings == 0.25
