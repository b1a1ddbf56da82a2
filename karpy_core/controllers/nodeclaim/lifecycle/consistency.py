"""Consistency (Karpenter ``nodeclaim/consistency``, ``nodeshape.go``): the Node must have the
shape its NodeClaim promised.

At most every :data:`CONSISTENCY_SCAN_SECONDS` per initialized claim, the Node's capacity must be
at least :data:`CONSISTENCY_MIN_FRACTION` of the NodeClaim's for every requested resource:
``ConsistentStateFound`` True, or False/``ConsistencyCheckFailed`` with a
``FailedConsistencyCheck`` event per shortfall.
"""

from __future__ import annotations

from karpy_core.controllers import events as karpenter_events
from karpy_core.controllers.conditions import CONSISTENT_STATE_FOUND, patch_conditions, set_condition, status_conditions
from karpy_core.controllers.nodeclaim.lifecycle.common import LifecycleDeps, log
from karpy_core.scheduling.resources import parse_resource_list
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.clock import iso
from karpy_core.utils.fields import map_of

__all__ = ["Consistency", "CONSISTENCY_SCAN_SECONDS", "CONSISTENCY_MIN_FRACTION"]

CONSISTENCY_SCAN_SECONDS = 10 * 60.0
"""Seconds between two consistency checks of one NodeClaim (Karpenter ``scanPeriod``)."""
CONSISTENCY_MIN_FRACTION = 0.9
"""Share of the NodeClaim's capacity the Node must report per requested resource (``nodeshape.go``)."""


class Consistency:
    """The node-shape check (see the module docstring)."""

    def __init__(self, deps: LifecycleDeps):
        self.deps = deps
        self._scanned: dict[str, float] = {}
        """NodeClaim uid -> epoch seconds of its last consistency check."""

    async def reconcile(self, nc: NodeClaimView, node: NodeView, now: float) -> None:
        """Check ``nc`` against ``node`` unless checked within :data:`CONSISTENCY_SCAN_SECONDS`."""
        d = self.deps
        uid = nc.uid or nc.name
        last = self._scanned.get(uid)
        if last is not None and now - last < CONSISTENCY_SCAN_SECONDS:
            return
        self._scanned[uid] = now
        if len(self._scanned) > 50_000:
            self._scanned = {k: t for k, t in self._scanned.items() if now - t < CONSISTENCY_SCAN_SECONDS}
        requested = nc.requests
        raw_expected = map_of(nc.raw, "status", "capacity")  # as written, for the message
        raw_have = map_of(node.raw, "status", "capacity")
        expected = parse_resource_list(raw_expected)
        have = node.capacity
        issues = []
        for r, v in sorted(requested.items()):
            if v <= 0 or expected.get(r, 0) <= 0:
                continue
            pct = have.get(r, 0) / expected[r]
            if pct < CONSISTENCY_MIN_FRACTION:
                issues.append(f"expected {raw_expected.get(r)} of resource {r}, but found {raw_have.get(r, '0')} "
                              f"({pct * 100:.1f}% of expected)")
        conds = status_conditions(nc.raw)
        stamp = iso(now)
        if issues:
            for issue in issues:
                log.info("failed consistency check: NodeClaim %s: %s", nc.name, issue)
                await d.publish(karpenter_events.failed_consistency_check(dict(nc.raw), issue))
            conds = set_condition(conds, CONSISTENT_STATE_FOUND, "False", stamp, "ConsistencyCheckFailed", "Consistency Check Failed")
        elif not nc.is_true(CONSISTENT_STATE_FOUND):
            conds = set_condition(conds, CONSISTENT_STATE_FOUND, "True", stamp)
        patch = patch_conditions(dict(nc.raw), conds)
        if patch is not None:
            await d.kube.patch("NodeClaim", nc.name, patch, status=True)
