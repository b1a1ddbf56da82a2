"""The Kubernetes API error types: status codes map to NotFoundError/ConflictError the same way in
the in-memory cluster as in the real client (tests/integration/test_kube_client.py checks the
real kube-apiserver), and ignore_not_found swallows only the 404."""

from __future__ import annotations

import pytest

from karpy_core.errors import (
    ConfigurationError,
    ConflictError,
    InternalServerError,
    KarpyError,
    KubeAPIError,
    KubeconfigError,
    NotFoundError,
    QuantityError,
    TooManyRequestsError,
    ignore_not_found,
)
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.utils.quantity import parse_quantity


def test_from_status_picks_the_subclass() -> None:
    nf = KubeAPIError.from_status("gone", status=404)
    assert type(nf) is NotFoundError and nf.reason == "NotFound" and str(nf) == "404 NotFound: gone"
    exists = KubeAPIError.from_status("there", status=409, reason="AlreadyExists")
    assert type(exists) is ConflictError and exists.reason == "AlreadyExists"
    throttled = KubeAPIError.from_status("slow down", status=429, reason="TooManyRequests", causes=("pdb",))
    assert type(throttled) is TooManyRequestsError and throttled.causes == ("pdb",)
    assert str(throttled) == "429 TooManyRequests: slow down"
    failed = KubeAPIError.from_status("several PDBs", status=500)
    assert type(failed) is InternalServerError and failed.reason == "" and str(failed) == "500: several PDBs"
    for status in (403, 422, 502, 503):
        assert type(KubeAPIError.from_status("x", status=status)) is KubeAPIError


async def test_memory_cluster_raises_typed_errors() -> None:
    kube = InMemoryCluster()
    with pytest.raises(NotFoundError):
        await kube.get("Node", "absent")
    with pytest.raises(NotFoundError):
        await kube.delete("Node", "absent")
    await kube.create("Node", {"metadata": {"name": "n1"}})
    with pytest.raises(ConflictError) as exists:
        await kube.create("Node", {"metadata": {"name": "n1"}})
    assert exists.value.reason == "AlreadyExists"


async def test_ignore_not_found() -> None:
    kube = InMemoryCluster()
    assert await ignore_not_found(kube.get("Node", "absent")) is None
    await kube.create("Node", {"metadata": {"name": "n1"}})
    got = await ignore_not_found(kube.get("Node", "n1"))
    assert got is not None and got["metadata"]["name"] == "n1"

    async def refuse() -> None:
        raise KubeAPIError.from_status("no", status=403, reason="Forbidden")

    with pytest.raises(KubeAPIError) as forbidden:
        await ignore_not_found(refuse())
    assert forbidden.value.status == 403


def test_quantity_and_kubeconfig_errors_join_the_tree() -> None:
    with pytest.raises(QuantityError) as bad:
        parse_quantity("lots")
    assert isinstance(bad.value, KarpyError) and isinstance(bad.value, ValueError)
    assert issubclass(KubeconfigError, ConfigurationError) and issubclass(KubeconfigError, ValueError)
