"""Pod admission as the API server's RuntimeClass plugin does it, for the in-memory cluster.

A pod created with ``spec.runtimeClassName`` gets, before it is stored (Kubernetes
``plugin/pkg/admission/runtimeclass/admission.go``):

* ``spec.overhead`` = the RuntimeClass's ``overhead.podFixed`` (mutating ``setOverhead``); a pod
  that already sets an overhead different from it is rejected;
* ``scheduling.nodeSelector`` merged into ``spec.nodeSelector`` (a key the pod sets to another
  value is rejected) and ``scheduling.tolerations`` merged into ``spec.tolerations``, dropping a
  toleration another one covers (``pkg/util/tolerations``, ``MergeTolerations``/``isSuperset``);
* rejection when the RuntimeClass does not exist.

A pod that sets ``spec.overhead`` without a RuntimeClass defining one is rejected too
(validating ``validateOverhead``). Every rejection is HTTP 403 ``Forbidden`` with the API server's
message. Only creation is admitted (the plugin handles ``CREATE`` only). An empty ``overhead`` map
counts as unset: karpy's serialisers drop empty maps, as Go's ``omitempty`` does on the wire.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from karpy_core.errors import KubeAPIError
from karpy_core.utils.clone import clone
from karpy_core.utils.quantity import QuantityError, parse_quantity

__all__ = ["admit_pod", "merge_tolerations"]


def _forbidden(pod: Mapping[str, Any], why: str) -> KubeAPIError:
    name = (pod.get("metadata") or {}).get("name") or ""
    return KubeAPIError.from_status(f'pods "{name}" is forbidden: {why}', status=403, reason="Forbidden")


def _quantities(raw: Mapping[str, Any] | None) -> dict[str, Decimal | str] | None:
    """A resource list as comparable values (``Quantity.Cmp`` semantics); None when unset/empty."""
    if not raw:
        return None
    out: dict[str, Decimal | str] = {}
    for k, v in raw.items():
        try:
            out[str(k)] = parse_quantity(v)
        except QuantityError:
            out[str(k)] = str(v)
    return out


def _normal(t: Mapping[str, Any]) -> tuple[str, str, str, str, int | None]:
    secs = t.get("tolerationSeconds")
    return (str(t.get("key") or ""), str(t.get("operator") or ""), str(t.get("value") or ""),
            str(t.get("effect") or ""), None if secs is None else int(secs))


def _is_superset(ss: Mapping[str, Any], t: Mapping[str, Any]) -> bool:
    """Whether toleration ``ss`` tolerates every taint ``t`` does (Kubernetes
    ``pkg/util/tolerations/tolerations.go``, ``isSuperset``)."""
    s_key, s_op, s_val, s_eff, s_secs = _normal(ss)
    t_key, t_op, t_val, t_eff, t_secs = _normal(t)
    if _normal(ss) == _normal(t):
        return True
    if t_key != s_key and (s_key != "" or s_op != "Exists"):
        return False
    if t_eff != s_eff and s_eff != "":
        return False
    if s_eff == "NoExecute" and s_secs is not None and (t_secs is None or t_secs > s_secs):
        return False
    if s_op in ("Equal", ""):
        return t_op == "Equal" and t_val == s_val
    return s_op == "Exists"


def merge_tolerations(first: list[dict[str, Any]], second: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``first`` then ``second``, dropping each toleration that another one covers (of two equal
    ones, the first is kept). Kubernetes ``pkg/util/tolerations/tolerations.go``
    ``MergeTolerations``."""
    every = [*first, *second]
    merged: list[dict[str, Any]] = []
    for i, t in enumerate(every):
        if any(_is_superset(m, t) for m in merged):
            continue
        if any(_normal(t) != _normal(t2) and _is_superset(t2, t) for t2 in every[i + 1:]):
            continue
        merged.append(t)
    return merged


def admit_pod(pod: dict[str, Any], runtime_classes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The pod as the RuntimeClass admission plugin stores it (a new dict; ``pod`` is untouched).

    Args:
        pod: a core/v1 Pod dict being created.
        runtime_classes: node.k8s.io/v1 RuntimeClass dicts by name.

    Raises:
        KubeAPIError: 403 Forbidden when the named RuntimeClass does not exist, when the pod's own
            ``spec.overhead`` differs from the RuntimeClass's ``overhead.podFixed`` or is set
            without a RuntimeClass overhead, or when its ``nodeSelector`` conflicts with the
            RuntimeClass's ``scheduling.nodeSelector``.
    """
    spec = pod.get("spec") or {}
    name = spec.get("runtimeClassName")
    rc: Mapping[str, Any] | None = None
    if name:
        rc = runtime_classes.get(str(name))
        if rc is None:
            raise _forbidden(pod, f'pod rejected: RuntimeClass "{name}" not found')
    out = clone(pod)
    ospec = out.setdefault("spec", {})
    overhead = rc.get("overhead") if rc is not None else None
    if overhead is not None:
        fixed = overhead.get("podFixed")
        if _quantities(ospec.get("overhead")) is not None and _quantities(ospec.get("overhead")) != _quantities(fixed):
            raise _forbidden(pod, "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")
        if fixed:
            ospec["overhead"] = copy.deepcopy(dict(fixed))
        else:
            ospec.pop("overhead", None)
    elif _quantities(ospec.get("overhead")) is not None:
        raise _forbidden(pod, "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")
    scheduling = rc.get("scheduling") if rc is not None else None
    if scheduling:
        selector = dict(ospec.get("nodeSelector") or {})
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            if key in selector and selector[key] != value:
                raise _forbidden(
                    pod,
                    f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                    f"pod.spec.nodeSelector[{key}] = {selector[key]}",
                )
            selector[key] = value
        if selector:
            ospec["nodeSelector"] = selector
        tolerations = merge_tolerations(list(ospec.get("tolerations") or []),
                                        copy.deepcopy(list(scheduling.get("tolerations") or [])))
        if tolerations:
            ospec["tolerations"] = tolerations
    return out
