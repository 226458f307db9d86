"""ANALYZE after a publish on PostgreSQL (``PostgresKnowledgeIndex.analyze_after_rows``): the plan
and the latency of searches right after a large version is indexed, with the adapter's own ANALYZE
and without it (the statistics left to autovacuum), side by side.

Each mode gets a fresh database on ``tests/postgres_server.py``'s throwaway server (or
``AVM_TEST_DATABASE_URL``'s) with autovacuum off on the chunk table, so "without" stays what it is
in the minute after a publish, before autovacuum's ANALYZE. A neighbour tenant publishes a version
of ``--chunks`` chunks, then the measured tenant publishes one of as many: each one ``add_chunks``
call, as a publish makes (``resources/indexing.py``), chunks of ~1,200 characters of Zipf-like words
with ``--dimensions``-float vectors (``benchmarks.knowledge_search``'s corpus). Then, at once:
``search_words`` for a rare word and for three frequent words, ``search_vectors`` k=10 (medians and
p95 of ``--runs``), and the rare word's plan (``EXPLAIN`` of ``SEARCH_WORDS``: the scans it uses).

Run: ``./dev python -m benchmarks.knowledge_analyze [--chunks 10000] [--dimensions 384] [--runs 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from benchmarks.knowledge_search import QUERIES, Corpus, measure, timed


def scans(plan: Any) -> list[str]:
    """The scan nodes of an ``EXPLAIN (FORMAT JSON)`` plan, outermost first."""
    found: list[str] = []
    node = plan
    stack = [node]
    while stack:
        node = stack.pop(0)
        if "Scan" in node["Node Type"]:
            found.append(f"{node['Node Type']} on {node.get('Index Name') or node.get('Relation Name')}")
        stack += node.get("Plans", [])
    return found


async def one_mode(corpus: Corpus, analyze: bool, runs: int) -> dict[str, str]:
    from agentvm.adapters.postgres.knowledge import _QUERY, SEARCH_WORDS, PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database

    cells: dict[str, str] = {}
    async with fresh_database(max_size=2) as database:
        async with database.connection() as conn:
            await conn.execute("ALTER TABLE knowledge_chunks SET (autovacuum_enabled = off)")
        index = PostgresKnowledgeIndex(database, analyze_after_rows=1000 if analyze else None)
        size = len(corpus.texts)
        chunks, vectors = corpus.batch(0, size)
        await index.add_chunks("neighbour", "handbook", "1", chunks, vectors)
        started = time.perf_counter()
        await index.add_chunks("acme", "handbook", "1", chunks, vectors)
        cells[f"publish of {size:,} chunks (one add_chunks), s"] = f"{time.perf_counter() - started:.1f}"
        for label, query in QUERIES.items():
            samples, hits = await measure(
                runs, 60.0, lambda query=query: index.search_words("acme", "handbook", "1", query, 10)
            )
            cells[f"search_words, {label}"] = f"{timed(samples)}, {len(hits)} hits"
        samples, _ = await measure(
            runs, 60.0, lambda: index.search_vectors("acme", "handbook", "1", corpus.query, 10)
        )
        cells["search_vectors, k=10"] = timed(samples)
        async with database.connection() as conn:
            cur = await conn.execute(_QUERY, (QUERIES["rare word (w4990)"],))
            row = await cur.fetchone()
            assert row is not None
            params = (str(row[0]), "acme", "handbook", "1", "acme", "handbook", "1", 10)
            cur = await conn.execute(b"EXPLAIN (FORMAT JSON) " + SEARCH_WORDS.encode(), params)
            plan = await cur.fetchone()
            assert plan is not None
            cells["rare word's plan (scans)"] = "; ".join(scans(plan[0][0]["Plan"]))
            started = time.perf_counter()
            await conn.execute("ANALYZE knowledge_chunks")
            cells["one ANALYZE of the table (both versions), ms"] = (
                f"{(time.perf_counter() - started) * 1000:.0f}"
            )
    return cells


async def main(args: argparse.Namespace) -> None:
    import pytest

    from tests.postgres_server import shared_server, stop_shared_server

    try:
        shared_server()
    except pytest.skip.Exception as exc:
        print(f"not run: {exc.msg}")
        return
    corpus = Corpus.make(args.chunks, args.dimensions)
    try:
        without = await one_mode(corpus, False, args.runs)
        with_ = await one_mode(corpus, True, args.runs)
    finally:
        stop_shared_server()
    print("| right after the publish (ms: median (p95)) | stats left to autovacuum | ANALYZE in add_chunks |")
    print("|---|---|---|")
    for label in without:
        print(f"| {label} | {without[label]} | {with_.get(label, '')} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(main(parser.parse_args()))
