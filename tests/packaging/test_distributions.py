"""karpy and its two cloud plugins are three distributions, and a plugin installed on top of karpy works.

What is proven here, offline (``pip wheel``/``pip install`` with ``--no-build-isolation``, the
virtualenv's own setuptools, nothing downloaded):

* the wheels built from ``providers/aws`` and ``providers/kakaocloud`` are ``karpy-aws`` and
  ``karpy-kakaocloud``, at karpy's version, requiring ``karpy==<that version>`` and their SDK
  (``aioboto3>=15``, ``httpx>=0.27``), carrying the ``karpy.cloudprovider`` and ``karpy.apis``
  entry points named after the cloud, ``py.typed``, and only their own package;
* karpy's wheel holds ``karpy_core`` only, with the ``simulated``/``core`` entry points, and its
  ``aws``/``kakaocloud`` extras are exactly the plugins at the same version (``pip install
  'karpy[aws]'`` pulls ``karpy-aws``);
* ``pip install ./providers/aws`` (a regular, non-editable install, dependencies resolved by pip)
  into an environment that has karpy and aioboto3 but neither plugin: ``karpy providers`` then
  lists ``aws`` and ``simulated`` only, the installed copy (not the checkout) is what the entry
  points load, the AWS provider is created by karpy's loader and passes its option parsing, the
  kind registry knows ``EC2NodeClass``, and karpy's CRD generator renders the plugin's
  EC2NodeClass CRD byte for byte as committed in ``crds/`` (and no KCNodeClass).

That environment is a virtualenv without pip whose ``.pth`` adds this virtualenv's site-packages
minus both plugins (their dist-info and editable hooks), so karpy's dependencies need no network.
"""

from __future__ import annotations

import email.parser
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PIP_TIMEOUT = 300


def _version() -> str:
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def _pip(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *map(str, args)],
                          capture_output=True, text=True, timeout=PIP_TIMEOUT)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three wheels built from this checkout: {distribution name: wheel path}."""
    out = tmp_path_factory.mktemp("wheels")
    # built from a copy of the sources alone: setuptools would pack what an earlier build of this
    # checkout left in build/lib (hack/image.py's stage_sources does the same for the images)
    src = tmp_path_factory.mktemp("src")
    leftovers = shutil.ignore_patterns("build", "*.egg-info", "__pycache__", "*.pyc")
    for rel in ("pyproject.toml", "README.md", "karpy_core", "providers/aws", "providers/kakaocloud"):
        if (REPO / rel).is_dir():
            shutil.copytree(REPO / rel, src / rel, ignore=leftovers)
        else:
            shutil.copy2(REPO / rel, src / rel)
    built = _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--wheel-dir", out,
                 src, src / "providers" / "aws", src / "providers" / "kakaocloud")
    assert built.returncode == 0, built.stderr[-4000:]
    found = {p.name.split("-")[0].replace("_", "-"): p for p in out.glob("*.whl")}
    assert set(found) == {"karpy", "karpy-aws", "karpy-kakaocloud"}, found
    return found


def _metadata(wheel: Path) -> tuple[email.message.Message, str, list[str]]:
    """(METADATA headers, entry_points.txt, file names) of a wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        eps = zf.read(f"{info}/entry_points.txt").decode() if f"{info}/entry_points.txt" in names else ""
    return meta, eps, names


def _entry_points(text: str) -> dict[str, dict[str, str]]:
    groups: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            current = groups.setdefault(line.strip("[]"), {})
        elif "=" in line:
            name, _, value = line.partition("=")
            current[name.strip()] = value.strip()
    return groups


@pytest.mark.parametrize(("cloud", "sdk", "other"), [("aws", "aioboto3>=15", "kakaocloud"), ("kakaocloud", "httpx>=0.27", "aws")])
def test_plugin_wheel_requires_karpy_and_its_sdk_and_carries_its_entry_points(wheels: dict[str, Path], cloud: str, sdk: str,
                                                                              other: str) -> None:
    meta, eps, names = _metadata(wheels[f"karpy-{cloud}"])
    assert meta["Name"] == f"karpy-{cloud}" and meta["Version"] == _version()
    assert sorted(meta.get_all("Requires-Dist") or []) == sorted([f"karpy=={_version()}", sdk])
    assert _entry_points(eps) == {
        "karpy.cloudprovider": {cloud: f"karpy_{cloud}.plugin:create_plugin"},
        "karpy.apis": {cloud: f"karpy_{cloud}.apis:api_kinds"},
    }
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {f"karpy_{cloud}"}, "the plugin wheel holds its own package only"
    for module in ("py.typed", "plugin.py", "apis.py", "crd.py"):
        assert f"karpy_{cloud}/{module}" in names
    assert not [n for n in names if n.startswith(("karpy_core/", f"karpy_{other}/"))]


def test_karpy_wheel_holds_core_only_and_its_cloud_extras_are_the_plugins(wheels: dict[str, Path]) -> None:
    meta, eps, names = _metadata(wheels["karpy"])
    version = _version()
    assert meta["Name"] == "karpy" and meta["Version"] == version
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"karpy_core"}
    assert "karpy_core/py.typed" in names and "karpy_core/data/aws-instance-types.json" in names
    groups = _entry_points(eps)
    assert groups["karpy.cloudprovider"] == {"simulated": "karpy_core.cloudprovider.simulated:create_plugin"}
    assert groups["karpy.apis"] == {"core": "karpy_core.apis.registry:core_kinds"}
    requires = meta.get_all("Requires-Dist") or []
    for extra in ("aws", "kakaocloud"):
        assert [r for r in requires if f'extra == "{extra}"' in r] == [f'karpy-{extra}=={version}; extra == "{extra}"']
    assert not [r for r in requires if r.startswith(("aioboto3", "httpx"))], "the SDKs come with the plugins"


def test_plugin_versions_follow_karpy() -> None:
    version = _version()
    for cloud in ("aws", "kakaocloud"):
        project = tomllib.loads((REPO / "providers" / cloud / "pyproject.toml").read_text())["project"]
        assert project["version"] == version
        assert f"karpy=={version}" in project["dependencies"]
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["aws"] == [f"karpy-aws=={version}"] and extras["kakaocloud"] == [f"karpy-kakaocloud=={version}"]


def _env_without_plugins(root: Path) -> Path:
    """A pip-less virtualenv seeing this virtualenv's packages except karpy-aws and
    karpy-kakaocloud; returns its interpreter."""
    venv = root / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    shadow = root / "karpy-without-plugins"
    shadow.mkdir()
    ours = Path(sysconfig.get_paths()["purelib"])
    for entry in ours.iterdir():
        if "karpy_aws" in entry.name or "karpy_kakaocloud" in entry.name:
            continue  # the plugins' dist-info, editable .pth and finder
        os.symlink(entry, shadow / entry.name)
    (site / "karpy-dev.pth").write_text(f"import site; site.addsitedir({str(shadow)!r})\n")
    return python


def test_pip_install_providers_aws_on_top_of_karpy_gives_a_working_provider(tmp_path: Path) -> None:
    python = _env_without_plugins(tmp_path)
    script = tmp_path / "probe.py"
    script.write_text(
        "import sys, importlib.util\n"
        "from importlib.metadata import entry_points\n"
        "print(sorted(ep.name for ep in entry_points(group='karpy.cloudprovider')))\n"
        "print(importlib.util.find_spec('karpy_aws') is not None)\n"
    )
    before = subprocess.run([python, script], capture_output=True, text=True, timeout=120)
    assert before.returncode == 0, before.stderr
    assert before.stdout.split("\n")[:2] == ["['simulated']", "False"], "the environment starts without the plugin"

    # pip runs inside that environment (--python): karpy and aioboto3 are found installed, so
    # resolving karpy-aws's dependencies downloads nothing (--no-index would fail otherwise)
    installed = _pip("--python", python, "install", "--quiet", "--no-build-isolation", "--no-index", REPO / "providers" / "aws")
    assert installed.returncode == 0, installed.stderr[-4000:]

    providers = subprocess.run([python, "-m", "karpy_core.cli", "providers"], capture_output=True, text=True, timeout=120)
    assert providers.returncode == 0, providers.stderr
    assert providers.stdout.split() == ["aws", "simulated"]

    probe = tmp_path / "works.py"
    probe.write_text(
        "import sys, asyncio\n"
        "from pathlib import Path\n"
        "import karpy_aws\n"
        "from karpy_core.apis import crds, registry\n"
        "from karpy_core.cloudprovider.provider import load_provider\n"
        "print(karpy_aws.__file__)\n"
        "provider = load_provider('aws', {'region': 'us-east-1', 'cluster_name': 'c', 'interruption_queue': ''})\n"
        "print(type(provider).__name__)\n"
        "kinds = registry.kind_registry()\n"
        "print(kinds[('karpenter.k8s.aws/v1', 'EC2NodeClass')].__module__)\n"
        "print(('karpenter.kakaocloud.com/v1alpha1', 'KCNodeClass') in kinds)\n"
        "files = crds.generate()\n"
        "print(sorted(files))\n"
        "name = 'karpenter.k8s.aws_ec2nodeclasses.yaml'\n"
        "print(crds.render(files[name]) == (Path(sys.argv[1]) / 'crds' / name).read_text(encoding='utf-8'))\n"
    )
    out = subprocess.run([python, probe, REPO], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-4000:]
    lines = out.stdout.splitlines()
    site = Path(subprocess.check_output([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    assert Path(lines[0]) == site / "karpy_aws" / "__init__.py", "the installed copy is loaded, not the checkout"
    assert lines[1] == "CloudProvider"
    assert lines[2] == "karpy_aws.apis"
    assert lines[3] == "False"
    assert "karpenter.k8s.aws_ec2nodeclasses.yaml" in lines[4] and "kcnodeclasses" not in lines[4]
    assert lines[5] == "True", "the installed plugin's EC2NodeClass CRD is the committed one"
