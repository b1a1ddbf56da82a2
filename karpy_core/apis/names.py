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

__all__ = ["NODEPOOL_NAME_MAX", "TOTAL_ANNOTATION_SIZE", "NameRule", "name_rule", "name_problems", "qualified_name_problems",
           "label_value_problems", "labels_problems", "annotations_problems"]

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


# --------------------------------------------------------------------------- labels and annotations
# k8s.io/apimachinery/pkg/util/validation/validation.go (IsQualifiedName, IsValidLabelValue) and
# k8s.io/apimachinery/pkg/api/validation/objectmeta.go (ValidateAnnotations); metav1validation's
# ValidateLabels applies the first two to every key and value of metadata.labels.

_QUALIFIED_NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME_WORDS = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
                         "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation "
                         "is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')")
_LABEL_VALUE_WORDS = ("a valid label value must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
                      "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                      "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')")

TOTAL_ANNOTATION_SIZE = 256 * 1024
"""Most bytes ``metadata.annotations`` may hold, keys and values together (apimachinery's
``TotalAnnotationSizeLimitB``)."""


def qualified_name_problems(key: str) -> list[str]:
    """Why ``key`` is not a qualified name (a label or annotation key: an optional DNS-1123
    subdomain prefix and ``/``, then a name of at most 63 characters), in apimachinery's
    ``IsQualifiedName`` words; empty when it is one."""
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        return [f"prefix part {p}" for p in name_problems(prefix, "subdomain")] + _name_part(name)
    else:
        # kube-apiserver 1.36's words (apimachinery's IsLabelKey, which IsQualifiedName now is)
        return ["a valid label key " + _QUALIFIED_NAME_WORDS + " with an optional DNS subdomain prefix and '/' "
                "(e.g. 'example.com/MyName')"]
    return _name_part(name)


def _name_part(name: str) -> list[str]:
    if not name:
        return ["name part must be non-empty"]
    out = []
    if len(name) > 63:
        out.append(f"name part must be no more than 63 characters (got {len(name)})")
    if not _QUALIFIED_NAME_PART.fullmatch(name):
        out.append("name part " + _QUALIFIED_NAME_WORDS)
    return out


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is not a label value (empty, or at most 63 characters of alphanumerics,
    ``-``, ``_``, ``.``, alphanumeric at both ends), in apimachinery's ``IsValidLabelValue`` words."""
    out = []
    if len(value) > 63:
        out.append(f"must be no more than 63 characters (got {len(value)})")
    if not _LABEL_VALUE.fullmatch(value):
        out.append(_LABEL_VALUE_WORDS)
    return out


def _shown(text: str) -> str:
    return repr(text if len(text) <= 70 else text[:67] + "...")


def labels_problems(labels: dict[str, str]) -> list[str]:
    """Every problem of ``metadata.labels`` as kube-apiserver's ``ValidateLabels`` finds them:
    each key a qualified name, each value a label value; one line each, naming key and value."""
    out = []
    for key, value in labels.items():
        out += [f"key {_shown(key)}: {p}" for p in qualified_name_problems(key)]
        out += [f"{_shown(key)}: value {_shown(value)}: {p}" for p in label_value_problems(value)]
    return out


def annotations_problems(annotations: dict[str, str]) -> list[str]:
    """Every problem of ``metadata.annotations`` as ``ValidateAnnotations`` finds them: each key
    a qualified name (checked lower-cased, so upper-case prefixes pass), and at most
    :data:`TOTAL_ANNOTATION_SIZE` bytes in all. Values are free text."""
    out = [f"key {_shown(key)}: {p}" for key in annotations for p in qualified_name_problems(key.lower())]
    size = sum(len(k.encode()) + len(v.encode()) for k, v in annotations.items())
    if size > TOTAL_ANNOTATION_SIZE:
        out.append(f"may not be more than {TOTAL_ANNOTATION_SIZE} bytes in all (got {size})")
    return out
