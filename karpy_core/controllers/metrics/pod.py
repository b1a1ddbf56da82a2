"""The ``metrics.pod`` controller (Karpenter ``pkg/controllers/metrics/pod/controller.go``): every
pod watch event goes to :meth:`~karpy_core.observability.Metrics.observe_pod`, which keeps
``karpenter_pods_bound_duration_seconds`` and ``karpenter_pods_startup_duration_seconds`` and takes
bound, finished and deleted pods out of the scheduling queue (``karpenter_scheduler_queue_depth``).

It is routed pod events as every controller is routed its watch events (its ``wakes_on``; the
runner hands an :class:`~karpy_core.controllers.base.Observer` the event itself), and has no pass
of its own: the metrics change as the events arrive.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from karpy_core.controllers.base import Wake
from karpy_core.kube.port import WatchEvent

if TYPE_CHECKING:
    from karpy_core.observability import Metrics

__all__ = ["PodMetrics"]


class PodMetrics:
    """Publishes the pod metrics of each pod watch event (see the module docstring).

    An :class:`~karpy_core.controllers.base.Observer` and a
    :class:`~karpy_core.controllers.base.Runnable` whose loop only waits: nothing runs between events.

    Args:
        metrics: the registry the pod metrics live in.
    """

    name = "metrics.pod"
    wakes_on = (Wake.on("Pod"),)

    def __init__(self, metrics: Metrics):
        self.metrics = metrics

    def observe(self, kind: str, event: WatchEvent) -> None:
        """A pod changed (``kind`` is ``Pod``: the only kind this controller wakes on)."""
        self.metrics.observe_pod(event.type, event.object)

    def trigger(self) -> None:
        """Nothing to wake: each event is handled in :meth:`observe`."""

    async def run(self) -> None:
        """Wait until cancelled (the runner's task for this controller)."""
        await asyncio.Event().wait()
