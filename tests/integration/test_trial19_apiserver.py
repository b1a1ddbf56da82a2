"""Parity with the real kube-apiserver for what trial 19 found karpy accepting: hugepages without
cpu or memory (``validateResourceRequirements``) and a ``matchFields`` requirement on another key
than ``metadata.name`` or with other than one value (``ValidateNodeFieldSelectorRequirement``).
Harness of test_trial3_apiserver.py (``dryRun=All``, strict)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import workload

pytestmark = pytest.mark.devcluster


def _fields(requirement: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [requirement]}]}}}}


HUGEPAGES = {"requests": {"hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "hugepages-alone": (workload("Pod", container={"resources": HUGEPAGES}), False, "HugePages require cpu or memory"),
    "hugepages-with-memory": (workload("Deployment", container={"resources": {
        "requests": {**HUGEPAGES["requests"], "memory": "64Mi"}, "limits": {**HUGEPAGES["limits"], "memory": "64Mi"}}}), True, ""),
    "match-fields-labels-key": (workload("Pod", pod=_fields({"key": "metadata.labels", "operator": "In", "values": ["a"]})),
                                False, "not a valid field selector key"),
    "match-fields-two-values": (workload("Deployment", pod=_fields({"key": "metadata.name", "operator": "In",
                                                                   "values": ["a", "b"]})),
                                False, "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"),
    "match-fields-exists": (workload("Pod", pod=_fields({"key": "metadata.name", "operator": "Exists"})), False,
                            "not a valid selector operator"),
    "match-fields-bad-name": (workload("Pod", pod=_fields({"key": "metadata.name", "operator": "In", "values": ["Bad_Name"]})),
                              False, "Invalid value"),
    "match-fields-node-name": (workload("Pod", pod=_fields({"key": "metadata.name", "operator": "NotIn", "values": ["node-1"]})),
                               True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_the_trial19_findings(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])
