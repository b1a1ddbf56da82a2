"""The real controller against the real API server, kube-scheduler and kwok (issue: the real controller).

Each test isolates itself with a unique NodePool whose template carries the label
``karpy-e2e=<id>`` and workloads that select it, so NodePools other tests create never match.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.cloudprovider.simulated import SimulatedProvider
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.operator import ControllerSettings, LeaderSettings, Operator
from karpy_core.sim.kwok_nodes import KwokNodeBackend
from karpy_core.state.cluster import condition

from .karpy_env import ControllerProcess, wait_for

pytestmark = pytest.mark.devcluster


def present_condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    """The status condition ``type_`` of ``obj``, which the test expects to be set."""
    cond = condition(obj, type_)
    assert cond is not None, type_
    return cond


def nodepool(name: str, label: str, types: list[str] | None = None, consolidate_after: str = "Never",
             limits: dict[str, str] | None = None) -> dict[str, Any]:
    reqs: list[dict[str, Any]] = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["c", "m", "r"]},
    ]
    if types:
        reqs.append({"key": "node.kubernetes.io/instance-type", "operator": "In", "values": types})
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"karpy-e2e": label}}, "spec": {
            "requirements": reqs,
            "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
        }}, "disruption": {"consolidateAfter": consolidate_after}, **({"limits": limits} if limits else {})},
    }


def nodeclass(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": name},
        "spec": {
            "role": "KarpenterNodeRole-e2e",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "e2e"}}],
        },
    }


def deployment(name: str, label: str, replicas: int, cpu: str = "1", memory: str = "256Mi") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"karpy-e2e": label},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                },
            },
        },
    }


def daemonset(name: str, label: str) -> dict[str, Any]:
    """A small DaemonSet on the test's nodes (the real DaemonSet controller creates its pods)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"karpy-e2e": label},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"},
                                                  "limits": {"cpu": "20m", "memory": "32Mi"}}}],
                },
            },
        },
    }


async def scrape(operator: Operator) -> str:
    """The operator's /metrics text (served by this event loop: fetched from a thread)."""
    import urllib.request

    url = f"http://127.0.0.1:{operator.health.port}/metrics"
    return (await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=5).read())).decode()


def sample_sum(operator: Operator, family: str, **labels: str) -> float | None:
    """Sum of the registry's samples named ``family`` whose labels include ``labels`` (None: no such sample)."""
    found = [s.value for f in operator.metrics.registry.collect() for s in f.samples
             if s.name == family and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(found) if found else None


def start_operator(kube: AsyncKubeClient, tag: str) -> tuple[Operator, asyncio.Task[None]]:
    """An in-process operator (simulated provider, kwok Nodes) on its own Lease, running as a task."""
    # as `karpy controller` wires it: the provider reads the cluster (its NodeClass loop marks them Ready)
    provider = load_provider("simulated", {"node_backend": KwokNodeBackend(kube), "kube": kube})
    operator = Operator(kube=kube, provider=provider, settings=ControllerSettings.model_validate(dict(
        leader=LeaderSettings.model_validate(dict(namespace="default", lease_name=f"lease-{tag}")), health_port=0,
        health_host="127.0.0.1")))
    return operator, asyncio.create_task(operator.run())


async def stop_operator(task: asyncio.Task[None]) -> None:
    """Cancel the operator; fail if it does not stop within 30 s."""
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=30)
    assert done, "the operator did not stop within 30 s of cancellation"


async def pods_of(kube: AsyncKubeClient, app: str) -> list[dict[str, Any]]:
    return [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == app]


async def claims_of(kube: AsyncKubeClient, pool: str) -> list[dict[str, Any]]:
    return [c for c in await kube.list("NodeClaim") if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]


async def nodes_of(kube: AsyncKubeClient, pool: str) -> list[dict[str, Any]]:
    return [n for n in await kube.list("Node") if (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]


async def cleanup(kube: AsyncKubeClient, pool: str, app: str) -> None:
    """Delete the workload, then the pool's NodeClaims; their finalizers need a controller running."""
    try:
        await kube.delete("Deployment", app, "default")
    except Exception:
        pass
    for c in await claims_of(kube, pool):
        try:
            await kube.delete("NodeClaim", c["metadata"]["name"])
        except Exception:
            pass


async def test_deployment_of_20_pods_is_provisioned_bound_and_running(kube, devcluster):
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"e2e-{tag}", f"inflate-{tag}"
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", nodepool(pool, tag))
    operator, task = start_operator(kube, tag)
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")
        created = time.monotonic()
        await kube.create("Deployment", deployment(app, tag, 20))

        async def all_running() -> bool:
            pods = await pods_of(kube, app)
            return len(pods) == 20 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

        await wait_for(all_running, 120, "20 pods Running")
        elapsed = time.monotonic() - created

        async def all_initialized() -> bool:
            # kwok marks the Node Ready (and kube-scheduler binds) before karpy's next lifecycle
            # pass stamps Initialized: wait for that pass instead of racing it.
            cs = await claims_of(kube, pool)
            return bool(cs) and all(
                (condition(c, cond) or {}).get("status") == "True"
                for c in cs
                for cond in ("Launched", "Registered", "Initialized", "Ready")
            )

        await wait_for(all_initialized, 60, "NodeClaims Initialized and Ready")
        claims = await claims_of(kube, pool)
        nodes = await nodes_of(kube, pool)
        assert claims and len(nodes) == len(claims)
        for c in claims:
            for cond in ("Launched", "Registered", "Initialized", "Ready"):
                assert present_condition(c, cond)["status"] == "True", (c["metadata"]["name"], cond)
            assert c["status"]["providerID"].startswith("simulated:///")
        node_names = {n["metadata"]["name"] for n in nodes}
        pods = await pods_of(kube, app)
        assert {p["spec"]["nodeName"] for p in pods} <= node_names  # bound by the real kube-scheduler
        for n in nodes:
            assert n["metadata"]["labels"]["karpenter.sh/initialized"] == "true"
            assert not any(t["key"] == "karpenter.sh/unregistered" for t in n["spec"].get("taints") or [])
        status = (await kube.get("NodePool", pool))["status"]
        assert status["nodes"] == len(claims)
        # decisions are explained as Kubernetes events, and counted with Karpenter's metric names
        events = await kube.list("Event", "default")
        nominated = [e for e in events if e.get("reason") == "Nominated" and e["involvedObject"]["name"] in {p["metadata"]["name"] for p in pods}]
        assert nominated and all(e["message"].startswith("Pod should schedule on: nodeclaim/") for e in nominated)
        assert any(e.get("reason") == "Launched" and e["involvedObject"]["kind"] == "NodeClaim" for e in events)
        metrics = await scrape(operator)
        assert f'karpenter_nodeclaims_created_total{{min_values_relaxed="false",nodepool="{pool}",reason="provisioned"}} {len(claims)}.0' in metrics
        assert "karpenter_scheduler_scheduling_duration_seconds_count" in metrics
        assert present_condition({"status": status}, "Ready")["status"] == "True"

        # one decision engine: the simulator decides the same instance types
        from karpy_core.cli import run_simulation

        tmp = Path(devcluster.workdir) if hasattr(devcluster, "workdir") else Path("/tmp")
        manifests = tmp / f"e2e-{tag}.yaml"
        import yaml

        manifests.write_text(yaml.safe_dump_all([nodeclass(pool), nodepool(pool, tag), deployment(app, tag, 20)]))
        report = await run_simulation([str(manifests)])
        # (zones: among equal-price offerings the zone follows each NodeClaim's generated name, so
        # only the instance types can be compared across the two runs)
        simulated = Counter(n.instance_type for n in report.nodes)
        real = Counter(c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims)
        assert real == simulated

        # deleting the Deployment leaves the nodes (consolidation is a later controller)
        await kube.delete("Deployment", app, "default")
        await asyncio.sleep(3)
        assert len(await nodes_of(kube, pool)) == len(nodes)
        print(f"20 pods Running {elapsed:.1f}s after the Deployment was created; {len(claims)} NodeClaims")
    finally:
        await cleanup(kube, pool, app)
        await wait_for(lambda: _gone(kube, pool), 60, "NodeClaims and Nodes to be finalized")
        await stop_operator(task)


async def _gone(kube: AsyncKubeClient, pool: str) -> bool:
    return not await claims_of(kube, pool) and not await nodes_of(kube, pool)


async def test_kill_mid_launch_then_restart_creates_no_duplicates(kube, devcluster, tmp_path):
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"e2e-{tag}", f"crash-{tag}"
    await kube.create("EC2NodeClass", nodeclass(pool))
    # small types only, so 16 one-cpu pods need several NodeClaims
    await kube.create("NodePool", nodepool(pool, tag, types=["m5.large", "c5.large"]))
    first = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "first.log", lease=f"lease-{tag}")
    second = None
    try:
        await kube.create("Deployment", deployment(app, tag, 16))
        await wait_for(lambda: claims_of(kube, pool), 60, "the first NodeClaim")
        first.kill()  # mid-launch: claims exist, most are not launched or registered yet
        second = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "second.log", lease=f"lease-{tag}")

        async def settled() -> bool:
            pods = await pods_of(kube, app)
            return len(pods) == 16 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

        await wait_for(settled, 150, "16 pods Running after the restart")

        async def all_initialized() -> bool:
            cs = await claims_of(kube, pool)
            return bool(cs) and all((condition(c, "Initialized") or {}).get("status") == "True" for c in cs)

        await wait_for(all_initialized, 30, "every NodeClaim Initialized")
        claims = await claims_of(kube, pool)
        nodes = await nodes_of(kube, pool)
        kwok_nodes = [n for n in await kube.list("Node") if n["metadata"]["name"].startswith(pool)]
        by_pid = Counter((n.get("spec") or {}).get("providerID") for n in kwok_nodes)
        assert all(v == 1 for v in by_pid.values()), by_pid  # one instance per provider ID
        assert {c["status"]["providerID"] for c in claims} == set(by_pid)  # no orphan instance, no orphan claim
        assert len(nodes) == len(claims) == len(kwok_nodes)
    finally:
        first.stop()
        if second is None:
            second = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "second.log", lease=f"lease-{tag}")
        await cleanup(kube, pool, app)
        await wait_for(lambda: _gone(kube, pool), 60, "NodeClaims and Nodes to be finalized")
        second.stop()


async def test_two_replicas_one_leader_and_handover(kube, devcluster, tmp_path):
    tag = "t" + uuid.uuid4().hex[:5]
    lease = f"lease-{tag}"
    a = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "a.log", lease=lease)
    await asyncio.sleep(1.0)
    b = ControllerProcess(str(devcluster.kubeconfig), tmp_path / "b.log", lease=lease)
    try:
        async def holder() -> str:
            try:
                return (await kube.get("Lease", lease, "default"))["spec"].get("holderIdentity") or ""
            except Exception:
                return ""

        first_holder = await wait_for(holder, 30, "a leader")
        await wait_for(lambda: asyncio.sleep(0, "starting controllers" in a.log() + b.log()), 30, "controllers to start")
        await asyncio.sleep(3)
        started = [p for p in (a, b) if "starting controllers" in p.log()]
        assert len(started) == 1, "exactly one replica may run controllers"
        leader, follower = (a, b) if started[0] is a else (b, a)
        leader.kill()
        killed_at = time.monotonic()
        await wait_for(lambda: asyncio.sleep(0, "starting controllers" in follower.log()), 40, "the follower to take over")
        took = time.monotonic() - killed_at
        assert took <= 15 + 2 + 3, f"hand-over took {took:.1f}s (lease 15s, retry 2s)"
        assert await holder() != first_holder
    finally:
        a.stop()
        b.stop()


async def test_real_kube_scheduler_agrees_on_spread_and_affinity(kube, devcluster):
    """Every pod karpy launched capacity for is bound by kube-scheduler: zone spread, hostname
    anti-affinity and zonal self-affinity decided by karpy hold for the real scheduler too."""
    tag = "t" + uuid.uuid4().hex[:5]
    pool = f"e2e-{tag}"
    np_obj = nodepool(pool, tag, types=["m5.large", "m5.xlarge", "c5.large", "c5.xlarge"])
    np_obj["spec"]["template"]["spec"]["requirements"].append(
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["us-east-1a", "us-east-1b", "us-east-1c"]})
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", np_obj)
    spread = deployment(f"spread-{tag}", tag, 6, cpu="500m")
    spread["spec"]["template"]["spec"]["topologySpreadConstraints"] = [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": f"spread-{tag}"}}}]
    anti = deployment(f"anti-{tag}", tag, 3, cpu="250m")
    anti["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": f"anti-{tag}"}}}]}}
    together = deployment(f"together-{tag}", tag, 4, cpu="250m")
    together["spec"]["template"]["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": f"together-{tag}"}}}]}}
    operator, task = start_operator(kube, tag)
    apps = [f"spread-{tag}", f"anti-{tag}", f"together-{tag}"]
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")
        for d in (spread, anti, together):
            await kube.create("Deployment", d)

        async def all_running() -> bool:
            pods = [p for a in apps for p in await pods_of(kube, a)]
            return len(pods) == 13 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

        await wait_for(all_running, 150, "13 pods Running")
        nodes = {n["metadata"]["name"]: n for n in await nodes_of(kube, pool)}
        zone_of = {name: n["metadata"]["labels"]["topology.kubernetes.io/zone"] for name, n in nodes.items()}
        spread_zones = Counter(zone_of[p["spec"]["nodeName"]] for p in await pods_of(kube, apps[0]))
        assert len(spread_zones) == 3 and max(spread_zones.values()) - min(spread_zones.values()) <= 1
        anti_nodes = [p["spec"]["nodeName"] for p in await pods_of(kube, apps[1])]
        assert len(set(anti_nodes)) == 3
        together_zones = {zone_of[p["spec"]["nodeName"]] for p in await pods_of(kube, apps[2])}
        assert len(together_zones) == 1
    finally:
        for a in apps:
            await cleanup(kube, pool, a)
        await wait_for(lambda: _gone(kube, pool), 90, "NodeClaims and Nodes to be finalized")
        await stop_operator(task)


async def test_scale_down_consolidates_through_evictions_and_respects_pdbs(kube, devcluster):
    """20 -> 2 replicas: empty nodes go; a PDB with no disruption left keeps its pods' nodes; once
    the PDB is gone, consolidation moves the pods (Eviction API) onto fewer nodes. Then every metric
    Karpenter's Grafana dashboards query has a sample on /metrics, with Karpenter's type and labels."""
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"e2e-{tag}", f"web-{tag}"
    await kube.create("EC2NodeClass", nodeclass(pool))
    await kube.create("NodePool", nodepool(pool, tag, types=["m5.xlarge"], consolidate_after="0s", limits={"cpu": "1000"}))
    await kube.create("DaemonSet", daemonset(f"agent-{tag}", tag))
    await kube.create("PodDisruptionBudget", {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                              "metadata": {"name": app, "namespace": "default"},
                                              "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": app}}}})
    operator, task = start_operator(kube, tag)
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")
        await kube.create("Deployment", deployment(app, tag, 20))

        async def running(n: int) -> list[dict[str, Any]] | None:
            pods = [p for p in await pods_of(kube, app) if not p["metadata"].get("deletionTimestamp")]
            ok = len(pods) == n and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
            return pods if ok else None

        await wait_for(lambda: running(20), 150, "20 pods Running")
        peak = len(await nodes_of(kube, pool))
        assert peak >= 7  # m5.xlarge holds 3 one-cpu pods
        await kube.patch("Deployment", app, {"spec": {"replicas": 2}}, "default")
        survivors = await wait_for(lambda: running(2), 60, "2 pods left")
        uids = {p["metadata"]["uid"] for p in survivors}
        hosts = {p["spec"]["nodeName"] for p in survivors}

        async def only_hosts_left() -> bool:
            return {n["metadata"]["name"] for n in await nodes_of(kube, pool)} == hosts

        await wait_for(only_hosts_left, 300, "empty nodes to be consolidated away")  # default budget 10%: one node per ~16 s command
        emptied = sample_sum(operator, "karpenter_nodeclaims_disrupted_total", reason="empty", nodepool=pool)
        assert emptied is not None and emptied >= peak - len(hosts)
        await asyncio.sleep(30)  # two more disruption passes: the PDB must still hold them
        now = await running(2)
        assert now is not None and {p["metadata"]["uid"] for p in now} == uids, "a PDB-protected pod was evicted"
        assert {n["metadata"]["name"] for n in await nodes_of(kube, pool)} == hosts

        if len(hosts) == 2:  # without the PDB the two pods fit one node: consolidation moves one
            await kube.delete("PodDisruptionBudget", app, "default")

            async def one_node() -> bool:
                pods = await running(2)
                if not pods:
                    return False
                return len(await nodes_of(kube, pool)) == 1 and len({p["spec"]["nodeName"] for p in pods}) == 1

            await wait_for(one_node, 180, "consolidation onto one node")
        await assert_dashboards_have_data(operator, kube, pool)
    finally:
        try:
            await kube.delete("PodDisruptionBudget", app, "default")
        except Exception:
            pass
        try:
            await kube.delete("DaemonSet", f"agent-{tag}", "default")
        except Exception:
            pass
        await cleanup(kube, pool, app)
        await wait_for(lambda: _gone(kube, pool), 120, "NodeClaims and Nodes to be finalized")
        await stop_operator(task)


async def test_simulated_provider_marks_nodeclasses_ready_through_the_status_subresource(kube, devcluster):
    """``kubectl get ec2nodeclass`` shows READY True with the simulated provider, as on AWS; the
    patch passes the real CRD's status schema."""
    name = f"sim-{uuid.uuid4().hex[:6]}"
    await kube.create("EC2NodeClass", nodeclass(name))
    provider = load_provider("simulated", {"kube": kube})
    assert [n for n, _ in provider.controllers()] == ["simulated.nodeclass"]
    assert isinstance(provider.plugin, SimulatedProvider)
    try:
        assert await provider.plugin.reconcile_nodeclasses() >= 1
        ready = present_condition(await kube.get("EC2NodeClass", name), "Ready")
        assert ready["status"] == "True" and ready["observedGeneration"] == 1
        await kube.patch("EC2NodeClass", name, {"spec": {"tags": {"team": "x"}}})  # a new generation is re-marked
        await provider.plugin.reconcile_nodeclasses()
        assert present_condition(await kube.get("EC2NodeClass", name), "Ready")["observedGeneration"] == 2
        before = (await kube.get("EC2NodeClass", name))["metadata"]["resourceVersion"]
        await provider.plugin.reconcile_nodeclasses()
        assert (await kube.get("EC2NodeClass", name))["metadata"]["resourceVersion"] == before  # nothing to write
    finally:
        await kube.delete("EC2NodeClass", name)


async def assert_dashboards_have_data(operator: Operator, kube: AsyncKubeClient, pool: str) -> None:
    """Every metric Karpenter's capacity and performance dashboards query has at least one sample
    on /metrics; every family in the upstream table is exposed with Karpenter's type and labels."""
    from tests.metrics_expectations import EXPECTED, dashboard_metrics, expected_labels, parse, sample_names

    fams = parse(await scrape(operator))
    have = sample_names(fams)
    missing = {board: sorted(n for n in names if not have.get(n)) for board, names in dashboard_metrics().items()}
    assert not any(missing.values()), f"dashboard metrics without samples: {missing}"
    node_labels = {name for _, name in operator.metrics.state.node_label_keys()} | {"node_name", "phase", "managed"}
    for name, (type_, labels) in EXPECTED.items():
        assert name in fams, f"{name} is not exposed"
        assert fams[name][0] == type_, f"{name} is a {fams[name][0]}, Karpenter's is a {type_}"
        for sample, got, _ in fams[name][1]:
            assert set(got) - {"le", "quantile"} == expected_labels(labels, node_labels), f"{sample} labels {sorted(got)}"
    # the values describe this pool's cluster as it is now
    nodes = await nodes_of(kube, pool)
    allocatable = {ls["node_name"] for _, ls, _ in fams["karpenter_nodes_allocatable"][1] if ls.get("nodepool") == pool}
    assert allocatable == {n["metadata"]["name"] for n in nodes}
    terminated = sum(v for s, ls, v in fams["karpenter_nodes_terminated"][1] if ls.get("nodepool") == pool and s.endswith("_total"))
    assert terminated >= 1
    depth = sum(v for _, ls, v in fams["karpenter_scheduler_queue_depth"][1])
    assert depth == 0, "every pod is bound: nothing waits"


async def test_unconsolidatable_event_conditions_and_nodeclass_label_on_the_real_api_server(kube, devcluster):
    """Where Karpenter publishes ``Unconsolidatable`` (consolidation.go: a WhenEmpty pool's node
    that is not empty), karpy publishes it on the Node and the NodeClaim with the same message;
    the NodeClaim gets Consolidatable and ConsistentStateFound, the Node the
    ``karpenter.k8s.aws/ec2nodeclass`` label, the NodePool NodeRegistrationHealthy."""
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"e2e-{tag}", f"busy-{tag}"
    await kube.create("EC2NodeClass", nodeclass(pool))
    np_obj = nodepool(pool, tag, types=["m5.large"], consolidate_after="0s")
    np_obj["spec"]["disruption"]["consolidationPolicy"] = "WhenEmpty"
    await kube.create("NodePool", np_obj)
    operator, task = start_operator(kube, tag)
    try:
        await wait_for(lambda: asyncio.sleep(0, operator.started), 30, "the operator to start")
        await kube.create("Deployment", deployment(app, tag, 1, cpu="500m"))
        message = f'NodePool "{pool}" has consolidation policy WhenEmpty, but node is not empty'

        async def unconsolidatable() -> list[dict[str, Any]] | None:
            evs = [e for e in await kube.list("Event", "default")
                   if e.get("reason") == "Unconsolidatable" and e.get("message") == message]
            kinds = {e["involvedObject"]["kind"] for e in evs}
            return evs if kinds == {"Node", "NodeClaim"} else None

        events = await wait_for(unconsolidatable, 120, "Unconsolidatable events on the Node and the NodeClaim")
        (claim,) = await claims_of(kube, pool)
        (node,) = await nodes_of(kube, pool)
        by_kind = {e["involvedObject"]["kind"]: e for e in events}
        assert by_kind["NodeClaim"]["involvedObject"]["name"] == claim["metadata"]["name"]
        assert by_kind["Node"]["involvedObject"]["name"] == node["metadata"]["name"]
        assert all(e["type"] == "Normal" for e in events)
        assert node["metadata"]["labels"]["karpenter.k8s.aws/ec2nodeclass"] == pool

        async def conditions_set() -> bool:
            (c,) = await claims_of(kube, pool)
            return all((condition(c, t) or {}).get("status") == "True" for t in ("Consolidatable", "ConsistentStateFound"))

        await wait_for(conditions_set, 60, "Consolidatable and ConsistentStateFound on the NodeClaim")

        async def registration_healthy() -> bool:
            return (condition(await kube.get("NodePool", pool), "NodeRegistrationHealthy") or {}).get("status") == "True"

        await wait_for(registration_healthy, 60, "NodeRegistrationHealthy=True on the NodePool")
        assert len(await nodes_of(kube, pool)) == 1  # not disrupted
    finally:
        await cleanup(kube, pool, app)
        await wait_for(lambda: _gone(kube, pool), 90, "NodeClaims and Nodes to be finalized")
        await stop_operator(task)
