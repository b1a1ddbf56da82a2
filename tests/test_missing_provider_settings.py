"""The in-tree providers word a required setting that nothing gave the same way (fresh-user trial,
issue 35: aws said ``option 'cluster_name' is required``, kakaocloud ``option cluster_name (the
Kubernetes Engine cluster) is required``, and aws's missing region a third way): what it is, the
option, how ``karpy simulate``/``validate`` and ``karpy controller`` give it, with Karpenter's
environment variable (:func:`karpy_core.cloudprovider.options.missing_setting`)."""

from __future__ import annotations

import pytest

from karpy_core.cloudprovider.context import ProviderContext
from karpy_core.cloudprovider.options import missing_setting
from karpy_core.errors import ConfigurationError


def test_the_wording() -> None:
    error = missing_setting("acme", "the zone", "zone", simulate="--provider-option zone=ZONE", controller="--zone or ACME_ZONE",
                            also="the metadata service")
    assert isinstance(error, ConfigurationError)
    assert str(error) == ("acme provider: the zone is required: option zone (karpy simulate and validate: "
                          "--provider-option zone=ZONE; karpy controller: --zone or ACME_ZONE), or the metadata service")


def test_aws_and_kakaocloud_word_a_missing_cluster_name_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    aws = pytest.importorskip("karpy_aws.plugin")
    kakaocloud = pytest.importorskip("karpy_kakaocloud.plugin")
    monkeypatch.delenv("CLUSTER_NAME", raising=False)
    with pytest.raises(ConfigurationError) as from_aws:
        aws.create_plugin({"region": "us-east-1"})
    with pytest.raises(ConfigurationError) as from_kakaocloud:  # refused when prepared (the controller's context)
        kakaocloud.create_plugin({}).karpy_prepare(ProviderContext())
    tail = ("is required: option cluster_name (karpy simulate and validate: --provider-option cluster_name=NAME; "
            "karpy controller: --cluster-name or CLUSTER_NAME)")
    assert str(from_aws.value) == f"aws provider: the cluster name {tail}"
    assert str(from_kakaocloud.value) == f"kakaocloud provider: the cluster name (the Kubernetes Engine cluster) {tail}"


def test_aws_words_a_missing_region_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a region and a cluster name both are named, the region first, before any region source
    is asked (no SDK chain, no instance metadata service)."""
    aws = pytest.importorskip("karpy_aws.plugin")
    with pytest.raises(ConfigurationError) as info:
        aws.create_plugin({})
    assert str(info.value) == (
        "aws provider: the region is required: option region (karpy simulate and validate: --provider-option "
        "region=REGION (simulate: --region REGION too); karpy controller: --region or AWS_REGION (AWS_DEFAULT_REGION)), "
        "or a region in the shared AWS config, or the instance metadata service where karpy runs on EC2; aws provider: "
        "the cluster name is required: option cluster_name (karpy simulate and validate: --provider-option "
        "cluster_name=NAME; karpy controller: --cluster-name or CLUSTER_NAME)")
