"""Issue 35 leftovers (fix35): ``karpy validate --cloud-provider kakaocloud`` refuses what ``karpy
simulate`` refuses, in the same line: the keyring and the credential missing with the cluster name
given, a keyring file that cannot be read, a Secret among the manifests without its key; the
manifests' Secrets count as given (simulate named them missing). The aws plugin checks its required
settings when it is created, in both commands alike.

No test here reaches a cloud: every KakaoCloud run is refused before its first API call, and
``KAKAOCLOUD_ENDPOINTS`` points every service at a closed loopback port in case one were not.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from tests.cli import invoke_cli
from tests.test_input_classes import _write

REPO = Path(__file__).resolve().parents[1]
KAKAO = ["--cloud-provider", "kakaocloud"]
SERVICES = ("iam", "bcs", "vpc", "network", "image", "volume", "kubernetes_engine")


@pytest.fixture
def kakao_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No KakaoCloud source from the environment; every endpoint a closed loopback port."""
    pytest.importorskip("karpy_kakaocloud")
    import os

    for name in list(os.environ):
        if name.startswith("KAKAOCLOUD_") or name == "CLUSTER_NAME":
            monkeypatch.delenv(name)
    monkeypatch.setenv("KAKAOCLOUD_ENDPOINTS", ",".join(f"{s}=http://127.0.0.1:9" for s in SERVICES))


def _error_line(result: object) -> str:
    """The one ``error:`` line of a refused run (exit 2, nothing else on stderr)."""
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    lines = result.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    return str(lines[0])


def _both(options: list[str], *manifests: str) -> tuple[str, str]:
    """The error lines of validate and simulate on the same manifests and provider options."""
    validated = _error_line(invoke_cli("validate", *KAKAO, *options, *manifests))
    simulated = _error_line(invoke_cli("simulate", *KAKAO, *options, *manifests, str(REPO / "examples/workloads/inflate.yaml")))
    return validated, simulated


KEYRING = json.dumps({"activeKeyID": "k1", "keys": [{"id": "k1", "key": base64.b64encode(bytes(32)).decode()}]})
KEYRING_SECRET = f"""\
apiVersion: v1
kind: Secret
metadata: {{name: karpenter-sigkey, namespace: karpenter-kakaocloud}}
data: {{keyring.json: {base64.b64encode(KEYRING.encode()).decode()}}}
"""
CREDENTIALS_SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: kakaocloud-credentials, namespace: karpenter-kakaocloud}
stringData: {applicationCredentialId: id-1234, applicationCredentialSecret: not-a-real-secret}
"""
MISSING_KEYRING = ("kakaocloud provider: the ownership-signing keyring (a keyring.json) is required: option keyring_file "
                   "(karpy simulate and validate: --provider-option keyring_file=PATH; karpy controller: the Secret "
                   "karpenter-kakaocloud/karpenter-sigkey the chart mounts (sigKey.secretName), or KAKAOCLOUD_KEYRING_FILE=PATH)")
MISSING_CREDENTIALS = "kakaocloud provider: the application credential is required: option credentials"
MISSING_CLUSTER = ("error: kakaocloud provider: the cluster name (the Kubernetes Engine cluster) is required: option cluster_name "
                   "(karpy simulate and validate: --provider-option cluster_name=NAME; karpy controller: --cluster-name or CLUSTER_NAME)")


# --------------------------------------------------------------------------- 1. validate refuses what simulate refuses


def test_validate_refuses_a_missing_keyring_and_credential_as_simulate_does(kakao_env: None) -> None:
    """With the cluster name given, validate passed (its prepare checked the cluster name only) while
    simulate stopped at its first call for the keyring and the credential."""
    validated, simulated = _both(["--provider-option", "cluster_name=demo"], str(REPO / "examples/kakaocloud/"))
    assert validated == simulated
    assert validated.startswith(f"error: {MISSING_KEYRING}; {MISSING_CREDENTIALS} ")
    assert "launches real VMs" in validated


def test_a_keyring_file_that_does_not_exist_is_named(kakao_env: None) -> None:
    """``keyring_file=/nonexistent.json`` counted as given: the line named only the credential."""
    validated, simulated = _both(["--provider-option", "cluster_name=demo", "--provider-option", "keyring_file=/nonexistent.json"],
                                 str(REPO / "examples/kakaocloud/"))
    assert validated == simulated
    assert validated.startswith("error: kakaocloud provider: option keyring_file: cannot read the KakaoCloud keyring file "
                                f"/nonexistent.json: No such file or directory; {MISSING_CREDENTIALS} ")


def test_a_keyring_file_from_the_environment_that_does_not_exist_is_named(kakao_env: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAKAOCLOUD_KEYRING_FILE", "/nonexistent.json")
    validated, simulated = _both(["--provider-option", "cluster_name=demo"], str(REPO / "examples/kakaocloud/"))
    assert validated == simulated
    assert validated.startswith("error: kakaocloud provider: KAKAOCLOUD_KEYRING_FILE: cannot read the KakaoCloud keyring file "
                                "/nonexistent.json: No such file or directory; ")


# --------------------------------------------------------------------------- 2. Secrets among the manifests are given


def test_secrets_in_the_manifests_are_not_named_missing(kakao_env: None, tmp_path: Path) -> None:
    """Without the cluster name, simulate named the keyring and the credential missing although the
    manifests held their Secrets (stored in the cluster only after the plugin was prepared)."""
    secrets = _write(tmp_path, "secrets.yaml", KEYRING_SECRET + "---\n" + CREDENTIALS_SECRET)
    validated, simulated = _both([], str(REPO / "examples/kakaocloud/"), secrets)
    assert validated == simulated == MISSING_CLUSTER


def test_a_secret_in_the_manifests_is_read_and_its_problem_named(kakao_env: None, tmp_path: Path) -> None:
    """The keyring Secret given without its keyring.json key: both commands name it (and the
    credential still missing), before any API call."""
    secrets = _write(tmp_path, "secrets.yaml", KEYRING_SECRET.replace("keyring.json:", "keyring:"))
    validated, simulated = _both(["--provider-option", "cluster_name=demo"], str(REPO / "examples/kakaocloud/"), secrets)
    assert validated == simulated
    assert validated.startswith("error: kakaocloud provider: Secret karpenter-kakaocloud/karpenter-sigkey: the data key must be "
                                f"named keyring.json (seed 004); {MISSING_CREDENTIALS} ")


def test_aws_refuses_alike_in_validate_and_simulate(monkeypatch: pytest.MonkeyPatch) -> None:
    """The aws plugin checks its required settings when it is created, which both commands do
    (no asymmetry; region given, so no region source is asked)."""
    pytest.importorskip("karpy_aws")
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    args = ["--cloud-provider", "aws", "--provider-option", "region=us-east-1", str(REPO / "examples/nodepools/general-purpose.yaml")]
    validated = _error_line(invoke_cli("validate", *args))
    assert validated == _error_line(invoke_cli("simulate", *args, str(REPO / "examples/workloads/inflate.yaml")))
    assert validated.startswith("error: aws provider: the cluster name is required")


def _kakao_scenario(tmp_path: Path, *extra: str) -> str:
    """A Scenario applying the README's KCNodeClass NodePool, inflate and ``extra`` files at 0s."""
    (tmp_path / "kc.yaml").write_text((REPO / "examples/kakaocloud/karpenter-default.yaml").read_text())
    (tmp_path / "inflate.yaml").write_text((REPO / "examples/workloads/inflate.yaml").read_text())
    files = ", ".join(["kc.yaml", "inflate.yaml", *extra])
    return _write(tmp_path, "s.yaml", "apiVersion: karpy.sh/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nsteps:\n"
                                      f"  - {{at: 0s, apply: [{files}]}}\n")


def test_validate_refuses_a_scenario_as_simulate_does(kakao_env: None, tmp_path: Path) -> None:
    """A Scenario's NodePools come after the plugin is prepared: simulate refuses at its first call
    to the plugin, validate (which said ``valid``) up front, in the same line."""
    scenario = _kakao_scenario(tmp_path)
    options = [*KAKAO, "--provider-option", "cluster_name=demo"]
    validated = _error_line(invoke_cli("validate", scenario, *options))
    assert validated == _error_line(invoke_cli("simulate", scenario, *options, "--until", "1h"))
    assert validated.startswith(f"error: {MISSING_KEYRING}; {MISSING_CREDENTIALS} ")


def test_a_scenario_applying_the_keyring_secret_is_not_told_it_is_missing(kakao_env: None, tmp_path: Path) -> None:
    _write(tmp_path, "secrets.yaml", KEYRING_SECRET)
    scenario = _kakao_scenario(tmp_path, "secrets.yaml")
    options = [*KAKAO, "--provider-option", "cluster_name=demo"]
    validated = _error_line(invoke_cli("validate", scenario, *options))
    assert validated == _error_line(invoke_cli("simulate", scenario, *options, "--until", "1h"))
    assert validated.startswith(f"error: {MISSING_CREDENTIALS} ")


def test_no_kakaocloud_nodepool_needs_no_source(kakao_env: None) -> None:
    """A run where no NodePool is the plugin's never calls it: neither command asks for the keyring
    or the credential (simulate: tests/sim/test_unserved_nodepools.py)."""
    result = invoke_cli("validate", *KAKAO, "--provider-option", "cluster_name=demo",
                        str(REPO / "examples/nodepools/general-purpose.yaml"))
    assert result.exit_code == 0, result.output
    assert "keyring" not in result.output
