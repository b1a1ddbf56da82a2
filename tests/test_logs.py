"""Log lines in Karpenter's shape (karpy_core.logs): upper-case level, ``logger``, ``commit``,
``controller`` from the running controller, NodeClaim/NodePool/Node fields, ``error`` and
``stacktrace`` from exceptions, key order, secrets scrubbed in the new fields."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest

from karpy_core.cloudprovider.provider import load_provider
from karpy_core.controllers.nodeclaim.garbagecollection import GarbageCollection
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.logs import KEY_ORDER, bind_controller, configure_logging, fields, spawn
from karpy_core.operator import ControllerSettings, LeaderSettings, Operator
from karpy_core.redaction import MASK, register_secret
from karpy_core.utils.clock import VirtualClock


@pytest.fixture
def lines(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Configure logging into a buffer; the fixture is a function returning the parsed lines."""
    monkeypatch.setenv("KARPY_COMMIT", "abc1234")
    buf = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    configure_logging("DEBUG", stream=buf)
    try:
        yield lambda: [json.loads(line) for line in buf.getvalue().splitlines()]
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


def test_karpenter_keys_levels_and_order(lines: Any) -> None:
    log = logging.getLogger("karpy.test.logs")
    log.debug("d")
    log.info("i")
    log.warning("w")
    log.error("e")
    logging.getLogger("botocore.endpoint").warning("third party")
    got = lines()
    assert [g["level"] for g in got] == ["DEBUG", "INFO", "WARN", "ERROR", "WARN"]
    assert [g["logger"] for g in got] == ["controller"] * 4 + ["botocore.endpoint"]
    assert all(g["commit"] == "abc1234" for g in got)
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", g["time"]) for g in got)
    assert list(got[0])[:5] == ["level", "time", "logger", "message", "commit"]
    assert list(got[0]) == [k for k in KEY_ORDER if k in got[0]]


def test_object_fields_not_words_in_the_message(lines: Any) -> None:
    nodeclaim = {"metadata": {"name": "default-x7k2p"}}
    logging.getLogger("karpy.test.logs").info("created nodeclaim", extra=fields(
        nodeclaim=nodeclaim, nodepool="default", node="ip-10-0-0-1", provider_id="aws:///us-east-1a/i-0abc",
        pod="team-a/web-1", **{"instance-types": "m5.large"}))
    [line] = lines()
    assert line["message"] == "created nodeclaim"
    assert line["NodeClaim"] == {"name": "default-x7k2p"} and line["NodePool"] == {"name": "default"}
    assert line["Node"] == {"name": "ip-10-0-0-1"} and line["Pod"] == {"name": "web-1", "namespace": "team-a"}
    assert line["provider-id"] == "aws:///us-east-1a/i-0abc" and line["instance-types"] == "m5.large"


async def test_controller_field_comes_from_the_task(lines: Any) -> None:
    log = logging.getLogger("karpy.test.logs")

    async def work() -> None:
        log.info("inside")

    await spawn(work(), name="nodeclaim.lifecycle")
    with bind_controller("provisioner"):
        log.info("bound")
    log.info("outside")
    got = lines()
    assert [(g["message"], g.get("controller")) for g in got] == [
        ("inside", "nodeclaim.lifecycle"), ("bound", "provisioner"), ("outside", None)]


def test_errors_have_error_and_a_real_stacktrace(lines: Any) -> None:
    log = logging.getLogger("karpy.test.logs")

    def deep() -> None:
        raise RuntimeError("instance vanished")

    try:
        deep()
    except RuntimeError:
        log.exception("reconcile failed; retrying")
    try:
        deep()
    except RuntimeError as exc:
        saved = exc
    log.error("controller stopped", exc_info=saved)  # an exception object, outside its except block
    log.warning("drift check failed", extra=fields(error=ValueError("no AMI")))  # an error field, no traceback
    got = lines()
    for line in got[:2]:
        assert line["error"] == "RuntimeError: instance vanished"
        assert line["stacktrace"].startswith("Traceback (most recent call last):")
        assert "in deep" in line["stacktrace"] and line["stacktrace"].endswith("RuntimeError: instance vanished")
        assert "exception" not in line and "exc_info" not in line
    assert got[2]["error"] == "ValueError: no AMI" and "stacktrace" not in got[2]


def test_secrets_are_scrubbed_in_fields_errors_and_stacktraces(lines: Any) -> None:
    register_secret("log-shape-secret-value-1234")
    log = logging.getLogger("karpy.test.logs")
    try:
        raise PermissionError("denied for log-shape-secret-value-1234")
    except PermissionError:
        log.exception("call failed", extra=fields(nodeclaim="log-shape-secret-value-1234", token={"t": "log-shape-secret-value-1234"}))
    [line] = lines()
    text = json.dumps(line)
    assert "log-shape-secret-value-1234" not in text
    assert line["NodeClaim"] == {"name": MASK} and line["token"] == {"t": MASK}
    assert line["error"] == f"PermissionError: denied for {MASK}" and MASK in line["stacktrace"]


async def test_a_controller_line_from_real_code(lines: Any) -> None:
    """Garbage collection of a NodeClaim whose instance is gone, run as the operator runs its
    controllers: the line names the NodeClaim, the provider id and the controller as fields."""
    clock = VirtualClock(1_000_000.0)
    kube = InMemoryCluster(clock)
    provider = load_provider("simulated", {})
    kube.create_sync("NodeClaim", {"metadata": {"name": "gone-1", "creationTimestamp": "1970-01-01T00:00:00Z"},
                                   "spec": {}, "status": {"providerID": "kwok://zone-a/gone-1",
                                                          "conditions": [{"type": "Registered", "status": "True"}]}})
    gc = GarbageCollection(kube=kube, provider=provider, clock=clock)
    _, deleted = await spawn(gc.reconcile(), name="nodeclaim.garbagecollection")
    assert deleted == ["gone-1"]
    line = next(g for g in lines() if g["message"].startswith("garbage collected nodeclaim"))
    assert line["controller"] == "nodeclaim.garbagecollection" and line["level"] == "INFO"
    assert line["NodeClaim"] == {"name": "gone-1"} and line["provider-id"] == "kwok://zone-a/gone-1"
    assert "gone-1" not in line["message"]


async def test_a_failing_provider_controller_is_logged_with_its_traceback(lines: Any) -> None:
    clock = VirtualClock(1_000_000.0)
    provider = load_provider("simulated", {})

    async def broken() -> None:
        raise RuntimeError("queue deleted")

    provider.controllers = lambda: [("aws.interruption", broken)]  # type: ignore[method-assign]
    op = Operator(kube=InMemoryCluster(clock), provider=provider, clock=clock,
                  settings=ControllerSettings.model_validate(dict(leader=LeaderSettings.model_validate(dict(enabled=False)),
                                                                    node_repair=False)))
    with pytest.raises(RuntimeError, match="queue deleted"):
        await asyncio.wait_for(op._lead(), 30)  # hang guard only
    line = next(g for g in lines() if g["message"] == "controller stopped")
    assert line["level"] == "ERROR" and line["controller"] == "aws.interruption"
    assert line["error"] == "RuntimeError: queue deleted"
    assert "in broken" in line["stacktrace"]


async def test_karpenters_lifecycle_lines_from_a_simulated_scale_down(lines: Any) -> None:
    """Issue 29: the lines Karpenter users alert on, with its messages and keys, from the real
    controllers (the simulator runs them): provisioning, launch, registration, initialization,
    a disruption command, the drain's taint, the Node and NodeClaim deletions."""
    from pathlib import Path

    from karpy_core.cli import run_simulation

    scenario = Path(__file__).resolve().parents[1] / "docs" / "examples" / "default-scale-down.yaml"
    await run_simulation([str(scenario)])
    got = lines()
    by_message: dict[str, list[dict[str, Any]]] = {}
    for g in got:
        by_message.setdefault(g["message"], []).append(g)
    for message in ("found provisionable pod(s)", "computed new nodeclaim(s) to fit pod(s)", "created nodeclaim", "launched nodeclaim",
                    "registered nodeclaim", "initialized nodeclaim", "disrupting node(s)", "tainted node", "deleted node",
                    "deleted nodeclaim"):
        assert by_message.get(message), f"no {message!r} line"
    found = by_message["found provisionable pod(s)"][0]
    assert re.fullmatch(r"[\w-]+/[\w.-]+(, [\w-]+/[\w.-]+){0,4}( and \d+ other\(s\))?", found["Pods"]), found
    assert found["duration"].endswith("ms")
    computed = by_message["computed new nodeclaim(s) to fit pod(s)"][0]
    assert computed["nodeclaims"] >= 1 and computed["pods"] >= 1
    created = by_message["created nodeclaim"][0]
    assert created["NodeClaim"]["name"] and created["NodePool"]["name"] and created["instance-types"] and created["requests"]
    launched = by_message["launched nodeclaim"][0]
    # controller-runtime's reconcile keys on every line of one object's reconcile
    name = launched["NodeClaim"]["name"]
    assert launched["name"] == name and launched["namespace"] == "" and re.fullmatch(r"[0-9a-f-]{36}", launched["reconcileID"])
    assert launched["provider-id"] and launched["instance-type"] and launched["zone"] and launched["capacity-type"] in ("on-demand", "spot")
    assert launched["allocatable"]["cpu"]
    registered = next(g for g in by_message["registered nodeclaim"] if g["NodeClaim"]["name"] == name)
    assert registered["Node"]["name"] and registered["provider-id"] == launched["provider-id"]
    assert registered["reconcileID"] != launched["reconcileID"]  # one ID per reconcile
    initialized = next(g for g in by_message["initialized nodeclaim"] if g["NodeClaim"]["name"] == name)
    assert initialized["allocatable"]["cpu"]
    disrupting = by_message["disrupting node(s)"][0]
    assert re.fullmatch(r"(Underutilized|Empty|Drifted)/[a-z-]+: (delete|replace): nodepools=\[[\w-]+\]: \[[\w., -]+\]"
                        r"( -> \[\d+ replacements?\])? \(savings: \$\d+\.\d\d\)", disrupting["command"]), disrupting["command"]
    assert disrupting["disrupted-node-count"] == len(disrupting["disrupted-nodes"]) >= 1
    assert disrupting["replacement-node-count"] == len(disrupting["replacement-nodes"])
    assert {"Node", "NodeClaim", "instance-type", "capacity-type"} <= set(disrupting["disrupted-nodes"][0])
    tainted = by_message["tainted node"][0]
    assert tainted["taint.Key"] == "karpenter.sh/disrupted" and tainted["taint.Effect"] == "NoSchedule" and tainted["Node"]["name"]
    assert by_message["deleted node"][0]["Node"]["name"] and by_message["deleted nodeclaim"][0]["NodeClaim"]["name"]
