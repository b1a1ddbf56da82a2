"""Fault injection for both cloud providers (issue 10 section 7): trials / leaked / duplicates.

The real providers talk HTTP to the real servers on 127.0.0.1 - the AWS provider (aioboto3) to
moto in server mode, the KakaoCloud provider (httpx) to the fake OpenAPI server - through a
loopback proxy that injects one fault per trial while the real NodeClaim lifecycle controller
drives a NodeClaim through create and delete: the controller's task cancelled before each cloud
request and after each answer, read timeouts after the server acted, 5xx after acting, 5xx and
throttling storms before acting, expired credentials. Then a fresh provider and controller finish
the job, core garbage collection runs past its grace period, and the instances left per NodeClaim
are counted (see ``tests/faultinjection.py``). Every fault kind is injected at every request
boundary of a clean run (``--full``); by default a cloud whose plan exceeds ``--trials`` runs
exactly ``--trials``: the task cancelled before and after every request, the other kinds spread
over the boundaries (AWS: moto's answers cost seconds of parsing per restarted provider).

Run: ``.venv/bin/python benchmarks/faults.py [--trials 100] [--full] [--cloud aws|kakaocloud]``.
Exit code 1 when anything leaked or was duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faultinjection import AWSWorld, KakaoWorld, Tally, run_suite, start_moto


async def main(clouds: list[str], trials: int, full: bool = False) -> list[Tally]:
    out = []
    if "kakaocloud" in clouds:
        world = await KakaoWorld().start()
        try:
            out.append(await run_suite(world, trials=trials, sample=not full))
        finally:
            await world.close()
    if "aws" in clouds:
        server, url = start_moto()
        world2 = await AWSWorld(url).start()
        try:
            out.append(await run_suite(world2, trials=trials, sample=not full))
        finally:
            await world2.close()
            server.stop()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=100, help="at least this many trials per cloud (default 100)")
    parser.add_argument("--full", action="store_true", help="every fault kind at every boundary (AWS: about 7 minutes on 2 shared cores)")
    parser.add_argument("--cloud", choices=["aws", "kakaocloud"], action="append", help="default: both")
    args = parser.parse_args()
    logging.basicConfig(level=logging.CRITICAL)
    logging.getLogger("werkzeug").setLevel(logging.CRITICAL)
    tallies = asyncio.run(main(args.cloud or ["kakaocloud", "aws"], args.trials, args.full))
    print(f"{'cloud':<11} {'trials':>6} {'leaked':>6} {'duplicates':>10} {'boundaries':>10} {'seconds':>7}")
    for t in tallies:
        print(f"{t.cloud:<11} {t.trials:>6} {t.leaked:>6} {t.duplicates:>10} {t.boundaries:>10} {t.seconds:>7.0f}")  # type: ignore[attr-defined]
        print("  by fault: " + ", ".join(f"{k} {v}" for k, v in t.by_kind.items()))
        for f in t.failures:
            print("  " + f)
    sys.exit(1 if any(t.leaked or t.duplicates or t.failures for t in tallies) else 0)
