"""karpy_core.redaction and the logging setup of karpy_core.observability (issue 10 §3)."""

from __future__ import annotations

import base64
import io
import json
import logging
from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core.cli import app
from karpy_core.errors import CloudProviderError, ConfigurationError, CreateError, KubeAPIError
from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.observability import parse_debug_loggers
from karpy_core.redaction import MASK, RedactingFilter, Redactor, redact, redact_stored, register_secret
from tests.secret_scan import capture_logs, forms

TOKEN = "Zm9vYmFyLXNlY3JldC10b2tlbi12YWx1ZS0wMDE"
KEY = bytes(range(200, 232))


def test_registered_values_are_scrubbed_in_every_form():
    r = Redactor()
    r.register(TOKEN)
    r.register(KEY)
    for secret in (TOKEN, KEY):
        for name, form in forms(secret).items():
            out = r.scrub(f"before {form} after")
            assert form not in out and MASK in out, (name, out)
            assert out.startswith("before ") and out.endswith(" after")


@pytest.mark.parametrize("prefix", range(6))
@pytest.mark.parametrize("suffix", range(3))
def test_a_registered_value_inside_a_base64_blob_is_scrubbed_at_any_alignment(prefix, suffix):
    r = Redactor()
    r.register("abcdef.0123456789abcdef")
    blob = base64.b64encode(b"#!/bin/bash\nkubeadm join"[:prefix] + b"abcdef.0123456789abcdef" + b"\n--"[:suffix]).decode()
    out = r.scrub(f"user_data={blob}")
    assert MASK in out
    # what is left cannot rebuild the token's characters: no 12 base64 chars of the token survive
    for enc in (base64.b64encode(b"\0" * o + b"abcdef.0123456789abcdef").decode() for o in range(3)):
        assert not any(enc[i:i + 12] in out for i in range(4, len(enc) - 16))


def test_short_and_empty_values_are_not_registered():
    r = Redactor()
    for value in (None, "", "abc", b"\0\1"):
        r.register(value)
    assert len(r) == 0
    assert r.scrub("abc is a word") == "abc is a word"


def test_the_registry_is_bounded():
    r = Redactor(max_secrets=3)
    for i in range(5):
        r.register(f"secret-number-{i}")
    assert len(r) == 3
    assert r.scrub("secret-number-4") == MASK


@pytest.mark.parametrize(("text", "leak"), [
    # botocore endpoint DEBUG: the prepared request's headers
    ("headers={'X-Amz-Date': b'20261201T000000Z', 'X-Amz-Security-Token': b'IQoJb3JpZ2luX2VjEA+/=', "
     "'Authorization': b'AWS4-HMAC-SHA256 Credential=ASIAXXXXXXXXXXXXXXXX/20261201/ap-northeast-2/ec2/aws4_request'}",
     ("IQoJb3JpZ2luX2VjEA+/=", "ASIAXXXXXXXXXXXXXXXX")),
    # botocore auth DEBUG: the SigV4 canonical request
    ("host:127.0.0.1:1\nx-amz-date:20261201T000000Z\nx-amz-security-token:IQoJb3JpZ2luX2VjEA+/=\n\nhost;x-amz-date",
     ("IQoJb3JpZ2luX2VjEA+/=",)),
    # httpcore DEBUG: response headers as tuples
    ("[(b'X-Subject-Token', b'gAAAAbcdef0123'), (b'Content-Type', b'application/json')]", ("gAAAAbcdef0123",)),
    ("X-Auth-Token: gAAAAbcdef0123", ("gAAAAbcdef0123",)),
    # botocore parsers DEBUG: an STS answer
    ("<Credentials><AccessKeyId>ASIAYYYYYYYYYYYYYYYY</AccessKeyId><SecretAccessKey>wJalrXUtnFEMI/K7MDENG</SecretAccessKey>"
     "<SessionToken>FwoGZXIvYXdzEJr</SessionToken></Credentials>",
     ("ASIAYYYYYYYYYYYYYYYY", "wJalrXUtnFEMI/K7MDENG", "FwoGZXIvYXdzEJr")),
    # container credentials JSON, presigned URLs, config dumps
    ('{"AccessKeyId": "AKIAZZZZZZZZZZZZZZZZ", "SecretAccessKey": "wJalrXUtnFEMI", "Token": "FwoGZXIvYXdz"}',
     ("AKIAZZZZZZZZZZZZZZZZ", "wJalrXUtnFEMI", "FwoGZXIvYXdz")),
    ("https://b.s3.amazonaws.com/k?X-Amz-Security-Token=FwoGZXIvYXdz&X-Amz-Signature=abc123", ("FwoGZXIvYXdz", "abc123")),
    ("aws_session_token = FwoGZXIvYXdz", ("FwoGZXIvYXdz",)),
    ("{'application_credential': {'id': 'x', 'secret': 's3cr3t-app'}}", ("s3cr3t-app",)),
    # a service-account token (JWT) in a header and in prose
    ("Authorization: Bearer eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJl",
     ("eyJpc3MiOiJrdWJlcm5ldGVzIn0", "c2lnbmF0dXJl")),
    ("web identity token eyJhbGciOiJSUzI1NiIsImtpZCI6IngifQ.eyJpc3MiOiJrdWJlcm5ldGVzIn0.c2lnbmF0dXJl refused",
     ("eyJpc3MiOiJrdWJlcm5ldGVzIn0", "c2lnbmF0dXJl")),
    # kubeadm bootstrap token
    ("kubeadm join 10.0.0.10:6443 --token 07401b.f395accd246ae52d --discovery-token-ca-cert-hash sha256:00",
     ("07401b.f395accd246ae52d", "f395accd246ae52d")),
])
def test_credential_patterns_are_scrubbed_without_registration(text, leak):
    out = Redactor().scrub(text)
    for value in leak:
        assert value not in out, out
    assert MASK in out


def test_ordinary_identifiers_survive():
    text = ("CreateFleet {'ClientToken': 'nc-default-abc12', 'NextToken': 'p2'} i-0123456789abcdef0 ami-0a1023x86standard "
            "subnet-0abc sg-0def karpenter.sh/nodepool=default 10.0.0.10:6443 sha256:5845568dc05a04a60a52")
    assert Redactor().scrub(text) == text


def test_filter_scrubs_message_args_extra_and_exception_for_any_handler():
    register_secret("filter-test-secret-value")
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(message)s %(field)s"))
    handler.addFilter(RedactingFilter())
    log = logging.getLogger("karpy.test.redaction")
    log.addHandler(handler)
    log.propagate = False
    try:
        try:
            raise RuntimeError("refused filter-test-secret-value")
        except RuntimeError:
            log.error("token %s", "filter-test-secret-value", extra={"field": {"t": "filter-test-secret-value"}}, exc_info=True)
    finally:
        log.removeHandler(handler)
        log.propagate = True
    out = buf.getvalue()
    assert "filter-test-secret-value" not in out
    assert out.count(MASK) >= 3 and "Traceback" in out


def test_log_lines_keep_fields_and_tracebacks_and_scrub_them():
    register_secret("json-line-secret-value")
    with capture_logs(()) as buf:
        log = logging.getLogger("karpy.test.redaction")
        log.info("issued %s", "json-line-secret-value", extra={"expires_at": "2026-12-01", "tok": "json-line-secret-value"})
        try:
            raise ValueError("bad json-line-secret-value")
        except ValueError:
            log.exception("failed")
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [line["message"] for line in lines] == [f"issued {MASK}", "failed"]
    assert lines[0]["expires_at"] == "2026-12-01" and lines[0]["tok"] == MASK
    assert "Traceback" in lines[1]["stacktrace"] and f"ValueError: bad {MASK}" in lines[1]["stacktrace"]
    assert lines[1]["error"] == f"ValueError: bad {MASK}"
    assert "json-line-secret-value" not in buf.getvalue()


def test_third_party_loggers_stay_at_warning_unless_named():
    with capture_logs(()) as buf:
        logging.getLogger("botocore.endpoint").debug("botocore debug")
        logging.getLogger("urllib3").info("urllib3 info")
        logging.getLogger("httpx").warning("httpx warning")
        logging.getLogger("karpy_aws.launch").debug("karpy debug")
    text = buf.getvalue()
    assert "botocore debug" not in text and "urllib3 info" not in text
    assert "httpx warning" in text and "karpy debug" in text

    with capture_logs(["botocore", "httpx=INFO"]) as buf:
        logging.getLogger("botocore.endpoint").debug("botocore debug")
        logging.getLogger("httpx").debug("httpx debug")
        logging.getLogger("httpx").info("httpx info")
    text = buf.getvalue()
    assert "botocore debug" in text and "httpx info" in text and "httpx debug" not in text


def test_parse_debug_loggers():
    assert parse_debug_loggers("botocore, httpx=info,,") == {"botocore": logging.DEBUG, "httpx": logging.INFO}
    assert parse_debug_loggers(["urllib3", "a=WARNING,b"]) == {"urllib3": logging.DEBUG, "a": logging.WARNING, "b": logging.DEBUG}
    assert parse_debug_loggers(None) == {}
    for bad in ("botocore=LOUD", "=DEBUG"):
        with pytest.raises(ValueError, match="NAME=LEVEL"):
            parse_debug_loggers(bad)


def test_controller_refuses_a_bad_logger_spec():
    result = CliRunner().invoke(app, ["controller", "--cloud-provider", "simulated", "--log-debug-loggers", "botocore=LOUD"])
    assert result.exit_code == 2
    assert "bad logger spec 'botocore=LOUD'" in result.output


def test_redact_uses_the_process_registry():
    register_secret("process-wide-secret-value")
    assert redact("x process-wide-secret-value y") == f"x {MASK} y"


def test_a_loaded_provider_plugin_logs_at_karpys_level():
    """A third-party provider's package is part of karpy: it follows LOG_LEVEL, not the WARNING
    floor of libraries, unless a level was set for it by name."""
    from karpy_core.cloudprovider.provider import _plugin_logs_like_karpy

    for name in ("karpy_mycloud", "karpy_named"):
        logging.getLogger(name).setLevel(logging.NOTSET)
    try:
        with capture_logs(["karpy_named=ERROR"]) as buf:
            _plugin_logs_like_karpy("karpy_mycloud.plugin")
            _plugin_logs_like_karpy("karpy_named.plugin")
            logging.getLogger("karpy_mycloud.launch").debug("plugin debug")
            logging.getLogger("karpy_named.launch").warning("named warning")
        text = buf.getvalue()
        assert "plugin debug" in text and "named warning" not in text
    finally:
        for name in ("karpy_mycloud", "karpy_named"):
            logging.getLogger(name).setLevel(logging.NOTSET)


# ---- issue 34 item 4: what is stored and raised, not only what is logged ------------------------------------
SECRET = "stored-secret-value-0034-xyz"


def test_redact_stored_scrubs_status_and_event_text_only():
    register_secret(SECRET)
    patch: dict[str, Any] = {"status": {"conditions": [{"type": "Launched", "status": "Unknown", "reason": "CreateFailed",
                                        "message": f"HTTP 403: rejected headers: X-Auth-Token: tok-{SECRET}"}],
                        "providerID": "kakaocloud:///kr-central-2-a/0c1f"}}
    out = redact_stored("NodeClaim", patch)
    message = out["status"]["conditions"][0]["message"]
    assert SECRET not in message and "X-Auth-Token: " + MASK in message
    assert out["status"]["providerID"] == "kakaocloud:///kr-central-2-a/0c1f"
    assert SECRET in patch["status"]["conditions"][0]["message"]  # the caller's dict is left alone
    event = {"kind": "Event", "reason": "LaunchFailed", "message": f"secret {SECRET}", "note": f"'token': '{SECRET}'"}
    scrubbed = redact_stored("Event", event)
    assert SECRET not in json.dumps(scrubbed) and scrubbed["reason"] == "LaunchFailed"
    # spec/metadata carry intended values; a bootstrap token Secret is a credential by design
    spec = {"spec": {"userData": f"x {SECRET}"}, "metadata": {"annotations": {"a": "b"}}}
    assert redact_stored("NodeClaim", spec) is spec
    boot = {"stringData": {"token-secret": SECRET}, "status": {"x": SECRET}}
    assert redact_stored("Secret", boot) is boot
    clean = {"status": {"conditions": [{"type": "Ready", "status": "True", "message": ""}]}}
    assert redact_stored("NodeClaim", clean) is clean


async def test_both_kubeclient_adapters_store_no_secret_whatever_the_caller_writes():
    """The write path, not the callers: a status patch, a create and a replace quoting a secret."""
    register_secret(SECRET)
    kube = InMemoryCluster()
    await kube.create("NodeClaim", {"metadata": {"name": "a"}, "spec": {},
                                    "status": {"conditions": [{"type": "Launched", "message": SECRET}]}})
    await kube.patch("NodeClaim", "a", {"status": {"conditions": [{"type": "Launched", "message": f"body: {SECRET}"}]}}, status=True)
    obj = await kube.get("NodeClaim", "a")
    obj["status"]["conditions"].append({"type": "Registered", "message": f"X-Auth-Token: {SECRET}"})
    await kube.replace("NodeClaim", obj)
    await kube.create("Event", {"metadata": {"name": "e", "namespace": "default"}, "reason": "R", "message": SECRET})
    stored = json.dumps([kube.objects("NodeClaim"), kube.objects("Event")])
    assert SECRET not in stored and MASK in stored

    sent: list[tuple[str, str, Any]] = []

    class Answer:
        status = 200

        async def read(self) -> bytes:
            return b"{}"

        def release(self) -> None:
            pass

    class Recording:
        async def request(self, method: str, path: str, **kw: Any) -> Answer:
            sent.append((method, path, kw.get("body")))
            return Answer()

        async def close(self) -> None:
            pass

    client = AsyncKubeClient(Recording())  # type: ignore[arg-type]
    await client.patch("NodeClaim", "a", {"status": {"conditions": [{"message": SECRET}]}}, status=True)
    await client.create("Event", {"metadata": {"name": "e"}, "message": f"token {SECRET}"})
    await client.replace("NodeClaim", {"metadata": {"name": "a"}, "status": {"conditions": [{"message": SECRET}]}})
    await client.create("Secret", {"metadata": {"name": "bootstrap-token-abcdef"}, "stringData": {"token-secret": SECRET}})
    assert len(sent) == 4
    assert SECRET not in json.dumps([body for _, _, body in sent[:3]])
    assert sent[3][2]["stringData"]["token-secret"] == SECRET  # the bootstrap token is written as it is


def test_karpy_errors_are_scrubbed_when_made():
    register_secret(SECRET)
    create = CreateError(f"KakaoCloud iam HTTP 400: body {{\"secret\": \"{SECRET}\"}}", condition_reason="CreateFailed")
    assert SECRET not in str(create) and SECRET not in create.condition_message and MASK in create.condition_message
    explicit = CreateError("x", condition_reason="R", condition_message=f"Authorization: AWS4-HMAC-SHA256 Signature={'a' * 64}")
    assert "a" * 64 not in explicit.condition_message
    kube = KubeAPIError.from_status(f"denied {SECRET}", status=403, reason="Forbidden", causes=(f"cause {SECRET}",))
    assert SECRET not in str(kube) and SECRET not in kube.causes[0]
    assert SECRET not in str(CloudProviderError(f"echo {SECRET}", code="AuthFailure"))
    assert SECRET not in str(ConfigurationError(f"bad {SECRET}"))
    # a SigV4 signature quoted on its own, as an error body may
    assert "f" * 64 not in redact(f"signed with SignedHeaders=host;x-amz-date, Signature={'f' * 64} at")
    assert "e" * 64 not in redact(f"Signature:\n{'e' * 64}")  # botocore.auth at DEBUG
