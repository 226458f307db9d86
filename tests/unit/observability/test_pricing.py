"""The price table: which list price a usage record's model gets, and what its tokens cost."""

from __future__ import annotations

from decimal import Decimal

import pytest

from agentvm.configcentre.keys import check
from agentvm.errors import InvalidConfig
from agentvm.observability.pricing import LIST_PRICES, PRICES_AS_OF, Pricing
from agentvm.ports import UsageCell


@pytest.mark.parametrize(
    ("model", "listed"),
    [
        ("anthropic/claude-haiku-4-5", "anthropic/claude-haiku-4-5"),
        ("anthropic/claude-haiku-4-5-20251001", "anthropic/claude-haiku-4-5"),
        ("anthropic/claude-opus-4-20250514", "anthropic/claude-opus-4"),
        ("anthropic/claude-opus-4-1-20250805", "anthropic/claude-opus-4-1"),
        ("anthropic/claude-sonnet-4-latest", "anthropic/claude-sonnet-4"),
        ("anthropic/claude-sonnet-4-5-20250929", "anthropic/claude-sonnet-4-5"),
        ("openai/gpt-4o-mini-2024-07-18", "openai/gpt-4o-mini"),
        ("openai/gpt-4o-2024-08-06", "openai/gpt-4o"),
        ("openai/gpt-4.1-mini", "openai/gpt-4.1-mini"),
        ("bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0", "anthropic/claude-haiku-4-5"),
        ("bedrock/anthropic.claude-3-haiku-20240307-v1:0", "anthropic/claude-3-haiku"),
    ],
)
def test_a_model_gets_the_list_price_of_its_family(model, listed):
    assert Pricing.of(None, None).price(model) == LIST_PRICES[listed]


@pytest.mark.parametrize(
    "model",
    [
        "openai/gpt-4o-minis",
        "anthropic/claude-haiku",
        "scripted/test-1",
        "echo/echo-1",
        "bedrock/meta.llama3",
    ],
)
def test_a_model_nobody_lists_has_no_price(model):
    assert Pricing.of(None, None).price(model) is None


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
    assert pricing.to_wire()["pricesAsOf"] == PRICES_AS_OF


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
