"""Prices from the genai-prices catalogue for targets without a configured ``price``
(SPEC §19: "cost without typing prices").

The one module that reads the ``genai_prices`` package (pinned in ``pyproject.toml``;
``tests/limits/test_catalogue.py`` holds its entries and types to that version). It runs
when the routing table compiles, never on a call: :func:`catalogue_price` turns a
catalogue entry into the same :class:`~routing.limits.spec.Price` a configured ``price``
compiles to, so a call's cost is computed the one way (``spec.cost_of``) whatever the
price's source.

**Which entry.** The catalogue names a model by provider and model id. The provider is
where the target is reached: a provider's ``kind`` (its protocol) and ``platform`` map to
the catalogue's provider ids (:data:`CATALOGUE_PROVIDERS` — Claude on Bedrock is ``aws``,
with Bedrock's own prices; Claude or Gemini on Vertex AI is ``google``; Azure OpenAI is
``azure``). On the ``direct`` platform the catalogue first recognises a vendor's public
API from ``base_url`` (``api.groq.com``, ``api.deepseek.com``, …), as the catalogue itself
does; a URL it does not know (a proxy, a self-hosted server, the simulator) is looked up
under the kind's own vendor. A model the catalogue does not know under that provider stays
unpriced — never guessed from another vendor's list.

**What is taken.** Token prices: input, output, cache reads (``cached_input``), cache
writes (the catalogue's 5-minute write price: the canonical usage does not tell a 1-hour
write apart) and long-context tiers (``Price.tiers``). Reasoning tokens are output tokens,
as the providers report and the catalogue prices them. Per-search, per-request, audio and
image prices are not applied (the gateway carries text). Prices that changed on a date are
resolved for the day the table compiles; a model priced by time of day (DeepSeek's
off-peak discount) is priced at its highest, so a budget never under-counts. Batch and
service-tier variants are not standard calls and are not used. The catalogue's
auto-update (``UpdatePrices``), which fetches from the internet, is never started: the
prices are the pinned package's.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from routing.limits.spec import Price, PriceSource, PriceTier

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo, ModelPrice

log = logging.getLogger("switchyard.prices")

CATALOGUE = "genai-prices"

# (kind, platform) -> the catalogue's provider id (SPEC §19's table of platforms and kinds).
CATALOGUE_PROVIDERS: Mapping[tuple[str, str], str] = {
    ("openai", "direct"): "openai",
    ("openai-responses", "direct"): "openai",
    ("anthropic", "direct"): "anthropic",
    ("gemini", "direct"): "google",
    ("anthropic", "bedrock"): "aws",
    ("bedrock-converse", "bedrock"): "aws",
    ("anthropic", "vertex"): "google",
    ("gemini", "vertex"): "google",
    ("openai", "azure"): "azure",
    ("openai-responses", "azure"): "azure",
}

_PRICE_KEYS = ("input_mtok", "output_mtok", "cache_read_mtok", "cache_write_mtok")


def catalogue_version() -> str:
    """``genai-prices 0.2.3``: the catalogue and the version its prices are from."""
    from genai_prices import __version__

    return f"{CATALOGUE} {__version__}"


def catalogue_provider(kind: str, platform: str, base_url: str = "") -> str | None:
    """The catalogue's provider id for a provider reached so (None: none fits)."""
    if platform == "direct" and base_url:
        by_url = _provider_at(base_url.rstrip("/"))
        if by_url is not None:
            return by_url
    return CATALOGUE_PROVIDERS.get((kind, platform))


@lru_cache(maxsize=256)
def _provider_at(base_url: str) -> str | None:
    from genai_prices.data_snapshot import get_snapshot

    for provider in get_snapshot().providers:
        if re.match(provider.api_pattern, base_url):
            return provider.id
    return None


def catalogue_price(
    *, kind: str, platform: str, model: str, base_url: str = "", now: datetime | None = None
) -> Price | None:
    """The catalogue's price of ``model`` reached through (kind, platform, base_url), or
    None when the catalogue does not know it there. Off the request path (the table
    compiler's); cached per provider, model and day."""
    provider = catalogue_provider(kind, platform, base_url)
    if provider is None or not model:
        return None
    day = (now or datetime.now(UTC)).astimezone(UTC).date().isoformat()
    return _lookup(provider, model.removeprefix("models/"), day)


@lru_cache(maxsize=1024)
def _lookup(provider_id: str, model: str, day: str) -> Price | None:
    from genai_prices.data_snapshot import get_snapshot

    try:
        provider, info = get_snapshot().find_provider_model(model, None, provider_id, None)
    except LookupError:
        return None
    try:
        resolved = _resolve(info, datetime.fromisoformat(day).replace(tzinfo=UTC))
        return _price(resolved, f"{catalogue_version()}: {provider.id}/{info.id}")
    except Exception as exc:  # an entry of a shape not read here: unpriced, the table compiles
        log.warning("prices: %s/%s in %s not usable: %s", provider_id, model, CATALOGUE, exc)
        return None


def _resolve(info: ModelInfo, when: datetime) -> ModelPrice:
    """The standard price on ``when``'s day: the latest dated price in force, or the
    highest of a time-of-day schedule (a price fixed at compile time cannot follow the
    clock, and a budget must not under-count)."""
    from genai_prices.types import ModelPrice, TimeOfDateConstraint

    if isinstance(info.prices, ModelPrice):
        return info.prices
    dated = [c for c in info.prices if not isinstance(c.constraint, TimeOfDateConstraint)]
    chosen = (dated or info.prices)[0].prices
    for conditional in reversed(dated):
        if conditional.constraint is None or conditional.constraint.active(when):
            chosen = conditional.prices
            break
    hourly = [c.prices for c in info.prices if isinstance(c.constraint, TimeOfDateConstraint)]
    return max([chosen, *hourly], key=lambda p: _number(getattr(p, "input_mtok", None)))


def _number(value: Any, tier_start: int = -1) -> float:
    """A catalogue price as a float: a plain Decimal, or a tiered one at ``tier_start``."""
    from genai_prices.types import TieredPrices

    if value is None:
        return 0.0
    if isinstance(value, TieredPrices):
        applicable = value.base
        for tier in value.tiers:
            if tier_start >= tier.start:
                applicable = tier.price
        return float(applicable)
    if isinstance(value, Decimal | int | float):
        return float(value)
    raise TypeError(f"price of type {type(value).__name__}")


def _at(prices: ModelPrice, tier_start: int, origin: str, tiers: tuple[PriceTier, ...]) -> Price:
    values = {key: getattr(prices, key, None) for key in _PRICE_KEYS}
    return Price(
        input=_number(values["input_mtok"], tier_start),
        output=_number(values["output_mtok"], tier_start),
        cached_input=None
        if values["cache_read_mtok"] is None
        else _number(values["cache_read_mtok"], tier_start),
        cache_write=None
        if values["cache_write_mtok"] is None
        else _number(values["cache_write_mtok"], tier_start),
        tiers=tiers,
        source=PriceSource.CATALOGUE,
        origin=origin,
    )


def _price(prices: ModelPrice, origin: str) -> Price | None:
    """A catalogue ``ModelPrice`` as a :class:`Price`; None without input and output
    prices (an entry priced per request or per second is not a token price)."""
    from genai_prices.types import TieredPrices

    if getattr(prices, "input_mtok", None) is None or getattr(prices, "output_mtok", None) is None:
        return None
    starts = sorted(
        {
            tier.start
            for key in _PRICE_KEYS
            if isinstance(value := getattr(prices, key, None), TieredPrices)
            for tier in value.tiers
        }
    )
    # Each tier's price at its threshold: a key without that tier keeps its lower price.
    tiers = tuple(PriceTier(start, _at(prices, start, origin, ())) for start in starts)
    return _at(prices, -1, origin, tiers)
