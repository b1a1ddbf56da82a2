"""Parity with the real kube-apiserver for the topology keys trial 18 found karpy accepting: a
pod (anti-)affinity term's ``topologyKey`` is required and must be a label key
(``validatePodAffinityTerm``), a spread constraint's is only required (``ValidateTopologyKey``),
so ``a b`` is accepted there. Harness of test_trial3_apiserver.py (``dryRun=All``, strict)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.parity import assert_loader_agrees
from tests.integration.test_trial3_apiserver import workload

pytestmark = pytest.mark.devcluster


def _term(key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": key}


def _required(kind: str, key: str) -> dict[str, Any]:
    return {"affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [_term(key)]}}}


def _preferred(kind: str, key: str) -> dict[str, Any]:
    return {"affinity": {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": _term(key)}]}}}


def _spread(key: str) -> dict[str, Any]:
    return {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                                           "labelSelector": {"matchLabels": {"app": "w"}}}]}


NAME_PART = "name part must consist of alphanumeric characters"
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    # name: (object, accepted, a phrase both answers hold when refused)
    "anti-affinity-required-empty-key": (workload("Deployment", pod=_required("podAntiAffinity", "")), False,
                                         "requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value: "
                                         "can not be empty"),
    "affinity-preferred-empty-key": (workload("Pod", pod=_preferred("podAffinity", "")), False,
                                     "podAffinityTerm.topologyKey: Required value: can not be empty"),
    "anti-affinity-required-bad-key": (workload("Deployment", pod=_required("podAntiAffinity", "-bad-")), False, NAME_PART),
    "affinity-required-two-slashes": (workload("Pod", pod=_required("podAffinity", "a/b/c")), False,
                                      "a valid label key must consist of alphanumeric characters"),
    "anti-affinity-preferred-bad-prefix": (workload("Pod", pod=_preferred("podAntiAffinity", "Bad_/zone")), False,
                                           "topologyKey: Invalid value: "),
    "anti-affinity-custom-key": (workload("Deployment", pod=_required("podAntiAffinity", "example.com/rack")), True, ""),
    "spread-key-with-a-space": (workload("Deployment", pod=_spread("a b")), True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_the_trial18_topology_keys(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])
