"""``kubectl explain`` coverage: every field Karpenter's CRDs describe is described in karpy's.

``tests/data/upstream_crd_described_paths.json`` lists, per CRD, the field paths upstream's YAML
gives a description (paths only, no text). Fields karpy does not model at all are listed below
with why; every other path must exist in karpy's CRD with a non-empty description, written from
the models' attribute docstrings and ``Field(description=...)``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from karpy_core.apis.crds import generate

DATA = Path(__file__).resolve().parents[1] / "data" / "upstream_crd_described_paths.json"

NOT_MODELLED: dict[str, set[str]] = {
    "karpenter.sh_nodepools.yaml": set(),
    "karpenter.sh_nodeclaims.yaml": set(),
    "karpenter.k8s.aws_ec2nodeclasses.yaml": set(),
}


def described_paths(schema: dict[str, Any], path: str = "") -> dict[str, bool]:
    """Field path -> whether it has a description (``.`` between properties, ``[]`` for list
    items, ``.*`` for map values), as the data file's paths are written."""
    out = {path: bool(schema.get("description"))}
    for key, sub in (schema.get("properties") or {}).items():
        out.update(described_paths(sub, f"{path}.{key}" if path else key))
    if isinstance(schema.get("items"), dict):
        out.update(described_paths(schema["items"], path + "[]"))
    if isinstance(schema.get("additionalProperties"), dict):
        out.update(described_paths(schema["additionalProperties"], path + ".*"))
    return out


def karpy_paths(filename: str) -> dict[str, bool]:
    crd = generate()[filename]
    out: dict[str, bool] = {}
    for version in crd["spec"]["versions"]:
        out.update(described_paths(version["schema"]["openAPIV3Schema"]))
    return out


@pytest.mark.parametrize("filename", sorted(NOT_MODELLED))
def test_every_field_upstream_describes_is_described(filename: str) -> None:
    upstream = json.loads(DATA.read_text())[filename.removesuffix(".yaml")]
    ours = karpy_paths(filename)
    assert ours[""], "the kind itself has a description"
    absent = sorted(p for p in upstream if p not in ours)
    assert absent == sorted(NOT_MODELLED[filename]), "fields upstream describes that karpy neither models nor lists as unmodelled"
    undescribed = sorted(p for p in upstream if p in ours and not ours[p])
    assert undescribed == []
    assert len(upstream) - len(absent) > 40  # the comparison covered the CRD, not an empty list


def test_every_kcnodeclass_field_is_described() -> None:
    """KCNodeClass has no upstream: every field (not the free-form map values) carries a description."""
    ours = karpy_paths("karpenter.kakaocloud.com_kcnodeclasses.yaml")
    undescribed = sorted(p for p, d in ours.items() if not d and p != "metadata" and not p.endswith(".*"))
    assert undescribed == []
    assert len(ours) > 25
