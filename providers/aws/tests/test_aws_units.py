"""AWS plugin pieces that need no emulator: user data, message parsing, error mapping, options."""

from __future__ import annotations

import tomllib

import pytest
from botocore.exceptions import ClientError
from karpy_aws.cache import UnavailableOfferings
from karpy_aws.clients import check_endpoint_url
from karpy_aws.errors import aws_errors
from karpy_aws.interruption import parse_message
from karpy_aws.nodeclass import alias_parameters
from karpy_aws.plugin import create_plugin, parse_provider_id
from karpy_aws.userdata import BootstrapOptions, render_user_data

from karpy_core.errors import (
    CloudProviderError,
    ConfigurationError,
    CreateError,
    InsufficientCapacityError,
    NodeClaimNotFoundError,
)

OPTS = BootstrapOptions(cluster_name="eks", cluster_endpoint="https://x", ca_bundle="Q0E=", labels=(("team", "a"),),
                        taints=("dedicated=gpu:NoSchedule",), max_pods=58)


def client_error(code: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": "m"}}, "Op")


@pytest.mark.parametrize(("code", "cls"), [("InvalidInstanceID.NotFound", NodeClaimNotFoundError),
                                           ("InsufficientInstanceCapacity", InsufficientCapacityError),
                                           ("UnauthorizedOperation", CreateError)])
def test_errors_keep_the_aws_code(code, cls):
    with pytest.raises(cls) as err, aws_errors("CreateFleet", launch=True):
        raise client_error(code)
    assert err.value.code == code and isinstance(err.value.__cause__, ClientError)
    with pytest.raises(CloudProviderError), aws_errors("DescribeSubnets"):
        raise client_error("Boom")


def test_al2023_user_data_merges_custom_parts_before_nodeconfig():
    custom = 'MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary="B"\n\n--B\nContent-Type: text/x-shellscript\n\necho hi\n--B--\n'
    text = render_user_data("AL2023", OPTS, custom)
    assert text.index("echo hi") < text.index("application/node.eks.aws")
    assert '"maxPods": 58' in text and "--node-labels=team=a" in text and "dedicated=gpu:NoSchedule" in text


def test_bottlerocket_toml_is_valid_and_merged():
    doc = tomllib.loads(render_user_data("Bottlerocket", OPTS, '[settings.kubernetes]\nmax-pods = 10\n[settings.host-containers.admin]\nenabled = true\n'))
    k8s = doc["settings"]["kubernetes"]
    assert k8s["cluster-name"] == "eks" and k8s["max-pods"] == 10 and k8s["node-labels"] == {"team": "a"}
    assert k8s["node-taints"] == {"dedicated": ["gpu:NoSchedule"]} and doc["settings"]["host-containers"]["admin"]["enabled"]


def test_custom_user_data_passes_through_and_al2_bootstraps():
    assert render_user_data("Custom", OPTS, "#!/bin/bash\necho x") == "#!/bin/bash\necho x"
    assert "/etc/eks/bootstrap.sh 'eks'" in render_user_data("AL2", OPTS, None)


def test_alias_paths():
    names = [n for n, _, _ in alias_parameters("al2023@latest", "1.33")]
    assert "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id" in names
    assert alias_parameters("bottlerocket@v1.2.3", "1.33")[0][0] == "/aws/service/bottlerocket/aws-k8s-1.33/x86_64/1.2.3/image_id"


def test_parse_interruption_messages():
    m = parse_message('{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2",'
                      '"eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"}]}}')
    assert (m.kind, m.instance_ids) == ("scheduled_change", ("i-1",))
    m = parse_message('{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-2","state":"stopping"}}')
    assert m.kind == "state_change"
    with pytest.raises(ValueError):
        parse_message("[]")


def test_provider_ids_options_and_unavailable_ttl():
    assert parse_provider_id("aws:///us-east-1a/i-0abc") == ("us-east-1a", "i-0abc")
    with pytest.raises(NodeClaimNotFoundError):
        parse_provider_id("kwok:///x/y")
    with pytest.raises(ConfigurationError):
        check_endpoint_url("http://example.com:5000")
    assert check_endpoint_url("http://127.0.0.1:5000")
    with pytest.raises(ConfigurationError):
        create_plugin({"region": "us-east-1"})
    now = [0.0]
    cache = UnavailableOfferings(lambda: now[0])
    cache.mark("spot", "m5.large", "a")
    assert cache.is_unavailable("spot", "m5.large", "a")
    now[0] = 181
    assert not cache.is_unavailable("spot", "m5.large", "a")


def test_an_aws_error_message_echoing_the_signed_request_is_scrubbed():
    """Issue 34 item 4: aws_errors keeps AWS's own message; one that quotes the signed headers
    leaves the error (and so the Launched condition) without the token, key id or signature."""
    token, signature = "FwoGZXIvYXdzEJrUnregisteredEchoToken0034", "9" * 64
    echo = (f"rejected: {{'X-Amz-Security-Token': '{token}', 'Authorization': 'AWS4-HMAC-SHA256 "
            f"Credential=ASIAECHOECHOECHO0034/20261206/ap-northeast-2/ec2/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={signature}'}} Signature={signature}")
    with pytest.raises(CreateError) as info, aws_errors("CreateFleet", launch=True):
        raise ClientError({"Error": {"Code": "InvalidParameterValue", "Message": echo}}, "CreateFleet")
    for text in (str(info.value), info.value.condition_message):
        assert "rejected" in text and "CreateFleet failed" in text
        for secret in (token, signature, "ASIAECHOECHOECHO0034"):
            assert secret not in text


def test_a_malformed_shared_credentials_file_is_named_never_quoted(tmp_path, monkeypatch):
    """A credentials file that fails to parse: botocore names the file; the line holding the
    secret (configparser quotes it) stays out of the error karpy shows."""
    secret = "wJalrXUtnFEMIK7MDENGbPxRfiCYzqMalformed34"
    path = tmp_path / "credentials"
    path.write_text(f"[default]\naws_access_key_id = AKIAEXAMPLEEXAMPLE34\naws_secret_access_key {secret}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "absent"))
    with pytest.raises(Exception) as info:
        create_plugin({"region": "ap-northeast-2", "cluster_name": "c", "cluster_endpoint": "https://x"})
    assert str(path) in str(info.value) and secret not in str(info.value) and secret not in repr(info.value)
