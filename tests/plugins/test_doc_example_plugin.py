"""docs/cloudprovider.md's example provider, tinycloud, built and run from the page itself.

The page marks each file of the example package with a line `` `karpy-tinycloud/<path>`: ``
followed by a fenced block. The test writes those blocks to a temporary directory, installs the
package into an isolated virtualenv that has karpy installed from this repository (no system site
packages), and runs what the page says: ``karpy providers`` lists it, ``karpy validate`` accepts
its NodeClass and names a bad field, ``karpy simulate --cloud-provider tinycloud`` binds the
Deployment's pods on tinycloud's nodes, the CRD snippet renders, and the page's conformance test
module (karpy's conformance kit) passes against it.

The virtualenv (karpy editable from this checkout, pytest, pytest-asyncio, setuptools) is built
once per checkout path, ``pyproject.toml`` and Python version, under ``~/.cache/karpy/plugin-venvs``
(``KARPY_PLUGIN_VENV_CACHE`` to move it): the first build downloads from PyPI (or the pip cache)
and takes about 50 s; later runs only install the example package (a second or two).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cloudprovider.md"
PACKAGE = "karpy-tinycloud"
_FILE_BLOCK = re.compile(r"^`karpy-tinycloud/([^`]+)`:\n\n```[a-z]*\n(.*?)\n```$", re.M | re.S)
_CRD_SNIPPET = re.compile(r"^python -c '(.*?)' > (\S+)$", re.M | re.S)
CATALOG_TINY = {"tiny.small", "tiny.medium"}
PIP_TIMEOUT = 600  # hang guard only


def doc_files() -> dict[str, str]:
    """Relative path -> content of every marked example file in the page."""
    found: dict[str, str] = {}
    for m in _FILE_BLOCK.finditer(DOC.read_text()):
        assert m.group(1) not in found, f"{m.group(1)} appears twice in {DOC.name}"
        found[m.group(1)] = m.group(2) + "\n"
    return found


def test_the_page_marks_a_whole_package() -> None:
    files = doc_files()
    assert set(files) == {"pyproject.toml", "karpy_tinycloud/__init__.py", "karpy_tinycloud/apis.py",
                          "karpy_tinycloud/plugin.py", "tests/test_conformance.py", "tests/test_tinycloud.py", "examples/cluster.yaml"}
    pyproject = files["pyproject.toml"]
    assert 'tinycloud = "karpy_tinycloud.plugin:create_plugin"' in pyproject
    assert 'tinycloud = "karpy_tinycloud.apis:api_kinds"' in pyproject
    # the entry-point snippet of section 1 is the one in the whole pyproject.toml
    section1 = DOC.read_text().split("## 2.")[0]
    assert '[project.entry-points."karpy.cloudprovider"]\ntinycloud = "karpy_tinycloud.plugin:create_plugin"' in section1
    assert '[project.entry-points."karpy.cloudprovider"]\ntinycloud = "karpy_tinycloud.plugin:create_plugin"' in pyproject


# ------------------------------------------------------------------------------ the virtualenv
def _venv_key() -> str:
    versions = [importlib.metadata.version(d) for d in ("pytest", "pytest-asyncio")]
    text = "\n".join([str(ROOT), (ROOT / "pyproject.toml").read_text(), sys.version, *versions])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run(cmd: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=PIP_TIMEOUT, **kw)  # type: ignore[call-overload]


def _build_venv(target: Path) -> None:
    """A fresh virtualenv at ``target`` with karpy (editable, this checkout) and the test tools;
    built in place (scripts name their interpreter by absolute path), marked complete last."""
    shutil.rmtree(target, ignore_errors=True)
    created = _run([sys.executable, "-m", "venv", target])
    assert created.returncode == 0, created.stderr
    pins = [f"pytest=={importlib.metadata.version('pytest')}", f"pytest-asyncio=={importlib.metadata.version('pytest-asyncio')}"]
    pip = _run([target / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                "-e", ROOT, "setuptools>=77", *pins])
    assert pip.returncode == 0, f"could not build the plugin test virtualenv:\n{pip.stdout[-2000:]}\n{pip.stderr[-4000:]}"
    (target / "karpy-plugin-venv.ok").write_text(str(ROOT) + "\n")


@dataclass
class Env:
    venv: Path
    package: Path
    seconds: dict[str, float]

    def karpy(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run([self.venv / "bin" / "karpy", *args], cwd=self.package)

    def python(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run([self.venv / "bin" / "python", *args], cwd=self.package)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    cache = Path(os.environ.get("KARPY_PLUGIN_VENV_CACHE", Path.home() / ".cache" / "karpy" / "plugin-venvs"))
    cache.mkdir(parents=True, exist_ok=True)
    venv = cache / _venv_key()
    seconds: dict[str, float] = {}
    with open(cache / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one test run at a time uses (and builds) this virtualenv
        start = time.monotonic()
        if not (venv / "karpy-plugin-venv.ok").exists():
            _build_venv(venv)
        seconds["venv"] = time.monotonic() - start
        package = tmp_path_factory.mktemp("doc-plugin") / PACKAGE
        for rel, text in doc_files().items():
            (package / rel).parent.mkdir(parents=True, exist_ok=True)
            (package / rel).write_text(text)
        start = time.monotonic()
        # offline: karpy is installed already (--no-deps), setuptools too (--no-build-isolation)
        pip = _run([venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-build-isolation", "--force-reinstall", package])
        assert pip.returncode == 0, pip.stderr
        seconds["install"] = time.monotonic() - start
        try:
            yield Env(venv, package, seconds)
        finally:
            _run([venv / "bin" / "python", "-m", "pip", "uninstall", "-q", "-y", PACKAGE])


# ------------------------------------------------------------------------------ what the page says
def test_installs_quickly_and_is_listed(env: Env) -> None:
    print(f"plugin virtualenv ready in {env.seconds['venv']:.1f} s, example installed in {env.seconds['install']:.1f} s")
    out = env.karpy("providers")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["aws", "kakaocloud", "simulated", "tinycloud"]


def test_validate_accepts_the_nodeclass_and_names_a_bad_field(env: Env) -> None:
    ok = env.karpy("validate", "examples/cluster.yaml")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[0] == "valid: 1 Deployment, 1 NodePool, 1 TinyNodeClass"
    good = (env.package / "examples" / "cluster.yaml").read_text()
    bad = env.package / "bad.yaml"
    bad.write_text(good.replace("  image: img-2026a\n", "  image: ubuntu\n  imageId: img-1\n", 1))
    out = env.karpy("validate", bad)
    assert out.returncode == 2
    problems = [line for line in out.stderr.splitlines() if line.startswith("  - ")]
    assert len(problems) == 2, out.stderr
    assert "TinyNodeClass/default: spec.image: String should match pattern '^img-[a-z0-9]+$'; got 'ubuntu'" in problems[0]
    assert 'TinyNodeClass/default: spec.imageId: unknown field "imageId"' in problems[1]


def _simulate(env: Env, *args: str) -> dict:
    out = env.karpy("simulate", "--cloud-provider", "tinycloud", *args, "-o", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_simulate_binds_the_pods_on_tinycloud_nodes(env: Env) -> None:
    report = _simulate(env, "examples/cluster.yaml")
    assert report["provider"]["name"] == "tinycloud"
    assert report["ignored"] == []  # the TinyNodeClass is stored by the in-memory cluster
    pods = report["pods"]
    assert len(pods) == 6 and all(p["node"] for p in pods), pods
    nodes = report["nodes"]
    # what the page says: two tiny.medium on-demand nodes, 3 pods each, 0.10 USD/hour each
    assert [(n["instance_type"], n["capacity_type"], n["price_per_hour"], len(n["pods"])) for n in nodes] == \
        [("tiny.medium", "on-demand", 0.1, 3)] * 2
    for n in nodes:
        assert n["instance_type"] in CATALOG_TINY and n["zone"] in ("tiny-1a", "tiny-1b")
        assert n["labels"]["tinycloud.example.com/instance-family"] == "tiny"
        assert n["labels"]["karpenter.sh/nodepool"] == "default"
    launches = [e for e in report["events"] if e["kind"] == "launch"]
    assert len(launches) == 2 and all(e["details"]["providerID"].startswith("tinycloud:///tiny-1") for e in launches)


def test_simulate_provider_options_are_typed_by_the_options_model(env: Env) -> None:
    report = _simulate(env, "examples/cluster.yaml", "--provider-option", "zones=tiny-1b", "--provider-option", "max_instances=1")
    assert [(n["instance_type"], n["zone"]) for n in report["nodes"]] == [("tiny.medium", "tiny-1b")]
    pending = [p for p in report["pods"] if not p["node"]]
    assert len(pending) == 3
    assert all("no available offering" in (p["reason"] or "") for p in pending), pending
    bad = env.karpy("simulate", "--cloud-provider", "tinycloud", "--provider-option", "max_instances=many", "examples/cluster.yaml")
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "error: tinycloud provider: invalid option(s): max_instances: Input should be a valid integer, unable to parse string as an integer"]
    unknown = env.karpy("simulate", "--cloud-provider", "tinycloud", "--provider-option", "colour=blue", "examples/cluster.yaml")
    assert unknown.returncode == 2
    assert unknown.stderr.splitlines() == [
        "error: tinycloud provider: unknown option(s) colour; valid: cluster_name, kube, max_instances, spot_discount, zones"]
    missing = env.karpy("simulate", "--cloud-provider", "nimbus", "examples/cluster.yaml")
    assert missing.returncode == 2
    assert missing.stderr.splitlines() == [
        "error: --cloud-provider 'nimbus' is not installed; installed: aws, kakaocloud, simulated, tinycloud"]


def test_simulate_without_the_nodeclass_launches_nothing(env: Env) -> None:
    good = (env.package / "examples" / "cluster.yaml").read_text()
    without = env.package / "no-nodeclass.yaml"
    without.write_text(good.split("---\n", 1)[1])
    report = _simulate(env, str(without))
    assert report["nodes"] == []
    assert all("TinyNodeClass 'default' not found" in (p["reason"] or "") for p in report["pods"]), report["pods"]


def test_the_crd_snippet_renders_the_nodeclass_crd(env: Env) -> None:
    m = _CRD_SNIPPET.search(DOC.read_text())
    assert m is not None, "the CRD snippet is missing from the page"
    out = env.python("-c", m.group(1))
    assert out.returncode == 0, out.stderr
    import yaml

    crd = yaml.safe_load(out.stdout)
    assert m.group(2) == "tinycloud.example.com_tinynodeclasses.yaml"
    assert crd["metadata"]["name"] == "tinynodeclasses.tinycloud.example.com"
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["names"]["kind"] == "TinyNodeClass"
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["image"]["pattern"] == "^img-[a-z0-9]+$" and spec["required"] == ["image"]


def test_the_conformance_kit_and_unit_tests_pass(env: Env) -> None:
    out = env.python("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
    assert out.returncode == 0, out.stdout[-4000:]
    assert re.search(r"^9 passed", out.stdout.splitlines()[-1]), out.stdout[-2000:]


def test_controller_takes_provider_options(env: Env) -> None:
    out = env.karpy("controller", "--cloud-provider", "tinycloud", "--provider-option", "zones")
    assert out.returncode == 2
    assert out.stderr.splitlines() == ["error: --provider-option expects NAME=value, got 'zones'"]
