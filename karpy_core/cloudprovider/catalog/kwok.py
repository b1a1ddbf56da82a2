"""Karpenter's KWOK instance-type catalog format, read into InstanceTypes.

The format (``kubernetes-sigs/karpenter`` ``kwok/cloudprovider/instance_types.json``, read by
``kwok/cloudprovider/helpers.go``) is a JSON list of objects::

    {
      "name": "c-1x-amd64-linux",
      "offerings": [
        {"Price": 0.019, "Available": true,
         "Requirements": [
           {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
           {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]}]}
      ],
      "architecture": "amd64",
      "operatingSystems": ["linux"],
      "resources": {"cpu": "1", "memory": "2Gi", "pods": "16", "ephemeral-storage": "20Gi"},
      "overhead": {"kubeReserved": {"cpu": "100m", "memory": "10Mi"}}      # optional, karpy
    }

``Price`` is USD/hour. ``overhead`` is a karpy extension (used by
``bench/karpenter-fake-400.json``) with ``kubeReserved``, ``systemReserved`` and
``evictionThreshold`` resource lists; when it is absent the KWOK provider's fixed overhead
(kube-reserved 100m cpu, 10Mi memory, ``helpers.go`` ``newInstanceType``) applies.

Labels follow KWOK's ``newInstanceType``: instance-type, arch, os (``In`` every listed OS), zone
and capacity-type (from the offerings), plus ``karpenter.kwok.sh/instance-{size,family,cpu,memory}``
derived from the name and resources (``setDefaultOptions``). ``pods`` defaults to 110.

Deviation from KWOK: KWOK forces every offering ``Available``; karpy keeps the file's
``Available`` (default true) so a catalog can model unavailable offerings.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from karpy_core.apis.labels import (
    LABEL_ARCH,
    LABEL_CAPACITY_TYPE,
    LABEL_INSTANCE_TYPE,
    LABEL_OS,
    LABEL_ZONE,
    register_well_known_labels,
)
from karpy_core.cloudprovider.types import MAX_PRICE, InstanceType, Offering, Overhead
from karpy_core.errors import ConfigurationError
from karpy_core.scheduling.requirements import Requirement, Requirements
from karpy_core.scheduling.resources import Resources
from karpy_core.utils.quantity import QuantityError, format_quantity, to_internal

__all__ = [
    "KWOK_LABEL_DOMAIN",
    "LABEL_KWOK_INSTANCE_SIZE",
    "LABEL_KWOK_INSTANCE_FAMILY",
    "LABEL_KWOK_INSTANCE_CPU",
    "LABEL_KWOK_INSTANCE_MEMORY",
    "KWOK_WELL_KNOWN_LABELS",
    "KWOK_DEFAULT_PODS",
    "kwok_default_overhead",
    "parse_kwok_catalog",
    "load_kwok_catalog",
]

KWOK_LABEL_DOMAIN = "karpenter.kwok.sh"
LABEL_KWOK_INSTANCE_SIZE = "karpenter.kwok.sh/instance-size"
LABEL_KWOK_INSTANCE_FAMILY = "karpenter.kwok.sh/instance-family"
LABEL_KWOK_INSTANCE_CPU = "karpenter.kwok.sh/instance-cpu"
LABEL_KWOK_INSTANCE_MEMORY = "karpenter.kwok.sh/instance-memory"
KWOK_WELL_KNOWN_LABELS = frozenset(
    {LABEL_KWOK_INSTANCE_SIZE, LABEL_KWOK_INSTANCE_FAMILY, LABEL_KWOK_INSTANCE_CPU, LABEL_KWOK_INSTANCE_MEMORY}
)
"""KWOK's selectable labels (``kwok/apis/v1alpha1/labels.go``); registered as well known on load."""

KWOK_DEFAULT_PODS = 110
"""Pods when ``resources.pods`` is absent (KWOK ``setDefaultOptions``, the kubelet default)."""

_AWS_SIZE = re.compile(r"^\w+\.(nano|micro|small|medium|large|\d*xlarge|metal)$", re.ASCII)
_FAMILY_DELIM = re.compile(r"[.-]")
_OVERHEAD_KEYS = {
    "kubeReserved": "kube_reserved",
    "systemReserved": "system_reserved",
    "evictionThreshold": "eviction_threshold",
}
_ENTRY_KEYS = {"name", "offerings", "architecture", "operatingSystems", "resources", "overhead"}


def kwok_default_overhead() -> Overhead:
    """KWOK's fixed per-node overhead: kube-reserved 100m cpu and 10Mi memory."""
    return Overhead(kube_reserved={"cpu": 100, "memory": 10 * 1024 * 1024})


def _size_from_name(name: str, cpu: str) -> str:
    """KWOK ``parseSizeFromType``: the AWS size suffix when the name is ``family.size``, else the cpu."""
    m = _AWS_SIZE.match(name)
    return m.group(1) if m else cpu


def _family_from_name(name: str) -> str:
    """KWOK ``parseFamilyFromType``: text before the first ``.`` or ``-``, else the first letter."""
    parts = _FAMILY_DELIM.split(name, maxsplit=1)
    return parts[0] if len(parts) == 2 else name[:1]


class _Ctx:
    """Builds error messages naming the file, entry index, type name and field."""

    def __init__(self, source: str, index: int, name: str | None = None):
        self.source = source
        self.index = index
        self.name = name

    def error(self, field: str, problem: str) -> ConfigurationError:
        who = f"entry {self.index}" + (f" ({self.name})" if self.name else "")
        return ConfigurationError(f"{self.source}: {who}: {field}: {problem}")


def _no_constant(name: str) -> Any:
    """``NaN``/``Infinity``/``-Infinity``: Python's json takes them, Go's encoding/json (Karpenter's
    KWOK catalog reader) does not.

    Raises:
        ValueError: always, naming the constant.
    """
    raise ValueError(f"{name} is not a JSON number (Go's encoding/json, which Karpenter reads the catalog with, refuses it)")


def _resource_list(raw: Any, ctx: _Ctx, field: str) -> Resources:
    if not isinstance(raw, Mapping):
        raise ctx.error(field, f"expected an object of resource quantities, got {type(raw).__name__}")
    out: Resources = {}
    for name, value in raw.items():
        if not isinstance(name, str) or not name:
            raise ctx.error(field, f"resource name {name!r} is not a non-empty string")
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise ctx.error(f"{field}.{name}", f"{value!r} is not a quantity")
        try:
            amount = to_internal(name, value)
        except QuantityError as exc:
            raise ctx.error(f"{field}.{name}", str(exc)) from exc
        if amount < 0:
            raise ctx.error(f"{field}.{name}", f"{value!r} is negative")
        out[name] = amount
    return out


def _offering(raw: Any, ctx: _Ctx, field: str) -> Offering:
    if not isinstance(raw, Mapping):
        raise ctx.error(field, "expected an object with Price, Available and Requirements")
    price = raw.get("Price")
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price <= MAX_PRICE:
        raise ctx.error(f"{field}.Price", f"expected a number of USD/hour from 0 to {MAX_PRICE:,.0f}, got {price!r}")
    available = raw.get("Available", True)
    if not isinstance(available, bool):
        raise ctx.error(f"{field}.Available", f"expected true or false, got {available!r}")
    reqs = raw.get("Requirements")
    if not isinstance(reqs, list):
        raise ctx.error(f"{field}.Requirements", "expected a list of node-selector requirements")
    found: dict[str, str] = {}
    for k, req in enumerate(reqs):
        where = f"{field}.Requirements[{k}]"
        if not isinstance(req, Mapping) or not isinstance(req.get("key"), str):
            raise ctx.error(where, "expected {key, operator, values}")
        key = req["key"]
        if key not in (LABEL_CAPACITY_TYPE, LABEL_ZONE):
            continue  # other keys (zone-id, reservation-id) are not modelled by Offering
        values = req.get("values")
        if (
            req.get("operator") != "In"
            or not isinstance(values, list)
            or len(values) != 1
            or not isinstance(values[0], str)
        ):
            raise ctx.error(where, f"{key} must be 'In' with exactly one string value, got {dict(req)!r}")
        found[key] = values[0]
    for key in (LABEL_CAPACITY_TYPE, LABEL_ZONE):
        if key not in found:
            raise ctx.error(f"{field}.Requirements", f"missing the {key} requirement")
    return Offering(
        zone=found[LABEL_ZONE], capacity_type=found[LABEL_CAPACITY_TYPE], price=float(price), available=available
    )


def _entry(raw: Any, index: int, source: str, default_overhead: bool) -> InstanceType:
    ctx = _Ctx(source, index)
    if not isinstance(raw, Mapping):
        raise ctx.error("entry", f"expected an object, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ctx.error("name", f"expected a non-empty string, got {name!r}")
    ctx.name = name
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        raise ctx.error("entry", f"unknown field(s) {', '.join(unknown)}; expected {', '.join(sorted(_ENTRY_KEYS))}")
    arch = raw.get("architecture")
    if not isinstance(arch, str) or not arch:
        raise ctx.error("architecture", f"expected a non-empty string, got {arch!r}")
    oses = raw.get("operatingSystems")
    if not isinstance(oses, list) or not oses or not all(isinstance(o, str) and o for o in oses):
        raise ctx.error("operatingSystems", f"expected a non-empty list of strings, got {oses!r}")
    capacity = _resource_list(raw.get("resources"), ctx, "resources")
    for required in ("cpu", "memory"):
        if required not in capacity:
            raise ctx.error("resources", f"missing {required}")
    capacity.setdefault("pods", KWOK_DEFAULT_PODS)
    raw_offerings = raw.get("offerings")
    if not isinstance(raw_offerings, list):
        raise ctx.error("offerings", "expected a list")
    offerings = [_offering(o, ctx, f"offerings[{j}]") for j, o in enumerate(raw_offerings)]

    if "overhead" in raw:
        raw_overhead = raw["overhead"]
        if not isinstance(raw_overhead, Mapping):
            raise ctx.error("overhead", "expected an object with kubeReserved/systemReserved/evictionThreshold")
        bad = sorted(set(raw_overhead) - set(_OVERHEAD_KEYS))
        if bad:
            raise ctx.error("overhead", f"unknown field(s) {', '.join(bad)}; expected {', '.join(_OVERHEAD_KEYS)}")
        overhead = Overhead(
            **{
                attr: _resource_list(raw_overhead[key], ctx, f"overhead.{key}")
                for key, attr in _OVERHEAD_KEYS.items()
                if key in raw_overhead
            }
        )
    else:
        overhead = kwok_default_overhead() if default_overhead else Overhead()

    cpu_text = format_quantity("cpu", capacity["cpu"])
    memory_text = format_quantity("memory", capacity["memory"])
    requirements = Requirements(
        {
            LABEL_INSTANCE_TYPE: Requirement(LABEL_INSTANCE_TYPE, False, frozenset((name,))),
            LABEL_ARCH: Requirement(LABEL_ARCH, False, frozenset((arch,))),
            LABEL_OS: Requirement(LABEL_OS, False, frozenset(oses)),
            LABEL_KWOK_INSTANCE_SIZE: Requirement(
                LABEL_KWOK_INSTANCE_SIZE, False, frozenset((_size_from_name(name, cpu_text),))
            ),
            LABEL_KWOK_INSTANCE_FAMILY: Requirement(
                LABEL_KWOK_INSTANCE_FAMILY, False, frozenset((_family_from_name(name),))
            ),
            LABEL_KWOK_INSTANCE_CPU: Requirement(LABEL_KWOK_INSTANCE_CPU, False, frozenset((cpu_text,))),
            LABEL_KWOK_INSTANCE_MEMORY: Requirement(LABEL_KWOK_INSTANCE_MEMORY, False, frozenset((memory_text,))),
        }
    )
    return InstanceType(name=name, requirements=requirements, offerings=offerings, capacity=capacity, overhead=overhead)


def parse_kwok_catalog(
    data: Any, *, source: str = "<kwok catalog>", default_overhead: bool = True
) -> list[InstanceType]:
    """Turn decoded KWOK-format JSON into InstanceTypes, in file order.

    Args:
        data: the decoded JSON (a list of entries).
        source: the file name to quote in errors.
        default_overhead: apply KWOK's 100m/10Mi kube-reserved to entries without ``overhead``
            (False: no overhead).

    Raises:
        ConfigurationError: malformed data; the message names ``source``, the entry index and
            name, and the field (e.g. ``offerings[2].Price``).
    """
    if not isinstance(data, list):
        raise ConfigurationError(f"{source}: expected a JSON list of instance types, got {type(data).__name__}")
    out: list[InstanceType] = []
    seen: set[str] = set()
    for i, raw in enumerate(data):
        it = _entry(raw, i, source, default_overhead)
        if it.name in seen:
            raise ConfigurationError(f"{source}: entry {i} ({it.name}): name: duplicate instance type")
        seen.add(it.name)
        out.append(it)
    register_well_known_labels(KWOK_WELL_KNOWN_LABELS)
    return out


_CACHE: dict[tuple[str, int, int, bool], list[InstanceType]] = {}


def load_kwok_catalog(path: str | os.PathLike[str], *, default_overhead: bool = True) -> list[InstanceType]:
    """Read a KWOK-format catalog file. Memoised by (resolved path, mtime, size, default_overhead):
    the same list object is returned until the file changes; treat it as read-only.

    Raises:
        ConfigurationError: the file is missing, not JSON, or malformed (see :func:`parse_kwok_catalog`).
    """
    p = Path(path)
    try:
        resolved = p.resolve()
        st = resolved.stat()
    except OSError as exc:
        raise ConfigurationError(f"{p}: cannot read instance-types file: {exc.strerror or exc}") from exc
    key = (str(resolved), st.st_mtime_ns, st.st_size, default_overhead)
    cached = _CACHE.get(key)
    if cached is not None:
        register_well_known_labels(KWOK_WELL_KNOWN_LABELS)
        return cached
    text = ""  # a file that is not UTF-8 raises UnicodeDecodeError (a ValueError) before it is set
    try:
        text = resolved.read_text(encoding="utf-8")
        data = json.loads(text, parse_constant=_no_constant)
    except OSError as exc:
        raise ConfigurationError(f"{p}: cannot read instance-types file: {exc.strerror or exc}") from exc
    except ValueError as exc:  # json.JSONDecodeError, and NaN/Infinity (_no_constant)
        if text.lstrip()[:1] not in ("[", "{"):
            # name what the file is for: a YAML manifest given here read as "not valid JSON" alone (trial 19)
            raise ConfigurationError(f"{p}: not an instance-types catalog: --instance-types takes Karpenter's KWOK catalog, a "
                                     f"JSON list of instance types (as examples/catalogs/kwok-instance-types.json); "
                                     f"not valid JSON: {exc}") from exc
        raise ConfigurationError(f"{p}: not valid JSON: {exc}") from exc
    catalog = parse_kwok_catalog(data, source=str(p), default_overhead=default_overhead)
    _CACHE[key] = catalog
    return catalog
