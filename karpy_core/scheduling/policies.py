"""Scheduling policies as enums (values are the spellings used in settings and Karpenter)."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["PreferencePolicy", "MinValuesPolicy", "PackingPolicy"]


class PreferencePolicy(StrEnum):
    """How preferred constraints are treated (Karpenter ``PREFERENCE_POLICY``)."""

    RESPECT = "Respect"
    """Try every preference first, then relax them one at a time."""
    IGNORE = "Ignore"
    """Schedule as if the pod had no preferences."""


class MinValuesPolicy(StrEnum):
    """What happens when a requirement's ``minValues`` cannot be met (Karpenter ``MIN_VALUES_POLICY``)."""

    STRICT = "Strict"
    """Reject the options that break it."""
    BEST_EFFORT = "BestEffort"
    """Keep them and mark the NodeClaim as relaxed."""


class PackingPolicy(StrEnum):
    """How plain pods are packed into new NodeClaims (see :mod:`karpy_core.scheduling.packing`)."""

    BALANCED = "Balanced"
    """Mix shapes so no resource runs out long before the others."""
    FIRST_FIT_DECREASING = "FirstFitDecreasing"
    """Largest pods first, as Karpenter does."""
