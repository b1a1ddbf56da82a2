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
import re
from datetime import UTC, datetime, timedelta
from xml.sax.saxutils import escape

import aioboto3
import pytest
from aiobotocore.credentials import AioRefreshableCredentials
from aiobotocore.session import AioSession
from aiohttp import web
from aws_moto import CLUSTER, REGION
from botocore.credentials import CredentialProvider
from karpy_aws.clients import AWSClients
from test_aws_e2e import DATA, instance_ids

from karpy_core.apis.base import to_kube_dict
from karpy_core.apis.loader import load_documents
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.node.termination import NodeTermination
from karpy_core.errors import CreateError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.operator import Operator
from karpy_core.redaction import MASK, redact
from karpy_core.sim.simulator import Simulator
from tests.faultinjection import LoopbackProxy
from tests.secret_scan import capture_logs, find_leaks

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


class EchoingEC2(LoopbackProxy):
    """A loopback proxy to moto that answers every ``CreateFleet`` with a 400 EC2 error whose
    message quotes the request, as some gateways do: its headers as a Python dict (the SigV4
    ``Authorization`` header with ``Credential=`` and ``Signature=``, ``X-Amz-Security-Token``),
    the signature once more on its own, and the form body. :attr:`signatures` keeps each
    signature quoted."""

    def __init__(self, upstream: str):
        super().__init__(upstream)
        self.signatures: list[str] = []

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        if b"Action=CreateFleet" in body:
            signature = re.search(r"Signature=([0-9a-f]{64})", request.headers.get("Authorization", ""))
            assert signature is not None
            self.signatures.append(signature.group(1))
            quoted = f"request rejected: headers={dict(request.headers)!r} Signature={signature.group(1)} body={body.decode()}"
            xml = ('<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>InvalidParameterValue</Code>'
                   f"<Message>{escape(quoted)}</Message></Error></Errors><RequestID>echo-0034</RequestID></Response>")
            return web.Response(status=400, body=xml.encode(), content_type="text/xml")
        assert self._session is not None
        hop = {"host", "content-length", "transfer-encoding", "connection"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in hop}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body, headers=headers,
                                         allow_redirects=False) as r:
            data = await r.read()
            out = {k: v for k, v in r.headers.items() if k.lower() not in hop | {"content-encoding", "date", "server"}}
            return web.Response(status=r.status, body=data, headers=out)


async def test_an_error_body_echoing_the_signed_request_is_never_stored_logged_or_raised(plugin_factory, seeded):
    """Issue 34 item 4: a 400 quoting the signed headers (``Credential=``, ``Signature=``,
    ``X-Amz-Security-Token``) reached the NodeClaim's ``Launched`` condition. Stored NodeClaims,
    EC2NodeClasses and Events, the log and the raised error are searched for the access key, the
    secret key, the session token and every signature quoted."""
    proxy = EchoingEC2(seeded.url)
    await proxy.start()
    try:
        with capture_logs() as buf:
            plugin = plugin_factory(session=role_session(), endpoint_url=proxy.url)
            provider = CloudProvider(plugin)
            loaded = load_documents([str(DATA / "seeds/000-repaired.yaml"), str(DATA / "sim/000-inflate.yaml")],
                                    {"CLUSTER_NAME": CLUSTER})
            sim = Simulator(provider)
            plugin.kube = plugin.events.kube = sim.cluster
            sim.apply([to_kube_dict(o) for o in loaded.objects()])
            for _ in range(3):  # provisioning and lifecycle passes: every CreateFleet answered 400
                await sim.step()
                if sim.cluster.objects("NodeClaim") and proxy.signatures:
                    break
            claims = sim.cluster.objects("NodeClaim")
            launched = [c for nc in claims for c in (nc.get("status") or {}).get("conditions") or [] if c["type"] == "Launched"]
            echoed = [c["message"] for c in launched if "request rejected" in c["message"]]
            assert echoed, launched
            with pytest.raises(CreateError) as info:
                await provider.create(NodeClaim.model_validate(claims[0]))
            messages = [str(info.value), info.value.condition_message]
            assert "request rejected" in messages[0]
            await plugin.aclose()
    finally:
        await proxy.close()
    assert proxy.signatures
    haystacks = {"logs": buf.getvalue(), "messages": "\n".join(messages),
                 **{f"stored {kind}": json.dumps(sim.cluster.objects(kind)) for kind in ("NodeClaim", "EC2NodeClass", "Event")}}
    secrets: dict[str, str | bytes] = {"access key": ACCESS_KEY, "secret key": SECRET_KEY, "session token": SESSION_TOKEN}
    secrets.update({f"signature {i}": s for i, s in enumerate(proxy.signatures)})
    leaks = find_leaks(haystacks, secrets)
    assert not leaks, "\n".join(leaks[:10])
