"""Kubernetes Events explaining karpy's decisions, on pods, NodeClaims, Nodes and NodePools.

Events are ``core/v1`` Event objects (``reportingComponent: karpy``). An :class:`Event` value
carries Karpenter's publishing rules (``pkg/events/recorder.go``): events with ``dedupe_values``
are published at most once per ``dedupe_timeout`` (2 minutes unless the event sets its own) for
the same reason and values, and an event with a :class:`TokenBucket` is dropped when the bucket is
empty (pod nominations: 5 per second, burst 10). Reasons and messages are those of Karpenter's
controllers (:mod:`karpy_core.controllers.events` builds them).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from karpy_core.errors import KubeAPIError
from karpy_core.kube.port import KINDS, KubeClient
from karpy_core.redaction import redact
from karpy_core.utils.clock import Clock, iso

__all__ = ["Event", "EventRecorder", "TokenBucket", "DEFAULT_DEDUPE_SECONDS", "NORMAL", "WARNING"]

log = logging.getLogger(__name__)

NORMAL = "Normal"
WARNING = "Warning"
DEFAULT_DEDUPE_SECONDS = 120.0
"""Karpenter's ``defaultDedupeTimeout`` (2 minutes)."""


class TokenBucket:
    """A token-bucket rate limiter (client-go ``flowcontrol.NewTokenBucketRateLimiter``) read on
    a :class:`~karpy_core.utils.clock.Clock`: ``qps`` tokens per second, at most ``burst`` saved."""

    def __init__(self, qps: float, burst: int):
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._at: float | None = None

    def try_accept(self, now: float) -> bool:
        """Take a token at ``now`` (epoch seconds); False when none is left."""
        if self._at is not None:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.qps)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


@dataclass(frozen=True)
class Event:
    """One event to publish (Karpenter ``events.Event``).

    Attributes:
        involved: the object the event is about (a Kubernetes object dict; ``kind``,
            ``apiVersion`` and ``metadata.name``/``namespace``/``uid`` are read).
        type: ``Normal`` or ``Warning``.
        reason: the event reason (Karpenter's, ``pkg/events/reason.go``).
        message: human text.
        dedupe_values: values that, with the reason, identify the event for deduplication;
            empty: never deduplicated.
        dedupe_timeout: seconds an identical event is suppressed (default 120).
        rate_limiter: a shared bucket that drops the event when empty, or None.
    """

    involved: dict[str, Any]
    type: str
    reason: str
    message: str
    dedupe_values: tuple[str, ...] = ()
    dedupe_timeout: float = DEFAULT_DEDUPE_SECONDS
    rate_limiter: TokenBucket | None = field(default=None, compare=False)

    def dedupe_key(self) -> str:
        """``<reason lower-cased>-<values joined by ->``, as Karpenter keys its cache."""
        return f"{self.reason.lower()}-{'-'.join(self.dedupe_values)}"


class EventRecorder:
    """Publishes Events.

    Args:
        kube: the cluster.
        clock: time source.
        namespace: namespace for events about cluster-scoped objects (``default``, as Kubernetes does).
        dedupe_seconds: suppression window of :meth:`publish`'s identical events (5 minutes).
    """

    def __init__(self, kube: KubeClient, clock: Clock, *, namespace: str = "default", dedupe_seconds: float = 300.0):
        self.kube = kube
        self.clock = clock
        self.namespace = namespace
        self.dedupe_seconds = dedupe_seconds
        self._recent: dict[str, float] = {}
        """Dedupe key -> epoch seconds until which the key suppresses an event."""
        self.published: list[dict[str, Any]] = []
        self.dry_run = False
        """True (``karpy controller --dry-run``): an Event is not created; it is logged at info
        level as ``event``, with the Event's own fields (``type``, ``reason``, ``message``,
        ``involvedObject``) under the key ``Event`` (structlog's own ``event`` key is the message),
        and ``dryRun: true``, under the same de-duplication and rate limits."""

    async def publish(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record ``reason``/``message`` (``type_`` Normal or Warning) about ``obj``; never raises.
        Identical events (same object, reason and message) are suppressed for ``dedupe_seconds``."""
        meta = obj.get("metadata") or {}
        values = (str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""),
                  str(meta.get("uid") or ""), message)
        await self.record(Event(obj, type_, reason, message, values, self.dedupe_seconds))

    async def record(self, *events: Event) -> None:
        """Publish ``events`` under Karpenter's rules (see the module docstring); never raises.
        Messages are scrubbed of credentials first (:func:`karpy_core.redaction.redact`): an
        error text may quote one, and Events are readable by anyone allowed to list them."""
        for ev in events:
            await self._record_one(ev)

    def _suppressed(self, ev: Event, now: float) -> bool:
        if not ev.dedupe_values:
            return False
        key = ev.dedupe_key()
        until = self._recent.get(key)
        if until is not None and now < until:
            return True
        self._recent[key] = now + ev.dedupe_timeout
        if len(self._recent) > 10_000:
            self._recent = {k: t for k, t in self._recent.items() if t > now}
        return False

    async def _record_one(self, ev: Event) -> None:
        now = self.clock.now()
        if self._suppressed(ev, now):
            return
        if ev.rate_limiter is not None and not ev.rate_limiter.try_accept(now):
            return
        obj = ev.involved
        message = redact(ev.message)
        meta = obj.get("metadata") or {}
        kind = obj.get("kind") or ""
        info = KINDS.get(kind)
        namespace = (meta.get("namespace") or "default") if info and info.namespaced else self.namespace
        key = f"{kind}/{namespace}/{meta.get('name')}/{meta.get('uid')}/{ev.reason}/{message}"
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
            "involvedObject": {k: v for k, v in involved.items() if v},
            "reason": ev.reason,
            "message": message[:1024],
            "type": ev.type,
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
        if self.dry_run:
            log.info("event", extra={"Event": {k: event[k] for k in ("type", "reason", "message", "involvedObject")},
                                     "dryRun": True})
            return
        try:
            await self.kube.create("Event", event)
        except (KubeAPIError, OSError) as exc:
            log.warning("could not publish event", extra={"reason": ev.reason, "involvedObject": {"kind": kind, "name": meta.get("name")},
                                                          "error": exc})
