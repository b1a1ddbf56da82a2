"""A kubeconfig that is not valid YAML (fresh-user trial 4, issue 35): every command reading one
says which file and where in it (line, column), in one ``error:`` line, exit 2 (bad input); it
said ``in "<unicode string>", line 1, column 7`` (PyYAML's name for a string) twice before."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from karpy_core.errors import ConfigurationError
from karpy_core.kube.client import AsyncKubeClient

COMMANDS = [["install-crds"], ["controller", "--cloud-provider", "simulated"], ["simulate", "--from-cluster"]]
CASES = [
    ("this: [is not\n", "line 2 column 1: while parsing a flow sequence, did not find expected ',' or ']'"),
    ("a: 1\n  b: [\n", "line 2 column 4: mapping values are not allowed in this context"),
    ("apiVersion: v1\nclusters: .inf\n", "line 2 column 11: clusters: '.inf' is not a JSON number"),
    ("x: [\n\x01", "line 2 column 1: unacceptable character #x0001: control characters are not allowed"),
]


@pytest.mark.parametrize(("text", "where"), CASES)
async def test_the_error_names_the_file_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "bad.kc"
    path.write_text(text)
    with pytest.raises(ConfigurationError) as info:
        await AsyncKubeClient.from_config(str(path))
    message = str(info.value)
    assert message.startswith(f"cannot use {path}: not valid kubeconfig YAML: {where}"), message
    assert "<unicode string>" not in message and "\n" not in message


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_exits_2_with_one_line(tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "bad.kc"
    path.write_text(CASES[0][0])
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    proc = subprocess.run([sys.executable, "-c", "from karpy_core.cli import main; main()", *command, "--kubeconfig", str(path)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"error: cannot use {path}: not valid kubeconfig YAML: {CASES[0][1]}"]


@pytest.mark.parametrize(("value", "kind"), [("5", "int"), ("[a]", "list"), ("{a: 1}", "dict")])
async def test_a_server_that_is_not_a_string_is_named(tmp_path: Path, value: str, kind: str) -> None:
    """Trial 5: ``server: 5`` ended in an AttributeError traceback; client-go refuses a non-string
    field when it decodes a kubeconfig, and so does karpy, naming the field."""
    path = tmp_path / "kc.yaml"
    path.write_text(f"apiVersion: v1\nclusters: [{{name: c, cluster: {{server: {value}}}}}]\n"
                    "contexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n")
    with pytest.raises(ConfigurationError) as info:
        await AsyncKubeClient.from_config(str(path))
    assert str(info.value) == f"cannot use {path}: Invalid kube-config file. clusters[c].cluster.server must be a string; got {kind}"
