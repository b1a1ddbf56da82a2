#!/usr/bin/env python3
"""Karpenter's own kwok controller, built from Go modules, for side-by-side runs with karpy.

What it is
----------
``sigs.k8s.io/karpenter/kwok`` is the upstream Karpenter controller with its
KWOK cloud provider: it launches NodeClaims by creating fake Node objects
(annotated ``kwok.x-k8s.io/node: fake``) that the dev cluster's kwok then
plays the kubelet for.  Benchmarks run it on the same control plane, catalog
and manifests as karpy's ``controller --kwok`` to compare decisions, speed,
memory and CPU.  Nothing in the product or the test suite depends on it.

This file is a command line tool and an importable module (stdlib only,
Python 3.11+, next to ``devcluster.py``).

Pinned versions
---------------
* Karpenter ``v1.15.0`` (``hack/devcluster/karpenter/go.mod``).
* Go: Karpenter v1.15.0 needs Go >= 1.26.9, newer than the machine's 1.26.8,
  so the build runs with ``GOTOOLCHAIN=go1.27.3``: the go command fetches that
  approved toolchain from the Go module proxy (about 76 MB, once per machine).
  Only this build uses it; the dev cluster's own build stays on the local Go.

Where things live
-----------------
``${KARPY_CACHE_DIR:-~/.cache/karpy}/karpenter/v1.15.0/`` holds the binary
(``karpenter-kwok``), Karpenter's CRDs (``crds/``: NodePool, NodeClaim,
NodeOverlay, CapacityBuffer from ``pkg/apis/crds``, KWOKNodeClass from
``kwok/apis/crds``) and Karpenter's default kwok catalog
(``instance_types.json``), with a ``.stamp`` of the wrapper module.

Usage
-----
    python hack/karpenter_kwok.py build                      # build (or find) it, print paths
    python hack/karpenter_kwok.py crds --kubeconfig K        # install Karpenter's CRDs
    python hack/karpenter_kwok.py run --kubeconfig K         # run it until Ctrl-C

    from karpenter_kwok import KarpenterKwok, build, install_crds   # hack/ on sys.path
    with DevCluster() as cluster:
        install_crds(cluster)
        with KarpenterKwok(cluster.kubeconfig, log_path=...) as karpenter:
            ...  # apply NodePools / KWOKNodeClass / workloads
            print(karpenter.peak_rss_mib(), karpenter.cpu_seconds())
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))

import devcluster  # sibling module, stdlib only

KARPENTER_VERSION = "v1.15.0"
GO_TOOLCHAIN = "go1.27.3"
MODULE_DIR = devcluster.MODULE_DIR / "karpenter"
BINARY = "karpenter-kwok"
PACKAGE = "sigs.k8s.io/karpenter/kwok"

# Files copied out of the Karpenter module: (path inside the module, name in the cache).
_CRD_FILES = (
    ("pkg/apis/crds/karpenter.sh_nodepools.yaml", "crds/karpenter.sh_nodepools.yaml"),
    ("pkg/apis/crds/karpenter.sh_nodeclaims.yaml", "crds/karpenter.sh_nodeclaims.yaml"),
    ("pkg/apis/crds/karpenter.sh_nodeoverlays.yaml", "crds/karpenter.sh_nodeoverlays.yaml"),
    ("pkg/apis/crds/autoscaling.x-k8s.io_capacitybuffers.yaml", "crds/autoscaling.x-k8s.io_capacitybuffers.yaml"),
    ("kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml", "crds/karpenter.kwok.sh_kwoknodeclasses.yaml"),
)
_CATALOG_FILE = ("kwok/cloudprovider/instance_types.json", "instance_types.json")


class KarpenterError(RuntimeError):
    """Building, installing or running Karpenter's kwok controller failed."""


def target_dir() -> Path:
    """Cache directory of the pinned Karpenter version."""
    return devcluster.cache_dir() / "karpenter" / KARPENTER_VERSION


def _stamp() -> str:
    h = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        h.update(name.encode() + b"\0" + (MODULE_DIR / name).read_bytes() + b"\0")
    h.update(f"{GO_TOOLCHAIN} {PACKAGE} {_CRD_FILES} {_CATALOG_FILE}".encode())
    return h.hexdigest()


def _paths(directory: Path) -> dict[str, Path]:
    paths = {"karpenter-kwok": directory / BINARY, "instance-types": directory / _CATALOG_FILE[1]}
    for _src, dst in _CRD_FILES:
        paths[Path(dst).stem] = directory / dst
    return paths


def cached() -> dict[str, Path] | None:
    """The cached build if it exists and matches the wrapper module, else None."""
    directory = target_dir()
    try:
        if (directory / ".stamp").read_text().strip() != _stamp():
            return None
    except OSError:
        return None
    paths = _paths(directory)
    return paths if all(p.is_file() for p in paths.values()) else None


def _go_env(go: str) -> dict[str, str]:
    env = dict(os.environ)
    env["GOTOOLCHAIN"] = GO_TOOLCHAIN
    env["GOWORK"] = "off"
    env["CGO_ENABLED"] = "0"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=mod").strip()
    env["PATH"] = os.path.dirname(go) + os.pathsep + env.get("PATH", "")
    return env


def build(force: bool = False, verbose: bool = True) -> dict[str, Path]:
    """Build Karpenter's kwok controller (or return the cached build).

    Returns ``{"karpenter-kwok": binary, "instance-types": catalog JSON,
    "karpenter.sh_nodepools": CRD YAML, ...}``.  Raises
    :class:`devcluster.GoNotFound` when no Go is found and
    :class:`KarpenterError` when the build fails.  A cold build takes several
    minutes on two cores (Karpenter pulls in controller-runtime and most of
    client-go).
    """
    if not force and (found := cached()):
        return found
    go = devcluster.find_go()
    if go is None:
        raise devcluster.GoNotFound("no `go` command found on PATH (set KARPY_GO or install Go)")
    target = target_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{KARPENTER_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not force and (found := cached()):
            return found
        return _build_locked(go, target, verbose)


def _build_locked(go: str, target: Path, verbose: bool) -> dict[str, Path]:
    env = _go_env(go)
    staging = Path(tempfile.mkdtemp(prefix=f".build-{KARPENTER_VERSION}-", dir=target.parent))
    try:
        started = time.monotonic()
        cmd = [go, "build", "-o", str(staging / BINARY), PACKAGE]
        if verbose:
            print(
                f"karpenter: building Karpenter {KARPENTER_VERSION}'s kwok controller with {GO_TOOLCHAIN} "
                f"(a cold build takes several minutes)\nkarpenter: (cd {MODULE_DIR} && {' '.join(cmd)})",
                file=sys.stderr,
                flush=True,
            )
        proc = subprocess.run(cmd, cwd=MODULE_DIR, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if proc.returncode != 0:
            raise KarpenterError(f"go build of {PACKAGE} failed (exit {proc.returncode}):\n{proc.stdout[-8000:]}")
        module = devcluster.go_module_dir(go, MODULE_DIR, env, "sigs.k8s.io/karpenter")
        for src, dst in (*_CRD_FILES, _CATALOG_FILE):
            (staging / dst).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(module / src, staging / dst)
        devcluster.promote_staging(staging, target, _stamp())
        if verbose:
            print(f"karpenter: built in {time.monotonic() - started:.0f}s into {target}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    found = cached()
    if found is None:  # pragma: no cover - would mean the stamp logic is broken
        raise KarpenterError(f"files missing from {target} after the build")
    return found


# --------------------------------------------------------------------------
# CRDs
# --------------------------------------------------------------------------


class _Api(Protocol):
    def api(self, method: str, path: str, body: Any = None, *, content_type: str = ..., timeout: float = ..., raw: bool = ...) -> Any: ...


def _load_yaml(path: Path) -> dict[str, Any]:
    """Parse a CRD file.  PyYAML is used when importable; else kube-apiserver converts it."""
    import yaml  # the benchmarks' venv has it (karpy depends on PyYAML)

    doc = yaml.safe_load(path.read_text())
    if not isinstance(doc, dict):
        raise KarpenterError(f"{path}: not a YAML mapping")
    return doc


def install_crds(cluster: _Api, paths: dict[str, Path] | None = None, *, timeout: float = 60.0) -> list[str]:
    """Create or replace Karpenter's CRDs on ``cluster`` and wait until they are Established.

    ``cluster`` is a started :class:`devcluster.DevCluster` (anything with its
    ``api`` method).  Replaces karpy's copies of the same CRDs, which accept the
    same objects.  Returns the CRD names.  Raises :class:`KarpenterError` when
    one is not Established within ``timeout`` seconds.
    """
    paths = paths or build()
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    names = []
    for _src, dst in _CRD_FILES:
        crd = _load_yaml(paths[Path(dst).stem])
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            current = cluster.api("GET", f"{base}/{name}")
        except urllib.error.HTTPError as exc:
            if exc.code != 404:
                raise
            cluster.api("POST", base, crd)
        else:
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            cluster.api("PUT", f"{base}/{name}", crd)
    deadline = time.monotonic() + timeout
    for name in names:
        while True:
            conditions = cluster.api("GET", f"{base}/{name}").get("status", {}).get("conditions", [])
            if any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions):
                break
            if time.monotonic() > deadline:
                raise KarpenterError(f"CRD {name} not Established after {timeout:.0f}s")
            time.sleep(0.2)
    return names


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------


class KarpenterKwok:
    """One Karpenter kwok controller process against a cluster.

    ``kubeconfig``: an admin kubeconfig (``DevCluster.kubeconfig``).
    ``log_path``: where its stdout/stderr (JSON log lines) go.
    ``env``: extra settings, Karpenter's names (``BATCH_MAX_DURATION``,
    ``FEATURE_GATES``, ``LOG_LEVEL``, ``INSTANCE_TYPES_FILE_PATH``...).
    Leader election is off unless ``leader_election=True`` (then the Lease
    lives in ``kube-system``).  Metrics are served on ``metrics_port``
    (``http://127.0.0.1:<port>/metrics``), readiness on ``health_port``.
    """

    def __init__(
        self,
        kubeconfig: str | os.PathLike[str],
        *,
        log_path: str | os.PathLike[str],
        env: dict[str, str] | None = None,
        leader_election: bool = False,
        binary: Path | None = None,
    ) -> None:
        self.kubeconfig = Path(kubeconfig)
        self.log_path = Path(log_path)
        self.extra_env = dict(env or {})
        self.leader_election = leader_election
        self.binary = binary
        self.metrics_port = devcluster._free_port()
        self.health_port = devcluster._free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._peak_kib = 0
        self._sampler: threading.Thread | None = None
        self._stop_sampling = threading.Event()
        self._final_cpu = 0.0

    def __enter__(self) -> KarpenterKwok:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, ready_timeout: float = 120.0) -> KarpenterKwok:
        """Start the process and wait until its readiness probe answers 200.

        Raises :class:`KarpenterError` (with the log's tail) when it exits or
        is not ready within ``ready_timeout`` seconds.
        """
        binary = self.binary or build()["karpenter-kwok"]
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/tmp"),
            "KUBECONFIG": str(self.kubeconfig),
            "SYSTEM_NAMESPACE": "kube-system",
            "METRICS_PORT": str(self.metrics_port),
            "HEALTH_PROBE_PORT": str(self.health_port),
            "DISABLE_LEADER_ELECTION": "false" if self.leader_election else "true",
            "LEADER_ELECTION_NAMESPACE": "kube-system",
            "LOG_LEVEL": "info",
            **self.extra_env,
        }
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                [str(binary)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
                preexec_fn=devcluster._set_pdeathsig if threading.current_thread() is threading.main_thread() else None,
            )
        finally:
            log.close()
        self._sampler = threading.Thread(target=self._sample, name="karpenter-rss", daemon=True)
        self._sampler.start()
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KarpenterError(f"karpenter-kwok exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.25)
        self.stop()
        raise KarpenterError(f"karpenter-kwok not ready after {ready_timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout`` seconds; stops the RSS sampler."""
        self._stop_sampling.set()
        if self.proc is not None and self.proc.poll() is None:
            self.peak_rss_mib()
            self._final_cpu = self.cpu_seconds()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._sampler is not None:
            self._sampler.join(timeout=2)

    # -- measurements ------------------------------------------------------

    def _status_kib(self, field: str) -> int:
        assert self.proc is not None
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(field + ":"):
                    return int(line.split()[1])
        except (OSError, ValueError):
            pass
        return 0

    def _sample(self) -> None:
        # VmHWM is the kernel's own high-water mark; sampling VmRSS too keeps a
        # value after the process has exited.
        while not self._stop_sampling.wait(0.5):
            self._peak_kib = max(self._peak_kib, self._status_kib("VmHWM"), self._status_kib("VmRSS"))

    def peak_rss_mib(self) -> float:
        """Peak resident set size so far, MiB (the kernel's VmHWM)."""
        if self.proc is not None and self.proc.poll() is None:
            self._peak_kib = max(self._peak_kib, self._status_kib("VmHWM"))
        return self._peak_kib / 1024

    def cpu_seconds(self) -> float:
        """User + system CPU seconds used so far (``/proc/<pid>/stat``); after :meth:`stop`, the last value."""
        assert self.proc is not None
        if self.proc.poll() is not None:
            return self._final_cpu
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15 of stat(5))
        return ticks / os.sysconf("SC_CLK_TCK")

    def metrics(self) -> str:
        """The Prometheus text of its /metrics endpoint."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as resp:
            return str(resp.read().decode())

    def log_tail(self, lines: int = 40) -> str:
        """The last lines of its log."""
        return devcluster._tail(self.log_path, lines)


# --------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------


class _KubeconfigApi:
    """``api()`` over an admin kubeconfig written by ``devcluster.py up`` (token + embedded CA)."""

    def __init__(self, kubeconfig: Path) -> None:
        import base64
        import ssl

        config = _load_yaml(kubeconfig)  # JSON is YAML: one reader for both
        cluster = config["clusters"][0]["cluster"]
        self.server = cluster["server"]
        self.token = config["users"][0]["user"]["token"]
        self.ssl = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())

    def api(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json", timeout: float = 30.0, raw: bool = False
    ) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = content_type
        req = urllib.request.Request(self.server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, context=self.ssl, timeout=timeout) as resp:
            text = resp.read().decode()
        return text if raw else (json.loads(text) if text else None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_build = sub.add_parser("build", help="build (or find cached) Karpenter's kwok controller and print paths")
    p_build.add_argument("--force", action="store_true")
    p_crds = sub.add_parser("crds", help="install Karpenter's CRDs into the cluster of a dev-cluster kubeconfig")
    p_crds.add_argument("--kubeconfig", required=True, type=Path)
    p_run = sub.add_parser("run", help="run Karpenter's kwok controller against a cluster until Ctrl-C")
    p_run.add_argument("--kubeconfig", required=True, type=Path)
    p_run.add_argument("--log", type=Path, default=Path("karpenter-kwok.log"))
    args = parser.parse_args(argv)
    try:
        if args.command == "build":
            for name, path in build(force=args.force).items():
                print(f"{name}\t{path}")
        elif args.command == "crds":
            print("\n".join(install_crds(_KubeconfigApi(args.kubeconfig))))
        else:
            stop = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: stop.set())
            with KarpenterKwok(args.kubeconfig, log_path=args.log) as karpenter:
                print(
                    f"karpenter: ready; metrics http://127.0.0.1:{karpenter.metrics_port}/metrics, log {args.log}; Ctrl-C to stop",
                    flush=True,
                )
                while not stop.is_set() and karpenter.proc is not None and karpenter.proc.poll() is None:
                    stop.wait(1.0)
                print(f"karpenter: peak RSS {karpenter.peak_rss_mib():.0f} MiB, CPU {karpenter.cpu_seconds():.1f} s", file=sys.stderr)
    except (devcluster.GoNotFound, KarpenterError) as exc:
        print(f"karpenter: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
