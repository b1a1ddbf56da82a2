"""Chaos trials on the real control plane (issue 34 item 2), shared by ``benchmarks/chaos.py`` and
``tests/integration/test_chaos_e2e.py``.

Setup (as an operator would run it): the dev cluster of ``hack/devcluster.py`` (etcd,
kube-apiserver, kube-controller-manager, kube-scheduler, kwok), two ``karpy controller
--cloud-provider simulated --kwok`` replicas on one leader-election Lease (a replica that exits is
started again after a second, as its pod would be), a NodePool of one 4-cpu type (``m5.xlarge``:
three 1-cpu pods fit) and a Deployment of 1-cpu pods.

A trial injects one fault at one moment:

* faults: ``apiserver-restart`` (kube-apiserver SIGKILLed, started again 5 s later with the same
  flags), ``leader-kill`` (the leading replica SIGKILLed), ``leader-stop`` (the leader SIGSTOPped
  past its 15 s lease, then SIGCONT), ``watch-expiry`` (every open watch ends with an ``ERROR``
  event ``410 Expired`` and every new watch gets one, for a window: the informers relist),
  ``api-429`` and ``api-5xx`` (most requests answered 429 Too Many Requests with Retry-After, or
  500/503, for a window) and ``api-slow`` (every request held for seconds before it is forwarded).
  The last four go through :class:`FaultProxy`, a plain-HTTP proxy on 127.0.0.1 in front of
  kube-apiserver that the replicas' kubeconfig points at; the first three act on processes;
* moments: ``before-claims`` (right after the Deployment is created, before any NodeClaim),
  ``mid-launch`` (as the first NodeClaim appears), ``pre-register`` (once as many NodeClaims exist
  as the fault-free run made, before every one has a Node) and ``consolidation`` (the Deployment
  scaled down, the fault injected as the leader logs its first ``disrupting node(s)`` command).

Each trial records: pods Running; NodeClaims created against the fault-free run of the same
workload (the reference); empty Nodes left once the dust settles (no pod of the workload);
orphans (a Node no NodeClaim names, or a NodeClaim without its Node); double actions (a replica
creating or disrupting after another replica acquired the Lease later than it did: two leaders
acting, read from the replicas' JSON logs); seconds from the fault to the settled state. The
target is 0 NodeClaims beyond the reference, 0 empty Nodes, 0 orphans and 0 double actions.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from karpy_core.kube.client import AsyncKubeClient
from tests.integration.karpy_env import ControllerProcess, install_crds
from tests.integration.test_controller_e2e import deployment, nodeclass, nodepool

FAULTS = ("apiserver-restart", "leader-kill", "leader-stop", "watch-expiry", "api-429", "api-5xx", "api-slow")
"""Every fault kind, in the order the table lists them."""
PROXY_FAULTS = frozenset({"watch-expiry", "api-429", "api-5xx", "api-slow"})
"""Faults the proxy injects (the replicas talk to kube-apiserver through it)."""
MOMENTS = ("before-claims", "mid-launch", "pre-register", "consolidation")
"""When a fault is injected: three moments of a scale-up, one of a consolidation."""

INSTANCE_TYPE = "m5.xlarge"
"""The NodePool's one instance type: 4 cpu, three 1-cpu pods after the reserved capacity."""
PODS_PER_NODE = 3

ACTIONS = ("created nodeclaim", "disrupting node(s)", "garbage collected", "terminated leaked instances")
"""Log messages of a replica acting on the cluster or the cloud (double-action detection)."""
ACQUIRED = "leader election: acquired the lease"


class Cluster(Protocol):
    """What the harness needs of ``hack/devcluster.py``'s ``DevCluster``."""

    kubeconfig: Path | None
    server: str | None
    token: str | None
    ca_file: Path | None

    def restart_apiserver(self, down_seconds: float = 5.0, sig: int = signal.SIGKILL) -> None: ...


@dataclass(frozen=True)
class Workload:
    """A trial's size and timings.

    Attributes:
        pods: replicas of the 1-cpu Deployment (``pods / 3`` m5.xlarge Nodes needed).
        scale_down_to: replicas after the scale-down of a consolidation trial.
        settle_seconds: how long the cluster must stay unchanged to count as settled.
        timeout_seconds: give up waiting for a settled state after this long (from the fault).
        apiserver_down_seconds: kube-apiserver stays dead this long (apiserver-restart).
        stop_seconds: the leader stays SIGSTOPped this long (leader-stop; the lease is 15 s).
        window_seconds: how long a proxy fault lasts (watch-expiry, api-429, api-5xx, api-slow).
        storm_fraction: share of requests a 429 or 5xx storm answers with an error.
        slow_seconds: delay the slow API adds to every request.
    """

    pods: int = 30
    scale_down_to: int = 12
    settle_seconds: float = 12.0
    timeout_seconds: float = 240.0
    apiserver_down_seconds: float = 5.0
    stop_seconds: float = 25.0
    window_seconds: float = 12.0
    storm_fraction: float = 0.8
    slow_seconds: float = 3.0


@dataclass
class TrialResult:
    """One trial's outcome (see the module docstring for each measure)."""

    fault: str
    moment: str
    pods: int
    pods_running: int
    claims_created: int
    reference_claims: int
    empty_nodes: int
    orphans: int
    double_actions: int
    recover_seconds: float | None
    settled: bool
    log_dir: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def extra_claims(self) -> int:
        """NodeClaims created beyond the fault-free run of the same workload."""
        return max(0, self.claims_created - self.reference_claims)

    @property
    def ok(self) -> bool:
        """Met every target: settled, all pods Running, nothing extra, empty, orphaned or doubled."""
        return (self.settled and self.pods_running == self.pods and self.extra_claims == 0 and self.empty_nodes == 0
                and self.orphans == 0 and self.double_actions == 0)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields, ``extra_claims`` and ``ok`` included."""
        return {**{k: v for k, v in self.__dict__.items()}, "extra_claims": self.extra_claims, "ok": self.ok}


@dataclass
class Reference:
    """The fault-free run: NodeClaims created for the scale-up, and in all (scale-up then
    consolidation), and Nodes left after the consolidation."""

    scale_up_claims: int
    total_claims: int
    final_nodes: int


# ---------------------------------------------------------------------------------------------
# The fault-injecting proxy
# ---------------------------------------------------------------------------------------------

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive", "accept-encoding", "content-encoding",
        "upgrade", "proxy-connection", "te", "trailer"}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class FaultProxy:
    """A plain-HTTP reverse proxy on 127.0.0.1 in front of kube-apiserver (HTTPS), which injects
    one fault kind while :attr:`mode` is set. Watches (``?watch=true``) are streamed line by line.

    Modes: ``None`` (pass through), ``watch-expiry`` (open watches end with an ``ERROR`` 410
    ``Expired`` event, new watches get one at once), ``api-429`` / ``api-5xx`` (a share
    ``fraction`` of requests answered 429 with ``Retry-After: 1``, or 500/503, as kube-apiserver's
    Status objects), ``api-slow`` (each request held ``delay`` seconds before it is forwarded).

    Args:
        upstream: kube-apiserver's URL (``https://127.0.0.1:port``).
        ca_file: the CA that signed its serving certificate (None: a plain-HTTP upstream).
    """

    def __init__(self, upstream: str, ca_file: Path | None):
        self.upstream = upstream.rstrip("/")
        self.ca_file = ca_file
        self.mode: str | None = None
        self.fraction = 0.8
        self.delay = 3.0
        self.injected = 0
        self.url = ""
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._expire = asyncio.Event()
        self._rng = random.Random(34)

    async def start(self) -> str:
        """Listen on a free loopback port; returns the proxy's URL (``http://127.0.0.1:port``)."""
        import ssl

        ctx: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else False
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx, limit=0), auto_decompress=False)
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def close(self) -> None:
        """Stop listening and close the upstream session."""
        self._expire.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def set_mode(self, mode: str | None) -> None:
        """Start (or with ``None`` end) a fault; ``watch-expiry`` also ends every open watch."""
        self.mode = mode
        if mode == "watch-expiry":
            self._expire.set()
            self._expire = asyncio.Event()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("true", "1")
        mode = self.mode
        if mode == "watch-expiry" and watch:
            self.injected += 1
            return await self._expired_watch(request)
        if mode in ("api-429", "api-5xx") and self._rng.random() < self.fraction:
            self.injected += 1
            if mode == "api-429":
                return web.json_response(_status(429, "TooManyRequests", "Too many requests, please try again later."),
                                         status=429, headers={"Retry-After": "1"})
            code = self._rng.choice((500, 503))
            reason = "InternalError" if code == 500 else "ServiceUnavailable"
            return web.json_response(_status(code, reason, "chaos: injected server error"), status=code)
        if mode == "api-slow":
            self.injected += 1
            await asyncio.sleep(self.delay)
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        body = await request.read()
        try:
            upstream = await self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                                   data=body or None, timeout=aiohttp.ClientTimeout(total=None))
        except (aiohttp.ClientError, OSError):
            return web.json_response(_status(503, "ServiceUnavailable", "chaos proxy: upstream unreachable"), status=503)
        try:
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _HOP}
            if not (watch and upstream.status == 200):
                data = await upstream.read()
                return web.Response(status=upstream.status, body=data, headers=out_headers)
            return await self._stream(request, upstream, out_headers)
        finally:
            upstream.release()

    async def _expired_watch(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(self._gone_line())
        await resp.write_eof()
        return resp

    @staticmethod
    def _gone_line() -> bytes:
        return (json.dumps({"type": "ERROR", "object": _status(410, "Expired", "too old resource version (chaos)")}) + "\n").encode()

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse, headers: dict[str, str]) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers=headers)
        await resp.prepare(request)
        expire = self._expire
        pending = b""
        try:
            while True:
                read = asyncio.ensure_future(upstream.content.readany())
                expired = asyncio.ensure_future(expire.wait())
                try:
                    done, _ = await asyncio.wait({read, expired}, return_when=asyncio.FIRST_COMPLETED)
                finally:  # also when the handler is cancelled (the controller went away)
                    for t in (read, expired):
                        if not t.done():
                            t.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await t
                if read not in done:
                    self.injected += 1
                    await resp.write(pending + (b"\n" if pending else b"") + self._gone_line())
                    break
                chunk = read.result()
                if not chunk:
                    if pending:
                        await resp.write(pending)
                    break
                pending += chunk
                whole, sep, rest = pending.rpartition(b"\n")
                if sep:
                    await resp.write(whole + sep)
                    pending = rest
            await resp.write_eof()
        except (ConnectionError, aiohttp.ClientError, RuntimeError):
            pass  # the controller went away (killed) or the server closed the watch
        return resp


# ---------------------------------------------------------------------------------------------
# The replicas
# ---------------------------------------------------------------------------------------------


@dataclass
class Incarnation:
    """One process of a replica (a replica restarted after an exit gets a new incarnation)."""

    replica: int
    number: int
    process: ControllerProcess

    @property
    def alive(self) -> bool:
        return self.process.proc.poll() is None

    def lines(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far (other lines skipped)."""
        out = []
        for raw in self.process.log().splitlines():
            if raw.startswith("{"):
                with contextlib.suppress(ValueError):
                    out.append(json.loads(raw))
        return out


class Replicas:
    """``count`` controller replicas on one Lease, each restarted one second after it exits (as a
    Deployment's pod would be), until :meth:`stop`.

    Args:
        kubeconfig: the kubeconfig the replicas use (the proxy's or kube-apiserver's).
        log_dir: where each incarnation's log goes (``r<replica>-<n>.log``).
        lease: the Lease name.
    """

    def __init__(self, kubeconfig: str, log_dir: Path, lease: str, count: int = 2):
        self.kubeconfig, self.log_dir, self.lease = kubeconfig, log_dir, lease
        self.incarnations: list[Incarnation] = []
        self._current: dict[int, Incarnation] = {}
        self._stopping = False
        for i in range(count):
            self._spawn(i)
        self._task = asyncio.create_task(self._supervise())

    def _spawn(self, replica: int) -> None:
        number = sum(1 for inc in self.incarnations if inc.replica == replica)
        proc = ControllerProcess(self.kubeconfig, self.log_dir / f"r{replica}-{number}.log", lease=self.lease)
        inc = Incarnation(replica, number, proc)
        self.incarnations.append(inc)
        self._current[replica] = inc

    async def _supervise(self) -> None:
        while not self._stopping:
            await asyncio.sleep(0.5)
            for replica, inc in list(self._current.items()):
                if not inc.alive and not self._stopping:
                    await asyncio.sleep(1.0)
                    if not self._stopping:
                        self._spawn(replica)

    def leader(self) -> Incarnation | None:
        """The live incarnation that acquired the Lease last (None: no live leader)."""
        best: tuple[str, Incarnation] | None = None
        for inc in self._current.values():
            if not inc.alive:
                continue
            for line in inc.lines():
                if line.get("message") == ACQUIRED and (best is None or line.get("time", "") > best[0]):
                    best = (line.get("time", ""), inc)
        return best[1] if best else None

    def started(self) -> bool:
        """A live replica has synced its caches and started its controllers."""
        leader = self.leader()
        return leader is not None and "starting controllers" in leader.process.log()

    def logged(self, message: str) -> bool:
        """Some incarnation logged ``message``."""
        return any(message in inc.process.log() for inc in self.incarnations)

    async def stop(self) -> None:
        """Stop supervising and SIGTERM every live incarnation (SIGCONT first: it may be stopped)."""
        self._stopping = True
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        for inc in self._current.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(inc.process.pid, signal.SIGCONT)
        await asyncio.gather(*(asyncio.to_thread(inc.process.stop) for inc in self.incarnations))

    def double_actions(self) -> list[str]:
        """Actions (:data:`ACTIONS`) an incarnation took after another incarnation acquired the
        Lease later than it last did: each is a second leader acting. Returns descriptions."""
        acquired: list[tuple[datetime, Incarnation]] = []
        actions: list[tuple[datetime, Incarnation, str]] = []
        for inc in self.incarnations:
            for line in inc.lines():
                msg = line.get("message", "")
                try:
                    ts = datetime.fromisoformat(str(line.get("time")))
                except ValueError:
                    continue
                if msg == ACQUIRED:
                    acquired.append((ts, inc))
                elif any(msg.startswith(a) for a in ACTIONS):
                    actions.append((ts, inc, msg))
        out = []
        for ts, inc, msg in actions:
            mine = max((a for a, i in acquired if i is inc and a <= ts), default=None)
            if mine is None:
                out.append(f"{ts.isoformat()} r{inc.replica}-{inc.number} {msg!r} without holding the lease")
                continue
            later = [(a, i) for a, i in acquired if i is not inc and mine < a <= ts]
            if later:
                a, i = later[0]
                out.append(f"{ts.isoformat()} r{inc.replica}-{inc.number} {msg!r} after r{i.replica}-{i.number} "
                           f"acquired the lease at {a.isoformat()}")
        return out

    def created_names(self) -> set[str]:
        """Names of the NodeClaims the replicas logged as created."""
        names = set()
        for inc in self.incarnations:
            for line in inc.lines():
                if line.get("message") == "created nodeclaim":
                    name = (line.get("NodeClaim") or {}).get("name")
                    if name:
                        names.add(name)
        return names


# ---------------------------------------------------------------------------------------------
# The harness
# ---------------------------------------------------------------------------------------------


def _running(p: dict[str, Any]) -> bool:
    return (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")


@dataclass
class _View:
    """What the harness sees of one trial's pool at one moment."""

    claims: list[dict[str, Any]]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]

    def key(self) -> tuple[Any, ...]:
        return (sorted(c["metadata"]["name"] for c in self.claims), sorted(n["metadata"]["name"] for n in self.nodes),
                sorted((p["metadata"]["name"], p["spec"].get("nodeName"), _running(p)) for p in self.pods))

    def settled(self, pods: int, nodes: int | None = None) -> bool:
        """``pods`` live pods all Running, every NodeClaim registered with its Node and none
        deleting (and, when given, exactly ``nodes`` Nodes)."""
        live = [p for p in self.pods if not p["metadata"].get("deletionTimestamp")]
        if len(live) != pods or not all(_running(p) for p in live):
            return False
        if any(c["metadata"].get("deletionTimestamp") for c in self.claims):
            return False
        if any(n["metadata"].get("deletionTimestamp") for n in self.nodes):
            return False
        pids = {(c.get("status") or {}).get("providerID") for c in self.claims}
        if None in pids or pids != {(n.get("spec") or {}).get("providerID") for n in self.nodes}:
            return False
        return nodes is None or len(self.nodes) == nodes

    def empty_nodes(self) -> int:
        used = {p["spec"].get("nodeName") for p in self.pods if not p["metadata"].get("deletionTimestamp")}
        return sum(1 for n in self.nodes if n["metadata"]["name"] not in used)

    def orphans(self) -> int:
        claim_pids = {(c.get("status") or {}).get("providerID") for c in self.claims}
        node_pids = {(n.get("spec") or {}).get("providerID") for n in self.nodes}
        return len(node_pids - claim_pids) + sum(1 for c in self.claims if (c.get("status") or {}).get("providerID") not in node_pids)


class Harness:
    """Runs trials on one started dev cluster (see the module docstring).

    Args:
        cluster: a started ``DevCluster`` (``hack/devcluster.py``) with the restart methods.
        workdir: where kubeconfigs and replica logs go.
        workload: sizes and timings.
        say: progress output (``print`` in the benchmark).
    """

    def __init__(self, cluster: Cluster, workdir: Path, workload: Workload, say: Callable[[str], None] = lambda _m: None):
        self.cluster = cluster
        self.workdir = workdir
        self.workload = workload
        self.say = say
        self.kube: AsyncKubeClient | None = None
        self.proxy: FaultProxy | None = None
        self.proxied_kubeconfig = ""
        self.reference: Reference | None = None
        self._n = 0

    async def __aenter__(self) -> Harness:
        assert self.cluster.kubeconfig is not None and self.cluster.server and self.cluster.ca_file
        self.kube = await AsyncKubeClient.from_config(str(self.cluster.kubeconfig))
        await install_crds(self.kube)
        self.proxy = FaultProxy(self.cluster.server, self.cluster.ca_file)
        url = await self.proxy.start()
        config = json.loads(self.cluster.kubeconfig.read_text())
        config["clusters"][0]["cluster"] = {"server": url}
        path = self.workdir / "kubeconfig-proxy"
        path.write_text(json.dumps(config))
        os.chmod(path, 0o600)
        self.proxied_kubeconfig = str(path)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proxy is not None:
            await self.proxy.close()
        if self.kube is not None:
            await self.kube.close()

    @property
    def _kube(self) -> AsyncKubeClient:
        assert self.kube is not None, "use the harness as `async with`"
        return self.kube

    async def _view(self, pool: str, app: str) -> _View:
        kube = self._kube
        claims = [c for c in await kube.list("NodeClaim") if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]
        nodes = [n for n in await kube.list("Node") if (n["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]
        pods = [p for p in await kube.list("Pod", "default") if (p["metadata"].get("labels") or {}).get("app") == app]
        return _View(claims, nodes, pods)

    async def _safe_view(self, pool: str, app: str) -> _View | None:
        try:
            return await self._view(pool, app)
        except Exception:  # kube-apiserver down (apiserver-restart): try again
            return None

    async def _until(self, check: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.25) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if await check():
                    return True
            await asyncio.sleep(interval)
        return False

    async def _settle(self, pool: str, app: str, pods: int, nodes: int | None, seen: set[str], since: float,
                      quiet: float | None = None) -> tuple[_View | None, float | None]:
        """Wait until the view is settled and unchanged for ``quiet`` seconds (default
        ``settle_seconds``); returns the view and the seconds from ``since`` to the start of the
        settled state (None: timed out)."""
        w = self.workload
        quiet = w.settle_seconds if quiet is None else quiet
        deadline = since + w.timeout_seconds
        stable_key: tuple[Any, ...] | None = None
        stable_at = 0.0
        last: _View | None = None
        while time.monotonic() < deadline:
            view = await self._safe_view(pool, app)
            if view is not None:
                last = view
                seen.update(c["metadata"]["name"] for c in view.claims)
                if view.settled(pods, nodes):
                    key = view.key()
                    if key != stable_key:
                        stable_key, stable_at = key, time.monotonic()
                    elif time.monotonic() - stable_at >= quiet:
                        return view, stable_at - since
                else:
                    stable_key = None
            await asyncio.sleep(0.5)
        return last, None

    async def _inject(self, fault: str, replicas: Replicas) -> Callable[[], Coroutine[Any, Any, None]]:
        """Start ``fault``; returns the coroutine function that ends it (waits for the end)."""
        w = self.workload
        if fault == "apiserver-restart":
            # kill, wait, start with the same flags, wait ready: blocking, so in a thread
            restarting = asyncio.create_task(asyncio.to_thread(self.cluster.restart_apiserver, w.apiserver_down_seconds))
            await asyncio.sleep(0.5)  # the kill happens first thing

            async def restarted() -> None:
                await restarting
            return restarted
        if fault in ("leader-kill", "leader-stop"):
            leader = replicas.leader()
            if leader is None:
                raise RuntimeError("no leader to fault")
            if fault == "leader-kill":
                os.kill(leader.process.pid, signal.SIGKILL)

                async def nothing() -> None:
                    return None
                return nothing
            os.kill(leader.process.pid, signal.SIGSTOP)

            async def resume() -> None:
                await asyncio.sleep(w.stop_seconds)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(leader.process.pid, signal.SIGCONT)
            return resume
        if fault in PROXY_FAULTS:
            proxy = self.proxy
            assert proxy is not None
            proxy.fraction, proxy.delay = w.storm_fraction, w.slow_seconds
            proxy.set_mode(fault)

            async def end() -> None:
                await asyncio.sleep(w.window_seconds)
                proxy.set_mode(None)
            return end
        raise ValueError(f"unknown fault {fault!r} (one of {', '.join(FAULTS)})")

    async def _setup(self, tag: str, consolidate: bool) -> tuple[str, str]:
        pool, app = f"chaos-{tag}", f"chaos-{tag}"
        kube = self._kube
        await kube.create("EC2NodeClass", nodeclass(pool))
        np = nodepool(pool, tag, types=[INSTANCE_TYPE], consolidate_after="0s" if consolidate else "Never",
                      limits={"cpu": "1000"})
        np["spec"]["disruption"]["budgets"] = [{"nodes": "100%"}]
        await kube.create("NodePool", np)
        return pool, app

    async def _teardown(self, pool: str, app: str, replicas: Replicas) -> None:
        kube = self._kube
        if self.proxy is not None:
            self.proxy.set_mode(None)
        with contextlib.suppress(Exception):
            await kube.delete("Deployment", app, "default")
        with contextlib.suppress(Exception):
            await kube.delete("NodePool", pool)
        for c in await self._view_claims(pool):
            with contextlib.suppress(Exception):
                await kube.delete("NodeClaim", c["metadata"]["name"])

        async def gone() -> bool:
            v = await self._view(pool, app)
            return not v.claims and not v.nodes
        if not await self._until(gone, 90, 1.0):
            self.say(f"  (teardown: NodeClaims or Nodes of {pool} still there after 90 s)")
        await replicas.stop()
        with contextlib.suppress(Exception):
            await kube.delete("EC2NodeClass", pool)

    async def _view_claims(self, pool: str) -> list[dict[str, Any]]:
        return [c for c in await self._kube.list("NodeClaim") if (c["metadata"].get("labels") or {}).get("karpenter.sh/nodepool") == pool]

    async def run(self, fault: str | None, moment: str) -> TrialResult:
        """One trial: ``fault`` (None: the fault-free reference run) injected at ``moment``.

        The reference (:meth:`calibrate`) must have run for a fault trial; it is what extra
        NodeClaims are counted against and what the ``pre-register`` moment waits for.
        """
        if moment not in MOMENTS:
            raise ValueError(f"unknown moment {moment!r} (one of {', '.join(MOMENTS)})")
        if fault is not None and self.reference is None:
            raise RuntimeError("calibrate() first: fault trials compare with the fault-free run")
        w = self.workload
        self._n += 1
        tag = f"{self._n:02d}{uuid.uuid4().hex[:4]}"
        log_dir = self.workdir / f"trial-{tag}-{fault or 'none'}-{moment}"
        log_dir.mkdir(parents=True)
        consolidate = moment == "consolidation"
        pool, app = await self._setup(tag, consolidate)
        kubeconfig = self.proxied_kubeconfig if fault in PROXY_FAULTS else str(self.cluster.kubeconfig)
        replicas = Replicas(kubeconfig, log_dir, f"chaos-{tag}")
        seen: set[str] = set()
        notes: list[str] = []
        end: Callable[[], Coroutine[Any, Any, None]] | None = None
        ending: asyncio.Task[None] | None = None
        t_fault = time.monotonic()
        try:
            if not await self._until(lambda: asyncio.sleep(0, replicas.started()), 60):
                raise RuntimeError(f"no replica started its controllers within 60 s (logs in {log_dir})")
            kube = self._kube
            await kube.create("Deployment", deployment(app, tag, w.pods))
            ref = self.reference
            if consolidate:
                up_view, _ = await self._settle(pool, app, w.pods, None, seen, time.monotonic())
                if up_view is None or not up_view.settled(w.pods):
                    notes.append("scale-up did not settle before the scale-down")
                await kube.patch("Deployment", app, {"spec": {"replicas": w.scale_down_to}}, "default")
                if fault is not None:
                    await self._until(lambda: asyncio.sleep(0, replicas.logged("disrupting node(s)")), 120, 0.1)
            elif fault is not None and moment == "mid-launch":
                await self._until(lambda: self._has_claims(pool, 1, seen), 60, 0.1)
            elif fault is not None and moment == "pre-register":
                assert ref is not None
                await self._until(lambda: self._has_claims(pool, ref.scale_up_claims, seen), 60, 0.1)
            t_fault = time.monotonic()
            if fault is not None:
                end = await self._inject(fault, replicas)
                ending = asyncio.create_task(end())
            pods = w.scale_down_to if consolidate else w.pods
            want_nodes: int | None = None
            if consolidate:  # a faulted consolidation ends where the reference ended; the reference
                # where the pods need no more Nodes (m5.xlarge holds three), else where it stopped
                want_nodes = ref.final_nodes if (ref is not None and fault is not None) else -(-pods // PODS_PER_NODE)
            if ending is not None:
                await ending
            view, recover = await self._settle(pool, app, pods, want_nodes, seen, t_fault)
            if fault is None and consolidate and recover is None:
                notes.append(f"the fault-free consolidation did not reach {want_nodes} Node(s)")
                view, recover = await self._settle(pool, app, pods, None, seen, time.monotonic(), 3 * w.settle_seconds)
            seen.update(replicas.created_names())
            doubles = replicas.double_actions()
            notes.extend(doubles[:5])
            if self.proxy is not None and fault in PROXY_FAULTS:
                notes.append(f"proxy injected {self.proxy.injected} faults")
                self.proxy.injected = 0
            restarts = len(replicas.incarnations) - 2
            if restarts:
                notes.append(f"{restarts} replica restart(s)")
            reference = 0 if ref is None else (ref.total_claims if consolidate else ref.scale_up_claims)
            result = TrialResult(
                fault=fault or "none", moment=moment, pods=pods,
                pods_running=sum(1 for p in (view.pods if view else []) if _running(p)),
                claims_created=len(seen), reference_claims=reference or len(seen),
                empty_nodes=view.empty_nodes() if view else -1, orphans=view.orphans() if view else -1,
                double_actions=len(doubles), recover_seconds=recover, settled=recover is not None,
                log_dir=str(log_dir), notes=notes,
            )
            if fault is None:
                final = len(view.nodes) if view else 0
                if consolidate:
                    assert self.reference is not None
                    self.reference.total_claims, self.reference.final_nodes = len(seen), final
                else:
                    self.reference = Reference(scale_up_claims=len(seen), total_claims=len(seen), final_nodes=final)
            return result
        finally:
            if ending is not None and not ending.done():
                await ending
            await self._teardown(pool, app, replicas)

    async def _has_claims(self, pool: str, n: int, seen: set[str]) -> bool:
        claims = await self._view_claims(pool)
        seen.update(c["metadata"]["name"] for c in claims)
        return len(claims) >= n

    async def calibrate(self, consolidation: bool = True) -> list[TrialResult]:
        """The fault-free runs every fault trial compares with: a scale-up and, when
        ``consolidation``, a scale-up then scale-down. Without it a consolidation trial is held
        to the ideal outcome: no NodeClaim beyond the scale-up's, and as many Nodes as the pods
        left need (one 4-cpu type and 1-cpu pods: the disruption deletes, never replaces)."""
        out = [await self.run(None, "before-claims")]
        if consolidation:
            out.append(await self.run(None, "consolidation"))
        else:
            assert self.reference is not None
            self.reference.total_claims = self.reference.scale_up_claims
            self.reference.final_nodes = -(-self.workload.scale_down_to // PODS_PER_NODE)
        return out


def plan(faults: list[str], moments: list[str], trials: int) -> list[tuple[str, str]]:
    """``trials`` trials of each fault kind, cycling through ``moments`` (4 trials of a kind with
    the four moments hit each moment once); the k-th kind starts at the k-th moment, so a few
    trials per kind still spread over every moment. Returns (fault, moment) pairs in run order."""
    return [(f, moments[(i + k) % len(moments)]) for k, f in enumerate(faults) for i in range(trials)]


def table(results: list[TrialResult]) -> str:
    """Per fault kind: trials, extra NodeClaims (sum and worst), empty Nodes, orphans, double
    actions, trials not settled, recovery seconds (median and max), and trials meeting every target."""
    rows = [f"{'fault':<18} {'trials':>6} {'extra':>6} {'worst':>6} {'empty':>6} {'orphans':>7} {'double':>6} "
            f"{'unsettled':>9} {'recover med':>11} {'max':>6} {'ok':>4}"]
    kinds = [k for k in (*FAULTS, "none") if any(r.fault == k for r in results)]
    for kind in kinds:
        rs = [r for r in results if r.fault == kind]
        rec = sorted(r.recover_seconds for r in rs if r.recover_seconds is not None)
        med = f"{rec[len(rec) // 2]:.1f}" if rec else "-"
        mx = f"{rec[-1]:.1f}" if rec else "-"
        rows.append(f"{kind:<18} {len(rs):>6} {sum(r.extra_claims for r in rs):>6} {max(r.extra_claims for r in rs):>6} "
                    f"{sum(max(0, r.empty_nodes) for r in rs):>6} {sum(max(0, r.orphans) for r in rs):>7} "
                    f"{sum(r.double_actions for r in rs):>6} {sum(1 for r in rs if not r.settled):>9} {med:>11} {mx:>6} "
                    f"{sum(1 for r in rs if r.ok):>4}")
    return "\n".join(rows)


def trial_line(r: TrialResult) -> str:
    """One trial as a line of the progress output."""
    rec = f"{r.recover_seconds:.1f}s" if r.recover_seconds is not None else "unsettled"
    return (f"{r.fault:<18} {r.moment:<14} pods {r.pods_running}/{r.pods} claims {r.claims_created}/{r.reference_claims} "
            f"(+{r.extra_claims}) empty {r.empty_nodes} orphans {r.orphans} double {r.double_actions} recover {rec}"
            + (f"  [{'; '.join(r.notes)}]" if r.notes else ""))
