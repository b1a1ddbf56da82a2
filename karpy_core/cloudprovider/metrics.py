"""The cloud-call metrics decorator (Karpenter ``pkg/cloudprovider/metrics``).

:class:`MeteredCalls` wraps a :class:`~karpy_core.cloudprovider.calls.CloudCalls` and observes
``karpenter_cloudprovider_duration_seconds{controller, method, provider}`` around every call and
``karpenter_cloudprovider_errors_total{controller, method, provider, error}`` for each one that
raises (``error`` = the exception's class name). ``controller`` is the calling asyncio task's
name (e.g. ``nodeclaim.lifecycle``), ``""`` outside a task; ``method`` is Karpenter's method name
(``Create``, ``Delete``, ``Get``, ``List``, ``GetInstanceTypes``, ``IsDrifted``). The metric
objects themselves belong to the controller's registry (:class:`karpy_core.observability.Metrics`)
and arrive through :attr:`ProviderContext.cloud_call_metrics
<karpy_core.cloudprovider.context.ProviderContext.cloud_call_metrics>`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from karpy_core.cloudprovider.calls import CallsDecorator, CloudCalls

if TYPE_CHECKING:
    from prometheus_client import Counter, Histogram

    from karpy_core.apis.nodeclaim import NodeClaim
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import CloudCallObserver, ProviderContext
    from karpy_core.cloudprovider.types import InstanceType

__all__ = ["CloudCallMetrics", "MeteredCalls"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CloudCallMetrics:
    """The two cloud-call metric families (label names as upstream's); a
    :class:`~karpy_core.cloudprovider.context.CloudCallObserver`.

    Attributes:
        duration: histogram, labels ``controller``, ``method``, ``provider`` (seconds).
        errors: counter, labels ``controller``, ``method``, ``provider``, ``error``.
    """

    duration: Histogram
    errors: Counter

    def observe(self, method: str, provider: str, seconds: float, error: str) -> None:
        """Record one call of ``method`` that took ``seconds`` and raised ``error`` (a class
        name, ``""`` when it returned), labelled with the current asyncio task's name."""
        try:
            task = asyncio.current_task()
        except RuntimeError:  # called outside an event loop
            task = None
        labels = {"controller": task.get_name() if task is not None else "", "method": method, "provider": provider}
        self.duration.labels(**labels).observe(seconds)
        if error:
            self.errors.labels(**labels, error=error).inc()


class MeteredCalls(CallsDecorator):
    """Times every call of ``inner`` into :class:`CloudCallMetrics` (none until prepared).

    Args:
        inner: the calls to time (the plugin's own, so only the cloud's time is measured).
        provider: the ``provider`` label (the plugin's name).
    """

    def __init__(self, inner: CloudCalls, provider: str):
        super().__init__(inner)
        self.provider = provider
        self.metrics: CloudCallObserver | None = None

    def prepare(self, context: ProviderContext) -> None:
        """Observe into ``context.cloud_call_metrics`` from now on (None: stop observing)."""
        self.metrics = context.cloud_call_metrics

    async def _timed(self, method: str, call: Awaitable[T]) -> T:
        start = time.perf_counter()
        error = ""
        try:
            return await call
        except Exception as exc:
            error = type(exc).__name__
            raise
        finally:
            if self.metrics is not None:
                self.metrics.observe(method, self.provider, time.perf_counter() - start, error)

    async def create(self, nodeclaim: NodeClaim) -> NodeClaim:
        """``Create``, timed."""
        return await self._timed("Create", self.inner.create(nodeclaim))

    async def delete(self, nodeclaim: NodeClaim) -> None:
        """``Delete``, timed."""
        await self._timed("Delete", self.inner.delete(nodeclaim))

    async def get(self, provider_id: str) -> NodeClaim:
        """``Get``, timed."""
        return await self._timed("Get", self.inner.get(provider_id))

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """``GetInstanceTypes``, timed."""
        return await self._timed("GetInstanceTypes", self.inner.get_instance_types(nodepool))

    async def is_drifted(self, nodeclaim: NodeClaim) -> str:
        """``IsDrifted``, timed."""
        return await self._timed("IsDrifted", self.inner.is_drifted(nodeclaim))

    # defined last: inside the class body, ``list`` names this method from here on
    async def list(self) -> list[NodeClaim]:
        """``List``, timed."""
        return await self._timed("List", self.inner.list())
