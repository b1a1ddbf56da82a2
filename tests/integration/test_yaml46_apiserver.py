"""Parity with the real kube-apiserver for the manifest-loader findings of trial 7's fuzzer (yaml46):
an object without a name, a toleration ``operator: Exists`` with a ``value``, a label value the
YAML parser reads as a number (``0X1A``), and a ReplicaSet name past 253 characters (what a
Deployment of a 253-character name would need). Each object is POSTed with ``dryRun=All`` and
``fieldValidation=Strict`` (the harness of test_trial3_apiserver.py) and the loader's answer compared."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import workload

pytestmark = pytest.mark.devcluster


def _named(obj: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **meta}}


EXISTS_WITH_VALUE = [{"key": "a", "operator": "Exists", "value": "b"}]
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "toleration-exists-with-value": (workload("Pod", pod={"tolerations": EXISTS_WITH_VALUE}), False,
                                     "operator: Invalid value: \"b\": value must be empty when `operator` is 'Exists'"),
    "toleration-exists-with-value-deployment": (workload("Deployment", pod={"tolerations": EXISTS_WITH_VALUE}), False,
                                                "value must be empty when `operator` is 'Exists'"),
    "toleration-exists-empty-value": (workload("Pod", pod={"tolerations": [{"key": "a", "operator": "Exists", "value": ""}]}), True, ""),
    "no-name": (_named(workload("Pod"), name=""), False, "metadata.name: "),
    "no-name-configmap": ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "default"}, "data": {"a": "b"}},
                          False, "metadata.name"),
    "generate-name": (_named(workload("Pod"), name="", generateName="w-"), True, ""),
    "label-value-number-0x1a": (_named(workload("Pod"), labels={"a": 26}), False, ""),
    "replicaset-name-264": (_named(workload("ReplicaSet"), name="a" * 253 + "-5d8f7c9b6d"), False,
                            "must be no more than 253 characters"),
    "deployment-name-253": (_named(workload("Deployment"), name="a" * 253), True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_the_yaml46_findings(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])
