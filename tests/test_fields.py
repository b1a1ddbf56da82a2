"""Nested reads of API dicts (``karpy_core.utils.fields``), the conditions list a status patch
starts from (``controllers.conditions.status_conditions``) and the NodeClaim view's typed reads
that replaced ``.get(...) or {}`` chains in the controllers."""

from __future__ import annotations

from typing import Any

from karpy_core.controllers.conditions import patch_conditions, set_condition, status_conditions
from karpy_core.state.views import NodeClaimView, NodeView
from karpy_core.utils.fields import field_of, map_of

VA: dict[str, Any] = {"metadata": {"name": "csi-1"},
                      "spec": {"nodeName": "n1", "source": {"persistentVolumeName": "pv-1"}, "attacher": None}}


def test_field_of_walks_the_path_and_answers_none_for_any_missing_step() -> None:
    assert field_of(VA, "spec", "source", "persistentVolumeName") == "pv-1"
    assert field_of(VA, "spec", "nodeName") == "n1"
    assert field_of(VA, "spec", "source", "missing") is None
    assert field_of(VA, "status", "anything") is None  # no status at all
    assert field_of(VA, "spec", "attacher", "name") is None  # a null on the way
    assert field_of(VA, "spec", "nodeName", "deeper") is None  # a string on the way, not a map
    assert field_of(None, "spec") is None
    assert field_of(VA) is VA


def test_map_of_gives_the_apis_own_map_or_an_empty_one() -> None:
    assert map_of(VA, "spec", "source") is VA["spec"]["source"]
    assert map_of(VA, "spec", "attacher") == {}
    assert map_of(VA, "spec", "nodeName") == {}  # not a map
    assert map_of(None, "metadata") == {}


def test_status_conditions_is_a_new_list_patch_conditions_compares_against() -> None:
    claim: dict[str, Any] = {"metadata": {"name": "c"}, "status": {"conditions": [
        {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": "t0"}]}}
    conds = status_conditions(claim)
    assert conds == claim["status"]["conditions"] and conds is not claim["status"]["conditions"]
    assert status_conditions({"metadata": {}}) == [] and status_conditions({"status": None}) == [] and status_conditions(None) == []
    assert patch_conditions(claim, conds) is None
    changed = set_condition(conds, "Registered", "True", "t1")
    assert patch_conditions(claim, changed) == {"status": {"conditions": changed}}
    assert len(claim["status"]["conditions"]) == 1  # the object itself is untouched


def test_nodeclaim_and_node_views_read_what_the_controllers_used_to_dig_for() -> None:
    ref = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}
    claim = NodeClaimView.of({"metadata": {"name": "c", "deletionTimestamp": "2026-12-06T10:00:00Z"},
                              "spec": {"nodeClassRef": ref, "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}}})
    assert dict(claim.node_class_ref) == ref
    assert claim.requests["cpu"] == 1500 and claim.requests["memory"] == 2**30
    assert claim.deletion_timestamp == "2026-12-06T10:00:00Z"
    bare = NodeClaimView.of({"metadata": {"name": "d"}, "spec": {}})
    assert dict(bare.node_class_ref) == {} and bare.requests == {} and bare.deletion_timestamp == ""
    node = NodeView.of({"metadata": {"name": "n", "finalizers": ["karpenter.sh/termination"]}})
    assert node.finalizers == ("karpenter.sh/termination",) and node.deletion_timestamp == ""
