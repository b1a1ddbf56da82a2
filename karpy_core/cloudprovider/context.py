"""What karpy hands a cloud plugin at start: one frozen :class:`ProviderContext`.

The composition roots build it (``Operator.__init__`` in the controller, the simulator's provider
setup) and give it to the facade's :meth:`~karpy_core.cloudprovider.provider.CloudProvider.prepare`,
which passes it to the plugin's ``karpy_prepare(context)`` hook
(:mod:`karpy_core.cloudprovider.hookspecs`). Every capability karpy offers a plugin is a field here,
typed; a plugin reads none of them any other way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from karpy_core.featuregates import FeatureGates
from karpy_core.utils.clock import Clock, RealClock

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from karpy_core.kube.port import KubeClient

__all__ = ["CloudCallObserver", "ProviderContext"]


class CloudCallObserver(Protocol):
    """Where the facade's metrics decorator records each cloud call
    (:class:`~karpy_core.cloudprovider.metrics.CloudCallMetrics` in the controller). Declared here,
    not imported from :mod:`karpy_core.cloudprovider.metrics`, so the context depends on no
    decorator (``metrics`` imports ``calls``, which names this context)."""

    def observe(self, method: str, provider: str, seconds: float, error: str) -> None:
        """Record one call of Karpenter's ``method`` (``Create``...) to ``provider`` that took
        ``seconds`` and raised ``error`` (an exception class name, ``""`` when it returned)."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderContext:
    """The controller's (or simulator's) capabilities a plugin may use.

    Attributes:
        kube: the API client (the real cluster in the controller, the in-memory one in the
            simulator), or None (unit tests without a cluster). A plugin given a ``kube`` option
            at construction keeps that one; otherwise it uses this one.
        feature_gates: Karpenter's ``FEATURE_GATES`` (e.g. ``ReservedCapacity=false``: list, offer
            and launch into no capacity reservation).
        cluster_name: ``CLUSTER_NAME`` (``""`` in the simulator and in tests).
        clock: the clock karpy's controllers run on (virtual in the simulator). Informational:
            the in-tree plugins keep the ``clock`` option they were built with.
        registry: the Prometheus registry the controller serves on ``/metrics``: register the
            plugin's own metrics on it (once per registry: ``prepare`` may be called again).
            None where nothing is served (the simulator, tests).
        cloud_call_metrics: ``karpenter_cloudprovider_duration_seconds`` /
            ``karpenter_cloudprovider_errors_total``, observed by the facade's metrics decorator
            (:mod:`karpy_core.cloudprovider.metrics`) around every async hook call; None: not
            observed. Plugins do not use it.
        simulation: True in ``karpy simulate`` (and the simulator in tests).
        cluster_ca_pem: the CA (PEM) karpy's kube client verifies the API server with (kubeconfig
            ``certificate-authority(-data)`` or the service account's ``ca.crt``), read once at
            start; None with the in-memory client or when none is configured. A plugin that
            bootstraps nodes may hand it to them as the cluster CA (Karpenter's
            ``CLUSTER_CA_BUNDLE`` default: "taken from the controller's TLS configuration").
    """

    kube: KubeClient | None = None
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    cluster_name: str = ""
    clock: Clock = field(default_factory=RealClock)
    registry: CollectorRegistry | None = None
    cloud_call_metrics: CloudCallObserver | None = None
    simulation: bool = False
    cluster_ca_pem: str | None = None
