"""Cost without typing prices (SPEC §19): a target without ``price`` is priced from the
pinned genai-prices catalogue when the table compiles, under the catalogue's provider for
where it is reached (kind × platform); a configured ``price`` wins; a model the catalogue
does not know stays unpriced. Also the contract with the package (``routing.limits.
catalogue`` is the one module that reads it): its pinned version and the entries below."""

from __future__ import annotations

import re
import tomllib
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client

from routing.gateway.events import CallRecord
from routing.limits import catalogue
from routing.limits.catalogue import (
    CATALOGUE_PROVIDERS,
    catalogue_price,
    catalogue_provider,
    catalogue_version,
)
from routing.limits.spec import Price, PriceSource, PriceTier, cost_of
from routing.protocols.registry import PLATFORMS
from tests.conftest import Harness, settle_calls
from tests.dashboard.conftest import PASSWORD

ORIGIN = "genai-prices 0.2.3"
LOOPBACK = "http://127.0.0.1:9"  # a URL the catalogue does not know (the simulator's kind)


def test_the_pinned_catalogue_is_the_one_read() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert "genai-prices==0.2.3" in pyproject["project"]["dependencies"]
    assert catalogue_version() == ORIGIN


def test_a_known_model_is_priced_from_its_catalogue_entry() -> None:
    price = catalogue_price(
        kind="anthropic", platform="direct", model="claude-sonnet-4-5", base_url=LOOPBACK
    )
    assert price == Price(
        input=3.0,
        output=15.0,
        cached_input=0.3,
        cache_write=3.75,
        tiers=(
            PriceTier(
                200_000,
                Price(6.0, 22.5, 0.6, 7.5, source=PriceSource.CATALOGUE, origin=price.origin),  # type: ignore[union-attr]
            ),
        ),
        source=PriceSource.CATALOGUE,
        origin=f"{ORIGIN}: anthropic/claude-sonnet-4-5",
    )
    # A dated model id is the same entry, as the catalogue matches it.
    dated = catalogue_price(kind="anthropic", platform="direct", model="claude-sonnet-4-5-20250929")
    assert dated is not None and dated.origin == price.origin  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("usage", "catalogue_usage"),
    [
        ({"prompt_tokens": 1200, "completion_tokens": 300}, {"input_tokens": 1200}),
        (  # cache reads and writes at their own prices (the prompt counts them)
            {
                "prompt_tokens": 5000,
                "completion_tokens": 80,
                "prompt_tokens_details": {"cached_tokens": 3000},
                "cache_creation_input_tokens": 1500,
            },
            {"input_tokens": 5000, "cache_read_tokens": 3000, "cache_write_tokens": 1500},
        ),
        (  # a long prompt pays the long-context tier on all of its tokens
            {"prompt_tokens": 250_000, "completion_tokens": 1000},
            {"input_tokens": 250_000},
        ),
    ],
)
def test_a_catalogue_price_costs_what_the_catalogue_computes(
    usage: dict[str, object], catalogue_usage: dict[str, int]
) -> None:
    from genai_prices import Usage, calc_price

    price = catalogue_price(kind="anthropic", platform="direct", model="claude-sonnet-4-5")
    output = usage["completion_tokens"]
    assert isinstance(output, int)
    expected = calc_price(
        Usage(**catalogue_usage, output_tokens=output),  # type: ignore[arg-type]
        "claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    assert Decimal(str(cost_of(usage, price))) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("kind", "platform", "model", "provider", "entry", "input_price"),
    [
        ("anthropic", "direct", "claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", 3.0),
        # Claude on Bedrock at Bedrock's own prices: a regional profile costs more
        (
            "anthropic",
            "bedrock",
            "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "aws",
            "regional.anthropic.claude-sonnet-4-5-20250929-v1:0",
            3.3,
        ),
        (
            "anthropic",
            "bedrock",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "aws",
            "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
            3.0,
        ),
        ("bedrock-converse", "bedrock", "amazon.nova-pro-v1:0", "aws", "amazon.nova-pro-v1:0", 0.8),
        ("anthropic", "vertex", "claude-sonnet-4-5@20250929", "google", "claude-sonnet-4-5", 3.0),
        ("gemini", "vertex", "gemini-2.5-pro", "google", "gemini-2.5-pro", 1.25),
        ("gemini", "direct", "models/gemini-2.5-flash", "google", "gemini-2.5-flash", 0.3),
        ("openai", "azure", "gpt-4o", "azure", "gpt-4o", 2.5),
        ("openai-responses", "direct", "gpt-4o-mini", "openai", "gpt-4o-mini", 0.15),
    ],
)
def test_each_platform_looks_up_its_own_catalogue_provider(
    kind: str, platform: str, model: str, provider: str, entry: str, input_price: float
) -> None:
    assert catalogue_provider(kind, platform) == provider
    price = catalogue_price(kind=kind, platform=platform, model=model, base_url="")
    assert price is not None
    assert price.origin == f"{ORIGIN}: {provider}/{entry}"
    assert price.input == pytest.approx(input_price)


def test_every_registered_platform_and_kind_has_a_catalogue_provider() -> None:
    """A platform or kind added to the registry is priced where the catalogue has it: its
    pair is named in CATALOGUE_PROVIDERS (the catalogue's ids are not ours to derive)."""
    pairs = {(kind.value, p.name) for p in PLATFORMS.values() for kind in p.kinds}
    assert pairs and pairs <= set(CATALOGUE_PROVIDERS)
    known = {provider.id for provider in _snapshot().providers}
    assert set(CATALOGUE_PROVIDERS.values()) <= known


def test_a_direct_base_url_the_catalogue_knows_names_the_vendor() -> None:
    groq = catalogue_price(
        kind="openai",
        platform="direct",
        model="llama-3.3-70b-versatile",
        base_url="https://api.groq.com/openai/v1",
    )
    assert groq is not None and groq.origin == f"{ORIGIN}: groq/llama-3.3-70b-versatile"
    # The same model under the kind's own vendor is not guessed from another's list.
    assert (
        catalogue_price(kind="openai", platform="direct", model="llama-3.3-70b-versatile") is None
    )


@pytest.mark.parametrize(
    ("kind", "platform", "model"),
    [
        ("openai", "direct", "sim-model"),
        ("openai", "azure", "my-deployment"),  # a deployment not named after its model
        ("anthropic", "direct", "gpt-4o"),  # another vendor's model: not guessed
        ("anthropic", "mars", "claude-sonnet-4-5"),  # a platform the catalogue has no id for
        ("openai", "direct", ""),
    ],
)
def test_an_unknown_model_stays_unpriced(kind: str, platform: str, model: str) -> None:
    assert catalogue_price(kind=kind, platform=platform, model=model) is None


def test_a_time_of_day_price_is_the_highest_so_a_budget_never_under_counts() -> None:
    # DeepSeek's catalogue entry: 0.135 off-peak, 0.27 in its 00:30-16:30 UTC window.
    price = catalogue_price(
        kind="openai", platform="direct", model="deepseek-chat", base_url="https://api.deepseek.com"
    )
    assert price is not None and (price.input, price.output) == (0.27, 1.1)


def _snapshot():  # type: ignore[no-untyped-def]
    from genai_prices.data_snapshot import get_snapshot

    return get_snapshot()


# ------------------------------------------------------------------ on the live gateway
PRICED = """
providers:
  - {name: claude, kind: anthropic, base_url: "{upstream}", api_key: upstream-key-claude}
  - {name: p1, kind: openai, base_url: "{upstream}", api_key: upstream-key-p1}
groups:
  - name: catalogued
    targets: [{provider: claude, model: claude-sonnet-4-5}]
  - name: configured
    targets: [{provider: claude, model: claude-sonnet-4-5, price: {input: 1.0, output: 2.0}}]
  - name: unknown
    targets: [{provider: p1, model: sim-model}]
"""


def _call(h: Harness, group: str) -> CallRecord:
    before = len(h.events(CallRecord))
    h.client().chat.completions.create(model=group, messages=[{"role": "user", "content": "hi"}])
    return h.events(CallRecord, at_least=before + 1)[-1]  # type: ignore[no-any-return]


def test_calls_cost_the_catalogue_price_a_configured_one_or_nothing(harness: Harness) -> None:
    """Over real sockets against the simulator; the catalogue is read when the table
    compiles, never by a call."""
    from genai_prices import Usage, calc_price

    harness.configure(PRICED)
    _call(harness, "unknown")  # the table compiled (and the catalogue read) before this
    looked_up = catalogue._lookup.cache_info()
    catalogued = _call(harness, "catalogued")
    configured = _call(harness, "configured")
    unknown = _call(harness, "unknown")
    assert catalogue._lookup.cache_info() == looked_up  # no call looked the catalogue up

    usage = catalogued.usage
    assert usage and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    expected = calc_price(
        Usage(input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"]),
        "claude-sonnet-4-5",
        provider_id="anthropic",
    ).total_price
    assert catalogued.cost is not None
    assert Decimal(str(catalogued.cost)) == pytest.approx(expected)
    assert configured.usage is not None
    assert configured.cost == pytest.approx(
        (configured.usage["prompt_tokens"] * 1.0 + configured.usage["completion_tokens"] * 2.0)
        / 1e6
    )
    assert unknown.usage and unknown.cost is None  # usage, but no price: never 0


def test_the_status_api_and_the_groups_page_say_where_a_price_came_from(
    harness: Harness,
) -> None:
    from routing.services.api_keys import generate_key

    harness.configure(PRICED)
    _, admin = generate_key(name="ops", kind="admin")
    http = Client()
    status = http.get("/api/v1/status", HTTP_AUTHORIZATION=f"Bearer {admin}").json()
    prices = {g["name"]: g["targets"][0]["price"] for g in status["groups"]}
    assert prices["catalogued"]["source"] == "catalogue"
    assert prices["catalogued"]["origin"] == f"{ORIGIN}: anthropic/claude-sonnet-4-5"
    assert (prices["catalogued"]["input"], prices["catalogued"]["cache_write"]) == (3.0, 3.75)
    assert prices["catalogued"]["tiers"] == [{"above": 200_000, "input": 6.0, "output": 22.5}]
    assert prices["configured"] == {
        "input": 1.0,
        "output": 2.0,
        "cached_input": None,
        "cache_write": None,
        "tiers": [],
        "source": "configured",
        "origin": None,
    }
    assert prices["unknown"] is None

    http.force_login(User.objects.create_user("operator", password=PASSWORD, is_staff=True))
    page = http.get("/groups/").content.decode()
    shown = dict(re.findall(r'data-price="(\w+)">([^<]*)<', page))
    assert shown["catalogue"] == (
        f"3 in / 15 out per M tokens · {ORIGIN}: anthropic/claude-sonnet-4-5"
    )
    assert shown["configured"] == "1 in / 2 out per M tokens · configured"
    assert shown["none"].startswith("unpriced")
    settle_calls(harness.runtime)
