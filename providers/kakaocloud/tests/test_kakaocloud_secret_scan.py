"""Issue 10 §3: no KakaoCloud secret in any log line, Event or metric, at DEBUG, even with
httpx/httpcore asked for by name.

Seed 004 end to end against the fake OpenAPI (credentials and keyring read from Secrets, IAM token
issuance and a forced re-issue, signed VMs with kubeadm user data, get/list, a foreign VM that
draws a Warning, deletes) plus a refused credential, with karpy's logging at DEBUG. Every captured
line, every Event and the ``/metrics`` exposition are searched for the application credential
secret, every IAM token issued, the signing keys, every bootstrap token and every user-data blob,
in raw, base64 (std/urlsafe, with/without padding) and hex forms.
"""

from __future__ import annotations

import json
import logging

import pytest
from kakaocloud_fixtures import KEY1, KEY2, keyring_json
from karpy_kakaocloud.client import KakaoCloudAPIError
from karpy_kakaocloud.credentials import Credentials, Secret
from test_kakaocloud_seed004 import drain_all, seed_objects, seed_secrets, simulator_with_secrets, start

from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.errors import CloudProviderError, CreateError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import Metrics
from karpy_core.operator import Operator
from karpy_core.redaction import MASK
from tests.secret_scan import capture_logs, find_leaks

WRONG_SECRET = "WRONG-app-credential-secret-0042"


async def test_no_kakaocloud_secret_in_logs_events_or_metrics_at_debug(fake, make_provider):
    metrics = Metrics()
    with capture_logs() as buf:
        plugin = make_provider(with_credentials=False, with_keyring=False)
        provider = CloudProvider(plugin)
        Operator(kube=InMemoryCluster(), provider=provider, metrics=metrics)  # wires the cloud-call metrics
        sim = simulator_with_secrets(provider, seed_secrets(fake, keyring_json("k2", {"k1": KEY1, "k2": KEY2})))
        plugin.bind_kube(sim.cluster)
        sim.apply(seed_objects())
        await sim.run(max_seconds=3600)
        assert fake.instances and sim.cluster.objects("Node")
        fake.expire_tokens()  # the next call is refused once and re-issues the token
        launched = sim.cluster.objects("NodeClaim")
        await provider.get(launched[0]["status"]["providerID"])
        fake.add_instance(name="karpy-abcdef-intruder", description="karpy1:000000:k1:x:" + "A" * 32)
        await provider.list()
        user_data = [inst["_user_data"] for inst in fake.instances.values() if inst.get("_user_data")]

        bad = make_provider(credentials=Credentials(fake.credential_id, Secret(WRONG_SECRET)), with_keyring=False,
                            keyring=plugin.keyring)
        bad.bind_kube(sim.cluster)
        with pytest.raises(CreateError):
            try:
                await CloudProvider(bad).create(NodeClaim.model_validate(launched[0]))
            except CreateError:
                logging.getLogger("karpy.operator").exception("provisioning pass failed; retrying at the next batch")
                raise
        await drain_all(sim)
        await plugin.aclose()
    logs = buf.getvalue()

    assert fake.tokens_issued >= 2
    assert '"logger":"httpcore.http11"' in logs and '"logger":"httpx"' in logs
    assert "Traceback" in logs
    events = sim.cluster.objects("Event")
    assert any(e.get("type") == "Warning" for e in events)
    exposition = metrics.render().decode()
    assert 'provider="kakaocloud"' in exposition

    boot = [s for s in sim.cluster.objects("Secret") if s.get("type") == "bootstrap.kubernetes.io/token"]
    assert boot and user_data
    secrets: dict[str, str | bytes] = {
        "credential secret": fake.credential_secret, "wrong credential secret": WRONG_SECRET,
        "signing key k1": KEY1, "signing key k2": KEY2,
    }
    secrets.update({f"IAM token {i}": t for i, t in enumerate(fake.tokens)})
    for s in boot:
        data = s["stringData"]
        secrets[f"bootstrap token {data['token-id']}"] = f"{data['token-id']}.{data['token-secret']}"
        secrets[f"bootstrap token secret {data['token-id']}"] = data["token-secret"]
    secrets.update({f"user data {i}": u for i, u in enumerate(user_data)})
    leaks = find_leaks({"logs": logs, "events": json.dumps(events), "metrics": exposition}, secrets)
    assert not leaks, "\n".join(leaks[:10])


async def test_an_error_body_echoing_the_request_is_never_stored_logged_or_raised(fake, make_provider):
    """Issue 34 item 4: a gateway that quotes the request in its error (a 403 on create quoting
    ``X-Auth-Token``, an IAM 400 quoting the application-credential secret) reached the NodeClaim's
    ``Launched`` condition, stored in the API server. Every stored object, Event, log line and
    exception message is searched."""
    messages: list[str] = []
    with capture_logs() as buf:
        sim, plugin = await start(fake, make_provider)
        assert (await plugin.reconcile_nodeclass("karpenter-default")).ready
        fake.inject(403, method="POST", path=r"/bcs/api/v1/instances$", times=10**6, echo=True)
        for _ in range(2):  # each step is a provisioning pass and two lifecycle passes: creates answered 403
            await sim.step()
        claims = sim.cluster.objects("NodeClaim")
        launched = [c for nc in claims for c in (nc.get("status") or {}).get("conditions") or [] if c["type"] == "Launched"]
        assert launched and all(c["status"] != "True" for c in launched)
        echoed = [c["message"] for c in launched if "rejected POST /bcs/api/v1/instances" in c["message"]]
        assert echoed and all(f"X-Auth-Token: {MASK}" in m for m in echoed), launched
        with pytest.raises(CreateError) as info:
            await CloudProvider(plugin).create(NodeClaim.model_validate(claims[0]))
        messages += [str(info.value), info.value.condition_message]
        assert "rejected POST" in str(info.value)

        # the token expires; IAM refuses the new token request with a 400 quoting its body
        fake.injections.clear()
        fake.inject(400, method="POST", path=r"/iam/identity/v3/auth/tokens$", times=10**6, echo=True)
        fake.expire_tokens()
        for _ in range(2):
            await sim.step()
        claims = sim.cluster.objects("NodeClaim")
        launched = [c for nc in claims for c in (nc.get("status") or {}).get("conditions") or [] if c["type"] == "Launched"]
        assert any("rejected POST /iam" in c["message"] for c in launched), launched
        try:
            await plugin.reconcile_nodeclass("karpenter-default")
        except KakaoCloudAPIError as exc:
            messages.append(str(exc))
        stored = sim.cluster.peek("KCNodeClass", "karpenter-default")
        assert stored is not None and any("rejected POST /iam" in c["message"] for c in stored["status"]["conditions"])
        with pytest.raises(CloudProviderError) as info2:  # the KCNodeClass is no longer Ready
            try:
                await CloudProvider(plugin).create(NodeClaim.model_validate(claims[0]))
            except CloudProviderError:
                logging.getLogger("karpy.operator").exception("launch failed")
                raise
        messages.append(str(info2.value))
        assert "rejected POST /iam" in str(info2.value) and '"secret":"[REDACTED]"' in str(info2.value)
        await plugin.aclose()
    haystacks = {
        "logs": buf.getvalue(), "messages": "\n".join(messages),
        **{f"stored {kind}": json.dumps(sim.cluster.objects(kind)) for kind in ("NodeClaim", "KCNodeClass", "NodePool", "Event")},
    }
    secrets: dict[str, str | bytes] = {"credential secret": fake.credential_secret}
    secrets.update({f"IAM token {i}": t for i, t in enumerate(fake.tokens)})
    assert fake.tokens
    leaks = find_leaks(haystacks, secrets)
    assert not leaks, "\n".join(leaks[:10])
