"""Issue 10 §3: no AWS credential in any log line, Event or metric, at DEBUG, even with botocore's
own loggers asked for by name.

Role credentials (an ``ASIA…`` access key with a session token, as IRSA/assume-role hand out)
drive a real launch -> get -> list -> delete flow against moto's server mode through the
simulator, with karpy's :func:`~karpy_core.observability.configure_logging` at DEBUG and
botocore/aiobotocore/urllib3/… asked for by name. Every captured line, every Event the in-memory
cluster holds and the ``/metrics`` exposition are then searched for the access key, the secret key
and the session token in raw, base64 (std/urlsafe, with/without padding) and hex forms.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import aioboto3
from aiobotocore.credentials import AioRefreshableCredentials
from aiobotocore.session import AioSession
from botocore.credentials import CredentialProvider
from karpy_aws.clients import AWSClients

from karpy_core.apis.base import to_kube_dict
from karpy_core.apis.loader import load_documents
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.operator import Operator
from karpy_core.redaction import MASK, redact
from karpy_core.sim.simulator import Simulator
from tests.secret_scan import capture_logs, find_leaks

from .conftest import CLUSTER, REGION
from .test_aws_e2e import DATA, instance_ids

ACCESS_KEY = "ASIAKARPYSCAN7Q2W3E4R"
SECRET_KEY = "wJalrXUtnFEMIkarpyScanK7MDENGbPxRfiCYzq9Z"
SESSION_TOKEN = (
    "IQoJb3JpZ2luX2VjEKarpyScanSessionTokenZXUtd2VzdC0xIkcwRQIhAP8vBzs+Kq7n/Yk3l0Qm"
    "Zx2Vb9c4RtW6yPq1LrNs8uAiB5aXQwFj3Tg7Hd2Ke0Mp4Wn6Xc1Rv8Sb5Lt9Yf0Ga=="
)


def role_session() -> aioboto3.Session:
    """What the default chain yields under IRSA or an assumed role: temporary keys and a token."""
    return aioboto3.Session(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY,
                            aws_session_token=SESSION_TOKEN, region_name=REGION)


async def test_no_aws_credential_in_logs_events_or_metrics_at_debug(plugin_factory, seeded):
    metrics = Metrics()
    with capture_logs() as buf:
        plugin = plugin_factory(session=role_session())
        provider = CloudProvider(plugin)
        Operator(kube=InMemoryCluster(), provider=provider, metrics=metrics)  # wires the cloud-call metrics
        loaded = load_documents([str(DATA / "seeds/000-repaired.yaml"), str(DATA / "sim/000-inflate.yaml")], {"CLUSTER_NAME": CLUSTER})
        sim = Simulator(provider)
        plugin.kube = plugin.events.kube = sim.cluster
        sim.apply([to_kube_dict(o) for o in loaded.objects()])
        await sim.run(max_seconds=600)
        ids = instance_ids(sim)
        assert ids, sim.pending_reasons
        launched = sim.cluster.objects("NodeClaim")
        await sim.provider.get(launched[0]["status"]["providerID"])
        assert {nc.status.provider_id for nc in await sim.provider.list()} >= {nc["status"]["providerID"] for nc in launched}
        for nc in launched:
            await sim.cluster.delete("NodeClaim", nc["metadata"]["name"])
        termination = NodeTermination(kube=sim.cluster)
        for _ in range(6):
            await sim.lifecycle.reconcile()
            await termination.reconcile()
        assert not sim.cluster.objects("NodeClaim")
        try:  # an error path too: a call that fails, logged with its traceback as the operator does
            await provider.get(f"aws:///{REGION}a/i-00000000000000000")
        except Exception:
            logging.getLogger("karpy.operator").exception("get failed")
        await plugin.aclose()
    logs = buf.getvalue()

    # the scan is only meaningful if botocore really logged its requests at DEBUG
    assert '"logger":"botocore.endpoint"' in logs and "Sending http request" in logs
    assert '"logger":"botocore.auth"' in logs and "CanonicalRequest" in logs
    assert "Traceback" in logs or "NodeClaimNotFoundError" in logs
    events = sim.cluster.objects("Event")
    exposition = metrics.render().decode()
    assert "karpenter_cloudprovider_duration_seconds" in exposition and 'method="Create"' in exposition

    leaks = find_leaks(
        {"logs": logs, "events": json.dumps(events), "metrics": exposition},
        {"access key": ACCESS_KEY, "secret key": SECRET_KEY, "session token": SESSION_TOKEN},
    )
    assert not leaks, "\n".join(leaks[:10])


class _RotatingRoleProvider(CredentialProvider):
    """Role credentials valid for an hour on a clock the test moves: each :meth:`expire` makes the
    next signing refresh them into a new access key, secret key and session token."""

    METHOD = "karpy-test-rotating-role"

    def __init__(self) -> None:
        self.issued: list[dict[str, str]] = []
        self.now = datetime.now(UTC)

    def expire(self) -> None:
        self.now += timedelta(hours=2)

    async def _refresh(self) -> dict[str, str]:
        n = len(self.issued)
        creds = {"access_key": f"ASIAROTATING{n:08d}", "secret_key": f"rotating-secret-key-{n:04d}-{'x' * 20}",
                 "token": f"rotating-session-token-{n:04d}-{'y' * 40}",
                 "expiry_time": (self.now + timedelta(hours=1)).isoformat()}
        self.issued.append(creds)
        return creds

    async def load(self) -> AioRefreshableCredentials:
        first = await self._refresh()
        return AioRefreshableCredentials(first["access_key"], first["secret_key"], first["token"],
                                         datetime.fromisoformat(first["expiry_time"]), self._refresh, self.METHOD,
                                         time_fetcher=lambda: self.now)


async def test_refreshed_role_credentials_are_registered_before_signing(moto_url):
    provider = _RotatingRoleProvider()
    core = AioSession()
    core.get_component("credential_provider").insert_before("env", provider)
    clients = AWSClients(region=REGION, endpoint_url=moto_url, session=aioboto3.Session(botocore_session=core, region_name=REGION))
    try:
        with capture_logs() as buf:
            ec2 = await clients.ec2()
            for _ in range(3):
                await ec2.describe_vpcs()
                provider.expire()
    finally:
        await clients.close()
    assert len(provider.issued) == 3  # the first set, then one refresh per expiry before the next signing
    for creds in provider.issued:  # each set was registered, not just caught by a header pattern
        for value in (creds["access_key"], creds["secret_key"], creds["token"]):
            assert redact(value) == MASK
    leaks = find_leaks({"logs": buf.getvalue()}, {f"{k} {i}": c[k] for i, c in enumerate(provider.issued)
                                                   for k in ("access_key", "secret_key", "token")})
    assert not leaks, "\n".join(leaks[:10])
