"""Shared fixtures and guards of every test directory (``tests/`` and each provider's
``providers/<cloud>/tests/``, all in ``testpaths``): the repository's ``examples/`` (manifests the
README and tests use), logging, leaked tasks, the ``e2e`` marker."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

# No test may reach the real instance metadata service (169.254.169.254): botocore's region and
# credential chains stop before it. Tests of the IMDS lookup point AWS_EC2_METADATA_SERVICE_ENDPOINT
# at a loopback fake and re-enable it with monkeypatch.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

REPO = Path(__file__).resolve().parent


EXAMPLES = REPO / "examples"


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """The repository's ``examples/`` folder: ``nodepools/`` (Karpenter's v1 examples),
    ``workloads/`` and ``catalogs/kwok-instance-types.json``; part of every clone, never skipped."""
    return EXAMPLES


@pytest.fixture(scope="session")
def repo_dir() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _restore_logging():
    """Every test starts and ends with the root logger as it found it: a test that runs ``karpy
    controller`` in-process (``configure_logging``) would otherwise leave a handler writing to the
    CliRunner stream it has closed, and a later test's INFO lines (the controllers' Karpenter
    lines) would fail on it."""
    import logging

    root = logging.getLogger()
    handlers, level, filters = root.handlers[:], root.level, root.filters[:]
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    root.filters[:] = filters


_RUNNER = "_function_scoped_runner"  # pytest-asyncio's per-test asyncio.Runner fixture


def _describe_task(task: asyncio.Task[object]) -> str:
    """One line per leaked task: its name, the coroutine and where it is suspended."""
    coro = task.get_coro()
    where = ""
    frame = getattr(coro, "cr_frame", None)
    if frame is not None:
        where = f" at {frame.f_code.co_filename}:{frame.f_lineno}"
    if type(coro).__name__ == "async_generator_athrow":
        # the loop's asyncgen hook closing a generator garbage-collected unfinished
        return f"{task.get_name()}: aclose() of an async generator left unfinished (iterate it inside contextlib.aclosing)"
    name = getattr(coro, "__qualname__", repr(coro))
    return f"{task.get_name()}: {name}{where}"


def leaked_tasks(loop: asyncio.AbstractEventLoop) -> list[asyncio.Task[object]]:
    """The tasks still pending on ``loop`` (not running) once a test and its fixtures ended.

    Tasks whose cancellation was requested but that have not run since get a few loop turns to
    finish first: ``task.cancel()`` without awaiting the task is not a leak."""
    for _ in range(3):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        if not any(t.cancelling() for t in pending):
            break
        loop.run_until_complete(asyncio.sleep(0))
    return sorted((t for t in asyncio.all_tasks(loop) if not t.done()), key=lambda t: t.get_name())


@pytest.fixture(autouse=True)
def _no_leaked_tasks(request: pytest.FixtureRequest):
    """An async test fails (error at teardown) when asyncio tasks it or its fixtures started are
    still pending after the test and every async fixture's teardown: a controller, watch or
    server task left running would otherwise be cancelled silently when pytest-asyncio closes the
    loop, hiding a missing ``stop()``/``cancel()`` in the code under test.

    The check runs as a finalizer of pytest-asyncio's runner fixture, registered before any async
    fixture's, so it runs after all of their teardowns and before the loop closes."""
    if request.node.get_closest_marker("asyncio") is None:
        yield
        return
    runner: asyncio.Runner = request.getfixturevalue(_RUNNER)
    nodeid = request.node.nodeid

    def check() -> None:
        loop = runner.get_loop()
        if loop.is_closed():
            return
        leaked = leaked_tasks(loop)
        if leaked:
            lines = "\n  ".join(_describe_task(t) for t in leaked)
            pytest.fail(f"{nodeid} left {len(leaked)} asyncio task(s) running:\n  {lines}", pytrace=False)

    request._get_active_fixturedef(_RUNNER).addfinalizer(check)
    yield


# --- the e2e marker ---------------------------------------------------------------------------
# A test is `e2e` when it needs a real process or server: the control plane built from Go modules,
# the controller images, moto's server, the fake KakaoCloud OpenAPI server, helm, or a pip
# install. `pytest -m 'not e2e'` is the quick loop (CONTRIBUTING.md); the full run is unchanged.
# Marked here by where a test lives and which fixtures it uses, so a new test using one of these
# fixtures is marked without being edited.

E2E_PATHS = (
    "tests/integration/",  # the real control plane (devcluster), the controller images
    "tests/test_fault_injection.py",  # moto server mode and the fake KakaoCloud OpenAPI, with faults
    "providers/kakaocloud/tests/test_kakaocloud_conformance.py",  # starts the fake KakaoCloud OpenAPI per test
    "tests/packaging/",  # builds the three wheels and pip-installs the AWS plugin into a new venv
)
E2E_FIXTURES = {
    # fixture name -> the module defining it (another fixture of the same name is not e2e)
    "moto_url": "aws_moto",  # moto's ThreadedMotoServer (providers/aws/tests/aws_moto.py)
    "fake": "kakaocloud_fixtures",  # the fake KakaoCloud OpenAPI server (providers/kakaocloud/tests/kakaocloud_fixtures.py)
    "helm": "tests.charts.test_helm",  # the helm binary (built by hack/helm.sh when not cached)
    "env": "tests.plugins.test_doc_example_plugin",  # pip-installs the documentation's example plugin
}
E2E_MARKERS = ("devcluster", "faults")


def is_e2e(item: pytest.Item) -> bool:
    """Whether ``item`` needs a real process or server (see :data:`E2E_PATHS`, :data:`E2E_FIXTURES`)."""
    path = item.path.relative_to(REPO).as_posix()
    if path.startswith(E2E_PATHS) or any(item.get_closest_marker(m) for m in E2E_MARKERS):
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name, module in E2E_FIXTURES.items():
        defs = info.name2fixturedefs.get(name)
        if defs and getattr(defs[-1].func, "__module__", None) == module:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_e2e(item):
            item.add_marker(pytest.mark.e2e)
