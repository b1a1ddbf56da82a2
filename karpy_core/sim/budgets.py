"""``karpy budgets``: a preview of each NodePool's disruption budgets over the next 24 hours.

What Karpenter users ask for in kubernetes-sigs/karpenter#2344: how many nodes may be disrupted
now, per reason, and when that changes. The counting is the disruption controller's own
(:func:`karpy_core.controllers.disruption.budgets.preview_budgets`, Karpenter's
``GetAllowedDisruptionsByReason``: the most restrictive active budget wins, percentages of the
pool's node count rounded up); this module only finds the node counts and renders the steps.

Node counts, per NodePool, first found of: ``--nodes POOL=N``; ``--nodes N`` (every pool); the
Nodes in the given manifests labelled ``karpenter.sh/nodepool: POOL`` (not deleting); the
NodeClaims labelled so; else 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from karpy_core.apis.labels import LABEL_NODEPOOL
from karpy_core.apis.nodepool import Budget
from karpy_core.controllers.disruption.budgets import CRON_YEARS_SEARCHED, PREVIEW_ALL, BudgetStep, next_tick, preview_budgets
from karpy_core.controllers.disruption.decisions import DisruptionReason
from karpy_core.errors import ConfigurationError
from karpy_core.state.views import NodePoolView

__all__ = ["PoolPreview", "parse_node_counts", "preview", "render_json", "render_table", "parse_at"]

COLUMNS = (*(r.value for r in DisruptionReason), PREVIEW_ALL)
"""Reasons in the table's column order, then ``all``."""


@dataclass(frozen=True)
class PoolPreview:
    """One NodePool's preview: its node count (and where it came from), budgets and steps."""

    nodepool: str
    nodes: int
    nodes_from: str
    budgets: list[Budget]
    steps: list[BudgetStep]


MAX_NODE_COUNT = 2**31 - 1
"""The largest ``--nodes`` count: an int32, as Kubernetes counts."""


def parse_node_counts(values: Sequence[str]) -> tuple[int | None, dict[str, int]]:
    """``--nodes`` values -> (count for every pool or None, per-pool counts).

    Raises:
        ConfigurationError: a value that is neither ``N`` nor ``POOL=N`` with 0 <= N <=
            :data:`MAX_NODE_COUNT`, or a NodePool (or the count of every pool) given twice.
    """
    every: int | None = None
    per: dict[str, int] = {}
    for v in values:
        name, sep, count = v.rpartition("=")
        text = count.strip()
        if not (text.isascii() and text.isdigit()) or (sep and not name.strip()):
            raise ConfigurationError(f"--nodes: {v!r} is not N or NODEPOOL=N (a count >= 0)")
        if int(text) > MAX_NODE_COUNT:  # a count no cluster holds, shown back as one (trial 19)
            raise ConfigurationError(f"--nodes: {v!r}: a node count is at most {MAX_NODE_COUNT:,} (an int32)")
        if sep:
            if name.strip() in per:
                raise ConfigurationError(f"--nodes: NodePool {name.strip()} is given twice ({name.strip()}={per[name.strip()]} "
                                         f"and {v}); give each NodePool once")
            per[name.strip()] = int(text)
        else:
            if every is not None:
                raise ConfigurationError(f"--nodes: the count of every NodePool is given twice ({every} and {v}); give it once")
            every = int(text)
    return every, per


def parse_at(text: str | None, now: float) -> float:
    """``--at``: ISO 8601 (``2026-12-07T08:00``, ``...Z`` or with an offset; naive times are UTC)
    -> seconds since the epoch; ``now`` when None.

    Raises:
        ConfigurationError: not an ISO 8601 time, or one written as ISO 8601 that does not exist
            (``2026-02-29``: the day out of range for its month, said so).
    """
    if text is None:
        return now
    try:
        t = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        if not str(exc).startswith("Invalid isoformat string"):  # written as ISO 8601, but no such time
            raise ConfigurationError(f"--at: {text!r} is no such time: {exc} (an ISO 8601 time such as "
                                     "2026-12-07T08:00Z)") from exc
        raise ConfigurationError(f"--at: {text!r} is not an ISO 8601 time such as 2026-12-07T08:00Z") from exc
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    if not AT_EARLIEST <= t <= AT_LATEST:
        # the preview's day and the budget schedules' previous and next firings must stay within
        # the years a datetime holds ("year 0 is out of range", an OverflowError traceback: trial 19)
        raise ConfigurationError(f"--at: {text!r} is outside the times budgets previews ({AT_EARLIEST:%Y-%m-%d} to "
                                 f"{AT_LATEST:%Y-%m-%d}, UTC)")
    return t.timestamp()


AT_EARLIEST = datetime(1971, 1, 1, tzinfo=UTC)
"""The earliest ``--at``: a budget schedule's last firing before it is looked up (years back at most)."""
AT_LATEST = datetime(9900, 12, 31, tzinfo=UTC)
"""The latest ``--at``: the 24 hours previewed and a schedule's next firing after them stay within
``datetime``'s years (9999 at most)."""


def _manifest_counts(objects: Sequence[Mapping[str, Any]], kind: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for o in objects:
        meta = o.get("metadata") or {}
        pool = (meta.get("labels") or {}).get(LABEL_NODEPOOL)
        if o.get("kind") == kind and pool and not meta.get("deletionTimestamp"):
            out[pool] = out.get(pool, 0) + 1
    return out


def preview(nodepools: Sequence[Mapping[str, Any]], objects: Sequence[Mapping[str, Any]], start: float, *,
            every: int | None = None, per_pool: Mapping[str, int] | None = None,
            horizon: float = 24 * 3600.0) -> list[PoolPreview]:
    """The preview of each NodePool (name order) from ``start`` (epoch seconds) over ``horizon``
    seconds. ``objects`` are the other manifests (Nodes and NodeClaims give node counts). Each
    NodePool is parsed by the API model (:class:`~karpy_core.state.views.NodePoolView`), the
    budgets as the disruption controller reads them.

    Raises:
        ConfigurationError: ``per_pool`` names a NodePool that is not given, or a NodePool does
            not validate.
    """
    per_pool = dict(per_pool or {})
    names = {str(np["metadata"]["name"]) for np in nodepools}
    unknown = sorted(set(per_pool) - names)
    if unknown:
        raise ConfigurationError(f"--nodes: no NodePool named {', '.join(unknown)} among the manifests")
    nodes, claims = _manifest_counts(objects, "Node"), _manifest_counts(objects, "NodeClaim")
    out = []
    for np in sorted(nodepools, key=lambda n: str(n["metadata"]["name"])):
        name = str(np["metadata"]["name"])
        if name in per_pool:
            total, where = per_pool[name], "--nodes"
        elif every is not None:
            total, where = every, "--nodes"
        elif name in nodes:
            total, where = nodes[name], "Nodes in the manifests"
        elif name in claims:
            total, where = claims[name], "NodeClaims in the manifests"
        else:
            total, where = 0, (f"none found: no Node or NodeClaim labelled {LABEL_NODEPOOL}={name} in the files; "
                               "--nodes N previews a pool of N nodes")
        view = NodePoolView.of(dict(np))
        if not view.valid:
            raise ConfigurationError(f"NodePool {name} does not validate: {view.error}")
        budgets = list(view.budgets)
        out.append(PoolPreview(name, total, where, budgets, preview_budgets(budgets, total, start, horizon=horizon)))
    return out


UNLIMITED = "unlimited"
"""Shown where no budget is active for a reason (Karpenter's MaxInt32): every node may go."""


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _budget_text(b: Budget) -> str:
    text = f"nodes={b.nodes}"
    if b.reasons:
        text += f" reasons={','.join(b.reasons)}"
    if b.schedule:
        text += f" schedule={b.schedule!r} duration={b.duration}"
    return text


def render_table(previews: Sequence[PoolPreview], start: float, horizon: float = 24 * 3600.0) -> str:
    """The preview as text: per NodePool its budgets, then one row per step (time UTC, allowed
    nodes per reason and ``all``, ``unlimited`` where no budget is active for it, the active
    budgets as ``budget[i]``)."""
    lines = [f"disruption budgets from {_iso(start)} for {horizon / 3600:g}h (UTC)"]
    for p in previews:
        lines.append("")
        lines.append(f"NodePool {p.nodepool}: {p.nodes} node(s) ({p.nodes_from})")
        for i, b in enumerate(p.budgets):
            never = b.schedule and next_tick(b.schedule, start) is None
            lines.append(f"  budget[{i}] {_budget_text(b)}" + (
                f" (never fires: no tick within {CRON_YEARS_SEARCHED} years; Karpenter's cron then answers"
                " its zero time, so the budget is always active)" if never else ""))
        header = ["FROM", *(c.upper() for c in COLUMNS), "ACTIVE BUDGETS"]
        rows = [[_iso(s.at), *(UNLIMITED if s.allowed[c] is None else str(s.allowed[c]) for c in COLUMNS),
                 ",".join(f"budget[{i}]" for i in s.active) or "-"] for s in p.steps]  # not a bare 0: read as a count (trial 23)
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        for r in [header, *rows]:
            lines.append("  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip())
    return "\n".join(lines)


def render_json(previews: Sequence[PoolPreview], start: float, horizon: float = 24 * 3600.0) -> dict[str, Any]:
    """The preview as a JSON-ready dict: ``{from, hours, nodepools: [{name, nodes, nodesFrom,
    budgets, steps: [{from, allowed: {Empty, Drifted, Underutilized, all}, activeBudgets}]}]}``;
    an allowance is ``null`` where no budget is active for the reason (unlimited)."""
    return {
        "from": _iso(start),
        "hours": horizon / 3600,
        "nodepools": [
            {"name": p.nodepool, "nodes": p.nodes, "nodesFrom": p.nodes_from,
             "budgets": [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in p.budgets],
             "steps": [{"from": _iso(s.at), "allowed": dict(s.allowed), "activeBudgets": list(s.active)} for s in p.steps]}
            for p in previews
        ],
    }
