"""docs/architecture.md's "which decision is made where" table stays true: every file it names
exists and every Python symbol it names (``function``, ``Class.method``, ``module.symbol``)
resolves in the modules of its row.

Paths are repository-relative (``karpy_core/...``, ``providers/...``) or short: relative to the
directory of an earlier full path in the same row, or one of that directory's parents
(``scheduling/run.py`` after ``karpy_core/scheduling/scheduler.py``, ``static_drift.py`` after
``.../methods/emptiness.py``). Back-quoted words of the function column that are Kubernetes
fields, values or units, not code, are listed in :data:`NOT_CODE`.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"

NOT_CODE = frozenset({
    # Kubernetes/Karpenter API fields, values and reasons quoted in the table's prose
    "limits.nodes", "maxSkew",
})

_TICKED = re.compile(r"`([^`]+)`")
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\(.*\)")
_PROVIDER_ROOTS = {"karpy_aws": "providers/aws", "karpy_kakaocloud": "providers/kakaocloud"}


@dataclass
class Row:
    """One table row: its decision text, the files it names and the symbols of its function column."""

    decision: str
    files: list[str] = field(default_factory=list)
    unresolved_files: list[str] = field(default_factory=list)
    symbols: list[str] = field(default_factory=list)


def _is_path(token: str) -> bool:
    return " " not in token and ("/" in token or token.endswith((".py", ".md")))


def _resolve_path(token: str, earlier: list[str]) -> str | None:
    """The repository-relative path ``token`` names, or None when no such file exists."""
    if token.startswith(("karpy_core/", "providers/", "docs/", "tests/", "benchmarks/")):
        return token if (REPO / token).exists() else None
    for root, base in _PROVIDER_ROOTS.items():
        if token.startswith(root + "/") and (REPO / base / token).exists():
            return f"{base}/{token}"
    bases: list[Path] = []
    for full in earlier:
        d = Path(full).parent
        while d != Path("."):
            bases.append(d)
            d = d.parent
    bases += [Path("karpy_core"), Path("docs")]
    for base_dir in bases:
        if (REPO / base_dir / token).exists():
            return str(base_dir / token)
    return None


def table_rows(text: str) -> list[Row]:
    """The rows of every ``| decision | file | function |`` table in ``text``."""
    rows: list[Row] = []
    in_table = False
    for line in text.splitlines():
        if not line.startswith("|"):
            in_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if [c.lower() for c in cells] == ["decision", "file", "function"]:
            in_table = True
            continue
        if not in_table or set(line) <= set("|- :"):
            continue
        assert len(cells) == 3, f"a table row without three cells: {line[:100]}"
        row = Row(cells[0])
        for cell in cells[1:]:
            for token in _TICKED.findall(cell) + re.findall(r"\]\(([^)#]+)\)", cell):
                if not _is_path(token):
                    continue
                found = _resolve_path(token, row.files)
                (row.files if found else row.unresolved_files).append(found or token)
        for token in _TICKED.findall(cells[2]):
            call = _CALL.fullmatch(token)
            name = call.group(1) if call else token
            if not _is_path(name) and _SYMBOL.fullmatch(name) and name not in NOT_CODE:
                row.symbols.append(name)
        rows.append(row)
    return rows


def _module_of(path: str) -> ModuleType | None:
    if not path.endswith(".py"):
        return None
    for base in _PROVIDER_ROOTS.values():
        if path.startswith(base + "/"):
            path = path[len(base) + 1:]
    name = path[:-3].replace("/", ".").removesuffix(".__init__")
    return importlib.import_module(name)


def _has(obj: Any, name: str) -> bool:
    """``obj.name`` exists: an attribute, a field of a pydantic model, dataclass or slotted class,
    or an instance attribute a method of the class assigns (``self.name = ...``)."""
    if hasattr(obj, name):
        return True
    for klass in getattr(obj, "__mro__", ()):
        if name in getattr(klass, "model_fields", {}) or name in getattr(klass, "__dataclass_fields__", {}):
            return True
        if name in vars(klass).get("__annotations__", {}):
            return True
        if klass.__module__.startswith("karpy") and name in _assigned(klass):
            return True
    return False


@functools.cache
def _assigned(klass: type) -> frozenset[str]:
    """The instance attributes the methods of ``klass`` assign (``self.name = ...``, ``self.name: T = ...``)."""
    try:
        source = inspect.getsource(klass)
    except (OSError, TypeError):
        return frozenset()
    return frozenset(re.findall(r"\bself\.(\w+)\s*(?::[^=\n]*)?=(?!=)", source))


def _walk(root: Any, parts: list[str]) -> bool:
    obj = root
    for i, part in enumerate(parts):
        if not _has(obj, part):
            return False
        if i < len(parts) - 1:
            obj = getattr(obj, part)
    return True


def resolve(symbol: str, modules: list[ModuleType], named: list[Any]) -> Any | None:
    """What ``symbol`` names in ``modules`` (None when nothing): ``name`` or ``Class.attr`` from a
    module, ``module.name`` by a module's last name, or an attribute of a class named earlier in
    the row (``named``: the table names a class once, then its methods alone,
    ``SchedulingRun.place_existing``, ``place_planned``) or defined by one of ``modules``."""
    parts = symbol.split(".")
    roots: list[tuple[Any, list[str]]] = []
    for module in modules:
        roots.append((module, parts))
        if len(parts) > 1 and module.__name__.rsplit(".", 1)[-1] == parts[0]:
            roots.append((module, parts[1:]))
    roots += [(klass, parts) for klass in named]
    for module in modules:
        roots += [(v, parts) for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__]
    for root, path in roots:
        if _walk(root, path):
            obj = root
            for part in path[:-1]:
                obj = getattr(obj, part)
            value = getattr(obj, path[-1], True)
            return True if value is None else value  # (an attribute whose value is None is found all the same)
    return None


def unresolved(row: Row, fallback: list[ModuleType]) -> list[str]:
    """The symbols of ``row`` found neither in its own files nor in ``fallback``, the modules of
    the whole table (a row may point at a name another row's file defines: "the provisioner's
    ``build_scheduler``")."""
    own = [m for m in map(_module_of, row.files) if m is not None]
    named: list[Any] = []
    missing = []
    for symbol in row.symbols:
        found = resolve(symbol, own, named)
        if found is None:
            found = resolve(symbol, fallback, [])
        if found is None:
            missing.append(symbol)
        elif "." in symbol:
            owner = resolve(symbol.rsplit(".", 1)[0], own, named) or resolve(symbol.rsplit(".", 1)[0], fallback, [])
            if isinstance(owner, type):
                named.append(owner)
        elif isinstance(found, type):
            named.append(found)
    return missing


def test_the_table_is_parsed() -> None:
    rows = table_rows(DOC.read_text())
    assert len(rows) >= 40
    assert all(row.files for row in rows), [row.decision[:60] for row in rows if not row.files]
    assert sum(len(row.symbols) for row in rows) >= 150


def test_every_file_in_the_architecture_table_exists() -> None:
    missing = [(row.decision[:60], f) for row in table_rows(DOC.read_text()) for f in row.unresolved_files]
    assert not missing, "docs/architecture.md names files that do not exist:\n" + "\n".join(f"  {f}  (row: {d})" for d, f in missing)


def test_every_symbol_in_the_architecture_table_resolves() -> None:
    rows = table_rows(DOC.read_text())
    table = [m for m in {m for row in rows for m in map(_module_of, row.files)} if m is not None]
    missing = [(row.decision[:60], row.files, s) for row in rows for s in unresolved(row, table)]
    assert not missing, "docs/architecture.md names symbols its row's files do not have:\n" + "\n".join(
        f"  {s}  in {', '.join(files)}  (row: {d})" for d, files, s in missing)


def test_a_stale_name_is_reported() -> None:
    """The checks catch what they are for: a missing file and a missing method."""
    text = ("| decision | file | function |\n|---|---|---|\n"
            "| x | `karpy_core/scheduling/scheduler.py`, `scheduling/nowhere.py` | `Scheduler.solve`, `Scheduler.gone`, `limits.nodes` |\n")
    (row,) = table_rows(text)
    assert row.files == ["karpy_core/scheduling/scheduler.py"] and row.unresolved_files == ["scheduling/nowhere.py"]
    assert unresolved(row, []) == ["Scheduler.gone"]
