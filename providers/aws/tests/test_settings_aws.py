"""The AWS wiring of the controller's settings: the region as the AWS SDK finds it (environment,
shared config file, a loopback IMDS fake), CLUSTER_ENDPOINT discovered with EKS DescribeCluster
against moto, and INTERRUPTION_QUEUE reaching the interruption poller the operator runs."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aws_moto import CLUSTER, REGION, session
from karpy_aws.region import resolve_region

from karpy_core.apis.base import to_kube_dict
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import ConfigurationError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.settings import load_settings
from karpy_core.testing import nodeclaim_for

REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


@pytest.fixture
def clean_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No region anywhere: no env, empty shared config and credentials files, IMDS disabled."""
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return config


def test_region_from_the_environment(clean_aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert resolve_region() == "eu-west-1"
    monkeypatch.setenv("AWS_REGION", "ap-northeast-2")  # the Go SDK's first choice, which botocore alone ignores
    assert resolve_region() == "ap-northeast-2"
    assert resolve_region("us-west-2") == "us-west-2"  # --region wins


def test_region_from_the_shared_config_file(clean_aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean_aws_env.write_text("[default]\nregion = eu-central-1\n\n[profile other]\nregion = sa-east-1\n")
    assert resolve_region() == "eu-central-1"
    monkeypatch.setenv("AWS_PROFILE", "other")
    assert resolve_region() == "sa-east-1"


class _IMDS(BaseHTTPRequestHandler):
    """IMDSv2 on loopback: a token for PUT /latest/api/token, the zone for a request carrying it
    (botocore reads ``placement/availability-zone/`` and drops the zone letter)."""

    requests: list[tuple[str, str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_PUT(self) -> None:
        self.requests.append(("PUT", self.path))
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
            self._send(200, b"token-123")
        else:
            self._send(400, b"")

    def do_GET(self) -> None:
        self.requests.append(("GET", self.path))
        if self.path == "/latest/meta-data/placement/availability-zone/" and \
                self.headers.get("X-aws-ec2-metadata-token") == "token-123":
            self._send(200, b"ca-central-1b")
        else:
            self._send(401, b"")

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def imds() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _IMDS)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _IMDS.requests = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_region_from_a_loopback_imds(clean_aws_env: Path, monkeypatch: pytest.MonkeyPatch, imds: str) -> None:
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "false")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds)
    assert resolve_region() == "ca-central-1"
    assert ("PUT", "/latest/api/token") in _IMDS.requests
    assert ("GET", "/latest/meta-data/placement/availability-zone/") in _IMDS.requests


def test_no_region_anywhere_is_an_error(clean_aws_env: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"^aws provider: the region is required: option region \(karpy simulate "
                       r"and validate: --provider-option region=REGION .*; karpy controller: --region or AWS_REGION"):
        resolve_region()


def test_create_plugin_finds_the_region_itself(clean_aws_env: Path, monkeypatch: pytest.MonkeyPatch,
                                               moto_url: str, instance_type_data: Any) -> None:
    """The chart sets AWS_REGION only; the provider reads it (this used to crash-loop)."""
    from karpy_aws.plugin import create_plugin

    monkeypatch.setenv("AWS_REGION", "ap-northeast-2")
    plugin = create_plugin({"cluster_name": CLUSTER, "endpoint_url": moto_url, "session": session(),
                            "instance_type_data": instance_type_data})
    assert plugin.region == "ap-northeast-2" and plugin.clients.region == "ap-northeast-2"


async def _create_eks_cluster(url: str, name: str) -> dict[str, Any]:
    async with session().client("eks", endpoint_url=url) as eks:
        out = await eks.create_cluster(name=name, roleArn="arn:aws:iam::123456789012:role/eks",
                                       resourcesVpcConfig={"subnetIds": []})
        return dict(out["cluster"])


async def test_cluster_endpoint_is_discovered_with_describe_cluster(plugin_factory: Any, seeded: Any) -> None:
    created = await _create_eks_cluster(seeded.url, CLUSTER)
    opts = load_settings({"cloud_provider": "aws"}, {"CLUSTER_NAME": CLUSTER}).provider_options()
    assert "cluster_endpoint" not in opts  # unset: to be discovered
    plugin = plugin_factory(**opts, cluster_endpoint=None)
    assert plugin.cluster_endpoint == ""
    await plugin.discover_cluster_endpoint()
    assert created["endpoint"].startswith("https://")
    assert plugin.cluster_endpoint == plugin.launcher.cluster_endpoint == created["endpoint"]
    assert plugin.launcher.ca_bundle == created["certificateAuthority"]["data"]


async def test_cluster_endpoint_setting_wins_over_discovery(plugin_factory: Any, seeded: Any) -> None:
    opts = load_settings({"cloud_provider": "aws"}, {"CLUSTER_NAME": CLUSTER, "CLUSTER_ENDPOINT": "https://api.example:6443",
                                                     "CLUSTER_CA_BUNDLE": "Q0E="}).provider_options()
    plugin = plugin_factory(**opts)
    await plugin.discover_cluster_endpoint()  # no EKS cluster exists in moto: nothing is asked
    assert (plugin.launcher.cluster_endpoint, plugin.launcher.ca_bundle) == ("https://api.example:6443", "Q0E=")


async def test_cluster_endpoint_discovery_failure_names_the_setting(plugin_factory: Any, seeded: Any) -> None:
    plugin = plugin_factory(cluster_endpoint=None, cluster_name="no-such-cluster")
    with pytest.raises(ConfigurationError, match=r"CLUSTER_ENDPOINT is not set and discovering it failed.*--cluster-endpoint"):
        await plugin.discover_cluster_endpoint()


async def test_interruption_queue_setting_runs_the_poller(plugin_factory: Any, seeded: Any) -> None:
    """INTERRUPTION_QUEUE -> provider options -> the ``aws.interruption`` loop among the provider's
    controllers (what the operator starts while leading) -> a spot interruption deletes the NodeClaim."""
    from test_conformance_aws import NODECLASS

    opts = load_settings({"cloud_provider": "aws"}, {"CLUSTER_NAME": CLUSTER, "INTERRUPTION_QUEUE": "karpy-q",
                                                     "CLUSTER_ENDPOINT": "https://api.example"}).provider_options()
    assert opts["interruption_queue"] == "karpy-q"
    kube = InMemoryCluster()
    plugin = plugin_factory(**opts, nodeclasses={"default": NODECLASS}, kube=kube)
    provider = CloudProvider(plugin)
    loops = dict(provider.controllers())
    assert "aws.interruption" in loops
    without = dict(CloudProvider(plugin_factory(cluster_endpoint="https://api.example", kube=kube)).controllers())
    assert "aws.interruption" not in without  # no queue, no poller
    launched = await plugin.karpy_create(nodeclaim_for("spotty", REF, [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}]))
    kube.create_sync("NodeClaim", to_kube_dict(launched))
    instance_id = launched.status.provider_id.rsplit("/", 1)[-1]
    async with session().client("sqs", endpoint_url=seeded.url, region_name=REGION) as sqs:
        url = (await sqs.create_queue(QueueName="karpy-q"))["QueueUrl"]
        await sqs.send_message(QueueUrl=url, MessageBody=json.dumps({
            "version": "0", "source": "aws.ec2", "detail-type": "EC2 Spot Instance Interruption Warning",
            "detail": {"instance-id": instance_id, "instance-action": "terminate"}}))
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        task = asyncio.create_task(loops["aws.interruption"]())
        try:
            async with asyncio.timeout(60):  # hang guard only
                while True:
                    nc = kube.peek("NodeClaim", "spotty")
                    if nc is None or nc["metadata"].get("deletionTimestamp"):
                        break
                    await asyncio.sleep(0.1)
                # the poller deletes the message after acting on it: wait for that, on a busy
                # machine it can come a moment after the NodeClaim's deletion
                while True:
                    attrs = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names))["Attributes"]
                    if attrs[names[0]] == "0" and attrs[names[1]] == "0":
                        break
                    await asyncio.sleep(0.1)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert attrs["ApproximateNumberOfMessages"] == "0" and attrs["ApproximateNumberOfMessagesNotVisible"] == "0"
