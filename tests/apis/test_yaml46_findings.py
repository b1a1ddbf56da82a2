"""Fuzzer findings of trial 7 in the manifest loader (yaml46): objects without a name, a byte-order
mark in a later document, go-yaml v2 scalar resolution, and the server's refusals karpy must share."""

from __future__ import annotations

from pathlib import Path

import pytest

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
