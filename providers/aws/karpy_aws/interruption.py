"""Interruption handling: EventBridge messages from an SQS queue -> delete the affected NodeClaim.

Message kinds, dispatched on ``source`` and ``detail-type`` (Karpenter
``pkg/controllers/interruption/``; reference section 5):

================================================ ===================== =============================================
detail-type (source)                             kind                  action
================================================ ===================== =============================================
EC2 Spot Instance Interruption Warning (aws.ec2) ``spot_interrupted``  delete the NodeClaim; mark (spot, type, zone)
                                                                       unavailable for 3 min
EC2 Instance Rebalance Recommendation (aws.ec2)  ``rebalance``         event only
AWS Health Event (aws.health), service EC2,      ``scheduled_change``  delete the NodeClaim(s)
scheduledChange
EC2 Instance State-change Notification           ``state_change``      delete when stopping/stopped/shutting-down/
                                                                       terminated
================================================ ===================== =============================================

Deleting the NodeClaim is all the handler does: core karpy's termination cordons and drains the
node, then calls the provider's delete. Every message is deleted from the queue after handling;
unparseable or unknown ones are deleted and logged (never retried forever).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from karpy_aws.errors import call
from karpy_core.apis.labels import CAPACITY_TYPE_SPOT, LABEL_INSTANCE_TYPE, LABEL_ZONE
from karpy_core.errors import NotFoundError
from karpy_core.observability import DURATION_BUCKETS

if TYPE_CHECKING:
    from karpy_aws.cache import UnavailableOfferings
    from karpy_aws.clients import AWSClients
    from karpy_aws.events import EventRecorder
    from karpy_core.kube.port import KubeClient

__all__ = ["InterruptionMessage", "parse_message", "InterruptionHandler", "InterruptionMetrics"]

log = logging.getLogger("karpy.aws")

_STOPPING = frozenset({"stopping", "stopped", "shutting-down", "terminated"})


@dataclass(frozen=True)
class InterruptionMessage:
    """A parsed message: ``kind`` (see the module table, or ``noop``) and the instance ids."""

    kind: str
    instance_ids: tuple[str, ...]
    detail_type: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def parse_message(body: str) -> InterruptionMessage:
    """Parse one SQS body (EventBridge JSON).

    Raises:
        ValueError: not JSON, or not an EventBridge event.
    """
    doc = json.loads(body)
    if not isinstance(doc, dict) or "detail-type" not in doc or "source" not in doc:
        raise ValueError("not an EventBridge event (no source/detail-type)")
    source, dtype = doc["source"], doc["detail-type"]
    detail = doc.get("detail") or {}
    if source == "aws.ec2" and dtype == "EC2 Spot Instance Interruption Warning":
        return InterruptionMessage("spot_interrupted", (detail["instance-id"],), dtype)
    if source == "aws.ec2" and dtype == "EC2 Instance Rebalance Recommendation":
        return InterruptionMessage("rebalance", (detail["instance-id"],), dtype)
    if source == "aws.ec2" and dtype == "EC2 Instance State-change Notification":
        state = detail.get("state", "")
        kind = "state_change" if state in _STOPPING else "noop"
        return InterruptionMessage(kind, (detail["instance-id"],), dtype, {"state": state})
    if source == "aws.health" and dtype == "AWS Health Event":
        if detail.get("service") == "EC2" and detail.get("eventTypeCategory") == "scheduledChange":
            ids = tuple(e["entityValue"] for e in detail.get("affectedEntities") or [] if e.get("entityValue"))
            return InterruptionMessage("scheduled_change", ids, dtype)
        return InterruptionMessage("noop", (), dtype)
    return InterruptionMessage("noop", (), dtype)


_MESSAGE_TYPES = {"spot_interrupted": "spot_interrupted", "rebalance": "rebalance_recommendation",
                  "scheduled_change": "scheduled_change", "noop": "no_op"}
"""karpy's message kind -> the ``message_type`` label Karpenter uses (``interruption/messages/types.go``)."""


class InterruptionMetrics:
    """The AWS provider's interruption metrics (Karpenter ``pkg/controllers/interruption/metrics.go``),
    in the provider's own registry; ``karpy_prepare`` registers them on the controller's too
    (:attr:`ProviderContext.registry <karpy_core.cloudprovider.context.ProviderContext.registry>`).

    - ``karpenter_interruption_received_messages_total{message_type}``
    - ``karpenter_interruption_deleted_messages_total``
    - ``karpenter_interruption_message_queue_duration_seconds`` (from the SQS ``SentTimestamp`` to handling)

    Args:
        registry: where the metrics are registered.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.received = Counter("karpenter_interruption_received_messages", "Count of messages received from the SQS queue. "
                                "Broken down by message type and whether the message was actionable.", ["message_type"],
                                registry=registry)
        self.deleted = Counter("karpenter_interruption_deleted_messages", "Count of messages deleted from the SQS queue.",
                               registry=registry)
        self.latency = Histogram("karpenter_interruption_message_queue_duration_seconds", "Amount of time an interruption "
                                 "message is on the queue before it is processed by karpenter.", buckets=DURATION_BUCKETS,
                                 registry=registry)

    def collectors(self) -> tuple[Counter, Counter, Histogram]:
        """The three metric families, to register on another registry."""
        return (self.received, self.deleted, self.latency)

    @staticmethod
    def message_type(msg: InterruptionMessage | None) -> str:
        """The ``message_type`` label of a parsed message (``no_op`` for an unparseable one)."""
        if msg is None:
            return "no_op"
        if msg.kind == "state_change":
            return "instance_terminated" if msg.extra.get("state") in ("shutting-down", "terminated") else "instance_stopped"
        return _MESSAGE_TYPES.get(msg.kind, msg.kind)


class InterruptionHandler:
    """Polls the interruption queue and acts on each message.

    Args:
        clients: AWS clients (sqs).
        queue: the queue name (``--interruption-queue``).
        kube: the cluster, to find and delete NodeClaims.
        unavailable: marks spot offerings of interrupted instances.
        events: records what was done.
        metrics: received/deleted counts and queue latency (none when not given).
        now: epoch seconds, for the queue latency.
    """

    def __init__(self, *, clients: AWSClients, queue: str, kube: KubeClient, unavailable: UnavailableOfferings,
                 events: EventRecorder, metrics: InterruptionMetrics | None = None, now: Callable[[], float] = time.time):
        self.metrics = metrics
        self.now = now
        self.clients = clients
        self.queue = queue
        self.kube = kube
        self.unavailable = unavailable
        self.events = events
        self._url: str | None = None

    async def queue_url(self) -> str:
        if self._url is None:
            sqs = await self.clients.get("sqs")
            resp = await call(sqs.get_queue_url, "GetQueueUrl", QueueName=self.queue)
            self._url = str(resp["QueueUrl"])
        return self._url

    async def poll_once(self, *, wait_seconds: int = 20) -> list[InterruptionMessage]:
        """Receive up to 10 messages (long poll ``wait_seconds``), handle and delete each;
        returns the parsed ones (unparseable ones are deleted and skipped)."""
        sqs = await self.clients.get("sqs")
        url = await self.queue_url()
        resp = await call(sqs.receive_message, "ReceiveMessage", QueueUrl=url, MaxNumberOfMessages=10,
                          VisibilityTimeout=20, WaitTimeSeconds=wait_seconds, AttributeNames=["SentTimestamp"],
                          MessageAttributeNames=["All"])
        handled = []
        for msg in resp.get("Messages") or []:
            try:
                parsed = parse_message(msg.get("Body") or "")
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("dropping an unparseable interruption message",
                            extra={"queue": self.queue, "message-id": msg.get("MessageId"), "error": exc})
                parsed = None
            if self.metrics is not None:
                self.metrics.received.labels(InterruptionMetrics.message_type(parsed)).inc()
                sent = (msg.get("Attributes") or {}).get("SentTimestamp")
                if sent:
                    self.metrics.latency.observe(max(0.0, self.now() - int(sent) / 1000))
            if parsed is not None:
                await self.handle(parsed)
                handled.append(parsed)
            await call(sqs.delete_message, "DeleteMessage", QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"])
            if self.metrics is not None:
                self.metrics.deleted.inc()
        return handled

    async def handle(self, msg: InterruptionMessage) -> list[str]:
        """Act on one message; returns the names of the NodeClaims deleted."""
        if msg.kind == "noop" or not msg.instance_ids:
            return []
        wanted = set(msg.instance_ids)
        deleted = []
        for nc in await self.kube.list("NodeClaim"):
            pid = (nc.get("status") or {}).get("providerID") or ""
            instance_id = pid.rsplit("/", 1)[-1]
            if instance_id not in wanted:
                continue
            name = nc["metadata"]["name"]
            labels = nc["metadata"].get("labels") or {}
            if msg.kind == "rebalance":
                await self.events.record("Normal", "RebalanceRecommendation", f"NodeClaim/{name}",
                                         f"EC2 recommends rebalancing {instance_id}; no action taken")
                continue
            if msg.kind == "spot_interrupted" and labels.get(LABEL_INSTANCE_TYPE) and labels.get(LABEL_ZONE):
                self.unavailable.mark(CAPACITY_TYPE_SPOT, labels[LABEL_INSTANCE_TYPE], labels[LABEL_ZONE], reason=msg.kind)
            await self.events.record("Warning", "Interrupted", f"NodeClaim/{name}",
                                     f"{msg.detail_type} for {instance_id}: deleting the NodeClaim (the node is drained)")
            if nc["metadata"].get("deletionTimestamp"):
                continue
            try:
                await self.kube.delete("NodeClaim", name)
                deleted.append(name)
            except NotFoundError:
                pass
        return deleted
