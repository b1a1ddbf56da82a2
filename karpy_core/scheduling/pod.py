"""The scheduler's view of a pod, built once from a Kubernetes Pod dict.

:func:`effective_requests` implements the kube-scheduler's resource rule (KEP-753, sidecar
containers; ``k8s.io/component-helpers/resource`` ``PodRequests``): for each resource,

* a container's request defaults to its limit when only the limit is set;
* ``regular = sum(containers) + sum(restartable init containers)`` (sidecars run alongside);
* each non-restartable init container ``i`` needs ``request_i + sum(sidecars started before i)``;
  each sidecar start needs the running sum of sidecars so far;
* the containers need ``max(regular, every init-phase peak)``;
* pod-level resources (``spec.resources``, KEP-2837 PodLevelResources, on by default since
  Kubernetes 1.34): for each supported resource (``cpu``, ``memory``, ``hugepages-*``:
  ``IsSupportedPodLevelResource``) the pod-level request replaces the containers' (``PodRequests``
  with ``SkipPodLevelResources`` false, as kube-scheduler's ``NodeResourcesFit`` and Karpenter's
  ``pkg/utils/resources`` ``Ceiling``/``RequestsForSpec`` call it); the API server defaults a
  pod-level request the pod leaves out to its pod-level limit when no container requests that
  resource (``pkg/apis/core/v1/defaults.go`` ``defaultPodRequests``; else to the containers' sum,
  which changes nothing), so a pod-level limit alone counts as the request too; other resources
  keep the containers' requests;
* the pod needs that ``+ spec.overhead``, plus one ``pods`` slot.

Parsed parts are memoized by content (:class:`_Memo`): the pods of one ReplicaSet repeat their
template's resources, node selector, affinity, spread constraints and tolerations, but each pod's
dict holds its own copies, so the key is the part's content (its :mod:`marshal` bytes, which only
equal JSON values share; a different key order is only a miss). A pod whose part differs from its
template's (a VPA's per-pod requests, a webhook's affinity) has another key and its own parse.
"""

from __future__ import annotations

import marshal
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, cast

from karpy_core.scheduling.requirements import Requirements
from karpy_core.scheduling.resources import Resources, parse_resource_list
from karpy_core.scheduling.taints import Toleration, parse_tolerations
from karpy_core.scheduling.topology import AffinityTerm, SpreadConstraint, parse_affinity_terms, parse_spread

__all__ = ["PodInfo", "drain_order", "effective_requests", "node_affinity_matches_no_node", "pod_level_requests", "is_pod_level_resource",
           "requirement_key", "pod_info"]


class _Memo:
    """A bounded map from a part's content key to what parsing it gives (immutable values, or
    values the caller copies): emptied when it reaches ``cap`` entries, so a cluster with more
    distinct templates than that only parses again. Not thread-safe by design: a miss just parses."""

    __slots__ = ("_cap", "_map")

    def __init__(self, cap: int = 8192):
        self._cap = cap
        self._map: dict[Any, Any] = {}

    def get(self, key: Any) -> Any:
        """The value stored for ``key``, or None."""
        return self._map.get(key)

    def put(self, key: Any, value: Any) -> None:
        """Store ``value`` for ``key`` (emptying the map first when it is full)."""
        if len(self._map) >= self._cap:
            self._map.clear()
        self._map[key] = value

    def clear(self) -> None:
        """Forget every entry (tests)."""
        self._map.clear()


def _content_key(*parts: Any) -> bytes | None:
    """The memo key of ``parts``: their :mod:`marshal` serialization (format 2: no back-references,
    so the bytes do not depend on which objects are shared), which only equal values of the JSON
    types (dict, list, str, int, float, bool, None) and tuples share; None (do not memoize) for a
    part of any other type. A third of ``repr``'s cost; a dict's key order is only a miss."""
    try:
        return marshal.dumps(cast("tuple[str, ...]", parts), 2)  # typeshed's _Marshallable: the check is at run time
    except ValueError:  # "unmarshallable object": a Mapping that is not a dict, a str subclass...
        return None


_REQUESTS = _Memo()
"""The containers' ``resources`` (content key) -> :func:`effective_requests` (copied on return)."""


def _container_requests(container: Mapping[str, Any]) -> Resources:
    res = container.get("resources") or {}
    requests = parse_resource_list(res.get("requests"))
    limits = res.get("limits")
    if limits:
        for name, amount in parse_resource_list(limits).items():
            requests.setdefault(name, amount)
    return requests


def _summed_requests(containers: Sequence[Mapping[str, Any]]) -> Resources:
    """The containers' requests summed, plus one ``pods`` slot, zeros left out."""
    regular: Resources = {}
    for c in containers:
        for name, amount in _container_requests(c).items():
            regular[name] = regular.get(name, 0) + amount
    regular["pods"] = regular.get("pods", 0) + 1
    return {k: v for k, v in regular.items() if v}


def is_pod_level_resource(name: str) -> bool:
    """A resource ``spec.resources`` may name: ``cpu``, ``memory`` or ``hugepages-*``
    (``k8s.io/component-helpers/resource`` ``IsSupportedPodLevelResource``)."""
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def pod_level_requests(spec: Mapping[str, Any], containers: Collection[str]) -> Resources:
    """The pod-level requests of ``spec`` (``spec.resources``) after the API server's defaulting,
    for the supported resources only (:func:`is_pod_level_resource`), internal units: each
    ``requests`` entry, and each ``limits`` entry the requests leave out when ``containers`` (the
    names of the containers' aggregate requests, as ``AggregateContainerRequests`` gives them) does
    not hold it (Kubernetes ``pkg/apis/core/v1/defaults.go`` ``defaultPodRequests``; a resource the
    containers request defaults to their sum, which :func:`effective_requests` already has, except
    for hugepages, which are not overcommitable and default to the limit). Empty when the pod sets
    no pod-level resources.

    Raises:
        karpy_core.utils.quantity.QuantityError: a pod-level quantity is malformed.
    """
    res = spec.get("resources")
    if not res:
        return {}
    out = {k: v for k, v in parse_resource_list(res.get("requests")).items() if is_pod_level_resource(k)}
    for name, amount in parse_resource_list(res.get("limits")).items():
        if is_pod_level_resource(name) and name not in out and (name not in containers or name.startswith("hugepages-")):
            out[name] = amount
    return out


def effective_requests(spec: Mapping[str, Any]) -> Resources:
    """The resources a pod reserves on a node, in internal units (cpu millicores, memory bytes),
    including one ``pods`` slot. See the module docstring for the rule and its source
    (``k8s.io/component-helpers/resource`` ``PodRequests``, pod-level resources included).

    Raises:
        karpy_core.utils.quantity.QuantityError: a request or limit is not a quantity.
    """
    containers = spec.get("containers") or ()
    if spec.get("resources"):
        return _with_pod_level(spec)
    if not spec.get("initContainers") and not spec.get("overhead"):  # the common case: the rule reduces to the sum
        key = _content_key(*[c.get("resources") for c in containers])
        hit = _REQUESTS.get(key) if key is not None else None
        if hit is None:
            hit = _summed_requests(containers)
            if key is not None:
                _REQUESTS.put(key, hit)
        return dict(hit)
    regular: Resources = {}
    for c in containers:
        for name, amount in _container_requests(c).items():
            regular[name] = regular.get(name, 0) + amount
    sidecars: Resources = {}
    peak: Resources = {}
    for c in spec.get("initContainers") or ():
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            for name, amount in req.items():
                sidecars[name] = sidecars.get(name, 0) + amount
            candidate = dict(sidecars)
        else:
            candidate = dict(req)
            for name, amount in sidecars.items():
                candidate[name] = candidate.get(name, 0) + amount
        for name, amount in candidate.items():
            peak[name] = max(peak.get(name, 0), amount)
    for name, amount in sidecars.items():
        regular[name] = regular.get(name, 0) + amount
    out: Resources = dict(regular)
    for name, amount in peak.items():
        out[name] = max(out.get(name, 0), amount)
    for name, amount in parse_resource_list(spec.get("overhead")).items():
        out[name] = out.get(name, 0) + amount
    out["pods"] = out.get("pods", 0) + 1
    return {k: v for k, v in out.items() if v}


def _aggregate_names(spec: Mapping[str, Any]) -> set[str]:
    """The resources any container or init container requests (or limits, which default the
    request), zero or not: the keys ``AggregateContainerRequests`` gives."""
    names: set[str] = set()
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        res = c.get("resources") or {}
        names.update(res.get("requests") or {})
        names.update(res.get("limits") or {})
    return names


def _with_pod_level(spec: Mapping[str, Any]) -> Resources:
    """:func:`effective_requests` of a pod that sets ``spec.resources``: the containers' rule
    without the overhead, the pod-level requests (:func:`pod_level_requests`) in place of it for
    the resources they name, then the overhead (``PodRequests``' order)."""
    containers = {k: v for k, v in spec.items() if k not in ("resources", "overhead")}
    out = effective_requests(containers)
    for name, amount in pod_level_requests(spec, _aggregate_names(spec)).items():
        out[name] = amount
    for name, amount in parse_resource_list(spec.get("overhead")).items():
        out[name] = out.get(name, 0) + amount
    return {k: v for k, v in out.items() if v}


def requirement_key(reqs: Requirements) -> tuple[Any, ...]:
    """A hashable identity for a requirement set (used to cache compatibility checks)."""
    return tuple((r.key, r.complement, tuple(sorted(r.values)), r.gte, r.lte, r.min_values) for r in reqs)


@dataclass(eq=False, slots=True)
class PodInfo:
    """A pod as the scheduler sees it.

    Attributes:
        namespace, name, uid: identity.
        labels, annotations: metadata.
        node_name: the node it is bound to, or "" when pending.
        owner_kind, owner_name: the controlling owner reference ("" when none).
        created: ``metadata.creationTimestamp`` text (ISO 8601 sorts chronologically).
        priority: ``spec.priority`` (0 when unset).
        requests: :func:`effective_requests`.
        requirement_terms: alternatives (required node-affinity terms, OR), each already
            intersected with ``spec.nodeSelector``; one entry when there is no affinity.
        tolerations: the pod's tolerations.
        unsupported: why karpy cannot provision for this pod ("" when it can), e.g. matchFields.
        raw: the original dict, for constraints handled elsewhere (topology, volumes, ports).
    """

    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    node_name: str
    owner_kind: str
    owner_name: str
    created: str
    priority: int
    requests: Resources
    requirement_terms: list[Requirements]
    tolerations: tuple[Toleration, ...]
    unsupported: str = ""
    spread: tuple[SpreadConstraint, ...] = ()
    """Topology spread constraints (hard and ScheduleAnyway)."""
    affinity: tuple[AffinityTerm, ...] = ()
    """Required pod affinity and anti-affinity terms."""
    preferred_affinity: tuple[AffinityTerm, ...] = ()
    """Preferred pod (anti-)affinity terms, heaviest first."""
    preferred_node_terms: tuple[Requirements, ...] = ()
    """Preferred node-affinity terms, heaviest first."""
    host_ports: frozenset[tuple[str, int, str]] = frozenset()
    """(host IP, port, protocol) the pod binds on its node; host IP "0.0.0.0" means every address."""
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    _signature: tuple[Any, ...] | None = field(default=None, repr=False)

    def __copy__(self) -> PodInfo:
        """A shallow copy (``copy.copy``), built field by field: about five times faster than
        the generic protocol for a slotted dataclass, and the scheduler and the views copy a pod
        (narrowed by its volumes, held on a node, re-bound) for every pod of a big batch."""
        return PodInfo(*_field_values(self))

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def is_daemonset_pod(self) -> bool:
        return self.owner_kind == "DaemonSet"

    @property
    def has_topology(self) -> bool:
        """True when placement depends on where other pods are (spread or pod affinity)."""
        return bool(self.spread or self.affinity or self.preferred_affinity)

    def signature(self) -> tuple[Any, ...]:
        """Pods with equal signatures are interchangeable for placement decisions (same requests,
        node requirements, tolerations, ports, and for constrained pods the same labels and
        constraints); the scheduler caches work per signature."""
        if self._signature is None:
            sig: tuple[Any, ...] = (
                tuple(sorted(self.requests.items())),
                tuple(requirement_key(t) for t in self.requirement_terms),
                self.tolerations,
                self.host_ports,
                tuple(requirement_key(t) for t in self.preferred_node_terms),
            )
            if self.has_topology:
                sig += (self.namespace, tuple(sorted(self.labels.items())), tuple(self.spread), tuple(self.affinity),
                        tuple(self.preferred_affinity))
            self._signature = sig
        return self._signature


_field_values = attrgetter(*(f.name for f in fields(PodInfo)))
"""Every field of a :class:`PodInfo`, in ``__init__``'s order (for :meth:`PodInfo.__copy__`)."""


def _selector_terms(spec: Mapping[str, Any]) -> tuple[list[Requirements], str]:
    """(one :class:`Requirements` per required node-affinity term, each with ``nodeSelector``;
    why no node can take the pod, or "")."""
    selector = spec.get("nodeSelector")
    if not selector and not spec.get("affinity"):
        return [Requirements()], ""
    base = Requirements.from_labels(selector or {})
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms: Sequence[Mapping[str, Any]] = required.get("nodeSelectorTerms") or ()
    if not terms:
        return [base], ""
    out: list[Requirements] = []
    unsupported = ""
    empty = _empty_terms(terms)
    if len(empty) == len(terms):
        return [base], _no_node_reason(empty)
    for i, term in enumerate(terms):
        if i in empty:
            continue  # matches no node; the other terms are ORed
        if term.get("matchFields"):
            unsupported = "node affinity uses matchFields, which karpy (like Karpenter) cannot provision for"
        reqs = base.copy()
        try:
            reqs.add_all(Requirements.from_selector_terms(term.get("matchExpressions") or ()))
        except ValueError as exc:
            unsupported = f"invalid node affinity: {exc}"
        out.append(reqs)
    return out, unsupported


_NO_PORTS: frozenset[tuple[str, int, str]] = frozenset()


def _empty_terms(terms: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the node selector terms with neither ``matchExpressions`` nor ``matchFields``."""
    return [i for i, term in enumerate(terms) if not term.get("matchExpressions") and not term.get("matchFields")]


def _no_node_reason(empty: Sequence[int]) -> str:
    # k8s.io/component-helpers scheduling/corev1/nodeaffinity nodeSelectorTerm.match: "nil or
    # empty term selects no objects"; the API server accepts such a term
    which = ", ".join(f"nodeSelectorTerms[{i}]" for i in empty)
    return (f"required node affinity matches no node: {which} {'has' if len(empty) == 1 else 'have'} no "
            "matchExpressions or matchFields, and kube-scheduler matches no node with an empty term")


def node_affinity_matches_no_node(spec: Mapping[str, Any]) -> str:
    """Why no node can ever take a pod of ``spec`` (a pod spec as a JSON dict) because every term of
    its required node affinity is empty (``nodeSelectorTerms: [{}]``): the reason ``simulate``
    gives such a pod, which stays pending; "" when some term can match (or there is no such
    affinity). kube-apiserver accepts the pod; kube-scheduler matches no node with an empty term."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    terms = (affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or ()
    empty = _empty_terms(terms)
    return _no_node_reason(empty) if terms and len(empty) == len(terms) else ""


def _host_ports(spec: Mapping[str, Any]) -> frozenset[tuple[str, int, str]]:
    ports = set()
    for c in [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]:
        for p in c.get("ports") or ():
            if p.get("hostPort"):
                ports.add((str(p.get("hostIP") or "0.0.0.0"), int(p["hostPort"]), str(p.get("protocol") or "TCP")))
    return frozenset(ports) if ports else _NO_PORTS


def _preferred_node_terms(spec: Mapping[str, Any]) -> list[Requirements]:
    if not spec.get("affinity"):
        return []
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    weighted = []
    for i, p in enumerate(affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        try:
            reqs = Requirements.from_selector_terms((p.get("preference") or {}).get("matchExpressions") or ())
        except ValueError:
            continue
        weighted.append((-int(p.get("weight") or 1), i, reqs))
    return [r for _, _, r in sorted(weighted, key=lambda w: (w[0], w[1]))]


@dataclass(frozen=True, slots=True)
class _Template:
    """What a pod's scheduling parts (node selector, affinity, tolerations, spread, containers'
    resources and ports, overhead) parse to: the part of a :class:`PodInfo` its ReplicaSet's pods
    share. ``requests`` and the Requirements are copied into each pod's info."""

    terms: tuple[Requirements, ...]
    unsupported: str
    required: tuple[AffinityTerm, ...]
    preferred: tuple[AffinityTerm, ...]
    preferred_nodes: tuple[Requirements, ...]
    requests: Resources
    tolerations: tuple[Toleration, ...]
    spread: tuple[SpreadConstraint, ...]
    host_ports: frozenset[tuple[str, int, str]]


_TEMPLATES = _Memo()
"""(namespace, the spec's scheduling parts[, labels]) -> :class:`_Template`."""
_TEMPLATE_MAP = _TEMPLATES._map
""":data:`_TEMPLATES`' dict (:func:`pod_info` reads it without a method call; ``clear`` keeps the object)."""
MEMOS = (_REQUESTS, _TEMPLATES)
"""Every memo of this module (tests empty them to compare a memoized parse with a fresh one)."""


def _template_key(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> bytes | None:
    """The memo key of the parts :func:`_parse_template` reads: the namespace (pod affinity terms
    default to it), and the pod's labels only when a term has ``matchLabelKeys`` or
    ``mismatchLabelKeys`` (the only rules that read them); None: do not memoize."""
    get = spec.get
    inits = get("initContainers")
    containers: Sequence[Mapping[str, Any]] = get("containers") or ()
    parts = (namespace, get("nodeSelector"), get("affinity"), get("tolerations"), get("topologySpreadConstraints"),
             # one container (the common case) as a tuple, without a list comprehension's frame: a tuple
             # and a list marshal to different bytes, so the two forms never share a key
             ((containers[0].get("resources"), containers[0].get("ports")),) if len(containers) == 1
             else [(c.get("resources"), c.get("ports")) for c in containers],
             inits and [(c.get("resources"), c.get("restartPolicy"), c.get("ports")) for c in inits], get("overhead"),
             get("resources"))
    try:  # _content_key(*parts), inlined: once per pod
        key = marshal.dumps(parts, 2)
    except ValueError:
        return None
    if b"LabelKeys" in key:
        return _content_key(key, labels)
    return key


def _parse_template(spec: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> tuple[_Template, int]:
    """(:class:`_Template` of ``spec``, ``spec.priority``), parsed in the order :func:`pod_info`
    always parsed them (so a pod with two errors raises the same one).

    Raises:
        karpy_core.utils.quantity.QuantityError: a resource quantity is malformed.
        ValueError: a priority, weight, skew or port is not an integer.
    """
    terms, unsupported = _selector_terms(spec)
    affinity = spec.get("affinity")
    required, preferred = parse_affinity_terms(affinity, namespace, labels) if affinity else ([], [])
    priority = int(spec.get("priority") or 0)
    requests = effective_requests(spec)
    tolerations = parse_tolerations(spec.get("tolerations")) if spec.get("tolerations") else ()
    spread = tuple(parse_spread(spec.get("topologySpreadConstraints"), labels)) if spec.get("topologySpreadConstraints") else ()
    preferred_nodes = tuple(_preferred_node_terms(spec))
    return _Template(tuple(terms), unsupported, tuple(required), tuple(preferred), preferred_nodes, requests, tolerations, spread,
                     _host_ports(spec)), priority


def _copies(terms: tuple[Requirements, ...]) -> list[Requirements]:
    """Fresh :class:`Requirements` (a memo's are shared; a pod's may be changed in place)."""
    return [Requirements(dict(t.by_key)) for t in terms]


def pod_info(pod: Mapping[str, Any]) -> PodInfo:
    """Build a :class:`PodInfo` from a Kubernetes Pod dict (camelCase, as the API serves it).
    The parts a ReplicaSet's pods repeat are parsed once per content (see the module docstring).

    Raises:
        karpy_core.utils.quantity.QuantityError: a resource quantity is malformed.
        ValueError: a priority, weight, skew or port is not an integer.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    owner_kind = owner_name = ""
    for ref in meta.get("ownerReferences") or ():
        if ref.get("controller", True):
            owner_kind, owner_name = str(ref.get("kind", "")), str(ref.get("name", ""))
            break
    labels = dict(meta.get("labels") or {})
    namespace = str(meta.get("namespace") or "default")
    key = _template_key(spec, namespace, labels)
    tmpl: _Template | None = _TEMPLATE_MAP.get(key) if key is not None else None  # _TEMPLATES.get, inlined
    if tmpl is None:
        tmpl, priority = _parse_template(spec, namespace, labels)
        if key is not None:
            _TEMPLATES.put(key, tmpl)
    else:
        given = spec.get("priority")
        priority = int(given) if given else 0
    annotations = meta.get("annotations")
    terms = tmpl.terms
    preferred_nodes = tmpl.preferred_nodes
    # positional, in PodInfo's field order (namespace ... raw): a fifth of the call's cost with keywords
    return PodInfo(
        namespace,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
        labels,
        dict(annotations) if annotations else {},
        str(spec.get("nodeName") or ""),
        owner_kind,
        owner_name,
        str(meta.get("creationTimestamp") or ""),
        priority,
        dict(tmpl.requests),
        # fresh (a memo's are shared; a pod's may change in place); one term without a list comprehension's frame
        [Requirements(dict(terms[0].by_key))] if len(terms) == 1 else _copies(terms),
        tmpl.tolerations,
        tmpl.unsupported,
        tmpl.spread,
        tmpl.required,
        tmpl.preferred,
        tuple(_copies(preferred_nodes)) if preferred_nodes else (),
        tmpl.host_ports,
        pod if type(pod) is dict else dict(pod),  # the caller's dict, not a copy (views are read-only)
    )


def drain_order(pod: PodInfo) -> tuple[int, int, int, str, str]:
    """The sort key of the order in which a drain evicts a node's pods, and in which
    consolidation's replays (``drain_waves``) expect them to reach kube-scheduler: pods with a
    hard placement rule (a ``DoNotSchedule`` topology spread, a required pod affinity or
    anti-affinity term) first, then the larger first (cpu, then memory, in milli-units and
    bytes), then namespace and name.

    Why (issue 36): kube-scheduler places an evicted pod's replacement as it arrives. Sent by name,
    a spread Deployment's pods came last and found the room of the one zone their spread allowed
    taken by pods that could have gone anywhere; and a large pod sent after small ones found no
    hole left. The order is karpy's own (Karpenter's terminator hands a tier's pods to its
    eviction queue in listing order); it only decides which pods a PodDisruptionBudget lets go
    first and who reaches kube-scheduler first, never whether a pod is evicted."""
    hard = any(c.hard for c in pod.spread) or bool(pod.affinity)
    return (0 if hard else 1, -int(pod.requests.get("cpu", 0)), -int(pod.requests.get("memory", 0)),
            pod.namespace, pod.name)
