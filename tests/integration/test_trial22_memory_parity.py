"""Trial 22: the in-memory cluster answers as kube-apiserver v1.36.3 does to a merge patch that
renames or moves an object (``checkName``: 400 BadRequest; the in-memory cluster stored the renamed
Deployment under its old key, a second copy of the workload) and to deleting an immortal Namespace
(NamespaceLifecycle admission: 403 Forbidden). Same calls, same status, reason and message."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from karpy_core.errors import KubeAPIError
from karpy_core.kube.memory import InMemoryCluster

from .karpy_env import delete_quietly

pytestmark = pytest.mark.devcluster


def _pdb(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}}


async def _answer(call: Any) -> str:
    try:
        await call
    except KubeAPIError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize("patch", [{"metadata": {"name": "renamed"}}, {"metadata": {"name": None}}, {"metadata": {"name": ""}},
                                   {"metadata": {"namespace": "kube-system"}}, {"metadata": {"namespace": None}},
                                   {"metadata": {"labels": {"x": "y"}}}])
async def test_a_patch_that_renames_or_moves_an_object_is_refused_alike(kube, patch):
    name = "pdb-" + uuid.uuid4().hex[:6]
    memory = InMemoryCluster()
    await memory.create("PodDisruptionBudget", _pdb(name))
    await kube.create("PodDisruptionBudget", _pdb(name))
    try:
        server = await _answer(kube.patch("PodDisruptionBudget", name, patch, "default"))
        mine = await _answer(memory.patch("PodDisruptionBudget", name, patch, "default"))
    finally:
        await delete_quietly(kube, [("PodDisruptionBudget", name, "default")])
    assert server == mine, (server, mine)
    if "labels" in patch["metadata"] or patch["metadata"].get("namespace", "x") is None:
        assert server == ""
    else:
        assert server.startswith("400 BadRequest: the n"), server


@pytest.mark.parametrize("namespace", ["default", "kube-system", "kube-public"])
async def test_an_immortal_namespace_cannot_be_deleted_alike(kube, namespace):
    server = await _answer(kube.delete("Namespace", namespace))
    mine = await _answer(InMemoryCluster().delete("Namespace", namespace))
    assert server == mine == f'403 Forbidden: namespaces "{namespace}" is forbidden: this namespace may not be deleted'
