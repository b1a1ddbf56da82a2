"""Property test: ``karpy validate`` and ``karpy simulate`` on mutated real manifests answer with
exit 0 or 2 and never a traceback, in bounded time and memory (issue 10, section 4).

Hypothesis takes a NodePool file and a workload file from the repository's ``examples/`` and applies up to
three mutations: drop a field, replace a value (wrong types, huge and negative numbers, odd
quantities, unicode, deep nesting, a YAML alias bomb), or rename a key. Both commands then run
in-process (typer's CliRunner) on the mutated file; simulate runs with ``--max-pods 200`` so a
legitimately large ``replicas`` does not turn one example into a minutes-long simulation.

Properties:

* exit code 0 or 2, no ``Traceback`` in the output, no exception other than the CLI's exit;
* what validate refuses (2), simulate refuses too;
* each example under :data:`EXAMPLE_SECONDS` wall time and within :data:`EXAMPLE_MB` more address
  space (``RLIMIT_AS`` lowered around it: a blow-up is a MemoryError, not a swapping machine); the
  process's peak RSS under :data:`MAX_RSS_MB` (``getrusage`` high-water mark).

Profiles: the default (CI) runs :data:`CI_EXAMPLES` examples, about a minute on two busy cores;
``KARPY_SLOW=1 pytest -m slow tests/test_fuzz_cli.py`` runs the ``slow`` test with 2,000.
A few hostile inputs also run in a subprocess under ``RLIMIT_AS`` (1 GiB) as a hard memory bound.
"""

from __future__ import annotations

import copy
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from karpy_core.cli import app

CI_EXAMPLES = 200
EXAMPLE_SECONDS = 30.0
MAX_RSS_MB = 1500
EXAMPLE_MB = 1024
"""Address space one example may add (RLIMIT_AS); beyond it the example fails with MemoryError."""
DEEP = "__karpy_fuzz_deep__"

NODEPOOLS = ["general-purpose.yaml", "spot.yaml", "100-cpu-limit.yaml", "min-values-family.yaml"]
WORKLOADS = ["inflate.yaml", "spread-zone.yaml", "gpu-nvidia.yaml", "online-boutique.yaml"]


def _docs(path: Path) -> list[Any]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


@pytest.fixture(scope="module")
def bases(examples_dir: Path) -> list[tuple[str, list[Any]]]:
    out = [(f"nodepools/{n}", _docs(examples_dir / "nodepools" / n)) for n in NODEPOOLS]
    out += [(f"workloads/{n}", _docs(examples_dir / "workloads" / n)) for n in WORKLOADS]
    return out


def _paths(tree: Any, prefix: tuple[Any, ...] = (), seen: set[int] | None = None) -> list[tuple[Any, ...]]:
    """Every path into a JSON-like tree (dict keys and list indices), the root included; a shared
    container (an alias bomb built by an earlier mutation) is entered once, not expanded."""
    seen = set() if seen is None else seen
    out = [prefix]
    if isinstance(tree, dict | list):
        if id(tree) in seen:
            return out
        seen.add(id(tree))
    if isinstance(tree, dict):
        for k, v in tree.items():
            out.extend(_paths(v, (*prefix, k), seen))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            out.extend(_paths(v, (*prefix, i), seen))
    return out


def _parent(tree: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        tree = tree[part]
    return tree


def _alias_bomb(levels: int, fan: int) -> list[Any]:
    """Shared references: ``yaml.safe_dump`` writes them as anchors and aliases (&id001/*id001),
    so a few hundred bytes expand to fan**levels strings when loaded."""
    node: list[Any] = ["lol"] * fan
    for _ in range(levels):
        node = [node] * fan
    return node


QUANTITY_TEXT = st.sampled_from(["-1", "-0.5Gi", "9223372036854775808", "9223372036854775807", "1e400", "1E-400",
                                 "Infinity", "NaN", "1Ei", "8Ei", "0.0001m", "1.5 Gi", "", "+3", "0x10", "1e18"])
NUMBERS = st.one_of(st.integers(min_value=-(2**70), max_value=2**70),
                    st.sampled_from([-1, 0, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63) - 1, 10**30]),
                    st.floats(allow_nan=True, allow_infinity=True))
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, QUANTITY_TEXT, st.text(max_size=80))
VALUES = st.one_of(
    SCALARS,
    st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
                 max_leaves=12),
    st.integers(min_value=20, max_value=400).map(lambda depth: (DEEP, depth)),
    st.tuples(st.integers(min_value=1, max_value=12), st.integers(min_value=2, max_value=12)).map(lambda lf: _alias_bomb(*lf)),
)


@st.composite
def mutated(draw: st.DrawFn, bases: list[tuple[str, list[Any]]]) -> tuple[str, str]:
    """A base file's documents with 1-3 mutations, dumped back to YAML text."""
    name, docs = draw(st.sampled_from(bases))
    docs = copy.deepcopy(docs)
    deep: list[int] = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(_paths(docs)))
        op = draw(st.sampled_from(["drop", "replace", "replace", "rename"]))
        if not path:
            if op == "replace":
                value = draw(VALUES)
                docs = [value] if not isinstance(value, list) else value
            continue
        parent, key = _parent(docs, path), path[-1]
        if op == "drop":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(max_size=20))] = parent.pop(key)
        else:
            value = draw(VALUES)
            if isinstance(value, tuple) and value[0] == DEEP:
                deep.append(value[1])
                value = f"{DEEP}{len(deep) - 1}"
            parent[key] = value
    text = yaml.safe_dump_all(docs if isinstance(docs, list) else [docs], allow_unicode=True, sort_keys=False)
    for i, depth in enumerate(deep):
        text = text.replace(f"{DEEP}{i}", "[" * depth + "]" * depth)
    return name, text


def _run(*args: str) -> Any:
    result = CliRunner().invoke(app, list(args))
    output = result.output
    assert result.exit_code in (0, 2), f"exit {result.exit_code} for {args[0]}: {output[-2000:]}"
    assert "Traceback" not in output, output[-4000:]
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


class _AddressSpaceLimit:
    """Lower this process's soft ``RLIMIT_AS`` to its current size plus ``extra_mb`` for a block,
    so a blow-up raises MemoryError (failing the example) instead of swapping the machine."""

    def __init__(self, extra_mb: int):
        self.extra = extra_mb << 20

    def __enter__(self) -> None:
        self.saved = resource.getrlimit(resource.RLIMIT_AS)
        size = int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()
        hard = self.saved[1]
        soft = size + self.extra if hard == resource.RLIM_INFINITY else min(size + self.extra, hard)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))

    def __exit__(self, *exc: object) -> None:
        resource.setrlimit(resource.RLIMIT_AS, self.saved)


def _check_example(tmp_dir: Path, case: tuple[str, str]) -> None:
    base, text = case
    path = tmp_dir / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    started = time.monotonic()
    with _AddressSpaceLimit(EXAMPLE_MB):
        validated = _run("validate", str(path))
        simulated = _run("simulate", str(path), "--max-pods", "200", "-o", "json")
    elapsed = time.monotonic() - started
    if validated.exit_code == 2:
        assert simulated.exit_code == 2, f"validate refused {base} but simulate accepted it:\n{validated.stderr[-2000:]}"
    assert elapsed < EXAMPLE_SECONDS, f"{base}: {elapsed:.1f}s"
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    assert rss_mb < MAX_RSS_MB, f"peak RSS {rss_mb:.0f} MB after {base}"


FUZZ_SETTINGS = settings(deadline=None, database=None, print_blob=True,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much])


def test_fuzz_validate_and_simulate(bases, tmp_path):
    @settings(FUZZ_SETTINGS, max_examples=CI_EXAMPLES)
    @given(case=mutated(bases))
    def check(case: tuple[str, str]) -> None:
        _check_example(tmp_path, case)

    check()


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KARPY_SLOW") != "1", reason="the 2,000-example profile runs with KARPY_SLOW=1")
def test_fuzz_validate_and_simulate_slow(bases, tmp_path):
    @settings(FUZZ_SETTINGS, max_examples=2000)
    @given(case=mutated(bases))
    def check(case: tuple[str, str]) -> None:
        _check_example(tmp_path, case)

    check()


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


@pytest.mark.timeout(240)
@pytest.mark.parametrize("hostile", ["alias-bomb", "deep", "replicas", "huge-cpu"])
def test_hostile_input_under_a_1gib_address_space_limit(examples_dir, tmp_path, hostile):
    docs = _docs(examples_dir / "workloads" / "inflate.yaml")
    container = docs[0]["spec"]["template"]["spec"]["containers"][0]
    if hostile == "alias-bomb":
        docs[0]["spec"]["junk"] = _alias_bomb(12, 12)
    elif hostile == "deep":
        container["env"] = DEEP
    elif hostile == "replicas":
        docs[0]["spec"]["replicas"] = 2**31 - 1
    else:
        container["resources"]["requests"]["cpu"] = "9223372036854775808"
    text = yaml.safe_dump_all(docs).replace(DEEP, "[" * 900 + "]" * 900)
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    nodepool = str(examples_dir / "nodepools" / "general-purpose.yaml")
    started = time.monotonic()  # simulate loads as validate does, then applies the pod cap
    proc = subprocess.run([sys.executable, "-m", "karpy_core.cli", "simulate", nodepool, str(path)], capture_output=True,
                          text=True, preexec_fn=_limit_memory, timeout=120)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: invalid input (1 problem):")
    assert time.monotonic() - started < 60
