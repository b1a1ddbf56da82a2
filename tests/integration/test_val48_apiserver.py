"""Parity with the real kube-apiserver v1.36.3 (and karpy's CRDs, which carry Karpenter's rules) and
with kubectl's YAML reading for the loader findings of val48 (issue 35):

* ``nodeClassRef.group`` with a version (``karpenter.k8s.aws/v1``): Karpenter's CRD pattern
  ``^[^/]*$`` refuses it; so does the loader, with the pattern in its words;
* a Job's ``selector`` and ``manualSelector``: the API server generates a Job's selector unless
  ``manualSelector: true``, so a selector of the user's is refused without it (``not
  auto-generated``), and with it the selector is required and must select the template's labels;
* a value of the wrong Go type in a kind karpy does not model: a mapping as a ConfigMap ``data``
  value, ``port: 1.5`` in a Service (the decoder's HTTP 400);
* YAML: a tag on a mapping (``!!set {a, b}``) is ignored by go-yaml v2 (on a scalar it leaves the
  text as written, ``!!binary`` decoded: fix35), and a document end marker
  ``...`` ends what kubectl reads of its ``---`` piece. kubectl turns YAML into JSON on its side;
  what it sends was recorded with ``k8s.io/apimachinery/pkg/util/yaml.NewYAMLOrJSONDecoder``
  v0.36.3 (kubectl's reader, a ten-line Go program) and is POSTed here, so the API server's
  answer to what kubectl would send is compared with what karpy loaded.

Each object is POSTed with ``dryRun=All`` and ``fieldValidation=Strict`` (:mod:`tests.integration.parity`).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from karpy_core.apis.loader import load_text
from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import dry_run, workload

pytestmark = pytest.mark.devcluster


def _nodepool(group: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "val48"},
            "spec": {"template": {"spec": {"requirements": [],
                                           "nodeClassRef": {"group": group, "kind": "EC2NodeClass", "name": "default"}}}}}


def _job(labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    obj = workload("Job")
    if labels is not None:
        obj["spec"]["template"]["metadata"] = {"labels": labels}
    obj["spec"].update(copy.deepcopy(spec))
    return obj


APP = {"matchLabels": {"app": "w"}}
CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "default"}}
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "group-with-version": (_nodepool("karpenter.k8s.aws/v1"), False, "should match '^[^/]*$'"),
    "group-with-other-suffix": (_nodepool("karpenter.k8s.aws/latest"), False, "should match '^[^/]*$'"),
    "group-alone": (_nodepool("karpenter.k8s.aws"), True, ""),
    "job-no-selector": (_job(), True, ""),
    "job-selector-without-manual": (_job({"app": "w"}, selector=APP), False, "`selector` not auto-generated"),
    "job-selector-manual-false": (_job({"app": "w"}, selector=APP, manualSelector=False), False, "`selector` not auto-generated"),
    "job-empty-selector": (_job(selector={}), True, ""),
    "job-selector-not-matching-template": (_job({"app": "x"}, selector=APP), False, "`selector` does not match template `labels`"),
    "job-manual-selector": (_job({"app": "w"}, selector=APP, manualSelector=True), True, ""),
    "job-manual-selector-not-matching": (_job({"app": "x"}, selector=APP, manualSelector=True), False,
                                         "`selector` does not match template `labels`"),
    "job-manual-without-selector": (_job({"app": "w"}, manualSelector=True), False, "spec.selector: Required value"),
    "job-manual-doesnotexist-selector": (_job(selector={"matchExpressions": [{"key": "app", "operator": "DoesNotExist"}]}), True, ""),
    "job-name-label-other": (_job({"batch.kubernetes.io/job-name": "other"}), False, "must be 'w'"),
    "configmap-data-mapping": (CONFIG_MAP | {"data": {"a": {"b": "c"}}}, False, ""),
    "configmap-data-list": (CONFIG_MAP | {"data": {"a": ["b"]}}, False, ""),
    "service-port-fraction": (SERVICE | {"spec": {"ports": [{"port": 1.5}]}}, False, ""),
    "service-port-string": (SERVICE | {"spec": {"ports": [{"port": "80"}]}}, False, ""),
    "service-port-int": (SERVICE | {"spec": {"ports": [{"port": 80}]}}, True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_the_val48_findings(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])


# YAML text -> the JSON documents kubectl's reader sends for it (recorded, see the module docstring)
KUBECTL_READS: dict[str, tuple[str, list[str]]] = {
    "set-tag-on-data": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: !!set {a, b}\n",
                        ['{"apiVersion":"v1","data":{"a":null,"b":null},"kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}']),
    "omap-and-map-tags": ("apiVersion: v1\nkind: ConfigMap\nmetadata: !!map {name: c, namespace: default}\ndata: !!omap {a: b}\n",
                          ['{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}']),
    "str-tag-on-a-mapping": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\ndata: !!str {a: b}\n",
                             ['{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}']),
    # fix35 (issue 35 leftovers): a tag on a scalar is left alone by go-yaml v2, !!binary decoded
    "tags-on-scalars": ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n"
                        "data: {x: !!set abc, b: !!binary aGVsbG8=, c: !foo 12, d: !!binary \"4pyT\"}\n",
                        ['{"apiVersion":"v1","data":{"b":"hello","c":"12","d":"\u2713","x":"abc"},"kind":"ConfigMap",'
                         '"metadata":{"name":"c","namespace":"default"}}']),
    "document-end-inside-a-piece": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default}\n...\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b, namespace: default}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n",
        ['{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"default"}}',
         '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}']),
}


@pytest.mark.parametrize("case", sorted(KUBECTL_READS))
async def test_the_loader_reads_yaml_as_kubectl_sends_it(kube, case):
    """karpy loads the objects kubectl would send, and each is what the API server stores from
    what kubectl sends (its ``data`` and name); before val48 karpy refused the tagged mappings and
    the document after ``...``."""
    text, sent = KUBECTL_READS[case]
    loaded = load_text(text, "in.yaml")
    mine = [obj.model_dump(mode="json", by_alias=True, exclude_none=True) for obj in loaded.other]
    assert len(mine) == len(sent), (case, mine)
    for body, obj in zip(sent, mine, strict=True):
        stored = await dry_run(kube, json.loads(body))
        assert obj["metadata"]["name"] == stored["metadata"]["name"], (case, obj, stored)
        assert obj.get("data") == stored.get("data"), (case, obj, stored)
    assert bool(loaded.warnings) is (case == "document-end-inside-a-piece"), loaded.warnings
