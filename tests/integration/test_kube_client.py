"""The kubernetes-asyncio adapter's watch against the real kube-apiserver: a watch resumed from a
resourceVersion the server no longer holds gets 410 Gone, and the informer relists, emitting
DELETED for what vanished meanwhile and ADDED for what appeared, then watches on."""

from __future__ import annotations

import base64
import json
import urllib.request
import uuid
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, cast

import pytest

from karpy_core.kube.client import AsyncKubeClient
from karpy_core.kube.port import WatchEvent


def compact_etcd(etcd_url: str) -> int:
    """Compact etcd up to its current revision (what kube-apiserver does every 5 minutes), so
    every older resourceVersion is gone; returns the revision. Loopback HTTP (etcd's gRPC gateway)."""
    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        req = urllib.request.Request(etcd_url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    rev = int(post("/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(rev), "physical": True})
    return rev


def pdb(name: str) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}}


async def next_of(stream: AsyncIterator[WatchEvent], prefix: str) -> tuple[str, str]:
    """The next event about an object named ``prefix*`` (other tests' objects are skipped)."""
    async for ev in stream:
        name = (ev.object.get("metadata") or {}).get("name", "")
        if ev.type == "SYNCED" or name.startswith(prefix):
            return ev.type, name
    raise AssertionError("the watch ended")


@pytest.mark.timeout(120)
async def test_watch_relists_after_410_gone(kube: AsyncKubeClient, devcluster) -> None:
    tag = f"w{uuid.uuid4().hex[:6]}"
    await kube.create("PodDisruptionBudget", pdb(f"{tag}-old"))
    # older than anything in the API server's watch cache, so the server reads it from etcd, which
    # the compaction below has cleared: the watch gets 410 Gone
    stale = "1"
    resumed_from: list[str] = []
    real_watch_once = kube._watch_once

    def stale_once(kind: str, rv: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        # the first resume uses a resourceVersion from before the compaction below: exactly what a
        # controller sees after a long disconnect
        resumed_from.append(rv)
        return real_watch_once(kind, stale if len(resumed_from) == 1 else rv)

    kube._watch_once = stale_once  # type: ignore[method-assign]
    # watch is an async generator annotated AsyncIterator (no aclose in its type)
    stream = cast(AsyncGenerator[WatchEvent, None], kube.watch("PodDisruptionBudget"))
    try:
        assert await next_of(stream, tag) == ("ADDED", f"{tag}-old")
        assert await next_of(stream, tag) == ("SYNCED", "")
        # while nobody watches: one object goes, another comes
        await kube.delete("PodDisruptionBudget", f"{tag}-old", "default")
        await kube.create("PodDisruptionBudget", pdb(f"{tag}-new"))
        assert compact_etcd(devcluster.etcd_url) > int(stale)
        relisted = {await next_of(stream, tag), await next_of(stream, tag)}
        assert relisted == {("DELETED", f"{tag}-old"), ("ADDED", f"{tag}-new")}
        # after the relist the watch resumes from the list's resourceVersion and sees live changes
        await kube.create("PodDisruptionBudget", pdb(f"{tag}-live"))
        assert await next_of(stream, tag) == ("ADDED", f"{tag}-live")
        assert len(resumed_from) == 2 and int(resumed_from[1]) > int(stale)
    finally:
        await stream.aclose()
        for suffix in ("new", "live"):
            try:
                await kube.delete("PodDisruptionBudget", f"{tag}-{suffix}", "default")
            except Exception:
                pass


async def test_api_errors_are_typed_by_status(kube: AsyncKubeClient, devcluster) -> None:
    """kube-apiserver's 404 and 409 arrive as NotFoundError and ConflictError (both KubeAPIError),
    with the Status object's reason; ignore_not_found turns only the 404 into None."""
    from karpy_core.errors import ConflictError, KubeAPIError, NotFoundError, ignore_not_found

    name = f"typed-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotFoundError) as missing:
        await kube.get("Lease", name, "default")
    assert missing.value.status == 404 and missing.value.reason == "NotFound"
    assert await ignore_not_found(kube.get("Lease", name, "default")) is None
    assert await ignore_not_found(kube.delete("Lease", name, "default")) is None  # type: ignore[func-returns-value]  # no NotFoundError

    created = await kube.create("Lease", {"metadata": {"name": name, "namespace": "default"}, "spec": {"holderIdentity": "a"}})
    with pytest.raises(ConflictError) as exists:
        await kube.create("Lease", {"metadata": {"name": name, "namespace": "default"}})
    assert exists.value.status == 409 and exists.value.reason == "AlreadyExists"
    stale = {**created, "spec": {"holderIdentity": "b"}}
    await kube.replace("Lease", {**created, "spec": {"holderIdentity": "c"}})
    with pytest.raises(ConflictError) as conflict:
        await kube.replace("Lease", stale)  # the resourceVersion it carries is no longer current
    assert conflict.value.reason == "Conflict"
    assert await ignore_not_found(kube.get("Lease", name, "default")) is not None
    with pytest.raises(KubeAPIError) as invalid:  # other errors pass through ignore_not_found
        await ignore_not_found(kube.create("Lease", {"metadata": {"name": "Not_A_Valid_Name", "namespace": "default"}}))
    assert invalid.value.status == 422 and not isinstance(invalid.value, (NotFoundError, ConflictError))
    await kube.delete("Lease", name, "default")
