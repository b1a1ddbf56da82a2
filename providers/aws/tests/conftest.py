"""This directory's fixtures for pytest; they are written, typed and checked in :mod:`aws_moto`
(a conftest module is not type-checked: every provider test directory has one, and mypy would see
them as one module)."""

from aws_moto import instance_type_data, moto_url, plugin_factory, seeded

__all__ = ["instance_type_data", "moto_url", "plugin_factory", "seeded"]
