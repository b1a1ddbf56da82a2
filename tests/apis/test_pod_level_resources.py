"""Pod-level ``spec.resources`` as kube-apiserver v1.36.3 validates it (issue 35, trial 5); the same
cases against the real API server: tests/integration/test_trial5_apiserver.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from karpy_core.apis.loader import load_text
from karpy_core.errors import ManifestError


def pod(resources: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}],
                     "resources": resources, **spec}}


def deployment(resources: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"selector": {"matchLabels": {"a": "b"}},
                     "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod(resources)["spec"]}}}


def problems(obj: dict[str, Any]) -> list[str]:
    try:
        load_text(yaml.safe_dump(obj), "in.yaml")
    except ManifestError as exc:
        return list(exc.problems)
    return []


def test_pod_level_requests_at_least_the_containers_are_accepted():
    assert problems(pod({"requests": {"cpu": "6"}, "limits": {"cpu": "6"}})) == []
    assert problems(pod({"limits": {"memory": "1Gi"}})) == []


@pytest.mark.parametrize(("resources", "spec", "expected"), [
    ({"requests": {"cpu": "50m"}}, {}, 'spec: resources.requests[cpu]: Invalid value: "50m": must be greater than or equal to '
                                       "aggregate container requests of 100m"),
    ({"requests": {"cpu": "500m"}}, {"initContainers": [{"name": "i", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
     'resources.requests[cpu]: Invalid value: "500m": must be greater than or equal to aggregate container requests of 1'),
    ({"requests": {"ephemeral-storage": "1Gi"}}, {},
     'resources.requests[ephemeral-storage]: Unsupported value: "ephemeral-storage": supported values: "cpu", "hugepages-", "memory"'),
    ({"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}, {},
     'resources.requests: Invalid value: "2Gi": must be less than or equal to memory limit of 1Gi'),
    ({"claims": [{"name": "x"}]}, {}, "resources.claims: Forbidden: claims may not be set for Resources at pod-level"),
    ({"requests": {"cpu": "1"}}, {"os": {"name": "windows"}}, "resources: Forbidden: may not be set for a windows pod"),
    ({"limits": {"cpu": "50m"}}, {}, 'spec.resources.requests: Invalid value: "100m": must be less than or equal to cpu limit of 50m'),
])
def test_pod_level_problems_are_worded_as_the_api_server_words_them(resources, spec, expected):
    (line,) = problems(pod(resources, **spec))
    assert line.startswith("in.yaml doc 1 Pod/w: ") and expected in line, line


def test_a_template_is_not_defaulted_as_a_pod_is():
    """kube-apiserver stores a Deployment whose pod-level cpu limit is below its containers'
    requests (defaulting is a Pod's, not a template's), and refuses such a Pod."""
    assert problems(deployment({"limits": {"cpu": "50m"}})) == []
    assert problems(pod({"limits": {"cpu": "50m"}}))
    (line,) = problems(deployment({"requests": {"cpu": "50m"}}))
    assert "spec.template.spec: resources.requests[cpu]" in line, line


def test_a_gated_pod_may_not_name_a_node():
    """ValidatePodCreate (a Pod only): ``nodeName`` with ``schedulingGates`` is refused."""
    gated = pod({}, schedulingGates=[{"name": "example.com/gate"}], nodeName="n1")
    del gated["spec"]["resources"]
    (line,) = problems(gated)
    assert "spec.nodeName: Forbidden: cannot be set until all schedulingGates have been cleared" in line, line
    del gated["spec"]["nodeName"]
    assert problems(gated) == []
