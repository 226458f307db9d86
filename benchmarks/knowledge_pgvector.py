"""pgvector on the cluster host's knowledge index: latency and recall@10 of ``search_vectors``
through the HNSW index against the exact scan, as the index grows.

* Chunks: ``knowledge_search``'s generated texts (~1,200 characters of a Zipf-like vocabulary),
  embedded by ``avm fake-llm``'s deterministic embeddings (``agentvm.fakellm.vectors.embed_text``,
  ``--dimensions``), added in batches of 1,000 to one version of one tenant's resource and as many
  again (other texts) for a neighbour, so the HNSW index holds both and every query must skip the
  neighbour's chunks (``hnsw.iterative_scan``). Queries: ``--queries`` short texts of the same
  vocabulary, embedded the same way.
* At each of ``--sizes`` (chunks a tenant, after an ANALYZE): the exact scan (pgvector's ``<=>``
  over every chunk of the version: the adapter's default path, and the truth), then
  the HNSW path at each ``--overfetch`` (candidates = 10 x overfetch, ``hnsw.ef_search`` as many,
  at most 1,000, re-ranked exactly): median ms a query, and recall@10 (the share of the exact top
  ten found, averaged over the queries; its minimum beside it). Indexing: µs a chunk, both tenants,
  HNSW maintenance included. Storage: the HNSW index's bytes a chunk.
* The exact scan without pgvector (SQL over ``real[]``) is in the "Knowledge search on SQLite and
  PostgreSQL" table (``benchmarks/knowledge_search.py``).

Run: ``./dev python -m benchmarks.knowledge_pgvector [--sizes 1000,10000,100000] [--dimensions 384]
[--queries 20] [--overfetch 4,10,40,100]``
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from typing import Any

from agentvm.fakellm.vectors import embed_text
from agentvm.ports import KnowledgeChunk
from benchmarks.knowledge_search import BATCH, text

K = 10


def embedded(
    rng: random.Random, count: int, chars: int, dimensions: int
) -> tuple[list[str], list[list[float]]]:
    texts = [text(rng, chars) for _ in range(count)]
    return texts, [embed_text(t, dimensions) for t in texts]


async def timed_search(index: Any, owner: str, query: list[float]) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    hits = await index.search_vectors(owner, "handbook", "1", query, K)
    return (time.perf_counter() - started) * 1000, hits


async def run(sizes: list[int], dimensions: int, queries: int, overfetch: list[int]) -> list[tuple[str, str]]:
    import pytest

    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database, require_pgvector, shared_server, stop_shared_server

    rows: list[tuple[str, str]] = []
    rng = random.Random(11)
    started = time.perf_counter()
    corpus = {owner: embedded(rng, sizes[-1], 1200, dimensions) for owner in ("acme", "neighbour")}
    _, query_vectors = embedded(rng, queries, 80, dimensions)
    rows.append(("fake embeddings of the corpus (s)", f"{time.perf_counter() - started:.0f}"))
    try:
        shared_server()
        async with fresh_database(max_size=2) as database:
            await require_pgvector(database)
            writer = PostgresKnowledgeIndex(database, analyze_after_rows=None)
            exact = PostgresKnowledgeIndex(database)  # the default: exact
            held = 0
            for size in sizes:
                elapsed = 0.0
                for owner, (texts, vectors) in corpus.items():
                    for start in range(held, size, BATCH):
                        end = min(size, start + BATCH)
                        chunks = [
                            KnowledgeChunk(f"doc-{n // 10}.md", "Doc", "Part", "p.1", n % 10, texts[n])
                            for n in range(start, end)
                        ]
                        began = time.perf_counter()
                        await writer.add_chunks(owner, "handbook", "1", chunks, vectors[start:end])
                        elapsed += time.perf_counter() - began
                rows.append(
                    (
                        f"{size:,}: index (µs a chunk, both tenants)",
                        f"{elapsed * 1e6 / (2 * (size - held)):.0f}",
                    )
                )
                held = size
                async with database.connection() as conn:
                    await conn.execute("VACUUM ANALYZE knowledge_chunks")
                truth: list[set[tuple[str, int]]] = []
                samples: list[float] = []
                for query in query_vectors:
                    ms, hits = await timed_search(exact, "acme", query)
                    samples.append(ms)
                    truth.append({(h.chunk.document_id, h.chunk.ordinal) for h in hits})
                rows.append((f"{size:,}: exact scan (<=>), ms", f"{statistics.median(samples):.1f}"))
                for factor in overfetch:
                    hnsw = PostgresKnowledgeIndex(database, exact_below=0, overfetch=factor)
                    samples, recalls = [], []
                    for query, want in zip(query_vectors, truth, strict=True):
                        ms, hits = await timed_search(hnsw, "acme", query)
                        samples.append(ms)
                        got = {(h.chunk.document_id, h.chunk.ordinal) for h in hits}
                        recalls.append(len(got & want) / max(1, len(want)))
                    rows.append(
                        (
                            f"{size:,}: HNSW, {K * factor} candidates: ms, recall@10 (min)",
                            f"{statistics.median(samples):.1f}, {statistics.mean(recalls):.3f}"
                            f" ({min(recalls):.1f})",
                        )
                    )
                async with database.connection() as conn:
                    cur = await conn.execute(
                        f"SELECT pg_relation_size('knowledge_chunks_cosine_{dimensions}')"
                    )
                    row = await cur.fetchone()
                assert row is not None
                rows.append((f"{size:,}: HNSW index (bytes a chunk)", f"{int(row[0]) / (2 * size):,.0f}"))
                print(*(f"| {label} | {value} |" for label, value in rows[-len(overfetch) - 4 :]), sep="\n")
    except pytest.skip.Exception as exc:
        rows.append(("not run", exc.msg))
    finally:
        stop_shared_server()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="chunks a tenant, ascending")
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--overfetch", default="4,10,40,100", help="candidates a result, HNSW")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    overfetch = [int(n) for n in args.overfetch.split(",")]
    rows = asyncio.run(run(sizes, args.dimensions, args.queries, overfetch))
    print("\n| chunks a tenant: what | value |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
