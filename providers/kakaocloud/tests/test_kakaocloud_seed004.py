"""Seed 004 end to end against the fake OpenAPI: Secrets -> KCNodeClass (all conditions True) ->
NodePool -> karpenter-demo (3 replicas) -> signed VMs -> Nodes in the simulator -> Deployment and
NodeClaims deleted -> VMs deleted."""

from __future__ import annotations

import base64

from kakaocloud_fake_server import CLUSTER_ID, FakeKakaoCloud
from kakaocloud_fixtures import CA_HASH, SEEDS, keyring_json, secret_obj
from karpy_kakaocloud import ownership
from karpy_kakaocloud.credentials import parse_keyring
from karpy_kakaocloud.plugin import KakaoCloudProvider

from karpy_core.apis.base import to_kube_dict
from karpy_core.apis.loader import load_documents
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.simulator import Simulator
from karpy_core.utils.clock import VirtualClock

NS = "karpenter-kakaocloud"
VARS = {"SUBNET_ID": "subnet-a", "WORKER_SECURITY_GROUP_ID": "sg-worker", "KUBERNETES_VERSION": "1.35"}


def seed_objects(nodepool: str = "004-nodepool.yaml", variables: dict[str, str] | None = None) -> list[dict]:
    loaded = load_documents([SEEDS / "004-kcnodeclass.yaml", SEEDS / nodepool, SEEDS / "004-karpenter-demo.yaml"], variables or VARS)
    return [to_kube_dict(o) for o in loaded.objects()]


def simulator_with_secrets(provider: CloudProvider, secrets: list[dict], **kwargs: object) -> Simulator:
    """A Simulator whose in-memory cluster holds ``secrets`` when the plugin is prepared, as
    ``karpy simulate`` stores the manifests' Secrets first: the plugin loads its sources then (from
    this cluster, bound first: an Operator built before may have given it another)."""
    clock = VirtualClock()
    cluster = InMemoryCluster(clock)
    for secret in secrets:
        cluster.create_sync("Secret", secret)
    plugin = provider.plugin
    assert isinstance(plugin, KakaoCloudProvider)
    plugin.bind_kube(cluster)
    return Simulator(provider, clock=clock, cluster=cluster, **kwargs)  # type: ignore[arg-type]


def seed_secrets(fake: FakeKakaoCloud, keyring: str | None = None) -> list[dict]:
    """Seed 004's credentials and keyring Secrets for the fake cloud."""
    return [
        secret_obj(NS, "kakaocloud-credentials", {
            "applicationCredentialId": fake.credential_id, "applicationCredentialSecret": fake.credential_secret, "region": "kr-central-2",
        }),
        secret_obj(NS, "karpenter-sigkey", {"keyring.json": keyring or keyring_json()}),
    ]


async def start(fake: FakeKakaoCloud, make_provider, nodepool: str = "004-nodepool.yaml") -> tuple[Simulator, KakaoCloudProvider]:
    plugin = make_provider(with_credentials=False, with_keyring=False)
    sim = simulator_with_secrets(CloudProvider(plugin), seed_secrets(fake))
    plugin.bind_kube(sim.cluster)
    sim.apply(seed_objects(nodepool))
    return sim, plugin


async def drain_all(sim: Simulator) -> None:
    """Delete every NodeClaim through the cluster and run the finalizers until they are gone."""
    for nc in sim.cluster.objects("NodeClaim"):
        await sim.cluster.delete("NodeClaim", nc["metadata"]["name"])
    termination = NodeTermination(kube=sim.cluster)
    for _ in range(20):
        await sim.lifecycle.reconcile()
        await termination.reconcile()
        if not sim.cluster.objects("NodeClaim"):
            return
    raise AssertionError(f"NodeClaims left: {[n['metadata']['name'] for n in sim.cluster.objects('NodeClaim')]}")


async def test_seed_004_flow(fake, make_provider):
    sim, plugin = await start(fake, make_provider)
    resolved = await plugin.reconcile_nodeclass("karpenter-default")
    assert resolved.ready, resolved.not_ready_message()
    stored = sim.cluster.peek("KCNodeClass", "karpenter-default")
    assert stored is not None
    status = stored["status"]
    conds = {c["type"]: c["status"] for c in status["conditions"]}
    assert conds == dict.fromkeys(
        ["KubernetesVersionReady", "ImagesReady", "SubnetsReady", "SecurityGroupsReady", "KeyPairReady", "Ready"], "True"
    )
    assert status["subnets"] == [{"id": "subnet-a", "zone": "kr-central-2-a"}]
    assert status["securityGroups"] == [{"id": "sg-worker", "name": "kke-worker-sg"}]

    await sim.run(max_seconds=3600)
    pods = sim.cluster.objects("Pod")
    assert len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)
    nodes = sim.cluster.objects("Node")
    assert nodes
    keyring = parse_keyring(keyring_json())
    for node in nodes:
        assert node["metadata"]["labels"]["kakaoi.io/kke-nodepool"] == "karpenter-default"
        assert node["metadata"]["labels"]["workload-type"] == "karpenter"
        assert node["metadata"]["labels"]["topology.kubernetes.io/zone"] == "kr-central-2-a"
        assert node["spec"]["providerID"].startswith("kakaocloud:///kr-central-2-a/")
    assert len(fake.instances) == len(nodes)
    for inst in fake.instances.values():
        assert inst["status"] == "active"
        assert len(inst["description"]) <= 100
        verdict = ownership.verify(inst["description"], keyring, CLUSTER_ID, inst["id"])
        assert verdict.owned and verdict.nodeclaim in {n["metadata"]["name"] for n in nodes}
        assert inst["security_groups"] == [{"name": "kke-worker-sg"}]
        assert inst["_subnets"] == ["subnet-a"]
        script = base64.b64decode(inst["_user_data"]).decode()
        assert "kubeadm join 10.0.0.10:6443" in script and CA_HASH in script
        assert "kakaoi.io/kke-nodepool=karpenter-default" in script
    tokens = [s for s in sim.cluster.objects("Secret") if s.get("type") == "bootstrap.kubernetes.io/token"]
    assert len(tokens) == len(nodes)
    assert all(t["metadata"]["namespace"] == "kube-system" for t in tokens)

    # list (garbage collection's view) sees exactly the launched VMs
    listed = await sim.provider.list()
    listed_ids = [c.status.provider_id for c in listed]
    assert None not in listed_ids
    assert sorted(i for i in listed_ids if i is not None) == sorted(n["spec"]["providerID"] for n in nodes)

    await sim.cluster.delete("Deployment", "karpenter-demo", "default")
    await sim.step()
    await drain_all(sim)
    assert fake.instances == {}
    assert not sim.cluster.objects("Node")
    assert plugin.reported == {}


async def test_seed_004_cilium_startup_taint(fake, make_provider):
    sim, _plugin = await start(fake, make_provider, "004-nodepool-cilium.yaml")
    await sim.run(max_seconds=3600)
    assert all(p["spec"].get("nodeName") for p in sim.cluster.objects("Pod"))
    for inst in fake.instances.values():
        script = base64.b64decode(inst["_user_data"]).decode()
        assert "node.cilium.io/agent-not-ready=true:NoExecute" in script
    for nc in sim.cluster.objects("NodeClaim"):
        assert {c["type"]: c["status"] for c in nc["status"]["conditions"]}["Initialized"] == "True"
    for node in sim.cluster.objects("Node"):
        assert not any(t["key"] == "node.cilium.io/agent-not-ready" for t in node["spec"].get("taints") or [])


async def test_seed_004_vms_are_deleted_after_consolidate_after(fake, make_provider):
    """Seed 004's last step: delete the demo workload and the empty nodes' VMs go once the
    NodePool's consolidateAfter (10m) has passed - through karpy's emptiness disruption, the drain
    and the provider's signed-ownership delete."""
    plugin = make_provider(with_credentials=False, with_keyring=False)
    sim = simulator_with_secrets(CloudProvider(plugin), seed_secrets(fake), disruption=True)
    plugin.bind_kube(sim.cluster)
    sim.apply(seed_objects())
    await sim.run_until(sim.clock.now() + 600)
    assert fake.instances and all(p["spec"].get("nodeName") for p in sim.cluster.objects("Pod"))
    vms = len(fake.instances)
    # the simulated cluster has no garbage collector for Deployments: scaling to 0 deletes the pods
    sim.cluster.patch_sync("Deployment", "karpenter-demo", {"spec": {"replicas": 0}}, "default")
    emptied = sim.clock.now()
    await sim.run_until(emptied + 9 * 60)
    assert len(fake.instances) == vms, "deleted before consolidateAfter (10m)"
    await sim.run_until(emptied + 13 * 60)
    assert fake.instances == {}
    assert not sim.cluster.objects("Node") and not sim.cluster.objects("NodeClaim")
    assert plugin.reported == {}
