"""Pod nominations on the real API server and kube-scheduler (issue 27): pods the provisioner
planned on NodeClaims still in flight get no second NodeClaim."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.provisioning.provisioner import Provisioner
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.state.cluster import condition
from karpy_core.state.nominations import Nominations
from karpy_core.utils.clock import RealClock

from .karpy_env import wait_for
from .test_controller_e2e import nodeclass, nodepool

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import cost

pytestmark = pytest.mark.devcluster


def _pods(tag: str) -> list[dict[str, Any]]:
    """benchmarks/cost.py's mix6-120 as bare pods that only the test's NodePool can hold."""
    out = []
    for d in cost.mix(6, 120, 2):
        tmpl = d["spec"]["template"]
        for i in range(d["spec"]["replicas"]):
            spec = {**tmpl["spec"], "nodeSelector": {"karpy-e2e": tag}, "terminationGracePeriodSeconds": 0,
                    "containers": [{**c, "image": "registry.k8s.io/pause:3.9"} for c in tmpl["spec"]["containers"]]}
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{tag}-{d['metadata']['name']}-{i}", "namespace": "default",
                                     "labels": {**tmpl["metadata"]["labels"], "karpy-e2e": tag}},
                        "spec": spec})
    return out


async def test_pods_nominated_to_in_flight_claims_get_no_second_claim(kube: AsyncKubeClient, devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    pool = f"nom-{tag}"
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", nodepool(pool, tag))
    pods = _pods(tag)
    try:
        for p in pods:
            await kube.create("Pod", p)

        async def all_unschedulable() -> bool:
            listed = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("karpy-e2e") == tag]
            return len(listed) == len(pods) and all(
                (condition(p, "PodScheduled") or {}).get("reason") == "Unschedulable" for p in listed)

        await wait_for(all_unschedulable, 60, "kube-scheduler to mark the pods Unschedulable")
        provider = load_provider("simulated", {})
        noms = Nominations()
        prov = Provisioner(kube=kube, provider=provider, nominations=noms, clock=RealClock())
        first = await prov.reconcile()
        assert first.results is not None and first.created
        ours = {p["metadata"]["name"] for p in pods}
        planned = {p.key: first.created[i]["metadata"]["name"]
                   for i, c in enumerate(first.results.new_claims) for p in c.pods if p.name in ours}
        assert len(planned) == len(pods)
        second = await prov.reconcile()
        assert second.results is not None
        assert not [c for c in second.created if c["metadata"]["labels"].get("karpenter.sh/nodepool") == pool]
        assert {k: v for k, v in second.results.existing.items() if k in planned} == planned
    finally:
        for p in pods:
            try:
                await kube.delete("Pod", p["metadata"]["name"], "default")
            except Exception:
                pass
        for c in await kube.list("NodeClaim"):
            if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool:
                await kube.delete("NodeClaim", c["metadata"]["name"])
        await kube.delete("NodePool", pool)
        await kube.delete("EC2NodeClass", pool)
