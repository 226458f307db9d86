"""How a tenant chooses its embedding model: settings, config centre keys, and ``embedder_for``'s refusals."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentvm.adapters.embeddings import EmbeddingsChoice, embedder_for
from agentvm.adapters.embeddings.bedrock import BedrockEmbedder
from agentvm.adapters.embeddings.openai import OpenAIEmbedder, batches, estimated_tokens
from agentvm.config import CompatProvider, Settings
from agentvm.configcentre.keys import check
from agentvm.errors import InvalidConfig

OPENAI = {"openai_api_key": "sk-test", "openai_base_url": "http://127.0.0.1:9/v1"}


def test_no_model_chosen_is_no_embedder(tmp_path):
    assert embedder_for(Settings(data_dir=tmp_path, **OPENAI)) is None
    assert embedder_for(Settings(data_dir=tmp_path), EmbeddingsChoice(None, 256)) is None


def test_the_environment_chooses_the_servers_model(tmp_path, monkeypatch):
    monkeypatch.setenv("AVM_EMBEDDINGS_MODEL", "openai/text-embedding-3-large")
    monkeypatch.setenv("AVM_EMBEDDINGS_DIMENSIONS", "1024")
    settings = Settings(data_dir=tmp_path, **OPENAI)
    assert EmbeddingsChoice.from_settings(settings) == EmbeddingsChoice("openai/text-embedding-3-large", 1024)
    embedder = embedder_for(settings)
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.model, embedder.dimensions) == ("text-embedding-3-large", 1024)
    assert embedder_for(settings, EmbeddingsChoice("openai/text-embedding-3-small")).dimensions == 1536


@pytest.mark.parametrize(
    ("env", "value"),
    [("AVM_EMBEDDINGS_MODEL", "text-embedding-3-small"), ("AVM_EMBEDDINGS_DIMENSIONS", "0")],
)
def test_the_environment_refuses_a_malformed_choice(tmp_path, monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    with pytest.raises(ValidationError):
        Settings(data_dir=tmp_path)


@pytest.mark.parametrize(
    ("settings", "choice", "key", "says"),
    [
        ({}, EmbeddingsChoice("openai/text-embedding-3-small"), "embeddings.model", "set OPENAI_API_KEY"),
        (
            {},
            EmbeddingsChoice("bedrock/amazon.titan-embed-text-v2:0"),
            "embeddings.model",
            "AVM_BEDROCK_REGION",
        ),
        (OPENAI, EmbeddingsChoice("openai/gpt-4o-mini"), "embeddings.model", "not an OpenAI embedding model"),
        (
            OPENAI,
            EmbeddingsChoice("openai/text-embedding-3-small", 2048),
            "embeddings.dimensions",
            "1 to 1536",
        ),
        (OPENAI, EmbeddingsChoice("openai/text-embedding-ada-002", 512), "embeddings.dimensions", "1536"),
        (OPENAI, EmbeddingsChoice("mystery/embedder"), "embeddings.model", "unknown embeddings provider"),
        (OPENAI, EmbeddingsChoice("no-slash"), "embeddings.model", "provider/model"),
        (
            {"bedrock_region": "us-east-1"},
            EmbeddingsChoice("bedrock/amazon.titan-embed-text-v2:0", 300),
            "embeddings.dimensions",
            "256, 512, 1024",
        ),
        (
            {"bedrock_region": "us-east-1"},
            EmbeddingsChoice("bedrock/anthropic.claude-3-haiku"),
            "embeddings.model",
            "not a Bedrock embedding model",
        ),
        (
            {"openai_compatible": {"local": CompatProvider(base_url="http://127.0.0.1:9/v1")}},
            EmbeddingsChoice("local/nomic-embed-text"),
            "embeddings.dimensions",
            "say how many dimensions",
        ),
    ],
)
def test_a_choice_that_cannot_work_is_refused_naming_its_key(tmp_path, settings, choice, key, says):
    with pytest.raises(InvalidConfig, match=says) as refused:
        embedder_for(Settings(data_dir=tmp_path, **settings), choice)
    assert refused.value.key == key


def test_a_compatible_server_and_bedrock_get_their_adapters(tmp_path):
    settings = Settings(
        data_dir=tmp_path,
        bedrock_region="us-east-1",
        openai_compatible={"local": CompatProvider(base_url="http://127.0.0.1:9/v1")},
    )
    local = embedder_for(settings, EmbeddingsChoice("local/nomic-embed-text", 768))
    assert isinstance(local, OpenAIEmbedder) and (local.provider, local.dimensions) == ("local", 768)
    cohere = embedder_for(settings, EmbeddingsChoice("bedrock/cohere.embed-multilingual-v3"))
    assert isinstance(cohere, BedrockEmbedder) and cohere.dimensions == 1024


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("text-embedding-3-small", "provider/model"),
        ("anthropic/claude-haiku-4-5", "no embedding models"),
        ("echo/echo-1", "no embedding models"),
    ],
)
def test_the_config_centre_refuses_a_model_with_no_embeddings(value, says):
    with pytest.raises(InvalidConfig, match=says):
        check("embeddings.model", value)


def test_the_config_centre_bounds_the_dimensions():
    assert check("embeddings.dimensions", 256) == 256
    assert check("embeddings.model", "openai/text-embedding-3-small") == "openai/text-embedding-3-small"
    for bad in (0, 9000, "256", True):
        with pytest.raises(InvalidConfig):
            check("embeddings.dimensions", bad)


def test_batches_respect_both_limits():
    texts = ["x" * 10] * 5 + ["y" * 1000]
    assert list(batches(texts, max_inputs=2, max_tokens=10_000)) == [(0, 2), (2, 4), (4, 6)]
    assert list(batches(texts, max_inputs=100, max_tokens=estimated_tokens("x" * 10) * 3)) == [
        (0, 3),
        (3, 5),
        (5, 6),  # a lone text over the limit still goes (the provider says if it is too long)
    ]
