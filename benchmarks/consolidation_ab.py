"""Before/after of one consolidation pass: this checkout against another (``--base``), in one run.

Each measurement is a fresh process (nothing parsed or memoized before the pass) that imports
``benchmarks/consolidation_pass.py`` *from the checkout measured* (so ``karpy_core`` is that
checkout's), builds a shape, and times :func:`plan_disruption` twice on the same snapshot: the
first pass (cold: every pod parsed) and a second one (warm), in CPU seconds of the pass only
(``time.process_time``; building the snapshot is not timed). The checkouts alternate, ``--repeats``
times each, and the medians are compared as ratios (this / base). The decisions of both passes
(the command and every :class:`~karpy_core.controllers.disruption.decisions.NodeDecision`) are
hashed in each process: the report says whether both checkouts decided the same.

Run with ``.venv/bin/python benchmarks/consolidation_ab.py --base ../other-checkout --shapes topology converged -- 5000``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, importlib.util, json, sys
tree, shape, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, tree)
spec = importlib.util.spec_from_file_location("consolidation_pass", tree + "/benchmarks/consolidation_pass.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
import karpy_core
snap, types = bench.SHAPE_BUILDERS[shape](n)
cold, plan, log = bench.timed(snap, types)
warm, plan2, log2 = bench.timed(snap, types)
def digest(plan, log):
    text = json.dumps([plan.describe() if plan else None, [d.to_dict() for d in log]], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
print(json.dumps({"tree": karpy_core.__file__, "cold": cold, "warm": warm, "pods": len(snap.pod_views),
                  "command": plan.describe() if plan else None, "decisions": len(log),
                  "digest": digest(plan, log), "digest_again": digest(plan2, log2)}))
"""


def measure(tree: Path, shape: str, n: int) -> dict[str, Any]:
    """One fresh process's cold and warm pass over ``shape`` at ``n`` nodes with ``tree``'s code.

    Raises:
        subprocess.CalledProcessError: the child failed (its stderr is shown).
    """
    out = subprocess.run([sys.executable, "-c", CHILD, str(tree), shape, str(n)], check=True, capture_output=True, text=True)
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if not row["tree"].startswith(str(tree)):
        raise SystemExit(f"{tree}: imported karpy_core from {row['tree']}")
    return row


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("sizes", nargs="*", type=int, default=[5000])
    ap.add_argument("--base", type=Path, required=True, help="the other checkout (e.g. /work/main)")
    ap.add_argument("--shapes", nargs="*", default=["topology", "converged"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    trees = {"base": args.base.resolve(), "this": HERE}
    for shape in args.shapes:
        for n in args.sizes:
            rows: dict[str, list[dict[str, Any]]] = {"base": [], "this": []}
            for _ in range(args.repeats):
                for name, tree in trees.items():
                    rows[name].append(measure(tree, shape, n))
            med = {k: (statistics.median(r["cold"] for r in v), statistics.median(r["warm"] for r in v)) for k, v in rows.items()}
            digests = {k: {(r["digest"], r["digest_again"]) for r in v} for k, v in rows.items()}
            same = len(digests["base"] | digests["this"]) == 1
            b, t = med["base"], med["this"]
            print(f"{shape:>9} {n:>6} nodes, {rows['this'][0]['pods']:>6} pods, {rows['this'][0]['decisions']} decisions")
            for k in ("base", "this"):
                print(f"{'':>9} {k:<4} cold " + " ".join(f"{r['cold']:5.2f}" for r in rows[k]) + f"  (median {med[k][0]:5.2f} s)"
                      f"   warm " + " ".join(f"{r['warm']:5.2f}" for r in rows[k]) + f"  (median {med[k][1]:5.2f} s)")
            print(f"{'':>9} this/base: cold {t[0] / b[0]:.2f}, warm {t[1] / b[1]:.2f}; decisions identical: {'yes' if same else 'NO'}"
                  f" -> {rows['this'][0]['command'] or 'no command'}")
            if not same:
                print(f"{'':>9} base {sorted(digests['base'])} this {sorted(digests['this'])}")


if __name__ == "__main__":
    main(sys.argv[1:])
