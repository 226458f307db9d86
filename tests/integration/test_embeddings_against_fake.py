"""Embeddings through the official SDKs (``openai``, ``boto3``) against ``avm fake-llm`` on loopback:
each provider's wire format, the adapters' batching and errors, and the usage they bill."""

from __future__ import annotations

import base64
import math
import struct

import boto3
import httpx
import openai
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from agentvm.adapters.embeddings import EmbeddingsChoice, embedder_for, tenant_embedder
from agentvm.adapters.embeddings.bedrock import BedrockEmbedder
from agentvm.adapters.embeddings.openai import OpenAIEmbedder
from agentvm.agent.side_calls import bill_embeddings
from agentvm.config import Settings
from agentvm.errors import ProviderRejected
from agentvm.fakellm import FakeLLMConfig, FakeLLMServer
from agentvm.fakellm.vectors import count_tokens, embed_text
from agentvm.observability.pricing import Pricing
from tests.harness import Harness

KEY = "sk-fake-EMBED-0123456789abcdef"
TEXTS = ["Refunds are paid within 14 days of a return.", "Orders ship in 2 days.", "The office is in Lisbon."]


@pytest.fixture(scope="module")
def fake_server():
    with FakeLLMServer(FakeLLMConfig()) as server:
        yield server


@pytest.fixture
def fake(fake_server):
    fake_server.reset()
    return fake_server


def sdk(fake: FakeLLMServer, key: str = KEY, **options) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=fake.openai_base_url, **options)


def bedrock(fake: FakeLLMServer, key: str = "AKIDFAKE", attempts: int = 1):
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=fake.base_url,
        aws_access_key_id=key,
        aws_secret_access_key="testing",
        config=Config(retries={"total_max_attempts": attempts, "mode": "standard"}),
    )


def requests_to(fake: FakeLLMServer) -> list[dict]:
    return httpx.get(f"{fake.base_url}/_fake/requests").json()


def norm(vector: list[float]) -> float:
    return math.sqrt(sum(v * v for v in vector))


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (norm(a) * norm(b))


# -- the fake's OpenAI wire -----------------------------------------------------------------------


def test_openai_sdk_gets_the_same_vectors_as_floats_and_as_base64(fake):
    client = sdk(fake)
    floats = client.embeddings.create(model="text-embedding-3-small", input=TEXTS, encoding_format="float")
    decoded = client.embeddings.create(model="text-embedding-3-small", input=TEXTS)  # the SDK asks base64
    assert [d.embedding for d in floats.data] == [d.embedding for d in decoded.data]
    assert requests_to(fake)[-1]["encoding_format"] == "base64"
    assert [d.index for d in floats.data] == [0, 1, 2]
    assert all(len(d.embedding) == 1536 for d in floats.data)
    assert all(abs(norm(d.embedding) - 1) < 1e-5 for d in floats.data)
    assert floats.usage.prompt_tokens == floats.usage.total_tokens == sum(count_tokens(t) for t in TEXTS)
    assert floats.model == "text-embedding-3-small"


def test_openai_base64_is_little_endian_float32_on_the_wire(fake):
    raw = httpx.post(
        f"{fake.openai_base_url}/embeddings",
        json={
            "model": "text-embedding-3-large",
            "input": "hello",
            "encoding_format": "base64",
            "dimensions": 4,
        },
        headers={"authorization": f"Bearer {KEY}"},
    ).json()
    packed = base64.b64decode(raw["data"][0]["embedding"])
    assert list(struct.unpack("<4f", packed)) == embed_text("hello", 4)


def test_same_text_same_vector_on_every_request_and_the_dimensions_asked(fake):
    client = sdk(fake)
    first = client.embeddings.create(model="text-embedding-3-small", input="hello world", dimensions=64)
    again = client.embeddings.create(model="text-embedding-3-small", input="hello world", dimensions=64)
    assert first.data[0].embedding == again.data[0].embedding == embed_text("hello world", 64)
    assert len(first.data[0].embedding) == 64


def test_openai_refusals_are_the_apis_own(fake):
    client = sdk(fake, max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.embeddings.create(model="text-embedding-4-imaginary", input="x")
    assert missing.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError, match="does not support specifying dimensions"):
        client.embeddings.create(model="text-embedding-ada-002", input="x", dimensions=256)
    with pytest.raises(openai.BadRequestError, match="dimensions"):
        client.embeddings.create(model="text-embedding-3-small", input="x", dimensions=4096)
    with pytest.raises(openai.BadRequestError, match="input"):
        client.embeddings.create(model="text-embedding-3-small", input=[""])
    with pytest.raises(openai.BadRequestError, match="maximum context length is 8192"):
        client.embeddings.create(model="text-embedding-3-small", input="word " * 9000)
    fake.configure(embeddings_api_key=KEY)
    with pytest.raises(openai.AuthenticationError) as refused:
        sdk(fake, key="sk-wrong", max_retries=0).embeddings.create(model="text-embedding-3-small", input="x")
    assert refused.value.code == "invalid_api_key"
    assert client.embeddings.create(model="text-embedding-3-small", input="x").data  # the right key


# -- the OpenAI adapter ---------------------------------------------------------------------------


def test_the_adapter_batches_to_the_request_limits_and_keeps_the_order(fake):
    calls = []
    texts = [f"document number {i} about topic {i % 5}" for i in range(7)]
    embedder = OpenAIEmbedder(
        "text-embedding-3-small",
        api_key=KEY,
        base_url=fake.openai_base_url,
        dimensions=32,
        on_usage=calls.append,
        max_inputs=3,
    )
    vectors = embedder.embed(texts, purpose="document")
    assert [len(r["input"]) for r in requests_to(fake)] == [3, 3, 1]
    assert vectors == [embed_text(t, 32) for t in texts]
    assert [c.texts for c in calls] == [3, 3, 1]
    assert sum(c.input_tokens for c in calls) == sum(count_tokens(t) for t in texts)
    assert {c.model for c in calls} == {"openai/text-embedding-3-small"}


def test_the_default_batch_is_openais_2048_inputs(fake):
    texts = [f"t{i}" for i in range(2049)]
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=fake.openai_base_url, dimensions=2
    )
    assert len(embedder.embed(texts, purpose="document")) == 2049
    assert [len(r["input"]) for r in requests_to(fake)] == [2048, 1]


def test_requests_stay_under_the_token_limit_the_fake_enforces(fake):
    # 16 texts of 20k estimated tokens (7.3k counted, under the 8,192 a text may have): two requests
    texts = [("alpha beta " * 4_000)[:40_000] + str(i) for i in range(16)]
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=fake.openai_base_url, dimensions=8
    )
    assert embedder.embed(texts, purpose="document") == [embed_text(t, 8) for t in texts]
    assert [len(r["input"]) for r in requests_to(fake)] == [14, 2]


def test_a_batch_refused_for_its_size_is_sent_again_in_halves(fake):
    # "a," tokenises at one token a character: 40 x 8k tokens (320k), though estimated at 160k
    texts = ["a," * 4_000 + str(i) for i in range(40)]
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=fake.openai_base_url, dimensions=8
    )
    assert embedder.embed(texts, purpose="document") == [embed_text(t, 8) for t in texts]
    assert [len(r["input"]) for r in requests_to(fake)] == [40, 20, 20]


def test_embeddings_leave_scripted_replies_to_the_chat_requests(fake):
    fake.state.add_script([{"text": "scripted answer"}])
    sdk(fake).embeddings.create(model="text-embedding-3-small", input="x")
    reply = sdk(fake).chat.completions.create(
        model="fake", messages=[{"role": "user", "content": "hi"}], max_tokens=50
    )
    assert reply.choices[0].message.content == "scripted answer"


def test_the_sdk_retries_a_rate_limit_then_the_adapter_answers(fake):
    fake.add_faults([{"kind": "429", "retry_after": 0.01}])
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=fake.openai_base_url, dimensions=8, max_retries=2
    )
    assert embedder.embed(["hello"], purpose="query") == [embed_text("hello", 8)]
    assert fake.stats()["requests"] == 2


def test_a_bad_key_or_unknown_model_is_a_provider_rejection_that_never_shows_the_key(fake):
    fake.configure(embeddings_api_key=KEY)
    bad = OpenAIEmbedder(
        "text-embedding-3-small",
        api_key="sk-wrong-SECRET",
        base_url=fake.openai_base_url,
        native_dimensions=1536,
    )
    with pytest.raises(ProviderRejected) as refused:
        bad.embed(["x"], purpose="document")
    assert "401" in str(refused.value) and "SECRET" not in str(refused.value)
    unknown = OpenAIEmbedder("embed-nope", api_key=KEY, base_url=fake.openai_base_url, native_dimensions=8)
    with pytest.raises(ProviderRejected, match="404 model_not_found"):
        unknown.embed(["x"], purpose="document")


# -- Bedrock --------------------------------------------------------------------------------------


def test_titan_v2_through_boto3_invoke_model(fake):
    import json

    client = bedrock(fake)
    response = client.invoke_model(
        modelId="amazon.titan-embed-text-v2:0",
        body=json.dumps({"inputText": "hello world", "dimensions": 256, "normalize": False}),
    )
    answer = json.loads(response["body"].read())
    assert len(answer["embedding"]) == 256 and answer["embeddingsByType"]["float"] == answer["embedding"]
    assert answer["inputTextTokenCount"] == 2
    assert response["ResponseMetadata"]["HTTPHeaders"]["x-amzn-bedrock-input-token-count"] == "2"
    assert norm(answer["embedding"]) > 1.01  # unnormalised, as asked
    normalised = json.loads(
        client.invoke_model(
            modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": "hello world"})
        )["body"].read()
    )
    assert len(normalised["embedding"]) == 1024 and abs(norm(normalised["embedding"]) - 1) < 1e-5
    for body, model in (
        ({"inputText": "x", "dimensions": 300}, "amazon.titan-embed-text-v2:0"),
        ({"inputText": "x", "dimensions": 256}, "amazon.titan-embed-text-v1"),
        ({"inputText": "x"}, "amazon.titan-embed-imaginary"),
    ):
        with pytest.raises(ClientError) as refused:
            client.invoke_model(modelId=model, body=json.dumps(body))
        assert refused.value.response["Error"]["Code"] == "ValidationException"


def test_the_bedrock_adapter_titan_and_cohere(fake):
    calls = []
    titan = BedrockEmbedder(
        "amazon.titan-embed-text-v2:0",
        region="us-east-1",
        dimensions=512,
        client=bedrock(fake),
        on_usage=calls.append,
    )
    assert titan.embed(TEXTS, purpose="document") == [embed_text(t, 512) for t in TEXTS]
    assert sorted(c.input_tokens for c in calls) == sorted(count_tokens(t) for t in TEXTS)
    calls.clear()
    cohere = BedrockEmbedder(
        "cohere.embed-english-v3", region="us-east-1", client=bedrock(fake), on_usage=calls.append
    )
    texts = [f"note {i}" for i in range(100)]
    assert cohere.embed(texts, purpose="query") == [embed_text(t, 1024) for t in texts]
    sent = [r for r in requests_to(fake) if r["modelId"] == "cohere.embed-english-v3"]
    assert [len(r["texts"]) for r in sent] == [96, 4]
    assert {r["input_type"] for r in sent} == {"search_query"}
    assert [c.input_tokens for c in calls] == [sum(count_tokens(t) for t in texts[:96]), 8]
    cohere.embed(["a document"], purpose="document")
    assert requests_to(fake)[-1]["input_type"] == "search_document"


def test_bedrock_bad_credentials_and_throttling(fake):
    fake.configure(embeddings_api_key="AKIDGOOD")
    with pytest.raises(ProviderRejected, match="UnrecognizedClientException"):
        BedrockEmbedder("amazon.titan-embed-text-v2:0", region="us-east-1", client=bedrock(fake)).embed(
            ["x"], purpose="query"
        )
    fake.add_faults([{"kind": "429"}])
    retried = BedrockEmbedder(
        "amazon.titan-embed-text-v2:0", region="us-east-1", client=bedrock(fake, "AKIDGOOD", attempts=3)
    )
    assert retried.embed(["x"], purpose="query") == [embed_text("x", 1024)]


# -- configuration to billed usage ----------------------------------------------------------------


async def test_a_tenants_embedder_from_settings_bills_its_tokens_once_at_list_price(
    fake, tmp_path, monkeypatch
):
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", fake.base_url)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDFAKE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    settings = Settings(
        data_dir=tmp_path,
        openai_api_key=KEY,
        openai_base_url=fake.openai_base_url,
        bedrock_region="us-east-1",
        embeddings_model="openai/text-embedding-3-small",
    )
    h = Harness(tmp_path)
    try:
        await h.rt.config.set(
            {"embeddings.model": "bedrock/amazon.titan-embed-text-v2:0", "embeddings.dimensions": 256},
            tenant_id="tenant-b",
            by="test",
            platform_admin=False,
        )
        assert (
            embedder_for(settings, EmbeddingsChoice.from_resolved(await h.rt.config.resolved("tenant-c")))
            is None
        )
        for tenant, choice, model, size in (
            ("tenant-a", EmbeddingsChoice.from_settings(settings), "openai/text-embedding-3-small", 1536),
            (
                "tenant-b",
                EmbeddingsChoice.from_resolved(await h.rt.config.resolved("tenant-b")),
                "bedrock/amazon.titan-embed-text-v2:0",
                256,
            ),
        ):
            calls: list = []
            embedder = embedder_for(settings, choice, on_usage=calls.append)
            assert embedder is not None and (embedder.model, embedder.dimensions) == (
                model.split("/")[1],
                size,
            )
            assert [len(v) for v in embedder.embed(TEXTS, purpose="document")] == [size] * 3
            billed = await bill_embeddings(h.rt, calls, tenant_id=tenant, usage_id="doc_1:v1")
            assert billed == sum(count_tokens(t) for t in TEXTS)
            assert await bill_embeddings(h.rt, calls, tenant_id=tenant, usage_id="doc_1:v1") == 0  # once
            (record,) = await h.store.list_usage(tenant)
            assert (record.kind, record.model, record.inputTokens, record.outputTokens) == (
                "embedding",
                model,
                billed,
                0,
            )
            (cell,) = await h.rt.usage.hour_cells(tenant, 0, 2**62)
            price = Pricing().price(model)
            assert price is not None and Pricing().cost(cell) == billed * price.input / 1_000_000
    finally:
        h.queue.close()
        h.store.close()


async def test_provider_keys_set_through_the_config_centre_reach_a_tenants_embedder(fake, tmp_path):
    fake.configure(embeddings_api_key=KEY)
    h = Harness(tmp_path)
    try:
        settings = Settings(data_dir=tmp_path)  # no provider keys in the environment
        assert tenant_embedder(settings, await h.rt.config.resolved("tenant-a")) is None
        await h.rt.config.set(
            {"llm.openai.apiKey": KEY, "llm.openai.baseUrl": fake.openai_base_url},
            tenant_id=None,
            by="platform",
            platform_admin=True,
        )
        await h.rt.config.set(
            {"embeddings.model": "openai/text-embedding-3-large", "embeddings.dimensions": 64},
            tenant_id="tenant-a",
            by="admin",
            platform_admin=False,
        )
        calls: list = []
        embedder = tenant_embedder(settings, await h.rt.config.resolved("tenant-a"), on_usage=calls.append)
        assert embedder is not None and embedder.dimensions == 64
        assert embedder.embed(["hello"], purpose="query") == [embed_text("hello", 64)]
        assert calls[0].model == "openai/text-embedding-3-large"
        assert (
            tenant_embedder(settings, await h.rt.config.resolved("tenant-b")) is None
        )  # its own choice: none
    finally:
        h.queue.close()
        h.store.close()


# -- the host's wiring: a tenant's knowledge embedded and searched with its model, billed ----------


async def test_a_tenants_knowledge_is_embedded_and_searched_with_its_model_and_billed(fake, tmp_path):
    """``hosts.knowledge.tenant_embedders`` in the resource centre, as the local host wires it: a
    tenant with an embedding model gets vectors at publish and hybrid search (through the OpenAI SDK
    against the fake), each billed once as usage kind ``embedding``; a tenant without one gets
    words alone, said so, and no bill."""
    from agentvm.hosts.knowledge import tenant_embedders
    from agentvm.resources.centre import ResourceCentre

    settings = Settings(data_dir=tmp_path, openai_api_key=KEY, openai_base_url=fake.openai_base_url)
    h = Harness(tmp_path)
    try:
        h.rt.resources = ResourceCentre(
            h.rt.resources.store,
            h.rt.clock,
            knowledge=lambda: h.rt.knowledge_index,
            embedder=tenant_embedders(h.rt, settings),
        )
        await h.rt.config.set(
            {"embeddings.model": "openai/text-embedding-3-small", "embeddings.dimensions": 256},
            tenant_id="acme",
            by="test",
            platform_admin=False,
        )
        spec = {"documents": [{"id": d, "title": d, "text": t} for d, t in zip("abc", TEXTS, strict=True)]}
        for tenant in ("acme", "plain"):
            version = await h.rt.resources.publish(tenant, "knowledge", "handbook", spec=spec)
            assert version.index is not None
            embedded = version.index.get("embedding")
            assert (embedded or {}).get("model") == ("text-embedding-3-small" if tenant == "acme" else None)
            hits, mode = await h.rt.resources.search_in(version, "when are refunds paid?", 2)
            assert mode == ("hybrid" if tenant == "acme" else "words")
            assert hits and "Refunds" in hits[0].text
        acme = [r for r in await h.rt.store.list_usage("acme") if r.kind == "embedding"]
        assert len(acme) == 2  # the index (three chunks), then the query: each once
        assert all(r.inputTokens > 0 and r.model.endswith("text-embedding-3-small") for r in acme)
        assert [r for r in await h.rt.store.list_usage("plain") if r.kind == "embedding"] == []
    finally:
        h.queue.close()
        h.store.close()
