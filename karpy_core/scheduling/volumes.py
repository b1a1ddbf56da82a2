"""Node requirements that a pod's persistent volumes impose.

Source: the kube-scheduler VolumeBinding plugin and Karpenter's ``scheduling/volumetopology.go``:

* a PVC bound to a PersistentVolume with ``spec.nodeAffinity.required`` (a zonal EBS volume,
  for example) restricts the pod to nodes matching one of the PV's node-selector terms;
* an unbound PVC whose StorageClass has ``volumeBindingMode: WaitForFirstConsumer`` and
  ``allowedTopologies`` restricts the pod to those topologies (the volume is created where the
  pod lands);
* a PVC that does not exist makes the pod unschedulable (Karpenter does not provision for it).

Per-node volume attach limits (CSINode) are not modelled.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy_core.scheduling.pod import PodInfo
from karpy_core.scheduling.requirements import Requirement, Requirements

__all__ = ["volume_terms", "apply_volume_requirements"]


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "default", meta.get("name") or "")


def volume_terms(
    pod: Mapping[str, Any],
    pvcs: Sequence[Mapping[str, Any]],
    pvs: Sequence[Mapping[str, Any]],
    storage_classes: Sequence[Mapping[str, Any]],
) -> tuple[list[Requirements], str]:
    """Requirement alternatives (OR) every node must meet for the pod's volumes, and a reason when
    the pod cannot be provisioned for (missing PVC). ``[]`` means no restriction."""
    if not any(vol.get("persistentVolumeClaim") for vol in (pod.get("spec") or {}).get("volumes") or ()):
        return [], ""  # most pods: no claim, nothing to index
    ns = (pod.get("metadata") or {}).get("namespace") or "default"
    claims = {_key(c): c for c in pvcs}
    volumes = {(v.get("metadata") or {}).get("name"): v for v in pvs}
    classes = {(c.get("metadata") or {}).get("name"): c for c in storage_classes}
    alternatives: list[Requirements] = [Requirements()]
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        ref = vol.get("persistentVolumeClaim")
        if not ref:
            continue
        claim = claims.get((ns, ref.get("claimName", "")))
        if claim is None:
            return [], f"PersistentVolumeClaim {ns}/{ref.get('claimName')} not found"
        terms: list[Requirements] = []
        pv_name = (claim.get("spec") or {}).get("volumeName")
        if pv_name and pv_name in volumes:
            na = ((volumes[pv_name].get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            for t in na.get("nodeSelectorTerms") or ():
                terms.append(Requirements.from_selector_terms(t.get("matchExpressions") or ()))
        else:
            sc = classes.get((claim.get("spec") or {}).get("storageClassName") or "")
            if sc is not None and sc.get("volumeBindingMode") == "WaitForFirstConsumer":
                for topo in sc.get("allowedTopologies") or ():
                    reqs = Requirements()
                    for expr in topo.get("matchLabelExpressions") or ():
                        reqs.add(Requirement(expr["key"], False, frozenset(str(v) for v in expr.get("values") or ())))
                    terms.append(reqs)
        if terms:
            alternatives = [a.union_with(t) for a in alternatives for t in terms]
    if len(alternatives) == 1 and not len(alternatives[0]):
        return [], ""
    return alternatives, ""


def apply_volume_requirements(info: PodInfo, terms: list[Requirements], reason: str) -> PodInfo:
    """Intersect the pod's node-affinity alternatives with its volume alternatives, in place."""
    if reason:
        info.unsupported = reason
        return info
    if not terms:
        return info
    combined = []
    for mine in info.requirement_terms:
        for theirs in terms:
            if mine.conflict(theirs) is None:
                combined.append(mine.union_with(theirs))
    if not combined:
        info.unsupported = "the pod's node affinity and its volumes' topology have no node in common"
    else:
        info.requirement_terms = combined
        info._signature = None
    return info
