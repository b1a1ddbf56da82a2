"""The fault-injection suite in small (issue 10 section 7): 20 trials per cloud - every fault kind
at the create and delete calls, the rest spread over the other request boundaries - must leave 0
leaked and 0 duplicate instances. The full run
(>= 100 trials per cloud) is ``benchmarks/faults.py``."""

from __future__ import annotations

import pytest

from tests.faultinjection import KINDS, AWSWorld, KakaoWorld, run_suite, start_moto

pytestmark = pytest.mark.faults

TRIALS = 20


def kakao_mutation(op: str) -> bool:
    return op == "POST /bcs/api/v1/instances" or op.startswith("DELETE /bcs/api/v1/instances/")


def aws_mutation(op: str) -> bool:
    return op in ("CreateFleet", "TerminateInstances")


async def test_kakaocloud_survives_faults():
    world = await KakaoWorld().start()
    try:
        tally = await run_suite(world, trials=TRIALS, sample=True, focus=kakao_mutation)
    finally:
        await world.close()
    assert tally.trials == TRIALS and set(tally.by_kind) == set(KINDS)
    assert (tally.leaked, tally.duplicates, tally.failures) == (0, 0, [])


async def test_aws_survives_faults():
    pytest.importorskip("moto")
    server, url = start_moto()
    try:
        world = await AWSWorld(url).start()
        try:
            tally = await run_suite(world, trials=TRIALS, sample=True, focus=aws_mutation)
        finally:
            await world.close()
    finally:
        server.stop()
    assert tally.trials == TRIALS and set(tally.by_kind) == set(KINDS)
    assert (tally.leaked, tally.duplicates, tally.failures) == (0, 0, [])
