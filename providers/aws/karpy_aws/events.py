"""Events the AWS plugin wants a human to see (missing spot service-linked role, several
cluster-tagged security groups, interruption notices...).

:class:`EventRecorder` keeps them in memory (``events``, newest last, bounded), logs them, and,
when it has a :class:`~karpy_core.kube.port.KubeClient`, also creates a core/v1 ``Event`` about the
involved object (best effort: a failure to write an Event never fails a launch).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from karpy_core.errors import KubeAPIError
from karpy_core.redaction import redact
from karpy_core.utils.clock import iso

if TYPE_CHECKING:
    from karpy_core.kube.port import KubeClient

__all__ = ["AWSEvent", "EventRecorder"]

log = logging.getLogger("karpy.aws")


@dataclass(frozen=True)
class AWSEvent:
    """One event: ``type`` ``Normal``/``Warning``, a CamelCase ``reason``, the involved object as
    ``kind/name`` and a message a user can act on."""

    type: str
    reason: str
    involved: str
    message: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)


class EventRecorder:
    """Collects :class:`AWSEvent`s (at most ``limit``, oldest dropped); messages are scrubbed of
    credentials (:func:`karpy_core.redaction.redact`) before they are kept, logged or written."""

    def __init__(self, *, kube: KubeClient | None = None, now: Any = None, namespace: str = "default", limit: int = 1000):
        self.kube = kube
        self.events: list[AWSEvent] = []
        self._now = now
        self._namespace = namespace
        self._limit = limit
        self._seq = 0

    async def record(self, type_: str, reason: str, involved: str, message: str, **details: Any) -> AWSEvent:
        message = redact(message)
        event = AWSEvent(type_, reason, involved, message, details)
        self.events.append(event)
        del self.events[: max(0, len(self.events) - self._limit)]
        (log.warning if type_ == "Warning" else log.info)("%s %s: %s", reason, involved, message)
        if self.kube is not None:
            await self._write(event)
        return event

    def find(self, reason: str) -> list[AWSEvent]:
        return [e for e in self.events if e.reason == reason]

    async def _write(self, event: AWSEvent) -> None:
        kind, _, name = event.involved.partition("/")
        self._seq += 1
        ts = iso(self._now()) if callable(self._now) else None
        obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name or 'karpy'}.", "namespace": self._namespace},
            "involvedObject": {"kind": kind, "name": name},
            "reason": event.reason,
            "message": event.message,
            "type": event.type,
            "source": {"component": "karpy-aws"},
        }
        if ts:
            obj["firstTimestamp"] = obj["lastTimestamp"] = ts
        try:
            assert self.kube is not None
            await self.kube.create("Event", obj)
        except (KubeAPIError, KeyError, ValueError) as exc:  # pragma: no cover - best effort
            log.debug("could not write Event %s: %s", event.reason, exc)
