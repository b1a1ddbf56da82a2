"""KWOK-format catalogs: Karpenter's 144-type KWOK catalog and the 400-type benchmark catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from karpy_core.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_ZONE,
    is_well_known,
)
from karpy_core.cloudprovider.catalog.kwok import KWOK_WELL_KNOWN_LABELS, load_kwok_catalog, parse_kwok_catalog
from karpy_core.errors import ConfigurationError
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import format_resource_list

REPO = Path(__file__).resolve().parents[2]
KWOK_FILE = REPO / "examples" / "catalogs" / "kwok-instance-types.json"
FAKE400_FILE = REPO / "benchmarks" / "data" / "karpenter-fake-400.json"
MI = 1024 * 1024
GI = 1024 * MI


def _req(reqs: Requirements, key: str) -> Requirement:
    """The requirement on ``key``, which the test expects to be there."""
    req = reqs.get(key)
    assert req is not None, key
    return req


def _entry(**overrides) -> dict:
    entry = {
        "name": "small",
        "offerings": [
            {
                "Price": 0.1,
                "Available": True,
                "Requirements": [
                    {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
                    {"key": LABEL_ZONE, "operator": "In", "values": ["zone-a"]},
                ],
            }
        ],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "2", "memory": "4Gi"},
    }
    entry.update(overrides)
    return entry


def test_kwok_catalog_loads_144_types() -> None:
    types = load_kwok_catalog(KWOK_FILE)
    assert len(types) == 144
    it = {t.name: t for t in types}["c-1x-amd64-linux"]
    assert it.capacity == {"cpu": 1000, "memory": 2 * GI, "pods": 16, "ephemeral-storage": 20 * GI}
    # KWOK's fixed overhead applies when the entry has none.
    assert it.overhead.kube_reserved == {"cpu": 100, "memory": 10 * MI}
    assert it.allocatable["cpu"] == 900
    assert it.allocatable["memory"] == 2 * GI - 10 * MI
    assert len(it.offerings) == 8
    assert {o.zone for o in it.offerings} == {"test-zone-a", "test-zone-b", "test-zone-c", "test-zone-d"}
    spot = {o.price for o in it.offerings if o.capacity_type == "spot"}
    od = {o.price for o in it.offerings if o.capacity_type == "on-demand"}
    assert max(spot) < min(od)
    assert it.requirements.labels() == {
        LABEL_INSTANCE_TYPE: "c-1x-amd64-linux",
        LABEL_ARCH: "amd64",
        LABEL_OS: "linux",
        "karpenter.kwok.sh/instance-family": "c",
        "karpenter.kwok.sh/instance-size": "1",
        "karpenter.kwok.sh/instance-cpu": "1",
        "karpenter.kwok.sh/instance-memory": "2Gi",
    }
    assert _req(it.requirements, LABEL_CAPACITY_TYPE).values == frozenset({"spot", "on-demand"})


def test_fake_400_catalog_with_its_overhead() -> None:
    types = load_kwok_catalog(FAKE400_FILE)
    assert len(types) == 400
    assert [t.name for t in types[:3]] == ["fake-it-0", "fake-it-1", "fake-it-2"]
    first = types[0]
    assert format_resource_list(first.allocatable) == {"cpu": "900m", "memory": "2038Mi", "pods": "10"}
    assert first.allocatable["memory"] == 2 * GI - 10 * MI
    last = types[-1]
    assert last.name == "fake-it-399"
    assert last.capacity == {"cpu": 400_000, "memory": 800 * GI, "pods": 4000}
    assert last.allocatable["cpu"] == 399_900
    assert _req(first.requirements, LABEL_OS).values == frozenset({"linux", "windows", "darwin"})
    assert sorted((o.capacity_type, o.zone) for o in first.offerings) == [
        ("on-demand", "test-zone-1"),
        ("on-demand", "test-zone-2"),
        ("on-demand", "test-zone-3"),
        ("spot", "test-zone-1"),
        ("spot", "test-zone-2"),
    ]
    # 0.1 x vCPU + 0.1 x memory bytes / 1e9 for fake-it-0 (1 vCPU, 2 GiB).
    assert first.offerings[0].price == pytest.approx(0.1 + 0.1 * 2 * GI / 1e9)


def test_load_is_memoised_until_the_file_changes(tmp_path: Path) -> None:
    assert load_kwok_catalog(KWOK_FILE) is load_kwok_catalog(str(KWOK_FILE))
    path = tmp_path / "types.json"
    path.write_text(json.dumps([_entry()]))
    first = load_kwok_catalog(path)
    assert load_kwok_catalog(path) is first
    path.write_text(json.dumps([_entry(), _entry(name="other")]))
    os.utime(path, ns=(1, 1))
    assert len(load_kwok_catalog(path)) == 2


def test_defaults_and_file_availability() -> None:
    entry = _entry()
    entry["offerings"][0]["Available"] = False
    (it,) = parse_kwok_catalog([entry])
    assert it.capacity["pods"] == 110
    assert it.offerings[0].available is False
    (bare,) = parse_kwok_catalog([_entry()], default_overhead=False)
    assert bare.overhead.total() == {}
    (aws_named,) = parse_kwok_catalog([_entry(name="m5.large")])
    assert aws_named.requirements.labels()["karpenter.kwok.sh/instance-size"] == "large"
    assert aws_named.requirements.labels()["karpenter.kwok.sh/instance-family"] == "m5"


def test_explicit_overhead_object() -> None:
    (it,) = parse_kwok_catalog(
        [
            _entry(
                overhead={
                    "kubeReserved": {"cpu": "100m"},
                    "systemReserved": {"memory": "100Mi"},
                    "evictionThreshold": {"memory": "50Mi"},
                }
            )
        ]
    )
    assert it.allocatable == {"cpu": 1900, "memory": 4 * GI - 150 * MI, "pods": 110}


def test_kwok_labels_are_well_known() -> None:
    parse_kwok_catalog([_entry()])
    assert all(is_well_known(label) for label in KWOK_WELL_KNOWN_LABELS)


def _offering_with(requirements: list[dict], price: object = 0.1) -> dict:
    return {"Price": price, "Available": True, "Requirements": requirements}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"name": "x"}, "expected a JSON list"),
        ([_entry(name="")], "entry 0: name"),
        ([_entry(), _entry()], "entry 1 (small): name: duplicate"),
        ([_entry(architecture=None)], "entry 0 (small): architecture"),
        ([_entry(operatingSystems=[])], "operatingSystems"),
        ([_entry(resources={"cpu": "2"})], "resources: missing memory"),
        ([_entry(resources={"cpu": "two", "memory": "1Gi"})], "resources.cpu"),
        ([_entry(offerings={})], "offerings: expected a list"),
        (
            [_entry(offerings=[_offering_with([{"key": LABEL_ZONE, "operator": "In", "values": ["a"]}])])],
            "offerings[0].Requirements: missing the karpenter.sh/capacity-type requirement",
        ),
        (
            [
                _entry(
                    offerings=[
                        _offering_with(
                            [
                                {"key": LABEL_ZONE, "operator": "In", "values": ["a", "b"]},
                                {"key": LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
                            ]
                        )
                    ]
                )
            ],
            "offerings[0].Requirements[0]",
        ),
        ([_entry(offerings=[_offering_with([], price="cheap")])], "offerings[0].Price"),
        # a price no instance has (1e308 made every total inf and the report say "-0.0% more"), NaN, infinity
        ([_entry(offerings=[_offering_with([], price=1e308)])], "offerings[0].Price: expected a number of USD/hour from 0 to 1,000,000"),
        ([_entry(offerings=[_offering_with([], price=float("nan"))])], "offerings[0].Price"),
        ([_entry(offerings=[_offering_with([], price=float("inf"))])], "offerings[0].Price"),
        ([_entry(offerings=[_offering_with([], price=-0.5)])], "offerings[0].Price"),
        ([_entry(overhead={"kubeReserved": {"cpu": "1"}, "typo": {}})], "overhead: unknown field(s) typo"),
        ([_entry(extra=1)], "unknown field(s) extra"),
    ],
)
def test_malformed_entries_name_the_file_entry_and_field(data: object, fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_kwok_catalog(data, source="cat.json")
    assert str(info.value).startswith("cat.json: ")
    assert fragment in str(info.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read"):
        load_kwok_catalog(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        load_kwok_catalog(bad)
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps([_entry(), {"name": "broken"}]))
    with pytest.raises(ConfigurationError, match=r"wrong\.json: entry 1 \(broken\)"):
        load_kwok_catalog(wrong)
