"""Knowledge search (``agentvm.resources.search``): chunks cover the documents, stay under the size
bound and cut at sentence ends; BM25 ranks rarer matching terms and shorter chunks higher."""

from __future__ import annotations

import re

from agentvm.resources.search import CHUNK_CHARS, Bm25, chunk_documents, tokens


def test_chunks_cover_every_paragraph_within_the_size_bound_and_cut_at_sentence_ends():
    sentence = "The quick brown fox jumps over the lazy dog. "
    text = "Intro paragraph.\n\n" + sentence * 80 + "\n\n\nShort tail."
    index = chunk_documents([{"text": text}])
    spans = [(s, e) for _, s, e in index["chunks"]]
    assert all(e - s <= CHUNK_CHARS for s, e in spans)
    assert all(text[e - 1] in ".!?" for s, e in spans)  # no chunk ends mid-sentence here
    covered = "".join(text[s:e] for s, e in spans)
    assert re.sub(r"\s", "", covered) == re.sub(r"\s", "", text)  # every word, once, in order
    assert text[spans[0][0] : spans[0][1]].startswith("Intro paragraph.")


def test_tokens_drop_stop_words_and_fold_plurals():
    assert tokens("What are the Invoices of this class?") == ["invoice", "class"]


def test_rarer_terms_and_shorter_chunks_rank_first():
    docs = [
        {"id": "a", "text": "apple banana"},
        {"id": "b", "text": "apple cherry"},
        {"id": "c", "text": "apple " + "filler " * 40 + "cherry"},
    ]
    bm = Bm25(docs, chunk_documents(docs))
    assert [h.documentId for h in bm.search("cherry")] == ["b", "c"]
    assert [h.documentId for h in bm.search("apple banana")][0] == "a"
    assert bm.search("durian") == []
