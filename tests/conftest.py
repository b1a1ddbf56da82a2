"""Shared fixtures: where ../shared lives (inputs, seeds, data)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
