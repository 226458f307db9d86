"""Full-text search over a knowledge version that has no index: its documents cut into chunks,
ranked with BM25. Every host now indexes what it publishes in a ``KnowledgeIndex``
(``resources/indexing.py``, ``resources/hybrid.py``: FTS5 + sqlite-vec locally and on AWS, PostgreSQL
on the cluster host); this serves only versions published before those indexes (their records
carry these chunk offsets: publishing them again indexes them) and an AWS stack without
``AVM_KNOWLEDGE_BUCKET``.

**Index.** When a knowledge version is published, its documents are cut into chunks
(``chunk_documents``): paragraphs (split at blank lines) packed into chunks of at most
``CHUNK_CHARS`` characters, a paragraph longer than that cut at sentence or word boundaries. The
chunk boundaries are stored with the version (``ResourceVersion.index``), so a version's chunks
never change after publish; a new version gets a new index. The term statistics (``Bm25``) are
derived from the chunks when a process first searches a version, and kept (``cached_index``, by
the version's digest) for the next searches of that process.

**Ranking.** Okapi BM25 (k1 = 1.2, b = 0.75, the usual values) over lower-cased word tokens, with
English stop words dropped and a plural ``s`` folded (``invoices`` finds ``invoice``); a chunk's
document title counts as part of its text.

**Why it is still here, hand-written.** Removing it would leave those older versions unsearchable
until republished. They were bounded by the old limits (500 documents, 256 KB of text), and at that
bound it costs ~71 ms once per process and version and ~0.8 ms a search
(``benchmarks/knowledge_bm25_legacy.py``, BENCHMARKS.md): no library would do better for so little,
and the Lambda package stays free of a second search engine.
"""

from __future__ import annotations

import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

INDEX_FORMAT = "paragraphs/1"
CHUNK_CHARS = 1200
MAX_RESULTS = 10
K1 = 1.2
B = 0.75
_CACHE_SIZE = 32

_WORD = re.compile(r"\w+", re.UNICODE)
_PARAGRAPH = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
STOP_WORDS = frozenset(  # English words too common to rank by (also the local index's queries)
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "that",
        "the",
        "this",
        "to",
        "was",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokens(text: str) -> list[str]:
    out = []
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def chunk_documents(documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The index stored with a knowledge version: ``{"format", "chunks": [[doc, start, end], ...]}``
    (character offsets into ``documents[doc]["text"]``)."""
    chunks: list[list[int]] = []
    for d, document in enumerate(documents):
        chunks += [[d, start, end] for start, end in _chunk_spans(document["text"])]
    return {"format": INDEX_FORMAT, "chunks": chunks}


def _chunk_spans(text: str) -> list[tuple[int, int]]:
    """Paragraph spans packed into chunks of at most ``CHUNK_CHARS`` (blank runs between them kept)."""
    pieces: list[tuple[int, int]] = []
    start = 0
    for match in _PARAGRAPH.finditer(text):
        pieces += _split_long(text, start, match.start())
        start = match.end()
    pieces += _split_long(text, start, len(text))
    spans: list[tuple[int, int]] = []
    for s, e in pieces:
        if spans and e - spans[-1][0] <= CHUNK_CHARS:
            spans[-1] = (spans[-1][0], e)
        else:
            spans.append((s, e))
    return spans


def _split_long(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """One paragraph's span, or pieces of at most ``CHUNK_CHARS`` cut at sentence, else word, ends."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    out: list[tuple[int, int]] = []
    while end - start > CHUNK_CHARS:
        window = text[start : start + CHUNK_CHARS]
        cuts = [m.end() for m in _SENTENCE_END.finditer(window)] or [
            m.end() for m in re.finditer(r"\s+", window)
        ]
        cut = start + (cuts[-1] if cuts and cuts[-1] > CHUNK_CHARS // 4 else CHUNK_CHARS)
        stop = cut
        while stop > start and text[stop - 1].isspace():
            stop -= 1
        out.append((start, stop))
        start = cut
        while start < end and text[start].isspace():
            start += 1
    if end > start:
        out.append((start, end))
    return out


@dataclass(frozen=True)
class Hit:
    document: int  # index in the version's documents
    documentId: str | None
    title: str | None
    chunk: int  # index in the version's chunks
    score: float
    text: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "document": self.document,
            "documentId": self.documentId,
            "title": self.title,
            "chunk": self.chunk,
            "score": round(self.score, 4),
            "text": self.text,
        }


class Bm25:
    """The term statistics of one version's chunks, and ``search``."""

    def __init__(self, documents: list[dict[str, Any]], index: dict[str, Any]) -> None:
        if index.get("format") != INDEX_FORMAT:
            raise ValueError(f"unknown knowledge index format {index.get('format')!r}")
        self._documents = documents
        self._chunks = [tuple(c) for c in index["chunks"]]
        self._tf: list[Counter[str]] = []
        for d, start, end in self._chunks:
            doc = documents[d]
            self._tf.append(Counter(tokens(f"{doc.get('title') or ''}\n{doc['text'][start:end]}")))
        self._lengths = [sum(tf.values()) for tf in self._tf]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 0.0
        df: Counter[str] = Counter()
        for tf in self._tf:
            df.update(tf.keys())
        n = len(self._tf)
        self._idf = {term: math.log(1 + (n - f + 0.5) / (f + 0.5)) for term, f in df.items()}

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        terms = set(tokens(query))
        scored: list[tuple[float, int]] = []
        for i, tf in enumerate(self._tf):
            score = 0.0
            norm = K1 * (1 - B + B * self._lengths[i] / self._avg) if self._avg else K1
            for term in terms:
                f = tf.get(term)
                if f:
                    score += self._idf[term] * f * (K1 + 1) / (f + norm)
            if score > 0:
                scored.append((score, i))
        scored.sort(key=lambda s: (-s[0], s[1]))
        hits = []
        for score, i in scored[: max(1, min(limit, MAX_RESULTS))]:
            d, start, end = self._chunks[i]
            doc = self._documents[d]
            hits.append(Hit(d, doc.get("id"), doc.get("title"), i, score, doc["text"][start:end]))
        return hits


_cache: OrderedDict[str, Bm25] = OrderedDict()


def cached_index(key: str, documents: list[dict[str, Any]], index: dict[str, Any]) -> Bm25:
    """The BM25 statistics of a version (``key``: its owner, URI and digest), kept per process."""
    found = _cache.get(key)
    if found is None:
        found = _cache[key] = Bm25(documents, index)
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(key)
    return found


__all__ = ["STOP_WORDS", "Bm25", "Hit", "cached_index", "chunk_documents", "tokens"]
