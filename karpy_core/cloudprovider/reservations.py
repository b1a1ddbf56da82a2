"""The capacity-reservation decorator: with ``ReservedCapacity=false`` no ``reserved`` offering
reaches the controllers (Karpenter's AWS provider then builds none), so nothing schedules or
launches into a capacity reservation. The plugin sees the gate too (``karpy_prepare``'s context)
and should stop listing reservations itself; this keeps every plugin honest."""

from __future__ import annotations

from typing import TYPE_CHECKING

from karpy_core.cloudprovider.calls import CallsDecorator, CloudCalls
from karpy_core.cloudprovider.types import without_reserved
from karpy_core.featuregates import FeatureGates

if TYPE_CHECKING:
    from karpy_core.apis.nodepool import NodePool
    from karpy_core.cloudprovider.context import ProviderContext
    from karpy_core.cloudprovider.types import InstanceType

__all__ = ["ReservedCapacityCalls"]


class ReservedCapacityCalls(CallsDecorator):
    """Drops every reserved offering from ``get_instance_types`` while the ``ReservedCapacity``
    gate is off (:func:`~karpy_core.cloudprovider.types.without_reserved`).

    Args:
        inner: the calls being decorated.
    """

    def __init__(self, inner: CloudCalls):
        super().__init__(inner)
        self.feature_gates = FeatureGates()

    def prepare(self, context: ProviderContext) -> None:
        """Read the gates from ``context``."""
        self.feature_gates = context.feature_gates

    async def get_instance_types(self, nodepool: NodePool) -> list[InstanceType]:
        """The inner types, reserved offerings dropped with ``ReservedCapacity=false``."""
        types = await self.inner.get_instance_types(nodepool)
        return types if self.feature_gates.ReservedCapacity else without_reserved(types)
