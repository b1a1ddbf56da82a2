"""The kinds kube-apiserver v1.36 serves in its built-in API groups, and the versions it removed.

A manifest naming a built-in group with a kind that group/version does not serve (``apps/v1 Job``,
``extensions/v1beta1 Deployment``) is refused by kubectl before it reaches the server
(``no matches for kind "Job" in version "apps/v1"``); karpy refuses it too, instead of listing it
as ignored. Kinds of other groups (CRDs karpy does not model) are still passed through.

Source: the discovery documents (``/api/v1``, ``/apis/<group>/<version>``) of the dev cluster's
kube-apiserver v1.36.3 with its default ``--runtime-config`` (``hack/devcluster.py up``), and the
Kubernetes deprecated-API migration guide for the removed versions.
"""

from __future__ import annotations

__all__ = ["BUILTIN_KINDS", "REMOVED_VERSIONS", "builtin_kind_problem"]

BUILTIN_KINDS: dict[str, frozenset[str]] = {
    gv: frozenset(kinds.split())
    for gv, kinds in {
        "v1": "Binding ComponentStatus ConfigMap Endpoints Event LimitRange Namespace Node PersistentVolume "
              "PersistentVolumeClaim Pod PodTemplate ReplicationController ResourceQuota Secret Service "
              "ServiceAccount List",
        "admissionregistration.k8s.io/v1": "MutatingAdmissionPolicy MutatingAdmissionPolicyBinding "
                                           "MutatingWebhookConfiguration ValidatingAdmissionPolicy "
                                           "ValidatingAdmissionPolicyBinding ValidatingWebhookConfiguration",
        "apiextensions.k8s.io/v1": "CustomResourceDefinition",
        "apiregistration.k8s.io/v1": "APIService",
        "apps/v1": "ControllerRevision DaemonSet Deployment ReplicaSet StatefulSet",
        "authentication.k8s.io/v1": "SelfSubjectReview TokenReview",
        "authorization.k8s.io/v1": "LocalSubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview "
                                   "SubjectAccessReview",
        "autoscaling/v1": "HorizontalPodAutoscaler",
        "autoscaling/v2": "HorizontalPodAutoscaler",
        "batch/v1": "CronJob Job",
        "certificates.k8s.io/v1": "CertificateSigningRequest",
        "coordination.k8s.io/v1": "Lease",
        "discovery.k8s.io/v1": "EndpointSlice",
        "events.k8s.io/v1": "Event",
        "flowcontrol.apiserver.k8s.io/v1": "FlowSchema PriorityLevelConfiguration",
        "networking.k8s.io/v1": "IPAddress Ingress IngressClass NetworkPolicy ServiceCIDR",
        "node.k8s.io/v1": "RuntimeClass",
        "policy/v1": "PodDisruptionBudget",
        "rbac.authorization.k8s.io/v1": "ClusterRole ClusterRoleBinding Role RoleBinding",
        "resource.k8s.io/v1": "DeviceClass ResourceClaim ResourceClaimTemplate ResourceSlice",
        "scheduling.k8s.io/v1": "PriorityClass",
        "storage.k8s.io/v1": "CSIDriver CSINode CSIStorageCapacity StorageClass VolumeAttachment "
                             "VolumeAttributesClass",
    }.items()
}
"""``apiVersion`` -> the kinds kube-apiserver v1.36 serves there by default (``v1 List`` is kubectl's
client-side list, accepted too). Alpha/beta versions a cluster may switch on with
``--runtime-config`` (``resource.k8s.io/v1beta2``...) are not listed: objects there pass through."""

REMOVED_VERSIONS: dict[str, str] = {
    "extensions/v1beta1": "1.22",
    "apps/v1beta1": "1.16",
    "apps/v1beta2": "1.16",
    "batch/v1beta1": "1.25",
    "policy/v1beta1": "1.25",
    "autoscaling/v2beta1": "1.25",
    "autoscaling/v2beta2": "1.26",
    "networking.k8s.io/v1beta1": "1.22",
    "rbac.authorization.k8s.io/v1beta1": "1.22",
    "scheduling.k8s.io/v1beta1": "1.22",
    "discovery.k8s.io/v1beta1": "1.25",
    "events.k8s.io/v1beta1": "1.25",
    "node.k8s.io/v1beta1": "1.25",
    "certificates.k8s.io/v1beta1": "1.22",
    "apiextensions.k8s.io/v1beta1": "1.22",
    "apiregistration.k8s.io/v1beta1": "1.22",
}
"""Built-in ``apiVersion`` -> the Kubernetes release that stopped serving it (every kind in it), from
https://kubernetes.io/docs/reference/using-api/deprecation-guide/."""


def builtin_kind_problem(api_version: str, kind: str) -> str | None:
    """Why kubectl would refuse ``apiVersion``/``kind`` (``no matches for kind ...``), or None when
    the pair is served, or the apiVersion is not one of the built-in versions listed here.

    Returns:
        One line, starting with the field to change: ``apiVersion:`` when another built-in version
        serves ``kind`` or the version was removed, else ``kind:``; then kubectl's words, then the
        apiVersion(s) that do serve ``kind`` if any.
    """
    removed = REMOVED_VERSIONS.get(api_version)
    served = BUILTIN_KINDS.get(api_version)
    if removed is None and (served is None or kind in served):
        return None
    line = f'no matches for kind "{kind}" in version "{api_version}"'
    line += f" (Kubernetes {removed} removed {api_version})" if removed else ""
    instead = sorted(gv for gv, kinds in BUILTIN_KINDS.items() if kind in kinds)
    if instead:
        return f"apiVersion: {line}; {kind} is served as {' or '.join(instead)}"
    return f"{'apiVersion' if removed else 'kind'}: {line}"
