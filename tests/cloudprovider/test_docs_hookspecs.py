"""docs/cloudprovider.md's hook table and karpy_core/cloudprovider/hookspecs.py must agree: every
hookspec is documented with its exact signature, async-ness and return type, and no documented
hook is missing from the hookspecs."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from karpy_core.cloudprovider import hookspecs

DOC = Path(__file__).resolve().parents[2] / "docs" / "cloudprovider.md"
_ROW = re.compile(r"^\| `(karpy_\w+)\((.*?)\)` \| (yes|no) \| `([^`]+)` \|")
_AWAITABLE = re.compile(r"^Awaitable\[(.*)\]$")


def documented() -> dict[str, tuple[str, bool, str]]:
    """hook name -> (parameters text, async, return type) from the doc's table."""
    rows: dict[str, tuple[str, bool, str]] = {}
    for line in DOC.read_text().splitlines():
        m = _ROW.match(line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} documented twice"
            rows[m.group(1)] = (m.group(2), m.group(3) == "yes", m.group(4))
    return rows


def specified() -> dict[str, tuple[str, bool, str]]:
    """hook name -> (parameters text, async, return type) from the hookspecs' annotations."""
    specs: dict[str, tuple[str, bool, str]] = {}
    for name, fn in inspect.getmembers(hookspecs, inspect.isfunction):
        if not name.startswith("karpy_"):
            continue
        sig = inspect.signature(fn)
        params = ", ".join(f"{p.name}: {p.annotation}" for p in sig.parameters.values())
        ret = str(sig.return_annotation)
        m = _AWAITABLE.match(ret)
        specs[name] = (params, m is not None, m.group(1) if m else ret)
    return specs


def test_every_hookspec_is_documented_with_its_signature() -> None:
    docs, specs = documented(), specified()
    assert specs, "no hookspecs found"
    missing = sorted(set(specs) - set(docs))
    assert not missing, f"hooks not documented in docs/cloudprovider.md: {missing}"
    for name, (params, is_async, ret) in specs.items():
        assert docs[name] == (params, is_async, ret), (
            f"docs/cloudprovider.md documents {name} as {docs[name]}, the hookspec says {(params, is_async, ret)}")


def test_no_documented_hook_is_missing_from_the_hookspecs() -> None:
    extra = sorted(set(documented()) - set(specified()))
    assert not extra, f"docs/cloudprovider.md documents hooks that do not exist: {extra}"


def test_no_hookspec_returns_any() -> None:
    untyped = sorted(name for name, (_, _, ret) in specified().items() if ret == "Any" or ret.endswith("[Any]"))
    assert not untyped, f"hookspecs with an untyped result: {untyped}"
