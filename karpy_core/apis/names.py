"""Object names (``metadata.name``, ``generateName``, ``namespace``) checked as kube-apiserver checks them.

Rules, by kind (``k8s.io/kubernetes/pkg/apis/{core,apps}/validation/validation.go``,
``k8s.io/apimachinery/pkg/api/validation/generic.go``, and the custom-resource validator
``k8s.io/apiextensions-apiserver/pkg/registry/customresource/validator.go``):

* most kinds (Pod, Node, Deployment, ReplicaSet, DaemonSet, Job, PodDisruptionBudget, ConfigMap,
  Secret, every custom resource: NodePool, NodeClaim, EC2NodeClass, KCNodeClass...): a **DNS-1123
  subdomain**, at most 253 characters of ``a-z 0-9 - .``, alphanumeric at both ends;
* ``Namespace``, ``StatefulSet`` (its pods' hostnames are ``<name>-<ordinal>``) and every
  ``metadata.namespace``: a **DNS-1123 label**, at most 63 characters of ``a-z 0-9 -``;
* ``Service``: a **DNS-1035 label** (a label that starts with a letter).

A ``generateName`` is checked with a trailing ``-`` allowed, as the API server masks it.

karpy adds one rule of its own, :data:`NODEPOOL_NAME_MAX`: a NodePool's name is the value of the
``karpenter.sh/nodepool`` label on every NodeClaim and Node it launches, and a label value holds at
most 63 characters, so a longer name could never launch anything.
"""

from __future__ import annotations

import re

__all__ = ["NODEPOOL_NAME_MAX", "NameRule", "name_rule", "name_problems"]

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

NODEPOOL_NAME_MAX = 63
"""Longest NodePool name: the ``karpenter.sh/nodepool`` label value (at most 63 characters)."""

NameRule = str
"""``"subdomain"``, ``"label"`` or ``"dns1035"``."""

_RULES: dict[tuple[str, str], NameRule] = {
    ("v1", "Namespace"): "label",
    ("v1", "Service"): "dns1035",
    ("apps/v1", "StatefulSet"): "label",
}

_TEXT = {
    "subdomain": (253, _SUBDOMAIN, "a lowercase RFC 1123 subdomain: lower case alphanumerics, '-' or '.', starting and "
                  "ending with an alphanumeric (e.g. 'example.com')"),
    "label": (63, _LABEL, "a lowercase RFC 1123 label: lower case alphanumerics or '-', starting and ending with an "
              "alphanumeric (e.g. 'my-name')"),
    "dns1035": (63, _DNS1035, "a DNS-1035 label: lower case alphanumerics or '-', starting with a letter and ending "
                "with an alphanumeric (e.g. 'my-name')"),
}


def name_rule(api_version: str, kind: str) -> NameRule:
    """The rule kube-apiserver applies to ``metadata.name`` of ``apiVersion``/``kind``."""
    return _RULES.get((api_version, kind), "subdomain")


def name_problems(name: str, rule: NameRule, *, prefix: bool = False, max_length: int | None = None) -> list[str]:
    """Why ``name`` breaks ``rule`` (empty when it is fine), in the API server's words.

    Args:
        name: the name (or ``generateName`` when ``prefix``).
        rule: ``"subdomain"`` (253 characters), ``"label"`` or ``"dns1035"`` (63 characters).
        prefix: a ``generateName``: a trailing ``-`` is allowed (the API server masks it).
        max_length: a tighter length bound (e.g. :data:`NODEPOOL_NAME_MAX`).
    """
    limit, pattern, words = _TEXT[rule]
    limit = min(limit, max_length) if max_length is not None else limit
    checked = name[:-1] + "a" if prefix and name.endswith("-") else name
    out = []
    if len(name) > limit:
        out.append(f"must be no more than {limit} characters (got {len(name)})")
    if not pattern.fullmatch(checked):
        out.append(f"must be {words}")
    return out
