#!/usr/bin/env python3
"""A throw-away local Kubernetes control plane for karpy's integration tests.

What it is
----------
This file is both a command line tool and an importable module (stdlib only,
Python 3.11+).  It compiles the real upstream components from Go modules and
runs them as plain processes bound to 127.0.0.1:

* ``etcd``                    -- storage (a three-line wrapper around
                                 ``go.etcd.io/etcd/server/v3/etcdmain``)
* ``kube-apiserver``          -- token authentication, ``Node,RBAC``
                                 authorization, service accounts
* ``kube-controller-manager`` -- removes the ``node.kubernetes.io/not-ready``
                                 taint once a node turns Ready, creates the
                                 ``default`` ServiceAccounts, runs the
                                 ReplicaSet/Deployment/GC/namespace controllers
* ``kube-scheduler``          -- binds pending pods
* ``kwok``                    -- plays the kubelet for fake Nodes carrying the
                                 annotation ``kwok.x-k8s.io/node: fake``: marks
                                 them Ready, keeps their leases fresh and
                                 moves their pods to Running

No container runtime, no kubelet, no network beyond loopback.

Pinned versions (see ``hack/devcluster/go.mod`` and ``.../kwok/go.mod``)
--------------------------------------------------------------------------
* Kubernetes ``v1.36.3`` (``k8s.io/kubernetes`` plus every staging module
  replaced by its published ``v0.36.3`` tag); every other dependency
  resolves to exactly the version Kubernetes v1.36.3 pins.
* etcd ``v3.6.8`` (the server version Kubernetes v1.36.3 itself depends on)
* kwok ``v0.8.0``, from its own wrapper module (``hack/devcluster/kwok``):
  it needs newer otel/grpc/golang.org/x versions than Kubernetes pins, and
  sharing one module would silently upgrade those inside the control plane.
* Go: the ``go`` on ``PATH`` (or ``/usr/local/go/bin/go``; ``$KARPY_GO``
  overrides both), 1.26 or newer.  ``GOTOOLCHAIN=local`` and
  ``CGO_ENABLED=0`` are forced: nothing is downloaded besides modules and no
  C compiler is needed.

etcd and the three Kubernetes binaries come out of one ``go build`` of the
wrapper module (shared packages compile once), kwok out of a second one.
A cold build (empty Go caches and module cache) was measured at 32.5 minutes
on 2 cores at load average 8-16 (24.5 for the first ``go build``, 8 for
kwok); ``build`` prints a line as each step starts and ends.  Afterwards the
binaries are reused and ``build()`` returns in milliseconds.

Where things live
-----------------
* Binaries: ``${KARPY_CACHE_DIR:-~/.cache/karpy}/bin/<k8s-version>/`` with a
  ``.stamp`` file holding a hash of both wrapper modules; when a ``go.mod``,
  ``go.sum``, the etcd wrapper or the build flags change, the binaries are
  rebuilt.  Concurrent builds are serialised with a lock file.
* Go's module and build caches: Go's own defaults (``go env GOMODCACHE`` and
  ``go env GOCACHE``), both outside the repository; set ``GOMODCACHE`` or
  ``GOCACHE`` to move them.
* Each running cluster: a fresh temporary directory (``DevCluster.workdir``)
  holding certificates, the etcd data dir, the admin kubeconfig and one log
  file per component under ``DevCluster.log_dir``.  It is removed on stop
  unless ``keep_workdir=True`` or ``KARPY_DEVCLUSTER_KEEP=1``.

Usage
-----
    python hack/devcluster.py build        # build (or find) the binaries
    python hack/devcluster.py up           # run a cluster until Ctrl-C

    from devcluster import DevCluster       # with hack/ on sys.path
    with DevCluster() as cluster:
        cluster.api("GET", "/api/v1/nodes")
        print(cluster.kubeconfig, cluster.server, cluster.token)

Certificates are made with the ``openssl`` command line tool (package
``openssl`` on Debian).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import contextlib
import ctypes
import fcntl
import functools
import hashlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

K8S_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.8"
KWOK_VERSION = "v0.8.0"

#: The wrapper Go module (go.mod with the replace block, etcd main).
MODULE_DIR = Path(__file__).resolve().parent / "devcluster"
#: kwok's own wrapper module (kept apart so its newer dependencies do not
#: change the versions the control plane is built with).
KWOK_MODULE_DIR = MODULE_DIR / "kwok"

#: Names of the binaries the two ``go build`` runs produce.
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")

#: Annotation that makes kwok adopt a Node.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_NODE_ANNOTATION_VALUE = "fake"

# Default kwok behaviour ("stages") shipped inside the kwok module; copied
# next to the binaries at build time and fed to kwok with --config.
_KWOK_STAGE_FILES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)
KWOK_STAGES_FILE = "kwok-stages.yaml"

_SERVICE_CIDR = "10.96.0.0/16"
_SERVICE_IP = "10.96.0.1"  # first address of _SERVICE_CIDR: the "kubernetes" Service
_POD_CIDR = "10.244.0.0/16"  # only handed out as fake pod IPs by kwok
_LOOPBACK = "127.0.0.1"


class DevClusterUnavailable(RuntimeError):
    """A prerequisite (Go toolchain, openssl) is missing on this machine."""


class GoNotFound(DevClusterUnavailable):
    """No Go toolchain, and no cached binaries to fall back on."""


class DevClusterError(RuntimeError):
    """Building or starting the cluster failed."""


def _loud(message: str) -> None:
    bar = "!" * 78
    print(f"\n{bar}\n{textwrap.indent(message.strip(), '!! ')}\n{bar}\n", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------


def cache_dir() -> Path:
    """Root of karpy's cache (``$KARPY_CACHE_DIR`` or ``~/.cache/karpy``)."""
    env = os.environ.get("KARPY_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "karpy"


def bin_dir() -> Path:
    """Directory holding the binaries for the pinned Kubernetes version."""
    return cache_dir() / "bin" / K8S_VERSION


def find_go() -> str | None:
    """Path of the ``go`` command: ``$KARPY_GO``, ``PATH``, then /usr/local/go."""
    explicit = os.environ.get("KARPY_GO")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    found = shutil.which("go")
    if found:
        return found
    fallback = "/usr/local/go/bin/go"
    return fallback if os.access(fallback, os.X_OK) else None


def _ldflags() -> str:
    major, minor = K8S_VERSION.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    # Without these the binaries report "v0.0.0-master", which confuses
    # clients that look at /version.
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={K8S_VERSION}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    return " ".join(flags)


def _build_commands(out_dir: Path) -> list[tuple[Path, list[str]]]:
    """(working directory, go arguments) of each build, in order."""
    out = str(out_dir) + os.sep
    return [
        # etcd + kube-apiserver + kube-controller-manager + kube-scheduler in
        # one invocation, so shared packages compile once.
        (MODULE_DIR, ["build", "-trimpath", f"-ldflags={_ldflags()}", "-o", out, "./etcd", "tool"]),
        (KWOK_MODULE_DIR, ["build", "-trimpath", "-ldflags=-s -w", "-o", out, "tool"]),
    ]


#: What each build directory of :func:`_build_commands` produces, for the progress lines.
_STEP_NAMES = {
    MODULE_DIR: "etcd, kube-apiserver, kube-controller-manager, kube-scheduler",
    KWOK_MODULE_DIR: "kwok",
}


def _stamp() -> str:
    """Hash of everything that determines the binaries' content."""
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum", "etcd/main.go", "kwok/go.mod", "kwok/go.sum"):
        h.update(name.encode() + b"\0" + (MODULE_DIR / name).read_bytes() + b"\0")
    for _cwd, args in _build_commands(Path("OUT")):
        h.update(" ".join(args).encode() + b"\0")
    h.update(" ".join(BINARIES + _KWOK_STAGE_FILES).encode())
    return h.hexdigest()


def cached_binaries() -> dict[str, Path] | None:
    """The cached binaries if they exist and match the wrapper module, else None."""
    directory = bin_dir()
    try:
        if (directory / ".stamp").read_text().strip() != _stamp():
            return None
    except OSError:
        return None
    paths = {name: directory / name for name in BINARIES}
    paths["kwok-stages"] = directory / KWOK_STAGES_FILE
    if all(p.is_file() for p in paths.values()):
        return paths
    return None


_MIN_GO = (1, 26)


def _go_version(go: str) -> tuple[int, ...] | None:
    """(major, minor) of a Go toolchain, None if it cannot be told."""
    try:
        out = subprocess.run([go, "env", "GOVERSION"], env=_go_env(go), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = out.stdout.strip().removeprefix("go")
    try:
        return tuple(int(part) for part in text.split(".")[:2])
    except ValueError:
        return None


def _go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = "local"  # never fetch another toolchain
    env["GOWORK"] = "off"  # ignore any go.work further up
    env["CGO_ENABLED"] = "0"  # static binaries, no C compiler needed
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    # Make sure the go binary's own directory is on PATH (for go's helpers).
    env["PATH"] = os.path.dirname(go) + os.pathsep + env.get("PATH", "")
    return env


def build(force: bool = False, verbose: bool = True) -> dict[str, Path]:
    """Build the control plane binaries, or return the cached ones.

    Returns a mapping ``{"etcd": Path, "kube-apiserver": Path, ...,
    "kwok-stages": Path}``.  Raises :class:`GoNotFound` (after printing a
    loud message) when a build is needed and no Go toolchain is found.
    """
    if not force:
        cached = cached_binaries()
        if cached:
            return cached

    go = find_go()
    if go is None:
        _loud(
            "Go toolchain NOT FOUND: cannot build the karpy dev cluster\n"
            f"(etcd {ETCD_VERSION}, Kubernetes {K8S_VERSION}, kwok {KWOK_VERSION}).\n"
            "Install Go >= 1.26 and put `go` on PATH (or set KARPY_GO),\n"
            "then run: python hack/devcluster.py build"
        )
        raise GoNotFound("no `go` command found on PATH (set KARPY_GO or install Go >= 1.26)")

    version = _go_version(go)
    if version is not None and version < _MIN_GO:
        _loud(
            f"Go at {go} is go{'.'.join(map(str, version))}; the karpy dev cluster needs Go >= "
            f"{'.'.join(map(str, _MIN_GO))}\n(Kubernetes {K8S_VERSION} and kwok {KWOK_VERSION} require it)."
        )
        raise GoNotFound(f"{go} is too old (need Go >= {'.'.join(map(str, _MIN_GO))})")

    target = bin_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(_lock_path(target.parent, K8S_VERSION), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building
        if not force:
            cached = cached_binaries()
            if cached:
                return cached
        for stale in remove_stale_staging(target.parent):
            if verbose:
                print(f"devcluster: removed {stale.name} (left by an interrupted build)", file=sys.stderr, flush=True)
        return _build_locked(go, target, verbose)


_STAGING_PREFIX = ".build-"


def _lock_path(parent: Path, version: str) -> Path:
    """The lock file a build of Kubernetes ``version`` holds (``fcntl.flock``, exclusive) while it runs."""
    return parent / f".{version}.lock"


def remove_stale_staging(parent: Path) -> list[Path]:
    """Remove the ``.build-<version>-XXXX`` staging directories of earlier builds that no running build owns.

    A build holds an exclusive ``flock`` on ``.<version>.lock`` (see :func:`build`) for as long as its
    staging directory exists, so a staging directory whose version lock can be taken (without
    waiting) belongs to a build that died (SIGHUP, SIGKILL, power loss).  The caller must already hold
    the lock of :data:`K8S_VERSION`; directories of that version are stale by definition then.
    Returns the directories removed; never raises for a directory it cannot remove.
    """
    removed: list[Path] = []
    for entry in sorted(parent.glob(f"{_STAGING_PREFIX}*")):
        if not entry.is_dir() or entry.is_symlink():
            continue
        # mkdtemp's random suffix never contains "-", so the version is everything before the last "-".
        version = entry.name[len(_STAGING_PREFIX) :].rpartition("-")[0]
        if not version:
            continue
        if version != K8S_VERSION:
            try:
                with open(_lock_path(parent, version), "a") as other:
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    shutil.rmtree(entry, ignore_errors=True)
            except OSError:  # BlockingIOError: a build of that version is running
                continue
        else:
            shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed.append(entry)
    return removed


def go_module_dir(go: str, cwd: Path, env: dict[str, str], module: str) -> Path:
    """Directory of ``module`` in Go's module cache, as the module at ``cwd`` resolves it (``go list -m``)."""
    out = subprocess.run([go, "list", "-m", "-f", "{{.Dir}}", module], cwd=cwd, env=env, check=True, stdout=subprocess.PIPE, text=True)
    return Path(out.stdout.strip())


def promote_staging(staging: Path, target: Path, stamp: str) -> None:
    """Move a finished build from ``staging`` into ``target`` (replacing what is there), then write
    ``target/.stamp``: a build interrupted half-way leaves no stamp, so it is redone."""
    target.mkdir(parents=True, exist_ok=True)
    (target / ".stamp").unlink(missing_ok=True)
    for item in staging.iterdir():
        dest = target / item.name
        if dest.is_dir():
            shutil.rmtree(dest)
        os.replace(item, dest)
    (target / ".stamp").write_text(stamp + "\n")


def _build_locked(go: str, target: Path, verbose: bool) -> dict[str, Path]:
    env = _go_env(go)
    staging = Path(tempfile.mkdtemp(prefix=f".build-{K8S_VERSION}-", dir=target.parent))
    try:
        if verbose:
            print(
                f"devcluster: building etcd {ETCD_VERSION}, Kubernetes {K8S_VERSION}, kwok {KWOK_VERSION} "
                "(measured cold: 32.5 min on 2 cores at load average 8-16)",
                file=sys.stderr,
                flush=True,
            )
        started = time.monotonic()
        commands = _build_commands(staging)
        for step, (cwd, args) in enumerate(commands, start=1):
            cmd = [go, *args]
            what = _STEP_NAMES.get(cwd, cwd.name)
            step_started = time.monotonic()
            if verbose:
                print(f"devcluster: [{step}/{len(commands)}] building {what} ...", file=sys.stderr, flush=True)
                print(f"devcluster:   (cd {cwd} && {' '.join(cmd)})", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                raise DevClusterError(f"go build in {cwd} failed (exit {proc.returncode}):\n{proc.stdout[-8000:]}")
            if verbose:
                print(
                    f"devcluster: [{step}/{len(commands)}] built {what} in {time.monotonic() - step_started:.0f}s "
                    f"({time.monotonic() - started:.0f}s so far)",
                    file=sys.stderr,
                    flush=True,
                )

        # Copy kwok's default stages out of the module cache.
        kwok_dir = go_module_dir(go, KWOK_MODULE_DIR, env, "sigs.k8s.io/kwok")
        docs = [(kwok_dir / rel).read_text().strip() for rel in _KWOK_STAGE_FILES]
        (staging / KWOK_STAGES_FILE).write_text("\n---\n".join(docs) + "\n")

        missing = [n for n in BINARIES if not (staging / n).is_file()]
        if missing:
            raise DevClusterError(f"go build did not produce {missing}")

        promote_staging(staging, target, _stamp())
        if verbose:
            print(f"devcluster: built everything in {time.monotonic() - started:.0f}s into {target}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    result = cached_binaries()
    if result is None:  # pragma: no cover - would mean the stamp logic is broken
        raise DevClusterError(f"binaries missing from {target} after build")
    return result


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((_LOOPBACK, 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    proc = subprocess.run(["openssl", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if proc.returncode != 0:
        raise DevClusterError(f"openssl {' '.join(args)} failed:\n{proc.stdout}")


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _set_pdeathsig() -> None:
    """Run in the child: die with SIGKILL when the parent goes away (Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


_LIVE_CLUSTERS: set[DevCluster] = set()


@atexit.register
def _stop_leftovers() -> None:
    for cluster in list(_LIVE_CLUSTERS):
        cluster.stop()


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_clusters_on_sigterm() -> bool:
    """Make SIGTERM end this process as Ctrl-C does (``KeyboardInterrupt``), so the test run's
    teardown and :func:`_stop_leftovers` stop every cluster it started. SIGTERM's default action
    ends the process at once, and a kube-apiserver restarted off the main thread (the chaos tests'
    ``asyncio.to_thread(cluster.restart_apiserver)``, spawned without PDEATHSIG, which fires when
    the forking *thread* exits) was left running, orphaned, after ``timeout ./scripts/test``.
    Installed only from the main thread and only over the default action; returns whether it was."""
    if threading.current_thread() is not threading.main_thread():
        return False
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return False
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    return True


# --------------------------------------------------------------------------
# The cluster
# --------------------------------------------------------------------------


class DevCluster:
    """etcd + kube-apiserver + kube-controller-manager + kube-scheduler + kwok.

    Use as a context manager or call :meth:`start` / :meth:`stop`.  After
    start: ``server`` (``https://127.0.0.1:<port>``), ``token`` (bearer token
    of a ``system:masters`` user), ``ca_file``, ``kubeconfig`` (path of an
    admin kubeconfig with embedded CA), ``workdir`` and ``log_dir``.
    """

    def __init__(
        self,
        binaries: dict[str, Path] | None = None,
        *,
        workdir: str | os.PathLike[str] | None = None,
        keep_workdir: bool | None = None,
        controller_manager: bool = True,
        scheduler: bool = True,
        kwok: bool = True,
        start_timeout: float = 120.0,
        extra_apiserver_args: list[str] | None = None,
        extra_args: dict[str, list[str]] | None = None,
    ) -> None:
        self._binaries = binaries
        self._requested_workdir = Path(workdir) if workdir else None
        if keep_workdir is None:
            keep_workdir = os.environ.get("KARPY_DEVCLUSTER_KEEP") == "1"
        self.keep_workdir = keep_workdir
        self.run_controller_manager = controller_manager
        self.run_scheduler = scheduler
        self.run_kwok = kwok
        self.start_timeout = start_timeout
        self.extra_apiserver_args = list(extra_apiserver_args or [])
        self.extra_args = {name: list(args) for name, args in (extra_args or {}).items()}
        """Extra command-line flags per component (``kube-controller-manager``, ``kube-scheduler``,
        ``kwok``), appended after the defaults; e.g. a higher ``--kube-api-qps`` for a benchmark
        that creates thousands of pods through Deployments."""

        self.workdir: Path | None = None
        self.log_dir: Path | None = None
        self.kubeconfig: Path | None = None
        self.ca_file: Path | None = None
        self.server: str | None = None
        self.token: str | None = None
        self.etcd_url: str | None = None
        self.ports: dict[str, int] = {}
        self.startup_seconds: float | None = None
        self._procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._ssl: ssl.SSLContext | None = None
        self._lock = threading.Lock()

    # -- context manager ---------------------------------------------------

    def __enter__(self) -> DevCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- public API --------------------------------------------------------

    @property
    def binaries(self) -> dict[str, Path]:
        if self._binaries is None:
            self._binaries = build()
        return self._binaries

    def start(self) -> DevCluster:
        """Start every component and wait until the cluster is usable."""
        if self._procs:
            raise DevClusterError("cluster already started")
        if shutil.which("openssl") is None:
            _loud("`openssl` NOT FOUND: the dev cluster needs it to make certificates (apt-get install openssl).")
            raise DevClusterUnavailable("the openssl command is required to generate certificates")
        bins = self.binaries
        _LIVE_CLUSTERS.add(self)
        started = time.monotonic()
        try:
            self._prepare_workdir()
            self._make_pki()
            self._start_etcd(bins["etcd"])
            self._start_apiserver(bins["kube-apiserver"])
            self._write_kubeconfig()
            if self.run_controller_manager:
                self._start_controller_manager(bins["kube-controller-manager"])
            if self.run_scheduler:
                self._start_scheduler(bins["kube-scheduler"])
            if self.run_kwok:
                self._start_kwok(bins["kwok"], bins["kwok-stages"])
            self._wait_components_healthy()
        except BaseException:
            self.stop(_failed=True)
            raise
        self.startup_seconds = time.monotonic() - started
        return self

    def stop(self, _failed: bool = False) -> None:
        """Terminate all processes (SIGTERM, then SIGKILL) and clean up."""
        with self._lock:
            procs, self._procs = self._procs, []
            # Clients first, then the API server, then etcd: the API server
            # shuts down quickly only while etcd is still there.
            clients = [p for n, p in procs if n not in ("kube-apiserver", "etcd")]
            tiers = [clients] + [[p for n, p in procs if n == name] for name in ("kube-apiserver", "etcd")]
            for tier in tiers:
                for proc in tier:
                    self._signal(proc, signal.SIGTERM)
                deadline = time.monotonic() + 10
                for proc in tier:
                    try:
                        proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                    except subprocess.TimeoutExpired:
                        self._signal(proc, signal.SIGKILL)
                        proc.wait()
            _LIVE_CLUSTERS.discard(self)
            if self.workdir and self.workdir.exists():
                if _failed or self.keep_workdir:
                    print(f"devcluster: work dir (logs in {self.log_dir}) kept at {self.workdir}", file=sys.stderr)
                elif self._requested_workdir is None:
                    shutil.rmtree(self.workdir, ignore_errors=True)

    def ssl_context(self) -> ssl.SSLContext:
        """An SSL context trusting the cluster CA."""
        if self._ssl is None:
            if self.ca_file is None:
                raise DevClusterError("cluster not started")
            self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        return self._ssl

    def api(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
        raw: bool = False,
    ) -> Any:
        """Call the API server; returns decoded JSON (or text when ``raw``).

        Raises :class:`urllib.error.HTTPError` for non-2xx answers (the JSON
        ``Status`` body is readable from the exception).
        """
        if self.server is None:
            raise DevClusterError("cluster not started")
        data = None
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, context=self.ssl_context(), timeout=timeout) as resp:
            text = resp.read().decode()
        if raw:
            return text
        return json.loads(text) if text else None

    def logs(self, component: str, lines: int = 60) -> str:
        """The last lines of a component's log (etcd, kube-apiserver, ...)."""
        if self.log_dir is None:
            return ""
        return _tail(self.log_dir / f"{component}.log", lines)

    def running(self) -> dict[str, int]:
        """{component: pid} of the processes still alive."""
        return {name: p.pid for name, p in self._procs if p.poll() is None}

    # -- internals -----------------------------------------------------------

    @staticmethod
    def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            # Each component runs in its own session: signal its whole group.
            os.killpg(proc.pid, sig)

    @property
    def _workdir(self) -> Path:
        """The work directory; only valid once :meth:`_prepare_workdir` ran (during start)."""
        if self.workdir is None:
            raise DevClusterError("the dev cluster has no work directory yet (not started)")
        return self.workdir

    @property
    def _log_dir(self) -> Path:
        """The components' log directory (``<workdir>/logs``), once started."""
        if self.log_dir is None:
            raise DevClusterError("the dev cluster has no log directory yet (not started)")
        return self.log_dir

    def _prepare_workdir(self) -> None:
        if self._requested_workdir is not None:
            self.workdir = self._requested_workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="karpy-devcluster-"))
        self.log_dir = self.workdir / "logs"
        self.log_dir.mkdir(exist_ok=True)
        (self.workdir / "pki").mkdir(exist_ok=True)

    def _make_pki(self) -> None:
        pki = self._workdir / "pki"
        # Certificate authority.
        (pki / "ca.cnf").write_text(
            "[req]\ndistinguished_name = dn\nprompt = no\nx509_extensions = ext\n"
            "[dn]\nCN = karpy-devcluster-ca\n"
            "[ext]\nbasicConstraints = critical,CA:TRUE\n"
            "keyUsage = critical,keyCertSign,cRLSign,digitalSignature\n"
            "subjectKeyIdentifier = hash\n"
        )
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "ca.key", cwd=pki)
        _openssl("req", "-x509", "-new", "-key", "ca.key", "-sha256", "-days", "3650", "-config", "ca.cnf", "-out", "ca.crt", cwd=pki)
        # Serving certificate for the API server.
        sans = ",".join(
            [
                f"IP:{_LOOPBACK}",
                f"IP:{_SERVICE_IP}",
                "DNS:localhost",
                "DNS:kubernetes",
                "DNS:kubernetes.default",
                "DNS:kubernetes.default.svc",
                "DNS:kubernetes.default.svc.cluster.local",
            ]
        )
        (pki / "apiserver.cnf").write_text(
            "[req]\ndistinguished_name = dn\nprompt = no\n"
            "[dn]\nCN = kube-apiserver\n"
            "[ext]\nbasicConstraints = critical,CA:FALSE\n"
            "keyUsage = critical,digitalSignature,keyEncipherment\n"
            "extendedKeyUsage = serverAuth\n"
            f"subjectAltName = {sans}\n"
            "authorityKeyIdentifier = keyid\n"
        )
        _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", "apiserver.key", cwd=pki)
        _openssl("req", "-new", "-key", "apiserver.key", "-config", "apiserver.cnf", "-out", "apiserver.csr", cwd=pki)
        _openssl(
            "x509",
            "-req",
            "-in",
            "apiserver.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-sha256",
            "-days",
            "3650",
            "-extfile",
            "apiserver.cnf",
            "-extensions",
            "ext",
            "-out",
            "apiserver.crt",
            cwd=pki,
        )
        # Service-account token signing key pair.
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=pki)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)
        for key in ("ca.key", "apiserver.key", "sa.key"):
            os.chmod(pki / key, 0o600)
        # Static token for the admin user (member of system:masters).
        self.token = secrets.token_hex(24)
        (pki / "tokens.csv").write_text(f'{self.token},karpy-admin,karpy-admin-uid,"system:masters"\n')
        os.chmod(pki / "tokens.csv", 0o600)
        self.ca_file = pki / "ca.crt"

    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        log = open(self._log_dir / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        (self._log_dir / f"{name}.cmdline").write_text(" \\\n  ".join(argv) + "\n")
        in_main_thread = threading.current_thread() is threading.main_thread()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                env=env,
                start_new_session=True,
                # PDEATHSIG fires when the *thread* that forked exits, so only
                # use it from the main thread (pytest, the CLI).
                preexec_fn=_set_pdeathsig if in_main_thread else None,
            )
        finally:
            log.close()
        self._procs.append((name, proc))
        return proc

    def _wait(self, what: str, component: str, check: Callable[[], bool], timeout: float | None = None) -> None:
        deadline = time.monotonic() + (timeout or self.start_timeout)
        last_error: object = None
        while time.monotonic() < deadline:
            for name, proc in self._procs:
                if proc.poll() is not None:
                    raise DevClusterError(
                        f"{name} exited with code {proc.returncode} while waiting for {what}; "
                        f"log {self._log_dir / (name + '.log')}:\n{self.logs(name)}"
                    )
            try:
                if check():
                    return
            except Exception as exc:
                last_error = exc
            time.sleep(0.25)
        raise DevClusterError(
            f"timed out after {timeout or self.start_timeout:.0f}s waiting for {what} (last error: {last_error!r}); "
            f"log {self._log_dir / (component + '.log')}:\n{self.logs(component)}"
        )

    def _start_etcd(self, binary: Path) -> None:
        client, peer = _free_port(), _free_port()
        self.ports.update(etcd=client, etcd_peer=peer)
        self.etcd_url = f"http://{_LOOPBACK}:{client}"
        peer_url = f"http://{_LOOPBACK}:{peer}"
        self._spawn(
            "etcd",
            [
                str(binary),
                "--name=devcluster",
                f"--data-dir={self._workdir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=devcluster={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync=true",  # throw-away data, speed over durability
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ],
        )

        etcd_url = self.etcd_url
        assert etcd_url is not None, "set with the etcd ports above"

        def healthy() -> bool:
            with urllib.request.urlopen(etcd_url + "/health", timeout=2) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")

        self._wait("etcd /health", "etcd", healthy)

    def restart_apiserver(self, down_seconds: float = 5.0, sig: int = signal.SIGKILL) -> None:
        """Kill kube-apiserver (``sig``, SIGKILL by default: no graceful shutdown), wait
        ``down_seconds``, start it again with the same flags on the same port and wait until it
        is ready. etcd, the other components and every client keep running (they reconnect), as
        when a control-plane node's API server crashes and its static pod restarts.

        Raises:
            DevClusterError: the cluster is not started, or the API server does not come back.
        """
        with self._lock:
            found = [(n, p) for n, p in self._procs if n == "kube-apiserver"]
            if not found or "kube-apiserver" not in self.ports:
                raise DevClusterError("kube-apiserver is not running")
            for entry in found:
                self._signal(entry[1], sig)
                entry[1].wait()
                self._procs.remove(entry)
        time.sleep(down_seconds)
        self._start_apiserver(self.binaries["kube-apiserver"], port=self.ports["kube-apiserver"])

    def _start_apiserver(self, binary: Path, port: int | None = None) -> None:
        port = port or _free_port()
        self.ports["kube-apiserver"] = port
        self.server = f"https://{_LOOPBACK}:{port}"
        pki = self._workdir / "pki"
        self._spawn(
            "kube-apiserver",
            [
                str(binary),
                f"--etcd-servers={self.etcd_url}",
                f"--bind-address={_LOOPBACK}",
                f"--advertise-address={_LOOPBACK}",
                f"--secure-port={port}",
                f"--cert-dir={self._workdir / 'apiserver-certs'}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={_SERVICE_CIDR}",
                "--allow-privileged=true",
                "--profiling=false",
                # The built-in "kubernetes" Service would point at 127.0.0.1,
                # which Endpoints validation rejects; nothing here needs it.
                "--endpoint-reconciler-type=none",
                *self.extra_apiserver_args,
            ],
        )
        self._ssl = None

        def ready() -> bool:
            return bool(self.api("GET", "/readyz", raw=True, timeout=5).strip() == "ok")

        self._wait("kube-apiserver /readyz", "kube-apiserver", ready)

    def _write_kubeconfig(self) -> None:
        assert self.ca_file is not None, "the CA is made before the kubeconfig"
        ca_data = base64.b64encode(self.ca_file.read_bytes()).decode()
        self.kubeconfig = self._workdir / "kubeconfig"
        # JSON is valid YAML, and every kubeconfig loader accepts it.
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "karpy-dev", "cluster": {"server": self.server, "certificate-authority-data": ca_data}}],
            "users": [{"name": "karpy-admin", "user": {"token": self.token}}],
            "contexts": [{"name": "karpy-dev", "context": {"cluster": "karpy-dev", "user": "karpy-admin"}}],
            "current-context": "karpy-dev",
            "preferences": {},
        }
        self.kubeconfig.write_text(json.dumps(config, indent=2) + "\n")
        os.chmod(self.kubeconfig, 0o600)

    def _start_controller_manager(self, binary: Path) -> None:
        port = _free_port()
        self.ports["kube-controller-manager"] = port
        pki = self._workdir / "pki"
        self._spawn(
            "kube-controller-manager",
            [
                str(binary),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                f"--bind-address={_LOOPBACK}",
                f"--secure-port={port}",
                "--leader-elect=false",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                f"--service-cluster-ip-range={_SERVICE_CIDR}",
                "--allocate-node-cidrs=false",
                "--use-service-account-credentials=false",
                "--profiling=false",
                *self.extra_args.get("kube-controller-manager", ()),
            ],
        )

    def _start_scheduler(self, binary: Path) -> None:
        port = _free_port()
        self.ports["kube-scheduler"] = port
        self._spawn(
            "kube-scheduler",
            [
                str(binary),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                f"--bind-address={_LOOPBACK}",
                f"--secure-port={port}",
                "--leader-elect=false",
                "--profiling=false",
                *self.extra_args.get("kube-scheduler", ()),
            ],
        )

    def _start_kwok(self, binary: Path, stages: Path) -> None:
        # kwok always merges ~/.kwok/kwok.yaml into its config: give it an
        # empty home so only our stages apply.
        home = self._workdir / "kwok-home"
        home.mkdir(exist_ok=True)
        env = dict(os.environ, HOME=str(home))
        self._spawn(
            "kwok",
            [
                str(binary),
                f"--kubeconfig={self.kubeconfig}",
                f"--config={stages}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}={KWOK_NODE_ANNOTATION_VALUE}",
                f"--node-ip={_LOOPBACK}",
                f"--cidr={_POD_CIDR}",
                "--node-lease-duration-seconds=40",
                # No --server-address / --node-port: kwok opens no port at all.
                *self.extra_args.get("kwok", ()),
            ],
            env=env,
        )

    def _healthz(self, port: int) -> bool:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving cert on loopback
        with urllib.request.urlopen(f"https://{_LOOPBACK}:{port}/healthz", context=ctx, timeout=5) as resp:
            return bool(resp.read().decode().strip() == "ok")

    def _wait_components_healthy(self) -> None:
        for name in ("kube-controller-manager", "kube-scheduler"):
            if name in self.ports:
                self._wait(f"{name} /healthz", name, functools.partial(self._healthz, self.ports[name]))
        if self.run_controller_manager:
            # The ServiceAccount admission plugin rejects pods until the
            # controller manager has created the namespace's "default" SA.
            self._wait(
                "ServiceAccount default/default",
                "kube-controller-manager",
                lambda: self.api("GET", "/api/v1/namespaces/default/serviceaccounts/default", timeout=5) is not None,
            )
        if self.run_kwok:
            # kwok has no health endpoint without opening a port; make sure it
            # came up and got past its own API readiness check.
            self._wait("kwok to start", "kwok", lambda: "Watch nodes" in self.logs("kwok", 400))


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


class _Hangup(BaseException):
    """Raised by the SIGHUP/SIGTERM handler of ``build`` so the staging directory is cleaned up."""


def _raise_hangup(signum: int, _frame: object) -> None:
    raise _Hangup(signum)


def _cmd_build(args: argparse.Namespace) -> int:
    started = time.monotonic()
    cached = None if args.force else cached_binaries()
    # The default SIGHUP/SIGTERM action kills the process without running the staging clean-up.
    previous = {sig: signal.signal(sig, _raise_hangup) for sig in (signal.SIGHUP, signal.SIGTERM)}
    try:
        paths = build(force=args.force)
    except GoNotFound:
        return 2
    except KeyboardInterrupt:
        print("devcluster: interrupted", file=sys.stderr, flush=True)
        return 130
    except _Hangup as hup:
        signum = int(hup.args[0])
        print(f"devcluster: stopped by {signal.Signals(signum).name}", file=sys.stderr, flush=True)
        return 128 + signum
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    for name, path in paths.items():
        print(f"{name}\t{path}")
    if cached is not None:  # a build prints its own total
        print(f"devcluster: cached binaries ready in {time.monotonic() - started:.1f}s", file=sys.stderr)
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    try:
        binaries = build()
    except GoNotFound:
        return 2
    stop = threading.Event()
    # Handle SIGINT explicitly too: a shell may start us with SIGINT ignored.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    cluster = DevCluster(binaries, workdir=args.workdir, keep_workdir=args.keep)
    cluster.start()
    try:
        print(f"devcluster: up in {cluster.startup_seconds:.1f}s, API server {cluster.server}")
        print(f"devcluster: logs in {cluster.log_dir}")
        print(f"devcluster: kubeconfig {cluster.kubeconfig}")
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        print(
            f"devcluster: fake nodes need the annotation {KWOK_NODE_ANNOTATION}: {KWOK_NODE_ANNOTATION_VALUE}; Ctrl-C to stop", flush=True
        )
        expected = set(cluster.running())
        while not stop.is_set():
            dead = expected - set(cluster.running())
            if dead:
                name = sorted(dead)[0]
                print(f"devcluster: {name} exited:\n{cluster.logs(name)}", file=sys.stderr)
                return 1
            stop.wait(1.0)
    finally:
        print("devcluster: stopping", file=sys.stderr)
        cluster.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build (or find cached) binaries and print their paths")
    p_build.add_argument("--force", action="store_true", help="rebuild even if cached")
    p_build.set_defaults(func=_cmd_build)
    p_up = sub.add_parser("up", help="start a cluster and keep it running until Ctrl-C")
    p_up.add_argument("--workdir", help="use this directory instead of a fresh temporary one (kept)")
    p_up.add_argument("--keep", action="store_true", help="keep the temporary work dir after stopping")
    p_up.set_defaults(func=_cmd_up)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
