"""``karpy simulate`` on big inputs: one general-purpose NodePool (c/m/r families, on-demand) and
the README's ``inflate`` Deployment (1 core, 256M per pod) at N replicas, each size in a fresh
``karpy simulate`` process, as a user runs it.

Printed per size: wall seconds of the whole command (start-up, load, simulation, reference plan,
report), the child's peak RSS in MiB (``ru_maxrss`` of that child's own resource usage, which
``os.wait4`` returns when it ends: the kernel's high-water mark of its resident set), the exit
code, the child's CPU seconds (user + system: on a shared machine wall time also counts the
waits for a core) and the
report's ``pods:`` line. The default sizes are 10,000, 50,000 and 100,000 pods (100,000 is
``--max-pods``'s default, the largest input ``karpy simulate`` accepts without the flag).

Run: ``.venv/bin/python benchmarks/simulate_big.py [PODS ...] [--karpy PATH]``
(``--karpy`` defaults to the ``karpy`` next to this interpreter, i.e. the venv's).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NODEPOOL = """\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general-purpose
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: kubernetes.io/os, operator: In, values: [linux]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: KarpenterNodeRole-bench
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  amiSelectorTerms: [{alias: al2023@latest}]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: inflate
spec:
  replicas: {replicas}
  selector:
    matchLabels: {{app: inflate}}
  template:
    metadata:
      labels: {{app: inflate}}
    spec:
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.2
          resources:
            requests: {{cpu: "1", memory: 256M}}
"""


def write_inputs(directory: Path, pods: int) -> list[str]:
    """Write the NodePool/EC2NodeClass and an ``inflate`` Deployment of ``pods`` replicas into
    ``directory``; returns the two file paths."""
    pool = directory / "nodepool.yaml"
    pool.write_text(NODEPOOL)
    dep = directory / "inflate.yaml"
    dep.write_text(DEPLOYMENT.format(replicas=pods))
    return [str(pool), str(dep)]


def run_once(karpy: str, pods: int) -> dict[str, object]:
    """One ``karpy simulate`` of ``pods`` pods in a fresh process: wall seconds, the peak RSS of
    the children so far (MiB), the exit code, the child's CPU seconds (user + system: on a shared machine wall time also counts the
waits for a core) and the ``pods:`` line of the report."""
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_inputs(Path(tmp), pods)
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with out.open("w") as fo, err.open("w") as fe:
            t0 = time.perf_counter()
            proc = subprocess.Popen([karpy, "simulate", *paths], stdout=fo, stderr=fe)
            _, status, usage = os.wait4(proc.pid, 0)
            wall = time.perf_counter() - t0
        stdout, stderr = out.read_text(), err.read_text()
    rc = os.waitstatus_to_exitcode(status)
    line = next((x for x in stdout.splitlines() if x.startswith("pods:")), (stderr.strip().splitlines() or [""])[-1])
    return {"pods": pods, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mib": usage.ru_maxrss / 1024,  # KiB
            "rc": rc, "outcome": line}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("pods", nargs="*", type=int, default=[10_000, 50_000, 100_000])
    parser.add_argument("--karpy", default=str(Path(sys.executable).with_name("karpy")))
    args = parser.parse_args(argv)
    print(f"{'pods':>7} {'wall s':>8} {'CPU s':>8} {'peak RSS MiB':>13} {'exit':>5}  outcome")
    for pods in sorted(args.pods):
        r = run_once(args.karpy, pods)
        print(f"{r['pods']:>7} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {r['peak_rss_mib']:>13.0f} {r['rc']:>5}  {r['outcome']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
