"""YAML read the way kubectl and kube-apiserver read it: JSON-compatible values only.

Kubernetes never keeps YAML values as YAML: ``sigs.k8s.io/yaml`` (kubectl, client-go, the API
server's YAML decoder) parses with go-yaml v2 and converts the result to JSON before anything
looks at it (``yamlToJSONTarget`` / ``convertToJSONableObject`` in ``sigs.k8s.io/yaml/yaml.go``).
:class:`KubeYAMLLoader` gives the same values, so nothing downstream ever sees a ``datetime``,
``set`` or ``bytes``:

* a scalar that looks like a date or timestamp (``2024-01-01``, ``2024-01-01T10:00:00Z``) is the
  **string** as written (go-yaml v2 keeps timestamp-looking plain scalars as strings when decoding
  into ``interface{}``); base-60 numbers (``1:20``) are strings too (go-yaml "purposefully
  unsupported" them);
* booleans are go-yaml v2's: YAML 1.1's ``yes``/``no``/``on``/``off`` and also ``y``/``Y``/``n``/``N``
  (PyYAML reads those four as strings; kubectl sends ``labels: {a: y}`` as ``true``);
* integer, float and boolean mapping keys become strings (``1: x`` -> ``{"1": "x"}``), as
  ``convertToJSONableObject`` does; a null key is refused (``unsupported map key``);
* values JSON cannot carry are **refused, naming the field path and line**: ``!!binary``,
  ``!!set``, ``!!omap``, ``!!pairs``, an explicit ``!!timestamp``, any other tag that is not a JSON
  type (``!foo``, ``!!python/...``), and ``.inf``/``.nan`` (``json: unsupported value: +Inf``).

Everything else is PyYAML's safe loading (libyaml's parser when available). The loader records
each refused value in :attr:`KubeYAMLLoader.problems` (the value is read as null) so a caller can
report every one of a document; :func:`safe_load_all` / :func:`safe_load` raise the first one as a
:class:`NonJSONValueError` instead. :func:`describe_yaml_error` turns any PyYAML error into one line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = [
    "KubeYAMLDumper",
    "KubeYAMLLoader",
    "NonJSONValueError",
    "YAMLValueProblem",
    "describe_yaml_error",
    "drop_document_boms",
    "format_yaml_path",
    "safe_load",
    "safe_load_all",
]

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_TAG = "tag:yaml.org,2002:"
_TIMESTAMP = _TAG + "timestamp"
_INT = _TAG + "int"
_FLOAT = _TAG + "float"
_BOOL = _TAG + "bool"

# go-yaml v2's int and float resolution (``sigs.k8s.io/yaml``, which kubectl and kube-apiserver use),
# as PyYAML resolver expressions. Ints: PyYAML's without the base-60 forms (``1:20`` is 80 to
# PyYAML, a string to go-yaml v2). Floats: go-yaml's ``yamlStyleFloat`` after it drops ``_``
# (``^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$``) less the plain integers the int
# resolver takes, so ``1e1`` and ``1E+3`` are numbers (PyYAML wants a dot) and so is ``08`` (no
# octal int to go-yaml, a float), plus ``.inf``/``.nan``.
_INT_RE = re.compile(
    r"""^(?:[-+]?0b[0-1_]+
    |[-+]?0[0-7_]+
    |[-+]?(?:0|[1-9][0-9_]*)
    |[-+]?0x[0-9a-fA-F_]+)$""",
    re.X,
)
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9][0-9_]*)?
    |[-+]?[0-9][0-9_]*(?:\.[0-9_]*(?:[eE][-+]?[0-9][0-9_]*)?|[eE][-+]?[0-9][0-9_]*)
    |[-+]?0[0-7_]*[89][0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


_BOOL_VALUES = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
"""go-yaml v2's boolean plain scalars (``resolve.go``, which ``sigs.k8s.io/yaml`` uses): YAML 1.1's,
with ``y``/``Y``/``n``/``N``, which PyYAML's resolver reads as strings. kubectl sends ``labels: {a: y}``
as ``true``, which kube-apiserver refuses (``cannot unmarshal bool into Go struct field ... of type string``)."""
_BOOL_RE = re.compile("^(?:" + "|".join(_BOOL_VALUES) + ")$")


def _resolvers() -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    out: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    for first, entries in yaml.resolver.Resolver.yaml_implicit_resolvers.items():
        kept = []
        for tag, regexp in entries:
            if tag == _TIMESTAMP:
                continue
            kept.append((tag, _INT_RE if tag == _INT else _FLOAT_RE if tag == _FLOAT else _BOOL_RE if tag == _BOOL else regexp))
        out[first] = kept
    for first in "yYnN":  # go-yaml's extra booleans (PyYAML resolves yes/no/on/off already)
        entries = out.setdefault(first, [])
        if not any(tag == _BOOL for tag, _ in entries):
            entries.append((_BOOL, _BOOL_RE))
    return out


_NOT_JSON = {
    "binary": "a !!binary value is not JSON; write the base64 text as a plain string",
    "set": "a !!set is not JSON; write a list or a mapping",
    "omap": "an !!omap is not JSON; write a mapping",
    "pairs": "!!pairs are not JSON; write a mapping or a list",
    "timestamp": "an explicit !!timestamp is not JSON; write the time as a string",
}


@dataclass(frozen=True, slots=True)
class YAMLValueProblem:
    """One value JSON cannot carry: ``path`` from the document root (keys and list indexes),
    1-based ``line`` and ``column``, and ``message`` (what it is and what to write instead)."""

    path: tuple[str | int, ...]
    line: int
    column: int
    message: str
    mark: Any = None
    """PyYAML's mark of the value (for :class:`NonJSONValueError`)."""

    def at_field(self) -> str:
        """``spec.data: a !!set is not JSON; ...`` (the path, or the message alone at the root)."""
        where = format_yaml_path(self.path)
        return f"{where + ': ' if where else ''}{self.message}"

    def text(self) -> str:
        """``spec.data["x"]: line 4 column 7: a !!set is not JSON; write a list or a mapping``."""
        where = format_yaml_path(self.path)
        return f"{where + ': ' if where else ''}line {self.line} column {self.column}: {self.message}"


class NonJSONValueError(yaml.MarkedYAMLError):
    """A value JSON cannot carry (see :class:`YAMLValueProblem`), raised by :func:`safe_load_all`
    and :func:`safe_load`; ``problem`` names the field path."""


def format_yaml_path(path: tuple[str | int, ...] | list[str | int]) -> str:
    """``("spec", "steps", 2, "at")`` -> ``spec.steps[2].at``; keys that are not plain
    identifiers are quoted (``labels["kubernetes.io/arch"]``)."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", part):
            out += f".{part}" if out else part
        else:
            out += f'["{part}"]'
    return out


def _key_string(key: Any) -> Any:
    """A mapping key as ``convertToJSONableObject`` makes it: int/float/bool keys as strings."""
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        if math.isnan(key):
            return ".nan"
        if math.isinf(key):
            return ".inf" if key > 0 else "-.inf"
        return format(key, "g")
    return key


_SEPARATOR_THEN_BOM = re.compile("^(---[^\n]*\n)\ufeff", re.M)


def drop_document_boms(text: str) -> str:
    """``text`` without the byte-order mark that starts a document after a ``---`` line, as kubectl
    reads it: apimachinery's ``YAMLReader`` (``k8s.io/apimachinery/pkg/util/yaml/decoder.go``) cuts
    the stream at each line starting with ``---`` (only spaces or a comment after it) and go-yaml
    then parses each document alone, dropping a BOM at its start (``yaml_parser_determine_encoding``).
    libyaml, reading the stream whole, skips such a BOM but counts it as a column, so the next
    line of the mapping looks less indented and the document is refused. Other BOMs stay (one
    inside a value or after indentation is text to kubectl too); line numbers do not change."""
    if "\ufeff" not in text:
        return text

    def keep_separator(match: re.Match[str]) -> str:
        rest = match.group(1)[3:].strip()
        return match.group(1) if not rest or rest.startswith("#") else match.group(0)

    return _SEPARATOR_THEN_BOM.sub(keep_separator, text)


class KubeYAMLLoader(_BaseLoader):  # type: ignore[misc]  # chosen at import time (CSafeLoader when libyaml is there)
    """PyYAML safe loader with Kubernetes' JSON-compatible values (module docstring).

    Attributes:
        problems: the refused values of the document being constructed (reset by the caller per
            document; each value is read as null).
        path: the key/index path of the node being constructed.
    """

    yaml_implicit_resolvers = _resolvers()
    yaml_constructors = dict(getattr(_BaseLoader, "yaml_constructors"))  # noqa: B009 - _BaseLoader is typed `type`

    def __init__(self, stream: str) -> None:
        super().__init__(drop_document_boms(stream))
        self.problems: list[YAMLValueProblem] = []
        self.path: list[str | int] = []

    def refuse(self, node: yaml.Node, message: str) -> None:
        """Record ``node`` as a value JSON cannot carry."""
        mark = node.start_mark
        self.problems.append(YAMLValueProblem(tuple(self.path), mark.line + 1, mark.column + 1, message, mark))

    def construct_sequence(self, node: yaml.SequenceNode, deep: bool = False) -> list[Any]:
        if not isinstance(node, yaml.SequenceNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a sequence node, but found {node.id}", node.start_mark
            )
        out = []
        for i, child in enumerate(node.value):
            self.path.append(i)
            try:
                out.append(self.construct_object(child, deep=True))
            finally:
                self.path.pop()
        return out

    def construct_key(self, node: yaml.MappingNode, key_node: yaml.Node) -> Any:
        """The JSON key of ``key_node``: a string (numbers and booleans converted), or the
        problem recorded for a null key (the key is then read as ``"null"``).

        Raises:
            yaml.constructor.ConstructorError: an unhashable key (a list or mapping).
        """
        key = self.construct_object(key_node, deep=True)
        if key is None:
            self.refuse(key_node, "a null mapping key is not JSON (keys are strings); quote it")
            return "null"
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found an unhashable key", key_node.start_mark
            ) from None
        return _key_string(key)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise yaml.constructor.ConstructorError(
                None, None, f"expected a mapping node, but found {node.id}", node.start_mark
            )
        self.flatten_mapping(node)  # YAML merge keys (<<): merged entries come first, own ones override
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.construct_key(node, key_node)
            self.path.append(str(key))
            try:
                mapping[key] = self.construct_object(value_node, deep=True)
            finally:
                self.path.pop()
        return mapping

    def construct_kube_float(self, node: yaml.ScalarNode) -> float | int | None:
        """A finite number; a whole one below 1e21 is an int (``replicas: 3.0``, ``1e1``):
        kubectl's YAML-to-JSON step (``sigs.k8s.io/yaml``) keeps the float, Go's JSON encoder
        writes it without a fraction or exponent below 1e21, and kube-apiserver reads that into
        an integer field."""
        value: float = self.construct_yaml_float(node)
        if math.isfinite(value):
            return int(value) if value.is_integer() and abs(value) < 1e21 else value
        self.refuse(node, f"{node.value!r} is not a JSON number (JSON has no infinity or NaN); quote it to make it a string")
        return None

    def construct_kube_int(self, node: yaml.ScalarNode) -> int | str:
        """An integer; a plain scalar that only looks like one (``0x_``, ``0b_``: PyYAML's
        resolver takes it, ``int()`` does not) is the string as written, as go-yaml reads it."""
        try:
            value: int = self.construct_yaml_int(node)
        except ValueError:
            return str(node.value)
        return value

    def construct_kube_bool(self, node: yaml.ScalarNode) -> bool:
        """A boolean as go-yaml v2 reads it (:data:`_BOOL_VALUES`; ``y``/``n`` too)."""
        value = self.construct_scalar(node)
        return _BOOL_VALUES[value] if value in _BOOL_VALUES else bool(self.bool_values[value.lower()])

    def construct_not_json(self, node: yaml.Node) -> None:
        name = node.tag.removeprefix(_TAG)
        self.refuse(node, _NOT_JSON.get(name, f"the tag {node.tag!r} is not a JSON type; remove it"))
        return None


for _name in _NOT_JSON:
    KubeYAMLLoader.add_constructor(_TAG + _name, KubeYAMLLoader.construct_not_json)
KubeYAMLLoader.add_constructor(None, KubeYAMLLoader.construct_not_json)
KubeYAMLLoader.add_constructor(_FLOAT, KubeYAMLLoader.construct_kube_float)
KubeYAMLLoader.add_constructor(_INT, KubeYAMLLoader.construct_kube_int)
KubeYAMLLoader.add_constructor(_BOOL, KubeYAMLLoader.construct_kube_bool)


class KubeYAMLDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # chosen at import time
    """PyYAML's safe dumper (libyaml's when available) that quotes every string
    :class:`KubeYAMLLoader` would read as something else: its resolvers are the loader's, so
    ``"y"``, ``"n"`` (go-yaml v2 booleans, plain strings to PyYAML's own resolver) and ``"1e1"``
    (a go-yaml number) are written quoted and read back as the same strings."""

    yaml_implicit_resolvers = _resolvers()


def _raise_first(loader: KubeYAMLLoader, node: yaml.Node) -> None:
    if loader.problems:
        first = loader.problems[0]
        raise NonJSONValueError(None, None, first.at_field(), first.mark or node.start_mark)


def safe_load_all(text: str, check: Any = None) -> Iterator[Any]:
    """Every document of ``text`` with JSON-compatible values (lazy: a document is parsed when
    the iteration reaches it). ``check``, if given, is called with each composed document node
    before it is built (e.g. :func:`karpy_core.apis.loader.check_yaml_limits`).

    Raises:
        yaml.YAMLError: syntax errors; :class:`NonJSONValueError` for a value JSON cannot carry;
            whatever ``check`` raises.
    """
    loader = KubeYAMLLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if check is not None:
                check(node)
            if node is None:
                yield None
                continue
            loader.problems = []
            data = loader.construct_document(node)
            _raise_first(loader, node)
            yield data
    finally:
        loader.dispose()


def safe_load(text: str, check: Any = None) -> Any:
    """The single document of ``text`` (None when empty), as :func:`safe_load_all` reads it.

    Raises:
        yaml.YAMLError: as :func:`safe_load_all`, and a ComposerError for more than one document.
    """
    loader = KubeYAMLLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if check is not None:
            check(node)
        data = loader.construct_document(node)
        _raise_first(loader, node)
        return data
    finally:
        loader.dispose()


def describe_yaml_error(exc: yaml.YAMLError, text: str | None = None) -> str:
    """One line for a PyYAML error: ``line 3 column 5: <context>, <problem>`` (the mark is the
    problem's, else the context's; no source snippet). A character PyYAML's reader refuses (a
    control character, a NUL byte) has no mark, only a position in the stream: with ``text`` (the
    document read) it is given as a line and column too, else as the character's position."""
    if isinstance(exc, yaml.reader.ReaderError):
        what = f"unacceptable character #x{exc.character:04x}: {exc.reason}" if isinstance(exc.character, int) \
            else f"unacceptable byte {exc.character!r}: {exc.reason}"
        if text is not None and isinstance(exc.character, int):
            line = text.count("\n", 0, exc.position) + 1
            column = exc.position - (text.rfind("\n", 0, exc.position) + 1) + 1
            return f"line {line} column {column}: {what}"
        return f"character {exc.position + 1}: {what}"
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    return f"{where}{context + ', ' if context else ''}{problem}"
