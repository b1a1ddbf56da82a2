"""Fuzzer findings of trial 7 in the manifest loader (yaml46): objects without a name, a byte-order
mark in a later document, go-yaml v2 scalar resolution, and the server's refusals karpy must share."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from karpy_core.apis.loader import load_text
from karpy_core.apis.registry import kind_registry
from karpy_core.errors import ManifestError
from karpy_core.utils import kubeyaml
from tests.cli import invoke_cli

EC2 = ("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: ''}\n"
       "spec: {role: r, amiSelectorTerms: [{alias: al2023@latest}], subnetSelectorTerms: [{tags: {a: b}}],"
       " securityGroupSelectorTerms: [{tags: {a: b}}]}\n")


def problems(text: str, **kwargs: object) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_text(text, "n.yaml", **kwargs)  # type: ignore[arg-type]
    return info.value.problems


# --------------------------------------------------------------------------- 1. no name


@pytest.mark.parametrize(("text", "label"), [
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {namespace: default}\ndata: {a: b}\n", "ConfigMap/default/<no name>"),
    ("apiVersion: v1\nkind: Secret\nmetadata: {name: ''}\n", "Secret/<no name>"),
    ("apiVersion: example.com/v1\nkind: Widget\nmetadata: {labels: {a: b}}\n", "Widget/<no name>"),
    ("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: ''}\nspec: {template: {spec: {nodeClassRef: "
     "{group: karpenter.kwok.sh, kind: KWOKNodeClass, name: d}, requirements: []}}}\n", "NodePool/<no name>"),
    (EC2, "EC2NodeClass/<no name>"),
])
def test_an_object_without_a_name_or_generate_name_is_refused_for_every_kind(text: str, label: str) -> None:
    """kube-apiserver refuses every kind without a name (``name or generateName is required``),
    modelled, passed through or not modelled."""
    assert problems(text) == [f"n.yaml doc 1 {label}: metadata.name: required field is missing"]


def test_a_nodeclass_whose_plugin_is_missing_still_needs_a_name() -> None:
    """The fuzzer's case: EC2NodeClass with ``name: ''`` and the karpy-aws plugin not installed
    (passed through unvalidated) was 'valid' while simulate failed with the server's 422."""
    registry = {key: cls for key, cls in kind_registry().items() if key[1] != "EC2NodeClass"}
    assert problems(EC2, registry=registry) == ["n.yaml doc 1 EC2NodeClass/<no name>: metadata.name: required field is missing"]


@pytest.mark.parametrize("text", [
    "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: cm-}\ndata: {a: b}\n",
    "apiVersion: v1\nkind: Pod\nmetadata: {generateName: p-}\nspec: {containers: [{name: c, image: pause}]}\n",
])
def test_generate_name_stands_in_for_a_name_as_the_server_allows(text: str) -> None:
    loaded = load_text(text, "n.yaml")
    assert len(loaded.pods) + len(loaded.other) == 1


@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_validate_and_simulate_refuse_a_nameless_object_with_exit_2(command: str, tmp_path: Path) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ''}\ndata: {a: b}\n")
    result = invoke_cli(command, str(path))
    assert result.exit_code == 2, result.output
    assert "ConfigMap/<no name>: metadata.name: required field is missing" in result.output


# --------------------------------------------------------------------------- 2. BOM in a later document


@pytest.mark.parametrize(("text", "expected"), [
    # kubectl-yaml-oracle (apimachinery YAMLReader + sigs.k8s.io/yaml) on the same bytes
    ("# c\n---\n\ufeffapiVersion: v1\nkind: X\n", [{"apiVersion": "v1", "kind": "X"}]),
    ("a: 1\n---  # sep\r\n\ufeffb: 2\r\nc: 3\r\n", [{"a": 1}, {"b": 2, "c": 3}]),
    ("a: 1\n---\nc: \ufeffx\n---\n  \ufeffd: 3\n", [{"a": 1}, {"c": "\ufeffx"}, {"\ufeffd": 3}]),
])
def test_a_bom_starting_a_later_document_is_dropped_as_kubectl_drops_it(text: str, expected: list[object]) -> None:
    assert list(kubeyaml.safe_load_all(text)) == expected


def test_validate_reads_a_multi_document_file_with_a_bom_after_the_separator() -> None:
    loaded = load_text("# spot\n---\n\ufeffapiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
                       "spec: {containers: [{name: c, image: pause}]}\n", "b.yaml")
    assert [pod.name for pod in loaded.pods] == ["p"]


# --------------------------------------------------------------------------- 3, 4. go-yaml v2 scalars

# The plain scalars of the fuzzer's crafted/scalars.yaml and more, with the JSON value kubectl's parser
# gives each (kubectl-yaml-oracle: apimachinery's YAMLReader + sigs.k8s.io/yaml.YAMLToJSON, run on them).
KUBECTL = {
    "y": True, "Y": True, "yes": True, "No": False, "on": True, "OFF": False, "true": True, "True": True, "TRUE": True,
    "tRUE": "tRUE", "~": None, "null": None, "Null": None, "NULL": None, "1": 1, "0x1": 1, "0o1": 1, "01": 1, "08": 8,
    "1_0": 10, "1e1": 10, "1E1": 10, ".5": 0.5, "5.": 5, "2001-12-14": "2001-12-14", "12:30": "12:30",
    "1:20:30": "1:20:30", "0b1": 1, "+1": 1, "-0": 0, "1.0e+3": 1000, "0.": 0, "+.5": 0.5, "n": False, "N": False,
    "0x_1": 1, "1__0": 10, "_1": "_1", "1_": 1, "0b": "0b", "0x": "0x", "1e": "1e", "1.e3": 1000, "-0b11": -3,
    "0B1": 1, "0X1A": 26, "1.5e": "1.5e", "190:20:30.15": "190:20:30.15",
    "2001-12-14t21:59:43.10-05:00": "2001-12-14t21:59:43.10-05:00", "0o": "0o", "0o8": "0o8", "1e+": "1e+",
    "0.0.1": "0.0.1", "1,000": "1,000", "$1": "$1", "-.5": -0.5, "+0x1F": 31, "0x-1": "0x-1", "-0x1": -1,
    "0o17": 15, "0O17": 15, "-0o17": -15, "017": 15, "00": 0, "00x1": "00x1", "=": "=", "+": "+",
    ".5_0": 0.5, ".5e1_0": 5000000000, "._5": "._5", ".5_": ".5_", "1_0.5": 10.5, "1e400": "1e400", "1e-400": 0,
    ".5e999": ".5e999", "0b-1": -1, "0b+1": 1, "-0b-1": "-0b-1", "0B-1": "0B-1", "0x1p3": "0x1p3",
    "9223372036854775808": 9223372036854775808, "18446744073709551615": 18446744073709551615,
    "0b1111111111111111111111111111111111111111111111111111111111111111": 18446744073709551615,
    ".": ".", ".e5": ".e5", "..5": "..5", "1_000e1_0": 10000000000000, "0.000001": 0.000001,
}


@pytest.mark.parametrize("scalar", sorted(KUBECTL))
def test_plain_scalars_resolve_as_kubectl_resolves_them(scalar: str) -> None:
    value = kubeyaml.safe_load(f"v: {scalar}\n")["v"]
    assert value == KUBECTL[scalar] and type(value) is type(KUBECTL[scalar]), (scalar, value)


@pytest.mark.parametrize("scalar", sorted(k for k, v in KUBECTL.items() if isinstance(v, str) or k in ("y", "0o17", "0X1A")))
def test_the_dumper_quotes_what_the_loader_would_not_read_back_as_the_same_string(scalar: str) -> None:
    assert kubeyaml.safe_load(yaml.dump({"v": scalar}, Dumper=kubeyaml.KubeYAMLDumper)) == {"v": scalar}


@pytest.mark.parametrize(("text", "message"), [
    ("v: !!int abc", "cannot decode !!str `abc` as a !!int"),
    ("v: !!bool 1", "cannot decode !!int `1` as a !!bool"),
    ("v: !!float abc", "cannot decode !!str `abc` as a !!float"),
])
def test_an_explicit_tag_its_value_does_not_fit_is_refused_in_go_yamls_words(text: str, message: str) -> None:
    with pytest.raises(kubeyaml.NonJSONValueError, match=re.escape(f"v: {message}")):
        kubeyaml.safe_load(text)


def test_explicit_tags_convert_as_go_yaml_converts() -> None:
    assert kubeyaml.safe_load('a: !!int "0o17"\nb: !!float 0x10\nc: !!str 1\n') == {"a": 15, "b": 16, "c": "1"}


def test_replicas_in_go_integer_forms_are_read_and_a_label_value_0x1a_is_a_number() -> None:
    deployment = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\nspec:\n  replicas: {n}\n"
                  "  selector: {{matchLabels: {{app: x}}}}\n  template:\n    metadata: {{labels: {{app: x}}}}\n"
                  "    spec: {{containers: [{{name: c, image: i, args: [--flag, =]}}]}}\n")
    for written, replicas in (("0o17", 15), ("0X1A", 26), ("0B1", 1)):
        loaded = load_text(deployment.format(n=written), "d.yaml")
        assert [d.spec.replicas for d in loaded.deployments] == [replicas]
        assert loaded.deployments[0].model_dump(by_alias=True)["spec"]["template"]["spec"]["containers"][0]["args"] == ["--flag", "="]
    assert problems("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {a: 0X1A}}\n"
                    "spec: {containers: [{name: c, image: pause}]}\n") == [
        "n.yaml doc 1 Pod/p: metadata.labels.a: must be a string; got the number 26 (quote it in YAML so it stays text)"]


# --------------------------------------------------------------------------- 5. toleration Exists with a value


def test_a_toleration_exists_with_a_value_is_refused_in_the_servers_words() -> None:
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c, image: pause}]\n"
            "  tolerations: [{key: a, operator: Exists, value: b}, {key: c, operator: Exists, value: ''}]\n")
    assert problems(text) == ["n.yaml doc 1 Pod/p: spec.tolerations[0]: operator: Invalid value: \"b\": "
                              "value must be empty when `operator` is 'Exists'"]


# --------------------------------------------------------------------------- 7. directives and a lone '...'

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"


@pytest.mark.parametrize(("text", "problem"), [
    # kubectl-yaml-oracle: doc1 ERR yaml: did not find expected node content
    ("...\n", "n.yaml: line 1 column 1: YAML syntax error: did not find expected node content"),
    ("# c\n...\n", "n.yaml: line 2 column 1: YAML syntax error: did not find expected node content"),
    (CM + "---\n# only\n...\n", "n.yaml: line 6 column 1: YAML syntax error: did not find expected node content"),
    # doc1 ERR yaml: line 1: did not find expected <document start> (the directive is a piece of its own)
    ("%YAML 1.1\n---\n" + CM, "n.yaml: line 1 column 1: YAML syntax error: did not find expected <document start>"),
    ("%TAG ! tag:x,2000:\n---\n" + CM, "n.yaml: line 1 column 1: YAML syntax error: did not find expected <document start>"),
    (CM + "---\n%YAML 1.1\n---\n" + CM, "n.yaml: line 5 column 1: YAML syntax error: did not find expected <document start>"),
])
def test_a_lone_document_end_or_directive_is_refused_as_kubectl_refuses_it(text: str, problem: str) -> None:
    assert problems(text) == [f"{problem} (documents after it were not read)"]


@pytest.mark.parametrize("text", [
    "---\n...\n---\n" + CM,  # the '---' opens the piece: an empty document (null), then the ConfigMap
    CM + "...\n",
    CM + "---\n" + CM.replace("name: a", "name: b") + "...\n",
])
def test_a_document_end_kubectl_reads_is_read(text: str) -> None:
    assert {o.name for o in load_text(text, "n.yaml").other} >= {"a"}

