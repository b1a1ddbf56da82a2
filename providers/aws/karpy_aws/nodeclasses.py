"""Where the AWS provider reads EC2NodeClasses from, resolves them and matches AMIs to types.

EC2NodeClasses come from the kube client when there is one (a 404 falls back to the static
``nodeclasses`` mapping), else from that mapping alone. :meth:`NodeClassSource.resolved` refreshes
the status through the resolver (cached 60 s) and refuses a NodeClass that is not Ready;
:meth:`NodeClassSource.types_for` keeps the instance types some resolved AMI can run.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import ValidationError

from karpy_aws.apis import AMI, EC2NodeClass
from karpy_core.errors import NodeClassNotReadyError, NotFoundError
from karpy_core.scheduling.requirements import Requirement, Requirements

if TYPE_CHECKING:
    from karpy_aws.instancetypes import InstanceTypeProvider
    from karpy_aws.nodeclass import NodeClassResolver
    from karpy_core.cloudprovider.types import InstanceType
    from karpy_core.kube.port import KubeClient

__all__ = ["NodeClassSource", "ami_for"]


def ami_for(it: InstanceType, amis: list[AMI]) -> AMI | None:
    """The first AMI whose requirements ``it`` satisfies, or None."""
    for ami in amis:
        reqs = Requirements.of(*(Requirement.new(r.key, r.operator, r.values or ()) for r in ami.requirements))
        if it.requirements.intersects(reqs):
            return ami
    return None


class NodeClassSource:
    """EC2NodeClass access for the AWS provider (see the module docstring).

    Attributes:
        kube: the KubeClient to read from (assignable), or None.
        nodeclasses: the static ``{name: EC2NodeClass}`` mapping (shared, mutable).
    """

    def __init__(self, *, kube: KubeClient | None, nodeclasses: dict[str, EC2NodeClass], resolver: NodeClassResolver,
                 instance_types: InstanceTypeProvider):
        self.kube = kube
        self.nodeclasses = nodeclasses
        self.resolver = resolver
        self.instance_types = instance_types

    async def get(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass ``name`` (unresolved), or None when it does not exist.

        Raises:
            NodeClassNotReadyError: the stored object does not validate.
            KubeAPIError: the read failed other than with 404.
        """
        if self.kube is not None:
            try:
                obj = await self.kube.get("EC2NodeClass", name)
            except NotFoundError:
                return self.nodeclasses.get(name)
            try:
                return EC2NodeClass.model_validate(obj)
            except ValidationError as exc:
                raise NodeClassNotReadyError(f"EC2NodeClass {name} is invalid: {exc}") from exc
        return self.nodeclasses.get(name)

    async def resolved(self, name: str) -> EC2NodeClass:
        """The EC2NodeClass ``name`` with a fresh (cached 60 s) status.

        Raises:
            NodeClassNotReadyError: missing, or not Ready (the message carries the failing condition).
        """
        nc = await self.get(name)
        if nc is None:
            raise NodeClassNotReadyError(f"EC2NodeClass {name} not found")
        res = await self.resolver.resolve(nc)
        if not res.ready:
            ready = next((c for c in res.nodeclass.status.conditions if c.type == "Ready"), None)
            why = f"{ready.reason}: {ready.message}" if ready else "not resolved"
            raise NodeClassNotReadyError(f"EC2NodeClass {name} is not Ready ({why})", code=ready.reason if ready else None)
        return res.nodeclass

    async def types_for(self, nc: EC2NodeClass) -> tuple[list[InstanceType], dict[str, AMI]]:
        """The instance types of ``nc`` some resolved AMI can run, and type name -> that AMI."""
        types = await self.instance_types.list(nc)
        amis: dict[str, AMI] = {}
        out = []
        for it in types:
            ami = ami_for(it, nc.status.amis)
            if ami is not None:
                amis[it.name] = ami
                out.append(it)
        return out, amis
