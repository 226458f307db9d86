"""Knowledge at scale: reading files, indexing chunks, and searching words, vectors and both, on the
local host's index (SQLite) and the cluster host's (PostgreSQL), side by side.

* Ingestion: a generated PDF of ``--pages`` pages (~2 KB of text each, built byte by byte as the
  tests do) and a Markdown file of the same text, each read (pypdf / the Markdown reader) and cut
  into chunks (``resources/chunking.py``); the median of ``--runs``.
* Indexing: chunks of ~1,200 characters (words drawn from a Zipf-like vocabulary) added in
  batches of 1,000 to one version of one tenant's resource, and as many again for another tenant,
  so every search runs beside a neighbour of the same size; each with a ``--dimensions``-float
  vector. The index grows through ``--sizes`` (1k, 10k, 100k chunks a tenant) and is searched at
  each size. ``SqliteKnowledgeIndex`` is a file in a temporary directory; ``PostgresKnowledgeIndex``
  a fresh database on ``tests/postgres_server.py``'s throwaway server (``AVM_TEST_DATABASE_URL``
  when set), through the adapter, as the cluster host uses it.
* Vectors are seeded pseudo-random unit vectors, not ``avm fake-llm``'s: the fake's features cost
  ~8.5 ms a 1,200-character text at 384 dimensions (``benchmarks/fake_embeddings.py``), 28 minutes
  for 2 x 100k chunks, and neither sqlite-vec's scan nor PostgreSQL's brute-force cosine depends on
  the values.
* Search: a rare word (a few hits), three frequent words (many hits: all ranked) and a vector query
  (k = 10 nearest of one version), median and p95 of ``--runs`` (fewer when one query takes
  seconds: at least 5, within ``--budget-s`` a measurement); and ``hybrid_search`` with an embedder
  that returns a fixed vector (the embedding model's own time is not in it).
* Storage: bytes a chunk (text, words index and vector) at the largest size: SQLite's file, and
  PostgreSQL's ``pg_total_relation_size`` (table, TOAST, primary key and GIN index).

Run: ``./dev python -m benchmarks.knowledge_search [--sizes 1000,10000,100000] [--dimensions 384]
[--runs 20] [--backends sqlite,postgres]``
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import random
import statistics
import tempfile
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex
from agentvm.ports import KnowledgeChunk
from agentvm.resources.chunking import chunk_sections
from agentvm.resources.extract import read_document
from agentvm.resources.hybrid import hybrid_search

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

VOCABULARY = [f"w{n}" for n in range(5000)]
CUMULATIVE = list(itertools.accumulate(1 / (n + 1) for n in range(len(VOCABULARY))))


def text(rng: random.Random, chars: int) -> str:
    """~``chars`` characters of sentences of 8 to 20 words (one draw of words per text: fast)."""
    words = rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=chars // 5 + 20)
    sentences: list[str] = []
    size = at = 0
    while size < chars and at < len(words):
        n = rng.randint(8, 20)
        sentence = " ".join(words[at : at + n]) + "."
        at += n
        sentences.append(sentence)
        size += len(sentence) + 1
    return " ".join(sentences)


def unit(rng: random.Random, dimensions: int) -> list[float]:
    """A seeded pseudo-random unit vector (from bytes: ~30 µs at 384 floats, not ~300 µs of gauss)."""
    v = [float(x) + 0.5 for x in array("b", rng.randbytes(dimensions))]
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


def timed(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{statistics.median(samples):.1f} (p95 {p95:.1f})"


class FixedEmbedder:
    model = "fixed"

    def __init__(self, vector: list[float]) -> None:
        self.vector = vector
        self.dimensions = len(vector)

    def embed(self, texts: Any, *, purpose: str) -> list[list[float]]:
        return [self.vector for _ in texts]


def ingestion(pages: int, runs: int) -> list[tuple[str, str]]:
    from tests.knowledge_files import pdf

    rng = random.Random(7)
    page_texts = [text(rng, 2000) for _ in range(pages)]
    data = pdf(page_texts)
    markdown = "\n\n".join(f"## Part {n}\n\n{t}" for n, t in enumerate(page_texts)).encode()
    rows = []
    for label, payload, kind in (("PDF", data, "pdf"), ("Markdown", markdown, "markdown")):
        samples = []
        chunks: list[KnowledgeChunk] = []
        for _ in range(runs):
            started = time.perf_counter()
            read = read_document(payload, kind)
            chunks = chunk_sections("doc", "Doc", read.sections)
            samples.append((time.perf_counter() - started) * 1000)
        rows.append(
            (
                f"read + chunk a {label} of {pages} pages"
                f" ({len(payload) / 1024:.0f} KiB, {len(chunks)} chunks)",
                timed(samples),
            )
        )
    return rows


@dataclass
class Corpus:
    """Every chunk's text and vector, generated once for both indexes."""

    texts: list[str]
    vectors: list[list[float]]
    query: list[float]

    @classmethod
    def make(cls, chunks: int, dimensions: int) -> Corpus:
        rng = random.Random(11)
        texts = [text(rng, 1200) for _ in range(chunks)]
        return cls(texts, [unit(rng, dimensions) for _ in texts], unit(rng, dimensions))

    def batch(self, start: int, end: int) -> tuple[list[KnowledgeChunk], list[list[float]]]:
        chunks = [
            KnowledgeChunk(f"doc-{n // 10}.pdf", "Doc", "Part > Section", "p.1", n % 10, self.texts[n])
            for n in range(start, end)
        ]
        return chunks, self.vectors[start:end]


QUERIES = {"rare word (w4990)": "w4990", "three frequent words": "w1 w2 w3"}
BATCH = 1000


async def measure(runs: int, budget_s: float, call: Callable[[], Awaitable[Any]]) -> tuple[list[float], Any]:
    """Milliseconds of ``runs`` calls (fewer past ``budget_s``, at least 5) and the last answer."""
    samples: list[float] = []
    answer = None
    spent = 0.0
    while len(samples) < runs and (len(samples) < 5 or spent < budget_s):
        started = time.perf_counter()
        answer = await call()
        elapsed = time.perf_counter() - started
        spent += elapsed
        samples.append(elapsed * 1000)
    return samples, answer


async def grow_and_search(
    index: Any,
    corpus: Corpus,
    sizes: list[int],
    runs: int,
    budget_s: float,
    settle: Callable[[], Awaitable[None]] | None = None,
) -> tuple[dict[str, str], int]:
    """Grow ``index`` through ``sizes`` (both tenants), searching at each (after ``settle``); cells
    by row label, and the chunks held at the end (both tenants)."""
    cells: dict[str, str] = {}
    held = 0
    for size in sizes:
        elapsed = 0.0
        for owner in ("acme", "neighbour"):
            for start in range(held, size, BATCH):
                chunks, vectors = corpus.batch(start, min(size, start + BATCH))
                started = time.perf_counter()
                await index.add_chunks(owner, "handbook", "1", chunks, vectors)
                elapsed += time.perf_counter() - started
        added = 2 * (size - held)
        held = size
        cells[f"{size:,}: index (µs a chunk, both tenants)"] = f"{elapsed * 1e6 / added:.0f}"
        if settle is not None:
            await settle()
        for label, query in QUERIES.items():
            samples, hits = await measure(
                runs,
                budget_s,
                lambda query=query: index.search_words("acme", "handbook", "1", query, 10),
            )
            cells[f"{size:,}: search_words, {label}"] = f"{timed(samples)}, {len(hits)} hits"
        samples, _ = await measure(
            runs, budget_s, lambda: index.search_vectors("acme", "handbook", "1", corpus.query, 10)
        )
        cells[f"{size:,}: search_vectors, k=10"] = timed(samples)
        embedder = FixedEmbedder(corpus.query)
        samples, result = await measure(
            runs,
            budget_s,
            lambda embedder=embedder: hybrid_search(
                index, embedder, "acme", "handbook", "1", "w12 w40 w4990", 5
            ),
        )
        assert result.mode == "hybrid"
        cells[f"{size:,}: hybrid_search, limit 5"] = timed(samples)
    return cells, 2 * held


async def on_sqlite(corpus: Corpus, sizes: list[int], runs: int, budget_s: float) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "agentvm.db"
        index = SqliteKnowledgeIndex(path)
        try:
            cells, held = await grow_and_search(index, corpus, sizes, runs, budget_s)
            index._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            size = sum(p.stat().st_size for p in Path(directory).glob("agentvm.db*"))
        finally:
            index.close()
    cells["storage: bytes a chunk (file / chunks)"] = f"{size / held:,.0f}"
    return cells


async def on_postgres(corpus: Corpus, sizes: list[int], runs: int, budget_s: float) -> dict[str, str]:
    import pytest

    from agentvm.adapters.postgres.knowledge import PostgresKnowledgeIndex
    from tests.postgres_server import fresh_database, shared_server, stop_shared_server

    try:
        shared_server()
    except pytest.skip.Exception as exc:  # no PostgreSQL here: say so in the table
        return {"storage: bytes a chunk (file / chunks)": f"not run: {exc.msg}"}
    try:
        async with fresh_database(max_size=2) as database:
            index = PostgresKnowledgeIndex(database)

            async def analyze() -> None:
                # what autovacuum does within a minute of a large insert; right after one, stale
                # statistics make the planner filter the version's rows instead of using the GIN index
                async with database.connection() as conn:
                    await conn.execute("ANALYZE knowledge_chunks")

            cells, held = await grow_and_search(index, corpus, sizes, runs, budget_s, analyze)
            async with database.connection() as conn:
                await conn.execute("VACUUM ANALYZE knowledge_chunks")
                cur = await conn.execute("SELECT pg_total_relation_size('knowledge_chunks')")
                row = await cur.fetchone()
            assert row is not None
            cells["storage: bytes a chunk (file / chunks)"] = (
                f"{int(row[0]) / held:,.0f} (table, TOAST, key and GIN)"
            )
    finally:
        stop_shared_server()
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="chunks a tenant, ascending")
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=15.0, help="seconds a measurement may take")
    parser.add_argument("--backends", default="sqlite,postgres")
    args = parser.parse_args()
    sizes = sorted(int(n) for n in args.sizes.split(","))
    rows = ingestion(args.pages, max(3, args.runs // 5))
    print("| what | ms: median (p95) |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")
    started = time.perf_counter()
    corpus = Corpus.make(sizes[-1], args.dimensions)
    print(f"\n(corpus of {sizes[-1]:,} chunks generated in {time.perf_counter() - started:.0f} s)\n")
    backends = {"sqlite": ("SQLite (FTS5 + sqlite-vec)", on_sqlite), "postgres": ("PostgreSQL", on_postgres)}
    chosen = [backends[name] for name in args.backends.split(",")]
    columns = [asyncio.run(run(corpus, sizes, args.runs, args.budget_s)) for _, run in chosen]
    labels = list(dict.fromkeys(label for cells in columns for label in cells))
    print("| chunks a tenant: what (ms: median (p95)) | " + " | ".join(name for name, _ in chosen) + " |")
    print("|---|" + "---|" * len(chosen))
    for label in labels:
        print(f"| {label} | " + " | ".join(cells.get(label, "") for cells in columns) + " |")


if __name__ == "__main__":
    main()
