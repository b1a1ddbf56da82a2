"""This directory's fixtures for pytest; they are written, typed and checked in
:mod:`kakaocloud_fixtures` (a conftest module is not type-checked: every provider test directory
has one, and mypy would see them as one module)."""

from kakaocloud_fixtures import fake, make_provider

__all__ = ["fake", "make_provider"]
