"""Test helpers for karpy and for cloud-provider packages (needs pytest; a dev dependency).

* :class:`~karpy_core.testing.conformance.ProviderConformance`: subclass it in your provider's
  test suite to check the CloudProvider contract against your plugin.
"""

from __future__ import annotations

from karpy_core.testing.conformance import ProviderConformance, nodeclaim_for, nodepool_for

__all__ = ["ProviderConformance", "nodeclaim_for", "nodepool_for"]
