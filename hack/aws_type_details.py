"""Regenerate karpy_core/data/aws-instance-type-details.json: per EC2 instance type, the facts
behind four of Karpenter's AWS labels that aws-instance-types.json has no field for.

* ``network_bandwidth_mbps`` (``karpenter.k8s.aws/instance-network-bandwidth``): Karpenter's
  generated table (karpenter-provider-aws ``pkg/providers/instancetype/zz_generated.bandwidth.go``,
  Apache-2.0; the baseline bandwidth of AWS's documentation, Mbps). Types the table leaves out
  ("vague bandwidth information") have none, as in Karpenter.
* ``ebs_bandwidth_mbps`` (``instance-ebs-bandwidth``): DescribeInstanceTypes
  ``EbsInfo.EbsOptimizedInfo.MaximumBandwidthInMbps`` where ``EbsOptimizedSupport`` is ``default``;
* ``sustained_clock_mhz`` (``instance-cpu-sustained-clock-speed-mhz``):
  ``ProcessorInfo.SustainedClockSpeedInGhz`` x 1000, rounded;
* ``encryption_in_transit`` (``instance-encryption-in-transit-supported``):
  ``NetworkInfo.EncryptionInTransitSupported``;

the last three from moto's copy of DescribeInstanceTypes (``moto/ec2/resources/instance_types.json.gz``,
Apache-2.0), the same answers the AWS plugin reads from EC2 at run time.

Run: ``.venv/bin/python hack/aws_type_details.py PATH/TO/zz_generated.bandwidth.go``
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "karpy_core" / "data" / "aws-instance-type-details.json"


def bandwidth_table(go_source: str) -> dict[str, int]:
    """``"type": Mbps`` entries of the generated Go map (comment lines skipped)."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r'^\s*"([a-z0-9.-]+)":\s*(\d+),', go_source, re.MULTILINE)}


def main() -> None:
    import moto

    table = bandwidth_table(Path(sys.argv[1]).read_text())
    with gzip.open(Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz") as f:
        described = json.load(f)
    out: dict[str, dict[str, int | bool | None]] = {}
    for name in sorted(set(described) | set(table)):
        info = described.get(name) or {}
        ebs = info.get("EbsInfo") or {}
        optimized = ebs.get("EbsOptimizedInfo") or {}
        cpu = info.get("ProcessorInfo")
        out[name] = {
            "network_bandwidth_mbps": table.get(name),
            "ebs_bandwidth_mbps": int(optimized["MaximumBandwidthInMbps"])
            if ebs.get("EbsOptimizedSupport") == "default" and "MaximumBandwidthInMbps" in optimized else None,
            "sustained_clock_mhz": round(float(cpu.get("SustainedClockSpeedInGhz") or 0) * 1000) if cpu is not None else None,
            "encryption_in_transit": bool((info.get("NetworkInfo") or {}).get("EncryptionInTransitSupported")) if info else None,
        }
    OUT.write_text(json.dumps(out, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {len(out)} types to {OUT}")


if __name__ == "__main__":
    main()
