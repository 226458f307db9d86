"""The cheap sibling of each provider's models (``agent/side_model.py``): the table side calls use."""

from __future__ import annotations

import pytest

from agentvm.agent.side_model import cheap_sibling, side_model_ref
from agentvm.observability.pricing import list_price


@pytest.mark.parametrize(
    ("ref", "sibling"),
    [
        ("anthropic/claude-sonnet-4-6", "anthropic/claude-haiku-5-5"),
        ("anthropic/claude-opus-4-6", "anthropic/claude-haiku-5-5"),
        ("anthropic/claude-sonnet-4-5-20250929", "anthropic/claude-haiku-5-5"),
        ("anthropic/claude-3-7-sonnet-latest", "anthropic/claude-haiku-5-5"),
        ("openai/gpt-5", "openai/gpt-5-mini"),
        ("openai/gpt-4.1", "openai/gpt-4.1-mini"),
        ("openai/gpt-4o", "openai/gpt-4o-mini"),
        ("openai/gpt-4o-2024-08-06", "openai/gpt-4o-mini"),
        (
            "bedrock/us.anthropic.claude-sonnet-4-5-20250929-v1:0",
            "bedrock/us.anthropic.claude-haiku-5-5",
        ),
        ("bedrock/global.anthropic.claude-opus-4-6-v1", "bedrock/global.anthropic.claude-haiku-5-5"),
        ("bedrock/anthropic.claude-sonnet-4-6", "bedrock/anthropic.claude-haiku-5-5"),  # in-region
    ],
)
def test_a_big_model_maps_to_its_providers_cheap_sibling(ref, sibling):
    assert cheap_sibling(ref) == sibling
    assert sibling.partition("/")[0] == ref.partition("/")[0]  # same provider: same credentials


@pytest.mark.parametrize(
    "ref",
    [
        "echo/echo",
        "fake/m1",
        "anthropic/claude-haiku-4-5",  # already small
        "anthropic/claude-haiku-5-5",
        "openai/gpt-4.1-mini",
        "openai/gpt-5-nano",
        "openai/o4-mini",
        "openai/gpt-5.1",  # not in the table: kept
        "bedrock/us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "bedrock/amazon.nova-pro-v1:0",
        "ollama/claude-sonnet-like",  # an OpenAI-compatible endpoint: never guessed at
    ],
)
def test_small_unknown_and_fake_models_keep_themselves(ref):
    assert cheap_sibling(ref) == ref


def test_the_images_side_model_decides_first():
    assert side_model_ref("openai/gpt-4.1", None) == "openai/gpt-4.1-mini"
    assert side_model_ref("openai/gpt-4.1", "") == "openai/gpt-4.1"  # opted out
    assert side_model_ref("openai/gpt-4.1", "openai/gpt-4.1") == "openai/gpt-4.1"
    assert side_model_ref("openai/gpt-4.1", "anthropic/claude-haiku-4-5") == "anthropic/claude-haiku-4-5"


@pytest.mark.parametrize(
    "ref", ["anthropic/claude-sonnet-4-6", "openai/gpt-5", "openai/gpt-4.1", "openai/gpt-4o"]
)
def test_every_sibling_has_a_list_price_below_its_models(ref):
    big, cheap = list_price(ref), list_price(cheap_sibling(ref))
    assert big is not None and cheap is not None
    assert cheap.input < big.input and cheap.output < big.output


@pytest.mark.parametrize("ref", ["anthropic/claude-sonnet-4-6", "openai/gpt-4.1"])
def test_the_sibling_resolves_to_the_same_providers_client(ref):
    """Only the image's provider is configured: its sibling needs no other credentials."""
    from pydantic import SecretStr

    from agentvm.adapters.llm.router import SettingsModelResolver
    from agentvm.config import Settings

    provider = ref.partition("/")[0]
    key = {f"{provider}_api_key": SecretStr("sk-test-not-a-key")}
    resolver = SettingsModelResolver(Settings(_env_file=None, **key))  # type: ignore[arg-type]
    image_client, _, _ = resolver.resolve(ref)
    sibling_client, name, canonical = resolver.resolve(cheap_sibling(ref))
    assert sibling_client is image_client and canonical == f"{provider}/{name}" != ref
