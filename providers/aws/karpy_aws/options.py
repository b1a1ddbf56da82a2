"""The AWS provider's options (``create_plugin(options)``), one pydantic model."""

from __future__ import annotations

from typing import Any, ClassVar

from karpy_core.cloudprovider.options import ProviderOptions, missing_setting
from karpy_core.errors import ConfigurationError

__all__ = ["AWSOptions", "missing_region"]


class AWSOptions(ProviderOptions):
    """Options of the ``aws`` provider.

    Attributes:
        region: AWS region (default: the SDK's chain, :func:`karpy_aws.region.resolve_region`).
        cluster_name: EKS cluster name (required).
        cluster_endpoint: API server URL for user data (default: EKS DescribeCluster at start).
        endpoint_url: a loopback emulator's URL (moto); never a real endpoint.
        interruption_queue: SQS queue name for interruption events.
        vm_memory_overhead_percent: fraction of memory the hypervisor keeps (0.075).
        reserved_enis: ENIs left out of the max-pods formula (``RESERVED_ENIS``, 0).
        kube: the KubeClient to read EC2NodeClasses and write Events.
        nodeclasses: ``{name: EC2NodeClass or its dict}`` when there is no kube client.
        clock: a callable returning seconds, or an object with ``now()``.
        session: an ``aioboto3.Session`` (default: the botocore credential chain).
        kubernetes_version: for AMI aliases (``"1.33"``).
        cluster_cidr / ca_bundle: bootstrap settings.
        instance_type_data: a shared :class:`~karpy_aws.instancetypes.InstanceTypeData`.
        dry_run: validate launches with RunInstances DryRun (True).
        security_group_drift: report ``SecurityGroupDrift`` (True).
        use_pricing_api: read on-demand prices from the Pricing API (True).
    """

    provider: ClassVar[str] = "aws"
    objects: ClassVar[frozenset[str]] = frozenset({"kube", "nodeclasses", "clock", "session", "instance_type_data"})

    region: str = ""
    cluster_name: str = ""
    cluster_endpoint: str | None = None
    endpoint_url: str | None = None
    interruption_queue: str | None = None
    vm_memory_overhead_percent: float = 0.075
    reserved_enis: int = 0
    kube: Any = None
    nodeclasses: Any = None
    clock: Any = None
    session: Any = None
    kubernetes_version: str = "1.33"
    cluster_cidr: str = "10.100.0.0/16"
    ca_bundle: str = ""
    instance_type_data: Any = None
    dry_run: bool = True
    security_group_drift: bool = True
    use_pricing_api: bool = True

    def check_required(self) -> None:
        """Raises:
            ConfigurationError: ``region`` or ``cluster_name`` is empty: one message naming each
                missing setting (``; ``-separated), so a fix is not followed by the next one's error.
        """
        missing = [] if self.region else [str(missing_region())]
        if not self.cluster_name:
            missing.append(str(missing_setting("aws", "the cluster name", "cluster_name",
                                               simulate="--provider-option cluster_name=NAME",
                                               controller="--cluster-name or CLUSTER_NAME")))
        if missing:
            raise ConfigurationError("; ".join(missing))


def missing_region() -> ConfigurationError:
    """No region anywhere (:func:`karpy_aws.region.resolve_region`'s sources), in the wording of every
    missing provider setting (:func:`~karpy_core.cloudprovider.options.missing_setting`)."""
    return missing_setting("aws", "the region", "region", simulate="--provider-option region=REGION (simulate: --region REGION too)",
                           controller="--region or AWS_REGION (AWS_DEFAULT_REGION)",
                           also="a region in the shared AWS config, or the instance metadata service where karpy runs on EC2")
