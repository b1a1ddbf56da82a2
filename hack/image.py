#!/usr/bin/env python3
"""Build karpy's controller images (one per cloud) from Debian packages and PyPI wheels.

No container registry and no Docker daemon are needed: the images are assembled from

* a Debian root filesystem made by ``mmdebstrap --variant=extract`` with ``python3`` and its
  dependencies only (no shell, no apt/dpkg, no compilers), unpacked from the packages of the
  Debian suite in :data:`DEBIAN_SUITE` (``deb.debian.org``);
* karpy's wheel and the wheel of the cloud's plugin only (``karpy-aws`` or ``karpy-kakaocloud``,
  each its own distribution built from ``providers/<cloud>``; the other cloud's package is not in
  the image), both built from this checkout, installed into a virtualenv at ``/opt/karpy`` by the
  image's own interpreter (under ``chroot``), with their dependencies from wheels ``pip download``
  fetched from PyPI for the image's Python version and glibc;

and written as an OCI image layout with ``umoci`` (two layers: the Debian base, shared by both
clouds, and ``/opt/karpy``).  The image runs as UID/GID 65532 with the entrypoint
``/opt/karpy/bin/karpy controller`` and ``KARPY_CLOUD_PROVIDER=<cloud>`` in its environment, the
same layout, user and entrypoint as ``deploy/Dockerfile``.

Usage (as root: mmdebstrap, chroot and ``umoci unpack`` need it)::

    python3 hack/image.py build                 # both clouds; prints one JSON line per image
    python3 hack/image.py build --cloud aws --archive /tmp/karpy-aws.oci.tar
    python3 hack/image.py host-deps             # only install mmdebstrap and umoci (apt-get)

The Debian packages the build needs (``mmdebstrap``, ``umoci``) are installed with ``apt-get``
when missing (``apt-get update`` only when the install fails with the current package lists).

Caching (outside the repository, ``${KARPY_CACHE_DIR:-~/.cache/karpy}/images/``):

* ``base-<key>/``: the Debian root filesystem and its layer tarball, keyed by the recipe below;
  it is not refreshed by itself: ``--refresh-base`` rebuilds it (new Debian security updates);
* ``wheels/``: the downloaded dependency wheels (reused offline when they satisfy the
  requirements, so a source change alone needs no network);
* ``karpy-<cloud>/``: the OCI layout, tagged with karpy's version, and ``karpy-<cloud>.key``:
  a hash of the base key, the cloud, this script and every source file that goes into the two
  wheels (karpy's and the cloud's plugin's; the other plugin's sources are not part of it).
  When the hash matches, ``build`` returns the cached image without doing anything.

This file is also imported by ``tests/integration/test_image.py`` (:func:`build`,
:func:`unpack`, :func:`spawn_in_rootfs`).  Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLOUDS = ("aws", "kakaocloud")

#: Debian suite and the apt sources the root filesystem is built from.
DEBIAN_SUITE = "bookworm"
DEBIAN_SOURCES = (
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE} main",
    f"deb http://deb.debian.org/debian {DEBIAN_SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {DEBIAN_SUITE}-security main",
)
#: Packages extracted into the root filesystem (their dependencies come along).
#: (libstdc++6: numpy's manylinux wheels link against it and do not bundle it.)
BASE_PACKAGES = ("python3", "libstdc++6")
#: Paths dpkg never writes into the root filesystem (documentation but the copyright files).
DPKG_PATH_OPTIONS = (
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
#: Removed from the extracted root filesystem: nothing in karpy uses them (glibc's iconv modules,
#: Python's documentation server data and helper scripts, package-manager leftovers).
BASE_PRUNE = (
    "usr/lib/x86_64-linux-gnu/gconv",
    "usr/lib/python3.11/pydoc_data",
    "usr/lib/python3.11/lib2to3",
    "usr/lib/python3.11/idlelib",
    "usr/lib/python3.11/turtledemo",
    "usr/share/python3/debian_defaults",
    "var/cache/apt", "var/lib/apt", "var/log/apt", "var/cache/debconf",
)
#: Packages extracted as dependencies whose files are then removed: python3-minimal depends on
#: dpkg (for its maintainer scripts, which an extracted root filesystem never runs), dpkg on tar.
BASE_DROP = ("dpkg", "tar")
#: Bump when the base recipe changes in a way the constants above do not show.
BASE_RECIPE = 1

#: The unprivileged user the image runs as (the conventional "nonroot" UID/GID of distroless).
UID = GID = 65532
VENV = "/opt/karpy"
HOST_PACKAGES = {"mmdebstrap": "mmdebstrap", "umoci": "umoci"}  # command -> Debian package
SOURCE_URL = "https://github.com/karpy/karpy"
#: The layer tarballs' file times (2026-01-01T00:00:00Z), so an unchanged tree gives the same layer.
SOURCE_DATE_EPOCH = 1767225600


class ImageBuildError(RuntimeError):
    """The image cannot be built here (not root, a missing tool, a failed step)."""


@dataclass(frozen=True)
class Image:
    """A built image: ``layout`` is an OCI image layout directory holding ``tag``.

    ``compressed_bytes`` counts the blobs a registry would store (gzip layers, config, manifest);
    ``uncompressed_bytes`` the layers' tar sizes; ``reused`` says the cache already had it.
    """

    cloud: str
    layout: str
    tag: str
    manifest_digest: str
    compressed_bytes: int
    uncompressed_bytes: int
    reused: bool
    seconds: float

    @property
    def ref(self) -> str:
        """``LAYOUT:TAG``, the image reference umoci takes."""
        return f"{self.layout}:{self.tag}"


def log(message: str) -> None:
    print(f"hack/image.py: {message}", file=sys.stderr, flush=True)


def cache_dir() -> Path:
    """``${KARPY_CACHE_DIR:-~/.cache/karpy}/images``."""
    root = os.environ.get("KARPY_CACHE_DIR")
    return (Path(root) if root else Path.home() / ".cache" / "karpy") / "images"


def version() -> str:
    """karpy's version from pyproject.toml."""
    return str(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"])


def _run(argv: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure raise ImageBuildError with the tail of its output."""
    proc: subprocess.CompletedProcess[str] = subprocess.run(  # type: ignore[call-overload]
        list(argv), text=True, capture_output=True, **kwargs)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise ImageBuildError(f"{' '.join(map(str, argv[:4]))} ... failed ({proc.returncode}):\n{tail}")
    return proc


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on ``path`` (concurrent builds wait and then reuse the result)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield


# --------------------------------------------------------------------------------------------
# host tools
# --------------------------------------------------------------------------------------------

def check_root() -> None:
    """Raise ImageBuildError unless running as root (chroot, mmdebstrap's root mode, umoci unpack)."""
    if os.geteuid() != 0:
        raise ImageBuildError("building or running the images needs root (chroot, mount namespaces)")


def ensure_host_tools() -> None:
    """Install mmdebstrap and umoci with apt-get when missing; a machine that has them skips this.

    ``apt-get update`` runs only when the install fails with the package lists already present.
    Raises ImageBuildError when there is no apt-get or the install fails.
    """
    missing = [pkg for cmd, pkg in HOST_PACKAGES.items() if shutil.which(cmd) is None]
    if not missing:
        return
    if shutil.which("apt-get") is None:
        raise ImageBuildError(f"{', '.join(missing)} missing and no apt-get to install them (a Debian host is needed)")
    check_root()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing]
    log(f"installing Debian packages {' '.join(missing)}")
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        _run(["apt-get", "update", "-q"], env=env)
        _run(install, env=env)


# --------------------------------------------------------------------------------------------
# running things inside a root filesystem
# --------------------------------------------------------------------------------------------

#: Run by a fresh host interpreter (``python3 -I -S -c``) between fork and the image's program:
#: a private mount namespace with /proc and /dev, chroot, cwd, drop to uid/gid, execve.  The mounts
#: live only in that namespace, so they vanish with the process (nothing to clean up on the host,
#: even after a SIGKILL); the network namespace stays the host's (loopback).  A separate program,
#: not a ``preexec_fn``, because the caller may have threads (asyncio's executor in the tests).
_ENTER_ROOTFS = r"""
import ctypes, os, sys
rootfs, cwd, uid, gid = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
argv = sys.argv[5:]
libc = ctypes.CDLL(None, use_errno=True)
def check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, what + ": " + os.strerror(errno))
check(libc.unshare(0x00020000), "unshare(CLONE_NEWNS)")
check(libc.mount(None, b"/", None, 0x4000 | 0x40000, None), "make / private (MS_REC|MS_PRIVATE)")
check(libc.mount(b"proc", os.fsencode(rootfs + "/proc"), b"proc", 0, None), "mount proc")
check(libc.mount(b"/dev", os.fsencode(rootfs + "/dev"), None, 0x1000 | 0x4000, None), "bind /dev (MS_BIND|MS_REC)")
os.chroot(rootfs)
os.chdir(cwd)
if uid or gid:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
os.execve(argv[0], argv, os.environ)
"""


def spawn_in_rootfs(
    rootfs: Path, argv: Sequence[str], *, env: Mapping[str, str], cwd: str = "/", uid: int = 0, gid: int = 0,
    **popen: object,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` (an absolute path inside ``rootfs``) chrooted into ``rootfs`` as uid/gid.

    ``env`` is the whole environment (nothing of the caller's leaks in).  The returned process
    becomes ``argv`` once the host interpreter running :data:`_ENTER_ROOTFS` has exec'd it (same
    pid).  ``rootfs`` gets ``proc`` and ``dev`` directories.  Extra keyword arguments go to
    :class:`subprocess.Popen`.
    """
    if not argv or not argv[0].startswith("/"):
        raise ValueError(f"argv[0] must be an absolute path inside the root filesystem: {argv!r}")
    for d in ("proc", "dev"):
        (rootfs / d).mkdir(exist_ok=True)
    helper = [sys.executable, "-I", "-S", "-c", _ENTER_ROOTFS, str(rootfs), cwd, str(uid), str(gid)]
    return subprocess.Popen([*helper, *argv], env=dict(env), cwd="/", **popen)  # type: ignore[call-overload, no-any-return]


def run_in_rootfs(rootfs: Path, argv: Sequence[str], *, env: Mapping[str, str] | None = None, uid: int = 0,
                  gid: int = 0, cwd: str = "/") -> str:
    """Run ``argv`` inside ``rootfs`` to completion; return its stdout, raise ImageBuildError on failure."""
    env = env or {"PATH": f"{VENV}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp"}
    proc = spawn_in_rootfs(rootfs, argv, env=env, cwd=cwd, uid=uid, gid=gid,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    if proc.returncode != 0:
        tail = "\n".join((out + err).decode(errors="replace").splitlines()[-30:])
        raise ImageBuildError(f"in the image: {' '.join(argv[:4])} ... failed ({proc.returncode}):\n{tail}")
    return out.decode()


# --------------------------------------------------------------------------------------------
# the Debian base
# --------------------------------------------------------------------------------------------

def _hash(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:16]


def base_key() -> str:
    """Hash of the base recipe: suite, sources, packages, dpkg options, pruned paths, user."""
    return _hash([BASE_RECIPE, DEBIAN_SUITE, DEBIAN_SOURCES, BASE_PACKAGES, DPKG_PATH_OPTIONS, BASE_PRUNE, BASE_DROP,
                  UID, GID])


def _tar_layer(root: Path, out: Path, members: Sequence[str]) -> None:
    """Write ``members`` (paths relative to ``root``) as a reproducible tar (sorted, numeric owners, fixed times)."""
    _run(["tar", "--create", "--file", str(out), "--directory", str(root), "--sort=name", "--numeric-owner",
          "--xattrs", f"--mtime=@{SOURCE_DATE_EPOCH}", "--clamp-mtime",
          "--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime", "--", *members])


def _record_packages(root: Path) -> None:
    """Drop BASE_DROP's files and list the other packages in ``/var/lib/dpkg/status.d/`` (as distroless does).

    Reads the downloaded .deb files mmdebstrap left in ``/var/cache/apt/archives`` (removed after);
    image scanners read the status.d entries to know which Debian packages (and versions) are inside.
    """
    archives = root / "var/cache/apt/archives"
    status_d = root / "var/lib/dpkg/status.d"
    status_d.mkdir(parents=True, exist_ok=True)
    for deb in sorted(archives.glob("*.deb")):
        control = _run(["dpkg-deb", "--field", str(deb)]).stdout
        package = next(line.split(":", 1)[1].strip() for line in control.splitlines() if line.startswith("Package:"))
        if package in BASE_DROP:
            listing = _run(["dpkg-deb", "--contents", str(deb)]).stdout
            for line in listing.splitlines():  # "-rwxr-xr-x root/root 312 2025-01-01 00:00 ./usr/bin/dpkg"
                if line[0] not in "-l":  # directories stay (shared, and /bin, /lib, /sbin are symlinks)
                    continue
                path = root / line.split(None, 5)[5].split(" -> ")[0].removeprefix("./")
                if path.is_symlink() or path.is_file():
                    path.unlink()
            continue
        (status_d / package).write_text(control.replace("\nDescription:", "\nStatus: install ok installed\nDescription:", 1))
    for stale in ("var/lib/dpkg/alternatives", "var/lib/dpkg/info", "etc/dpkg", "usr/share/dpkg"):
        shutil.rmtree(root / stale, ignore_errors=True)


def _finish_base(root: Path) -> None:
    """Make the extracted packages a working root filesystem (what maintainer scripts would do, minus the rest)."""
    _record_packages(root)
    for rel in BASE_PRUNE:
        shutil.rmtree(root / rel, ignore_errors=True)
    for d in ("proc", "dev", "sys", "tmp", "etc/ssl/certs", "usr/lib/ssl"):
        (root / d).mkdir(parents=True, exist_ok=True)
    os.chmod(root / "tmp", 0o1777)
    (root / "etc/passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"nonroot:x:{UID}:{GID}:nonroot:/nonexistent:/usr/sbin/nologin\n")
    (root / "etc/group").write_text(f"root:x:0:\nnonroot:x:{GID}:\n")
    (root / "etc/hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    (root / "etc/nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    # TLS trust: OpenSSL's default CA file, and Debian's usual bundle path, point at certifi's
    # Mozilla bundle in the virtualenv (certifi comes with kubernetes-asyncio in both images).
    # The CA certificates package is not installed: its maintainer script needs perl and openssl.
    (root / "etc/ssl/certs/ca-certificates.crt").unlink(missing_ok=True)
    (root / "etc/ssl/certs/ca-certificates.crt").symlink_to(f"{VENV}/lib/python3.11/site-packages/certifi/cacert.pem")
    (root / "usr/lib/ssl/cert.pem").unlink(missing_ok=True)
    (root / "usr/lib/ssl/cert.pem").symlink_to("/etc/ssl/certs/ca-certificates.crt")
    (root / "usr/lib/ssl/certs").unlink(missing_ok=True)
    (root / "usr/lib/ssl/certs").symlink_to("/etc/ssl/certs")
    _run(["ldconfig", "-r", str(root)])  # the dynamic linker's cache (libc-bin's trigger, not run by extract)
    # the standard library's bytecode (python3.11-minimal's postinst), by the image's interpreter
    run_in_rootfs(root, ["/usr/bin/python3", "-m", "compileall", "-q", "-j", "0", "/usr/lib/python3.11"])


def build_base(refresh: bool = False) -> tuple[Path, Path]:
    """Build (or reuse) the Debian base: returns (root filesystem directory, layer tarball).

    Raises ImageBuildError when mmdebstrap fails (e.g. deb.debian.org unreachable).
    """
    key = base_key()
    base = cache_dir() / f"base-{key}"
    rootfs, layer = base / "rootfs", base / "layer.tar"
    with _locked(cache_dir() / f".base-{key}.lock"):
        if layer.is_file() and rootfs.is_dir() and not refresh:
            return rootfs, layer
        check_root()
        ensure_host_tools()
        started = time.monotonic()
        shutil.rmtree(base, ignore_errors=True)
        base.mkdir(parents=True)
        tmp = base / "rootfs.tmp"
        argv = ["mmdebstrap", "--quiet", "--variant=extract", f"--include={','.join(BASE_PACKAGES)}",
                "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr", "--skip=cleanup/apt/cache",
                *(f"--dpkgopt={opt}" for opt in DPKG_PATH_OPTIONS), DEBIAN_SUITE, str(tmp), *DEBIAN_SOURCES]
        log(f"building the Debian {DEBIAN_SUITE} base ({', '.join(BASE_PACKAGES)}) with mmdebstrap")
        _run(argv, env={**os.environ, "SOURCE_DATE_EPOCH": str(SOURCE_DATE_EPOCH)})
        _finish_base(tmp)
        members = sorted(p.name for p in tmp.iterdir())
        _tar_layer(tmp, base / "layer.tar.tmp", members)
        tmp.rename(rootfs)
        (base / "layer.tar.tmp").rename(layer)
        for stale in cache_dir().glob("base-*"):  # earlier recipes' bases
            if stale != base:
                shutil.rmtree(stale, ignore_errors=True)
        log(f"base ready in {time.monotonic() - started:.0f}s: {layer.stat().st_size / 2**20:.1f} MiB uncompressed")
        return rootfs, layer


# --------------------------------------------------------------------------------------------
# karpy's wheel and its dependencies
# --------------------------------------------------------------------------------------------

SOURCE_ROOTS = ("pyproject.toml", "README.md", "karpy_core")
"""What karpy's own wheel is built from."""


def plugin_dir(cloud: str) -> Path:
    """The cloud's plugin distribution (``providers/<cloud>``: its pyproject.toml and package)."""
    return REPO / "providers" / cloud


def source_files(cloud: str) -> list[Path]:
    """Every file that goes into karpy's wheel and the cloud's plugin wheel (bytecode and build
    leftovers excluded)."""
    files: list[Path] = []
    for rel in (*SOURCE_ROOTS, str(plugin_dir(cloud).relative_to(REPO))):
        top = REPO / rel
        if top.is_file():
            files.append(top)
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            # (build/: what pip wheel leaves in the plugin's directory; tests/: the plugin's tests,
            # beside its package but in no wheel; neither is a source)
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in ("__pycache__", "build", "tests") and not d.endswith(".egg-info"))
            files.extend(Path(dirpath) / f for f in sorted(filenames) if not f.endswith((".pyc", ".pyo")))
    return files


def image_key(cloud: str) -> str:
    """Hash of everything the cloud's image is made of (base key, cloud, this script, the sources)."""
    digest = hashlib.sha256()
    for part in (base_key(), cloud, Path(__file__).read_bytes()):
        digest.update(part if isinstance(part, bytes) else part.encode())
    for path in source_files(cloud):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def _target_tags(rootfs: Path) -> list[str]:
    """pip download options selecting wheels for the image's interpreter (version, ABI, glibc, machine)."""
    out = run_in_rootfs(rootfs, ["/usr/bin/python3", "-c",
                                 "import platform, sys; print(sys.version_info[0], sys.version_info[1], "
                                 "platform.libc_ver()[1], platform.machine())"])
    major, minor, libc, machine = out.split()
    glibc_minor = int(libc.split(".")[1])
    platforms = [f"manylinux_2_{m}_{machine}" for m in range(glibc_minor, 16, -1)]
    platforms += [f"manylinux2014_{machine}", f"manylinux2010_{machine}", f"manylinux1_{machine}"]
    return ["--only-binary=:all:", "--implementation", "cp", "--python-version", f"{major}.{minor}",
            "--abi", f"cp{major}{minor}", *(f"--platform={p}" for p in platforms)]


def _pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]


def stage_sources(cloud: str, dest: Path) -> tuple[Path, Path]:
    """Copy the files :func:`source_files` lists (karpy's and the cloud's plugin's) into ``dest``
    under their paths in the checkout; return (karpy's project dir, the plugin's) there.

    Wheels are built from this copy, not from the checkout: setuptools packs what an earlier
    build left in ``build/lib``, so a checkout that once built a wheel holding a package that has
    since moved (``karpy_aws`` before it became its own distribution) would put it back in."""
    for path in source_files(cloud):
        target = dest / path.relative_to(REPO)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return dest, dest / plugin_dir(cloud).relative_to(REPO)


def build_wheels(out_dir: Path, cloud: str) -> tuple[Path, Path]:
    """Build karpy's wheel and the cloud's plugin wheel (``providers/<cloud>``) from a clean copy
    of this checkout's sources (:func:`stage_sources`) into ``out_dir``; return (karpy's, the plugin's)."""
    with tempfile.TemporaryDirectory(prefix="karpy-wheel-src-") as tmp:
        project, plugin = stage_sources(cloud, Path(tmp))
        _run(_pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(out_dir), str(project), str(plugin)))
    found = []
    for pattern in ("karpy-*.whl", f"karpy_{cloud}-*.whl"):
        wheels = sorted(out_dir.glob(pattern))
        if len(wheels) != 1:
            raise ImageBuildError(f"expected one {pattern} wheel in {out_dir}, found {wheels}")
        found.append(wheels[0])
    return found[0], found[1]


def download_wheels(karpy_wheel: Path, plugin_wheel: Path, cloud: str, tags: Sequence[str]) -> Path:
    """Fetch the wheels karpy and the cloud's plugin need (and pip's) into the shared cache; return
    that directory.

    Tries the cache alone first (no network), then PyPI.  karpy's and the plugins' own wheels are
    never kept there.
    """
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    reqs = [f"karpy @ {karpy_wheel.as_uri()}", f"karpy-{cloud} @ {plugin_wheel.as_uri()}", "pip"]
    base = _pip("download", "--quiet", "--dest", str(wheels), "--find-links", str(wheels), *tags)
    with _locked(cache_dir() / ".wheels.lock"):
        try:
            try:
                _run([*base, "--no-index", *reqs])
            except ImageBuildError:
                log(f"downloading wheels for karpy and karpy-{cloud} from PyPI")
                _run([*base, *reqs])
        finally:
            for stale in [*wheels.glob("karpy-*.whl"), *wheels.glob("karpy_*.whl")]:
                stale.unlink()
    return wheels


# --------------------------------------------------------------------------------------------
# the image
# --------------------------------------------------------------------------------------------

#: Removed from the virtualenv: package test suites (never imported at run time).
VENV_PRUNE_DIRS = ("tests", "testing")
#: Packages whose bytecode is not kept: kubernetes_asyncio's generated client (22 MiB of .pyc) is
#: imported only by ``karpy install-crds`` and for kubeconfigs with exec/auth-provider users
#: (karpy_core/kube/transport.py); it then compiles in memory (the root filesystem is read-only):
#: about 1.5 s once.
VENV_NO_BYTECODE = ("kubernetes_asyncio",)
#: AWS services whose botocore models stay in the aws image besides karpy_aws.clients._SERVICES
#: (read from the installed package): the credential providers' (AssumeRole/IRSA web identity,
#: SSO, console sign-in credentials).  The other ~400 service models (about 24 MiB) are removed.
BOTOCORE_CREDENTIAL_SERVICES = ("sts", "sso", "sso-oidc", "signin")


def _install_karpy(stage: Path, karpy_wheel: Path, plugin_wheel: Path, wheels: Path, cloud: str) -> None:
    """Create /opt/karpy in ``stage`` and pip-install karpy and the cloud's plugin (only that one)
    into it with the image's interpreter."""
    inside = stage / "tmp" / "karpy-build"
    shutil.rmtree(inside, ignore_errors=True)
    (inside / "wheels").mkdir(parents=True)
    for whl in wheels.glob("*.whl"):
        os.link(whl, inside / "wheels" / whl.name) if whl.stat().st_dev == inside.stat().st_dev \
            else shutil.copy2(whl, inside / "wheels" / whl.name)
    shutil.copy2(karpy_wheel, inside / karpy_wheel.name)
    shutil.copy2(plugin_wheel, inside / plugin_wheel.name)
    pip_whl = sorted((inside / "wheels").glob("pip-*.whl"))[-1].name
    pip = [f"{VENV}/bin/python", f"/tmp/karpy-build/wheels/{pip_whl}/pip", "--disable-pip-version-check",
           "--no-cache-dir"]
    try:
        run_in_rootfs(stage, ["/usr/bin/python3", "-m", "venv", "--without-pip", VENV])
        run_in_rootfs(stage, [*pip, "install", "--quiet", "--no-index", "--find-links", "/tmp/karpy-build/wheels",
                              "--no-warn-script-location", f"/tmp/karpy-build/{karpy_wheel.name}",
                              f"/tmp/karpy-build/{plugin_wheel.name}"])
        run_in_rootfs(stage, [*pip, "check"])
    finally:
        shutil.rmtree(inside, ignore_errors=True)
    _prune_venv(stage, cloud)
    if cloud == "aws":  # every kept service model loads; a client needs no network to be created
        services = ("from botocore.session import get_session; s = get_session(); "
                    "[s.create_client(n, region_name='us-east-1', aws_access_key_id='x', aws_secret_access_key='x') "
                    "for n in s.get_available_services()]")
        run_in_rootfs(stage, [f"{VENV}/bin/python", "-c", services], uid=UID, gid=GID, cwd="/tmp")
    # The image as the controller sees it: the CLI imports, the cloud's plugin loads and is the only
    # one besides the simulated provider, the other cloud's package is absent, no matplotlib.
    check = ("import importlib.util, sys; from importlib.metadata import entry_points; "
             "assert importlib.util.find_spec('matplotlib') is None, 'matplotlib in the image'; "
             "names = sorted(ep.name for ep in entry_points(group='karpy.cloudprovider')); "
             "assert names == sorted([sys.argv[1], 'simulated']), names; "
             "assert importlib.util.find_spec(sys.argv[2]) is None, sys.argv[2] + ' in the image'; "
             "eps = [ep for ep in entry_points(group='karpy.cloudprovider') if ep.name == sys.argv[1]]; "
             "eps[0].load()")
    other = next(f"karpy_{c}" for c in CLOUDS if c != cloud)
    run_in_rootfs(stage, [f"{VENV}/bin/python", "-c", check, cloud, other], uid=UID, gid=GID, cwd="/tmp")
    run_in_rootfs(stage, [f"{VENV}/bin/karpy", "--help"], uid=UID, gid=GID, cwd="/tmp")


def _prune_venv(stage: Path, cloud: str) -> None:
    """Remove from the installed virtualenv what karpy never loads (see the VENV_* constants)."""
    site = stage / VENV.lstrip("/") / "lib" / "python3.11" / "site-packages"
    for top in site.iterdir():
        if not top.is_dir() or top.name.endswith(".dist-info"):
            continue
        for dirpath, dirnames, filenames in os.walk(top):
            for d in [d for d in dirnames if d in VENV_PRUNE_DIRS
                      or (d == "__pycache__" and top.name in VENV_NO_BYTECODE)]:
                shutil.rmtree(Path(dirpath) / d)
                dirnames.remove(d)
            for f in filenames:
                if f.endswith(".pyi"):  # type stubs
                    (Path(dirpath) / f).unlink()
    if cloud == "aws":
        used = run_in_rootfs(stage, [f"{VENV}/bin/python", "-c",
                                     "from karpy_aws.clients import _SERVICES; print(*_SERVICES)"]).split()
        keep = {*used, *BOTOCORE_CREDENTIAL_SERVICES}
        for model in (site / "botocore" / "data").iterdir():
            if model.is_dir() and model.name not in keep:
                shutil.rmtree(model)


def image_config(cloud: str) -> tuple[dict[str, list[str] | str], dict[str, str]]:
    """The image config (umoci ``--config.*`` values) and its labels, shared with deploy/Dockerfile."""
    config: dict[str, list[str] | str] = {
        "user": f"{UID}:{GID}",
        "workingdir": "/tmp",
        "entrypoint": [f"{VENV}/bin/karpy", "controller"],
        "env": [f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "LANG=C.UTF-8", "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "HOME=/tmp", "TMPDIR=/tmp",
                f"KARPY_CLOUD_PROVIDER={cloud}"],
        "exposedports": ["8080/tcp", "8081/tcp"],
    }
    labels = {
        "org.opencontainers.image.title": f"karpy-{cloud}",
        "org.opencontainers.image.description": f"karpy node autoscaler controller ({cloud})",
        "org.opencontainers.image.version": version(),
        "org.opencontainers.image.source": SOURCE_URL,
        "org.opencontainers.image.licenses": "Apache-2.0",
        "org.opencontainers.image.base.name": f"debian:{DEBIAN_SUITE} ({', '.join(BASE_PACKAGES)}, mmdebstrap)",
        "io.github.karpy.cloud": cloud,
    }
    return config, labels


def _assemble(layout: Path, tag: str, layers: Sequence[Path], cloud: str) -> None:
    """Write an OCI image layout at ``layout`` with ``layers`` and karpy's config under ``tag``."""
    ref = f"{layout}:{tag}"
    _run(["umoci", "init", "--layout", str(layout)])
    _run(["umoci", "new", "--image", ref])
    for layer, what in zip(layers, ("Debian base (mmdebstrap)", f"karpy and karpy-{cloud} in {VENV}"), strict=True):
        _run(["umoci", "raw", "add-layer", "--image", ref, "--history.created_by", what, str(layer)])
    config, labels = image_config(cloud)
    argv = ["umoci", "config", "--image", ref, "--os", "linux", "--architecture", "amd64",
            "--history.created_by", "hack/image.py: config"]
    for key, value in config.items():
        for item in [value] if isinstance(value, str) else value:
            argv += [f"--config.{key}", item]
    for key, value in labels.items():
        argv += ["--config.label", f"{key}={value}", "--manifest.annotation", f"{key}={value}"]
    _run(argv)
    _run(["umoci", "gc", "--layout", str(layout)])


def _blob(layout: Path, digest: str) -> Path:
    algo, hexdigest = digest.split(":", 1)
    return layout / "blobs" / algo / hexdigest


def read_image(layout: Path, tag: str) -> tuple[str, dict[str, object], dict[str, object]]:
    """(manifest digest, manifest, image config) of ``tag`` in the OCI layout ``layout``."""
    index = json.loads((layout / "index.json").read_text())
    for desc in index["manifests"]:
        if (desc.get("annotations") or {}).get("org.opencontainers.image.ref.name") == tag:
            manifest = json.loads(_blob(layout, desc["digest"]).read_text())
            config = json.loads(_blob(layout, manifest["config"]["digest"]).read_text())
            return desc["digest"], manifest, config
    raise ImageBuildError(f"no tag {tag!r} in {layout}")


def _sizes(layout: Path, tag: str) -> tuple[int, int]:
    """(compressed, uncompressed) bytes of the image: blobs as stored, and the layers' tar sizes."""
    digest, manifest, _ = read_image(layout, tag)
    layers = manifest["layers"]
    assert isinstance(layers, list)
    compressed = _blob(layout, digest).stat().st_size + int(manifest["config"]["size"])  # type: ignore[index]
    uncompressed = 0
    for desc in layers:
        compressed += int(desc["size"])
        with gzip.open(_blob(layout, desc["digest"])) as fh:
            while chunk := fh.read(1 << 20):
                uncompressed += len(chunk)
    return compressed, uncompressed


def build(cloud: str, *, force: bool = False, refresh_base: bool = False, archive: Path | None = None) -> Image:
    """Build (or reuse) the cloud's image; return where it is and how big.

    Raises ImageBuildError (not root, no Debian tools, a network or pip failure, a smoke check).
    """
    if cloud not in CLOUDS:
        raise ValueError(f"cloud must be one of {CLOUDS}, not {cloud!r}")
    started = time.monotonic()
    tag = version()
    images = cache_dir()
    layout, stamp = images / f"karpy-{cloud}", images / f"karpy-{cloud}.key"
    key = image_key(cloud)
    with _locked(images / f".karpy-{cloud}.lock"):
        reused = not force and not refresh_base and layout.is_dir() and stamp.is_file() and stamp.read_text() == key
        if not reused:
            check_root()
            ensure_host_tools()
            rootfs, base_layer = build_base(refresh=refresh_base)
            with tempfile.TemporaryDirectory(prefix=f"build-{cloud}-", dir=images) as tmpdir:
                tmp = Path(tmpdir)
                log(f"building karpy-{cloud}:{tag}")
                karpy_wheel, plugin_wheel = build_wheels(tmp / "dist", cloud)
                wheels = download_wheels(karpy_wheel, plugin_wheel, cloud, _target_tags(rootfs))
                stage = tmp / "stage"
                _run(["cp", "-a", "--reflink=auto", str(rootfs), str(stage)])
                _install_karpy(stage, karpy_wheel, plugin_wheel, wheels, cloud)
                karpy_layer = tmp / "karpy.tar"
                _tar_layer(stage, karpy_layer, [VENV.lstrip("/").split("/")[0]])  # "opt", with its mode
                new_layout = tmp / "layout"
                _assemble(new_layout, tag, [base_layer, karpy_layer], cloud)
                stamp.unlink(missing_ok=True)
                shutil.rmtree(layout, ignore_errors=True)
                new_layout.rename(layout)
                stamp.write_text(key)
        if archive is not None:
            archive.parent.mkdir(parents=True, exist_ok=True)
            _run(["tar", "--create", "--file", str(archive), "--directory", str(layout), "--sort=name",
                  "--numeric-owner", "--owner=0", "--group=0", "."])
        digest, _, _ = read_image(layout, tag)
        sizes_file = images / f"karpy-{cloud}.sizes.json"
        sizes = json.loads(sizes_file.read_text()) if reused and sizes_file.is_file() else {}
        if sizes.get("digest") != digest:
            compressed, uncompressed = _sizes(layout, tag)
            sizes = {"digest": digest, "compressed": compressed, "uncompressed": uncompressed}
            sizes_file.write_text(json.dumps(sizes))
        compressed, uncompressed = int(sizes["compressed"]), int(sizes["uncompressed"])
    return Image(cloud=cloud, layout=str(layout), tag=tag, manifest_digest=digest, compressed_bytes=compressed,
                 uncompressed_bytes=uncompressed, reused=reused, seconds=round(time.monotonic() - started, 1))


def unpack(image: Image, bundle: Path) -> dict[str, object]:
    """``umoci unpack`` the image into ``bundle`` (``bundle/rootfs``); return the runtime config (config.json)."""
    _run(["umoci", "unpack", "--image", image.ref, str(bundle)])
    return json.loads((bundle / "config.json").read_text())  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build (or reuse) the images; one JSON line per image on stdout")
    b.add_argument("--cloud", choices=[*CLOUDS, "all"], default="all")
    b.add_argument("--force", action="store_true", help="rebuild the image even when the cache matches")
    b.add_argument("--refresh-base", action="store_true", help="rebuild the Debian base too (security updates)")
    b.add_argument("--archive", type=Path, help="also write the OCI layout as a tar (one cloud only)")
    sub.add_parser("host-deps", help="install the Debian packages the build needs (mmdebstrap, umoci)")
    args = parser.parse_args(argv)
    try:
        if args.command == "host-deps":
            ensure_host_tools()
            return 0
        clouds = list(CLOUDS) if args.cloud == "all" else [args.cloud]
        if args.archive is not None and len(clouds) != 1:
            parser.error("--archive needs --cloud aws or --cloud kakaocloud")
        for cloud in clouds:
            image = build(cloud, force=args.force, refresh_base=args.refresh_base and cloud == clouds[0],
                          archive=args.archive)
            print(json.dumps({**asdict(image), "ref": image.ref}), flush=True)
    except ImageBuildError as exc:
        print(f"hack/image.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
