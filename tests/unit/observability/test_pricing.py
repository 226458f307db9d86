"""The prices: which price a usage record's model gets (the genai-prices library, or an override),
what its tokens cost, and what caching saved."""

from __future__ import annotations

import importlib.metadata
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from agentvm.configcentre.keys import check
from agentvm.errors import InvalidConfig
from agentvm.observability.pricing import (
    DASHBOARD_PRICES,
    LISTED_MODELS,
    ModelPrice,
    Pricing,
    estimate_price,
    list_price,
    micro,
    prices_as_of,
)
from agentvm.observability.usage import Sums
from agentvm.ports import UsageCell


def _library(provider: str, name: str) -> dict[str, Decimal]:
    """What genai-prices itself says (its bundled data, no network): base-tier USD per million."""
    from genai_prices.data import providers
    from genai_prices.data_snapshot import DataSnapshot

    _, info = DataSnapshot(providers=providers, from_auto_update=False).find_provider_model(
        name, None, provider, None
    )
    found = info.get_prices(datetime.now(UTC))
    out = {}
    for key, field in (
        ("input", "input_mtok"),
        ("output", "output_mtok"),
        ("cache_read", "cache_read_mtok"),
        ("cache_write", "cache_write_mtok"),
    ):
        value = getattr(found, field)
        out[key] = None if value is None else Decimal(getattr(value, "base", value))
    return out


@pytest.mark.parametrize(
    ("model", "provider", "name"),
    [
        ("anthropic/claude-haiku-4-5", "anthropic", "claude-haiku-4-5"),
        ("anthropic/claude-haiku-4-5-20251001", "anthropic", "claude-haiku-4-5"),
        ("anthropic/claude-sonnet-4-5-20250929", "anthropic", "claude-sonnet-4-5"),
        ("anthropic/claude-sonnet-4-latest", "anthropic", "claude-sonnet-4"),
        ("anthropic/claude-opus-4-20250514", "anthropic", "claude-opus-4-0"),
        ("openai/gpt-4o-mini", "openai", "gpt-4o-mini"),
        ("openai/gpt-4o-mini-2024-07-18", "openai", "gpt-4o-mini"),
        ("openai/gpt-4.1-mini", "openai", "gpt-4.1-mini"),
        (
            "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0",
            "aws",
            "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        ),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "aws", "anthropic.claude-3-haiku-20240307-v1:0"),
    ],
)
def test_a_model_gets_the_price_the_library_gives_it(model, provider, name):
    said = _library(provider, name)
    price = Pricing.of(None, None).price(model)

    assert price is not None
    assert (price.input, price.output) == (said["input"], said["output"])
    # no cache price listed (OpenAI's writes, a model without caching): the input price
    assert price.cache_read == (said["cache_read"] if said["cache_read"] is not None else said["input"])
    assert price.cache_write == (said["cache_write"] if said["cache_write"] is not None else said["input"])


def test_the_library_agrees_with_the_providers_published_prices():
    # Anthropic's pricing page (https://docs.anthropic.com/en/docs/about-claude/pricing, "Model
    # pricing"): Haiku 4.5 $1 input, $5 output, $0.10 cache hits, $1.25 5-minute cache writes.
    # OpenAI's (https://platform.openai.com/docs/pricing): gpt-4o-mini $0.15 input, $0.075 cached
    # input, $0.60 output.
    haiku = list_price("anthropic/claude-haiku-4-5")
    mini = list_price("openai/gpt-4o-mini")
    assert haiku == ModelPrice(Decimal("1"), Decimal("5"), Decimal("0.1"), Decimal("1.25"))
    assert mini == ModelPrice(Decimal("0.15"), Decimal("0.6"), Decimal("0.075"), Decimal("0.15"))


def test_the_library_is_read_from_its_bundled_data_and_never_auto_updates():
    import genai_prices.update_prices as updater

    price = list_price("anthropic/claude-haiku-4-5")
    assert price is not None
    assert updater._shared_updater.ref_count == 0  # no UpdatePrices was started
    assert prices_as_of() == f"genai-prices {importlib.metadata.version('genai-prices')}"


def test_the_dashboards_estimates_are_the_librarys_prices():
    for model, (input_, output) in DASHBOARD_PRICES.items():
        price = list_price(model)
        assert price is not None, model
        assert (float(price.input), float(price.output)) == (input_, output), model
        assert estimate_price(f"{model}-20250101") == (input_, output)
    for model in LISTED_MODELS:
        assert list_price(model) is not None, model


@pytest.mark.parametrize(
    "model",
    [
        "openai/gpt-4o-minis",
        "anthropic/claude-haiku",
        "scripted/test-1",
        "echo/echo-1",
        "bedrock/meta.llama3",
        "openai-compatible/gpt-4o-mini",
    ],
)
def test_a_model_nobody_lists_has_no_price(model):
    assert Pricing.of(None, None).price(model) is None


def test_an_override_wins_over_the_library_for_the_model_and_its_snapshots():
    listed = list_price("anthropic/claude-haiku-4-5")
    pricing = Pricing.of(None, {"anthropic/claude-haiku-4-5": {"input": 0.5, "output": 2, "cacheRead": 0.05}})

    own = ModelPrice(Decimal("0.5"), Decimal("2"), Decimal("0.05"), Decimal("0.5"))
    assert listed is not None and listed != own
    assert pricing.price("anthropic/claude-haiku-4-5") == own
    assert pricing.price("anthropic/claude-haiku-4-5-20251001") == own
    assert pricing.price("bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0") == own
    assert pricing.price("anthropic/claude-sonnet-4-5") == list_price("anthropic/claude-sonnet-4-5")
    wire = pricing.to_wire()
    assert wire["prices"]["anthropic/claude-haiku-4-5"]["input"] == 0.5
    assert wire["overridden"] == ["anthropic/claude-haiku-4-5"]


def test_cache_savings_are_reads_discount_less_the_writes_premium_at_the_charged_prices():
    price = list_price("anthropic/claude-haiku-4-5")
    assert price is not None
    pricing = Pricing.of(1.05, None)
    cell = UsageCell(
        "acme",
        0,
        "anthropic/claude-haiku-4-5",
        "turn",
        input_tokens=100_000,
        output_tokens=1_000,
        cache_read_tokens=60_000,
        cache_write_tokens=20_000,
    )
    expected = (
        60_000 * (price.input - price.cache_read) - 20_000 * (price.cache_write - price.input)
    ) / Decimal(1_000_000)
    assert pricing.cache_savings(cell.model, 60_000, 20_000) == expected
    sums = Sums()
    sums.add(cell)
    pricing.add(sums, cell)
    pricing.finish(sums)
    assert sums.extra["cacheSavings"] == micro(expected * Decimal("1.05"))
    assert pricing.charged_cache_savings("echo/echo-1", 10, 0) is None


def test_reply_cache_savings_are_the_saved_tokens_at_input_and_output_prices_charged():
    # a hit's cell: no tokens of its own (free), the tokens of the call that wrote the reply
    hits = UsageCell(
        "acme",
        0,
        "acme/own-llm",
        "reply_cache",
        records=3,
        saved_input_tokens=30_000,
        saved_output_tokens=6_000,
    )
    pricing = Pricing.of(1.05, {"acme/own-llm": {"input": 2, "output": 6, "cacheRead": 0.2}})

    # 30k x $2 + 6k x $6, per million: $0.096 (the cache prices play no part)
    assert pricing.reply_cache_savings("acme/own-llm", 30_000, 6_000) == Decimal("0.096")
    assert pricing.charged_reply_cache_savings("acme/own-llm", 30_000, 6_000) == Decimal("0.096") * Decimal(
        "1.05"
    )
    assert pricing.cost(hits) == 0
    sums = Sums()
    for cell in (
        hits,
        UsageCell("acme", 0, "acme/own-llm", "turn", records=1, input_tokens=10_000, output_tokens=2_000),
    ):
        sums.add(cell)
        pricing.add(sums, cell)
    pricing.finish(sums, with_cost=False)
    wire = sums.to_wire()
    assert (wire["savedInputTokens"], wire["savedOutputTokens"]) == (30_000, 6_000)
    assert (wire["inputTokens"], wire["totalTokens"], wire["turns"]) == (10_000, 12_000, 4)
    assert wire["replyCacheSavings"] == micro(Decimal("0.096") * Decimal("1.05")) == 0.1008
    assert wire["charge"] == micro(Decimal("0.032") * Decimal("1.05"))  # the paid turn only
    # an unpriced model saves nothing, as its tokens cost nothing
    assert pricing.charged_reply_cache_savings("echo/echo-1", 10, 10) is None
    unpriced = UsageCell("acme", 0, "echo/echo-1", "reply_cache", records=1, saved_input_tokens=10)
    other = Sums()
    other.add(unpriced)
    pricing.add(other, unpriced)
    pricing.finish(other)
    assert (other.to_wire()["replyCacheSavings"], other.to_wire()["savedInputTokens"]) == (0.0, 10)


def test_the_cost_prices_uncached_input_cache_reads_cache_writes_and_output_apart():
    cell = UsageCell(
        "acme",
        0,
        "anthropic/claude-haiku-4-5",
        "turn",
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_tokens=600_000,
        cache_write_tokens=200_000,
    )
    # 200k uncached x $1 + 600k x $0.10 + 200k x $1.25 + 100k x $5, per million
    assert Pricing.of(None, None).cost(cell) == Decimal("0.2") + Decimal("0.06") + Decimal("0.25") + Decimal(
        "0.5"
    )


def test_overrides_replace_a_models_price_and_cache_prices_default_to_the_input_price():
    pricing = Pricing.of(2.0, {"acme/own-llm": {"input": 2, "output": 6}})
    cell = UsageCell(
        "acme", 0, "acme/own-llm", "turn", input_tokens=1000, output_tokens=100, cache_read_tokens=500
    )

    assert pricing.cost(cell) == Decimal("0.0026")  # (500 + 500) x $2 + 100 x $6, per million
    assert pricing.markup == Decimal("2.0") and pricing.overridden == frozenset({"acme/own-llm"})
    assert pricing.to_wire()["pricesAsOf"] == prices_as_of()


@pytest.mark.parametrize(
    "value",
    [
        {"gpt-4o": {"input": 1, "output": 2}},  # not provider/model
        {"openai/gpt-4o": {"input": -1, "output": 2}},
        {"openai/gpt-4o": {"input": "1", "output": 2}},
        {"openai/gpt-4o": {"input": 1}},
        {"openai/gpt-4o": {"input": 1, "output": 2, "discount": 3}},
        ["openai/gpt-4o"],
    ],
)
def test_bad_price_overrides_are_refused_naming_the_setting(value):
    with pytest.raises(InvalidConfig) as refused:
        check("billing.prices", value)
    assert refused.value.key == "billing.prices"


def test_the_turn_path_and_the_handlers_imports_never_load_the_library():
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    probe = (
        "import sys\n"
        "import functions.turn_worker.app, functions.http_api.app, agentvm.api.usage, agentvm.api.budgets\n"
        "from agentvm.observability.metrics import estimated_cost_usd\n"
        "assert estimated_cost_usd('anthropic/claude-haiku-4-5-20251001', 10**6, 0) == 1.0\n"
        "print(sorted(m for m in sys.modules if m.startswith(('genai_prices', 'httpx2'))))\n"
    )
    env = {"PYTHONPATH": f"{root / 'shared'}:{root}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", probe], env=env, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
