"""The controller images (hack/image.py) run against the real API server, kube-scheduler and kwok.

Each cloud's image is built (or taken from the cache), unpacked with ``umoci unpack`` and its
entrypoint, environment, working directory and user are taken from the OCI runtime config umoci
derives from the image config.  The process runs chrooted into the unpacked root filesystem as
that user (karpy and Python from the image, nothing from the test's virtualenv), with the host's
network namespace (loopback only) and the dev cluster's kubeconfig copied inside.  With
``--cloud-provider simulated --kwok`` appended, a Deployment gets a NodeClaim, a kwok Node and
its pods bound: the image's controller end to end.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .karpy_env import wait_for
from .test_controller_e2e import claims_of, cleanup, deployment, nodeclass, nodepool, nodes_of, pods_of

pytestmark = pytest.mark.devcluster

CLOUDS = ("aws", "kakaocloud")
UID = 65532


@pytest.fixture(scope="module")
def bundle(images, image_module, request, tmp_path_factory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The cloud's image unpacked by umoci (once per cloud): (root filesystem, OCI runtime config)."""
    image = images[request.param]
    path = tmp_path_factory.mktemp(f"bundle-{request.param}") / "bundle"
    runtime = image_module.unpack(image, path)
    yield path / "rootfs", runtime
    shutil.rmtree(path, ignore_errors=True)


def _image_env(runtime: dict[str, Any]) -> dict[str, str]:
    return dict(item.split("=", 1) for item in runtime["process"]["env"])


@pytest.mark.parametrize("cloud", CLOUDS)
def test_image_config_is_nonroot_with_karpy_controller_entrypoint_and_labels(images, image_module, cloud):
    image = images[cloud]
    _, manifest, config = image_module.read_image(Path(image.layout), image.tag)
    cfg = config["config"]
    assert cfg["User"] == f"{UID}:{UID}"
    assert cfg["Entrypoint"] == ["/opt/karpy/bin/karpy", "controller"]
    assert not cfg.get("Cmd")
    assert cfg["WorkingDir"] == "/tmp"
    env = dict(item.split("=", 1) for item in cfg["Env"])
    assert env["KARPY_CLOUD_PROVIDER"] == cloud
    assert env["PATH"].startswith("/opt/karpy/bin:")
    assert set(cfg["ExposedPorts"]) == {"8080/tcp", "8081/tcp"}
    labels = cfg["Labels"]
    assert labels["org.opencontainers.image.version"] == image_module.version() == image.tag
    assert labels["org.opencontainers.image.source"] == "https://github.com/karpy/karpy"
    assert labels["io.github.karpy.cloud"] == cloud
    assert labels["org.opencontainers.image.title"] == f"karpy-{cloud}"
    assert config["os"] == "linux" and config["architecture"] == "amd64"
    # two gzip layers: the Debian base (the same blob in both clouds' images) and /opt/karpy
    assert len(manifest["layers"]) == 2
    assert all(layer["mediaType"].endswith("tar+gzip") for layer in manifest["layers"])
    other = images[next(c for c in CLOUDS if c != cloud)]
    _, other_manifest, _ = image_module.read_image(Path(other.layout), other.tag)
    assert manifest["layers"][0]["digest"] == other_manifest["layers"][0]["digest"]
    print(f"karpy-{cloud}: {image.compressed_bytes / 2**20:.1f} MiB compressed, "
          f"{image.uncompressed_bytes / 2**20:.1f} MiB uncompressed")
    assert image.compressed_bytes < 100 * 2**20


@pytest.mark.parametrize("bundle", CLOUDS, indirect=True)
def test_image_root_filesystem_has_no_shell_compilers_or_package_manager(bundle):
    rootfs, runtime = bundle
    assert runtime["process"]["user"]["uid"] == UID and runtime["process"]["user"]["gid"] == UID
    for tool in ("sh", "bash", "gcc", "cc", "apt", "dpkg", "perl", "pip", "pip3"):
        for d in ("usr/bin", "usr/sbin", "opt/karpy/bin"):
            assert not (rootfs / d / tool).exists(), f"/{d}/{tool} is in the image"
    assert (rootfs / "usr/bin/python3").exists()
    site = rootfs / "opt/karpy/lib/python3.11/site-packages"
    # karpy in the image is this checkout's (the cache key covers every source file)
    repo = Path(__file__).resolve().parents[2]
    for rel in ("karpy_core/cli.py", "karpy_core/operator.py"):
        assert (site / rel).read_bytes() == (repo / rel).read_bytes(), rel
    assert not list(site.glob("matplotlib*")), "the sim extra is not part of the controller image"
    # documentation: only the copyright files; no manual pages or translations
    docs = [p for p in (rootfs / "usr/share/doc").rglob("*") if p.is_file()]
    assert docs and all(p.name == "copyright" for p in docs), [str(p) for p in docs if p.name != "copyright"][:5]
    assert not [p for p in (rootfs / "usr/share/man").rglob("*") if p.is_file()]
    assert not list(rootfs.rglob("*.mo"))
    # bytecode is compiled at build time (the root filesystem may be read-only), except for the
    # generated kubernetes_asyncio client, which only exec/auth-provider kubeconfigs import
    assert list((site / "karpy_core/__pycache__").glob("*.cpython-311.pyc"))
    assert list((rootfs / "usr/lib/python3.11/__pycache__").glob("asyncio*.pyc")) or \
        list((rootfs / "usr/lib/python3.11/asyncio/__pycache__").glob("*.pyc"))
    assert not list((site / "kubernetes_asyncio").rglob("*.pyc"))
    # the image's Debian packages are listed for scanners, without the dropped dpkg and tar
    status = {p.name for p in (rootfs / "var/lib/dpkg/status.d").iterdir()}
    assert {"python3", "python3.11", "libc6", "libstdc++6"} <= status and not {"dpkg", "tar"} & status


@pytest.mark.parametrize("bundle", CLOUDS, indirect=True)
async def test_image_carries_only_its_own_cloud_plugin(bundle, image_module, request):
    """Each cloud's plugin is its own distribution (providers/<cloud>/pyproject.toml): the image
    installs karpy's wheel and that one plugin's wheel, so `karpy providers` run inside lists the
    cloud and the built-in simulated provider only, and the other cloud's package is absent."""
    rootfs, runtime = bundle
    cloud = request.node.callspec.params["bundle"]
    other = next(c for c in CLOUDS if c != cloud)
    listed = (await _run_inside(image_module, rootfs, runtime, ["/opt/karpy/bin/karpy", "providers"])).split()
    assert listed == sorted([cloud, "simulated"])
    site = rootfs / "opt/karpy/lib/python3.11/site-packages"
    assert (site / f"karpy_{cloud}" / "plugin.py").is_file() and (site / f"karpy_{cloud}" / "py.typed").is_file()
    assert not (site / f"karpy_{other}").exists() and not list(site.glob(f"karpy_{other}-*.dist-info"))
    dists = sorted(p.name.split("-")[0] for p in site.glob("karpy*.dist-info"))
    assert dists == ["karpy", f"karpy_{cloud}"]
    # the other cloud's SDK is not pulled in either (aioboto3 for aws, httpx for kakaocloud)
    sdk = {"aws": "aioboto3", "kakaocloud": "httpx"}
    assert (site / sdk[cloud]).is_dir() and not (site / sdk[other]).exists()
    # the plugin in the image is this checkout's (the cache key covers its sources)
    repo = Path(__file__).resolve().parents[2]
    rel = Path(f"karpy_{cloud}") / "plugin.py"
    assert (site / rel).read_bytes() == (repo / "providers" / cloud / rel).read_bytes()


async def _run_inside(image_module, rootfs: Path, runtime: dict[str, Any], argv: list[str]) -> str:
    proc = image_module.spawn_in_rootfs(
        rootfs, argv, env=_image_env(runtime), cwd=runtime["process"]["cwd"],
        uid=runtime["process"]["user"]["uid"], gid=runtime["process"]["user"]["gid"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out, _ = await asyncio.to_thread(proc.communicate, timeout=120)
    assert proc.returncode == 0, out.decode()
    return out.decode()


@pytest.mark.parametrize("bundle", CLOUDS, indirect=True)
async def test_image_entrypoint_provisions_on_the_dev_cluster(bundle, image_module, kube, devcluster, tmp_path, request):
    rootfs, runtime = bundle
    cloud = request.node.callspec.params["bundle"]
    args = runtime["process"]["args"]
    assert args == ["/opt/karpy/bin/karpy", "controller"]
    # the cloud's provider plugin is installed in the image and loads there (its SDK is in the image),
    # and OpenSSL's default trust store (certifi's bundle) has CA certificates
    listed = (await _run_inside(image_module, rootfs, runtime, [args[0], "providers"])).split()
    assert listed == sorted([cloud, "simulated"])
    plugin = await _run_inside(image_module, rootfs, runtime, [
        "/opt/karpy/bin/python", "-c",
        "from karpy_core.cloudprovider.provider import load_provider; import sys, karpy_core; "
        "from importlib.metadata import entry_points; "
        "[ep.load() for ep in entry_points(group='karpy.cloudprovider') if ep.name == sys.argv[1]]; "
        "import ssl; assert ssl.create_default_context().get_ca_certs(), 'no CA certificates'; "
        "print(karpy_core.__file__)", cloud])
    assert plugin.strip() == "/opt/karpy/lib/python3.11/site-packages/karpy_core/__init__.py"

    kubeconfig = rootfs / "tmp" / "kubeconfig"
    shutil.copy(devcluster.kubeconfig, kubeconfig)
    os.chown(kubeconfig, UID, UID)
    tag = "t" + uuid.uuid4().hex[:5]
    pool, app = f"img-{cloud[:3]}-{tag}", f"inflate-img-{tag}"
    env = {**_image_env(runtime), "KARPY_LEASE_NAME": f"lease-img-{tag}"}
    log_path = tmp_path / "controller.log"
    with open(log_path, "wb") as log:
        proc = image_module.spawn_in_rootfs(
            rootfs, [*args, "--cloud-provider", "simulated", "--kwok", "--kubeconfig", "/tmp/kubeconfig",
                     "--namespace", "default", "--health-port", "0", "--health-host", "127.0.0.1",
                     "--metrics-port", "0"],  # a free port: 8080 may be taken on the test machine
            env=env, cwd=runtime["process"]["cwd"], uid=runtime["process"]["user"]["uid"],
            gid=runtime["process"]["user"]["gid"], stdout=log, stderr=subprocess.STDOUT)
    try:
        # the process is the image's Python, chrooted, unprivileged (once the helper has exec'd it)
        async def chrooted() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return os.readlink(f"/proc/{proc.pid}/exe").startswith(str(rootfs))

        await wait_for(chrooted, 30, "the controller to be exec'd inside the image", interval=0.05)
        assert os.readlink(f"/proc/{proc.pid}/root") == str(rootfs)
        assert os.readlink(f"/proc/{proc.pid}/exe").startswith(str(rootfs) + "/usr/bin/python3")
        uids = next(line for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines() if line.startswith("Uid:"))
        assert set(uids.split()[1:]) == {str(UID)}

        await kube.create("EC2NodeClass", nodeclass(pool))
        await kube.create("NodePool", nodepool(pool, tag))
        await kube.create("Deployment", deployment(app, tag, 3))

        async def bound() -> bool:
            assert proc.poll() is None, f"the image's controller exited ({proc.returncode}):\n{log_path.read_text()[-4000:]}"
            node_names = {n["metadata"]["name"] for n in await nodes_of(kube, pool)}
            pods = await pods_of(kube, app)
            return len(pods) == 3 and bool(node_names) and all(p["spec"].get("nodeName") in node_names for p in pods)

        await wait_for(bound, 120, "the Deployment's pods bound to kwok Nodes the image's controller launched")
        claims = await claims_of(kube, pool)
        nodes = await nodes_of(kube, pool)
        assert claims and {c["status"].get("nodeName") for c in claims} == {n["metadata"]["name"] for n in nodes}
        assert all(n["metadata"]["annotations"].get("kwok.x-k8s.io/node") == "fake" for n in nodes)
        records = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
        assert records, "the controller logs JSON lines"

        await cleanup(kube, pool, app)

        async def gone() -> bool:
            return not await claims_of(kube, pool)

        await wait_for(gone, 120, "the NodeClaims to be finalized by the image's controller")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(proc.wait, 30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for kind, name in (("NodePool", pool), ("EC2NodeClass", pool)):
            try:
                await kube.delete(kind, name)
            except Exception:
                pass
    assert proc.returncode == 0, f"the controller did not exit cleanly on SIGTERM ({proc.returncode}):\n{log_path.read_text()[-4000:]}"
