"""``scripts/test`` runs pip only when pyproject.toml, a plugin's pyproject.toml or the venv's Python
changed (a stamp in .venv), and always without a stamp (a clean clone, as ``.ci/run`` runs it).

The script runs in a copy holding only what its setup reads, with ``.venv/bin/python`` a wrapper
that records pip calls instead of making them and runs everything else with this interpreter (whose
environment has karpy and both plugins installed); ``KARPY_SETUP_ONLY=1`` stops it after the setup."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    for rel in ("scripts/test", "pyproject.toml", "providers/aws/pyproject.toml", "providers/kakaocloud/pyproject.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, tmp_path / rel)
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    wrapper = bin_dir / "python"
    wrapper.write_text(f"""#!/bin/sh
if [ "$1" = "-m" ] && [ "$2" = "pip" ]; then echo "$*" >> "{tmp_path}/pip.log"; exit 0; fi
exec "{sys.executable}" "$@"
""")
    wrapper.chmod(0o755)
    return tmp_path


def _setup(checkout: Path, **env: str) -> list[str]:
    """Run the script's setup; the pip install calls it made."""
    log = checkout / "pip.log"
    log.unlink(missing_ok=True)
    subprocess.run(["bash", str(checkout / "scripts" / "test")], check=True, capture_output=True, text=True, timeout=60,
                   env={**os.environ, "KARPY_SETUP_ONLY": "1", **env})
    return [line for line in log.read_text().splitlines() if " install " in f" {line} "] if log.exists() else []


def test_installs_without_a_stamp_then_skips_until_a_pyproject_changes(checkout: Path) -> None:
    first = _setup(checkout)
    assert any("-e .[dev,aws,kakaocloud,sim] -e ./providers/aws -e ./providers/kakaocloud" in line for line in first), first
    stamp = checkout / ".venv" / ".karpy-install-stamp"
    assert stamp.is_file()
    assert _setup(checkout) == []  # nothing changed: no pip
    with (checkout / "providers" / "kakaocloud" / "pyproject.toml").open("a") as f:
        f.write("\n# a new dependency\n")
    assert len(_setup(checkout)) == 2  # pip upgrade + the install
    assert _setup(checkout) == []
    assert len(_setup(checkout, KARPY_REINSTALL="1")) == 2


def test_a_stale_or_missing_stamp_reinstalls(checkout: Path) -> None:
    _setup(checkout)
    stamp = checkout / ".venv" / ".karpy-install-stamp"
    stamp.write_text("another python or pyproject\n")
    assert len(_setup(checkout)) == 2
    stamp.unlink()
    assert len(_setup(checkout)) == 2
