"""The example provider of docs/cloudprovider.md (tinycloud), extracted from the page and installed
into an isolated virtualenv that has karpy installed from this checkout (no system site packages).

The page marks each file of the example package with a line `` `karpy-tinycloud/<path>`: ``
followed by a fenced block. The virtualenv (karpy editable from this checkout, pytest,
pytest-asyncio, setuptools) is built once per checkout path, ``pyproject.toml`` and Python version,
under ``~/.cache/karpy/plugin-venvs`` (``KARPY_PLUGIN_VENV_CACHE`` to move it): the first build
downloads from PyPI (or the pip cache) and takes 25-50 s; later uses only install the example
package, offline (a second or two).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "cloudprovider.md"
PACKAGE = "karpy-tinycloud"
_FILE_BLOCK = re.compile(r"^`karpy-tinycloud/([^`]+)`:\n\n```[a-z]*\n(.*?)\n```$", re.M | re.S)
CRD_SNIPPET = re.compile(r"^python -c '(.*?)' > (\S+)$", re.M | re.S)
PIP_TIMEOUT = 600  # hang guard only


def doc_files() -> dict[str, str]:
    """Relative path -> content of every marked example file in the page."""
    found: dict[str, str] = {}
    for m in _FILE_BLOCK.finditer(DOC.read_text()):
        assert m.group(1) not in found, f"{m.group(1)} appears twice in {DOC.name}"
        found[m.group(1)] = m.group(2) + "\n"
    return found


# ------------------------------------------------------------------------------ the virtualenv
def _venv_key() -> str:
    versions = [importlib.metadata.version(d) for d in ("pytest", "pytest-asyncio")]
    pyprojects = [(ROOT / rel / "pyproject.toml").read_text() for rel in (".", "providers/aws", "providers/kakaocloud")]
    text = "\n".join([str(ROOT), *pyprojects, sys.version, *versions])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _run(cmd: list[str | Path], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=PIP_TIMEOUT, **kw)  # type: ignore[call-overload]


def _build_venv(target: Path) -> None:
    """A fresh virtualenv at ``target`` with karpy and its two cloud plugins (editable, this
    checkout, one pip call as CONTRIBUTING.md's) and the test tools;
    built in place (scripts name their interpreter by absolute path), marked complete last."""
    shutil.rmtree(target, ignore_errors=True)
    created = _run([sys.executable, "-m", "venv", target])
    assert created.returncode == 0, created.stderr
    pins = [f"pytest=={importlib.metadata.version('pytest')}", f"pytest-asyncio=={importlib.metadata.version('pytest-asyncio')}"]
    pip = _run([target / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                "-e", ROOT, "-e", ROOT / "providers" / "aws", "-e", ROOT / "providers" / "kakaocloud", "setuptools>=77", *pins])
    assert pip.returncode == 0, f"could not build the plugin test virtualenv:\n{pip.stdout[-2000:]}\n{pip.stderr[-4000:]}"
    (target / "karpy-plugin-venv.ok").write_text(str(ROOT) + "\n")
    _prune_older(target)


def _prune_older(keep: Path) -> None:
    """Delete this checkout's other virtualenvs in the cache (an older ``pyproject.toml``, ~200 MB
    each) that no test run holds the lock of."""
    for marker in keep.parent.glob("*/karpy-plugin-venv.ok"):
        old = marker.parent
        if old == keep or marker.read_text().strip() != str(ROOT):
            continue
        with open(old.with_name(f"{old.name}.lock"), "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            shutil.rmtree(old, ignore_errors=True)


@dataclass
class Env:
    venv: Path
    package: Path
    seconds: dict[str, float]

    def karpy(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run([self.venv / "bin" / "karpy", *args], cwd=self.package)

    def python(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        return _run([self.venv / "bin" / "python", *args], cwd=self.package)


@contextlib.contextmanager
def installed_doc_plugin(workdir: Path) -> Iterator[Env]:
    """The page's example package written under ``workdir`` and installed into the cached
    virtualenv (built first when missing), uninstalled on exit; the virtualenv is locked meanwhile."""
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
        package = workdir / PACKAGE
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
