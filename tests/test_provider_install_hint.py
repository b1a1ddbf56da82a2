"""``karpy validate --cloud-provider kakaocloud`` without the plugin says how to install it, and a
Scenario file is checked against the plugin as plain manifests are."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app
from karpy_core.cloudprovider import provider as provider_module
from karpy_core.cloudprovider.provider import install_hint

SCALE_DOWN = Path(__file__).resolve().parent / "data" / "scenarios" / "scale-down.yaml"


def test_not_installed_in_tree_plugin_says_how_to_install(monkeypatch: pytest.MonkeyPatch, examples_dir: Path) -> None:
    monkeypatch.setattr(provider_module, "available_providers", lambda: ["simulated"])
    result = CliRunner().invoke(app, ["validate", "--cloud-provider", "kakaocloud", "--provider-option", "cluster_name=demo",
                                      str(examples_dir / "nodepools/general-purpose.yaml")])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: --cloud-provider 'kakaocloud' is not installed; installed: simulated; kakaocloud is karpy's plugin "
        "karpy-kakaocloud, its own distribution, which karpy's install does not bring: in a clone of karpy run "
        ".venv/bin/pip install -e ./providers/kakaocloud (next to karpy, in its venv), elsewhere pip install 'karpy[kakaocloud]'")
    # the directory named exists in a clone
    assert (Path(__file__).resolve().parents[1] / "providers" / "kakaocloud" / "pyproject.toml").is_file()
    assert "pip install -e ./providers/aws" in install_hint("aws")
    assert install_hint("gcp") == ""
    result = CliRunner().invoke(app, ["validate", "--cloud-provider", "gcp", str(examples_dir / "nodepools/general-purpose.yaml")])
    assert result.stderr.strip() == "error: --cloud-provider 'gcp' is not installed; installed: simulated"


def test_validate_scenario_loads_the_plugin_as_plain_manifests_do() -> None:
    runner = CliRunner()
    # the plugin is loaded: its required option is asked for, as for plain manifests
    result = runner.invoke(app, ["validate", "--cloud-provider", "kakaocloud", str(SCALE_DOWN)])
    assert result.exit_code == 2
    # only it: no NodePool of the scenario is a KCNodeClass one, so the run would never ask for the
    # keyring or the credential (fix35; simulate says the same)
    assert result.stderr == (
        "error: kakaocloud provider: the cluster name (the Kubernetes Engine cluster) is required: option cluster_name "
        "(karpy simulate and validate: --provider-option cluster_name=NAME; karpy controller: --cluster-name or CLUSTER_NAME)\n")
    assert runner.invoke(app, ["simulate", "--cloud-provider", "kakaocloud", str(SCALE_DOWN)]).stderr == result.stderr
    result = runner.invoke(app, ["validate", "--cloud-provider", "kakaocloud", "--provider-option", "cluster_name=demo", str(SCALE_DOWN)])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("valid (1 warning below): Scenario scale-down: ")
    assert result.stdout.splitlines()[1] == (
        f"warning: {SCALE_DOWN}: NodePool/default: left out, launches nothing: its NodeClass kind EC2NodeClass "
        "(karpenter.k8s.aws) is not served by cloud provider kakaocloud, which serves KCNodeClass (karpenter.kakaocloud.com); "
        "--cloud-provider aws or simulated serves it")
    result = runner.invoke(app, ["validate", "--cloud-provider", "simulated", str(SCALE_DOWN)])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("valid: Scenario scale-down: ")
