"""Retrieval quality of knowledge search: words alone, vectors alone and hybrid, on a labelled set.

**The corpus** is the project's own documentation (``docs/*.md`` as listed in ``CORPUS``: 19
documents we wrote, ~4,700 lines), read and chunked by the same code as an upload
(``resources/extract.py``, ``resources/chunking.py``) and indexed in ``SqliteKnowledgeIndex``.
**The labels** are ``QUERIES``: 40 questions a user of these docs would ask, written by hand for
this benchmark, each with the documents that answer it (a set: some answers live in two places).
Half use the docs' own words ("Last-Event-ID"), half are paraphrases that share few words with the
answer ("my connection dropped, how do I get the rest of the stream"). A query is found at rank r
when a chunk of one of its documents is the r-th result.

**The vectors** are ``avm fake-llm``'s deterministic embeddings (``fakellm/vectors.py``: hashed
words, stems, a small synonym list and near-spellings; not a model). With a real embedding model
(OpenAI text-embedding-3, Titan v2) the vectors-only and hybrid rows are expected to improve most
on the paraphrases, where the fake knows no meaning beyond its synonym list. That is not measured
here: this machine reaches no provider (tests and benchmarks stay on loopback).

Reported per mode: recall@5 (share of queries with a right document in the top 5), MRR@10 (mean of
1/rank of the first right result, 0 past 10), and the median search time.

Run: ``./dev python -m benchmarks.knowledge_quality [--dimensions 256]``
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex
from agentvm.fakellm.vectors import embed_text
from agentvm.resources.chunking import chunk_sections
from agentvm.resources.extract import read_document
from agentvm.resources.hybrid import hybrid_search

if TYPE_CHECKING:
    from agentvm.ports import KnowledgeChunk, KnowledgeHit

ROOT = Path(__file__).resolve().parent.parent
CORPUS = [
    "cluster", "cold-start", "config", "cost", "deploy", "embeddings", "http", "managed-agents",
    "mcp", "observability", "playground", "protocol", "resources", "scaling", "sdk", "sessions",
    "settings", "tenants", "usage",
]  # fmt: skip

# (question, the documents that answer it, "words" or "paraphrase")
QUERIES: list[tuple[str, set[str], str]] = [
    ("resume the stream with Last-Event-ID", {"http"}, "words"),
    ("my connection dropped, how do I get the rest of the answer", {"http", "protocol", "sdk"}, "paraphrase"),
    ("Idempotency-Key on POST turns", {"http"}, "words"),
    (
        "send the same request twice without running the agent twice",
        {"http", "protocol", "sdk"},
        "paraphrase",
    ),
    ("avm serve --workers on one port", {"scaling"}, "words"),
    ("use all the cores of my machine", {"scaling"}, "paraphrase"),
    ("nodes sharing one PostgreSQL database", {"cluster"}, "words"),
    ("run on several servers behind a load balancer", {"cluster", "scaling"}, "paraphrase"),
    ("AWS cost per million standard turns", {"cost"}, "words"),
    ("how much will my Amazon bill be", {"cost", "deploy"}, "paraphrase"),
    ("cold start import time of the Lambda handlers", {"cold-start"}, "words"),
    ("why is the first request slow after a deploy", {"cold-start"}, "paraphrase"),
    ("Prometheus exposition of /v1/metrics", {"observability"}, "words"),
    ("graphs of how busy the server is", {"observability"}, "paraphrase"),
    ("sign in to the playground with an API key", {"playground"}, "words"),
    ("try the agent in my browser", {"playground"}, "paraphrase"),
    ("image_create request and its response frame", {"protocol"}, "words"),
    ("what JSON do I put on the websocket to start an agent", {"protocol", "sdk"}, "paraphrase"),
    ("upload a PDF to a knowledge resource", {"resources"}, "words"),
    ("let the agent answer from our company handbook", {"resources"}, "paraphrase"),
    ("AgentVMClient typed events in Python", {"sdk"}, "words"),
    ("library for talking to the server from my code", {"sdk"}, "paraphrase"),
    ("export a session as JSON Lines", {"sessions"}, "words"),
    ("download a conversation to keep it", {"sessions"}, "paraphrase"),
    ("fork a session", {"sessions"}, "words"),
    ("AVM_TURN_SLOTS environment variable", {"settings", "scaling"}, "words"),
    ("which knobs can I set when starting the server", {"settings", "config"}, "paraphrase"),
    ("deleting a tenant purges its conversations", {"tenants"}, "words"),
    ("remove a customer and everything they stored", {"tenants"}, "paraphrase"),
    ("usage export for billing with cache tokens", {"usage"}, "words"),
    ("how many tokens did each customer spend this month", {"usage"}, "paraphrase"),
    ("MCP session pool idle timeout AVM_MCP_IDLE_S", {"mcp", "settings"}, "words"),
    ("a tool server keeps crashing", {"mcp"}, "paraphrase"),
    ("anthropic SDK base_url /anthropic beta agents", {"managed-agents"}, "words"),
    ("use Claude's agent client library against this server", {"managed-agents"}, "paraphrase"),
    ("AVM_EMBEDDINGS_MODEL text-embedding-3-small", {"embeddings", "settings"}, "words"),
    ("find passages by meaning, not just keywords", {"embeddings", "resources"}, "paraphrase"),
    ("config centre layers: tenant over server over file", {"config"}, "words"),
    ("change a setting for one customer without a restart", {"config"}, "paraphrase"),
    ("sam deploy and create the first admin key", {"deploy"}, "words"),
]


class FakeEmbeddings:
    """``avm fake-llm``'s vectors in process (the same numbers its HTTP endpoints answer)."""

    model = "fake-embeddings"

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions

    def embed(self, texts: list[str], *, purpose: str) -> list[list[float]]:
        return [embed_text(t, self.dimensions) for t in texts]


def corpus_chunks() -> list[KnowledgeChunk]:
    chunks: list[KnowledgeChunk] = []
    for name in CORPUS:
        extracted = read_document((ROOT / "docs" / f"{name}.md").read_bytes(), "markdown")
        chunks += chunk_sections(name, f"{name}.md", extracted.sections)
    return chunks


def rank_of(hits: list[KnowledgeHit], answers: set[str]) -> int | None:
    for rank, hit in enumerate(hits, 1):
        if hit.chunk.document_id in answers:
            return rank
    return None


async def evaluate(dimensions: int) -> list[dict[str, object]]:
    chunks = corpus_chunks()
    embedder = FakeEmbeddings(dimensions)
    with tempfile.TemporaryDirectory() as directory:
        index = SqliteKnowledgeIndex(Path(directory) / "k.db")
        vectors = embedder.embed([f"{c.title} {c.heading_path} {c.text}" for c in chunks], purpose="document")
        await index.add_chunks("bench", "docs", "1", chunks, vectors)

        async def words(q: str) -> list[KnowledgeHit]:
            return await index.search_words("bench", "docs", "1", q, 10)

        async def vector(q: str) -> list[KnowledgeHit]:
            (v,) = embedder.embed([q], purpose="query")
            return await index.search_vectors("bench", "docs", "1", v, 10)

        async def hybrid(q: str) -> list[KnowledgeHit]:
            return (await hybrid_search(index, embedder, "bench", "docs", "1", q, 10)).hits

        rows = []
        for mode, search in (("words", words), ("vectors", vector), ("hybrid", hybrid)):
            for subset in ("all", "words", "paraphrase"):
                picked = [q for q in QUERIES if subset in ("all", q[2])]
                ranks, times = [], []
                for question, answers, _ in picked:
                    started = time.perf_counter()
                    hits = await search(question)
                    times.append((time.perf_counter() - started) * 1000)
                    ranks.append(rank_of(hits, answers))
                rows.append(
                    {
                        "mode": mode,
                        "queries": f"{subset} ({len(picked)})",
                        "recall@5": round(sum(1 for r in ranks if r is not None and r <= 5) / len(picked), 3),
                        "MRR@10": round(sum(1 / r for r in ranks if r is not None) / len(picked), 3),
                        "median ms": round(statistics.median(times), 2),
                    }
                )
        index.close()
    print(f"corpus: {len(CORPUS)} documents, {len(chunks)} chunks; {len(QUERIES)} labelled queries")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dimensions", type=int, default=256)
    args = parser.parse_args()
    rows = asyncio.run(evaluate(args.dimensions))
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(str(row[k]) for k in keys) + " |")


if __name__ == "__main__":
    main()
