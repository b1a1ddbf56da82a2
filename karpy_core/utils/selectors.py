"""Kubernetes label selectors (``matchLabels`` + ``matchExpressions``) evaluated against labels.

Semantics from ``k8s.io/apimachinery/pkg/apis/meta/v1`` ``LabelSelectorAsSelector``: all clauses
must hold; ``In``/``NotIn``/``Exists``/``DoesNotExist``; an empty selector matches everything and
a missing (None) selector matches nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["selector_matches"]


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """True when ``labels`` satisfy ``selector``.

    Raises:
        ValueError: an expression has an unknown operator.
    """
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != str(v):
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], [str(v) for v in expr.get("values") or ()]
        if op == "In":
            if labels.get(key) not in values:
                return False
        elif op == "NotIn":
            if key in labels and labels[key] in values:
                return False
        elif op == "Exists":
            if key not in labels:
                return False
        elif op == "DoesNotExist":
            if key in labels:
                return False
        else:
            raise ValueError(f"unknown label selector operator {op!r}")
    return True
