"""PodDisruptionBudget arithmetic, shared by the in-memory Eviction API and the disruption planner."""

from __future__ import annotations

from typing import Any

from karpy_core.utils.selectors import selector_matches

__all__ = ["disruptions_allowed"]


def disruptions_allowed(pdb: dict[str, Any], pods: list[dict[str, Any]]) -> int:
    """How many more pods a PDB lets go now: healthy matching pods minus the desired healthy count.

    ``minAvailable``/``maxUnavailable`` may be an int or a percentage of the matching pods
    (percentages round up, as the disruption controller does). Source: Kubernetes
    ``pkg/controller/disruption``.
    """
    spec = pdb.get("spec") or {}
    ns = pdb["metadata"].get("namespace") or "default"
    selector = spec.get("selector") or {}
    matching = [
        p
        for p in pods
        if (p["metadata"].get("namespace") or "default") == ns
        and selector_matches(selector, p["metadata"].get("labels") or {})
        and not p["metadata"].get("deletionTimestamp")
    ]
    expected = len(matching)
    healthy = sum(1 for p in matching if (p.get("status") or {}).get("phase") == "Running")

    def resolve(v: Any) -> int:
        if isinstance(v, str) and v.endswith("%"):
            return -(-int(v[:-1]) * expected // 100)
        return int(v)

    if spec.get("minAvailable") is not None:
        desired = resolve(spec["minAvailable"])
    elif spec.get("maxUnavailable") is not None:
        desired = expected - resolve(spec["maxUnavailable"])
    else:
        desired = expected
    return max(0, healthy - desired)
