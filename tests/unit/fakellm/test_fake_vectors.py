"""The fake provider's embeddings: deterministic, and ranking by shared words, stems and synonyms."""

from __future__ import annotations

import hashlib
import math
import struct

import pytest

from agentvm.fakellm.vectors import count_tokens, embed_text, features


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_the_same_text_gives_the_same_vector_on_every_platform():
    # pinned: the hash is BLAKE2b and the values float32, so this digest never changes
    vector = embed_text("How do I get a refund for my order?", 64)
    assert vector[:3] == [-0.5347670316696167, 0.0, 0.5347670316696167]
    digest = hashlib.sha256(struct.pack("<64f", *vector)).hexdigest()
    assert digest == "e4089d1495ece57e986b0166dab5fc6def1e717b8a41c1c73e254f64bb01ee8b"


@pytest.mark.parametrize("dimensions", [1, 8, 256, 1536])
def test_vectors_have_the_length_asked_and_unit_norm(dimensions):
    vector = embed_text("colour of the sky", dimensions)
    assert len(vector) == dimensions
    assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-6)


def test_unnormalised_vectors_keep_their_weights():
    assert math.sqrt(sum(v * v for v in embed_text("many different words here", 1024, normalize=False))) > 1.5


def test_retrieval_ranks_shared_stems_and_synonyms_above_unrelated_text():
    query = embed_text("How do I get a refund for my order?", 256)
    documents = {
        "refunds": "Refunds are paid within 14 days of a return.",
        "synonyms": "Reimbursement of purchases",
        "orders": "Orders ship in 2 days.",
        "weather": "The weather in Lisbon is sunny.",
        "paraphrase": "money back guarantee",  # no shared stem nor listed synonym: not found
    }
    scores = {name: cosine(query, embed_text(text, 256)) for name, text in documents.items()}
    ranked = sorted(scores, key=scores.__getitem__, reverse=True)
    assert ranked[:3] == ["synonyms", "refunds", "orders"]
    assert scores["weather"] < 0.1 and scores["paraphrase"] < 0.1


def test_stems_and_synonyms_fold_to_one_feature():
    assert features("purchased orders").keys() & features("buy order").keys() >= {"w:purchas"}
    assert "w:refund" in features("refunding")
    assert features("the of and") == {"t:the of and": 1.0}  # only stop words: the text itself


def test_word_order_counts_through_pairs():
    base = embed_text("credit card payment", 256)
    assert cosine(base, embed_text("credit card payment", 256)) > cosine(
        base, embed_text("payment card credit", 256)
    )


def test_token_count():
    assert count_tokens("Hello, world!") == 4
    assert count_tokens("") == 1
