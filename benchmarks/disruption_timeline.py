"""Where a settle's seconds go: the disruption commands in a karpy controller log, one line each,
and a summary (issue 36: the scale-in settled in 454 s against Karpenter's 793 s, the goal a third).

Reads the JSON log lines karpy's controller writes (``--keep-logs`` of
``benchmarks/scale_apiserver.py`` or ``benchmarks/controller_apiserver.py``) and, for each
command, the time it was decided (``disruption decided``), the time its nodes were tainted and
its pods evicted (``disrupting node(s)``: after the validation wait), and the time its last node
was deleted (``deleted node`` of those nodes). It prints, from ``--since`` to ``--until`` (UTC
``HH:MM:SS``; default the whole log):

* each command: decided at (seconds from the window's start), method, nodes, seconds of
  validation (decided -> disrupting), seconds of drain (disrupting -> last node deleted);
* the summary: commands, nodes disrupted, commands invalidated, and the window split into the
  seconds with a command in validation, in drain, and with none (waiting for ``consolidateAfter``,
  the 10 s poll or a pass that found nothing). Validations run one at a time and a command's
  drain overlaps the next one's validation, so the split counts drain only outside validation;
* the NodePools with the most nodes disrupted (the NodePool is the node name without its last
  ``-suffix``, as karpy and Karpenter name NodeClaims): a NodePool whose budget allows one node
  at a time (Karpenter's default ``nodes: 10%`` of fewer than 20 nodes, rounded up) needs one
  command, 15 s of validation, per node.

Run: ``.venv/bin/python benchmarks/disruption_timeline.py LOG [--since HH:MM:SS] [--until HH:MM:SS]``
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


@dataclass
class Command:
    """One disruption command: ``nodes`` (names), ``method``; times in epoch seconds (None: not seen)."""

    nodes: tuple[str, ...]
    method: str
    decided: float
    disrupting: float | None = None
    deleted: dict[str, float] = field(default_factory=dict)

    @property
    def done(self) -> float | None:
        """When its last node was deleted (None while any is left)."""
        return max(self.deleted.values()) if len(self.deleted) == len(self.nodes) else None


def _ts(line: dict[str, object]) -> float:
    return datetime.fromisoformat(str(line["time"]).replace("Z", "+00:00")).timestamp()


def _node_names(line: dict[str, object]) -> tuple[str, ...]:
    node = line.get("Node")
    name = node.get("name", "") if isinstance(node, dict) else ""
    return tuple(n for n in str(name).split(",") if n)


def read(path: Path, since: str | None, until: str | None) -> tuple[list[Command], int, float, float]:
    """The commands decided between ``since`` and ``until`` (UTC ``HH:MM:SS``), the commands
    invalidated, and the window's start and end (epoch seconds)."""
    commands: list[Command] = []
    open_by_node: dict[str, Command] = {}
    invalidated = 0
    first = last = None
    for raw in path.read_text().splitlines():
        if not raw.startswith("{"):
            continue
        line = json.loads(raw)
        clock = str(line.get("time", ""))[11:19]
        if (since and clock < since) or (until and clock > until):
            continue
        t = _ts(line)
        first = t if first is None else first
        last = t
        msg = line.get("message")
        if msg == "disruption decided":
            cmd = Command(_node_names(line), str(line.get("method", "")), t)
            commands.append(cmd)
            for n in cmd.nodes:
                open_by_node[n] = cmd
        elif msg == "disrupting node(s)":
            for n in (d["Node"]["name"] for d in line.get("disrupted-nodes") or () if isinstance(d, dict)):
                if n in open_by_node and open_by_node[n].disrupting is None:
                    open_by_node[n].disrupting = t
        elif msg == "disruption invalidated":
            invalidated += 1
        elif msg == "deleted node":
            node = line.get("Node")
            name = node.get("name") if isinstance(node, dict) else None
            if name in open_by_node:
                open_by_node.pop(name).deleted[name] = t
    return commands, invalidated, first or 0.0, last or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("log", type=Path)
    parser.add_argument("--since", help="UTC HH:MM:SS")
    parser.add_argument("--until", help="UTC HH:MM:SS")
    args = parser.parse_args()
    commands, invalidated, start, end = read(args.log, args.since, args.until)
    validating = 0.0
    busy: list[tuple[float, float]] = []
    print(f"{'at s':>7} {'method':28} {'nodes':>5} {'valid s':>8} {'drain s':>8}")
    for c in commands:
        v = (c.disrupting - c.decided) if c.disrupting is not None else None
        d = (c.done - c.disrupting) if c.done is not None and c.disrupting is not None else None
        validating += v or 0.0
        if c.disrupting is not None:
            busy.append((c.decided, c.done or c.disrupting))
        print(f"{c.decided - start:7.1f} {c.method:28} {len(c.nodes):5d} "
              f"{v if v is not None else float('nan'):8.1f} {d if d is not None else float('nan'):8.1f}")
    total = end - start
    covered = _union(busy)
    print(f"\n{len(commands)} commands, {sum(len(c.nodes) for c in commands)} nodes, {invalidated} invalidated; "
          f"window {total:.0f} s: validation {validating:.0f} s, drain outside validation "
          f"{max(0.0, covered - validating):.0f} s, no command {max(0.0, total - covered):.0f} s")
    pools = Counter(n.rsplit("-", 1)[0] for c in commands if c.disrupting is not None for n in c.nodes)
    print("nodes disrupted by NodePool (most first): " + ", ".join(f"{p} {k}" for p, k in pools.most_common(5)))


def _union(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of the (start, end) ``spans``."""
    total, reach = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > reach:
            total += b - max(a, reach)
            reach = b
    return total


if __name__ == "__main__":
    main()
