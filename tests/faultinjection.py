"""Fault injection for the cloud providers: a loopback proxy in front of the real HTTP servers
(moto server mode, the fake KakaoCloud OpenAPI) and a trial driver that counts leaked and
duplicate instances per NodeClaim.

One trial (:func:`run_trial`):

1. a NodeClaim is stored in an in-memory cluster and the real NodeClaim lifecycle controller
   (:class:`~karpy_core.controllers.nodeclaim.lifecycle.NodeClaimLifecycle`), holding a fresh
   provider whose every cloud call goes through :class:`FaultProxy`, drives it through launch and
   deletion in one asyncio task - "the controller's task";
2. the proxy injects one :class:`Fault` at the ``at``-th cloud request of that run: the task is
   cancelled before the request reaches the server or after the server answered; the server acts
   and the answer is held past the client's read timeout; the server acts and a 5xx is returned
   instead of its answer; a 5xx or a storm of throttling answers (429 for KakaoCloud,
   ``RequestLimitExceeded`` for EC2) is returned without acting; the credentials expire
   (KakaoCloud: every IAM token; AWS: an ``ExpiredToken`` answer);
3. "restart": a fresh provider and controller finish the job (launch if the claim still wants it,
   core garbage collection with the clock past its grace period, then deletion, then GC again);
4. the instances of the NodeClaim left alive are counted straight from the server: after the
   launch and GC, more than one is a **duplicate**; after deletion and GC, any is a **leak**.

Faults are injected only in the first run; the restart talks to the same proxy, disarmed.
Everything listens on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from karpy_core.cloudprovider.provider import CloudProvider
from karpy_core.controllers.nodeclaim.garbagecollection import garbage_collect
from karpy_core.controllers.nodeclaim.lifecycle import NodeClaimLifecycle
from karpy_core.kube.memory import InMemoryCluster
from karpy_core.state.cluster import is_true
from karpy_core.testing.conformance import nodeclaim_for
from karpy_core.utils.clock import RealClock

__all__ = ["KINDS", "AWSWorld", "Fault", "FaultProxy", "KakaoWorld", "Tally", "plan", "run_suite", "run_trial"]

KINDS = ("cancel-before", "cancel-after", "timeout-after-act", "5xx-after-act", "5xx", "throttle-storm", "token-expiry")
"""Every fault kind a trial can inject (see the module docstring)."""

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Fault:
    """One fault at the ``at``-th request (1-based) of a run; ``times`` requests for a storm."""

    kind: str
    at: int
    times: int = 1


class LoopbackProxy:
    """A loopback HTTP server on 127.0.0.1 (a free port) whose every request goes to
    :meth:`_handle`, with a client session for forwarding to ``upstream``; subclasses answer.

    Args:
        upstream: base URL of the real server (``http://127.0.0.1:port``).
    """

    def __init__(self, upstream: str):
        self.upstream = upstream.rstrip("/")
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> str:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60), auto_decompress=False)
        return self.url

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError


class FaultProxy(LoopbackProxy):
    """A loopback HTTP proxy to ``upstream`` that injects :class:`Fault` s.

    Args:
        upstream: base URL of the real server (``http://127.0.0.1:port``).
        error: ``(kind, request) -> (status, body bytes, content type)`` for injected answers,
            ``kind`` one of ``5xx``, ``throttle``, ``expired``.
        on_expire: what token expiry does server-side (None: answer ``error("expired")`` instead).
        delay: seconds an answer is held for ``timeout-after-act`` (longer than the client's read timeout).
    """

    def __init__(self, upstream: str, error: Callable[[str, web.Request], tuple[int, bytes, str]], *,
                 on_expire: Callable[[], None] | None = None, delay: float = 1.0):
        super().__init__(upstream)
        self.error = error
        self.on_expire = on_expire
        self.delay = delay
        self.fault: Fault | None = None
        self.target: asyncio.Task[Any] | None = None
        self.seen = 0
        self.calls: list[tuple[int, str, str, int]] = []
        self.armed_calls: list[tuple[int, str, str, int]] = []

    def arm(self, fault: Fault | None, target: asyncio.Task[Any] | None) -> None:
        """Inject ``fault`` into the requests of ``target`` counted from now."""
        self.fault, self.target, self.seen = fault, target, 0
        self.calls.clear()

    def disarm(self) -> None:
        """Stop injecting; :attr:`armed_calls` keeps the requests of the armed run."""
        self.fault, self.target = None, None
        self.armed_calls = list(self.calls)

    def _cancel(self) -> None:
        if self.target is not None and not self.target.done():
            self.target.cancel()

    async def _forward(self, request: web.Request) -> tuple[int, bytes, dict[str, str]]:
        assert self._session is not None
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with self._session.request(request.method, self.upstream + request.path_qs, data=body, headers=headers,
                                         allow_redirects=False) as r:
            data = await r.read()
            out = {k: v for k, v in r.headers.items() if k.lower() not in _HOP | {"content-encoding", "date", "server"}}
            return r.status, data, out

    def _injected(self, kind: str, request: web.Request) -> web.Response:
        status, body, ctype = self.error(kind, request)
        return web.Response(status=status, body=body, content_type=ctype)

    @staticmethod
    async def operation(request: web.Request) -> str:
        """``METHOD path`` for REST calls; the AWS operation name (query ``Action`` or JSON
        ``X-Amz-Target``) for AWS calls, which all ``POST /``."""
        target = request.headers.get("X-Amz-Target")
        if target:
            return target.rsplit(".", 1)[-1]
        if request.path == "/" and request.method == "POST":
            body = await request.read()
            for part in body.split(b"&"):
                if part.startswith(b"Action="):
                    return part[7:].decode()
        return f"{request.method} {request.path}"

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.seen += 1
        n, f = self.seen, self.fault
        op = await self.operation(request)
        kind = f.kind if f is not None and f.at <= n < f.at + f.times else None
        status = 0
        try:
            if kind == "cancel-before":
                self._cancel()
                status = 599
                return web.Response(status=503, text="cancelled before the request")
            if kind in ("5xx", "throttle-storm"):
                resp = self._injected("5xx" if kind == "5xx" else "throttle", request)
                status = resp.status
                return resp
            if kind == "token-expiry":
                if self.on_expire is None:
                    resp = self._injected("expired", request)
                    status = resp.status
                    return resp
                self.on_expire()
            status, body, headers = await self._forward(request)
            if kind == "cancel-after":
                self._cancel()
            elif kind == "timeout-after-act":
                await asyncio.sleep(self.delay)
            elif kind == "5xx-after-act":
                resp = self._injected("5xx", request)
                status = resp.status
                return resp
            return web.Response(status=status, body=body, headers=headers)
        finally:
            self.calls.append((n, request.method, op, status))


# ------------------------------------------------------------------------------------------ worlds
class World:
    """A cloud behind a proxy: ``provider()`` makes a fresh plugin (a "restarted controller")."""

    name = ""
    proxy: FaultProxy

    def node_class_ref(self) -> dict[str, str]:
        raise NotImplementedError

    def requirements(self) -> list[dict[str, Any]]:
        return []

    def provider(self, kube: InMemoryCluster) -> Any:
        raise NotImplementedError

    async def prepare(self, kube: InMemoryCluster) -> None:
        """Store what the provider reads from the cluster (its NodeClass)."""

    async def alive(self, claim: str) -> list[str]:
        """Ids of the live (not terminating) instances the server holds for NodeClaim ``claim``."""
        raise NotImplementedError

    async def close(self) -> None:
        await self.proxy.close()


class KakaoWorld(World):
    """The KakaoCloud provider against the fake OpenAPI server (tests/kakaocloud/fake_server.py)."""

    name = "kakaocloud"

    def __init__(self) -> None:
        from kakaocloud_fake_server import FakeKakaoCloud

        self.fake = FakeKakaoCloud()

    async def start(self) -> KakaoWorld:
        import json

        await self.fake.start()
        base = str(self.fake.server.make_url("")).rstrip("/")  # type: ignore[union-attr]

        def error(kind: str, request: web.Request) -> tuple[int, bytes, str]:
            status, code = {"5xx": (500, "InternalServerError"), "throttle": (429, "TooManyRequests")}.get(kind, (401, "Unauthorized"))
            return status, json.dumps({"error": {"code": code, "message": "injected"}}).encode(), "application/json"

        self.proxy = FaultProxy(base, error, on_expire=self.fake.expire_tokens, delay=0.6)
        await self.proxy.start()
        return self

    async def prepare(self, kube: InMemoryCluster) -> None:
        from test_kakaocloud_conformance import NODECLASS

        await kube.create("KCNodeClass", NODECLASS)

    def node_class_ref(self) -> dict[str, str]:
        return {"group": "karpenter.kakaocloud.com", "kind": "KCNodeClass", "name": "default"}

    def provider(self, kube: InMemoryCluster) -> Any:
        from kakaocloud_fixtures import CA_PEM, FAST, keyring_json
        from karpy_kakaocloud.credentials import Credentials, Secret, parse_keyring
        from karpy_kakaocloud.plugin import create_plugin

        endpoints = {k: v.replace(str(self.fake.server.make_url("")).rstrip("/"), self.proxy.url)  # type: ignore[union-attr]
                     for k, v in self.fake.endpoints().items()}
        return create_plugin({
            "cluster_name": "demo", "kube": kube, "endpoints": endpoints, "cluster_ca_pem": CA_PEM,
            "credentials": Credentials(self.fake.credential_id, Secret(self.fake.credential_secret)),
            "keyring": parse_keyring(keyring_json()), **{**FAST, "request_timeout": 0.25, "page_size": 20},
        })

    async def alive(self, claim: str) -> list[str]:
        suffix = "-" + claim
        return sorted(i["id"] for i in self.fake.instances.values()
                      if str(i.get("name", "")).endswith(suffix) and i["status"] != "deleting")

    async def close(self) -> None:
        await super().close()
        await self.fake.close()


class AWSWorld(World):
    """The AWS provider against moto in server mode (tests/aws/conftest.py seeding)."""

    name = "aws"

    def __init__(self, moto_url: str, instance_type_data: Any = None):
        self.moto_url = moto_url
        self.data = instance_type_data
        self._session: Any = None

    async def start(self) -> AWSWorld:
        from aws_moto import seed
        from karpy_aws.instancetypes import InstanceTypeData

        await seed(self.moto_url)
        self.data = self.data or InstanceTypeData()
        # fetch the (static, shared) instance type catalog once, straight from moto: its
        # DescribeInstanceTypes answer takes seconds and would outlast the trials' read timeout
        from aws_moto import make_plugin

        warm = make_plugin(self.moto_url, self.data, use_pricing_api=False)
        try:
            await warm.instance_types.infos()
            await warm.instance_types.zones()
        finally:
            await warm.aclose()

        def error(kind: str, request: web.Request) -> tuple[int, bytes, str]:
            code, status = {"5xx": ("InternalError", 500), "throttle": ("RequestLimitExceeded", 503)}.get(kind, ("ExpiredToken", 400))
            auth = request.headers.get("Authorization", "")
            service = auth.split("Credential=", 1)[-1].split("/")[3] if "Credential=" in auth else "ec2"
            if request.headers.get("X-Amz-Target"):  # JSON protocol (SSM)
                json_code = {"RequestLimitExceeded": "ThrottlingException", "InternalError": "InternalServerError"}.get(code, code)
                return (status if status != 503 else 400, f'{{"__type":"{json_code}","message":"injected"}}'.encode(),
                        "application/x-amz-json-1.1")
            if service == "ec2":
                return status, (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Response><Errors><Error><Code>{code}</Code>"
                                f"<Message>injected</Message></Error></Errors><RequestID>faults</RequestID></Response>").encode(), "text/xml"
            query_code = "Throttling" if code == "RequestLimitExceeded" else code
            return (status if status != 503 else 400, (f"<ErrorResponse><Error><Type>Sender</Type><Code>{query_code}</Code>"
                                                        f"<Message>injected</Message></Error><RequestId>faults</RequestId>"
                                                        f"</ErrorResponse>").encode(), "text/xml")

        self.proxy = FaultProxy(self.moto_url, error, on_expire=None, delay=2.5)
        await self.proxy.start()
        return self

    def node_class_ref(self) -> dict[str, str]:
        return {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}

    def requirements(self) -> list[dict[str, Any]]:
        return [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5", "t3"]}]

    def provider(self, kube: InMemoryCluster) -> Any:
        from aws_moto import make_plugin
        from botocore.config import Config
        from test_conformance_aws import NODECLASS

        self._trim_catalog()
        if self._session is None:  # one session: botocore loads the EC2 model (seconds) once, not per restart
            from aws_moto import session

            self._session = session()
        plugin = make_plugin(self.proxy.url, self.data, nodeclasses={"default": NODECLASS}, use_pricing_api=False,
                             session=self._session)
        # a read timeout the proxy's held answers exceed; botocore's own retries as configured by karpy
        plugin.clients._config = plugin.clients._config.merge(Config(read_timeout=2.0, connect_timeout=2))
        return plugin

    def _trim_catalog(self) -> None:
        """Keep only the m5/t3 families (the NodeClaims' requirement) in the shared, already
        fetched DescribeInstanceTypes answer: building ~800 types per restarted provider costs
        seconds of CPU and tells nothing about faults."""
        for region, (at, infos) in list(self.data.infos.items()):
            if len(infos) > 100:
                self.data.infos[region] = (at, {k: v for k, v in infos.items() if k.split(".")[0] in ("m5", "t3")})

    async def alive(self, claim: str) -> list[str]:
        from aws_moto import session

        async with session().client("ec2", endpoint_url=self.moto_url) as ec2:
            resp = await ec2.describe_instances(Filters=[
                {"Name": "tag:karpenter.sh/nodeclaim", "Values": [claim]},
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped"]}])
        return sorted(i["InstanceId"] for r in resp["Reservations"] for i in r["Instances"])


# ------------------------------------------------------------------------------------------ trials
@dataclass
class Tally:
    """Totals over trials of one cloud."""

    cloud: str
    trials: int = 0
    leaked: int = 0
    duplicates: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        return f"{self.cloud:<11} trials={self.trials:<4} leaked={self.leaked:<3} duplicates={self.duplicates:<3} ({self.seconds:.0f} s)"


class _GCClock(RealClock):
    """Wall time moved past the GC grace period (the instances are real-time stamped)."""

    def now(self) -> float:
        return time.time() + 120.0


async def _drive(lifecycle: NodeClaimLifecycle, kube: InMemoryCluster, name: str, *, deleting: bool,
                 on_launched: Callable[[], Awaitable[None]] | None = None, steps: int = 40) -> None:
    """Reconcile ``name`` until launched (then ``on_launched``, then delete it) and until it is gone."""
    for _ in range(steps):
        try:
            nc = await kube.get("NodeClaim", name)
        except Exception:
            return
        if not nc["metadata"].get("deletionTimestamp") and (deleting or is_true(nc, "Launched")):
            if on_launched is not None and is_true(nc, "Launched"):
                await on_launched()
                on_launched = None
            await kube.delete("NodeClaim", name)
            continue
        await lifecycle.reconcile_one(nc, {})
    raise RuntimeError(f"NodeClaim {name} did not converge in {steps} reconciles")


async def run_trial(world: World, claim: str, fault: Fault | None) -> tuple[int, int, str]:
    """One trial (module docstring); returns (leaked, duplicates, note)."""
    kube = InMemoryCluster()
    await world.prepare(kube)
    nc = nodeclaim_for(claim, world.node_class_ref(), world.requirements(), nodepool="faults")
    await kube.create("NodeClaim", nc.model_dump(by_alias=True, exclude_none=True, mode="json"))
    clock = RealClock()
    note = ""
    first = world.provider(kube)
    lifecycle = NodeClaimLifecycle(kube=kube, provider=CloudProvider(first), clock=clock)
    task = asyncio.ensure_future(_drive(lifecycle, kube, claim, deleting=False))
    world.proxy.arm(fault, task)
    try:
        await asyncio.wait_for(asyncio.shield(task), 60)
    except asyncio.CancelledError:
        note = "cancelled"
    except Exception as exc:
        note = f"{type(exc).__name__}"
    finally:
        world.proxy.disarm()
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await first.aclose()
    # restart: a fresh provider and controller finish the job, GC runs
    second = world.provider(kube)
    provider = CloudProvider(second)
    lifecycle = NodeClaimLifecycle(kube=kube, provider=provider, clock=clock)
    duplicates = 0

    async def after_launch() -> None:
        nonlocal duplicates
        await garbage_collect(kube, provider, _GCClock())
        duplicates = max(0, len(await world.alive(claim)) - 1)

    try:
        exists = True
        try:
            current = await kube.get("NodeClaim", claim)
        except Exception:
            exists = False
        if exists:
            await _drive(lifecycle, kube, claim, deleting=bool(current["metadata"].get("deletionTimestamp")),
                         on_launched=after_launch)
        await garbage_collect(kube, provider, _GCClock())
        leaked = len(await world.alive(claim))
    finally:
        await second.aclose()
    return leaked, duplicates, note


def plan(boundaries: int, minimum: int) -> list[Fault]:
    """Every fault kind at every boundary ``1..boundaries``; cycled (with storms of 2..6) until
    there are at least ``minimum`` trials."""
    faults: list[Fault] = []
    for round_ in itertools.count():
        for kind in KINDS:
            for at in range(1, boundaries + 1):
                faults.append(Fault(kind, at, times=2 + (at + round_) % 5 if kind == "throttle-storm" else 1))
        if len(faults) >= minimum:
            return faults
    raise AssertionError("unreachable")


async def run_suite(world: World, *, trials: int, sample: bool = False,
                    focus: Callable[[str], bool] | None = None) -> Tally:
    """Count a clean run's requests, then run every fault of :func:`plan` (or, with ``sample``,
    ``trials`` of them: every kind at the boundaries whose operation ``focus`` selects (e.g. the
    create and delete calls), the task cancelled before and after every request when that fits
    in ``trials``, the other faults spread evenly over kinds and boundaries)."""
    tally = Tally(world.name)
    started = time.monotonic()
    leaked, dups, _ = await run_trial(world, f"faults-{world.name[0]}0000", None)
    boundaries = len(world.proxy.armed_calls)
    if leaked or dups:
        tally.failures.append(f"clean run: leaked={leaked} duplicates={dups}")
    faults = plan(boundaries, trials)
    if sample and len(faults) > trials:
        # every cancellation boundary when they fit, the other faults spread evenly over the rest
        ops = {n: op for n, _, op, _ in world.proxy.armed_calls}
        keep = [f for f in faults if focus is not None and focus(ops.get(f.at, ""))][:trials]
        cancels = [f for f in faults if f.kind.startswith("cancel") and f not in keep]
        if len(keep) + len(cancels) <= trials:
            keep += cancels
        rest = [f for f in faults if f not in keep]
        step = len(rest) / (trials - len(keep))
        faults = keep + [rest[int(i * step)] for i in range(trials - len(keep))]
    for i, fault in enumerate(faults, 1):
        claim = f"faults-{world.name[0]}{i:04d}"
        leaked, dups, note = await run_trial(world, claim, fault)
        tally.trials += 1
        tally.leaked += leaked
        tally.duplicates += dups
        tally.by_kind[fault.kind] = tally.by_kind.get(fault.kind, 0) + 1
        if leaked or dups:
            tally.failures.append(f"{claim} {fault}: leaked={leaked} duplicates={dups} {note}")
    tally.seconds = time.monotonic() - started
    tally.boundaries = boundaries  # type: ignore[attr-defined]
    return tally


def start_moto() -> tuple[Any, str]:
    """A ThreadedMotoServer on 127.0.0.1 with the test suite's fleet faults installed; (server, url)."""
    from aws_moto import _install_fleet_faults
    from moto.server import ThreadedMotoServer

    _install_fleet_faults()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    urllib.request.urlopen(f"{url}/moto-api/", timeout=10).read()
    return server, url
