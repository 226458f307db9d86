"""Embedding usage (``agent.side_calls.bill_embeddings``) on every store: a tenant's indexing has no
container, image or session, and its record must store, list, roll up and price like any other,
once per key."""

from __future__ import annotations

import dataclasses

import pytest

from agentvm.agent.side_calls import bill_embeddings, embedding_usage_key
from agentvm.llm import EmbeddingCall
from agentvm.observability.periods import DAY_MS
from agentvm.observability.pricing import Pricing
from tests.contract.test_usage_rollups_contract import on_dynamodb, on_postgres, on_sqlite
from tests.harness import Harness


@pytest.fixture(
    params=[
        pytest.param(on_sqlite, id="sqlite"),
        pytest.param(on_dynamodb, id="dynamodb", marks=pytest.mark.aws),
        pytest.param(on_postgres, id="postgres", marks=pytest.mark.postgres),
    ]
)
def backend(request):
    return request.param


async def test_an_indexing_jobs_embedding_tokens_are_billed_once_on_every_store(backend, tmp_path):
    harness = Harness(tmp_path)
    calls = [
        EmbeddingCall("openai/text-embedding-3-small", input_tokens=1200, texts=40, duration_ms=80),
        EmbeddingCall("openai/text-embedding-3-small", input_tokens=300, texts=9, duration_ms=20),
        EmbeddingCall("bedrock/amazon.titan-embed-text-v2:0", input_tokens=50, texts=1, duration_ms=9),
    ]
    try:
        async with backend(tmp_path) as (store, rollups):
            rt = dataclasses.replace(harness.rt, store=store)
            assert await bill_embeddings(rt, calls, tenant_id="tenant-a", usage_id="doc_7:v2") == 1550
            assert await bill_embeddings(rt, calls, tenant_id="tenant-a", usage_id="doc_7:v2") == 0
            # the same caller id in another tenant is another record
            assert await bill_embeddings(rt, calls[:1], tenant_id="tenant-b", usage_id="doc_7:v2") == 1200
            records = sorted(await store.list_usage("tenant-a"), key=lambda r: r.model)
            assert [(r.turnId, r.model, r.inputTokens, r.outputTokens, r.kind) for r in records] == [
                (
                    embedding_usage_key("tenant-a", "doc_7:v2", "bedrock/amazon.titan-embed-text-v2:0"),
                    "bedrock/amazon.titan-embed-text-v2:0",
                    50,
                    0,
                    "embedding",
                ),
                (
                    embedding_usage_key("tenant-a", "doc_7:v2", "openai/text-embedding-3-small"),
                    "openai/text-embedding-3-small",
                    1500,
                    0,
                    "embedding",
                ),
            ]
            now = rt.clock.now_ms()
            cells = await rollups.hour_cells("tenant-a", now - DAY_MS, now + DAY_MS)
            assert sorted((c.model, c.kind, c.input_tokens) for c in cells) == [
                ("bedrock/amazon.titan-embed-text-v2:0", "embedding", 50),
                ("openai/text-embedding-3-small", "embedding", 1500),
            ]
            costs = {c.model: Pricing().cost(c) for c in cells}
            assert (
                costs["openai/text-embedding-3-small"] * 1_000_000
                == 1500
                * Pricing()
                .price(  # type: ignore[union-attr]
                    "openai/text-embedding-3-small"
                )
                .input
            )
    finally:
        harness.queue.close()
        harness.store.close()
