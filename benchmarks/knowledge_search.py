"""Knowledge at scale on the local index: reading files, indexing chunks, searching words and vectors.

* Ingestion: a generated PDF of ``--pages`` pages (~2 KB of text each, built byte by byte as the
  tests do) and a Markdown file of the same text, each read (pypdf / the Markdown reader) and cut
  into chunks (``resources/chunking.py``); the median of ``--runs``.
* Indexing: ``--chunks`` chunks of ~1,200 characters (words drawn from a Zipf-like vocabulary)
  added to one version of one tenant's resource in ``SqliteKnowledgeIndex`` (a file in a temporary
  directory), and as many again for another tenant, so every search runs beside a neighbour of the
  same size; with ``--dimensions``-float vectors (random, unit length) for the vector searches.
* Search: a rare word (a few hits), three frequent words (many hits: BM25 ranks them all) and a
  vector query (k nearest of one version through sqlite-vec's partition), median and p95 of
  ``--runs``; and ``hybrid_search`` with an embedder that returns a fixed vector (the embedding
  model's own time is not in it).

Run: ``./dev python -m benchmarks.knowledge_search [--chunks 20000] [--dimensions 384] [--runs 30]``
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
from pathlib import Path
from typing import Any

from agentvm.adapters.local.sqlite.knowledge import SqliteKnowledgeIndex
from agentvm.ports import KnowledgeChunk
from agentvm.resources.chunking import chunk_sections
from agentvm.resources.extract import read_document
from agentvm.resources.hybrid import hybrid_search

VOCABULARY = [f"w{n}" for n in range(5000)]
CUMULATIVE = list(itertools.accumulate(1 / (n + 1) for n in range(len(VOCABULARY))))


def text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=rng.randint(8, 20))) + "."
        words.append(sentence)
        size += len(sentence) + 1
    return " ".join(words)


def unit(rng: random.Random, dimensions: int) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(dimensions)]
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


async def index_and_search(chunks: int, dimensions: int, runs: int, directory: Path) -> list[tuple[str, str]]:
    rng = random.Random(11)
    index = SqliteKnowledgeIndex(directory / "agentvm.db")
    rows = []
    batch = 1000
    for owner in ("acme", "neighbour"):
        elapsed = 0.0
        for start in range(0, chunks, batch):
            part = [
                KnowledgeChunk(
                    f"doc-{(start + n) // 10}.pdf",
                    "Doc",
                    "Part > Section",
                    "p.1",
                    (start + n) % 10,
                    text(rng, 1200),
                )
                for n in range(min(batch, chunks - start))
            ]
            vectors = [unit(rng, dimensions) for _ in part]
            started = time.perf_counter()  # the index's time only, not the corpus's generation
            await index.add_chunks(owner, "handbook", "1", part, vectors)
            elapsed += time.perf_counter() - started
        if owner == "acme":
            rows.append(
                (
                    f"index {chunks} chunks with {dimensions}-float vectors (one tenant)",
                    f"{elapsed * 1000:.0f} total, {elapsed * 1e6 / chunks:.0f} µs a chunk",
                )
            )
    size = (directory / "agentvm.db").stat().st_size + sum(
        p.stat().st_size for p in directory.glob("agentvm.db-*")
    )
    rows.append((f"database size, 2 x {chunks} chunks", f"{size / 2**20:.0f} MiB"))
    queries = {
        "rare word (w4990)": "w4990",
        "three frequent words": "w1 w2 w3",
    }
    for label, query in queries.items():
        samples = []
        hits = []
        for _ in range(runs):
            started = time.perf_counter()
            hits = await index.search_words("acme", "handbook", "1", query, 10)
            samples.append((time.perf_counter() - started) * 1000)
        rows.append((f"search_words, {label}: {len(hits)} hits", timed(samples)))
    vector = unit(rng, dimensions)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        await index.search_vectors("acme", "handbook", "1", vector, 10)
        samples.append((time.perf_counter() - started) * 1000)
    rows.append((f"search_vectors, k=10 of {chunks}", timed(samples)))
    embedder = FixedEmbedder(vector)
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        result = await hybrid_search(index, embedder, "acme", "handbook", "1", "w12 w40 w4990", 5)
        samples.append((time.perf_counter() - started) * 1000)
    assert result.mode == "hybrid"
    rows.append(("hybrid_search (words + vectors, RRF), limit 5", timed(samples)))
    index.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20000)
    parser.add_argument("--dimensions", type=int, default=384)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    rows = ingestion(args.pages, max(3, args.runs // 5))
    with tempfile.TemporaryDirectory() as directory:
        rows += asyncio.run(index_and_search(args.chunks, args.dimensions, args.runs, Path(directory)))
    print("| what | ms: median (p95) |\n|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
