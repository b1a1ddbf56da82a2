"""Test helpers for karpy and for cloud-provider packages (needs pytest; a dev dependency).

* :class:`~karpy_core.testing.conformance.ProviderConformance`: subclass it in your provider's
  test suite to check the CloudProvider contract against your plugin.
* :class:`~karpy_core.testing.recording.RecordingProvider`: a call-recording fake provider
  (standalone with a catalog, or wrapping your plugin) with injectable errors per call.
"""

from __future__ import annotations

from karpy_core.testing.conformance import ProviderConformance, nodeclaim_for, nodepool_for
from karpy_core.testing.recording import HookCall, RecordingProvider, default_catalog

__all__ = ["HookCall", "ProviderConformance", "RecordingProvider", "default_catalog", "nodeclaim_for", "nodepool_for"]
