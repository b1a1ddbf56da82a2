"""Karpenter's own KWOK NodePool and KWOKNodeClass (kwok/README.md, unchanged) on the real API server
with ``karpy controller --cloud-provider simulated --kwok`` (issue 36, item 0).

The KWOKNodeClass is Ready the way Karpenter makes it Ready: its CRD defaults ``status`` to one
``Ready=True`` condition, which the API server fills in; the NodePool then reports
``NodeClassReady=True`` and the controller launches kwok nodes the real kube-scheduler binds to.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.kube.client import AsyncKubeClient
from karpy_core.state.cluster import condition

from .karpy_env import ControllerProcess, wait_for

pytestmark = pytest.mark.devcluster

DATA = Path(__file__).resolve().parents[1] / "data" / "kwok"
POOL = "default"  # the README's names
APP = "kwok-inflate"
REPLICAS = 10


def manifests(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DATA / name).read_text()) if d]


async def pods(kube: AsyncKubeClient) -> list[dict[str, Any]]:
    return [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == APP]


async def claims(kube: AsyncKubeClient) -> list[dict[str, Any]]:
    return [c for c in await kube.list("NodeClaim") if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == POOL]


async def nodes(kube: AsyncKubeClient) -> list[dict[str, Any]]:
    return [n for n in await kube.list("Node") if (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == POOL]


async def _delete(kube: AsyncKubeClient, kind: str, name: str, namespace: str | None = None) -> None:
    try:
        await kube.delete(kind, name, namespace)
    except Exception:  # already gone
        pass


async def test_karpenters_kwok_nodepool_runs_pods_unchanged(kube, devcluster, tmp_path):
    objs = manifests("karpenter-kwok-nodepool.yaml")
    assert [o["kind"] for o in objs] == ["NodePool", "KWOKNodeClass"]
    for obj in objs:
        await kube.create(obj["kind"], obj)

    # Karpenter's CRD default: the API server gives the status-less KWOKNodeClass Ready=True
    stored = await kube.get("KWOKNodeClass", "default")
    ready = condition(stored, "Ready")
    assert ready is not None and ready["status"] == "True" and ready["reason"] == "Ready"

    controller = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "controller.log", lease=f"lease-kwok-{uuid.uuid4().hex[:6]}")
    try:
        async def pool_ready() -> bool:
            np = await kube.get("NodePool", POOL)
            return (condition(np, "NodeClassReady") or {}).get("status") == "True" and (condition(np, "Ready") or {}).get("status") == "True"

        await wait_for(pool_ready, 60, "NodePool default NodeClassReady=True and Ready=True")
        for obj in manifests("inflate.yaml"):
            await kube.create(obj["kind"], obj)

        async def all_running() -> bool:
            ps = await pods(kube)
            return len(ps) == REPLICAS and all((p.get("status") or {}).get("phase") == "Running" for p in ps)

        await wait_for(all_running, 150, f"{REPLICAS} pods Running on Karpenter's KWOK NodePool")
        cs = await claims(kube)
        ns = await nodes(kube)
        assert cs and len(ns) == len(cs)
        for c in cs:
            assert c["spec"]["nodeClassRef"] == {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"}
            assert c["metadata"]["labels"]["karpenter.sh/capacity-type"] == "spot"
            assert c["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"
        assert {p["spec"]["nodeName"] for p in await pods(kube)} <= {n["metadata"]["name"] for n in ns}
        # the NodeClass label Karpenter puts on nodes names the KWOK kind's group-qualified key
        assert all(n["metadata"]["labels"].get("karpenter.kwok.sh/kwoknodeclass") == "default" for n in ns)
        assert "NodeClass not found" not in controller.log()
        # no controller wrote the class's status: it is still the CRD's default, as under Karpenter
        assert (await kube.get("KWOKNodeClass", "default"))["status"] == stored["status"]
    finally:
        await _delete(kube, "Deployment", APP, "default")
        for c in await claims(kube):
            await _delete(kube, "NodeClaim", c["metadata"]["name"])

        async def gone() -> bool:
            return not await claims(kube) and not await nodes(kube)

        try:
            await wait_for(gone, 90, "the KWOK pool's NodeClaims and Nodes to be finalized")
        finally:
            controller.stop()
            await _delete(kube, "NodePool", POOL)
            await _delete(kube, "KWOKNodeClass", "default")
