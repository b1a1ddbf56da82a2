"""Trial 20 (issue 35): required pod anti-affinity on a topology key the node does not carry,
against the real kube-scheduler: it binds the pods (a node without the key is in no domain, so no
matching pod shares one with it), while required affinity on the same key leaves them pending.
karpy's simulate, on the same Node and pods, answers the same."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpy_core.kube.client import AsyncKubeClient
from tests.cli import invoke_cli

from .karpy_env import delete_quietly, kwok_node, wait_for

pytestmark = pytest.mark.devcluster


def _node(name: str, tag: str) -> dict[str, Any]:
    return kwok_node(name, {"rack-tag": tag})


def _pod(name: str, tag: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "labels": {"app": tag}},
            "spec": {"nodeSelector": {"rack-tag": tag}, "tolerations": [{"operator": "Exists"}],
                     "affinity": {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [
                         {"labelSelector": {"matchLabels": {"app": tag}}, "topologyKey": "example.com/rack"}]}},
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}}


@pytest.mark.parametrize(("kind", "bound"), [("podAntiAffinity", 3), ("podAffinity", 0)])
async def test_the_topology_key_a_node_lacks_as_kube_scheduler_reads_it(devcluster, tmp_path: Path, kind: str, bound: int):
    tag = "r" + uuid.uuid4().hex[:6]
    node_name = f"kwok-rack-{tag}"
    pods = [_pod(f"{tag}-{i}", tag, kind) for i in range(3)]
    kube = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    try:
        await kube.create("Node", _node(node_name, tag))
        for p in pods:
            await kube.create("Pod", p)

        async def decided() -> bool:
            live = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == tag]
            return len(live) == 3 and all(p["spec"].get("nodeName") or any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
                for c in (p.get("status") or {}).get("conditions") or ()) for p in live)

        await wait_for(decided, 90, f"{tag}: every pod bound or marked Unschedulable")
        await asyncio.sleep(1)
        live = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == tag]
    finally:
        await delete_quietly(kube, [*(("Pod", p["metadata"]["name"], "default") for p in pods), ("Node", node_name, None)])
        await kube.close()
    assert sum(1 for p in live if p["spec"].get("nodeName") == node_name) == bound

    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([_node(node_name, tag), *pods]))
    result = await asyncio.to_thread(invoke_cli, "simulate", str(path), "-o", "json")  # its own event loop
    assert result.exit_code == 0, result.output
    assert sum(1 for p in json.loads(result.stdout)["pods"] if p["node"] == node_name) == bound
