"""EC2 prices in USD/hour: a static on-demand table, the Pricing API when it answers, and spot
prices from DescribeSpotPriceHistory.

Decisions (documented in ``docs/aws.md``):

* **On-demand, static:** the us-east-1 Linux on-demand list prices shipped in
  ``karpy_core/data/aws-instance-types.json`` (the same table the ``simulated`` provider uses),
  applied in every region, as Karpenter falls back to us-east-1 for regions missing from its
  generated table.
* **On-demand, live:** ``pricing:GetProducts`` (ServiceCode AmazonEC2, TERM_MATCH regionCode,
  operatingSystem=Linux, preInstalledSw=NA, capacitystatus=Used, marketoption=OnDemand,
  tenancy=Shared) is attempted on every refresh; any failure (moto answers "not implemented")
  keeps the static table. Prices it returns override the static ones type by type.
* **Spot:** ``DescribeSpotPriceHistory`` (Linux/UNIX, Linux/UNIX (Amazon VPC)), newest price per
  (type, zone). A returned price below ``0.001 x on-demand`` is **bogus** (moto always answers
  ``0.00001``; no real spot market is 99.9 % off) and is replaced by the catalog's documented
  synthetic rule :func:`karpy_core.cloudprovider.catalog.aws.spot_price` (30-45 % of on-demand,
  stable per type and zone). Before any spot data exists the synthetic rule is used everywhere.
  Once real data exists, a (type, zone) with no spot price has **no spot offering available**
  (Karpenter: an offering needs a known price).
* **Unknown on-demand price** (a type missing from both sources): every offering of the type is
  ``available=False``.
* Refreshed at most every ``refresh_seconds`` (12 h, as Karpenter's pricing controller).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from karpy_aws.errors import call
from karpy_core.cloudprovider.catalog.aws import load_instance_type_specs, spot_price
from karpy_core.errors import CloudProviderError

if TYPE_CHECKING:
    from karpy_aws.clients import AWSClients

__all__ = ["BOGUS_SPOT_RATIO", "PRICE_REFRESH_SECONDS", "PricingProvider", "static_on_demand_prices"]

log = logging.getLogger("karpy.aws")

BOGUS_SPOT_RATIO = 0.001
"""A spot price below this fraction of on-demand is treated as no data (moto's fixed 0.00001)."""
PRICE_REFRESH_SECONDS = 12 * 3600.0


def static_on_demand_prices() -> dict[str, float]:
    """Instance type -> us-east-1 Linux on-demand USD/hour from the shipped catalog."""
    return {s.name: s.on_demand_price for s in load_instance_type_specs() if s.on_demand_price is not None}


class PricingProvider:
    """Holds current prices; :meth:`refresh` pulls them from AWS.

    Args:
        clients: AWS clients (ec2 and pricing are used).
        region: the cluster region (Pricing API ``regionCode`` filter).
        now: clock, seconds.
        refresh_seconds: minimum seconds between refreshes.
        use_pricing_api: attempt ``GetProducts`` (False with an isolated VPC).

    ``seq`` increases whenever prices change, so instance-type caches can key on it.
    """

    def __init__(self, *, clients: AWSClients, region: str, now: Callable[[], float],
                 refresh_seconds: float = PRICE_REFRESH_SECONDS, use_pricing_api: bool = True):
        self.clients = clients
        self.region = region
        self._now = now
        self.refresh_seconds = refresh_seconds
        self.use_pricing_api = use_pricing_api
        self.on_demand: dict[str, float] = static_on_demand_prices()
        self.spot: dict[tuple[str, str], float] = {}
        self.spot_data_seen = False
        self.on_demand_source = "static us-east-1 list prices"
        self.bogus_spot_rows = 0
        self._refreshed_at: float | None = None
        self.seq = 0

    async def ensure_fresh(self) -> None:
        """Refresh when never done or older than ``refresh_seconds``."""
        if self._refreshed_at is None or self._now() - self._refreshed_at >= self.refresh_seconds:
            await self.refresh()

    async def refresh(self) -> None:
        """Pull on-demand (GetProducts) and spot prices; failures keep the previous values."""
        self._refreshed_at = self._now()
        if self.use_pricing_api:
            await self._refresh_on_demand()
        await self._refresh_spot()
        self.seq += 1

    async def _refresh_on_demand(self) -> None:
        try:
            pricing = await self.clients.get("pricing")
            filters = [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
                ("regionCode", self.region), ("operatingSystem", "Linux"), ("preInstalledSw", "NA"),
                ("capacitystatus", "Used"), ("marketoption", "OnDemand"), ("tenancy", "Shared"))]
            found: dict[str, float] = {}
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"ServiceCode": "AmazonEC2", "Filters": filters, "MaxResults": 100}
                if token:
                    kwargs["NextToken"] = token
                resp = await call(pricing.get_products, "GetProducts", attempts=2, **kwargs)
                for item in resp.get("PriceList") or []:
                    parsed = _parse_price_item(item)
                    if parsed is not None:
                        found[parsed[0]] = parsed[1]
                token = resp.get("NextToken")
                if not token:
                    break
        except (CloudProviderError, Exception) as exc:  # moto: 404/500 "not implemented"
            log.info("pricing:GetProducts unavailable (%s); keeping %s", getattr(exc, "code", type(exc).__name__),
                     self.on_demand_source)
            return
        if found:
            self.on_demand.update(found)
            self.on_demand_source = f"pricing:GetProducts for {self.region}"

    async def _refresh_spot(self) -> None:
        try:
            ec2 = await self.clients.ec2()
            rows: list[dict[str, Any]] = []
            token: str | None = None
            while True:
                kwargs: dict[str, Any] = {"ProductDescriptions": ["Linux/UNIX", "Linux/UNIX (Amazon VPC)"], "MaxResults": 1000}
                if token:
                    kwargs["NextToken"] = token
                resp = await call(ec2.describe_spot_price_history, "DescribeSpotPriceHistory", **kwargs)
                rows.extend(resp.get("SpotPriceHistory") or [])
                token = resp.get("NextToken")
                if not token:
                    break
        except CloudProviderError as exc:
            log.warning("DescribeSpotPriceHistory failed (%s); keeping previous spot prices", exc.code)
            return
        if not rows:
            log.warning("DescribeSpotPriceHistory returned no prices; keeping previous spot prices")
            return
        newest: dict[tuple[str, str], tuple[Any, float]] = {}
        bogus = 0
        for row in rows:
            key = (row["InstanceType"], row["AvailabilityZone"])
            price = float(row["SpotPrice"])
            od = self.on_demand.get(key[0])
            if od is not None and price < BOGUS_SPOT_RATIO * od:
                bogus += 1
                price = spot_price(od, key[0], key[1])
            ts = row.get("Timestamp")
            if key not in newest or (ts is not None and ts > newest[key][0]):
                newest[key] = (ts, price)
        self.bogus_spot_rows = bogus
        if bogus:
            log.info("%d spot prices below %.3f x on-demand replaced by the synthetic rule", bogus, BOGUS_SPOT_RATIO)
        self.spot.update({k: v for k, (_, v) in newest.items()})
        self.spot_data_seen = True

    def on_demand_price(self, instance_type: str) -> float | None:
        return self.on_demand.get(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        """Spot USD/hour for (type, zone); None when unknown (offering unavailable)."""
        od = self.on_demand.get(instance_type)
        if self.spot_data_seen:
            price = self.spot.get((instance_type, zone))
            if price is not None:
                return price
            return None
        return None if od is None else spot_price(od, instance_type, zone)

    def describe(self) -> str:
        """One line for reports: where prices come from."""
        spot = ("DescribeSpotPriceHistory" + (f" ({self.bogus_spot_rows} bogus rows replaced by the synthetic rule)"
                                               if self.bogus_spot_rows else "")) if self.spot_data_seen else "synthetic"
        return f"on-demand: {self.on_demand_source}; spot: {spot} (USD/hour)"


def _parse_price_item(item: Any) -> tuple[str, float] | None:
    """``(instanceType, USD/hour)`` from one GetProducts PriceList entry (a JSON string)."""
    try:
        doc = json.loads(item) if isinstance(item, str) else item
        name = doc["product"]["attributes"]["instanceType"]
        for term in (doc.get("terms") or {}).get("OnDemand", {}).values():
            for dim in (term.get("priceDimensions") or {}).values():
                usd = float(dim["pricePerUnit"]["USD"])
                if usd > 0:
                    return name, usd
    except (KeyError, ValueError, TypeError):
        return None
    return None
