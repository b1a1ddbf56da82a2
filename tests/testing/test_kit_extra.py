"""``pip install 'karpy[testing]'`` brings what the conformance kit needs to run (issue 35, item 9)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _requirement_names(reqs: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower() for r in reqs}


def test_testing_extra_covers_the_kits_third_party_imports_and_async_tests() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = _requirement_names(extras["testing"])
    imported: set[str] = set()
    for path in (REPO / "karpy_core" / "testing").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    core = _requirement_names(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "karpy_core"}
    assert third_party - core - {"prometheus_client"} <= names, third_party
    assert "pytest-asyncio" in names  # the kit's tests are coroutines (asyncio_mode = "auto")
    assert "pip install\n'karpy[testing]'" in (REPO / "docs" / "cloudprovider.md").read_text()
