"""The per-cloud charts (charts/karpenter, charts/karpenter-provider-kakaocloud) are generated from
charts/karpy by hack/charts.py: they must be up to date, and differ from it only where intended."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_generated_charts_are_up_to_date() -> None:
    proc = subprocess.run([sys.executable, str(REPO / "hack" / "charts.py"), "--check"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"stale generated charts (run `python3 hack/charts.py`):\n{proc.stderr}"


def test_cloud_charts_share_charts_karpy_templates() -> None:
    source = REPO / "charts" / "karpy"
    templates = sorted(p.relative_to(source) for p in (source / "templates").rglob("*") if p.is_file())
    assert templates
    for name, cloud, own, other in (("karpenter", "aws", "karpenter.k8s.aws_", "karpenter.kakaocloud.com_"),
                                     ("karpenter-provider-kakaocloud", "kakaocloud", "karpenter.kakaocloud.com_", "karpenter.k8s.aws_")):
        chart = REPO / "charts" / name
        for rel in templates:
            assert (chart / rel).read_bytes() == (source / rel).read_bytes(), f"{name}/{rel}"
        assert yaml.safe_load((chart / "Chart.yaml").read_text())["name"] == name
        assert yaml.safe_load((chart / "values.yaml").read_text())["cloud"] == cloud
        crds = {p.name for p in (chart / "crds").glob("*.yaml")}
        assert any(c.startswith(own) for c in crds) and not any(c.startswith(other) for c in crds)
        assert "karpenter.sh_nodepools.yaml" in crds
        assert "karpenter.kwok.sh_kwoknodeclasses.yaml" not in crds  # the simulated provider's: charts/karpy only
    assert yaml.safe_load((source / "values.yaml").read_text())["cloud"] == "aws"
