"""Synced before acting on the real control plane (issue 34, item 1): a kube-apiserver restart, a
leader SIGKILL and a leader SIGSTOP past its lease, each mid-provisioning with two controller
replicas, leave exactly the NodeClaims a fault-free run makes, no empty node, every pod Running.

12 one-cpu pods on m5.xlarge (three per node): 4 NodeClaims. The trial harness is
``tests/integration/faults.py`` (runnable by hand for larger workloads and version comparisons).
"""

from __future__ import annotations

import pytest

from .faults import trial

pytestmark = pytest.mark.devcluster  # e2e: the root conftest.py marks every test using the devcluster fixture

PODS = 12
NEEDED = 4
"""NodeClaims a fault-free run makes for :data:`PODS` (asserted by the reference test below)."""


async def _check(kube, devcluster, fault: str, tmp_path) -> None:
    tally = await trial(kube, devcluster, fault, pods=PODS, replicas=2, workdir=tmp_path)
    print(tally.row())
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(tmp_path.glob("*.log")))
    assert tally.running == PODS, logs
    assert tally.claims == NEEDED and tally.nodes == NEEDED, (tally, logs)
    assert tally.empty == 0, (tally, logs)


@pytest.mark.timeout(240)
async def test_fault_free_reference(kube, devcluster, tmp_path):
    await _check(kube, devcluster, "none", tmp_path)


@pytest.mark.timeout(240)
async def test_apiserver_restart_mid_provisioning_launches_nothing_extra(kube, devcluster, tmp_path):
    await _check(kube, devcluster, "apiserver", tmp_path)


@pytest.mark.timeout(240)
async def test_leader_sigkill_mid_provisioning_launches_nothing_extra(kube, devcluster, tmp_path):
    await _check(kube, devcluster, "sigkill", tmp_path)


@pytest.mark.timeout(240)
async def test_leader_sigstop_past_its_lease_launches_nothing_extra(kube, devcluster, tmp_path):
    await _check(kube, devcluster, "sigstop", tmp_path)
