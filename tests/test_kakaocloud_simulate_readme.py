"""The README's KakaoCloud simulation (fresh-user trial, issue 35): ``karpy simulate`` on the
guide's KCNodeClass NodePool needs no secret (the simulated cloud serves KCNodeClass), with or
without the plugin installed; ``--cloud-provider kakaocloud``, which runs the plugin for real (the
KakaoCloud API, real VMs), stops before any API call on one line naming the options that supply the
keyring and the credential, instead of ``cannot read Secret karpenter-kakaocloud/karpenter-sigkey:
404 NotFound``."""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_readme_sim_only import _karpy as karpy_without_plugins

REPO = Path(__file__).resolve().parents[1]


def _readme_line() -> list[str]:
    """The README's ``karpy simulate examples/kakaocloud/ ...`` command, as arguments after ``karpy``."""
    (line,) = [line for line in (REPO / "README.md").read_text().splitlines()
               if line.startswith(".venv/bin/karpy simulate examples/kakaocloud/")]
    args = shlex.split(line.split("#", 1)[0])
    assert args[0] == ".venv/bin/karpy"
    return args[1:]


def _karpy(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("KAKAOCLOUD_") and k != "CLUSTER_NAME"}
    return subprocess.run([sys.executable, "-c", "from karpy_core.cli import main; main()", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False, env={**clean, **(env or {})})


def test_the_readme_kakaocloud_line_runs_with_the_plugin() -> None:
    pytest.importorskip("karpy_kakaocloud")
    done = _karpy(*_readme_line())
    assert done.returncode == 0, done.stderr
    assert "launched by NodePool karpenter-default" in done.stdout
    assert "pods: 1 bound, 0 pending" in done.stdout
    assert "Secret" not in done.stdout + done.stderr


def test_the_readme_kakaocloud_line_runs_without_the_plugin() -> None:
    done = karpy_without_plugins(*_readme_line())
    assert done.returncode == 0, done.stderr
    assert "pods: 1 bound, 0 pending" in done.stdout


def test_the_real_plugin_names_what_supplies_the_keyring_and_the_credential(tmp_path: Path) -> None:
    pytest.importorskip("karpy_kakaocloud")
    args = ["simulate", "--cloud-provider", "kakaocloud", "--provider-option", "cluster_name=demo",
            "examples/kakaocloud/", "examples/workloads/inflate.yaml"]
    done = _karpy(*args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1
    line = done.stderr.strip()
    assert line.startswith("error: kakaocloud provider: the ownership-signing keyring (a keyring.json) is required: "
                           "option keyring_file (karpy simulate and validate: --provider-option keyring_file=PATH; "
                           "karpy controller: the Secret karpenter-kakaocloud/karpenter-sigkey")
    assert "the application credential is required" in line and "KAKAOCLOUD_APPLICATION_CREDENTIAL_ID" in line
    assert "launches real VMs" in line and "leave out --cloud-provider" in line
    assert "404" not in line
    # the keyring given as a file: only the credential is asked for (still before any API call)
    keyring = tmp_path / "keyring.json"
    keyring.write_text(json.dumps({"activeKeyID": "k1", "keys": [{"id": "k1", "key": base64.b64encode(bytes(32)).decode()}]}))
    done = _karpy(*args[:5], "--provider-option", f"keyring_file={keyring}", *args[5:])
    assert done.returncode == 2, done.stderr
    assert "keyring" not in done.stderr.split(". karpy simulate")[0]
    assert done.stderr.startswith("error: kakaocloud provider: the application credential is required: option credentials")
