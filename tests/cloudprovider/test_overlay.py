"""NodeOverlay rules (karpy_core.cloudprovider.overlay): prices, capacity, weight and conflicts, as
kubernetes-sigs/karpenter pkg/controllers/nodeoverlay (store.go, controller.go) decides them."""

from __future__ import annotations

from typing import Any

import pytest

from karpy_core.apis.labels import LABEL_ARCH, LABEL_INSTANCE_TYPE
from karpy_core.cloudprovider.launch import cheapest_launchable, launch_constraints
from karpy_core.cloudprovider.overlay import (
    OverlayRule,
    PoolTypes,
    adjusted_price,
    compile_overlays,
    launch_overlay,
    order_by_weight,
)
from karpy_core.cloudprovider.types import InstanceType, Offering
from karpy_core.scheduling.requirements import Requirement, Requirements
from tests.cloudprovider.test_launch_kernel import claim

FAMILY = "karpenter.k8s.aws/instance-family"


def itype(name: str, price: float, *, spot: float | None = None, zones: tuple[str, ...] = ("z1", "z2")) -> InstanceType:
    reqs = Requirements.of(Requirement.new(LABEL_INSTANCE_TYPE, "In", [name]), Requirement.new(LABEL_ARCH, "In", ["amd64"]),
                           Requirement.new(FAMILY, "In", [name.split(".")[0]]))
    offerings = [Offering(z, "on-demand", price) for z in zones]
    if spot is not None:
        offerings += [Offering(z, "spot", spot) for z in zones]
    return InstanceType(name, reqs, offerings, {"cpu": 2000, "memory": 8 << 30, "pods": 110})


def overlay(name: str, *, weight: int | None = None, reqs: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"requirements": reqs or [], **spec}
    if weight is not None:
        body["weight"] = weight
    return {"apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay", "metadata": {"name": name}, "spec": body}


def of_type(name: str) -> list[dict[str, Any]]:
    return [{"key": LABEL_INSTANCE_TYPE, "operator": "In", "values": [name]}]


TYPES = [itype("m5.large", 0.096, spot=0.04), itype("c5.large", 0.085), itype("r5.large", 0.126)]
POOL = PoolTypes("default", {"team": "a"}, TYPES)


def prices(types: list[InstanceType], name: str) -> dict[tuple[str, str], float]:
    it = next(t for t in types if t.name == name)
    return {(o.zone, o.capacity_type): round(o.price, 6) for o in it.offerings}


@pytest.mark.parametrize(("change", "expected"), [
    ("5.0", 5.0), ("0", 0.0),  # price: replaces
    ("+0.5", 1.5), ("-0.25", 0.75), ("-2", 0.0),  # absolute deltas, never below 0
    ("+10%", 1.1), ("-15%", 0.85), ("-100%", 0.0), ("+.5%", 1.005),  # percentages
    ("", 1.0),
])
def test_adjusted_price_absolute_and_percentage(change: str, expected: float) -> None:
    assert adjusted_price(1.0, change) == pytest.approx(expected)


def test_price_adjustment_applies_to_selected_offerings_only() -> None:
    store = compile_overlays([overlay("spot-discount", priceAdjustment="-50%",
                                      reqs=[*of_type("m5.large"), {"key": "karpenter.sh/capacity-type", "operator": "In",
                                                                   "values": ["spot"]}])], [POOL])
    out = store.apply_all("default", TYPES)
    assert prices(out, "m5.large") == {("z1", "on-demand"): 0.096, ("z2", "on-demand"): 0.096, ("z1", "spot"): 0.02, ("z2", "spot"): 0.02}
    assert prices(out, "c5.large") == prices(TYPES, "c5.large")
    assert out[1] is TYPES[1] and out[0] is not TYPES[0]  # unselected types are the provider's own objects
    assert TYPES[0].offerings[2].price == 0.04  # the provider's type is never mutated
    assert store.apply_all("default", TYPES)[0] is out[0]  # the same overlaid object while the base is the same


def test_absolute_price_and_zone_requirement() -> None:
    store = compile_overlays([overlay("flat", price="0.01", reqs=[{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                                    "values": ["z2"]}])], [POOL])
    out = store.apply_all("default", TYPES)
    for it in out:
        assert {o.zone: o.price for o in it.offerings if o.capacity_type == "on-demand"}["z2"] == 0.01
        assert {o.zone: o.price for o in it.offerings if o.capacity_type == "on-demand"}["z1"] == prices(TYPES, it.name)[("z1", "on-demand")]


def test_requirements_match_nodepool_name_and_template_labels() -> None:
    other = PoolTypes("other", {}, TYPES)
    store = compile_overlays([
        overlay("by-pool", priceAdjustment="+1", reqs=[{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}]),
        overlay("by-label", priceAdjustment="+2", weight=5, reqs=[{"key": "team", "operator": "In", "values": ["a"]}]),
        overlay("by-missing-label", price="9", weight=7, reqs=[{"key": "unknown", "operator": "Exists"}]),
    ], [POOL, other])
    assert prices(store.apply_all("default", TYPES), "c5.large")[("z1", "on-demand")] == pytest.approx(2.085)  # weight 5 wins
    assert prices(store.apply_all("other", TYPES), "c5.large") == prices(TYPES, "c5.large")  # neither selects "other"
    assert "by-missing-label" in store.applied and store.empty() is False


def test_higher_weight_wins_and_lower_weight_fills_the_rest() -> None:
    store = compile_overlays([
        overlay("base", priceAdjustment="+10%", weight=1),  # every type
        overlay("m5-deal", price="0.05", weight=10, reqs=of_type("m5.large")),
    ], [POOL])
    out = store.apply_all("default", TYPES)
    assert prices(out, "m5.large")[("z1", "on-demand")] == 0.05
    assert prices(out, "c5.large")[("z1", "on-demand")] == pytest.approx(0.0935)
    assert store.conflicts == [] and sorted(store.applied) == ["base", "m5-deal"]
    change = store.changes_by_name("default", "m5.large")[0]
    assert (change.overlay, change.weight, change.before, change.after) == ("m5-deal", 10, 0.096, 0.05)
    assert change.text() == "price of m5.large on-demand z1 0.096 -> 0.05 USD/h by NodeOverlay m5-deal (weight 10)"


def test_equal_weight_price_overlays_conflict_and_the_later_name_wins() -> None:
    store = compile_overlays([overlay("a-overlay", price="1", reqs=of_type("m5.large")),
                              overlay("b-overlay", price="2", reqs=[{"key": FAMILY, "operator": "In", "values": ["m5"]}])], [POOL])
    assert store.conflicts == ["a-overlay"] and store.applied == ["b-overlay"]
    assert set(prices(store.apply_all("default", TYPES), "m5.large").values()) == {2.0}
    # disjoint selections of one weight do not conflict
    store = compile_overlays([overlay("a", price="1", reqs=of_type("m5.large")), overlay("b", price="2", reqs=of_type("c5.large"))], [POOL])
    assert store.conflicts == []


def test_order_by_weight_then_reverse_name() -> None:
    rules = [OverlayRule.from_object(overlay(n, weight=w)) for n, w in (("a", 1), ("b", 1), ("c", 5), ("d", None))]
    assert [r.name for r in order_by_weight(rules)] == ["c", "b", "a", "d"]


def test_capacity_merges_per_resource_and_conflicts_on_the_same_resource_at_equal_weight() -> None:
    store = compile_overlays([
        overlay("hugepages", capacity={"hugepages-2Mi": "1Gi"}, weight=2),
        overlay("fpga", capacity={"example.com/fpga": "2", "hugepages-2Mi": "2Gi"}, weight=1, reqs=of_type("m5.large")),
    ], [POOL])
    m5 = next(t for t in store.apply_all("default", TYPES) if t.name == "m5.large")
    assert m5.capacity["hugepages-2Mi"] == 1 << 30  # the weight-2 overlay keeps its resource
    assert m5.capacity["example.com/fpga"] == 2 and m5.allocatable["example.com/fpga"] == 2
    assert m5.capacity["cpu"] == 2000  # the basics stay
    store = compile_overlays([overlay("x", capacity={"hugepages-2Mi": "1Gi"}), overlay("y", capacity={"hugepages-2Mi": "2Gi"})], [POOL])
    assert store.conflicts == ["x"]
    store = compile_overlays([overlay("x", capacity={"hugepages-1Gi": "1Gi"}), overlay("y", capacity={"hugepages-2Mi": "2Gi"})], [POOL])
    assert store.conflicts == []  # other resources at the same weight merge


def test_a_conflicting_overlay_is_applied_nowhere() -> None:
    other = PoolTypes("other", {}, TYPES)
    store = compile_overlays([
        overlay("z-first", price="1", reqs=[{"key": "karpenter.sh/nodepool", "operator": "In", "values": ["default"]}, *of_type("m5.large")]),
        overlay("a-second", price="3"),  # conflicts on default/m5.large, would also price "other"
    ], [POOL, other])
    assert store.conflicts == ["a-second"]
    assert prices(store.apply_all("other", TYPES), "m5.large") == prices(TYPES, "m5.large")


def test_runtime_validation_names_the_problem() -> None:
    store = compile_overlays([
        overlay("bad-capacity", capacity={"cpu": "1"}),
        overlay("bad-price", price="5", priceAdjustment="+1%"),
        overlay("bad-op", reqs=[{"key": "k", "operator": "NotIn"}]),
    ], [POOL])
    assert store.invalid == {
        "bad-capacity": "invalid capacity: cpu in resource, restricted",
        "bad-price": "cannot set both 'price' and 'priceAdjustment'",
        "bad-op": "requirements[0]: key k with operator NotIn must have a value defined",
    }
    assert store.empty()


def test_the_launch_kernel_ranks_overlaid_types_while_a_launch_overlay_is_set() -> None:
    store = compile_overlays([overlay("deal", price="0.01", weight=10, reqs=of_type("r5.large"))], [PoolTypes("p", {}, TYPES)])
    c = launch_constraints(claim([]))
    assert cheapest_launchable(TYPES, c).instance_type.name == "m5.large"  # spot 0.04 without overlays
    with launch_overlay(store, "p"):
        choice = cheapest_launchable(TYPES, c)
    assert (choice.instance_type.name, choice.offering.price) == ("r5.large", 0.01)
    assert cheapest_launchable(TYPES, c).instance_type.name == "m5.large"  # reset after the block


def test_reserved_offerings_keep_their_reservation_and_are_keyed_by_it() -> None:
    base = itype("m5.large", 0.096)
    reqs = Requirements.of(*(r for r in base.requirements if r.key != "karpenter.sh/capacity-type"))  # recomputed from the offerings
    it = InstanceType(base.name, reqs, [*base.offerings, Offering("z1", "reserved", 0.0001, reservation_id="cr-a", reservation_capacity=2),
                                        Offering("z1", "reserved", 0.0002, reservation_id="cr-b", reservation_capacity=1)], base.capacity)
    store = compile_overlays([
        overlay("reserved-fee", priceAdjustment="+0.01", reqs=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["reserved"]}]),
    ], [PoolTypes("p", {}, [it])])
    (out,) = store.apply_all("p", [it])
    reserved = {o.reservation_id: (round(o.price, 6), o.reservation_capacity) for o in out.offerings if o.capacity_type == "reserved"}
    assert reserved == {"cr-a": (0.0101, 2), "cr-b": (0.0102, 1)}
    assert store.conflicts == []


def test_a_price_beyond_any_instance_is_refused_not_made_inf() -> None:
    """The CRD's patterns allow any number of digits; 400 of them parsed to ``inf`` and the next
    provisioning pass never finished (fresh-user trial, issue 35)."""
    huge = "9" * 400
    store = compile_overlays([
        overlay("huge-adjustment", priceAdjustment=f"+{huge}"),
        overlay("huge-percent", priceAdjustment=f"+{huge}%"),
        overlay("huge-price", price=huge),
        overlay("fine", priceAdjustment="+999999"),
    ], [POOL])
    assert set(store.invalid) == {"huge-adjustment", "huge-percent", "huge-price"}
    assert all("beyond 1,000,000" in why for why in store.invalid.values())
