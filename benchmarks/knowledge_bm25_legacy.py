"""What the hand-written BM25 (``resources/search.py``) still costs where it still runs (issue 31).

Every host now indexes knowledge in a ``KnowledgeIndex`` (SQLite FTS5 + sqlite-vec locally and on
AWS, PostgreSQL on the cluster host). BM25 is kept only for versions published before those indexes
existed (their records carry BM25 chunk offsets, not an index) and for an AWS stack without
``AVM_KNOWLEDGE_BUCKET``. Such versions were bounded by the old limits: at most 500 documents and
256 KB of text. This measures BM25 at exactly those bounds, on text made of English-like words
(a fixed vocabulary of 5,000 words drawn with a Zipf-like skew, seeded):

- chunk: ``chunk_documents`` (once, at publish);
- first search: building the term statistics of the version (once per process and version);
- search: a query of 3 words (2 common, 1 rare), warm.

Run: ``./dev python -m benchmarks.knowledge_bm25_legacy [--runs 200]``
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from agentvm.resources.search import Bm25, chunk_documents

DOCUMENTS = 500
TEXT_BYTES = 256 * 1024  # the old per-version bound


def _corpus(seed: int = 31) -> list[dict[str, str]]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(5000)]
    weights = [1 / (i + 1) for i in range(len(vocabulary))]
    per_doc = TEXT_BYTES // DOCUMENTS
    documents = []
    for d in range(DOCUMENTS):
        words: list[str] = []
        size = 0
        while size < per_doc:
            sentence = " ".join(rng.choices(vocabulary, weights, k=12)) + "."
            words.append(sentence)
            size += len(sentence) + 1
        documents.append({"id": f"doc{d}", "title": f"Document {d}", "text": " ".join(words)[:per_doc]})
    return documents


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    documents = _corpus()
    started = time.perf_counter()
    index = chunk_documents(documents)
    chunked = time.perf_counter() - started
    builds = []
    for _ in range(5):
        started = time.perf_counter()
        bm25 = Bm25(documents, index)
        builds.append(time.perf_counter() - started)
    rng = random.Random(7)
    searches = []
    for _ in range(args.runs):
        query = f"w{rng.randrange(10)} w{rng.randrange(10, 100)} w{rng.randrange(1000, 5000)}"
        started = time.perf_counter()
        bm25.search(query, 5)
        searches.append(time.perf_counter() - started)
    searches.sort()
    text_bytes = sum(len(d["text"]) for d in documents)
    print(f"documents {DOCUMENTS}, text {text_bytes} bytes, chunks {len(index['chunks'])}")
    print("| step | ms: median (p95) |")
    print("|---|---|")
    print(f"| chunk the version (once, at publish) | {_ms(chunked)} |")
    print(
        f"| first search: term statistics (once per process and version) | {_ms(statistics.median(builds))} |"
    )
    p95 = searches[int(0.95 * (len(searches) - 1))]
    print(f"| search, 3 words, warm | {_ms(statistics.median(searches))} ({_ms(p95)}) |")


if __name__ == "__main__":
    main()
