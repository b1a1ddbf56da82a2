"""Parity with the real kube-apiserver v1.36.3 for ``matchLabelKeys``/``mismatchLabelKeys`` (left
from trial 21: karpy took them unchecked). On a pod (anti-)affinity term and a spread constraint:
keys need a ``labelSelector`` and must be label keys, a key may not be in both lists, and a key the
selector already names is refused once the pod strategy merges the pod's own value into the
selector (only when the pod carries that label). A pod template is taken as written, and every
pod made from it is refused: karpy refuses such a template at load with the pod's words. Harness of
test_trial3_apiserver.py (``dryRun=All``, strict)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.integration.parity import assert_loader_agrees, server_answer
from tests.integration.test_trial3_apiserver import POD_SPEC, loader_problems

pytestmark = pytest.mark.devcluster

BOTH_SELECTOR = "exists in both matchLabelKeys and labelSelector"
FORBIDDEN = "Forbidden: must not be specified when labelSelector is not set"


def _pod(labels: dict[str, str], rule: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(POD_SPEC)
    spec.update(rule)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w", "namespace": "default", "labels": labels}, "spec": spec}


def _anti(selector: dict[str, Any] | None, match: list[str], mismatch: list[str] | None = None) -> dict[str, Any]:
    term: dict[str, Any] = {"topologyKey": "kubernetes.io/hostname", "matchLabelKeys": match}
    if selector is not None:
        term["labelSelector"] = selector
    if mismatch:
        term["mismatchLabelKeys"] = mismatch
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def _spread(selector: dict[str, Any] | None, match: list[str]) -> dict[str, Any]:
    constraint: dict[str, Any] = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                  "whenUnsatisfiable": "DoNotSchedule", "matchLabelKeys": match}
    if selector is not None:
        constraint["labelSelector"] = selector
    return {"topologySpreadConstraints": [constraint]}


APP = {"matchLabels": {"app": "w"}}
CASES: dict[str, tuple[dict[str, Any], bool, str]] = {
    "anti-no-selector": (_pod({"app": "w"}, _anti(None, ["app"])), False, f"matchLabelKeys: {FORBIDDEN}"),
    "anti-key-in-selector-pod-has-label": (_pod({"app": "w"}, _anti(APP, ["app"])), False, BOTH_SELECTOR),
    "anti-key-in-selector-pod-lacks-label": (_pod({"tier": "x"}, _anti(APP, ["app"])), True, ""),
    "anti-key-in-both-lists": (_pod({"tier": "x"}, _anti(APP, ["tier"], ["tier"])), False,
                               "exists in both matchLabelKeys and mismatchLabelKeys"),
    "anti-bad-key": (_pod({"tier": "x"}, _anti(APP, ["-bad-"])), False, "matchLabelKeys[0]: Invalid value"),
    "anti-mismatch-key-in-selector": (_pod({"app": "w"}, _anti(APP, [], ["app"])), True, ""),
    "anti-other-key": (_pod({"app": "w", "tier": "x"}, _anti(APP, ["tier"])), True, ""),
    "spread-no-selector": (_pod({"app": "w"}, _spread(None, ["app"])), False, f"matchLabelKeys: {FORBIDDEN}"),
    "spread-key-in-selector-pod-has-label": (_pod({"app": "w"}, _spread(APP, ["app"])), False, BOTH_SELECTOR),
    "spread-key-in-selector-pod-lacks-label": (_pod({"tier": "x"}, _spread(APP, ["app"])), True, ""),
    "spread-key-twice-in-selector": (_pod({"tier": "x"}, _spread({"matchLabels": {"app": "w"}, "matchExpressions": [
        {"key": "app", "operator": "Exists"}]}, ["app"])), False, BOTH_SELECTOR),
    "spread-hash-key": (_pod({"app": "w", "pod-template-hash": "abc"}, _spread(APP, ["pod-template-hash"])), True, ""),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree_on_match_label_keys(kube, case):
    await assert_loader_agrees(kube, case, *CASES[case])


async def test_a_template_whose_pods_would_be_refused_is_refused_with_the_pods_words(kube):
    """The server stores the Deployment and refuses its pod; the loader refuses the Deployment."""
    pod = _pod({"app": "w"}, _spread(APP, ["app"]))
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w", "namespace": "default"},
                  "spec": {"selector": APP, "template": {"metadata": {"labels": {"app": "w"}}, "spec": pod["spec"]}}}
    assert await server_answer(kube, deployment) == ""
    assert BOTH_SELECTOR in await server_answer(kube, pod)
    mine = "\n".join(loader_problems(deployment))
    assert BOTH_SELECTOR in mine and "refuses every pod made from this template" in mine, mine
