from __future__ import annotations

import pytest

from karpy_core.scheduling.requirements import Operator, Requirement, Requirements


def sel(*exprs: tuple[str, str, list[str]]) -> Requirements:
    return Requirements.from_selector_terms([{"key": k, "operator": op, "values": v} for k, op, v in exprs])


def test_gt_is_canonicalised_to_inclusive_bound_and_filters_in_values():
    reqs = sel(("gen", "Gt", ["2"]))
    r = reqs.get("gen")
    assert r is not None and r.gte == 3 and r.operator() == Operator.GT
    both = reqs.union_with(sel(("gen", "In", ["1", "2", "3", "5"])))
    gen = both.get("gen")
    assert gen is not None
    assert gen.values == frozenset({"3", "5"})
    assert gen.operator() == Operator.IN


def test_in_intersect_notin_and_exists():
    a = sel(("zone", "In", ["a", "b", "c"]))
    b = sel(("zone", "NotIn", ["b"]))
    ab = a.union_with(b).get("zone")
    assert ab is not None and ab.values == frozenset({"a", "c"})
    exists = a.union_with(sel(("zone", "Exists", []))).get("zone")
    assert exists is not None and exists.values == frozenset({"a", "b", "c"})


def test_conflicts_name_both_sides():
    template = sel(("kubernetes.io/arch", "In", ["amd64"]))
    msg = template.conflict(sel(("kubernetes.io/arch", "In", ["arm64"])))
    assert msg == "kubernetes.io/arch In [arm64] conflicts with kubernetes.io/arch In [amd64]"


def test_custom_label_must_be_defined_but_notin_and_well_known_need_not():
    template = sel(("team", "In", ["a"]))
    assert template.conflict(sel(("other", "In", ["x"]))) == "label 'other' is not set on the node (other In [x] required)"
    assert template.conflict(sel(("other", "NotIn", ["x"]))) is None
    assert template.conflict(sel(("other", "DoesNotExist", []))) is None
    assert template.conflict(sel(("topology.kubernetes.io/zone", "In", ["z"]))) is None


def test_exists_vs_does_not_exist_conflict_but_notin_vs_absent_is_fine():
    assert not Requirement.new("k", "Exists").intersects(Requirement.new("k", "DoesNotExist"))
    assert Requirement.new("k", "NotIn", ["a"]).intersects(Requirement.new("k", "DoesNotExist"))
    assert Requirement.new("k", "DoesNotExist").intersects(Requirement.new("k", "DoesNotExist"))


def test_matches_labels_semantics():
    reqs = sel(("a", "In", ["1"]), ("b", "NotIn", ["x"]), ("c", "DoesNotExist", []), ("n", "Lt", ["10"]))
    assert reqs.matches_labels({"a": "1", "n": "9"}) is None
    assert reqs.matches_labels({"a": "1", "n": "10"}) == "n <= 9 (node has n=10)"
    assert reqs.matches_labels({"a": "1", "n": "3", "c": "y"}) == "c DoesNotExist (node has c=y)"
    assert reqs.matches_labels({"n": "3"}) == "a In [1] (node has a absent)"


def test_gt_requires_single_integer():
    with pytest.raises(ValueError, match="exactly one integer"):
        Requirement.new("gen", "Gt", ["x"])
    with pytest.raises(ValueError, match="unknown operator"):
        Requirement.new("gen", "Near", ["1"])


def test_labels_only_single_in_values():
    reqs = sel(("a", "In", ["1"]), ("b", "In", ["1", "2"]), ("c", "Exists", []))
    assert reqs.labels() == {"a": "1"}
