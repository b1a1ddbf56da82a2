"""Clean-clone trial findings (issue 35, msgs48): a real plugin's missing settings named all in one
message, ``--explain`` on a workload that asks for no pods, ``karpy validate``'s one line per
NodeClass read without its plugin, and the ``-h``/settings-error wording."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from karpy_core.cli import app
from tests.test_readme_sim_only import _karpy as karpy_without_plugins

REPO = Path(__file__).resolve().parents[1]


def _karpy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``karpy ARGS`` in a child process without any KakaoCloud/AWS setting in its environment."""
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith(("KAKAOCLOUD_", "AWS_", "KARPY_", "MIN_VALUES", "KUBE_CLIENT")) and k != "CLUSTER_NAME"}
    clean["AWS_CONFIG_FILE"] = os.devnull  # no region from a shared config
    clean["AWS_EC2_METADATA_DISABLED"] = "true"
    return subprocess.run([sys.executable, "-c", "from karpy_core.cli import main; main()", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False, env={**clean, **(env or {})})


# ---------------------------------------------------------------- 1. every missing setting at once
KAKAO_ARGS = ["--cloud-provider", "kakaocloud", "examples/kakaocloud/", "examples/workloads/inflate.yaml"]


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_kakaocloud_names_the_cluster_name_keyring_and_credential_in_one_message(command: str) -> None:
    """Before: the cluster name alone; given it, the keyring and the credential (one at a time).
    The simulate form of each is an option, except the credential (the environment, never the
    command line); nothing reaches the KakaoCloud API (no endpoint is even named)."""
    pytest.importorskip("karpy_kakaocloud")
    done = _karpy(command, *KAKAO_ARGS)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    line = done.stderr.strip()
    assert line.startswith("error: kakaocloud provider: the cluster name (the Kubernetes Engine cluster) is required: "
                           "option cluster_name (karpy simulate and validate: --provider-option cluster_name=NAME; ")
    assert ("; kakaocloud provider: the ownership-signing keyring (a keyring.json) is required: option keyring_file "
            "(karpy simulate and validate: --provider-option keyring_file=PATH; karpy controller: ") in line
    assert ("; kakaocloud provider: the application credential is required: option credentials (karpy simulate and "
            "validate: KAKAOCLOUD_APPLICATION_CREDENTIAL_ID and KAKAOCLOUD_APPLICATION_CREDENTIAL_SECRET in the "
            "environment, never on the command line (KAKAOCLOUD_REGION, default kr-central-2, and KAKAOCLOUD_PROJECT_ID "
            "optional); ") in line
    assert "keyring_file=PATH or KAKAOCLOUD_KEYRING_FILE" not in line  # the environment is no simulate form
    assert "launches real VMs" in line and "kakaocloud.com" not in line and "Traceback" not in done.stderr


def test_kakaocloud_given_a_keyring_names_the_other_two() -> None:
    pytest.importorskip("karpy_kakaocloud")
    done = _karpy("simulate", "--provider-option", "keyring_file=/nonexistent/keyring.json", *KAKAO_ARGS)
    assert done.returncode == 2, done.stderr
    assert "the cluster name" in done.stderr and "the application credential" in done.stderr
    assert "keyring (a keyring.json) is required" not in done.stderr


def test_kakaocloud_controller_wording_unchanged_without_a_simulation() -> None:
    """Outside a simulation only the cluster name is asked for (the Secrets are the controller's sources)."""
    kakaocloud = pytest.importorskip("karpy_kakaocloud.plugin")
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.errors import ConfigurationError

    provider = kakaocloud.create_plugin({})
    with pytest.raises(ConfigurationError) as info:
        provider.karpy_prepare(ProviderContext())
    assert str(info.value) == ("kakaocloud provider: the cluster name (the Kubernetes Engine cluster) is required: option "
                               "cluster_name (karpy simulate and validate: --provider-option cluster_name=NAME; karpy "
                               "controller: --cluster-name or CLUSTER_NAME)")


def test_aws_names_the_region_and_the_cluster_name_in_one_message() -> None:
    pytest.importorskip("karpy_aws")
    done = _karpy("simulate", "--cloud-provider", "aws", "examples/nodepools/general-purpose.yaml",
                  "examples/workloads/inflate.yaml")
    assert done.returncode == 2, done.stderr
    line = done.stderr.strip()
    assert line.startswith("error: aws provider: the region is required: option region")
    assert line.endswith("; aws provider: the cluster name is required: option cluster_name (karpy simulate and "
                         "validate: --provider-option cluster_name=NAME; karpy controller: --cluster-name or CLUSTER_NAME)")


# ---------------------------------------------------------------- 2. --explain a workload of 0 replicas
ZERO = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: idle}
spec:
  replicas: 0
  selector: {matchLabels: {app: idle}}
  template:
    metadata: {labels: {app: idle}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: "1"}}}]
---
apiVersion: batch/v1
kind: Job
metadata: {name: idle-job}
spec:
  parallelism: 0
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: pause}]
"""


def _explain(tmp_path: Path, name: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    path = tmp_path / "zero.yaml"
    path.write_text(ZERO)
    result = CliRunner().invoke(app, ["simulate", "examples/nodepools/general-purpose.yaml",
                                      "examples/workloads/inflate.yaml", str(path), "--explain", name])
    return result.exit_code, result.stderr.strip()


def test_explain_a_workload_of_zero_replicas(tmp_path: Path) -> None:
    """Before: ``no pod default/idle in the simulation (give a pod name, a workload name ...)``."""
    code, err = _explain(tmp_path, "idle")
    assert code == 2
    assert err == "error: --explain default/idle: workload idle (Deployment) has spec.replicas 0: no pods in the simulation to explain"
    code, err = _explain(tmp_path, "idle-job")
    assert code == 2 and "workload idle-job (Job) has spec.parallelism 0" in err


def test_explain_a_prefix_of_only_zero_replica_workloads(tmp_path: Path) -> None:
    code, err = _explain(tmp_path, "idl")
    assert code == 2
    assert err == ("error: --explain default/idl: no pod in the simulation starts with idl; workloads starting with idl "
                   "ask for no pods: idle (Deployment, spec.replicas 0), idle-job (Job, spec.parallelism 0)")
    code, err = _explain(tmp_path, "nothing")  # a name nothing has: as before
    assert code == 2 and err.startswith("error: no pod default/nothing in the simulation (give a pod name")


# ---------------------------------------------------------------- 3. validate: one line per NodeClass
def test_validate_lists_each_unvalidated_nodeclass_once_and_counts_it() -> None:
    """``karpy validate examples/nodepools/`` without karpy-aws: each of the 8 EC2NodeClasses on one
    line with the same status (before: "stored as read by simulate" or "not validated: no installed
    plugin serves ..." by which NodePool survived the redefinitions), no warning repeating them
    (before: one per document, 17), counted in the summary (before: ``valid (54 warnings below): 8 NodePool``)."""
    done = karpy_without_plugins("validate", "examples/nodepools/")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "valid (44 warnings below): 8 EC2NodeClass, 8 NodePool"  # the 8 listed lines counted (fixa48)
    listed = [line for line in lines[1:] if not line.startswith("warning: ")]
    assert len(listed) == 8
    status = ("not validated: its plugin, karpy-aws (providers/aws), is not installed (the simulated cloud does not "
              "need it): karpenter.k8s.aws/v1 EC2NodeClass/")
    assert all(line.startswith(status) for line in listed), listed
    names = [line.removeprefix(status).split(" ")[0] for line in listed]
    assert sorted(names) == sorted(set(names))
    assert not [line for line in lines if line.startswith("warning: ") and "not validated" in line]


def test_loader_warns_once_per_unvalidated_nodeclass() -> None:
    """Two documents defining the same EC2NodeClass without its plugin: one warning (simulate prints it),
    naming the later document, the definition used (as validate's listing does)."""
    from karpy_core.apis.loader import load_text
    from karpy_core.apis.registry import core_kinds

    core_only = {(cls.API_VERSION, cls.KIND): cls for cls in core_kinds()}
    doc = ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\n"
           "spec: {role: R, amiSelectorTerms: [{alias: al2023@latest}]}\n")
    loaded = load_text(doc + "---\n" + doc, "nc.yaml", registry=core_only)
    assert [w for w in loaded.warnings if "not validated" in w] == [
        "nc.yaml doc 2 EC2NodeClass/default: not validated: its plugin, karpy-aws (providers/aws), is not installed "
        "(the simulated cloud does not need it)"]


# ---------------------------------------------------------------- 4. -h and settings errors
def test_help_shows_the_min_values_policy_default_and_words_the_brackets_right() -> None:
    controller = _karpy("controller", "-h").stdout
    simulate = _karpy("simulate", "-h").stdout
    flat = " ".join(controller.split())
    assert "Strict or BestEffort, default Strict [MIN_VALUES_POLICY]" in flat
    assert "Respect or Ignore, default Respect [PREFERENCE_POLICY]" in flat
    assert "Karpenter's name for Karpenter's settings, a KARPY_ name for karpy's own" in flat
    assert "Each setting has Karpenter's environment variable" not in flat
    assert "[default: Strict]" in " ".join(simulate.split())


@pytest.mark.parametrize(("args", "env", "expected"), [
    (["--disruption-pipeline-depth", "11"], {},
     "error: KARPY_DISRUPTION_PIPELINE_DEPTH (--disruption-pipeline-depth): 11 is not between 1 and 10"),
    ([], {"KARPY_DISRUPTION_PIPELINE_DEPTH": "11"},
     "error: KARPY_DISRUPTION_PIPELINE_DEPTH (--disruption-pipeline-depth): 11 is not between 1 and 10"),
    ([], {"MIN_VALUES_POLICY": "x"}, "error: MIN_VALUES_POLICY (--min-values-policy): 'x' is not Strict or BestEffort"),
    ([], {"KUBE_CLIENT_QPS": "abc"}, "error: KUBE_CLIENT_QPS (--kube-client-qps): 'abc' is not a whole number"),
    (["--disruption-pipeline-depth", "x"], {},
     "error: KARPY_DISRUPTION_PIPELINE_DEPTH (--disruption-pipeline-depth): 'x' is not a whole number"),
    (["--kube-client-qps=1.5"], {}, "error: KUBE_CLIENT_QPS (--kube-client-qps): 1.5 is not a whole number"),
    (["--vm-memory-overhead-percent", "abc"], {},
     "error: VM_MEMORY_OVERHEAD_PERCENT (--vm-memory-overhead-percent): 'abc' is not a number"),
    ([], {"VM_MEMORY_OVERHEAD_PERCENT": "abc"},
     "error: VM_MEMORY_OVERHEAD_PERCENT (--vm-memory-overhead-percent): 'abc' is not a number"),
])
def test_settings_errors_name_the_value_once_quoted_as_elsewhere(args: list[str], env: dict[str, str], expected: str) -> None:
    """Before: ``... 11 is not between 1 and 10 (got '11')``, ``'x' is not Strict or BestEffort (got 'x')``,
    and a flag's non-integer value not named at all; then (trial 15) pydantic's "Input should be a valid
    integer, unable to parse string as an integer" where a flag's value was not a number, without the
    setting's environment name."""
    done = _karpy("controller", "--cloud-provider", "simulated", *args, env=env)
    assert done.returncode == 2
    assert done.stderr.strip() == expected


@pytest.mark.parametrize(("args", "expected"), [
    (["--vm-memory-overhead-percent", "abc"],
     "error: VM_MEMORY_OVERHEAD_PERCENT (--vm-memory-overhead-percent): 'abc' is not a number"),
    (["--max-pods", "abc"], "error: --max-pods: 'abc' is not a whole number"),
    (["--hook-timeout", "soon"], "error: --hook-timeout: 'soon' is not a number"),
])
def test_simulate_number_options_read_as_settings_errors(args: list[str], expected: str) -> None:
    """Trial 15: ``karpy simulate --vm-memory-overhead-percent abc`` printed pydantic's wording
    ("Invalid value for ...: Input should be a valid number, unable to parse string as a number")."""
    done = _karpy("simulate", *args, "examples/nodepools/")
    assert done.returncode == 2
    assert done.stderr.strip() == expected
