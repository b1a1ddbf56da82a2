"""The loader findings of val48 (issue 35), in the loader's exact words; their parity with the real
kube-apiserver and kubectl's YAML reading is in tests/integration/test_val48_apiserver.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import load_text
from karpy_core.errors import ManifestError
from karpy_core.utils.kubeyaml import KubeYAMLDumper
from tests.cli import invoke_cli


def problems(obj: dict) -> list[str]:
    try:
        load_text(yaml.dump(obj, Dumper=KubeYAMLDumper), "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return []


def job(labels: dict[str, str] | None = None, **spec: object) -> dict:
    template: dict = {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "pause"}]}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "w", "namespace": "default"},
            "spec": {"template": template, **spec}}


HEAD = "in.yaml doc 1 Job/default/w: "
NOT_GENERATED = ("spec.selector: Invalid value: the selector (with the generated batch.kubernetes.io/controller-uid): "
                 "`selector` not auto-generated (set spec.manualSelector: true to give a selector)")


@pytest.mark.parametrize(("obj", "expected"), [
    (job(), []),
    (job(selector={}), []),
    (job({"app": "w"}, selector={"matchLabels": {"app": "w"}}), [HEAD + NOT_GENERATED]),
    (job({"app": "w"}, selector={"matchLabels": {"app": "w"}}, manualSelector=False), [HEAD + NOT_GENERATED]),
    (job({"app": "w"}, selector={"matchLabels": {"app": "w"}}, manualSelector=True), []),
    (job({"app": "x"}, selector={"matchLabels": {"app": "w"}}, manualSelector=True),
     [HEAD + "spec.template.metadata.labels: Invalid value: map[app:x]: `selector` does not match template `labels`"]),
    (job(manualSelector=True), [HEAD + "spec.selector: Required value"]),
    (job({"job-name": "other"}),
     [HEAD + "spec.template.metadata.labels[job-name]: Invalid value: map[batch.kubernetes.io/job-name:w job-name:other]: "
      "must be 'w'"]),
])
def test_job_selectors_are_checked_as_the_api_server_checks_them(obj: dict, expected: list[str]) -> None:
    assert problems(obj) == expected


CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}}


@pytest.mark.parametrize(("obj", "expected"), [
    (CONFIG_MAP | {"data": {"a": {"b": "c"}}}, ["in.yaml doc 1 ConfigMap/default/c: data.a: must be a string; got a mapping"]),
    (SERVICE | {"spec": {"ports": [{"port": 1.5}]}},
     ["in.yaml doc 1 Service/default/s: spec.ports[0].port: must be an integer; got the number 1.5"]),
    (SERVICE | {"spec": {"ports": [{"port": "80"}]}}, ["in.yaml doc 1 Service/default/s: spec.ports[0].port: must be an integer; got '80'"]),
    (SERVICE | {"spec": {"ports": [{"port": 80}]}}, []),
])
def test_a_value_of_the_wrong_go_type_is_refused_in_an_unmodelled_kind(obj: dict, expected: list[str]) -> None:
    assert problems(obj) == expected


def test_a_whole_float_port_is_an_integer_as_kubectl_sends_it() -> None:
    assert problems(SERVICE | {"spec": {"ports": [{"port": 80.0}]}}) == []


def test_a_tag_on_a_mapping_is_ignored_as_go_yaml_ignores_it() -> None:
    loaded = load_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: !!set {a, b}\n", "in.yaml")
    (config_map,) = loaded.other
    assert config_map.model_dump(by_alias=True)["data"] == {"a": "", "b": ""} and loaded.warnings == []


def test_what_follows_a_document_end_in_a_piece_is_not_read_and_is_named() -> None:
    text = ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n...\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\n"
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n... # done\n# nothing more\n")
    loaded = load_text(text, "in.yaml")
    assert [o.name for o in loaded.other] == ["a", "c"]
    assert loaded.warnings == ["in.yaml: line 5: not read: kubectl reads one document per '---' piece, and the document "
                               "end marker '...' on line 4 ends it (write '---' to start another document)"]
    assert [o.source.line if o.source else 0 for o in loaded.other] == [1, 9]


def test_a_piece_that_starts_with_a_document_end_is_refused_as_kubectl_refuses_it() -> None:
    with pytest.raises(ManifestError) as refused:
        load_text("# c\n...\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n", "in.yaml")
    assert list(refused.value.problems) == [
        "in.yaml: line 2 column 1: YAML syntax error: did not find expected node content (documents after it were not read)"]


def test_validate_warns_about_a_pod_whose_node_selector_terms_are_all_empty(tmp_path: Path) -> None:
    """A bare Pod with ``nodeSelectorTerms: [{}, {matchExpressions: []}]``: accepted by the API
    server, matched by no node; ``validate`` says so with simulate's reason. One term that can
    match is enough for no warning."""
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c", "image": "pause"}], "affinity": {"nodeAffinity": {
               "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}, {"matchExpressions": []}]}}}}}
    path = tmp_path / "pod.yaml"
    path.write_text(yaml.dump(pod))
    result = invoke_cli("validate", str(path))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "valid (1 warning below): 1 Pod",
        f"warning: {path} doc 1 Pod/default/p: spec.affinity.nodeAffinity: required node affinity matches no node: "
        "nodeSelectorTerms[0], nodeSelectorTerms[1] have no matchExpressions or matchFields, and kube-scheduler matches "
        "no node with an empty term; it stays pending (simulate reports it)"]
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    terms.append({"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]})
    path.write_text(yaml.dump(pod))
    assert invoke_cli("validate", str(path)).output.splitlines() == ["valid: 1 Pod"]
