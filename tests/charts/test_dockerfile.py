"""deploy/Dockerfile builds an image for any installed provider package.

Docker cannot run here, so the build is checked in parts: the script every build runs
(deploy/install-provider.sh: which requirements are installed, which plugin is checked) runs here
for real, its plugin check against this virtualenv; the Dockerfile passes it the build args and
bakes the provider name into the entrypoint; the build context filter lets in what it copies.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
SCRIPT = REPO / "deploy" / "install-provider.sh"


def _script(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHON": sys.executable}
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=env)


def _instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _stages() -> dict[str, list[tuple[str, str]]]:
    stages: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for word, rest in _instructions():
        if word == "FROM":
            current = []
            stages[rest.split(" AS ")[-1].strip()] = current
        current.append((word, rest))
    return stages


def test_script_is_valid_sh() -> None:
    proc = subprocess.run(["sh", "-n", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("args", "provider", "pip"),
    [
        (("aws", "", ""), "aws", "pip install --prefer-binary . ./providers/aws"),
        (("kakaocloud", "", ""), "kakaocloud", "pip install --prefer-binary . ./providers/kakaocloud"),
        (("aws", "example", "karpy-provider-example==1.2.0"), "example", "pip install --prefer-binary . karpy-provider-example==1.2.0"),
        (("aws", "example", "./providers/example"), "example", "pip install --prefer-binary . ./providers/example"),
    ],
)
def test_dry_run_resolves_provider_and_requirements(args: tuple[str, str, str], provider: str, pip: str) -> None:
    proc = _script("--dry-run", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"provider={provider}", pip]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("gcp", "", ""), "CLOUD must be aws or kakaocloud, not 'gcp'"),
        (("aws", "example", ""), "PROVIDER=example needs PROVIDER_PACKAGE"),
        (("aws", "Bad Name", "x"), "PROVIDER must be a plugin name"),
    ],
)
def test_dry_run_refuses_bad_build_args(args: tuple[str, str, str], message: str) -> None:
    proc = _script("--dry-run", *args)
    assert proc.returncode == 1
    assert message in proc.stderr


@pytest.mark.parametrize("provider", ["aws", "kakaocloud", "simulated"])
def test_plugin_check_loads_installed_providers(provider: str) -> None:
    """The build's last step, against this virtualenv: any installed entry point passes, here as
    the third-party route (PROVIDER + PROVIDER_PACKAGE) for the simulated one."""
    args = ("aws", provider, "unused") if provider == "simulated" else (provider, "", "")
    proc = _script("--check-only", *args)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"provider {provider}: ")


def test_plugin_check_fails_for_a_missing_provider() -> None:
    proc = _script("--check-only", "aws", "example", "karpy-provider-example")
    assert proc.returncode != 0
    assert "no karpy.cloudprovider entry point 'example' is installed" in proc.stderr
    assert "aws" in proc.stderr and "kakaocloud" in proc.stderr


def test_dockerfile_passes_the_build_args_to_the_script() -> None:
    stages = _stages()
    assert set(stages) == {"build", "runtime"}
    build = stages["build"]
    args = {rest.split("=", 1)[0] for word, rest in build if word == "ARG"}
    assert {"CLOUD", "PROVIDER", "PROVIDER_PACKAGE"} <= args
    runs = [rest for word, rest in build if word == "RUN"]
    call = '"${CLOUD}" "${PROVIDER}" "${PROVIDER_PACKAGE}"'
    assert f"karpy-install-provider --dry-run {call}" in runs
    assert f"PYTHON=/opt/karpy/bin/python karpy-install-provider {call}" in runs
    copies = [rest for word, rest in build if word == "COPY"]
    assert "deploy/install-provider.sh /usr/local/bin/karpy-install-provider" in copies
    # The dry run (the cheap refusal) comes before the slow steps.
    assert runs.index(f"karpy-install-provider --dry-run {call}") == 0


def test_runtime_bakes_in_the_provider_name() -> None:
    runtime = _stages()["runtime"]
    assert {rest.split("=", 1)[0] for word, rest in runtime if word == "ARG"} >= {"CLOUD", "PROVIDER"}
    env = " ".join(rest for word, rest in runtime if word == "ENV")
    assert "KARPY_CLOUD_PROVIDER=${PROVIDER:-${CLOUD}}" in env
    labels = " ".join(rest for word, rest in runtime if word == "LABEL")
    # The image name the chart defaults to (karpy-<provider>), see karpy.image in _helpers.tpl.
    assert 'org.opencontainers.image.title="karpy-${PROVIDER:-${CLOUD}}"' in labels
    # No shell: karpy reads the provider from KARPY_CLOUD_PROVIDER (the --cloud-provider flag's env).
    (entrypoint,) = [rest for word, rest in runtime if word == "ENTRYPOINT"]
    assert entrypoint == '["/opt/karpy/bin/karpy", "controller"]'


def test_build_context_lets_in_what_the_dockerfile_copies() -> None:
    allowed = [line[1:].rstrip("/") for line in (REPO / "deploy" / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")]
    for word, rest in _stages()["build"]:
        if word != "COPY" or rest.startswith("--from"):
            continue
        *sources, _dest = rest.split()
        for source in sources:
            assert source.rstrip("/") in allowed, f"COPY {source}: excluded by deploy/Dockerfile.dockerignore"
            assert (REPO / source).exists(), source
