"""The chart's Deployment runs (issue 12): the controller container exactly as the chart renders it.

``helm template`` renders the chart (AWS: ``cloud: aws`` plus the Karpenter 1.x values file
tests/charts/karpenter-values.yaml, unchanged; KakaoCloud: ``cloud: kakaocloud``). The rendered
ServiceAccount, ClusterRole, Role and bindings are created for real; the container's command,
args and env are taken from the rendered Deployment and run as a subprocess, with the env
resolved as the kubelet resolves it (fieldRef, secretKeyRef from the Secrets the test creates,
the keyring Secret "mounted" as a file) and only these substitutions, each of which points at the
test environment instead of a pod's:

* ``KUBECONFIG``: a kubeconfig with a TokenRequest token of the chart's ServiceAccount (in a pod:
  the service-account mount and ``KUBERNETES_SERVICE_HOST``), so every API call runs under the
  chart's RBAC;
* ``METRICS_PORT`` / ``HEALTH_PROBE_PORT``: free ports, bound on 127.0.0.1 (``KARPY_HEALTH_HOST``);
* AWS: ``AWS_ENDPOINT_URL`` (moto in server mode on 127.0.0.1), static test credentials (IRSA in a
  pod) and ``AWS_EC2_METADATA_DISABLED``;
* KakaoCloud: the fake OpenAPI server's URLs (``KARPY_KAKAOCLOUD_ENDPOINTS``, loopback only), the
  keyring file path (the Secret's mount) and the cluster CA file (the service-account mount).

A Deployment is then provisioned: pods bound and Running on kwok Nodes, instances running in the
cloud. No kubelet runs on the instances, so the test plays the kubelet's one part karpy needs: it
registers a kwok Node for each launched NodeClaim (``KwokNodeBackend.register``, as the simulated
provider's kwok mode does).
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_moto import REGION, moto_url, seed, session  # noqa: F401 - moto_url is a fixture

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.sim.kwok_nodes import KwokNodeBackend

from .karpy_env import install_crds, wait_for
from .test_chart_apply import _create_all, _delete, helm_bin, render  # noqa: F401 - fixtures
from .test_controller_e2e import claims_of, deployment, nodepool, nodes_of, pods_of
from .test_rbac_e2e import _FORBIDDEN, RBAC_KINDS, _token_kubeconfig, release_namespace  # noqa: F401 - fixture

pytestmark = pytest.mark.devcluster

REPO = Path(__file__).resolve().parents[2]
KARPENTER_VALUES_FILE = REPO / "tests" / "charts" / "karpenter-values.yaml"

SUBSTITUTED = {"KUBECONFIG", "METRICS_PORT", "HEALTH_PROBE_PORT", "KARPY_HEALTH_HOST"}
"""Variables the test sets or replaces for every cloud (see the module docstring)."""


# --- the rendered container, as the kubelet would start it ------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _controller_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (dep,) = [o for o in objects if o["kind"] == "Deployment"]
    containers = dep["spec"]["template"]["spec"]["containers"]
    (container,) = [c for c in containers if c["command"][:2] == ["karpy", "controller"]]
    return container


async def _resolve_env(admin: AsyncKubeClient, container: dict[str, Any], namespace: str, pod: str) -> dict[str, str]:
    """The container's environment as the kubelet builds it: literal values, the pod's fieldRefs,
    Secret keys (read from the API server) and envFrom; later entries win."""
    out: dict[str, str] = {}

    async def secret(name: str) -> dict[str, str]:
        obj = await admin.get("Secret", name, namespace)
        return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}

    for source in container.get("envFrom") or []:
        if "secretRef" in source:
            out.update(await secret(source["secretRef"]["name"]))
        else:
            pytest.fail(f"envFrom source not modelled by this test: {source}")
    for item in container.get("env") or []:
        if "value" in item:
            out[item["name"]] = str(item["value"])
            continue
        ref = item["valueFrom"]
        if "fieldRef" in ref:
            out[item["name"]] = {"metadata.namespace": namespace, "metadata.name": pod}[ref["fieldRef"]["fieldPath"]]
        elif "secretKeyRef" in ref:
            out[item["name"]] = (await secret(ref["secretKeyRef"]["name"]))[ref["secretKeyRef"]["key"]]
        else:
            pytest.fail(f"env source not modelled by this test: {item}")
    return out


class ChartController:
    """The rendered container's command and args, run with ``env`` (and nothing of the test's own
    environment but PATH), output to ``log_path``."""

    def __init__(self, container: dict[str, Any], env: dict[str, str], log_path: Path, home: Path):
        command = list(container["command"])
        # `karpy` is this virtualenv's console script (the image's /opt/karpy/bin/karpy).
        argv = [str(Path(sys.executable).with_name(command[0])), *command[1:], *container["args"]]
        self.argv = argv
        self.env = env
        self.log_path = log_path
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(home), "PYTHONUNBUFFERED": "1"}
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env={**base, **env}, cwd=home)

    def log(self) -> str:
        self._log.flush()
        return self.log_path.read_text()

    def alive(self) -> None:
        code = self.proc.poll()
        assert code is None, f"the controller exited with {code}:\n{self.log()[-6000:]}"

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
        return self.proc.returncode


def _http(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except OSError:
        return 0, ""


async def _kubelet(admin: AsyncKubeClient, pool: str, registered: set[str]) -> None:
    """Register a kwok Node for each launched NodeClaim of ``pool`` (the kubelet's part)."""
    backend = KwokNodeBackend(admin)
    while True:
        for claim in await claims_of(admin, pool):
            name = claim["metadata"]["name"]
            status = claim.get("status") or {}
            if name in registered or claim["metadata"].get("deletionTimestamp") or not status.get("providerID"):
                continue
            spec = claim.get("spec") or {}
            await backend.register(NodeClaim.model_validate({
                "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": name, "labels": claim["metadata"].get("labels") or {}},
                "spec": {"requirements": [], "nodeClassRef": spec["nodeClassRef"], "startupTaints": spec.get("startupTaints") or [],
                         "taints": spec.get("taints") or []},
                "status": {"providerID": status["providerID"], "capacity": status.get("capacity") or {},
                           "allocatable": status.get("allocatable") or {}},
            }))
            registered.add(name)
        await asyncio.sleep(0.5)


@pytest.fixture
async def admin(devcluster: Any) -> AsyncIterator[AsyncKubeClient]:
    client = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    await install_crds(client)
    yield client
    await client.close()


async def _running(admin: AsyncKubeClient, app: str, pool: str, replicas: int) -> list[dict[str, Any]] | None:
    pods = [p for p in await pods_of(admin, app) if not p["metadata"].get("deletionTimestamp")]
    nodes = {n["metadata"]["name"]: n for n in await nodes_of(admin, pool)}
    ok = (len(pods) == replicas and all((p.get("status") or {}).get("phase") == "Running" for p in pods)
          and all(p["spec"].get("nodeName") in nodes for p in pods))
    return pods if ok else None


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    home.mkdir()
    yield home


# --- AWS: the Karpenter values file, moto --------------------------------------------------------------


@dataclass
class AwsChart:
    """The AWS controller as the chart renders it, running against moto (see :func:`aws_chart`)."""

    controller: ChartController
    cluster: str
    seeded: Any
    health_port: int
    metrics_port: int


@asynccontextmanager
async def aws_chart(devcluster: Any, admin: AsyncKubeClient, render: Any, ns: str, tag: str, moto_url: str, scratch: Path,  # noqa: F811
                    tmp_path: Path, before_start: Callable[[str], Awaitable[None]] | None = None) -> AsyncIterator[AwsChart]:
    """Render the chart as release "karpenter" with Karpenter's values file, unchanged, seed moto, create the
    rendered RBAC, run the controller container under the chart's ServiceAccount and wait for
    ``/readyz``; ``before_start(cluster)`` runs just before the controller starts. On exit the
    controller gets SIGTERM, then: no 403 in its log, exit code 0, cloud clients closed."""
    values = yaml.safe_load(KARPENTER_VALUES_FILE.read_text())
    assert "cloud" not in values  # the file is a Karpenter user's, used unchanged: karpy's default cloud is aws
    cluster = values["settings"]["clusterName"]
    objects = render("karpenter", ns, values)  # Karpenter's release name: Karpenter's object names
    container = _controller_container(objects)
    assert container["args"] == ["--cloud-provider=aws"]
    assert {(o["kind"], o["metadata"]["name"]) for o in objects} >= {("ServiceAccount", "karpenter"), ("Service", "karpenter")}

    seeded = await seed(moto_url, discovery=cluster)
    async with session().client("sqs", endpoint_url=moto_url) as sqs:  # the queue the user's CloudFormation made
        await sqs.create_queue(QueueName=values["settings"]["interruptionQueue"])

    created: list[str] = []
    controller: ChartController | None = None
    try:
        created = _create_all(devcluster.api, [o for o in objects if o["kind"] in RBAC_KINDS], dry_run=False)
        (sa,) = [o for o in objects if o["kind"] == "ServiceAccount"]
        kubeconfig = _token_kubeconfig(devcluster, ns, sa["metadata"]["name"], tmp_path / "sa.kubeconfig")
        rendered = await _resolve_env(admin, container, ns, f"karpy-{tag}-0")
        metrics_port, health_port = _free_port(), _free_port()
        env = {**rendered, "KUBECONFIG": str(kubeconfig), "METRICS_PORT": str(metrics_port), "HEALTH_PROBE_PORT": str(health_port),
               "KARPY_HEALTH_HOST": "127.0.0.1", "AWS_ENDPOINT_URL": moto_url, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_EC2_METADATA_DISABLED": "true"}
        changed = {k for k in env if rendered.get(k) != env[k]}
        assert changed <= SUBSTITUTED | {"AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_EC2_METADATA_DISABLED"}
        assert rendered["AWS_REGION"] == REGION and rendered["CLUSTER_NAME"] == cluster  # from the values file, unchanged
        if before_start is not None:
            await before_start(cluster)
        controller = ChartController(container, env, tmp_path / "controller.log", scratch)

        async def ready() -> bool:
            assert controller is not None
            controller.alive()
            return _http(health_port, "/readyz")[0] == 200

        await wait_for(ready, 90, "the controller's /readyz")
        assert _http(health_port, "/healthz")[0] == 200
        yield AwsChart(controller, cluster, seeded, health_port, metrics_port)
    finally:
        code = controller.stop() if controller is not None else None
        if controller is not None:
            print("--- controller log (tail) ---\n" + controller.log_path.read_text()[-8000:])
        for path in reversed(created):
            _delete(devcluster.api, path)
    log = controller.log_path.read_text()
    forbidden = [line for line in log.splitlines() if _FORBIDDEN.search(line)]
    assert not forbidden, "403 under the chart's RBAC:\n" + "\n".join(forbidden[:20])
    assert code == 0, f"the controller exited with {code} on SIGTERM:\n{log[-4000:]}"
    assert "Unclosed client session" not in log, "the cloud clients were not closed on shutdown"


def ec2nodeclass(name: str, cluster: str) -> dict[str, Any]:
    """An EC2NodeClass selecting the seeded subnets and security group by discovery tag."""
    return {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": name},
            "spec": {"role": "KarpenterNodeRole-eks", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                     "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}],
                     "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": cluster}}]}}


async def _nodeclass_ready(admin: AsyncKubeClient, name: str) -> bool:
    status = (await admin.get("EC2NodeClass", name)).get("status") or {}
    return {c["type"]: c["status"] for c in status.get("conditions") or []}.get("Ready") == "True"


async def _provision(admin: AsyncKubeClient, chart: AwsChart, kubelet: asyncio.Task[None], deploy: dict[str, Any],
                     pool: str) -> list[dict[str, Any]]:
    """Wait for the EC2NodeClass ``pool`` to be Ready (its status written under the chart's
    RBAC), create ``deploy`` and wait until all its pods run on nodes of ``pool``; returns them."""
    async def nodeclass_ready() -> bool:
        chart.controller.alive()
        return await _nodeclass_ready(admin, pool)

    await wait_for(nodeclass_ready, 90, "the EC2NodeClass status written Ready (nodeclasses/status under the chart's RBAC)")
    await admin.create("Deployment", deploy)
    replicas = deploy["spec"]["replicas"]

    async def provisioned() -> list[dict[str, Any]] | None:
        chart.controller.alive()
        assert not kubelet.done() or kubelet.result()
        return await _running(admin, deploy["metadata"]["name"], pool, replicas)

    return await wait_for(provisioned, 180, f"{replicas} pods Running on nodes karpy launched in moto")


async def _remove(admin: AsyncKubeClient, app: str, pool: str) -> None:
    for kind, name, ns in (("Deployment", app, "default"), ("NodePool", pool, None), ("EC2NodeClass", pool, None)):
        try:
            await admin.delete(kind, name, ns) if ns else await admin.delete(kind, name)
        except Exception:
            pass
    try:  # the controller, stopped by now, cannot finalize it (karpenter.k8s.aws/termination)
        await admin.patch("EC2NodeClass", pool, {"metadata": {"finalizers": None}})
    except Exception:
        pass


async def test_chart_deployment_runs_on_aws_with_a_karpenter_values_file(
    devcluster: Any, admin: AsyncKubeClient, render: Any, release_namespace: str, moto_url: str, scratch: Path, tmp_path: Path,  # noqa: F811
) -> None:
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"chart-{tag}", f"chart-{tag}"

    async def user_objects(cluster: str) -> None:
        # The user's NodeClass and NodePool exist before the install (the EC2NodeClass status loop
        # then resolves it on its first pass; it repeats every 60 s).
        await admin.create("EC2NodeClass", ec2nodeclass(pool, cluster))
        await admin.create("NodePool", nodepool(pool, tag, types=["m5.large"]))

    kubelet: asyncio.Task[None] | None = None
    try:
        async with aws_chart(devcluster, admin, render, release_namespace, tag, moto_url, scratch, tmp_path, user_objects) as chart:
            controller, cluster = chart.controller, chart.cluster
            registered: set[str] = set()
            kubelet = asyncio.create_task(_kubelet(admin, pool, registered))
            pods = await _provision(admin, chart, kubelet, deployment(app, tag, 2, cpu="500m"), pool)
            claims = [c for c in await claims_of(admin, pool) if not c["metadata"].get("deletionTimestamp")]
            assert claims and registered
            ids = {c["status"]["providerID"].rsplit("/", 1)[-1]: c for c in claims}
            async with session().client("ec2", endpoint_url=moto_url) as ec2:
                reservations = (await ec2.describe_instances(InstanceIds=sorted(ids)))["Reservations"]
            instances = [i for r in reservations for i in r["Instances"]]
            assert len(instances) == len(ids)
            for inst in instances:
                claim = ids[inst["InstanceId"]]
                tags = {t["Key"]: t["Value"] for t in inst.get("Tags") or []}
                assert inst["State"]["Name"] == "running"
                assert inst["InstanceType"] == claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.large"
                assert inst["SubnetId"] in chart.seeded.subnets.values()
                assert tags["karpenter.sh/nodepool"] == pool and tags["karpenter.sh/nodeclaim"] == claim["metadata"]["name"]
                assert tags[f"kubernetes.io/cluster/{cluster}"] == "owned"
            node_names = {n["metadata"]["name"] for n in await nodes_of(admin, pool)}
            assert {p["spec"]["nodeName"] for p in pods} <= node_names

            status, metrics = _http(chart.metrics_port, "/metrics")
            assert status == 200 and "karpenter_nodeclaims_created_total" in metrics

            # Scale to zero and delete the NodeClaims: the instances are terminated in moto.
            await admin.delete("Deployment", app, "default")
            for c in claims:
                await admin.delete("NodeClaim", c["metadata"]["name"])

            async def terminated() -> bool:
                controller.alive()
                async with session().client("ec2", endpoint_url=moto_url) as ec2:
                    resp = await ec2.describe_instances(InstanceIds=sorted(ids))
                states = {i["State"]["Name"] for r in resp["Reservations"] for i in r["Instances"]}
                return states <= {"shutting-down", "terminated"} and not await claims_of(admin, pool)

            await wait_for(terminated, 120, "the NodeClaims finalized and their instances terminated")
    finally:
        if kubelet is not None:
            kubelet.cancel()
        await _remove(admin, app, pool)


async def test_aws_consolidation_works_when_the_controller_starts_before_the_nodeclass_is_ready(
    devcluster: Any, admin: AsyncKubeClient, render: Any, release_namespace: str, moto_url: str, scratch: Path, tmp_path: Path,  # noqa: F811
) -> None:
    """Issue 29: the NodePool exists and its EC2NodeClass does not yet when the controller starts,
    so the AWS plugin answers ``[]`` for its instance types; once the NodeClass is Ready, an
    underutilized node must be consolidated (the disruption controller kept the empty list, and
    priced nodes at 0, until the NodePool changed)."""
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"late-{tag}", f"late-{tag}"
    types = ["m5.large", "m5.2xlarge"]
    np_obj = nodepool(pool, tag, types=types, consolidate_after="0s")
    np_obj["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]

    async def user_objects(cluster: str) -> None:
        await admin.create("NodePool", np_obj)  # its NodeClass comes later

    kubelet: asyncio.Task[None] | None = None
    try:
        async with aws_chart(devcluster, admin, render, release_namespace, tag, moto_url, scratch, tmp_path, user_objects) as chart:
            controller = chart.controller

            async def passes() -> bool:  # a planning pass has read the NodePool's instance types (empty)
                controller.alive()
                return any(line.startswith("karpenter_nodepools_allowed_disruptions{") and f'nodepool="{pool}"' in line
                           for line in _http(chart.metrics_port, "/metrics")[1].splitlines())

            await wait_for(passes, 60, "a disruption pass before the EC2NodeClass exists")
            await admin.create("EC2NodeClass", ec2nodeclass(pool, chart.cluster))
            kubelet = asyncio.create_task(_kubelet(admin, pool, set()))
            # six 1-cpu pods: one m5.2xlarge (0.384 USD/hour) is cheaper than six m5.large (0.096 each)
            await _provision(admin, chart, kubelet, deployment(app, tag, 6, cpu="1"), pool)
            (big,) = [c for c in await claims_of(admin, pool) if not c["metadata"].get("deletionTimestamp")]
            assert big["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m5.2xlarge"
            await admin.patch("Deployment", app, {"spec": {"replicas": 1}}, "default")

            async def consolidated() -> list[dict[str, Any]] | None:
                controller.alive()
                claims = [c for c in await claims_of(admin, pool) if not c["metadata"].get("deletionTimestamp")]
                pods = await _running(admin, app, pool, 1)
                if pods is None or [c["metadata"]["name"] for c in claims] == [big["metadata"]["name"]]:
                    return None
                return claims if big["metadata"]["name"] not in {c["metadata"]["name"] for c in claims} else None

            claims = await wait_for(consolidated, 240, "the underutilized m5.2xlarge replaced by a cheaper node")
            assert [c["metadata"]["labels"]["node.kubernetes.io/instance-type"] for c in claims] == ["m5.large"]
            log = controller.log()
            assert 'Instance Type "m5.2xlarge" not found' not in log
            # priced from the instance types (0.0000 while the controller had none)
            assert re.search(rf"single-node-consolidation: replace {big['metadata']['name']} with 1 node\(s\) \[m5\.large[^]]*\] "
                             r"\(0\.3840 -> 0\.0960 USD/hour\)", log), log[-4000:]
    finally:
        if kubelet is not None:
            kubelet.cancel()
        await _remove(admin, app, pool)


# --- KakaoCloud: the fake OpenAPI server ---------------------------------------------------------------


def _kc_nodepool(name: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {"template": {"metadata": {"labels": {"karpy-e2e": label}}, "spec": {
            "requirements": [{"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
                             {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m2a.large"]}],
            "nodeClassRef": {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": name},
        }}, "disruption": {"consolidateAfter": "Never"}},
    }


async def test_chart_deployment_runs_on_kakaocloud(
    devcluster: Any, admin: AsyncKubeClient, render: Any, release_namespace: str, scratch: Path, tmp_path: Path,  # noqa: F811
) -> None:
    from kakaocloud_fake_server import FakeKakaoCloud
    from kakaocloud_fixtures import keyring_json, secret_obj
    from test_kakaocloud_conformance import NODECLASS

    fake = FakeKakaoCloud()
    await fake.start()
    ns, tag = release_namespace, "t" + uuid.uuid4().hex[:5]
    pool, app = f"kc-{tag}", f"kc-{tag}"
    values = {"cloud": "kakaocloud", "settings": {"clusterName": "demo"},  # the fake's Kubernetes Engine cluster
              "kakaocloud": {"projectID": "proj-1"},
              "credentials": {"secretName": "kakaocloud-credentials"}, "sigKey": {"secretName": "karpenter-sigkey"}}
    objects = render(f"karpy-{tag}", ns, values)
    container = _controller_container(objects)
    assert container["args"] == ["--cloud-provider=kakaocloud"]
    (keyring_mount,) = [m for m in container["volumeMounts"] if m["name"] == "keyring"]

    created: list[str] = []
    controller: ChartController | None = None
    kubelet: asyncio.Task[None] | None = None
    secrets = [secret_obj(ns, "kakaocloud-credentials", {"applicationCredentialId": fake.credential_id,
                                                          "applicationCredentialSecret": fake.credential_secret,
                                                          "region": "kr-central-2"}),
               secret_obj(ns, "karpenter-sigkey", {"keyring.json": keyring_json()})]
    try:
        for obj in secrets:  # the user creates them before installing (README)
            await admin.create("Secret", obj)
        created = _create_all(devcluster.api, [o for o in objects if o["kind"] in RBAC_KINDS], dry_run=False)
        (sa,) = [o for o in objects if o["kind"] == "ServiceAccount"]
        kubeconfig = _token_kubeconfig(devcluster, ns, sa["metadata"]["name"], tmp_path / "sa.kubeconfig")
        rendered = await _resolve_env(admin, container, ns, f"karpy-{tag}-0")
        # The keyring Secret volume, as the kubelet mounts it (the key's file under the mount path).
        mount = tmp_path / "keyring-mount"
        mount.mkdir()
        keyring_file = mount / "keyring.json"
        keyring_file.write_text(base64.b64decode((await admin.get("Secret", "karpenter-sigkey", ns))["data"]["keyring.json"]).decode())
        assert rendered["KAKAOCLOUD_KEYRING_FILE"] == f"{keyring_mount['mountPath']}/keyring.json"
        metrics_port, health_port = _free_port(), _free_port()
        endpoints = ",".join(f"{k}={v}" for k, v in fake.endpoints().items())
        env = {**rendered, "KUBECONFIG": str(kubeconfig), "METRICS_PORT": str(metrics_port), "HEALTH_PROBE_PORT": str(health_port),
               "KARPY_HEALTH_HOST": "127.0.0.1", "KAKAOCLOUD_ENDPOINTS": endpoints, "KAKAOCLOUD_KEYRING_FILE": str(keyring_file)}
        changed = {k for k in env if rendered.get(k) != env[k]}
        assert changed <= SUBSTITUTED | {"KAKAOCLOUD_ENDPOINTS", "KAKAOCLOUD_KEYRING_FILE"}
        assert rendered["KAKAOCLOUD_APPLICATION_CREDENTIAL_ID"] == fake.credential_id  # through secretKeyRef

        controller = ChartController(container, env, tmp_path / "controller.log", scratch)

        async def ready() -> bool:
            controller.alive()
            return _http(health_port, "/readyz")[0] == 200

        await wait_for(ready, 90, "the controller's /readyz")
        await admin.create("KCNodeClass", {**NODECLASS, "metadata": {"name": pool}})
        await admin.create("NodePool", _kc_nodepool(pool, tag))
        registered: set[str] = set()
        kubelet = asyncio.create_task(_kubelet(admin, pool, registered))
        await admin.create("Deployment", deployment(app, tag, 2, cpu="500m"))

        async def provisioned() -> list[dict[str, Any]] | None:
            controller.alive()
            assert not kubelet.done() or kubelet.result()
            return await _running(admin, app, pool, 2)

        pods = await wait_for(provisioned, 180, "2 pods Running on nodes karpy launched in the fake KakaoCloud")
        claims = [c for c in await claims_of(admin, pool) if not c["metadata"].get("deletionTimestamp")]
        ids = {c["status"]["providerID"].rsplit("/", 1)[-1]: c for c in claims}
        live = {i["id"]: i for i in fake.live()}
        assert ids and set(ids) <= set(live)
        for iid, claim in ids.items():
            assert live[iid]["status"] == "active"
            assert live[iid]["flavor"]["name"] == claim["metadata"]["labels"]["node.kubernetes.io/instance-type"] == "m2a.large"
        assert {p["spec"]["nodeName"] for p in pods} <= {n["metadata"]["name"] for n in await nodes_of(admin, pool)}
        # kubeadm join: one bootstrap token Secret per node, created under the chart's kube-system Role.
        tokens = [s for s in await admin.list("Secret", "kube-system") if s.get("type") == "bootstrap.kubernetes.io/token"]
        assert len(tokens) >= len(ids)
        status, metrics = _http(metrics_port, "/metrics")
        assert status == 200 and "karpenter_nodeclaims_created_total" in metrics

        await admin.delete("Deployment", app, "default")
        for c in claims:
            await admin.delete("NodeClaim", c["metadata"]["name"])

        async def deleted() -> bool:
            controller.alive()
            return not set(ids) & {i["id"] for i in fake.live()} and not await claims_of(admin, pool)

        await wait_for(deleted, 120, "the NodeClaims finalized and their VMs deleted")
    finally:
        if kubelet is not None:
            kubelet.cancel()
        code = controller.stop() if controller is not None else None
        if controller is not None:
            print("--- controller log (tail) ---\n" + controller.log_path.read_text()[-8000:])
        for cleanup in (lambda: admin.delete("Deployment", app, "default"), lambda: admin.delete("NodePool", pool),
                        lambda: admin.delete("KCNodeClass", pool)):
            try:
                await cleanup()
            except Exception:
                pass
        for obj in secrets:
            try:
                await admin.delete("Secret", obj["metadata"]["name"], ns)
            except Exception:
                pass
        for path in reversed(created):
            _delete(devcluster.api, path)
        await fake.close()
    assert controller is not None
    log = controller.log_path.read_text()
    forbidden = [line for line in log.splitlines() if _FORBIDDEN.search(line)]
    assert not forbidden, "403 under the chart's RBAC:\n" + "\n".join(forbidden[:20])
    assert code == 0, f"the controller exited with {code} on SIGTERM:\n{log[-4000:]}"
    assert "Unclosed client session" not in log, "the cloud clients were not closed on shutdown"
