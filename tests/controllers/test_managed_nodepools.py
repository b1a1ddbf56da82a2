"""NodePools whose NodeClass kind the loaded provider does not support are another controller's:
provisioning, disruption and NodePool status leave them alone (Karpenter's nodepoolutils.IsManaged)."""

from __future__ import annotations

from typing import Any

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.sim.simulator import Simulator
from karpy_core.state.cluster import is_managed
from karpy_core.state.views import NodePoolView
from tests.fakes import must_peek


def nodepool(name: str, group: str, kind: str) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": group, "kind": kind, "name": "default"},
                                           "requirements": []}}}}


def pod(name: str, pool: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeSelector": {"karpenter.sh/nodepool": pool},
                     "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]}}


def test_is_managed_compares_group_and_kind() -> None:
    managed = {("karpenter.k8s.aws", "EC2NodeClass")}

    def view(*args: str) -> NodePoolView:
        return NodePoolView.of(nodepool(*args))

    assert is_managed(view("a", "karpenter.k8s.aws", "EC2NodeClass"), managed)
    assert not is_managed(view("b", "karpenter.kakaocloud.com", "KCNodeClass"), managed)
    assert not is_managed(view("c", "example.com", "EC2NodeClass"), managed)  # same kind, other group
    assert is_managed(view("d", "", "EC2NodeClass"), managed)  # a dict without the group (invalid: read as given)
    assert is_managed(view("e", "karpenter.kakaocloud.com", "KCNodeClass"), None)


async def test_another_clouds_nodepool_is_neither_provisioned_nor_given_a_status() -> None:
    provider = load_provider("simulated", {"node_classes": ["EC2NodeClass"]})
    sim = Simulator(provider)
    sim.apply([
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"}, "spec": {}},
        {"apiVersion": "karpenter.kakaocloud.com/v1alpha1", "kind": "KCNodeClass", "metadata": {"name": "default"}, "spec": {}},
        nodepool("aws", "karpenter.k8s.aws", "EC2NodeClass"),
        nodepool("kc", "karpenter.kakaocloud.com", "KCNodeClass"),
        pod("for-aws", "aws"), pod("for-kc", "kc"),
    ])
    await sim.run(max_seconds=120)
    claims = sim.cluster.objects("NodeClaim")
    assert [c["metadata"]["labels"]["karpenter.sh/nodepool"] for c in claims] == ["aws"]
    assert must_peek(sim.cluster, "Pod", "for-kc", "default")["spec"].get("nodeName") is None
    assert must_peek(sim.cluster, "NodePool", "aws").get("status", {}).get("nodes") == 1
    assert "status" not in must_peek(sim.cluster, "NodePool", "kc")  # not ours: no conditions written
