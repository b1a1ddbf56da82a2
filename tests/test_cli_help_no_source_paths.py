"""``karpy COMMAND -h`` is for users: it names no source file of karpy's."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app

COMMANDS = ["simulate", "validate", "budgets", "controller", "install-crds", "providers"]


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_names_no_source_path(command: str | None) -> None:
    result = CliRunner().invoke(app, [*([command] if command else []), "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert not re.search(r"karpy_core[/.]|\w+\.py\b", result.output), result.output
