"""Karpenter's gated features in the real controller, against the real API server, kube-scheduler
and kwok: a static NodePool (``StaticCapacity``) and a NodeOverlay discount (``NodeOverlay``).

Each test isolates itself as tests/integration/test_controller_e2e.py does: a unique NodePool whose
template carries ``karpy-e2e=<id>`` (and, for the overlay, an overlay that selects only that
NodePool through ``karpenter.sh/nodepool``).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.operator import ControllerSettings, LeaderSettings, Operator
from karpy_core.sim.kwok_nodes import KwokNodeBackend
from karpy_core.state.cluster import condition

from .karpy_env import wait_for
from .test_controller_e2e import claims_of, deployment, nodeclass, nodepool, nodes_of, stop_operator

pytestmark = pytest.mark.devcluster


def start_gated_operator(kube: AsyncKubeClient, tag: str, gates: FeatureGates) -> tuple[Operator, asyncio.Task[None]]:
    """An in-process operator (simulated provider, kwok Nodes) with ``gates``, on its own Lease."""
    provider = load_provider("simulated", {"node_backend": KwokNodeBackend(kube), "kube": kube})
    operator = Operator(kube=kube, provider=provider, settings=ControllerSettings.model_validate(dict(
        leader=LeaderSettings.model_validate(dict(namespace="default", lease_name=f"lease-{tag}")), health_port=0,
        health_host="127.0.0.1", feature_gates=gates)))
    return operator, asyncio.create_task(operator.run())


async def live_claims(kube: AsyncKubeClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await claims_of(kube, pool) if not c["metadata"].get("deletionTimestamp")]


async def delete_quietly(kube: AsyncKubeClient, kind: str, name: str, namespace: str | None = None) -> None:
    try:
        await kube.delete(kind, name, namespace)
    except Exception:
        pass


async def test_static_nodepool_keeps_its_replicas_and_scales_down(kube, devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    pool = f"static-{tag}"
    np = nodepool(pool, tag, types=["c6a.large"])
    np["spec"]["replicas"] = 2
    np["spec"].pop("limits", None)
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", np)
    operator, task = start_gated_operator(kube, tag, FeatureGates(StaticCapacity=True))
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")

        async def two_nodes() -> bool:
            return len(await live_claims(kube, pool)) == 2 and len(await nodes_of(kube, pool)) == 2

        await wait_for(two_nodes, 120, "the static NodePool's 2 nodes")
        claims = await live_claims(kube, pool)
        assert {c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims} == {"c6a.large"}
        # no pending pod asked for them: static capacity alone made them
        await kube.patch("NodePool", pool, {"spec": {"replicas": 1}})

        async def one_claim() -> bool:
            return len(await live_claims(kube, pool)) == 1

        await wait_for(one_claim, 120, "the scale-down to 1 NodeClaim")
        await asyncio.sleep(3)  # and it stays at 1: no re-provisioning loop
        assert len(await live_claims(kube, pool)) == 1
        current = await kube.get("NodePool", pool)
        assert current["spec"]["replicas"] == 1
    finally:
        await kube.patch("NodePool", pool, {"spec": {"replicas": 0}})
        try:
            await wait_for(lambda: _none_left(kube, pool), 120, "the static NodeClaims gone")
        finally:
            await stop_operator(task)
            await delete_quietly(kube, "NodePool", pool)


async def _none_left(kube: AsyncKubeClient, pool: str) -> bool:
    return not await claims_of(kube, pool)


async def test_nodeoverlay_discount_changes_the_launched_type(kube, devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app, overlay = f"overlay-{tag}", f"web-{tag}", f"discount-{tag}"
    # without an overlay c6a.large (0.0765 USD/h) is cheaper than m5.large (0.096)
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", nodepool(pool, tag, types=["c6a.large", "m5.large"]))
    await kube.create("NodeOverlay", {
        "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": overlay},
        "spec": {"weight": 10, "priceAdjustment": "-50%", "requirements": [
            {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]}})
    operator, task = start_gated_operator(kube, tag, FeatureGates(NodeOverlay=True))
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")

        async def overlay_ready() -> bool:
            obj = await kube.get("NodeOverlay", overlay)
            return (condition(obj, "ValidationSucceeded") or {}).get("status") == "True"

        await wait_for(overlay_ready, 60, "the NodeOverlay's ValidationSucceeded=True")
        await kube.create("Deployment", deployment(app, tag, 1, cpu="500m"))

        async def launched() -> list[dict[str, Any]]:
            return [c for c in await live_claims(kube, pool) if (c.get("status") or {}).get("providerID")]

        (claim,) = await wait_for(launched, 120, "a NodeClaim launched for the pod")
        assert claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"  # 0.048 after the discount
    finally:
        await delete_quietly(kube, "Deployment", app, "default")
        for c in await claims_of(kube, pool):
            await delete_quietly(kube, "NodeClaim", c["metadata"]["name"])
        try:
            await wait_for(lambda: _none_left(kube, pool), 120, "the NodeClaims gone")
        finally:
            await stop_operator(task)
            await delete_quietly(kube, "NodeOverlay", overlay)
            await delete_quietly(kube, "NodePool", pool)
