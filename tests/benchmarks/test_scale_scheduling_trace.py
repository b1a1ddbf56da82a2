"""``benchmarks/scale_apiserver.py`` keeps kube-scheduler's binds and Unschedulable marks from
kube-apiserver's audit log (:func:`scale_apiserver.scheduling_trace`), to trace where the pods a
disruption moved went (issue 36, undone37). The events are shaped as kube-apiserver v1.36 writes
them at the Request level: a ``Binding`` for ``create pods/binding`` and kube-scheduler's
strategic merge patch for ``patch pods/status``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import scale_apiserver
from scale_apiserver import AUDIT_POLICY, CONTROLLER_USER, audit_counts, scheduling_trace

ADMIN = "karpy-admin"  # the dev cluster's components share this user


def event(user: str, verb: str, name: str, subresource: str, body: dict | None = None, when: str = "2026-12-07T12:39:36.5Z") -> str:
    ev = {"kind": "Event", "level": "Request" if body is not None else "Metadata", "stage": "ResponseComplete", "verb": verb,
          "user": {"username": user}, "stageTimestamp": when, "responseStatus": {"code": 201},
          "objectRef": {"resource": "pods", "namespace": "default", "name": name, "subresource": subresource}}
    if body is not None:
        ev["requestObject"] = body
    return json.dumps(ev)


UNSCHEDULABLE = {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                            "message": "0/53 nodes are available: 1 node(s) didn't match pod topology spread constraints."}]}}
LINES = [
    event(CONTROLLER_USER, "create", "t4-web-a", "eviction"),
    event(ADMIN, "patch", "t4-web-b", "status", UNSCHEDULABLE),
    event(ADMIN, "patch", "t4-web-c", "status", {"status": {"nominatedNodeName": "n1"}}),
    "not json",
    event(ADMIN, "create", "t4-web-b", "binding",
          {"kind": "Binding", "metadata": {"name": "t4-web-b"}, "target": {"kind": "Node", "name": "t4-spot-thwk7"}},
          when="2026-12-07T12:39:39.1Z"),
]


def test_the_trace_has_the_binds_and_the_unschedulable_marks_in_order(tmp_path: Path):
    path = tmp_path / "audit.log"
    path.write_text("\n".join(LINES) + "\n")
    assert scheduling_trace(path) == [
        {"time": "2026-12-07T12:39:36.5Z", "pod": "default/t4-web-b",
         "message": "0/53 nodes are available: 1 node(s) didn't match pod topology spread constraints."},
        {"time": "2026-12-07T12:39:39.1Z", "pod": "default/t4-web-b", "node": "t4-spot-thwk7"},
    ]
    assert scheduling_trace(tmp_path / "missing.log") == []


def test_the_request_counts_stay_the_controllers(tmp_path: Path):
    """kube-scheduler's events now in the log are not counted as the controller's requests."""
    path = tmp_path / "audit.log"
    path.write_text("\n".join(LINES) + "\n")
    counts, _ = audit_counts(path, 0)
    assert counts == {"create": 1, "evict": 1}


def test_the_policy_logs_the_binds_and_status_writes_of_others_at_the_request_level():
    rules = AUDIT_POLICY["rules"]
    assert rules[0] == {"level": "Metadata", "users": [scale_apiserver.CONTROLLER_USER]}  # first: the controller's stay Metadata
    assert rules[1]["level"] == "Request" and "users" not in rules[1]
    assert rules[1]["resources"] == [{"group": "", "resources": ["pods/binding", "pods/status"]}]
    assert rules[-1] == {"level": "None"}
