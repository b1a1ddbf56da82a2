"""Directories are read as ``kubectl apply -f DIR`` reads them (``*.json``, ``*.yaml``, ``*.yml``,
case-sensitive), JSON manifests included; the files skipped are named on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from karpy_core.apis.loader import load_documents
from karpy_core.cli import app
from karpy_core.errors import ManifestError

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}]}}


def _pod(name: str) -> dict[str, object]:
    return {**POD, "metadata": {"name": name}}


def test_a_directory_reads_json_objects_and_lists_tab_indented(tmp_path: Path) -> None:
    (tmp_path / "one.json").write_text(json.dumps(_pod("one"), indent="\t"))
    (tmp_path / "list.json").write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [_pod("a"), _pod("b")]}))
    (tmp_path / "stream.json").write_text(json.dumps(_pod("s1")) + "\n" + json.dumps(_pod("s2")))
    loaded = load_documents([tmp_path])
    assert sorted(p.name for p in loaded.pods) == ["a", "b", "one", "s1", "s2"]
    assert loaded.skipped == []
    s2 = next(p for p in loaded.pods if p.name == "s2")
    assert s2.source is not None
    assert (Path(s2.source.file).name, s2.source.index, s2.source.line) == ("stream.json", 2, 2)


def test_upper_case_extensions_and_other_files_are_skipped_and_named(tmp_path: Path) -> None:
    text = json.dumps(_pod("x"))
    for name in ("UP.YAML", "Up.Yml", "README.md", "b.JSON"):
        (tmp_path / name).write_text(text)
    (tmp_path / "ok.yml").write_text(json.dumps(_pod("ok")))
    (tmp_path / "sub").mkdir()
    loaded = load_documents([tmp_path])
    assert [p.name for p in loaded.pods] == ["ok"]
    assert loaded.skipped == [
        f"{tmp_path}: skipped 4 files (not named *.json, *.yaml or *.yml, the files kubectl apply -f reads from a "
        "directory; the extension is case-sensitive, as kubectl's (UP.YAML)): README.md, UP.YAML, Up.Yml, b.JSON"
    ]
    # a file named on the command line is read whatever its name, as kubectl -f FILE reads it
    assert [p.name for p in load_documents([tmp_path / "UP.YAML"]).pods] == ["x"]
    assert load_documents([tmp_path / "UP.YAML"]).skipped == []


def test_json_errors_name_file_line_and_repeated_keys(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"apiVersion": "v1", "kind": "Pod",\n "metadata": {"name": "p", "name": "q"},\n'
                   ' "spec": {"containers": [{"name": "c", "image": "x"}]}}\n{"kind": \n')
    with pytest.raises(ManifestError) as info:
        load_documents([bad])
    assert info.value.problems == [
        f"{bad}: line 5 column 1: JSON syntax error: Expecting value (objects after it were not read)",
        f"{bad} doc 1 Pod/q: metadata.name: repeated key 'name'; each key may appear once per object",
    ]
    nan = tmp_path / "nan.json"
    nan.write_text('{"apiVersion": "v1", "kind": "Pod", "x": NaN}')
    with pytest.raises(ManifestError, match="JSON syntax error: NaN is not a JSON value"):
        load_documents([nan])


def test_yaml_that_starts_with_a_brace_is_still_yaml(tmp_path: Path) -> None:
    flow = tmp_path / "flow.yaml"
    flow.write_text("{apiVersion: v1, kind: Pod, metadata: {name: f},\n spec: {containers: [{name: c, image: x}]}}\n")
    assert [p.name for p in load_documents([flow]).pods] == ["f"]
    # named .json, it must be JSON
    as_json = tmp_path / "flow.json"
    as_json.write_text(flow.read_text())
    with pytest.raises(ManifestError, match=r"flow.json: line 1 column 2: JSON syntax error: Expecting property name"):
        load_documents([as_json])


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_cli_says_on_stderr_which_files_were_skipped(tmp_path: Path, command: str, examples_dir: Path) -> None:
    (tmp_path / "pool.yaml").write_text((examples_dir / "nodepools/general-purpose.yaml").read_text())
    (tmp_path / "pod.json").write_text(json.dumps(POD))
    (tmp_path / "notes.txt").write_text("not a manifest")
    result = CliRunner().invoke(app, [command, str(tmp_path), "--set", "CLUSTER_NAME=demo"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [f"karpy: {tmp_path}: skipped 1 file (not named *.json, *.yaml or *.yml, "
                                          "the files kubectl apply -f reads from a directory): notes.txt"]
    assert "notes.txt" not in result.stdout
    if command == "validate":
        assert result.stdout.startswith("valid: 1 EC2NodeClass, 1 NodePool, 1 Pod")
    else:
        assert "pods: 1 bound, 0 pending" in result.stdout
