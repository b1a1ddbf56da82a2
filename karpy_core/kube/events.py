"""Kubernetes Events explaining karpy's decisions, on pods, NodeClaims, Nodes and NodePools.

Events are ``core/v1`` Event objects (``reportingComponent: karpy``). Identical events (same
object, reason and message) are published at most once per ``dedupe_seconds`` (5 minutes, as
Karpenter's recorder deduplicates), so a pod pending for an hour does not flood the API.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KINDS, KubeClient
from karpy_core.redaction import redact
from karpy_core.utils.clock import Clock, iso

__all__ = ["EventRecorder"]

log = logging.getLogger(__name__)


class EventRecorder:
    """Publishes Events.

    Args:
        kube: the cluster.
        clock: time source.
        namespace: namespace for events about cluster-scoped objects (``default``, as Kubernetes does).
        dedupe_seconds: suppression window for identical events.
    """

    def __init__(self, kube: KubeClient, clock: Clock, *, namespace: str = "default", dedupe_seconds: float = 300.0):
        self.kube = kube
        self.clock = clock
        self.namespace = namespace
        self.dedupe_seconds = dedupe_seconds
        self._recent: dict[str, float] = {}
        self.published: list[dict[str, Any]] = []

    async def publish(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record ``reason``/``message`` (``type_`` Normal or Warning) about ``obj``; never raises.
        ``message`` is scrubbed of credentials first (:func:`karpy_core.redaction.redact`): an
        error text may quote one, and Events are readable by anyone allowed to list them."""
        message = redact(message)
        meta = obj.get("metadata") or {}
        kind = obj.get("kind") or ""
        info = KINDS.get(kind)
        namespace = (meta.get("namespace") or "default") if info and info.namespaced else self.namespace
        key = f"{kind}/{namespace}/{meta.get('name')}/{meta.get('uid')}/{reason}/{message}"
        now = self.clock.now()
        last = self._recent.get(key)
        if last is not None and now - last < self.dedupe_seconds:
            return
        self._recent[key] = now
        if len(self._recent) > 10_000:
            cutoff = now - self.dedupe_seconds
            self._recent = {k: t for k, t in self._recent.items() if t >= cutoff}
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        involved = {
            "apiVersion": obj.get("apiVersion", info.api_version if info else ""),
            "kind": kind,
            "name": meta.get("name"),
            "namespace": meta.get("namespace") if info and info.namespaced else None,
            "uid": meta.get("uid"),
        }
        event: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name', 'object')}.{digest}{int(now)}", "namespace": namespace},
            "involvedObject": {k: v for k, v in involved.items() if v is not None},
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": "karpy"},
            "reportingComponent": "karpy",
            "reportingInstance": "karpy",
            "firstTimestamp": iso(now),
            "lastTimestamp": iso(now),
            "count": 1,
        }
        self.published.append(event)
        if len(self.published) > 1000:
            del self.published[:500]
        try:
            await self.kube.create("Event", event)
        except (KubeAPIError, OSError) as exc:
            log.warning("could not publish event", extra={"reason": reason, "involvedObject": {"kind": kind, "name": meta.get("name")},
                                                          "error": exc})
