"""The README's first command on a machine where only ``pip install -e '.[sim]'`` ran: neither
cloud plugin distribution (karpy-aws, karpy-kakaocloud) is installed, so their ``karpy.apis`` and
``karpy.cloudprovider`` entry points are absent (fresh-user trial 45: a check for NodeClass kinds
without a model refused the simulated provider there, and every ``karpy simulate`` exited 1,
while CI, which installs both plugins, passed). The test hides the two distributions' entry
points in a child process, as an install without them has none."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

SIM_ONLY = """
import importlib.metadata as md, sys
real = md.entry_points
PLUGINS = {"karpy-aws", "karpy-kakaocloud", "karpy_aws", "karpy_kakaocloud"}
def without_plugins(**kw):
    found = real(**kw)
    if kw.get("group") in ("karpy.apis", "karpy.cloudprovider"):
        return [ep for ep in found if ep.dist is None or ep.dist.name not in PLUGINS]
    return found
md.entry_points = without_plugins
from karpy_core.cli import main
sys.argv = ["karpy", *sys.argv[1:]]
main()
"""


def _karpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SIM_ONLY, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)


def test_the_plugins_are_hidden() -> None:
    """The emulation works: ``karpy providers`` lists neither cloud plugin."""
    done = _karpy("providers")
    assert done.returncode == 0, done.stderr
    assert "simulated" in done.stdout
    assert "kakaocloud" not in done.stdout and "aws " not in done.stdout


def test_the_readme_first_command_runs_without_the_cloud_plugins() -> None:
    """``karpy simulate`` on its embedded default: exit 0, the README's totals, and the warning
    that the EC2NodeClass is read unvalidated."""
    done = _karpy("simulate")
    assert done.returncode == 0, done.stderr
    assert "total: 2 nodes (2 launched by karpy), 0.9180 USD/hour" in done.stdout
    assert "karpy's plan is optimal" in done.stdout
    assert "pods: 32 bound, 0 pending" in done.stdout
    assert "EC2NodeClass/default: not validated: its plugin, karpy-aws" in done.stdout + done.stderr


def test_validate_with_the_simulated_provider_runs_without_the_cloud_plugins() -> None:
    """``karpy validate --cloud-provider simulated`` on an example NodePool: exit 0."""
    done = _karpy("validate", "--cloud-provider", "simulated", "examples/nodepools/general-purpose.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("valid")
