"""Fuzz ``karpy validate`` and ``karpy simulate`` as a user runs them: separate processes, on mutated
copies of the repository's ``examples/`` manifests.

Each case takes a NodePool file and a workload file from ``examples/`` and applies 1-3 random
mutations to one document: replace a value (wrong types, huge or negative integers, int32/int64
edges, odd quantities and timestamps, Unicode, very long strings, null, deep nesting), drop a
field, add a label or annotation with a random key and value, duplicate a container, or rename a
key. Then ``karpy validate`` and ``karpy simulate --max-pods 200`` run on the mutated file (and
the other file of the pair) as subprocesses.

A case is a **bug** when a command prints a ``Traceback``, exits with anything but 0, 1 or 2, runs
longer than ``--hang`` seconds of CPU (default 20; CPU time, so a machine busy with other work is
not mistaken for a hang; such a case is re-run once) or is still running after ``max(120, 6 x
hang)`` seconds of wall time, or when validate accepts (0) what simulate refuses as invalid input (2).
Bugs are written to ``--out`` (a directory: each case's files and outputs) and counted.

Usage::

    .venv/bin/python hack/fuzz_cli.py --cases 200 --seed 1 --jobs 2 --out /tmp/karpy-fuzz

Prints one line per bug and a summary: cases, runs, exit codes seen, bugs by kind.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
KARPY = [sys.executable, "-m", "karpy_core.cli"]

VALUES: list[Any] = [
    None, True, False, 0, -1, 1, 2**31 - 1, 2**31, -(2**31) - 1, 2**63 - 1, 2**63, -(2**63) - 1, 10**30, 0.5, -0.0, 1e308,
    "", " ", "-", "1e2147483648", "1e-2147483648", "9" * 400, "0x10", "1.5.5", "\u0661\u0662", "\uff11Gi", "ключ", "🙂", "a" * 300,
    "2026-01-01", "2026-01-01T00:00:00Z", "12345", "NaN", "Infinity", "-1", "-1Gi", "500m", "1Ei", "16Ei", "999999999999Ti",
    "\u0000", "a\nb", "${UNSET}", "In", "Exists", "NotIn", "Gt", [], [None], [1, "a"], {}, {"a": {"b": {"c": None}}},
    {"ключ": "v"}, {"app": "x" * 100}, "Never", "0s", "-5m", "9999999999h", "1h1h", "*", ".", "..", "a/b/c", "/x",
]
"""Replacement values: types the field does not take, integer-format edges, quantities and
durations at and past their grammar, timestamps that are not RFC 3339, Unicode, long text."""

KEYS = ["ключ", "a/b/c", "/x", "Example.COM/x", "x" * 64, "ok", "karpenter.sh/nodepool", "kubernetes.io/hostname",
        "app", "", "-x", "a_b", "😀/x"]


def _examples() -> tuple[list[Path], list[Path]]:
    return sorted((REPO / "examples" / "nodepools").glob("*.yaml")), sorted((REPO / "examples" / "workloads").glob("*.yaml"))


def _paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys and indices) to a value inside ``doc``."""
    out: list[tuple[Any, ...]] = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.append((*prefix, k))
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out.append((*prefix, i))
            out += _paths(v, (*prefix, i))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def mutate(doc: dict[str, Any], rng: random.Random) -> list[str]:
    """Apply 1-3 random mutations to ``doc`` in place; returns what was done, for the report."""
    done = []
    for _ in range(rng.randint(1, 3)):
        paths = _paths(doc)
        if not paths:
            break
        path = rng.choice(paths)
        parent = _parent(doc, path)
        kind = rng.choices(["replace", "drop", "label", "annotation", "container", "rename", "deep"], [6, 2, 2, 2, 1, 1, 0.3])[0]
        if kind == "replace":
            value = copy.deepcopy(rng.choice(VALUES))
            parent[path[-1]] = value
            done.append(f"{path} = {json.dumps(value)[:60]}")
        elif kind == "drop":
            if isinstance(parent, dict):
                del parent[path[-1]]
            else:
                parent.pop(path[-1])
            done.append(f"drop {path}")
        elif kind in ("label", "annotation"):
            metas = [p for p in paths if p and p[-1] == "metadata" and isinstance(_parent(doc, p)[p[-1]], dict)]
            if not metas:
                continue
            meta = _parent(doc, m := rng.choice(metas))[m[-1]]
            key, value = rng.choice(KEYS), rng.choice(VALUES)
            bucket = meta.setdefault(f"{kind}s", {})
            if isinstance(bucket, dict):
                bucket[key] = value if rng.random() < 0.5 else str(value)
            done.append(f"{kind} {m} {key!r}")
        elif kind == "container":
            lists = [p for p in paths if p and p[-1] in ("containers", "initContainers")]
            if not lists:
                continue
            items = _parent(doc, c := rng.choice(lists))[c[-1]]
            if isinstance(items, list) and items:
                items.append(copy.deepcopy(items[0]))
            done.append(f"duplicate container at {c}")
        elif kind == "rename" and isinstance(parent, dict):
            value = parent.pop(path[-1])
            parent[str(path[-1]) + rng.choice(["_", "X", "ё", " "])] = value
            done.append(f"rename {path}")
        elif kind == "deep":
            nested: Any = "x"
            for _ in range(rng.choice([5, 60, 150])):
                nested = {"a": nested}
            parent[path[-1]] = nested
            done.append(f"deep {path}")
    return done


@dataclass
class Outcome:
    """One command's run: ``code`` (None when killed at the timeout), wall ``seconds``, output."""

    command: str
    code: int | None
    seconds: float
    stdout: str
    stderr: str


@dataclass
class Case:
    """A mutated pair of files and what the commands did with them."""

    number: int
    files: list[Path]
    mutations: list[str]
    outcomes: list[Outcome] = field(default_factory=list)
    bugs: list[str] = field(default_factory=list)


def run(command: str, files: list[Path], timeout: float) -> Outcome:
    """``karpy <command>`` on ``files`` in a subprocess (simulate with ``--max-pods 200``), killed
    after ``timeout`` seconds of wall time. ``seconds`` is the child's CPU time (user + system,
    from ``wait4``), so a machine busy with other work does not look like a hang."""
    extra = ["--max-pods", "200"] if command == "simulate" else []
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([*KARPY, command, *extra, *map(str, files)], stdout=out, stderr=err, text=True,
                                cwd=files[0].parent)
        deadline = time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                pid, status, usage = os.wait4(proc.pid, 0)
                status = -1
                break
            time.sleep(0.05)
        proc.returncode = 0  # reaped here: keep Popen from waiting on it again
        out.seek(0)
        err.seek(0)
        code = None if status == -1 else os.waitstatus_to_exitcode(status)
        return Outcome(command, code, usage.ru_utime + usage.ru_stime, out.read(), err.read())


def judge(case: Case, hang: float) -> None:
    """Fill ``case.bugs`` from its outcomes."""
    for o in case.outcomes:
        if "Traceback" in o.stdout or "Traceback" in o.stderr:
            case.bugs.append(f"traceback in {o.command}")
        if o.code is None:
            case.bugs.append(f"{o.command} killed (no exit within the wall-time limit; {o.seconds:.0f} s of CPU)")
        elif o.code not in (0, 1, 2):
            case.bugs.append(f"{o.command} exit {o.code}")
        elif o.seconds > hang:
            case.bugs.append(f"{o.command} took {o.seconds:.1f} s of CPU")
    codes = {o.command: o.code for o in case.outcomes}
    simulate = next((o for o in case.outcomes if o.command == "simulate"), None)
    if codes.get("validate") == 0 and simulate is not None and simulate.code == 2 \
            and simulate.stderr.startswith("error: invalid input") and "--max-pods" not in simulate.stderr:
        case.bugs.append("validate accepted what simulate refused")


def one_case(number: int, rng: random.Random, out: Path, hang: float) -> Case:
    nodepools, workloads = _examples()
    pair = [rng.choice(nodepools), rng.choice(workloads)]
    target = rng.randrange(2)
    docs = [d for d in yaml.safe_load_all(pair[target].read_text()) if d]
    mutations: list[str] = []
    if docs:
        index = rng.randrange(len(docs))
        mutations = [f"{pair[target].name} doc {index + 1}: {m}" for m in mutate(docs[index], rng)]
    where = out / f"case-{number:04d}"
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for i, path in enumerate(pair):
        copy_path = where / path.name
        copy_path.write_text(yaml.safe_dump_all(docs, allow_unicode=True, sort_keys=False) if i == target else path.read_text())
        files.append(copy_path)
    case = Case(number, files, mutations)
    for command in ("validate", "simulate"):
        case.outcomes.append(run(command, files, timeout=max(120.0, 6 * hang)))
    judge(case, hang)
    if any("took" in b or "killed" in b for b in case.bugs):  # again, alone-ish, before calling it a hang
        case.outcomes = [run(command, files, timeout=max(120.0, 6 * hang)) for command in ("validate", "simulate")]
        case.bugs = []
        judge(case, hang)
    (where / "result.json").write_text(json.dumps({
        "mutations": mutations, "bugs": case.bugs,
        "outcomes": [{"command": o.command, "code": o.code, "seconds": round(o.seconds, 2), "stdout": o.stdout[-4000:],
                      "stderr": o.stderr[-4000:]} for o in case.outcomes]}, indent=1, ensure_ascii=False))
    return case


def main(argv: list[str] | None = None) -> int:
    """Run the fuzzer; exit 1 when any case found a bug."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--hang", type=float, default=20.0, help="seconds a command may take")
    parser.add_argument("--out", type=Path, default=Path("/tmp/karpy-fuzz"))
    args = parser.parse_args(argv)
    rngs = [random.Random(args.seed * 1_000_003 + n) for n in range(args.cases)]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        cases = list(pool.map(lambda n: one_case(n, rngs[n], args.out, args.hang), range(args.cases)))
    codes = Counter(f"{o.command}={o.code}" for c in cases for o in c.outcomes)
    bugs = Counter(b.split(" in ")[0].split(" took")[0] for c in cases for b in c.bugs)
    for c in cases:
        if c.bugs:
            print(f"BUG case {c.number}: {'; '.join(c.bugs)} ({args.out / f'case-{c.number:04d}'}); {' | '.join(c.mutations)}")
    slowest = max((o.seconds for c in cases for o in c.outcomes), default=0.0)  # CPU seconds
    print(f"{len(cases)} cases, {sum(len(c.outcomes) for c in cases)} runs in {time.perf_counter() - t0:.0f} s; "
          f"exit codes {dict(sorted(codes.items()))}; most CPU in one run {slowest:.1f} s; "
          f"cases with a bug: {sum(1 for c in cases if c.bugs)} {dict(bugs)}")
    return 1 if any(c.bugs for c in cases) else 0


if __name__ == "__main__":
    raise SystemExit(main())
