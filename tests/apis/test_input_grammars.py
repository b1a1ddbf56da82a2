"""The grammars karpy shares with Kubernetes, as tables of upstream's own cases.

* Quantities: apimachinery's ``resource.ParseQuantity`` (``TestQuantityParse``'s valid table and
  ``invalid`` list, ``TestParseQuantityString``, ``TestInterpretExponentInt32Bounds`` in
  ``k8s.io/apimachinery/pkg/api/resource/quantity_test.go``), plus non-ASCII digits.
* Durations: Go's ``time.ParseDuration`` (``time/time_test.go``'s ``parseDurationTests`` and
  ``parseDurationErrorTests``) and its int64 range.
* YAML: the values ``sigs.k8s.io/yaml`` (go-yaml v2, then JSON) gives.
"""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import yaml

from karpy_core.apis.durations import DURATION_OR_NEVER, check_duration, parse_duration
from karpy_core.utils.kubeyaml import NonJSONValueError, safe_load, safe_load_all
from karpy_core.utils.quantity import QuantityError, parse_quantity, to_internal

GI = 1024**3

# (input, exact value in base units) from TestQuantityParse; rounding to nano happens in
# ParseQuantity upstream and at karpy's integer conversion (to_internal), checked below.
VALID_QUANTITIES: list[tuple[str, Decimal]] = [
    ("0", Decimal(0)), ("0n", Decimal(0)), ("0u", Decimal(0)), ("0m", Decimal(0)), ("0Ki", Decimal(0)), ("0k", Decimal(0)),
    ("0Mi", Decimal(0)), ("0M", Decimal(0)), ("0Gi", Decimal(0)), ("0G", Decimal(0)), ("0Ti", Decimal(0)), ("0T", Decimal(0)),
    ("1", Decimal(1)),
    ("1Ki", Decimal(1024)), ("8Ki", Decimal(8 * 1024)), ("7Mi", Decimal(7 * 1024**2)), ("6Gi", Decimal(6 * GI)),
    ("5Ti", Decimal(5 * 1024**4)), ("4Pi", Decimal(4 * 1024**5)), ("3Ei", Decimal(3 * 1024**6)),
    ("10Ti", Decimal(10 * 1024**4)), ("100Ti", Decimal(100 * 1024**4)),
    ("5n", Decimal("5e-9")), ("4u", Decimal("4e-6")), ("3m", Decimal("3e-3")), ("9", Decimal(9)), ("8k", Decimal(8000)),
    ("50k", Decimal(50000)), ("7M", Decimal("7e6")), ("6G", Decimal("6e9")), ("5T", Decimal("5e12")), ("40T", Decimal("4e13")),
    ("300T", Decimal("3e14")), ("2P", Decimal("2e15")), ("1E", Decimal("1e18")),
    ("1E-3", Decimal("1e-3")), ("1e3", Decimal(1000)), ("1E6", Decimal("1e6")), ("1e9", Decimal("1e9")), ("1E12", Decimal("1e12")),
    ("1e15", Decimal("1e15")), ("1E18", Decimal("1e18")), ("1e14", Decimal("1e14")), ("1e13", Decimal("1e13")),
    ("100.035k", Decimal(100035)),
    ("0.001", Decimal("0.001")), ("0.0005k", Decimal("0.5")), ("0.005", Decimal("0.005")), ("0.05", Decimal("0.05")),
    ("0.5", Decimal("0.5")), ("0.00050k", Decimal("0.5")), ("0.00500", Decimal("0.005")), ("0.05000", Decimal("0.05")),
    ("0.50000", Decimal("0.5")), ("0.5e0", Decimal("0.5")), ("0.5e-1", Decimal("0.05")), ("0.5e-2", Decimal("0.005")),
    ("10.035M", Decimal("10035000")),
    ("1.2e3", Decimal(1200)), ("1.3E+6", Decimal("1.3e6")), ("1.40e9", Decimal("1.4e9")), ("1.53E12", Decimal("1.53e12")),
    ("1.6e15", Decimal("1.6e15")), ("1.7E18", Decimal("1.7e18")),
    ("9.01", Decimal("9.01")), ("8.1k", Decimal(8100)), ("7.123456M", Decimal(7123456)), ("6.987654321G", Decimal(6987654321)),
    ("5.444T", Decimal("5.444e12")), ("40.1T", Decimal("4.01e13")), ("300.2T", Decimal("3.002e14")), ("2.5P", Decimal("2.5e15")),
    ("1.01E", Decimal("1.01e18")), ("12E", Decimal("12e18")),
    ("100.035Ki", Decimal("102435.84")), ("0.5Mi", Decimal(512 * 1024)), ("0.05Gi", Decimal("53687091.2")),
    ("0.025Ti", Decimal("27487790694.4")),
    (".001", Decimal("0.001")), (".0001k", Decimal("0.1")), ("1.", Decimal(1)), ("1.G", Decimal("1e9")),
    # TestParseQuantityString: "." and "-." scan as zero; a lone sign too
    (".", Decimal(0)), ("-.", Decimal(0)), ("-", Decimal(0)), ("+", Decimal(0)),
    # ... and so does a suffix without digits (parseQuantityString's numerator defaults to "0")
    ("Gi", Decimal(0)), ("e3", Decimal(0)), ("m", Decimal(0)),
    # exponents up to MaxInt32 in magnitude are accepted by interpret (and karpy's bounds refuse them later)
    ("1e-2147483647", Decimal("1e-9")),
]

INVALID_QUANTITIES = [
    # TestQuantityParse's invalid list ...
    "1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-", "1e4294967297",
    # ... TestInterpretExponentInt32Bounds ...
    "1E2147483648", "1E-2147483648", "1E8589934592", "1E9223372036854775807", "1E9223372036854775808",
    # ... and the empty string, wrong-case suffixes, exponents that are not integers, Go's other number syntaxes
    "", "1K", "1ki", "1KI", "1e1.5", "1e", "1E+", "0x10", "1_000", "1,5", "1 Gi", "1Gi i",
    # non-ASCII digits (str.isdigit() and Decimal() accept them; apimachinery does not)
    "\u0661\u0662", "\uff11Gi", "\u0663m", "1\u0660", "\u0967", "\U0001d7cf", "\u00b9", "1e\u0663",
]


@pytest.mark.parametrize(("text", "expected"), VALID_QUANTITIES)
def test_valid_quantities(text: str, expected: Decimal) -> None:
    assert parse_quantity(text) == expected
    if text not in ("-", "+", "-.", "Gi", "e3", "m") and expected:
        assert parse_quantity("-" + text) == -expected
        assert parse_quantity("+" + text) == expected


@pytest.mark.parametrize("text", INVALID_QUANTITIES)
def test_invalid_quantities(text: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)


@pytest.mark.parametrize("text", [" 1", "1 ", "\t1Gi\n", "\u00a01\u3000"])
def test_json_whitespace_is_trimmed(text: str) -> None:
    """Quantity.UnmarshalJSON applies strings.TrimSpace (Go's unicode.IsSpace) before parsing."""
    assert parse_quantity(text) in (Decimal(1), Decimal(GI))


def test_go_keeps_what_python_calls_space() -> None:
    """U+001C..U+001F are whitespace to str.strip but not to Go's TrimSpace: refused."""
    with pytest.raises(QuantityError):
        parse_quantity("\x1c1")


@pytest.mark.parametrize(("resource", "text", "internal"), [
    ("cpu", "3.001n", 1), ("cpu", "0.9n", 1), ("memory", "0.000000000001Ki", 1), ("cpu", "1e-2147483647", 1),
    ("cpu", "100.035Ki", 102435840), ("memory", "0.05Gi", 53687092), ("cpu", "500e-3", 500),
])
def test_integer_conversion_rounds_up(resource: str, text: str, internal: int) -> None:
    assert to_internal(resource, text) == internal


def test_huge_exponents_cost_nothing() -> None:
    """1e2147483647 is a bound above 2^64, not a two-billion-digit number."""
    assert parse_quantity("1e2147483647") > 2**64
    assert parse_quantity("-1e2147483647") < -(2**64)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_numbers_are_not_quantities(value: float) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


# --- durations ----------------------------------------------------------------------------------------

NS = 1e-9

GO_DURATIONS: list[tuple[str, float]] = [
    ("0", 0), ("5s", 5), ("30s", 30), ("1478s", 1478), ("-5s", -5), ("+5s", 5), ("-0", 0), ("+0", 0),
    ("5.0s", 5), ("5.6s", 5.6), ("5.s", 5), (".5s", 0.5), ("1.0s", 1), ("1.00s", 1), ("1.004s", 1.004), ("1.0040s", 1.004),
    ("100.00100s", 100.001), ("10ns", 10 * NS), ("11us", 11e-6), ("12\u00b5s", 12e-6), ("12\u03bcs", 12e-6), ("13ms", 0.013),
    ("14s", 14), ("15m", 900), ("16h", 57600), ("3h30m", 12600), ("10.5s4m", 250.5), ("-2m3.4s", -123.4),
    ("1h2m3s4ms5us6ns", 3723.004005), ("39h9m14.425s", 140954.425),
    ("9223372036854775807ns", 9223372036.854775), ("2562047h47m16.854775807s", 9223372036.854775),
    ("-9223372036854775808ns", -9223372036.854775),
]

GO_DURATION_ERRORS = [
    "", "3", "-", "s", ".", "-.", ".s", "+.s", "1d", "\u0661h", "1h\n", " 1h", "1h ", "1e3s", "1.5.s",
    "9223372036854775808ns", "9223372036854775810ns", "2562048h", "9999999999h", "-9223372036854775809ns",
]


@pytest.mark.parametrize(("text", "seconds"), GO_DURATIONS)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == pytest.approx(seconds, abs=1e-6)


@pytest.mark.parametrize("text", GO_DURATION_ERRORS)
def test_go_duration_errors(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(text)
    assert repr(text) in str(info.value)


def test_the_largest_duration_is_a_timedelta() -> None:
    assert parse_duration("2562047h47m16.854775807s") == timedelta(seconds=9223372036, microseconds=854775)


@pytest.mark.parametrize("text", ["720h\n", "\u0661h", "1h ", "1.5h", "2562048h"])
def test_crd_duration_patterns_match_the_whole_ascii_text(text: str) -> None:
    with pytest.raises(ValueError):
        check_duration(text, DURATION_OR_NEVER)


# --- YAML ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("a: 2024-01-01", {"a": "2024-01-01"}),
    ("a: 2024-01-01T10:00:00Z", {"a": "2024-01-01T10:00:00Z"}),
    ("a: 2001-12-14 21:59:43.10 -5", {"a": "2001-12-14 21:59:43.10 -5"}),
    ("a: 2024-02-30", {"a": "2024-02-30"}),
    ("a: 1:20", {"a": "1:20"}),
    ("a: 1:20.5", {"a": "1:20.5"}),
    ("a: 0x1F", {"a": 31}),
    ("a: 0x_", {"a": "0x_"}),
    ("a: -0b_", {"a": "-0b_"}),
    ("a: 1.5", {"a": 1.5}),
    ("{1: a, true: b, 1.5: c, no: d}", {"1": "a", "true": "b", "1.5": "c", "false": "d"}),
    ("a: !!str 2024-01-01", {"a": "2024-01-01"}),
    ("a: !!timestamp 2024-01-01", {"a": "2024-01-01"}),
    ("a: &x {b: 1}\nc: *x", {"a": {"b": 1}, "c": {"b": 1}}),
    ("a: {<<: {b: 1}, c: 2}", {"a": {"b": 1, "c": 2}}),
    # val48: go-yaml v2 ignores the tag of a mapping or a list (checked with kubectl's reader)
    ("a: {b: !!set {x}}", {"a": {"b": {"x": None}}}),
    ("a: !!omap [{x: 1}]", {"a": [{"x": 1}]}),
    ("a: !!pairs [[x, 1]]", {"a": [["x", 1]]}),
    ("a: !!str {x: 1}", {"a": {"x": 1}}),
    ("a: !!seq {x: 1}", {"a": {"x": 1}}),
    ("a: !local [x]", {"a": ["x"]}),
    ("a: &s !!set {x}\nb: *s", {"a": {"x": None}, "b": {"x": None}}),
    # issue 35: a tag on a scalar that go-yaml v2 does not resolve is the text as written, and
    # !!binary the base64 text decoded (kubectl's reader: apimachinery YAMLReader + sigs.k8s.io/yaml)
    ("a: [1, !!binary aGk=]", {"a": [1, "hi"]}),
    ("a: !!python/name:os.system x", {"a": "x"}),
    ("a: !local x", {"a": "x"}),
    ("a: !!set abc", {"a": "abc"}),
])
def test_values_as_sigs_k8s_io_yaml_gives_them(text: str, expected: Any) -> None:
    assert safe_load(text) == expected


@pytest.mark.parametrize(("text", "problem"), [
    ("a: [1, !!binary aGk]", "a[1]: !!binary value contains invalid base64 data"),
    ("a: !!null x", "a: cannot decode !!str `x` as a !!null"),
    ("a: !!timestamp abc", "a: cannot decode !!str `abc` as a !!timestamp"),
    ("a: !!timestamp 2024-02-30", "a: cannot decode !!str `2024-02-30` as a !!timestamp"),
    ("a: .nan", "a: '.nan' is not a JSON number"),
    ("a: -.inf", "a: '-.inf' is not a JSON number"),
    ("{~: 1}", "a null mapping key is not JSON"),
])
def test_values_json_cannot_carry(text: str, problem: str) -> None:
    with pytest.raises(NonJSONValueError) as info:
        safe_load(text)
    assert info.value.problem is not None and info.value.problem.startswith(problem)
    with pytest.raises(NonJSONValueError):
        list(safe_load_all("ok: 1\n---\n" + text))


def test_first_documents_load_before_a_bad_one() -> None:
    docs = safe_load_all("a: 1\n---\nb: !!binary aGk\n")
    assert next(docs) == {"a": 1}
    with pytest.raises(yaml.YAMLError):
        next(docs)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        # go-yaml v2 (sigs.k8s.io/yaml) resolves these as numbers; PyYAML left 1e1 a string
        ("1e1", 10), ("1E+3", 1000), ("-2.5e-1", -0.25), (".5e2", 50), ("1_0e1", 100),
        # a whole float below 2**63 is an integer once Go's JSON encoder writes it (its shortest digits);
        # 2**63 and more fit no integer field: test_yaml47_findings.py (WrittenFloat)
        ("3.0", 3), ("1.", 1), ("1e18", 10**18), ("9.2e18", 9200000000000000000),
        # no octal int to go-yaml, so a float
        ("08", 8), ("-09", -9),
        # ints and strings as before
        ("007", 7), ("0x1F", 31), ("123", 123), ("1:20", "1:20"), ("1e", "1e"), ("123e4567-e89b", "123e4567-e89b"),
    ],
)
def test_yaml_numbers_resolve_as_go_yaml_v2_does(text: str, value: object) -> None:
    got = safe_load(f"v: {text}")["v"]
    assert got == value and type(got) is type(value), (text, got)
