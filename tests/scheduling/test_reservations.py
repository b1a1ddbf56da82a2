"""Capacity reservations in the scheduler: reserved offerings first, counts never over-promised,
fallback to on-demand, reserved-only NodePools, and the ledger's own rules."""

from __future__ import annotations

import dataclasses

import pytest

from karpy_core.apis.labels import LABEL_CAPACITY_TYPE, LABEL_RESERVATION_ID
from karpy_core.cloudprovider.types import InstanceType, Offering, without_reserved
from karpy_core.scheduling.infeasible import InfeasibleKind
from karpy_core.scheduling.pod import pod_info
from karpy_core.scheduling.reservations import ReservationLedger
from karpy_core.scheduling.scheduler import Scheduler
from karpy_core.scheduling.template import TypeTable, template_from_nodepool

from .helpers import make_type, nodepool, pod


def reserved_type(name: str, cpu: int, mem_gi: int, reservations: list[tuple[str, str, int]], *,
                  price: float | None = None) -> InstanceType:
    """``make_type`` plus one reserved offering per (reservation ID, zone, instances left), priced
    as Karpenter's AWS provider does (on-demand / 10^7)."""
    base = make_type(name, cpu, mem_gi, price=price)
    od = base.offerings[0].price
    extra = [Offering(zone, "reserved", od / 1e7, left > 0, reservation_id=rid, reservation_capacity=left)
             for rid, zone, left in reservations]
    reqs = base.requirements.copy()
    reqs.by_key.pop(LABEL_CAPACITY_TYPE)  # recomputed from the offerings by InstanceType
    return InstanceType(base.name, reqs, [*base.offerings, *extra], base.capacity, base.overhead)


def solve(catalog, pods, pools=None):
    templates = [template_from_nodepool(p, catalog) for p in (pools or [nodepool()])]
    return Scheduler(templates, [], [], None).solve([pod_info(p) for p in pods])


def ct(claim) -> set[str]:
    req = claim.requirements.get(LABEL_CAPACITY_TYPE)
    return set(req.values) if req is not None and not req.complement else {"<complement>"}


def test_reserved_offering_is_used_before_on_demand_when_it_fits():
    catalog = [make_type("cheap", 2, 4, price=0.05), reserved_type("big", 4, 8, [("cr-1", "zone-a", 5)], price=0.5)]
    res = solve(catalog, [pod("p0", "1", "1Gi")])
    (claim,) = res.new_claims
    # the reserved 'big' beats on-demand 'cheap' (0.05 USD/hour) because reservations are ~free
    assert [t.name for t in claim.instance_types] == ["big"]
    assert ct(claim) == {"reserved"}
    assert set(claim.requirements.get(LABEL_RESERVATION_ID).values) == {"cr-1"}
    assert set(claim.requirements.get("topology.kubernetes.io/zone").values) == {"zone-a"}
    assert claim.cheapest_offering_price() == pytest.approx(0.5 / 1e7)


def test_reservation_of_two_with_three_nodes_gives_two_reserved_and_one_on_demand():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 2)])]
    # each pod needs a node of its own (1.5 of 2 cores)
    res = solve(catalog, [pod(f"p{i}", "1500m", "1Gi") for i in range(3)])
    assert len(res.new_claims) == 3
    kinds = sorted("reserved" if ct(c) == {"reserved"} else "other" for c in res.new_claims)
    assert kinds == ["other", "reserved", "reserved"]
    fallback = next(c for c in res.new_claims if ct(c) != {"reserved"})
    assert "reserved" not in ct(fallback)
    assert fallback.requirements.get(LABEL_RESERVATION_ID) is None
    assert fallback.cheapest_offering_price() == pytest.approx(0.1)


def test_pods_sharing_a_node_take_one_unit():
    catalog = [reserved_type("m", 4, 8, [("cr-1", "zone-a", 1)])]
    res = solve(catalog, [pod(f"p{i}", "1", "1Gi") for i in range(3)])
    (claim,) = res.new_claims
    assert len(claim.pods) == 3 and ct(claim) == {"reserved"}


def test_two_reservations_are_both_used_and_then_on_demand():
    catalog = [reserved_type("m", 2, 4, [("cr-a", "zone-a", 1), ("cr-b", "zone-b", 1)])]
    res = solve(catalog, [pod(f"p{i}", "1500m", "1Gi") for i in range(3)])
    held = [frozenset(c.requirements.get(LABEL_RESERVATION_ID).values) for c in res.new_claims if ct(c) == {"reserved"}]
    # pessimistic, as upstream: the first claim may hold both until it is pinned; every unit is
    # promised to at most one claim, so at most two claims are reserved and one falls back
    counted: dict[str, int] = {}
    for ids in held:
        for rid in ids:
            counted[rid] = counted.get(rid, 0) + 1
    assert all(n <= 1 for n in counted.values())
    assert 1 <= len(held) <= 2
    assert len(res.new_claims) == 3


def test_exhausted_reservation_falls_back_to_on_demand():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 0)])]
    res = solve(catalog, [pod("p0", "1", "1Gi")])
    (claim,) = res.new_claims
    assert ct(claim) == {"on-demand"}


def test_reserved_only_nodepool_leaves_pods_pending_once_full():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 1)])]
    pool = nodepool(requirements=[{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["reserved"]}])
    res = solve(catalog, [pod(f"p{i}", "1500m", "1Gi") for i in range(2)], [pool])
    assert len(res.new_claims) == 1 and ct(res.new_claims[0]) == {"reserved"}
    assert list(res.errors) == ["default/p1"]
    assert res.reasons["default/p1"].pool("default").kinds == (InfeasibleKind.RESERVATION_EXHAUSTED,)
    assert "cr-1" in res.errors["default/p1"]


def test_nodepool_excluding_reserved_never_takes_it():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 3)])]
    pool = nodepool(requirements=[{"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}])
    res = solve(catalog, [pod("p0", "1", "1Gi")], [pool])
    assert ct(res.new_claims[0]) == {"on-demand"}


def test_pod_outside_the_reservation_zone_falls_back():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 3)])]
    res = solve(catalog, [pod("p0", "1", "1Gi", node_selector={"topology.kubernetes.io/zone": "zone-b"})])
    (claim,) = res.new_claims
    assert ct(claim) == {"on-demand"}
    assert set(claim.requirements.get("topology.kubernetes.io/zone").values) == {"zone-b"}


def test_gate_off_catalog_has_no_reserved_offerings():
    catalog = [reserved_type("m", 2, 4, [("cr-1", "zone-a", 3)])]
    stripped = without_reserved(catalog)
    assert all(not o.reserved for it in stripped for o in it.offerings)
    assert any(o.reserved for o in catalog[0].offerings)  # the shared type is not mutated
    res = solve(stripped, [pod("p0", "1", "1Gi")])
    assert ct(res.new_claims[0]) == {"on-demand"}


def test_ledger_counts_the_smallest_capacity_and_gives_units_back():
    a = reserved_type("m", 2, 4, [("cr-1", "zone-a", 3)])
    b = reserved_type("m", 2, 4, [("cr-1", "zone-a", 2)])
    tables = {"a": TypeTable(template_from_nodepool(nodepool("a"), [a]), []),
              "b": TypeTable(template_from_nodepool(nodepool("b"), [b]), [])}
    ledger = ReservationLedger(tables)
    assert ledger.remaining("cr-1") == 2
    ledger.commit("h1", frozenset({"cr-1"}))
    ledger.commit("h1", frozenset({"cr-1"}))  # idempotent for a holder
    assert ledger.remaining("cr-1") == 1
    mark = ledger.checkpoint()
    ledger.commit("h2", frozenset({"cr-1"}))
    assert ledger.remaining("cr-1") == 0
    with pytest.raises(ValueError, match="no capacity"):
        ledger.commit("h3", frozenset({"cr-1"}))
    ledger.restore(mark)
    assert ledger.remaining("cr-1") == 1
    ledger.release("h1")
    assert ledger.remaining("cr-1") == 2


def test_unavailable_reserved_offering_is_not_counted_as_compatible():
    t = reserved_type("m", 2, 4, [("cr-1", "zone-a", 2)])
    t.offerings = [dataclasses.replace(o, available=False) if o.reserved else o for o in t.offerings]
    res = solve([t], [pod("p0", "1", "1Gi")])
    assert ct(res.new_claims[0]) == {"on-demand"}
