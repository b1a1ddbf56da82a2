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
* plain scalars are resolved by :func:`go_yaml_v2_resolve`, a transcription of go-yaml v2's
  ``resolve``: ``0o17``, ``0X1A``, ``0B1``, ``017`` are integers (15, 26, 1, 15), a number beyond
  uint64 is a float (kept as a :class:`WrittenFloat`, which messages show as written), ``=`` is the
  string ``"="`` (PyYAML's ``!!value``), ``08`` is 8;
* integer, float and boolean mapping keys become strings (``1: x`` -> ``{"1": "x"}``), as
  ``convertToJSONableObject`` does; a null key is refused (``unsupported map key``);
* the tag of a mapping or a list is ignored, as go-yaml v2 ignores it: ``!!set {a, b}`` is the
  mapping ``{"a": null, "b": null}``, ``!!omap [{a: b}]`` and ``!!pairs [[a, b]]`` are lists,
  ``!foo {a: b}`` is the mapping;
* a tag on a scalar that is not a JSON type is read as go-yaml v2 reads it into ``interface{}``
  (``resolve`` leaves a tag it does not resolve alone, ``decoder.scalar`` keeps the text):
  ``!!binary`` is its base64 text decoded (line breaks skipped, as Go's decoder skips them; each
  byte that is not UTF-8 becomes U+FFFD, as Go's JSON encoder writes it) and refused in go-yaml's
  words when it is not base64 (``!!binary value contains invalid base64 data``); any other
  (``!!set abc``, ``!foo 12``, ``!!python/name:os.system x``) is the string as written;
* ``.inf``/``.nan`` are **refused, naming the field path and line** (``json: unsupported value: +Inf``),
  as is a scalar that does not fit its explicit ``!!null``/``!!int``/``!!float``/``!!bool`` tag
  (``cannot decode !!str `abc` as a !!null``);
* an explicit ``!!timestamp`` is the string as written when go-yaml v2 reads a timestamp in it
  (``!!timestamp 2024-01-01``: ``"2024-01-01"``), and refused in go-yaml's words otherwise
  (``cannot decode !!str `abc` as a !!timestamp``), as kubectl refuses it.

Everything else is PyYAML's safe loading (libyaml's parser when available). The loader records
each refused value in :attr:`KubeYAMLLoader.problems` (the value is read as null) so a caller can
report every one of a document; :func:`safe_load_all` / :func:`safe_load` raise the first one as a
:class:`NonJSONValueError` instead. :func:`describe_yaml_error` turns any PyYAML error into one line.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import yaml

__all__ = [
    "KubeYAMLDumper",
    "KubeYAMLLoader",
    "NonJSONValueError",
    "WrittenFloat",
    "YAMLValueProblem",
    "describe_yaml_error",
    "drop_document_boms",
    "format_yaml_path",
    "go_yaml_v2_resolve",
    "safe_load",
    "safe_load_all",
]

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_TAG = "tag:yaml.org,2002:"
_TIMESTAMP = _TAG + "timestamp"
_MAP, _SEQ = _TAG + "map", _TAG + "seq"
_INT = _TAG + "int"
_FLOAT = _TAG + "float"
_BOOL = _TAG + "bool"

_STR = _TAG + "str"
_NULL = _TAG + "null"
_MERGE = _TAG + "merge"

_BOOL_VALUES = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
"""go-yaml v2's boolean plain scalars (``resolve.go``, which ``sigs.k8s.io/yaml`` uses): YAML 1.1's,
with ``y``/``Y``/``n``/``N``, which PyYAML's resolver reads as strings. kubectl sends ``labels: {a: y}``
as ``true``, which kube-apiserver refuses (``cannot unmarshal bool into Go struct field ... of type string``)."""

_GO_MAP: dict[str, tuple[str, Any]] = {
    **{k: (_BOOL, v) for k, v in _BOOL_VALUES.items()},
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (_NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (_FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (_FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (_FLOAT, -math.inf)),
    "<<": (_MERGE, "<<"),
}
"""go-yaml v2's ``resolveMap``: the plain scalars resolved by lookup."""

_GO_HINTS = frozenset("+-0123456789yYnNtTfFoO~.")
"""First characters go-yaml v2's ``resolveTable`` marks; a plain scalar starting otherwise is a string."""

_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
"""go-yaml v2's ``yamlStyleFloat`` (matched after ``_`` is removed)."""

_GO_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
"""What Go's ``strconv.ParseFloat`` accepts of a string starting with ``.`` (``_`` only between
digits, its ``underscoreOK``)."""

_INT64 = 1 << 63
_UINT64 = 1 << 64


def _go_parse_uint(text: str, base: int) -> int | None:
    """Go's ``strconv.ParseUint(text, base, 64)`` without the range check (None for a syntax
    error); ``base`` 0 reads the ``0x``/``0o``/``0b``/``0`` prefixes. No sign, no ``_`` (removed before)."""
    if not text:
        return None
    if base == 0:
        base = 10
        if text[0] == "0":
            if len(text) >= 3 and text[1] in "bBoOxX":
                base = {"b": 2, "o": 8, "x": 16}[text[1].lower()]
                text = text[2:]
            else:
                base, text = 8, text[1:]
    value = 0
    for char in text:
        if "0" <= char <= "9":
            digit = ord(char) - 48
        elif "a" <= char.lower() <= "z" and char.isascii():
            digit = ord(char.lower()) - 87
        else:
            return None
        if digit >= base:
            return None
        value = value * base + digit
    return value


def _go_parse_int(text: str, base: int) -> int | None:
    """Go's ``strconv.ParseInt(text, base, 64)``: an optional sign, :func:`_go_parse_uint`, and
    the int64 range (None outside it or for a syntax error)."""
    negative = text[:1] == "-"
    value = _go_parse_uint(text[1:] if text[:1] in "+-" else text, base)
    if value is None:
        return None
    value = -value if negative else value
    return value if -_INT64 <= value < _INT64 else None


_GO_TIMESTAMPS = (
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})[Tt]([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})([.,][0-9]+)?"
               r"(Z|[+-][0-9]{2}:[0-9]{2})"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2}) ([0-9]{1,2}):([0-9]{1,2}):([0-9]{1,2})([.,][0-9]+)?"),
    re.compile(r"([0-9]{4})-([0-9]{1,2})-([0-9]{1,2})"),
)
"""go-yaml v2's ``allowedTimestampFormats`` as Go's ``time.Parse`` reads them: ``2006-1-2T15:4:5.999999999Z07:00``
(and lower-case ``t``), ``2006-1-2 15:4:5.999999999`` and ``2006-1-2`` (one- or two-digit fields, any
number of fraction digits after ``.`` or ``,``, a zone ``Z`` or ``+hh:mm``)."""


def go_yaml_v2_timestamp(text: str) -> bool:
    """Whether go-yaml v2's ``parseTimestamp`` (``resolve.go``) reads ``text`` as a timestamp: one of
    :data:`_GO_TIMESTAMPS`, with the ranges ``time.Parse`` checks (month 1-12, a day its month has,
    hour < 24, minute and second < 60, a zone offset up to 24:60)."""
    for pattern in _GO_TIMESTAMPS:
        match = pattern.fullmatch(text)
        if match is None:
            continue
        year, month, day = (int(part) for part in match.groups()[:3])
        if not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
            return False
        if len(match.groups()) > 3:
            hour, minute, second = (int(part) for part in match.groups()[3:6])
            if hour >= 24 or minute >= 60 or second >= 60:
                return False
            zone = match.groups()[7] if len(match.groups()) > 7 else None
            if zone and zone != "Z" and (int(zone[1:3]) > 24 or int(zone[4:6]) > 60):
                return False
        return True
    return False


def go_yaml_v2_resolve(text: str) -> tuple[str, Any]:
    """The tag and value go-yaml v2 gives the plain scalar ``text`` (``resolve`` in
    ``sigs.k8s.io/yaml/goyaml.v2/resolve.go``, which kubectl and kube-apiserver use).

    Returns ``(tag, value)``: ``tag:yaml.org,2002:`` + ``null``/``bool``/``int``/``float``/``str``
    (or ``merge`` for ``<<``). Ints are Go's ``strconv.ParseInt(s, 0, 64)`` of the text without ``_``
    (``0x1A``, ``0X1A``, ``0o17``, ``0O17``, ``017``, ``0b1``, ``0B1``, signs), then ``ParseUint`` up to
    2**64-1, then the ``0b``/``-0b`` fallbacks; floats match ``yamlStyleFloat`` (``1e1``, ``5.``,
    ``08``) and are finite (``1e400`` overflows: a string), or start with ``.`` (``.5``). Timestamps
    (``2001-12-14``) are strings, as go-yaml decodes them into ``interface{}``; base-60 forms
    (``1:20``) are strings; anything starting with another character (``=``, ``_1``) is a string.
    """
    if text in _GO_MAP:
        return _GO_MAP[text]
    if text[:1] not in _GO_HINTS or text[0] in "yYnNtTfFoO~":
        return _STR, text
    if text[0] == ".":
        if _GO_DOT_FLOAT.fullmatch(text):
            value = float(text.replace("_", ""))
            if math.isfinite(value):
                return _FLOAT, value
        return _STR, text
    plain = text.replace("_", "")
    number = _go_parse_int(plain, 0)
    if number is None and plain[:1] != "-" and plain[:1] != "+":
        unsigned = _go_parse_uint(plain, 0)
        number = unsigned if unsigned is not None and unsigned < _UINT64 else None
    if number is not None:
        return _INT, number
    if _YAML_STYLE_FLOAT.fullmatch(plain):
        value = float(plain)
        if math.isfinite(value):  # strconv.ParseFloat fails with ErrRange on overflow
            return _FLOAT, value
    if plain.startswith("0b"):
        number = _go_parse_int(plain[2:], 2)
        if number is None and plain[2:3] not in ("-", "+"):
            unsigned = _go_parse_uint(plain[2:], 2)
            number = unsigned if unsigned is not None and unsigned < _UINT64 else None
        if number is not None:
            return _INT, number
    elif plain.startswith("-0b"):
        number = _go_parse_int("-" + plain[3:], 2)
        if number is not None:
            return _INT, number
    return _STR, text


class _GoYAMLResolver:
    """Resolves plain scalars with :func:`go_yaml_v2_resolve` (mixed into the loader and dumper)."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.ScalarNode and implicit[0]:
            return go_yaml_v2_resolve(value)[0]
        return super().resolve(kind, value, implicit)  # type: ignore[misc]  # the PyYAML resolver it is mixed into


_BINARY = _TAG + "binary"
_NULL = _TAG + "null"
_JSON_SCALAR_TAGS = frozenset({_TAG + "str", _NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP})
"""The scalar tags go-yaml v2 resolves (``resolvableTag``, and ``!!null``): every other tag on a
scalar is :meth:`KubeYAMLLoader.construct_other_tag`'s."""


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


class WrittenFloat(float):
    """A float read from YAML text that is a whole number past 64 bits (``replicas:
    123456789012345678901234567890``), with that text in :attr:`written` for messages: ``str()``
    and ``repr()`` give it (JSON encoding keeps the float's own digits, as ``float.__repr__``)."""

    written: str

    def __new__(cls, value: float, written: str) -> WrittenFloat:
        """``value`` as go-yaml reads ``written``."""
        number = super().__new__(cls, value)
        number.written = written
        return number

    def __repr__(self) -> str:
        """The text as written (``123456789012345678901234567890``), so messages show the digits given."""
        return self.written

    __str__ = __repr__


class KubeYAMLLoader(_GoYAMLResolver, _BaseLoader):  # type: ignore[misc]  # chosen at import time (CSafeLoader when libyaml is there)
    """PyYAML safe loader with Kubernetes' JSON-compatible values (module docstring).

    Attributes:
        problems: the refused values of the document being constructed (reset by the caller per
            document; each value is read as null).
        path: the key/index path of the node being constructed.
    """

    yaml_constructors = dict(getattr(_BaseLoader, "yaml_constructors"))  # noqa: B009 - _BaseLoader is typed `type`

    def __init__(self, stream: str) -> None:
        super().__init__(drop_document_boms(stream))
        self.problems: list[YAMLValueProblem] = []
        self.path: list[str | int] = []

    def refuse(self, node: yaml.Node, message: str) -> None:
        """Record ``node`` as a value JSON cannot carry."""
        mark = node.start_mark
        self.problems.append(YAMLValueProblem(tuple(self.path), mark.line + 1, mark.column + 1, message, mark))

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """``node``'s value; a mapping or a list is read as one whatever its tag (``!!set {a, b}`` is
        ``{"a": null, "b": null}``, ``!!omap [{a: b}]`` the list, ``!!str {a: b}`` or ``!foo [x]``
        the mapping or list): go-yaml v2 ignores the tag of a mapping or a sequence (``decoder.unmarshal``
        switches on the node's kind), so kubectl sends those values (checked with
        ``yaml.NewYAMLOrJSONDecoder``, kubectl's reader)."""
        if isinstance(node, yaml.MappingNode) and node.tag != _MAP:
            node.tag = _MAP
        elif isinstance(node, yaml.SequenceNode) and node.tag != _SEQ:
            node.tag = _SEQ
        elif isinstance(node, yaml.ScalarNode) and node.tag not in _JSON_SCALAR_TAGS:
            return self.construct_other_tag(node)  # !!binary, !!set abc, !foo 12...: go-yaml's value
        return super().construct_object(node, deep=deep)

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

    def _go_value(self, node: yaml.ScalarNode, want: str) -> Any:
        """``node``'s value as go-yaml v2 resolves it for the tag ``want`` (an explicit ``!!int``,
        ``!!float`` or ``!!bool``, or the one :func:`go_yaml_v2_resolve` chose); an int where a
        float is wanted is a float, as go-yaml converts it. A mismatch (``!!int abc``) is recorded
        in go-yaml's words (``cannot decode !!str `abc` as a !!int``) and read as null."""
        tag, value = go_yaml_v2_resolve(node.value)
        if tag == want:
            return value
        if want == _FLOAT and tag == _INT:
            return float(value)
        short = tag.replace(_TAG, "!!")
        self.refuse(node, f"cannot decode {short} `{node.value}` as a {want.replace(_TAG, '!!')}")
        return None

    def construct_kube_float(self, node: yaml.ScalarNode) -> float | int | None:
        """A finite number as the JSON kubectl sends carries it. A whole one below 2**63 is an int
        (``replicas: 3.0``, ``1e1``): kubectl's YAML-to-JSON step (``sigs.k8s.io/yaml``) keeps the
        float, Go's JSON encoder writes it with its shortest digits and no fraction or exponent
        (``strconv.AppendFloat(f, 'f', -1, 64)`` below 1e21), and kube-apiserver reads that into an
        integer field; the int is those digits (``9.2e18`` -> 9200000000000000000, not the float's
        exact 9199999999999999488). A whole one of 2**63 or more in size (an integer past 64 bits,
        ``123456789012345678901234567890`` or ``-9223372036854775809``, which go-yaml reads as a
        float) fits no Kubernetes integer field: it stays a :class:`WrittenFloat` that remembers
        the text, so a message shows the digits given rather than the float's."""
        value = self._go_value(node, _FLOAT)
        if value is None:
            return None
        if math.isfinite(value):
            if not value.is_integer():
                return float(value)
            if abs(value) < _INT64:
                return int(Decimal(repr(float(value))))
            return WrittenFloat(value, str(node.value))
        self.refuse(node, f"{node.value!r} is not a JSON number (JSON has no infinity or NaN); quote it to make it a string")
        return None

    def construct_kube_int(self, node: yaml.ScalarNode) -> int | None:
        """An integer as go-yaml v2 reads it (:func:`go_yaml_v2_resolve`: ``0o17``, ``0X1A``,
        ``0B1``, ``017``, ``1_000``)."""
        value: int | None = self._go_value(node, _INT)
        return value

    def construct_kube_bool(self, node: yaml.ScalarNode) -> bool | None:
        """A boolean as go-yaml v2 reads it (:data:`_BOOL_VALUES`; ``y``/``n`` too)."""
        value: bool | None = self._go_value(node, _BOOL)
        return value

    def construct_kube_timestamp(self, node: yaml.Node) -> Any:
        """An explicit ``!!timestamp`` as go-yaml v2 decodes it into ``interface{}`` (``decoder.scalar``):
        the text as written when :func:`go_yaml_v2_timestamp` reads it (``2024-01-01``,
        ``2024-01-01T10:00:00Z``), else recorded in go-yaml's words (``cannot decode !!str `abc` as a
        !!timestamp``, what kubectl prints after ``error converting YAML to JSON: yaml:``) and read as
        null. go-yaml ignores the tag of a mapping or a list: it is read as one."""
        if isinstance(node, yaml.MappingNode):
            return self.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return self.construct_sequence(node, deep=True)
        text = str(node.value)
        if go_yaml_v2_timestamp(text):
            return text
        self.refuse(node, f"cannot decode {go_yaml_v2_resolve(text)[0].replace(_TAG, '!!')} `{text}` as a !!timestamp")
        return None

    def construct_kube_null(self, node: yaml.ScalarNode) -> None:
        """An explicit ``!!null``: null when go-yaml v2 reads a null in the text (``~``, ``null``,
        nothing), else recorded in go-yaml's words (``cannot decode !!str `abc` as a !!null``)."""
        if isinstance(node, yaml.ScalarNode):
            self._go_value(node, _NULL)
        return None

    def construct_other_tag(self, node: yaml.Node) -> Any:
        """A scalar with a tag that is not a JSON type, as go-yaml v2 decodes it into
        ``interface{}``: ``!!binary`` its base64 text decoded (:func:`go_binary_text`; refused in
        go-yaml's words when not base64), any other tag (``!!set``, ``!!omap``, ``!!pairs``,
        ``!foo``, ``!!python/...``) the text as written. Mappings and lists never get here
        (:meth:`construct_object` reads them whatever their tag)."""
        text = str(node.value)
        if node.tag != _BINARY:
            return text
        decoded = go_binary_text(text)
        if decoded is None:
            self.refuse(node, "!!binary value contains invalid base64 data")
        return decoded


def go_binary_text(text: str) -> str | None:
    """``text`` (a ``!!binary`` scalar) as go-yaml v2 and ``sigs.k8s.io/yaml`` give it to kubectl:
    ``base64.StdEncoding.DecodeString`` (padded, line breaks skipped, nothing else allowed), the
    bytes as a Go string, which Go's JSON encoder writes with each byte that does not start valid
    UTF-8 as U+FFFD. None when it is not base64."""
    import base64
    import binascii

    try:
        data = base64.b64decode(text.replace("\r", "").replace("\n", ""), validate=True)
    except (binascii.Error, ValueError):
        return None
    return re.sub("[\udc80-\udcff]", "\ufffd", data.decode("utf-8", "surrogateescape"))


KubeYAMLLoader.add_constructor(None, KubeYAMLLoader.construct_other_tag)
KubeYAMLLoader.add_constructor(_NULL, KubeYAMLLoader.construct_kube_null)
KubeYAMLLoader.add_constructor(_TIMESTAMP, KubeYAMLLoader.construct_kube_timestamp)
KubeYAMLLoader.add_constructor(_FLOAT, KubeYAMLLoader.construct_kube_float)
KubeYAMLLoader.add_constructor(_INT, KubeYAMLLoader.construct_kube_int)
KubeYAMLLoader.add_constructor(_BOOL, KubeYAMLLoader.construct_kube_bool)


class KubeYAMLDumper(_GoYAMLResolver, getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]  # chosen at import time
    """PyYAML's safe dumper (libyaml's when available) that quotes every string
    :class:`KubeYAMLLoader` would read as something else: it resolves as the loader does
    (:func:`go_yaml_v2_resolve`), so ``"y"``, ``"n"`` (go-yaml v2 booleans, plain strings to PyYAML's
    own resolver), ``"1e1"`` and ``"0o17"`` (go-yaml numbers) are written quoted and read back as
    the same strings."""


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


KubeYAMLDumper.add_representer(WrittenFloat, yaml.representer.SafeRepresenter.represent_float)
