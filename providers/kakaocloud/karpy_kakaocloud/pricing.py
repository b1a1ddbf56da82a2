"""Prices for KakaoCloud flavors, in USD/hour. The OpenAPI exposes **no price** (reference §3), so
karpy ranks flavors with a table the user can supply, falling back to a linear rule.

Default rule (documented in ``docs/kakaocloud.md``; a placeholder for *ranking*, not KakaoCloud's
price list)::

    USD/hour = 0.0255 x vCPU + 0.0034 x memory GiB + 1.20 x GPU

Over CPU flavors this ranks by size with memory-heavy shapes costing a little more per vCPU, the
way on-demand price lists do; it is only as good as its ratios. Supply real prices with a file:

* **CSV** with a header containing ``flavor`` (or ``name``) and ``price`` (USD/hour)::

      flavor,price
      m2a.large,0.096
      m2a.xlarge,0.192

* **YAML** (or JSON) with optional ``rule`` coefficients and ``prices`` per flavor name::

      rule: {vcpu: 0.03, memory_gib: 0.004, gpu: 1.5}
      prices: {m2a.large: 0.096}

Flavors missing from the table are priced by the rule (the file's rule when it has one). A price
of ``0`` or a negative one is refused.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy_core.cloudprovider.types import MAX_PRICE
from karpy_core.errors import ConfigurationError
from karpy_core.utils.kubeyaml import describe_yaml_error, safe_load

__all__ = ["DEFAULT_RULE", "LinearRule", "PriceTable", "load_price_table"]


@dataclass(frozen=True)
class LinearRule:
    """USD/hour = ``vcpu`` x vCPUs + ``memory_gib`` x GiB + ``gpu`` x GPUs."""

    vcpu: float = 0.0255
    memory_gib: float = 0.0034
    gpu: float = 1.20

    def price(self, vcpus: int, memory_mib: int, gpus: int = 0) -> float:
        return round(self.vcpu * vcpus + self.memory_gib * memory_mib / 1024 + self.gpu * gpus, 6)


DEFAULT_RULE = LinearRule()


@dataclass(frozen=True)
class PriceTable:
    """Per-flavor prices (USD/hour) with a rule for the rest; ``source`` names where they came from."""

    rule: LinearRule = DEFAULT_RULE
    prices: dict[str, float] = field(default_factory=dict)
    source: str = "default linear rule"

    def price(self, flavor_name: str, vcpus: int, memory_mib: int, gpus: int = 0) -> float:
        if flavor_name in self.prices:
            return self.prices[flavor_name]
        return self.rule.price(vcpus, memory_mib, gpus)

    def note(self) -> str:
        r = self.rule
        return (
            f"prices from {self.source}; others USD/hour = {r.vcpu} x vCPU + {r.memory_gib} x GiB + {r.gpu} x GPU "
            "(KakaoCloud's API publishes no prices)"
        )


def _positive(value: Any, where: str) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise ConfigurationError(f"{where}: {value!r} is not a number") from None
    if not math.isfinite(f) or not 0 < f <= MAX_PRICE:
        raise ConfigurationError(f"{where}: price must be a positive number of USD/hour up to {MAX_PRICE:,.0f}, got {value!r}")
    return f


def load_price_table(path: str | Path) -> PriceTable:
    """Load a CSV or YAML/JSON price file (see the module docstring).

    Raises:
        ConfigurationError: unreadable file, missing columns, bad numbers (naming file and row/key).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigurationError(f"cannot read the price table {p}: {exc.strerror}") from None
    if p.suffix.lower() == ".csv":
        reader = csv.DictReader(io.StringIO(text))
        cols = [c.strip().lower() for c in reader.fieldnames or []]
        name_col = "flavor" if "flavor" in cols else "name" if "name" in cols else None
        if name_col is None or "price" not in cols:
            raise ConfigurationError(f"{p}: the CSV header must have a 'flavor' (or 'name') column and a 'price' column")
        prices: dict[str, float] = {}
        for i, row in enumerate(reader, start=2):
            norm = {(k or "").strip().lower(): (v or "").strip() for k, v in row.items()}
            if not norm.get(name_col):
                continue
            prices[norm[name_col]] = _positive(norm.get("price"), f"{p} line {i} ({norm[name_col]})")
        return PriceTable(prices=prices, source=str(p))
    try:
        doc = safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"{p}: not valid YAML: {describe_yaml_error(exc)}") from None
    if not isinstance(doc, dict):
        raise ConfigurationError(f"{p}: expected a mapping with 'prices' and/or 'rule'")
    unknown = sorted(set(doc) - {"prices", "rule"})
    if unknown:
        raise ConfigurationError(f"{p}: unknown key(s) {', '.join(unknown)}; use 'prices' and 'rule'")
    rule = DEFAULT_RULE
    if doc.get("rule") is not None:
        r = doc["rule"]
        if not isinstance(r, dict) or set(r) - {"vcpu", "memory_gib", "gpu"}:
            raise ConfigurationError(f"{p}: rule must be a mapping of vcpu, memory_gib and gpu (USD/hour per unit)")
        rule = LinearRule(**{k: float(r.get(k, getattr(DEFAULT_RULE, k))) for k in ("vcpu", "memory_gib", "gpu")})
    raw = doc.get("prices") or {}
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{p}: prices must map flavor names to USD/hour")
    prices = {str(k): _positive(v, f"{p} prices.{k}") for k, v in raw.items()}
    return PriceTable(rule=rule, prices=prices, source=str(p))
