"""Control characters a user's input carries are printed escaped, never acted on by the terminal
(trial 13: an escape sequence in a manifest's ``kind`` changed the terminal's colour; click strips
it when stderr is not a terminal, so a pipe showed ``Deployment``, a valid kind, in the error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy_core.utils.text import visible
from tests.cli import invoke_cli


@pytest.mark.parametrize(("raw", "shown"), [
    ("Deploy\x1b[31mment", "Deploy\\x1b[31mment"),
    ("a\x07b\rc\x00", "a\\x07b\\x0dc\\x00"),
    ("\x7f\x9b", "\\x7f\\x9b"),
    ("abc\u202edef\u2066", "abc\\u202edef\\u2066"),
    ("tab\tand\nnewline, é, 名前", "tab\tand\nnewline, é, 名前"),
])
def test_visible_escapes_control_characters_only(raw: str, shown: str) -> None:
    assert visible(raw) == shown


def test_an_escape_sequence_in_a_manifest_is_shown_escaped_in_the_error(tmp_path: Path) -> None:
    path = tmp_path / "in.yaml"
    path.write_text('apiVersion: apps/v1\nkind: "Deploy\\x1b[31mment"\nmetadata:\n  name: "a\\x07b"\n')
    for command in ("validate", "simulate"):
        result = invoke_cli(command, str(path))
        assert result.exit_code == 2, result.output
        assert "\x1b" not in result.stderr and "\x07" not in result.stderr
        assert ('kind: no matches for kind "Deploy\\x1b[31mment" in version "apps/v1"' in result.stderr), result.stderr
        assert "Deploy\\x1b[31mment/a\\x07b:" in result.stderr
