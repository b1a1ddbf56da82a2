"""Instance tagging after registration (Karpenter AWS ``pkg/controllers/nodeclaim/tagging``).

Once a NodeClaim is ``Registered`` its instance gets, through one CreateTags call:

* ``Name``: the Node's name (what the EC2 console and cost reports show), unless the
  EC2NodeClass's ``spec.tags`` sets ``Name`` itself;
* ``karpenter.sh/nodeclaim``: the NodeClaim's name;
* ``eks:eks-cluster-name``: the cluster name.

The NodeClaim is then annotated ``karpenter.k8s.aws/tagged: "true"`` and never tagged again.
NodeClaims being deleted, unregistered ones and those without an AWS provider ID are skipped; a
failure is logged and retried on the next pass.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

from karpy_aws.errors import call
from karpy_aws.instances import parse_provider_id
from karpy_aws.launch import TAG_CLUSTER_NAME, TAG_NODECLAIM
from karpy_core.errors import CloudProviderError, KubeAPIError, NodeClaimNotFoundError
from karpy_core.logs import fields
from karpy_core.state.cluster import is_true

if TYPE_CHECKING:
    from karpy_aws.apis import EC2NodeClass
    from karpy_aws.clients import AWSClients
    from karpy_core.kube.port import KubeClient

__all__ = ["ANNOTATION_TAGGED", "InstanceTagging", "TaggingHost"]

log = logging.getLogger(__name__)

ANNOTATION_TAGGED = "karpenter.k8s.aws/tagged"


class TaggingHost(Protocol):
    """What tagging needs from the AWS provider (:class:`~karpy_aws.plugin.AWSProvider` is one)."""

    @property
    def kube(self) -> KubeClient | None: ...

    clients: AWSClients
    cluster_name: str

    async def get_nodeclass(self, name: str) -> EC2NodeClass | None: ...


class InstanceTagging:
    """Tags registered NodeClaims' instances (see the module docstring).

    Args:
        provider: the AWS provider (its kube client, EC2 client, cluster name and EC2NodeClasses).
    """

    name = "aws.nodeclaim.tagging"

    def __init__(self, provider: TaggingHost):
        self.provider = provider

    async def reconcile(self) -> list[str]:
        """One pass; returns the names of the NodeClaims tagged. AWS and API errors on one claim
        are logged and retried next pass; a failed NodeClaim list raises ``KubeAPIError``."""
        kube = self.provider.kube
        if kube is None:
            return []
        done = []
        for nc in await kube.list("NodeClaim"):
            meta = nc["metadata"]
            status = nc.get("status") or {}
            if meta.get("deletionTimestamp") or (meta.get("annotations") or {}).get(ANNOTATION_TAGGED) == "true":
                continue
            if not is_true(nc, "Registered") or not status.get("nodeName"):
                continue
            try:
                _, instance_id = parse_provider_id(status.get("providerID", ""))
            except NodeClaimNotFoundError:
                continue  # not an AWS instance: not ours to tag
            try:
                await self._tag(nc, instance_id)
                await kube.patch("NodeClaim", meta["name"], {"metadata": {"annotations": {ANNOTATION_TAGGED: "true"}}})
            except (CloudProviderError, KubeAPIError) as exc:
                log.warning("tagging the instance failed; retrying",
                            extra=fields(nodeclaim=meta["name"], provider_id=status.get("providerID"), node=status.get("nodeName"),
                                         instance=instance_id, error=exc))
                continue
            done.append(meta["name"])
        return done

    async def _tag(self, nc: dict[str, Any], instance_id: str) -> None:
        tags = {TAG_NODECLAIM: nc["metadata"]["name"], TAG_CLUSTER_NAME: self.provider.cluster_name,
                "Name": nc["status"]["nodeName"]}
        ref = (nc.get("spec") or {}).get("nodeClassRef") or {}
        nodeclass = await self.provider.get_nodeclass(ref.get("name", "")) if ref.get("name") else None
        if nodeclass is not None and "Name" in nodeclass.spec.tags:
            del tags["Name"]  # the user's own Name tag (set at launch) wins
        ec2 = await self.provider.clients.ec2()
        await call(ec2.create_tags, "CreateTags", subject=f"NodeClaim {nc['metadata']['name']}", Resources=[instance_id],
                   Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())])
