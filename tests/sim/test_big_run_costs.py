"""What made a 100,000-pod ``karpy simulate`` cheaper without changing a decision (issue 35, fast35):
the cyclic collector relaxed for the command and left out of the exit, and the simulated
kube-scheduler's Unschedulable marks stored without copying their condition list."""

from __future__ import annotations

import asyncio
import gc
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from karpy_core import cli
from karpy_core.errors import ConfigurationError
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.sim.kubelet import KubeSchedulerSimulator
from karpy_core.state.views import PodView
from karpy_core.utils.clock import VirtualClock
from karpy_core.utils.gcpause import RELAXED_GEN0_THRESHOLD, gc_relaxed

REPO = Path(__file__).resolve().parents[2]


def test_gc_relaxed_raises_the_young_threshold_freezes_and_restores_all() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    garbage: list[Any] = []
    garbage.append(garbage)  # alive when the block starts: frozen out of its collections
    with gc_relaxed():
        assert gc.get_threshold() == (max(before[0], RELAXED_GEN0_THRESHOLD), *before[1:])
        assert gc.get_freeze_count() > frozen
        assert gc.isenabled()  # still on: cycles are collected, only later
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with pytest.raises(RuntimeError), gc_relaxed(5_000):
        raise RuntimeError("boom")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_gc_relaxed_never_lowers_a_larger_threshold_and_keeps_the_collector_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(500_000, 3, 4)
    gc.disable()
    try:
        with gc_relaxed():
            assert gc.get_threshold() == (500_000, 3, 4) and not gc.isenabled()
        assert gc.get_threshold() == (500_000, 3, 4) and not gc.isenabled()
    finally:
        gc.enable()
        gc.set_threshold(*before)


def test_simulate_runs_under_a_relaxed_collector_and_restores_it(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, int, int]] = []

    async def fake_run(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.get_threshold())
        raise ConfigurationError("stop here")

    before = gc.get_threshold()
    monkeypatch.setattr(cli, "run_simulation", fake_run)
    result = CliRunner().invoke(cli.app, ["simulate"])
    assert result.exit_code == 2 and "stop here" in result.output
    assert seen == [(max(before[0], RELAXED_GEN0_THRESHOLD), *before[1:])]
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_simulate_help_is_the_commands_own() -> None:
    """typer reads the wrapped command's signature and docstring (functools.wraps)."""
    out = CliRunner().invoke(cli.app, ["simulate", "--help"]).output
    assert "Simulate karpy on manifests: which nodes it launches" in out and "--max-pods" in out and "--from-cluster" in out


def test_karpy_leaves_what_it_built_frozen_for_the_exit() -> None:
    """After the command the interpreter's last collection has nothing to walk: an atexit hook
    (run before it) sees every object frozen, the command's output unchanged."""
    code = ("import atexit, gc, sys; atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0, file=sys.stderr)); "
            "from karpy_core.cli import main; main()")
    proc = subprocess.run([sys.executable, "-c", code, "validate", "examples/workloads/inflate.yaml"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "valid: 1 Deployment\n"
    assert "frozen True" in proc.stderr


def _pod(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": random.choice(["default", "team-a"]), "labels": {"app": name[:1]}},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}, "status": status}


def _statuses(rng: random.Random) -> list[dict[str, Any]]:
    sched = [{"type": "PodScheduled", "status": "False", "reason": r, "message": "m"} for r in ("Unschedulable", "SchedulingGated")]
    return [{}, {"phase": "Pending"}, {"phase": "Pending", "conditions": [rng.choice(sched)]},
            {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False"}, rng.choice(sched)]},
            {"phase": "Pending", "nominatedNodeName": "n1"}]


def _old_mark(cluster: InMemoryCluster, pods: dict[str, dict[str, Any]], keys: list[str], nodes: int) -> int:
    """The marking as it was before: one fresh patch per pod, copied into the store."""
    from karpy_core.state.cluster import condition

    changes = 0
    for key in keys:
        p = pods[key]
        cond = condition(p, "PodScheduled")
        if cond is None or cond.get("reason") != "Unschedulable":
            cluster.patch_stored("Pod", p["metadata"]["name"],
                                 {"status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                                             "message": f"0/{nodes} nodes are available"}]}},
                                 p["metadata"].get("namespace"))
            changes += 1
    return changes


@pytest.mark.parametrize("seed", range(5))
def test_unschedulable_marks_store_what_the_copying_path_stored(seed: int) -> None:
    rng = random.Random(seed)
    random.seed(seed)
    old, new = InMemoryCluster(VirtualClock()), InMemoryCluster(VirtualClock())
    for i in range(rng.randint(1, 40)):
        pod = _pod(f"{rng.choice('abc')}{i}", rng.choice(_statuses(rng)))
        old.create_sync("Pod", pod)
        new.create_sync("Pod", pod)
    by_key = {f"{p['metadata']['namespace']}/{p['metadata']['name']}": p for p in old.snapshot("Pod")}
    keys = sorted(rng.sample(sorted(by_key), rng.randint(0, len(by_key))))
    nodes = rng.randint(0, 3)
    want = _old_mark(old, by_key, keys, nodes)
    got = KubeSchedulerSimulator(new)._mark_unschedulable({k: v for k, v in zip(by_key, new.snapshot("Pod"), strict=True)}, keys, nodes)
    assert got == want
    assert new.snapshot("Pod") == old.snapshot("Pod")  # every stored version equal, resourceVersions included
    marked = [p["status"]["conditions"] for p in new.snapshot("Pod")
              if any(c.get("message", "").endswith("nodes are available") for c in p["status"].get("conditions", []))]
    assert all(c is marked[0] for c in marked)  # one list, stored as given, shared


def test_a_given_patch_is_stored_as_is_and_a_copied_one_is_not() -> None:
    cluster = InMemoryCluster(VirtualClock())
    cluster.create_sync("Pod", _pod("a", {}))
    cluster.create_sync("Pod", _pod("b", {}))
    ns = {p["metadata"]["name"]: p["metadata"]["namespace"] for p in cluster.snapshot("Pod")}
    conditions = [{"type": "PodScheduled", "status": "False"}]
    given = cluster.patch_stored("Pod", "a", {"status": {"conditions": conditions}}, ns["a"], given=True)
    copied = cluster.patch_stored("Pod", "b", {"status": {"conditions": conditions}}, ns["b"])
    assert given["status"]["conditions"] is conditions
    assert copied["status"]["conditions"] == conditions and copied["status"]["conditions"] is not conditions
    asyncio.run(cluster.get("Pod", "a", ns["a"]))["status"]["conditions"].append({"type": "x"})  # reads are copies
    assert conditions == [{"type": "PodScheduled", "status": "False"}]


def test_the_bound_pods_are_read_back_under_their_own_phase(tmp_path: Path) -> None:
    """After the creates and the binds, the simulator's next read remade every written pod's view
    under a filled ``creating pods`` / ``binding pods 100,000/100,000`` bar (4 s and 7 s on a loaded
    machine at 100,000 pods); now a phase of its own says so each time, and the views made are the
    ones the next reader gets."""
    from tests.sim.test_progress import Recorder
    from tests.test_cli_interrupt import NODEPOOL

    path = tmp_path / "pods.yaml"
    path.write_text(NODEPOOL.replace("replicas: 100000", "replicas: 1200"))
    rec = Recorder()
    asyncio.run(cli.run_simulation([str(path)], progress=rec))
    names = [name for name, _, _ in rec.phases]
    creating = names.index("creating pods: default/big")
    assert names[creating + 1] == "reading the pods written"  # the created pods' views, before kube-scheduler's cycle
    binding = names.index("kube-scheduler: binding pods")
    assert names[binding + 1] == "reading 1,200 pods bound"
    assert rec.phases[binding + 1] == ("reading 1,200 pods bound", None, 0)

    cluster = InMemoryCluster(VirtualClock())
    cluster.create_sync("Node", {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                                                                        "conditions": [{"type": "Ready", "status": "True"}]}})
    for i in range(3):
        cluster.create_sync("Pod", _pod(f"p{i}", {"phase": "Pending"}))
    seen = Recorder()
    assert asyncio.run(KubeSchedulerSimulator(cluster, progress=seen).reconcile()) == 3
    assert [n for n, _, _ in seen.phases][-1] == "reading 3 pods bound"
    views = cluster.views("Pod") or []
    assert all(isinstance(v, PodView) and v.node_name == "n1" for v in views)
    assert [id(v) for v in views] == [id(v) for v in cluster.views("Pod") or []]  # made once, reused
