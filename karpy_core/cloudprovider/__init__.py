"""The cloud-provider contract (pluggy hookspecs), its value types and the plugin loader.

Plugins import :data:`hookimpl` from here to mark their hook implementations.
"""

from __future__ import annotations

import pluggy

from karpy_core.cloudprovider.hookspecs import PROJECT
from karpy_core.cloudprovider.types import InstanceType, Offering, Overhead, cheapest_offering, order_by_price

hookimpl = pluggy.HookimplMarker(PROJECT)
"""Marker for hook implementations in cloud plugins."""

__all__ = ["hookimpl", "InstanceType", "Offering", "Overhead", "cheapest_offering", "order_by_price"]
