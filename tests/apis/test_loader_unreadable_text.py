"""Files without objects and files that are not UTF-8 text are named plainly."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy_core.apis.loader import load_documents
from karpy_core.errors import ManifestError
from karpy_core.sim.scenario import load_scenario


@pytest.mark.parametrize(("text", "why"), [
    ("---\n---\n\n---\n", "only document separators ('---')"),
    ("\ufeff---\n...\n", "only document separators ('---')"),
    ("# a comment\n---\n", "only comments"),
    ("\n  \n", "empty file"),
])
def test_a_file_without_objects_says_why(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    loaded = load_documents([path])
    assert loaded.warnings == [f"{path}: {why}, no objects loaded"]
    assert loaded.objects() == []


def test_a_binary_file_is_not_utf8_text_at_its_first_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "image.yaml"
    path.write_bytes(b"kind: Pod\n\xff\xfe\x00")
    with pytest.raises(ManifestError) as info:
        load_documents([path])
    assert info.value.problems == [f"{path}: line 2 column 1: not UTF-8 text: byte 0xFF (offset 10)"]
    scenario = tmp_path / "s.yaml"
    scenario.write_bytes(b"\x89PNG\r\n")
    with pytest.raises(ManifestError) as info:
        load_scenario(scenario)
    assert info.value.problems == [f"{scenario}: line 1 column 1: not UTF-8 text: byte 0x89 (offset 0)"]
