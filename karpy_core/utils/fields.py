"""Reading a nested field of a Kubernetes API object (a JSON dict) in one call.

For the kinds karpy keeps no view of (VolumeAttachment, PersistentVolumeClaim, CapacityBuffer
status, what a create or a provider returns) and the few fields of the others that only a write
needs: ``field_of(va, "spec", "source", "persistentVolumeName")`` instead of a chain of
``(x.get(...) or {}).get(...)``. The deciding code reads views (:mod:`karpy_core.state.views`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["field_of", "map_of"]


def field_of(obj: Mapping[str, Any] | None, *path: str) -> Any:
    """The value at ``path`` in ``obj`` (``field_of(pod, "spec", "nodeName")``), or None when
    ``obj`` is None or a step is missing, null or not a mapping. Never raises."""
    value: Any = obj
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def map_of(obj: Mapping[str, Any] | None, *path: str) -> Mapping[str, Any]:
    """:func:`field_of` for a field that is a map (labels, ``status``, a resource list): the
    API's own mapping (shared: copy before changing it), empty when unset, null or not a map."""
    value = field_of(obj, *path)
    return value if isinstance(value, Mapping) else {}
