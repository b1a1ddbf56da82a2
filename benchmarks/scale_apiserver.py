"""Benchmark: karpy beside Karpenter at scale on the real control plane (issue 36, items 1 and 2).

Each system gets a fresh dev cluster (``hack/devcluster.py``: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kwok) and the same objects: Karpenter's KWOKNodeClass,
20 NodePools over Karpenter's kwok instance-type catalog (``examples/catalogs/kwok-instance-types.json``, the
catalog both controllers read), two DaemonSets and 40 Deployments with PodDisruptionBudgets.
``--system karpy`` runs ``karpy controller --cloud-provider simulated --kwok --instance-types ...``;
``--system karpenter`` runs Karpenter's own kwok controller (``sigs.k8s.io/karpenter/kwok``, built
and started by ``hack/karpenter_kwok.py``); ``both`` runs one after the other.

The workload (:func:`workload`), for ``--pods N``:

* 10 teams; each team's pods select its two NodePools by the template label
  ``bench.karpy.sh/team``. Pool ``tK-spot`` (weight 50; spot; one architecture or both; two of
  the c/m/s families; at most 8 cpu a node, ``karpenter.kwok.sh/instance-cpu`` < 9) overlaps pool
  ``tK-od`` (weight 10 or none; on-demand; both architectures; every family; up to 16 cpu). Teams 1,
  4 and 7 cap their spot pool (``limits.cpu`` about half the team's cpu), so the rest overflows to
  the lower-weight pool.
* per team 4 Deployments: ``web`` (45% of the team's pods, 500m/1Gi, zone topology spread
  maxSkew 1), ``api`` (40%, 1 cpu/2Gi), ``cache`` (5%, 250m/512Mi, required hostname
  anti-affinity: one a node), ``batch`` (10%, 2 cpu/3Gi); a PodDisruptionBudget each
  (``maxUnavailable: 20%``, the cache 1); team sizes 5-15% of N.
* DaemonSets ``ds-logs`` (100m/128Mi, tolerates every taint) and ``ds-node`` (50m/64Mi).
* every NodePool: ``consolidationPolicy: WhenEmptyOrUnderutilized``, ``consolidateAfter: 15s``,
  Karpenter's default budget (10%).

About N / 10 nodes at N pods (5,000 pods: ~500 nodes).

Phases (all replica changes are PATCHes of the Deployments' ``spec.replicas``):

1. ``up``: 0 -> the full replicas;
2. ``steady``: ``--steady`` seconds (600 by default) with nothing changed;
3. ``in``: every Deployment scaled to 30% (``--keep``);
4. ``drift``: the NodePool with the most NodeClaims gets a new template label
   (``bench.karpy.sh/rev``); done once every NodeClaim of that pool carries it;
5. ``up2``: back to the full replicas.

Per phase and system it prints: seconds until every pod is Running (and each Deployment ready),
NodeClaims created (``karpenter_nodeclaims_created_total``, both controllers export it), USD/hour
at all-Running, seconds until settled (no NodeClaim, Node or pending pod changed for ``--quiet``
seconds, and the controller finished a disruption evaluation that began after the last change:
:func:`evaluated_since`; the time given is that of the last change), the settled USD/hour against
:func:`karpy_core.sim.optimum.reference` of the pods then running (``opt``; a lower bound when
NodePool limits or topology are not modelled, marked ``>=``), pods evicted (kube-apiserver's
audit log: ``create pods/eviction`` answered 201), provisioned NodeClaims (``reason="provisioned"``) in the phases that add
no pods (``in``, ``drift``: each re-launches for pods a disruption moved, an undone disruption;
karpy also counts its own in ``karpenter_voluntary_disruption_undone_total``), consolidation
timeouts and failed validations (``karpenter_voluntary_disruption_consolidation_timeouts_total``,
``..._failed_validations_total``), the controller's peak RSS in the phase (``VmHWM`` after
resetting it through ``/proc/<pid>/clear_refs`` at the phase start) and its CPU seconds
(``/proc/<pid>/stat``), and the API requests it made by verb. The controller authenticates as
the ServiceAccount ``default/autoscaler`` (cluster-admin), and kube-apiserver's audit policy logs
that user's requests at the Metadata level, so the counts are the controller's alone (they are
counted by user). It also logs everyone else's pod binds and pod status writes at the Request level
(the dev cluster's components share one admin user: the binds are kube-scheduler's, the status
writes kube-scheduler's and kwok's): with ``--keep-logs`` kube-scheduler's go to
``<system>-kube-scheduler.jsonl`` beside the controller's log, one
line per bind (``pod``, ``node``) or per pod marked Unschedulable (``pod``, ``message``: the
plugins' reasons), each with its time (:func:`scheduling_trace`), to trace where the pods a
disruption moved went and why some stayed pending.

Both systems' timelines (USD/hour and nodes, sampled every ``--interval`` seconds) go to
``--json`` and to one chart, ``--plot`` (matplotlib, from the ``sim`` extra).

The control plane's own client limits are raised for both systems alike
(kube-controller-manager and kube-scheduler ``--kube-api-qps=200 --kube-api-burst=400``): with
the defaults (20 and 50 requests/s) creating 5,000 pods through ReplicaSets takes minutes and
measures the controller-manager, not the autoscaler.

Run: ``.venv/bin/python benchmarks/scale_apiserver.py [--system karpy|karpenter|both] [--pods 5000]
[--steady 600] [--quiet 60] [--json out.json] [--plot out.png]``; ``--combine a.json b.json --plot out.png``
prints and charts runs saved one system at a time as if they were one ``both`` run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "hack"))

import devcluster  # noqa: E402

from karpy_core.kube.client import AsyncKubeClient  # noqa: E402
from tests.integration.karpy_env import install_crds  # noqa: E402

CATALOG = REPO / "examples" / "catalogs" / "kwok-instance-types.json"
NS = "default"
SERVICE_ACCOUNT = "autoscaler"
CONTROLLER_USER = f"system:serviceaccount:{NS}:{SERVICE_ACCOUNT}"
TEAM_LABEL = "bench.karpy.sh/team"
APP_LABEL = "bench.karpy.sh/app"
REV_LABEL = "bench.karpy.sh/rev"
NODEPOOL_LABEL = "karpenter.sh/nodepool"
TEAMS = 10
TEAM_WEIGHTS = (3, 1, 2, 1, 3, 2, 1, 2, 3, 2)
"""Relative team sizes (sum 20: each team 5-15% of the pods)."""
SHAPES: tuple[tuple[str, float, str, str, str], ...] = (
    ("web", 0.45, "500m", "1Gi", "zone-spread"),
    ("api", 0.40, "1", "2Gi", ""),
    ("cache", 0.05, "250m", "512Mi", "anti-affinity"),
    ("batch", 0.10, "2", "3Gi", ""),
)
"""(name, share of the team's pods, cpu, memory, rule) of each team's Deployments."""
CPU_MILLI = {"500m": 500, "1": 1000, "250m": 250, "2": 2000}
ARCHES = (["amd64"], ["arm64"], ["amd64", "arm64"])
LIMITED_TEAMS = (1, 4, 7)
CONTROL_PLANE_QPS = ["--kube-api-qps=200", "--kube-api-burst=400"]
CLK_TCK = os.sysconf("SC_CLK_TCK")
PHASES = ("up", "steady", "in", "drift", "up2")
COUNTERS = frozenset({
    "karpenter_nodeclaims_created_total", "karpenter_voluntary_disruption_undone_total",
    "karpenter_voluntary_disruption_consolidation_timeouts_total", "karpenter_voluntary_disruption_failed_validations_total",
})
"""The counters read per phase (both controllers export them, the undone one karpy only)."""
EVALUATION = "karpenter_voluntary_disruption_decision_evaluation_duration_seconds"
"""The disruption evaluation histogram (both controllers export it; karpy observes each planning
pass, Karpenter each method it runs): its ``_count`` and ``_sum`` tell the settle check that the
controller evaluated the cluster after its last change (:func:`evaluated_since`)."""
NO_NEW_PODS = ("in", "drift")
"""Phases that add no pods: a provisioning NodeClaim there was launched for pods a disruption moved."""

Obj = dict[str, Any]


# ---------------------------------------------------------------------------------------------
# the workload


@dataclass(frozen=True)
class Workload:
    """Everything applied before the controller starts (Deployments at 0 replicas) and the
    replica counts of the phases: ``full[name]`` pods per Deployment, ``kept[name]`` after ``in``."""

    objects: list[Obj]
    full: dict[str, int]
    kept: dict[str, int]


def _pod_spec(app: str, team: int, cpu: str, memory: str, rule: str) -> Obj:
    spec: Obj = {
        "nodeSelector": {TEAM_LABEL: str(team)},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                        "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
    }
    selector = {"matchLabels": {APP_LABEL: app}}
    if rule == "zone-spread":
        spec["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                              "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}]
    elif rule == "anti-affinity":
        spec["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "labelSelector": selector}]}}
    return spec


def _nodepool(name: str, team: int, *, weight: int | None, capacity: list[str], arch: list[str], families: list[str],
              max_cpu: int, limit_cpu: int | None) -> Obj:
    spec: Obj = {
        "template": {
            "metadata": {"labels": {TEAM_LABEL: str(team)}},
            "spec": {
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": capacity},
                    {"key": "kubernetes.io/arch", "operator": "In", "values": arch},
                    {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
                    {"key": "karpenter.kwok.sh/instance-family", "operator": "In", "values": families},
                    {"key": "karpenter.kwok.sh/instance-cpu", "operator": "Lt", "values": [str(max_cpu + 1)]},
                ],
                "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass", "name": "default"},
                "expireAfter": "720h",
            },
        },
        "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "15s"},
    }
    if weight is not None:
        spec["weight"] = weight
    if limit_cpu is not None:
        spec["limits"] = {"cpu": str(limit_cpu)}
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def workload(pods: int, keep: float = 0.3) -> Workload:
    """The benchmark's objects for about ``pods`` Deployment pods (see the module docstring).

    Returns Deployments at ``replicas: 0``; ``full`` and ``kept`` give each one's replicas in the
    scale-up and scale-in phases (at least 1 each; the cache at least 2).
    """
    objs: list[Obj] = [{"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass", "metadata": {"name": "default"}}]
    full: dict[str, int] = {}
    kept: dict[str, int] = {}
    total_weight = sum(TEAM_WEIGHTS)
    for team in range(TEAMS):
        n_team = pods * TEAM_WEIGHTS[team] / total_weight
        team_milli = 0
        for shape, share, cpu, memory, rule in SHAPES:
            app = f"t{team}-{shape}"
            replicas = max(2 if rule == "anti-affinity" else 1, round(n_team * share))
            full[app] = replicas
            kept[app] = max(1, round(replicas * keep))
            team_milli += replicas * CPU_MILLI[cpu]
            labels = {APP_LABEL: app}
            objs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app, "namespace": NS, "labels": labels},
                         "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                                  "template": {"metadata": {"labels": labels}, "spec": _pod_spec(app, team, cpu, memory, rule)}}})
            budget = 1 if rule == "anti-affinity" else "20%"
            objs.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app, "namespace": NS},
                         "spec": {"maxUnavailable": budget, "selector": {"matchLabels": labels}}})
        families = ["c", "m"] if team % 2 == 0 else ["s", "m"]
        limit = max(8, math.ceil(team_milli / 1000 / 2)) if team in LIMITED_TEAMS else None
        objs.append(_nodepool(f"t{team}-spot", team, weight=50, capacity=["spot"], arch=ARCHES[team % 3], families=families,
                              max_cpu=8, limit_cpu=limit))
        objs.append(_nodepool(f"t{team}-od", team, weight=10 if team % 2 else None, capacity=["on-demand"],
                              arch=["amd64", "arm64"], families=["c", "m", "s"], max_cpu=16, limit_cpu=None))
    for name, cpu, memory, tolerate in (("ds-logs", "100m", "128Mi", True), ("ds-node", "50m", "64Mi", False)):
        labels = {APP_LABEL: name}
        pod: Obj = {"terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "agent", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
        if tolerate:
            pod["tolerations"] = [{"operator": "Exists"}]
        else:
            pod["nodeSelector"] = {"kubernetes.io/os": "linux"}
        objs.append({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": NS, "labels": labels},
                     "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": pod}}})
    return Workload(objs, full, kept)


# ---------------------------------------------------------------------------------------------
# prices, optimum


def catalog_prices(path: Path = CATALOG) -> dict[tuple[str, str, str], float]:
    """(instance type, zone, capacity type) -> USD/hour, from a KWOK-format catalog."""
    out: dict[tuple[str, str, str], float] = {}
    for it in json.loads(path.read_text()):
        for o in it["offerings"]:
            reqs = {r["key"]: r["values"][0] for r in o["Requirements"]}
            out[(it["name"], reqs["topology.kubernetes.io/zone"], reqs["karpenter.sh/capacity-type"])] = float(o["Price"])
    return out


def claim_price(claim: Mapping[str, Any], prices: Mapping[tuple[str, str, str], float]) -> float:
    """USD/hour of a NodeClaim from its instance-type, zone and capacity-type labels (0 before launch)."""
    labels = claim["metadata"].get("labels") or {}
    key = (labels.get("node.kubernetes.io/instance-type", ""), labels.get("topology.kubernetes.io/zone", ""),
           labels.get("karpenter.sh/capacity-type", ""))
    return prices.get(key, 0.0)


def optimum(nodepools: Sequence[Obj], daemonsets: Sequence[Obj], pods: Sequence[Obj], time_limit: float) -> tuple[float | None, str]:
    """:func:`karpy_core.sim.optimum.reference` of ``pods`` (running, not DaemonSet pods) on the
    NodePools over the kwok catalog: (USD/hour or None, status)."""
    from karpy_core.cloudprovider.catalog.kwok import load_kwok_catalog
    from karpy_core.scheduling.pod import pod_info
    from karpy_core.scheduling.template import template_from_nodepool, type_tables
    from karpy_core.sim.optimum import reference
    from karpy_core.state.cluster import daemonset_pod_infos

    types = load_kwok_catalog(CATALOG)
    templates = [template_from_nodepool(np_, types) for np_ in nodepools]
    tables = type_tables(templates, daemonset_pod_infos(daemonsets))
    ref = reference(list(tables.values()), [pod_info(p) for p in pods], time_limit=time_limit)
    return ref.value, ref.status


# ---------------------------------------------------------------------------------------------
# the controller process, its metrics, the audit log


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads), from ``/proc/<pid>/stat``."""
    fields_ = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields_[11]) + int(fields_[12])) / CLK_TCK


def proc_status_mib(pid: int, key: str) -> float:
    """``VmRSS`` or ``VmHWM`` of process ``pid``, MiB (NaN when gone)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss(pid: int) -> None:
    """Reset ``VmHWM`` to the current RSS (``/proc/<pid>/clear_refs`` value 5, Linux 4.0+)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")


def scrape(url: str) -> dict[str, float]:
    """Prometheus text from ``url`` summed per sample name and label set: ``{'name{labels}': value}``
    (empty when the endpoint does not answer)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        with contextlib.suppress(ValueError):
            out[key] = float(value)
    return out


@dataclass(frozen=True)
class Evaluations:
    """One scrape of :data:`EVALUATION`: ``t`` (``time.monotonic()`` when the scrape began),
    ``count`` (evaluations finished, all labels) and ``total`` (their seconds, all labels)."""

    t: float
    count: float
    total: float


def evaluated_since(scrapes: Sequence[Evaluations], since: float) -> bool:
    """Whether the controller finished an evaluation that began at or after ``since`` (monotonic
    seconds), as far as the scrapes prove it.

    Between two scrapes ``a`` and ``b`` whose count went up, the evaluations that finished did so
    after ``a.t`` and lasted ``b.total - a.total`` seconds together, so the last of them began at
    or after ``a.t - (b.total - a.total)``; when that is at or after ``since`` the controller has
    evaluated the cluster as it was at ``since`` or later. A counter that went down (a restart,
    a new leader) proves nothing for that pair. A long pass that was still planning when the
    cluster last changed, and silent for the whole quiet time, proves nothing either: the phase
    is not settled until a later one finishes (issue: a 97 s pass made the scale-in "settled" 5 s in).
    """
    for a, b in itertools.pairwise(scrapes):
        if b.count > a.count and b.total >= a.total and a.t - (b.total - a.total) >= since:
            return True
    return False


def metric_total(sample: Mapping[str, float], name: str, **labels: str) -> float:
    """Sum of ``name`` over every label set containing ``labels`` (``name{..}`` or bare ``name``)."""
    total = 0.0
    for key, value in sample.items():
        base, _, rest = key.partition("{")
        if base != name:
            continue
        if all(f'{k}="{v}"' in rest for k, v in labels.items()):
            total += value
    return total


def audit_counts(path: Path, offset: int) -> tuple[Counter[str], int]:
    """Requests in kube-apiserver's audit log after byte ``offset``: counts by verb, plus
    ``evict`` (``create pods/eviction`` answered 201) and ``evict-refused`` (other answers,
    429 for a PodDisruptionBudget); returns the counts and the new offset."""
    counts: Counter[str] = Counter()
    if not path.exists():
        return counts, offset
    with path.open("rb") as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("user", {}).get("username") != CONTROLLER_USER:
            continue
        verb = ev.get("verb", "?")
        counts[verb] += 1
        ref = ev.get("objectRef") or {}
        if verb == "create" and ref.get("subresource") == "eviction":
            code = (ev.get("responseStatus") or {}).get("code")
            counts["evict" if code == 201 else "evict-refused"] += 1
    return counts, offset + end


AUDIT_POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1", "kind": "Policy", "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata", "users": [CONTROLLER_USER]},
              {"level": "Request", "verbs": ["create", "patch", "update"],
               "resources": [{"group": "", "resources": ["pods/binding", "pods/status"]}]},
              {"level": "None"}],
}


def scheduling_trace(path: Path) -> list[dict[str, Any]]:
    """kube-scheduler's binds and Unschedulable marks from kube-apiserver's audit log (the
    Request-level events of :data:`AUDIT_POLICY`), in log order: ``{"time", "pod", "node"}`` for a
    bind (``create pods/binding``), ``{"time", "pod", "message"}`` for a status write that sets
    ``PodScheduled=False`` (kube-scheduler's ``0/N nodes are available: ...``). ``pod`` is
    ``namespace/name``; ``time`` the event's ``stageTimestamp`` (RFC 3339). Lines that are not
    JSON, the controller's events and writes without that condition (kwok's) are skipped; a
    missing file gives an empty list."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    with path.open("rb") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if ev.get("user", {}).get("username") == CONTROLLER_USER or ev.get("level") != "Request":
                continue
            ref = ev.get("objectRef") or {}
            pod = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
            body = ev.get("requestObject") or {}
            when = ev.get("stageTimestamp", "")
            if ref.get("subresource") == "binding":
                out.append({"time": when, "pod": pod, "node": (body.get("target") or {}).get("name", "")})
            elif ref.get("subresource") == "status":
                for cond in (body.get("status") or {}).get("conditions") or ():
                    if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
                        out.append({"time": when, "pod": pod, "message": cond.get("message", "")})
    return out


class Process:
    """A controller child process: its pid, log and metrics endpoint."""

    def __init__(self, argv: list[str], log_path: Path, metrics_url: str, *, env: Mapping[str, str] | None = None,
                 cwd: Path = REPO):
        self.log_path = log_path
        self.metrics_url = metrics_url
        self._log = open(log_path, "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        """The whole log so far (also after :meth:`stop` closed the file)."""
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_karpy(kubeconfig: Path, workdir: Path, repo: Path | None, leader_election: bool = False) -> Process:
    """``karpy controller --cloud-provider simulated --kwok`` over the kwok catalog (from ``repo``'s
    checkout and virtualenv when given), without the leader Lease unless ``leader_election`` (as
    ``hack/karpenter_kwok.py`` runs Karpenter: on a starved machine a missed renew deadline stops
    every decision until the lease is won back)."""
    root = repo or REPO
    python = str(root / ".venv" / "bin" / "python") if repo else sys.executable
    port = free_port()
    argv = [python, "-m", "karpy_core.cli", "controller", "--cloud-provider", "simulated", "--kwok",
            "--instance-types", str(CATALOG), "--kubeconfig", str(kubeconfig), "--namespace", NS,
            "--health-host", "127.0.0.1", "--health-probe-port", str(port), "--metrics-port", str(port)]
    if not leader_election:
        argv.append("--disable-leader-election")
    return Process(argv, workdir / "karpy.log", f"http://127.0.0.1:{port}/metrics", env={"KARPY_LEASE_NAME": "bench"}, cwd=root)


class KarpenterProcess:
    """Karpenter's kwok controller (``hack/karpenter_kwok.py`` :class:`KarpenterKwok`) behind the
    same face as :class:`Process`: ``pid``, ``proc``, ``metrics_url``, ``log()``, ``stop()``."""

    def __init__(self, kubeconfig: Path, workdir: Path, leader_election: bool = False):
        import karpenter_kwok

        self.log_path = workdir / "karpenter.log"
        # Karpenter's kwok provider reads its catalog from INSTANCE_TYPES_FILE_PATH: the same file as karpy's
        self.karpenter = karpenter_kwok.KarpenterKwok(kubeconfig, log_path=self.log_path,
                                                      env={"INSTANCE_TYPES_FILE_PATH": str(CATALOG)},
                                                      leader_election=leader_election)
        self.metrics_url = f"http://127.0.0.1:{self.karpenter.metrics_port}/metrics"

    def start(self) -> None:
        """Start it and wait until it is ready (blocking)."""
        self.karpenter.start()

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        assert self.karpenter.proc is not None
        return self.karpenter.proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        self.karpenter.stop()


async def start_karpenter(kubeconfig: Path, workdir: Path, leader_election: bool = False) -> KarpenterProcess:
    """Karpenter's kwok controller over the same catalog, started and ready."""
    ctl = KarpenterProcess(kubeconfig, workdir, leader_election)
    await asyncio.to_thread(ctl.start)
    return ctl


async def install_karpenter_crds(cluster: devcluster.DevCluster) -> None:
    """Karpenter's own CRDs (``hack/karpenter_kwok.py``) instead of karpy's."""
    import karpenter_kwok

    await asyncio.to_thread(karpenter_kwok.install_crds, cluster)


async def controller_kubeconfig(kube: AsyncKubeClient, cluster: devcluster.DevCluster, path: Path) -> Path:
    """A kubeconfig for the ServiceAccount ``default/autoscaler`` bound to cluster-admin (so the
    audit log tells the controller's requests from everyone else's); returns its path."""
    await kube._request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts", body={"metadata": {"name": SERVICE_ACCOUNT}})
    await kube._request("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", body={
        "metadata": {"name": "bench-autoscaler"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NS}]})
    token = await kube._request("POST", f"/api/v1/namespaces/{NS}/serviceaccounts/{SERVICE_ACCOUNT}/token",
                                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                      "spec": {"expirationSeconds": 86400}})
    assert cluster.kubeconfig is not None
    await asyncio.to_thread(_write_kubeconfig, cluster.kubeconfig, str(token["status"]["token"]), path)
    return path


def _write_kubeconfig(admin: Path, token: str, path: Path) -> None:
    """The admin kubeconfig ``admin`` with its user replaced by ``token``, written to ``path`` (mode 0600)."""
    config = json.loads(admin.read_text())
    config["users"] = [{"name": SERVICE_ACCOUNT, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = SERVICE_ACCOUNT
    path.write_text(json.dumps(config))
    path.chmod(0o600)


# ---------------------------------------------------------------------------------------------
# sampling and phases


@dataclass
class Sample:
    """One look at the cluster, ``t`` seconds after the first phase began."""

    t: float
    phase: str
    claims: frozenset[str]
    claim_labels: dict[str, dict[str, str]]
    nodes: int
    deleting: int
    usd: float
    pending: int
    rss: float


@dataclass
class Monitor:
    """Samples NodeClaims, Nodes, not-Running pods and the controller's RSS every ``interval`` s."""

    kube: AsyncKubeClient
    pid: int
    prices: dict[tuple[str, str, str], float]
    interval: float
    metrics_url: str = ""
    t0: float = field(default_factory=time.monotonic)
    phase: str = ""
    samples: list[Sample] = field(default_factory=list)
    counters: dict[str, float] = field(default_factory=dict)
    """Counter samples of :data:`COUNTERS` summed over the run: each scrape adds its increase, or
    the whole value when the counter went down (a controller that restarts or, like karpy, drops
    its metrics with the leader lease starts again from zero)."""
    _last: dict[str, float] = field(default_factory=dict)
    evaluations: list[Evaluations] = field(default_factory=list)
    """Every scrape of the disruption evaluation histogram (:func:`evaluated_since`)."""

    def update_counters(self) -> None:
        """Scrape the controller's metrics once, add the counters' increases to :attr:`counters`
        and record the evaluation histogram in :attr:`evaluations`."""
        t = time.monotonic()
        everything = scrape(self.metrics_url)
        if everything:
            self.evaluations.append(Evaluations(t, metric_total(everything, EVALUATION + "_count"),
                                                metric_total(everything, EVALUATION + "_sum")))
        current = {k: v for k, v in everything.items() if k.partition("{")[0] in COUNTERS}
        if not current:
            return  # not answering (leader change, restart): the next scrape catches up
        for key, value in current.items():
            prev = self._last.get(key, 0.0)
            self.counters[key] = self.counters.get(key, 0.0) + (value - prev if value >= prev else value)
        self._last = current

    async def sample(self) -> Sample:
        claims = await self.kube.list("NodeClaim")
        nodes = [n for n in await self.kube.list("Node") if NODEPOOL_LABEL in (n["metadata"].get("labels") or {})]
        page = await self.kube._request("GET", f"/api/v1/namespaces/{NS}/pods", query=[("fieldSelector", "status.phase!=Running")])
        deleting = sum(1 for o in [*claims, *nodes] if o["metadata"].get("deletionTimestamp"))
        s = Sample(time.monotonic() - self.t0, self.phase, frozenset(c["metadata"]["name"] for c in claims),
                   {c["metadata"]["name"]: dict(c["metadata"].get("labels") or {}) for c in claims}, len(nodes), deleting,
                   sum(claim_price(c, self.prices) for c in claims if not c["metadata"].get("deletionTimestamp")),
                   len(page.get("items") or ()), proc_status_mib(self.pid, "VmRSS"))
        self.samples.append(s)
        return s

    async def run(self) -> None:
        while True:
            started = time.monotonic()
            with contextlib.suppress(Exception):  # a failed look is retried next interval
                await self.sample()
                await asyncio.to_thread(self.update_counters)
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))


@dataclass
class PhaseResult:
    """What one phase measured (see the module docstring)."""

    phase: str
    running_s: float | None = None
    settle_s: float | None = None
    settled: bool = False
    claims_created: int = 0
    provisioning_created: int = 0
    usd_running: float | None = None
    usd_settled: float | None = None
    nodes_settled: int | None = None
    optimum: float | None = None
    optimum_status: str = ""
    evicted: int = 0
    evict_refused: int = 0
    undone: float = 0.0
    timeouts: float = 0.0
    failed_validations: float = 0.0
    peak_rss_mib: float = float("nan")
    cpu_s: float = 0.0
    requests: dict[str, int] = field(default_factory=dict)


async def deployments_ready(kube: AsyncKubeClient, want: Mapping[str, int]) -> bool:
    """True when every benchmark Deployment has its wanted replicas, all ready and updated."""
    for d in await kube.list("Deployment", NS):
        name = d["metadata"]["name"]
        if name not in want:
            continue
        st = d.get("status") or {}
        if d["spec"].get("replicas") != want[name] or st.get("readyReplicas", 0) != want[name] \
                or st.get("replicas", 0) != want[name] or st.get("observedGeneration", 0) < d["metadata"].get("generation", 0):
            return False
    return True


async def scale(kube: AsyncKubeClient, replicas: Mapping[str, int]) -> None:
    """PATCH every Deployment's ``spec.replicas``."""
    await asyncio.gather(*(kube.patch("Deployment", name, {"spec": {"replicas": n}}, NS) for name, n in replicas.items()))


@dataclass
class Bench:
    """One system's run on one cluster."""

    kube: AsyncKubeClient
    ctl: Process | KarpenterProcess
    monitor: Monitor
    audit_path: Path
    work: Workload
    quiet: float
    timeout: float
    opt_time_limit: float
    audit_offset: int = 0
    want: dict[str, int] = field(default_factory=dict)

    async def phase(self, name: str, action: Callable[[], Awaitable[None]], done: Callable[[Sample], bool] | None = None,
                    *, settle: bool = True, hold: float = 0.0) -> PhaseResult:
        """Run ``action`` and measure until settled (or for ``hold`` seconds when not ``settle``)."""
        r = PhaseResult(name)
        pid = self.ctl.pid
        await asyncio.to_thread(self.monitor.update_counters)
        before = dict(self.monitor.counters)
        _, self.audit_offset = audit_counts(self.audit_path, self.audit_offset)
        reset_peak_rss(pid)
        cpu0 = proc_cpu_seconds(pid)
        self.monitor.phase = name
        start = time.monotonic()
        await action()
        last_key: tuple[object, ...] | None = None
        last_change = start
        while True:
            await asyncio.sleep(self.monitor.interval)
            now = time.monotonic()
            s = self.monitor.samples[-1] if self.monitor.samples else await self.monitor.sample()
            if r.running_s is None and s.pending == 0 and await deployments_ready(self.kube, self.want):
                r.running_s, r.usd_running = now - start, s.usd
            key = (s.claims, s.nodes, s.deleting, s.pending > 0)
            if key != last_key:
                last_key, last_change = key, now
            if not settle:
                if now - start >= hold:
                    r.settled = True
                    break
                continue
            if r.running_s is not None and now - last_change >= self.quiet and (done is None or done(s)) \
                    and evaluated_since(self.monitor.evaluations, last_change):
                r.settled, r.settle_s = True, last_change - start
                break
            if now - start > self.timeout:
                print(f"  {name}: not settled after {self.timeout:.0f} s", flush=True)
                break
        await asyncio.to_thread(self.monitor.update_counters)
        after = dict(self.monitor.counters)
        r.cpu_s = proc_cpu_seconds(pid) - cpu0
        r.peak_rss_mib = proc_status_mib(pid, "VmHWM")
        counts, self.audit_offset = audit_counts(self.audit_path, self.audit_offset)
        r.requests = dict(sorted(counts.items()))
        r.evicted, r.evict_refused = counts.get("evict", 0), counts.get("evict-refused", 0)

        def delta(metric: str, **labels: str) -> float:
            return metric_total(after, metric, **labels) - metric_total(before, metric, **labels)

        r.claims_created = round(delta("karpenter_nodeclaims_created_total"))
        r.provisioning_created = round(delta("karpenter_nodeclaims_created_total", reason="provisioned"))
        r.undone = delta("karpenter_voluntary_disruption_undone_total")
        r.timeouts = delta("karpenter_voluntary_disruption_consolidation_timeouts_total")
        r.failed_validations = delta("karpenter_voluntary_disruption_failed_validations_total")
        last = self.monitor.samples[-1]
        r.usd_settled, r.nodes_settled = last.usd, last.nodes
        if settle:
            r.optimum, r.optimum_status = await self.reference()
        return r

    async def reference(self) -> tuple[float | None, str]:
        """The optimum (or lower bound) of the Deployment pods now running."""
        pods = [p for p in await self.kube.list("Pod", NS)
                if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
                and not any(o.get("kind") == "DaemonSet" for o in p["metadata"].get("ownerReferences") or ())]
        pools = await self.kube.list("NodePool")
        dss = await self.kube.list("DaemonSet", NS)
        return await asyncio.to_thread(optimum, pools, dss, pods, self.opt_time_limit)


def drifted_pool(samples: Sequence[Sample]) -> str:
    """The NodePool with the most NodeClaims in the last sample (ties: by name)."""
    counts = Counter(labels.get(NODEPOOL_LABEL, "") for labels in samples[-1].claim_labels.values())
    counts.pop("", None)
    return min(counts, key=lambda p: (-counts[p], p)) if counts else "t0-spot"


async def run_system(system: str, args: argparse.Namespace) -> dict[str, Any]:
    """One system's five phases on a fresh cluster; returns its results and timeline."""
    work = workload(args.pods, args.keep)
    with tempfile.TemporaryDirectory(prefix="karpy-scale-") as tmp_s:
        tmp = Path(tmp_s)
        policy = tmp / "audit-policy.json"
        policy.write_text(json.dumps(AUDIT_POLICY))
        audit_path = tmp / "audit.log"
        cluster = devcluster.DevCluster(devcluster.build(), extra_apiserver_args=[
            f"--audit-policy-file={policy}", f"--audit-log-path={audit_path}", "--audit-log-format=json",
            "--audit-log-maxsize=0"], extra_args={"kube-controller-manager": CONTROL_PLANE_QPS, "kube-scheduler": CONTROL_PLANE_QPS})
        with cluster:
            assert cluster.kubeconfig is not None
            kube = await AsyncKubeClient.from_config(str(cluster.kubeconfig))
            monitor_task: asyncio.Task[None] | None = None
            ctl: Process | KarpenterProcess | None = None
            try:
                if system == "karpenter":
                    await install_karpenter_crds(cluster)
                else:
                    await install_crds(kube)
                kubeconfig = await controller_kubeconfig(kube, cluster, tmp / "controller.kubeconfig")
                for obj in work.objects:
                    await kube.create(obj["kind"], obj)
                ctl = (start_karpy(kubeconfig, tmp, args.controller_repo, args.leader_election) if system == "karpy"
                       else await start_karpenter(kubeconfig, tmp, args.leader_election))
                for _ in range(600):
                    if scrape(ctl.metrics_url) or ctl.proc.poll() is not None:
                        break
                    await asyncio.sleep(0.2)
                if ctl.proc.poll() is not None:
                    raise RuntimeError(f"{system} controller exited: {ctl.log()[-3000:]}")
                await asyncio.sleep(3.0)  # caches synced, first empty passes
                rss_idle = proc_status_mib(ctl.pid, "VmRSS")
                monitor = Monitor(kube, ctl.pid, catalog_prices(), args.interval, ctl.metrics_url)
                monitor_task = asyncio.create_task(monitor.run())
                bench = Bench(kube, ctl, monitor, audit_path, work, args.quiet, args.timeout, args.opt_time_limit)
                results: list[PhaseResult] = []

                async def up() -> None:
                    bench.want = dict(work.full)
                    await scale(kube, work.full)

                async def scale_in() -> None:
                    bench.want = dict(work.kept)
                    await scale(kube, work.kept)

                pool = ""

                async def drift() -> None:
                    nonlocal pool
                    pool = drifted_pool(monitor.samples)
                    await kube.patch("NodePool", pool, {"spec": {"template": {"metadata": {"labels": {REV_LABEL: "2"}}}}})

                def drift_done(s: Sample) -> bool:
                    return all(labels.get(REV_LABEL) == "2" for labels in s.claim_labels.values()
                               if labels.get(NODEPOOL_LABEL) == pool)

                async def nothing() -> None:
                    return None

                print(f"== {system}: {sum(work.full.values())} pods in {len(work.full)} Deployments "
                      f"(controller RSS {rss_idle:.0f} MiB idle)", flush=True)
                for name in PHASES:
                    if name == "up":
                        r = await bench.phase(name, up)
                    elif name == "steady":
                        r = await bench.phase(name, nothing, settle=False, hold=args.steady)
                    elif name == "in":
                        r = await bench.phase(name, scale_in)
                    elif name == "drift":
                        r = await bench.phase(name, drift, drift_done)
                    else:
                        r = await bench.phase(name, up)
                    results.append(r)
                    print(row(system, r), flush=True)
                return {"system": system, "pods": sum(work.full.values()), "idle_rss_mib": rss_idle, "drifted_pool": pool,
                        "phases": [vars(r) for r in results],
                        "timeline": [{"t": round(s.t, 2), "phase": s.phase, "nodeclaims": len(s.claims), "nodes": s.nodes,
                                      "usd_per_hour": round(s.usd, 4), "pending": s.pending, "rss_mib": round(s.rss, 1)}
                                     for s in monitor.samples]}
            finally:
                if monitor_task is not None:
                    monitor_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await monitor_task
                if ctl is not None:
                    ctl.stop()
                    if args.keep_logs:
                        dest = Path(args.keep_logs) / f"{system}.log"
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        dest.write_text(ctl.log())
                        trace = Path(args.keep_logs) / f"{system}-kube-scheduler.jsonl"
                        trace.write_text("".join(json.dumps(e) + "\n" for e in scheduling_trace(audit_path)))
                await kube.close()


# ---------------------------------------------------------------------------------------------
# output


HEADER = (f"{'system':<9} {'phase':<6} | {'running':>7} {'claims':>6} {'USD/h':>7} | {'settle':>6} {'USD/h':>7} {'nodes':>5} "
          f"{'opt':>8} {'/opt':>5} | {'evict':>5} {'undone':>6} {'t/o':>3} {'fail':>4} | {'RSS':>6} {'CPU s':>6} | requests")


def _f(v: float | None, fmt: str, width: int) -> str:
    return f"{'-':>{width}}" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:{width}{fmt}}"


def row(system: str, r: PhaseResult) -> str:
    """One table row (see :data:`HEADER`)."""
    ratio = r.usd_settled / r.optimum if r.optimum and r.usd_settled is not None else None
    opt = _f(r.optimum, ".2f", 7 if r.optimum_status != "optimum" else 8)
    if r.optimum_status and r.optimum_status != "optimum" and r.optimum is not None:
        opt = ">" + opt
    settle = _f(r.settle_s, ".0f", 6) if r.settled else f"{'never':>6}"
    undone = r.provisioning_created if r.phase in NO_NEW_PODS else 0
    reqs = " ".join(f"{k}={v}" for k, v in r.requests.items() if not k.startswith("evict"))
    return (f"{system:<9} {r.phase:<6} | {_f(r.running_s, '.1f', 7)} {r.claims_created:>6} {_f(r.usd_running, '.2f', 7)} | "
            f"{settle} {_f(r.usd_settled, '.2f', 7)} {_f(r.nodes_settled, 'd', 5) if r.nodes_settled is not None else '    -'} "
            f"{opt} {_f(ratio, '.3f', 5)} | {r.evicted:>5} {undone:>3}/{r.undone:<2.0f} {r.timeouts:>3.0f} "
            f"{r.failed_validations:>4.0f} | {r.peak_rss_mib:>6.1f} {r.cpu_s:>6.1f} | {reqs}")


def plot(runs: Sequence[Mapping[str, Any]], path: Path) -> None:
    """USD/hour and nodes over time, every system on one chart (two panels), phase starts marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_usd, ax_nodes) = plt.subplots(2, 1, sharex=True, figsize=(10, 6))
    for run in runs:
        tl = run["timeline"]
        ts = [s["t"] / 60 for s in tl]
        ax_usd.plot(ts, [s["usd_per_hour"] for s in tl], label=run["system"])
        ax_nodes.plot(ts, [s["nodes"] for s in tl], label=run["system"])
        seen: set[str] = set()
        for s in tl:
            if s["phase"] not in seen:
                seen.add(s["phase"])
                for ax in (ax_usd, ax_nodes):
                    ax.axvline(s["t"] / 60, color="grey", linewidth=0.5, linestyle=":")
                ax_usd.annotate(s["phase"], (s["t"] / 60, 0), xycoords=("data", "axes fraction"), fontsize=7, color="grey")
    ax_usd.set_ylabel("USD/hour")
    ax_nodes.set_ylabel("nodes")
    ax_nodes.set_xlabel("minutes")
    ax_usd.legend()
    ax_usd.set_title(f"{runs[0]['pods']} pods: scale up, steady, scale in 70%, drift, scale up")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM handler: raise :class:`KeyboardInterrupt`, as SIGINT does, so cleanup runs."""
    raise KeyboardInterrupt(f"signal {signum}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--system", choices=["karpy", "karpenter", "both"], default="karpy")
    parser.add_argument("--pods", type=int, default=5000, help="Deployment pods at full scale (about pods/10 nodes)")
    parser.add_argument("--steady", type=float, default=600.0, help="seconds of the steady phase")
    parser.add_argument("--keep", type=float, default=0.3, help="fraction of each Deployment kept by the scale-in")
    parser.add_argument("--quiet", type=float, default=60.0, help="seconds without a change that count as settled")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds a phase may take to settle")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--opt-time-limit", type=float, default=10.0, help="HiGHS seconds for the optimum")
    parser.add_argument("--leader-election", action="store_true", help="run both controllers with their leader Lease")
    parser.add_argument("--controller-repo", type=Path, default=None, help="run karpy from this checkout")
    parser.add_argument("--json", type=Path, default=None, help="write the results and timelines here")
    parser.add_argument("--plot", type=Path, default=None, help="write the USD/hour and nodes chart here (PNG)")
    parser.add_argument("--keep-logs", default=None, help="copy each controller's log, and kube-scheduler's binds and "
                        "Unschedulable marks (<system>-kube-scheduler.jsonl), into this directory")
    parser.add_argument("--combine", type=Path, nargs="+", default=None,
                        help="run nothing: print the table of these --json files together (and --plot them on one chart)")
    args = parser.parse_args()
    # SIGTERM (``timeout``, ``kill``) as Ctrl-C: the ``finally`` blocks and context managers then
    # stop the controllers and the dev cluster, whose processes run in sessions of their own and
    # would otherwise outlive this one.
    signal.signal(signal.SIGTERM, _interrupt)
    if args.combine:
        runs = [run for path in args.combine for run in json.loads(path.read_text())["runs"]]
    else:
        systems = ["karpy", "karpenter"] if args.system == "both" else [args.system]
        runs = []
        for system in systems:
            runs.append(asyncio.run(run_system(system, args)))
            if args.json:  # after each system: a later failure loses nothing measured
                args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "runs": runs},
                                                indent=1) + "\n")
    print("\n" + HEADER)
    for run in runs:
        for p in run["phases"]:
            print(row(run["system"], PhaseResult(**p)))
    if args.plot:
        plot(runs, args.plot)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM, after the cleanup above
        print("scale_apiserver: interrupted; controllers and dev cluster stopped", file=sys.stderr)
        sys.exit(130)
