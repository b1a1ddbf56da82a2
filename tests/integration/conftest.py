"""Fixtures for integration tests that run against a real local control plane.

The ``devcluster`` fixture builds (once, cached under ``~/.cache/karpy``) and
starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
from ``hack/devcluster.py``, shared by the whole test session.

Without a Go toolchain (and no cached binaries) the tests are skipped with a
loud reason, unless ``KARPY_REQUIRE_DEVCLUSTER=1`` is set, in which case they
fail instead: CI sets it so a missing toolchain can never pass silently.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER_SCRIPT = REPO / "hack" / "devcluster.py"
IMAGE_SCRIPT = REPO / "hack" / "image.py"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "devcluster: needs the real etcd/kube-apiserver/kube-scheduler/kwok cluster built from Go modules",
    )
    # a run ended by SIGTERM (timeout, a CI cancel) stops its clusters as a Ctrl-C does: teardown runs
    _load_devcluster().stop_clusters_on_sigterm()


def _load_devcluster() -> ModuleType:
    """Import hack/devcluster.py (not a package) as the module ``karpy_devcluster``."""
    return _load_hack("karpy_devcluster", DEVCLUSTER_SCRIPT)


def _load_hack(name: str, path: Path) -> ModuleType:
    """Import a script under hack/ (not a package) as the module ``name``."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _unavailable(reason: str) -> None:
    if os.environ.get("KARPY_REQUIRE_DEVCLUSTER") == "1":
        pytest.fail(f"KARPY_REQUIRE_DEVCLUSTER=1 but the dev cluster is unavailable: {reason}", pytrace=False)
    pytest.skip(f"DEV CLUSTER UNAVAILABLE -- integration tests NOT RUN: {reason}")


@pytest.fixture(scope="session")
def devcluster_module() -> ModuleType:
    return _load_devcluster()


@pytest.fixture(scope="session")
def devcluster(devcluster_module: ModuleType) -> Iterator[object]:
    """A running DevCluster (see hack/devcluster.py), stopped at session end."""
    dc = devcluster_module
    problem = None
    try:
        # PodDisruptionBudgets bypass the API server's watch cache, so a test can expire a watch
        # (410 Gone) by compacting etcd, as the API server's own 5-minute compaction does.
        # OwnerReferencesPermissionEnforcement (on in OpenShift and other hardened clusters)
        # authorizes blockOwnerDeletion owner references: the RBAC e2e test needs it.
        cluster = dc.DevCluster(dc.build(), extra_apiserver_args=[
            "--watch-cache-sizes=poddisruptionbudgets.policy#0",
            "--enable-admission-plugins=OwnerReferencesPermissionEnforcement",
        ])
        cluster.start()
    except dc.GoNotFound as exc:
        problem = f"no Go toolchain to build the control plane ({exc}); install Go >= 1.26 and put `go` on PATH"
    except dc.DevClusterUnavailable as exc:
        problem = str(exc)
    if problem is not None:  # outside the except block: no chained traceback
        _unavailable(problem)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def image_module() -> ModuleType:
    """hack/image.py, which builds the per-cloud controller images (OCI layouts)."""
    return _load_hack("karpy_image", IMAGE_SCRIPT)


@pytest.fixture(scope="session")
def images(image_module: ModuleType) -> dict[str, object]:
    """Both clouds' controller images, built or found in the cache: ``{cloud: hack/image.py Image}``.

    Needs root and a Debian host (mmdebstrap and umoci are apt-get installed when missing); without
    them the image tests skip loudly, or fail under ``KARPY_REQUIRE_DEVCLUSTER=1`` (CI).
    """
    im = image_module
    built: dict[str, object] = {}
    problem = None
    try:
        im.check_root()
        for cloud in im.CLOUDS:
            built[cloud] = im.build(cloud)
    except im.ImageBuildError as exc:
        problem = f"cannot build the controller images: {exc}"
    if problem is not None:
        _unavailable(problem)
    return built


_CRDS_INSTALLED: set[str] = set()
"""The kubeconfigs of the dev clusters :func:`kube` installed karpy's CRDs on (once per session:
no test removes them, and reinstalling for each of the parity tests' hundreds of cases costs
seconds each)."""


@pytest.fixture
async def kube(devcluster):
    """An AsyncKubeClient on the dev cluster, closed after the test, with karpy's CRDs installed
    (once per session; a test module that wants another client type, as test_crds.py's
    kubernetes-asyncio one, defines its own ``kube``)."""
    from karpy_core.kube.client import AsyncKubeClient

    from .karpy_env import install_crds

    client = await AsyncKubeClient.from_config(str(devcluster.kubeconfig))
    if str(devcluster.kubeconfig) not in _CRDS_INSTALLED:
        await install_crds(client)
        _CRDS_INSTALLED.add(str(devcluster.kubeconfig))
    yield client
    await client.close()
