"""A call-recording cloud provider for controller tests, with injectable errors; typed helpers that
read an object or condition the test expects to exist."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy_core.cloudprovider import hookimpl
from karpy_core.errors import NodeClaimNotFoundError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import condition
from tests.scheduling.helpers import make_type


class FakeProvider:
    """Records every hook call in ``calls``; ``next_create_error`` is raised by the next create."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.instances: dict[str, Any] = {}
        self.next_create_error: Exception | None = None
        self.types = [make_type("small", 2, 4), make_type("large", 8, 16)]
        self.drift: dict[str, str] = {}
        """NodeClaim name -> the drift reason ``is_drifted`` reports."""
        self.next_drift_error: Exception | None = None
        self.repair: list[dict[str, Any]] = []
        """What ``repair_policies`` returns."""

    @hookimpl
    def karpy_name(self) -> str:
        return "fake"

    @hookimpl
    def karpy_supported_node_classes(self) -> list[tuple[str, str]]:
        return [("karpenter.k8s.aws", "EC2NodeClass")]

    @hookimpl
    async def karpy_create(self, nodeclaim):
        self.calls.append(("create", nodeclaim.metadata.name))
        if self.next_create_error is not None:
            err, self.next_create_error = self.next_create_error, None
            raise err
        out = nodeclaim.model_copy(deep=True)
        out.metadata.labels = {**out.metadata.labels, "node.kubernetes.io/instance-type": "small",
                               "topology.kubernetes.io/zone": "zone-a", "karpenter.sh/capacity-type": "on-demand"}
        out.status.provider_id = f"fake:///zone-a/{nodeclaim.metadata.name}"
        out.status.capacity = {"cpu": "2", "memory": "4Gi", "pods": "110"}
        out.status.allocatable = {"cpu": "2", "memory": "4Gi", "pods": "110"}
        self.instances[out.status.provider_id] = out
        return out

    @hookimpl
    async def karpy_delete(self, nodeclaim):
        self.calls.append(("delete", nodeclaim.metadata.name))
        if self.instances.pop(nodeclaim.status.provider_id, None) is None:
            raise NodeClaimNotFoundError("gone")

    @hookimpl
    async def karpy_get(self, provider_id):
        self.calls.append(("get", provider_id))
        if provider_id not in self.instances:
            raise NodeClaimNotFoundError("gone")
        return self.instances[provider_id]

    @hookimpl
    async def karpy_list(self):
        return list(self.instances.values())

    @hookimpl
    async def karpy_get_instance_types(self, nodepool):
        return self.types

    @hookimpl
    async def karpy_is_drifted(self, nodeclaim):
        self.calls.append(("is_drifted", nodeclaim.metadata.name))
        if self.next_drift_error is not None:
            err, self.next_drift_error = self.next_drift_error, None
            raise err
        return self.drift.get(nodeclaim.metadata.name, "")

    @hookimpl
    def karpy_repair_policies(self):
        return self.repair


def must_peek(cluster: InMemoryCluster, kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    """``cluster.peek`` of an object the test expects to exist."""
    obj = cluster.peek(kind, name, namespace)
    assert obj is not None, f"{kind} {namespace}/{name} not found"
    return obj


def must_condition(obj: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    """The status condition ``type_`` of ``obj``, which the test expects to be set."""
    assert obj is not None
    cond = condition(obj, type_)
    assert cond is not None, f"no {type_} condition"
    return cond
