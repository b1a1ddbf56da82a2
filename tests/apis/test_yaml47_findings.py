"""Fuzzer findings of trial 8 in the manifest loader (yaml47): merge keys (``<<``) read in go-yaml
v2's order as kubectl reads them, document numbers counted as kubectl's YAMLReader cuts the stream,
an explicit ``!!timestamp`` as go-yaml decodes it, and numbers past 64 bits shown as written."""

from __future__ import annotations

import json

import pytest
import yaml

from karpy_core.apis.loader import load_text
from karpy_core.errors import ManifestError
from karpy_core.utils.kubeyaml import KubeYAMLDumper, WrittenFloat, safe_load


def problems(text: str) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_text(text, "n.yaml")
    return info.value.problems


def _config_map(meta: str, data: str = "{k: v}") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {meta}\ndata: {data}\n"


def _name_and_warnings(text: str) -> tuple[str, list[str]]:
    loaded = load_text(text, "n.yaml")
    (obj,) = loaded.other
    return str(obj.metadata.name), loaded.warnings


# --------------------------------------------------------------------------- 1. merge keys


@pytest.mark.parametrize(("meta", "name"), [
    ("{<<: {name: a}, name: b}", "b"),         # written after '<<': the written key wins (as YAML's rule says)
    ("{<<: [{name: a}, {name: b}]}", "a"),     # a merged list: the earlier item wins (go-yaml merges it backwards)
    ("{<<: {name: a}, <<: {name: b}}", "b"),   # two merge keys: set in order, the later wins
    ("{<<: {<<: {name: a}, name: b}}", "b"),   # a merge inside a merged mapping
])
def test_merge_keys_set_keys_in_go_yaml_order_without_a_warning(meta: str, name: str) -> None:
    assert _name_and_warnings(_config_map(meta)) == (name, [])


def test_a_key_written_before_a_merge_key_takes_the_merged_value_with_a_warning() -> None:
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  <<: &x {name: a}\ndata: {k: v}\n"
    name, warnings = _name_and_warnings(text)
    assert name == "a"  # kubectl's value: go-yaml sets the merged entry after the written one
    assert warnings == [
        "n.yaml doc 1 ConfigMap/a: metadata.name: the merge key '<<' at line 5 sets 'name' again after it is written at "
        "line 4: kubectl keeps the merged value 'a', not 'b' (YAML's merge rule would keep the written one); write '<<' "
        "first to override it"]


def test_merged_container_fields_are_what_kubectl_creates() -> None:
    text = """\
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers:
    - &common {name: c, image: nginx}
    - {<<: *common, name: d, image: busybox}
    - {image: busybox, <<: *common, name: e}
    - <<: [{name: f, image: x}, *common]
"""
    loaded = load_text(text, "m.yaml")
    assert [(c.name, c.image) for c in loaded.pods[0].spec.containers] == [
        ("c", "nginx"), ("d", "busybox"), ("e", "nginx"), ("f", "x")]
    (warning,) = loaded.warnings
    assert "spec.containers[2].image: the merge key '<<' at line 8 sets 'image' again" in warning


def test_a_key_written_twice_is_still_refused_and_a_merge_value_must_be_a_mapping() -> None:
    assert problems(_config_map("{name: a, name: b}")) == [
        "n.yaml doc 1 ConfigMap/b: metadata.name: repeated key 'name' at line 3 (first at line 3); "
        "each key may appear once per mapping"]
    (problem,) = problems(_config_map("{<<: [a], name: b}"))
    assert problem.startswith("n.yaml: line 3 column ") and "map merge requires map or sequence of maps as the value" in problem


# --------------------------------------------------------------------------- 2. document numbers

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}}}\ndata: {{k: {value}}}\n"


@pytest.mark.parametrize("before", [
    "",                                               # no header
    "---\n",                                          # a first separator
    "# a header of comments\n---\n",                  # the first piece only comments (kubectl's YAMLReader cuts it off)
    "\n\n---\n",                                      # the first piece only blank lines
    "# header\n---\n---\n",                           # then an empty document
])
@pytest.mark.parametrize("between", ["---\n", "---\n# only comments\n---\n", "---\n---\n"])
def test_doc_n_is_the_nth_object_whatever_comment_or_empty_pieces_come_first(before: str, between: str) -> None:
    text = before + CM.format(name="a", value="x") + between + CM.format(name="b", value=1)
    assert problems(text) == [
        "n.yaml doc 2 ConfigMap/b: data.k: must be a string; got the number 1 (quote it in YAML so it stays text)"]
    loaded = load_text(text.replace("{k: 1}", "{k: '1'}"), "n.yaml")
    sources = [obj.source for obj in loaded.other]
    assert [(source.index, source.line) for source in sources if source is not None] == [
        (1, before.count("\n") + 1), (2, text.count("\n") - 3)]


def test_a_syntax_error_names_the_line_from_the_start_of_the_file_not_of_the_piece() -> None:
    # kubectl says "yaml: line 4" here (counted from the start of the third piece); karpy counts from the file's
    text = "# header\n---\n" + CM.format(name="a", value="x") + "---\n# only comments\n---\n" \
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n  bad: x\n"
    (problem,) = problems(text)
    assert problem.startswith("n.yaml: line 13 column 3: YAML syntax error: "), problem


# --------------------------------------------------------------------------- 3. !!timestamp


@pytest.mark.parametrize("value", ["2024-01-01", "2024-1-2", "2024-01-01T10:00:00Z", "2024-01-01t1:2:3.5+01:00",
                                   "2024-01-01 10:00:00.123", "'2024-01-01'"])
def test_an_explicit_timestamp_go_yaml_reads_is_the_string_as_written(value: str) -> None:
    loaded = load_text(_config_map("{name: a}", f"{{k: !!timestamp {value}}}"), "n.yaml")
    assert loaded.other[0].model_dump()["data"] == {"k": value.strip("'")}


@pytest.mark.parametrize(("value", "tag"), [
    ("abc", "str"), ("2024-13-01", "str"), ("2024-02-30", "str"), ("2024-01-01T10:00:00", "str"), ("12", "int"),
    ("1.5", "float"), ("true", "bool"), ("~", "null"),
])
def test_an_explicit_timestamp_go_yaml_does_not_read_is_refused_in_its_words(value: str, tag: str) -> None:
    assert problems(_config_map("{name: a}", f"{{k: !!timestamp {value}}}")) == [
        f"n.yaml doc 1 ConfigMap/a: data.k: line 4 column 11: cannot decode !!{tag} `{value}` as a !!timestamp"]


# --------------------------------------------------------------------------- 4. numbers past 64 bits

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: a}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{a: b}}}}
  template:
    metadata: {{labels: {{a: b}}}}
    spec: {{containers: [{{name: c, image: x}}]}}
"""


@pytest.mark.parametrize(("written", "as_float"), [
    ("123456789012345678901234567890", "1.2345678901234568e+29"),
    ("-9223372036854775809", "-9.223372036854776e+18"),
    ("18446744073709551616", "1.8446744073709552e+19"),
    ("1e30", "1e+30"),
])
def test_a_number_past_64_bits_is_refused_showing_the_digits_given(written: str, as_float: str) -> None:
    assert problems(DEPLOYMENT.format(replicas=written)) == [
        f"n.yaml doc 1 Deployment/a: spec.replicas: must be an integer; got the number {written} "
        f"(past 64 bits: kubectl's YAML reader makes it the float {as_float})"]


def test_numbers_past_64_bits_in_other_fields_show_the_digits_given_too() -> None:
    text = _config_map("{name: a}", "{k: -9223372036854775809}") + """\
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: a}
spec:
  weight: 123456789012345678901234567890
  limits: {cpu: 123456789012345678901234567890}
  template: {spec: {nodeClassRef: {group: karpenter.kwok.sh, kind: KWOKNodeClass, name: d}, requirements: []}}
"""
    assert problems(text) == [
        "n.yaml doc 1 ConfigMap/a: data.k: must be a string; got the number -9223372036854775809 (past 64 bits: "
        "kubectl's YAML reader makes it the float -9.223372036854776e+18) (quote it in YAML so it stays text)",
        "n.yaml doc 2 NodePool/a: spec.limits.cpu: must be an integer or a string; got the number "
        "123456789012345678901234567890 (quote it: '123456789012345678901234567890')",
        "n.yaml doc 2 NodePool/a: spec.weight: must be an integer; got the number 123456789012345678901234567890 "
        "(past 64 bits: kubectl's YAML reader makes it the float 1.2345678901234568e+29)",
    ]


@pytest.mark.parametrize(("written", "value"), [
    ("9.2e18", 9200000000000000000),  # Go's JSON writes the float's shortest digits; its exact value is ...488
    ("9223372036854775807", 9223372036854775807),  # int64's largest: an int to go-yaml, exact
    ("3.0", 3),
    ("1e1", 10),
])
def test_a_whole_float_below_2_63_is_the_integer_kubectl_sends(written: str, value: int) -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n" \
        f"spec: {{terminationGracePeriodSeconds: {written}, containers: [{{name: c, image: x}}]}}\n"
    grace = load_text(text, "n.yaml").pods[0].spec.termination_grace_period_seconds
    assert grace == value and type(grace) is int


def test_1e400_overflows_to_a_string_as_go_yaml_reads_it() -> None:
    assert problems(DEPLOYMENT.format(replicas="1e400")) == [
        "n.yaml doc 1 Deployment/a: spec.replicas: must be an integer; got '1e400'"]


@pytest.mark.parametrize(("written", "value"), [("1e20", 1e20), ("1e21", 1e21), ("9223372036854775808.0", 2.0**63),
                                                ("-99999999999999999999", -1e20)])
def test_a_whole_number_of_2_63_or_more_stays_a_float_that_remembers_its_text(written: str, value: float) -> None:
    got = safe_load(f"a: {written}")["a"]
    assert isinstance(got, WrittenFloat) and got == value and str(got) == repr(got) == written
    assert json.dumps({"a": got}) == json.dumps({"a": value})  # JSON carries the float, as kubectl's does
    assert safe_load(yaml.dump({"a": got}, Dumper=KubeYAMLDumper)) == {"a": value}
