"""Parity with the real kube-apiserver v1.36.3 for trial 12's message finding (issue 35, fix12): a
Deployment whose selector does not match its template's labels is refused as
``spec.template.metadata.labels: Invalid value: {"app":"other"}: `selector` does not match
template `labels``` (the labels as JSON, ``null`` when the template has none); karpy's loader
gives the same line after the object's name (it said ``spec: template.metadata.labels: {...}: ...``).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from karpy_core.errors import KubeAPIError
from tests.integration.test_trial3_apiserver import dry_run, loader_problems, workload

pytestmark = pytest.mark.devcluster


def _deployment(metadata: dict[str, Any] | None) -> dict[str, Any]:
    obj = copy.deepcopy(workload("Deployment"))
    if metadata is None:
        del obj["spec"]["template"]["metadata"]
    else:
        obj["spec"]["template"]["metadata"] = metadata
    return obj


@pytest.mark.parametrize("metadata", [{"labels": {"app": "other", "tier": "x"}}, None, {}, {"labels": {}}],
                         ids=["other-labels", "no-metadata", "empty-metadata", "empty-labels"])
async def test_a_selector_not_matching_the_template_is_worded_as_the_api_server_words_it(kube, metadata):
    obj = _deployment(metadata)
    with pytest.raises(KubeAPIError) as refused:
        await dry_run(kube, obj)
    said = [part.strip() for part in str(refused.value).partition(" is invalid: ")[2].strip("[]").split(", spec.")]
    line = next(("spec." + p.removeprefix("spec.") for p in said if "does not match template" in p), None)
    assert line is not None, str(refused.value)
    problems = loader_problems(obj)
    assert any(problem.endswith(f"Deployment/default/w: {line}") for problem in problems), (line, problems)
