"""The loader refuses what the real kube-apiserver refuses (names, negative quantities, requests
above limits, replicas beyond int32), and ``karpy install-crds`` talks to a real server after its
``GET /version`` probe (issue 10, section 4)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from karpy_core.apis.loader import load_text
from karpy_core.cli import app
from karpy_core.errors import KubeAPIError, ManifestError

pytestmark = pytest.mark.devcluster

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
       "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                       "template": {"metadata": {"labels": {"app": "d"}}, "spec": copy.deepcopy(POD["spec"])}}}
STATEFULSET = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s", "namespace": "default"},
               "spec": {"replicas": 1, "serviceName": "s", "selector": {"matchLabels": {"app": "s"}},
                        "template": {"metadata": {"labels": {"app": "s"}}, "spec": copy.deepcopy(POD["spec"])}}}


def edit(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(base)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = obj
    for part in parents:
        node = node[part]
    node[last] = value
    return obj


CASES = {
    "pod-name-dash": (edit(POD, "metadata.name", "-x"), False),
    "pod-name-upper": (edit(POD, "metadata.name", "Web"), False),
    "pod-name-dotted": (edit(POD, "metadata.name", "web.v2"), True),
    "pod-name-254": (edit(POD, "metadata.name", "a" * 254), False),
    "namespace-underscore": ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team_a"}}, False),
    "namespace-64": ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n" * 64}}, False),
    "namespace-63": ({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n" * 63}}, True),
    "negative-request": (edit(POD, "spec.containers.0.resources.requests.cpu", "-1"), False),
    "negative-limit": (edit(POD, "spec.containers.0.resources", {"limits": {"memory": "-1Gi"}}), False),
    "request-above-limit": (edit(POD, "spec.containers.0.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}), False),
    "request-equal-limit": (edit(POD, "spec.containers.0.resources", {"requests": {"cpu": "1"}, "limits": {"cpu": "1"}}), True),
    "negative-overhead": (edit(POD, "spec.overhead", {"cpu": "-1"}), False),
    "replicas-negative": (edit(DEPLOYMENT, "spec.replicas", -1), False),
    "replicas-int32-max": (edit(DEPLOYMENT, "spec.replicas", 2**31 - 1), True),
    "replicas-beyond-int32": (edit(DEPLOYMENT, "spec.replicas", 2**31), False),
    "statefulset-dotted-name": (edit(STATEFULSET, "metadata.name", "db.primary"), False),
    "statefulset-label-name": (edit(STATEFULSET, "metadata.name", "db-primary"), True),
}


@pytest.mark.parametrize("case", sorted(CASES))
async def test_loader_and_apiserver_agree(kube, case):
    obj, accepted = CASES[case]
    try:
        load_text(yaml.safe_dump(obj), f"{case}.yaml")
        loader_accepts = True
    except ManifestError:
        loader_accepts = False
    try:
        await kube._request("POST", kube._path(obj["kind"], namespace=obj["metadata"].get("namespace")),
                            query=[("dryRun", "All")], body=obj)
        server_accepts = True
    except KubeAPIError as exc:
        assert exc.status in (400, 422), exc
        server_accepts = False
    assert server_accepts is accepted, case
    assert loader_accepts is accepted, case


async def test_probe_answers_the_server_version(kube):
    assert (await kube.probe()).startswith("v1.")


def test_install_crds_cli_on_the_real_server(devcluster):
    result = CliRunner().invoke(app, ["install-crds", "--kubeconfig", str(devcluster.kubeconfig)])
    assert result.exit_code == 0, result.output
    assert "established: nodepools.karpenter.sh" in result.stdout
