"""What a fresh plugin author's mistakes tell the user of ``karpy simulate`` and ``karpy validate
--cloud-provider`` (fresh-user trial 7, the ``acme`` plugin): one line naming the plugin, the hook
and the mistake, never a traceback, never a silent hang or a wrong total."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from karpy_core.cloudprovider.calls import check_instance_types, instance_type_problem
from karpy_core.cloudprovider.options import ProviderOptions
from karpy_core.errors import ConfigurationError, PluginHookError
from tests.cli import invoke_cli
from tests.plugins import mistakeplugin

ROOT = Path(__file__).resolve().parents[2]
FILES = (str(ROOT / "examples/nodepools/general-purpose.yaml"), str(ROOT / "examples/workloads/inflate.yaml"))


@pytest.fixture(autouse=True)
def mistake(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    mistakeplugin.register(monkeypatch)
    monkeypatch.chdir(tmp_path)


def _run(command: str, mistake: str, *args: str, provider: str = mistakeplugin.NAME) -> tuple[int, str, str]:
    paths = FILES if command == "simulate" else FILES[:1]
    result = invoke_cli(command, "--cloud-provider", provider, "--provider-option", f"mistake={mistake}", *paths, *args)
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("command", ["simulate", "validate"])
def test_a_hookimpl_with_a_wrong_argument_name_is_one_line_naming_plugin_hook_and_argument(command: str) -> None:
    code, _, err = _run(command, "wrong_arg")
    assert code == 2
    assert err.strip().splitlines() == [
        "error: cloud provider plugin 'mistake': hook karpy_create declares argument(s) claim that its hookspec "
        "does not take; karpy_create takes (nodeclaim)"]
