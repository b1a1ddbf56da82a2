"""No import circle in the product (issue 38): among the modules of each cloud plugin and of
``karpy_core`` (``cloudprovider`` ``calls``/``context``/``metrics``, ``disruption``
``controller``/``metrics``, KakaoCloud's create/instances/plugin/unowned formed them). Imports under
``TYPE_CHECKING`` and inside functions count: a circle through them still ties the modules
together for a reader. Measured with grimp (import-linter's graph)."""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("karpy_kakaocloud", "karpy_aws", "karpy_core")


def import_cycles(graph: grimp.ImportGraph, package: str) -> list[list[str]]:
    """The strongly connected components of more than one module among ``package``'s modules
    (Tarjan's algorithm), each sorted, in module order."""
    modules = {m for m in graph.modules if m == package or m.startswith(package + ".")}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v) & modules):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return out


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("karpy_core", "karpy_aws", "karpy_kakaocloud", cache_dir=None)


def test_the_cycle_finder_finds_a_circle() -> None:
    g = grimp.ImportGraph()
    for m in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        g.add_module(m)
    g.add_import(importer="pkg.a", imported="pkg.b")
    g.add_import(importer="pkg.b", imported="pkg.a")
    g.add_import(importer="pkg.c", imported="pkg.a")
    assert import_cycles(g, "pkg") == [["pkg.a", "pkg.b"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(graph: grimp.ImportGraph, package: str) -> None:
    assert import_cycles(graph, package) == []
