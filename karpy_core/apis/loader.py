"""Read Kubernetes manifests (YAML files, directories, text) into typed karpy models.

``load_documents(["nodepools/", "app.yaml"], {"CLUSTER_NAME": "demo"})`` returns a
:class:`LoadedManifests` or raises one :class:`~karpy_core.errors.ManifestError` listing *every*
problem found, each naming file, document, ``Kind/name`` and field path::

    nodepool.yaml doc 1 NodePool/default: spec.template.spec.requirements[2].operator: must be one of ...

Steps, per file (``*.json``/``*.yaml``/``*.yml`` of a directory, sorted, not recursive, as kubectl
reads a directory; a file starting with ``{`` is first read as a stream of JSON values, see
:func:`load_documents`):

1. ``${VAR}`` placeholders are replaced by ``variables[VAR]`` (text substitution, like
   ``envsubst``); placeholders without a value stay as literal text.
2. The text is parsed as multi-document YAML (PyYAML, safe). Before a document is built, its
   node graph is checked against two bounds (:func:`check_yaml_limits`): **alias expansion**
   (go-yaml's "excessive aliasing" rule, which kubectl and the API server apply, plus an absolute
   cap of :data:`MAX_ALIAS_NODES`, 10,000) and **nesting depth** (:data:`MAX_NESTING_DEPTH`); a document
   over either is refused with its file and line, so a 1 KB alias bomb costs milliseconds, not
   gigabytes. The loader also **rejects repeated mapping keys**: each repeat is a problem naming key,
   path and both lines (keys a merge key ``<<`` brings in are set in go-yaml v2's order, as kubectl
   sets them: :class:`_StrictKeysLoader`). Parsing goes on
   (repeated mappings are merged, other values: the last wins) so the document is still validated
   and its other mistakes reported too. Empty documents (only comments, or nothing) are skipped and not
   counted: ``doc N`` is the N-th object (:func:`_parse`); a ``v1 List`` is expanded.
3. Each document is validated into the model registered for its ``(apiVersion, kind)``
   (:func:`karpy_core.apis.registry.kind_registry`), by wire name only. Pre-v1 Karpenter kinds
   (``karpenter.sh/v1alpha5 Provisioner``, ``karpenter.k8s.aws/v1alpha1 AWSNodeTemplate``,
   ``v1beta1`` kinds) are errors explaining the v1 replacement. Kinds karpy does not model are kept
   as :class:`~karpy_core.apis.workloads.Passthrough` in ``other`` and otherwise ignored. A
   built-in kind (modelled or not: Pod, Deployment, PriorityClass, Service...) is first walked
   against kube-apiserver's own schema of it (:func:`karpy_core.apis.fieldschema.unknown_fields`):
   each field the schema does not declare is a problem, as kube-apiserver's strict decoding
   (``kubectl apply``'s default ``--validate=strict``) refuses it, and explicit nulls are read as
   its decoder reads them (:func:`karpy_core.apis.fieldschema.walk_fields`: a null struct field is
   unset, a null map value or list item the zero of its type), before the model sees the object.
4. Object names are checked as kube-apiserver checks them (:mod:`karpy_core.apis.names`: DNS-1123
   subdomain for most kinds, label for Namespaces, StatefulSets and namespaces, DNS-1035 for
   Services; NodePool names at most 63 characters, and at most ``MAX_NODEPOOL_NAME`` when the
   NodeClass kind they name declares one, e.g. KakaoCloud's KCNodeClass: 38).
5. Cross-object checks that are not errors (a NodePool naming a NodeClass that is not loaded, an
   object defined twice) go to ``warnings``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from karpy_core.apis.base import FieldPathError, KubeObject, Source
from karpy_core.apis.builtin import builtin_kind_problem
from karpy_core.apis.core import PREEMPT_LOWER_PRIORITY, PREEMPTION_POLICIES, SYSTEM_PRIORITY_VALUES, Node, Pod, PodSpec, not_supported
from karpy_core.apis.durations import parse_duration
from karpy_core.apis.fieldschema import did_you_mean, unknown_field_message, walk_fields
from karpy_core.apis.labels import LABEL_NODEPOOL
from karpy_core.apis.names import NODEPOOL_NAME_MAX, name_problems, name_rule
from karpy_core.apis.node import RuntimeClass
from karpy_core.apis.nodeclaim import NodeClaim
from karpy_core.apis.nodepool import NodePool
from karpy_core.apis.registry import kind_registry
from karpy_core.apis.structural import schema_for, type_problems
from karpy_core.apis.workloads import (
    DaemonSet,
    Deployment,
    Job,
    Passthrough,
    PodDisruptionBudget,
    ReplicaSet,
    StatefulSet,
)
from karpy_core.errors import ManifestError
from karpy_core.utils import kubeyaml
from karpy_core.utils.kubeyaml import KubeYAMLLoader, WrittenFloat, YAMLValueProblem, describe_yaml_error, format_yaml_path
from karpy_core.utils.quantity import parse_quantity

__all__ = [
    "MAX_ALIAS_NODES",
    "MAX_NESTING_DEPTH",
    "YAMLLimitError",
    "LoadedManifests",
    "check_yaml_limits",
    "load_documents",
    "load_text",
    "safe_load_all",
    "substitute",
    "format_path",
    "old_api_message",
    "priority_class_problems",
    "refused_names",
    "modelled_elsewhere",
    "short_name",
]

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_KARPY_GROUPS = ("karpenter.sh", "karpenter.k8s.aws", "karpenter.kakaocloud.com")
_PLUGIN_OF_GROUP = {"karpenter.k8s.aws": "karpy-aws (providers/aws)", "karpenter.kakaocloud.com": "karpy-kakaocloud (providers/kakaocloud)"}
IN_TREE_NODEPOOL_NAME_LIMITS = {("karpenter.kakaocloud.com", "KCNodeClass"): 38}
"""``(group, kind)`` of an in-tree plugin's NodeClass -> the longest NodePool name it allows
(``MAX_NODEPOOL_NAME`` of its model, e.g. ``karpy_kakaocloud.apis.MAX_NODEPOOL_NAME``), applied
also when that plugin is not installed (the simulated cloud serves the kind without it); an
installed plugin's own value wins. A test keeps the two equal."""
"""The distribution that serves each in-tree provider's API group."""
SERVED_KINDS: dict[str, frozenset[str]] = {
    "karpenter.sh/v1": frozenset({"NodePool", "NodeClaim"}),
    "karpenter.k8s.aws/v1": frozenset({"EC2NodeClass"}),
    "karpenter.kakaocloud.com/v1alpha1": frozenset({"KCNodeClass"}),
    "karpy.sh/v1alpha1": frozenset({"Scenario"}),
}
"""The kinds the CRDs of Karpenter (``karpenter.sh/v1``), karpenter-provider-aws and the KakaoCloud
provider serve in each of these versions, all of them: another kind there (``kind: Nodepool``) is
refused as kubectl refuses it (``no matches for kind``), with the served kind it is closest to,
instead of being ignored (trial 15: the NodePool was lost without an error). karpy's own
``karpy.sh/v1alpha1`` has one kind, ``Scenario`` (trial 22: ``kind: scenario`` was ignored, and the
whole day of steps with it)."""
_OLD_VERSIONS = {"karpenter.sh": ("v1alpha5", "v1beta1"), "karpenter.k8s.aws": ("v1alpha1", "v1beta1")}


def modelled_elsewhere(registry: Mapping[tuple[str, str], Any], api_version: str, kind: str) -> list[str]:
    """The apiVersions of ``registry`` (``(apiVersion, kind)`` -> model) that model ``kind`` in an API
    group other than ``api_version``'s, sorted (``["apps/v1"]`` for ``app/v1`` ``Deployment``);
    empty when ``kind`` is modelled nowhere else."""
    group = api_version.rpartition("/")[0]
    return sorted({v for (v, k) in registry if k == kind and v.rpartition("/")[0] != group})


def substitute(text: str, variables: dict[str, str] | None) -> str:
    """Replace ``${NAME}`` with ``variables[NAME]``; unknown names are left as written."""
    if not variables:
        return text
    return _VAR.sub(lambda m: variables.get(m.group(1), m.group(0)), text)


# --------------------------------------------------------------------------- YAML parsing

MAX_NESTING_DEPTH = 100
"""Deepest nesting (mappings and sequences inside each other) a document may have. Kubernetes'
JSON decoder allows 10,000 (``maxDepth`` in ``k8s.io/apimachinery/pkg/util/json/json.go``) and
libyaml 1,000, but karpy's Python code (PyYAML's constructor, deep copies, JSON dumps) recurses
once or more per level and Python's default recursion limit is 1,000; real manifests nest about 20
levels (a Deployment's pod template in a ``v1 List``), CRD schemas about 50."""

MAX_ALIAS_NODES = 10_000
"""Most YAML nodes one document may reach through aliases (``*name``), counted with expansion.
go-yaml (used by kubectl and the API server) refuses a document once more than 99% of up to
400,000 decoded nodes come from aliases, tightening to 10% at 4,000,000
(``allowedAliasRatio`` in ``go.yaml.in/yaml/v2/decode.go``); karpy applies that rule and this
absolute cap as well, because the simulator copies a workload's template into every pod: a 19 KB
Deployment whose template aliases expand to 100,000 nodes ran for over 5 minutes at 200 replicas,
one expanding to 10,000 nodes takes as long as the same template written out (170 KB, 40 s).
Real manifests use anchors for a few shared lists or maps (tens to hundreds of nodes)."""

_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


def _allowed_alias_ratio(decoded: int) -> float:
    """go-yaml's ``allowedAliasRatio``: 0.99 up to 400,000 decoded nodes, 0.10 from 4,000,000,
    linear in between (``go.yaml.in/yaml/v2/decode.go``)."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


class YAMLLimitError(yaml.MarkedYAMLError):
    """A YAML document refused before it is built: excessive alias expansion, a recursive alias or
    nesting deeper than :data:`MAX_NESTING_DEPTH`. ``problem_mark`` is where (line, column)."""


def check_yaml_limits(node: yaml.Node | None) -> None:
    """Check one composed YAML document (PyYAML's node graph, aliases not yet expanded) against the
    alias and nesting bounds, in O(nodes in the file + nodes reached through aliases) steps, the
    latter stopped by the bounds.

    Aliases are counted as go-yaml counts them: every node decoded is one step, and a step inside
    an alias's target is an alias step; the document is refused when alias steps exceed 100 and
    steps exceed 1,000 and alias/steps > :func:`_allowed_alias_ratio` (steps), or when alias steps
    exceed :data:`MAX_ALIAS_NODES`.

    Raises:
        YAMLLimitError: excessive aliasing, an alias inside its own anchor (a recursive
            document), or nesting deeper than :data:`MAX_NESTING_DEPTH`; the mark names the line.
    """
    if node is None:
        return
    defined: set[int] = set()
    open_nodes: set[int] = set()
    decoded = aliased = 0
    # (node, depth, inside an alias, leaving?) - iterative, so deep documents cannot blow the stack
    stack: list[tuple[yaml.Node, int, bool, bool]] = [(node, 1, False, False)]
    while stack:
        current, depth, in_alias, leaving = stack.pop()
        if leaving:
            open_nodes.discard(id(current))
            continue
        key = id(current)
        if key in open_nodes:
            raise YAMLLimitError("while composing a document", node.start_mark,
                                 "an alias refers to a node that contains it (a recursive document)", current.start_mark)
        if key in defined:
            in_alias = True  # a second visit of a node is an alias of it
        defined.add(key)
        decoded += 1
        if in_alias:
            aliased += 1
            if aliased > MAX_ALIAS_NODES or (
                aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded)
            ):
                raise YAMLLimitError(
                    "while composing a document", node.start_mark,
                    f"excessive aliasing: aliases expand to {aliased:,} of the first {decoded:,} nodes "
                    f"(anchors and aliases '&name'/'*name'; at most {MAX_ALIAS_NODES:,} and, as kubectl's YAML decoder "
                    "allows, at most 99% of a document)", current.start_mark)
        if isinstance(current, yaml.ScalarNode):
            continue
        if depth > MAX_NESTING_DEPTH:
            raise YAMLLimitError("while composing a document", node.start_mark,
                                 f"nested more than {MAX_NESTING_DEPTH} levels deep", current.start_mark)
        open_nodes.add(key)
        stack.append((current, depth, in_alias, True))
        children: list[yaml.Node] = []
        if isinstance(current, yaml.SequenceNode):
            children = list(current.value)
        elif isinstance(current, yaml.MappingNode):
            for k, v in current.value:
                children.extend((k, v))
        for child in reversed(children):  # document order, as go-yaml decodes
            stack.append((child, depth + 1, in_alias, False))


def safe_load_all(text: str) -> Iterator[Any]:
    """Every document of ``text`` as kube-apiserver reads YAML (JSON-compatible values:
    :func:`karpy_core.utils.kubeyaml.safe_load_all`), with the alias and nesting bounds of
    :func:`check_yaml_limits` (for YAML karpy reads outside manifests, e.g. Scenario files). Lazy:
    a document is parsed when the iteration reaches it.

    Raises:
        yaml.YAMLError: syntax errors, :class:`YAMLLimitError` for a refused document and
            :class:`~karpy_core.utils.kubeyaml.NonJSONValueError` for a value JSON cannot carry
            (``!!binary``, ``!!set``, ``.inf``...), naming its field.
    """
    return kubeyaml.safe_load_all(text, check_yaml_limits)


@dataclass(frozen=True, slots=True)
class _Duplicate:
    path: tuple[str | int, ...]
    line: int
    first_line: int


@dataclass(frozen=True, slots=True)
class _MergeOverride:
    """A key written in a mapping and then set again by a later merge key (``{name: a, <<: *x}``
    where ``x`` has ``name``): kubectl keeps the merged value, YAML's merge-key rule the written one."""

    path: tuple[str | int, ...]
    line: int
    """The merge key's line."""
    first_line: int
    """The written key's line."""
    kept: Any
    dropped: Any


def _merge(into: dict[Any, Any], extra: dict[Any, Any]) -> None:
    for key, value in extra.items():
        if isinstance(into.get(key), dict) and isinstance(value, dict):
            _merge(into[key], value)
        else:
            into[key] = value


_MERGE_TAG = "tag:yaml.org,2002:merge"


class _StrictKeysLoader(KubeYAMLLoader):
    """:class:`~karpy_core.utils.kubeyaml.KubeYAMLLoader` that sets a mapping's keys in go-yaml v2's
    order, as kubectl reads YAML, and records keys written twice (with their path and lines)
    instead of silently keeping the last value.

    Merge keys (``<<``) follow go-yaml v2's ``decoder.mapping``/``decoder.merge``
    (``go.yaml.in/yaml/v2`` ``decode.go``), which kubectl uses through ``sigs.k8s.io/yaml``'s
    non-strict ``YAMLToJSON``: each entry is set in the order written, a merged mapping's entries
    (its own ``<<`` first where written) at the merge key's place, the mappings of a merged list
    from the last to the first; a key set again simply takes the later value. So a key written
    after ``<<`` overrides the merged one (as YAML's merge-key rule says), earlier items of a merged
    list win over later ones, and a key written *before* ``<<`` is overridden by the merged value
    (unlike YAML's rule, so that case is reported in :attr:`overrides`). kubectl accepts all of
    these; only the API server's strict YAML decoding, which kubectl never reaches (it sends JSON),
    refuses them (``key "name" already set in map``). A key written twice in one mapping is
    refused by karpy (:attr:`duplicates`), although kubectl keeps the last one.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicates: list[_Duplicate] = []
        self.overrides: list[_MergeOverride] = []

    def _entries(self, node: yaml.MappingNode,
                 seen: frozenset[int] = frozenset()) -> Iterator[tuple[yaml.Node, yaml.Node, yaml.Node | None]]:
        """``(key node, value node, merge key)`` of ``node`` in go-yaml's setting order; the merge key
        is ``node``'s ``<<`` that brought the entry in (None for an entry written in ``node``).

        Raises:
            yaml.constructor.ConstructorError: a merge key's value is not a mapping or a list of them.
        """
        if id(node) in seen:  # an anchor merged into itself: check_yaml_limits refuses it first
            return
        seen = seen | {id(node)}
        for key_node, value_node in node.value:
            if not (isinstance(key_node, yaml.ScalarNode) and key_node.tag == _MERGE_TAG):
                yield key_node, value_node, None
                continue
            items = [value_node] if isinstance(value_node, yaml.MappingNode) else \
                list(reversed(value_node.value)) if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for item in items:
                if not isinstance(item, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping", node.start_mark,
                        f"map merge requires map or sequence of maps as the value (found {item.id})", item.start_mark)
                for key, value, _ in self._entries(item, seen):
                    yield key, value, key_node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        mapping: dict[Any, Any] = {}
        written: dict[Any, int] = {}  # JSON key -> the line it is first written at in this mapping (not merged)
        for key_node, value_node, merge_key in self._entries(node):
            merged = merge_key is not None
            key = self.construct_key(node, key_node)
            self.path.append(str(key))
            try:
                value = self.construct_object(value_node, deep=True)
            finally:
                self.path.pop()
            line = key_node.start_mark.line + 1
            if key in written:
                if not merged:  # written twice (``0x1A`` and ``26``, or ``1`` and ``"1"``: one JSON key)
                    self.duplicates.append(_Duplicate((*self.path, str(key)), line, written[key]))
                    if isinstance(mapping[key], dict) and isinstance(value, dict):
                        _merge(mapping[key], value)
                        continue
                else:
                    merge_line = merge_key.start_mark.line + 1 if merge_key is not None else line
                    self.overrides.append(_MergeOverride((*self.path, str(key)), merge_line, written[key], value, mapping[key]))
            mapping[key] = value
            if not merged:
                written.setdefault(key, line)
        return mapping


@dataclass(slots=True)
class _RawDocument:
    index: int
    line: int
    data: Any
    duplicates: list[_Duplicate]
    values: list[YAMLValueProblem] = field(default_factory=list)
    """Values JSON cannot carry (``!!binary``, ``!!set``, ``.inf``...): the document is not validated."""
    overrides: list[_MergeOverride] = field(default_factory=list)
    """Written keys a later merge key set again (kubectl keeps the merged value): warnings."""


def _parse(text: str) -> Iterator[_RawDocument]:
    """Yield every document (empty ones too, as ``data=None``); YAML errors propagate.

    A document's ``index`` counts only the documents that hold something: one with nothing but
    comments (or nothing) between its separators, anywhere in the file, is not counted, so ``doc N``
    is the N-th object kubectl would create, in the order it prints them (``configmap/a created``),
    whether or not a header of comments comes before the first ``---``. (kubectl's own messages
    number no documents: its YAMLReader cuts the stream at each ``---`` line and go-yaml's errors
    give a line counted from the start of that piece; karpy's lines count from the start of the file.)
    An empty document gets the index the next one will have."""
    loader = _StrictKeysLoader(text)
    try:
        index = 0
        while loader.check_node():
            node = loader.get_node()
            check_yaml_limits(node)
            loader.duplicates = []
            loader.overrides = []
            loader.problems = []
            data = loader.construct_document(node) if node is not None else None
            line = node.start_mark.line + 1 if node is not None else 0
            empty = data is None and not loader.problems
            yield _RawDocument(index + 1, line, data, loader.duplicates, loader.problems, loader.overrides)
            index += 0 if empty else 1
    finally:
        loader.dispose()


@dataclass(frozen=True, slots=True)
class _RefusedChunk:
    offset: int
    """Where the document starts in the text (characters)."""
    line: int
    """The 1-based line go-yaml's error is at."""
    problem: str
    """go-yaml's words."""


def _kubectl_refused_chunk(text: str) -> _RefusedChunk | None:
    """The first document of ``text`` that kubectl refuses although libyaml, reading the stream
    whole, reads it, or None. kubectl cuts the stream as apimachinery's ``YAMLReader`` does
    (``k8s.io/apimachinery/pkg/util/yaml/decoder.go``: a line starting with ``---`` ends the
    document before it; it opens the next one only when that one is still empty) and go-yaml
    parses each piece alone, so:

    * a piece holding only directives (``%YAML 1.1``, ``%TAG ...``: the ``---`` after them starts
      the next piece) is ``did not find expected <document start>``;
    * a piece holding only a document end ``...`` (no ``---`` in it) is ``did not find expected
      node content``.

    * a line starting with ``---`` followed by anything but spaces or a comment (``--- !!set``,
      ``--- !foo``, ``--- {a: 1}``, ``----``) is ``invalid Yaml document separator: !!set``: YAMLReader
      refuses it before go-yaml sees the piece (the piece it ends is not read either).

    Blank and comment lines do not count. kubectl stops at the first such error (the documents
    before it were read)."""
    if "%" not in text and "..." not in text and "---" not in text:
        return None
    offset = 0
    start = 0
    buffered = False  # YAMLReader's buffer holds something (comments and blank lines too)
    seen: list[tuple[int, str]] = []  # (line number, stripped line) of the piece's content lines
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        after = line[3:].strip() if line.startswith("---") else ""
        if after and not after.startswith("#"):
            return _RefusedChunk(start, number, f"invalid Yaml document separator: {after}")
        if line.startswith("---") and buffered:
            refused = _refused_piece(seen, start) if seen else None
            if refused:
                return refused
            seen, start, buffered = [], offset, False  # the separator line is consumed, not kept
            offset += len(line)
            continue
        buffered = True
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            seen.append((number, stripped))
        offset += len(line)
    return _refused_piece(seen, start) if seen else None


def _refused_piece(seen: list[tuple[int, str]], start: int) -> _RefusedChunk | None:
    """:func:`_kubectl_refused_chunk` for one piece's content lines (starting at ``start``)."""
    if all(line.startswith("%") for _, line in seen):
        return _RefusedChunk(start, seen[0][0], "did not find expected <document start>")
    if _is_document_end(seen[0][1]):  # go-yaml reads the piece's first document only: an empty one
        return _RefusedChunk(start, seen[0][0], "did not find expected node content")
    return None


def _is_document_end(line: str) -> bool:
    """Whether ``line`` (a whole line, stripped) is YAML's document end marker ``...``."""
    return line == "..." or line.startswith(("... ", "...\t"))


def _kubectl_first_documents(text: str) -> tuple[str, list[tuple[int, int]]]:
    """``text`` as kubectl reads it when a piece (apimachinery's ``YAMLReader`` cuts the stream at
    each ``---`` line, as in :func:`_kubectl_refused_chunk`) holds a document end marker ``...``
    after its document: go-yaml reads only the first document of each piece (checked with
    ``yaml.NewYAMLOrJSONDecoder``, kubectl's reader), so what follows the marker up to the next
    ``---`` line is never read, silently. Returns the text with those lines blanked (line numbers
    kept), and ``[(marker line, first unread content line)]`` for each piece where content
    (not only blank, comment, ``...`` or directive lines) was left unread, for a warning."""
    if "..." not in text:
        return text, []
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    dropped: list[tuple[int, int]] = []
    buffered = started = False  # the piece holds something / a content line
    ended = 0  # the line of the piece's document end marker, once read
    for number, line in enumerate(lines, start=1):
        if line.startswith("---") and buffered:
            buffered, started, ended = False, False, 0
            out.append(line)
            continue
        buffered = True
        stripped = line.strip()
        content = bool(stripped) and not stripped.startswith("#")
        if ended:
            if content and not _is_document_end(stripped) and not stripped.startswith("%") \
                    and (not dropped or dropped[-1][0] != ended):
                dropped.append((ended, number))
            out.append("\n" if line.endswith(("\n", "\r")) else "")
            continue
        if content and started and _is_document_end(stripped) and line.startswith("..."):
            ended = number
        started = started or content
        out.append(line)
    return "".join(out), dropped


class _JSONObject(dict[str, Any]):
    """A decoded JSON object that remembers its keys given more than once."""

    repeated: list[str]


def _json_object(pairs: list[tuple[str, Any]]) -> _JSONObject:
    obj = _JSONObject()
    obj.repeated = []
    for key, value in pairs:
        if key in obj:
            obj.repeated.append(key)
        obj[key] = value
    return obj


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _repeated_paths(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """The path of every key repeated within one object of ``value`` (a decoded JSON tree)."""
    if isinstance(value, _JSONObject):
        for key in value.repeated:
            yield (*path, key)
        for key, item in value.items():
            yield from _repeated_paths(item, (*path, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _repeated_paths(item, (*path, i))


def _plain(value: Any) -> Any:
    """``value`` with every :class:`_JSONObject` made a plain dict (what the rest of the loader reads)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


class _JSONStreamError(Exception):
    """A JSON syntax error at ``line``/``column`` (1-based), after the documents read before it."""

    def __init__(self, msg: str, line: int, column: int, docs: list[tuple[_RawDocument, list[tuple[str | int, ...]]]]) -> None:
        super().__init__(msg)
        self.msg, self.line, self.column, self.docs = msg, line, column, docs


def _parse_json(text: str) -> Iterator[tuple[_RawDocument, list[tuple[str | int, ...]]]]:
    """Each value of a whitespace-separated stream of JSON values (as Go's ``json.Decoder`` reads a
    stream), with the paths of its repeated keys; ``NaN``/``Infinity`` are refused as Go refuses them.

    Raises:
        _JSONStreamError: the first syntax error, carrying the documents decoded before it.
    """
    decoder = json.JSONDecoder(object_pairs_hook=_json_object, parse_constant=_refuse_constant)
    docs: list[tuple[_RawDocument, list[tuple[str | int, ...]]]] = []
    pos, end = 0, len(text)
    while True:
        while pos < end and text[pos] in " \t\r\n\ufeff":
            pos += 1
        if pos >= end:
            break
        try:
            data, next_pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise _JSONStreamError(exc.msg, exc.lineno, exc.colno, docs) from None
        except ValueError as exc:  # a refused constant: at the value's start
            line = text.count("\n", 0, pos) + 1
            raise _JSONStreamError(f"{exc} (in the value starting here)", line, pos - text.rfind("\n", 0, pos), docs) from None
        line = text.count("\n", 0, pos) + 1
        docs.append((_RawDocument(len(docs) + 1, line, _plain(data), []), list(_repeated_paths(data))))
        pos = next_pos
    yield from docs


# --------------------------------------------------------------------------- messages


def format_path(loc: Sequence[str | int]) -> str:
    """``("spec", "requirements", 2, "operator")`` -> ``spec.requirements[2].operator``; keys that
    are not plain identifiers are quoted (``labels["kubernetes.io/arch"]``). pydantic's internal
    location tags (``function-after[...]``, ``[key]``) are dropped; the rest is
    :func:`~karpy_core.utils.kubeyaml.format_yaml_path`."""
    return format_yaml_path([part for part in loc if isinstance(part, int)
                             or not (part.startswith("[") or (part.endswith("]") and "[" in part))])


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, WrittenFloat):
        return f"the number {value.written} (past 64 bits: kubectl's YAML reader makes it the float {float(value)!r})"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        text = value if len(value) <= 60 else value[:57] + "..."
        return repr(text)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "float_type": "a number",
    "float_parsing": "a number",
    "datetime_type": "an RFC 3339 timestamp",
    "datetime_parsing": "an RFC 3339 timestamp",
    "datetime_from_date_parsing": "an RFC 3339 timestamp",
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type annotation can hold at its own level (through
    ``Optional``/unions and ``Annotated``), without looking into lists or maps."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _declared_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The wire names (aliases) of the fields declared by the object at ``loc`` of ``model``
    (a pydantic error's location without its last item: the unknown field's parent), for a
    "did you mean"; empty when the location cannot be followed through the model's types.

    Follows a field by its alias, a list or tuple item by an ``int`` index and a map value by its
    key; a union is followed through each of its models (pydantic puts the member's name in the
    location, skipped), first match wins."""
    annotations: list[Any] = [model]
    for key in loc:
        following: list[Any] = []
        for annotation in annotations:
            origin = typing.get_origin(annotation)
            if origin is typing.Annotated:
                annotation = typing.get_args(annotation)[0]
                origin = typing.get_origin(annotation)
            args = typing.get_args(annotation)
            if isinstance(key, int) and origin in (list, tuple, set, frozenset) and args:
                following.append(args[0])
            elif origin is dict and len(args) == 2:
                following.append(args[1])
            for candidate in _models_in(annotation):
                fields = {f.alias or name: f.annotation for name, f in candidate.model_fields.items()}
                if key in fields:
                    following.append(fields[key])
                elif isinstance(key, str) and key == candidate.__name__:
                    following.append(candidate)  # a union member's name in the location
            if origin is typing.Union or origin is types.UnionType:
                following.extend(a for a in args if typing.get_origin(a) in (list, dict) or typing.get_origin(a) is typing.Annotated)
        annotations = following
        if not annotations:
            return []
    for annotation in annotations:
        for candidate in _models_in(annotation):
            return [f.alias or name for name, f in candidate.model_fields.items()]
    return []


def _describe(err: Any, what: str, model: type[BaseModel] | None = None) -> str:
    """One pydantic error -> plain words (``what`` is e.g. ``karpenter.sh/v1 NodePool``; an unknown
    field of ``model`` gets a "did you mean" naming the closest declared field, as a built-in
    kind's does: :func:`karpy_core.apis.fieldschema.did_you_mean`)."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    loc = [p for p in err["loc"] if isinstance(p, str) and not p.startswith("[")]
    if kind == "extra_forbidden":
        hint = did_you_mean(loc[-1], _declared_fields(model, tuple(err["loc"][:-1]))) if loc and model is not None else ""
        return f'unknown field "{loc[-1] if loc else "?"}" (not part of {what}){hint}'
    if kind == "missing":
        return "required field is missing"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}; got {_show(value)}"
    if kind in _TYPE_WORDS:
        text = f"must be {_TYPE_WORDS[kind]}; got {_show(value)}"
        if kind == "string_type" and isinstance(value, (int, float, bool)):
            text += " (quote it in YAML so it stays text)"
        return text
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", err["msg"]))
    if kind == "too_short":
        return f"must have at least {ctx.get('min_length')} item(s)"
    if kind == "too_long":
        return f"must have at most {ctx.get('max_length')} item(s); got {ctx.get('actual_length')}"
    if kind == "string_too_short":
        return (
            "must not be empty"
            if ctx.get("min_length") == 1
            else f"must be at least {ctx.get('min_length')} characters"
        )
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    bounds = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}
    if kind in bounds:
        limit = next(iter(ctx.values()), "?")
        return f"must be {bounds[kind]} {limit}; got {_show(value)}"
    return f"{err['msg']}; got {_show(value)}"


CONVERTED_VERSIONS: dict[tuple[str, str], str] = {
    ("autoscaling.x-k8s.io/v1alpha1", "CapacityBuffer"): "autoscaling.x-k8s.io/v1beta1",
}
"""``(apiVersion, kind)`` accepted and read as the apiVersion it maps to: versions the CRD also
serves with the same schema (the CapacityBuffer example in Karpenter's docs is v1alpha1)."""


def old_api_message(api_version: str, kind: str) -> str:
    """Why a pre-v1 Karpenter kind is refused and what replaces it (field renames included)."""
    head = f"{api_version} {kind} is the old API, removed in Karpenter v1"
    if kind == "Provisioner":
        return (
            f"{head}; it is replaced by karpenter.sh/v1 NodePool (renames: ttlSecondsAfterEmpty -> "
            "disruption.consolidateAfter with consolidationPolicy: WhenEmpty; ttlSecondsUntilExpired -> "
            "template.spec.expireAfter; providerRef -> template.spec.nodeClassRef; requirements, taints "
            "and labels move under template)"
        )
    if kind == "AWSNodeTemplate":
        return (
            f"{head}; it is replaced by karpenter.k8s.aws/v1 EC2NodeClass (renames: subnetSelector -> "
            "subnetSelectorTerms; securityGroupSelector -> securityGroupSelectorTerms; amiSelector -> "
            "amiSelectorTerms; instanceProfile -> role or instanceProfile), referenced from a "
            "karpenter.sh/v1 NodePool's nodeClassRef (formerly the Provisioner's providerRef)"
        )
    if kind == "Machine":
        return f"{head}; it is replaced by karpenter.sh/v1 NodeClaim"
    if kind in ("NodePool", "NodeClaim"):
        return (
            f"{head}; use karpenter.sh/v1 {kind} (expireAfter moves from disruption to template.spec; "
            "consolidationPolicy WhenUnderutilized -> WhenEmptyOrUnderutilized; kubelet moves to the "
            "EC2NodeClass; nodeClassRef needs group, kind and name)"
        )
    if kind == "EC2NodeClass":
        return (
            f"{head}; use karpenter.k8s.aws/v1 EC2NodeClass "
            "(amiSelectorTerms is required; prefer an alias such as al2023@latest)"
        )
    return f"{head}; use the karpenter.sh/v1 NodePool / NodeClaim and karpenter.k8s.aws/v1 EC2NodeClass kinds"


# --------------------------------------------------------------------------- result


@dataclass
class LoadedManifests:
    """Everything read, by kind. Every object remembers ``.source`` (file, document index).

    ``nodeclasses`` is keyed by ``(group, kind, name)`` (``("karpenter.k8s.aws", "EC2NodeClass",
    "default")``), the triple a NodePool's ``nodeClassRef`` names. ``other`` holds kinds karpy does
    not model (ignored); ``custom`` holds provider kinds that are neither NodeClasses nor core kinds.
    ``warnings`` lists non-fatal findings, one line each.
    """

    nodepools: list[NodePool] = field(default_factory=list)
    nodeclaims: list[NodeClaim] = field(default_factory=list)
    nodeclasses: dict[tuple[str, str, str], KubeObject] = field(default_factory=dict)
    runtimeclasses: list[RuntimeClass] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    deployments: list[Deployment] = field(default_factory=list)
    replicasets: list[ReplicaSet] = field(default_factory=list)
    statefulsets: list[StatefulSet] = field(default_factory=list)
    daemonsets: list[DaemonSet] = field(default_factory=list)
    jobs: list[Job] = field(default_factory=list)
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    custom: list[KubeObject] = field(default_factory=list)
    other: list[Passthrough] = field(default_factory=list)
    unvalidated: dict[tuple[str, str, str], str] = field(default_factory=dict)
    """In-tree providers' NodeClasses in ``other`` (read while their plugin is not installed), by
    ``(group, kind, name)``, and why they are not validated (``its plugin, karpy-aws (providers/aws),
    is not installed``); each is named once in ``warnings``, however many documents define it: by
    the line in ``unvalidated_warnings`` (``karpy validate`` lists them one line each instead)."""
    unvalidated_warnings: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    missing_node_classes: dict[str, tuple[str, str, str]] = field(default_factory=dict)
    """The ``warnings`` that say a NodePool's ``nodeClassRef`` names a NodeClass not among the loaded
    manifests, each with the ``(group, kind, name)`` it names (the name as the warning shows it,
    :func:`short_name`): a Scenario drops those an earlier step's apply answers."""
    skipped: list[str] = field(default_factory=list)
    """One line per directory argument with files not read (no ``.json``/``.yaml``/``.yml``
    extension), naming them: a CLI prints these on stderr."""
    redefined: list[str] = field(default_factory=list)
    """The ``warnings`` that say an object redefines an earlier one (``... redefines NodePool/a from
    FILE doc 1; the later definition is used``): ``karpy budgets``, which reads only NodePools,
    prints these and not the rest."""
    refused: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The objects the loader refused (a problem each at least), as ``(prefix, data)``: ``prefix``
    starts their problems (``FILE doc N Deployment/web``), ``data`` is the mapping as read. Filled
    while loading, for the admission checks run when there are problems (``admission`` of
    :func:`load_documents`): :func:`priority_class_problems` still reads a refused workload's
    ``priorityClassName``, and a refused PriorityClass or RuntimeClass is not reported missing."""

    def objects(self) -> list[KubeObject]:
        """Every modelled object (``other`` excluded), in bucket order then load order.
        RuntimeClasses come before Pods: the API server admits a pod only once its
        ``runtimeClassName`` exists."""
        out: list[KubeObject] = [*self.nodepools, *self.nodeclaims, *self.nodeclasses.values(), *self.runtimeclasses]
        buckets: tuple[Sequence[KubeObject], ...] = (self.pods, self.nodes, self.deployments, self.replicasets, self.statefulsets,
                                                     self.daemonsets, self.jobs, self.pdbs, self.custom)
        for bucket in buckets:
            out.extend(bucket)
        return out

    def ignored(self) -> list[str]:
        """``apiVersion Kind/name (file doc N)`` for each object in ``other``."""
        return [f"{o.api_version} {o.ref()} ({o.source})" for o in self.other]

    def nodeclass_for(self, nodepool: NodePool) -> KubeObject | None:
        """The loaded NodeClass a NodePool's ``nodeClassRef`` names, or None."""
        ref = nodepool.spec.template.spec.node_class_ref
        return self.nodeclasses.get((ref.group, ref.kind, ref.name))


_BUCKETS: dict[type, str] = {
    NodePool: "nodepools",
    NodeClaim: "nodeclaims",
    Pod: "pods",
    Node: "nodes",
    Deployment: "deployments",
    ReplicaSet: "replicasets",
    StatefulSet: "statefulsets",
    DaemonSet: "daemonsets",
    Job: "jobs",
    PodDisruptionBudget: "pdbs",
    RuntimeClass: "runtimeclasses",
}


MAX_OBJECT_NAME = 253
"""The longest name any Kubernetes object can have (a DNS-1123 subdomain)."""


def short_name(name: str, keep: int = 63) -> str:
    """``name``, or its first ``keep`` characters and its length when longer (for messages)."""
    return name if len(name) <= keep else f"{name[:keep]}... ({len(name):,} characters)"


def _accepted_but_useless(nodepool: NodePool) -> list[str]:
    """Warnings for NodePool values Karpenter's CRD accepts (``kubernetes-sigs/karpenter``
    ``karpenter.sh_nodepools.yaml``: ``nodeClassRef.name`` only non-empty, ``expireAfter``
    ``^(([0-9]+(s|m|h))+|Never)$``) that can never work: a ``nodeClassRef.name`` longer than any
    object name (253), so the NodePool is never Ready; an ``expireAfter`` of zero, so every
    NodeClaim expires (``nodeclaim/expiration``: creation + expireAfter) as soon as it is created;
    a negative ``limits`` quantity (the CRD's pattern allows a sign), so no node fits under it
    (``Limits.ExceededBy`` and the scheduler's remaining resources in ``pkg/apis/v1/nodepool.go``,
    ``provisioning/scheduling``): the NodePool launches nothing."""
    spec = nodepool.spec.template.spec
    where = f"{nodepool.source} {nodepool.ref()}"
    out = []
    if len(spec.node_class_ref.name) > MAX_OBJECT_NAME:
        out.append(f"{where}: spec.template.spec.nodeClassRef.name: {len(spec.node_class_ref.name):,} characters; no NodeClass "
                   f"can have that name (at most {MAX_OBJECT_NAME}), so this NodePool is never Ready (Karpenter's CRD accepts it)")
    if spec.expire_after != "Never" and parse_duration(spec.expire_after).total_seconds() == 0:
        out.append(f"{where}: spec.template.spec.expireAfter: {spec.expire_after}: every NodeClaim expires as soon as it is "
                   "created, so nodes churn and pods never stay (Karpenter's CRD accepts it; Never turns expiry off)")
    for resource, limit in sorted(nodepool.spec.limits.items()):
        if parse_quantity(limit) < 0:
            out.append(f"{where}: spec.limits.{resource}: {limit} is negative: no node fits under it, so this NodePool "
                       "launches nothing (Karpenter's CRD accepts it)")
    return out


def _identity(obj: KubeObject) -> tuple[str, str, str, str]:
    namespace = (obj.metadata.namespace or "default") if obj.NAMESPACED else ""
    return (obj.group(), obj.KIND, namespace, obj.name)


class _Builder:
    """Accumulates objects, problems and warnings across files."""

    def __init__(self, registry: dict[tuple[str, str], type[KubeObject]], cloud_provider: str | None = None) -> None:
        self.registry = registry
        self.cloud_provider = cloud_provider
        """The provider the manifests are for (None: not said); decides what an unvalidated NodeClass's warning adds."""
        self.result = LoadedManifests()
        self._unvalidated_nodeclasses: dict[tuple[str, str, str], str] = {}  # its "not validated" line
        """(group, kind, name) of in-tree providers' NodeClasses loaded while their plugin is not installed."""
        self.problems: list[str] = []
        self._seen: dict[tuple[str, str, str, str], KubeObject] = {}
        self._passthrough_seen: dict[tuple[str, str, str, str], Passthrough] = {}
        """Objects of kinds karpy does not model, by (group, kind, namespace, name): a later one replaces."""
        self._warned_by: dict[tuple[str, int, int | None], int] = {}
        """How many ``warnings`` there were once each object (by its :class:`Source`'s file, document
        and item) was read: :meth:`finish` puts the warnings it finds about an object there, so the
        warnings read in file order (they came after all the rest)."""

    # one file ---------------------------------------------------------------------------
    def add_text(self, text: str, source_name: str, variables: dict[str, str] | None, *, json_file: bool = False) -> None:
        text = substitute(text, variables)
        if text.lstrip(" \t\r\n\ufeff").startswith("{") and self._add_json(text, source_name, strict=json_file):
            return
        text, unread = _kubectl_first_documents(text)
        self.result.warnings.extend(
            f"{source_name}: line {line}: not read: kubectl reads one document per '---' piece, and the document end "
            f"marker '...' on line {marker} ends it (write '---' to start another document)" for marker, line in unread)
        refused = _kubectl_refused_chunk(text)
        try:
            for raw in _parse(text if refused is None else text[:refused.offset]):
                self._warn_placeholders(raw, source_name)
                self._add_document(raw, source_name)
            if refused is not None:
                self.problems.append(f"{source_name}: line {refused.line} column 1: YAML syntax error: {refused.problem} "
                                     "(documents after it were not read)")
        except yaml.reader.ReaderError as exc:  # a character YAML refuses: no mark, a position in ``text``
            where, _, detail = describe_yaml_error(exc, text).partition(": ")
            self.problems.append(f"{source_name}: {where}: YAML syntax error: {detail} (documents after it were not read)")
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            context = getattr(exc, "context", None)
            detail = f"{context}, {problem}" if context else problem
            what = "document refused" if isinstance(exc, YAMLLimitError) else "YAML syntax error"
            self.problems.append(
                f"{source_name}: {where}{what}: {detail} (documents after it were not read)"
            )

    def _add_json(self, text: str, source_name: str, *, strict: bool) -> bool:
        """Read ``text`` as a stream of JSON values (kubectl's JSON path for input starting with
        ``{``). Returns False, having added nothing, when the first value is not JSON and not
        ``strict`` (the caller reads the text as YAML); otherwise each value is a document and a
        syntax error a problem naming its line and column."""
        try:
            docs = list(_parse_json(text))
        except _JSONStreamError as exc:
            if not exc.docs and not strict:
                return False
            docs = exc.docs
            self.problems.append(f"{source_name}: line {exc.line} column {exc.column}: JSON syntax error: {exc.msg} "
                                 "(objects after it were not read)")
        for raw, repeated in docs:
            label = _label(raw.data, self.registry) if isinstance(raw.data, dict) else ""
            self.problems.extend(f"{source_name} doc {raw.index} {label}: {format_path(path)}: repeated key "
                                 f"{str(path[-1])!r}; each key may appear once per object" for path in repeated)
            self._warn_placeholders(raw, source_name)
            self._add_document(raw, source_name)
        return True

    def _warn_placeholders(self, raw: _RawDocument, file: str) -> None:
        """Warn about ``${NAME}`` left in a NodePool, NodeClaim or NodeClass (in pod specs such
        text is usually the container's own environment syntax, so those are left alone)."""
        data = raw.data
        if not isinstance(data, dict) or not isinstance(data.get("kind"), str):
            return
        if data["kind"] not in ("NodePool", "NodeClaim") and not data["kind"].endswith("NodeClass"):
            return
        left = sorted(set(_VAR.findall(json.dumps(data))))
        if left:
            self.result.warnings.append(
                f"{file} doc {raw.index} {_label(data, self.registry)}: placeholder(s) {', '.join('${' + v + '}' for v in left)} left as "
                f"written; fill them with {' '.join(f'--set {v}=...' for v in left)}"
            )

    def _add_document(self, raw: _RawDocument, file: str) -> None:
        where = f"{file} doc {raw.index}"
        if raw.values and not isinstance(raw.data, dict):
            self.problems.extend(f"{where}: {problem.text()}" for problem in raw.values)
            return
        if raw.data is None:
            return
        data = raw.data
        if not isinstance(data, dict):
            self.problems.append(f"{where}: expected a Kubernetes object (a mapping); got {_show(data)}")
            return
        label = _label(data, self.registry)
        for dup in raw.duplicates:
            self.problems.append(
                f"{where} {label}: {format_path(dup.path)}: repeated key {str(dup.path[-1])!r} at line {dup.line} "
                f"(first at line {dup.first_line}); each key may appear once per mapping"
            )
        for over in raw.overrides:
            self.result.warnings.append(
                f"{where} {label}: {format_path(over.path)}: the merge key '<<' at line {over.line} sets "
                f"{str(over.path[-1])!r} again after it is written at line {over.first_line}: "
                f"kubectl keeps the merged value {_show(over.kept)}, not {_show(over.dropped)} "
                "(YAML's merge rule would keep the written one); write '<<' first to override it"
            )
        if raw.values:
            # kubectl converts YAML to JSON before anything else: such a document never gets further
            self.problems.extend(f"{where} {label}: {problem.text()}" for problem in raw.values)
            return
        api_version = data.get("apiVersion")
        if data.get("kind") == "List" and api_version == "v1" and isinstance(data.get("items"), list):
            for item_no, item in enumerate(data["items"], start=1):
                self._add_object(item, Source(file, raw.index, raw.line, item_no), f"{where} item {item_no}")
            return
        self._add_object(data, Source(file, raw.index, raw.line), where)

    def _add_object(self, data: Any, source: Source, where: str) -> None:
        """Read one object (:meth:`_read_object`), then refuse each boolean or number in a string
        map or list that its model did not already refuse (kube-apiserver's decoder refuses them:
        ``json: cannot unmarshal bool into Go struct field ConfigMap.data of type string``)."""
        start = len(self.problems)
        mistyped = self._read_object(data, source, where)
        self._warned_by[(source.file, source.index, source.item)] = len(self.result.warnings)
        if len(self.problems) > start and isinstance(data, dict):
            self.result.refused.append((f"{where} {_label(data, self.registry)}", data))
        if mistyped:
            label = _label(data, self.registry)
            said = self.problems[start:]
            for path, value, expected in mistyped:
                if not any(line.startswith(f"{where} {label}: {path}: ") for line in said):
                    hint = " (quote it in YAML so it stays text)" if expected == "a string" and not isinstance(value, (dict, list)) else ""
                    self.problems.append(f"{where} {label}: {path}: must be {expected}; got {_show(value)}{hint}")

    def _read_object(self, data: Any, source: Source, where: str) -> list[tuple[str, Any, str]]:
        """Validate and store one object; returns the mistyped string-map values its schema walk
        found (:attr:`karpy_core.apis.fieldschema.SchemaWalk.mistyped`)."""
        if not isinstance(data, dict):
            self.problems.append(f"{where}: expected a Kubernetes object (a mapping); got {_show(data)}")
            return []
        label = _label(data, self.registry)
        api_version, kind = data.get("apiVersion"), data.get("kind")
        if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
            missing = [k for k, v in (("apiVersion", api_version), ("kind", kind)) if not isinstance(v, str) or not v]
            self.problems.append(f"{where} {label}: {', '.join(missing)}: required field is missing (or not a string)")
            return []
        converted = CONVERTED_VERSIONS.get((api_version, kind))
        if converted is not None:  # served with the same schema: converted as the API server does
            api_version = converted
            data = {**data, "apiVersion": converted}
        # kube-apiserver's strict decoding (kubectl's default --validate=strict): every field of a
        # built-in kind must be declared by its schema (karpy's own kinds are strict models); the
        # same walk reads explicit nulls as the API server's decoder reads them
        cls = self.registry.get((api_version, kind))
        walked = walk_fields(api_version, kind, data, custom_resource=cls is not None)
        data, mistyped = walked.data, walked.mistyped
        self.problems.extend(f"{where} {label}: {unknown_field_message(path, declared)}" for path, declared in walked.unknown)
        group, _, version = api_version.rpartition("/")
        if cls is None:
            if version in _OLD_VERSIONS.get(group, ()):
                self.problems.append(f"{where} {label}: {old_api_message(api_version, kind)}")
                return mistyped
            known = sorted({v for (v, k) in [*self.registry, *CONVERTED_VERSIONS] if k == kind and v.rpartition("/")[0] == group})
            if known:
                self.problems.append(
                    f"{where} {label}: apiVersion: {api_version} is not supported for {kind}; use {' or '.join(known)}"
                )
                return mistyped
            unserved = builtin_kind_problem(api_version, kind)
            if unserved is not None:  # kubectl refuses it before sending: "no matches for kind"
                self.problems.append(f"{where} {label}: {unserved}")
                return mistyped
            served = SERVED_KINDS.get(api_version)
            if served is not None and kind not in served:  # kubectl: no CRD maps it
                near = difflib.get_close_matches(kind, sorted(served), n=1, cutoff=0.8)
                hint = f"; did you mean {near[0]}?" if near else f"; {api_version} serves {', '.join(sorted(served))}"
                self.problems.append(f'{where} {label}: kind: no matches for kind "{kind}" in version "{api_version}"{hint}')
                return mistyped
            plugin = _PLUGIN_OF_GROUP.get(group)
            if plugin is not None and kind.endswith("NodeClass"):
                # an in-tree provider's NodeClass whose plugin is not installed: the NodePools that
                # name it are not told it is missing (it is there), only that it is not validated
                name = (data.get("metadata") or {}).get("name") if isinstance(data.get("metadata"), dict) else None
                identity = (group, kind, str(name or ""))
                needless = " (the simulated cloud does not need it)" if self.cloud_provider in (None, "simulated") else ""
                self.result.unvalidated[identity] = f"its plugin, {plugin}, is not installed{needless}"
                line = f"{where} {label}: not validated: {self.result.unvalidated[identity]}"
                earlier = self._unvalidated_nodeclasses.get(identity)
                if earlier is None:  # once per NodeClass, not per document defining it
                    self._unvalidated_nodeclasses[identity] = line
                    self.result.unvalidated_warnings.append(line)
                    self.result.warnings.append(line)
                else:  # a later definition is the one used (and listed by validate): the line names it
                    self._unvalidated_nodeclasses[identity] = line
                    self.result.unvalidated_warnings[self.result.unvalidated_warnings.index(earlier)] = line
                    self.result.warnings[self.result.warnings.index(earlier)] = line
                # still checked as kube-apiserver would on apply: the JSON types of its CRD's schema
                schema = schema_for(api_version, kind)
                wrong = type_problems(data, schema) if schema is not None else []
                if wrong:
                    self.problems.extend(f"{where} {label}: {path}: must be {expected}; got {_show(value)}"
                                         for path, expected, value in wrong)
                    return mistyped
            elif group in _KARPY_GROUPS:
                self.result.warnings.append(f"{where} {label}: karpy does not model {api_version} {kind}; ignored")
            elif elsewhere := modelled_elsewhere(self.registry, api_version, kind):
                # a kind karpy models, under a group it does not know (``app/v1``): kubectl refuses it
                # unless a CRD serves that kind there, which karpy cannot know, so it is ignored, but
                # said (trial 17: the Deployment was listed as "kind not modelled" and lost silently)
                near = difflib.get_close_matches(api_version, elsewhere, n=1, cutoff=0.6)
                hint = f"; did you mean {near[0]}?" if near else ""
                self.result.warnings.append(f"{where} {label}: apiVersion: karpy models {kind} in {' and '.join(elsewhere)}, "
                                            f"not {api_version}: ignored (kubectl refuses it unless a CRD serves it){hint}")
            self._add_passthrough(data, source, where, label)
            return mistyped
        try:
            obj = cls.model_validate(data, by_alias=True, by_name=False)
        except ValidationError as exc:
            what = f"{api_version} {kind}"
            errors = exc.errors()
            # the names are checked too (first, as metadata comes first), so one run reports
            # every problem of the document as kube-apiserver does (a bad label key does not hide a
            # bad name: both are listed); not when metadata could not be decoded (a value of the
            # wrong type: the API server's decoder stops there) or a name itself was refused
            meta = data.get("metadata")
            names = {("metadata",), ("metadata", "name"), ("metadata", "generateName"), ("metadata", "namespace")}
            if isinstance(meta, dict) and not any(
                    err["loc"][:1] == ("metadata",) and (err["type"] in _TYPE_WORDS or tuple(err["loc"][:2]) in names)
                    for err in errors):
                fields = {k: meta.get(k) if isinstance(meta.get(k), str) else None for k in ("name", "generateName", "namespace")}
                self._record_name_problems(fields["name"], fields["generateName"], fields["namespace"], api_version, kind, where, label)
            for err in errors:
                path = format_path(err["loc"])
                described = _describe(err, what, cls)
                if path and isinstance((err.get("ctx") or {}).get("error"), FieldPathError):
                    prefix = f"{path}."  # a rule naming a field below its object: one dotted path, as kube-apiserver's
                else:
                    prefix = f"{path}: " if path else ""
                self.problems.append(f"{where} {label}: {prefix}{described}")
            return mistyped
        if not self._names_ok(obj, api_version, kind, where, label):
            return mistyped
        obj.with_source(source)
        self._store(obj, where)
        self._note_dropped_nulls(walked.dropped, cls, where, label)
        return mistyped

    def _note_dropped_nulls(self, dropped: list[tuple[str | int, ...]], cls: type[KubeObject], where: str, label: str) -> None:
        """Warn once per document about the null map values of a custom resource that were dropped
        as kube-apiserver drops them (``limits: {cpu: null}`` is stored as ``limits: {}``: no cpu
        limit), which a user would not expect; a null struct field (``limits:``, ``taints:``, common
        in Helm output) is dropped without a note, meaning unset as it is written."""
        in_maps = [path for path in dropped if len(path) > 1 and not _declared_fields(cls, path[:-1])]
        if in_maps:
            self.result.warnings.append(
                f"{where} {label}: {', '.join(format_path(path) for path in in_maps)}: null dropped, as kube-apiserver "
                f"drops a null in a field that is not nullable (read as not set)")

    def _add_passthrough(self, data: dict[str, Any], source: Source, where: str, label: str) -> None:
        meta = data.get("metadata")
        if isinstance(meta, dict) and any(v is None for v in meta.values()):
            # ObjectMeta as kube-apiserver's decoder reads it for any kind: a null field is unset
            # (``labels:``, ``annotations:`` left empty, common in Helm output), as for modelled kinds
            data = {**data, "metadata": {k: v for k, v in meta.items() if v is not None}}
        try:
            obj = Passthrough.model_validate(data, by_alias=True, by_name=False)
        except ValidationError as exc:
            for err in exc.errors():
                path = format_path(err["loc"])
                self.problems.append(
                    f"{where} {label}: {path + ': ' if path else ''}{_describe(err, str(data.get('kind')))}"
                )
            return
        if not self._names_ok(obj, str(data.get("apiVersion")), str(data.get("kind")), where, label):
            return
        obj.with_source(source)
        # as for modelled kinds, a later definition of the same object replaces the earlier one
        # (the API server would refuse a second create, the simulator too)
        identity = (str(obj.api_version).rpartition("/")[0], str(obj.kind), obj.metadata.namespace or "", obj.metadata.name or "")
        previous = self._passthrough_seen.get(identity) if identity[3] else None
        if previous is not None:
            self.result.warnings.append(f"{where} {label}: redefines {label} from {previous.source}; the later definition is used")
            self.result.redefined.append(self.result.warnings[-1])
            self.result.other[:] = [o for o in self.result.other if o is not previous]
        if identity[3]:
            self._passthrough_seen[identity] = obj
        self.result.other.append(obj)

    def _names_ok(self, obj: KubeObject, api_version: str, kind: str, where: str, label: str) -> bool:
        """Check ``metadata.name``/``generateName``/``namespace`` as kube-apiserver does
        (:mod:`karpy_core.apis.names`); problems are recorded and False returned."""
        meta = obj.metadata
        return self._record_name_problems(meta.name, meta.generate_name, meta.namespace, api_version, kind, where, label)

    def _record_name_problems(self, name: str | None, generate_name: str | None, namespace: str | None,
                              api_version: str, kind: str, where: str, label: str) -> bool:
        """Record the problems of an object's name, generateName and namespace (each may be
        None: not given; neither a name nor a generateName is a problem); True when there are
        none. Also used for a document whose other fields failed validation, so its names are reported in the same run."""
        rule = name_rule(api_version, kind)
        longest = NODEPOOL_NAME_MAX if (api_version, kind) == (NodePool.API_VERSION, NodePool.KIND) else None
        found = []
        if not name and not generate_name:
            # kube-apiserver's ValidateObjectMeta: "metadata.name: Required value: name or
            # generateName is required", for every kind (modelled, passed through or not modelled)
            found.append("metadata.name: required field is missing")
        if name:
            found += [f"metadata.name: {p}" for p in name_problems(name, rule, max_length=longest)]
        if generate_name:
            found += [f"metadata.generateName: {p}" for p in name_problems(generate_name, rule, prefix=True)]
        if namespace:
            found += [f"metadata.namespace: {p}" for p in name_problems(namespace, "label")]
        if longest is not None and name and len(name) > longest and found:
            found[0] += " (it is the karpenter.sh/nodepool label value of every NodeClaim and Node it launches)"
        self.problems.extend(f"{where} {label}: {p}" for p in found)
        return not found

    def _store(self, obj: KubeObject, where: str) -> None:
        identity = _identity(obj)
        previous = self._seen.get(identity)
        if previous is not None:
            self.result.warnings.append(
                f"{where} {obj.ref()}: redefines {obj.ref()} from {previous.source}; the later definition is used"
            )
            self.result.redefined.append(self.result.warnings[-1])
            self._remove(previous)
        self._seen[identity] = obj
        if obj.NODE_CLASS:
            self.result.nodeclasses[(obj.group(), obj.KIND, obj.name)] = obj
            return
        bucket = _BUCKETS.get(type(obj))
        getattr(self.result, bucket).append(obj) if bucket else self.result.custom.append(obj)

    def _remove(self, obj: KubeObject) -> None:
        if obj.NODE_CLASS:
            return  # the dict entry is simply overwritten
        bucket = _BUCKETS.get(type(obj))
        items = getattr(self.result, bucket) if bucket else self.result.custom
        items[:] = [o for o in items if o is not obj]

    # after all files ----------------------------------------------------------------------
    def finish(self, admission: Callable[[LoadedManifests], list[str]] | None = None) -> LoadedManifests:
        class_kinds: dict[str, set[str]] = {}
        for (api_version, kind), cls in self.registry.items():
            if getattr(cls, "NODE_CLASS", False):
                class_kinds.setdefault(api_version.rpartition("/")[0], set()).add(kind)
        name_limits = {
            **IN_TREE_NODEPOOL_NAME_LIMITS,
            **{(api_version.rpartition("/")[0], kind): limit
            for (api_version, kind), cls in self.registry.items()
            if (limit := getattr(cls, "MAX_NODEPOOL_NAME", None)) is not None},
        }
        late: list[tuple[int, str]] = []  # (where in ``warnings`` it goes, the line)
        for nodepool in self.result.nodepools:
            src = nodepool.source
            at = self._warned_by.get((src.file, src.index, src.item), len(self.result.warnings)) if src else len(self.result.warnings)
            late.extend((at, line) for line in self._check_nodepool(nodepool, class_kinds, name_limits))
        for at, line in reversed(sorted(late, key=lambda pair: pair[0])):  # from the end: one object's lines keep their order
            self.result.warnings.insert(at, line)
        self.result.warnings.extend(_failed_plugin_warnings(self.result.other))
        self.result.warnings.extend(not_ready_node_warnings(self.result.nodes))
        if self.problems and admission is not None:
            # the admission checks too, on what loaded (and what they can read of what did not):
            # a type error in one object or field does not hide a missing PriorityClass in another
            self.problems.extend(admission(self.result))
        if self.problems:
            raise ManifestError(self.problems, warnings=self.result.warnings)
        return self.result

    def _check_nodepool(self, nodepool: NodePool, class_kinds: dict[str, set[str]],
                        name_limits: dict[tuple[str, str], int]) -> list[str]:
        """What :meth:`finish` checks of one NodePool once every file is read (its NodeClass among
        them; its name's length for that NodeClass's provider): problems go to :attr:`problems`,
        the warnings are returned."""
        ref = nodepool.spec.template.spec.node_class_ref
        warnings = _accepted_but_useless(nodepool)
        limit = name_limits.get((ref.group, ref.kind))
        if limit is not None and len(nodepool.name) > limit:
            self.problems.append(
                f"{nodepool.source} {nodepool.ref()}: metadata.name: must be no more than {limit} characters "
                f"(got {len(nodepool.name)}) for a NodePool whose nodeClassRef is a {ref.kind}"
            )
        kinds = class_kinds.get(ref.group)
        identity = (ref.group, ref.kind, ref.name)
        if kinds and ref.kind not in kinds:
            warnings.append(
                f"{nodepool.source} {nodepool.ref()}: spec.template.spec.nodeClassRef: kind {ref.kind} is not a "
                f"NodeClass of group {ref.group} (that group has {', '.join(sorted(kinds))})"
            )
        elif identity not in self.result.nodeclasses and identity not in self._unvalidated_nodeclasses:
            named = (f"{nodepool.source} {nodepool.ref()}: spec.template.spec.nodeClassRef names "
                     f"{ref.group} {ref.kind}/{short_name(ref.name)}")
            if any(seen[:2] == (ref.group, ref.kind) and seen[3] == ref.name for seen in self._passthrough_seen):
                # in the manifests, but no installed plugin models its kind (trial 9: karpy-zeta uninstalled)
                warnings.append(f"{named}: {unserved_kind_message(ref.group, ref.kind)}")
            else:
                warnings.append(f"{named}, which is not among the loaded manifests")
                self.result.missing_node_classes[warnings[-1]] = (ref.group, ref.kind, short_name(ref.name))
        return warnings


def priority_class_problems(loaded: LoadedManifests) -> list[str]:
    """What kube-apiserver's Priority admission (``plugin/pkg/admission/priority/admission.go``)
    refuses in the pods of ``loaded``, one line each naming the object and field: a
    ``priorityClassName`` that is neither a ``scheduling.k8s.io/v1 PriorityClass`` among the
    inputs nor ``system-cluster-critical``/``system-node-critical`` (``no PriorityClass with name
    NAME was found``), a ``priority`` other than the class's ``value`` (0 with no class), and a
    ``preemptionPolicy`` other than the class's (``PreemptLowerPriority`` with no class).

    Only for a complete input set (``karpy validate``/``simulate`` on manifests): the API server
    accepts the workload but creates none of its pods, so the simulation would silently leave them
    out. A Scenario or ``--from-cluster`` relies on the in-memory cluster's admission instead
    (:func:`karpy_core.kube.admission.admit_priority`), which sees the classes created so far.
    """
    values = dict(SYSTEM_PRIORITY_VALUES)
    policies = dict.fromkeys(SYSTEM_PRIORITY_VALUES, PREEMPT_LOWER_PRIORITY)
    for other in loaded.other:
        if (other.api_version, other.kind) == ("scheduling.k8s.io/v1", "PriorityClass") and other.name:
            value = (other.model_extra or {}).get("value")
            values[other.name] = value if isinstance(value, int) and not isinstance(value, bool) else 0
            policies[other.name] = str((other.model_extra or {}).get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
    defaults = sorted((int(v), str((o.model_extra or {}).get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY))
                      for o in loaded.other if (o.api_version, o.kind) == ("scheduling.k8s.io/v1", "PriorityClass")
                      and (o.model_extra or {}).get("globalDefault") is True
                      for v in [(o.model_extra or {}).get("value")] if isinstance(v, int))
    unknown = refused_names(loaded, "scheduling.k8s.io/v1", "PriorityClass")  # defined, but refused: not "missing"
    problems = []
    for other in loaded.other:  # validatePreemptionPolicy, as for a pod's (PriorityClass is not modelled)
        policy = (other.model_extra or {}).get("preemptionPolicy") if other.kind == "PriorityClass" else None
        refused = not_supported(policy, PREEMPTION_POLICIES) if isinstance(policy, str) else None
        if refused is not None and other.api_version == "scheduling.k8s.io/v1":
            problems.append(f"{other.source} {other.ref()}: preemptionPolicy: {refused}")
    specs: list[tuple[KubeObject, str, PodSpec]] = [(pod, "spec", pod.spec) for pod in loaded.pods]
    workloads: list[Deployment | ReplicaSet | StatefulSet | DaemonSet | Job] = [
        *loaded.deployments, *loaded.replicasets, *loaded.statefulsets, *loaded.daemonsets, *loaded.jobs]
    specs += [(workload, "spec.template.spec", workload.spec.template.spec) for workload in workloads]
    for obj, path, spec in specs:
        whose = "the pod" if isinstance(obj, Pod) else f"the pods of this {obj.KIND}"
        name = spec.priority_class_name
        if name and name not in values:
            if name not in unknown:
                problems.append(_no_priority_class(f"{obj.source} {obj.ref()}", path, name, whose))
            continue
        computed, policy = (values[name], policies[name]) if name else (defaults[0] if defaults else (0, PREEMPT_LOWER_PRIORITY))
        if spec.priority is not None and spec.priority != computed:
            problems.append(f"{obj.source} {obj.ref()}: {path}.priority: the integer value of priority ({spec.priority}) must "
                            f"not be provided in pod spec; priority admission controller computed {computed} from the given "
                            f"PriorityClass name (kube-apiserver's Priority admission refuses {whose})")
        elif spec.preemption_policy is not None and spec.preemption_policy != policy:
            problems.append(f"{obj.source} {obj.ref()}: {path}.preemptionPolicy: the string value of PreemptionPolicy "
                            f"({spec.preemption_policy}) must not be provided in pod spec; priority admission controller "
                            f"computed {policy} from the given PriorityClass name (kube-apiserver's Priority admission "
                            f"refuses {whose})")
    for prefix, data in loaded.refused:  # refused for another field: its priorityClassName is still read
        at = _POD_SPEC_PATHS.get((str(data.get("apiVersion")), str(data.get("kind"))))
        raw_spec = _nested(data, at.split(".")) if at else None
        raw_name = raw_spec.get("priorityClassName") if isinstance(raw_spec, dict) else None
        if at and isinstance(raw_name, str) and raw_name and raw_name not in values and raw_name not in unknown:
            whose = "the pod" if data.get("kind") == "Pod" else f"the pods of this {data.get('kind')}"
            problems.append(_no_priority_class(prefix, at, raw_name, whose))
    return problems


_POD_SPEC_PATHS = {("v1", "Pod"): "spec", **{(api_version, kind): "spec.template.spec" for api_version, kind in (
    ("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet"),
    ("batch/v1", "Job"))}}
"""Where the pod spec of each kind :func:`priority_class_problems` checks is."""


def _nested(data: Any, keys: Sequence[str]) -> Any:
    """``data[k1][k2]...``, None where a step is not a mapping or lacks the key."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _no_priority_class(prefix: str, path: str, name: str, whose: str) -> str:
    """The problem of a pod spec at ``path`` of the object ``prefix`` names whose
    ``priorityClassName`` ``name`` is not defined."""
    return (f"{prefix}: {path}.priorityClassName: no PriorityClass with name {short_name(name)} was found (kube-apiserver's "
            f"Priority admission refuses {whose}; define the PriorityClass among the inputs, or use "
            "system-cluster-critical or system-node-critical)")


def refused_names(loaded: LoadedManifests, api_version: str, kind: str) -> set[str]:
    """The names of the ``api_version``/``kind`` objects the loader refused (``loaded.refused``):
    defined in the inputs, so a reference to one is not reported as missing."""
    names = set()
    for _, data in loaded.refused:
        name = _nested(data, ("metadata", "name"))
        if data.get("apiVersion") == api_version and data.get("kind") == kind and isinstance(name, str):
            names.add(name)
    return names


def unserved_kind_message(group: str, kind: str) -> str:
    """Why a NodeClass of ``group``/``kind`` that is in the manifests is not validated: no installed
    cloud provider plugin serves (models) that kind, e.g. ``no installed cloud provider plugin serves
    zeta.example.io/ZetaNodeClass (karpy providers lists what is installed)``. karpy's own groups
    name their distribution instead (``_PLUGIN_OF_GROUP``); another group's package karpy cannot name."""
    from karpy_core.apis.registry import failed_api_entries

    failed = sorted(failed_api_entries())
    if failed:  # an installed plugin may serve it, and its models failed to load (trial 24)
        names = ", ".join(repr(n) for n in failed)
        return (f"no plugin's models for {group}/{kind} are loaded: the karpy.apis entry point {names} failed to load "
                "(its warning says why); karpy providers lists what is installed")
    return f"no installed cloud provider plugin serves {group}/{kind} (karpy providers lists what is installed)"


def not_ready_node_warnings(nodes: Sequence[Node]) -> list[str]:
    """One warning per Node whose ``status.conditions`` has no ``Ready`` condition ``True``:
    kube-scheduler places no pod on it (the node lifecycle controller taints it ``not-ready`` or
    ``unreachable``), and one labelled ``karpenter.sh/nodepool`` karpy (as Karpenter) counts as
    capacity on its way, launching nothing for the pods it would hold."""
    out = []
    for node in nodes:
        ready = [c.status for c in node.status.conditions if c.type == "Ready"]
        if ready and ready[0] == "True":
            continue
        taint = "node.kubernetes.io/not-ready" if ready and ready[0] == "False" else "node.kubernetes.io/unreachable"
        line = (f"{node.source} {node.ref()}: not Ready (status.conditions has no Ready condition True), so it is tainted "
                f"{taint}:NoSchedule and kube-scheduler places no pod on it that does not tolerate that")
        if LABEL_NODEPOOL in (node.metadata.labels or {}):
            line += ("; it is labelled karpenter.sh/nodepool, so karpy (as Karpenter) counts it as capacity on its way "
                     "and launches nothing for the pods it would hold")
        out.append(line)
    return out


def _failed_plugin_warnings(other: Sequence[KubeObject]) -> list[str]:
    """One warning per ``karpy.apis`` entry point that failed to load
    (:func:`~karpy_core.apis.registry.failed_api_entries`) when objects of a custom API group were
    read without a model: their kind may be that plugin's, so they were neither validated nor simulated."""
    from karpy_core.apis.registry import failed_api_entries

    failed = failed_api_entries()
    # karpy's own NodeClass groups are not a failed plugin's: their lines name their distribution
    custom = sorted({f"{o.api_version} {o.kind}" for o in other
                     if "." in (group := str(o.api_version).rpartition("/")[0])
                     and not group.endswith("k8s.io") and group not in _PLUGIN_OF_GROUP})
    if not failed or not custom:
        return []
    # the entry point's own failure is its one warning line (logged as it failed); this one is about the objects
    return [f"objects of {', '.join(custom)} may be the kinds of the karpy.apis entry point {name!r}, which failed to load "
            f"(its warning above): not validated, not simulated" for name in sorted(failed)]


def _label(data: dict[str, Any], registry: dict[tuple[str, str], type[KubeObject]] | None = None) -> str:
    """The document's object as :meth:`KubeObject.ref` names it: ``Kind/namespace/name`` when the
    namespace is set (and ``registry`` does not know the kind as cluster-scoped), else
    ``Kind/name``; ``<no name>`` or ``generateName*`` without a name."""
    kind = data.get("kind") if isinstance(data.get("kind"), str) else "?"
    found = data.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        generate = meta.get("generateName")
        name = f"{generate}*" if isinstance(generate, str) and generate else "<no name>"
    namespace = meta.get("namespace")
    cls = registry.get((str(data.get("apiVersion")), str(kind))) if registry is not None else None
    if isinstance(namespace, str) and namespace and (cls is None or cls.NAMESPACED):
        return _printable(f"{kind}/{namespace}/{name}")
    return _printable(f"{kind}/{name}")


def _printable(text: str) -> str:
    """``text`` as it is, or quoted with escapes when it holds a line break or other whitespace
    control (``'NodePool/web\\n'``; NEL, U+2028 and U+2029 too, trial 22): a name holding a newline
    split its problem line in two (trial 20). Other control characters are escaped on output (``cli.visible``)."""
    return repr(text) if any(c in text for c in "\n\r\t\v\f\x85\u2028\u2029") else text


def _broken_link(path: Path) -> str:
    """The problem line for a symbolic link that cannot be followed (a loop, or a link to nothing)."""
    try:
        path.stat()
        why = "cannot be followed"
    except OSError as exc:
        why = exc.strerror.lower() if exc.strerror else str(exc)
    return f"{path}: a symbolic link that cannot be followed ({why}; it points to {os.readlink(path)!r})"


MANIFEST_EXTENSIONS = (".json", ".yaml", ".yml")
"""The files of a directory that are read: kubectl's ``FileExtensions`` (``k8s.io/cli-runtime``
``pkg/resource/visitor.go``), compared case-sensitively as its ``ignoreFile`` compares them, so
``a.YAML`` is skipped by both."""


def _skipped_line(path: Path, skipped: list[Path]) -> str:
    """The one line naming the files of directory ``path`` that are not read, and why."""
    names = [p.name for p in skipped]
    listed = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
    cased = [n for n in names if Path(n).suffix.lower() in MANIFEST_EXTENSIONS]
    why = "not named *.json, *.yaml or *.yml, the files kubectl apply -f reads from a directory"
    if cased:
        why += f"; the extension is case-sensitive, as kubectl's ({cased[0]})"
    return f"{path}: skipped {len(names)} file{'s' if len(names) != 1 else ''} ({why}): {listed}"


def _files(paths: Sequence[str | Path], problems: list[str], warnings: list[str], skipped: list[str] | None = None) -> list[Path]:
    """The files to read for ``paths``: a file as given (any name), a directory's files named
    ``*.json``/``*.yaml``/``*.yml`` (:data:`MANIFEST_EXTENSIONS`), sorted, not recursive. Appends to
    ``problems`` (missing paths, broken links), ``warnings`` (a directory with none of those files)
    and ``skipped`` (one :func:`_skipped_line` per directory with other files)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            listing = sorted(path.iterdir())
            entries = [p for p in listing if p.suffix in MANIFEST_EXTENSIONS]
            found = [p for p in entries if p.is_file()]
            broken = [p for p in entries if not p.exists() and p.is_symlink()]
            problems.extend(_broken_link(p) for p in broken)
            others = [p for p in listing if p.suffix not in MANIFEST_EXTENSIONS and p.is_file()]
            if others and skipped is not None:
                skipped.append(_skipped_line(path, others))
            if not found and not broken:
                subdirs = sorted(p.name for p in listing if p.is_dir() and any(q.suffix in MANIFEST_EXTENSIONS for q in p.iterdir()))
                hint = f" (subdirectories are not read; name them: {', '.join(str(path / d) for d in subdirs[:5])})" if subdirs else ""
                warnings.append(f"{path}: no *.json, *.yaml or *.yml files in this directory{hint}")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif path.exists():
            problems.append(f"{path}: not a regular file or directory (manifests are read from files; stdin is not supported)")
        elif path.is_symlink():  # a loop, or a link to nothing: say so, not "no such file"
            problems.append(_broken_link(path))
        else:
            problems.append(f"{path}: no such file or directory")
    return files


_UTF16_BOMS = ((b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
"""UTF-16 byte order marks and their codecs (golang.org/x/text ``unicode.BOMOverride``)."""


def read_utf8(path: Path) -> str:
    """The text of ``path``, read as UTF-8, or as UTF-16 when it starts with a UTF-16 byte order
    mark (as kubectl reads a manifest; a UTF-8 BOM is dropped later, per document).

    Raises:
        OSError: the file cannot be read.
        UnicodeDecodeError: the bytes are not UTF-8; its ``reason`` is the whole message,
            ``PATH: line L column C: not UTF-8 text: byte 0xE9 (offset N)``, at the first bad byte
            (line and column counted from 1, the column in bytes; the offset from the start of the
            file), in the form of the loader's other located errors.
    """
    data = path.read_bytes()
    for bom, codec in _UTF16_BOMS:
        if data.startswith(bom):
            # kubectl reads every file through unicode.BOMOverride: UTF-16 with a BOM (what Windows
            # editors and PowerShell's ">" write) is decoded, not refused (trial 19)
            try:
                return data[len(bom):].decode(codec)
            except UnicodeDecodeError as exc:
                raise UnicodeDecodeError(codec, data, exc.start + len(bom), exc.end + len(bom),
                                         f"{path}: not {codec.upper()} text after its byte order mark, at offset "
                                         f"{exc.start + len(bom)}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        # "byte 129" read as the byte's value (trial 18): the position as an editor shows it, the value in hex
        reason = f"{path}: line {line} column {column}: not UTF-8 text: byte 0x{data[exc.start]:02X} (offset {exc.start})"
        raise UnicodeDecodeError("utf-8", data, exc.start, exc.end, reason) from None


def _no_objects(text: str) -> str:
    """Why ``text`` holds no object (``"empty file"``, ``"only comments"``, ``"only document
    separators"``), or ``""`` when it may hold one. A byte-order mark is not content."""
    lines = [line.strip() for line in text.lstrip("\ufeff").splitlines()]
    if not any(lines):
        return "empty file"
    if _kubectl_refused_chunk(text):
        return ""  # a lone '...' or directive: refused as kubectl refuses it
    if not all(not line or line.startswith("#") or line in ("---", "...") for line in lines):
        return ""
    return "only comments" if any(line.startswith("#") for line in lines) else "only document separators ('---')"


def load_documents(
    paths: Sequence[str | Path],
    variables: dict[str, str] | None = None,
    *,
    registry: dict[tuple[str, str], type[KubeObject]] | None = None,
    cloud_provider: str | None = None,
    admission: Callable[[LoadedManifests], list[str]] | None = None,
) -> LoadedManifests:
    """Load YAML and JSON files and directories (their ``*.json``/``*.yaml``/``*.yml``, sorted, not
    recursive; other files are named in ``skipped``). A file whose text starts with ``{`` is read as
    a stream of JSON objects (each an object or a ``v1 List``), as kubectl's ``YAMLOrJSONDecoder``
    reads it; one that is not JSON is read as YAML, unless it is named ``*.json`` (its JSON error is
    the problem).

    Args:
        paths: files or directories, in the order to read them (later objects with the same
            identity replace earlier ones, with a warning).
        variables: values for ``${NAME}`` placeholders (``--set NAME=value``).
        registry: ``(apiVersion, kind)`` -> model; defaults to :func:`kind_registry`.
        cloud_provider: the provider the manifests are for (``--cloud-provider``), None when not
            said: an in-tree provider's NodeClass whose plugin is missing is warned about as not
            validated, adding that the simulated cloud does not need it only for None or
            ``simulated``.
        admission: the admission checks (problems, one line each) run on what loaded when there
            are problems (:meth:`_Builder.finish`), so that one run lists those too; None: none.

    Raises:
        ManifestError: with one line per problem across all files (unreadable file, YAML syntax,
            repeated key, old API, unknown field, wrong type, rule violated...).
    """
    builder = _Builder(registry if registry is not None else kind_registry(), cloud_provider)
    for path in _files(paths, builder.problems, builder.result.warnings, builder.result.skipped):
        try:
            text = read_utf8(path)
        except UnicodeDecodeError as exc:
            builder.problems.append(str(exc.reason))
            continue
        except OSError as exc:
            builder.problems.append(f"{path}: cannot read: {exc}")
            continue
        empty = _no_objects(text)
        if empty:
            builder.result.warnings.append(f"{path}: {empty}, no objects loaded")
            continue
        builder.add_text(text, str(path), variables, json_file=path.suffix == ".json")
    return builder.finish(admission)


def load_text(
    text: str,
    source_name: str = "<text>",
    variables: dict[str, str] | None = None,
    *,
    registry: dict[tuple[str, str], type[KubeObject]] | None = None,
    cloud_provider: str | None = None,
    admission: Callable[[LoadedManifests], list[str]] | None = None,
) -> LoadedManifests:
    """Load manifests from a string; ``source_name`` stands in for the file name in messages
    (``cloud_provider`` and ``admission`` as for :func:`load_documents`).

    Raises:
        ManifestError: as :func:`load_documents`.
    """
    builder = _Builder(registry if registry is not None else kind_registry(), cloud_provider)
    builder.add_text(text, source_name, variables)
    return builder.finish(admission)
