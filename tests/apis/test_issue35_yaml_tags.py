"""Issue 35 leftovers (fix35): YAML tags on scalars and on a document's ``---`` line, read or refused
as kubectl reads them (apimachinery's YAMLReader + sigs.k8s.io/yaml, go-yaml v2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from karpy_core.apis.loader import load_text
from karpy_core.errors import ManifestError
from karpy_core.utils import kubeyaml
from tests.cli import invoke_cli
from tests.test_input_classes import _write

# --------------------------------------------------------------------------- 3. YAML tags as kubectl reads them

# kubectl's reader (apimachinery's YAMLReader + sigs.k8s.io/yaml.YAMLToJSON, v0.36.3 / v1.6.0, a Go
# program run on these bytes): a tag go-yaml v2 does not resolve leaves the scalar's text, !!binary
# is decoded (a byte that is not UTF-8 is U+FFFD in the JSON)
KUBECTL_READS = {
    "x: !!set abc\n": {"x": "abc"},
    "x: !!binary aGVsbG8=\n": {"x": "hello"},
    "y: !!binary aGVsbG8=\n": {"true": "hello"},
    "z: !foo bar\n": {"z": "bar"},
    "z: !foo 12\n": {"z": "12"},
    "z: !foo yes\n": {"z": "yes"},
    "z: !foo ~\n": {"z": "~"},
    "z: !foo\n": {"z": ""},
    "z: !!omap abc\n": {"z": "abc"},
    "z: !!pairs abc\n": {"z": "abc"},
    "z: !!map abc\n": {"z": "abc"},
    "z: !!seq abc\n": {"z": "abc"},
    "z: !!python/name:os.system abc\n": {"z": "abc"},
    "z: !<tag:example.com,2000:x> abc\n": {"z": "abc"},
    "z: !!binary |\n  aGVs\n  bG8=\n": {"z": "hello"},
    "z: !!binary \"\"\n": {"z": ""},
    "z: !!binary \"////\"\n": {"z": "\ufffd\ufffd\ufffd"},
    "z: !!binary \"4pyT\"\n": {"z": "\u2713"},
    "z: !!binary \"4pw=\"\n": {"z": "\ufffd\ufffd"},
    "z: !!binary \"7aCA\"\n": {"z": "\ufffd\ufffd\ufffd"},
    "z: !!binary \"AA==\"\n": {"z": "\x00"},
    "z: [!!set a, !foo b, !!binary aGk=]\n": {"z": ["a", "b", "hi"]},
    "!foo k: 1\n": {"k": 1},
    "!!binary aGk=: 1\n": {"hi": 1},
    "!foo\na: 1\n": {"a": 1},
}
KUBECTL_REFUSES = {
    "z: !!binary \"aGVsbG8\"\n": "z: !!binary value contains invalid base64 data",
    "z: !!binary 12\n": "z: !!binary value contains invalid base64 data",
    "z: !!binary \"aGk=aGk=\"\n": "z: !!binary value contains invalid base64 data",
    "z: !!binary \"a Gk=\"\n": "z: !!binary value contains invalid base64 data",
    "z: !!null abc\n": "z: cannot decode !!str `abc` as a !!null",
}


@pytest.mark.parametrize("text", sorted(KUBECTL_READS))
def test_a_tagged_scalar_reads_as_kubectl_reads_it(text: str) -> None:
    assert kubeyaml.safe_load(text) == KUBECTL_READS[text]


@pytest.mark.parametrize("text", sorted(KUBECTL_REFUSES))
def test_a_tagged_scalar_kubectl_refuses_is_refused(text: str) -> None:
    with pytest.raises(kubeyaml.NonJSONValueError) as info:
        kubeyaml.safe_load(text)
    assert info.value.problem == KUBECTL_REFUSES[text]


@pytest.mark.parametrize(("text", "line", "after"), [
    ("--- !!set\na: 1\n", 1, "!!set"),
    ("--- !foo\na: 1\n", 1, "!foo"),
    ("--- !!binary aGVsbG8=\n", 1, "!!binary aGVsbG8="),
    ("---\t!foo\na: 1\n", 1, "!foo"),
    ("--- {a: 1}\n", 1, "{a: 1}"),
    ("a: 1\n--- !foo\nb: 2\n", 2, "!foo"),
    ("# c\n--- # x\n--- !x\n", 3, "!x"),
])
def test_a_tag_on_the_document_separator_is_refused_as_kubectl_refuses_it(text: str, line: int, after: str) -> None:
    """kubectl's YAMLReader allows only spaces or a comment after ``---``: ``invalid Yaml document
    separator: !!set``, for the whole file."""
    with pytest.raises(ManifestError) as info:
        load_text(text, "in.yaml")
    assert info.value.problems == [f"in.yaml: line {line} column 1: YAML syntax error: invalid Yaml document separator: "
                                   f"{after} (documents after it were not read)"]


def test_validate_reads_tagged_scalars_in_a_configmap(tmp_path: Path) -> None:
    path = _write(tmp_path, "cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
                                       "data: {x: !!set abc, b: !!binary aGVsbG8=, c: !foo 12}\n")
    result = invoke_cli("validate", path)
    assert result.exit_code == 0, result.output
    loaded = load_text(Path(path).read_text(), path)
    (cm,) = [o for o in loaded.other if o.kind == "ConfigMap"]
    assert cm.model_dump()["data"] == {"x": "abc", "b": "hello", "c": "12"}
