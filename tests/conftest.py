"""Shared fixtures: where ../shared lives (inputs, seeds, data)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# No test may reach the real instance metadata service (169.254.169.254): botocore's region and
# credential chains stop before it. Tests of the IMDS lookup point AWS_EC2_METADATA_SERVICE_ENDPOINT
# at a loopback fake and re-enable it with monkeypatch.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's ``shared/`` folder (sibling of the repository), skipped loudly when absent."""
    for candidate in (REPO.parent / "shared", REPO / "shared"):
        if (candidate / "inputs").is_dir():
            return candidate
    pytest.skip("SHARED INPUTS MISSING: ../shared/inputs not found beside the repository; these tests need it")
    raise AssertionError("unreachable")


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
