"""The AWS provider against moto: seeds and examples driven by the simulator, ICE and spot-role
fallbacks, garbage collection, interruption, drift."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from aws_moto import CLUSTER, FAULTS, session
from karpy_aws.apis import EC2NodeClass
from karpy_aws.nodeclass import COND_SG_CLUSTER_TAG, condition

from karpy_core.apis.base import to_kube_dict
from karpy_core.apis.loader import load_documents
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.controllers.nodeclaim.garbagecollection import garbage_collect
from karpy_core.errors import InsufficientCapacityError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.sim.simulator import Simulator
from karpy_core.testing import nodeclaim_for
from karpy_core.utils.clock import VirtualClock

DATA = Path(__file__).resolve().parents[3] / "tests" / "data"
REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def _cond(nodeclass, type_: str):
    """The NodeClass's ``type_`` condition, which the test expects to be there."""
    found = condition(nodeclass, type_)
    assert found is not None, f"no {type_} condition"
    return found


def stored(kube: InMemoryCluster, kind: str, name: str) -> dict[str, Any]:
    """An object the test expects in the in-memory cluster."""
    obj = kube.peek(kind, name)
    assert obj is not None, (kind, name)
    return obj


def deployment(name: str, replicas: int, cpu: str = "500m") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "pause",
                                                           "resources": {"requests": {"cpu": cpu, "memory": "128Mi"}}}]}}}}


async def simulate(plugin: Any, paths: list[Path], extra: list[dict[str, Any]]) -> Simulator:
    loaded = load_documents([str(p) for p in paths], {"CLUSTER_NAME": CLUSTER})
    sim = Simulator(CloudProvider(plugin))
    plugin.kube = sim.cluster
    plugin.events.kube = sim.cluster
    sim.apply([to_kube_dict(o) for o in loaded.objects()] + extra)
    await sim.run(max_seconds=600)
    return sim


async def describe(url: str, instance_ids: list[str]) -> list[dict[str, Any]]:
    async with session().client("ec2", endpoint_url=url) as ec2:
        resp = await ec2.describe_instances(InstanceIds=instance_ids)
    return [i for r in resp["Reservations"] for i in r["Instances"]]


async def launch_template_data(url: str, name: str) -> dict[str, Any]:
    async with session().client("ec2", endpoint_url=url) as ec2:
        resp = await ec2.describe_launch_template_versions(LaunchTemplateName=name)
    return resp["LaunchTemplateVersions"][0]["LaunchTemplateData"]


def instance_ids(sim: Simulator) -> list[str]:
    return [nc["status"]["providerID"].rsplit("/", 1)[-1] for nc in sim.cluster.objects("NodeClaim")
            if (nc.get("status") or {}).get("providerID")]


def tags(inst: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags") or []}


async def test_seed_000_runs_t2_instances_and_delete_terminates(plugin_factory, seeded):
    plugin = plugin_factory()
    sim = await simulate(plugin, [DATA / "seeds/000-repaired.yaml", DATA / "sim/000-inflate.yaml"], [])
    ids = instance_ids(sim)
    assert ids, sim.pending_reasons
    instances = await describe(seeded.url, ids)
    total_cpu = 0
    for inst in instances:
        assert inst["State"]["Name"] == "running"
        assert inst["InstanceType"] in ("t2.small", "t2.medium")
        assert inst["Placement"]["AvailabilityZone"] in ("ap-northeast-2a", "ap-northeast-2b")
        assert inst["ImageId"] == "ami-0123456789abcdef0"
        t = tags(inst)
        assert t[f"kubernetes.io/cluster/{CLUSTER}"] == "owned" and t["eks:eks-cluster-name"] == CLUSTER
        assert t["karpenter.sh/nodepool"] == "nodepool" and t["karpenter.k8s.aws/ec2nodeclass"] == "ec2nodeclass"
        assert t["nodegroup"] == "karpenter"  # NodeClass tags propagate
        total_cpu += {"t2.small": 1, "t2.medium": 2}[inst["InstanceType"]]
    assert total_cpu <= 5  # the NodePool's cpu limit
    # AL2 user data bootstraps with bootstrap.sh
    req = plugin.launcher.fleet_requests[-1]
    assert req["OnDemandOptions"] == {"AllocationStrategy": "lowest-price"}
    lt = await launch_template_data(seeded.url, req["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"])
    assert "/etc/eks/bootstrap.sh 'eks'" in base64.b64decode(lt["UserData"]).decode()
    # deleting a NodeClaim terminates its instance
    nc = sim.cluster.objects("NodeClaim")[0]
    await sim.cluster.delete("NodeClaim", nc["metadata"]["name"])
    termination = NodeTermination(kube=sim.cluster)  # core's drain + Node finalizer
    for _ in range(6):
        await sim.lifecycle.reconcile()
        await termination.reconcile()
    gone = nc["status"]["providerID"].rsplit("/", 1)[-1]
    (inst,) = await describe(seeded.url, [gone])
    assert inst["State"]["Name"] in ("shutting-down", "terminated")
    assert sim.cluster.peek("NodeClaim", nc["metadata"]["name"]) is None


async def test_seed_002_gp3_volumes_imds_and_spot_fleet(plugin_factory, seeded):
    plugin = plugin_factory()
    sim = await simulate(plugin, [DATA / "seeds/002-gp3-block-devices.yaml"], [deployment("web", 3)])
    ids = instance_ids(sim)
    assert ids, sim.pending_reasons
    for inst in await describe(seeded.url, ids):
        assert inst["InstanceLifecycle"] == "spot"  # spot allowed and available: spot first
        assert tags(inst)["karpenter.sh/nodepool"] == "default"
    req = plugin.launcher.fleet_requests[-1]
    assert req["Type"] == "instant" and req["SpotOptions"] == {"AllocationStrategy": "price-capacity-optimized"}
    assert req["TargetCapacitySpecification"] == {"DefaultTargetCapacityType": "spot", "TotalTargetCapacity": 1}
    assert {t["ResourceType"] for t in req["TagSpecifications"]} == {"instance", "volume", "fleet"}
    overrides = [o for c in req["LaunchTemplateConfigs"] for o in c["Overrides"]]
    assert len(overrides) > 3 and all(o["SubnetId"] in seeded.subnets.values() for o in overrides)
    assert len({(o["InstanceType"], o["AvailabilityZone"]) for o in overrides}) == len(overrides)
    name = req["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"]
    assert name.startswith("karpenter.k8s.aws/")
    lt = await launch_template_data(seeded.url, name)
    assert lt["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": True, "DeleteOnTermination": True, "Iops": 3000, "VolumeSize": 100,
                                            "VolumeType": "gp3", "Throughput": 125}},
        {"DeviceName": "/dev/xvdb", "Ebs": {"Encrypted": True, "DeleteOnTermination": True, "Iops": 3000, "VolumeSize": 20,
                                            "VolumeType": "gp3", "Throughput": 125}},
    ]
    assert lt["MetadataOptions"]["HttpTokens"] == "required" and lt["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert lt["NetworkInterfaces"][0]["Groups"] == [seeded.security_group]
    assert lt["IamInstanceProfile"]["Name"].startswith(f"{CLUSTER}_")
    user_data = base64.b64decode(lt["UserData"]).decode()
    assert "application/node.eks.aws" in user_data and '"kind": "NodeConfig"' in user_data
    # ephemeral storage follows the 100Gi root volume
    nc = sim.cluster.objects("NodeClaim")[0]
    assert nc["status"]["capacity"]["ephemeral-storage"] == "100Gi"


async def test_network_interfaces_connection_tracking_prefixes_and_placement_group_reach_the_launch_template(
        plugin_factory, seeded, tmp_path):
    """Issue 29: EC2NodeClass v1.14 fields that were accepted as free-form maps and then ignored
    are typed, validated and written into the launch template as Karpenter writes them."""
    import yaml

    docs = list(yaml.safe_load_all((DATA / "seeds/002-gp3-block-devices.yaml").read_text()))
    spec = docs[0]["spec"]
    spec["networkInterfaces"] = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                                 {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"}]
    spec["connectionTracking"] = {"tcpEstablishedTimeout": 3600, "udpTimeout": 45}
    spec["ipPrefixCount"] = 2
    spec["placementGroupSelector"] = {"name": "analytics"}
    path = tmp_path / "nodeclass.yaml"
    path.write_text(yaml.safe_dump_all(d for d in docs if d))
    plugin = plugin_factory()
    # PlacementGroupReady: False while the group does not exist, and nothing launches
    nc = EC2NodeClass.model_validate({**docs[0], "metadata": {"name": "default"}, "spec": {
        **spec, "role": "KarpenterNodeRole-eks", "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}],
        "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": CLUSTER}}]}})
    res = await plugin.resolver.resolve(nc, use_cache=False)
    pg = _cond(res.nodeclass, "PlacementGroupReady")
    assert not res.ready and (pg.status, pg.reason) == ("False", "PlacementGroupNotFound") and "analytics" in pg.message
    FAULTS.placement_groups.append({"GroupName": "analytics", "GroupId": "pg-0abc", "Strategy": "cluster", "State": "available"})
    res = await plugin.resolver.resolve(nc, use_cache=False)
    assert res.ready and _cond(res.nodeclass, "PlacementGroupReady").status == "True"
    assert _cond(res.nodeclass, "CapacityReservationsReady").status == "True"  # the gate is on: present, as in Karpenter
    sim = await simulate(plugin, [path], [deployment("web", 1)])
    assert instance_ids(sim), sim.pending_reasons
    req = plugin.launcher.fleet_requests[-1]
    lt = await launch_template_data(seeded.url, req["LaunchTemplateConfigs"][0]["LaunchTemplateSpecification"]["LaunchTemplateName"])
    primary, efa = sorted(lt["NetworkInterfaces"], key=lambda n: n["DeviceIndex"])
    assert primary["Groups"] == efa["Groups"] == [seeded.security_group]
    assert (primary["NetworkCardIndex"], primary["InterfaceType"], primary["Ipv4PrefixCount"]) == (0, "interface", 2)
    assert primary["ConnectionTrackingSpecification"] == {"TcpEstablishedTimeout": 3600, "UdpTimeout": 45}
    assert (efa["DeviceIndex"], efa["InterfaceType"]) == (1, "efa-only") and "ConnectionTrackingSpecification" not in efa
    assert lt["Placement"] == {"GroupName": "analytics"}


def test_typed_nodeclass_fields_refuse_what_the_crd_refuses():
    from pydantic import ValidationError
    from test_conformance_aws import NODECLASS

    base = to_kube_dict(NODECLASS)
    for field, value, message in (
        ("networkInterfaces", [{"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "interface"}], "primary interface"),
        ("networkInterfaces", [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
                               {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "efa-only"}], "duplicate"),
        ("placementGroupSelector", {"name": "a", "id": "pg-1"}, "mutually exclusive"),
        ("placementGroupSelector", {"id": "PG_1"}, "pattern"),
        ("connectionTracking", {}, "at least one of"),
        ("connectionTracking", {"udpTimeout": 90}, "less than or equal to 60"),
        ("cpuOptions", {"nestedVirtualization": "on"}, "'enabled' or 'disabled'"),
    ):
        bad = {**base, "spec": {**base["spec"], field: value}}
        with pytest.raises(ValidationError, match=message):
            EC2NodeClass.model_validate(bad)


async def test_general_purpose_example_on_demand_cmr(plugin_factory, seeded, examples_dir):
    plugin = plugin_factory()
    sim = await simulate(plugin, [examples_dir / "nodepools/general-purpose.yaml"], [deployment("app", 4)])
    ids = instance_ids(sim)
    assert ids, sim.pending_reasons
    for inst in await describe(seeded.url, ids):
        family = inst["InstanceType"].split(".")[0]
        assert family[0] in "cmr" and int(family[1]) > 2
        assert inst.get("InstanceLifecycle") != "spot"
        assert inst["ImageId"] == "ami-0a1023x86standard"


async def test_ice_on_cheapest_type_moves_to_next_offering(plugin_factory, seeded):
    from test_conformance_aws import NODECLASS

    plugin = plugin_factory(nodeclasses={"default": NODECLASS})
    reqs = [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large", "m5.xlarge", "c5.large"]}]
    first = await plugin.karpy_create(nodeclaim_for("a", REF, reqs))
    cheapest = first.metadata.labels["node.kubernetes.io/instance-type"]
    FAULTS.ice_types = {cheapest}
    with pytest.raises(InsufficientCapacityError) as err:
        await plugin.karpy_create(nodeclaim_for("b", REF, [*reqs[:1], {"key": "node.kubernetes.io/instance-type",
                                                                         "operator": "In", "values": [cheapest]}]))
    assert err.value.code == "InsufficientInstanceCapacity"
    assert all(plugin.unavailable.is_unavailable("on-demand", cheapest, z) for z in seeded.subnets)
    nxt = await plugin.karpy_create(nodeclaim_for("c", REF, reqs))
    assert nxt.metadata.labels["node.kubernetes.io/instance-type"] != cheapest
    assert cheapest not in FAULTS.calls[-1]["types"]  # the unavailable type is no longer offered
    types = {t.name: t for t in await plugin.karpy_get_instance_types(nodepool_default())}
    assert not any(o.available for o in types[cheapest].offerings if o.capacity_type == "on-demand")
    plugin.now = lambda: 10**11  # 3 minutes later the offerings come back
    plugin.unavailable._now = plugin.now
    assert not plugin.unavailable.is_unavailable("on-demand", cheapest, "ap-northeast-2a")


def nodepool_default():
    from karpy_core.testing import nodepool_for

    return nodepool_for(REF)


async def test_missing_spot_role_falls_back_to_on_demand_with_event(plugin_factory, seeded):
    plugin = plugin_factory()
    FAULTS.spot_slr = True
    sim = await simulate(plugin, [DATA / "seeds/002-gp3-block-devices.yaml"], [deployment("web", 2)])
    events = plugin.events.find("SpotServiceLinkedRoleMissing")
    assert events and "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com" in events[0].message
    assert any(c["lifecycle"] == "spot" for c in FAULTS.calls)
    assert FAULTS.calls[-1]["lifecycle"] == "on-demand"
    ids = instance_ids(sim)
    assert ids
    for inst in await describe(seeded.url, ids):
        assert inst.get("InstanceLifecycle") != "spot"
    assert any(e["reason"] == "SpotServiceLinkedRoleMissing" for e in sim.cluster.objects("Event"))


async def test_gc_terminates_leaked_tagged_instance_never_untagged(plugin_factory, seeded):
    from test_conformance_aws import NODECLASS

    plugin = plugin_factory(nodeclasses={"default": NODECLASS})
    leaked = await plugin.karpy_create(nodeclaim_for("leak", REF, [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t3.small"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]))
    async with session().client("ec2", endpoint_url=seeded.url) as ec2:
        other = await ec2.run_instances(ImageId="ami-0a1023x86standard", InstanceType="t3.small", MinCount=1, MaxCount=1,
                                        TagSpecifications=[{"ResourceType": "instance", "Tags": [
                                            {"Key": "karpenter.sh/nodepool", "Value": "someone-elses"}]}])
    untagged = other["Instances"][0]["InstanceId"]
    kube = InMemoryCluster()
    provider = CloudProvider(plugin)
    leaked_id = leaked.status.provider_id.rsplit("/", 1)[-1]
    # younger than 30 s: kept
    assert await garbage_collect(kube, provider, VirtualClock(start=__import__("time").time())) == []
    done = await garbage_collect(kube, provider, VirtualClock(start=__import__("time").time() + 60))
    assert done == [leaked.status.provider_id]
    states = {i["InstanceId"]: i["State"]["Name"] for i in await describe(seeded.url, [leaked_id, untagged])}
    assert states[leaked_id] in ("shutting-down", "terminated") and states[untagged] == "running"
    with pytest.raises(Exception, match="refusing to terminate"):
        await plugin.karpy_delete(leaked.model_copy(update={"status": leaked.status.model_copy(
            update={"provider_id": f"aws:///ap-northeast-2a/{untagged}"})}))


async def test_interruption_deletes_nodeclaim_and_marks_spot(plugin_factory, seeded):
    from test_conformance_aws import NODECLASS

    kube = InMemoryCluster()
    plugin = plugin_factory(nodeclasses={"default": NODECLASS}, kube=kube, interruption_queue="karpy-interruption")
    launched = await plugin.karpy_create(nodeclaim_for("spotty", REF, [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]))
    kube.create_sync("NodeClaim", to_kube_dict(launched))
    instance_id = launched.status.provider_id.rsplit("/", 1)[-1]
    async with session().client("sqs", endpoint_url=seeded.url) as sqs:
        url = (await sqs.create_queue(QueueName="karpy-interruption"))["QueueUrl"]
        await sqs.send_message(QueueUrl=url, MessageBody="not json")
        await sqs.send_message(QueueUrl=url, MessageBody=json.dumps({
            "version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
            "detail": {"instance-id": instance_id, "instance-action": "terminate"}}))
        handler = plugin.interruption_handler()
        handled = []
        for _ in range(3):
            handled += await handler.poll_once(wait_seconds=1)
        left = await sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0)
    assert [m.kind for m in handled] == ["spot_interrupted"]
    assert not left.get("Messages")  # both messages, the unparseable one too, were deleted
    nc = kube.peek("NodeClaim", "spotty")
    assert nc is None or nc["metadata"].get("deletionTimestamp")
    zone = launched.metadata.labels["topology.kubernetes.io/zone"]
    assert plugin.unavailable.is_unavailable("spot", "m5.large", zone)
    # Karpenter's interruption metrics, served through the controller's registry
    metrics = Metrics()
    metrics.adopt(plugin.metrics_registry)
    assert metrics.registry.get_sample_value("karpenter_interruption_received_messages_total", {"message_type": "spot_interrupted"}) == 1
    assert metrics.registry.get_sample_value("karpenter_interruption_received_messages_total", {"message_type": "no_op"}) == 1
    assert metrics.registry.get_sample_value("karpenter_interruption_deleted_messages_total", {}) == 2
    assert metrics.registry.get_sample_value("karpenter_interruption_message_queue_duration_seconds_count", {}) == 2


async def test_drift_nodeclass_hash_and_ami(plugin_factory, seeded):
    from test_conformance_aws import NODECLASS

    plugin = plugin_factory(nodeclasses={"default": NODECLASS})
    launched = await plugin.karpy_create(nodeclaim_for("d", REF, [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t3.small"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]))
    assert await plugin.karpy_is_drifted(launched) == ""
    changed = NODECLASS.model_copy(deep=True)
    changed.spec.tags = {"team": "x"}
    plugin.nodeclasses["default"] = changed
    assert await plugin.karpy_is_drifted(launched) == "NodeClassDrift"
    plugin.nodeclasses["default"] = NODECLASS
    old = launched.model_copy(deep=True)
    old.status.image_id = "ami-00000000000000old"
    assert await plugin.karpy_is_drifted(old) == "AMIDrift"


def _as_model(obj: Any) -> EC2NodeClass:
    return obj if isinstance(obj, EC2NodeClass) else EC2NodeClass.model_validate(to_kube_dict(obj))


EXPECTED = {
    "al2-custom-ami.yaml": "AMINotFound",
    "custom-family.yaml": "AMINotFound",
}


async def test_every_nodepool_example_resolves_ready_or_explains(plugin_factory, examples_dir):
    plugin = plugin_factory()
    results = {}
    for path in sorted((examples_dir / "nodepools").glob("*.yaml")):
        loaded = load_documents([str(path)], {"CLUSTER_NAME": CLUSTER})
        for obj in loaded.objects():
            if obj.KIND != "EC2NodeClass":
                continue
            res = await plugin.resolver.resolve(_as_model(obj), use_cache=False)
            ready = _cond(res.nodeclass, "Ready")
            assert ready is not None and ready.status in ("True", "False")
            if ready.status == "False":
                assert ready.reason and ready.message, path.name
            results[path.name] = "Ready" if res.ready else ready.reason
    for name, reason in results.items():
        assert reason == EXPECTED.get(name, "Ready"), (name, reason, results)
    assert len(results) == 17


async def test_sg_cluster_tag_conflict_and_subnet_not_found_messages(moto_url, instance_type_data):
    from aws_moto import make_plugin, seed

    seeded = await seed(moto_url, cluster_tagged_sgs=2)
    plugin = make_plugin(moto_url, instance_type_data)
    try:
        from test_conformance_aws import NODECLASS

        res = await plugin.resolver.resolve(NODECLASS)
        assert res.ready
        warn = _cond(res.nodeclass, COND_SG_CLUSTER_TAG)
        assert warn is not None and warn.status == "True"
        for g in seeded.extra["cluster_sgs"]:
            assert g in warn.message
        assert plugin.events.find("MultipleClusterTaggedSecurityGroups")
        bad = NODECLASS.model_copy(deep=True)
        bad.spec.subnet_selector_terms[0].tags = {"karpenter.sh/discovery": "nope"}
        res = await plugin.resolver.resolve(bad)
        sub = _cond(res.nodeclass, "SubnetsReady")
        assert not res.ready and sub.reason == "SubnetsNotFound" and "tag:karpenter.sh/discovery=nope" in sub.message
        # restricted tags slipped past admission (model_construct) are refused at runtime too
        tagged = NODECLASS.model_copy(deep=True)
        tagged.spec.tags = {"karpenter.sh/nodepool": "x"}
        res = await plugin.resolver.resolve(tagged)
        assert _cond(res.nodeclass, "ValidationSucceeded").reason == "TagValidationFailed"
    finally:
        await plugin.aclose()


async def test_nodeclass_controller_writes_status(plugin_factory):
    from test_conformance_aws import NODECLASS

    kube = InMemoryCluster()
    kube.create_sync("EC2NodeClass", to_kube_dict(NODECLASS))
    bad = to_kube_dict(NODECLASS)
    bad["metadata"] = {"name": "bad"}
    bad["spec"]["tags"] = {"kubernetes.io/cluster/eks": "owned"}
    kube.create_sync("EC2NodeClass", bad)
    plugin = plugin_factory(kube=kube)
    assert await plugin.nodeclass_controller().reconcile() == {"bad": False, "default": True}
    status = stored(kube, "EC2NodeClass", "default")["status"]
    assert status["subnets"] and status["securityGroups"] and status["amis"] and status["instanceProfile"]
    conds = {c["type"]: c for c in stored(kube, "EC2NodeClass", "bad")["status"]["conditions"]}
    assert conds["ValidationSucceeded"]["reason"] == "TagValidationFailed"


async def test_nodeclass_controller_restamps_claims_karpenter_launched(plugin_factory):
    """Issue 29: NodeClaims Karpenter launched carry its EC2NodeClass hash and hash version (v4);
    the status loop re-stamps them with karpy's (the hash only where not already drifted), so
    NodeClassDrift works after the switch."""
    from karpy_aws.nodeclass import NODECLASS_HASH_ANNOTATION, NODECLASS_HASH_VERSION, NODECLASS_HASH_VERSION_ANNOTATION, nodeclass_hash
    from test_conformance_aws import NODECLASS

    kube = InMemoryCluster()
    kube.create_sync("EC2NodeClass", to_kube_dict(NODECLASS))
    karpenters = {NODECLASS_HASH_ANNOTATION: "4711", NODECLASS_HASH_VERSION_ANNOTATION: "v4"}
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    drifted = [{"type": "Drifted", "status": "True", "reason": "NodeClassDrift", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    for name, conds in (("old", []), ("old-drifted", drifted)):
        kube.create_sync("NodeClaim", {"metadata": {"name": name, "annotations": dict(karpenters)},
                                       "spec": {"nodeClassRef": ref, "requirements": []}, "status": {"conditions": conds}})
    kube.create_sync("NodeClaim", {"metadata": {"name": "unhashed"}, "spec": {"nodeClassRef": ref, "requirements": []}})
    plugin = plugin_factory(kube=kube)
    assert await plugin.nodeclass_controller().reconcile() == {"default": True}
    current = nodeclass_hash(NODECLASS)
    assert stored(kube, "NodeClaim", "old")["metadata"]["annotations"] == {
        NODECLASS_HASH_ANNOTATION: current, NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION}
    assert stored(kube, "NodeClaim", "old-drifted")["metadata"]["annotations"] == {
        NODECLASS_HASH_ANNOTATION: "4711", NODECLASS_HASH_VERSION_ANNOTATION: NODECLASS_HASH_VERSION}
    assert not stored(kube, "NodeClaim", "unhashed")["metadata"].get("annotations")


async def test_deleted_nodeclass_waits_for_its_claims_then_cleans_up_what_karpy_made(plugin_factory, seeded):
    """Issue 29: Karpenter's termination finalizer on the EC2NodeClass. While a NodeClaim uses it
    the NodeClass stays (an event names the claim); then its managed instance profile and the
    launch templates tagged with it go, and so does the NodeClass. A launch template of another
    NodeClass and one without karpy's tags stay."""
    from karpy_aws.nodeclass import NODECLASS_FINALIZER
    from test_conformance_aws import NODECLASS

    kube = InMemoryCluster()
    kube.create_sync("EC2NodeClass", to_kube_dict(NODECLASS))
    plugin = plugin_factory(kube=kube)
    ctl = plugin.nodeclass_controller()
    assert await ctl.reconcile() == {"default": True}
    assert stored(kube, "EC2NodeClass", "default")["metadata"]["finalizers"] == [NODECLASS_FINALIZER]
    profile = stored(kube, "EC2NodeClass", "default")["status"]["instanceProfile"]
    async with session().client("ec2", endpoint_url=seeded.url) as ec2:
        for name, nodeclass in (("karpenter.k8s.aws/mine", "default"), ("karpenter.k8s.aws/other", "other")):
            await ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={"ImageId": "ami-1"}, TagSpecifications=[
                {"ResourceType": "launch-template", "Tags": [{"Key": "eks:eks-cluster-name", "Value": CLUSTER},
                                                            {"Key": "karpenter.k8s.aws/ec2nodeclass", "Value": nodeclass}]}])
        await ec2.create_launch_template(LaunchTemplateName="someone-elses", LaunchTemplateData={"ImageId": "ami-1"})
    kube.create_sync("NodeClaim", {"metadata": {"name": "c1"}, "spec": {"requirements": [], "nodeClassRef": REF}})
    await kube.delete("EC2NodeClass", "default")
    await ctl.reconcile()
    assert kube.peek("EC2NodeClass", "default") is not None
    assert plugin.events.find("WaitingOnNodeClaimTermination")[-1].message == "Waiting on NodeClaim termination for c1"
    async with session().client("iam", endpoint_url=seeded.url) as iam:
        await iam.get_instance_profile(InstanceProfileName=profile)  # still there
    await kube.delete("NodeClaim", "c1")
    await ctl.reconcile()
    assert kube.peek("EC2NodeClass", "default") is None
    async with session().client("iam", endpoint_url=seeded.url) as iam:
        with pytest.raises(Exception, match="NoSuchEntity"):
            await iam.get_instance_profile(InstanceProfileName=profile)
    async with session().client("ec2", endpoint_url=seeded.url) as ec2:
        left = {t["LaunchTemplateName"] for t in (await ec2.describe_launch_templates())["LaunchTemplates"]}
    assert {"karpenter.k8s.aws/other", "someone-elses"} <= left and "karpenter.k8s.aws/mine" not in left


async def test_spot_prices_from_moto_are_bogus_and_replaced(plugin_factory):
    from karpy_core.cloudprovider.catalog.aws import spot_price

    plugin = plugin_factory()
    await plugin.pricing.refresh()
    assert plugin.pricing.spot_data_seen and plugin.pricing.bogus_spot_rows > 0
    od = plugin.pricing.on_demand_price("m5.large")
    assert plugin.pricing.spot_price("m5.large", "ap-northeast-2a") == spot_price(od, "m5.large", "ap-northeast-2a")
    assert "static" in plugin.pricing_note


async def test_nodeclass_change_drifts_and_rolls_instances(plugin_factory, seeded, examples_dir):
    """Drift end to end on the AWS provider: an EC2NodeClass edit changes its hash, the drift
    controller marks every NodeClaim ``Drifted=NodeClassDrift``, and the disruption controller rolls
    them (replacement launched and initialized first); the old instances are terminated in EC2 and
    the new ones carry the new tag."""
    plugin = plugin_factory()
    loaded = load_documents([str(examples_dir / "nodepools/general-purpose.yaml")], {"CLUSTER_NAME": CLUSTER})
    sim = Simulator(CloudProvider(plugin), disruption=True)
    plugin.kube = sim.cluster
    plugin.events.kube = sim.cluster
    sim.apply([to_kube_dict(o) for o in loaded.objects()] + [deployment("app", 4)])
    start = sim.clock.now()
    await sim.run_until(start + 600)
    before = set(instance_ids(sim))
    assert before, sim.pending_reasons
    (nodeclass,) = sim.cluster.objects("EC2NodeClass")
    await sim.cluster.patch("EC2NodeClass", nodeclass["metadata"]["name"], {"spec": {"tags": {"patch-wave": "2026-11"}}})
    await sim.run_until(start + 3 * 3600)
    drifted = [e for e in sim.events if e.kind == "drifted"]
    assert drifted and {e.reason for e in drifted} == {"NodeClassDrift"}
    assert any(e.kind == "disrupt" and e.details.get("method") == "drift" for e in sim.events)
    after = set(instance_ids(sim))
    assert after and after.isdisjoint(before)
    for inst in await describe(seeded.url, sorted(before)):
        assert inst["State"]["Name"] in ("shutting-down", "terminated")
    for inst in await describe(seeded.url, sorted(after)):
        assert inst["State"]["Name"] == "running" and tags(inst)["patch-wave"] == "2026-11"
    assert not [p for p in sim.cluster.objects("Pod") if not (p.get("spec") or {}).get("nodeName")]


async def test_create_after_a_restart_adopts_the_instance_instead_of_launching_another(plugin_factory, seeded):
    """The controller died after CreateFleet but before writing the NodeClaim's providerID: the
    next controller's create finds the instance by its ``karpenter.sh/nodeclaim`` tag."""
    from test_conformance_aws import NODECLASS

    reqs = [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["t3.small"]},
            {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]
    first = plugin_factory(nodeclasses={"default": NODECLASS})
    launched = await first.karpy_create(nodeclaim_for("restart-1", REF, reqs))
    (inst,) = await describe(seeded.url, [launched.status.provider_id.rsplit("/", 1)[-1]])
    assert tags(inst)["karpenter.sh/nodeclaim"] == "restart-1"

    second = plugin_factory(nodeclasses={"default": NODECLASS})  # a new process: no memory of the launch
    again = await second.karpy_create(nodeclaim_for("restart-1", REF, reqs))
    assert again.status.provider_id == launched.status.provider_id
    assert second.launcher.fleet_requests == []
    assert again.metadata.labels["node.kubernetes.io/instance-type"] == "t3.small"
    assert again.status.capacity == launched.status.capacity and again.status.image_id == launched.status.image_id
    other = await second.karpy_create(nodeclaim_for("restart-2", REF, reqs))  # a different claim still launches
    assert other.status.provider_id != launched.status.provider_id and len(second.launcher.fleet_requests) == 1
    for p in (launched, other):
        await second.karpy_delete(p)


async def test_registered_instances_get_name_and_nodeclaim_tags(plugin_factory, seeded, examples_dir):
    from karpy_aws.tagging import InstanceTagging

    plugin = plugin_factory()
    sim = await simulate(plugin, [examples_dir / "nodepools/general-purpose.yaml"], [deployment("tagged", 3)])
    claims = [nc for nc in sim.cluster.objects("NodeClaim") if (nc.get("status") or {}).get("nodeName")]
    assert claims
    tagging = InstanceTagging(plugin)
    assert sorted(await tagging.reconcile()) == sorted(nc["metadata"]["name"] for nc in claims)
    assert await tagging.reconcile() == []  # annotated: never tagged twice
    for nc in claims:
        (inst,) = await describe(seeded.url, [nc["status"]["providerID"].rsplit("/", 1)[-1]])
        t = tags(inst)
        assert t["Name"] == nc["status"]["nodeName"] and t["karpenter.sh/nodeclaim"] == nc["metadata"]["name"]
        assert t["eks:eks-cluster-name"] == CLUSTER
        assert stored(sim.cluster, "NodeClaim", nc["metadata"]["name"])["metadata"]["annotations"]["karpenter.k8s.aws/tagged"] == "true"
