"""Values of EC2NodeClass fields that both the pydantic model (:mod:`karpy_aws.apis`) and the
CRD's rules (:mod:`karpy_aws.crd`) enumerate, kept here so neither module imports the other's
(``apis`` reaches ``crd`` only when a CRD is generated). Behaviour reference:
aws/karpenter-provider-aws ``pkg/apis/v1/ec2nodeclass.go`` and its CRD YAML."""

from __future__ import annotations

from karpy_core.cloudprovider.catalog.aws import AMIFamily

__all__ = ["ALIAS_FAMILIES", "EVICTION_SIGNALS", "RESERVED_KEYS", "RESTRICTED_TAG_KEYS"]

ALIAS_FAMILIES = AMIFamily.BY_ALIAS
"""Alias family (``al2023`` in ``al2023@latest``) -> the ``amiFamily`` it implies (one table with
karpy's simulated cloud: :attr:`karpy_core.cloudprovider.catalog.aws.AMIFamily.BY_ALIAS`)."""

RESTRICTED_TAG_KEYS = (
    "eks:eks-cluster-name",
    "karpenter.sh/nodepool",
    "karpenter.sh/nodeclaim",
    "karpenter.k8s.aws/ec2nodeclass",
)
"""Tag keys Karpenter sets itself; ``kubernetes.io/cluster*`` prefixes are restricted too."""

RESERVED_KEYS = ("cpu", "memory", "ephemeral-storage", "pid")
"""The keys of ``kubelet.kubeReserved`` / ``systemReserved``."""

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
"""The keys of ``kubelet.evictionHard`` / ``evictionSoft`` / ``evictionSoftGracePeriod``."""
