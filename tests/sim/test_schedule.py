"""One schedule for the operator and the simulator (issue 38): the simulator runs exactly the
controllers the operator runs, reached through ``Controllers.schedule()``; a controller added to
the schedule runs in the simulator without any change to ``Simulator.step``."""

from __future__ import annotations

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.base import Controller, Runnable, Wake
from karpy_core.controllers.wiring import Controllers, Schedule
from karpy_core.featuregates import FeatureGates
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.operator import ControllerSettings, Operator
from karpy_core.sim.simulator import Simulator
from karpy_core.utils.clock import VirtualClock
from tests.sim.test_scenarios_time import NODECLASS, deployment, nodepool

ALL_GATES = FeatureGates(NodeOverlay=True, StaticCapacity=True, CapacityBuffer=True)


def operator(gates: FeatureGates) -> Operator:
    clock = VirtualClock()
    return Operator(kube=InMemoryCluster(clock), provider=load_provider("simulated", {}), clock=clock,
                    settings=ControllerSettings(feature_gates=gates))


@pytest.mark.parametrize("gates", [FeatureGates(), ALL_GATES], ids=["default-gates", "every-gate"])
async def test_the_simulator_runs_the_controllers_the_operator_runs(gates: FeatureGates) -> None:
    op = operator(gates)
    # what the operator spawns, one task each; the pod metrics controller is built only with a
    # metrics registry, which the operator has and the simulator has not
    spawned = [c.name for c in op._running if c.name != "metrics.pod"]
    assert len(spawned) == len(op._running) - 1
    sim = Simulator(load_provider("simulated", {}), feature_gates=gates, disruption=True)
    assert sim.schedule.names == spawned
    sim.apply([NODECLASS, nodepool(), deployment(replicas=3)])
    await sim.run_until(sim.start + 600)
    assert [n["metadata"]["name"] for n in sim.cluster.objects("Node")]  # it launched, so every phase had work
    assert sim.driven == set(spawned)  # each ran at least one pass, garbage collection (first after 10 s) included


class Counting:
    """A controller the simulator has no rule for: run on its resync, as the operator runs it."""

    name = "test.counting"
    wakes_on: tuple[Wake, ...] = ()
    resync_seconds: float | None = 30.0
    first_delay = 5.0

    def __init__(self) -> None:
        self.clock: VirtualClock | None = None
        self.passes: list[float] = []

    async def reconcile(self) -> list[str]:
        assert self.clock is not None
        self.passes.append(self.clock.now())
        return []

    def next_due(self) -> float | None:
        return None


async def test_a_controller_added_to_the_schedule_runs_in_the_simulator(monkeypatch: pytest.MonkeyPatch) -> None:
    added: list[Counting] = []
    built = Controllers.schedule

    def schedule(self: Controllers) -> Schedule:
        extra = Counting()
        added.append(extra)
        return Schedule((*built(self).entries, extra))

    monkeypatch.setattr(Controllers, "schedule", schedule)
    sim = Simulator(load_provider("simulated", {}), disruption=True)
    (extra,) = added
    extra.clock = sim.clock
    assert isinstance(extra, Controller) and extra in sim.schedule
    await sim.step()
    assert extra.passes == []  # first_delay not over
    sim.apply([NODECLASS, nodepool(), deployment(replicas=2)])
    await sim.run_until(sim.start + 120)
    assert extra.passes and extra.passes[0] >= sim.start + 5.0 and "test.counting" in sim.driven
    gaps = [b - a for a, b in zip(extra.passes, extra.passes[1:], strict=False)]
    assert all(g >= 30.0 for g in gaps)  # at most once per resync


class OwnLoop:
    """A controller with its own loop: the simulator cannot step it and says so."""

    name = "test.own-loop"
    wakes_on: tuple[Wake, ...] = ()

    async def run(self) -> None:
        raise AssertionError("never run by the simulator")

    def trigger(self) -> None:
        """Nothing to wake."""


async def test_a_runnable_without_a_simulator_rule_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    built = Controllers.schedule
    monkeypatch.setattr(Controllers, "schedule", lambda self: Schedule((*built(self).entries, OwnLoop())))
    sim = Simulator(load_provider("simulated", {}))
    assert isinstance(OwnLoop(), Runnable)
    with pytest.raises(TypeError, match=r"test\.own-loop"):
        await sim.step()
