"""What the strict field check (:mod:`karpy_core.apis.fieldschema`) costs the manifest loader.

Inputs, generated: ``--pods`` bare Pod documents in one file (default 20,000; each with two
containers, env, probes, ports, resources, a securityContext, labels and annotations: about 60
fields), and one Deployment of ``--replicas`` replicas (default 100,000; the check is per object,
not per replica). Each input is loaded with :func:`karpy_core.apis.loader.load_text` ``--rounds``
times with the check on and off (``walk_fields``, which also reads explicit nulls, replaced by a
function returning the object as it is and no field),
alternating, in one process; the best wall time of each is printed with the ratio on/off, and the
walk alone over the same parsed documents.

Run: ``.venv/bin/python benchmarks/load_strict.py [--pods 20000] [--replicas 100000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import yaml

from karpy_core.apis import fieldschema, loader

POD = """\
apiVersion: v1
kind: Pod
metadata:
  name: web-{i}
  namespace: default
  labels: {{app: web, tier: frontend, release: r{i}}}
  annotations: {{prometheus.io/scrape: "true", prometheus.io/port: "9090"}}
spec:
  priorityClassName: system-cluster-critical
  terminationGracePeriodSeconds: 30
  securityContext: {{runAsNonRoot: true, runAsUser: 1000, fsGroup: 2000, seccompProfile: {{type: RuntimeDefault}}}}
  nodeSelector: {{kubernetes.io/os: linux}}
  tolerations: [{{key: dedicated, operator: Equal, value: web, effect: NoSchedule}}]
  containers:
  - name: app
    image: registry.example/web:1.2.3
    imagePullPolicy: IfNotPresent
    args: [--port=8080, --verbose]
    ports: [{{containerPort: 8080, name: http}}, {{containerPort: 9090, name: metrics}}]
    env:
    - {{name: MODE, value: production}}
    - name: POD_IP
      valueFrom: {{fieldRef: {{fieldPath: status.podIP}}}}
    resources: {{requests: {{cpu: 250m, memory: 256Mi}}, limits: {{memory: 512Mi}}}}
    readinessProbe: {{httpGet: {{path: /healthz, port: 8080}}, periodSeconds: 5}}
    livenessProbe: {{tcpSocket: {{port: 8080}}, initialDelaySeconds: 10}}
    securityContext: {{allowPrivilegeEscalation: false, capabilities: {{drop: [ALL]}}, readOnlyRootFilesystem: true}}
    volumeMounts: [{{name: tmp, mountPath: /tmp}}]
  - name: sidecar
    image: registry.example/proxy:2.0
    resources: {{requests: {{cpu: 50m, memory: 64Mi}}}}
  volumes: [{{name: tmp, emptyDir: {{}}}}]
"""

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: inflate, namespace: default}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: inflate}}}}
  template:
    metadata: {{labels: {{app: inflate}}}}
    spec:
      containers:
      - name: inflate
        image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
        resources: {{requests: {{cpu: "1", memory: 256M}}}}
"""


def _best(rounds: int, run: Callable[[], object]) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def _no_walk(api_version: str, kind: str, data: dict[str, Any]) -> fieldschema.SchemaWalk:
    return fieldschema.SchemaWalk(data, [])


def measure(name: str, text: str, rounds: int) -> None:
    """Print the best load time of ``text`` with and without the check, their ratio and the walk alone."""
    strict = fieldschema.walk_fields
    on: list[float] = []
    off: list[float] = []
    for _ in range(rounds):  # alternate, so drift on a shared machine hits both alike
        setattr(loader, "walk_fields", strict)  # noqa: B010 (the loader's module global)
        on.append(_best(1, lambda: loader.load_text(text, "bench.yaml")))
        setattr(loader, "walk_fields", _no_walk)  # noqa: B010
        off.append(_best(1, lambda: loader.load_text(text, "bench.yaml")))
    setattr(loader, "walk_fields", strict)  # noqa: B010
    documents = [d for d in yaml.safe_load_all(text) if d]
    walk = _best(rounds, lambda: [fieldschema.walk_fields(d["apiVersion"], d["kind"], d) for d in documents])
    print(f"{name}: {len(documents):,} objects; load with check {min(on):.3f} s, without {min(off):.3f} s, "
          f"ratio {min(on) / min(off):.3f}; the walk alone {walk:.3f} s ({walk / len(documents) * 1e6:.0f} us/object)")


def main() -> None:
    """Generate the inputs and print one line per input."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=20_000)
    parser.add_argument("--replicas", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    measure(f"{args.pods:,} Pods", "---\n".join(POD.format(i=i) for i in range(args.pods)), args.rounds)
    measure(f"Deployment x{args.replicas:,}", DEPLOYMENT.format(replicas=args.replicas), args.rounds)


if __name__ == "__main__":
    main()
